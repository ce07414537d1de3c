//! Which tiles a block of the Hopper kernel computes, and in which order.
//!
//! Without clusters (`CLUSTER` = 1) block b takes tiles b, b + grid, … of the shared order
//! (`crate::schedule`). With clusters of `CLUSTER` blocks along M, the order walks *cluster
//! tiles* of `CLUSTER · BM` rows (BM the tile height of the entry point): cluster c takes cluster tiles c, c + clusters, …, and the
//! block of rank r computes rows `r · BM ..` of each. The blocks of a cluster then share the
//! B tile of every stage (`mainloop`: each copies its part of it to all of them), and walk
//! the same number of tiles and K tiles, which the shared stages need. A block whose rows lie
//! past M still walks (its copies are zero fill, its stores are skipped).
//!
//! Only the assignment of tiles to blocks changes: each output element's chain is the same
//! whichever block computes it.

use crate::params::GemmParams;
use crate::schedule::{tile_at, tile_count, Tile};
use core::arch::nvptx::{_block_idx_x, _grid_dim_x};

/// The tiles of one block.
pub struct Walk<const CLUSTER: u32> {
    /// The parameters with `tiles_m` counting cluster tiles.
    sched: GemmParams,
    /// This block's rank in its cluster (0 without clusters).
    rank: u32,
    /// The first cluster tile and the stride between this block's cluster tiles.
    first: u64,
    step: u64,
}

impl<const CLUSTER: u32> Walk<CLUSTER> {
    /// # Safety
    /// `rank` is this block's rank in its cluster of CLUSTER blocks, laid out along x.
    #[inline(always)]
    pub unsafe fn new(p: &GemmParams, rank: u32) -> Self {
        let mut sched = *p;
        sched.tiles_m = p.tiles_m.div_ceil(CLUSTER as u64);
        Walk {
            sched,
            rank,
            first: _block_idx_x() as u64 / CLUSTER as u64,
            step: _grid_dim_x() as u64 / CLUSTER as u64,
        }
    }

    /// The cluster tiles of the problem.
    #[inline(always)]
    pub fn count(&self) -> u64 {
        tile_count(&self.sched)
    }

    /// This block's first cluster tile and the stride to its next.
    #[inline(always)]
    pub fn range(&self) -> (u64, u64) {
        (self.first, self.step)
    }

    /// This block's first tile when the problem has one tile row per batch entry (every
    /// decode call), else None: the general case's tile order costs three 64-bit divisions,
    /// code that a block's setup (`mainloop::prefetch_b_l2`) should not carry.
    #[inline(always)]
    pub fn first_of_one_row<const BM: u32, const BN: u32>(&self) -> Option<Tile> {
        (self.sched.tiles_m == 1 && self.first < self.count())
            .then(|| self.tile::<BM, BN>(self.first))
    }

    /// This block's part of cluster tile `i` (below [`Self::count`]) for (BM, BN) tiles.
    #[inline(always)]
    pub fn tile<const BM: u32, const BN: u32>(&self, i: u64) -> Tile {
        if self.sched.tiles_m == 1 {
            // One tile row per batch entry (a decode step's short products): `tile_at`'s
            // groups are then one tile row each, and its three divisions (each a quotient
            // and a remainder, which the compiler divides twice for) come down to one. A
            // consumer of a short tile otherwise spends on them about what it spends on
            // its wgmmas (docs/perf-notes.md, "Short tiles: the consumer's instructions").
            let tiles_n = self.sched.tiles_n;
            // SAFETY: a launched problem has at least one tile column.
            unsafe { core::hint::assert_unchecked(tiles_n != 0) };
            let batch = i / tiles_n;
            return Tile {
                batch,
                m0: (self.rank * BM) as u64,
                n0: (i - batch * tiles_n) * BN as u64,
            };
        }
        let t = tile_at(&self.sched, i, (BM * CLUSTER) as u64, BN as u64);
        Tile {
            m0: t.m0 + (self.rank * BM) as u64,
            ..t
        }
    }
}
