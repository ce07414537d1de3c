//! The Hopper path's store: each consumer warpgroup finishes its (WG_M, BN) part of the tile
//! with the end of the chain every tier shares (`crate::finish`: bias, accumulate, NaN,
//! rounding), exactly as the mma.sync path's epilogue does; only the route of the values to
//! memory differs.
//!
//! Why through shared memory: a thread's accumulators are the wgmma fragment (two adjacent
//! columns of 64 rows-apart pieces), so storing them directly means 2-byte scattered stores
//! and, unrolled over 128 registers with every mode's branches, a huge body of code. Instead
//! the warpgroup stages EPILOGUE_COLS columns at a time as f32 in its own piece of shared
//! memory, then reads it back row-wise: each thread finishes four adjacent elements and
//! writes them with one 8- or 16-byte store, rows of a piece written by eight threads
//! together. The values are the f32 accumulators, bit for bit: staging changes no result.

use super::config::{EPILOGUE_COLS, EPILOGUE_PITCH, WG_M};
use crate::arch::shared::{ld_shared_v4_f32, st_shared_v2_f32};
use crate::arch::sync::bar_sync_named;
use crate::finish::{bias_at, c_vectors_aligned, finish, finish4};
use crate::params::{GemmParams, BIAS_NONE};
use crate::schedule::Tile;

/// Threads of one consumer warpgroup (the named barrier's count).
const WG_THREADS: u32 = 128;
/// Threads that read one staged row (four columns each).
const ROW_THREADS: u32 = EPILOGUE_COLS / 4;
/// Rows one pass of the warpgroup reads.
const ROWS_PER_PASS: u32 = WG_THREADS / ROW_THREADS;

/// Finishes and stores consumer warpgroup `wg`'s (WG_M, BN) part of tile `t`. Thread `tid`
/// (0..128 inside the warpgroup) holds `acc[4j + 2h + e]` = row `16 (tid / 32) + 8h +
/// (tid % 32) / 4`, column `8j + 2 (tid % 4) + e` (`arch::wgmma`). `piece` is the shared
/// address of this warpgroup's EPILOGUE_BYTES; named barrier `1 + wg` is this warpgroup's.
/// With tiles of fewer than WG_M rows (`BM`), the rows past BM hold sums of other bytes
/// of the stage (`config::BM_CHOICES`) and are not stored.
///
/// # Safety
/// Every thread of the warpgroup calls it together. C, and the bias when present, are
/// valid for the spans the host validated; `piece` is this warpgroup's alone.
#[inline(always)]
pub unsafe fn store<const BN: u32, const BM: u32>(
    p: &GemmParams,
    t: &Tile,
    wg: u32,
    tid: u32,
    acc: &[f32; 128],
    piece: u32,
) {
    let (warp, lane) = (tid / 32, tid % 32);
    // Where this thread's fragment values go in a piece (row-major, EPILOGUE_PITCH floats).
    let frag = ((warp * 16 + lane / 4) * EPILOGUE_PITCH + (lane % 4) * 2) * 4;
    // What this thread reads back: rows tid / ROW_THREADS + ROWS_PER_PASS · pass, columns
    // 4 (tid % ROW_THREADS) .. + 4.
    let (read_row, read_col) = (tid / ROW_THREADS, (tid % ROW_THREADS) * 4);
    let vectors = c_vectors_aligned(p);
    let has_bias = p.bias_dtype != BIAS_NONE;
    let c_batch = t.batch * p.batch_stride_c;
    let barrier = 1 + wg;
    // Pieces of EPILOGUE_COLS columns = 4 n8 blocks: j = 4 piece + jl.
    unroll8!(pc => {
        if pc < (BN / EPILOGUE_COLS) as usize {
            unroll4!(jl => {
                let j = 4 * pc + jl;
                unroll2!(h => {
                    let at = piece + frag + ((h as u32 * 8 * EPILOGUE_PITCH) + jl as u32 * 8) * 4;
                    // SAFETY: inside this warpgroup's piece, 8-byte aligned.
                    unsafe { st_shared_v2_f32(at, acc[4 * j + 2 * h], acc[4 * j + 2 * h + 1]) };
                });
            });
            bar_sync_named::<WG_THREADS>(barrier);
            let col = t.n0 + (pc as u32 * EPILOGUE_COLS + read_col) as u64;
            let mut pass = 0;
            while pass < WG_M / ROWS_PER_PASS {
                let r = read_row + pass * ROWS_PER_PASS;
                // SAFETY: inside this warpgroup's piece, 16-byte aligned (pitch % 4 == 0).
                let v = unsafe { ld_shared_v4_f32(piece + (r * EPILOGUE_PITCH + read_col) * 4) };
                let i = t.m0 + (wg * WG_M + r) as u64;
                if i < p.m && (BM >= WG_M || r < BM) {
                    let idx = (c_batch + i * p.ldc + col) as usize;
                    // SAFETY (both arms): every element stored is inside C (i < M, column <
                    // N); the bias is read only for columns < N.
                    unsafe {
                        if vectors && col + 4 <= p.n {
                            let bias = if has_bias {
                                Some([bias_at(p, col), bias_at(p, col + 1), bias_at(p, col + 2), bias_at(p, col + 3)])
                            } else {
                                None
                            };
                            finish4(p, idx, v, bias);
                        } else {
                            for e in 0..4 {
                                let j = col + e as u64;
                                if j < p.n {
                                    let bias = if has_bias { Some(bias_at(p, j)) } else { None };
                                    finish(p, idx + e, v[e], bias);
                                }
                            }
                        }
                    }
                }
                pass += 1;
            }
            // The piece is rewritten by the next columns (or the next tile) only after every
            // thread has read it.
            bar_sync_named::<WG_THREADS>(barrier);
        }
    });
}
