//! GFLOP/s of the CPU backend on this machine: the scalar tier in f32, bf16 and f16, and the
//! tensor-core tier (the sm_90 model) in bf16 and f16, at a few shapes, random data, median of
//! several timed runs after a warm-up.
//!
//! ```text
//! cargo run -p sgemm-bi-host --release --example cpu_gflops [-- M K N ...]
//! ```
//!
//! Arguments, if any, are `M K N` triples to measure instead of the default shapes.

use std::time::Instant;

use sgemm_bi_host::{
    bf16, f16, DType, Device, Engine, Gemm, HostSlice, HostSliceMut, KernelImages, Tier,
};

/// The CPU engine loads no kernels.
static NO_KERNELS: KernelImages = KernelImages::NONE;

/// Deterministic values in [-1, 1).
fn random(len: usize, seed: u64) -> Vec<f32> {
    let mut s = seed | 1;
    (0..len)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s >> 40) as f32 / (1u64 << 23) as f32 - 1.0
        })
        .collect()
}

/// Typed copies of a buffer, so each dtype is timed on its own storage format.
enum Buf {
    F32(Vec<f32>),
    BF16(Vec<bf16>),
    F16(Vec<f16>),
}

impl Buf {
    fn new(dtype: DType, v: &[f32]) -> Buf {
        match dtype {
            DType::F32 => Buf::F32(v.to_vec()),
            DType::BF16 => Buf::BF16(v.iter().map(|&x| bf16::from_f32(x)).collect()),
            DType::F16 => Buf::F16(v.iter().map(|&x| f16::from_f32(x)).collect()),
        }
    }
    fn slice(&self) -> HostSlice<'_> {
        match self {
            Buf::F32(v) => v.as_slice().into(),
            Buf::BF16(v) => v.as_slice().into(),
            Buf::F16(v) => v.as_slice().into(),
        }
    }
    fn slice_mut(&mut self) -> HostSliceMut<'_> {
        match self {
            Buf::F32(v) => v.as_mut_slice().into(),
            Buf::BF16(v) => v.as_mut_slice().into(),
            Buf::F16(v) => v.as_mut_slice().into(),
        }
    }
}

/// Median GFLOP/s of `C[M,N] = A[M,K] · B[K,N]` in `dtype` (output in the same dtype).
fn measure(engine: &Engine, tier: Tier, dtype: DType, m: usize, k: usize, n: usize) -> f64 {
    let g = Gemm {
        tier,
        ..Gemm::dense(m, n, k, dtype)
    };
    let a = Buf::new(dtype, &random(m * k, 1));
    let b = Buf::new(dtype, &random(k * n, 2));
    let mut c = Buf::new(dtype, &vec![0.0; m * n]);
    let flops = 2.0 * (m * n * k) as f64;
    // Enough runs for about a second of work, at least 3 and at most 15.
    let runs = (1e11 / flops).clamp(3.0, 15.0) as usize;
    engine
        .gemm_host(&g, a.slice(), b.slice(), None, c.slice_mut())
        .expect("warm-up run");
    let mut secs: Vec<f64> = (0..runs)
        .map(|_| {
            let t = Instant::now();
            engine
                .gemm_host(&g, a.slice(), b.slice(), None, c.slice_mut())
                .expect("timed run");
            t.elapsed().as_secs_f64()
        })
        .collect();
    secs.sort_by(f64::total_cmp);
    flops / secs[runs / 2] / 1e9
}

fn main() {
    let engine = Engine::with_kernels(Device::Cpu, &NO_KERNELS).expect("CPU engine");
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .map(|s| s.parse().expect("arguments are M K N triples"))
        .collect();
    let shapes: Vec<(usize, usize, usize)> = if args.is_empty() {
        vec![(512, 512, 512), (1024, 1024, 1024), (2048, 768, 3072)]
    } else {
        args.chunks_exact(3).map(|t| (t[0], t[1], t[2])).collect()
    };
    println!(
        "CPU backend, {} rayon threads; GFLOP/s, median of 3-15 runs",
        rayon::current_num_threads()
    );
    println!("| M × K × N | f32 | bf16 | f16 | bf16 tensor-core model | f16 tensor-core model |");
    println!("|---|---:|---:|---:|---:|---:|");
    for (m, k, n) in shapes {
        let cells: Vec<String> = [
            (Tier::Scalar, DType::F32),
            (Tier::Scalar, DType::BF16),
            (Tier::Scalar, DType::F16),
            (Tier::TensorCores, DType::BF16),
            (Tier::TensorCores, DType::F16),
        ]
        .iter()
        .map(|&(t, d)| format!("{:.1}", measure(&engine, t, d, m, k, n)))
        .collect();
        println!("| {m} × {k} × {n} | {} |", cells.join(" | "));
    }
}
