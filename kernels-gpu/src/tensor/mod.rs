//! The tensor-core tier on sm_80 and newer: `mma.sync` (contract C4).
//!
//! **The reduction order.** Every output element `C[i, j]` is one f32 accumulator that starts
//! at +0.0. K is consumed in ascending steps of 16: step `s` (s = 0, 1, …, ⌈K/16⌉ − 1) is one
//! `mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32` (`.f16` for f16 inputs) that adds
//! the 16 products `A[i, 16s + t] · B[16s + t, j]`, t = 0..16, to that same accumulator, with
//! the tensor core's own arithmetic for one step (measured on the H200, below and in
//! `tests/data/tc-h200/README.md`). The K tail is padded with zeros to a multiple of 16:
//! elements with k ≥ K are +0.0 in both operands, and no step lies wholly past K. Then, in the
//! epilogue (`crate::finish`, shared with the scalar tier): one `add.rn.f32` of the bias,
//! one `add.rn.f32` into C in accumulate mode, NaN canonicalised (0x7FFF_FFFF in f32, 0x7FFF
//! in bf16/f16), and one round-to-nearest-even to the output dtype.
//!
//! **The step's arithmetic on sm_90** (measured on an H200; the CPU backend computes it,
//! `host/src/cpu/tensor_model/`). With the accumulator c, the 16 exact products
//! `p_t = a_t · b_t` of one step, and `e(x)` the exponent of x's encoding — `⌊log2 |x|⌋`
//! for a normal x, the format's smallest normal exponent for a subnormal one (−126 for bf16
//! and for c, −14 for f16), not its own:
//!
//! 1. E = the largest of `e(a_t) + e(b_t)` over the nonzero products, `e(c)` when c ≠ 0,
//!    and −133;
//! 2. c and every p_t are truncated toward zero to a multiple of 2^(E−25);
//! 3. the truncated terms are summed exactly;
//! 4. the sum is truncated toward zero to f32 (to the subnormal grid below 2^−126); a
//!    magnitude ≥ 2^128 becomes ±Inf, and a sum that is zero or truncates to zero +0.0.
//!
//! NaN and Inf follow IEEE 754: NaN for a NaN operand or accumulator, for Inf · 0 and for
//! infinities of both signs, else the infinity.
//!
//! On sm_90 this model *defines* the tier's bits. It reproduces all 196,608 recorded outputs
//! (`tests/data/tc-h200/`: bf16 and f16, six distributions; mma.sync and wgmma agree on
//! every one) and the H200's bits on all 6,283,105 outputs of the wider comparison of
//! 2026-11-29 (`tests/gpu_tc_model.rs`: every distribution, layout and K tail, long K,
//! NaN / Inf / Inf · 0, subnormal inputs in bf16 and f16, random calls with bias and
//! accumulate modes), where it was fitted: subnormal inputs, the floor of E and the sign of
//! a zero are what that comparison settled (`tests/data/tc-h200/mismatches-2026-11-29.tsv`).
//! Other GPU families (sm_80, sm_100, …) may compute a step differently, and their bits are
//! then theirs only; `tests/gpu_tc_model.rs` (the CPU model against the GPU, bit for bit,
//! over more than 10⁶ outputs; `bash .gpu/run gpu_tc_model` on that GPU) is how to check
//! one.
//!
//! Only [`mainloop`] decides the order, and it depends on nothing but K: no split-K, no step
//! size other than 16, no order that depends on M, N, the batch, the tile's position or the
//! grid. Every entry point (each dtype, each layout pair, the cp.async loader and the
//! element-wise loader for operands that are not 16-byte aligned) stages the same values into
//! the same shared-memory layout and runs the same steps, so a dispatcher may choose among
//! them, and among tile shapes, by M, N and alignment without changing any bit.
//!
//! Files: [`config`] the tile constants, [`crate::schedule`] which tile a block computes,
//! [`mainloop`] the cp.async pipeline, ldmatrix and the MMA steps, [`epilogue`] the store.
//!
//! Shape: a (128, 128) block tile, K staged 32 at a time through a 4-stage cp.async
//! pipeline; 8 warps as 2 × 4, each owning a (64, 32) piece as 4 × 4 m16n8 fragments.

pub use sgemm_bi_abi::tensor as config;
pub mod epilogue;
pub mod mainloop;

use crate::arch::shared::dyn_smem_base;
use crate::element::MmaElement;
use crate::params::GemmParams;
use crate::schedule;
use core::arch::nvptx::{_block_idx_x, _grid_dim_x, _thread_idx_x};

/// The whole kernel (A is contiguous along K when row-major, B when column-major; `CP_ASYNC`
/// picks the 16-byte loader): for each tile this block owns, the mainloop, then the epilogue.
///
/// # Safety
/// `p` describes buffers that are valid for the spans the host validated; the block has
/// `config::THREADS` threads and `config::SMEM_BYTES` of dynamic shared memory; with
/// `CP_ASYNC`, A and B (base, leading dimension, batch stride) are 16-byte aligned.
#[inline(always)]
pub unsafe fn gemm<
    E: MmaElement,
    const A_K_CONTIGUOUS: bool,
    const B_K_CONTIGUOUS: bool,
    const CP_ASYNC: bool,
>(
    p: &GemmParams,
) {
    let tid = _thread_idx_x() as u32;
    let smem = dyn_smem_base();
    let total = p.tiles_m * p.tiles_n * p.batch;
    let mut tile = _block_idx_x() as u64;
    while tile < total {
        let t = schedule::tile_coords::<{ config::BM }, { config::BN }>(p, tile);
        // SAFETY: forwarded contract; `t` is a tile inside the problem.
        let acc = unsafe {
            mainloop::run::<E, A_K_CONTIGUOUS, B_K_CONTIGUOUS, CP_ASYNC>(p, &t, tid, smem)
        };
        // SAFETY: forwarded contract.
        unsafe { epilogue::store(p, &t, tid, &acc) };
        tile += _grid_dim_x() as u64;
    }
}
