//! A kernel's first use inside a CUDA graph capture (C1): the kernels load on first use, and
//! a process's first call of a kind may come while a stream is being captured — a
//! `torch.cuda.graph` around a decode step whose shapes or alignment pick a kernel no
//! earlier call used. Captured in `GLOBAL` mode (torch's default), where the driver
//! refuses calls such as loading a module; the loading relaxes the thread's capture mode
//! for its own driver calls (`host/src/cuda/modules.rs`, `Lazy`). Each test is the first
//! use of its kernels in this process: this binary runs nothing else. `#[ignore]`d: CI has
//! no GPU; `bash .gpu/run` runs it.

mod gpu_support;

use cudarc::driver::sys::CUstreamCaptureMode;
use gpu_support::{first_difference, gpu_engine, Problem, RawStream, Rng};
use sgemm_bi::{DType, Gemm, Tier};

#[test]
#[ignore = "needs a CUDA GPU"]
fn a_kernel_first_used_inside_a_global_capture_replays_the_direct_bits() {
    let Some(gpu) = gpu_engine() else { return };
    let stream = RawStream::new();
    let mut rng = Rng::new(23);
    for (dtype, tier) in [
        (DType::F32, Tier::Scalar),
        (DType::BF16, Tier::TensorCores),
        (DType::F16, Tier::Scalar),
    ] {
        let g = Gemm {
            bias: Some(DType::F32),
            tier,
            ..Gemm::dense(8, 384, 640, dtype)
        };
        let p = Problem::random(g, &mut rng);
        // Captured first: these kernels are loaded inside the capture.
        let replayed = p.in_cuda_graph_with(
            &gpu,
            &stream,
            2,
            CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_GLOBAL,
        );
        let direct = p.on_gpu(&gpu, &stream);
        assert_eq!(
            first_difference(&direct, &replayed),
            None,
            "{dtype} {tier:?}"
        );
    }
}
