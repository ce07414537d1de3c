//! The grouped form of the Hopper kernel (Mixture-of-Experts; torch's 2-D × 3-D
//! `grouped_mm`): the rows of A (the tokens) are split into groups by cumulative ends that
//! the kernel reads from device memory, and group g's rows are multiplied by batch entry g
//! of B. The host never reads the ends, so a call does not wait for the work that wrote
//! them and can be captured in a CUDA graph.
//!
//! **The bits are the dense kernel's.** Each tile runs the same [`mainloop::consume`] as
//! [`super::gemm`], so each output element is the same chain over K; a tile of a group
//! starts at a row of that group and its A box may reach past the group's end into the next
//! group's rows (or past the last row, zero-filled). Those rows only feed accumulator rows
//! that are never stored (an MMA's output row depends on its own row of A alone), so a
//! row's bits are those of the dense call of its group: they depend neither on the other
//! groups' sizes nor on where the group starts.
//!
//! What differs from [`super::gemm`]:
//! - the tiles ([`Groups`]): each group's rows in tiles of BM, numbered group after group,
//!   (tile row, tile column) inside a group in the shared order (`crate::schedule`); a block
//!   takes tiles b, b + grid, … and follows the groups with a cursor, reading each group's
//!   end once — or, in the dynamic tile order (`DYNAMIC`), tile b and then whichever tile a
//!   counter of the call hands its producer when it is ready for another, so that the
//!   tiles sharing a weight column start about together whatever each block did before
//!   (the static order hands them to different neighbours every wave, which drift apart,
//!   and a lagging one finds the weight evicted from L2). The producer writes each tile's
//!   index in its first stage's tile word before the stage's arrival (the full barrier's
//!   release and the consumers' acquiring wait order it); a tile with no copies — the rows
//!   past the last group's end — and the end of the walk are announced by a plain arrival
//!   on a stage of their own. In clusters the counter hands out cluster tiles, and only
//!   the producer of rank 0 takes them: it names each in its peer's tile word too and
//!   signals the peer's producer on a barrier of that stage ([`Herald`]). Which block runs
//!   a tile cannot change its bits;
//! - the store: a consumer warpgroup whose 64 rows all lie before the group's end stores them
//!   as the dense kernels do (pieces staged in shared memory, the copy engine's stores); the
//!   one that holds a group's last rows stores from registers, each pair of columns of a row
//!   before the end (the copy engine clips at C's edges only, and would write the rows past
//!   the group's end over the next group's);
//! - the bias: N values per group.
//!
//! The rows past the last group's end belong to no group and are written as +0.0, as the
//! host's group-by-group form writes them (`crate`'s callers see one result either way).
//!
//! Ends that are not non-decreasing or lie past the rows are clamped (a decreasing end makes
//! an empty group; an end past the last row is the last row), so wrong ends never make the
//! kernel read or write outside the buffers the host validated. The host checks ends it can
//! see; these it cannot.

use super::config::a_bytes;
use super::config::{BM, BOX_BYTES, CONSUMER_REGS, MAX_STAGES, PRODUCER_REGS, SWIZZLE_ELEMS, WG_M};
use super::mainloop::{self, batch_coord, k_tiles, Stages};
use super::walk::Walk;
use super::ConsumerSchedule as _;
use crate::arch::cluster::{
    cluster_ctarank, cluster_sync, mapa_shared_cluster, mbarrier_arrive_release_cluster,
    st_shared_cluster_b32,
};
use crate::arch::global::{atom_add_relaxed_gpu_u32, st_global_b32, st_global_v2_b32};
use crate::arch::mbarrier::{
    mbarrier_arrive, mbarrier_arrive_expect_tx, mbarrier_try_wait_parity_cluster,
};
use crate::arch::shared::{dyn_smem_base, ld_shared_b32, st_shared_b32};
use crate::arch::sync::{
    bar_sync, griddepcontrol_launch_dependents, griddepcontrol_wait, setmaxnreg_dec,
    setmaxnreg_inc, warp_uniform,
};
use crate::arch::tma::{cp_async_bulk_tensor_3d, prefetch_tensormap};
use crate::element::WgmmaElement;
use crate::finish::{bias_at, finished_16, finished_f32, group_bias};
use crate::group_ends::report_bad_ends;
use crate::params::{GemmParams, BIAS_NONE, OUT_BF16, OUT_F32};
use crate::schedule::Tile;
use core::arch::nvptx::{_block_idx_x, _grid_dim_x, _thread_idx_x};

/// One tile of one group. Rows, columns and counts are `u32`: the host sends only calls whose
/// extents are TMA coordinates (below 2^31) and whose tiles number below 2^32.
pub struct GroupTile {
    /// The group (`p.batch` for the rows past the last group's end, [`Self::clear`]).
    pub group: u32,
    /// The tile's first row (of all the rows) and first column.
    pub m0: u32,
    pub n0: u32,
    /// The group's end: rows from here on are not the group's.
    pub end: u32,
    /// A tile of the rows past the last group's end, which belong to no group: written as
    /// +0.0 (the empty chain, no bias), with nothing copied and no MMA.
    pub clear: bool,
}

/// Tile rows per scheduling group (as `crate::schedule`'s order).
const GROUP_M: u32 = 8;

/// `(a / b, a % b)` for a divisor the caller knows is not zero (no panic path in the PTX).
#[inline(always)]
fn div_rem(a: u32, b: u32) -> (u32, u32) {
    // SAFETY: both callers divide by counts of a group that has tiles: `tiles_n` ≥ 1 (the
    // host launches no empty call) and a band's tile rows, ≥ 1 inside a group with tiles.
    unsafe { core::hint::assert_unchecked(b != 0) };
    (a / b, a % b)
}

/// This block's place in the tiles of all groups (see the module docs). Only the cursor is
/// state: the call's sizes are read from the kernel parameter at each step, so that the
/// consumers carry a handful of registers beside their accumulators (ptxas fits the whole
/// kernel in 168 a thread).
///
/// With clusters of `CLUSTER` blocks the cursor walks *cluster tiles* of `CLUSTER · BM` rows
/// of a group (cluster c takes cluster tiles c, c + clusters, …) and the block of rank r
/// computes rows `r · BM ..` of each, as the dense walk does (`super::walk`): the blocks of a
/// cluster walk the same cluster tiles, so they fill and read the shared stages together. A
/// block whose rows of a cluster tile lie past the group's end still walks it (no A copy,
/// no MMA, no store).
pub struct Groups<const CLUSTER: u32> {
    /// This block's next cluster tile, counted over all groups.
    next: u32,
    /// This block's rank in its cluster (0 without clusters).
    rank: u32,
    group: u32,
    start: u32,
    end: u32,
    /// Cluster tiles of the groups before `group`, and cluster tile rows of `group`.
    before: u32,
    tiles_m: u32,
}

impl<const CLUSTER: u32> Groups<CLUSTER> {
    /// # Safety
    /// `ends` is the device address of `p.batch` (≥ 1) `i32`s; `p.tiles_n` ≥ 1; `rank` is
    /// this block's rank in its cluster of `CLUSTER` blocks laid out along x.
    #[inline(always)]
    pub unsafe fn new(p: &GemmParams, ends: u64, rank: u32) -> Self {
        let mut groups = Groups {
            next: _block_idx_x() as u32 / CLUSTER,
            rank,
            group: 0,
            start: 0,
            end: 0,
            before: 0,
            tiles_m: 0,
        };
        // SAFETY: group 0 exists (forwarded contract).
        unsafe { groups.enter(p, ends) };
        groups
    }

    /// Reads the end of `self.group` (clamped to `start..=M`, or M for the rows past the
    /// last group) and counts its cluster tile rows.
    ///
    /// # Safety
    /// `self.group` ≤ `p.batch`.
    #[inline(always)]
    unsafe fn enter(&mut self, p: &GemmParams, ends: u64) {
        let rows = p.m as u32;
        self.end = if u64::from(self.group) == p.batch {
            rows
        } else {
            // SAFETY: inside the `batch` ends (forwarded contract).
            let raw = unsafe { *(ends as *const i32).add(self.group as usize) };
            if raw < self.start as i32 {
                self.start
            } else if raw as u32 > rows {
                rows
            } else {
                raw as u32
            }
        };
        self.tiles_m = (self.end - self.start).div_ceil(BM * CLUSTER);
    }

    /// Makes tile `index` (counted over all groups) the one [`Self::next`] returns next: the
    /// dynamic tile order's way of moving the cursor. The group cursor only walks forward,
    /// so `index` is at least every index this cursor has returned (a block's indices from
    /// the counter only grow).
    #[inline(always)]
    pub fn seek(&mut self, index: u32) {
        self.next = index;
    }

    /// This block's next tile, or `None` when it has none left.
    ///
    /// # Safety
    /// As for [`Self::new`], with the same `p` and `ends`.
    #[inline(always)]
    pub unsafe fn next<const BN: u32>(&mut self, p: &GemmParams, ends: u64) -> Option<GroupTile> {
        let tiles_n = p.tiles_n as u32;
        // After the last group comes the part of the rows past its end (group `batch`).
        while self.next >= self.before + self.tiles_m * tiles_n {
            if u64::from(self.group) >= p.batch {
                return None;
            }
            self.before += self.tiles_m * tiles_n;
            self.group += 1;
            self.start = self.end;
            // SAFETY: `group` ≤ batch (tested above).
            unsafe { self.enter(p, ends) };
        }
        // The group's tiles in the shared order: GROUP_M tile rows at a time, down each
        // column of them, so that blocks at work together share rows of A and columns of B.
        let local = self.next - self.before;
        let (band, in_band) = div_rem(local, GROUP_M * tiles_n);
        let first = band * GROUP_M;
        let band_rows = if self.tiles_m - first < GROUP_M {
            self.tiles_m - first
        } else {
            GROUP_M
        };
        let (tn, tm) = div_rem(in_band, band_rows);
        self.next += _grid_dim_x() as u32 / CLUSTER;
        Some(GroupTile {
            group: self.group,
            m0: self.start + (first + tm) * BM * CLUSTER + self.rank * BM,
            n0: tn * BN,
            end: self.end,
            clear: u64::from(self.group) == p.batch,
        })
    }
}

/// Warp 1 of block 0 checks the ends (`report_bad_ends`) when the host asked for a report:
/// it is a warp of the producer warpgroup, idle but for its first thread's copies.
///
/// # Safety
/// Every thread of the producer warpgroup calls it, after `griddepcontrol_wait`; as for
/// [`report_bad_ends`] when `errors` ≠ 0.
#[inline(always)]
unsafe fn check_ends(tid: u32, ends: u64, groups: u64, limit: u64, errors: u64) {
    if errors != 0 && _block_idx_x() == 0 && tid / 32 == 1 {
        // SAFETY: one whole warp (the branch is uniform across it); forwarded contract.
        unsafe { report_bad_ends(ends, groups, limit, errors, tid % 32) };
    }
}

/// The grouped kernel: (BM, BN) tiles, two consumer warpgroups sharing each tile (the
/// cooperative schedule), in clusters of `CLUSTER` blocks along a group's rows (1: none; the
/// blocks of a cluster share each stage's B tile, as the dense kernel's do); A is
/// K-contiguous (the tokens' rows), B K-contiguous when `B_K`; the tiles in the dynamic
/// order when `DYNAMIC`, else in the static one (see the module docs).
///
/// # Safety
/// `p` describes the whole call (`p.m` the rows of every group, `p.batch` ≥ 1 groups, B
/// `p.batch` entries, the bias N per group, C written from registers in an overwrite mode)
/// on buffers valid for the spans the host validated, with N even and C's address and
/// leading dimension whole pairs of elements; `ends` is the device address of `p.batch`
/// `i32`s, not written while the kernel runs (the blocks of a cluster must read the same
/// ends); `errors` is 0 or the address of a `GroupErrorRecord`; `maps` are the generic
/// addresses of the tensor maps of A (batch extent 1), B (boxes of BN / CLUSTER rows when
/// K-contiguous) and C (batch extent 1, boxes as the dense kernels' epilogue writes them;
/// `host/src/cuda/grouped.rs`); the block has `config::threads(BM)` threads
/// and `config::SMEM_BYTES` of dynamic shared memory; with `CLUSTER` > 1 the grid is
/// launched in clusters of `CLUSTER` blocks along x. With `DYNAMIC`: `p.k` > 0 (every tile
/// with rows has a stage to announce it), `counter` is the device address of a `u32` that
/// is 0 when the kernel starts and that nothing else touches while it runs, and the call's
/// tiles plus twice the grid number below 2^32.
#[inline(always)]
pub unsafe fn gemm<
    E: WgmmaElement,
    const B_K: bool,
    const BN: u32,
    const CLUSTER: u32,
    const DYNAMIC: bool,
>(
    p: &GemmParams,
    ends: u64,
    errors: u64,
    counter: u64,
    maps: [u64; 3],
) {
    let [map_a, map_b, map_c] = maps;
    let tid = _thread_idx_x() as u32;
    let wg = warp_uniform(tid / 128);
    let st = Stages::<BN, BM>::new((dyn_smem_base() + 1023) & !1023);
    let rank = if CLUSTER > 1 { cluster_ctarank() } else { 0 };
    if tid == 0 {
        // SAFETY: the barriers lie in the SMEM_BYTES the block was launched with.
        unsafe {
            if DYNAMIC && CLUSTER > 1 {
                st.init_announce();
            }
            st.init(CLUSTER, super::Cooperative::readers(BM));
        }
    }
    // The peers signal this block's barriers: they must see them initialised.
    if CLUSTER > 1 {
        cluster_sync();
    } else {
        bar_sync();
    }
    // As in `super::gemm` (a no-op unless launched as a programmatic dependent).
    griddepcontrol_wait();
    griddepcontrol_launch_dependents();
    if wg == 0 {
        setmaxnreg_dec::<PRODUCER_REGS>();
        // SAFETY: the producer warpgroup, after the wait; forwarded contract.
        unsafe { check_ends(tid, ends, p.batch, p.m, errors) };
        if tid == 0 {
            // SAFETY: forwarded contract.
            unsafe {
                prefetch_tensormap(map_a);
                prefetch_tensormap(map_b);
                produce::<B_K, BN, CLUSTER, DYNAMIC>(p, ends, counter, &st, map_a, map_b, rank);
            }
        }
    } else {
        setmaxnreg_inc::<CONSUMER_REGS>();
        // The store's width, decided once (whole consumer loops per width, as in `super`).
        // SAFETY (both arms): forwarded contract; this thread is a consumer's.
        unsafe {
            if p.out_mode == OUT_F32 {
                consume_tiles::<E, B_K, BN, CLUSTER, DYNAMIC, true>(p, ends, &st, tid, rank, map_c)
            } else {
                consume_tiles::<E, B_K, BN, CLUSTER, DYNAMIC, false>(p, ends, &st, tid, rank, map_c)
            }
        }
    }
}

/// The producer: one thread copying, for each tile of this block, every K tile of its A rows
/// and of its group's B (with clusters, its part of B to every block of the cluster), in the
/// order the consumers read them. A block whose rows of a cluster tile all lie past the
/// group's end copies no A (its consumers do not read it). In the dynamic order it also
/// announces each tile in its first stage's tile word (module docs); the tiles come from
/// the counter, and with clusters only the producer of rank 0 takes them: it stores each
/// index in the peer's tile word of the same stage too and arrives on the peer's
/// announcement barrier of that stage, on which the peer's producer waits for it ([`Herald`]).
///
/// # Safety
/// One thread of the block, the barriers initialised (with clusters, the cluster synchronised
/// after that); as for [`gemm`].
#[inline(always)]
unsafe fn produce<const B_K: bool, const BN: u32, const CLUSTER: u32, const DYNAMIC: bool>(
    p: &GemmParams,
    ends: u64,
    counter: u64,
    st: &Stages<BN, BM>,
    map_a: u64,
    map_b: u64,
    rank: u32,
) {
    let kt_count = k_tiles(p);
    let mut it = 0u32;
    // SAFETY: forwarded contract.
    let mut tiles = unsafe { Groups::<CLUSTER>::new(p, ends, rank) };
    let mut herald = Herald::<CLUSTER>::new(rank);
    // The dynamic order's first tile is the static one's (no wait on the counter to start),
    // the later ones the counter's, after the grid's first (cluster) tiles.
    let mut index = _block_idx_x() as u32 / CLUSTER;
    let take_next = || {
        // SAFETY: the call's counter (forwarded contract); only atomics touch it.
        _grid_dim_x() as u32 / CLUSTER + unsafe { atom_add_relaxed_gpu_u32(counter, 1) }
    };
    loop {
        if DYNAMIC {
            if herald.follows() {
                // SAFETY: initialised barriers; `it` is this producer's next stage, the one
                // whose tile word the leader names this tile in.
                index = unsafe { herald.receive(st, it) };
            }
            tiles.seek(index);
        }
        // SAFETY: forwarded contract.
        let next = unsafe { tiles.next::<BN>(p, ends) };
        let t = match next {
            Some(t) if !t.clear => t,
            _ => {
                if DYNAMIC {
                    // A tile without copies, or the end: a stage of its own says so.
                    // SAFETY: forwarded contract; `it` is this producer's next stage.
                    unsafe { herald.announce_alone(st, &mut it, index) };
                }
                if next.is_none() {
                    break;
                }
                if DYNAMIC && !herald.follows() {
                    index = take_next();
                }
                continue;
            }
        };
        let bb = batch_coord(p.batch_stride_b, u64::from(t.group));
        let (m0, n0) = (t.m0 as i32, t.n0 as i32);
        let has_rows = t.m0 < t.end;
        let bytes = if has_rows {
            super::config::stage_bytes(BN, BM)
        } else {
            super::config::stage_bytes(BN, BM) - a_bytes(BM)
        };
        for kt in 0..kt_count {
            let s = it % Stages::<BN, BM>::COUNT;
            let parity = (it / Stages::<BN, BM>::COUNT) & 1;
            let full = st.full(s);
            let k0 = (kt * super::config::BK) as i32;
            // SAFETY (all): initialised barriers; stage s (its tile word too) is free in
            // every block of the cluster once its `empty` phase completed; the maps are
            // valid (forwarded contract).
            unsafe {
                Stages::<BN, BM>::wait(st.empty(s), parity ^ 1);
                if DYNAMIC && kt == 0 {
                    // Before the arrival, whose release orders it for the consumers.
                    herald.name(st, s, index);
                }
                mbarrier_arrive_expect_tx(full, bytes);
                if has_rows {
                    cp_async_bulk_tensor_3d(st.a(s), map_a, k0, m0, 0, full);
                }
                mainloop::load_b::<B_K, BN, BM, CLUSTER>(st, s, map_b, [k0, n0, bb], rank);
            }
            it += 1;
        }
        if DYNAMIC && !herald.follows() {
            index = take_next();
        }
    }
    // SAFETY: this block's producer, after its last copy.
    unsafe { mainloop::drain_peers::<BN, BM, CLUSTER>(st, it) };
}

/// How the dynamic order's producers name a tile in a stage's tile word. Without clusters a
/// producer writes its own. In a cluster the blocks must walk the same tiles, so one counter
/// read serves both: the producer of rank 0 (the leader) writes the index into its own tile
/// word and into its peer's, then arrives on the peer's announcement barrier of the stage
/// (a cluster-scope release); the peer's producer (the follower) waits there (a
/// cluster-scope acquire) and reads its own tile word, which its consumers read in turn after
/// its arrival on the stage's `full` barrier. Both producers take the same stages for the
/// same tiles, so the follower knows which stage carries each announcement.
///
/// Why the leader may overwrite the peer's tile word of stage s: it does so only after its
/// own wait on the stage's `empty` barrier, which counts every consumer warp of the cluster;
/// the peer's consumers read the word before they release the stage, and its producer read it
/// before its own arrival on the stage's `full` barrier, which the consumers waited for. The
/// same argument keeps the follower at most one phase behind on each announcement barrier,
/// so a parity names the phase.
struct Herald<const CLUSTER: u32> {
    rank: u32,
    /// The follower's parity of each stage's announcement barrier, one bit per stage.
    phases: u32,
}

impl<const CLUSTER: u32> Herald<CLUSTER> {
    #[inline(always)]
    fn new(rank: u32) -> Self {
        const {
            assert!(CLUSTER <= 2, "one leader and one follower");
            assert!(MAX_STAGES <= 32, "a parity bit per stage");
        };
        Herald { rank, phases: 0 }
    }

    /// Whether this block's tiles come from the peer's announcements.
    #[inline(always)]
    fn follows(&self) -> bool {
        CLUSTER > 1 && self.rank != 0
    }

    /// The follower's wait for the tile the leader named in stage `it % COUNT`.
    ///
    /// # Safety
    /// The follower's producer thread, `it` the stage of its next tile; initialised
    /// announcement barriers.
    #[inline(always)]
    unsafe fn receive<const BN: u32>(&mut self, st: &Stages<BN, BM>, it: u32) -> u32 {
        let s = it % Stages::<BN, BM>::COUNT;
        let parity = (self.phases >> s) & 1;
        self.phases ^= 1 << s;
        // SAFETY: initialised barrier (forwarded contract); after the acquire the word holds
        // the leader's index for this stage use (see the type's docs).
        unsafe {
            while !mbarrier_try_wait_parity_cluster(st.announce(s), parity) {}
            ld_shared_b32(st.tile_word(s))
        }
    }

    /// Names tile `index` in stage `s`'s tile word (the leader: in the peer's too).
    ///
    /// # Safety
    /// This block's producer thread, after its wait on stage `s`'s `empty` phase and before
    /// its arrival on the stage's `full` barrier.
    #[inline(always)]
    unsafe fn name<const BN: u32>(&self, st: &Stages<BN, BM>, s: u32, index: u32) {
        if self.follows() {
            // The leader wrote it (`receive`).
            return;
        }
        // SAFETY: the stage's word is free (forwarded contract).
        unsafe { st_shared_b32(st.tile_word(s), index) };
        if CLUSTER > 1 {
            let peer = 1;
            // SAFETY: the peer's word is free too (the type's docs); the peer runs until it
            // has received every announcement, the last one included.
            unsafe {
                st_shared_cluster_b32(mapa_shared_cluster(st.tile_word(s), peer), index);
                mbarrier_arrive_release_cluster(mapa_shared_cluster(st.announce(s), peer));
            }
        }
    }

    /// Names tile `index` on a stage of its own, without copies (a tile with nothing to
    /// copy, or the end of the walk): the wait for the stage to be free, the name, a plain
    /// arrival on its `full` barrier; `it` moves past the stage. The consumers release such a
    /// stage themselves ([`announced_tile`], [`release_announcement`]).
    ///
    /// # Safety
    /// This block's producer thread, `it` its next stage; initialised barriers.
    #[inline(always)]
    unsafe fn announce_alone<const BN: u32>(&self, st: &Stages<BN, BM>, it: &mut u32, index: u32) {
        let s = *it % Stages::<BN, BM>::COUNT;
        let parity = (*it / Stages::<BN, BM>::COUNT) & 1;
        // SAFETY: initialised barriers; the word is the stage's, free once its `empty` phase
        // completed (every consumer warp of the cluster read it before).
        unsafe {
            Stages::<BN, BM>::wait(st.empty(s), parity ^ 1);
            self.name(st, s, index);
            mbarrier_arrive(st.full(s));
        }
        *it += 1;
    }
}

/// The dynamic order's consumers: the stage `it % COUNT` and the tile its producer named in
/// it, once the stage's `full` phase has completed.
///
/// # Safety
/// Every thread of a consumer warp calls it together, `it` the warp's next stage;
/// initialised barriers.
#[inline(always)]
unsafe fn announced_tile<const BN: u32>(st: &Stages<BN, BM>, it: u32) -> (u32, u32) {
    let s = it % Stages::<BN, BM>::COUNT;
    let parity = (it / Stages::<BN, BM>::COUNT) & 1;
    // SAFETY: initialised barrier; after the wait (acquire) the word is the producer's for
    // this stage use, which it does not rewrite before this warp releases the stage.
    let index = unsafe {
        Stages::<BN, BM>::wait(st.full(s), parity);
        warp_uniform(ld_shared_b32(st.tile_word(s)))
    };
    (s, index)
}

/// The consumers' release of stage `s` when it announced a tile without copies (or the end):
/// the mainloop, which releases the stages it reads, never sees it. `it` moves past it.
///
/// # Safety
/// Every thread of a consumer warpgroup calls it together (`wtid` its thread in the
/// warpgroup), once per such stage use, after [`announced_tile`] read it.
#[inline(always)]
unsafe fn release_announcement<const BN: u32, const CLUSTER: u32>(
    st: &Stages<BN, BM>,
    s: u32,
    wtid: u32,
    it: &mut u32,
) {
    if wtid % 32 == 0 {
        // SAFETY: once for this stage use, by lane 0 of each warp, after the read.
        unsafe { mainloop::release_stage::<BN, BM, CLUSTER>(st, s) };
    }
    *it += 1;
}

/// The consumers' next tile: in the static order the cursor's, in the dynamic order the one
/// the producer announced in the next stage's tile word. A stage that announces no copies
/// (a tile of the rows past the last group, or the end) is released here.
///
/// # Safety
/// As for [`gemm`]; every thread of a consumer warpgroup calls it together, with the
/// warpgroup's own cursor and stage count (`wtid` its thread in the warpgroup).
#[inline(always)]
unsafe fn next_tile<const BN: u32, const CLUSTER: u32, const DYNAMIC: bool>(
    tiles: &mut Groups<CLUSTER>,
    p: &GemmParams,
    ends: u64,
    st: &Stages<BN, BM>,
    wtid: u32,
    it: &mut u32,
) -> Option<GroupTile> {
    if !DYNAMIC {
        // SAFETY: forwarded contract.
        return unsafe { tiles.next::<BN>(p, ends) };
    }
    // SAFETY: forwarded contract (`it` is the warpgroup's next stage).
    let (s, index) = unsafe { announced_tile(st, *it) };
    tiles.seek(index);
    // SAFETY: forwarded contract.
    let next = unsafe { tiles.next::<BN>(p, ends) };
    if !matches!(next, Some(ref t) if !t.clear) {
        // SAFETY: the stage announced no copies; the whole warpgroup is here.
        unsafe { release_announcement::<BN, CLUSTER>(st, s, wtid, it) };
    }
    next
}

/// A consumer warpgroup's whole life: for each tile of this block, the chain over K of its
/// 64 rows, then their store (f32 when `WIDE`, else 16 bits): through the copy engine when
/// all 64 lie before the group's end, else from registers.
///
/// # Safety
/// As for [`gemm`]; every thread of consumer warpgroup `tid / 128` (≥ 1) calls it together;
/// `rank` is the block's rank in its cluster; `map_c` is C's map.
#[inline(always)]
unsafe fn consume_tiles<
    E: WgmmaElement,
    const B_K: bool,
    const BN: u32,
    const CLUSTER: u32,
    const DYNAMIC: bool,
    const WIDE: bool,
>(
    p: &GemmParams,
    ends: u64,
    st: &Stages<BN, BM>,
    tid: u32,
    rank: u32,
    map_c: u64,
) {
    let (wg, wtid) = (warp_uniform(tid / 128) - 1, tid % 128);
    let mut it = 0u32;
    let mut issued = 0u32;
    // SAFETY: forwarded contract.
    let mut tiles = unsafe { Groups::<CLUSTER>::new(p, ends, rank) };
    // SAFETY: as above; the warpgroup's own cursor and stage count.
    while let Some(t) =
        unsafe { next_tile::<BN, CLUSTER, DYNAMIC>(&mut tiles, p, ends, st, wtid, &mut it) }
    {
        // A warpgroup whose 64 rows all lie past the group's end computes nothing.
        let active = t.m0 + wg * WG_M < t.end;
        if t.clear {
            if active {
                // SAFETY: all-zero bits are +0.0 (not a repeat expression: see
                // `mainloop::consume`).
                let zeros: [f32; 128] = unsafe { core::mem::zeroed() };
                // SAFETY: forwarded contract (no bias: these rows are no group's).
                unsafe { store::<BN, WIDE, false>(p, &t, wg, wtid, &zeros) };
            }
            continue;
        }
        // SAFETY (both arms): forwarded contract; the whole warpgroup runs this together.
        let acc = unsafe {
            if active {
                mainloop::consume::<E, true, B_K, BN, BM, true, CLUSTER, false>(
                    p,
                    st,
                    wg,
                    wtid,
                    &mut it,
                    || {},
                )
            } else {
                mainloop::consume::<E, true, B_K, BN, BM, false, CLUSTER, false>(
                    p,
                    st,
                    wg,
                    wtid,
                    &mut it,
                    || {},
                )
            }
        };
        if t.m0 + (wg + 1) * WG_M <= t.end {
            let tile = Tile {
                batch: 0,
                m0: u64::from(t.m0),
                n0: u64::from(t.n0),
            };
            // SAFETY: the part's rows lie before the group's end (so inside C, and no other
            // group's); forwarded contract for the map; the warpgroup's barrier (1 + wg) and
            // pieces are its own.
            unsafe {
                super::epilogue::store_tma::<BN, BM, 0, WIDE>(
                    &group_bias(p, u64::from(t.group)),
                    &tile,
                    wg,
                    wg,
                    wtid,
                    &acc,
                    st.epilogue(wg),
                    map_c,
                    &mut issued,
                )
            }
        } else if active {
            // A uniform branch: the common case carries no bias code.
            // SAFETY (both arms): forwarded contract.
            unsafe {
                if p.bias_dtype != BIAS_NONE {
                    store::<BN, WIDE, true>(p, &t, wg, wtid, &acc)
                } else {
                    store::<BN, WIDE, false>(p, &t, wg, wtid, &acc)
                }
            }
        }
    }
    super::epilogue::drain(wtid);
}

/// Finishes the 64 rows `part · WG_M ..` of tile `t` held in `acc` (thread `tid`'s fragment:
/// `acc[4j + 2h + e]` is row `16 (tid / 32) + 8h + (tid % 32) / 4`, column
/// `8j + 2 (tid % 4) + e`) with the shared end of the chain (`crate::finish`: bias, NaN,
/// rounding) and stores each pair of a row before the group's end and of a column before N.
///
/// # Safety
/// As for [`gemm`]; `HAS_BIAS` says whether the launch has a bias.
#[inline(always)]
unsafe fn store<const BN: u32, const WIDE: bool, const HAS_BIAS: bool>(
    p: &GemmParams,
    t: &GroupTile,
    part: u32,
    tid: u32,
    acc: &[f32; 128],
) {
    let elem: u64 = if WIDE { 4 } else { 2 };
    let bf16 = p.out_mode == OUT_BF16;
    let (warp, lane) = (tid / 32, tid % 32);
    let col0 = u64::from(t.n0) + ((lane % 4) * 2) as u64;
    let r0 = warp * 16 + lane / 4;
    let biased = group_bias(p, u64::from(t.group));
    let rows = [0u32, 8].map(|dr| {
        let i = t.m0 + part * WG_M + r0 + dr;
        (p.c + elem * (u64::from(i) * p.ldc + col0), i < t.end)
    });
    unroll8!(q => {
        unroll4!(jl => {
            let j = 4 * q + jl;
            let col = col0 + 8 * j as u64;
            if j < (BN / 8) as usize && col < p.n {
                let bias = if HAS_BIAS {
                    // SAFETY: col + 1 < N (N even, col even): inside the group's N values.
                    Some(unsafe { [bias_at(&biased, col), bias_at(&biased, col + 1)] })
                } else {
                    None
                };
                unroll2!(h => {
                    let (at, stored) = rows[h];
                    if stored {
                        let mut v = [acc[4 * j + 2 * h], acc[4 * j + 2 * h + 1]];
                        if let Some(b) = bias {
                            v = [v[0] + b[0], v[1] + b[1]];
                        }
                        let at = at + elem * 8 * j as u64;
                        // SAFETY: the pair is inside C (row before the group's end, which is
                        // at most M; column pair before N) and aligned (forwarded contract).
                        unsafe {
                            if WIDE {
                                st_global_v2_b32(at, v.map(finished_f32));
                            } else {
                                st_global_b32(at, finished_16(v, bf16));
                            }
                        }
                    }
                });
            }
        });
    });
}

/// The K range of group `g` of a split reduction: from the previous group's end to its own,
/// each clamped into `0..=K` (and the end to at least the start), so that no range reaches
/// outside the operands whatever the ends say.
///
/// # Safety
/// `ends` is the device address of more than `g` `i32`s.
#[inline(always)]
unsafe fn k_range(ends: u64, g: u64, k: u64) -> (u64, u64) {
    let end_of = |i: u64| {
        // SAFETY: i ≤ g (forwarded contract).
        let raw = unsafe { *(ends as *const i32).add(i as usize) };
        if raw < 0 {
            0
        } else if raw as u64 > k {
            k
        } else {
            raw as u64
        }
    };
    let start = if g == 0 { 0 } else { end_of(g - 1) };
    let end = end_of(g);
    (start, if end < start { start } else { end })
}

/// The grouped kernel of a split reduction (torch's 2-D × 2-D `grouped_mm`, the experts'
/// weight gradient): group g computes `C[g] = A[:, s..e] · B[s..e, :]` for its K range, with
/// A M-contiguous (Xᵀ of the tokens' rows) and B N-contiguous (their output gradients), (BM,
/// BN) tiles of each group's C in the shared order (the dense walk over `p.batch` groups),
/// two cooperative consumers, in clusters of `CLUSTER` blocks along M (1: none). The blocks
/// of a cluster compute neighbouring tiles of the same group and columns, so they read the
/// same rows of B (the group's tokens of dY) in every stage: each copies its `1 / CLUSTER`
/// of the stage's B tile to all of them, as the dense kernel's clusters do. With `DYNAMIC`
/// (built with clusters of two) the cluster tiles come from the call's counter, as in the
/// rows split's dynamic order: which block computes a tile never changes its bits.
///
/// Each group's chain is the dense call's over its `e − s` elements of K (the dense mainloop,
/// [`mainloop::consume_k`]); the last K tile's box reaches past `e` into the next group's
/// rows, which the consumers make zeros in the stage before they read it, where the dense
/// call's copy engine would have filled zeros. A group with no K gives the empty chain's
/// +0.0. C is stored as the dense kernels store it (the copy engine, or accumulate mode).
///
/// # Safety
/// `p` describes the whole call (`p.k` the K of all groups, `p.batch` ≥ 1 groups, C one batch
/// entry per group) on buffers valid for the spans the host validated; `ends` is the device
/// address of `p.batch` `i32`s; `maps` are the tensor maps of A, B (batch extent 1) and C
/// (one batch entry per group; zeros in accumulate mode), `host/src/cuda/grouped.rs`; the
/// block has `config::threads(BM)` threads and `config::SMEM_BYTES` of dynamic shared memory;
/// with `CLUSTER` > 1 the grid is launched in clusters of `CLUSTER` blocks along x, and `ends`
/// is not written while the kernel runs (the blocks of a cluster must read the same ranges:
/// they walk the same stages). With `DYNAMIC`: `counter` is the device address of a `u32`
/// that is 0 when the kernel starts and that nothing else touches while it runs, and the
/// call's cluster tiles plus twice the grid number below 2^32.
#[inline(always)]
pub unsafe fn gemm_reduction<
    E: WgmmaElement,
    const BN: u32,
    const CLUSTER: u32,
    const DYNAMIC: bool,
>(
    p: &GemmParams,
    ends: u64,
    errors: u64,
    counter: u64,
    maps: [u64; 3],
) {
    let [map_a, map_b, map_c] = maps;
    let tid = _thread_idx_x() as u32;
    let wg = warp_uniform(tid / 128);
    let st = Stages::<BN, BM>::new((dyn_smem_base() + 1023) & !1023);
    let rank = if CLUSTER > 1 { cluster_ctarank() } else { 0 };
    if tid == 0 {
        // SAFETY: the barriers lie in the SMEM_BYTES the block was launched with.
        unsafe {
            if DYNAMIC && CLUSTER > 1 {
                st.init_announce();
            }
            st.init(CLUSTER, super::Cooperative::readers(BM));
        }
    }
    // The peers signal this block's barriers: they must see them initialised.
    if CLUSTER > 1 {
        cluster_sync();
    } else {
        bar_sync();
    }
    griddepcontrol_wait();
    griddepcontrol_launch_dependents();
    // SAFETY: a block of a grid of whole clusters of CLUSTER blocks along x; `rank` is its
    // rank in its cluster.
    let walk = unsafe { Walk::<CLUSTER>::new::<BM>(p, rank) };
    if wg == 0 {
        setmaxnreg_dec::<PRODUCER_REGS>();
        // SAFETY: the producer warpgroup, after the wait; forwarded contract.
        unsafe { check_ends(tid, ends, p.batch, p.k, errors) };
        if tid == 0 {
            // SAFETY: forwarded contract.
            unsafe {
                prefetch_tensormap(map_a);
                prefetch_tensormap(map_b);
                let copies = (map_a, map_b, counter);
                produce_reduction::<BN, CLUSTER, DYNAMIC>(p, ends, &st, copies, &walk, rank);
            }
        }
    } else {
        setmaxnreg_inc::<CONSUMER_REGS>();
        // SAFETY: forwarded contract; the kind is the launch's output mode.
        unsafe {
            by_store_kind!(
                p,
                consume_reduction::<E, BN, CLUSTER, DYNAMIC>(p, ends, &st, &walk, tid, map_c)
            )
        }
    }
}

/// The producer of [`gemm_reduction`]: for each tile, the K tiles of its group's range (with
/// clusters, its part of each B tile to every block of the cluster); before it returns, with
/// clusters, it waits until every block's consumers have released every stage. In the
/// dynamic order the tiles come from the counter and each is announced in its first stage's
/// tile word, as in the rows split ([`produce`], [`Herald`]); a tile whose group has no K
/// (no copies) and the end of the walk are announced by a plain arrival on a stage of their
/// own.
///
/// # Safety
/// One thread of the block, the barriers initialised (with clusters, the cluster synchronised
/// after that); `(map_a, map_b, counter)` the maps and counter of [`gemm_reduction`], as for
/// it.
#[inline(always)]
unsafe fn produce_reduction<const BN: u32, const CLUSTER: u32, const DYNAMIC: bool>(
    p: &GemmParams,
    ends: u64,
    st: &Stages<BN, BM>,
    (map_a, map_b, counter): (u64, u64, u64),
    walk: &Walk<CLUSTER>,
    rank: u32,
) {
    let mut it = 0u32;
    let (mut tile, step) = walk.range();
    let maps = (map_a, map_b);
    if !DYNAMIC {
        while tile < walk.count() {
            let t = walk.tile::<BM, BN>(tile);
            // SAFETY: group t.batch < p.batch (forwarded contract).
            let range = unsafe { k_range(ends, t.batch, p.k) };
            // SAFETY: forwarded contract.
            unsafe {
                copy_reduction_tile::<BN, CLUSTER>(st, &t, range, maps, rank, &mut it, |_| {})
            };
            tile += step;
        }
    } else {
        let mut herald = Herald::<CLUSTER>::new(rank);
        // The first tile is the static order's, the later ones the counter's, after the
        // grid's first cluster tiles.
        let take_next = || {
            // SAFETY: the call's counter (forwarded contract); only atomics touch it.
            step + u64::from(unsafe { atom_add_relaxed_gpu_u32(counter, 1) })
        };
        loop {
            if herald.follows() {
                // SAFETY: initialised barriers; `it` is this producer's next stage, the one
                // whose tile word the leader names this tile in.
                tile = u64::from(unsafe { herald.receive(st, it) });
            }
            let t = (tile < walk.count()).then(|| walk.tile::<BM, BN>(tile));
            // SAFETY: group t.batch < p.batch (forwarded contract).
            let range = t
                .as_ref()
                .map_or((0, 0), |t| unsafe { k_range(ends, t.batch, p.k) });
            if range.0 == range.1 {
                // No copies (an empty group, or the end): a stage of its own says so.
                // SAFETY: forwarded contract; `it` is this producer's next stage.
                unsafe { herald.announce_alone(st, &mut it, tile as u32) };
            }
            let Some(t) = t else { break };
            // The next tile is asked for before this one's copies, so that the atomic's trip
            // to L2 overlaps them instead of delaying the next tile's first stage (a tile of
            // a group of 256 rows has only four K tiles).
            let next = if herald.follows() { 0 } else { take_next() };
            // SAFETY: forwarded contract; the tile is named in its first stage before the
            // stage's arrival, after the wait on its `empty` phase.
            unsafe {
                copy_reduction_tile::<BN, CLUSTER>(st, &t, range, maps, rank, &mut it, |s| {
                    herald.name(st, s, tile as u32)
                })
            };
            tile = next;
        }
    }
    // SAFETY: forwarded contract (this block's producer, after its last copy).
    unsafe { mainloop::drain_peers::<BN, BM, CLUSTER>(st, it) };
}

/// The copies of one tile of [`gemm_reduction`]: each K tile of its group's range `start ..
/// end` into the next stage (`it` counts them), `first(s)` called for the first one's stage
/// `s` after the wait for it to be free and before the arrival on it.
///
/// # Safety
/// As for [`produce_reduction`]; `t` is a tile of the walk and `(start, end)` its group's
/// range.
#[inline(always)]
unsafe fn copy_reduction_tile<const BN: u32, const CLUSTER: u32>(
    st: &Stages<BN, BM>,
    t: &Tile,
    (start, end): (u64, u64),
    (map_a, map_b): (u64, u64),
    rank: u32,
    it: &mut u32,
    mut first: impl FnMut(u32),
) {
    let kt_count = (end - start).div_ceil(super::config::BK as u64) as u32;
    let (m0, n0) = (t.m0 as i32, t.n0 as i32);
    for kt in 0..kt_count {
        let s = *it % Stages::<BN, BM>::COUNT;
        let parity = (*it / Stages::<BN, BM>::COUNT) & 1;
        let full = st.full(s);
        let k0 = (start + u64::from(kt * super::config::BK)) as i32;
        // SAFETY (all): as in `produce`.
        unsafe {
            Stages::<BN, BM>::wait(st.empty(s), parity ^ 1);
            if kt == 0 {
                first(s);
            }
            mbarrier_arrive_expect_tx(full, super::config::stage_bytes(BN, BM));
            for i in 0..BM / SWIZZLE_ELEMS {
                let m = m0 + (i * SWIZZLE_ELEMS) as i32;
                cp_async_bulk_tensor_3d(st.a(s) + i * BOX_BYTES, map_a, m, k0, 0, full);
            }
            mainloop::load_b::<false, BN, BM, CLUSTER>(st, s, map_b, [k0, n0, 0], rank);
        }
        *it += 1;
    }
}

/// A consumer warpgroup of [`gemm_reduction`]: for each tile, its group's chain, then the
/// store `STORE` (`super::store_kind`). In the dynamic order each tile is the one the
/// producer announced in the next stage's tile word; a stage that announces no copies (a
/// tile of an empty group, or the end) is released here.
///
/// # Safety
/// As for [`gemm_reduction`]; every thread of consumer warpgroup `tid / 128` (≥ 1) calls it
/// together, and `STORE` is the kind of `p.out_mode`.
#[inline(always)]
unsafe fn consume_reduction<
    E: WgmmaElement,
    const BN: u32,
    const CLUSTER: u32,
    const DYNAMIC: bool,
    const STORE: u32,
>(
    p: &GemmParams,
    ends: u64,
    st: &Stages<BN, BM>,
    walk: &Walk<CLUSTER>,
    tid: u32,
    map_c: u64,
) {
    let (wg, wtid) = (warp_uniform(tid / 128) - 1, tid % 128);
    let mut it = 0u32;
    let mut issued = 0u32;
    let (mut tile, step) = walk.range();
    if !DYNAMIC {
        while tile < walk.count() {
            let t = walk.tile::<BM, BN>(tile);
            // SAFETY: group t.batch < p.batch (forwarded contract).
            let (start, end) = unsafe { k_range(ends, t.batch, p.k) };
            // SAFETY: forwarded contract.
            unsafe {
                reduce_tile::<E, BN, CLUSTER, STORE>(
                    p,
                    st,
                    &t,
                    end - start,
                    (wg, wtid),
                    map_c,
                    (&mut it, &mut issued),
                )
            };
            tile += step;
        }
    } else {
        loop {
            // SAFETY: forwarded contract (`it` is the warpgroup's next stage).
            let (s, index) = unsafe { announced_tile(st, it) };
            tile = u64::from(index);
            let t = (tile < walk.count()).then(|| walk.tile::<BM, BN>(tile));
            // SAFETY: group t.batch < p.batch (forwarded contract).
            let (start, end) = t
                .as_ref()
                .map_or((0, 0), |t| unsafe { k_range(ends, t.batch, p.k) });
            if end == start {
                // SAFETY: the stage announced no copies; the whole warpgroup is here.
                unsafe { release_announcement::<BN, CLUSTER>(st, s, wtid, &mut it) };
            }
            let Some(t) = t else { break };
            // SAFETY: forwarded contract.
            unsafe {
                reduce_tile::<E, BN, CLUSTER, STORE>(
                    p,
                    st,
                    &t,
                    end - start,
                    (wg, wtid),
                    map_c,
                    (&mut it, &mut issued),
                )
            };
        }
    }
    super::epilogue::drain(wtid);
}

/// One tile of [`consume_reduction`]: the chain over the `k` elements of its group's range
/// (none: +0.0), then the store of the warpgroup's rows inside M. `it` counts the stages
/// read, `issued` the copy engine's stores.
///
/// # Safety
/// As for [`consume_reduction`] (`wg` the consumer warpgroup, from 0, and `tid` its
/// thread); `t` is a tile of the walk, `k` its group's range's length.
#[inline(always)]
unsafe fn reduce_tile<E: WgmmaElement, const BN: u32, const CLUSTER: u32, const STORE: u32>(
    p: &GemmParams,
    st: &Stages<BN, BM>,
    t: &Tile,
    k: u64,
    (wg, tid): (u32, u32),
    map_c: u64,
    (it, issued): (&mut u32, &mut u32),
) {
    let active = t.m0 + u64::from(wg * WG_M) < p.m;
    // SAFETY (both arms): forwarded contract; the whole warpgroup runs this together.
    let acc = unsafe {
        if active {
            mainloop::consume_k::<E, false, false, BN, BM, true, CLUSTER, false, true>(
                k,
                st,
                wg,
                tid,
                it,
                || {},
            )
        } else {
            mainloop::consume_k::<E, false, false, BN, BM, false, CLUSTER, false, true>(
                k,
                st,
                wg,
                tid,
                it,
                || {},
            )
        }
    };
    if active {
        let pieces = st.epilogue(wg);
        // SAFETY: forwarded contract; the warpgroup's barrier (1 + wg) and epilogue pieces
        // are its own.
        unsafe {
            super::epilogue::store_part::<BN, BM, 0, STORE>(
                p, t, wg, wg, tid, &acc, pieces, map_c, issued,
            )
        };
    }
}
