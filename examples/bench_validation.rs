//! What checking a call costs (docs/reliability.md, item 1):
//!
//! - on the host: validating a descriptor (`validate::check`) and the overlap check, per
//!   call, in nanoseconds;
//! - on a GPU: the time to enqueue a small GEMM with the engine's pointer checks on and off
//!   (each check is a `cuPointerGetAttributes` call for the first and last element of every
//!   buffer), and the same with the launches waited for.
//!
//! - for comparison, the enqueue time of `cublasLtMatmul` on the same operands (planned
//!   once, as a framework does; without bias, which a plain cuBLASLt matmul has not), next
//!   to ours without bias.
//!
//! `cargo run --release --example bench_validation [CALLS]` (default 20000). Without a GPU
//! only the host figures are printed; without libcublasLt the comparison is left out.

#[path = "common/cublas.rs"]
#[allow(dead_code)]
mod cublas;
#[path = "common/cublaslt.rs"]
#[allow(dead_code)]
mod cublaslt;
#[path = "../tests/gpu_support/mod.rs"]
mod gpu_support;

use std::hint::black_box;
use std::time::Instant;

use gpu_support::{DeviceBuf, HostBuf, RawStream, Rng};
use sgemm_bi::{validate, DType, Gemm, GemmPointers, Operand};

/// Median of `rounds` timings of `calls` calls of `f`, in nanoseconds per call.
fn per_call_ns(calls: usize, rounds: usize, mut f: impl FnMut()) -> f64 {
    let mut t: Vec<f64> = (0..rounds)
        .map(|_| {
            let start = Instant::now();
            for _ in 0..calls {
                f();
            }
            start.elapsed().as_nanos() as f64 / calls as f64
        })
        .collect();
    t.sort_by(|a, b| a.partial_cmp(b).unwrap());
    t[t.len() / 2]
}

fn main() {
    let calls: usize = std::env::args().nth(1).map_or(20_000, |v| {
        v.parse().expect("usage: bench_validation [CALLS]")
    });
    let g = Gemm {
        bias: Some(DType::F32),
        b: Operand::col_major(DType::BF16, 64),
        ..Gemm::dense(16, 16, 64, DType::BF16)
    };
    let p = GemmPointers {
        a: 0x10_0000 as *const _,
        b: 0x20_0000 as *const _,
        bias: 0x30_0000 as *const _,
        c: 0x40_0000 as *mut _,
    };
    let check = per_call_ns(calls, 7, || {
        black_box(validate::check(black_box(&g)).unwrap());
    });
    let ext = validate::check(&g).unwrap();
    let overlap = per_call_ns(calls, 7, || {
        black_box(validate::check_overlap(black_box(&g), &ext, &p)).unwrap();
    });
    println!(
        "host: validate::check {check:.0} ns per call, check_overlap {overlap:.0} ns per call \
         ({}×{}×{} {}, bias, B column-major)",
        g.m, g.n, g.k, g.a.dtype
    );

    let Some(gpu) = gpu_support::gpu_engine() else {
        return;
    };
    let stream = RawStream::new();
    let mut rng = Rng::new(5);
    let (a, b, bias) = (
        DeviceBuf::upload(&HostBuf::random(DType::BF16, ext.a, &mut rng)),
        DeviceBuf::upload(&HostBuf::random(DType::BF16, ext.b, &mut rng)),
        DeviceBuf::upload(&HostBuf::random(DType::F32, ext.bias, &mut rng)),
    );
    let c = DeviceBuf::alloc(ext.c * 2);
    let ptrs = GemmPointers {
        a: a.at(0),
        b: b.at(0),
        bias: bias.at(0),
        c: c.at(0),
    };
    let enqueue = |checks: bool, wait: bool| {
        gpu.set_pointer_checks(checks);
        let ns = per_call_ns(calls, 7, || {
            // SAFETY: live device buffers of the descriptor's extents; synchronized below.
            unsafe { gpu.gemm(&g, ptrs, stream.handle()) }.unwrap();
            if wait {
                stream.sync();
            }
        });
        stream.sync();
        ns
    };
    // Warm up (module JIT, first launches), then alternate to average out drift.
    enqueue(true, true);
    let (mut on, mut off, mut on_sync, mut off_sync) = (vec![], vec![], vec![], vec![]);
    for _ in 0..3 {
        on.push(enqueue(true, false));
        off.push(enqueue(false, false));
        on_sync.push(enqueue(true, true));
        off_sync.push(enqueue(false, true));
    }
    gpu.set_pointer_checks(true);
    let med = |mut v: Vec<f64>| {
        v.sort_by(|a, b| a.partial_cmp(b).unwrap());
        v[v.len() / 2] / 1000.0
    };
    let (on, off, on_sync, off_sync) = (med(on), med(off), med(on_sync), med(off_sync));
    println!(
        "gpu: enqueue {on:.2} µs per call with pointer checks, {off:.2} µs without (checks: \
         {:.2} µs, {:.0}%); launch + wait {on_sync:.2} µs with, {off_sync:.2} µs without",
        on - off,
        100.0 * (on - off) / off
    );

    // The same problem without bias, ours and cuBLASLt's, alternating.
    let plain = Gemm { bias: None, ..g };
    let lt = match cublaslt::CublasLt::open() {
        Ok(lt) => lt,
        Err(e) => {
            println!("cuBLASLt comparison left out: {e}");
            return;
        }
    };
    let Some(plan) = lt.plan(&cublas::RowMajorGemm::from_gemm(&plain)) else {
        println!("cuBLASLt comparison left out: no algorithm for {plain:?}");
        return;
    };
    let (a_dev, b_dev, c_dev) = (a.at(0) as u64, b.at(0) as u64, c.at(0) as u64);
    let ours_plain = GemmPointers {
        bias: std::ptr::null(),
        ..ptrs
    };
    let (mut ours, mut theirs) = (vec![], vec![]);
    for _ in 0..3 {
        ours.push(per_call_ns(calls, 7, || {
            // SAFETY: as above.
            unsafe { gpu.gemm(&plain, ours_plain, stream.handle()) }.unwrap();
        }));
        stream.sync();
        theirs.push(per_call_ns(calls, 7, || {
            // SAFETY: the same live buffers, laid out as `plain` describes; the stream is
            // of the engine's (primary) context, current on this thread.
            unsafe { plan.run(a_dev, b_dev, c_dev, stream.handle().0) }.unwrap();
        }));
        stream.sync();
    }
    let (ours, theirs) = (med(ours), med(theirs));
    println!(
        "gpu, no bias: enqueue {ours:.2} µs per call (pointer checks on) against \
         cublasLtMatmul's {theirs:.2} µs: {:.2}x",
        ours / theirs
    );
}
