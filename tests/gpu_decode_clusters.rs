//! The 64-row decode tiles in clusters of two along N (`SGEMM_BI_DECODE_CLUSTER=on`,
//! `hopper::walk`): the blocks of a cluster share each stage's A tile by multicast, each
//! copying half of its rows to both. Every output must still be the CPU model's bits, with K
//! ending at every place in a stage (two K tiles a stage at 32 and 48 columns, four at 16),
//! a partial last tile of columns and 17 to 64 rows. A test binary of its own, because the
//! engine reads the variable once per device and process.
//!
//! Needs a GPU: `bash .gpu/run gpu_decode_clusters` on the GPU host.

mod gpu_support;

use gpu_support::{gpu_engine, tensor_core_call, Problem, RawStream, Rng};
use sgemm_bi::{DType, Device, Engine, Gemm, Layout, OutputMode};

fn clustered_gpu_engine() -> Option<Engine> {
    // This binary's only test sets it before any engine exists, so no other thread reads
    // the environment meanwhile.
    std::env::set_var("SGEMM_BI_DECODE_CLUSTER", "on");
    gpu_engine()
}

/// torch's `x @ W.T`: A row-major `[M, K]`, B column-major (the `[N, K]` weight).
fn decode_call(m: usize, n: usize, k: usize, dtype: DType, mode: OutputMode) -> Gemm {
    tensor_core_call(m, n, k, dtype, (Layout::RowMajor, Layout::ColMajor), mode)
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn clustered_decode_calls_give_the_model_bits() {
    let Some(gpu) = clustered_gpu_engine() else {
        return;
    };
    let cpu = Engine::new(Device::Cpu).expect("the CPU engine always exists");
    let stream = RawStream::new();
    let mut rng = Rng::new(0xc1_5e7d);
    let mut checked = 0usize;
    for dtype in [DType::BF16, DType::F16] {
        for (m, n, k) in [
            (64, 4096, 1000),
            (33, 4090, 4104),
            (48, 2048, 520),
            (64, 5632, 200),
            (40, 256, 64),
            (64, 4096, 127),
        ] {
            for mode in [
                OutputMode::Overwrite(DType::F32),
                OutputMode::Overwrite(dtype),
                OutputMode::AccumulateF32,
            ] {
                let p = Problem::random(decode_call(m, n, k, dtype, mode), &mut rng);
                let (on_gpu, on_cpu) = (p.on_gpu(&gpu, &stream).bits(), p.on_cpu(&cpu).bits());
                let differ = on_gpu.iter().zip(&on_cpu).filter(|(g, c)| g != c).count();
                assert_eq!(
                    differ, 0,
                    "{dtype} {m}×{n}×{k} {mode:?}: {differ} outputs differ from the model"
                );
                checked += on_gpu.len();
            }
        }
    }
    eprintln!("{checked} outputs equal to the model's bits");
}
