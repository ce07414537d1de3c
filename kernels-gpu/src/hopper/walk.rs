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
//! Tiles of fewer than 128 rows (decode: one tile row, and A small beside B's strip) cluster
//! along N instead (`sgemm_bi_abi::hopper::clusters_along_n`): cluster tiles of
//! `CLUSTER · BN` columns of the same rows, the block of rank r computing columns `r · BN ..`
//! of each, and the blocks share each stage's A tile instead of B's. At 64 × 4096 × 4096 every
//! block otherwise reads all of A (512 KiB) beside its 256 KiB strip of the weight.
//!
//! Only the assignment of tiles to blocks changes: each output element's chain is the same
//! whichever block computes it.

use super::config::clusters_along_n;
use crate::params::GemmParams;
use crate::schedule::{tile_at, tile_count, Tile};
use core::arch::nvptx::{_block_idx_x, _grid_dim_x};

/// The tiles of one block.
pub struct Walk<const CLUSTER: u32> {
    /// The parameters with `tiles_m` counting cluster tiles.
    sched: GemmParams,
    /// This block's rank in its cluster (0 without clusters).
    rank: u32,
    /// Whether the cluster's blocks lie along N (sharing A) rather than along M (sharing B).
    along_n: bool,
    /// The first cluster tile and the stride between this block's cluster tiles.
    first: u64,
    step: u64,
}

impl<const CLUSTER: u32> Walk<CLUSTER> {
    /// The walk of a block of (BM, ·) tiles.
    ///
    /// # Safety
    /// `rank` is this block's rank in its cluster of CLUSTER blocks, laid out along x.
    #[inline(always)]
    pub unsafe fn new<const BM: u32>(p: &GemmParams, rank: u32) -> Self {
        let along_n = CLUSTER > 1 && clusters_along_n(BM);
        let mut sched = *p;
        if along_n {
            sched.tiles_n = p.tiles_n.div_ceil(CLUSTER as u64);
        } else {
            sched.tiles_m = p.tiles_m.div_ceil(CLUSTER as u64);
        }
        Walk {
            sched,
            rank,
            along_n,
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
            let (m0, n0) = self.offsets::<BM, BN>();
            return Tile {
                batch,
                m0,
                n0: (i - batch * tiles_n) * self.cluster_cols::<BN>() + n0,
            };
        }
        let t = tile_at(
            &self.sched,
            i,
            self.cluster_rows::<BM>(),
            self.cluster_cols::<BN>(),
        );
        let (m0, n0) = self.offsets::<BM, BN>();
        Tile {
            m0: t.m0 + m0,
            n0: t.n0 + n0,
            ..t
        }
    }

    /// Whether the blocks of a cluster share A (they lie along N) rather than B.
    #[inline(always)]
    pub fn along_n(&self) -> bool {
        self.along_n
    }

    /// Rows of a cluster tile.
    #[inline(always)]
    fn cluster_rows<const BM: u32>(&self) -> u64 {
        if self.along_n {
            BM as u64
        } else {
            (BM * CLUSTER) as u64
        }
    }

    /// Columns of a cluster tile.
    #[inline(always)]
    fn cluster_cols<const BN: u32>(&self) -> u64 {
        if self.along_n {
            (BN * CLUSTER) as u64
        } else {
            BN as u64
        }
    }

    /// This block's (row, column) offset inside each cluster tile.
    #[inline(always)]
    fn offsets<const BM: u32, const BN: u32>(&self) -> (u64, u64) {
        if self.along_n {
            (0, (self.rank * BN) as u64)
        } else {
            ((self.rank * BM) as u64, 0)
        }
    }
}
