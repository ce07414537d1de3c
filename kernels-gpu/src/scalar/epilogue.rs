//! The scalar tier's store: each thread finishes its `TM × TN` accumulators with the end of the
//! chain every tier shares (`crate::finish`: bias, accumulate, NaN, rounding).

use super::mainloop::{col_of, row_of, Accumulators};
use crate::finish::{bias_at, finish};
use crate::params::{GemmParams, BIAS_NONE};
use crate::schedule::Tile;

/// Finishes and stores this thread's part of tile `t`.
///
/// # Safety
/// C, and the bias when present, are valid for the spans the host validated.
#[inline(always)]
pub unsafe fn store<const BN: u32, const TN: usize>(
    p: &GemmParams,
    t: &Tile,
    tid: u32,
    acc: &Accumulators<TN>,
) {
    let c_batch = t.batch * p.batch_stride_c;
    unroll8!(c => {
        let j = t.n0 + col_of::<BN>(tid, c) as u64;
        // Columns past TN do not exist in narrow tiles (a constant test, folded away).
        if c < TN && j < p.n {
            // SAFETY: j < N.
            let bias = if p.bias_dtype == BIAS_NONE { None } else { Some(unsafe { bias_at(p, j) }) };
            unroll8!(r => {
                let i = t.m0 + row_of(tid, r) as u64;
                if i < p.m {
                    let idx = (c_batch + i * p.ldc + j) as usize;
                    // SAFETY: (i, j) is inside C, so idx is inside its validated span.
                    unsafe { finish(p, idx, acc[r][c], bias) };
                }
            });
        }
    });
}
