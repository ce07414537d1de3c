//! The two roundings of the contract, shared by every backend: the exact upcast of an input
//! element to f32, and the one round-to-nearest-even from f32 to the output dtype.
//!
//! NaN results are canonicalised (f32 `0x7FFF_FFFF`, bf16 and f16 `0x7FFF`) because the CPU
//! and the GPU propagate NaN payloads differently; with one canonical NaN the scalar tier's
//! bits agree on every device even for NaN outputs. The GPU epilogue does the same.

use crate::types::DType;
use half::{bf16, f16};

/// The canonical NaNs every backend stores (defined once, in the crate the kernels share).
pub use sgemm_bi_abi::numeric::{CANONICAL_NAN_16, CANONICAL_NAN_F32};

/// Exact upcast of a stored element (its raw bits) to f32.
#[inline(always)]
pub fn upcast(dtype: DType, bits: u32) -> f32 {
    match dtype {
        DType::F32 => f32::from_bits(bits),
        DType::BF16 => f32::from_bits(bits << 16),
        DType::F16 => f16::from_bits(bits as u16).to_f32(),
    }
}

/// f32 as stored in an f32 output (NaN canonicalised).
#[inline(always)]
pub fn store_f32(v: f32) -> f32 {
    if v.is_nan() {
        f32::from_bits(CANONICAL_NAN_F32)
    } else {
        v
    }
}

/// One round-to-nearest-even of `v` to bf16 (NaN canonicalised).
#[inline(always)]
pub fn round_bf16(v: f32) -> bf16 {
    if v.is_nan() {
        bf16::from_bits(CANONICAL_NAN_16)
    } else {
        bf16::from_f32(v)
    }
}

/// One round-to-nearest-even of `v` to f16 (NaN canonicalised).
#[inline(always)]
pub fn round_f16(v: f32) -> f16 {
    if v.is_nan() {
        f16::from_bits(CANONICAL_NAN_16)
    } else {
        f16::from_f32(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upcast_is_exact_for_every_16_bit_pattern() {
        for bits in 0..=u16::MAX {
            let b = upcast(DType::BF16, bits as u32);
            let h = upcast(DType::F16, bits as u32);
            let (rb, rh) = (bf16::from_bits(bits), f16::from_bits(bits));
            if rb.is_nan() {
                assert!(b.is_nan());
            } else {
                assert_eq!(round_bf16(b).to_bits(), bits, "bf16 {bits:#06x}");
            }
            if rh.is_nan() {
                assert!(h.is_nan());
            } else {
                assert_eq!(round_f16(h).to_bits(), bits, "f16 {bits:#06x}");
            }
        }
    }

    #[test]
    fn rounding_is_to_nearest_even() {
        // 1 + 2^-8 is halfway between two bf16 values: ties go to the even one (1.0).
        assert_eq!(round_bf16(1.0 + 2f32.powi(-8)).to_bits(), 0x3F80);
        // 1 + 3·2^-8 is halfway too: the even neighbour is 1 + 2^-6.
        assert_eq!(round_bf16(1.0 + 3.0 * 2f32.powi(-8)).to_bits(), 0x3F82);
        assert_eq!(round_f16(1.0 + 2f32.powi(-11)).to_bits(), 0x3C00);
        assert_eq!(
            round_f16(65520.0).to_bits(),
            0x7C00,
            "f16 overflow rounds to +Inf"
        );
    }

    #[test]
    fn nan_is_canonical() {
        let payload = f32::from_bits(0xFFC0_1234);
        assert_eq!(store_f32(payload).to_bits(), CANONICAL_NAN_F32);
        assert_eq!(round_bf16(payload).to_bits(), CANONICAL_NAN_16);
        assert_eq!(round_f16(payload).to_bits(), CANONICAL_NAN_16);
    }
}
