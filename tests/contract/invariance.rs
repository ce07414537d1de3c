//! Batch invariance (C2), by slicing: the rows of a call do not depend on M, its columns not
//! on N, a batch entry not on the batch count. Each body runs a big call on a target, then
//! calls on a part of its inputs on the same target, and compares bits; where the target
//! has a reference ([`Runner::expected`]) the big call is compared with it too.

use super::common::{assert_same_bits, at, Case, Rng, Shape, GUARD};
use super::target::{fresh_c, Offsets, Runner, Target};
use sgemm_bi::{DType, Gemm, Layout, Output, OutputMode};

const ROW: Layout = Layout::RowMajor;
const COL: Layout = Layout::ColMajor;

/// One big call of a slicing test.
struct Big {
    dtype: DType,
    la: Layout,
    lb: Layout,
    /// (M, N, K) of the big call.
    mnk: (usize, usize, usize),
    /// Extra leading-dimension elements of A and B.
    pad: (usize, usize),
    bias: Option<DType>,
    mode: OutputMode,
}

impl Big {
    fn new(dtype: DType, (la, lb): (Layout, Layout), mnk: (usize, usize, usize)) -> Big {
        Big {
            dtype,
            la,
            lb,
            mnk,
            pad: (0, 0),
            bias: None,
            mode: OutputMode::Overwrite(dtype),
        }
    }

    fn pad(self, a: usize, b: usize) -> Big {
        Big {
            pad: (a, b),
            ..self
        }
    }

    fn bias(self, bias: DType) -> Big {
        Big {
            bias: Some(bias),
            ..self
        }
    }

    fn out(self, mode: OutputMode) -> Big {
        Big { mode, ..self }
    }

    /// The big call on random inputs, for `run`'s tier.
    fn case(&self, run: &Runner, rng: &mut Rng) -> Case {
        let (m, n, k) = self.mnk;
        let mut s = Shape::new(m, n, k, self.dtype);
        s.la = self.la;
        s.lb = self.lb;
        s.pad = (self.pad.0, self.pad.1, 0);
        s.bias = self.bias;
        s.mode = self.mode;
        let mut case = Case::build(&s, rng);
        case.g = run.tiered(case.g);
        // The Hopper path's copy engine needs A's and B's rows in 16-byte units.
        if run.target == Target::CudaHopper {
            for op in [&mut case.g.a, &mut case.g.b] {
                op.ld = op.ld.next_multiple_of(8);
            }
            case = Case::from_gemm(case.g, rng, super::common::NARROW);
        }
        case
    }
}

/// Runs the big call, checks it against the target's reference, returns C.
fn run_big(run: &Runner, case: &Case, what: &str) -> Option<super::common::Buf> {
    if !run.takes(&case.g, Offsets::default()) {
        return None;
    }
    let big = run.run_case(case);
    if let Some(want) = run.expected(case) {
        assert_same_bits(
            &big,
            &want,
            &format!("{:?} {what}: the big call", run.target),
        );
    }
    Some(big)
}

/// The big calls of the row test: for the scalar tier, K that lets slices of up to 64 rows
/// take the few-row kernel (256) and K that keeps A's rows unaligned (257, 129), both A
/// layouts with padded leading dimensions, a 4100-row call and an 800-row one, bias and
/// 16-bit outputs; for the tensor-core tier, both A layouts, where a column-major A's
/// offset by r0 rows breaks 16-byte alignment (so the element-wise loader runs against the
/// cp.async one), and K tails.
fn row_calls(t: Target) -> Vec<Big> {
    let mut v = Vec::new();
    if t.tier() == sgemm_bi::Tier::Scalar {
        for (dtype, m, k) in [
            (DType::F32, 300, 257),
            (DType::BF16, 300, 257),
            (DType::F16, 300, 257),
            (DType::BF16, 4100, 257),
            (DType::F32, 300, 256),
            (DType::BF16, 300, 256),
        ] {
            v.push(Big::new(dtype, (ROW, ROW), (m, 200, k)).bias(DType::F32));
        }
        for (i, &dtype) in t.dtypes().iter().enumerate() {
            for (la, lb) in [(ROW, COL), (COL, ROW)] {
                let out = t.dtypes()[(i + 1) % 3];
                v.push(
                    Big::new(dtype, (la, lb), (300, 45, 129))
                        .pad(3, 1)
                        .bias(DType::F32)
                        .out(OutputMode::Overwrite(out)),
                );
            }
        }
        for dtype in [DType::BF16, DType::F32] {
            v.push(Big::new(dtype, (COL, ROW), (800, 21, 300)).bias(DType::F32));
        }
    } else {
        let f32_out = OutputMode::Overwrite(DType::F32);
        for (dtype, la, m, k) in [
            (DType::BF16, ROW, 300usize, 256),
            (DType::F16, ROW, 300, 257),
            (DType::BF16, COL, 300, 256),
            (DType::F16, COL, 300, 100),
            (DType::BF16, ROW, 4100, 1024),
            (DType::F16, COL, 4100, 520),
        ] {
            // A column-major A's leading dimension a multiple of 8: slices starting at a
            // multiple of 8 rows take the cp.async loader, the others do not.
            let pad = if la == COL {
                m.next_multiple_of(8) - m
            } else {
                0
            };
            v.push(
                Big::new(dtype, (la, ROW), (m, 200, k))
                    .pad(pad, 0)
                    .bias(DType::F32)
                    .out(f32_out),
            );
        }
        for dtype in [DType::BF16, DType::F16] {
            v.push(Big::new(dtype, (ROW, ROW), (300, 200, 517)).out(f32_out));
        }
        // B K-contiguous (torch's `[out, in]` weight; K a multiple of 8, so the copy engine
        // takes it): on the Hopper path slices of up to 64 rows run the 32-column decode
        // tiles, which store from registers (16-bit and f32 C, bias), the big call 128-row
        // tiles.
        let bf16_out = OutputMode::Overwrite(DType::BF16);
        for (dtype, la, k, out) in [
            (DType::BF16, ROW, 256usize, bf16_out),
            (DType::F16, ROW, 520, f32_out),
            (DType::BF16, COL, 136, bf16_out),
        ] {
            let pad = if la == COL { 4 } else { 0 };
            v.push(
                Big::new(dtype, (la, COL), (300, 200, k))
                    .pad(pad, 0)
                    .bias(DType::F32)
                    .out(out),
            );
        }
    }
    v
}

/// Rows `r0..r0 + m` of a big call against a call on just those rows (A offset by r0 rows,
/// a fresh C of m rows): every M from 1 to 300 on a GPU (a sample on the CPU), a few up to
/// 4099 of the 4100-row calls, at the middle, the start, the end and a few odd offsets.
/// Nothing past the m rows is written.
pub fn rows_do_not_depend_on_m(t: Target) {
    let Some(run) = Runner::new(t) else { return };
    let mut rng = Rng::new(0x0c2_0001);
    let (mut calls, mut slices) = (0, 0);
    for big_call in row_calls(t) {
        let case = big_call.case(&run, &mut rng);
        let g = case.g;
        let what = format!(
            "{} {:?}/{:?} {}×{}×{}",
            g.a.dtype, g.a.layout, g.b.layout, g.m, g.n, g.k
        );
        let Some(big) = run_big(&run, &case, &what) else {
            continue;
        };
        calls += 1;
        let sizes: Vec<usize> = if g.m > 1000 {
            vec![1, 2, 3, 64, 127, 128, 129, 1000, 4099]
        } else if t.is_cuda() && g.m == 300 {
            (1..=300).collect()
        } else {
            vec![1, 2, 3, 7, 10, 31, 33, 64, 129, 150, 200, g.m]
        };
        for m in sizes {
            let centre = (g.m - m) / 2;
            let mut offsets = vec![centre];
            if !t.is_cuda() || m % 50 < 4 || m > 1000 {
                offsets.extend([0, 5, 7, 77, g.m - m]);
            }
            for r0 in offsets.into_iter().filter(|&r0| r0 + m <= g.m) {
                let small = Gemm { m, ..g };
                let at_ = Offsets {
                    a: at(g.a.layout, g.a.ld, r0, 0),
                    ..Offsets::default()
                };
                if !run.takes(&small, at_) {
                    continue;
                }
                let mut c = fresh_c(g.c.mode.dtype(), m * g.c.ldc);
                run.run(&small, (&case.a, &case.b, case.bias.as_ref()), &mut c, at_);
                for i in 0..m * g.c.ldc {
                    if c.bits(i) != big.bits(r0 * g.c.ldc + i) {
                        panic!(
                            "{t:?} {what}: element {} of row {} of an M={m} call at offset {r0} \
                             is {:#x}, the big call's {:#x}",
                            i % g.c.ldc,
                            i / g.c.ldc,
                            c.bits(i),
                            big.bits(r0 * g.c.ldc + i)
                        );
                    }
                }
                let sentinel = fresh_c(g.c.mode.dtype(), 0).bits(0);
                for i in m * g.c.ldc..c.len() {
                    assert_eq!(
                        c.bits(i),
                        sentinel,
                        "{t:?} {what}: M={m} wrote past its rows"
                    );
                }
                slices += 1;
            }
        }
    }
    assert!(calls > 0 && slices > 0, "{t:?}: no call ran");
    println!("{t:?}: {slices} row slices of {calls} calls identical to the big calls");
}

/// The big calls of the column test: every B layout with A's drawn, bias of the input
/// dtype, 16-bit or f32 outputs; for the tensor-core tier row-major B with a leading
/// dimension that is a multiple of 8, so slices starting at a multiple of 8 columns take the
/// cp.async loader and the others do not; an 1100-column scalar call.
fn column_calls(t: Target, rng: &mut Rng) -> Vec<Big> {
    let mut v = Vec::new();
    let layouts = [ROW, COL];
    for (i, &dtype) in t.dtypes().iter().enumerate() {
        for lb in layouts {
            let la = rng.pick(&layouts);
            if t.tier() == sgemm_bi::Tier::Scalar {
                let out = t.dtypes()[(i + 2) % 3];
                v.push(
                    Big::new(dtype, (la, lb), (37, 300, 65))
                        .pad(0, 2)
                        .bias(dtype)
                        .out(OutputMode::Overwrite(out)),
                );
                v.push(Big::new(dtype, (ROW, lb), (77, 300, 131)));
            } else {
                let pad = if lb == ROW { 4 } else { 0 };
                v.push(
                    Big::new(dtype, (ROW, lb), (77, 300, 136))
                        .pad(0, pad)
                        .out(OutputMode::Overwrite(DType::F32)),
                );
                v.push(
                    Big::new(dtype, (la, lb), (300, 200, 517))
                        .bias(dtype)
                        .out(OutputMode::Overwrite(DType::F32)),
                );
            }
        }
    }
    if t.tier() == sgemm_bi::Tier::Scalar {
        for dtype in [DType::BF16, DType::F32] {
            v.push(Big::new(dtype, (ROW, COL), (9, 1100, 300)).bias(dtype));
        }
    }
    v
}

/// Columns `c0..c0 + n` of a wide call against a call on those columns of B (and of the
/// bias): N-invariance, so a column-parallel shard gives the bits of the whole layer. Half
/// the slices write a compact C of n columns, half write in place into a C of the big
/// call's shape (C offset by c0 columns, its other columns untouched).
pub fn columns_do_not_depend_on_n(t: Target) {
    let Some(run) = Runner::new(t) else { return };
    let mut rng = Rng::new(0x0c2_0002);
    let (mut calls, mut slices) = (0, 0);
    for big_call in column_calls(t, &mut rng) {
        let case = big_call.case(&run, &mut rng);
        let g = case.g;
        let what = format!(
            "{} {:?}/{:?} {}×{}×{}",
            g.a.dtype, g.a.layout, g.b.layout, g.m, g.n, g.k
        );
        let Some(big) = run_big(&run, &case, &what) else {
            continue;
        };
        calls += 1;
        // (first column, columns): on a GPU every width of the earlier GPU tests at several
        // offsets; on the CPU a sample.
        let (widths, starts): (&[usize], &[usize]) = if t.is_cuda() {
            (
                &[
                    1, 2, 3, 7, 17, 31, 33, 64, 100, 128, 129, 136, 200, 255, 299,
                ],
                &[0, 1, 3, 5, 8, 64, 99],
            )
        } else {
            (&[1, 2, 3, 7, 31, 33, 64, 129, 136, 200], &[0, 3, 5, 64, 99])
        };
        let mut cuts = Vec::new();
        for &n in widths.iter().filter(|&&n| n <= g.n) {
            for c0 in starts.iter().copied().chain([g.n - n]) {
                if c0 + n <= g.n && !cuts.contains(&(c0, n)) {
                    cuts.push((c0, n));
                }
            }
        }
        if g.n > 1000 {
            cuts = vec![(0, 1), (1000, 100), (1090, 10), (8, 1024)];
        }
        for (turn, (c0, n)) in cuts.into_iter().enumerate() {
            let in_place = turn % 2 == 1;
            let ldc = if in_place { g.c.ldc } else { n };
            let small = Gemm {
                n,
                c: Output { ldc, ..g.c },
                ..g
            };
            let at_ = Offsets {
                a: 0,
                b: at(g.b.layout, g.b.ld, 0, c0),
                bias: c0,
                c: if in_place { c0 } else { 0 },
            };
            if !run.takes(&small, at_) {
                continue;
            }
            let dtype = g.c.mode.dtype();
            let mut c = fresh_c(dtype, if in_place { g.m * g.c.ldc } else { g.m * n });
            run.run(&small, (&case.a, &case.b, case.bias.as_ref()), &mut c, at_);
            let sentinel = fresh_c(dtype, 0).bits(0);
            for i in 0..g.m {
                for j in 0..n {
                    assert_eq!(
                        c.bits(at_.c + i * ldc + j),
                        big.bits(i * g.c.ldc + c0 + j),
                        "{t:?} {what}: column {} (row {i}) of an N={n} call at column {c0}",
                        c0 + j
                    );
                }
            }
            // Everything else still holds the sentinel: columns outside c0..c0 + n, the
            // guard after C.
            let written =
                |idx: usize| idx >= at_.c && (idx - at_.c) / ldc < g.m && (idx - at_.c) % ldc < n;
            for idx in (0..c.len()).filter(|&idx| !written(idx)) {
                assert_eq!(
                    c.bits(idx),
                    sentinel,
                    "{t:?} {what}: an N={n} call at column {c0} wrote element {idx}"
                );
            }
            slices += 1;
        }
    }
    assert!(calls > 0 && slices > 0, "{t:?}: no call ran");
    println!("{t:?}: {slices} column slices of {calls} calls identical to the big calls");
}

type BatchedCall = (DType, (usize, usize, usize), Layout, (usize, usize, usize));

/// Each entry of a batched call (batch strides with gaps, a column-major A) equals the
/// same GEMM run alone on that entry's sub-buffers (invariance to the batch count).
pub fn batch_entries_do_not_depend_on_the_batch_count(t: Target) {
    let Some(run) = Runner::new(t) else { return };
    let mut rng = Rng::new(0x0c2_0003);
    let mut entries = 0;
    // (dtype, (M, N, K), A's layout, gaps after each batch entry of A, B and C).
    let shapes: Vec<BatchedCall> = match t.tier() {
        sgemm_bi::Tier::Scalar => t
            .dtypes()
            .iter()
            .map(|&d| (d, (45, 38, 70), COL, (1, 2, 3)))
            .collect(),
        // The first is one the Hopper path takes (N and every stride in 16-byte units).
        _ => vec![
            (DType::BF16, (130, 64, 128), ROW, (0, 0, 0)),
            (DType::BF16, (130, 70, 128), ROW, (0, 0, 0)),
            (DType::F16, (130, 70, 131), ROW, (0, 0, 0)),
            (DType::BF16, (45, 40, 70), COL, (8, 16, 8)),
        ],
    };
    for (dtype, (m, n, k), la, gap) in shapes {
        let mut s = Shape::new(m, n, k, dtype);
        s.batch = 5;
        s.la = la;
        s.gap = gap;
        s.bias = Some(if t.tier() == sgemm_bi::Tier::Scalar {
            DType::F32
        } else {
            dtype
        });
        if t.tier() != sgemm_bi::Tier::Scalar {
            s.mode = OutputMode::Overwrite(DType::F32);
        }
        let mut case = Case::build(&s, &mut rng);
        case.g = run.tiered(case.g);
        let g = case.g;
        let what = format!("{dtype} {m}×{n}×{k} batch 5");
        let Some(all) = run_big(&run, &case, &what) else {
            continue;
        };
        for bt in 0..g.batch {
            let one = Gemm { batch: 1, ..g };
            let at_ = Offsets {
                a: bt * g.a.batch_stride,
                b: bt * g.b.batch_stride,
                ..Offsets::default()
            };
            if !run.takes(&one, at_) {
                continue;
            }
            let mut c = fresh_c(g.c.mode.dtype(), g.m * g.c.ldc);
            run.run(&one, (&case.a, &case.b, case.bias.as_ref()), &mut c, at_);
            for i in 0..g.m * g.c.ldc {
                assert_eq!(
                    c.bits(i),
                    all.bits(bt * g.c.batch_stride + i),
                    "{t:?} {what}: entry {bt} element {i}"
                );
            }
            for i in g.m * g.c.ldc..g.m * g.c.ldc + GUARD {
                assert_eq!(
                    c.bits(i),
                    fresh_c(g.c.mode.dtype(), 0).bits(0),
                    "{t:?} guard"
                );
            }
            entries += 1;
        }
    }
    assert!(entries > 0, "{t:?}: no entry ran");
}
