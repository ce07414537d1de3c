//! Tensor-core tier against cuBLAS on the GPU, same process, same buffers, random bf16 data:
//! the issue-3 speed-bar shapes, for the planner's path (Hopper on sm_90) and the mma.sync
//! path, B row-major (`rr`) and column-major (`rc`, a PyTorch Linear weight).
//!
//! `cargo run --release --example bench_tc` on a machine with a GPU (set `SGEMM_BI_CUBLAS`
//! to libcublas's path if it is not on the loader path).

#[path = "common/cublas.rs"]
#[allow(dead_code)] // shared by the benchmarks; each uses part of it
mod cublas;
#[path = "common/device_data.rs"]
mod device_data;

use std::ffi::c_void;

use cudarc::driver::result;
use device_data::{median_ms, random_device};
use sgemm_bi::{DType, Device, Engine, Gemm, GemmPointers, Layout, Stream, TcPath, Tier};

fn main() {
    let auto = Engine::new(Device::Cuda(0)).expect("bench_tc needs a CUDA GPU");
    let portable = Engine::with_tc_path(Device::Cuda(0), TcPath::Portable).unwrap();
    let blas = cublas::Cublas::open().unwrap_or_else(|e| panic!("cuBLAS not found ({e})"));
    let stream = result::stream::create(result::stream::StreamKind::NonBlocking).unwrap();
    blas.set_stream(stream as *mut c_void);
    let reps = 20;
    println!("| M × K × N | B layout | cuBLAS TFLOP/s | planner's path TFLOP/s | ratio | mma.sync path TFLOP/s | ratio |");
    println!("|---|---|---:|---:|---:|---:|---:|");
    for &(m, k, n) in &[
        (16384usize, 4096usize, 4096usize),
        (16384, 4096, 14336),
        (16384, 14336, 4096),
        (8192, 8192, 8192),
        (4096, 4096, 4096),
        (2048, 768, 3072),
        (64, 4096, 4096),
        (1, 4096, 4096),
        (128, 4096, 14336),
    ] {
        let flops = 2.0 * (m * n * k) as f64;
        let tflops = |ms: f64| flops / (ms * 1e-3) / 1e12;
        let (a, b, c) = (
            random_device(m * k, DType::BF16, 1),
            random_device(k * n, DType::BF16, 2),
            random_device(m * n, DType::BF16, 3),
        );
        // SAFETY: buffers sized M×K, K×N, M×N.
        let blas_ms = median_ms(stream, reps, || unsafe {
            blas.gemm_16bit(true, m, n, k, a, b, c)
        });
        for b_layout in [Layout::RowMajor, Layout::ColMajor] {
            let mut g = Gemm::dense(m, n, k, DType::BF16);
            g.tier = Tier::TensorCores;
            if b_layout == Layout::ColMajor {
                g.b.layout = Layout::ColMajor;
                g.b.ld = k;
            }
            let p = GemmPointers {
                a: a as *const c_void,
                b: b as *const c_void,
                bias: std::ptr::null(),
                c: c as *mut c_void,
            };
            let time = |e: &Engine| {
                // SAFETY: buffers sized for the descriptor, alive until the end of main.
                median_ms(stream, reps, || unsafe {
                    e.gemm(&g, p, Stream(stream as *mut c_void)).unwrap()
                })
            };
            let (ours, mma) = (time(&auto), time(&portable));
            println!(
                "| {m} × {k} × {n} | {b_layout:?} | {:.1} | {:.1} | {:.2} | {:.1} | {:.2} |",
                tflops(blas_ms),
                tflops(ours),
                blas_ms / ours,
                tflops(mma),
                blas_ms / mma,
            );
        }
    }
}
