//! Which output tile a block computes, shared by every tier. Tiles are numbered linearly
//! (`0..tile_count`, batch entry outermost) and decoded in groups of `GROUP_M` tile rows so
//! that blocks running at the same time share A rows and B columns in L2. Blocks take tiles
//! `blockIdx.x`, `+ gridDim.x`, …. The order changes only speed: each output element's
//! reduction is the same whichever block computes it, and when.

use crate::params::GemmParams;

/// Tile rows per scheduling group.
const GROUP_M: u64 = 8;

/// One output tile: its batch entry and the first row and column it covers.
pub struct Tile {
    pub batch: u64,
    pub m0: u64,
    pub n0: u64,
}

/// `(a / b, a % b)` for a divisor the caller knows is not zero (no panic path in the PTX).
#[inline(always)]
fn div_rem(a: u64, b: u64) -> (u64, u64) {
    // SAFETY: every caller divides by a tile count of a non-empty problem (the host
    // launches nothing for empty ones) or by a positive multiple of one.
    unsafe { core::hint::assert_unchecked(b != 0) };
    (a / b, a % b)
}

/// Every tile of the problem (`tiles_m · tiles_n · batch`).
#[inline(always)]
pub fn tile_count(p: &GemmParams) -> u64 {
    p.tiles_m * p.tiles_n * p.batch
}

/// Maps a linear tile index (below [`tile_count`]) to its `BM × BN` tile.
#[inline(always)]
pub fn tile_coords<const BM: u32, const BN: u32>(p: &GemmParams, tile: u64) -> Tile {
    tile_at(p, tile, BM as u64, BN as u64)
}

/// [`tile_coords`] with the tile's extent as values (for tiles of clusters, whose height is
/// a multiple of the block's); `p.tiles_m` counts tiles of `rows`.
#[inline(always)]
pub fn tile_at(p: &GemmParams, tile: u64, rows: u64, cols: u64) -> Tile {
    let (batch, t) = div_rem(tile, p.tiles_m * p.tiles_n);
    let (group, in_group) = div_rem(t, GROUP_M * p.tiles_n);
    let first_m = group * GROUP_M;
    let group_rows = if p.tiles_m - first_m < GROUP_M {
        p.tiles_m - first_m
    } else {
        GROUP_M
    };
    let (tn, tm_in_group) = div_rem(in_group, group_rows);
    Tile {
        batch,
        m0: (first_m + tm_in_group) * rows,
        n0: tn * cols,
    }
}
