//! The Hopper path's store: each consumer warpgroup finishes its (WG_M, BN) part of the tile
//! with the end of the chain every tier shares (`crate::finish`: bias, accumulate, NaN,
//! rounding), exactly as the mma.sync path's epilogue does; only the route of the values to
//! memory differs.
//!
//! Three routes, all from the wgmma fragment, where a thread holds two adjacent columns of
//! each of its rows:
//!
//! - [`store_tma`], for the overwrite modes: the warpgroup finishes its part of the tile in
//!   pieces of 64 rows × 128 bytes written to shared memory as boxes of C's tensor map, and
//!   one thread hands each piece to the copy engine. The consumers go on to the next tile
//!   while the engine writes (two pieces in flight per warpgroup), and the engine clips the
//!   rows and columns outside C, so any N is fine.
//! - [`store_registers`], for the overwrite modes of tiles narrower than a 16-bit piece
//!   (the 16- to 48-column decode tiles), and for the columns of a one-round width's part
//!   past its whole pieces: each pair stored straight from registers.
//! - [`store_accumulate`], for accumulate mode (the engine cannot do the read-add-write with our NaN
//!   rule): each pair is one 8-byte load and store straight from registers (the host sends
//!   only a C that takes them: `host/src/cuda/hopper.rs`, `can_implement`).
//!
//! The output width is a constant of the consumer's code (`super::gemm` picks it once), so
//! a pair is a few instructions. The first version staged the fragment through shared
//! memory and stored it with plain stores, deciding the mode (and NaN) by a branch per
//! element: ~2,900 instructions per warp and tile, and the kernel ran at 0.72× of its
//! no-epilogue speed at 4096³ (docs/perf-notes.md).

use super::config::{EPILOGUE_PIECE_BYTES, WG_M};
use super::store_kind;
use crate::arch::global::{ld_global_v2_f32, st_global_b32, st_global_v2_b32};
use crate::arch::shared::{st_shared_b32, st_shared_v2_b32};
use crate::arch::sync::bar_sync_named;
use crate::arch::tma::{
    cp_async_bulk_commit_group, cp_async_bulk_tensor_3d_store, cp_async_bulk_wait_group_read,
    fence_proxy_async_shared_cta,
};
use crate::finish::{accumulated2_32, bias_at, finished_16, finished_f32};
use crate::params::{GemmParams, BIAS_NONE, OUT_BF16};
use crate::schedule::Tile;

/// This thread's two rows of 64-row part `part` of tile `t` for a C of `elem`-byte
/// elements: the byte address of each row's first pair (column `t.n0 + 2 (tid % 4)`) and
/// whether the row is stored. Thread `tid` (0..128 inside the warpgroup) holds `acc[4j + 2h + e]` = row
/// `16 (tid / 32) + 8h + (tid % 32) / 4`, column `8j + 2 (tid % 4) + e` (`arch::wgmma`).
/// With tiles of fewer than WG_M rows (`BM`), the rows past BM hold sums of other bytes of
/// the stage (`config::BM_CHOICES`) and are not stored.
#[inline(always)]
fn register_rows<const BM: u32>(
    p: &GemmParams,
    t: &Tile,
    part: u32,
    tid: u32,
    elem: u64,
) -> [(u64, bool); 2] {
    let (warp, lane) = (tid / 32, tid % 32);
    let col0 = t.n0 + ((lane % 4) * 2) as u64;
    let r0 = warp * 16 + lane / 4;
    [0u32, 8].map(|dr| {
        let r = r0 + dr;
        let i = t.m0 + (part * WG_M + r) as u64;
        let at = p.c + elem * (t.batch * p.batch_stride_c + i * p.ldc + col0);
        (at, i < p.m && (BM >= WG_M || r < BM))
    })
}

const F32_BYTES: u64 = 4;

/// Finishes the (WG_M, BN) part `part` of tile `t` (rows `part · WG_M ..`), held in
/// `acc[D0..]`, in accumulate mode: each pair is added to the f32 C it holds and stored back, straight from registers
/// ([`register_rows`] says which). The pairs go in groups of four n8 blocks whose loads
/// are issued ahead of the stores, further ahead as the stores free registers (see the
/// body), so that a load's latency is paid about once per few groups, not once per pair (as
/// when each pair's load waited before its store: ~16 µs per tile at K = 4096,
/// docs/perf-notes.md). The bias of a pair's columns is read once for its two rows.
///
/// # Safety
/// Every thread of the warpgroup calls it together. `p.out_mode` is accumulate; N is even
/// and C's address, leading dimension and batch stride are multiples of two elements (so
/// every pair at an even column is aligned and inside N); C, and the bias when present, are
/// valid for the spans the host validated.
#[inline(always)]
pub unsafe fn store_accumulate<const BN: u32, const BM: u32, const D0: usize>(
    p: &GemmParams,
    t: &Tile,
    part: u32,
    tid: u32,
    acc: &[f32; 128],
) {
    // A short tile's ping-pong consumer names the second half's store too (`pingpong`),
    // under a constant-false condition: its code is never built.
    const {
        assert!(
            D0 == 0 || (D0 == 64 && (BN <= 128 || BM < WG_M)),
            "the part lies inside acc"
        )
    };
    // A uniform branch, so that the common case carries no bias code (as in `store_tma`).
    // SAFETY (both arms): forwarded contract.
    unsafe {
        if p.bias_dtype != BIAS_NONE {
            store_accumulate_with::<BN, BM, D0, true>(p, t, part, tid, acc)
        } else {
            store_accumulate_with::<BN, BM, D0, false>(p, t, part, tid, acc)
        }
    }
}

/// [`store_accumulate`] with the bias added when `HAS_BIAS`.
///
/// # Safety
/// As for [`store_accumulate`]; `HAS_BIAS` says whether the launch has a bias.
#[inline(always)]
unsafe fn store_accumulate_with<
    const BN: u32,
    const BM: u32,
    const D0: usize,
    const HAS_BIAS: bool,
>(
    p: &GemmParams,
    t: &Tile,
    part: u32,
    tid: u32,
    acc: &[f32; 128],
) {
    const GROUP_BLOCKS: usize = 4;
    let groups = (BN / 32) as usize;
    let col0 = t.n0 + ((tid % 4) * 2) as u64;
    let rows = register_rows::<BM>(p, t, part, tid, F32_BYTES);
    // C's pairs of group q: [2 jl + h] is block 4q + jl, row h (zeros where not stored).
    let load_group = |q: usize| -> [[f32; 2]; 2 * GROUP_BLOCKS] {
        // SAFETY: all-zero bits are +0.0 (not a repeat expression: see `mainloop::consume`).
        let mut old: [[f32; 2]; 2 * GROUP_BLOCKS] = unsafe { core::mem::zeroed() };
        unroll4!(jl => {
            let j = GROUP_BLOCKS * q + jl;
            if col0 + ((8 * j) as u64) < p.n {
                unroll2!(h => {
                    let (at, stored) = rows[h];
                    if stored {
                        // SAFETY: the pair is inside C and aligned (forwarded contract).
                        old[2 * jl + h] = unsafe { ld_global_v2_f32(at + F32_BYTES * 8 * j as u64) };
                    }
                });
            }
        });
        old
    };
    // Loads run further ahead as the stores free registers: groups 0 and 1 first, then
    // after storing group q, groups 2q + 2 and 2q + 3. Group q's accumulators and C values
    // die with its store, so the registers in use stay at 128 accumulators + 32 (ptxas keeps
    // the kernel at 168 a thread), while the loads of a group have one, two, then up to
    // four groups' stores to arrive in, instead of one.
    // SAFETY: all-zero bits are +0.0 (see `load_group`).
    let mut c: [[[f32; 2]; 2 * GROUP_BLOCKS]; 8] = unsafe { core::mem::zeroed() };
    c[0] = load_group(0);
    if groups > 1 {
        c[1] = load_group(1);
    }
    unroll8!(q => {
        if q < groups {
            let old = c[q];
            unroll4!(jl => {
                let j = GROUP_BLOCKS * q + jl;
                let col = col0 + 8 * j as u64;
                if col < p.n {
                    let bias = if HAS_BIAS {
                        // SAFETY: col + 1 < N (N even, col even).
                        Some(unsafe { [bias_at(p, col), bias_at(p, col + 1)] })
                    } else {
                        None
                    };
                    unroll2!(h => {
                        let (at, stored) = rows[h];
                        if stored {
                            let v = [acc[D0 + 4 * j + 2 * h], acc[D0 + 4 * j + 2 * h + 1]];
                            let out = accumulated2_32(v, bias, old[2 * jl + h]);
                            // SAFETY: the pair is inside C and aligned (forwarded contract).
                            unsafe { st_global_v2_b32(at + F32_BYTES * 8 * j as u64, out) };
                        }
                    });
                }
            });
            // Only q < 3 loads (2q + 3 ≤ 7, the last of eight groups): a constant test.
            if q < 3 {
                unroll2!(d => {
                    let g = 2 * q + 2 + d;
                    if g < groups {
                        c[g] = load_group(g);
                    }
                });
            }
        }
    });
}

/// [`store_accumulate`] for the widths that end in half a group of four n8 blocks (16, 48
/// and 112 columns), n8 blocks `FIRST..` (at most eight): pair by pair, each load just before
/// its store. Such tiles run mostly for calls of at most 64 rows (accumulate mode takes the
/// ping-pong tiles at 128 rows), where the epilogue is a small part of the time.
///
/// # Safety
/// As for [`store_accumulate`].
#[inline(always)]
unsafe fn store_accumulate_pairs<
    const BN: u32,
    const BM: u32,
    const D0: usize,
    const FIRST: usize,
>(
    p: &GemmParams,
    t: &Tile,
    part: u32,
    tid: u32,
    acc: &[f32; 128],
) {
    let has_bias = p.bias_dtype != BIAS_NONE;
    let col0 = t.n0 + ((tid % 4) * 2) as u64;
    let rows = register_rows::<BM>(p, t, part, tid, F32_BYTES);
    unroll8!(jl => {
        let j = FIRST + jl;
        let col = col0 + 8 * j as u64;
        if j < (BN / 8) as usize && col < p.n {
            let bias = if has_bias {
                // SAFETY: col + 1 < N (N even, col even).
                Some(unsafe { [bias_at(p, col), bias_at(p, col + 1)] })
            } else {
                None
            };
            unroll2!(h => {
                let (at, stored) = rows[h];
                if stored {
                    let at = at + F32_BYTES * 8 * j as u64;
                    let v = [acc[D0 + 4 * j + 2 * h], acc[D0 + 4 * j + 2 * h + 1]];
                    // SAFETY: the pair is inside C and aligned (forwarded contract).
                    unsafe {
                        let old = ld_global_v2_f32(at);
                        st_global_v2_b32(at, accumulated2_32(v, bias, old));
                    }
                }
            });
        }
    });
}

/// Finishes the (WG_M, BN) part `part` of tile `t` (rows `part · WG_M ..`), held in
/// `acc[D0..]` by consumer warpgroup `wg`, the way `STORE` (a `super::store_kind`) says:
/// [`store_accumulate`], or [`store_tma`] in f32 or 16 bits — but tiles narrower than a
/// 16-bit piece ([`store_registers`]).
///
/// # Safety
/// As for the function `STORE` picks; `pieces`, `map_c` and `issued` are those of
/// [`store_tma`] (unused in accumulate mode).
#[allow(clippy::too_many_arguments)]
#[inline(always)]
pub unsafe fn store_part<const BN: u32, const BM: u32, const D0: usize, const STORE: u32>(
    p: &GemmParams,
    t: &Tile,
    part: u32,
    wg: u32,
    tid: u32,
    acc: &[f32; 128],
    pieces: u32,
    map_c: u64,
    issued: &mut u32,
) {
    // SAFETY (all arms): forwarded contract.
    unsafe {
        match STORE {
            store_kind::ACCUMULATE if BN % 32 != 0 => {
                // Eight n8 blocks a call: 112 columns take two.
                store_accumulate_pairs::<BN, BM, D0, 0>(p, t, part, tid, acc);
                if BN > 64 {
                    store_accumulate_pairs::<BN, BM, D0, 8>(p, t, part, tid, acc);
                }
            }
            store_kind::ACCUMULATE => store_accumulate::<BN, BM, D0>(p, t, part, tid, acc),
            _ if BN < PIECE_COLUMNS_16 => {
                store_registers::<BN, BM, D0, STORE, 0>(p, t, part, tid, acc)
            }
            store_kind::COPY_F32 => {
                store_tma::<BN, BM, D0, true>(p, t, part, wg, tid, acc, pieces, map_c, issued);
                store_rest::<BN, BM, D0, STORE>(p, t, part, tid, acc);
            }
            _ => {
                store_tma::<BN, BM, D0, false>(p, t, part, wg, tid, acc, pieces, map_c, issued);
                store_rest::<BN, BM, D0, STORE>(p, t, part, tid, acc);
            }
        }
    }
}

/// n8 blocks of one piece of [`store_tma`]: 128 bytes of a row of f32 (`wide`) or 16-bit C.
const fn piece_blocks(wide: bool) -> usize {
    if wide {
        4
    } else {
        8
    }
}

/// The n8 blocks of a part `bn` wide that [`store_tma`]'s whole pieces cover: where
/// [`store_rest`]'s register store starts.
const fn whole_piece_blocks(bn: u32, wide: bool) -> usize {
    (bn / 8) as usize / piece_blocks(wide) * piece_blocks(wide)
}

/// Stores the columns of part `part` past [`store_tma`]'s whole pieces from registers
/// ([`store_registers`] from the first n8 block past them): the last 32 columns of a 16-bit
/// part of 224, the last 48 of one of 112, 16 in f32 (`config::ONE_ROUND_BN`). A box of the
/// copy engine for them would reach into the next tile's columns, which another block may be
/// storing. No code for the widths made of whole pieces. (The first block is a constant of
/// each arm, not a computed argument: with an argument, even 0, LLVM laid out the decode
/// tiles' register store differently.)
///
/// # Safety
/// As for [`store_registers`].
#[inline(always)]
unsafe fn store_rest<const BN: u32, const BM: u32, const D0: usize, const STORE: u32>(
    p: &GemmParams,
    t: &Tile,
    part: u32,
    tid: u32,
    acc: &[f32; 128],
) {
    let wide = STORE == store_kind::COPY_F32;
    const {
        let per_piece = piece_blocks(STORE == store_kind::COPY_F32);
        // (Tiles narrower than a piece never get here, `store_part`; their instance of
        // this arm is still built, so the check lets them through.)
        assert!(
            BN < PIECE_COLUMNS_16 || (BN / 8) as usize % per_piece == 0 || BN == 224 || BN == 112,
            "a part is whole pieces, or of a width `store_rest` names"
        )
    };
    // Each arm's first block, a literal (see above), is where the whole pieces end.
    const {
        assert!(
            whole_piece_blocks(224, false) == 24
                && whole_piece_blocks(112, false) == 8
                && whole_piece_blocks(112, true) == 12,
            "a register store past the pieces starts where they end"
        )
    };
    // SAFETY (all arms): forwarded contract.
    unsafe {
        match (BN, wide) {
            (224, false) => store_registers::<BN, BM, D0, STORE, 24>(p, t, part, tid, acc),
            (112, false) => store_registers::<BN, BM, D0, STORE, 8>(p, t, part, tid, acc),
            (112, true) => store_registers::<BN, BM, D0, STORE, 12>(p, t, part, tid, acc),
            _ => {}
        }
    }
}

/// Threads of one consumer warpgroup (the named barrier's count).
const WG_THREADS: u32 = 128;

/// Columns of one 16-bit piece of [`store_tma`] (128 bytes of a row). A tile narrower than
/// that would hand the copy engine a box reaching into the next tile's columns.
const PIECE_COLUMNS_16: u32 = 64;

/// Finishes the (WG_M, BN) part `part` of tile `t`, held in `acc[D0..]`, in the overwrite
/// mode `STORE` (a `super::store_kind`) straight from registers, n8 blocks `FIRST..` of it
/// (at most eight): each pair of a row inside M (and inside the tile's rows) and of a column
/// inside N is one 4-byte (16-bit C) or 8-byte (f32 C) store. For the decode tiles of 16, 32
/// and 48 columns (from block 0): their part is at most 64 × 48 values, too few to be worth
/// a trip through shared memory, and narrower than a 16-bit piece; and for what a one-round
/// width leaves past its whole pieces ([`store_rest`]).
///
/// # Safety
/// Every thread of the warpgroup calls it together. `p.out_mode` is an overwrite mode of
/// `STORE`'s width; C's address, leading dimension and batch stride are multiples of 16 bytes
/// and N a whole number of 16-byte units (`host/src/cuda/hopper.rs`, `can_implement`), so
/// every pair at an even column is aligned and inside N; C, and the bias when present, are
/// valid for the spans the host validated.
#[inline(always)]
unsafe fn store_registers<
    const BN: u32,
    const BM: u32,
    const D0: usize,
    const STORE: u32,
    const FIRST: usize,
>(
    p: &GemmParams,
    t: &Tile,
    part: u32,
    tid: u32,
    acc: &[f32; 128],
) {
    let wide = STORE == store_kind::COPY_F32;
    let elem: u64 = if wide { 4 } else { 2 };
    let bf16 = p.out_mode == OUT_BF16;
    let has_bias = p.bias_dtype != BIAS_NONE;
    let col0 = t.n0 + ((tid % 4) * 2) as u64;
    let rows = register_rows::<BM>(p, t, part, tid, elem);
    unroll8!(jl => {
        let j = FIRST + jl;
        let col = col0 + 8 * j as u64;
        if j < (BN / 8) as usize && col < p.n {
            let bias = if has_bias {
                // SAFETY: col + 1 < N (N even, col even).
                Some(unsafe { [bias_at(p, col), bias_at(p, col + 1)] })
            } else {
                None
            };
            unroll2!(h => {
                let (at, stored) = rows[h];
                if stored {
                    let i = D0 + 4 * j + 2 * h;
                    let mut v = [acc[i], acc[i + 1]];
                    if let Some(b) = bias {
                        v = [v[0] + b[0], v[1] + b[1]];
                    }
                    let at = at + elem * 8 * j as u64;
                    // SAFETY: the pair is inside C and aligned (forwarded contract).
                    unsafe {
                        if wide {
                            st_global_v2_b32(at, v.map(finished_f32));
                        } else {
                            st_global_b32(at, finished_16(v, bf16));
                        }
                    }
                }
            });
        }
    });
}

/// Finishes the (WG_M, BN) part `part` of tile `t` (rows `part · WG_M ..`), held in
/// `acc[D0..]` by consumer warpgroup `wg`, in an overwrite mode (f32 when `WIDE`, else bf16
/// or f16) and hands it to the copy engine, piece by piece: 64 rows of 128 bytes
/// (`EPILOGUE_PIECE_BYTES`), written to one of the warpgroup's two buffers at `pieces` in
/// the 128B-swizzled layout of a box of C's map `map_c`. `issued` counts the
/// pieces this warpgroup stored so far (it picks the buffer). Thread `tid`'s fragment as for
/// [`store_accumulate`]. Rows past M and columns past N are computed but the engine clips
/// them (it clips columns in 16-byte units, so the host sends only an N made of whole ones);
/// with tiles of fewer than WG_M rows M ≤ BM (`host/src/cuda/hopper.rs`, `tile_m`), so the
/// rows past BM are clipped too, and are not even written.
///
/// # Safety
/// Every thread of the warpgroup calls it together, with the same `issued`; named barrier
/// `1 + wg` is this warpgroup's alone; `pieces` is its EPILOGUE_BUFFERS pieces of shared
/// memory, 1024-byte aligned; `map_c` is the generic address of C's tensor map (box of 128
/// bytes × 64 rows, 128B swizzle, the launch's output dtype); `p.out_mode` is an overwrite
/// mode of that width; the bias, when present, is valid for N elements. Thread 0 of the
/// warpgroup waits for its stores to have read their pieces before the block exits
/// ([`drain`]).
#[inline(always)]
pub unsafe fn store_tma<const BN: u32, const BM: u32, const D0: usize, const WIDE: bool>(
    p: &GemmParams,
    t: &Tile,
    part: u32,
    wg: u32,
    tid: u32,
    acc: &[f32; 128],
    pieces: u32,
    map_c: u64,
    issued: &mut u32,
) {
    // A short tile's ping-pong consumer names the second half's store too (`pingpong`),
    // under a constant-false condition: its code is never built.
    const {
        assert!(
            D0 == 0 || (D0 == 64 && (BN <= 128 || BM < WG_M)),
            "the part lies inside acc"
        )
    };
    // A uniform branch (the bias is the launch's), taken once for the whole part, so that
    // each arm's pieces lie one after another in the code. With the test per piece, each
    // piece's common (no-bias) code sat after that piece's bias code, and the executed path
    // jumped over ~570 SASS instructions per piece: a short tile's call, whose time is mostly
    // fetching its instructions, waited on the skipped code (docs/perf-notes.md, "Short
    // calls: the instruction fetch"). With the test per pair, the bias's branches, adds and
    // selects took a 16-bit piece of 128 columns from ~200 SASS instructions to ~600
    // (docs/perf-notes.md, version 8). Both arms take the named barriers once per piece
    // (tests/ptx_vendored.rs counts them); the branch is the same for every thread.
    // SAFETY (both arms): forwarded contract.
    unsafe {
        if p.bias_dtype != BIAS_NONE {
            store_pieces::<BN, BM, D0, WIDE, true>(p, t, part, wg, tid, acc, pieces, map_c, issued)
        } else {
            store_pieces::<BN, BM, D0, WIDE, false>(p, t, part, wg, tid, acc, pieces, map_c, issued)
        }
    }
}

/// [`store_tma`]'s pieces, with the bias added when `HAS_BIAS`.
///
/// # Safety
/// As for [`store_tma`]; `HAS_BIAS` says whether the launch has a bias.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
unsafe fn store_pieces<
    const BN: u32,
    const BM: u32,
    const D0: usize,
    const WIDE: bool,
    const HAS_BIAS: bool,
>(
    p: &GemmParams,
    t: &Tile,
    part: u32,
    wg: u32,
    tid: u32,
    acc: &[f32; 128],
    pieces: u32,
    map_c: u64,
    issued: &mut u32,
) {
    let per_piece = piece_blocks(WIDE);
    let bf16 = p.out_mode == OUT_BF16;
    let (warp, lane) = (tid / 32, tid % 32);
    let leader = tid == 0;
    let barrier = 1 + wg;
    // This thread's rows r0 and r0 + 8 of the piece; in 128B swizzle the 16-byte chunk c of
    // row r lies at chunk c ^ (r % 8), and r % 8 is the same for both rows.
    let r0 = warp * 16 + lane / 4;
    let col0 = t.n0 + ((lane % 4) * 2) as u64;
    let m0 = (t.m0 + (part * WG_M) as u64) as i32;
    let batch = if p.batch_stride_c == 0 {
        0
    } else {
        t.batch as i32
    };
    // Whole pieces only: the rest of a one-round width's part goes from registers
    // (`store_rest`).
    unroll8!(pc => {
        if (pc + 1) * per_piece <= (BN / 8) as usize {
            let buf = pieces + (*issued % 2) * EPILOGUE_PIECE_BYTES;
            // The store issued two pieces ago read from this buffer: it must be done.
            if leader {
                cp_async_bulk_wait_group_read::<1>();
            }
            bar_sync_named::<WG_THREADS>(barrier);
            let piece = PieceWriter { p, acc, d0: D0, buf, r0, col0, lane, bf16 };
            // A warp whose rows all lie past a short tile's (rows 16 · warp ..) writes
            // nothing: those rows of the box lie past M, and the engine clips them whatever
            // the buffer holds. With one warp per scheduler the warpgroup's epilogue is as
            // long as its busiest warp's instructions (a tile of 8 rows: warp 0's, half
            // of its pairs).
            if BM >= WG_M || warp * 16 < BM {
                // SAFETY: forwarded contract.
                unsafe { piece.write::<WIDE, HAS_BIAS, BM>(pc, per_piece) }
            }
            // The piece is written: make it visible to the copy engine, then store it.
            fence_proxy_async_shared_cta();
            bar_sync_named::<WG_THREADS>(barrier);
            if leader {
                let n = (t.n0 + (pc * per_piece * 8) as u64) as i32;
                // SAFETY: `buf` holds the finished box; forwarded contract for the map.
                unsafe { cp_async_bulk_tensor_3d_store(map_c, [n, m0, batch], buf) };
                cp_async_bulk_commit_group();
            }
            *issued += 1;
        }
    });
}

/// What one thread writes of one piece of [`store_tma`]: its pairs of the piece's n8 blocks,
/// finished, into the piece's buffer.
struct PieceWriter<'a> {
    p: &'a GemmParams,
    acc: &'a [f32; 128],
    /// The first of the part's accumulators in `acc` (0, or 64 for a ping-pong tile's
    /// second half).
    d0: usize,
    /// The piece's buffer (128B-swizzled box of C's map).
    buf: u32,
    /// This thread's first row in the piece (the second is 8 below).
    r0: u32,
    /// Column of this thread's first pair in the tile's first n8 block.
    col0: u64,
    lane: u32,
    bf16: bool,
}

impl PieceWriter<'_> {
    /// Writes piece `pc` (n8 blocks `pc · per_piece` onwards): f32 when `WIDE`, else 16-bit
    /// (bf16 when `self.bf16`), the bias added when `HAS_BIAS`; in a tile of `BM` < 16 rows
    /// only this thread's first row (its second, 8 below, lies past the tile).
    ///
    /// # Safety
    /// As for [`store_tma`]; `HAS_BIAS` says whether the launch has a bias.
    #[inline(always)]
    unsafe fn write<const WIDE: bool, const HAS_BIAS: bool, const BM: u32>(
        &self,
        pc: usize,
        per_piece: usize,
    ) {
        let halves = if BM < 16 { 1 } else { 2 };
        let elem: u32 = if WIDE { 4 } else { 2 };
        unroll8!(jl => {
            if jl < per_piece {
                let j = pc * per_piece + jl;
                let col = self.col0 + 8 * j as u64;
                let bias = if HAS_BIAS && col < self.p.n {
                    // SAFETY: col + 1 < N: col is even and N a whole number of 16-byte units,
                    // so even (`host/src/cuda/hopper.rs`, `can_implement`).
                    Some(unsafe { [bias_at(self.p, col), bias_at(self.p, col + 1)] })
                } else {
                    None
                };
                // Byte of the pair inside its 128-byte row: chunk jl (16 bytes = 8 columns of
                // 16 bits) for 16-bit C; chunk jl * 2 + (lane % 4) / 2 for f32.
                let byte = (jl as u32 * 8 + (self.lane % 4) * 2) * elem;
                let (chunk, within) = (byte / 16, byte % 16);
                unroll2!(h => {
                    if h < halves {
                        let r = self.r0 + 8 * h as u32;
                        let at = self.buf + r * 128 + ((chunk ^ (r % 8)) * 16) + within;
                        let i = self.d0 + 4 * j + 2 * h;
                        let mut v = [self.acc[i], self.acc[i + 1]];
                        if let Some(b) = bias {
                            v = [v[0] + b[0], v[1] + b[1]];
                        }
                        // SAFETY: inside this warpgroup's buffer, aligned to the access.
                        unsafe {
                            if WIDE {
                                st_shared_v2_b32(at, v.map(finished_f32));
                            } else {
                                st_shared_b32(at, finished_16(v, self.bf16));
                            }
                        }
                    }
                });
            }
        });
    }
}

/// Waits until the copy engine has read every piece thread `tid` of its warpgroup handed it
/// (before the block's shared memory goes away).
#[inline(always)]
pub fn drain(tid: u32) {
    if tid == 0 {
        cp_async_bulk_wait_group_read::<0>();
    }
}
