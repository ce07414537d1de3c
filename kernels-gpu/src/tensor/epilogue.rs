//! The tensor-core tier's store: each thread finishes the C fragments it holds with the end
//! of the chain every tier shares (`crate::finish`: bias, accumulate, NaN, rounding).

use super::config::{FRAGS_M, FRAGS_N, WARPS_N, WARP_M, WARP_N};
use super::mainloop::Accumulators;
use crate::finish::{bias_at, finish};
use crate::params::{GemmParams, BIAS_NONE};
use crate::schedule::Tile;

const _: () = assert!(
    FRAGS_M * 2 == 8 && FRAGS_N * 2 == 8,
    "the store unrolls 8 rows by 8 columns per thread"
);

/// Finishes and stores this thread's part of tile `t`. A C fragment gives lane `l` rows
/// `l / 4` and `l / 4 + 8`, columns `2 (l % 4)` and `+1` (`arch::mma`).
///
/// # Safety
/// C, and the bias when present, are valid for the spans the host validated.
#[inline(always)]
pub unsafe fn store(p: &GemmParams, t: &Tile, tid: u32, acc: &Accumulators) {
    let (warp, lane) = (tid / 32, tid % 32);
    let row0 = t.m0 + ((warp / WARPS_N) * WARP_M + lane / 4) as u64;
    let col0 = t.n0 + ((warp % WARPS_N) * WARP_N + (lane % 4) * 2) as u64;
    let c_batch = t.batch * p.batch_stride_c;
    // Column c: n8 fragment c / 2, element c % 2 of the pair.
    unroll8!(c => {
        let j = col0 + (c / 2 * 8 + c % 2) as u64;
        if j < p.n {
            // SAFETY: j < N.
            let bias = if p.bias_dtype == BIAS_NONE { None } else { Some(unsafe { bias_at(p, j) }) };
            // Row r: m16 fragment r / 2, upper half when r % 2 == 1.
            unroll8!(r => {
                let i = row0 + (r / 2 * 16 + r % 2 * 8) as u64;
                if i < p.m {
                    let idx = (c_batch + i * p.ldc + j) as usize;
                    // SAFETY: (i, j) is inside C, so idx is inside its validated span.
                    unsafe { finish(p, idx, acc[r / 2][c / 2][(r % 2) * 2 + c % 2], bias) };
                }
            });
        }
    });
}
