//! The Hopper path's store: each consumer thread finishes the accumulators it holds with the
//! end of the chain every tier shares (`crate::finish`: bias, accumulate, NaN, rounding),
//! exactly as the mma.sync path's epilogue does.

use super::config::WG_M;
use crate::finish::{bias_at, finish};
use crate::params::{GemmParams, BIAS_NONE};
use crate::schedule::Tile;

/// Finishes and stores consumer warpgroup `wg`'s (WG_M, BN) part of tile `t`. Thread `tid`
/// (0..128 inside the warpgroup) holds `acc[4j + 2h + e]` = row `16 (tid / 32) + 8h +
/// (tid % 32) / 4`, column `8j + 2 (tid % 4) + e` (`arch::wgmma`).
///
/// # Safety
/// C, and the bias when present, are valid for the spans the host validated.
#[inline(always)]
pub unsafe fn store<const BN: u32>(p: &GemmParams, t: &Tile, wg: u32, tid: u32, acc: &[f32; 128]) {
    let (warp, lane) = (tid / 32, tid % 32);
    let row0 = t.m0 + (wg * WG_M + warp * 16 + lane / 4) as u64;
    let col0 = t.n0 + ((lane % 4) * 2) as u64;
    let c_batch = t.batch * p.batch_stride_c;
    // (BN / 8) n8 blocks j = 4x + y, two columns e each, two rows h each.
    unroll8!(x => {
        unroll4!(y => {
            let jb = x * 4 + y;
            if jb < (BN / 8) as usize {
                unroll2!(e => {
                    let j = col0 + (jb * 8 + e) as u64;
                    if j < p.n {
                        // SAFETY: j < N.
                        let bias = if p.bias_dtype == BIAS_NONE { None } else { Some(unsafe { bias_at(p, j) }) };
                        unroll2!(h => {
                            let i = row0 + (h * 8) as u64;
                            if i < p.m {
                                let idx = (c_batch + i * p.ldc + j) as usize;
                                // SAFETY: (i, j) is inside C, so idx is inside its span.
                                unsafe { finish(p, idx, acc[4 * jb + 2 * h + e], bias) };
                            }
                        });
                    }
                });
            }
        });
    });
}
