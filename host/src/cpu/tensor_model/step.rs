//! One k16 step of the tensor-core tier on sm_90, in integer arithmetic: the definition the
//! fast kernel (`kernel.rs`) must match, and the home of the rules for NaN and Inf.
//!
//! A step takes the f32 accumulator `c` and 16 pairs of 16-bit inputs and returns the new
//! accumulator (the model measured on the H200, `tests/data/tc-h200/README.md`, and made
//! exact by the wider comparison of 2026-11-29, `tests/gpu_tc_model.rs`):
//!
//! 1. E = the largest of `exp(a_t) + exp(b_t)` over the nonzero products, `exp(c)` when
//!    c ≠ 0, and −133. `exp(x)` is the exponent of x's encoding: `⌊log2 |x|⌋` for a normal
//!    value, the format's smallest normal exponent for a subnormal one (−126 for bf16 and
//!    an f32 accumulator, −14 for f16) — not its own, smaller, exponent;
//! 2. each term (c and the 16 exact products) is truncated toward zero to a multiple of
//!    2^(E−25) (so never finer than 2^−158);
//! 3. the truncated terms are summed exactly;
//! 4. the sum is truncated toward zero to f32 (to the subnormal grid 2^−149 below 2^−126);
//!    a magnitude ≥ 2^128 becomes ±Inf, and a sum that is zero or truncates to zero gives
//!    +0.0.
//!
//! Why no big numbers are needed: in units of 2^(E−25) every truncated term is an integer
//! below 2^27. An input is stored as it is encoded, a significand `sig` of at most p + 1
//! bits (p = 7 for bf16, 10 for f16; a subnormal's is its fraction, below 2^p) and the
//! exponent of rule 1, so a product is `|sig_a·sig_b| · 2^(exp_a + exp_b − 2p)` with
//! `|sig_a·sig_b| < 2^(2p+2)`, and in units of 2^(E−25) it is
//! `(|sig_a·sig_b| << (25 − 2p)) >> (E − exp_a − exp_b)`: a shift left by a constant (exact,
//! below 2^27) and a shift right by a non-negative amount (the truncation). The
//! accumulator, `m · 2^(exp_c − 23)` with m < 2^24, is `(m << 2) >> (E − exp_c)`. The
//! positive and the negative terms are summed apart in u32 (17 terms below 2^27 each stay
//! below 2^32) and subtracted at the end.
//!
//! **What the H200 showed beyond the golden files** (`tests/gpu_tc_model.rs`, 2026-11-29;
//! the first model, which counted subnormal inputs with their own exponent, had no floor
//! on E and kept the sign of a sum that truncates to zero, differed from the GPU on 45,645
//! outputs, and every one is explained by rules 1 and 4 as written above):
//! - A subnormal input counts with its format's smallest normal exponent: it raises E as
//!   if it were normal, and its product's low bits are cut on that coarser grid.
//! - E is never below −133: products of tiny bf16 values are truncated to multiples of
//!   2^−158 before the sum, not to a finer grid.
//! - A zero result is +0.0, also when a negative sum truncates to zero (−2^−150 gives +0.0).
//! - NaN and Inf follow IEEE 754 (211,344 outputs measured): if c or any input is NaN, or
//!   some product is Inf · 0, the result is NaN; otherwise, if some terms are infinite (an
//!   infinite c, or a product with an infinite factor) they decide the result: ±Inf when
//!   they all have one sign, NaN when both signs occur. Finite terms do not matter then.

use crate::types::DType;

/// The two input formats of the tier.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Format {
    Bf16,
    F16,
}

impl Format {
    /// The format of a 16-bit dtype (`None` for f32, which the tier does not take).
    pub(crate) fn of(dtype: DType) -> Option<Format> {
        match dtype {
            DType::BF16 => Some(Format::Bf16),
            DType::F16 => Some(Format::F16),
            DType::F32 => None,
        }
    }

    /// Fraction bits p (the significand has p + 1).
    const fn frac_bits(self) -> u32 {
        match self {
            Format::Bf16 => 7,
            Format::F16 => 10,
        }
    }

    /// The shift that puts a product of two significands on the grid 2^(E−25) when
    /// E = exp(a) + exp(b): 25 − 2p.
    pub(crate) const fn product_shift(self) -> u32 {
        25 - 2 * self.frac_bits()
    }

    /// Decodes a stored element (its raw bits).
    pub(crate) fn decode(self, bits: u16) -> Dec {
        let (exp_bits, bias) = match self {
            Format::Bf16 => (8, 127),
            Format::F16 => (5, 15),
        };
        let p = self.frac_bits();
        let negative = bits >> 15 != 0;
        let field = (bits as u32 >> p) & ((1 << exp_bits) - 1);
        let frac = bits as u32 & ((1 << p) - 1);
        let (sig, exp) = if field == (1 << exp_bits) - 1 {
            let class = match (frac != 0, negative) {
                (true, _) => NAN_EXP,
                (false, false) => POS_INF_EXP,
                (false, true) => NEG_INF_EXP,
            };
            return Dec { sig: 0, exp: class };
        } else if field == 0 {
            if frac == 0 {
                return Dec::ZERO;
            }
            // Subnormal: frac · 2^(1 − bias − p), kept as encoded: its exponent for rule 1
            // is the smallest normal one, 1 − bias.
            (frac, 1 - bias)
        } else {
            (frac | 1 << p, field as i32 - bias)
        };
        let sig = sig as i32;
        Dec {
            sig: if negative { -sig } else { sig },
            exp,
        }
    }
}

/// The exponent of a zero (and of a padded element): so low that a product with a zero
/// factor never sets E, and any shift right by `E − exp` removes it.
pub(crate) const ZERO_EXP: i32 = -(1 << 20);
/// The exponents that mark NaN and ±Inf inputs. Their `sig` is 0 and their exponents are
/// below every real one, so the finite arithmetic sees them as zeros; the caller routes any
/// step that contains one to [`special`].
pub(crate) const NAN_EXP: i32 = ZERO_EXP - 1;
pub(crate) const POS_INF_EXP: i32 = ZERO_EXP - 2;
pub(crate) const NEG_INF_EXP: i32 = ZERO_EXP - 3;

/// A decoded input element: `sig · 2^(exp − p)`, `sig` signed with p + 1 significant bits
/// for a normal value, fewer for a subnormal one (its fraction), 0 for a zero, NaN or Inf;
/// `exp` is the exponent of rule 1: `⌊log2 |x|⌋` for a normal value, the smallest normal
/// exponent `1 − bias` for a subnormal one (or one of the marker exponents above).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Dec {
    pub sig: i32,
    pub exp: i32,
}

impl Dec {
    pub(crate) const ZERO: Dec = Dec {
        sig: 0,
        exp: ZERO_EXP,
    };

    /// NaN or ±Inf.
    pub(crate) fn is_special(self) -> bool {
        self.exp < ZERO_EXP
    }
}

/// The accumulator as a signed significand and the exponent it counts with: normal
/// `m · 2^(e − 23)` with 2^23 ≤ |m| < 2^24; subnormal `m · 2^−149`, counted as e = −126;
/// zero `(0, ZERO_EXP)`. `c` must be finite.
#[inline(always)]
pub(crate) fn decode_acc(c: f32) -> (i32, i32) {
    let bits = c.to_bits();
    let field = (bits >> 23 & 0xFF) as i32;
    let frac = (bits & 0x7F_FFFF) as i32;
    let (m, e) = if field == 0 {
        (frac, if frac == 0 { ZERO_EXP } else { -126 })
    } else {
        (frac | 1 << 23, field - 127)
    };
    (if bits >> 31 != 0 { -m } else { m }, e)
}

/// The floor of E (rule 1): no step truncates its terms to a grid finer than 2^(−133−25).
pub(crate) const E_MIN: i32 = -133;

/// Rule 4: `(pos − neg) · 2^(e − 25)` truncated toward zero to f32, ±Inf from 2^128 on,
/// +0.0 when that is zero. `pos` and `neg` are the sums of the positive and of the negative
/// truncated terms; `e ≥ E_MIN`.
#[inline(always)]
pub(crate) fn to_f32(pos: u32, neg: u32, e: i32) -> f32 {
    let (mag, sign) = if pos >= neg {
        (pos - neg, 0)
    } else {
        (neg - pos, 1u32 << 31)
    };
    if mag == 0 {
        return 0.0;
    }
    let top = 31 - mag.leading_zeros() as i32; // ⌊log2 mag⌋
    let exp = top + e - 25; // ⌊log2 |sum|⌋
    let bits = if exp >= 128 {
        0x7F80_0000
    } else if exp >= -126 {
        // 24 significant bits, the rest cut off.
        let m = if top > 23 {
            mag >> (top - 23)
        } else {
            mag << (23 - top)
        };
        ((exp + 127) as u32) << 23 | (m & 0x7F_FFFF)
    } else {
        // Multiples of 2^−149: mag · 2^(e − 25 + 149), cut off (e + 124 ≥ −9). Below 2^−126
        // the result has at most 23 bits, so a shift left cannot overflow.
        let s = e + 124;
        let bits = if s >= 0 {
            mag << s
        } else {
            mag.checked_shr((-s) as u32).unwrap_or(0)
        };
        if bits == 0 {
            // Truncated to zero: +0.0 whatever the sum's sign (measured on the H200).
            return 0.0;
        }
        bits
    };
    f32::from_bits(sign | bits)
}

/// One step: the new accumulator after adding the 16 products `a[t] · b[t]` to `c`.
pub(crate) fn step(format: Format, c: f32, a: &[Dec; 16], b: &[Dec; 16]) -> f32 {
    if !c.is_finite() || a.iter().chain(b).any(|d| d.is_special()) {
        return special(format, c, a, b);
    }
    finite(format, c, a, b)
}

/// A step whose inputs and accumulator are all finite.
pub(crate) fn finite(format: Format, c: f32, a: &[Dec; 16], b: &[Dec; 16]) -> f32 {
    let (cm, ce) = decode_acc(c);
    let e = a
        .iter()
        .zip(b)
        .map(|(x, y)| x.exp + y.exp)
        .fold(ce.max(E_MIN), i32::max);
    let (mut pos, mut neg) = (0u32, 0u32);
    let mut add = |value: i32, shifted: u32, by: i32| {
        // `by` ≥ 0 because E is the maximum; shifting 32 or more places leaves nothing.
        let t = shifted.checked_shr(by as u32).unwrap_or(0);
        if value < 0 {
            neg += t;
        } else {
            pos += t;
        }
    };
    add(cm, cm.unsigned_abs() << 2, e - ce);
    for (x, y) in a.iter().zip(b) {
        let p = x.sig * y.sig;
        add(
            p,
            p.unsigned_abs() << format.product_shift(),
            e - x.exp - y.exp,
        );
    }
    to_f32(pos, neg, e)
}

/// A step with a NaN or an infinity among c and the inputs (see the module docs; IEEE 754
/// semantics, to be confirmed on the H200).
#[cold]
pub(crate) fn special(format: Format, c: f32, a: &[Dec; 16], b: &[Dec; 16]) -> f32 {
    if c.is_nan() {
        return f32::NAN;
    }
    let (mut pos_inf, mut neg_inf) = (c == f32::INFINITY, c == f32::NEG_INFINITY);
    for (x, y) in a.iter().zip(b) {
        let inf_sign = |d: &Dec| match d.exp {
            POS_INF_EXP => Some(false),
            NEG_INF_EXP => Some(true),
            _ => None,
        };
        if x.exp == NAN_EXP || y.exp == NAN_EXP {
            return f32::NAN;
        }
        let (sx, sy) = (inf_sign(x), inf_sign(y));
        if sx.is_none() && sy.is_none() {
            continue;
        }
        // Inf · 0 (the other factor is zero: not infinite and with a zero significand).
        if (sx.is_none() && x.sig == 0) || (sy.is_none() && y.sig == 0) {
            return f32::NAN;
        }
        let negative = sx.unwrap_or(x.sig < 0) != sy.unwrap_or(y.sig < 0);
        if negative {
            neg_inf = true;
        } else {
            pos_inf = true;
        }
    }
    match (pos_inf, neg_inf) {
        (true, true) => f32::NAN,
        (true, false) => f32::INFINITY,
        (false, true) => f32::NEG_INFINITY,
        (false, false) => finite(format, c, a, b),
    }
}
