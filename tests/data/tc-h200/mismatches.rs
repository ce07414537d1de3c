//! Reader of the `mismatches-*.tsv` files in this folder: outputs where the H200 differed
//! from an earlier CPU model of the tensor-core tier, with the GPU's bits, which the current
//! model must reproduce (the format is in each file's header). Included with `#[path]` by
//! the host crate's model tests and by `tests/cpu_tc_model.rs`, so both read them the same
//! way.

use std::path::{Path, PathBuf};

/// The output mode of a recorded call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    OverwriteF32,
    OverwriteBf16,
    OverwriteF16,
    AccumulateF32,
}

/// The bias element of a recorded output.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bias {
    None,
    /// An f32 bias (its bits).
    F32(u32),
    /// A bias in the input dtype (its 16 bits).
    Input(u16),
}

/// One recorded output.
#[derive(Clone, Debug)]
pub struct Mismatch {
    /// `file:line`, for messages.
    pub at: String,
    /// What the GPU test drew the inputs from (distribution or crafted case).
    pub kind: String,
    /// bf16 inputs when true, f16 otherwise.
    pub bf16: bool,
    pub mode: Mode,
    pub k: usize,
    /// The GPU's output bits (f32, or 16-bit in the low half for a 16-bit output).
    pub gpu: u32,
    /// What the earlier model gave.
    pub first_model: u32,
    pub bias: Bias,
    /// C's value before the call (accumulate mode), f32 bits.
    pub old: Option<u32>,
    /// The A row and the B column, K 16-bit values each.
    pub a: Vec<u16>,
    pub b: Vec<u16>,
}

/// Every record of every `mismatches-*.tsv` file in `dir` (this folder as seen from the
/// build tree), or in `tests/data/tc-h200` under the working directory when a packed test
/// binary runs on a host without the build tree; files in name order.
pub fn read_all(dir: &Path) -> Vec<Mismatch> {
    let dir = if dir.exists() {
        dir.to_path_buf()
    } else {
        PathBuf::from("tests/data/tc-h200")
    };
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| {
            e.expect("a directory entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .filter(|n| n.starts_with("mismatches-") && n.ends_with(".tsv"))
        .collect();
    names.sort();
    assert!(
        !names.is_empty(),
        "no mismatches-*.tsv in {}",
        dir.display()
    );
    let mut out = Vec::new();
    for name in names {
        let text =
            std::fs::read_to_string(dir.join(&name)).unwrap_or_else(|e| panic!("{name}: {e}"));
        for (i, line) in text.lines().enumerate() {
            if line.starts_with('#') || line.is_empty() {
                continue;
            }
            out.push(parse(&format!("{name}:{}", i + 1), line));
        }
    }
    out
}

fn parse(at: &str, line: &str) -> Mismatch {
    let f: Vec<&str> = line.split('\t').collect();
    assert_eq!(f.len(), 10, "{at}: 10 tab-separated fields");
    let hex32 = |s: &str| u32::from_str_radix(s, 16).unwrap_or_else(|e| panic!("{at}: {s}: {e}"));
    let hex16s = |s: &str| -> Vec<u16> {
        s.split(' ')
            .map(|x| u16::from_str_radix(x, 16).unwrap_or_else(|e| panic!("{at}: {x}: {e}")))
            .collect()
    };
    let bf16 = match f[1] {
        "BF16" => true,
        "F16" => false,
        d => panic!("{at}: input dtype {d}"),
    };
    let mode = match f[2] {
        "Overwrite(F32)" => Mode::OverwriteF32,
        "Overwrite(BF16)" => Mode::OverwriteBf16,
        "Overwrite(F16)" => Mode::OverwriteF16,
        "AccumulateF32" => Mode::AccumulateF32,
        m => panic!("{at}: output mode {m}"),
    };
    let k: usize = f[3]
        .parse()
        .unwrap_or_else(|e| panic!("{at}: K {}: {e}", f[3]));
    let bias = match f[6] {
        "-" => Bias::None,
        s if s.len() == 8 => Bias::F32(hex32(s)),
        s if s.len() == 4 => Bias::Input(hex32(s) as u16),
        s => panic!("{at}: bias {s}"),
    };
    let old = (f[7] != "-").then(|| hex32(f[7]));
    assert_eq!(
        old.is_some(),
        mode == Mode::AccumulateF32,
        "{at}: C's old value"
    );
    let (a, b) = (hex16s(f[8]), hex16s(f[9]));
    assert!(a.len() == k && b.len() == k, "{at}: K values of A and of B");
    Mismatch {
        at: at.to_string(),
        kind: f[0].to_string(),
        bf16,
        mode,
        k,
        gpu: hex32(f[4]),
        first_model: hex32(f[5]),
        bias,
        old,
        a,
        b,
    }
}
