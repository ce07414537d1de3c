//! The epilogue eight columns at a time (AVX2 + F16C), bit-identical to the scalar
//! definition in `mod.rs` (the tests compare them on every rounding boundary):
//!
//! - the bias add and the accumulate add are the same single f32 additions;
//! - NaN lanes are replaced by the canonical f32 NaN `0x7FFF_FFFF` before any rounding;
//! - bf16: round-to-nearest-even on the bit pattern, `(x + 0x7FFF + lsb) >> 16`, which is
//!   the rounding `half::bf16::from_f32` performs for every non-NaN value (a carry into the
//!   exponent gives the next binade or ±Inf in both); NaN lanes become `0x7FFF`;
//! - f16: `vcvtps2ph` with round-to-nearest-even, the instruction `half::f16::from_f32`
//!   itself uses on F16C CPUs; the canonical f32 NaN converts to the canonical `0x7FFF`.

use crate::numeric::CANONICAL_NAN_F32;
use crate::types::{DType, OutputMode};
use core::arch::x86_64::{
    __m128i, __m256, _mm256_add_epi32, _mm256_add_ps, _mm256_and_si256, _mm256_blendv_epi8,
    _mm256_blendv_ps, _mm256_castps_si256, _mm256_castsi256_ps, _mm256_castsi256_si128,
    _mm256_cmp_ps, _mm256_cvtps_ph, _mm256_extracti128_si256, _mm256_loadu_ps, _mm256_set1_epi32,
    _mm256_srli_epi32, _mm256_storeu_ps, _mm_packus_epi32, _mm_storeu_si128, _CMP_UNORD_Q,
    _MM_FROUND_TO_NEAREST_INT,
};

/// Stores the leading multiple of 8 columns of one row; returns how many it stored.
///
/// # Safety
/// 1. The CPU supports AVX2 and F16C.
/// 2. `chains.len()` elements of the mode's dtype at `c` are writable (any alignment) and
///    belong to the caller alone; `bias`, if any, is as long as `chains`.
#[target_feature(enable = "avx2,f16c")]
pub(super) unsafe fn row(
    c: *mut u8,
    mode: OutputMode,
    chains: &[f32],
    bias: Option<&[f32]>,
) -> usize {
    let n = chains.len() - chains.len() % 8;
    // SAFETY: (1) makes the intrinsics available; j + 8 <= n <= chains.len() keeps every
    // load inside `chains` and `bias` and every store inside the row (2); all unaligned.
    unsafe {
        let canonical = _mm256_castsi256_ps(_mm256_set1_epi32(CANONICAL_NAN_F32 as i32));
        for j in (0..n).step_by(8) {
            let mut v = _mm256_loadu_ps(chains.as_ptr().add(j));
            if let Some(b) = bias {
                v = _mm256_add_ps(v, _mm256_loadu_ps(b.as_ptr().add(j)));
            }
            if mode == OutputMode::AccumulateF32 {
                v = _mm256_add_ps(_mm256_loadu_ps((c as *const f32).add(j)), v);
            }
            let nan = _mm256_cmp_ps::<_CMP_UNORD_Q>(v, v);
            let v = _mm256_blendv_ps(v, canonical, nan);
            match mode {
                OutputMode::AccumulateF32 | OutputMode::Overwrite(DType::F32) => {
                    _mm256_storeu_ps((c as *mut f32).add(j), v)
                }
                OutputMode::Overwrite(DType::BF16) => {
                    let h = round_bf16(v, nan);
                    _mm_storeu_si128((c as *mut u16).add(j) as *mut __m128i, h);
                }
                OutputMode::Overwrite(DType::F16) => {
                    let h = _mm256_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(v);
                    _mm_storeu_si128((c as *mut u16).add(j) as *mut __m128i, h);
                }
            }
        }
    }
    n
}

/// Eight f32 rounded to bf16 bit patterns (nearest, ties to even), NaN lanes (`nan`) as the
/// canonical `0x7FFF`.
///
/// # Safety
/// The CPU supports AVX2.
#[target_feature(enable = "avx2")]
unsafe fn round_bf16(v: __m256, nan: __m256) -> __m128i {
    // SAFETY: register-only intrinsics, available by the caller's contract (the block is
    // required before Rust 1.87, the crate's minimum is 1.85).
    #[allow(unused_unsafe)]
    unsafe {
        let x = _mm256_castps_si256(v);
        let lsb = _mm256_and_si256(_mm256_srli_epi32::<16>(x), _mm256_set1_epi32(1));
        let up = _mm256_add_epi32(_mm256_add_epi32(x, _mm256_set1_epi32(0x7FFF)), lsb);
        let r = _mm256_srli_epi32::<16>(up);
        let r = _mm256_blendv_epi8(r, _mm256_set1_epi32(0x7FFF), _mm256_castps_si256(nan));
        // Every lane is <= 0xFFFF, so the unsigned saturating pack only narrows.
        _mm_packus_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256::<1>(r))
    }
}
