//! The chain of the decode tiles of 8 and 16 rows (the `config::DECODE_BN` widths: A and B
//! K-contiguous, stages of several K slices) by `mma.sync` steps, spread over the consumer
//! warpgroup's four warps by columns.
//!
//! Why: at decode one row's output element is one accumulator that takes K / 16 dependent
//! steps (contract C4: no split of K), and a wgmma step's dependent latency (~79 cycles on
//! the H200) made those chains, not the stream of the weight, the bound at long K
//! (docs/perf-notes.md, "Decode: where the time goes"). An `mma.sync.m16n8k16` step adds the
//! same 16 products to the same accumulator with the same bits
//! (`tests/gpu_tensor_cores.rs::the_mma_sync_and_wgmma_paths_give_the_same_bits`) and its
//! dependent latency is about a third of a wgmma's.
//!
//! How: a tile of BN columns is BN / 8 blocks of 8 columns; warp `w` of the warpgroup owns
//! blocks `w` and `w + 4` (BN = 48: warps 0 and 1 own two), each one m16n8 accumulator chain
//! over the whole of K. A warp with no block of its own (BN = 16: warps 2 and 3)
//! repeats the last block and throws it away, so that every warp runs the same straight
//! stage body and keeps the stage protocol (each warp releases each stage). A whole stage's
//! steps are one unrolled run: its `ldmatrix` loads do not wait for the steps before them.
//! At the tile's end each warp hands its blocks to warp 0 through shared memory, in the
//! fragment layout a wgmma leaves (the m16n8 C fragment is warp 0's part of the m64nBN one),
//! so the epilogue is the wgmma path's.

use super::config::{BK, MMA_K};
use super::mainloop::{release_stage, Stages};
use crate::arch::ldmatrix::ldmatrix_x4;
use crate::arch::shared::{ld_shared_v4_f32, st_shared_v4_b32};
use crate::arch::sync::bar_sync_named;
use crate::element::WgmmaElement;

/// The shared address of 16-byte chunk `chunk` of row `row` of a 128B-swizzled,
/// K-contiguous tile at `tile` (1024-byte aligned): the copy engine stores chunk c of row r
/// at chunk `c ^ (r % 8)` of the row.
#[inline(always)]
fn swizzled_chunk(tile: u32, row: u32, chunk: u32) -> u32 {
    tile + row * 128 + ((chunk ^ (row % 8)) << 4)
}

/// k16 steps in one K tile of BK.
const STEPS_PER_SLICE: u32 = BK / MMA_K;

/// Threads of the consumer warpgroup (the named barrier's count).
const WARPGROUP: u32 = 128;

/// The most blocks of 8 columns one warp computes (BN = 48: warps 0 and 1 two each).
const MAX_BLOCKS: usize = 2;

/// How the consumer warpgroup's four warps share a (BM ≤ 16, BN) tile: warp `w` computes
/// blocks `w` and `w + 4` of 8 columns (the first [`Share::count`] of them). A block index
/// past the tile's last block is clamped to it (the warp repeats it and throws it away), so
/// that every warp runs the same straight stage body.
#[derive(Clone, Copy)]
struct Share {
    blocks: [u32; MAX_BLOCKS],
}

impl Share {
    /// Blocks each warp computes.
    const fn count<const BN: u32>() -> usize {
        (BN / 8).div_ceil(4) as usize
    }

    #[inline(always)]
    fn of<const BN: u32>(warp: u32) -> Self {
        let last = BN / 8 - 1;
        Share {
            blocks: [warp.min(last), (warp + 4).min(last)],
        }
    }

    /// Whether this warp owns block `i` of its list (not a repeat of the last block).
    #[inline(always)]
    fn owns(&self, warp: u32, i: usize) -> bool {
        warp + 4 * i as u32 == self.blocks[i]
    }
}

/// One K slice's operands in registers: A's fragment per k16 step, B's per pair of steps
/// and block of 8 columns ([`Share`]).
#[derive(Clone, Copy)]
struct Fragments {
    a: [[u32; 4]; STEPS_PER_SLICE as usize],
    b: [[[u32; 4]; MAX_BLOCKS]; (STEPS_PER_SLICE / 2) as usize],
}

impl Fragments {
    /// All zeros: what stands for the steps a partial slice does not take (never multiplied).
    #[inline(always)]
    fn none() -> Self {
        Fragments {
            a: [[0; 4]; STEPS_PER_SLICE as usize],
            b: [[[0; 4]; MAX_BLOCKS]; (STEPS_PER_SLICE / 2) as usize],
        }
    }

    /// Loads slice `j` of stage `s`, its first `steps` k16 steps (`steps` ≤ 4): per step one
    /// `ldmatrix.x4` of A's 16 rows, per pair of steps one of each block's 8 columns × 32 k.
    ///
    /// # Safety
    /// Every lane of the warp calls it together (`lane` its lane); stage `s` has landed and
    /// is not released before the loads complete.
    #[inline(always)]
    unsafe fn load<const BN: u32, const BM: u32>(
        st: &Stages<BN, BM>,
        share: &Share,
        lane: u32,
        s: u32,
        j: u32,
        steps: u32,
    ) -> Self {
        let mut f = Self::none();
        let (a_tile, b_tile) = (st.a_slice(s, j), st.b_slice(s, j));
        // A: matrices (rows 0–7, k 0–7), (8–15, k 0–7), (0–7, k 8–15), (8–15, k 8–15), the
        // fragment's a[0..4]. Rows 8–15 of a tile of 8 read the stage's next bytes (inside
        // the stage pitch); they reach only rows 8–15 of the sums, never stored.
        let (a_row, a_half) = (lane % 16, lane / 16);
        // B (K-contiguous, row n of the tile at 128 n): for one block of 8 columns, matrices
        // (k 0–7), (8–15), (16–23), (24–31) of a pair of steps: b[0..2] of the first, b[2..4]
        // of the second.
        let (b_row, b_quarter) = (lane % 8, lane / 8);
        crate::unroll4!(step => {
            if (step as u32) < steps {
                let chunk = 2 * step as u32 + a_half;
                // SAFETY: rows below 16 of the slice's A tile, inside the stage pitch.
                f.a[step] = unsafe { ldmatrix_x4(swizzled_chunk(a_tile, a_row, chunk)) };
            }
        });
        crate::unroll2!(pair => {
            if 2 * (pair as u32) < steps {
                crate::unroll2!(i => {
                    if i < Share::count::<BN>() {
                        // The chunks of k 32·pair .. +31; past the row's eight chunks only
                        // when the pair's second step is not taken (`& 7` stays in the row).
                        let chunk = (4 * pair as u32 + b_quarter) & 7;
                        let row = 8 * share.blocks[i] + b_row;
                        // SAFETY: a row below BN of the slice's B tile; the whole warp.
                        f.b[pair][i] = unsafe { ldmatrix_x4(swizzled_chunk(b_tile, row, chunk)) };
                    }
                });
            }
        });
        f
    }

    /// The slice's first `steps` k16 steps, ascending k, one mma per step and block.
    #[inline(always)]
    fn multiply<E: WgmmaElement, const BN: u32, const BM: u32>(
        &self,
        d: &mut [[f32; 4]; MAX_BLOCKS],
        steps: u32,
    ) {
        crate::unroll4!(step => {
            if (step as u32) < steps {
                let (pair, h) = (step / 2, step % 2);
                crate::unroll2!(i => {
                    if i < Share::count::<BN>() {
                        let b = [self.b[pair][i][2 * h], self.b[pair][i][2 * h + 1]];
                        E::mma_m16n8k16(&mut d[i], &self.a[step], &b);
                    }
                });
            }
        });
    }
}

/// The tile's chain over `k` for a decode tile of 8 or 16 rows: the steps in ascending k,
/// each K slice's four (a last partial slice's `ceil(rest / 16)`, the rest zeros from the
/// copy engine), one wait on each stage's `full` barrier and one release of it per warp.
/// Returns the accumulators of the wgmma layout: warp 0's rows 0–15 hold the tile;
/// everything else is zero, never stored. `it` counts the stages this block consumed
/// (shared with the producer's count).
///
/// # Safety
/// Every thread of the one consumer warpgroup calls it together (`tid` 0..128 inside it),
/// with the same `it`; named barrier 1 is the warpgroup's; the warpgroup's second epilogue
/// area (`Stages::epilogue(1)`, unused by tiles of one consumer warpgroup) is free.
#[inline(always)]
pub(super) unsafe fn consume<E: WgmmaElement, const BN: u32, const BM: u32, const CLUSTER: u32>(
    k: u64,
    st: &Stages<BN, BM>,
    tid: u32,
    it: &mut u32,
) -> [f32; 128] {
    // Every kernel instantiates this; only the decode tiles of at most 16 rows call it.
    const {
        assert!(
            BM > 16 || Stages::<BN, BM>::SLICES == 1 || Share::count::<BN>() <= MAX_BLOCKS,
            "at most MAX_BLOCKS blocks of 8 columns per warp"
        )
    };
    let (warp, lane) = (tid / 32, tid % 32);
    let share = Share::of::<BN>(warp);
    let slices = Stages::<BN, BM>::SLICES;
    let count = Stages::<BN, BM>::COUNT;
    let whole = (k / BK as u64) as u32;
    let tail_steps = ((k % BK as u64) as u32).div_ceil(MMA_K);
    let total = whole + (tail_steps > 0) as u32;
    // Slice g of the tile lies in the block's stage `first + g / slices` (ring slot modulo
    // `count`) as slice `g % slices`.
    let first = *it;
    let slot = |g: u32| (first + g / slices) % count;
    let wait_stage = |g: u32| {
        let use_ = first + g / slices;
        // SAFETY: initialised barrier (forwarded contract).
        unsafe { Stages::<BN, BM>::wait(st.full(use_ % count), (use_ / count) & 1) };
    };
    let release = |g: u32| {
        // Every lane's loads of the stage are done (its mmas have read them) before lane 0
        // lets the producer refill it.
        crate::arch::sync::syncwarp();
        if lane == 0 {
            // SAFETY: once per stage use and warp, by lane 0 (the stage's `empty` barrier
            // counts the warpgroup's four warps).
            unsafe { release_stage::<BN, BM, CLUSTER>(st, slot(g)) };
        }
    };
    let mut d = [[0f32; 4]; MAX_BLOCKS];
    // Stage by stage, each whole one a straight run of its slices' loads and mmas (ptxas
    // issues the loads ahead of the chain). Loading slice g + 1 explicitly before slice g's
    // mmas, across stages too, was 1.4–1.7× slower on the H200 (docs/perf-notes.md).
    let mut g = 0;
    while g < total {
        wait_stage(g);
        if g + slices <= whole {
            for j in 0..slices {
                // SAFETY: the stage has landed; released only after its mmas.
                let f = unsafe {
                    Fragments::load::<BN, BM>(st, &share, lane, slot(g), j, STEPS_PER_SLICE)
                };
                f.multiply::<E, BN, BM>(&mut d, STEPS_PER_SLICE);
            }
        } else {
            // The tile's last stage: the slices left, the last one partial when K is (the
            // steps that reach into K; zeros past it).
            let here = (total - g).min(slices);
            for j in 0..here {
                let steps = if g + j < whole {
                    STEPS_PER_SLICE
                } else {
                    tail_steps
                };
                // SAFETY: as above.
                let f = unsafe { Fragments::load::<BN, BM>(st, &share, lane, slot(g), j, steps) };
                f.multiply::<E, BN, BM>(&mut d, steps);
            }
        }
        release(g);
        g += slices;
    }
    *it = first + total.div_ceil(slices);
    // Hand the blocks to warp 0 (the wgmma layout's rows 0–15): block c at
    // `scratch + 16 (32 c + lane)`.
    let scratch = st.epilogue(1);
    let at = |c: u32| scratch + 16 * (32 * c + lane);
    crate::unroll2!(i => {
        if i < Share::count::<BN>() && share.owns(warp, i) {
            let v = d[i].map(f32::to_bits);
            // SAFETY: 16-byte aligned, inside the 16 KiB area (at most 6 blocks of 512 B).
            unsafe { st_shared_v4_b32(at(share.blocks[i]), v) };
        }
    });
    bar_sync_named::<WARPGROUP>(1);
    // SAFETY: all-zero bits are +0.0 for every element.
    let mut acc: [f32; 128] = unsafe { core::mem::zeroed() };
    if warp == 0 {
        // Constant indices only (the accumulators must stay in registers).
        crate::unroll8!(c => {
            if c < (BN / 8) as usize {
                // SAFETY: written above by the block's owner, before the barrier.
                let v = unsafe { ld_shared_v4_f32(at(c as u32)) };
                acc[4 * c..4 * c + 4].copy_from_slice(&v);
            }
        });
    }
    // The next tile's blocks overwrite the area only after warp 0 has read this one's.
    bar_sync_named::<WARPGROUP>(1);
    acc
}
