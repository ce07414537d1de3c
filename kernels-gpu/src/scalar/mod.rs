//! The scalar tier on the GPU (contract C3).
//!
//! **The reduction order.** Every output element `C[i, j]` is one f32 accumulator that starts
//! at +0.0 and takes `fma.rn.f32(A[i, k], B[k, j], acc)` for k = 0, 1, …, K−1 in ascending
//! order, one rounding per fma. Then, in the epilogue, one `add.rn.f32` of the bias, one
//! `add.rn.f32` into C in accumulate mode, and one round-to-nearest-even to the output dtype.
//! This is exactly what the CPU backend computes, so the bits agree for every shape.
//!
//! Only [`mainloop`] (and [`rows`], the kernel of calls with M ≤ 64) decides the order, and
//! it depends on nothing but K: the tile shape,
//! the tile's position, M, N, the batch and the grid never change it. The K loop is split
//! into tiles of `BK` steps for staging, but every step feeds the same accumulator in the same
//! order. Steps past K (the tail of the last K tile) multiply zeros: `fma(0, 0, acc)` is
//! `acc` exactly, because an accumulator started at +0.0 can never be −0.0.
//!
//! Files: [`config`] the tile constants, [`crate::schedule`] which tile a block computes,
//! [`mainloop`] staging and the fma chain, [`epilogue`] bias, accumulate, rounding and store;
//! [`rows`] the few-row kernel (M ≤ 64), the same chain with one thread per column;
//! [`grouped`] the grouped kernel (Mixture-of-Experts rows split, the group ends read on the
//! device), the same chain with one thread per element.

pub use sgemm_bi_abi::scalar as config;
pub mod epilogue;
pub mod grouped;
pub mod mainloop;
pub mod rows;

use crate::arch::shared::dyn_smem_base;
use crate::element::Element;
use crate::params::GemmParams;
use crate::schedule;
use core::arch::nvptx::{_block_idx_x, _grid_dim_x, _thread_idx_x};

/// The whole kernel (A is contiguous along K when row-major, B when column-major): for each tile this block owns, run the mainloop, then the epilogue.
///
/// # Safety
/// `p` describes buffers that are valid for the spans the host validated; the block has
/// `config::THREADS` threads and `config::smem_bytes(BN, BK)` of dynamic shared memory.
#[inline(always)]
pub unsafe fn gemm<
    E: Element,
    const A_K_CONTIGUOUS: bool,
    const B_K_CONTIGUOUS: bool,
    const BN: u32,
    const BK: u32,
    const TN: usize,
    const STEPS: u32,
    const COPY_ASYNC: bool,
    const CURSORS: bool,
>(
    p: &GemmParams,
) {
    const { config::check::<BN, BK, TN>() };
    let tid = _thread_idx_x() as u32;
    let smem = dyn_smem_base();
    let total = p.tiles_m * p.tiles_n * p.batch;
    let mut tile = _block_idx_x() as u64;
    while tile < total {
        let t = schedule::tile_coords::<{ config::BM }, BN>(p, tile);
        // SAFETY: forwarded contract; `t` is a tile inside the problem.
        let acc = unsafe {
            mainloop::run::<E, A_K_CONTIGUOUS, B_K_CONTIGUOUS, BN, BK, TN, STEPS, COPY_ASYNC, CURSORS>(
                p, &t, tid, smem,
            )
        };
        // SAFETY: forwarded contract.
        unsafe { epilogue::store::<BN, TN>(p, &t, tid, &acc) };
        tile += _grid_dim_x() as u64;
    }
}
