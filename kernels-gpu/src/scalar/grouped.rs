//! The grouped form of the scalar tier (Mixture-of-Experts; torch's 2-D × 3-D `grouped_mm`,
//! the rows split): the rows of A (the tokens) are split into groups by cumulative ends that
//! the kernel reads from device memory, and group g's rows are multiplied by batch entry g
//! of B. The host never reads the ends, so a call does not wait for the work that wrote them
//! and can be captured in a CUDA graph.
//!
//! **The bits are the dense kernels'.** One thread per output element (the blocks loop over
//! them): it finds its row's group, then computes the contract's chain (C3, `super`) itself:
//! one f32 accumulator from +0.0 taking `fma(A[i, k], B[g][k, j], acc)` for k = 0 … K−1 in
//! order, then the end every tier shares (`crate::finish`: the group's bias, the add into C
//! in accumulate mode, NaN, rounding). Nothing here depends on the group's size or start,
//! so a row's bits are those of the dense call of its group.
//!
//! The rows past the last group's end belong to no group: an overwriting call writes them as
//! +0.0 (the empty chain, no bias), an accumulating one leaves them as they are, as the
//! host's group-by-group form does.
//!
//! **Bad ends** are clamped as the Hopper grouped kernel clamps them (`hopper::grouped`): a
//! group ends at its own end, but no earlier than the previous group's and no later than the
//! last row. Then the group of row i is the first g whose raw end exceeds i: every earlier
//! end (clamped or not) is at most i, and g's clamped end is above i whether its raw end lay
//! past the rows or not. With ends that never decrease that is a binary search; each block
//! checks that once, and with ends that do decrease each thread scans them in order instead
//! (slow, but only a caller's error gets there, and block 0 reports it:
//! `crate::group_ends`).

use super::config::grouped::THREADS;
use crate::arch::sync::bar_red_or;
use crate::element::Element;
use crate::finish::{bias_at, finish, group_bias};
use crate::group_ends::report_bad_ends;
use crate::params::{GemmParams, BIAS_NONE, OUT_ACCUMULATE_F32};
use core::arch::nvptx::{_block_idx_x, _grid_dim_x, _thread_idx_x};
use core::intrinsics::fmaf32;

/// End `g` as written.
///
/// # Safety
/// `ends` is the device address of more than `g` `i32`s.
#[inline(always)]
unsafe fn end_at(ends: u64, g: u64) -> i64 {
    // SAFETY: forwarded contract.
    i64::from(unsafe { *(ends as *const i32).add(g as usize) })
}

/// Whether some end of the `groups` at `ends` is below the previous one: then the binary
/// search does not apply. The block's threads read the ends together; every thread of the
/// block calls it (a block barrier).
///
/// # Safety
/// `ends` is the device address of `groups` `i32`s.
#[inline(always)]
unsafe fn decreasing(ends: u64, groups: u64, tid: u32) -> bool {
    let mut found = false;
    let mut g = 1 + u64::from(tid);
    while g < groups {
        // SAFETY: g − 1 < g < groups (forwarded contract).
        found |= unsafe { end_at(ends, g) < end_at(ends, g - 1) };
        g += u64::from(THREADS);
    }
    bar_red_or(found)
}

/// The group of row `row`: the first of the `groups` whose end exceeds it (see the module
/// docs), or `groups` for a row past the last end.
///
/// # Safety
/// `ends` is the device address of `groups` `i32`s; `sorted` only if they never decrease.
#[inline(always)]
unsafe fn group_of(ends: u64, groups: u64, row: u64, sorted: bool) -> u64 {
    let row = row as i64;
    if sorted {
        let (mut lo, mut hi) = (0u64, groups);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            // SAFETY: mid < hi ≤ groups (forwarded contract).
            if unsafe { end_at(ends, mid) } > row {
                hi = mid;
            } else {
                lo = mid + 1;
            }
        }
        lo
    } else {
        let mut g = 0;
        // SAFETY: g < groups (forwarded contract).
        while g < groups && unsafe { end_at(ends, g) } <= row {
            g += 1;
        }
        g
    }
}

/// The whole kernel: B is K-contiguous when `B_K_CONTIGUOUS`, A always (the tokens' rows).
///
/// # Safety
/// `p` describes the whole call (`p.m` the rows of every group, `p.n` ≥ 1, `p.batch` ≥ 1
/// groups, B
/// `p.batch` entries `p.batch_stride_b` apart, the bias N per group) on buffers valid for the
/// spans the host validated; `ends` is the device address of `p.batch` `i32`s, not written
/// while the kernel runs (every block must find the same groups); `errors` is 0 or the
/// address of a `GroupErrorRecord`; the block has `THREADS` threads.
#[inline(always)]
pub unsafe fn gemm<E: Element, const B_K_CONTIGUOUS: bool>(p: &GemmParams, ends: u64, errors: u64) {
    let tid = _thread_idx_x() as u32;
    // SAFETY: the host launches no empty call (forwarded contract), so the divisions below
    // have no path for a zero divisor.
    unsafe { core::hint::assert_unchecked(p.n != 0) };
    // SAFETY: forwarded contract; every thread of the block gets here.
    let sorted = !unsafe { decreasing(ends, p.batch, tid) };
    // After the barrier, so that the block's other warps need not wait for the report.
    if errors != 0 && _block_idx_x() == 0 && tid / 32 == 0 {
        // SAFETY: one whole warp (the branch is uniform across it); forwarded contract.
        unsafe { report_bad_ends(ends, p.batch, p.m, errors, tid % 32) };
    }
    let total = p.m * p.n;
    let step = u64::from(_grid_dim_x() as u32) * u64::from(THREADS);
    let mut e = u64::from(_block_idx_x() as u32) * u64::from(THREADS) + u64::from(tid);
    while e < total {
        let (i, j) = (e / p.n, e % p.n);
        let idx = (i * p.ldc + j) as usize;
        // SAFETY: forwarded contract.
        let g = unsafe { group_of(ends, p.batch, i, sorted) };
        if g == p.batch {
            if p.out_mode != OUT_ACCUMULATE_F32 {
                // SAFETY: (i, j) is inside C.
                unsafe { finish(p, idx, 0.0, None) };
            }
        } else {
            let a_row = i * p.lda;
            let b_base = g * p.batch_stride_b;
            let (b_k, b_j) = if B_K_CONTIGUOUS {
                (1, j * p.ldb)
            } else {
                (p.ldb, j)
            };
            let mut acc = 0.0f32;
            let mut k = 0;
            while k < p.k {
                // SAFETY: row i < M and k < K of A; entry g < batch, (k, j) inside it, of B
                // (forwarded contract).
                let (a, b) = unsafe {
                    (
                        E::load_raw(p.a, a_row + k),
                        E::load_raw(p.b, b_base + k * b_k + b_j),
                    )
                };
                acc = fmaf32(E::to_f32(a), E::to_f32(b), acc);
                k += 1;
            }
            let biased = group_bias(p, g);
            let bias = if p.bias_dtype == BIAS_NONE {
                None
            } else {
                // SAFETY: j < N, inside group g's N values.
                Some(unsafe { bias_at(&biased, j) })
            };
            // SAFETY: (i, j) is inside C.
            unsafe { finish(p, idx, acc, bias) };
        }
        e += step;
    }
}
