//! Special values (docs/reliability.md, item 2): NaN (quiet and signalling, payloads, both
//! signs), ±Inf, ±0, subnormals, the largest finite value and the smallest normal, planted
//! in A, B, the bias and (in accumulate mode) C by the plans of `common/specials.rs` and by
//! a denser plan of NaN, Inf, −0 and subnormals, over dtypes, output modes, layouts, shapes
//! that cross each backend's blocking and tiles, and batches.
//!
//! Every element of C (padding and guard included) has the bits the target must give: the
//! independent reference's on the CPU scalar tier; on a GPU, the CPU engine's for the same
//! tier — always for the scalar tier, and for the tensor-core tier on compute capability
//! 9.0, where the CPU's model is the H200's bits (another GPU family is not compared with
//! it: `gpu_tc_model` is how to find out whether it matches) — and the mma.sync path's for
//! the planner's choice and the Hopper path ([`Runner::expected`]). On every target every
//! NaN stored is the canonical one, every element outside the matrix is untouched, and rows
//! run alone give the full call's rows.

use super::common::{
    assert_same_bits, at, Buf, Case, Rng, Shape, CANONICAL_NAN_16, CANONICAL_NAN_F32, GUARD,
    LAYOUTS, NARROW,
};
use super::specials::{self, Plant, Reached, PLANTS};
use super::target::{Offsets, Runner, Target};
use sgemm_bi::{DType, Engine, Gemm, Layout, OutputMode, Tier};

const OUT_MODES: [OutputMode; 4] = [
    OutputMode::Overwrite(DType::F32),
    OutputMode::Overwrite(DType::BF16),
    OutputMode::Overwrite(DType::F16),
    OutputMode::AccumulateF32,
];

/// (M, N, K) on the CPU: single elements, K of 0 and 1, tails of the microkernel, and
/// shapes past the backend's cache blocks and its one-thread threshold (about 2^20 fmas).
const CPU_SHAPES: [(usize, usize, usize); 9] = [
    (1, 1, 1),
    (3, 5, 0),
    (7, 3, 1),
    (13, 17, 2),
    (29, 31, 40),
    (33, 65, 129),
    (70, 300, 33),
    (130, 97, 260),
    (2, 1000, 520),
];

/// (M, N, K) on a GPU, with the kernels' tails: single elements, K of 0 and 1, one off a
/// tile, and a few tiles wide.
const GPU_SHAPES: [(usize, usize, usize); 11] = [
    (1, 1, 1),
    (3, 5, 0),
    (7, 3, 1),
    (33, 65, 17),
    (127, 129, 63),
    (130, 97, 260),
    (300, 257, 129),
    (2, 1000, 520),
    // N in whole 16-byte units with tiles' tails: shapes the Hopper path takes.
    (5, 72, 17),
    (127, 136, 63),
    (300, 264, 129),
];

/// The case of `shape` for `run`'s tier: on a GPU's tensor-core tier with A's, B's and C's
/// rows in whole 16-byte units (as the Hopper path needs, and as every path is run here).
fn case_for(run: &Runner, shape: &Shape, rng: &mut Rng) -> Case {
    let mut case = Case::build(shape, rng);
    case.g = run.tiered(case.g);
    if run.target.is_cuda() && run.target.tier() == Tier::TensorCores {
        let mut g = case.g;
        g.a.ld = g.a.ld.next_multiple_of(8);
        g.b.ld = g.b.ld.next_multiple_of(8);
        g.c.ldc = g.c.ldc.next_multiple_of(8);
        let one = |ld: usize, rows: usize, cols: usize, layout: Layout| {
            super::common::one_span(layout, ld, rows, cols)
        };
        g.a.batch_stride = one(g.a.ld, g.m, g.k, g.a.layout);
        g.b.batch_stride = one(g.b.ld, g.k, g.n, g.b.layout);
        g.c.batch_stride = one(g.c.ldc, g.m, g.n, Layout::RowMajor);
        case = Case::from_gemm(g, rng, NARROW);
    }
    case
}

/// Replaces the case's inputs (and, accumulating, C's written elements) by planted ones.
fn plant_case(case: &mut Case, plant: Plant, rng: &mut Rng) {
    let plant_buf = |b: &mut Buf, rng: &mut Rng| {
        let dtype = b.dtype();
        for i in 0..b.len() {
            if let Some(bits) = specials::planted(plant, dtype, || rng.next_u64()) {
                b.set_bits(i, bits);
            }
        }
    };
    plant_buf(&mut case.a, rng);
    plant_buf(&mut case.b, rng);
    if let Some(bias) = case.bias.as_mut() {
        // The bias gets sparse specials whatever the plan (a Tiny bias would hide the chain).
        let dtype = bias.dtype();
        for j in 0..bias.len() {
            if rng.chance(0.1) {
                bias.set_bits(j, specials::special(dtype, rng.next_u64()));
            }
        }
    }
    let g = case.g;
    if g.c.mode == OutputMode::AccumulateF32 {
        for i in written(&g) {
            if rng.chance(0.05) {
                case.c
                    .set_bits(i, specials::special(DType::F32, rng.next_u64()));
            }
        }
    }
}

/// The indices of C's elements the call writes.
fn written(g: &Gemm) -> impl Iterator<Item = usize> + '_ {
    (0..g.batch).flat_map(move |bt| {
        (0..g.m).flat_map(move |i| (0..g.n).map(move |j| bt * g.c.batch_stride + i * g.c.ldc + j))
    })
}

/// The kinds of values the written elements of `c` hold.
fn reached(g: &Gemm, c: &Buf) -> Reached {
    let mut r = Reached::default();
    for i in written(g) {
        r.count(c.dtype(), c.bits(i));
    }
    r
}

/// Runs `case` on the target and checks C: the bits of every engine that fixes them
/// (module docs), every NaN written canonical, every other element untouched. Returns C.
fn check(run: &Runner, model: Option<&Engine>, case: &Case, what: &str) -> Buf {
    let got = run.run_case(case);
    if let Some(want) = run.expected(case) {
        assert_same_bits(&got, &want, &format!("{what}: vs the reference"));
    }
    if let Some(cpu) = model {
        assert_same_bits(&got, &case.run(cpu), &format!("{what}: vs the CPU's model"));
    }
    let g = &case.g;
    let (canonical, nan_exp, mant) = match g.c.mode.dtype() {
        DType::F32 => (CANONICAL_NAN_F32, 0x7F80_0000, 0x7F_FFFF),
        DType::BF16 => (CANONICAL_NAN_16 as u32, 0x7F80, 0x7F),
        DType::F16 => (CANONICAL_NAN_16 as u32, 0x7C00, 0x3FF),
    };
    let mut inside = vec![false; got.len()];
    for i in written(g) {
        inside[i] = true;
        let b = got.bits(i);
        let is_nan = b & nan_exp == nan_exp && b & mant != 0;
        assert!(
            !is_nan || b == canonical,
            "{what}: element {i} is the NaN {b:#x}"
        );
    }
    for (i, ins) in inside.into_iter().enumerate() {
        assert!(
            ins || got.bits(i) == case.c.bits(i),
            "{what}: element {i} outside the matrix was written"
        );
    }
    got
}

/// Runs rows `r0..r0+len` of `case` alone (A and C offset by r0 rows) and compares them
/// with the same rows of the full result `full`, in every batch entry. Returns 1 when a
/// subset was checked (the target may not take the offset call).
fn rows_alone(run: &Runner, case: &Case, full: &Buf, rng: &mut Rng, what: &str) -> usize {
    let g = case.g;
    if g.m < 2 {
        return 0;
    }
    let len = 1 + rng.below(g.m - 1);
    let r0 = rng.below(g.m - len + 1);
    let sub = Gemm { m: len, ..g };
    let offsets = Offsets {
        // With K = 0 A is not read (and may hold no row r0).
        a: if g.k == 0 {
            0
        } else {
            at(g.a.layout, g.a.ld, r0, 0)
        },
        c: r0 * g.c.ldc,
        ..Offsets::default()
    };
    if !run.takes(&sub, offsets) {
        return 0;
    }
    let mut c = case.c.clone();
    let inputs = (&case.a, &case.b, case.bias.as_ref());
    run.run(&sub, inputs, &mut c, offsets);
    for bt in 0..g.batch {
        for i in r0..r0 + len {
            for j in 0..g.n {
                let idx = bt * g.c.batch_stride + i * g.c.ldc + j;
                assert_eq!(
                    c.bits(idx),
                    full.bits(idx),
                    "{what}: rows {r0}..{} alone, C[{bt}][{i}][{j}]",
                    r0 + len
                );
            }
        }
    }
    1
}

/// The sweep: every dtype × plan × shape (× layout pair on a GPU), with output mode and bias
/// rotating so that every combination appears for each dtype, layouts, padding and (on the
/// CPU) batches drawn at random.
pub fn planted_special_values_match(t: Target) {
    let Some(run) = Runner::new(t) else { return };
    let model = run.cpu_model();
    let mut rng = Rng::new(0x5bec_1a15);
    let (shapes, pairs): (&[_], usize) = if t.is_cuda() {
        (&GPU_SHAPES, 4)
    } else {
        (&CPU_SHAPES, 1)
    };
    let (mut calls, mut rows, mut total) = (0, 0, Reached::default());
    for &dtype in t.dtypes() {
        let mut per_dtype = Reached::default();
        for (p, plant) in PLANTS.into_iter().enumerate() {
            for (s, &(m, n, k)) in shapes.iter().enumerate() {
                for pair in 0..pairs {
                    let combo = (p * shapes.len() + s) * pairs + pair;
                    let mut shape = Shape::new(m, n, k, dtype);
                    shape.mode = OUT_MODES[combo % 4];
                    shape.bias = [None, Some(DType::F32), Some(dtype)][(combo / 4) % 3];
                    (shape.la, shape.lb) = if pairs == 4 {
                        (LAYOUTS[pair & 1], LAYOUTS[pair >> 1])
                    } else {
                        (rng.pick(&LAYOUTS), rng.pick(&LAYOUTS))
                    };
                    shape.pad = (rng.below(3), rng.below(3), rng.below(2));
                    if !t.is_cuda() && m * n * k < 1 << 16 {
                        shape.batch = 1 + rng.below(3);
                        shape.gap = (rng.below(4), rng.below(4), rng.below(4));
                    }
                    let mut case = case_for(&run, &shape, &mut rng);
                    if !run.takes(&case.g, Offsets::default()) {
                        continue;
                    }
                    plant_case(&mut case, plant, &mut rng);
                    let what = format!("{t:?} {dtype} {plant:?} {m}×{n}×{k} {:?}", case.g);
                    let got = check(&run, model.as_ref(), &case, &what);
                    rows += rows_alone(&run, &case, &got, &mut rng, &what);
                    per_dtype.add(&reached(&case.g, &got));
                    calls += 1;
                }
            }
        }
        println!("{t:?} {dtype} inputs: {per_dtype}");
        assert!(
            per_dtype.nan > 0 && per_dtype.pos_inf + per_dtype.neg_inf > 0,
            "{t:?} {dtype}: {per_dtype}"
        );
        total.add(&per_dtype);
    }
    println!(
        "{t:?}: {calls} calls checked, {rows} row subsets identical to the full calls; {total}"
    );
    assert!(calls > 0, "{t:?}: no call ran");
    if t.tier() == Tier::Scalar {
        assert!(
            total.all_kinds(),
            "{t:?}: the sweep must reach every kind of output: {total}"
        );
    }
}

/// Calls of at most 64 rows with operands in 16-byte pieces (a GPU's few-row kernel,
/// `kernels-gpu/src/scalar/rows.rs`) with every plant of specials, both B layouts and every
/// output mode. A chain that must stay −0.0 is one of the things it checks (no k step past
/// K is taken).
pub fn few_row_calls_with_special_values_match(t: Target) {
    let Some(run) = Runner::new(t) else { return };
    let model = run.cpu_model();
    let mut rng = Rng::new(0x5bec_0002);
    let round8 = |x: usize| x.max(1).div_ceil(8) * 8;
    let (mut calls, mut total) = (0, Reached::default());
    for &dtype in t.dtypes() {
        for plan in PLANTS {
            for &(m, n, k) in &[
                (1, 40, 16),
                (4, 64, 130),
                (16, 96, 33),
                (32, 48, 100),
                (64, 32, 264),
            ] {
                for lb in LAYOUTS {
                    let mut shape = Shape::new(m, n, k, dtype);
                    shape.lb = lb;
                    shape.mode = [
                        OutputMode::Overwrite(DType::F32),
                        OutputMode::Overwrite(dtype),
                        OutputMode::AccumulateF32,
                    ][calls % 3];
                    shape.bias = [None, Some(DType::F32), Some(dtype)][calls % 3];
                    let mut g = run.tiered(shape.gemm());
                    g.a.ld = round8(k);
                    g.b.ld = round8(if lb == Layout::RowMajor { n } else { k });
                    let mut case = Case::from_gemm(g, &mut rng, NARROW);
                    calls += 1;
                    if !run.takes(&case.g, Offsets::default()) {
                        continue;
                    }
                    plant_case(&mut case, plan, &mut rng);
                    let what = format!("{t:?} {dtype} {plan:?} {m}×{n}×{k} {:?}", case.g);
                    let got = check(&run, model.as_ref(), &case, &what);
                    total.add(&reached(&case.g, &got));
                }
            }
        }
    }
    println!("{t:?} few-row calls: {calls}; {total}");
    assert!(total.total() > 0, "{t:?}: no call ran");
    if t.tier() == Tier::Scalar {
        assert!(total.all_kinds(), "{t:?}: {total}");
    }
}

/// Builds one input of the dense plan: random values with NaN (with a payload), ±Inf, −0.0
/// and subnormals planted at random places.
fn with_specials(dtype: DType, len: usize, rng: &mut Rng, rare: f64, common: f64) -> Buf {
    let mut buf = Buf::random(dtype, len, rng, NARROW);
    let (nan, inf, neg_zero, sub_max) = match dtype {
        DType::F32 => (
            0x7FC0_1234u32,
            0x7F80_0000u32,
            0x8000_0000u32,
            0x007F_FFFFu32,
        ),
        DType::BF16 => (0x7FC5, 0x7F80, 0x8000, 0x007F),
        DType::F16 => (0x7E05, 0x7C00, 0x8000, 0x03FF),
    };
    let sign = if dtype == DType::F32 {
        0x8000_0000
    } else {
        0x8000
    };
    for i in 0..len {
        if rng.chance(rare) {
            let v = match rng.below(4) {
                0 => nan,
                1 => nan | sign, // negative NaN
                2 => inf,
                _ => inf | sign,
            };
            buf.set_bits(i, v);
        } else if rng.chance(common) {
            let v = match rng.below(3) {
                0 => neg_zero,
                1 => 0,
                _ => 1 + rng.next_u32() % sub_max, // a subnormal
            };
            buf.set_bits(i, v | if rng.bool() { sign } else { 0 });
        }
    }
    buf
}

/// NaN (with payloads and signs), ±Inf, ±0.0 and subnormals in A, B, the bias and (in
/// accumulate mode) C, in every output mode and with every bias choice; the outputs reach
/// NaN, Inf and finite values.
pub fn dense_specials_in_every_output_mode_and_bias(t: Target) {
    let Some(run) = Runner::new(t) else { return };
    let model = run.cpu_model();
    let mut rng = Rng::new(11);
    // N in whole 16-byte units of every output dtype for the Hopper path.
    let n = if t == Target::CudaHopper { 32 } else { 31 };
    let mut ran = 0;
    for &dtype in t.dtypes() {
        for mode in OUT_MODES {
            for bias in [None, Some(DType::F32), Some(dtype)] {
                let mut s = Shape::new(29, n, 40, dtype);
                s.mode = mode;
                s.bias = bias;
                s.la = rng.pick(&LAYOUTS);
                s.lb = rng.pick(&LAYOUTS);
                let mut case = case_for(&run, &s, &mut rng);
                if !run.takes(&case.g, Offsets::default()) {
                    continue;
                }
                case.a = with_specials(dtype, case.a.len(), &mut rng, 0.004, 0.15);
                case.b = with_specials(dtype, case.b.len(), &mut rng, 0.004, 0.15);
                // A few for sure: +Inf, -Inf and NaN rows of A, an +Inf column of B.
                let (inf, nan) = match dtype {
                    DType::F32 => (0x7F80_0000, 0xFFC0_0001),
                    DType::BF16 => (0x7F80, 0xFFC1),
                    DType::F16 => (0x7C00, 0xFE01),
                };
                let sign = if dtype == DType::F32 {
                    0x8000_0000
                } else {
                    0x8000
                };
                let (ga, gb) = (case.g.a, case.g.b);
                case.a.set_bits(at(ga.layout, ga.ld, 0, 1), inf);
                case.a.set_bits(at(ga.layout, ga.ld, 1, 2), inf | sign);
                case.a.set_bits(at(ga.layout, ga.ld, 2, 0), nan);
                case.b.set_bits(at(gb.layout, gb.ld, 5, 3), inf);
                if let Some(d) = bias {
                    case.bias = Some(with_specials(d, s.n + GUARD, &mut rng, 0.05, 0.2));
                }
                if mode == OutputMode::AccumulateF32 {
                    let c = with_specials(DType::F32, case.c.len(), &mut rng, 0.03, 0.2);
                    for i in written(&case.g) {
                        case.c.set_bits(i, c.bits(i));
                    }
                }
                let what = format!("{t:?} special values {dtype} {mode:?} bias {bias:?}");
                let got = check(&run, model.as_ref(), &case, &what);
                // The inputs do reach every kind of output.
                let (mut nans, mut infs, mut finite) = (0, 0, 0);
                for i in written(&case.g) {
                    let v = got.get(i);
                    if v.is_nan() {
                        nans += 1;
                    } else if v.is_infinite() {
                        infs += 1;
                    } else {
                        finite += 1;
                    }
                }
                assert!(
                    nans > 0 && infs > 0 && finite > 0,
                    "{what}: {nans} NaN, {infs} Inf, {finite} finite"
                );
                ran += 1;
            }
        }
    }
    assert!(ran > 0, "{t:?}: no call ran");
}

/// Hand-made chains whose result IEEE 754 fixes on the scalar tier (f32 inputs): Inf·0 and
/// Inf − Inf are NaN (stored canonical), a NaN of any payload stays a NaN, a chain of
/// negative products that underflow is −0 (and stays −0 after a −0 bias), a −0 bias after a
/// +0 chain is +0, and Inf survives a finite bias; in f32, bf16 and f16 outputs, and with A
/// column-major.
pub fn ieee_special_cases_by_hand(t: Target) {
    assert_eq!(t.tier(), Tier::Scalar, "f32 inputs are the scalar tier's");
    let Some(run) = Runner::new(t) else { return };
    let f32s = |v: &[f32]| {
        let mut b = Buf::filled(DType::F32, v.len(), 0);
        for (i, x) in v.iter().enumerate() {
            b.set_bits(i, x.to_bits());
        }
        b
    };
    let inf = f32::INFINITY;
    let tiny = f32::from_bits(0x1000_0000); // 2^-95: tiny·tiny = 2^-190 underflows
                                            // Row i of A times column 0 of B (K = 2), bias 0 or −0.
    let rows: [([f32; 2], [f32; 2], f32, u32); 6] = [
        ([inf, 1.0], [0.0, 1.0], 0.0, CANONICAL_NAN_F32), // Inf·0
        ([inf, inf], [1.0, -1.0], 0.0, CANONICAL_NAN_F32), // Inf − Inf
        (
            [f32::from_bits(0xFFA0_0001), 1.0],
            [1.0, 1.0],
            0.0,
            CANONICAL_NAN_F32,
        ), // sNaN
        ([-tiny, -tiny], [tiny, tiny], -0.0, 0x8000_0000), // −0 by underflow, −0 bias
        ([1.0, -1.0], [1.0, 1.0], -0.0, 0x0000_0000),     // +0 chain + (−0) bias
        ([inf, 1.0], [1.0, 1.0], -3.0, inf.to_bits()),    // Inf + finite
    ];
    for (a, b, bias, want) in rows {
        let (a, b, bias_buf) = (f32s(&a), f32s(&b), f32s(&[bias]));
        // The same in f32, bf16 and f16 outputs: NaN canonical, signs of zero and Inf kept.
        for out in [DType::F32, DType::BF16, DType::F16] {
            let g = run.tiered(Gemm {
                bias: Some(DType::F32),
                ..Gemm::dense(1, 1, 2, DType::F32)
            });
            let g = Gemm {
                c: sgemm_bi::Output {
                    mode: OutputMode::Overwrite(out),
                    ..g.c
                },
                ..g
            };
            let mut c = Buf::filled(
                out,
                1,
                if out == DType::F32 {
                    0x3F00_0000
                } else {
                    0x1234
                },
            );
            run.run(&g, (&a, &b, Some(&bias_buf)), &mut c, Offsets::default());
            let want = match (out, want) {
                (DType::F32, w) => w,
                (_, CANONICAL_NAN_F32) => CANONICAL_NAN_16 as u32,
                (_, w) if f32::from_bits(w).is_infinite() => {
                    (w >> 16 & 0x8000) | if out == DType::BF16 { 0x7F80 } else { 0x7C00 }
                }
                (_, w) => w >> 16,
            };
            assert_eq!(
                c.bits(0),
                want,
                "{t:?} {out}: a {a:?} · b {b:?} + {bias}: got {:#x}",
                c.bits(0)
            );
        }
    }
    // Layout does not matter for these either.
    let g = run.tiered(Gemm {
        a: sgemm_bi::Operand::col_major(DType::F32, 2),
        ..Gemm::dense(2, 1, 1, DType::F32)
    });
    let mut c = Buf::filled(DType::F32, 2, 0);
    run.run(
        &g,
        (&f32s(&[inf, -inf]), &f32s(&[0.0]), None),
        &mut c,
        Offsets::default(),
    );
    assert_eq!(
        [c.bits(0), c.bits(1)],
        [CANONICAL_NAN_F32; 2],
        "{t:?}: {:?}",
        Layout::ColMajor
    );
}
