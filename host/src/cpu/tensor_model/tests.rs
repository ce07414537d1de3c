//! Tests of the tensor-core model: every recorded H200 output (step by step and through the
//! driver), hand-built steps for each rule, the fast step against the slow reference on
//! random steps, the vector kernel against the step on every instruction set, and the
//! driver against a naive loop of steps over shapes, layouts, batches, bias and output modes.

use half::{bf16, f16};
use proptest::prelude::*;

use super::super::kernel::{Isa, MR, NR};
use super::kernel::{self, Simd};
use super::pack::{BStep, STEP_K};
use super::reference;
use super::step::{self, Dec, Format};
use crate::numeric::{round_bf16, round_f16, store_f32};
use crate::types::{DType, Gemm, GemmPointers, Layout, Operand, Output, OutputMode, Tier};
use crate::validate;

// ---------------------------------------------------------------------------------------
// Helpers

/// The fast step on raw 16-bit inputs.
fn fast(format: Format, c: f32, a: &[u16; 16], b: &[u16; 16]) -> f32 {
    let (da, db) = (a.map(|x| format.decode(x)), b.map(|x| format.decode(x)));
    step::step(format, c, &da, &db)
}

/// Both implementations, which must agree; returns the result.
fn both(format: Format, c: f32, a: &[u16; 16], b: &[u16; 16]) -> f32 {
    let (f, r) = (fast(format, c, a, b), reference::step(format, c, a, b));
    assert!(
        same(f, r),
        "{format:?} c {c:e} ({:#010x}) a {a:04x?} b {b:04x?}: fast {f:e} ({:#010x}), reference {r:e} ({:#010x})",
        c.to_bits(),
        f.to_bits(),
        r.to_bits()
    );
    f
}

/// Equal bits, or both NaN (NaN payloads are canonicalised on output).
fn same(x: f32, y: f32) -> bool {
    x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan())
}

/// The bits of `v` (exactly representable) in `format`.
fn enc(format: Format, v: f64) -> u16 {
    let bits = match format {
        Format::Bf16 => bf16::from_f64(v).to_bits(),
        Format::F16 => f16::from_f64(v).to_bits(),
    };
    assert_eq!(
        reference::value(format, bits),
        v,
        "{v} is not exact in {format:?}"
    );
    bits
}

/// A step with the given (a, b) pairs and zeros elsewhere.
fn pairs(format: Format, ps: &[(f64, f64)]) -> ([u16; 16], [u16; 16]) {
    let (mut a, mut b) = ([0u16; 16], [0u16; 16]);
    for (t, &(x, y)) in ps.iter().enumerate() {
        a[t] = enc(format, x);
        b[t] = enc(format, y);
    }
    (a, b)
}

fn p2(e: i32) -> f64 {
    2f64.powi(e)
}

const BF16_NAN: u16 = 0x7FC1;
const BF16_INF: u16 = 0x7F80;

// ---------------------------------------------------------------------------------------
// The golden files

#[path = "../../../../tests/data/tc-h200/golden.rs"]
mod golden;

/// One golden file, its input format as this file's tests name it.
struct Golden {
    name: String,
    format: Format,
    a: Vec<u16>,
    bt: Vec<u16>,
    c: [Vec<u32>; 2],
}

fn golden_files() -> Vec<Golden> {
    golden::read_all(
        &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/data/tc-h200"),
    )
    .into_iter()
    .map(|f| Golden {
        name: f.name,
        format: if f.bf16 { Format::Bf16 } else { Format::F16 },
        a: f.a,
        bt: f.bt,
        c: f.c,
    })
    .collect()
}

/// Every output of every file, both kernels' columns, by chaining four steps of the fast
/// step and of the reference.
#[test]
fn every_h200_golden_output_is_reproduced_step_by_step() {
    let mut matched = 0;
    for g in golden_files() {
        for i in 0..64 {
            for j in 0..256 {
                let mut acc = 0.0f32;
                for s in 0..4 {
                    let a: [u16; 16] = g.a[i * 64 + 16 * s..][..16].try_into().unwrap();
                    let b: [u16; 16] = g.bt[j * 64 + 16 * s..][..16].try_into().unwrap();
                    acc = both(g.format, acc, &a, &b);
                }
                for (kernel, c) in ["mma.sync", "wgmma"].iter().zip(&g.c) {
                    assert_eq!(
                        acc.to_bits(),
                        c[i * 256 + j],
                        "{} C[{i}][{j}] ({kernel})",
                        g.name
                    );
                    matched += 1;
                }
            }
        }
    }
    assert_eq!(
        matched,
        2 * 12 * 64 * 256,
        "196,608 outputs in each kernel's column"
    );
}

/// The same files through the CPU backend's tensor-core tier (A row-major, B = Btᵀ, i.e.
/// column-major with ld 64, f32 output), on every instruction set.
#[test]
fn every_h200_golden_output_is_reproduced_by_the_backend() {
    for g in golden_files() {
        let dtype = match g.format {
            Format::Bf16 => DType::BF16,
            Format::F16 => DType::F16,
        };
        let gemm = Gemm {
            b: Operand::col_major(dtype, 64),
            c: Output {
                mode: OutputMode::Overwrite(DType::F32),
                ldc: 256,
                batch_stride: 0,
            },
            tier: Tier::TensorCores,
            ..Gemm::dense(64, 256, 64, dtype)
        };
        for simd in Simd::all() {
            let mut c = vec![0xFFFF_FFFFu32; 64 * 256];
            let p = GemmPointers {
                a: g.a.as_ptr().cast(),
                b: g.bt.as_ptr().cast(),
                bias: std::ptr::null(),
                c: c.as_mut_ptr().cast(),
            };
            // SAFETY: A, B and C hold the descriptor's spans.
            unsafe { super::gemm_with(simd, Isa::detect(), &gemm, &p, None) };
            assert!(c == g.c[0] && c == g.c[1], "{} on {simd:?}", g.name);
        }
    }
}

// ---------------------------------------------------------------------------------------
// The recorded differences between the H200 and the first model

#[path = "../../../../tests/data/tc-h200/mismatches.rs"]
mod mismatches;

use mismatches::{Bias, Mismatch, Mode};

fn mismatch_records() -> Vec<Mismatch> {
    mismatches::read_all(
        &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/data/tc-h200"),
    )
}

fn record_dtype(r: &Mismatch) -> DType {
    if r.bf16 {
        DType::BF16
    } else {
        DType::F16
    }
}

fn record_mode(r: &Mismatch) -> OutputMode {
    match r.mode {
        Mode::OverwriteF32 => OutputMode::Overwrite(DType::F32),
        Mode::OverwriteBf16 => OutputMode::Overwrite(DType::BF16),
        Mode::OverwriteF16 => OutputMode::Overwrite(DType::F16),
        Mode::AccumulateF32 => OutputMode::AccumulateF32,
    }
}

/// A record's output from the steps of the fast step and of the reference (which must
/// agree), K tail padded with zeros, then bias, accumulate and rounding.
fn replay(r: &Mismatch) -> u32 {
    let format = if r.bf16 { Format::Bf16 } else { Format::F16 };
    let mut acc = 0.0f32;
    for s in 0..r.k.div_ceil(16) {
        let a: [u16; 16] = std::array::from_fn(|t| r.a.get(16 * s + t).copied().unwrap_or(0));
        let b: [u16; 16] = std::array::from_fn(|t| r.b.get(16 * s + t).copied().unwrap_or(0));
        acc = both(format, acc, &a, &b);
    }
    match r.bias {
        Bias::None => {}
        Bias::F32(x) => acc += f32::from_bits(x),
        Bias::Input(x) => acc += crate::numeric::upcast(record_dtype(r), x as u32),
    }
    match r.mode {
        Mode::AccumulateF32 => store_f32(f32::from_bits(r.old.unwrap()) + acc).to_bits(),
        Mode::OverwriteF32 => store_f32(acc).to_bits(),
        Mode::OverwriteBf16 => round_bf16(acc).to_bits() as u32,
        Mode::OverwriteF16 => round_f16(acc).to_bits() as u32,
    }
}

/// Every recorded output where the H200 differed from the first model (subnormal inputs,
/// the floor of E, the sign of a zero: `step.rs`) is the GPU's bits, step by step.
#[test]
fn every_recorded_h200_difference_is_reproduced_step_by_step() {
    let records = mismatch_records();
    assert!(records.len() >= 1000, "{} records", records.len());
    for r in &records {
        let got = replay(r);
        assert_eq!(
            got, r.gpu,
            "{} ({}, K {}): model {got:#010x}, H200 {:#010x}",
            r.at, r.kind, r.k, r.gpu
        );
        assert_ne!(got, r.first_model, "{}: a record of a difference", r.at);
    }
}

/// The same records through the CPU backend on every instruction set: records of one
/// dtype, K, output mode and bias dtype are the diagonal of one square call (record j is
/// row j of A and column j of B), so the lanes of the vector kernel hold different records.
#[test]
fn every_recorded_h200_difference_is_reproduced_by_the_backend() {
    let records = mismatch_records();
    let mut groups: std::collections::BTreeMap<_, Vec<&Mismatch>> = Default::default();
    for r in &records {
        let bias = match r.bias {
            Bias::None => 0,
            Bias::F32(_) => 1,
            Bias::Input(_) => 2,
        };
        groups
            .entry((r.bf16, r.k, r.mode as u8, bias))
            .or_default()
            .push(r);
    }
    let mut checked = 0;
    for ((_, k, _, bias_kind), group) in groups {
        for part in group.chunks(40) {
            let n = part.len();
            let dtype = record_dtype(part[0]);
            let mode = record_mode(part[0]);
            let bias_dtype = [None, Some(DType::F32), Some(dtype)][bias_kind];
            let g = Gemm {
                a: Operand::row_major(dtype, k),
                b: Operand::col_major(dtype, k),
                bias: bias_dtype,
                c: Output {
                    mode,
                    ldc: n,
                    batch_stride: 0,
                },
                tier: Tier::TensorCores,
                ..Gemm::dense(n, n, k, dtype)
            };
            let ext = validate::check(&g).unwrap();
            let mut a = vec![0u8; ext.a * 2];
            let mut b = vec![0u8; ext.b * 2];
            let mut bias = vec![0u8; ext.bias * bias_dtype.map_or(4, |d| d.size())];
            let mut c0 = vec![0u8; ext.c * mode.dtype().size()];
            let mut bias_f32 = vec![0.0f32; n];
            for (j, r) in part.iter().enumerate() {
                for t in 0..k {
                    write(&mut a, dtype, j * k + t, r.a[t] as u32);
                    write(&mut b, dtype, j * k + t, r.b[t] as u32);
                }
                match r.bias {
                    Bias::None => {}
                    Bias::F32(x) => {
                        write(&mut bias, DType::F32, j, x);
                        bias_f32[j] = f32::from_bits(x);
                    }
                    Bias::Input(x) => {
                        write(&mut bias, dtype, j, x as u32);
                        bias_f32[j] = crate::numeric::upcast(dtype, x as u32);
                    }
                }
                if let Some(old) = r.old {
                    write(&mut c0, DType::F32, j * n + j, old);
                }
            }
            for simd in Simd::all() {
                let mut c = c0.clone();
                let p = GemmPointers {
                    a: a.as_ptr().cast(),
                    b: b.as_ptr().cast(),
                    bias: bias.as_ptr().cast(),
                    c: c.as_mut_ptr().cast(),
                };
                let bias_arg = bias_dtype.map(|_| &bias_f32[..]);
                // SAFETY: every buffer holds the span validate::check gave for it.
                unsafe { super::gemm_with(simd, Isa::detect(), &g, &p, bias_arg) };
                for (j, r) in part.iter().enumerate() {
                    let got = raw(&c, mode.dtype(), j * n + j);
                    assert_eq!(
                        got, r.gpu,
                        "{simd:?} {} ({}, K {}): backend {got:#010x}, H200 {:#010x}",
                        r.at, r.kind, r.k, r.gpu
                    );
                }
            }
            checked += n;
        }
    }
    assert_eq!(checked, records.len());
}

// ---------------------------------------------------------------------------------------
// Hand-built steps, one per rule

/// Rule 2: each term is truncated on its own, before the sum. 1 + 15 · 2^−26: every small
/// product lies below the grid 2^(0−25) and vanishes, although together they exceed one
/// f32 ulp of 1 (an exact sum truncated once would give 1 + 2^−23).
#[test]
fn small_terms_are_truncated_before_the_sum() {
    for format in [Format::Bf16, Format::F16] {
        let mut ps = vec![(1.0, 1.0)];
        ps.extend([(p2(-13), p2(-13)); 15]);
        let (a, b) = pairs(format, &ps);
        assert_eq!(both(format, 0.0, &a, &b), 1.0, "{format:?}");
        // Terms on the grid are kept exactly: 1 + 3 · 2^−24 (three terms of 2^−24), then
        // truncated to f32: 1 + 2^−23 (round-to-nearest-even would give 1 + 2^−22).
        let (a, b) = pairs(
            format,
            &[
                (1.0, 1.0),
                (p2(-12), p2(-12)),
                (p2(-12), p2(-12)),
                (p2(-12), p2(-12)),
            ],
        );
        assert_eq!(
            both(format, 0.0, &a, &b),
            1.0 + p2(-23) as f32,
            "{format:?}"
        );
    }
}

/// Rule 2 truncates toward zero, not downward: −2^−24 · (1 + 2^−7) on the grid 2^−25 is
/// −2^−24 (floor would give −2^−24 − 2^−25), so 1 + that is 1 − 2^−24 exactly.
#[test]
fn negative_terms_are_truncated_toward_zero() {
    let format = Format::Bf16;
    let (a, b) = pairs(format, &[(1.0, 1.0), (-p2(-12), p2(-12) * (1.0 + p2(-7)))]);
    assert_eq!(both(format, 0.0, &a, &b), (1.0 - p2(-24)) as f32);
}

/// Rule 1: a subnormal accumulator counts as exponent −126, not its own (−148 here), so
/// the grid is 2^−151 and sixteen products of 2^−152 vanish; with its true exponent they
/// would add 2^−148 to it (and so would an IEEE fma chain).
#[test]
fn a_subnormal_accumulator_counts_as_exponent_minus_126() {
    let format = Format::Bf16;
    let c = f32::from_bits(3); // 3 · 2^−149
    let (a, b) = pairs(format, &[(p2(-76), p2(-76)); 16]);
    assert_eq!(both(format, c, &a, &b).to_bits(), 3);
    // Products on that grid are kept: 3 · 2^−149 + 16 · 2^−150 = 11 · 2^−149.
    let (a, b) = pairs(format, &[(p2(-75), p2(-75)); 16]);
    assert_eq!(both(format, c, &a, &b).to_bits(), 11);
}

/// Rule 4: a sum of 2^128 or more is ±Inf; below it, truncation (never rounding up) keeps
/// f32::MAX where round-to-nearest-even would overflow.
#[test]
fn sums_from_2_pow_128_overflow_to_inf() {
    let format = Format::Bf16;
    let (a, b) = pairs(format, &[(p2(127), 2.0)]);
    assert_eq!(both(format, 0.0, &a, &b), f32::INFINITY);
    let (a, b) = pairs(format, &[(-p2(127), 1.5), (-p2(126), 1.0)]);
    assert_eq!(both(format, 0.0, &a, &b), f32::NEG_INFINITY);
    // f32::MAX + 2^103 (half an ulp): truncated back to f32::MAX.
    let (a, b) = pairs(format, &[(p2(103), 1.0)]);
    assert_eq!(both(format, f32::MAX, &a, &b), f32::MAX);
    assert_eq!(
        f32::MAX + p2(103) as f32,
        f32::INFINITY,
        "RNE would overflow"
    );
    // Sixteen products near the top of f16 and bf16 never overflow f32 in f16.
    let (a, b) = pairs(Format::F16, &[(65504.0, 65504.0); 16]);
    assert_eq!(both(Format::F16, 0.0, &a, &b), 16.0 * 65504.0 * 65504.0);
}

/// Rule 3 with cancellation: exact cancellation gives +0.0, and a large accumulator that
/// cancels still set the grid, so a small product beside it is lost (2^24 − 2^24 + 2^−2
/// is +0.0, not 0.25).
#[test]
fn cancellation_is_exact_and_keeps_the_grid() {
    for format in [Format::Bf16, Format::F16] {
        let (a, b) = pairs(format, &[(-1.5, 1.0), (1.5, 1.0)]);
        assert_eq!(both(format, 0.0, &a, &b).to_bits(), 0, "{format:?}: +0.0");
        let (a, b) = pairs(format, &[(-1.5, 1.0), (0.75, 2.0)]);
        assert_eq!(both(format, -0.0, &a, &b).to_bits(), 0, "{format:?}: +0.0");
        let big = if format == Format::Bf16 {
            p2(24)
        } else {
            p2(12)
        };
        let (a, b) = pairs(format, &[(-big, big), (0.5, 0.5)]);
        let c = (big * big) as f32;
        assert_eq!(both(format, c, &a, &b).to_bits(), 0, "{format:?}");
    }
}

/// Zero operands: an all-zero step keeps +0.0, and −0.0 inputs make no −0.0.
#[test]
fn zero_steps_give_positive_zero() {
    for format in [Format::Bf16, Format::F16] {
        assert_eq!(both(format, 0.0, &[0; 16], &[0; 16]).to_bits(), 0);
        assert_eq!(both(format, 0.0, &[0x8000; 16], &[0; 16]).to_bits(), 0);
        assert_eq!(both(format, -0.0, &[0x8000; 16], &[0; 16]).to_bits(), 0);
    }
}

/// Rule 4: a nonzero sum that truncates to zero gives +0.0, whatever its sign (the H200
/// gives +0.0 for −2^−150, where IEEE's round-toward-zero would keep −0.0).
#[test]
fn a_negative_sum_below_the_subnormals_is_positive_zero() {
    let format = Format::Bf16;
    let (a, b) = pairs(format, &[(-p2(-75), p2(-75))]);
    assert_eq!(both(format, 0.0, &a, &b).to_bits(), 0);
    let (a, b) = pairs(format, &[(p2(-75), p2(-75))]);
    assert_eq!(both(format, 0.0, &a, &b).to_bits(), 0);
    // Through a subnormal accumulator: −2^−149 + 2^−150 is −2^−150, so +0.0 as well.
    let c = -f32::from_bits(1);
    assert_eq!(both(format, c, &a, &b).to_bits(), 0);
    // A negative subnormal result keeps its sign.
    let (a, b) = pairs(format, &[(-p2(-74), p2(-74))]);
    assert_eq!(both(format, 0.0, &a, &b).to_bits(), 0x8000_0002);
}

/// Rule 1: a subnormal input counts with its format's smallest normal exponent (−14 for
/// f16), not its own. In f16, 2^−24 (a subnormal) · 2^15 sets E = −14 + 15 = 1, not −9,
/// so on the grid 2^−24 the 2^−29 bit of (1 + 2^−10) · 2^−9 (1 + 2^−10) is cut.
#[test]
fn subnormal_inputs_count_with_the_smallest_normal_exponent() {
    let format = Format::F16;
    let x = 1.0 + p2(-10);
    // (1 + 2^−10) · 2^−9 (1 + 2^−10) = 2^−9 (1 + 2^−9 + 2^−20).
    let (a, b) = pairs(format, &[(p2(-24), p2(15)), (x, p2(-9) * x)]);
    let want = p2(-9) + p2(-9) * (1.0 + p2(-9));
    assert_eq!(both(format, 0.0, &a, &b) as f64, want);
    assert_eq!(
        both(format, 0.0, &a, &b).to_bits(),
        0x3b80_2000,
        "the H200's bits"
    );
    // In bf16 the same: 2^−130 · 2^100 sets E = −126 + 100 = −26 (grid 2^−51), so the
    // 2^−52 bit of 2^−19 (1 + 2^−7) · 2^−19 (1 + 2^−7) = 2^−38 (1 + 2^−6 + 2^−14) is cut;
    // with the subnormal's own exponent (E = −30, grid 2^−55) f32 would keep it.
    let format = Format::Bf16;
    let y = 1.0 + p2(-7);
    let (a, b) = pairs(format, &[(p2(-130), p2(100)), (p2(-19) * y, p2(-19) * y)]);
    let want = p2(-30) + p2(-38) * (1.0 + p2(-6));
    assert_eq!(both(format, 0.0, &a, &b) as f64, want);
}

/// Rule 1: E is never below −133, so no term is kept finer than 2^−158. 2^−68 · 2^−68 =
/// 2^−136 (8192 units of 2^−149) and −2^−80 · 2^−80 = −2^−160: with E = −136 (grid
/// 2^−161) the small product would be kept and the sum truncate to 8191 units; the floor
/// makes the grid 2^−158, the product vanishes and 8192 units stay (as on the H200).
#[test]
fn the_grid_is_never_finer_than_2_pow_minus_158() {
    let format = Format::Bf16;
    let (a, b) = pairs(format, &[(p2(-68), p2(-68)), (-p2(-80), p2(-80))]);
    assert_eq!(both(format, 0.0, &a, &b).to_bits(), 0x2000);
    // Above the floor nothing changes: 2^−128 − 2^−152 on the grid 2^−153 keeps the small
    // product, and the sum truncates to 2^21 − 1 units.
    let (a, b) = pairs(format, &[(p2(-64), p2(-64)), (-p2(-76), p2(-76))]);
    assert_eq!(both(format, 0.0, &a, &b).to_bits(), 0x1F_FFFF);
}

/// NaN and Inf follow IEEE 754 (to be confirmed on the H200).
#[test]
fn nan_and_inf_follow_ieee() {
    let format = Format::Bf16;
    let one = enc(format, 1.0);
    let mut a = [one; 16];
    let b = [one; 16];
    a[3] = BF16_NAN;
    assert!(both(format, 0.0, &a, &b).is_nan(), "NaN input");
    assert!(
        both(format, f32::NAN, &[one; 16], &b).is_nan(),
        "NaN accumulator"
    );
    let (mut a, mut b) = pairs(format, &[(1.0, 1.0)]);
    a[5] = BF16_INF;
    assert!(both(format, 0.0, &a, &b).is_nan(), "Inf · 0");
    b[5] = 0x8000 | enc(format, 3.0);
    assert_eq!(both(format, 0.0, &a, &b), f32::NEG_INFINITY, "Inf · −3");
    assert_eq!(both(format, f32::NEG_INFINITY, &a, &b), f32::NEG_INFINITY);
    assert!(both(format, f32::INFINITY, &a, &b).is_nan(), "Inf − Inf");
    a[6] = BF16_INF | 0x8000;
    b[6] = BF16_INF | 0x8000;
    assert!(both(format, 0.0, &a, &b).is_nan(), "−Inf + Inf products");
    // An infinite accumulator with finite products stays infinite; an overflowing finite
    // sum of the same sign does not change that.
    let (a, b) = pairs(format, &[(p2(127), 2.0), (-1.0, 1.0)]);
    assert_eq!(both(format, f32::INFINITY, &a, &b), f32::INFINITY);
    assert_eq!(both(format, f32::NEG_INFINITY, &a, &b), f32::NEG_INFINITY);
    // f16: Inf is 0x7C00.
    let (mut a, b) = pairs(Format::F16, &[(1.0, 2.0), (1.0, 1.0)]);
    a[1] = 0x7C00;
    assert_eq!(both(Format::F16, -5.0, &a, &b), f32::INFINITY);
}

// ---------------------------------------------------------------------------------------
// Random steps: the fast step against the reference

/// SplitMix64.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn range(&mut self, lo: i32, hi: i32) -> i32 {
        lo + self.below((hi - lo + 1) as u64) as i32
    }
}

/// Exponent field width and bias, and the all-ones field.
fn layout(format: Format) -> (u32, i32) {
    match format {
        Format::Bf16 => (8, 127),
        Format::F16 => (5, 15),
    }
}

/// A 16-bit element with exponent field `field` (clamped to the finite range), a random
/// fraction and sign.
fn element(rng: &mut Rng, format: Format, field: i32) -> u16 {
    let (bits, _) = layout(format);
    let p = 15 - bits;
    let field = field.clamp(0, (1 << bits) - 2) as u16;
    let frac = rng.next() as u16 & ((1 << p) - 1);
    let sign = (rng.next() as u16 & 1) << 15;
    sign | field << p | frac
}

/// The kinds of random steps.
const MODES: u32 = 7;

/// A random step (accumulator and 16 pairs) of kind `mode`:
/// 0 any bit patterns (specials included); 1 exponents clustered around a random centre
/// (anywhere in the range); 2 subnormal and tiny inputs; 3 inputs near the top of the
/// range; 4 cancelling pairs; 5 clustered with NaN, Inf and zeros planted; 6 zero-heavy.
fn random_step(rng: &mut Rng, format: Format, mode: u32) -> (f32, [u16; 16], [u16; 16]) {
    let (bits, _) = layout(format);
    let top = (1 << bits) - 2;
    let centre = rng.range(0, top);
    let spread = rng.range(0, 6);
    let pick = |rng: &mut Rng| -> u16 {
        let field = match mode {
            0 => return rng.next() as u16,
            2 => rng.range(0, 3) * (rng.below(2) as i32),
            3 => top - rng.range(0, 4),
            6 if rng.below(3) > 0 => return (rng.next() as u16) & 0x8000,
            _ => centre + rng.range(-spread, spread),
        };
        element(rng, format, field)
    };
    let mut a: [u16; 16] = std::array::from_fn(|_| pick(rng));
    let mut b: [u16; 16] = std::array::from_fn(|_| pick(rng));
    if mode == 4 {
        for t in (0..16).step_by(2) {
            a[t + 1] = a[t] ^ 0x8000;
            b[t + 1] = b[t];
        }
    }
    if mode == 5 {
        let (nan, inf) = match format {
            Format::Bf16 => (BF16_NAN, BF16_INF),
            Format::F16 => (0x7E01, 0x7C00),
        };
        for _ in 0..rng.range(1, 3) {
            let v = [nan, inf, inf | 0x8000, 0, 0x8000][rng.below(5) as usize];
            let t = rng.below(16) as usize;
            if rng.below(2) == 0 {
                a[t] = v;
            } else {
                b[t] = v;
            }
        }
    }
    // The accumulator: zero, a subnormal, extreme, any finite pattern, or (mostly) a value
    // at the products' scale times 2^[−30, 30].
    let scale = reference::value(format, a[0]) * reference::value(format, b[0]);
    let c = match rng.below(10) {
        0 => 0.0,
        1 => f32::from_bits(rng.next() as u32 & 0x807F_FFFF),
        2 => {
            f32::from_bits(rng.next() as u32 | 0x7F00_0000)
                * if rng.below(2) == 0 { 1.0 } else { -1.0 }
        }
        3 => f32::from_bits(rng.next() as u32),
        _ if scale.is_finite() && scale != 0.0 => {
            let v = scale * 2f64.powi(rng.range(-30, 30)) * (1.0 + rng.below(1000) as f64 / 1000.0);
            v as f32
        }
        _ => f32::from_bits(rng.next() as u32 & 0x3FFF_FFFF),
    };
    let c = if mode != 0 && mode != 5 && !c.is_finite() {
        1.0
    } else {
        c
    };
    (c, a, b)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4000))]

    /// The fast integer step equals the slow reference on random steps of every kind, for
    /// both formats: each case checks 64 steps.
    #[test]
    fn the_fast_step_equals_the_reference(seed in any::<u64>(), mode in 0..MODES, f16 in any::<bool>()) {
        let format = if f16 { Format::F16 } else { Format::Bf16 };
        let mut rng = Rng(seed);
        for _ in 0..64 {
            let (c, a, b) = random_step(&mut rng, format, mode);
            let (f, r) = (fast(format, c, &a, &b), reference::step(format, c, &a, &b));
            prop_assert!(
                same(f, r),
                "{:?} mode {} c {:#010x} a {:04x?} b {:04x?}: fast {:#010x}, reference {:#010x}",
                format, mode, c.to_bits(), a, b, f.to_bits(), r.to_bits()
            );
        }
    }
}

/// Every 16-bit pattern decodes to its value (sig · 2^(exp − p)) or to its class.
#[test]
fn decoding_is_exact_for_every_pattern() {
    for format in [Format::Bf16, Format::F16] {
        let p = match format {
            Format::Bf16 => 7,
            Format::F16 => 10,
        };
        for bits in 0..=u16::MAX {
            let v = reference::value(format, bits);
            let d = format.decode(bits);
            if v.is_nan() {
                assert_eq!(d.exp, step::NAN_EXP, "{bits:#06x}");
            } else if v.is_infinite() {
                let want = if v > 0.0 {
                    step::POS_INF_EXP
                } else {
                    step::NEG_INF_EXP
                };
                assert_eq!(d.exp, want, "{bits:#06x}");
            } else if v == 0.0 {
                assert_eq!(d, Dec::ZERO, "{bits:#06x}");
            } else {
                assert_eq!(d.sig as f64 * 2f64.powi(d.exp - p), v, "{bits:#06x}");
                // Normal values have p + 1 significant bits, subnormal ones their fraction
                // and the smallest normal exponent.
                let normal = bits & 0x7FFF >= 1 << p;
                let sig = d.sig.unsigned_abs();
                if normal {
                    assert!((1 << p..2 << p).contains(&sig), "{bits:#06x}");
                } else {
                    let (_, bias) = layout(format);
                    assert!(sig < 1 << p && d.exp == 1 - bias, "{bits:#06x}");
                }
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
#[test]
fn the_vector_decoder_is_decode_for_every_pattern() {
    use core::arch::x86_64::{__m256i, _mm256_loadu_si256, _mm256_storeu_si256};
    if !is_x86_feature_detected!("avx2") {
        return;
    }
    for format in [Format::Bf16, Format::F16] {
        for chunk in (0..=u16::MAX as u32).collect::<Vec<_>>().chunks(8) {
            let (mut sig, mut exp, mut special) = ([0i32; 8], [0i32; 8], [0i32; 8]);
            // SAFETY: AVX2 was detected; each array holds the 8 lanes loaded or stored.
            unsafe {
                let bits = _mm256_loadu_si256(chunk.as_ptr() as *const __m256i);
                let (s, e, sp) = super::x86::decode8(format, bits);
                _mm256_storeu_si256(sig.as_mut_ptr() as *mut __m256i, s);
                _mm256_storeu_si256(exp.as_mut_ptr() as *mut __m256i, e);
                _mm256_storeu_si256(special.as_mut_ptr() as *mut __m256i, sp);
            }
            for (i, &b) in chunk.iter().enumerate() {
                let d = format.decode(b as u16);
                assert_eq!((sig[i], exp[i]), (d.sig, d.exp), "{format:?} {b:#06x}");
                assert_eq!(special[i] != 0, d.is_special(), "{format:?} {b:#06x}");
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// The vector kernel against the step

/// Random tiles of accumulators and panels of steps of every kind through `kernel::run`
/// on every instruction set, against `step::step` lane by lane.
#[test]
fn the_kernel_is_the_step_on_every_instruction_set() {
    let mut rng = Rng(0x7c_3001);
    for round in 0..300 {
        let format = if round % 2 == 0 {
            Format::Bf16
        } else {
            Format::F16
        };
        let ns = 1 + rng.below(3) as usize;
        let rows = 1 + rng.below(MR as u64) as usize;
        // Each row-step and each lane-step draws its own kind, so special values appear in
        // some row-steps only.
        let mut a = vec![[Dec::ZERO; STEP_K]; rows * ns];
        let mut b = vec![BStep::ZERO; ns];
        let mut tile = [0.0f32; MR * NR];
        for x in a.iter_mut() {
            let kind = rng.below(MODES as u64) as u32;
            let (_, v, _) = random_step(&mut rng, format, kind);
            *x = v.map(|e| format.decode(e));
        }
        let mode = rng.below(MODES as u64) as u32;
        let mode = if mode == 5 && rng.below(4) > 0 {
            1
        } else {
            mode
        };
        for bs in b.iter_mut() {
            for j in 0..NR {
                let (c, _, v) = random_step(&mut rng, format, mode);
                for (t, e) in v.iter().enumerate() {
                    let d = format.decode(*e);
                    bs.sig[t][j] = d.sig;
                    bs.exp[t][j] = d.exp;
                    bs.special |= d.is_special();
                }
                for r in 0..rows {
                    tile[r * NR + j] = if rng.below(50) == 0 {
                        c
                    } else {
                        c.clamp(-1e30, 1e30)
                    };
                }
            }
        }
        let mut want = tile;
        for (s, bs) in b.iter().enumerate() {
            for r in 0..rows {
                for j in 0..NR {
                    let bj: [Dec; 16] = std::array::from_fn(|t| Dec {
                        sig: bs.sig[t][j],
                        exp: bs.exp[t][j],
                    });
                    want[r * NR + j] = step::step(format, want[r * NR + j], &a[r * ns + s], &bj);
                }
            }
        }
        for simd in Simd::all() {
            let mut got = tile;
            kernel::run(simd, format, rows, &a, &b, &mut got);
            for i in 0..rows * NR {
                assert!(
                    same(got[i], want[i]),
                    "round {round} {simd:?} {format:?} element {i}: {:#010x} vs {:#010x}",
                    got[i].to_bits(),
                    want[i].to_bits()
                );
            }
        }
    }
}

/// The largest sums a step can make: 16 products of the largest significands at E and an
/// accumulator with the largest significand at E add up to more than 2^31 units, which the
/// vector kernel's i32 sum must survive (it detects the overflow), with either sign.
#[test]
fn the_kernel_survives_the_largest_sums() {
    for (format, max_sig) in [(Format::Bf16, 0x3FFFu16), (Format::F16, 0x3FFF)] {
        for sign in [0u16, 0x8000] {
            let a = [format.decode(max_sig | sign); 16];
            let mut b = vec![BStep::ZERO];
            for t in 0..16 {
                let d = format.decode(max_sig);
                b[0].sig[t] = [d.sig; NR];
                b[0].exp[t] = [d.exp; NR];
            }
            // 1.99999988 · 2^(exp of the products), of either sign, and a few others.
            let e = a[0].exp + b[0].exp[0][0];
            let top = f32::from_bits(((e + 127) as u32) << 23 | 0x7F_FFFF);
            let mut tile = [0.0f32; MR * NR];
            for (j, c) in tile.iter_mut().enumerate() {
                *c = [top, -top, top / 2.0, 0.0][j % 4];
            }
            for simd in Simd::all() {
                let mut got = tile;
                kernel::run(simd, format, MR, &vec![a; MR], &b, &mut got);
                for (i, (&g, &c)) in got.iter().zip(&tile).enumerate() {
                    let want = step::step(format, c, &a, &[format.decode(max_sig); 16]);
                    assert!(
                        same(g, want),
                        "{simd:?} {format:?} sign {sign:#x} element {i}: {g:e} vs {want:e}"
                    );
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// The driver against a naive loop of steps

/// One call to test.
#[derive(Clone, Copy, Debug)]
struct Case {
    m: usize,
    n: usize,
    k: usize,
    batch: usize,
    a: Layout,
    b: Layout,
    dtype: DType,
    bias: Option<DType>,
    mode: OutputMode,
    pad: usize,
    /// The kind of random inputs (`random_step`'s modes).
    data: u32,
}

impl Case {
    fn gemm(&self) -> Gemm {
        let op = |layout, rows: usize, cols: usize| {
            let ld = match layout {
                Layout::RowMajor => cols,
                Layout::ColMajor => rows,
            }
            .max(1)
                + self.pad;
            Operand {
                dtype: self.dtype,
                layout,
                ld,
                batch_stride: ld * rows.max(cols).max(1) + self.pad,
            }
        };
        let ldc = self.n.max(1) + self.pad;
        Gemm {
            m: self.m,
            n: self.n,
            k: self.k,
            batch: self.batch,
            a: op(self.a, self.m, self.k),
            b: op(self.b, self.k, self.n),
            bias: self.bias,
            c: Output {
                mode: self.mode,
                ldc,
                batch_stride: ldc * self.m.max(1) + self.pad,
            },
            tier: Tier::TensorCores,
        }
    }
}

/// Reads element `idx` of a little-endian buffer of `dtype` as raw bits.
fn raw(buf: &[u8], dtype: DType, idx: usize) -> u32 {
    let s = dtype.size();
    let mut w = [0u8; 4];
    w[..s].copy_from_slice(&buf[idx * s..][..s]);
    u32::from_le_bytes(w)
}

fn write(buf: &mut [u8], dtype: DType, idx: usize, bits: u32) {
    let s = dtype.size();
    buf[idx * s..][..s].copy_from_slice(&bits.to_le_bytes()[..s]);
}

/// The tier's definition as a naive loop: for each element, steps of 16 in ascending k
/// (zero past K), then bias, accumulate and rounding with `crate::numeric`.
fn naive(g: &Gemm, a: &[u8], b: &[u8], bias: &[u8], c: &mut [u8]) {
    let format = Format::of(g.a.dtype).unwrap();
    let at = |op: &Operand, bt: usize, r: usize, col: usize| {
        bt * op.batch_stride
            + match op.layout {
                Layout::RowMajor => r * op.ld + col,
                Layout::ColMajor => r + col * op.ld,
            }
    };
    for bt in 0..g.batch {
        for i in 0..g.m {
            for j in 0..g.n {
                let mut acc = 0.0f32;
                for s in 0..g.k.div_ceil(16) {
                    let elem = |t: usize, f: &dyn Fn(usize) -> u16| {
                        if s * 16 + t < g.k {
                            f(s * 16 + t)
                        } else {
                            0
                        }
                    };
                    let av: [u16; 16] = std::array::from_fn(|t| {
                        elem(t, &|k| raw(a, g.a.dtype, at(&g.a, bt, i, k)) as u16)
                    });
                    let bv: [u16; 16] = std::array::from_fn(|t| {
                        elem(t, &|k| raw(b, g.b.dtype, at(&g.b, bt, k, j)) as u16)
                    });
                    acc = fast(format, acc, &av, &bv);
                }
                if let Some(d) = g.bias {
                    acc += crate::numeric::upcast(d, raw(bias, d, j));
                }
                let ci = bt * g.c.batch_stride + i * g.c.ldc + j;
                let bits = match g.c.mode {
                    OutputMode::AccumulateF32 => {
                        store_f32(f32::from_bits(raw(c, DType::F32, ci)) + acc).to_bits()
                    }
                    OutputMode::Overwrite(DType::F32) => store_f32(acc).to_bits(),
                    OutputMode::Overwrite(DType::BF16) => round_bf16(acc).to_bits() as u32,
                    OutputMode::Overwrite(DType::F16) => round_f16(acc).to_bits() as u32,
                };
                write(c, g.c.mode.dtype(), ci, bits);
            }
        }
    }
}

/// A buffer of `len` random elements of `dtype` of kind `data`.
fn buffer(rng: &mut Rng, dtype: DType, len: usize, data: u32) -> Vec<u8> {
    let mut v = vec![0u8; len * dtype.size()];
    let format = Format::of(dtype);
    let mut i = 0;
    while i < len {
        let (c, a, bb) = random_step(rng, format.unwrap_or(Format::Bf16), data);
        for x in a.iter().chain(&bb) {
            if i < len && format.is_some() {
                write(&mut v, dtype, i, *x as u32);
                i += 1;
            }
        }
        if format.is_none() {
            write(&mut v, dtype, i, c.to_bits());
            i += 1;
        }
    }
    v
}

/// Runs `case` through the naive loop and through the backend on every instruction set and
/// compares the whole C buffers (gaps between rows and entries included).
fn check(case: &Case, seed: u64) {
    let g = case.gemm();
    let ext = validate::check(&g).unwrap_or_else(|e| panic!("{case:?}: {e}"));
    let mut rng = Rng(seed);
    let a = buffer(&mut rng, case.dtype, ext.a, case.data);
    let b = buffer(&mut rng, case.dtype, ext.b, case.data);
    let bias = buffer(&mut rng, case.bias.unwrap_or(DType::F32), ext.bias, 1);
    let c0 = buffer(&mut rng, case.mode.dtype(), ext.c, 1);
    let mut want = c0.clone();
    naive(&g, &a, &b, &bias, &mut want);
    for simd in Simd::all() {
        let mut c = c0.clone();
        let p = GemmPointers {
            a: a.as_ptr().cast(),
            b: b.as_ptr().cast(),
            bias: bias.as_ptr().cast(),
            c: c.as_mut_ptr().cast(),
        };
        let bias_f32: Option<Vec<f32>> = g.bias.filter(|_| ext.bias > 0).map(|d| {
            (0..g.n)
                .map(|j| crate::numeric::upcast(d, raw(&bias, d, j)))
                .collect()
        });
        // SAFETY: every buffer holds the span validate::check gave for it.
        unsafe { super::gemm_with(simd, Isa::detect(), &g, &p, bias_f32.as_deref()) };
        if c != want {
            let size = case.mode.dtype().size();
            let first = (0..c.len()).find(|&i| c[i] != want[i]).unwrap() / size;
            panic!("{simd:?} {case:?} seed {seed}: C differs first at element {first}");
        }
    }
}

const DIMS: [usize; 12] = [0, 1, 2, 5, 15, 16, 17, 31, 33, 47, 64, 97];

/// K tails (every K mod 16), layouts and output modes, small shapes.
#[test]
fn the_backend_is_the_naive_loop_over_k_tails_layouts_and_modes() {
    let mut seed = 1;
    for dtype in [DType::BF16, DType::F16] {
        for k in (0..=49).chain([100, 255, 256, 257, 511, 512, 513]) {
            for (la, lb) in [
                (Layout::RowMajor, Layout::RowMajor),
                (Layout::RowMajor, Layout::ColMajor),
                (Layout::ColMajor, Layout::RowMajor),
                (Layout::ColMajor, Layout::ColMajor),
            ] {
                seed += 1;
                let mode = [
                    OutputMode::Overwrite(DType::F32),
                    OutputMode::Overwrite(dtype),
                    OutputMode::AccumulateF32,
                    OutputMode::Overwrite(if dtype == DType::F16 {
                        DType::BF16
                    } else {
                        DType::F16
                    }),
                ][seed % 4];
                let case = Case {
                    m: 7,
                    n: 37,
                    k,
                    batch: 1,
                    a: la,
                    b: lb,
                    dtype,
                    bias: [None, Some(DType::F32), Some(dtype)][seed % 3],
                    mode,
                    pad: seed % 2,
                    data: (seed % MODES as usize) as u32,
                };
                check(&case, seed as u64);
            }
        }
    }
}

/// Shapes across the blocking: several chunks of rows and columns, several K blocks.
#[test]
fn the_backend_is_the_naive_loop_across_blocks() {
    for (i, (m, n, k)) in [
        (250, 40, 40),
        (13, 530, 24),
        (9, 33, 16 * 32 * 2 + 5),
        (241, 513, 513),
    ]
    .into_iter()
    .enumerate()
    {
        let case = Case {
            m,
            n,
            k,
            batch: 1,
            a: Layout::RowMajor,
            b: if i % 2 == 0 {
                Layout::RowMajor
            } else {
                Layout::ColMajor
            },
            dtype: if i % 2 == 0 { DType::BF16 } else { DType::F16 },
            bias: Some(DType::F32),
            mode: OutputMode::Overwrite(DType::F32),
            pad: 1,
            data: 1,
        };
        check(&case, 100 + i as u64);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Random calls: shapes, layouts, batches, bias, output modes and kinds of data (NaN,
    /// Inf, subnormals, overflow and cancellation included).
    #[test]
    fn random_calls_are_the_naive_loop(
        m in prop::sample::select(&DIMS[..]),
        n in prop::sample::select(&DIMS[..]),
        k in 0usize..80,
        batch in 0usize..4,
        la in any::<bool>(),
        lb in any::<bool>(),
        f16 in any::<bool>(),
        bias in 0usize..3,
        mode in 0usize..4,
        pad in 0usize..3,
        data in 0..MODES,
        seed in any::<u64>(),
    ) {
        let dtype = if f16 { DType::F16 } else { DType::BF16 };
        let layout = |row| if row { Layout::RowMajor } else { Layout::ColMajor };
        let case = Case {
            m,
            n,
            k,
            batch,
            a: layout(la),
            b: layout(lb),
            dtype,
            bias: [None, Some(DType::F32), Some(dtype)][bias],
            mode: [
                OutputMode::Overwrite(DType::F32),
                OutputMode::Overwrite(dtype),
                OutputMode::AccumulateF32,
                OutputMode::Overwrite(DType::BF16),
            ][mode],
            pad,
            data,
        };
        check(&case, seed);
    }
}
