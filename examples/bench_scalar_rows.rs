//! The scalar tier at few rows (decode, and the bias gradient's `onesᵀ · dY` column sum): the
//! engine's time per call next to the two floors, and cuBLAS SGEMM (no TF32) at the same
//! shape for reference.
//!
//! `cargo run --release --example bench_scalar_rows` on a machine with a GPU. Floors: bytes
//! (A, B and C once) over 4.8 TB/s, and the chain, K dependent fmas of 4 cycles at 1.98 GHz
//! (the scalar contract's order allows no shorter critical path). The results and what they
//! mean for a few-row kernel: docs/perf-notes.md, "Scalar tier: few rows".

#[path = "common/cublas.rs"]
#[allow(dead_code)] // shared by the benchmarks; each uses part of it
mod cublas;
#[path = "common/device_data.rs"]
mod device_data;

use std::ffi::c_void;

use cudarc::driver::result;
use device_data::{median_ms, random_device};
use sgemm_bi::{DType, Device, Engine, Gemm, GemmPointers, Layout, Operand, Stream};

const BANDWIDTH: f64 = 4.8e12;
const FMA_CYCLES: f64 = 4.0;
const CLOCK_HZ: f64 = 1.98e9;

fn main() {
    let engine = match Engine::new(Device::Cuda(0)) {
        Ok(e) => e,
        Err(e) => {
            eprintln!("bench_scalar_rows needs a CUDA GPU: {e}");
            std::process::exit(2);
        }
    };
    let blas = cublas::Cublas::open()
        .unwrap_or_else(|e| panic!("cuBLAS not found ({e}); set SGEMM_BI_CUBLAS"));
    let stream = result::stream::create(result::stream::StreamKind::NonBlocking).unwrap();
    blas.set_stream(stream as *mut c_void);
    let reps = 50;
    println!("| case | M × K × N | dtype | B | byte floor µs | chain floor µs | sgemm-bi µs | cuBLAS SGEMM µs |");
    println!("|---|---|---|---|---:|---:|---:|---:|");
    // (case, m, k, n, B column-major): decode reads Wᵀ in place (column-major B); the
    // bias gradient reads dY row-major.
    let mut cases: Vec<(&str, usize, usize, usize, bool)> = Vec::new();
    for n in [4096, 14336] {
        for m in [1, 2, 4, 8, 16, 32, 64] {
            cases.push(("decode", m, 4096, n, true));
        }
    }
    for (k, n) in [(2048, 2048), (2048, 5632), (16384, 4096)] {
        cases.push(("bias grad", 1, k, n, false));
    }
    for dtype in [DType::BF16, DType::F32] {
        for &(case, m, k, n, b_col) in &cases {
            let (a, b, c) = (
                random_device(m * k, dtype, 1),
                random_device(k * n, dtype, 2),
                random_device(m * n, DType::F32, 3),
            );
            let mut g = Gemm::dense(m, n, k, dtype);
            if b_col {
                g.b = Operand {
                    dtype,
                    layout: Layout::ColMajor,
                    ld: k,
                    batch_stride: 0,
                };
            }
            g.tier = sgemm_bi::Tier::Scalar;
            let p = GemmPointers {
                a: a as *const c_void,
                b: b as *const c_void,
                bias: std::ptr::null(),
                c: c as *mut c_void,
            };
            // SAFETY: buffers sized for the descriptor, alive until the end of main.
            let ours = 1e3
                * median_ms(stream, reps, || unsafe {
                    engine.gemm(&g, p, Stream(stream as *mut c_void)).unwrap()
                });
            let cublas = if dtype == DType::F32 && !b_col {
                // SAFETY: buffers sized M×K, K×N, M×N f32.
                let us = 1e3 * median_ms(stream, reps, || unsafe { blas.sgemm(m, n, k, a, b, c) });
                format!("{us:.1}")
            } else {
                "–".into()
            };
            let bytes = ((m * k + k * n) * dtype.size() + m * n * dtype.size()) as f64;
            println!(
                "| {case} | {m} × {k} × {n} | {dtype} | {} | {:.1} | {:.1} | {ours:.1} | {cublas} |",
                if b_col { "col" } else { "row" },
                bytes / BANDWIDTH * 1e6,
                k as f64 * FMA_CYCLES / CLOCK_HZ * 1e6,
            );
            // SAFETY: allocations of this iteration, no work pending after the sync.
            unsafe {
                result::ctx::synchronize().unwrap();
                for ptr in [a, b, c] {
                    result::free_sync(ptr).unwrap();
                }
            }
        }
    }
}
