//! The C ABI as C and C++ programs see it: the header compiles on its own in C and C++, the
//! C example (examples/c), the C ABI error test (capi/tests/c/abi_errors.c), the engine
//! lifetime leak check (capi/tests/c/leak_cycles.c) and the C++ example (examples/cpp)
//! build with `-Wall -Wextra -Werror -pedantic` against the
//! libsgemm_bi.so that cargo built and pass on the CPU backend; the static library links;
//! `scripts/install` installs a tree that `pkg-config` finds and programs build against.
//! The GPU runs are `#[ignore]`d here and run on a GPU host (`bash .gpu/run`).

mod support;

use std::path::Path;
use std::process::Command;

use support::{build, gpu_required, lib_dir, repo_root, run, scratch, Lang};

/// Runs the example without requiring a GPU (its GPU part runs only where one is present).
fn run_cpu(exe: &Path, what: &str) -> String {
    run(Command::new(exe).env_remove("SGEMM_BI_REQUIRE_GPU"), what)
}

#[test]
fn header_compiles_alone_in_c_and_cpp() {
    let dir = scratch("header");
    let root = repo_root();
    let c = dir.join("only_header.c");
    std::fs::write(
        &c,
        "#include \"sgemm_bi.h\"\nint main(void) { return 0; }\n",
    )
    .unwrap();
    let cpp = dir.join("only_header.cpp");
    std::fs::write(
        &cpp,
        "#include \"sgemm_bi.hpp\"\nint main() { return sgemm_bi::DType::F32 == sgemm_bi::DType::BF16; }\n",
    )
    .unwrap();
    let include = format!("-I{}", root.join("include").display());
    for std in ["-std=c99", "-std=c11", "-std=c2x"] {
        let mut cmd = Lang::C.command();
        cmd.args([std, &include, "-fsyntax-only"]).arg(&c);
        run(&mut cmd, &format!("sgemm_bi.h as C ({std})"));
    }
    for std in ["-std=c++11", "-std=c++17"] {
        let mut cmd = Lang::Cpp.command();
        cmd.args([std, &include, "-fsyntax-only", "-x", "c++"])
            .arg(&c);
        run(&mut cmd, &format!("sgemm_bi.h as C++ ({std})"));
    }
    let mut cmd = Lang::Cpp.command();
    cmd.args([&include, "-fsyntax-only"]).arg(&cpp);
    run(&mut cmd, "sgemm_bi.hpp (C++17)");
}

#[test]
fn c_example_forward_backward_on_the_cpu() {
    let exe = scratch("c_example").join("forward_backward");
    build(Lang::C, &["examples/c/forward_backward.c"], &exe);
    let out = run_cpu(&exe, "examples/c/forward_backward");
    assert!(out.contains("CPU: ok"), "{out}");
}

#[test]
fn c_abi_errors() {
    let exe = scratch("abi_errors").join("abi_errors");
    build(Lang::C, &["capi/tests/c/abi_errors.c"], &exe);
    let out = run(&mut Command::new(&exe), "capi/tests/c/abi_errors");
    assert!(out.contains(" passed, 0 failed"), "{out}");
}

/// The tensor-core tier on the CPU backend, through the C ABI, gives every output recorded
/// on the H200 (contract C4: the model is the tier's definition on sm_90).
#[test]
fn c_tensor_cores_on_the_cpu_match_the_h200_recordings() {
    let exe = scratch("tc_golden").join("tc_golden");
    build(Lang::C, &["capi/tests/c/tc_golden.c"], &exe);
    let data = repo_root().join("tests/data/tc-h200");
    let out = run(Command::new(&exe).arg(&data), "capi/tests/c/tc_golden");
    assert!(
        out.contains("tc_golden: 393216 of 393216 outputs match"),
        "{out}"
    );
}

/// 10⁴ engine lifetimes through the C ABI leave resident memory where it was.
#[test]
fn c_engine_lifetimes_leak_nothing() {
    let exe = scratch("leak_cycles").join("leak_cycles");
    build(Lang::C, &["capi/tests/c/leak_cycles.c"], &exe);
    let out = run(&mut Command::new(&exe), "capi/tests/c/leak_cycles");
    assert!(out.contains("leak_cycles: 10000 cycles"), "{out}");
}

#[test]
fn cpp_example_forward_backward_on_the_cpu() {
    let exe = scratch("cpp_example").join("forward_backward_cpp");
    build(Lang::Cpp, &["examples/cpp/forward_backward.cpp"], &exe);
    let out = run(&mut Command::new(&exe), "examples/cpp/forward_backward");
    assert!(out.contains("C++ example: ok"), "{out}");
}

/// `scripts/install` into a scratch prefix (from the libraries cargo built), then the C and
/// C++ examples built with nothing but `pkg-config --cflags --libs sgemm_bi`, and once
/// against the static library with `pkg-config --static`'s system libraries.
#[test]
fn install_and_pkg_config() {
    let from = lib_dir();
    if !from.join("libsgemm_bi.a").is_file() {
        // Only test binaries packed for another machine get here (with the .so alone).
        eprintln!("skipped: no libsgemm_bi.a in {}", from.display());
        return;
    }
    let root = repo_root();
    let dir = scratch("install");
    let prefix = dir.join("prefix");
    let mut install = Command::new("bash");
    install
        .arg(root.join("scripts/install"))
        .arg(&prefix)
        .env("SGEMM_BI_LIB_DIR", &from)
        .env_remove("LIBDIR")
        .env_remove("DESTDIR");
    run(&mut install, "scripts/install");
    for f in [
        "lib/libsgemm_bi.so",
        "lib/libsgemm_bi.a",
        "lib/pkgconfig/sgemm_bi.pc",
        "include/sgemm_bi.h",
        "include/sgemm_bi.hpp",
    ] {
        assert!(prefix.join(f).is_file(), "{f} was not installed");
    }

    let pkg_config = |args: &[&str]| {
        let mut cmd = Command::new("pkg-config");
        cmd.args(args)
            .arg("sgemm_bi")
            .env("PKG_CONFIG_PATH", prefix.join("lib/pkgconfig"));
        if cmd.output().is_err() {
            panic!("pkg-config is needed for this test (apt-get install pkgconf)");
        }
        run(&mut cmd, &format!("pkg-config {}", args.join(" ")))
            .split_whitespace()
            .map(str::to_owned)
            .collect::<Vec<_>>()
    };
    assert_eq!(pkg_config(&["--modversion"]), [env!("CARGO_PKG_VERSION")]);
    let flags = pkg_config(&["--cflags", "--libs"]);

    let c_exe = dir.join("forward_backward");
    let mut cc = Lang::C.command();
    cc.arg(root.join("examples/c/forward_backward.c"))
        .arg(format!("-I{}", root.join("examples/c").display()))
        .args(&flags)
        .args(["-lm", "-ldl", "-o"])
        .arg(&c_exe);
    run(
        &mut cc,
        "cc examples/c $(pkg-config --cflags --libs sgemm_bi)",
    );
    // No LD_LIBRARY_PATH: the installed library is found through the .pc file's rpath.
    let out = run_cpu(&c_exe, "the C example built through pkg-config");
    assert!(out.contains("CPU: ok"), "{out}");

    let cpp_exe = dir.join("forward_backward_cpp");
    let mut cxx = Lang::Cpp.command();
    cxx.arg(root.join("examples/cpp/forward_backward.cpp"))
        .args(&flags)
        .arg("-o")
        .arg(&cpp_exe);
    run(
        &mut cxx,
        "c++ examples/cpp $(pkg-config --cflags --libs sgemm_bi)",
    );
    let out = run(
        &mut Command::new(&cpp_exe),
        "the C++ example built through pkg-config",
    );
    assert!(out.contains("C++ example: ok"), "{out}");

    // Static: the archive itself, then the system libraries it needs (Libs.private).
    let system_libs: Vec<String> = pkg_config(&["--static", "--libs-only-l"])
        .into_iter()
        .filter(|l| l != "-lsgemm_bi")
        .collect();
    let static_exe = dir.join("forward_backward_static");
    let mut cc = Lang::C.command();
    cc.arg(root.join("examples/c/forward_backward.c"))
        .args(pkg_config(&["--cflags"]))
        .arg(format!("-I{}", root.join("examples/c").display()))
        .arg(prefix.join("lib/libsgemm_bi.a"))
        .args(&system_libs)
        .arg("-o")
        .arg(&static_exe);
    run(
        &mut cc,
        "cc examples/c libsgemm_bi.a $(pkg-config --static --libs-only-l)",
    );
    std::fs::remove_file(prefix.join("lib/libsgemm_bi.so")).unwrap();
    let out = run_cpu(&static_exe, "the C example linked statically");
    assert!(out.contains("CPU: ok"), "{out}");
}

/// The C example's GPU part: device memory and a stream of its own through the driver API.
#[test]
#[ignore = "needs a CUDA GPU"]
fn c_example_forward_backward_on_the_gpu() {
    let exe = scratch("c_example_gpu").join("forward_backward");
    build(Lang::C, &["examples/c/forward_backward.c"], &exe);
    // The example itself fails without a GPU when SGEMM_BI_REQUIRE_GPU=1.
    let out = run(&mut Command::new(&exe), "examples/c/forward_backward");
    if out.contains("GPU: skipped") && !gpu_required() {
        eprintln!("skipped: no CUDA device");
        return;
    }
    assert!(out.contains("GPU (own stream): ok"), "{out}");
}

/// GPU and CPU give the same bits through the ABI on the scalar tier, plus the GPU-only
/// error paths.
#[test]
#[ignore = "needs a CUDA GPU"]
fn c_gpu_and_cpu_give_the_same_bits() {
    let exe = scratch("gpu_cpu_same_bits").join("gpu_cpu_same_bits");
    build(Lang::C, &["capi/tests/c/gpu_cpu_same_bits.c"], &exe);
    let out = run(&mut Command::new(&exe), "capi/tests/c/gpu_cpu_same_bits");
    if out.contains("skipped") && !gpu_required() {
        eprintln!("skipped: no CUDA device");
        return;
    }
    assert!(out.contains(" passed, 0 failed"), "{out}");
}
