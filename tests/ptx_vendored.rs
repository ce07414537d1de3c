//! The vendored PTX in `kernels-gpu/ptx/` is what the kernel sources compile to, and every
//! module assembles with ptxas for the GPUs it targets.

use std::process::Command;

fn required(var: &str) -> bool {
    std::env::var(var).is_ok_and(|v| v == "1")
}

#[test]
fn vendored_ptx_equals_a_fresh_build() {
    if sgemm_bi::ptx::SOURCE != "fresh" {
        assert!(
            !required("SGEMM_BI_REQUIRE_FRESH_PTX"),
            "SGEMM_BI_REQUIRE_FRESH_PTX=1 but this build used the vendored PTX (is the pinned \
             nightly with rust-src installed?)"
        );
        eprintln!(
            "skipped: the pinned nightly is not installed, the build embedded the vendored PTX"
        );
        return;
    }
    // Embedded at compile time, so the test binary also runs where the sources are not.
    let vendored = include_str!(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/kernels-gpu/ptx/sm80.ptx"
    ));
    assert!(
        vendored == sgemm_bi::ptx::SM80,
        "kernels-gpu/ptx/sm80.ptx is stale: regenerate it with `SGEMM_BI_UPDATE_PTX=1 cargo build`"
    );
}

/// Assembles a module with ptxas for `arch` and returns ptxas's resource report.
fn assemble(ptxas: &str, ptx: &str, arch: &str) -> String {
    let dir = std::env::temp_dir().join(format!("sgemm-bi-ptxas-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let src = dir.join(format!("{arch}.ptx"));
    std::fs::write(&src, ptx).unwrap();
    let out = Command::new(ptxas)
        .args(["-v", &format!("-arch={arch}"), "-o"])
        .arg(dir.join(format!("{arch}.cubin")))
        .arg(&src)
        .output()
        .expect("running ptxas");
    let report = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "ptxas -arch={arch} failed:\n{report}");
    report
}

#[test]
fn every_module_assembles_for_sm80_and_sm90a_without_spills() {
    let Ok(ptxas) = std::env::var("SGEMM_BI_PTXAS") else {
        assert!(
            !required("SGEMM_BI_REQUIRE_PTXAS"),
            "SGEMM_BI_REQUIRE_PTXAS=1 but SGEMM_BI_PTXAS is not set"
        );
        eprintln!("skipped: set SGEMM_BI_PTXAS to a ptxas binary (scripts/test-all does)");
        return;
    };
    for arch in ["sm_80", "sm_90a"] {
        let report = assemble(&ptxas, sgemm_bi::ptx::SM80, arch);
        let entries = report.matches("Compiling entry function").count();
        assert_eq!(
            entries, 28,
            "expected the 12 scalar and 16 tensor-core entry points:\n{report}"
        );
        for line in report.lines().filter(|l| l.contains("spill")) {
            assert!(
                line.contains("0 bytes spill stores, 0 bytes spill loads"),
                "{arch}: {line}"
            );
        }
        for line in report.lines().filter(|l| l.contains("stack frame")) {
            assert!(
                line.trim_start().starts_with("0 bytes stack frame"),
                "{arch}: local memory: {line}"
            );
        }
        println!("{arch}: {entries} entry points assembled, no spills, no stack");
    }
}
