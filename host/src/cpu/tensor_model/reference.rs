//! A slow, independent implementation of one step for the tests: the values are taken from
//! the `half` crate as f64 (exact), each term is truncated with f64 arithmetic
//! (`trunc(v / 2^(E−25))`, exact because dividing by a power of two is), the integer terms
//! are summed in i128, and the sum is truncated to f32 by correcting f64 → f32
//! round-to-nearest. Infinities and NaN come from IEEE f64 arithmetic itself. It shares no
//! code with `step.rs`: neither its decoding, nor its shifts, nor its bound on the terms.
//! Rule 1's exponent of an input is read from its f64 value and raised to the format's
//! smallest normal exponent (which changes subnormal inputs only).

use half::{bf16, f16};

use super::step::Format;

/// The value of a stored 16-bit element, exactly.
pub(super) fn value(format: Format, bits: u16) -> f64 {
    match format {
        Format::Bf16 => bf16::from_bits(bits).to_f64(),
        Format::F16 => f16::from_bits(bits).to_f64(),
    }
}

/// ⌊log2 |v|⌋ of a finite nonzero f64 that is normal in f64 (every value here is).
fn exponent(v: f64) -> i32 {
    assert!(v.is_normal(), "{v} is not a normal f64");
    ((v.to_bits() >> 52) & 0x7FF) as i32 - 1023
}

/// The smallest normal exponent of a format: rule 1 counts a subnormal input with it.
fn min_normal_exponent(format: Format) -> i32 {
    match format {
        Format::Bf16 => -126,
        Format::F16 => -14,
    }
}

/// `v` truncated toward zero to f32 (v finite, |v| < 2^128).
fn truncate_to_f32(v: f64) -> f32 {
    let mag = v.abs();
    let mut r = mag as f32; // nearest, possibly above `mag` (or Inf just above f32::MAX)
    if r as f64 > mag {
        r = f32::from_bits(r.to_bits() - 1);
    }
    if v < 0.0 {
        -r
    } else {
        r
    }
}

/// One step of the model, slowly (see the module docs).
pub(super) fn step(format: Format, c: f32, a: &[u16; 16], b: &[u16; 16]) -> f32 {
    let products: Vec<f64> = a
        .iter()
        .zip(b)
        .map(|(&x, &y)| value(format, x) * value(format, y))
        .collect();
    if !c.is_finite() || products.iter().any(|p| !p.is_finite()) {
        // Some term is NaN or infinite (f64 products of 16-bit values cannot overflow, and
        // Inf · 0 is NaN): IEEE addition decides, the finite terms cannot change it.
        let s = products.iter().fold(c as f64, |s, p| s + p);
        return if s.is_nan() { f32::NAN } else { s as f32 };
    }
    // Rule 1, with the exponents read from the factors' f64 encodings (a subnormal input
    // counts as its format's smallest normal exponent).
    let emin = min_normal_exponent(format);
    let mut e = i32::MIN;
    for (&x, &y) in a.iter().zip(b) {
        let (vx, vy) = (value(format, x), value(format, y));
        if vx != 0.0 && vy != 0.0 {
            e = e.max(exponent(vx).max(emin) + exponent(vy).max(emin));
        }
    }
    if c != 0.0 {
        e = e.max(if c.is_subnormal() {
            -126
        } else {
            exponent(c as f64)
        });
    }
    if e == i32::MIN {
        return 0.0; // no nonzero term
    }
    // E is never below −133.
    let e = e.max(-133);
    // Rules 2 and 3: each term in units of 2^(E−25), truncated, summed exactly.
    let unit = 2f64.powi(e - 25);
    let sum: i128 = std::iter::once(c as f64)
        .chain(products)
        .map(|v| {
            let t = (v / unit).trunc();
            assert!(t.abs() < 2f64.powi(53), "term {t} is not exact in f64");
            t as i128
        })
        .sum();
    if sum == 0 {
        return 0.0;
    }
    // Rule 4. The sum times the unit is exact in f64 (|sum| < 2^53 and the unit is normal).
    assert!(sum.unsigned_abs() < 1 << 53);
    let v = sum as f64 * unit;
    if v.abs() >= 2f64.powi(128) {
        return if v > 0.0 {
            f32::INFINITY
        } else {
            f32::NEG_INFINITY
        };
    }
    // A sum that truncates to zero gives +0.0 (`+ 0.0` turns −0.0 into +0.0).
    truncate_to_f32(v) + 0.0
}
