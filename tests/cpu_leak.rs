//! No leak across engine lifetimes (docs/reliability.md, item 4): 10⁴ cycles of creating a
//! CPU engine, running a call (and a rejected call) on it and dropping it leave the
//! process's resident memory where it was after a warm-up. Alone in its test binary, so that
//! no other test's allocations move the figure. The GPU version (device memory through
//! cuMemGetInfo, and resident memory) is in tests/gpu_hardening.rs.

mod common;

use common::*;
use sgemm_bi::{DType, Engine, Error};

/// Resident memory of this process in bytes (`VmRSS` of `/proc/self/status`, Linux: the
/// resident pages of `/proc/self/statm`, in kB whatever the page size).
fn resident_bytes() -> Option<usize> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kb: usize = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

fn cycle(case: &Case, want: &Buf) {
    let engine = Engine::new(sgemm_bi::Device::Cpu).expect("CPU engine");
    assert_same_bits(&case.run(&engine), want, "a fresh engine");
    let mut bad = case.g;
    bad.a.ld = 0;
    let mut c = case.c.clone();
    let err = engine
        .gemm_host(
            &bad,
            case.a.slice(),
            case.b.slice(),
            case.bias.as_ref().map(Buf::slice),
            c.slice_mut(),
        )
        .unwrap_err();
    assert!(matches!(err, Error::BadLeadingDimension { .. }));
}

#[test]
fn ten_thousand_engine_lifetimes_leak_nothing() {
    let Some(_) = resident_bytes() else {
        eprintln!("skipped: no /proc/self/status on this system");
        return;
    };
    let mut rng = Rng::new(0x1ea4);
    let mut s = Shape::new(24, 40, 33, DType::BF16);
    s.bias = Some(DType::F32);
    let case = Case::build(&s, &mut rng);
    let want = case.expected();
    for _ in 0..1000 {
        cycle(&case, &want);
    }
    let before = resident_bytes().unwrap();
    const CYCLES: usize = 10_000;
    for _ in 0..CYCLES {
        cycle(&case, &want);
    }
    let after = resident_bytes().unwrap();
    let growth = after.saturating_sub(before);
    println!(
        "{CYCLES} create/call/reject/drop cycles: resident {} KiB before, {} KiB after \
         (growth {} KiB)",
        before / 1024,
        after / 1024,
        growth / 1024
    );
    // One leaked engine per cycle would be ≥ 10⁴ × 32 bytes; leaked call buffers far more.
    assert!(
        growth <= 256 * 1024,
        "resident memory grew by {growth} bytes"
    );
}
