//! The AVX2 + FMA microkernel (intrinsics): the block in passes over its columns, each
//! keeping the pass's accumulators of every row in registers.

use super::{Tile, MR, NR};
use core::arch::x86_64::{
    _mm256_fmadd_ps, _mm256_loadu_ps, _mm256_set1_ps, _mm256_setzero_ps, _mm256_storeu_ps,
};

const _: () = assert!(NR % 32 == 0, "the block is made of whole passes");

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
    if R <= 2 {
        // One pass of 32 columns: four 8-lane accumulators per row. With two passes of 16,
        // one or two rows would give each pass only 2 or 4 independent fma chains, fewer
        // than the fma latency needs to keep both pipes busy (the pass then runs at the
        // speed of one chain); 4 or 8 chains per step nearly double the speed of the
        // one- and two-row blocks that small-M calls are made of.
        for pass in 0..NR / 32 {
            // SAFETY: forwarded contract (the pass's columns lie inside the block).
            unsafe { columns::<R, 4>(a, b, t, fresh, pass * 32) };
        }
    } else {
        // Two passes of 16 columns: 6 rows use 12 of the 16 registers for accumulators,
        // leaving 2 for a row of B and 1 for a broadcast of A (the classic AVX2 shape).
        for pass in 0..NR / 16 {
            // SAFETY: as above.
            unsafe { columns::<R, 2>(a, b, t, fresh, pass * 16) };
        }
    }
}

/// Columns `c0 .. c0 + 8 V` of the first `R` rows of the block.
///
/// # Safety
/// As for [`block`], and `c0 + 8 V <= NR`.
#[target_feature(enable = "avx2,fma")]
#[inline]
unsafe fn columns<const R: usize, const V: usize>(
    a: &[f32],
    b: &[f32],
    t: &mut Tile,
    fresh: bool,
    c0: usize,
) {
    let kc = b.len() / NR;
    let (pa, pb, pt) = (
        a.as_ptr(),
        b.as_ptr().wrapping_add(c0),
        t.as_mut_ptr().wrapping_add(c0),
    );
    // SAFETY: (1) makes the intrinsics available. Every offset is inside its buffer:
    // `t`: r · NR + c0 + 8 V <= MR · NR; `b`: k · NR + c0 + 8 V <= kc · NR;
    // `a`: k · MR + r < kc · MR, by (2). Unaligned loads and stores accept any address.
    unsafe {
        let mut acc = [[_mm256_setzero_ps(); V]; R];
        if !fresh {
            for (r, row) in acc.iter_mut().enumerate() {
                for (v, x) in row.iter_mut().enumerate() {
                    *x = _mm256_loadu_ps(pt.add(r * NR + 8 * v));
                }
            }
        }
        for k in 0..kc {
            let mut bv = [_mm256_setzero_ps(); V];
            for (v, x) in bv.iter_mut().enumerate() {
                *x = _mm256_loadu_ps(pb.add(k * NR + 8 * v));
            }
            for (r, row) in acc.iter_mut().enumerate() {
                let x = _mm256_set1_ps(*pa.add(k * MR + r));
                for (v, y) in row.iter_mut().enumerate() {
                    // One vfmadd per accumulator and step: a single rounding, ascending k.
                    *y = _mm256_fmadd_ps(x, bv[v], *y);
                }
            }
        }
        for (r, row) in acc.iter().enumerate() {
            for (v, &x) in row.iter().enumerate() {
                _mm256_storeu_ps(pt.add(r * NR + 8 * v), x);
            }
        }
    }
}
