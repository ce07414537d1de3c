//! Special values to plant in GEMM inputs: NaN (quiet and signalling, with payloads and both
//! signs), ±Inf, ±0, subnormals, the largest finite value and the smallest normal. Shared by
//! the CPU and GPU special-value sweeps (`tests/cpu_special_values.rs`,
//! `tests/gpu_special_values.rs`); works on raw bits, so either test's buffers can use it.
#![allow(dead_code)]

use sgemm_bi::DType;

/// How densely, and where, specials are planted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Plant {
    /// About one element in 200 is NaN or ±Inf, one in eight ±0 or subnormal: most outputs
    /// stay finite, some chains meet a NaN or an Inf.
    Sparse,
    /// Every other element is special: most outputs are NaN or Inf.
    Dense,
    /// Only zeros and subnormals (no NaN or Inf): exercises the chain's +0.0 start, signed
    /// zeros and gradual underflow.
    ZerosAndSubnormals,
    /// Normal values whose products underflow below the smallest f32 subnormal: chains of
    /// negative products round to −0 and outputs are subnormal or ±0.
    Tiny,
}

pub const PLANTS: [Plant; 4] = [
    Plant::Sparse,
    Plant::Dense,
    Plant::ZerosAndSubnormals,
    Plant::Tiny,
];

/// Field layout of a dtype: (sign bit, exponent mask, mantissa mask, quiet bit).
fn fields(dtype: DType) -> (u32, u32, u32, u32) {
    match dtype {
        DType::F32 => (1 << 31, 0x7F80_0000, 0x007F_FFFF, 0x0040_0000),
        DType::BF16 => (1 << 15, 0x7F80, 0x007F, 0x0040),
        DType::F16 => (1 << 15, 0x7C00, 0x03FF, 0x0200),
    }
}

/// One special value of `dtype` as raw bits, chosen with `r` (64 random bits).
pub fn special(dtype: DType, r: u64) -> u32 {
    let (sign, exp, mant, quiet) = fields(dtype);
    let s = if r & 1 == 1 { sign } else { 0 };
    let payload = (r >> 8) as u32 & mant;
    match (r >> 1) % 9 {
        0 => s | exp | quiet | payload,          // quiet NaN, random payload
        1 => s | exp | ((payload & !quiet) | 1), // signalling NaN
        2 => exp,                                // +Inf
        3 => sign | exp,                         // −Inf
        4 => 0,                                  // +0
        5 => sign,                               // −0
        6 => s | (payload | 1),                  // a subnormal
        7 => s | (exp - (exp & exp.wrapping_neg())) | mant, // the largest finite value
        _ => s | (exp & exp.wrapping_neg()),     // the smallest normal
    }
}

/// A zero or a subnormal of `dtype` (raw bits), chosen with `r`.
pub fn zero_or_subnormal(dtype: DType, r: u64) -> u32 {
    let (sign, _, mant, _) = fields(dtype);
    let s = if r & 1 == 1 { sign } else { 0 };
    match (r >> 1) % 3 {
        0 => s,
        _ => s | (((r >> 8) as u32 & mant) | 1),
    }
}

/// A normal value of `dtype` with a random sign and mantissa and a binary exponent near
/// `e` (raw bits).
pub fn normal_near(dtype: DType, e: i32, r: u64) -> u32 {
    let (sign, _, mant, _) = fields(dtype);
    let s = if r & 1 == 1 { sign } else { 0 };
    let (bias, shift) = match dtype {
        DType::F32 => (127, 23),
        DType::BF16 => (127, 7),
        DType::F16 => (15, 10),
    };
    let e = (e + ((r >> 4) % 5) as i32 - 2).clamp(1 - bias, bias);
    s | (((e + bias) as u32) << shift) | ((r >> 16) as u32 & mant)
}

/// The bits of element `i` of an input after planting, or `None` to keep the element's
/// random finite value. `r` gives 64 fresh random bits per call.
pub fn planted(plant: Plant, dtype: DType, mut r: impl FnMut() -> u64) -> Option<u32> {
    let roll = r() % 1000;
    match plant {
        Plant::Sparse if roll < 5 => Some(special(dtype, r())),
        Plant::Sparse if roll < 130 => Some(zero_or_subnormal(dtype, r())),
        Plant::Sparse => None,
        Plant::Dense if roll < 500 => Some(special(dtype, r())),
        Plant::Dense => None,
        Plant::ZerosAndSubnormals if roll < 600 => Some(zero_or_subnormal(dtype, r())),
        Plant::ZerosAndSubnormals => None,
        // |a|, |b| ≈ 2^-76 (f32, bf16) or 2^-14 (f16): f32 products ≈ 2^-152 or 2^-28.
        Plant::Tiny => Some(match dtype {
            DType::F32 | DType::BF16 => normal_near(dtype, -76, r()),
            DType::F16 => normal_near(dtype, -14, r()),
        }),
    }
}

/// Kinds of output values, counted to show what a sweep reached.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Reached {
    pub nan: usize,
    pub pos_inf: usize,
    pub neg_inf: usize,
    pub neg_zero: usize,
    pub pos_zero: usize,
    pub subnormal: usize,
    pub finite: usize,
}

impl Reached {
    /// Counts one output element of `dtype` given by its raw bits.
    pub fn count(&mut self, dtype: DType, bits: u32) {
        let (sign, exp, mant, _) = fields(dtype);
        let (e, m) = (bits & exp, bits & mant);
        match (e == exp, m != 0, e == 0) {
            (true, true, _) => self.nan += 1,
            (true, false, _) if bits & sign != 0 => self.neg_inf += 1,
            (true, false, _) => self.pos_inf += 1,
            (false, false, true) if bits & sign != 0 => self.neg_zero += 1,
            (false, false, true) => self.pos_zero += 1,
            (false, true, true) => self.subnormal += 1,
            _ => self.finite += 1,
        }
    }

    pub fn add(&mut self, o: &Reached) {
        self.nan += o.nan;
        self.pos_inf += o.pos_inf;
        self.neg_inf += o.neg_inf;
        self.neg_zero += o.neg_zero;
        self.pos_zero += o.pos_zero;
        self.subnormal += o.subnormal;
        self.finite += o.finite;
    }

    pub fn total(&self) -> usize {
        self.nan
            + self.pos_inf
            + self.neg_inf
            + self.neg_zero
            + self.pos_zero
            + self.subnormal
            + self.finite
    }

    /// Every kind of output was reached at least once.
    pub fn all_kinds(&self) -> bool {
        [
            self.nan,
            self.pos_inf,
            self.neg_inf,
            self.neg_zero,
            self.pos_zero,
            self.subnormal,
            self.finite,
        ]
        .iter()
        .all(|&n| n > 0)
    }
}

impl std::fmt::Display for Reached {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} outputs: {} NaN, {} +Inf, {} −Inf, {} −0, {} +0, {} subnormal, {} other finite",
            self.total(),
            self.nan,
            self.pos_inf,
            self.neg_inf,
            self.neg_zero,
            self.pos_zero,
            self.subnormal,
            self.finite
        )
    }
}
