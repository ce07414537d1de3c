//! Every `Error` a CPU engine can return, with its exact variant and a message that names the
//! operand. After each error C is unmodified and the engine still computes the reference's
//! bits. (`WrongDevice`, `Misaligned`, `InaccessibleMemory`, `Driver` and `Launch` need a
//! CUDA engine: tests/gpu_hardening.rs.)

mod common;

use common::*;
use sgemm_bi::{
    DType, Device, Engine, Error, ErrorOperand, Gemm, GemmPointers, Layout, OutputMode, Stream,
    Tier,
};
use std::ptr::{null, null_mut};

/// A valid batched call with padding and an f32 bias, the starting point of every error.
fn valid(dtype: DType, rng: &mut Rng) -> Case {
    let mut s = Shape::new(5, 7, 6, dtype);
    s.batch = 2;
    s.la = Layout::ColMajor;
    s.pad = (1, 2, 3);
    s.gap = (1, 1, 2);
    s.bias = Some(DType::F32);
    Case::build(&s, rng)
}

/// The engine still works: a fresh call has the reference's bits.
fn still_works(engine: &Engine, rng: &mut Rng) {
    for dtype in DTYPES {
        valid(dtype, rng).check(engine, "after an error");
    }
}

/// Runs `g` through the safe API on the case's buffers (any of which may be replaced) and
/// returns its error, after checking that C was not written.
fn host_err(engine: &Engine, g: &Gemm, case: &Case) -> Error {
    let mut c = case.c.clone();
    let r = engine.gemm_host(
        g,
        case.a.slice(),
        case.b.slice(),
        case.bias.as_ref().map(Buf::slice),
        c.slice_mut(),
    );
    assert_same_bits(&c, &case.c, "C after a rejected call");
    r.expect_err("the call must be rejected")
}

fn pointers(case: &Case, c: &mut Buf) -> GemmPointers {
    GemmPointers {
        a: case.a.as_ptr(),
        b: case.b.as_ptr(),
        bias: case.bias.as_ref().map_or(null(), Buf::as_ptr),
        c: c.as_mut_ptr(),
    }
}

/// Runs `g` through the raw API with `edit` applied to valid pointers, checking that C was
/// not written.
fn raw(
    engine: &Engine,
    g: &Gemm,
    case: &Case,
    edit: impl FnOnce(&mut GemmPointers),
) -> sgemm_bi::Result<()> {
    let mut c = case.c.clone();
    let mut p = pointers(case, &mut c);
    edit(&mut p);
    // SAFETY: every non-null pointer is a live host buffer at least as long as the span `g`
    // gives it (the case was built for `g`'s shape), C is a separate allocation, and this
    // thread is the only user of the buffers.
    let r = unsafe { engine.gemm(g, p, Stream::DEFAULT) };
    if r.is_err() {
        assert_same_bits(&c, &case.c, "C after a rejected call");
    }
    r
}

fn assert_mentions(err: &Error, words: &[&str]) {
    let msg = err.to_string();
    for w in words {
        assert!(
            msg.contains(w),
            "the message {msg:?} of {err:?} should mention {w:?}"
        );
    }
}

#[test]
fn null_pointers_are_rejected() {
    let engine = cpu();
    let mut rng = Rng::new(201);
    for dtype in DTYPES {
        let case = valid(dtype, &mut rng);
        let g = case.g;
        type Edit = fn(&mut GemmPointers);
        let cases: [(Edit, ErrorOperand, &str); 4] = [
            (|p| p.a = null(), ErrorOperand::A, "null pointer for A"),
            (|p| p.b = null(), ErrorOperand::B, "null pointer for B"),
            (
                |p| p.bias = null(),
                ErrorOperand::Bias,
                "null pointer for bias",
            ),
            (|p| p.c = null_mut(), ErrorOperand::C, "null pointer for C"),
        ];
        for (edit, which, words) in cases {
            let err = raw(&engine, &g, &case, edit).expect_err("a null pointer must be rejected");
            assert!(
                matches!(err, Error::NullPointer(w) if w == which),
                "{err:?}"
            );
            assert_mentions(&err, &[words]);
            still_works(&engine, &mut rng);
        }
        // The safe API with a bias in the descriptor and no bias slice.
        let mut c = case.c.clone();
        let err = engine
            .gemm_host(&g, case.a.slice(), case.b.slice(), None, c.slice_mut())
            .expect_err("a missing bias must be rejected");
        assert!(
            matches!(err, Error::NullPointer(ErrorOperand::Bias)),
            "{err:?}"
        );
        assert_mentions(&err, &["bias"]);
        assert_same_bits(&c, &case.c, "C after a missing bias");
        // The raw API with both A and B null reports A first, and still writes nothing.
        let err = raw(&engine, &g, &case, |p| {
            p.a = null();
            p.b = null();
        })
        .unwrap_err();
        assert!(
            matches!(err, Error::NullPointer(ErrorOperand::A)),
            "{err:?}"
        );
    }
}

/// Null pointers for buffers a call does not read or write are fine: A and B when K = 0 (the
/// result is the bias), everything when M, N or the batch count is 0.
#[test]
fn null_pointers_allowed_for_untouched_buffers() {
    let engine = cpu();
    let mut rng = Rng::new(202);
    for dtype in DTYPES {
        for mode in [OutputMode::Overwrite(dtype), OutputMode::AccumulateF32] {
            let mut s = Shape::new(4, 6, 0, dtype);
            s.batch = 2;
            s.gap = (0, 0, 3);
            s.bias = Some(dtype);
            s.mode = mode;
            let case = Case::build(&s, &mut rng);
            let want = case.expected();
            let mut c = case.c.clone();
            let mut p = pointers(&case, &mut c);
            p.a = null();
            p.b = null();
            // SAFETY: K = 0, so A and B are not read; the bias and C are live buffers of the
            // spans the descriptor gives them.
            unsafe { engine.gemm(&case.g, p, Stream::DEFAULT) }
                .unwrap_or_else(|e| panic!("K = 0 with null A and B: {e}"));
            assert_same_bits(&c, &want, "K = 0 with null A and B");
        }
        for (m, n, k, batch) in [(0, 5, 3, 1), (4, 0, 3, 1), (4, 5, 3, 0), (0, 0, 0, 2)] {
            let mut s = Shape::new(m, n, k, dtype);
            s.batch = batch;
            s.bias = Some(DType::F32);
            let p = GemmPointers {
                a: null(),
                b: null(),
                bias: null(),
                c: null_mut(),
            };
            // SAFETY: the call is empty (M, N or batch is 0): it touches no memory.
            unsafe { engine.gemm(&s.gemm(), p, Stream::DEFAULT) }.unwrap_or_else(|e| {
                panic!("empty call {m}×{n}×{k} batch {batch} with null pointers: {e}")
            });
        }
    }
    still_works(&engine, &mut rng);
}

#[test]
fn bad_leading_dimensions_are_rejected() {
    let engine = cpu();
    let mut rng = Rng::new(203);
    for dtype in DTYPES {
        let case = valid(dtype, &mut rng);
        let (m, n, k) = (case.g.m, case.g.n, case.g.k);
        let mut edits: Vec<(Gemm, ErrorOperand, usize)> = Vec::new();
        for layout in [Layout::RowMajor, Layout::ColMajor] {
            let min_a = if layout == Layout::RowMajor { k } else { m };
            let mut g = case.g;
            g.a.layout = layout;
            g.a.ld = min_a - 1;
            edits.push((g, ErrorOperand::A, min_a));
            let min_b = if layout == Layout::RowMajor { n } else { k };
            let mut g = case.g;
            g.b.layout = layout;
            g.b.ld = min_b - 1;
            edits.push((g, ErrorOperand::B, min_b));
        }
        let mut g = case.g;
        g.c.ldc = n - 1;
        edits.push((g, ErrorOperand::C, n));
        let mut g = case.g;
        g.a.ld = 0;
        edits.push((g, ErrorOperand::A, m));
        for (g, which, min) in edits {
            let err = host_err(&engine, &g, &case);
            assert!(
                matches!(err, Error::BadLeadingDimension { operand, .. } if operand == which),
                "{err:?}"
            );
            let ld = match which {
                ErrorOperand::A => g.a.ld,
                ErrorOperand::B => g.b.ld,
                _ => g.c.ldc,
            };
            assert_eq!(
                err,
                Error::BadLeadingDimension {
                    operand: which,
                    ld,
                    min
                }
            );
            assert_mentions(
                &err,
                &[
                    &format!("leading dimension of {which} is {ld}"),
                    &min.to_string(),
                ],
            );
            // The raw API rejects it the same way.
            assert_eq!(raw(&engine, &g, &case, |_| {}).unwrap_err(), err);
            still_works(&engine, &mut rng);
        }
    }
}

#[test]
fn unsupported_dtypes_are_rejected() {
    let engine = cpu();
    let mut rng = Rng::new(204);
    for dtype in DTYPES {
        let case = valid(dtype, &mut rng);
        // A and B of different dtypes.
        for other in DTYPES.into_iter().filter(|&d| d != dtype) {
            let mut g = case.g;
            g.b.dtype = other;
            let err = host_err(&engine, &g, &case);
            assert!(matches!(err, Error::UnsupportedDtype(_)), "{err:?}");
            assert_mentions(&err, &[&format!("A is {dtype}"), &format!("B is {other}")]);
        }
        // A bias that is neither f32 nor the input dtype.
        for bias in DTYPES
            .into_iter()
            .filter(|&d| d != dtype && d != DType::F32)
        {
            let mut g = case.g;
            g.bias = Some(bias);
            let err = host_err(&engine, &g, &case);
            assert!(matches!(err, Error::UnsupportedDtype(_)), "{err:?}");
            assert_mentions(&err, &[&format!("bias is {bias}")]);
        }
        still_works(&engine, &mut rng);
    }
    // The tensor-core tier with f32 inputs (rejected for the dtype, on any device).
    let case = valid(DType::F32, &mut rng);
    let g = Gemm {
        tier: Tier::TensorCores,
        ..case.g
    };
    let err = host_err(&engine, &g, &case);
    assert!(matches!(err, Error::UnsupportedDtype(_)), "{err:?}");
    assert_mentions(&err, &["tensor-core", "f32"]);
    still_works(&engine, &mut rng);
}

/// The CPU engine runs both tiers, so it never returns `TierUnavailable`: a tensor-core
/// call in bf16 or f16 (the sm_90 model) succeeds through both entry points, with the same
/// bits.
#[test]
fn tensor_cores_run_on_the_cpu() {
    let engine = cpu();
    assert!(engine.supports(Tier::Scalar) && engine.supports(Tier::TensorCores));
    let mut rng = Rng::new(205);
    for dtype in [DType::BF16, DType::F16] {
        let case = valid(dtype, &mut rng);
        let g = Gemm {
            tier: Tier::TensorCores,
            ..case.g
        };
        let mut c = case.c.clone();
        engine
            .gemm_host(
                &g,
                case.a.slice(),
                case.b.slice(),
                case.bias.as_ref().map(Buf::slice),
                c.slice_mut(),
            )
            .unwrap_or_else(|e| panic!("{dtype}: {e}"));
        let mut c_raw = case.c.clone();
        let p = pointers(&case, &mut c_raw);
        // SAFETY: the case's buffers span what `g` (its shape, another tier) needs; C is a
        // separate allocation used by this thread only.
        unsafe { engine.gemm(&g, p, Stream::DEFAULT) }.unwrap();
        assert_same_bits(&c_raw, &c, "the raw and the safe API");
        assert!(c.all_bits() != case.c.all_bits(), "{dtype}: C was written");
        still_works(&engine, &mut rng);
    }
}

/// One element short for each buffer: the error names the buffer, its length and the span
/// the call needs (which is the span the layout documentation gives).
#[test]
fn short_buffers_are_rejected() {
    let engine = cpu();
    let mut rng = Rng::new(206);
    for dtype in DTYPES {
        let case = valid(dtype, &mut rng);
        let g = case.g;
        let need_a = span(g.a.layout, g.a.ld, g.m, g.k, g.batch, g.a.batch_stride);
        let need_b = span(g.b.layout, g.b.ld, g.k, g.n, g.batch, g.b.batch_stride);
        let need_c = span(
            Layout::RowMajor,
            g.c.ldc,
            g.m,
            g.n,
            g.batch,
            g.c.batch_stride,
        );
        let bias = case.bias.as_ref().unwrap();
        let short = |b: &Buf, len: usize| -> Buf {
            let mut s = Buf::filled(b.dtype(), len, 0);
            for i in 0..len {
                s.set_bits(i, b.bits(i));
            }
            s
        };
        let (a1, b1, bias1) = (
            short(&case.a, need_a - 1),
            short(&case.b, need_b - 1),
            short(bias, g.n - 1),
        );
        let mut c1 = short(&case.c, need_c - 1);
        let c1_before = c1.clone();
        let mut c = case.c.clone();
        let full = (case.a.slice(), case.b.slice(), bias.slice());
        let runs = [
            (a1.slice(), full.1, full.2, ErrorOperand::A, dtype, need_a),
            (full.0, b1.slice(), full.2, ErrorOperand::B, dtype, need_b),
            (
                full.0,
                full.1,
                bias1.slice(),
                ErrorOperand::Bias,
                DType::F32,
                g.n,
            ),
        ];
        for (a, b, bi, which, dt, needed) in runs {
            let err = engine
                .gemm_host(&g, a, b, Some(bi), c.slice_mut())
                .unwrap_err();
            assert_eq!(
                err,
                Error::BufferTooSmall {
                    operand: which,
                    dtype: dt,
                    len: needed - 1,
                    needed
                }
            );
            assert_mentions(
                &err,
                &[
                    &format!("{which} holds {}", needed - 1),
                    &needed.to_string(),
                ],
            );
            assert_same_bits(&c, &case.c, "C after a short input");
        }
        let err = engine
            .gemm_host(&g, full.0, full.1, Some(full.2), c1.slice_mut())
            .unwrap_err();
        assert_eq!(
            err,
            Error::BufferTooSmall {
                operand: ErrorOperand::C,
                dtype,
                len: need_c - 1,
                needed: need_c
            }
        );
        assert_mentions(&err, &["C holds"]);
        assert_same_bits(&c1, &c1_before, "a short C after its rejection");
        // Exactly the span is enough.
        let (a0, b0, bias0) = (
            short(&case.a, need_a),
            short(&case.b, need_b),
            short(bias, g.n),
        );
        let mut c0 = short(&case.c, need_c);
        engine
            .gemm_host(
                &g,
                a0.slice(),
                b0.slice(),
                Some(bias0.slice()),
                c0.slice_mut(),
            )
            .expect("buffers exactly as long as their spans");
        let mut want = short(&case.c, need_c);
        reference(&g, &a0, &b0, Some(&bias0), &mut want);
        assert_same_bits(&c0, &want, "exact-length buffers");
        still_works(&engine, &mut rng);
    }
}

/// A slice of another dtype than the descriptor says, for each buffer.
#[test]
fn dtype_mismatches_are_rejected() {
    let engine = cpu();
    let mut rng = Rng::new(207);
    for dtype in DTYPES {
        let case = valid(dtype, &mut rng);
        let g = case.g;
        let other = if dtype == DType::BF16 {
            DType::F16
        } else {
            DType::BF16
        };
        let as_other = |b: &Buf| Buf::random(other, b.len(), &mut Rng::new(1), NARROW);
        let (a2, b2, bias2) = (
            as_other(&case.a),
            as_other(&case.b),
            as_other(case.bias.as_ref().unwrap()),
        );
        let full = (
            case.a.slice(),
            case.b.slice(),
            case.bias.as_ref().unwrap().slice(),
        );
        let mut c = case.c.clone();
        let runs = [
            (a2.slice(), full.1, full.2, ErrorOperand::A, dtype),
            (full.0, b2.slice(), full.2, ErrorOperand::B, dtype),
            (
                full.0,
                full.1,
                bias2.slice(),
                ErrorOperand::Bias,
                DType::F32,
            ),
        ];
        for (a, b, bi, which, expected) in runs {
            let err = engine
                .gemm_host(&g, a, b, Some(bi), c.slice_mut())
                .unwrap_err();
            assert_eq!(
                err,
                Error::DtypeMismatch {
                    operand: which,
                    given: other,
                    expected
                }
            );
            assert_mentions(&err, &[&format!("{which} is {other}"), expected.name()]);
            assert_same_bits(&c, &case.c, "C after a mismatched input");
        }
        // C of the wrong dtype, in overwrite and in accumulate mode (which needs f32).
        for mode in [OutputMode::Overwrite(dtype), OutputMode::AccumulateF32] {
            let g = Gemm {
                c: sgemm_bi::Output { mode, ..g.c },
                ..g
            };
            let wrong = if mode.dtype() == DType::BF16 {
                DType::F16
            } else {
                DType::BF16
            };
            let mut c2 = Buf::random(wrong, case.c.len(), &mut rng, NARROW);
            let before = c2.clone();
            let err = engine
                .gemm_host(&g, full.0, full.1, Some(full.2), c2.slice_mut())
                .unwrap_err();
            assert_eq!(
                err,
                Error::DtypeMismatch {
                    operand: ErrorOperand::C,
                    given: wrong,
                    expected: mode.dtype()
                }
            );
            assert_mentions(&err, &[&format!("C is {wrong}")]);
            assert_same_bits(&c2, &before, "C of the wrong dtype");
        }
        still_works(&engine, &mut rng);
    }
}

/// Extents that overflow the address space, and batch entries of C that overlap.
#[test]
fn overflowing_and_overlapping_extents_are_rejected() {
    let engine = cpu();
    let mut rng = Rng::new(208);
    let huge = usize::MAX / 2;
    for dtype in DTYPES {
        let case = valid(dtype, &mut rng);
        let g0 = case.g;
        let mut edits: Vec<(Gemm, ErrorOperand, &str)> = Vec::new();
        // M × ld past usize.
        let mut g = g0;
        g.a.layout = Layout::RowMajor;
        g.a.ld = huge;
        edits.push((g, ErrorOperand::A, "extent of A"));
        let mut g = g0;
        g.b.ld = huge;
        edits.push((g, ErrorOperand::B, "extent of B"));
        let mut g = g0;
        g.c.ldc = huge;
        g.c.batch_stride = 0;
        g.batch = 1;
        edits.push((g, ErrorOperand::C, "extent of C"));
        // batch × stride past usize.
        let mut g = g0;
        g.batch = huge;
        g.a.batch_stride = 3;
        edits.push((g, ErrorOperand::A, "extent of A"));
        // A huge M: fits in usize elements, not in isize bytes.
        let mut g = g0;
        g.m = 1 << 62;
        g.k = 1;
        g.a.layout = Layout::ColMajor;
        g.a.ld = 1 << 62;
        g.batch = 1;
        edits.push((g, ErrorOperand::A, "extent of A"));
        for (g, which, words) in edits {
            let err = host_err(&engine, &g, &case);
            assert!(
                matches!(&err, Error::Overflow { operand, .. } if *operand == which),
                "{g:?}: {err:?}"
            );
            assert_mentions(&err, &[&format!("extent of {which}"), words]);
            assert_eq!(raw(&engine, &g, &case, |_| {}).unwrap_err(), err);
            still_works(&engine, &mut rng);
        }
        // C's batch entries overlapping (stride one element short, and zero).
        let one_c = (g0.m - 1) * g0.c.ldc + g0.n;
        for stride in [one_c - 1, 0] {
            let mut g = g0;
            g.c.batch_stride = stride;
            let err = host_err(&engine, &g, &case);
            assert_eq!(
                err,
                Error::OverlappingBatches {
                    operand: ErrorOperand::C,
                    stride,
                    span: one_c
                },
                "{g:?}"
            );
            assert_mentions(&err, &["overlap", "C"]);
            assert_eq!(raw(&engine, &g, &case, |_| {}).unwrap_err(), err);
            still_works(&engine, &mut rng);
        }
    }
}

/// Without a CUDA driver or device, a CUDA engine is a typed error, never a panic, and the
/// CPU engine still works.
#[test]
fn cuda_engine_without_a_gpu_is_an_error() {
    let mut rng = Rng::new(209);
    match Engine::new(Device::Cuda(0)) {
        Err(Error::NoDriver(msg)) => assert!(!msg.is_empty()),
        Err(Error::NoDevice {
            ordinal: 0,
            count: 0,
        }) => {}
        Err(e) => panic!("Engine::new(Cuda(0)) without a GPU: {e:?}"),
        Ok(e) => eprintln!(
            "a CUDA device is present ({e:?}): only the error for a missing ordinal is checked"
        ),
    }
    let ordinal = 1_000;
    match Engine::new(Device::Cuda(ordinal)) {
        Err(err @ Error::NoDriver(_)) => assert_mentions(&err, &["no CUDA driver", "Device::Cpu"]),
        Err(err @ Error::NoDevice { ordinal: 1_000, .. }) => assert_mentions(&err, &["1000"]),
        other => panic!("Engine::new(Cuda({ordinal})): {other:?}"),
    }
    still_works(&cpu(), &mut rng);
}

/// C sharing bytes with A, B or the bias is rejected before anything runs (the inputs and C
/// unchanged), with both byte ranges in the error; C right after an input, and A and B
/// sharing memory, are fine.
#[test]
fn output_overlapping_an_input_is_rejected() {
    let engine = cpu();
    let mut rng = Rng::new(210);
    for dtype in DTYPES {
        // One allocation holding A, then B, then C, then the bias, each at its own offset.
        let mut s = Shape::new(6, 5, 7, dtype);
        s.bias = Some(dtype);
        let g = s.gemm();
        let (na, nb, nc) = (g.m * g.k, g.k * g.n, g.m * g.n);
        let mut all = Buf::random(dtype, na + nb + nc + g.n, &mut rng, NARROW);
        let before = all.clone();
        let base = all.as_mut_ptr() as usize;
        let size = dtype.size();
        let at = |elem: usize| (base + elem * size) as *mut std::ffi::c_void;
        let (a, b, c, bias) = (0, na, na + nb, na + nb + nc);
        let run = |c_at: usize, bias_at: usize| {
            let p = GemmPointers {
                a: at(a),
                b: at(b),
                bias: at(bias_at),
                c: at(c_at),
            };
            // SAFETY: every span lies inside `all` (C's too: c_at + nc <= its length), which
            // nothing else uses; a rejected call touches no memory.
            unsafe { engine.gemm(&g, p, Stream::DEFAULT) }
        };
        let range = |elem: usize, n: usize| base + elem * size..base + (elem + n) * size;
        let cases = [
            (a, bias, ErrorOperand::A, range(a, na)),
            (b + nb - 1, bias, ErrorOperand::B, range(b, nb)),
            (b - nc + 1, bias, ErrorOperand::A, range(a, na)),
            (c, c + nc - 1, ErrorOperand::Bias, range(c + nc - 1, g.n)),
        ];
        for (c_at, bias_at, input, other) in cases {
            let err = run(c_at, bias_at).expect_err("C overlapping an input must be rejected");
            assert_eq!(
                err,
                Error::OverlappingOperands {
                    output: ErrorOperand::C,
                    input,
                    c: range(c_at, nc),
                    other
                }
            );
            assert_mentions(&err, &["overlaps", &format!("overlaps {input}"), "0x"]);
            assert_same_bits(&all, &before, "the shared buffer after a rejected call");
            still_works(&engine, &mut rng);
        }
        // C right after B: no byte in common.
        run(c, bias).expect("C adjacent to B");
        let mut want = before.clone();
        let (a0, b0, bias0) = (
            sub(&before, a, na),
            sub(&before, b, nb),
            sub(&before, bias, g.n),
        );
        let mut c0 = sub(&before, c, nc);
        reference(&g, &a0, &b0, Some(&bias0), &mut c0);
        for i in 0..nc {
            want.set_bits(c + i, c0.bits(i));
        }
        assert_same_bits(&all, &want, "C right after B in one buffer");
    }
    // B = Aᵀ read from A's memory: inputs may share memory.
    let s = Shape::new(9, 9, 4, DType::F32);
    let mut g = s.gemm();
    g.b = sgemm_bi::Operand::col_major(DType::F32, 4);
    let case = Case::from_gemm(g, &mut rng, NARROW);
    let mut c = case.c.clone();
    let p = GemmPointers {
        a: case.a.as_ptr(),
        b: case.a.as_ptr(),
        bias: null(),
        c: c.as_mut_ptr(),
    };
    // SAFETY: A spans 36 elements of case.a (plus a guard), B = Aᵀ the same ones; C is
    // separate.
    unsafe { engine.gemm(&g, p, Stream::DEFAULT) }.expect("A·Aᵀ with B = A");
    let mut want = case.c.clone();
    reference(&g, &case.a, &case.a, None, &mut want);
    assert_same_bits(&c, &want, "A·Aᵀ");
}

/// `len` elements of `b` from `start`, as a buffer of their own.
fn sub(b: &Buf, start: usize, len: usize) -> Buf {
    let mut s = Buf::filled(b.dtype(), len, 0);
    for i in 0..len {
        s.set_bits(i, b.bits(start + i));
    }
    s
}

/// A size, leading dimension or stride above `isize::MAX` — what a negative number becomes
/// on its way through C or Python — is an `Overflow` naming the field, even in a call that
/// would be empty or would not use it.
#[test]
fn sizes_above_isize_max_are_rejected() {
    let engine = cpu();
    let mut rng = Rng::new(211);
    let case = valid(DType::F32, &mut rng);
    let neg = |x: i64| x as usize;
    type Edit = fn(&mut Gemm, usize);
    let fields: [(Edit, ErrorOperand, &str); 10] = [
        (|g, v| g.m = v, ErrorOperand::A, "m is"),
        (|g, v| g.n = v, ErrorOperand::B, "n is"),
        (|g, v| g.k = v, ErrorOperand::A, "k is"),
        (|g, v| g.batch = v, ErrorOperand::A, "batch is"),
        (
            |g, v| g.a.ld = v,
            ErrorOperand::A,
            "leading dimension of A is",
        ),
        (
            |g, v| g.a.batch_stride = v,
            ErrorOperand::A,
            "batch stride of A is",
        ),
        (
            |g, v| g.b.ld = v,
            ErrorOperand::B,
            "leading dimension of B is",
        ),
        (
            |g, v| g.b.batch_stride = v,
            ErrorOperand::B,
            "batch stride of B is",
        ),
        (|g, v| g.c.ldc = v, ErrorOperand::C, "ldc is"),
        (
            |g, v| g.c.batch_stride = v,
            ErrorOperand::C,
            "batch stride of C is",
        ),
    ];
    for (edit, which, words) in fields {
        for (v, signed) in [(neg(-1), "-1"), (neg(-4096), "-4096"), (neg(i64::MIN), "")] {
            for empty in [false, true] {
                let mut g = case.g;
                edit(&mut g, v);
                if empty {
                    // N = 0 (or M = 0 when N is the field): nothing would be read or written.
                    if words == "n is" {
                        g.m = 0;
                    } else {
                        g.n = 0;
                    }
                }
                let err = host_err(&engine, &g, &case);
                assert!(
                    matches!(&err, Error::Overflow { operand, .. } if *operand == which),
                    "{g:?}: {err:?}"
                );
                assert_mentions(&err, &[words, &v.to_string(), signed, "negative"]);
                assert_eq!(raw(&engine, &g, &case, |_| {}).unwrap_err(), err);
            }
        }
        // isize::MAX itself is a size (its extent then overflows, or the call is empty).
        let mut g = case.g;
        edit(&mut g, isize::MAX as usize);
        g.n = if words == "n is" { g.n } else { 0 };
        g.m = if words == "n is" { 0 } else { g.m };
        if let Err(e) = raw(&engine, &g, &case, |_| {}) {
            assert!(!e.to_string().contains("negative"), "{g:?}: {e}");
        }
        still_works(&engine, &mut rng);
    }
}

/// The batch strides of an unbatched call are ignored, so any value up to `isize::MAX` is
/// accepted and changes nothing, on both tiers. (Found by fuzzing the C ABI: the CPU backend
/// multiplied the ignored stride by the element size and overflowed.)
#[test]
fn ignored_batch_strides_may_hold_any_value() {
    let engine = cpu();
    let mut rng = Rng::new(212);
    for dtype in DTYPES {
        for stride in [isize::MAX as usize, isize::MAX as usize / 2 + 1, 12345] {
            let mut s = Shape::new(9, 7, 5, dtype);
            s.bias = Some(DType::F32);
            s.lb = Layout::ColMajor;
            let mut case = Case::build(&s, &mut rng);
            case.g.a.batch_stride = stride;
            case.g.b.batch_stride = stride;
            case.g.c.batch_stride = stride;
            case.check(&engine, &format!("batch 1, batch strides {stride}"));
            if dtype != DType::F32 && engine.supports(Tier::TensorCores) {
                let mut g = case.g;
                g.tier = Tier::TensorCores;
                let mut c = case.c.clone();
                let mut c_default = case.c.clone();
                let run = |g: &Gemm, c: &mut Buf| {
                    engine.gemm_host(
                        g,
                        case.a.slice(),
                        case.b.slice(),
                        case.bias.as_ref().map(Buf::slice),
                        c.slice_mut(),
                    )
                };
                run(&g, &mut c).unwrap();
                let mut plain = g;
                (
                    plain.a.batch_stride,
                    plain.b.batch_stride,
                    plain.c.batch_stride,
                ) = (0, 0, 0);
                run(&plain, &mut c_default).unwrap();
                assert_same_bits(&c, &c_default, "tensor cores, ignored batch strides");
            }
        }
    }
}
