//! The Hopper path's store: each consumer warpgroup finishes its (WG_M, BN) part of the tile
//! with the end of the chain every tier shares (`crate::finish`: bias, accumulate, NaN,
//! rounding), exactly as the mma.sync path's epilogue does; only the route of the values to
//! memory differs.
//!
//! Straight from the fragment, in pairs: a thread holds two adjacent columns of each of its
//! rows, so each pair is one 4- or 8-byte store (the host sends only a C that takes them:
//! `host/src/cuda/hopper.rs`, `can_implement`), four lanes covering 8 columns of a row. The
//! output width is a constant of the consumer's code (`super::gemm` picks it once), so a
//! pair is a few instructions: a row address worked out once per tile, a constant column
//! offset, one packed conversion (or the add into C), NaN selects, the store. The first version staged the fragment through shared memory and
//! decided the mode (and NaN) by a branch per element: ~2,900 instructions per warp and
//! tile, and the kernel ran at 0.72× of its no-epilogue speed at 4096³ (docs/perf-notes.md).

use super::config::WG_M;
use crate::finish::{bias_at, finish2_16, finish2_32};
use crate::params::{GemmParams, BIAS_NONE, OUT_ACCUMULATE_F32, OUT_BF16};
use crate::schedule::Tile;

/// Finishes and stores consumer warpgroup `wg`'s (WG_M, BN) part of tile `t`: f32 output
/// (overwrite or accumulate) when `WIDE`, else 16-bit (bf16 or f16). Thread `tid` (0..128 inside the warpgroup) holds `acc[4j + 2h + e]` = row
/// `16 (tid / 32) + 8h + (tid % 32) / 4`, column `8j + 2 (tid % 4) + e` (`arch::wgmma`).
/// With tiles of fewer than WG_M rows (`BM`), the rows past BM hold sums of other bytes of
/// the stage (`config::BM_CHOICES`) and are not stored. The bias of a pair's columns is
/// read once for its two rows.
///
/// # Safety
/// Every thread of the warpgroup calls it together. `WIDE` is whether `p.out_mode` is an f32
/// mode; N is even and
/// C's address, leading dimension and batch stride are multiples of two elements (so every
/// pair at an even column is aligned and inside N); C, and the bias when present, are valid
/// for the spans the host validated.
#[inline(always)]
pub unsafe fn store<const BN: u32, const BM: u32, const WIDE: bool>(
    p: &GemmParams,
    t: &Tile,
    wg: u32,
    tid: u32,
    acc: &[f32; 128],
) {
    let (warp, lane) = (tid / 32, tid % 32);
    let elem: u64 = if WIDE { 4 } else { 2 };
    // The one choice left inside a width: accumulate or overwrite; bf16 or f16.
    let flag = if WIDE {
        p.out_mode == OUT_ACCUMULATE_F32
    } else {
        p.out_mode == OUT_BF16
    };
    let col0 = t.n0 + ((lane % 4) * 2) as u64;
    // This thread's two rows (r0 and r0 + 8 of the warpgroup's 64): the byte address of
    // their first pair, and whether they are stored.
    let r0 = warp * 16 + lane / 4;
    let rows = [0u32, 8].map(|dr| {
        let r = r0 + dr;
        let i = t.m0 + (wg * WG_M + r) as u64;
        let at = p.c + elem * (t.batch * p.batch_stride_c + i * p.ldc + col0);
        (at, i < p.m && (BM >= WG_M || r < BM))
    });
    let has_bias = p.bias_dtype != BIAS_NONE;
    // n8 block j = 4 q + jl.
    unroll8!(q => {
        if q < (BN / 32) as usize {
            unroll4!(jl => {
                let j = 4 * q + jl;
                let col = col0 + 8 * j as u64;
                if col < p.n {
                    let bias = if has_bias {
                        // SAFETY: col + 1 < N (N even, col even).
                        Some(unsafe { [bias_at(p, col), bias_at(p, col + 1)] })
                    } else {
                        None
                    };
                    unroll2!(h => {
                        let (at, stored) = rows[h];
                        if stored {
                            let v = [acc[4 * j + 2 * h], acc[4 * j + 2 * h + 1]];
                            // SAFETY: the pair (i, col), (i, col + 1) is inside C and
                            // aligned (forwarded contract).
                            unsafe {
                                let at = at + elem * 8 * j as u64;
                                if WIDE {
                                    finish2_32(at, v, bias, flag)
                                } else {
                                    finish2_16(at, v, bias, flag)
                                }
                            };
                        }
                    });
                }
            });
        }
    });
}
