//! Scalar tier against cuBLAS on the GPU, same process, same buffers, random data.
//!
//! `cargo run --release --example bench_scalar` on a machine with a GPU (set
//! `SGEMM_BI_CUBLAS` to libcublas's path if it is not on the loader path). Prints one
//! markdown table: median time of many runs, TFLOP/s, and the ratio to cuBLAS SGEMM (TF32
//! off) for each shape, with the f32-FMA floor. cuBLAS's 16-bit tensor-core GEMM is listed
//! for context: it is the tensor-core tier's opponent, not the scalar tier's.

#[path = "../common/cublas.rs"]
#[allow(dead_code)] // shared by the benchmarks; each uses part of it
mod cublas;
#[path = "../common/device_data.rs"]
mod device_data;

use std::ffi::c_void;

use cudarc::driver::result;
use device_data::{median_ms, random_device};
use sgemm_bi::{DType, Device, Engine, Gemm, GemmPointers, Stream};

/// Plain f32 FMA peak of an H200 SXM (datasheet), for the floor column.
const F32_PEAK_TFLOPS: f64 = 67.0;

fn main() {
    let engine = match Engine::new(Device::Cuda(0)) {
        Ok(e) => e,
        Err(e) => {
            eprintln!("bench_scalar needs a CUDA GPU: {e}");
            std::process::exit(2);
        }
    };
    let blas = cublas::Cublas::open()
        .unwrap_or_else(|e| panic!("cuBLAS not found ({e}); set SGEMM_BI_CUBLAS"));
    let stream = result::stream::create(result::stream::StreamKind::NonBlocking).unwrap();
    blas.set_stream(stream as *mut c_void);
    let reps: usize = std::env::var("SGEMM_BI_BENCH_REPS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(30);

    println!("| M × K × N | dtype | f32-FMA floor ms | sgemm-bi scalar ms | TFLOP/s | cuBLAS SGEMM (no TF32) TFLOP/s | ratio | cuBLAS 16-bit TC TFLOP/s |");
    println!("|---|---|---:|---:|---:|---:|---:|---:|");
    for &(m, k, n) in &[
        (4096usize, 4096usize, 4096usize),
        (2048, 768, 3072),
        (8192, 8192, 8192),
    ] {
        let flops = 2.0 * (m * n * k) as f64;
        let floor_ms = flops / (F32_PEAK_TFLOPS * 1e12) * 1e3;
        let tflops = |ms: f64| flops / (ms * 1e-3) / 1e12;
        let (a32, b32, c32) = (
            random_device(m * k, DType::F32, 1),
            random_device(k * n, DType::F32, 2),
            random_device(m * n, DType::F32, 3),
        );
        // SAFETY: buffers sized M×K, K×N, M×N f32.
        let cublas_ms = median_ms(stream, reps, || unsafe {
            blas.sgemm(m, n, k, a32, b32, c32)
        });
        for dtype in [DType::F32, DType::BF16, DType::F16] {
            let (a, b, c) = if dtype == DType::F32 {
                (a32, b32, c32)
            } else {
                (
                    random_device(m * k, dtype, 4),
                    random_device(k * n, dtype, 5),
                    random_device(m * n, dtype, 6),
                )
            };
            let g = Gemm::dense(m, n, k, dtype);
            let p = GemmPointers {
                a: a as *const c_void,
                b: b as *const c_void,
                bias: std::ptr::null(),
                c: c as *mut c_void,
            };
            // SAFETY: buffers sized for the descriptor, alive until the end of main.
            let ours_ms = median_ms(stream, reps, || unsafe {
                engine.gemm(&g, p, Stream(stream as *mut c_void)).unwrap()
            });
            let tc = if dtype == DType::F32 {
                "–".to_string()
            } else {
                // SAFETY: as above.
                let ms = median_ms(stream, reps, || unsafe {
                    blas.gemm_16bit(dtype == DType::BF16, m, n, k, a, b, c)
                });
                format!("{:.1}", tflops(ms))
            };
            println!(
                "| {m} × {k} × {n} | {dtype} | {floor_ms:.3} | {ours_ms:.3} | {:.1} | {:.1} | {:.2} | {tc} |",
                tflops(ours_ms),
                tflops(cublas_ms),
                cublas_ms / ours_ms,
            );
        }
    }
}
