//! Ping-pong consumers: each consumer warpgroup owns whole (128, 128) tiles, the two taking
//! this block's tiles in turn, so that one warpgroup's epilogue runs while the other's
//! wgmmas keep the tensor cores busy. The wide tiles of 8 and 16 rows
//! (`config::WIDE_SHORT_BN`) take the same turns, one 64-row wgmma block each: there a
//! tile's time is its consumer's instructions (one stage of K, four 64-column pieces to
//! store) with one warp per scheduler, and a second warpgroup's tile fills the gaps
//! (docs/perf-notes.md, "Short tiles: the consumer's instructions"). So do the 64-column
//! tiles of 8 and 16 rows of an N-contiguous B (decode attention's `attn @ v`, one 64-column
//! box of values per tile) when there are more tiles than blocks: a short tile's chain is
//! latency, and a block's second tile's chain runs beside its first instead of after it.
//!
//! With the cooperative consumers (`super::consume_tiles`) both warpgroups finish their
//! halves of a tile at the same moment and the tensor cores idle through the epilogue. That
//! costs most in accumulate mode (dW), whose epilogue loads the old C: at 4096³ the kernel
//! ran at 0.92× of cuBLAS, 1.02× with those loads left out (docs/perf-notes.md, "dW: what
//! the accumulate epilogue costs"). Here warpgroup 1 takes the block's tiles 0, 2, 4, … and
//! warpgroup 2 tiles 1, 3, 5, …; a k16 step of a tile is two `m64n128k16` wgmmas, rows 0–63
//! into `acc[0..64]` and rows 64–127 into `acc[64..128]` (`mainloop::stage_steps`). Every
//! accumulator still takes the same steps in the same order, so the bits are those of the
//! cooperative kernels (contract C4; `tests/gpu_tensor_cores.rs` compares them).
//!
//! **The pipeline** is unchanged: one producer thread copies the stages of every tile in the
//! block's order, and each stage is read by the one warpgroup whose tile it belongs to
//! (`Stages::init` counts that warpgroup's warps). A warpgroup's stage uses start at
//! `tile · k_tiles` in the shared count.
//!
//! **The turn.** A stage's `full` barrier may only be waited on by a warpgroup at most one
//! phase ahead of it (a parity wait cannot tell phase n from n − 2). So a warpgroup starts
//! waiting on its tile's stages only once the other has issued every wgmma of the tile
//! before — by then that one has seen each of those stages land, so the stages of this tile
//! are at most one phase behind. The hand-over is a named barrier per direction
//! (`bar.arrive` by the warpgroup done issuing, `bar.sync` by the one waiting to start),
//! which also keeps the two mainloops from competing for the tensor cores.

use super::config::{self, BM as TILE_M, WG_M};
use super::epilogue;
use super::mainloop::{self, k_tiles, Stages};
use super::walk::Walk;
use super::ConsumerSchedule;
use crate::arch::sync::{bar_arrive_named, bar_sync_named};
use crate::element::WgmmaElement;
use crate::params::GemmParams;

/// The tile width of the ping-pong kernels: a warpgroup's 128 × 128 accumulators fill the
/// 128 registers the cooperative kernels' 64 × 256 do.
pub const PINGPONG_BN: u32 = 128;

/// The named barrier on which warpgroup `wg` (1 or 2) waits for its turn. Ids 1 and 2 are
/// the consumers' epilogue barriers (`epilogue::store_tma`), 0 the block's.
#[inline(always)]
fn turn_barrier(wg: u32) -> u32 {
    2 + wg
}

/// The threads of a turn barrier: the warpgroup handing over and the one taking over.
const TURN_THREADS: u32 = 256;

/// The ping-pong schedule: each consumer warpgroup owns every other tile of the block.
pub struct PingPong;

impl ConsumerSchedule for PingPong {
    #[inline(always)]
    fn readers(_bm: u32) -> u32 {
        1
    }

    #[inline(always)]
    unsafe fn consume<
        E: WgmmaElement,
        const A_K: bool,
        const B_K: bool,
        const BN: u32,
        const BM: u32,
        const CLUSTER: u32,
    >(
        p: &GemmParams,
        st: &Stages<BN, BM>,
        walk: &Walk<CLUSTER>,
        tid: u32,
        map_c: u64,
    ) {
        const {
            assert!(
                (BN == PINGPONG_BN && BM == TILE_M)
                    || (config::wide_short_built(BM) && A_K && (B_K || BN == config::NARROW_BN)),
                "the ping-pong tiles: (128, 128), the wide tiles of 8 and 16 rows, and their \
                 64-column tiles of an N-contiguous B"
            )
        };
        // SAFETY (all arms): forwarded contract; the kind is the launch's output mode.
        unsafe {
            by_store_kind!(
                p,
                consume_with::<E, A_K, B_K, BN, BM, CLUSTER>(p, st, walk, tid, map_c)
            )
        }
    }
}

/// Warpgroup `tid / 128`'s tiles of this block (every other one), each: wait for the turn,
/// issue the chain, hand the turn over, complete the chain, store both 64-row halves.
///
/// # Safety
/// As for [`ConsumerSchedule::consume`] (one reader per stage), `STORE` the kind of
/// `p.out_mode`.
#[inline(always)]
unsafe fn consume_with<
    E: WgmmaElement,
    const A_K: bool,
    const B_K: bool,
    const BN: u32,
    const BM: u32,
    const CLUSTER: u32,
    const STORE: u32,
>(
    p: &GemmParams,
    st: &Stages<BN, BM>,
    walk: &Walk<CLUSTER>,
    tid: u32,
    map_c: u64,
) {
    let wg = tid / 128;
    let wtid = tid % 128;
    let other = 3 - wg;
    let kt = k_tiles(p);
    // This block's tiles: first + j · step, j = 0, 1, … while below the count (no division:
    // the compiler cannot see that the step is never zero).
    let (first, step) = walk.range();
    let mut issued = 0u32;
    let mut j = u64::from(wg - 1);
    while first + j * step < walk.count() {
        let t = walk.tile::<BM, BN>(first + j * step);
        // Tile 0 needs no turn: no stage was used before it.
        if j > 0 {
            bar_sync_named::<TURN_THREADS>(turn_barrier(wg));
        }
        // The other warpgroup waits for the turn only when it has a next tile.
        let hand_over = || {
            if first + (j + 1) * step < walk.count() {
                bar_arrive_named::<TURN_THREADS>(turn_barrier(other));
            }
        };
        let mut it = j as u32 * kt;
        // A tile whose rows all lie past M computes nothing (rows of a cluster tile past M).
        let active = t.m0 < p.m;
        // A short tile is one 64-row wgmma block (rows past BM never stored), as in the
        // cooperative schedule's warpgroup 0; the (128, 128) tile two.
        // SAFETY (both arms): forwarded contract; the whole warpgroup runs this together,
        // its turn taken (see the module docs).
        let acc = unsafe {
            if active {
                mainloop::consume::<E, A_K, B_K, BN, BM, true, CLUSTER, true>(
                    p, st, 0, wtid, &mut it, hand_over,
                )
            } else {
                mainloop::consume::<E, A_K, B_K, BN, BM, false, CLUSTER, true>(
                    p, st, 0, wtid, &mut it, hand_over,
                )
            }
        };
        if active {
            let pieces = st.epilogue(wg - 1);
            // SAFETY: forwarded contract; named barrier 1 + (wg − 1) and the epilogue pieces
            // at `pieces` are this warpgroup's.
            unsafe {
                epilogue::store_part::<BN, BM, 0, STORE>(
                    p,
                    &t,
                    0,
                    wg - 1,
                    wtid,
                    &acc,
                    pieces,
                    map_c,
                    &mut issued,
                );
                if BM == TILE_M {
                    epilogue::store_part::<BN, BM, 64, STORE>(
                        p,
                        &t,
                        1,
                        wg - 1,
                        wtid,
                        &acc,
                        pieces,
                        map_c,
                        &mut issued,
                    );
                }
            }
        }
        j += 2;
    }
    epilogue::drain(wtid);
}

const _: () = assert!(
    TILE_M == 2 * WG_M,
    "a ping-pong tile is two wgmma row blocks"
);
