//! Builds the device code in `kernels-gpu/` into one PTX module per GPU family.
//!
//! With the pinned nightly and its rust-src installed, every build compiles the kernels
//! fresh (rustc's nvptx64 backend, `-Zbuild-std=core`), post-processes the PTX and embeds
//! it. Without them, the PTX vendored in `kernels-gpu/ptx/` is embedded instead (with a
//! warning), so the crate builds on stable for its users; `tests/ptx_vendored.rs` fails when
//! the vendored files differ from a fresh build. `SGEMM_BI_UPDATE_PTX=1` rewrites the
//! vendored files from the fresh build. Release builds with `SGEMM_BI_PTXAS` set also
//! assemble the modules into machine code for compute capability 9.0 (see `cubins`).

use std::env;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

const TOOLCHAIN: &str = "nightly-2026-05-20";
const TARGET: &str = "nvptx64-nvidia-cuda";

/// One PTX module: its file stem, the `-C target-cpu` rustc compiles it for, the `.target`
/// line it must carry (rustc writes `sm_90` even for sm_90a, which wgmma needs), the
/// `.version` line when rustc's (7.0) is too old for its instructions, the `--cfg` that
/// selects its kernels, and the alignment of its dynamic shared memory.
struct Module {
    name: &'static str,
    cpu: &'static str,
    target_line: &'static str,
    version_line: Option<&'static str>,
    cfg: Option<&'static str>,
    smem_align: u32,
}

const MODULES: &[Module] = &[
    Module {
        name: "sm80",
        cpu: "sm_80",
        target_line: ".target sm_80",
        version_line: None,
        cfg: None,
        smem_align: 16,
    },
    // wgmma, setmaxnreg and the bulk tensor copy need PTX ISA 8.0 and sm_90a; 128-byte
    // swizzled tiles want 1024-byte aligned shared memory (the kernels also align by hand).
    Module {
        name: "sm90a",
        cpu: "sm_90",
        target_line: ".target sm_90a",
        version_line: Some(".version 8.0"),
        cfg: Some("sgemm_bi_sm90a"),
        smem_align: 1024,
    },
];

/// Entry-name prefix of the kernels whose one parameter holds tensor maps: the driver needs
/// them 64-byte aligned, and rustc declares at most `.align 16`.
const TENSOR_MAP_PARAMS: &str = "sgemm_bi_hopper_";

/// Launch bounds the PTX cannot get from Rust source: entry-name prefix, threads per block,
/// blocks per SM. The scalar kernels run 256 threads (`scalar::config::THREADS`) and need two
/// blocks per SM to hide latency, which caps them at 128 registers (ptxas fits them unspilled).
/// The tensor-core kernels run 256 threads too (`tensor::config::THREADS`), two blocks per SM
/// (2 × 80 KiB of shared memory fits sm_80's 164 KiB), so also at most 128 registers.
/// The Hopper kernels run 384 threads (`hopper::config::THREADS`), one block per SM (they
/// use most of its shared memory); the cap at entry lets `setmaxnreg` move registers from
/// the producer warpgroup to the consumers.
const LAUNCH_BOUNDS: &[(&str, u32, u32)] = &[
    ("sgemm_bi_scalar_", 256, 2),
    ("sgemm_bi_tc_", 256, 2),
    ("sgemm_bi_hopper_", 384, 1),
];

/// Name of the dynamic shared-memory window every kernel addresses (`arch::shared`).
const DYN_SMEM: &str = "sgemm_bi_dyn_smem";

fn main() {
    let root = PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap());
    let kernels = root.join("kernels-gpu");
    let vendored = kernels.join("ptx");
    let out = PathBuf::from(env::var("OUT_DIR").unwrap());
    for p in ["src", "Cargo.toml", "ptx"] {
        println!("cargo:rerun-if-changed={}", kernels.join(p).display());
    }
    println!("cargo:rerun-if-env-changed=SGEMM_BI_UPDATE_PTX");
    println!("cargo:rerun-if-env-changed=SGEMM_BI_USE_VENDORED_PTX");

    let use_vendored = env::var_os("SGEMM_BI_USE_VENDORED_PTX").is_some_and(|v| v == "1");
    let source = if !use_vendored && toolchain_present() {
        for m in MODULES {
            let ptx = postprocess(&compile(&kernels, &out, m), m);
            fs::write(out.join(format!("{}.ptx", m.name)), &ptx).unwrap();
            if env::var_os("SGEMM_BI_UPDATE_PTX").is_some_and(|v| v == "1") {
                fs::write(vendored.join(format!("{}.ptx", m.name)), &ptx).unwrap();
            }
        }
        "fresh"
    } else {
        if !use_vendored {
            println!(
                "cargo:warning=sgemm-bi: {TOOLCHAIN} with rust-src not found; embedding the \
                 vendored PTX from kernels-gpu/ptx (install it with: rustup toolchain install \
                 {TOOLCHAIN} --profile minimal -c rust-src)"
            );
        }
        for m in MODULES {
            let name = format!("{}.ptx", m.name);
            fs::copy(vendored.join(&name), out.join(&name))
                .unwrap_or_else(|e| panic!("vendored PTX {name} is missing: {e}"));
        }
        "vendored"
    };
    println!("cargo:rustc-env=SGEMM_BI_PTX_SOURCE={source}");
    cubins(&out);
}

/// Machine code for compute capability 9.0 (H100, H200), built from the PTX with ptxas so
/// that the driver compiles nothing when an engine first loads the kernels (the sm_90a PTX
/// is ~16 MB, over a minute of compiling on first use; docs/performance.md, "First use").
/// Built in release builds when `SGEMM_BI_PTXAS` names a ptxas; otherwise the files are
/// empty and the engine loads the PTX everywhere. Cubin, module, target.
const CUBINS: [(&str, &str, &str); 2] = [
    ("sm80.sm_90.cubin", "sm80", "sm_90"),
    ("sm90a.cubin", "sm90a", "sm_90a"),
];

fn cubins(out: &Path) {
    println!("cargo:rerun-if-env-changed=SGEMM_BI_PTXAS");
    let ptxas = env::var("SGEMM_BI_PTXAS")
        .ok()
        .filter(|_| env::var("PROFILE").is_ok_and(|p| p == "release"));
    let Some(ptxas) = ptxas else {
        for (cubin, _, _) in CUBINS {
            fs::write(out.join(cubin), []).unwrap();
        }
        return;
    };
    // Both at once: ptxas is single-threaded and the sm90a module takes about a minute.
    let jobs: Vec<_> = CUBINS
        .iter()
        .map(|&(cubin, module, arch)| {
            let (ptxas, ptx, dst) = (
                ptxas.clone(),
                out.join(format!("{module}.ptx")),
                out.join(cubin),
            );
            std::thread::spawn(move || {
                let status = Command::new(&ptxas)
                    .arg(format!("-arch={arch}"))
                    .arg("-O3")
                    .arg(&ptx)
                    .arg("-o")
                    .arg(&dst)
                    .status();
                match status {
                    Ok(s) if s.success() => {}
                    other => panic!(
                        "SGEMM_BI_PTXAS={ptxas}: assembling {} for {arch} failed: {other:?}",
                        ptx.display()
                    ),
                }
            })
        })
        .collect();
    for job in jobs {
        job.join().unwrap();
    }
}

/// A command with the outer build's cargo and rustc settings removed: with them the child
/// would use the outer (stable) toolchain and its target settings.
fn clean_command(program: &str) -> Command {
    let mut cmd = Command::new(program);
    for (key, _) in env::vars_os() {
        let key = key.to_string_lossy().into_owned();
        let keep = key == "CARGO_HOME" || key == "RUSTUP_HOME";
        if !keep && (key.starts_with("CARGO") || key.starts_with("RUST")) {
            cmd.env_remove(&key);
        }
    }
    cmd
}

/// Whether the pinned nightly and its rust-src are installed.
fn toolchain_present() -> bool {
    let Ok(out) = clean_command("rustc")
        .args([&format!("+{TOOLCHAIN}"), "--print", "sysroot"])
        .output()
    else {
        return false;
    };
    if !out.status.success() {
        return false;
    }
    let sysroot = String::from_utf8_lossy(&out.stdout).trim().to_string();
    Path::new(&sysroot)
        .join("lib/rustlib/src/rust/library/core/src/lib.rs")
        .exists()
}

/// Compiles the kernel crate for one module and returns the raw PTX.
fn compile(kernels: &Path, out: &Path, m: &Module) -> String {
    let ptx = out.join(format!("{}.raw.ptx", m.name));
    let status = clean_command("cargo")
        .current_dir(kernels)
        .args([
            &format!("+{TOOLCHAIN}"),
            "rustc",
            "--release",
            "--quiet",
            "-Zbuild-std=core",
        ])
        .args(["--target", TARGET, "--target-dir"])
        .arg(out.join(format!("kernels-target-{}", m.name)))
        .args(["--", "-C", &format!("target-cpu={}", m.cpu)])
        .args(m.cfg.iter().flat_map(|c| ["--cfg", c]))
        .arg(format!("--emit=asm={}", ptx.display()))
        .status()
        .expect("running the nested cargo for kernels-gpu");
    assert!(
        status.success(),
        "building kernels-gpu for {} failed (see the errors above)",
        m.cpu
    );
    fs::read_to_string(&ptx).unwrap()
}

/// What rustc cannot express: the module's real `.target` and `.version`, the module-scope
/// declaration of the dynamic shared-memory window, launch bounds, and the alignment of
/// tensor-map parameters.
fn postprocess(raw: &str, m: &Module) -> String {
    let mut out = String::with_capacity(raw.len() + 1024);
    let mut pending_bounds: Option<(u32, u32)> = None;
    for line in raw.lines() {
        let trimmed = line.trim_start();
        if trimmed.starts_with(".target ") {
            out.push_str(m.target_line);
            out.push('\n');
            continue;
        }
        if let (true, Some(version)) = (trimmed.starts_with(".version "), m.version_line) {
            out.push_str(version);
            out.push('\n');
            continue;
        }
        let prefix = format!(".param .align 16 .b8 {TENSOR_MAP_PARAMS}");
        if let Some(rest) = trimmed.strip_prefix(&prefix) {
            out.push_str(&format!(
                "\t.param .align 64 .b8 {TENSOR_MAP_PARAMS}{rest}\n"
            ));
            continue;
        }
        if let Some(name) = trimmed.strip_prefix(".visible .entry ") {
            pending_bounds = LAUNCH_BOUNDS
                .iter()
                .find(|(prefix, _, _)| name.starts_with(prefix))
                .map(|&(_, threads, blocks)| (threads, blocks));
        }
        if trimmed == "{" {
            if let Some((threads, blocks)) = pending_bounds.take() {
                out.push_str(&format!(
                    ".maxntid {threads}, 1, 1\n.minnctapersm {blocks}\n"
                ));
            }
        }
        out.push_str(line);
        out.push('\n');
        if trimmed.starts_with(".address_size") {
            out.push_str(&format!(
                "\n.extern .shared .align {} .b8 {DYN_SMEM}[];\n",
                m.smem_align
            ));
        }
    }
    out
}
