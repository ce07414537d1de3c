//! Planning and launching the grouped Hopper kernels (`kernels-gpu/src/hopper/grouped.rs`):
//! a grouped call whose offsets are in device memory, run as one kernel that reads them, so
//! the host never waits for them and the call can be captured in a CUDA graph.
//!
//! Two kernels: the rows split (torch's 2-D × 3-D: the experts' forward and input gradient;
//! A row-major, C overwritten) and the reduction split (2-D × 2-D: the experts' weight
//! gradient; A column-major, B row-major, C overwritten or accumulated). Both run each group
//! with the dense Hopper kernels' mainloop, so their bits are those of the group-by-group
//! form (`Engine::grouped_gemm`), which runs where they do not apply: the columns split,
//! other layouts, f32 inputs, what the copy engine cannot describe, GPUs without the sm90a
//! module.

use std::sync::Arc;

use cudarc::driver::sys;
use sgemm_bi_abi::catalogue::{Element, Family, Kind, Module};
use sgemm_bi_abi::hopper::{BM, EPILOGUE_PIECE_BYTES, WG_M};
use sgemm_bi_abi::params::{GroupedHopperParams, HopperParams, TensorMap};

use super::catalogue::{id, Entries, KernelId};
use super::hopper::{can_implement, encode_raw, operand_map};
use super::kernel_abi::gemm_params;
use super::plan::Unsupported;
use super::tile_counter::{CounterPool, TileCounter};
use crate::error::{Error, Result};
use crate::grouped::{GroupSplit, GroupedGemm};
use crate::types::{DType, GemmPointers, Layout, OutputMode};

/// Tile widths the grouped kernels are built for.
const WIDTHS: [u32; 2] = [128, 256];

/// The rows split's variants: (tile width, blocks per cluster, dynamic tile order). Clusters
/// of two share each stage's B tile (the experts' weights, the bytes that dominate at MoE
/// shapes) between neighbouring tiles of a group's rows; the dynamic order hands each block
/// (each cluster) its next tile when it is ready for one (`kernels-gpu/src/hopper/grouped.rs`).
const VARIANTS: [(u32, u32, bool); 4] = [
    (128, 1, false),
    (256, 1, false),
    (256, 2, true),
    (256, 1, true),
];

/// `[element (bf16, f16)][B K-contiguous][variant]`.
type Table = [[[Option<KernelId<GroupedHopperParams>>; VARIANTS.len()]; 2]; 2];

const fn table() -> Table {
    let elements = [Element::Bf16, Element::F16];
    let mut table = [[[None; VARIANTS.len()]; 2]; 2];
    let mut e = 0;
    while e < 2 {
        let mut b = 0;
        while b < 2 {
            let mut v = 0;
            while v < VARIANTS.len() {
                table[e][b][v] = id(Kind {
                    module: Module::Sm90a,
                    element: elements[e],
                    a_k_contiguous: true,
                    b_k_contiguous: b == 1,
                    family: Family::HopperGrouped {
                        bn: VARIANTS[v].0,
                        cluster: VARIANTS[v].1,
                        dynamic: VARIANTS[v].2,
                    },
                });
                v += 1;
            }
            b += 1;
        }
        e += 1;
    }
    table
}

const TABLE: Table = table();

/// The reduction split's variants: (tile width, blocks per cluster, dynamic tile order).
/// Clusters of two share each stage's dY tile (the group's tokens, the same for every tile
/// of a column) between neighbouring tiles of M; the dynamic order hands each cluster its
/// next tile when it is ready for one.
const REDUCTION_VARIANTS: [(u32, u32, bool); 4] = [
    (128, 1, false),
    (256, 1, false),
    (256, 2, false),
    (256, 2, true),
];

/// The reduction split's entries, `[element (bf16, f16)][variant]`.
const REDUCTION: [[Option<KernelId<GroupedHopperParams>>; REDUCTION_VARIANTS.len()]; 2] = {
    let elements = [Element::Bf16, Element::F16];
    let mut table = [[None; REDUCTION_VARIANTS.len()]; 2];
    let mut e = 0;
    while e < 2 {
        let mut v = 0;
        while v < REDUCTION_VARIANTS.len() {
            table[e][v] = id(Kind {
                module: Module::Sm90a,
                element: elements[e],
                a_k_contiguous: false,
                b_k_contiguous: false,
                family: Family::HopperGroupedReduction {
                    bn: REDUCTION_VARIANTS[v].0,
                    cluster: REDUCTION_VARIANTS[v].1,
                    dynamic: REDUCTION_VARIANTS[v].2,
                },
            });
            assert!(table[e][v].is_some(), "a grouped tile without an entry");
            v += 1;
        }
        e += 1;
    }
    table
};

const _: () = {
    // Every slot is built: the planner never finds a hole.
    let mut e = 0;
    while e < 2 {
        let mut b = 0;
        while b < 2 {
            let mut v = 0;
            while v < VARIANTS.len() {
                assert!(TABLE[e][b][v].is_some(), "a grouped tile without an entry");
                v += 1;
            }
            b += 1;
        }
        e += 1;
    }
};

/// What the planner chose: the entry point, its tile width, blocks per cluster and tile
/// order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct GroupedPlan {
    entry: KernelId<GroupedHopperParams>,
    bn: u32,
    cluster: u32,
    dynamic: bool,
}

impl GroupedPlan {
    fn reduction(&self) -> bool {
        matches!(
            self.entry.spec().kind.family,
            Family::HopperGroupedReduction { .. }
        )
    }
}

/// The grouped Hopper kernels of a device (the sm90a module's).
pub(crate) struct GroupedKernels {
    entries: Arc<Entries>,
    sms: usize,
    clusters: ClusterChoice,
    order: TileOrder,
    /// Where the dynamic tile order's counters come from.
    counters: CounterPool,
}

/// Whether the grouped kernels run in clusters of two: the planner's choice (the reduction
/// split's 256-column tiles; the rows split's with long groups, `rows_cluster`), or forced
/// either way for benchmarks and tests (`SGEMM_BI_GROUPED_CLUSTER=1|2`, read once per
/// device). Both give the same bits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ClusterChoice {
    Auto,
    Forced(u32),
}

impl ClusterChoice {
    fn from_env() -> Self {
        match std::env::var("SGEMM_BI_GROUPED_CLUSTER").as_deref() {
            Ok("1") => ClusterChoice::Forced(1),
            Ok("2") => ClusterChoice::Forced(2),
            _ => ClusterChoice::Auto,
        }
    }
}

/// The order in which the grouped kernels' blocks take their tiles: static (block b takes
/// tiles b, b + grid, …) or dynamic (each block's next tile from a counter of the call when
/// its producer is ready for one). `Auto` takes the dynamic order;
/// `SGEMM_BI_GROUPED_ORDER=static|dynamic` (read once per device) forces either, for
/// benchmarks and tests. Both give the same bits. The rows split's dynamic order is built
/// for 256-column tiles, with or without clusters; 128-column tiles keep the static one,
/// and so do clusters asked for where the dynamic order cannot run, without the clusters.
/// The reduction split's is built for its clusters of two (`reduction_variant`).
///
/// Why the rows split is dynamic at every K (docs/perf-notes.md, "Grouped GEMM, version 3"): at K = 4096 (the
/// forward at 4096 → 1536) it took the forward on the H200 from 0.77–0.79× of
/// `F.grouped_mm` to 0.94–1.02× (4096 tokens, balanced). At K = 2048 and 768 (2048 → 768)
/// the static order was as fast for a pass repeated back to back, but not after another
/// kernel: on an H100, the static forward took 237 µs after itself and 286–295 after the
/// input or the weight gradient, the dynamic one 237 and 251, and forward + backward went
/// from 1.00–1.08× of torch to 1.06–1.09× (4096 and 16384 tokens, both routings), each
/// pass alone staying at 1.03–1.11×.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum TileOrder {
    Auto,
    Static,
    Dynamic,
}

impl TileOrder {
    fn from_env() -> Self {
        match std::env::var("SGEMM_BI_GROUPED_ORDER").as_deref() {
            Ok("dynamic") => TileOrder::Dynamic,
            Ok("static") => TileOrder::Static,
            _ => TileOrder::Auto,
        }
    }
}

/// Whether the dynamic order's tile counter stays in its 32 bits for a call of `tiles` tiles
/// on `sms` multiprocessors: the counter runs up to the tiles plus twice the grid (each
/// block's last request, which finds the walk over, counts too).
fn counter_fits(tiles: usize, sms: usize) -> bool {
    tiles.saturating_add(2 * sms) < u32::MAX as usize
}

/// The rows split's variant (an index of [`VARIANTS`]) for tiles 256 wide when `wide` (else
/// 128), `cluster` blocks per cluster, the tile order asked for, K, and an upper bound of
/// the call's tiles (`None`: past `usize`).
fn rows_variant(
    wide: bool,
    cluster: u32,
    order: TileOrder,
    k: usize,
    most_tiles: Option<usize>,
    sms: usize,
) -> usize {
    // The dynamic order announces each tile in its first K tile's stage (so K > 0), and its
    // counter must fit its 32 bits (`counter_fits`).
    let asked = match order {
        TileOrder::Auto | TileOrder::Dynamic => true,
        TileOrder::Static => false,
    };
    let dynamic = asked && k > 0 && most_tiles.is_some_and(|t| counter_fits(t, sms));
    // Clusters are built in the dynamic order only: without it they are left out.
    match (wide, cluster, dynamic) {
        (false, _, _) => 0,
        (true, _, false) => 1,
        (true, 1, true) => 3,
        (true, _, true) => 2,
    }
}

/// Mean rows per group from which the rows split runs in clusters of two.
const CLUSTER_ROWS_PER_GROUP: usize = 2048;

/// Blocks per cluster the rows split asks for (`rows_variant` still leaves clusters out
/// where the dynamic order cannot run): two when forced, or on its own when the groups hold
/// `CLUSTER_ROWS_PER_GROUP` rows or more on average, one otherwise.
///
/// Why (docs/perf-notes.md, "Grouped GEMM: the forward's dynamic order in clusters of two"):
/// on an H100, two alternating runs at five MoE shapes (128 experts, top-8), the clusters
/// took the forward's time 4–6 % below the plain dynamic kernel's at 65536 tokens and
/// 4096 → 1536 (4096 rows per group), and left it within noise at 2048 → 768; with 256 rows
/// per group (4096 tokens) they were 2–10 % slower, and at 1024 (16384 tokens) between.
fn rows_cluster(clusters: ClusterChoice, m: usize, groups: usize) -> u32 {
    match clusters {
        ClusterChoice::Forced(c) => c,
        ClusterChoice::Auto if m / groups.max(1) >= CLUSTER_ROWS_PER_GROUP => 2,
        ClusterChoice::Auto => 1,
    }
}

/// Mean rows per group (the reduction's K over the groups) from which the reduction split's
/// clusters take the dynamic tile order on their own.
const DYNAMIC_REDUCTION_ROWS_PER_GROUP: usize = 2048;

/// The reduction split's variant (an index of [`REDUCTION_VARIANTS`]) for tiles 256 wide
/// when `wide` (else 128), the clusters and tile order asked for, the call's mean rows per
/// group and its cluster tiles (`None`: past `usize`): clusters of two for 256-column tiles
/// (the only ones built so) unless forced off; their dynamic order (built with clusters only)
/// when forced, or on its own from [`DYNAMIC_REDUCTION_ROWS_PER_GROUP`] rows per group, and
/// never where its counter would not fit ([`counter_fits`]).
///
/// Why clusters (docs/perf-notes.md, "Grouped GEMM: the weight gradient in clusters of
/// two"): on an H100, three alternating runs of each at six MoE shapes, the clusters' weight
/// gradient took 0.8–4 % less time on average at every shape, and its ratio to
/// `F.grouped_mm` went from 0.96–1.05 to 0.99–1.07.
///
/// Why the dynamic order from 2048 rows per group (docs/perf-notes.md, "Grouped GEMM: the
/// weight gradient in the dynamic order"): a tile's work is its group's tokens, and the
/// static order gives every block the same number of tiles whatever their groups, so with
/// uneven routing some blocks run a long tile more than others. On an H100 (128 experts,
/// top-8) the dynamic order took the weight gradient's ratio to `F.grouped_mm` with Zipf-like
/// routing from 0.95 to 1.05–1.09 (65536 tokens, 4096 → 1536) and from 1.01–1.02 to
/// 1.26–1.29 (2048 → 768), and balanced at 65536 tokens from 1.00–1.05 to 1.04–1.05; but with
/// balanced routing and fewer rows per group it lost: 1.02–1.04 → 0.94 (4096 tokens, 4096 →
/// 1536), 1.00–1.01 → 0.94–0.96 (8192 tokens), 1.01–1.02 → 0.99 (16384 tokens).
fn reduction_variant(
    wide: bool,
    clusters: ClusterChoice,
    order: TileOrder,
    (rows_per_group, tiles): (usize, Option<usize>),
    sms: usize,
) -> usize {
    let asked = match order {
        TileOrder::Dynamic => true,
        TileOrder::Static => false,
        TileOrder::Auto => rows_per_group >= DYNAMIC_REDUCTION_ROWS_PER_GROUP,
    };
    let dynamic = asked && tiles.is_some_and(|t| counter_fits(t, sms));
    match (wide, clusters, dynamic) {
        (false, _, _) => 0,
        (true, ClusterChoice::Forced(1), _) => 1,
        (true, _, false) => 2,
        (true, _, true) => 3,
    }
}

impl GroupedKernels {
    pub(crate) fn new(entries: &Arc<Entries>, sms: usize, ordinal: usize) -> Self {
        GroupedKernels {
            entries: entries.clone(),
            sms: sms.max(1),
            clusters: ClusterChoice::from_env(),
            order: TileOrder::from_env(),
            counters: CounterPool::new(ordinal),
        }
    }

    /// The plan for `gg` on `p`, or why the grouped kernels cannot run it. Host arithmetic
    /// only.
    pub(crate) fn plan(
        &self,
        gg: &GroupedGemm,
        p: &GemmPointers,
    ) -> Result<GroupedPlan, Unsupported> {
        let g = gg.whole();
        let rows = gg.split == GroupSplit::Rows
            && g.a.layout == Layout::RowMajor
            && g.c.mode != OutputMode::AccumulateF32;
        let reduction = gg.split == GroupSplit::Reduction
            && g.a.layout == Layout::ColMajor
            && g.b.layout == Layout::RowMajor;
        if !rows && !reduction {
            return Err(Unsupported::GroupedForm);
        }
        let e = match g.a.dtype {
            DType::BF16 => 0,
            DType::F16 => 1,
            dtype => return Err(Unsupported::Element { dtype }),
        };
        // The copy engine reads A and B as the dense Hopper kernels do; the rows split stores
        // C from registers in pairs, which the rule for C (16-byte units) covers too.
        can_implement(&g, p.a as usize, p.b as usize, p.c as usize)?;
        // The rows split's kernel counts tiles in 32 bits (`kernels-gpu/src/hopper/grouped.rs`).
        let (tiles_m, tiles_n) = (g.m.div_ceil(BM as usize), g.n.div_ceil(WIDTHS[0] as usize));
        let most = (tiles_m + g.batch + 1).checked_mul(tiles_n);
        if most.is_none_or(|t| t >= u32::MAX as usize) {
            return Err(Unsupported::ExtentTooLarge);
        }
        let w = usize::from(g.n > WIDTHS[0] as usize);
        if reduction {
            // Cluster tiles of two blocks along M, every group the same tiles.
            let tiles = g.m.div_ceil(2 * BM as usize).checked_mul(g.n.div_ceil(256));
            let tiles = tiles.and_then(|t| t.checked_mul(g.batch));
            let call = (g.k / gg.groups().max(1), tiles);
            let v = reduction_variant(w == 1, self.clusters, self.order, call, self.sms);
            let entry = REDUCTION[e][v].ok_or(Unsupported::NotBuilt)?;
            return Ok(GroupedPlan {
                entry,
                bn: REDUCTION_VARIANTS[v].0,
                cluster: REDUCTION_VARIANTS[v].1,
                dynamic: REDUCTION_VARIANTS[v].2,
            });
        }
        let cluster = rows_cluster(self.clusters, g.m, gg.groups());
        let v = rows_variant(w == 1, cluster, self.order, g.k, most, self.sms);
        let entry = TABLE[e][usize::from(g.b.layout == Layout::ColMajor)][v]
            .ok_or(Unsupported::NotBuilt)?;
        Ok(GroupedPlan {
            entry,
            bn: VARIANTS[v].0,
            cluster: VARIANTS[v].1,
            dynamic: VARIANTS[v].2,
        })
    }

    /// Launches `plan` for `gg` with the group ends at device address `ends`.
    ///
    /// # Safety
    /// 1. `p` points to device buffers of the current context valid for the whole call's
    ///    extents, C overlaps no input, and they outlive the work on `stream`, a stream of
    ///    this context or null.
    /// 2. `ends` is a device address of this context holding `gg.groups()` `i32`s for as long.
    /// 3. `plan` is this planner's plan of `gg` on `p`, and the call is not empty (M, N and
    ///    the groups all non-zero).
    /// 4. `errors` is 0 or the device address of a `GroupErrorRecord` that stays valid for
    ///    as long (the kernel may write it).
    #[allow(clippy::too_many_arguments)]
    pub(crate) unsafe fn launch(
        &self,
        plan: &GroupedPlan,
        gg: &GroupedGemm,
        ends: *const i32,
        errors: u64,
        p: &GemmPointers,
        stream: sys::CUstream,
    ) -> Result<()> {
        let kernel = self.entries.get(plan.entry)?;
        let map_err = |message: String| Error::Launch {
            kernel: kernel.spec().name.to_string(),
            message,
        };
        let g = gg.whole();
        let (a_k, b_k) = (
            g.a.layout == Layout::RowMajor,
            g.b.layout == Layout::ColMajor,
        );
        // A and B are shared by the groups (batch extent 1): the rows split's B has one entry
        // per group.
        let map_a = operand_map(&g.a, a_k, p.a as usize, g.m, g.k, 1, BM).map_err(map_err)?;
        let b_batch = if plan.reduction() { 1 } else { g.batch };
        // In a cluster each block copies 1 / cluster of the B tile.
        let b_box = plan.bn / plan.cluster;
        let map_b =
            operand_map(&g.b, b_k, p.b as usize, g.n, g.k, b_batch, b_box).map_err(map_err)?;
        // C's map, for the stores of the copy engine (boxes of 128 bytes × one consumer
        // warpgroup's rows, as the dense kernels' epilogue writes them): the reduction split
        // stores each group's C as the dense kernels do (one batch entry per group), the rows
        // split the parts of a tile that lie before their group's end (one batch entry).
        // Accumulate mode stores from registers.
        let map_c = match g.c.mode {
            OutputMode::Overwrite(dtype) => {
                let box_cols = (EPILOGUE_PIECE_BYTES / WG_M) / dtype.size() as u32;
                let (batch, stride) = if plan.reduction() {
                    (g.batch, g.c.batch_stride)
                } else {
                    (1, 0)
                };
                encode_raw(
                    dtype,
                    p.c as usize,
                    g.n,
                    g.m,
                    g.c.ldc,
                    batch,
                    stride,
                    [box_cols, WG_M],
                )
                .map_err(map_err)?
            }
            OutputMode::AccumulateF32 => TensorMap { opaque: [0; 16] },
        };
        let gemm = gemm_params(&g, p, BM, plan.bn);
        // Freed on the stream after the launch (at the end of this function).
        let counter = if plan.dynamic {
            // SAFETY: the caller's stream, of the current context.
            Some(unsafe { TileCounter::new(&self.counters, stream) }?)
        } else {
            None
        };
        let params = GroupedHopperParams {
            base: HopperParams {
                map_a,
                map_b,
                map_c,
                gemm,
                // The grouped kernels do not read it (a group's first tile is known only
                // once the group ends are, after the wait).
                l2_prefetch_k_tiles: 0,
            },
            group_ends: ends as u64,
            errors,
            tile_counter: counter.as_ref().map_or(0, TileCounter::address),
        };
        // Persistent: at most one block per SM, whole clusters, and no more clusters than
        // the cluster tiles there can be (rows split: each group adds at most one partial
        // cluster tile row, the rows past the last group one; reduction split: every group
        // has the same tiles).
        let cluster = plan.cluster;
        let most_tiles = if plan.reduction() {
            gemm.tiles_m.div_ceil(u64::from(cluster)) * gemm.tiles_n * gemm.batch
        } else {
            (gemm.tiles_m.div_ceil(u64::from(cluster)) + gemm.batch + 1) * gemm.tiles_n
        };
        let clusters = most_tiles.min((self.sms / cluster as usize).max(1) as u64) as u32;
        let grid = clusters * cluster;
        // SAFETY: `value` is a plain-data union; the attribute sets the member its id names.
        let mut attributes: [sys::CUlaunchAttribute; 1] = unsafe { std::mem::zeroed() };
        attributes[0].id = sys::CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
        attributes[0].value.clusterDim.x = cluster;
        attributes[0].value.clusterDim.y = 1;
        attributes[0].value.clusterDim.z = 1;
        // Entries without clusters launch plainly.
        let attributes = if cluster > 1 {
            &mut attributes[..]
        } else {
            &mut attributes[..0]
        };
        // SAFETY: the plan accepted the call (the maps describe the caller's buffers, valid
        // for the work on `stream`); the kernel reads `ends` and may write `errors` (the
        // caller's contract); the grid is whole clusters of the size the entry is built for;
        // a dynamic plan's counter is zeroed on `stream` before the launch, freed after it,
        // and the plan has K > 0 and few enough tiles.
        unsafe { kernel.launch(grid, &params, stream, attributes) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The reduction split runs in clusters of two unless forced off, and only with tiles 256
    /// wide (the only ones built so); its clusters in the dynamic order when forced or from
    /// 2048 rows per group, never forced static or where the counter would pass 32 bits.
    #[test]
    fn the_reduction_split_takes_clusters_unless_forced_off() {
        let (auto, one, two) = (
            ClusterChoice::Auto,
            ClusterChoice::Forced(1),
            ClusterChoice::Forced(2),
        );
        let (any, dynamic, fixed) = (TileOrder::Auto, TileOrder::Dynamic, TileOrder::Static);
        let (long, short) = ((4096, Some(10_000)), (2047, Some(10_000)));
        assert_eq!(reduction_variant(true, auto, any, long, 132), 3);
        assert_eq!(
            reduction_variant(true, auto, any, short, 132),
            2,
            "short groups"
        );
        assert_eq!(
            reduction_variant(true, two, dynamic, short, 132),
            3,
            "forced"
        );
        assert_eq!(
            reduction_variant(true, two, fixed, long, 132),
            2,
            "forced static"
        );
        assert_eq!(
            reduction_variant(true, one, any, long, 132),
            1,
            "forced off"
        );
        assert_eq!(
            reduction_variant(false, auto, any, long, 132),
            0,
            "128 columns"
        );
        assert_eq!(
            reduction_variant(false, two, dynamic, long, 132),
            0,
            "128 columns"
        );
        let limit = u32::MAX as usize - 2 * 132;
        let near = (4096, Some(limit - 1));
        assert_eq!(reduction_variant(true, auto, dynamic, near, 132), 3);
        let at = (4096, Some(limit));
        assert_eq!(
            reduction_variant(true, auto, dynamic, at, 132),
            2,
            "32 bits"
        );
        let past = (4096, None);
        assert_eq!(
            reduction_variant(true, auto, dynamic, past, 132),
            2,
            "past usize"
        );
    }

    /// The rows split asks for clusters when forced, or from 2048 rows per group on average.
    #[test]
    fn the_rows_split_takes_clusters_for_long_groups() {
        let auto = ClusterChoice::Auto;
        assert_eq!(rows_cluster(auto, 65536 * 8, 128), 2, "4096 rows a group");
        assert_eq!(rows_cluster(auto, 2048 * 128, 128), 2, "2048 rows a group");
        assert_eq!(rows_cluster(auto, 2047 * 128, 128), 1, "just under");
        assert_eq!(rows_cluster(auto, 4096 * 8, 128), 1, "256 rows a group");
        assert_eq!(rows_cluster(ClusterChoice::Forced(1), 65536 * 8, 128), 1);
        assert_eq!(rows_cluster(ClusterChoice::Forced(2), 4096, 128), 2);
    }

    /// The dynamic order by default and when asked, never when forced off, only for 256-column
    /// tiles (with or without clusters), with K > 0 and a counter that cannot pass 32 bits; each
    /// variant's entry is the one built for it.
    #[test]
    fn the_dynamic_tile_order_runs_only_where_it_is_built_and_asked_for() {
        let variant =
            |wide, cluster, order, k, most| rows_variant(wide, cluster, order, k, most, 132);
        let (dynamic, fixed) = (TileOrder::Dynamic, TileOrder::Static);
        assert_eq!(variant(true, 1, dynamic, 4096, Some(10_000)), 3);
        assert_eq!(variant(true, 1, fixed, 4096, Some(10_000)), 1);
        assert_eq!(
            variant(false, 1, dynamic, 4096, Some(10_000)),
            0,
            "128 columns"
        );
        assert_eq!(variant(true, 2, dynamic, 4096, Some(10_000)), 2, "clusters");
        assert_eq!(
            variant(true, 2, fixed, 4096, Some(10_000)),
            1,
            "clusters only in the dynamic order"
        );
        assert_eq!(
            variant(true, 2, dynamic, 0, Some(10_000)),
            1,
            "clusters, no K tile"
        );
        assert_eq!(
            variant(true, 1, dynamic, 0, Some(10_000)),
            1,
            "no K tile to announce"
        );
        let auto = TileOrder::Auto;
        assert_eq!(variant(true, 1, auto, 4096, Some(10_000)), 3);
        assert_eq!(variant(true, 1, auto, 768, Some(10_000)), 3, "short K too");
        assert_eq!(variant(true, 1, auto, 0, Some(10_000)), 1, "no K tile");
        assert_eq!(variant(false, 1, auto, 4096, Some(10_000)), 0);
        let limit = u32::MAX as usize - 2 * 132;
        assert_eq!(variant(true, 1, dynamic, 64, Some(limit - 1)), 3);
        assert_eq!(
            variant(true, 1, dynamic, 64, Some(limit)),
            1,
            "the counter's 32 bits"
        );
        assert_eq!(variant(true, 1, dynamic, 64, None), 1);
        for entries in REDUCTION {
            for (entry, &(bn, cluster, dynamic)) in entries.iter().zip(&REDUCTION_VARIANTS) {
                let name = entry.unwrap().spec().name;
                assert!(name.contains("_k_"), "{name}");
                assert!(name.contains(&format!("_n{bn}")), "{name}");
                assert_eq!(name.contains("_x2"), cluster == 2, "{name}");
                assert_eq!(name.ends_with("_dyn"), dynamic, "{name}");
            }
        }
        for by_layout in TABLE {
            for entries in by_layout {
                for (entry, &(bn, cluster, dynamic)) in entries.iter().zip(&VARIANTS) {
                    let name = entry.unwrap().spec().name;
                    assert!(name.contains(&format!("_n{bn}")), "{name}");
                    assert_eq!(name.contains("_x2"), cluster == 2, "{name}");
                    assert_eq!(name.ends_with("_dyn"), dynamic, "{name}");
                }
            }
        }
    }
}
