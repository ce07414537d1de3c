//! What the C-facing tests share: where the sources and the built library are, a scratch
//! directory, and compiling and running C and C++ programs against libsgemm_bi.
#![allow(dead_code)] // each test binary uses part of it

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The repository root: from the build's source tree when it is there, else the current
/// directory (`.gpu/run` runs packed test binaries from the repository root of another
/// machine).
pub fn repo_root() -> PathBuf {
    let built = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    if built.join("capi/cbindgen.toml").is_file() {
        return built.canonicalize().expect("the repository root");
    }
    let cwd = std::env::current_dir().expect("current directory");
    assert!(
        cwd.join("capi/cbindgen.toml").is_file(),
        "run from the repository root (no capi/cbindgen.toml under {})",
        cwd.display()
    );
    cwd
}

/// The directory holding the libsgemm_bi.so to test: `$SGEMM_BI_LIB`'s (set by `.gpu/run`),
/// else the one cargo built for this test run, beside the test executable
/// (`target/<profile>/deps`; cargo builds the package's cdylib before its integration tests).
pub fn lib_dir() -> PathBuf {
    if let Some(lib) = std::env::var_os("SGEMM_BI_LIB") {
        let lib = PathBuf::from(lib);
        assert!(
            lib.is_file(),
            "SGEMM_BI_LIB={} is not a file",
            lib.display()
        );
        return lib.parent().expect("a directory").canonicalize().unwrap();
    }
    let exe = std::env::current_exe().expect("the test executable");
    let deps = exe.parent().expect("the test executable's directory");
    for dir in [deps, deps.parent().unwrap_or(deps)] {
        if dir.join("libsgemm_bi.so").is_file() {
            return dir.canonicalize().unwrap();
        }
    }
    panic!(
        "no libsgemm_bi.so beside {} or in its parent: build the sgemm-bi-capi package, or set \
         SGEMM_BI_LIB",
        exe.display()
    );
}

/// A fresh scratch directory for one test.
pub fn scratch(name: &str) -> PathBuf {
    let tmp = Path::new(env!("CARGO_TARGET_TMPDIR"));
    let base = if tmp.is_dir() {
        tmp.to_path_buf()
    } else {
        std::env::temp_dir().join(format!("sgemm_bi-tests-{}", std::process::id()))
    };
    let dir = base.join("capi").join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create the scratch directory");
    dir
}

#[derive(Clone, Copy, Debug)]
pub enum Lang {
    C,
    Cpp,
}

impl Lang {
    /// The compiler (`$CC` / `$CXX`, else `cc` / `c++`) and the strict flags every program
    /// of the project builds with.
    pub fn command(self) -> Command {
        let (var, default, std) = match self {
            Lang::C => ("CC", "cc", "-std=c11"),
            Lang::Cpp => ("CXX", "c++", "-std=c++17"),
        };
        let compiler = std::env::var(var).unwrap_or_else(|_| default.to_owned());
        let mut cmd = Command::new(compiler);
        cmd.args([std, "-Wall", "-Wextra", "-Werror", "-pedantic", "-O2"]);
        cmd
    }
}

/// Runs `cmd`, panicking with its output unless it succeeds; returns its stdout.
pub fn run(cmd: &mut Command, what: &str) -> String {
    let out: Output = cmd
        .output()
        .unwrap_or_else(|e| panic!("{what}: cannot run {:?}: {e}", cmd.get_program()));
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    println!("--- {what}: {cmd:?}\n{stdout}{stderr}");
    assert!(
        out.status.success(),
        "{what} failed ({}):\n{stdout}{stderr}",
        out.status
    );
    stdout
}

/// Compiles `sources` (relative to the repository root) into `exe`, linked against the
/// libsgemm_bi.so of [`lib_dir`] with an rpath to it.
pub fn build(lang: Lang, sources: &[&str], exe: &Path) {
    let root = repo_root();
    let lib = lib_dir();
    let mut cmd = lang.command();
    cmd.arg(format!("-I{}", root.join("include").display()))
        .arg(format!("-I{}", root.join("examples/c").display()))
        .args(sources.iter().map(|s| root.join(s)))
        .arg("-o")
        .arg(exe)
        .arg(format!("-L{}", lib.display()))
        .arg(format!("-Wl,-rpath,{}", lib.display()))
        .args(["-lsgemm_bi", "-lm", "-ldl"]);
    run(&mut cmd, &format!("compile {}", sources.join(" ")));
}

/// Whether GPU tests must fail rather than skip without a GPU.
pub fn gpu_required() -> bool {
    std::env::var("SGEMM_BI_REQUIRE_GPU").is_ok_and(|v| v == "1")
}
