//! Reader of the recorded H200 tensor-core outputs in this folder (format in README.md).
//! Included with `#[path]` by the host crate's model tests and by `tests/cpu_tc_model.rs`,
//! so both read the files the same way.

use std::path::{Path, PathBuf};

/// One golden file: A [64][64], Bt [256][64] (bf16 or f16 bits), and C [64][256] from
/// mma.sync and from wgmma (f32 bits).
pub struct GoldenFile {
    pub name: String,
    /// bf16 inputs when true, f16 otherwise.
    pub bf16: bool,
    pub a: Vec<u16>,
    pub bt: Vec<u16>,
    pub c: [Vec<u32>; 2],
}

/// All 12 files, from `dir` (this folder as seen from the build tree), or from
/// `tests/data/tc-h200` under the working directory when a packed test binary runs on a host
/// without the build tree.
pub fn read_all(dir: &Path) -> Vec<GoldenFile> {
    let dir = if dir.exists() {
        dir.to_path_buf()
    } else {
        PathBuf::from("tests/data/tc-h200")
    };
    let mut files = Vec::new();
    for (fmt, bf16) in [("bf16", true), ("f16", false)] {
        for dist in 0..6 {
            let name = format!("tc_{fmt}_dist{dist}.bin");
            let bytes = std::fs::read(dir.join(&name)).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(bytes.len(), 172_032, "{name}: 8 + 32 + 64 + 64 KiB");
            let u16s = |r: std::ops::Range<usize>| -> Vec<u16> {
                bytes[r]
                    .chunks_exact(2)
                    .map(|x| u16::from_le_bytes([x[0], x[1]]))
                    .collect()
            };
            let u32s = |r: std::ops::Range<usize>| -> Vec<u32> {
                bytes[r]
                    .chunks_exact(4)
                    .map(|x| u32::from_le_bytes(x.try_into().unwrap()))
                    .collect()
            };
            files.push(GoldenFile {
                name,
                bf16,
                a: u16s(0..8192),
                bt: u16s(8192..40960),
                c: [u32s(40960..106496), u32s(106496..172032)],
            });
        }
    }
    assert_eq!(files.len(), 12);
    files
}
