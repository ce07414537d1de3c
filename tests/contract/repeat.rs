//! Run-to-run determinism (C1): the same call gives the same bits every time, on one engine
//! or another, from several threads sharing an engine (CPU), on fresh streams and the
//! legacy default stream (GPU), and replayed from a captured CUDA graph.

use super::common::{assert_same_bits, Case, Rng, Shape};
use super::gpu_support::RawStream;
use super::target::{Offsets, Runner, Target};
use sgemm_bi::{DType, Gemm};

/// The calls of the run-to-run test for a target: large ones on a GPU (1000 × 1000, with a
/// K tail on the tensor cores), smaller ones on the CPU.
fn repeat_calls(t: Target) -> Vec<(DType, (usize, usize, usize))> {
    match (t.is_cuda(), t.tier()) {
        (true, sgemm_bi::Tier::Scalar) => t
            .dtypes()
            .iter()
            .map(|&d| (d, (1000, 1000, 1000)))
            .collect(),
        (true, _) => vec![
            (DType::BF16, (1000, 1000, 1000)),
            (DType::F16, (1000, 1000, 1000)),
            (DType::BF16, (1000, 1000, 999)),
        ],
        (false, sgemm_bi::Tier::Scalar) => {
            vec![
                (DType::F32, (257, 131, 200)),
                (DType::BF16, (257, 131, 200)),
            ]
        }
        (false, _) => vec![(DType::BF16, (130, 72, 200)), (DType::F16, (65, 40, 999))],
    }
}

/// The same call repeated: on the target's engine (each on a fresh stream on a GPU), on a
/// second engine, on the legacy default stream (GPU), from four threads sharing the engine
/// (CPU); every result has the first one's bits, and the first has the reference's.
pub fn results_repeat_across_runs_streams_and_engines(t: Target) {
    let Some(run) = Runner::new(t) else { return };
    let second = run.second_engine();
    let mut rng = Rng::new(0x0c1_0001);
    let mut ran = 0;
    for (dtype, (m, n, k)) in repeat_calls(t) {
        let mut s = Shape::new(m, n, k, dtype);
        s.bias = Some(if t.is_cuda() { dtype } else { DType::F32 });
        s.lb = if t.is_cuda() {
            s.lb
        } else {
            sgemm_bi::Layout::ColMajor
        };
        let mut case = Case::build(&s, &mut rng);
        case.g = run.tiered(case.g);
        if !run.takes(&case.g, Offsets::default()) {
            continue;
        }
        let what = format!("{t:?} {dtype} {m}×{n}×{k}");
        let first = run.run_case(&case);
        if let Some(want) = run.expected(&case) {
            assert_same_bits(&first, &want, &format!("{what}: first run"));
        }
        for r in 0..4 {
            let engine = if r % 2 == 0 { &run.engine } else { &second };
            assert_same_bits(
                &run.run_case_on(engine, &case),
                &first,
                &format!("{what}: run {r}"),
            );
        }
        if t.is_cuda() {
            // The legacy default stream (handle 0), which the stream type must not destroy.
            let default = RawStream(std::ptr::null_mut());
            let mut c = case.c.clone();
            let inputs = (&case.a, &case.b, case.bias.as_ref());
            run.run_on_stream(
                &run.engine,
                &default,
                &case.g,
                inputs,
                &mut c,
                Offsets::default(),
            );
            std::mem::forget(default);
            assert_same_bits(&c, &first, &format!("{what}: default stream"));
        } else {
            std::thread::scope(|scope| {
                let handles: Vec<_> = (0..4)
                    .map(|_| scope.spawn(|| run.run_case(&case)))
                    .collect();
                for h in handles {
                    assert_same_bits(
                        &h.join().unwrap(),
                        &first,
                        &format!("{what}: concurrent run"),
                    );
                }
            });
        }
        ran += 1;
    }
    assert!(ran > 0, "{t:?}: no call ran");
}

/// A call captured in a CUDA graph and replayed three times gives the bits of the call run
/// directly (C1 under graph capture, as torch.compile's CUDA graphs use it).
pub fn a_captured_cuda_graph_replays_the_same_bits(t: Target) {
    assert!(t.is_cuda(), "CUDA graphs are a GPU matter");
    let Some(run) = Runner::new(t) else { return };
    let mut rng = Rng::new(0x0c1_0002);
    // N = 385 and K = 1027 (A's leading dimension) are no whole numbers of 16-byte units,
    // which the Hopper path needs.
    let (n, k) = if t == Target::CudaHopper {
        (384, 1024)
    } else {
        (385, 1027)
    };
    let g = Gemm {
        bias: Some(DType::F32),
        tier: t.tier(),
        ..Gemm::dense(513, n, k, DType::BF16)
    };
    assert!(t.takes(&g, [0, 0, 0]), "{t:?} runs the captured call");
    // The graph helpers work on `gpu_support`'s problem type.
    let p =
        super::gpu_support::Problem::random(g, &mut super::gpu_support::Rng::new(rng.next_u64()));
    let stream = RawStream::new();
    let direct = p.on_gpu(&run.engine, &stream);
    let replayed = p.in_cuda_graph(&run.engine, &stream, 3);
    assert_eq!(
        super::gpu_support::first_difference(&direct, &replayed),
        None,
        "{t:?}: replayed graph vs direct call"
    );
}
