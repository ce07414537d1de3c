//! The scalar tier's bit contract (ARCHITECTURE.md C3, C5) on the CPU engine, checked bit
//! for bit against the independent reference in `common`. The contracts every backend
//! shares (C1 run-to-run, C2 invariance by slicing rows, columns and batch entries, special
//! values, the training triad, `Tier::Auto`) are in `tests/contract.rs`, run there for this
//! engine as `cpu_scalar`.
//!
//! Every check compares whole C buffers, including the elements a call must not write
//! (ldc padding, gaps between batch entries, a guard after the span), which hold a NaN
//! sentinel that no computation produces.

mod common;

use common::*;
use proptest::prelude::{any, prop_assert, proptest, ProptestConfig, Strategy};
use sgemm_bi::{DType, Engine, Gemm, Layout, OutputMode, Tier};

const OUT_MODES: [OutputMode; 4] = [
    OutputMode::Overwrite(DType::F32),
    OutputMode::Overwrite(DType::BF16),
    OutputMode::Overwrite(DType::F16),
    OutputMode::AccumulateF32,
];

fn bias_choices(dtype: DType) -> [Option<DType>; 3] {
    [None, Some(DType::F32), Some(dtype)]
}

/// The reference's hand-written roundings agree with the `half` crate on random values of
/// every magnitude (normal, subnormal, overflowing) and on the classic ties; this is what
/// makes the reference trustworthy, not the library under test.
#[test]
fn reference_rounding_is_round_to_nearest_even() {
    assert_eq!(round_bf16_bits(1.0 + 2f32.powi(-8)), 0x3F80);
    assert_eq!(round_bf16_bits(1.0 + 3.0 * 2f32.powi(-8)), 0x3F82);
    assert_eq!(round_bf16_bits(f32::MAX), 0x7F80);
    assert_eq!(round_f16_bits(1.0 + 2f32.powi(-11)), 0x3C00);
    assert_eq!(round_f16_bits(65504.0), 0x7BFF);
    assert_eq!(round_f16_bits(65519.996), 0x7BFF);
    assert_eq!(round_f16_bits(65520.0), 0x7C00);
    assert_eq!(
        round_f16_bits(-(2f32.powi(-25))),
        0x8000,
        "half the smallest subnormal: tie to 0"
    );
    assert_eq!(
        round_f16_bits(3.0 * 2f32.powi(-25)),
        0x0002,
        "1.5 units: tie to even 2"
    );
    assert_eq!(
        round_f16_bits(f32::from_bits(0xFFC0_1234)),
        CANONICAL_NAN_16
    );
    assert_eq!(
        round_bf16_bits(f32::from_bits(0x7F80_0001)),
        CANONICAL_NAN_16
    );
    assert_eq!(
        store_f32_bits(f32::from_bits(0xFFC0_1234)),
        CANONICAL_NAN_F32
    );
    let mut rng = Rng::new(1);
    for _ in 0..200_000 {
        let v = f32::from_bits(rng.next_u32());
        if v.is_nan() {
            continue;
        }
        assert_eq!(
            round_bf16_bits(v),
            sgemm_bi::bf16::from_f32(v).to_bits(),
            "{v:e}"
        );
        assert_eq!(
            round_f16_bits(v),
            sgemm_bi::f16::from_f32(v).to_bits(),
            "{v:e}"
        );
        // The same near f16's and bf16's interesting range.
        let w = f32::from_bits(0x3000_0000 + (rng.next_u32() >> 3))
            * if rng.bool() { -1.0 } else { 1.0 };
        assert_eq!(
            round_f16_bits(w),
            sgemm_bi::f16::from_f32(w).to_bits(),
            "{w:e}"
        );
        assert_eq!(
            round_bf16_bits(w),
            sgemm_bi::bf16::from_f32(w).to_bits(),
            "{w:e}"
        );
    }
}

/// The doc example's arithmetic, by hand: the library is not trivially wrong.
#[test]
fn small_product_by_hand() {
    let engine = cpu();
    // A = [1 2; 3 4], B = [5 6; 7 8]: C = [19 22; 43 50], exactly.
    let a = vec![1.0f32, 2.0, 3.0, 4.0];
    let b = vec![5.0f32, 6.0, 7.0, 8.0];
    let mut c = vec![f32::NAN; 4];
    engine
        .gemm_host(
            &Gemm::dense(2, 2, 2, DType::F32),
            (&a).into(),
            (&b).into(),
            None,
            (&mut c).into(),
        )
        .unwrap();
    let bits: Vec<u32> = c.iter().map(|v| v.to_bits()).collect();
    let want: Vec<u32> = [19.0f32, 22.0, 43.0, 50.0]
        .iter()
        .map(|v| v.to_bits())
        .collect();
    assert_eq!(bits, want);
}

/// Every input dtype × every output mode × every bias choice.
#[test]
fn dtypes_output_modes_and_bias() {
    let engine = cpu();
    let mut rng = Rng::new(2);
    for dtype in DTYPES {
        for mode in OUT_MODES {
            for bias in bias_choices(dtype) {
                let mut s = Shape::new(37, 29, 45, dtype);
                s.mode = mode;
                s.bias = bias;
                s.la = rng.pick(&LAYOUTS);
                s.lb = rng.pick(&LAYOUTS);
                Case::build(&s, &mut rng).check(&engine, "dtype/mode/bias");
            }
        }
    }
}

/// The four A/B layout pairs with leading dimensions larger than minimal, C with ldc > N.
#[test]
fn layouts_with_padded_leading_dimensions() {
    let engine = cpu();
    let mut rng = Rng::new(3);
    for dtype in DTYPES {
        for la in LAYOUTS {
            for lb in LAYOUTS {
                for (pad, mode) in [
                    ((3, 5, 7), OutputMode::Overwrite(dtype)),
                    ((1, 64, 2), OutputMode::AccumulateF32),
                ] {
                    let mut s = Shape::new(23, 41, 19, dtype);
                    s.la = la;
                    s.lb = lb;
                    s.pad = pad;
                    s.mode = mode;
                    s.bias = Some(DType::F32);
                    Case::build(&s, &mut rng).check(&engine, "layouts");
                }
            }
        }
    }
}

/// C with ldc > N: the padding between rows is never written, in any output mode.
#[test]
fn ldc_padding_is_untouched() {
    let engine = cpu();
    let mut rng = Rng::new(4);
    for mode in OUT_MODES {
        for dtype in DTYPES {
            let mut s = Shape::new(17, 13, 21, dtype);
            s.pad = (0, 0, 11);
            s.mode = mode;
            let case = Case::build(&s, &mut rng);
            let got = case.run(&engine);
            let ldc = case.g.c.ldc;
            for i in 0..case.c.len() {
                let written = i / ldc < s.m && i % ldc < s.n;
                if !written {
                    assert_eq!(
                        got.bits(i),
                        case.c.bits(i),
                        "{mode:?} {dtype}: element {i} (padding) was written"
                    );
                }
            }
            assert_same_bits(&got, &case.expected(), "ldc padding");
        }
    }
}

/// Batched calls with batch strides larger than one matrix for A, B and C, and with B
/// broadcast (batch stride 0, shared weights); the gaps between C's entries stay untouched.
#[test]
fn batched_with_strides_and_broadcast_b() {
    let engine = cpu();
    let mut rng = Rng::new(5);
    for dtype in DTYPES {
        for broadcast_b in [false, true] {
            for mode in [OutputMode::Overwrite(dtype), OutputMode::AccumulateF32] {
                let mut s = Shape::new(19, 27, 33, dtype);
                s.batch = 4;
                s.la = rng.pick(&LAYOUTS);
                s.lb = rng.pick(&LAYOUTS);
                s.pad = (2, 1, 3);
                s.gap = (5, 7, 13);
                s.broadcast_b = broadcast_b;
                s.bias = Some(dtype);
                s.mode = mode;
                let case = Case::build(&s, &mut rng);
                assert_eq!(case.g.b.batch_stride == 0, broadcast_b);
                case.check(&engine, "batched");
            }
        }
    }
}

const EDGE: [usize; 9] = [0, 1, 2, 3, 7, 31, 33, 127, 129];

/// Every combination of M, N, K in {0, 1, 2, 3, 7, 31, 33, 127, 129}, rotating layouts,
/// output modes, bias and padding; every input dtype for the shapes up to 33, one dtype in
/// turn for the shapes with a 127 or 129 (to stay fast). K = 0 gives bias or zeros (or C +
/// bias), M or N = 0 leaves C untouched.
#[test]
fn edge_shapes() {
    let engine = cpu();
    let mut rng = Rng::new(7);
    let mut turn = 0usize;
    for m in EDGE {
        for n in EDGE {
            for k in EDGE {
                let dtypes = if m.max(n).max(k) > 33 {
                    vec![DTYPES[(turn / 7) % 3]]
                } else {
                    DTYPES.to_vec()
                };
                for dtype in dtypes {
                    turn += 1;
                    let mut s = Shape::new(m, n, k, dtype);
                    s.la = LAYOUTS[turn % 2];
                    s.lb = LAYOUTS[(turn / 2) % 2];
                    s.mode = OUT_MODES[(turn / 4) % 4];
                    s.bias = bias_choices(dtype)[turn % 3];
                    s.pad = (turn % 3, (turn / 3) % 2, turn % 2);
                    Case::build(&s, &mut rng).check(&engine, "edge shape");
                }
            }
        }
    }
}

/// Shapes past the block sizes a fast backend uses (long K split into blocks whose partial
/// chains are parked and resumed, many rows, many columns, batches of large entries), with
/// ragged tails, in every output mode.
#[test]
fn large_shapes_cross_blocking_boundaries() {
    let engine = cpu();
    let mut rng = Rng::new(17);
    let shapes: [(usize, usize, usize, usize); 9] = [
        (40, 50, 255, 1),
        (40, 50, 256, 1),
        (41, 49, 257, 1),
        (45, 70, 1029, 1),
        (3, 2, 8193, 1),
        (800, 33, 300, 1),
        (37, 1100, 300, 1),
        (130, 97, 513, 2),
        (777, 1031, 3, 1),
    ];
    for (turn, (m, n, k, batch)) in shapes.into_iter().enumerate() {
        let dtype = DTYPES[turn % 3];
        let mut s = Shape::new(m, n, k, dtype);
        s.batch = batch;
        s.la = LAYOUTS[turn % 2];
        s.lb = LAYOUTS[(turn / 2) % 2];
        s.mode = OUT_MODES[(turn + 1) % 4];
        s.bias = bias_choices(dtype)[(turn / 3) % 3];
        s.pad = (1, 2, 3);
        s.gap = (0, 5, 7);
        Case::build(&s, &mut rng).check(&engine, "large shape");
    }
}

/// K = 0, spelled out: zeros, the bias rounded once, or C + bias; `+0.0 + -0.0` is `+0.0`
/// (the chain starts from +0.0), and in accumulate mode a `-0.0` in C becomes `+0.0`.
#[test]
fn k_zero_gives_bias_or_zeros() {
    let engine = cpu();
    let mut rng = Rng::new(8);
    for dtype in DTYPES {
        for mode in OUT_MODES {
            for bias in bias_choices(dtype) {
                let mut s = Shape::new(5, 9, 0, dtype);
                s.mode = mode;
                s.bias = bias;
                s.pad = (0, 0, 2);
                let mut case = Case::build(&s, &mut rng);
                if let Some(b) = case.bias.as_mut() {
                    b.set_bits(
                        1,
                        if b.dtype() == DType::F32 {
                            0x8000_0000
                        } else {
                            0x8000
                        },
                    );
                }
                if mode == OutputMode::AccumulateF32 {
                    case.c.set_bits(2, 0x8000_0000); // -0.0 in C, row 0
                    case.c.set_bits(case.g.c.ldc + 1, 0x8000_0000); // row 1, column 1 (bias -0.0)
                }
                let got = case.run(&engine);
                let ldc = case.g.c.ldc;
                for i in 0..s.m {
                    for j in 0..s.n {
                        let bias_j = case.bias.as_ref().map_or(0.0, |b| b.get(j));
                        let idx = i * ldc + j;
                        let mut want = Buf::filled(mode.dtype(), 1, 0);
                        match mode {
                            OutputMode::Overwrite(_) => want.store(0, 0.0f32 + bias_j),
                            OutputMode::AccumulateF32 => {
                                want.store(0, case.c.get(idx) + (0.0f32 + bias_j))
                            }
                        }
                        assert_eq!(
                            got.bits(idx),
                            want.bits(0),
                            "{dtype} {mode:?} bias {bias:?}: C[{i},{j}]"
                        );
                        if bias.is_none() && mode != OutputMode::AccumulateF32 {
                            assert_eq!(got.bits(idx), 0, "K = 0 without bias gives +0.0");
                        }
                    }
                }
                assert_same_bits(&got, &case.expected(), "K = 0");
            }
        }
    }
}

/// M = 0, N = 0 or batch = 0: the call succeeds and C is untouched, whatever it holds.
#[test]
fn empty_calls_leave_c_untouched() {
    let engine = cpu();
    let mut rng = Rng::new(9);
    for dtype in DTYPES {
        for mode in OUT_MODES {
            for (m, n, k, batch) in [
                (0, 5, 4, 1),
                (6, 0, 4, 1),
                (0, 0, 0, 1),
                (3, 4, 5, 0),
                (0, 3, 0, 2),
                (4, 0, 0, 3),
            ] {
                let mut s = Shape::new(m, n, k, dtype);
                s.batch = batch;
                s.mode = mode;
                s.bias = Some(DType::F32);
                let g = s.gemm();
                let a = Buf::random(dtype, 64, &mut rng, NARROW);
                let b = Buf::random(dtype, 64, &mut rng, NARROW);
                let bias = Buf::random(DType::F32, 64, &mut rng, NARROW);
                let c0 = Buf::random(mode.dtype(), 64, &mut rng, NARROW);
                let mut c = c0.clone();
                engine
                    .gemm_host(&g, a.slice(), b.slice(), Some(bias.slice()), c.slice_mut())
                    .unwrap_or_else(|e| panic!("{g:?}: {e}"));
                assert_same_bits(&c, &c0, &format!("empty call {g:?}"));
                // Empty buffers are enough for an empty call.
                let mut empty_c = Buf::filled(mode.dtype(), 0, 0);
                let (ea, eb, ebias) = (
                    Buf::filled(dtype, 0, 0),
                    Buf::filled(dtype, 0, 0),
                    Buf::filled(DType::F32, 0, 0),
                );
                engine
                    .gemm_host(
                        &g,
                        ea.slice(),
                        eb.slice(),
                        Some(ebias.slice()),
                        empty_c.slice_mut(),
                    )
                    .unwrap_or_else(|e| panic!("{g:?} with empty buffers: {e}"));
            }
        }
    }
}

/// `Gemm::dense` builds a valid descriptor for every shape the contract covers (C5: M, N,
/// K ≥ 0), including K = 0 and N = 0.
#[test]
fn dense_descriptor_accepts_zero_dimensions() {
    let engine = cpu();
    let mut rng = Rng::new(10);
    for dtype in DTYPES {
        for (m, n, k) in [(3, 4, 0), (3, 0, 4), (0, 4, 5), (0, 0, 0), (2, 0, 0)] {
            let g = Gemm::dense(m, n, k, dtype);
            let a = Buf::random(dtype, m * k + 1, &mut rng, NARROW);
            let b = Buf::random(dtype, k * n + 1, &mut rng, NARROW);
            let mut c = Buf::sentinel(dtype, m * n + 1);
            let result = engine.gemm_host(&g, a.slice(), b.slice(), None, c.slice_mut());
            assert!(
                result.is_ok(),
                "Gemm::dense({m}, {n}, {k}, {dtype}) is rejected: {result:?}"
            );
            let mut want = Buf::sentinel(dtype, m * n + 1);
            reference(&g, &a, &b, None, &mut want);
            assert_same_bits(&c, &want, "dense with a zero dimension");
        }
    }
}

/// f32 inputs with products, sums and biases in the subnormal range, and subnormal inputs
/// with normal products: no flush to zero anywhere.
#[test]
fn f32_subnormals_are_not_flushed() {
    let engine = cpu();
    let mut rng = Rng::new(12);
    let subnormal =
        |rng: &mut Rng| (rng.next_u32() & 0x8000_0000) | (1 + rng.next_u32() % 0x7F_FFFF);
    for mode in OUT_MODES {
        let mut s = Shape::new(13, 17, 24, DType::F32);
        s.mode = mode;
        s.bias = Some(DType::F32);
        s.lb = Layout::ColMajor;
        // |a·b| around 2^-140..2^-124: partial sums are subnormal f32; so is the bias.
        let mut case = Case::from_gemm(s.gemm(), &mut rng, (-70, -62));
        let bias = case.bias.as_mut().unwrap();
        for j in 0..bias.len() {
            bias.set_bits(j, subnormal(&mut rng));
        }
        let want = case.expected();
        let tiny = (0..s.m * s.n)
            .filter(|&i| want.get(i) != 0.0 && want.get(i).abs() < f32::MIN_POSITIVE)
            .count();
        if mode == OutputMode::Overwrite(DType::F32) {
            assert!(tiny > 0, "the test must produce subnormal outputs");
        }
        assert_same_bits(
            &case.run(&engine),
            &want,
            &format!("subnormal sums {mode:?}"),
        );

        // Subnormal A times B around 2^40..2^60: normal products (no bias or C to hide them;
        // f16 cannot hold them).
        if !matches!(mode, OutputMode::Overwrite(DType::F32 | DType::BF16)) {
            continue;
        }
        s.bias = None;
        let mut case = Case::from_gemm(s.gemm(), &mut rng, (40, 60));
        for i in 0..case.a.len() {
            case.a.set_bits(i, subnormal(&mut rng));
        }
        let want = case.expected();
        assert!((0..s.m * s.n).all(|i| want.get(i).abs() >= f32::MIN_POSITIVE));
        assert_same_bits(
            &case.run(&engine),
            &want,
            &format!("subnormal inputs {mode:?}"),
        );
    }
}

/// Wide exponents (a row's magnitude from 2^-30 to 2^27): f16 outputs overflow to ±Inf and
/// underflow to subnormals and zeros, bf16 outputs round at every magnitude.
#[test]
fn wide_exponents_overflow_and_underflow_on_output() {
    let engine = cpu();
    let mut rng = Rng::new(13);
    for mode in OUT_MODES {
        let mut s = Shape::new(20, 16, 9, DType::F32);
        s.mode = mode;
        let mut case = Case::from_gemm(s.gemm(), &mut rng, (-2, 2));
        for i in 0..s.m {
            let e = -30 + 3 * i as i32;
            for k in 0..s.k {
                let v = rng.value_bits(DType::F32, (e - 2, e + 2));
                case.a.set_bits(i * s.k + k, v);
            }
        }
        let want = case.expected();
        if mode == OutputMode::Overwrite(DType::F16) {
            let bits: Vec<u32> = (0..s.m * s.n).map(|i| want.bits(i) & 0x7FFF).collect();
            assert!(bits.contains(&0x7C00), "some f16 outputs overflow");
            assert!(
                bits.iter().any(|&b| b != 0 && b < 0x0400),
                "some f16 outputs are subnormal"
            );
            assert!(bits.contains(&0), "some f16 outputs underflow to zero");
        }
        assert_same_bits(
            &case.run(&engine),
            &want,
            &format!("wide exponents {mode:?}"),
        );
    }
}

/// Hand-computed bits that single out the contract's choices: the chain starts from +0.0,
/// every step is a fused multiply-add (one rounding), and a bias is added after the chain.
#[test]
fn chain_is_fused_and_starts_from_positive_zero() {
    let engine = cpu();
    let run = |a: &[f32], b: &[f32], bias: Option<f32>| -> u32 {
        let k = a.len();
        let mut g = Gemm::dense(1, 1, k, DType::F32);
        g.bias = bias.map(|_| DType::F32);
        let bias_buf = bias.map(|v| vec![v]);
        let mut c = vec![f32::NAN];
        engine
            .gemm_host(
                &g,
                a.into(),
                b.into(),
                bias_buf.as_ref().map(|v| v.into()),
                (&mut c).into(),
            )
            .unwrap();
        c[0].to_bits()
    };
    // -0.0 · 1 = -0.0, and +0.0 + -0.0 = +0.0: the chain starts from +0.0.
    assert_eq!(
        run(&[-0.0], &[1.0], None),
        0x0000_0000,
        "fma(-0, 1, +0) = +0"
    );
    assert_eq!(run(&[-0.0, -0.0], &[1.0, 3.0], None), 0x0000_0000);
    // An exact product of -2^-200 rounds to -0.0 inside the fma (sign of the exact result);
    // a separate multiply and add would give -0.0 + +0.0 = +0.0.
    assert_eq!(
        run(&[-(2f32.powi(-100))], &[2f32.powi(-100)], None),
        0x8000_0000
    );
    // (1 + 2^-12)² = 1 + 2^-11 + 2^-24: fused, adding -(1 + 2^-11) leaves 2^-24; a rounded
    // product would leave 0.
    let x = 1.0 + 2f32.powi(-12);
    let y = -(1.0 + 2f32.powi(-11));
    assert_eq!(
        run(&[y, x], &[1.0, x], None),
        2f32.powi(-24).to_bits(),
        "fused step"
    );
    // Ascending k: 2^24 + 1 - 2^24 is 0 in that order, 1 in the reverse order.
    assert_eq!(
        run(
            &[2f32.powi(24), 1.0, -(2f32.powi(24))],
            &[1.0, 1.0, 1.0],
            None
        ),
        0
    );
    assert_eq!(
        run(
            &[-(2f32.powi(24)), 1.0, 2f32.powi(24)],
            &[1.0, 1.0, 1.0],
            None
        ),
        1f32.to_bits()
    );
    // The bias is one add after the chain: chain 1 + 2^24 ties to 2^24, plus bias 1 ties to
    // 2^24 again; a chain started from the bias would give 2 + 2^24 exactly.
    assert_eq!(
        run(&[1.0, 2f32.powi(24)], &[1.0, 1.0], Some(1.0)),
        2f32.powi(24).to_bits()
    );
    // Bias -0.0 with a chain of +0.0 is +0.0.
    assert_eq!(run(&[0.0], &[5.0], Some(-0.0)), 0);
}

/// The engine is usable from threads (Send + Sync) and says which tiers it runs: both (the
/// tensor-core tier as the sm_90 model, tests/cpu_tc_model.rs).
#[test]
fn cpu_engine_runs_both_tiers() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<Engine>();
    let engine = cpu();
    assert_eq!(engine.device(), sgemm_bi::Device::Cpu);
    assert!(engine.supports(Tier::Scalar));
    assert!(engine.supports(Tier::TensorCores));
    assert!(engine.supports(Tier::Auto));
    assert_eq!(engine.compute_capability(), None);
}

fn random_case(p: &RandomCall) -> Case {
    let dtype = DTYPES[p.dtype];
    let mut s = Shape::new(p.m, p.n, p.k, dtype);
    s.batch = p.batch;
    s.la = LAYOUTS[p.la as usize];
    s.lb = LAYOUTS[p.lb as usize];
    s.pad = p.pad;
    s.gap = p.gap;
    s.broadcast_b = p.broadcast_b;
    s.bias = bias_choices(dtype)[p.bias];
    s.mode = OUT_MODES[p.mode];
    Case::build(&s, &mut Rng::new(p.seed))
}

#[derive(Debug, Clone)]
struct RandomCall {
    m: usize,
    n: usize,
    k: usize,
    batch: usize,
    dtype: usize,
    la: bool,
    lb: bool,
    pad: (usize, usize, usize),
    gap: (usize, usize, usize),
    broadcast_b: bool,
    bias: usize,
    mode: usize,
    seed: u64,
}

fn random_call() -> impl Strategy<Value = RandomCall> {
    (
        (0usize..=64, 0usize..=64, 0usize..=64, 0usize..=3),
        (0usize..3, any::<bool>(), any::<bool>()),
        (
            (0usize..4, 0usize..4, 0usize..4),
            (0usize..6, 0usize..6, 0usize..6),
        ),
        (any::<bool>(), 0usize..3, 0usize..4, any::<u64>()),
    )
        .prop_map(
            |((m, n, k, batch), (dtype, la, lb), (pad, gap), (broadcast_b, bias, mode, seed))| {
                RandomCall {
                    m,
                    n,
                    k,
                    batch,
                    dtype,
                    la,
                    lb,
                    pad,
                    gap,
                    broadcast_b,
                    bias,
                    mode,
                    seed,
                }
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 192, failure_persistence: None, ..ProptestConfig::default() })]

    /// Random shapes ≤ 64, layouts, dtypes, batch ≤ 3 (with padding, gaps and broadcast B),
    /// bias and output modes: the whole C buffer has the reference's bits.
    #[test]
    fn random_calls_match_reference(p in random_call()) {
        let engine = cpu();
        let case = random_case(&p);
        let got = case.run(&engine);
        let want = case.expected();
        let first = (0..got.len()).find(|&i| got.bits(i) != want.bits(i));
        prop_assert!(
            first.is_none(),
            "{:?}: element {} is {:#x}, the reference says {:#x}",
            case.g,
            first.unwrap_or(0),
            got.bits(first.unwrap_or(0)),
            want.bits(first.unwrap_or(0))
        );
    }
}
