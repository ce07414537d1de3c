//! The tensor-core tier on Hopper (sm_90a): `wgmma` fed by the bulk tensor copy engine
//! (contract C4, the same as `crate::tensor`'s).
//!
//! **The reduction order** is the mma.sync path's: every output element `C[i, j]` is one f32
//! accumulator that starts at +0.0; K is consumed in ascending steps of 16, step `s` being
//! one `wgmma.mma_async.m64nNk16.f32.bf16.bf16` (`.f16`) that adds the 16 products
//! `A[i, 16s + t] · B[16s + t, j]`, t = 0..16, to that accumulator (`scale-d` = 1, never a
//! fresh start); elements with k ≥ K are zeros (the copy engine fills boxes outside the
//! tensor with zeros) and no step lies wholly past K. Then the shared epilogue
//! (`crate::finish`). Whether one wgmma step gives the same bits as one mma.sync step is
//! measured on the H200 by `tests/gpu_tensor_cores.rs::
//! the_mma_sync_and_wgmma_paths_give_the_same_bits`; the dispatcher mixes the two paths
//! only because that test finds them identical.
//!
//! Only [`mainloop`] decides the order, and it depends on nothing but K: no split-K, the
//! tile width N of the wgmma (32 to 256), the persistent grid and the tile order are
//! all free to vary with M, N and the GPU without changing a bit.
//!
//! Shape: a (BM, BN) block tile, K staged 64 at a time through `stages(BN, BM)` stages;
//! warpgroup 0 is the producer (one thread issues the copies, registers given back with
//! `setmaxnreg`), the others are consumers, each owning 64 rows of the tile as one
//! m64nBNk16 accumulator: two for BM = 128 (4, 6 or 8 stages; with a K-contiguous B also
//! 224 and 112 columns wide, `config::ONE_ROUND_BN`, 4 and 6 stages, for calls whose tiles
//! fill the SMs in one round only at those widths), one for the small-M tiles of
//! 64, 32, 16 and 8 rows (12 to 21 stages of BN = 64: more of B in flight, see
//! `config::BM_CHOICES`; with a K-contiguous B also BN = 48, 32 or 16, `config::DECODE_BN`,
//! for more blocks on a narrow N at decode, whose stages hold two to eight K tiles of 64 so
//! that each carries at least 8 KiB of B (16 KiB for the 16- and 32-column tiles of 8 and
//! 16 rows), `config::k_slices`: 4 to 13 stages; and BN = 112, the one-round width, 8 to 12
//! stages). The decode tiles of 8 and 16 rows take
//! each k16 step by `mma.sync` instead, the warpgroup's warps splitting the columns
//! (`decode`): the same products into the same accumulator, with a shorter dependent
//! latency, which is what bounds one row's chain at long K. Tiles of 8 and 16 rows with A
//! and B K-contiguous are also built 128 and 256 columns wide (`config::WIDE_SHORT_BN`), for
//! many short products (a decode step's attention scores) and wide heads, where fewer tiles
//! take fewer rounds; those with two consumer warpgroups taking the tiles in turn (the
//! ping-pong schedule below).
//! Blocks are persistent: block b computes tiles b, b + grid, ….
//!
//! That is the cooperative schedule ([`Cooperative`]). The ping-pong schedule
//! ([`pingpong::PingPong`]: 128 × 128 tiles, picked for accumulate mode, and the wide tiles
//! of 8 and 16 rows) gives each consumer warpgroup whole tiles, every other one of the
//! block, so one's epilogue overlaps the other's mainloop.

pub use sgemm_bi_abi::hopper as config;
/// `$consume::<…, STORE>(…)` with `STORE` the store kind (`store_kind`) of `$p.out_mode`:
/// the one place where a launch's output mode picks its epilogue, for every consumer
/// schedule. Decided once, around a consumer's whole loop, so that each consumer's code is
/// built for one kind (see `epilogue`); a branch in the epilogue, with the accumulators live
/// across it, made ptxas spill them. A macro, so that each schedule's code is what it would
/// be with the branch written out (the vendored PTX depends on it).
macro_rules! by_store_kind {
    ($p:expr, $consume:ident::<$($g:ident),*>($($arg:expr),*)) => {
        if $p.out_mode == $crate::params::OUT_ACCUMULATE_F32 {
            $consume::<$($g),*, { $crate::hopper::store_kind::ACCUMULATE }>($($arg),*)
        } else if $p.out_mode == $crate::params::OUT_F32 {
            $consume::<$($g),*, { $crate::hopper::store_kind::COPY_F32 }>($($arg),*)
        } else {
            $consume::<$($g),*, { $crate::hopper::store_kind::COPY_16 }>($($arg),*)
        }
    };
}

pub mod decode;
pub mod epilogue;
pub mod grouped;
pub mod mainloop;
pub mod pingpong;
pub mod walk;

use crate::arch::cluster::{cluster_ctarank, cluster_sync};
use crate::arch::shared::dyn_smem_base;
use crate::arch::sync::{
    bar_sync, griddepcontrol_launch_dependents, griddepcontrol_wait, setmaxnreg_dec,
    setmaxnreg_inc, warp_uniform,
};
use crate::arch::tma::prefetch_tensormap;
use crate::element::WgmmaElement;
use crate::params::GemmParams;
use config::{CONSUMER_REGS, PRODUCER_REGS};
use core::arch::nvptx::_thread_idx_x;
use mainloop::Stages;
use walk::Walk;

/// The whole kernel (A is contiguous along K when row-major, B when column-major) for
/// (BM, BN) tiles, in clusters of `CLUSTER` blocks along M (1: no clusters; see `walk`),
/// the consumer warpgroups sharing the tiles as `S` says ([`Cooperative`] or
/// [`pingpong::PingPong`]).
///
/// # Safety
/// `p` describes buffers valid for the spans the host validated; `maps` are the generic
/// addresses of the tensor maps of A, B and C built for them (`host/src/cuda/hopper.rs`; C's
/// only outside accumulate mode, and then for C's dtype with boxes of 128 bytes × 64 rows);
/// the block
/// has `config::threads(BM)` threads and `config::SMEM_BYTES` of dynamic shared memory; with
/// `CLUSTER` > 1 the grid is launched in clusters of `CLUSTER` blocks along x.
#[inline(always)]
pub unsafe fn gemm<
    E: WgmmaElement,
    const A_K: bool,
    const B_K: bool,
    const BN: u32,
    const BM: u32,
    const CLUSTER: u32,
    S: ConsumerSchedule,
>(
    p: &GemmParams,
    maps: [u64; 3],
    l2_prefetch_k_tiles: u32,
) {
    let [map_a, map_b, map_c] = maps;
    const {
        assert!(
            BM >= config::WG_M || A_K,
            "tiles below 64 rows are one K-contiguous swizzle atom of A"
        )
    };
    const {
        assert!(
            config::k_slices(BN, BM) == 1 || B_K,
            "stages of several K slices copy one K-contiguous B box per slice"
        )
    };
    const {
        assert!(
            (BN % config::SWIZZLE_ELEMS == 0 && BN <= 256) || B_K,
            "an N-contiguous B tile is whole 64-column boxes"
        )
    };
    const {
        assert!(
            CLUSTER == 1
                || !config::clusters_along_n(BM)
                || (config::k_slices(BN, BM) > 1 && A_K && BM % (8 * CLUSTER) == 0),
            "clusters along N share K-contiguous A tiles of the decode stages, whole swizzle \
             atoms of rows a block"
        )
    };
    let tid = _thread_idx_x() as u32;
    let wg = warp_uniform(tid / 128);
    let st = Stages::<BN, BM>::new((dyn_smem_base() + 1023) & !1023);
    let rank = if CLUSTER > 1 { cluster_ctarank() } else { 0 };
    // SAFETY: `rank` is this block's rank in its cluster (forwarded launch contract).
    let walk = unsafe { Walk::<CLUSTER>::new::<BM>(p, rank) };
    if tid == 0 {
        // SAFETY: the barriers lie in the SMEM_BYTES the block was launched with; the maps
        // are kernel parameters, which the previous kernel cannot have written, and a
        // prefetch into L2 is a hint (`mainloop::prefetch_b_l2`), so neither waits for it.
        unsafe {
            st.init(CLUSTER, S::readers(BM));
            prefetch_tensormap(map_a);
            prefetch_tensormap(map_b);
            mainloop::prefetch_b_l2::<B_K, BN, BM, CLUSTER>(
                p,
                map_b,
                &walk,
                rank,
                l2_prefetch_k_tiles,
            );
        }
    }
    // The peers signal this block's barriers: they must see them initialised.
    if CLUSTER > 1 {
        cluster_sync();
    } else {
        bar_sync();
    }
    // Programmatic dependent launch (the host's launch attribute): the setup above may overlap
    // the previous kernel's last blocks; nothing past here touches global memory before that
    // kernel is complete and its writes visible, so reading A, B and C and writing C are
    // ordered after it as in a plain launch. The next kernel may be scheduled at once: its
    // blocks take the SMs this grid leaves idle or frees (one block fills an SM's shared
    // memory, so they never share one), and each waits here in turn. Every thread issues
    // both, with no branch: a `tid == 0` test here let LLVM thread the one before the barrier
    // through it, and the barrier (`.aligned`: a warp's threads must reach the same
    // instruction) was duplicated into two divergent paths of warp 0 — the kernels hung
    // (docs/perf-notes.md, version 7). Repeated `launch_dependents` in a block do nothing
    // more than the first.
    griddepcontrol_wait();
    griddepcontrol_launch_dependents();
    if wg == 0 {
        setmaxnreg_dec::<PRODUCER_REGS>();
        if tid == 0 {
            // SAFETY: forwarded contract.
            unsafe {
                mainloop::produce::<A_K, B_K, BN, BM, CLUSTER>(p, &st, map_a, map_b, &walk, rank);
            }
        }
    } else {
        setmaxnreg_inc::<CONSUMER_REGS>();
        // SAFETY: forwarded contract; this thread is a consumer's.
        unsafe { S::consume::<E, A_K, B_K, BN, BM, CLUSTER>(p, &st, &walk, tid, map_c) };
    }
}

/// How the consumer warpgroups share a block's tiles: a type parameter of [`gemm`], so each
/// entry point is built for one. (Which tiles a block takes is the tile walk's business:
/// `walk` and `crate::schedule`.)
pub trait ConsumerSchedule {
    /// Consumer warpgroups of a block that read each stage, for tiles of `bm` rows.
    fn readers(bm: u32) -> u32;

    /// A consumer warpgroup's whole life.
    ///
    /// # Safety
    /// As for [`gemm`]; every thread of consumer warpgroup `tid / 128` (≥ 1) calls it
    /// together; the stages' `empty` barriers count [`Self::readers`] warpgroups per block.
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
    );
}

/// The consumer warpgroups split each tile's rows (64 each) and work on the same tile.
pub struct Cooperative;

impl ConsumerSchedule for Cooperative {
    #[inline(always)]
    fn readers(bm: u32) -> u32 {
        config::consumers(bm)
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
        // SAFETY (all arms): forwarded contract; the kind is the launch's output mode.
        unsafe {
            by_store_kind!(
                p,
                consume_tiles::<E, A_K, B_K, BN, BM, CLUSTER>(p, st, walk, tid, map_c)
            )
        }
    }
}

/// How a consumer stores its tiles (`epilogue`): a const parameter, so plain constants.
pub(crate) mod store_kind {
    /// bf16 or f16 overwrite, through the copy engine.
    pub const COPY_16: u32 = 0;
    /// f32 overwrite, through the copy engine.
    pub const COPY_F32: u32 = 1;
    /// f32 accumulate, pairs from registers.
    pub const ACCUMULATE: u32 = 2;
}

/// A consumer warpgroup's whole life: for each tile of this block, the chain over K, then
/// the store `STORE`.
///
/// # Safety
/// As for [`gemm`]; every thread of consumer warpgroup `tid / 128` (≥ 1) calls it together,
/// and `STORE` is the kind of `p.out_mode`; `map_c` as for [`gemm`].
#[inline(always)]
unsafe fn consume_tiles<
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
    let wg = warp_uniform(tid / 128);
    let mut it = 0u32;
    let mut issued = 0u32;
    let (mut tile, step) = walk.range();
    while tile < walk.count() {
        let t = walk.tile::<BM, BN>(tile);
        // A warpgroup whose 64 rows all lie past M computes nothing (small M, and the rows
        // of a cluster tile past M).
        let active = t.m0 + u64::from((wg - 1) * config::WG_M) < p.m;
        // SAFETY (both arms): forwarded contract; the whole warpgroup runs this together.
        let acc = unsafe {
            if active {
                mainloop::consume::<E, A_K, B_K, BN, BM, true, CLUSTER, false>(
                    p,
                    st,
                    wg - 1,
                    tid % 128,
                    &mut it,
                    || {},
                )
            } else {
                mainloop::consume::<E, A_K, B_K, BN, BM, false, CLUSTER, false>(
                    p,
                    st,
                    wg - 1,
                    tid % 128,
                    &mut it,
                    || {},
                )
            }
        };
        // A warpgroup past M has nothing to store.
        if active {
            let (wgi, wtid) = (wg - 1, tid % 128);
            let pieces = st.epilogue(wgi);
            // SAFETY: forwarded contract; the warpgroup's barrier (1 + wgi) and epilogue
            // pieces are its own.
            unsafe {
                epilogue::store_part::<BN, BM, 0, STORE>(
                    p,
                    &t,
                    wgi,
                    wgi,
                    wtid,
                    &acc,
                    pieces,
                    map_c,
                    &mut issued,
                )
            };
        }
        tile += step;
    }
    epilogue::drain(tid % 128);
}
