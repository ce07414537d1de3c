//! Special values (docs/reliability.md, item 2) on the CPU backend: NaN (quiet and
//! signalling, payloads, both signs), ±Inf, ±0, subnormals, the largest finite value and
//! the smallest normal, planted in A, B, the bias and (in accumulate mode) C by four plans
//! (`common/specials.rs`), over dtypes, output modes, layouts, shapes that cross the
//! backend's blocking, and batches: the scalar tier's fast backend gives the reference's bits
//! (`common`) on every element of C, including the canonical NaN. The same sweep runs on a
//! GPU against this backend in `tests/gpu_special_values.rs`.

mod common;
#[path = "common/specials.rs"]
mod specials;

use common::*;
use sgemm_bi::{DType, Layout, OutputMode};
use specials::{Plant, Reached, PLANTS};

const OUT_MODES: [OutputMode; 4] = [
    OutputMode::Overwrite(DType::F32),
    OutputMode::Overwrite(DType::BF16),
    OutputMode::Overwrite(DType::F16),
    OutputMode::AccumulateF32,
];

/// (M, N, K): single elements, K of 0 and 1, tails of the microkernel, and shapes past the
/// backend's cache blocks and its one-thread threshold (about 2^20 fmas).
const SHAPES: [(usize, usize, usize); 9] = [
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
        for bt in 0..g.batch {
            for i in 0..g.m {
                for j in 0..g.n {
                    if rng.chance(0.05) {
                        let at = bt * g.c.batch_stride + i * g.c.ldc + j;
                        case.c
                            .set_bits(at, specials::special(DType::F32, rng.next_u64()));
                    }
                }
            }
        }
    }
}

/// The kinds of values the written elements of `c` hold.
fn reached(case: &Case, c: &Buf) -> Reached {
    let g = case.g;
    let mut r = Reached::default();
    for bt in 0..g.batch {
        for i in 0..g.m {
            for j in 0..g.n {
                r.count(c.dtype(), c.bits(bt * g.c.batch_stride + i * g.c.ldc + j));
            }
        }
    }
    r
}

/// The sweep: every dtype × plan × shape, with layouts, output mode, bias, padding and batch
/// drawn so that every combination of output mode and bias appears for each dtype.
#[test]
fn planted_special_values_match_the_reference() {
    let engine = cpu();
    let mut rng = Rng::new(0x5bec_1a15);
    let (mut cases, mut total) = (0, Reached::default());
    for dtype in DTYPES {
        let mut per_dtype = Reached::default();
        for (p, plant) in PLANTS.into_iter().enumerate() {
            for (s, &(m, n, k)) in SHAPES.iter().enumerate() {
                let mut shape = Shape::new(m, n, k, dtype);
                let combo = p * SHAPES.len() + s;
                shape.mode = OUT_MODES[combo % 4];
                shape.bias = [None, Some(DType::F32), Some(dtype)][(combo / 4) % 3];
                shape.la = rng.pick(&LAYOUTS);
                shape.lb = rng.pick(&LAYOUTS);
                shape.pad = (rng.below(3), rng.below(3), rng.below(2));
                if m * n * k < 1 << 16 {
                    shape.batch = 1 + rng.below(3);
                    shape.gap = (rng.below(4), rng.below(4), rng.below(4));
                }
                let mut case = Case::build(&shape, &mut rng);
                plant_case(&mut case, plant, &mut rng);
                let want = case.expected();
                let got = case.run(&engine);
                assert_same_bits(
                    &got,
                    &want,
                    &format!("{dtype} {plant:?} {m}×{n}×{k} {:?}", case.g),
                );
                per_dtype.add(&reached(&case, &got));
                cases += 1;
            }
        }
        println!("{dtype} inputs: {per_dtype}");
        assert!(
            per_dtype.nan > 0 && per_dtype.pos_inf + per_dtype.neg_inf > 0,
            "{dtype}: {per_dtype}"
        );
        total.add(&per_dtype);
    }
    println!("{cases} calls identical to the reference; {total}");
    assert!(
        total.all_kinds(),
        "the sweep must reach every kind of output: {total}"
    );
}

/// Hand-made chains whose result IEEE 754 fixes: Inf·0 and Inf − Inf are NaN (stored
/// canonical), a NaN of any payload stays a NaN, a chain of negative products that underflow
/// is −0 (and stays −0 after a −0 bias), a −0 bias after a +0 chain is +0, and Inf survives a
/// finite bias.
#[test]
fn ieee_special_cases_by_hand() {
    let engine = cpu();
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
        let g = sgemm_bi::Gemm {
            bias: Some(DType::F32),
            ..sgemm_bi::Gemm::dense(1, 1, 2, DType::F32)
        };
        let mut c = vec![0.5f32];
        engine
            .gemm_host(
                &g,
                (&a[..]).into(),
                (&b[..]).into(),
                Some((&[bias][..]).into()),
                (&mut c).into(),
            )
            .unwrap();
        assert_eq!(
            c[0].to_bits(),
            want,
            "a {a:?} · b {b:?} + {bias}: got {} ({:#x})",
            c[0],
            c[0].to_bits()
        );
        // The same in bf16 and f16 outputs: NaN canonical, signs of zero and Inf kept.
        for dtype in [DType::BF16, DType::F16] {
            let g = sgemm_bi::Gemm {
                c: sgemm_bi::Output {
                    mode: OutputMode::Overwrite(dtype),
                    ..g.c
                },
                ..g
            };
            let mut c16 = Buf::filled(dtype, 1, 0x1234);
            engine
                .gemm_host(
                    &g,
                    (&a[..]).into(),
                    (&b[..]).into(),
                    Some((&[bias][..]).into()),
                    c16.slice_mut(),
                )
                .unwrap();
            let want16 = match want {
                CANONICAL_NAN_F32 => CANONICAL_NAN_16 as u32,
                w if f32::from_bits(w).is_infinite() => {
                    (w >> 16 & 0x8000) | if dtype == DType::BF16 { 0x7F80 } else { 0x7C00 }
                }
                w => w >> 16,
            };
            assert_eq!(c16.bits(0), want16, "{dtype}: a {a:?} · b {b:?} + {bias}");
        }
    }
    // Layout does not matter for these either.
    let g = sgemm_bi::Gemm {
        a: sgemm_bi::Operand::col_major(DType::F32, 2),
        ..sgemm_bi::Gemm::dense(2, 1, 1, DType::F32)
    };
    let mut c = vec![0.0f32; 2];
    engine
        .gemm_host(
            &g,
            (&[inf, -inf][..]).into(),
            (&[0.0f32][..]).into(),
            None,
            (&mut c).into(),
        )
        .unwrap();
    assert_eq!(
        [c[0].to_bits(), c[1].to_bits()],
        [CANONICAL_NAN_F32; 2],
        "{:?}",
        Layout::ColMajor
    );
}
