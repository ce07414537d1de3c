//! Builds the device code in `kernels-gpu/` into one PTX module per GPU family, and embeds
//! each module's PTX and machine code (compressed) in the library.
//!
//! What a build embeds comes from `vendored/`: each module's PTX and its machine
//! code for every GPU generation the pinned ptxas knows (`Module::machine_code`), zstd-
//! compressed, with `manifest.txt` tying each cubin to the PTX it was assembled from. So
//! `cargo build` on stable Rust, with no CUDA toolkit, gives a library that loads machine
//! code on every supported GPU and compiles nothing on first use.
//!
//! With the pinned nightly and its rust-src installed, every build also compiles the kernels
//! fresh (rustc's nvptx64 backend, `-Zbuild-std=core`) and post-processes the PTX. When that
//! PTX equals the vendored one (the normal case: `tests/ptx_vendored.rs` fails otherwise),
//! the vendored images are embedded. When it differs (a kernel is being changed), the fresh
//! PTX is embedded, with machine code only if `SGEMM_BI_PTXAS` names a ptxas to assemble it
//! (otherwise the driver compiles the PTX on first use, and a warning says so).
//! `SGEMM_BI_UPDATE_PTX=1` (with `SGEMM_BI_PTXAS`) rewrites the vendored files.
//!
//! `vendored/` is a package of its own, `sgemm-bi-images` (the images would fill most of
//! crates.io's 10 MB per crate). The published crate depends on it and carries neither it nor
//! the kernels' sources (`kernels-gpu/`, `abi/`): built from a registry it always embeds the
//! images of `sgemm-bi-images`, nightly or not.

use std::env;
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use sgemm_bi_abi::catalogue::{KernelSpec, KERNELS};

const TOOLCHAIN: &str = "nightly-2026-05-20";
const TARGET: &str = "nvptx64-nvidia-cuda";

/// One PTX module: its file stem, the `-C target-cpu` rustc compiles it for, the `.target`
/// line it must carry (rustc writes `sm_90` even for sm_90a, which wgmma needs), the
/// `.version` line when rustc's (7.0) is too old for its instructions, the `--cfg` that
/// selects its kernels, the alignment of its dynamic shared memory, and the GPU
/// architectures its machine code is built for.
struct Module {
    name: &'static str,
    cpu: &'static str,
    target_line: &'static str,
    version_line: Option<&'static str>,
    cfg: Option<&'static str>,
    smem_align: u32,
    machine_code: &'static [&'static str],
}

const MODULES: &[Module] = &[
    // Ampere (sm_80: A100; sm_86: RTX 30xx, A10, A40; sm_89: Ada, L4, L40), Hopper's
    // portable kernels (sm_90), Blackwell (sm_100: B200; sm_120: RTX 50xx): the newest
    // families ptxas 12.9 assembles for. A cubin runs on its major version at its minor or
    // above (sm_87 takes sm_86's), so these cover every GPU from 8.0 up to 12.x; newer
    // majors compile the PTX.
    Module {
        name: "sm80",
        cpu: "sm_80",
        target_line: ".target sm_80",
        // mbarrier.test_wait.parity (the few-row kernel's ring) is PTX ISA 7.1.
        version_line: Some(".version 7.1"),
        cfg: None,
        smem_align: 16,
        machine_code: &["sm_80", "sm_86", "sm_89", "sm_90", "sm_100", "sm_120"],
    },
    // wgmma, setmaxnreg and the bulk tensor copy need PTX ISA 8.0 and sm_90a; 128-byte
    // swizzled tiles want 1024-byte aligned shared memory (the kernels also align by hand).
    // sm_90a code runs on compute capability 9.0 only.
    Module {
        name: "sm90a",
        cpu: "sm_90",
        target_line: ".target sm_90a",
        version_line: Some(".version 8.0"),
        cfg: Some("sgemm_bi_sm90a"),
        smem_align: 1024,
        machine_code: &["sm_90a"],
    },
];

/// The vendored images' directory in a clone, as messages name it.
const VENDORED: &str = "vendored";

/// zstd levels: the vendored files are written once, so as small as zstd makes them; images
/// compressed during a build (a kernel being changed) only need to be quick.
const VENDORED_LEVEL: i32 = 19;
const BUILD_LEVEL: i32 = 3;

/// Name of the dynamic shared-memory window every kernel addresses (`arch::shared`).
const DYN_SMEM: &str = "sgemm_bi_dyn_smem";

/// One compressed image as the build embeds it: the file, and its size uncompressed.
struct Embedded {
    path: PathBuf,
    len: usize,
}

/// A module's images: its PTX and its machine code, `(architecture, image)`.
struct ModuleImages {
    ptx: Embedded,
    cubins: Vec<(&'static str, Embedded)>,
}

fn main() {
    let root = PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap());
    let kernels = root.join("kernels-gpu");
    // The sgemm-bi-images package (its build script names its directory): `vendored/` in a
    // clone, the registry's unpacked copy otherwise.
    let vendored_dir = PathBuf::from(
        env::var_os("DEP_SGEMM_BI_IMAGES_DIR")
            .expect("sgemm-bi-images (a dependency) names its directory in its links metadata"),
    );
    let out = PathBuf::from(env::var("OUT_DIR").unwrap());
    for p in ["src", "Cargo.toml"] {
        println!("cargo:rerun-if-changed={}", kernels.join(p).display());
    }
    println!("cargo:rerun-if-changed={}", root.join("abi").display());
    println!("cargo:rerun-if-changed={}", vendored_dir.display());
    for var in [
        "SGEMM_BI_UPDATE_PTX",
        "SGEMM_BI_USE_VENDORED_PTX",
        "SGEMM_BI_PTXAS",
        "SGEMM_BI_COMMIT",
    ] {
        println!("cargo:rerun-if-env-changed={var}");
    }
    let update = env::var_os("SGEMM_BI_UPDATE_PTX").is_some_and(|v| v == "1");
    let use_vendored = env::var_os("SGEMM_BI_USE_VENDORED_PTX").is_some_and(|v| v == "1");
    let ptxas = env::var("SGEMM_BI_PTXAS").ok();
    let manifest = Manifest::read(&vendored_dir);

    // The kernels' sources are in a clone of the repository, not in the published crate
    // (which carries the vendored images only): without them there is nothing to compile.
    let sources = kernels.join("Cargo.toml").is_file() && root.join("abi/Cargo.toml").is_file();
    let fresh = !use_vendored && sources && toolchain_present();
    if !fresh && !use_vendored && sources {
        println!(
            "cargo:warning=sgemm-bi: {TOOLCHAIN} with rust-src not found; embedding the \
             vendored kernels from {VENDORED} (install it with: rustup toolchain install \
             {TOOLCHAIN} --profile minimal -c rust-src)"
        );
    }
    // Each module compiled once: the comparison, the update and the embedding share it.
    let fresh_ptx: Vec<Option<String>> = MODULES
        .iter()
        .map(|m| fresh.then(|| postprocess(&compile(&kernels, &out, m), m)))
        .collect();
    let manifest = if update {
        assert!(
            fresh,
            "SGEMM_BI_UPDATE_PTX=1 needs the pinned nightly {TOOLCHAIN}"
        );
        let ptxas = ptxas.as_deref().unwrap_or_else(|| {
            panic!("SGEMM_BI_UPDATE_PTX=1 needs SGEMM_BI_PTXAS (a ptxas to assemble the cubins)")
        });
        let ptx: Vec<&str> = fresh_ptx.iter().map(|p| p.as_deref().unwrap()).collect();
        write_vendored(&vendored_dir, &out, ptxas, &ptx);
        Manifest::read(&vendored_dir)
    } else {
        manifest
    };

    let mut images = Vec::new();
    let mut fresh_differs = false;
    for (m, fresh_ptx) in MODULES.iter().zip(fresh_ptx) {
        let vendored = manifest.as_ref().and_then(|mf| mf.module(&vendored_dir, m));
        let matches = match (&fresh_ptx, &vendored) {
            (None, _) => true,
            (Some(ptx), Some(v)) => decompress(&v.ptx.path) == ptx.as_bytes(),
            (Some(_), None) => false,
        };
        let module_images = match (matches, vendored, fresh_ptx) {
            (true, Some(v), _) => v,
            (true, None, _) => panic!(
                "{VENDORED}: no valid images for module {} (manifest.txt missing or not \
                 matching the files; regenerate with SGEMM_BI_UPDATE_PTX=1)",
                m.name
            ),
            (false, _, Some(ptx)) => {
                fresh_differs = true;
                build_images(&out, m, &ptx, ptxas.as_deref())
            }
            (false, _, None) => unreachable!("no fresh PTX means the vendored one is used"),
        };
        images.push(module_images);
    }
    let source = match (fresh, fresh_differs) {
        (false, _) => "vendored",
        (true, false) => "fresh (equal to the vendored PTX)",
        (true, true) => "fresh (differs from the vendored PTX)",
    };
    let ptxas_version = if fresh_differs {
        ptxas.as_deref().map(ptxas_version)
    } else {
        manifest.as_ref().map(|mf| mf.ptxas.clone())
    };
    write_images_rs(&out, &images);
    println!("cargo:rustc-env=SGEMM_BI_PTX_SOURCE={source}");
    // For tests/ptx_vendored.rs, which compares the vendored files with a fresh build.
    println!(
        "cargo:rustc-env=SGEMM_BI_IMAGES_DIR={}",
        vendored_dir.display()
    );
    println!(
        "cargo:rustc-env=SGEMM_BI_PTXAS_VERSION={}",
        ptxas_version.unwrap_or_default()
    );
    println!("cargo:rustc-env=SGEMM_BI_COMMIT={}", commit(&root));
}

/// The commit the build started from: `SGEMM_BI_COMMIT` (for packagers building outside a
/// clone), else git's HEAD where the crate is a clone, else empty.
fn commit(root: &Path) -> String {
    if let Ok(c) = env::var("SGEMM_BI_COMMIT") {
        return c;
    }
    let git = root.join(".git");
    if !git.exists() {
        return String::new();
    }
    // Rebuild when HEAD moves: HEAD itself (a checkout) and the branch it names (a commit).
    println!("cargo:rerun-if-changed={}", git.join("HEAD").display());
    if let Ok(head) = fs::read_to_string(git.join("HEAD")) {
        if let Some(r) = head.trim().strip_prefix("ref: ") {
            println!("cargo:rerun-if-changed={}", git.join(r).display());
        }
    }
    Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .current_dir(root)
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default()
}

/// `vendored/manifest.txt`: the ptxas that assembled the cubins, and for each
/// module the FNV-1a hash of its compressed PTX, so a build embeds cubins only next to the
/// PTX they were made from.
struct Manifest {
    ptxas: String,
    /// `(module, hash of <module>.ptx.zst, uncompressed length)`.
    ptx: Vec<(String, u64, usize)>,
    /// `(module, architecture, uncompressed length)`.
    cubins: Vec<(String, String, usize)>,
}

const MANIFEST_HEADER: &str = "\
# Written by build.rs (SGEMM_BI_UPDATE_PTX=1); do not edit. tests/ptx_vendored.rs checks that
# the PTX equals a fresh build and that each cubin is what this ptxas makes of it.
";

impl Manifest {
    fn read(dir: &Path) -> Option<Self> {
        let text = fs::read_to_string(dir.join("manifest.txt")).ok()?;
        let mut mf = Manifest {
            ptxas: String::new(),
            ptx: Vec::new(),
            cubins: Vec::new(),
        };
        for line in text
            .lines()
            .filter(|l| !l.starts_with('#') && !l.is_empty())
        {
            let fields: Vec<&str> = line.split_whitespace().collect();
            match fields.as_slice() {
                ["ptxas", version @ ..] => mf.ptxas = version.join(" "),
                ["ptx", module, hash, len] => mf.ptx.push((
                    module.to_string(),
                    u64::from_str_radix(hash, 16).ok()?,
                    len.parse().ok()?,
                )),
                ["cubin", module, arch, len] => {
                    mf.cubins
                        .push((module.to_string(), arch.to_string(), len.parse().ok()?))
                }
                _ => panic!("{VENDORED}/manifest.txt: cannot read the line {line:?}"),
            }
        }
        Some(mf)
    }

    /// The vendored images of `m`, if the manifest lists them for the PTX file that is there
    /// and every architecture of `m`.
    fn module(&self, dir: &Path, m: &Module) -> Option<ModuleImages> {
        let ptx_path = dir.join(format!("{}.ptx.zst", m.name));
        let (_, hash, len) = self.ptx.iter().find(|p| p.0 == m.name)?;
        let bytes = fs::read(&ptx_path).ok()?;
        if fnv1a(&bytes) != *hash {
            println!(
                "cargo:warning=sgemm-bi: {} is not the PTX the vendored cubins were made from \
                 (manifest.txt); regenerate with SGEMM_BI_UPDATE_PTX=1",
                ptx_path.display()
            );
            return None;
        }
        let mut cubins = Vec::new();
        for &arch in m.machine_code {
            let (_, _, len) = self.cubins.iter().find(|c| c.0 == m.name && c.1 == arch)?;
            let path = dir.join(format!("{}.{arch}.cubin.zst", m.name));
            if !path.is_file() {
                return None;
            }
            cubins.push((arch, Embedded { path, len: *len }));
        }
        Some(ModuleImages {
            ptx: Embedded {
                path: ptx_path,
                len: *len,
            },
            cubins,
        })
    }
}

/// FNV-1a, 64 bits: ties files together, not a defence against anyone.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ b as u64).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

fn compress(bytes: &[u8], level: i32) -> Vec<u8> {
    zstd::bulk::compress(bytes, level).expect("zstd compression")
}

fn decompress(path: &Path) -> Vec<u8> {
    let bytes = fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    zstd::decode_all(&bytes[..]).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// ptxas's version line, e.g. `Cuda compilation tools, release 12.9, V12.9.86`.
fn ptxas_version(ptxas: &str) -> String {
    let out = Command::new(ptxas)
        .arg("--version")
        .output()
        .unwrap_or_else(|e| panic!("SGEMM_BI_PTXAS={ptxas}: {e}"));
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .rfind(|l| l.contains("release"))
        .unwrap_or("unknown")
        .trim()
        .to_string()
}

/// Assembles `(module, ptx file, arch)` jobs with ptxas, all at once (ptxas is single-
/// threaded; the sm90a module takes about two and a half minutes), and returns the cubins in
/// the jobs' order. The flags are the ones `tests/ptx_vendored.rs` checks the vendored cubins
/// with.
fn assemble(ptxas: &str, jobs: Vec<(PathBuf, &'static str)>, out: &Path) -> Vec<Vec<u8>> {
    let handles: Vec<_> = jobs
        .into_iter()
        .map(|(ptx, arch)| {
            let ptxas = ptxas.to_string();
            let stem = ptx.file_stem().unwrap().to_string_lossy().into_owned();
            let dst = out.join(format!("{stem}.{arch}.cubin"));
            std::thread::spawn(move || {
                // `-v` as in the test: for some architectures (sm_100) ptxas records its
                // options in the cubin, so the flags must be the same bytes for bytes.
                let status = Command::new(&ptxas)
                    .arg("-v")
                    .arg(format!("-arch={arch}"))
                    .arg("-O3")
                    .arg(&ptx)
                    .arg("-o")
                    .arg(&dst)
                    .output();
                match status {
                    Ok(o) if o.status.success() => fs::read(&dst).unwrap(),
                    other => panic!(
                        "SGEMM_BI_PTXAS={ptxas}: assembling {} for {arch} failed: {other:?}",
                        ptx.display()
                    ),
                }
            })
        })
        .collect();
    handles.into_iter().map(|h| h.join().unwrap()).collect()
}

/// The images of a module whose fresh PTX differs from the vendored one: the PTX, and its
/// machine code when a ptxas is at hand.
fn build_images(out: &Path, m: &Module, ptx: &str, ptxas: Option<&str>) -> ModuleImages {
    let ptx_file = out.join(format!("{}.ptx", m.name));
    fs::write(&ptx_file, ptx).unwrap();
    let write = |name: String, bytes: &[u8]| {
        let path = out.join(name);
        fs::write(&path, compress(bytes, BUILD_LEVEL)).unwrap();
        Embedded {
            path,
            len: bytes.len(),
        }
    };
    let ptx_image = write(format!("{}.ptx.zst", m.name), ptx.as_bytes());
    let cubins = match ptxas {
        Some(ptxas) => {
            let jobs = m
                .machine_code
                .iter()
                .map(|&a| (ptx_file.clone(), a))
                .collect();
            let built = assemble(ptxas, jobs, out);
            m.machine_code
                .iter()
                .zip(built)
                .map(|(&arch, cubin)| (arch, write(format!("{}.{arch}.cubin.zst", m.name), &cubin)))
                .collect()
        }
        None => {
            println!(
                "cargo:warning=sgemm-bi: the {} kernels differ from {VENDORED} and \
                 SGEMM_BI_PTXAS is not set: this build embeds their PTX only, which the \
                 driver compiles on first use (set SGEMM_BI_PTXAS, or SGEMM_BI_UPDATE_PTX=1 \
                 with it to refresh the vendored files)",
                m.name
            );
            Vec::new()
        }
    };
    ModuleImages {
        ptx: ptx_image,
        cubins,
    }
}

/// Rewrites `vendored/`: every module's PTX and cubins, and the manifest.
fn write_vendored(dir: &Path, out: &Path, ptxas: &str, ptx: &[&str]) {
    fs::create_dir_all(dir).unwrap();
    let mut jobs = Vec::new();
    for (m, text) in MODULES.iter().zip(ptx) {
        let file = out.join(format!("{}.ptx", m.name));
        fs::write(&file, text).unwrap();
        jobs.extend(m.machine_code.iter().map(|&a| (file.clone(), a)));
    }
    let mut cubins = assemble(ptxas, jobs, out).into_iter();
    let mut manifest = String::from(MANIFEST_HEADER);
    writeln!(manifest, "ptxas {}", ptxas_version(ptxas)).unwrap();
    for (m, text) in MODULES.iter().zip(ptx) {
        let zst = compress(text.as_bytes(), VENDORED_LEVEL);
        fs::write(dir.join(format!("{}.ptx.zst", m.name)), &zst).unwrap();
        writeln!(
            manifest,
            "ptx {} {:016x} {}",
            m.name,
            fnv1a(&zst),
            text.len()
        )
        .unwrap();
        for &arch in m.machine_code {
            let cubin = cubins.next().unwrap();
            let path = dir.join(format!("{}.{arch}.cubin.zst", m.name));
            fs::write(path, compress(&cubin, VENDORED_LEVEL)).unwrap();
            writeln!(manifest, "cubin {} {arch} {}", m.name, cubin.len()).unwrap();
        }
    }
    fs::write(dir.join("manifest.txt"), manifest).unwrap();
}

/// `images.rs`: the `KernelImages` the library hands its engines, every file included with
/// `include_bytes!`.
fn write_images_rs(out: &Path, images: &[ModuleImages]) {
    let embedded = |e: &Embedded| {
        format!(
            "::sgemm_bi_host::Compressed {{ zstd: include_bytes!({:?}), len: {} }}",
            e.path.display().to_string(),
            e.len
        )
    };
    let mut rs = String::from("// Generated by build.rs.\n");
    rs.push_str("/// Every kernel module's images, as the engine loads them.\n");
    rs.push_str(
        "pub static KERNELS: ::sgemm_bi_host::KernelImages = ::sgemm_bi_host::KernelImages {\n",
    );
    for (m, img) in MODULES.iter().zip(images) {
        writeln!(rs, "    {}: ::sgemm_bi_host::ModuleImages {{", m.name).unwrap();
        writeln!(rs, "        name: {:?},", m.name).unwrap();
        let target = m.target_line.trim_start_matches(".target ");
        writeln!(rs, "        ptx_target: {target:?},").unwrap();
        writeln!(rs, "        ptx: {},", embedded(&img.ptx)).unwrap();
        rs.push_str("        cubins: &[\n");
        for (arch, e) in &img.cubins {
            let digits = arch.trim_start_matches("sm_").trim_end_matches('a');
            let (major, minor) = digits.split_at(digits.len() - 1);
            writeln!(
                rs,
                "            ::sgemm_bi_host::Cubin {{ arch: {arch:?}, capability: ({major}, {minor}), image: {} }},",
                embedded(e)
            )
            .unwrap();
        }
        rs.push_str("        ],\n    },\n");
    }
    rs.push_str("};\n");
    fs::write(out.join("images.rs"), rs).unwrap();
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
/// declaration of the dynamic shared-memory window, each entry's launch bounds and the
/// alignment of tensor-map parameters, both from the kernel catalogue
/// (`sgemm_bi_abi::catalogue`), which the kernels' entry points are defined from too. Panics
/// when the PTX and the catalogue's entries of this module differ (which the shared list
/// rules out; this is the check that it did).
fn postprocess(raw: &str, m: &Module) -> String {
    let mut out = String::with_capacity(raw.len() + 1024);
    let mut entry: Option<&KernelSpec> = None;
    let mut pending_bounds = false;
    let mut seen = Vec::new();
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
        if let Some(rest) = trimmed.strip_prefix(".visible .entry ") {
            let name = rest.split('(').next().unwrap();
            let spec = KERNELS
                .iter()
                .find(|k| k.name == name && k.kind.module.name() == m.name)
                .unwrap_or_else(|| {
                    panic!(
                        "{}: entry point {name} is not in the kernel catalogue",
                        m.name
                    )
                });
            seen.push(spec.name);
            entry = Some(spec);
            pending_bounds = true;
        }
        // The driver needs tensor maps 64-byte aligned; rustc declares at most `.align 16`.
        if let (Some(spec), Some(rest)) = (entry, trimmed.strip_prefix(".param .align 16 .b8 ")) {
            if spec.param().holds_tensor_maps()
                && rest.starts_with(&format!("{}_param_", spec.name))
            {
                out.push_str(&format!("\t.param .align 64 .b8 {rest}\n"));
                continue;
            }
        }
        if trimmed == "{" && pending_bounds {
            pending_bounds = false;
            let bounds = entry.expect("set with pending_bounds").launch_bounds();
            out.push_str(&format!(
                ".maxntid {}, 1, 1\n.minnctapersm {}\n",
                bounds.max_threads, bounds.min_blocks_per_sm
            ));
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
    let missing: Vec<&str> = KERNELS
        .iter()
        .filter(|k| k.kind.module.name() == m.name && !seen.contains(&k.name))
        .map(|k| k.name)
        .collect();
    assert!(
        missing.is_empty(),
        "{}: catalogue entries missing from the PTX: {missing:?}",
        m.name
    );
    out
}
