//! The AVX2 + FMA microkernel (intrinsics): the block in two passes of 16 columns, each
//! keeping `2 R` accumulators in registers.

use super::{Tile, MR, NR};
use core::arch::x86_64::{
    __m256, _mm256_fmadd_ps, _mm256_loadu_ps, _mm256_set1_ps, _mm256_setzero_ps, _mm256_storeu_ps,
};

/// Columns per pass: two 8-lane registers per row, so 6 rows use 12 of the 16 registers,
/// leaving 2 for a row of B and 1 for a broadcast of A (the classic AVX2 shape).
const HALF: usize = 16;

const _: () = assert!(NR % HALF == 0, "the block is made of whole passes");

/// `R` rows of the block. `R` is a constant so the row loops unroll and the accumulator
/// arrays become registers, and a tail of fewer than MR rows costs proportionally less
/// (which matters for small-M calls).
///
/// # Safety
/// 1. The CPU supports AVX2 and FMA.
/// 2. `a.len() >= kc · MR` and `b.len() == kc · NR` with `kc = b.len() / NR`.
#[target_feature(enable = "avx2,fma")]
pub(super) unsafe fn block<const R: usize>(a: &[f32], b: &[f32], t: &mut Tile, fresh: bool) {
    const { assert!(R >= 1 && R <= MR, "a block has 1..=MR rows") };
    let kc = b.len() / NR;
    let (pa, pt) = (a.as_ptr(), t.as_mut_ptr());
    for pass in 0..NR / HALF {
        // Columns pass·16 .. +16 of every row of the tile and of every row of B.
        let (pb, pt) = (
            b.as_ptr().wrapping_add(pass * HALF),
            pt.wrapping_add(pass * HALF),
        );
        // SAFETY: (1) makes the intrinsics available. Every offset is inside its buffer:
        // `t`: r · NR + pass · 16 + 16 <= MR · NR; `b`: k · NR + pass · 16 + 16 <= kc · NR;
        // `a`: k · MR + r < kc · MR, by (2). Unaligned loads and stores accept any address.
        unsafe {
            let mut lo: [__m256; R] = [_mm256_setzero_ps(); R];
            let mut hi: [__m256; R] = [_mm256_setzero_ps(); R];
            if !fresh {
                for r in 0..R {
                    lo[r] = _mm256_loadu_ps(pt.add(r * NR));
                    hi[r] = _mm256_loadu_ps(pt.add(r * NR + 8));
                }
            }
            for k in 0..kc {
                let b_lo = _mm256_loadu_ps(pb.add(k * NR));
                let b_hi = _mm256_loadu_ps(pb.add(k * NR + 8));
                for r in 0..R {
                    let x = _mm256_set1_ps(*pa.add(k * MR + r));
                    // One vfmadd per accumulator and step: a single rounding, ascending k.
                    lo[r] = _mm256_fmadd_ps(x, b_lo, lo[r]);
                    hi[r] = _mm256_fmadd_ps(x, b_hi, hi[r]);
                }
            }
            for r in 0..R {
                _mm256_storeu_ps(pt.add(r * NR), lo[r]);
                _mm256_storeu_ps(pt.add(r * NR + 8), hi[r]);
            }
        }
    }
}
