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
    let vendored = include_str!(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/kernels-gpu/ptx/sm90a.ptx"
    ));
    assert!(
        vendored == sgemm_bi::ptx::SM90A,
        "kernels-gpu/ptx/sm90a.ptx is stale: regenerate it with `SGEMM_BI_UPDATE_PTX=1 cargo build`"
    );
}

/// Assembles a module with ptxas for `arch` and returns ptxas's resource report.
fn assemble(ptxas: &str, ptx: &str, arch: &str) -> String {
    let dir = std::env::temp_dir().join(format!("sgemm-bi-ptxas-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let src = dir.join(format!("{arch}-{}.ptx", ptx.len()));
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
    // The sm80 module runs on every GPU from sm_80 on; the sm90a module (wgmma, TMA,
    // setmaxnreg) only on sm_90a.
    let modules = [
        ("sm80", sgemm_bi::ptx::SM80, "sm_80", 40),
        ("sm80", sgemm_bi::ptx::SM80, "sm_90a", 40),
        ("sm90a", sgemm_bi::ptx::SM90A, "sm_90a", 88),
    ];
    for (name, ptx, arch, expected) in modules {
        let report = assemble(&ptxas, ptx, arch);
        let entries = report.matches("Compiling entry function").count();
        assert_eq!(
            entries, expected,
            "{name}: expected 24 scalar (two tile widths) and 16 tensor-core entry points (sm80) \
             or 76 Hopper ones and 12 scalar `_sm90` ones (sm90a: 32 plain, 8 clustered, 16 \
             ping-pong, 20 small-M):\n{report}"
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
        println!("{name} for {arch}: {entries} entry points assembled, no spills, no stack");
    }
}

/// Release builds with `SGEMM_BI_PTXAS` set embed both modules as machine code for compute
/// capability 9.0 (ELF cubins, loaded instead of the PTX there); other builds embed none.
#[test]
fn machine_code_is_embedded_exactly_when_the_build_makes_it() {
    let made = option_env!("SGEMM_BI_PTXAS").is_some() && !cfg!(debug_assertions);
    for (name, image) in [
        ("sm80 for sm_90", sgemm_bi::ptx::SM80_CUBIN_SM90),
        ("sm90a", sgemm_bi::ptx::SM90A_CUBIN),
    ] {
        if made {
            assert!(image.starts_with(b"\x7fELF"), "{name}: not an ELF cubin");
            assert_eq!(
                image.as_ptr() as usize % 64,
                0,
                "{name}: not 64-byte aligned"
            );
        } else {
            assert!(
                image.is_empty(),
                "{name}: {} bytes of machine code",
                image.len()
            );
        }
    }
}

/// Each Hopper entry point has its prologue's block barrier once (`barrier.cluster.arrive`
/// in the clustered ones, `bar.sync 0` in the others). Those barriers are `.aligned`: every
/// thread of a warp must reach the same instruction. LLVM does not know that (inline asm is
/// not convergent to it) and may copy a barrier into both arms of a branch on the thread
/// index — it did once, around a `tid == 0` test after the barrier, and the kernels hung on
/// the H200 (docs/perf-notes.md, version 7). A second copy in one entry point is that; so is
/// a named barrier of the epilogue more often than its pieces need, or a ping-pong turn
/// (`hopper/pingpong.rs`) taken or handed over more often than its consumer loops need.
#[test]
fn no_hopper_barrier_is_duplicated() {
    let ptx = sgemm_bi::ptx::SM90A;
    let mut entries = 0;
    for body in ptx.split(".entry ").skip(1) {
        let name = body.split('(').next().unwrap_or("").trim();
        if !name.starts_with("sgemm_bi_hopper_") {
            continue;
        }
        let body = body.split("\n}\n").next().unwrap_or(body);
        let (barrier, count) = if name.ends_with("_x2") {
            (
                "barrier.cluster.arrive",
                body.matches("barrier.cluster.arrive").count(),
            )
        } else {
            ("bar.sync 0;", body.matches("bar.sync 0;").count())
        };
        assert_eq!(count, 1, "{name}: `{barrier}` {count} times");
        // The epilogue's named barriers (`bar.sync id, 128`, one consumer warpgroup's), two
        // per stored piece: BN / 64 pieces of 16-bit C and BN / 32 of f32 C, each loop once;
        // a ping-pong warpgroup stores two 64-row halves.
        let bn: usize = name
            .split("_n")
            .nth(1)
            .and_then(|rest| rest.split('_').next())
            .and_then(|w| w.parse().ok())
            .unwrap_or_else(|| panic!("{name}: no tile width in the name"));
        let named = body
            .lines()
            .filter(|l| {
                l.trim_start().starts_with("bar.sync %r") && l.trim_end().ends_with(", 128;")
            })
            .count();
        let pingpong = name.contains("_pp");
        let halves = if pingpong { 2 } else { 1 };
        assert_eq!(
            named,
            halves * 3 * bn / 32,
            "{name}: {named} named barriers"
        );
        // The turn (`bar.sync id, 256` / `bar.arrive id, 256`): taken once per consumer loop
        // (three: one per store kind), handed over once per chain (each loop has two, for
        // tiles inside and past M).
        let turns = |op: &str| {
            body.lines()
                .filter(|l| l.trim_start().starts_with(op) && l.trim_end().ends_with(", 256;"))
                .count()
        };
        let expected = if pingpong { (3, 6) } else { (0, 0) };
        assert_eq!(
            (turns("bar.sync"), turns("bar.arrive")),
            expected,
            "{name}: ping-pong turns"
        );
        entries += 1;
    }
    assert_eq!(entries, 76, "Hopper entry points");
}
