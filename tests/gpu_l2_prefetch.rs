//! The Hopper kernels with each block's first K tiles of B asked of L2 before the
//! dependent-launch wait (`SGEMM_BI_L2_PREFETCH`, `hopper::mainloop::prefetch_b_l2`), here
//! the whole K rather than the default's 8 tiles, on calls of one wave (every call below;
//! the host passes 0 to calls of more tiles than the grid). The prefetch is a hint: every
//! call must still give the CPU model's bits, calls back to back on one stream must still
//! see each other's writes, and a box that reaches past B's last column must not fault. A
//! test binary of its own, because the engine reads the variable once per device and process.
//!
//! Needs a GPU: `bash .gpu/run gpu_l2_prefetch` on the GPU host.

mod gpu_support;

use gpu_support::{gpu_engine, tensor_core_call, DeviceBuf, HostBuf, Problem, RawStream, Rng};
use sgemm_bi::{DType, Device, Engine, Gemm, GemmPointers, Layout, OutputMode};

/// More K tiles than any call here has: each block prefetches the whole K of its first tile.
const WHOLE_K: &str = "1000000";

fn prefetching_gpu_engine() -> Option<Engine> {
    // This binary's only test sets it before any engine exists, so no other thread reads
    // the environment meanwhile.
    std::env::set_var("SGEMM_BI_L2_PREFETCH", WHOLE_K);
    gpu_engine()
}

/// A packed bf16 call writing f32 (the prefetch does not depend on the dtype).
fn bf16_call(m: usize, n: usize, k: usize, la: Layout, lb: Layout) -> Gemm {
    tensor_core_call(
        m,
        n,
        k,
        DType::BF16,
        (la, lb),
        OutputMode::Overwrite(DType::F32),
    )
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn calls_with_the_weight_prefetched_give_the_model_bits() {
    let Some(gpu) = prefetching_gpu_engine() else {
        return;
    };
    let cpu = Engine::new(Device::Cpu).expect("the CPU engine always exists");
    let stream = RawStream::new();
    let mut rng = Rng::new(0x12_f37c);
    let (row, col) = (Layout::RowMajor, Layout::ColMajor);
    // Decode tiles of every width (one tile row: the blocks prefetch), K tails, a weight
    // whose last tile reaches past N, the 128-row tiles with and without clusters, and
    // calls of several tile rows (no prefetch), in all four layout pairs.
    let mut cases = vec![
        (1, 5632, 2048, row, col),
        (8, 2048, 5632, row, col),
        (1, 4096, 4096, row, col),
        (16, 2056, 1000, row, col),
        (3, 136, 520, row, col),
        (64, 200, 4104, row, col),
        (128, 4096, 512, row, col),
        (256, 1024, 384, row, col),
    ];
    for (la, lb) in [(row, row), (col, row), (col, col)] {
        cases.extend([
            (1, 1000, 640, la, lb),
            (64, 4096, 256, la, lb),
            (300, 520, 200, la, lb),
        ]);
    }
    let mut compared = 0usize;
    for (m, n, k, la, lb) in cases {
        let p = Problem::random(bf16_call(m, n, k, la, lb), &mut rng);
        let (on_gpu, on_cpu) = (p.on_gpu(&gpu, &stream), p.on_cpu(&cpu));
        assert_eq!(
            on_gpu.bits(),
            on_cpu.bits(),
            "{m}×{k}×{n} {la:?}/{lb:?}: the GPU's bits differ from the model's"
        );
        compared += on_gpu.len();
    }
    println!("{compared} outputs equal to the model with SGEMM_BI_L2_PREFETCH={WHOLE_K}");
}

/// The prefetch runs before the wait for the previous kernel, whose writes it must not
/// hide: a chain of decode calls on one stream, each reading the one before's output as its
/// A, gives the CPU's chain of the same calls.
#[test]
#[ignore = "needs a CUDA GPU"]
fn a_chain_of_calls_sees_each_others_writes() {
    let Some(gpu) = prefetching_gpu_engine() else {
        return;
    };
    let cpu = Engine::new(Device::Cpu).expect("the CPU engine always exists");
    let stream = RawStream::new();
    let mut rng = Rng::new(0x5eed_0c4a);
    let (width, links) = (1024usize, 6usize);
    let mut g = bf16_call(8, width, width, Layout::RowMajor, Layout::ColMajor);
    g.c.mode = OutputMode::Overwrite(DType::BF16);
    let weights: Vec<HostBuf> = (0..links)
        .map(|_| HostBuf::random(DType::BF16, width * width, &mut rng))
        .collect();
    let x0 = HostBuf::random(DType::BF16, 8 * width, &mut rng);
    // The CPU's chain.
    let mut x = x0.clone();
    for w in &weights {
        let mut y = HostBuf::poison(DType::BF16, 8 * width);
        cpu.gemm_host(&g, x.slice(), w.slice(), None, y.slice_mut())
            .expect("a valid call");
        x = y;
    }
    // The GPU's, enqueued back to back with no synchronisation between the calls.
    let bufs: Vec<DeviceBuf> = std::iter::once(DeviceBuf::upload(&x0))
        .chain((0..links).map(|_| DeviceBuf::alloc(8 * width * 2)))
        .collect();
    let on_device: Vec<DeviceBuf> = weights.iter().map(DeviceBuf::upload).collect();
    for (i, w) in on_device.iter().enumerate() {
        let p = GemmPointers {
            a: bufs[i].at(0).cast_const(),
            b: w.at(0).cast_const(),
            bias: std::ptr::null(),
            c: bufs[i + 1].at(0),
        };
        // SAFETY: the buffers hold the extents of `g` and live until the stream is synced.
        unsafe { gpu.gemm(&g, p, stream.handle()) }.expect("a valid call");
    }
    stream.sync();
    let mut last = HostBuf::poison(DType::BF16, 8 * width);
    bufs[links].download_into(&mut last);
    assert_eq!(last.bits(), x.bits(), "the chain's last output differs");
}
