//! The TMA → shared memory → wgmma pipeline: the only code of the Hopper path that decides
//! the reduction order (see the module docs of `hopper`).
//!
//! Shared memory holds `stages(BN, BM)` stages, each the (BM, BK) A tile then the (BN, BK)
//! B tile, 128B-swizzled as the copy engine writes them; a stage of a decode tile holds
//! `k_slices(BN, BM)` consecutive K tiles ("slices"): their A tiles, then their B tiles.
//! A K-contiguous operand is one box of (rows, 64 k): row r at byte 128 r. An M- (N-)
//! contiguous operand is boxes of (64 k rows, 64 mn): box i (mn 64i..64i+63) at byte
//! `i · BOX_BYTES`, k row r at 128 r inside it.
//! Stage s has a `full` barrier (one arrival by the producer plus the stage's bytes) and an
//! `empty` barrier (one arrival per consumer warp when its wgmmas have read the stage).

use super::config::{
    a_bytes, b_bytes, k_slices, slice_bytes, stage_bytes, stage_pitch, stages, BARRIER_BYTES, BK,
    BOX_BYTES, EPILOGUE_AREA, EPILOGUE_BUFFERS, EPILOGUE_PIECE_BYTES, MAX_STAGES, MMA_K,
    STAGE_AREA, SWIZZLE_ELEMS, TILE_WORD_BYTES, WG_M,
};
use super::walk::Walk;
use crate::arch::cluster::{mapa_shared_cluster, mbarrier_arrive_cluster};
use crate::arch::mbarrier::{
    fence_mbarrier_init, mbarrier_arrive, mbarrier_arrive_expect_tx, mbarrier_init,
    mbarrier_try_wait_parity,
};
use crate::arch::shared::st_shared_v4_b32;
use crate::arch::sync::{bar_sync_named, warp_uniform};
use crate::arch::tma::{
    cp_async_bulk_prefetch_tensor_3d_l2, cp_async_bulk_tensor_3d,
    cp_async_bulk_tensor_3d_multicast, fence_proxy_async_shared_cta,
};
use crate::arch::wgmma::{wgmma_commit_group, wgmma_fence, wgmma_fence_operands, wgmma_wait_group};
use crate::element::WgmmaElement;
use crate::params::GemmParams;
use crate::schedule::Tile;

/// The stages and barriers of one block, for (BM, BN) tiles.
pub struct Stages<const BN: u32, const BM: u32> {
    /// 1024-byte aligned shared address of stage 0.
    base: u32,
}

impl<const BN: u32, const BM: u32> Stages<BN, BM> {
    pub(super) const COUNT: u32 = stages(BN, BM);
    /// K tiles of BK per stage (`config::k_slices`).
    pub(super) const SLICES: u32 = k_slices(BN, BM);

    #[inline(always)]
    pub fn new(base: u32) -> Self {
        Stages { base }
    }
    #[inline(always)]
    pub(super) fn a(&self, s: u32) -> u32 {
        self.base + s * stage_pitch(BN, BM)
    }
    #[inline(always)]
    pub(super) fn b(&self, s: u32) -> u32 {
        self.a(s) + Self::SLICES * a_bytes(BM)
    }
    /// Slice `j`'s A tile in stage `s`.
    #[inline(always)]
    pub(super) fn a_slice(&self, s: u32, j: u32) -> u32 {
        self.a(s) + j * a_bytes(BM)
    }
    /// Slice `j`'s B tile in stage `s`.
    #[inline(always)]
    pub(super) fn b_slice(&self, s: u32, j: u32) -> u32 {
        self.b(s) + j * b_bytes(BN)
    }
    #[inline(always)]
    pub(super) fn full(&self, s: u32) -> u32 {
        self.base + STAGE_AREA + EPILOGUE_AREA + 8 * s
    }
    #[inline(always)]
    pub(super) fn empty(&self, s: u32) -> u32 {
        self.base + STAGE_AREA + EPILOGUE_AREA + 8 * MAX_STAGES + 8 * s
    }
    /// Stage `s`'s tile word, after the barriers: the grouped kernels' dynamic tile order
    /// writes there which tile the stage's copies (or announcement) belong to
    /// (`super::grouped`).
    #[inline(always)]
    pub(super) fn tile_word(&self, s: u32) -> u32 {
        self.base + STAGE_AREA + EPILOGUE_AREA + BARRIER_BYTES + 4 * s
    }
    /// Stage `s`'s announcement barrier, after the tile words: in the dynamic order with
    /// clusters, the producer of rank 0 stores the next tile's index in its peer's tile
    /// word of the stage and arrives here, in the peer (`super::grouped`).
    #[inline(always)]
    pub(super) fn announce(&self, s: u32) -> u32 {
        self.base + STAGE_AREA + EPILOGUE_AREA + BARRIER_BYTES + TILE_WORD_BYTES + 8 * s
    }

    /// Initialises the announcement barriers (one arrival each). One thread calls it, before
    /// the cluster-wide barrier.
    ///
    /// # Safety
    /// As for [`Self::init`].
    #[inline(always)]
    pub unsafe fn init_announce(&self) {
        for s in 0..Self::COUNT {
            // SAFETY: forwarded contract; nothing else touches the barriers yet.
            unsafe { mbarrier_init(self.announce(s), 1) };
        }
        fence_mbarrier_init();
    }

    /// Shared address of consumer warpgroup `wg`'s epilogue pieces (EPILOGUE_BUFFERS of
    /// EPILOGUE_PIECE_BYTES, 1024-byte aligned).
    #[inline(always)]
    pub fn epilogue(&self, wg: u32) -> u32 {
        self.base + STAGE_AREA + wg * EPILOGUE_BUFFERS * EPILOGUE_PIECE_BYTES
    }

    /// Initialises every barrier for clusters of `cluster` blocks, each stage read by
    /// `readers` consumer warpgroups of each block (all of them, or one for the ping-pong
    /// consumers). One thread calls it, before a block-wide (cluster-wide, with clusters)
    /// barrier.
    ///
    /// # Safety
    /// The barriers lie inside the block's shared memory (`config::SMEM_BYTES`).
    #[inline(always)]
    pub unsafe fn init(&self, cluster: u32, readers: u32) {
        for s in 0..Self::COUNT {
            // SAFETY: forwarded contract; nothing else touches the barriers yet.
            unsafe {
                mbarrier_init(self.full(s), 1);
                // Every reading warp of every block of the cluster releases each stage:
                // the blocks write into each other's stages.
                mbarrier_init(self.empty(s), readers * 4 * cluster);
            }
        }
        fence_mbarrier_init();
    }

    /// Waits for the phase of parity `parity` of barrier `bar`.
    #[inline(always)]
    pub(super) unsafe fn wait(bar: u32, parity: u32) {
        // SAFETY: forwarded contract (an initialised barrier).
        while !unsafe { mbarrier_try_wait_parity(bar, parity) } {}
    }
}

/// K tiles of BK: the producer and the consumers walk the same ones.
#[inline(always)]
pub(super) fn k_tiles(p: &GemmParams) -> u32 {
    p.k.div_ceil(BK as u64) as u32
}

/// The batch coordinate of an operand in its tensor map: 0 when the operand is shared by
/// every batch entry (stride 0; the map's batch extent is then 1).
#[inline(always)]
pub(super) fn batch_coord(stride: u64, batch: u64) -> i32 {
    if stride == 0 {
        0
    } else {
        batch as i32
    }
}

/// The producer: one thread issuing every TMA copy of every tile this block owns, in the
/// same order the consumers read them. With clusters, each block copies its A tile and its
/// `1 / CLUSTER` part of the shared B tile, the latter to every block of the cluster; its
/// `full` barrier expects the whole stage either way. Before it returns it waits until
/// every block's consumers have released every stage, so that no peer still signals or
/// writes this block's shared memory after it exits.
///
/// # Safety
/// One thread of the block; `map_a` and `map_b` are the tensor maps the host built for the
/// operands' layouts (box (64, BM) / (64, BN / CLUSTER) K-contiguous, (64, 64) otherwise);
/// the barriers are initialised (and, with clusters, the cluster synchronised after that).
#[inline(always)]
pub unsafe fn produce<
    const A_K: bool,
    const B_K: bool,
    const BN: u32,
    const BM: u32,
    const CLUSTER: u32,
>(
    p: &GemmParams,
    st: &Stages<BN, BM>,
    map_a: u64,
    map_b: u64,
    walk: &Walk<CLUSTER>,
    rank: u32,
) {
    if Stages::<BN, BM>::SLICES > 1 {
        // SAFETY: forwarded contract.
        unsafe { produce_slices::<A_K, BN, BM, CLUSTER>(p, st, map_a, map_b, walk, rank) };
        return;
    }
    let kt_count = k_tiles(p);
    let mut it = 0u32;
    let (mut tile, step) = walk.range();
    while tile < walk.count() {
        let t: Tile = walk.tile::<BM, BN>(tile);
        let (ba, bb) = (
            batch_coord(p.batch_stride_a, t.batch),
            batch_coord(p.batch_stride_b, t.batch),
        );
        let (m0, n0) = (t.m0 as i32, t.n0 as i32);
        for kt in 0..kt_count {
            let s = it % Stages::<BN, BM>::COUNT;
            let parity = (it / Stages::<BN, BM>::COUNT) & 1;
            let full = st.full(s);
            let k0 = (kt * BK) as i32;
            // SAFETY (all): initialised barriers; stage s lies in shared memory and is free
            // in every block of the cluster once its `empty` phase completed; the maps are
            // valid (forwarded contract).
            unsafe {
                Stages::<BN, BM>::wait(st.empty(s), parity ^ 1);
                mbarrier_arrive_expect_tx(full, stage_bytes(BN, BM));
                if A_K {
                    cp_async_bulk_tensor_3d(st.a(s), map_a, k0, m0, ba, full);
                } else {
                    for i in 0..BM / SWIZZLE_ELEMS {
                        let m = m0 + (i * SWIZZLE_ELEMS) as i32;
                        cp_async_bulk_tensor_3d(st.a(s) + i * BOX_BYTES, map_a, m, k0, ba, full);
                    }
                }
                load_b::<B_K, BN, BM, CLUSTER>(st, s, map_b, [k0, n0, bb], rank);
            }
            it += 1;
        }
        tile += step;
    }
    // SAFETY: forwarded contract (this block's producer, after its last copy).
    unsafe { drain_peers::<BN, BM, CLUSTER>(st, it) };
}

/// [`produce`] for stages of several K slices (the decode tiles, `config::k_slices`): stage
/// by stage, the A then B tile of each slice; a tile's last stage holds the slices left
/// (its `full` barrier expects just their bytes), so no copy reaches wholly past K. With
/// clusters (along N, `super::walk`) each block copies its `1 / CLUSTER` of each A tile's
/// rows to every block of the cluster, and its own B tile.
///
/// # Safety
/// As for [`produce`]; B is K-contiguous, and with clusters A too, in boxes of
/// (64, BM / CLUSTER) (the decode widths are built only so: `super::gemm` checks).
#[inline(always)]
unsafe fn produce_slices<const A_K: bool, const BN: u32, const BM: u32, const CLUSTER: u32>(
    p: &GemmParams,
    st: &Stages<BN, BM>,
    map_a: u64,
    map_b: u64,
    walk: &Walk<CLUSTER>,
    rank: u32,
) {
    // This block's rows of each shared A tile.
    let a_part = BM / CLUSTER;
    let all: u16 = ((1u32 << CLUSTER) - 1) as u16;
    let slices = Stages::<BN, BM>::SLICES;
    let kt_count = k_tiles(p);
    let mut it = 0u32;
    let (mut tile, step) = walk.range();
    while tile < walk.count() {
        let t: Tile = walk.tile::<BM, BN>(tile);
        let (ba, bb) = (
            batch_coord(p.batch_stride_a, t.batch),
            batch_coord(p.batch_stride_b, t.batch),
        );
        let (m0, n0) = (t.m0 as i32, t.n0 as i32);
        let mut kt = 0;
        while kt < kt_count {
            let here = if kt_count - kt < slices {
                kt_count - kt
            } else {
                slices
            };
            let s = it % Stages::<BN, BM>::COUNT;
            let parity = (it / Stages::<BN, BM>::COUNT) & 1;
            let full = st.full(s);
            // SAFETY (all): initialised barriers; stage s is free once its `empty` phase
            // completed; every slice lies inside the stage; the maps are valid (forwarded
            // contract).
            unsafe {
                Stages::<BN, BM>::wait(st.empty(s), parity ^ 1);
                mbarrier_arrive_expect_tx(full, here * slice_bytes(BN, BM));
                for j in 0..here {
                    let k0 = ((kt + j) * BK) as i32;
                    if CLUSTER > 1 {
                        // Rows `r0 ..` of the tile: whole 1024-byte swizzle atoms (8 rows
                        // of 128 bytes), so they land where a block's own copy puts them.
                        let r0 = rank * a_part;
                        let dst = st.a_slice(s, j) + r0 * 128;
                        let at = [k0, m0 + r0 as i32, ba];
                        cp_async_bulk_tensor_3d_multicast(dst, map_a, at, full, all);
                    } else if A_K {
                        cp_async_bulk_tensor_3d(st.a_slice(s, j), map_a, k0, m0, ba, full);
                    } else {
                        for i in 0..BM / SWIZZLE_ELEMS {
                            let m = m0 + (i * SWIZZLE_ELEMS) as i32;
                            let dst = st.a_slice(s, j) + i * BOX_BYTES;
                            cp_async_bulk_tensor_3d(dst, map_a, m, k0, ba, full);
                        }
                    }
                    cp_async_bulk_tensor_3d(st.b_slice(s, j), map_b, k0, n0, bb, full);
                }
            }
            kt += here;
            it += 1;
        }
        tile += step;
    }
    // SAFETY: forwarded contract (this block's producer, after its last copy).
    unsafe { drain_peers::<BN, BM, CLUSTER>(st, it) };
}

/// Copies stage `s`'s B tile (columns `n0 ..`, K tile `k0`, batch entry `bb` of `map_b`) into
/// this block's stage, signalling its `full` barrier; with clusters, this block's
/// `1 / CLUSTER` part of it (rows when K-contiguous, 64-wide boxes otherwise) into the stage
/// of every block of the cluster.
///
/// # Safety
/// The producer thread, after waiting for stage `s` to be free in every block of the cluster
/// and announcing its bytes on its `full` barrier; `map_b` as for [`produce`].
#[inline(always)]
pub(super) unsafe fn load_b<const B_K: bool, const BN: u32, const BM: u32, const CLUSTER: u32>(
    st: &Stages<BN, BM>,
    s: u32,
    map_b: u64,
    [k0, n0, bb]: [i32; 3],
    rank: u32,
) {
    let full = st.full(s);
    // This block's part of the B tile: rows (K-contiguous) or 64-wide boxes (N-contiguous).
    let b_part = BN / CLUSTER;
    let all: u16 = ((1u32 << CLUSTER) - 1) as u16;
    // SAFETY (all): forwarded contract.
    unsafe {
        if CLUSTER == 1 {
            if B_K {
                cp_async_bulk_tensor_3d(st.b(s), map_b, k0, n0, bb, full);
            } else {
                for i in 0..BN / SWIZZLE_ELEMS {
                    let n = n0 + (i * SWIZZLE_ELEMS) as i32;
                    cp_async_bulk_tensor_3d(st.b(s) + i * BOX_BYTES, map_b, n, k0, bb, full);
                }
            }
        } else if B_K {
            let r0 = rank * b_part;
            let dst = st.b(s) + r0 * 128;
            cp_async_bulk_tensor_3d_multicast(dst, map_b, [k0, n0 + r0 as i32, bb], full, all);
        } else {
            // A constant trip count: the producer lives on 40 registers.
            for j in 0..b_part / SWIZZLE_ELEMS {
                let i = rank * (b_part / SWIZZLE_ELEMS) + j;
                let n = n0 + (i * SWIZZLE_ELEMS) as i32;
                let dst = st.b(s) + i * BOX_BYTES;
                cp_async_bulk_tensor_3d_multicast(dst, map_b, [n, k0, bb], full, all);
            }
        }
    }
}

/// Asks L2 for the first `k_tiles_wanted` K tiles of this block's part of its first tile's
/// B (the boxes [`load_b`] copies later), in calls of one tile row, so that while the block
/// waits for the previous kernel on the stream its weight is already on the way from DRAM.
/// At decode a call's blocks spent 2.1–3.6 µs from entry to their first stage
/// (docs/perf-notes.md, "Decode: the operands swapped"), a quarter of the call; a block
/// launched early by programmatic dependent launch can spend that during the previous
/// kernel's last blocks instead.
///
/// A hint only: the copies read B again after `griddepcontrol.wait`, through L2, which holds
/// whatever the previous kernel wrote, so the values read do not depend on it.
///
/// # Safety
/// `map_b` is the generic address of B's tensor map (as for [`produce`]).
#[inline(always)]
pub(super) unsafe fn prefetch_b_l2<
    const B_K: bool,
    const BN: u32,
    const BM: u32,
    const CLUSTER: u32,
>(
    p: &GemmParams,
    map_b: u64,
    walk: &Walk<CLUSTER>,
    rank: u32,
    k_tiles_wanted: u32,
) {
    if k_tiles_wanted == 0 {
        return;
    }
    // Calls of several tile rows are not short enough for their setup to matter.
    let Some(t) = walk.first_of_one_row::<BM, BN>() else {
        return;
    };
    let bb = batch_coord(p.batch_stride_b, t.batch);
    let n0 = t.n0 as i32;
    // Along N each block copies its whole B tile (its own columns, `t.n0` already past
    // its rank's); along M its part of the shared one.
    let (b_part, rank) = if walk.along_n() {
        (BN, 0)
    } else {
        (BN / CLUSTER, rank)
    };
    let count = k_tiles_wanted.min(k_tiles(p));
    let mut kt = 0u32;
    while kt < count {
        // One copy request per trip, not unrolled: LLVM and ptxas together unrolled this
        // loop into some 200 instructions in every entry point, for a loop the block runs
        // once (docs/perf-notes.md). The move hides the count from LLVM's unroller, the
        // pragma stops ptxas's. SAFETY: a directive and a register move.
        unsafe {
            core::arch::asm!(
                ".pragma \"nounroll\";",
                "mov.u32 {k}, {k};",
                k = inout(reg32) kt,
                options(nomem, nostack, preserves_flags)
            )
        };
        let k0 = (kt * BK) as i32;
        // SAFETY (all): forwarded contract; a prefetch of a box outside the tensor fetches
        // nothing.
        unsafe {
            if B_K {
                let n = n0 + (rank * b_part) as i32;
                cp_async_bulk_prefetch_tensor_3d_l2(map_b, [k0, n, bb]);
            } else {
                for j in 0..b_part / SWIZZLE_ELEMS {
                    let i = rank * (b_part / SWIZZLE_ELEMS) + j;
                    let n = n0 + (i * SWIZZLE_ELEMS) as i32;
                    cp_async_bulk_prefetch_tensor_3d_l2(map_b, [n, k0, bb]);
                }
            }
        }
        kt += 1;
    }
}

/// With clusters, waits until every block's consumers have released every stage, so that no
/// peer still signals or writes this block's shared memory after it exits; `it` counts the
/// stages this producer filled. Nothing to wait for without clusters.
///
/// # Safety
/// The producer thread, after its last copy; initialised barriers.
#[inline(always)]
pub(super) unsafe fn drain_peers<const BN: u32, const BM: u32, const CLUSTER: u32>(
    st: &Stages<BN, BM>,
    mut it: u32,
) {
    if CLUSTER > 1 {
        for _ in 0..Stages::<BN, BM>::COUNT {
            let s = it % Stages::<BN, BM>::COUNT;
            let parity = (it / Stages::<BN, BM>::COUNT) & 1;
            // SAFETY: initialised barrier.
            unsafe { Stages::<BN, BM>::wait(st.empty(s), parity ^ 1) };
            it += 1;
        }
    }
}

/// Releases stage `s` after this warp's wgmmas have read it: one arrival on the stage's
/// `empty` barrier in every block of the cluster (they all write into this block's stage).
///
/// # Safety
/// Lane 0 of each consumer warp calls it once per stage use; every block of the cluster is
/// still running (the producers wait for these arrivals before they exit).
#[inline(always)]
pub(super) unsafe fn release_stage<const BN: u32, const BM: u32, const CLUSTER: u32>(
    st: &Stages<BN, BM>,
    s: u32,
) {
    if CLUSTER == 1 {
        // SAFETY: initialised barrier.
        unsafe { mbarrier_arrive(st.empty(s)) };
    } else {
        for rank in 0..CLUSTER {
            // SAFETY: forwarded contract.
            unsafe { mbarrier_arrive_cluster(mapa_shared_cluster(st.empty(s), rank)) };
        }
    }
}

/// A shared-memory matrix descriptor for a 128B-swizzled operand at `addr`: leading byte
/// offset `lbo` (between 64-wide MN groups of an MN-major operand; unused by K-major ones),
/// stride byte offset `sbo` (between groups of 8 rows: 1024 bytes).
#[inline(always)]
fn descriptor(addr: u32, lbo: u32, sbo: u32) -> u64 {
    ((addr as u64 & 0x3FFFF) >> 4)
        | (((lbo >> 4) as u64) << 16)
        | (((sbo >> 4) as u64) << 32)
        | (1u64 << 62)
}

/// The descriptor of the (rows from `mn0`, k16 step `step`) piece of a staged operand tile
/// at `tile`. K-contiguous: rows of 128 bytes, a step is 32 bytes along the row (the swizzle
/// is a function of the address, so the hardware finds the step's elements). MN-contiguous:
/// a step is 16 k rows of 128 bytes further on, and `mn0` a multiple of 64 picks a box.
#[inline(always)]
fn operand_descriptor<const K_CONTIGUOUS: bool>(tile: u32, mn0: u32, step: u32) -> u64 {
    if K_CONTIGUOUS {
        descriptor(tile + mn0 * 128 + step_offset::<true>(0, step), 16, 1024)
    } else {
        let addr = tile + (mn0 / SWIZZLE_ELEMS) * BOX_BYTES + step_offset::<false>(0, step);
        descriptor(addr, BOX_BYTES, 1024)
    }
}

/// Bytes from a staged operand tile's first k16 step to step `step` of the slice `slice`
/// bytes further on (the distances [`operand_descriptor`] adds).
#[inline(always)]
const fn step_offset<const K_CONTIGUOUS: bool>(slice: u32, step: u32) -> u32 {
    if K_CONTIGUOUS {
        slice + step * MMA_K * 2
    } else {
        slice + step * MMA_K * 128
    }
}

/// One k16 step of one consumer warpgroup: `acc += A[64 rows, 16 k] · B[16 k, BN]`.
#[inline(always)]
unsafe fn mma_step<E: WgmmaElement, const A_K: bool, const B_K: bool, const BN: u32>(
    acc: &mut [f32; 128],
    a: u64,
    b: u64,
) {
    // SAFETY (all arms): forwarded contract. The transpose immediates follow the layouts.
    unsafe {
        match (A_K, B_K) {
            (true, true) => E::wgmma::<0, 0, BN>(acc, a, b),
            (true, false) => E::wgmma::<0, 1, BN>(acc, a, b),
            (false, true) => E::wgmma::<1, 0, BN>(acc, a, b),
            (false, false) => E::wgmma::<1, 1, BN>(acc, a, b),
        }
    }
}

/// One k16 step of a ping-pong consumer on half `D0 / 64` of its 128 × 128 tile:
/// `acc[D0..D0 + 64] += A[64 rows, 16 k] · B[16 k, 128]`.
#[inline(always)]
unsafe fn mma_half_step<E: WgmmaElement, const A_K: bool, const B_K: bool, const D0: usize>(
    acc: &mut [f32; 128],
    a: u64,
    b: u64,
) {
    // SAFETY (all arms): forwarded contract. The transpose immediates follow the layouts.
    unsafe {
        match (A_K, B_K) {
            (true, true) => E::wgmma_n128_half::<0, 0, D0>(acc, a, b),
            (true, false) => E::wgmma_n128_half::<0, 1, D0>(acc, a, b),
            (false, true) => E::wgmma_n128_half::<1, 0, D0>(acc, a, b),
            (false, false) => E::wgmma_n128_half::<1, 1, D0>(acc, a, b),
        }
    }
}

/// Zeros k rows `from..to` of stage `s` that consumer warpgroup `wg` reads: its 64-row box of
/// the (M-contiguous) A tile and every box of the (N-contiguous) B tile, each k row one whole
/// 128-byte row of a box (so the swizzle, which permutes 16-byte chunks inside a row, does
/// not matter). Both warpgroups write the same zeros into B. Then makes the writes visible to
/// the tensor cores (the async proxy) and waits for the warpgroup's threads.
///
/// # Safety
/// Every thread of consumer warpgroup `wg` calls it together, after stage `s` landed and
/// before its wgmmas; `from ≤ to ≤ BK`; named barrier `1 + wg` is the warpgroup's.
#[inline(always)]
unsafe fn zero_k_rows<const BN: u32, const BM: u32>(
    st: &Stages<BN, BM>,
    s: u32,
    wg: u32,
    tid: u32,
    from: u32,
    to: u32,
) {
    const CHUNKS_PER_ROW: u32 = 128 / 16;
    let chunks = (to - from) * CHUNKS_PER_ROW;
    let boxes = 1 + BN / SWIZZLE_ELEMS;
    let mut c = tid;
    while c < chunks * boxes {
        // SAFETY: the loop runs only when chunks > 0 (no panic path in the PTX).
        unsafe { core::hint::assert_unchecked(chunks != 0) };
        let (bx, within) = (c / chunks, c % chunks);
        let base = if bx == 0 {
            st.a(s) + wg * BOX_BYTES
        } else {
            st.b(s) + (bx - 1) * BOX_BYTES
        };
        let at = base + (from + within / CHUNKS_PER_ROW) * 128 + (within % CHUNKS_PER_ROW) * 16;
        // SAFETY: inside stage s (a row below BK of a box of the stage).
        unsafe { st_shared_v4_b32(at, [0; 4]) };
        c += 128;
    }
    fence_proxy_async_shared_cta();
    bar_sync_named::<128>(1 + wg);
}

/// One stage's part of the chain for one consumer warpgroup: waits for stage `s` to land,
/// issues its first `STEPS` k16 steps as one wgmma group (ascending k), and once the
/// previous group has completed releases the previous stage (`release`, when there is one).
/// `STEPS` is a constant so that a whole stage's wgmmas form one straight run: with a
/// run-time count the compiler fences each one separately. Without `ACTIVE` only the
/// barrier protocol runs. With `PINGPONG` the warpgroup owns the whole (128, 128) tile: each
/// k16 step is two wgmmas, rows 0–63 into `acc[0..64]` and rows 64–127 into `acc[64..128]`,
/// so each accumulator still takes its steps in ascending k, one wgmma each (a short tile
/// owned whole is one wgmma block, as without).
///
/// # Safety
/// Every thread of consumer warpgroup `wg` calls it together; `parity` is stage `s`'s
/// current phase.
#[inline(always)]
unsafe fn stage_steps<
    E: WgmmaElement,
    const A_K: bool,
    const B_K: bool,
    const BN: u32,
    const BM: u32,
    const STEPS: u32,
    const ACTIVE: bool,
    const CLUSTER: u32,
    const PINGPONG: bool,
    const ZERO: bool,
>(
    st: &Stages<BN, BM>,
    acc: &mut [f32; 128],
    wg: u32,
    tid: u32,
    s: u32,
    parity: u32,
    release: Option<u32>,
    zero_from: u32,
) {
    // SAFETY: initialised barrier.
    unsafe { Stages::<BN, BM>::wait(st.full(s), parity) };
    if ZERO && ACTIVE {
        // SAFETY: stage s has landed; forwarded contract.
        unsafe { zero_k_rows::<BN, BM>(st, s, wg, tid, zero_from, STEPS * MMA_K) };
    }
    if ACTIVE {
        wgmma_fence_operands(acc);
        wgmma_fence();
        for step in 0..STEPS {
            let b = operand_descriptor::<B_K>(st.b(s), 0, step);
            // The one operation of the chain: k ascends with the stage, then the step (with
            // PINGPONG, rows 0–63 then 64–127, each into its own accumulators).
            if PINGPONG && BM == 2 * WG_M {
                let top = operand_descriptor::<A_K>(st.a(s), 0, step);
                let bottom = operand_descriptor::<A_K>(st.a(s), WG_M, step);
                // SAFETY: stage s has landed (full barrier) and is not overwritten before
                // this warpgroup's arrival on its empty barrier, after the group completes.
                unsafe {
                    mma_half_step::<E, A_K, B_K, 0>(acc, top, b);
                    mma_half_step::<E, A_K, B_K, 64>(acc, bottom, b);
                }
            } else {
                // Tiles below WG_M rows: the wgmma reads on into the stage's B tile for the
                // rows past BM, which are never stored (`config::BM_CHOICES`).
                let a = operand_descriptor::<A_K>(st.a(s), wg * WG_M, step);
                // SAFETY: as above.
                unsafe { mma_step::<E, A_K, B_K, BN>(acc, a, b) };
            }
        }
        wgmma_commit_group();
        wgmma_wait_group::<1>();
        wgmma_fence_operands(acc);
    }
    // The previous stage's group has completed: its shared memory may be refilled.
    if let Some(prev) = release {
        if tid % 32 == 0 {
            // SAFETY: once per stage use, by lane 0 (forwarded contract).
            unsafe { release_stage::<BN, BM, CLUSTER>(st, prev) };
        }
    }
}

/// One consumer warpgroup's accumulators for tile `t` over the whole of K: ascending K
/// tiles, ascending k16 steps inside each, all into the same registers. The whole K tiles
/// come first, each four steps; a last partial K tile issues only the steps that reach
/// into K (the contract pads K only to a multiple of MMA_K; the copy engine's zero fill
/// covers the rest of those steps). `it` counts the stages this block consumed so far
/// (shared with the producer's count). A warpgroup whose rows all lie past M (`ACTIVE`
/// false: small M) only keeps the barrier protocol and issues no wgmma: its accumulators
/// are never stored. `ACTIVE` is a constant, not a run-time branch around the wgmmas: with
/// the branch, ptxas serializes every wgmma (info C7515). With `PINGPONG` the warpgroup
/// computes all 128 rows of the (128, 128) tile (`wg` unused; see [`stage_steps`]).
/// `on_issued` runs once every wgmma of the tile is issued, before the last ones complete
/// (the ping-pong consumers hand the tensor cores over there).
///
/// # Safety
/// Every thread of consumer warpgroup `wg` calls it together, with the same `it`.
#[inline(always)]
pub unsafe fn consume<
    E: WgmmaElement,
    const A_K: bool,
    const B_K: bool,
    const BN: u32,
    const BM: u32,
    const ACTIVE: bool,
    const CLUSTER: u32,
    const PINGPONG: bool,
>(
    p: &GemmParams,
    st: &Stages<BN, BM>,
    wg: u32,
    tid: u32,
    it: &mut u32,
    on_issued: impl FnOnce(),
) -> [f32; 128] {
    // SAFETY: forwarded contract.
    unsafe {
        consume_k::<E, A_K, B_K, BN, BM, ACTIVE, CLUSTER, PINGPONG, false>(
            p.k, st, wg, tid, it, on_issued,
        )
    }
}

/// [`consume`] over `k` elements of K. With `ZERO_TAIL` (M- and N-contiguous operands
/// only), the rows of a last partial K tile at and past `k` are made zeros in the stage
/// before its steps read them: the grouped weight gradient's K range ends inside the
/// operands, where the copy engine copies the next group's rows instead of its zero fill
/// (`super::grouped`). The chain is then exactly the dense one over `k`.
///
/// # Safety
/// As for [`consume`].
#[inline(always)]
pub unsafe fn consume_k<
    E: WgmmaElement,
    const A_K: bool,
    const B_K: bool,
    const BN: u32,
    const BM: u32,
    const ACTIVE: bool,
    const CLUSTER: u32,
    const PINGPONG: bool,
    const ZERO_TAIL: bool,
>(
    k: u64,
    st: &Stages<BN, BM>,
    wg: u32,
    tid: u32,
    it: &mut u32,
    on_issued: impl FnOnce(),
) -> [f32; 128] {
    const {
        assert!(
            !ZERO_TAIL || (!A_K && !B_K && !PINGPONG),
            "a zeroed tail is whole 128-byte rows of M- and N-contiguous boxes"
        )
    };
    const {
        assert!(
            !PINGPONG || (BN == 128 && BM == 2 * WG_M) || BM < WG_M,
            "a ping-pong tile is two m64n128 accumulators, or one short block"
        )
    };
    if ACTIVE && BM <= 16 && Stages::<BN, BM>::SLICES > 1 && CLUSTER == 1 {
        // The decode tiles of 8 and 16 rows (`config::DECODE_BN` widths, K-contiguous
        // operands, stages of several K slices) take their steps by mma.sync
        // (`super::decode`). Not the taller ones: there each warp has more blocks to step
        // than a wgmma's latency hides (64 × 4096 × 4096: 12.7 → 13.5 µs); nor 64 columns,
        // which gained nothing (1 × 4096 × 14336: 34.1 → 34.9 µs).
        // SAFETY: forwarded contract; one consumer warpgroup (`wg` 0), whose second
        // epilogue area is unused.
        let acc = unsafe { super::decode::consume::<E, BN, BM, CLUSTER>(k, st, tid, it) };
        on_issued();
        return acc;
    }
    if Stages::<BN, BM>::SLICES > 1 {
        // SAFETY: forwarded contract (the decode tiles: neither a zeroed tail nor ping-pong).
        return unsafe {
            consume_slices::<E, A_K, B_K, BN, BM, ACTIVE, CLUSTER>(k, st, wg, tid, it, on_issued)
        };
    }
    // Every accumulator starts at +0.0 (all bits zero). Not `[0.0; 128]`: rustc lowers that
    // repeat to a store loop with a run-time index, which keeps the array in local memory.
    // SAFETY: all-zero bits are +0.0 for every element.
    let mut acc: [f32; 128] = unsafe { core::mem::zeroed() };
    const FULL: u32 = BK / MMA_K;
    let whole = (k / BK as u64) as u32;
    let kr = (k % BK as u64) as u32;
    let tail_steps = kr.div_ceil(MMA_K);
    let mut prev: Option<u32> = None;
    for _ in 0..whole {
        let s = *it % Stages::<BN, BM>::COUNT;
        let parity = (*it / Stages::<BN, BM>::COUNT) & 1;
        // SAFETY: forwarded contract.
        unsafe {
            stage_steps::<E, A_K, B_K, BN, BM, FULL, ACTIVE, CLUSTER, PINGPONG, false>(
                st, &mut acc, wg, tid, s, parity, prev, 0,
            )
        };
        prev = Some(s);
        *it += 1;
    }
    if tail_steps > 0 {
        let s = *it % Stages::<BN, BM>::COUNT;
        let parity = (*it / Stages::<BN, BM>::COUNT) & 1;
        // SAFETY (all arms): forwarded contract.
        unsafe {
            match tail_steps {
                1 => stage_steps::<E, A_K, B_K, BN, BM, 1, ACTIVE, CLUSTER, PINGPONG, ZERO_TAIL>(
                    st, &mut acc, wg, tid, s, parity, prev, kr,
                ),
                2 => stage_steps::<E, A_K, B_K, BN, BM, 2, ACTIVE, CLUSTER, PINGPONG, ZERO_TAIL>(
                    st, &mut acc, wg, tid, s, parity, prev, kr,
                ),
                3 => stage_steps::<E, A_K, B_K, BN, BM, 3, ACTIVE, CLUSTER, PINGPONG, ZERO_TAIL>(
                    st, &mut acc, wg, tid, s, parity, prev, kr,
                ),
                _ => {
                    stage_steps::<E, A_K, B_K, BN, BM, FULL, ACTIVE, CLUSTER, PINGPONG, ZERO_TAIL>(
                        st, &mut acc, wg, tid, s, parity, prev, kr,
                    )
                }
            }
        }
        prev = Some(s);
        *it += 1;
    }
    on_issued();
    wgmma_wait_group::<0>();
    wgmma_fence_operands(&mut acc);
    if let Some(last) = prev {
        if tid % 32 == 0 {
            // SAFETY: once per stage use, by lane 0 (forwarded contract).
            unsafe { release_stage::<BN, BM, CLUSTER>(st, last) };
        }
    }
    acc
}

/// One K slice's part of the chain in a stage of several slices (the decode tiles; a stage
/// of whole slices goes to [`stage_group`] instead, so this takes a tile's last stage): issues
/// slice `j`'s first `STEPS` k16 steps as one wgmma group (ascending k), and once the
/// previous group has completed releases stage `release`, when given (the previous stage,
/// after the first group of this one). The stage has landed ([`consume_slices`] waits once
/// per stage). As [`stage_steps`] otherwise.
///
/// # Safety
/// Every thread of consumer warpgroup `wg` calls it together, after stage `s` landed.
#[inline(always)]
unsafe fn slice_steps<
    E: WgmmaElement,
    const A_K: bool,
    const B_K: bool,
    const BN: u32,
    const BM: u32,
    const STEPS: u32,
    const ACTIVE: bool,
    const CLUSTER: u32,
>(
    st: &Stages<BN, BM>,
    acc: &mut [f32; 128],
    wg: u32,
    tid: u32,
    s: u32,
    j: u32,
    release: Option<u32>,
) {
    if ACTIVE {
        wgmma_fence_operands(acc);
        wgmma_fence();
        for step in 0..STEPS {
            let b = operand_descriptor::<B_K>(st.b_slice(s, j), 0, step);
            // Rows past BM read on into the stage's later tiles (`config::stage_pitch`).
            let a = operand_descriptor::<A_K>(st.a_slice(s, j), wg * WG_M, step);
            // SAFETY: stage s has landed and is not overwritten before this warpgroup's
            // arrival on its empty barrier, after the group completes.
            unsafe { mma_step::<E, A_K, B_K, BN>(acc, a, b) };
        }
        wgmma_commit_group();
        wgmma_wait_group::<1>();
        wgmma_fence_operands(acc);
    }
    if let Some(prev) = release {
        if tid % 32 == 0 {
            // SAFETY: once per stage use, by lane 0 (forwarded contract).
            unsafe { release_stage::<BN, BM, CLUSTER>(st, prev) };
        }
    }
}

/// A whole stage of whole K slices as one wgmma group: every slice's four k16 steps in
/// ascending k (the chain of [`slice_steps`], step for step), one commit, then once the
/// previous group (the previous stage's) has completed, the release of that stage.
///
/// Why one group a stage: each group costs the consumer a fence, a commit and a wait, and
/// at decode the group's steps are short (64 × 32 × 16 a step), so with a group per slice
/// the consumer's issue of the next group, not the tensor cores, set the pace.
///
/// # Safety
/// Every thread of consumer warpgroup `wg` calls it together, after stage `s` landed.
#[inline(always)]
unsafe fn stage_group<
    E: WgmmaElement,
    const A_K: bool,
    const B_K: bool,
    const BN: u32,
    const BM: u32,
    const ACTIVE: bool,
    const CLUSTER: u32,
>(
    st: &Stages<BN, BM>,
    acc: &mut [f32; 128],
    wg: u32,
    tid: u32,
    s: u32,
    release: Option<u32>,
) {
    if ACTIVE {
        wgmma_fence_operands(acc);
        wgmma_fence();
        // Each step's descriptor is the stage's first one plus the step's distance in
        // 16-byte units (the address field's unit; shared addresses stay below 2^18, so the
        // sum never carries out of the field): constants, so the loop is adds on the
        // descriptors, not a descriptor built per step.
        let b0 = operand_descriptor::<B_K>(st.b_slice(s, 0), 0, 0);
        // Rows past BM read on into the stage's later tiles (`config::stage_pitch`).
        let a0 = operand_descriptor::<A_K>(st.a_slice(s, 0), wg * WG_M, 0);
        for j in 0..Stages::<BN, BM>::SLICES {
            for step in 0..BK / MMA_K {
                let b = b0 + u64::from(step_offset::<B_K>(j * b_bytes(BN), step) >> 4);
                let a = a0 + u64::from(step_offset::<A_K>(j * a_bytes(BM), step) >> 4);
                // SAFETY: stage s has landed and is not overwritten before this warpgroup's
                // arrival on its empty barrier, after the group completes.
                unsafe { mma_step::<E, A_K, B_K, BN>(acc, a, b) };
            }
        }
        wgmma_commit_group();
        wgmma_wait_group::<1>();
        wgmma_fence_operands(acc);
    }
    if let Some(prev) = release {
        if tid % 32 == 0 {
            // SAFETY: once per stage use, by lane 0 (forwarded contract).
            unsafe { release_stage::<BN, BM, CLUSTER>(st, prev) };
        }
    }
}

/// [`consume_k`] for stages of several K slices (`config::k_slices`): the same chain — the
/// whole K tiles in ascending order, four k16 steps each, then a last partial one's steps
/// that reach into K — with one wait per stage instead of one per K tile, and a stage of
/// whole slices as one wgmma group ([`stage_group`]). A tile's last stage holds only the
/// slices left ([`produce_slices`]), taken slice by slice ([`slice_steps`]).
///
/// # Safety
/// As for [`consume`].
#[inline(always)]
unsafe fn consume_slices<
    E: WgmmaElement,
    const A_K: bool,
    const B_K: bool,
    const BN: u32,
    const BM: u32,
    const ACTIVE: bool,
    const CLUSTER: u32,
>(
    k: u64,
    st: &Stages<BN, BM>,
    wg: u32,
    tid: u32,
    it: &mut u32,
    on_issued: impl FnOnce(),
) -> [f32; 128] {
    // SAFETY: all-zero bits are +0.0 for every element (see `consume_k`).
    let mut acc: [f32; 128] = unsafe { core::mem::zeroed() };
    const FULL: u32 = BK / MMA_K;
    let slices = Stages::<BN, BM>::SLICES;
    let whole = (k / BK as u64) as u32;
    let kr = (k % BK as u64) as u32;
    let tail_steps = kr.div_ceil(MMA_K);
    let total = whole + (tail_steps > 0) as u32;
    let mut prev: Option<u32> = None;
    let mut kt = 0;
    while kt < total {
        // Warp-uniform for ptxas (see `warp_uniform`): the stage's descriptors are then formed
        // in uniform registers; shuffled here, before the wait, its latency hides there.
        let s = warp_uniform(*it % Stages::<BN, BM>::COUNT);
        let parity = (*it / Stages::<BN, BM>::COUNT) & 1;
        // SAFETY: initialised barrier.
        unsafe { Stages::<BN, BM>::wait(st.full(s), parity) };
        let here = if total - kt < slices {
            total - kt
        } else {
            slices
        };
        if here == slices && kt + slices <= whole {
            // SAFETY: stage s has landed; forwarded contract.
            unsafe {
                stage_group::<E, A_K, B_K, BN, BM, ACTIVE, CLUSTER>(st, &mut acc, wg, tid, s, prev)
            };
            prev = Some(s);
            kt += here;
            *it += 1;
            continue;
        }
        for j in 0..here {
            let release = if j == 0 { prev } else { None };
            // SAFETY (all arms): stage s has landed; forwarded contract.
            unsafe {
                if kt + j < whole {
                    slice_steps::<E, A_K, B_K, BN, BM, FULL, ACTIVE, CLUSTER>(
                        st, &mut acc, wg, tid, s, j, release,
                    )
                } else {
                    match tail_steps {
                        1 => slice_steps::<E, A_K, B_K, BN, BM, 1, ACTIVE, CLUSTER>(
                            st, &mut acc, wg, tid, s, j, release,
                        ),
                        2 => slice_steps::<E, A_K, B_K, BN, BM, 2, ACTIVE, CLUSTER>(
                            st, &mut acc, wg, tid, s, j, release,
                        ),
                        3 => slice_steps::<E, A_K, B_K, BN, BM, 3, ACTIVE, CLUSTER>(
                            st, &mut acc, wg, tid, s, j, release,
                        ),
                        // A partial K tile of 49 to 63 elements: four steps.
                        _ => slice_steps::<E, A_K, B_K, BN, BM, FULL, ACTIVE, CLUSTER>(
                            st, &mut acc, wg, tid, s, j, release,
                        ),
                    }
                }
            }
        }
        prev = Some(s);
        kt += here;
        *it += 1;
    }
    on_issued();
    wgmma_wait_group::<0>();
    wgmma_fence_operands(&mut acc);
    if let Some(last) = prev {
        if tid % 32 == 0 {
            // SAFETY: once per stage use, by lane 0 (forwarded contract).
            unsafe { release_stage::<BN, BM, CLUSTER>(st, last) };
        }
    }
    acc
}
