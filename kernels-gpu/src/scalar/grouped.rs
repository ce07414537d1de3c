//! The grouped forms of the scalar tier (Mixture-of-Experts), both with cumulative group ends
//! that the kernel reads from device memory, so that the host never reads them: a call does
//! not wait for the work that wrote them and can be captured in a CUDA graph.
//!
//! - [`gemm`], the rows split (torch's 2-D × 3-D `grouped_mm`, the experts' forward and input
//!   gradient): the rows of A (the tokens) are split into groups, and group g's rows are
//!   multiplied by batch entry g of B.
//! - [`gemm_reduction`], the reduction split (torch's 2-D × 2-D `grouped_mm`, the experts'
//!   weight gradient): K is split into groups, and group g's C (batch entry g of C) is A's
//!   columns times B's rows of the group's K range. A and B in any layout (strides in the
//!   parameters), no bias.
//!
//! **The bits are the dense kernels'.** One thread per output element (the blocks loop over
//! them): it finds its group, then computes the contract's chain (C3, `super`) itself: one
//! f32 accumulator from +0.0 taking `fma(A[i, k], B[k, j], acc)` for k in order over the
//! group's part of K (all of K for the rows split, B being the group's entry; the group's
//! range for the reduction split), then the end every tier shares (`crate::finish`: the
//! group's bias, the add into C in accumulate mode, NaN, rounding). Nothing here depends on
//! the group's size or start beyond that, so an element's bits are those of the dense call
//! of its group. A reduction group with no K gives the empty chain's +0.0 (then the add into
//! C in accumulate mode), as its dense call does.
//!
//! The rows past the last group's end belong to no group: an overwriting call writes them as
//! +0.0 (the empty chain, no bias), an accumulating one leaves them as they are, as the
//! host's group-by-group form does. K past the last end of a reduction split is not read.
//!
//! **Bad ends** are clamped: a group ends at its own end, but no earlier than the previous
//! group's (clamped) end and no later than the split dimension's extent (the rows, or K).
//! Each block checks once whether the ends ever decrease, and block 0 reports the first bad
//! end (`crate::group_ends`; the limit the rows, or K). Rows split: the group of row i is the
//! first g whose raw end exceeds i: every earlier end (clamped or not) is at most i, and g's
//! clamped end is above i whether its raw end lay past the rows or not. With ends that never
//! decrease that is a binary search; with ends that do decrease each thread scans them in
//! order instead (slow, but only a caller's error gets there). Reduction split: with ends
//! that never decrease, group g's range is its two neighbouring ends each clamped into
//! 0..=K; with ends that do decrease each thread scans the ends up to its group's, clamping
//! each against the previous clamped one.

use super::config::grouped::THREADS;
use crate::arch::sync::bar_red_or;
use crate::element::Element;
use crate::finish::{bias_at, finish, group_bias};
use crate::group_ends::report_bad_ends;
use crate::params::{GemmParams, BIAS_NONE, OUT_ACCUMULATE_F32};
use core::arch::asm;
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

/// The whole kernel of the rows split: B is K-contiguous when `B_K_CONTIGUOUS`, A always (the
/// tokens' rows).
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

/// The K range of group `g` of a split reduction, its ends clamped as the module docs say:
/// each group ends at its own end, but no earlier than the previous group's clamped end (the
/// first: 0) and no later than `k`. With `sorted` ends that is each end clamped into 0..=k.
///
/// # Safety
/// `ends` is the device address of more than `g` `i32`s; `sorted` only if they never
/// decrease.
#[inline(always)]
unsafe fn k_range(ends: u64, g: u64, k: u64, sorted: bool) -> (u64, u64) {
    let clamp = |raw: i64, floor: i64| raw.max(floor).min(k as i64) as u64;
    if sorted {
        // SAFETY: g − 1 < g (forwarded contract).
        let start = if g == 0 {
            0
        } else {
            clamp(unsafe { end_at(ends, g - 1) }, 0)
        };
        // SAFETY: as above.
        (start, clamp(unsafe { end_at(ends, g) }, 0))
    } else {
        let (mut start, mut end) = (0, 0);
        let mut h = 0;
        while h <= g {
            // Keeps ptxas from unrolling the scan further (with it the kernel spilled at its
            // launch bound for sm_120). SAFETY: a directive, no instruction.
            unsafe {
                asm!(
                    ".pragma \"nounroll\";",
                    options(nomem, nostack, preserves_flags)
                )
            };
            start = end;
            // SAFETY: h ≤ g (forwarded contract).
            end = clamp(unsafe { end_at(ends, h) }, end as i64);
            h += 1;
        }
        (start, end)
    }
}

/// The whole kernel of the reduction split: element (i, j) of group g's C is the chain over
/// the group's K range (`k_range`) of A's row i and B's column j, A's element (i, k) at
/// `i · a_steps[0] + k · a_steps[1]` and B's (k, j) at `k · b_steps[0] + j · b_steps[1]`
/// (any layout), C's at `g · p.batch_stride_c + i · p.ldc + j`.
///
/// # Safety
/// `p` describes the whole call (`p.m` ≥ 1 and `p.n` ≥ 1 the rows and columns of every
/// group's C, `p.k` the K of all groups, `p.batch` ≥ 1 groups, C `p.batch` entries
/// `p.batch_stride_c` apart, no bias) on buffers valid for the spans the host validated,
/// with A's and B's layouts the steps given; `ends` is the device address of `p.batch`
/// `i32`s, not written while the kernel runs (every block must find the same ranges);
/// `errors` is 0 or the address of a `GroupErrorRecord`; the block has `THREADS` threads.
#[inline(always)]
pub unsafe fn gemm_reduction<E: Element>(
    p: &GemmParams,
    a_steps: [u64; 2],
    b_steps: [u64; 2],
    ends: u64,
    errors: u64,
) {
    let tid = _thread_idx_x() as u32;
    // SAFETY: the host launches no empty call (forwarded contract), so the divisions below
    // have no path for a zero divisor.
    unsafe { core::hint::assert_unchecked(p.m != 0 && p.n != 0) };
    // SAFETY: forwarded contract; every thread of the block gets here.
    let sorted = !unsafe { decreasing(ends, p.batch, tid) };
    // After the barrier, so that the block's other warps need not wait for the report.
    if errors != 0 && _block_idx_x() == 0 && tid / 32 == 0 {
        // SAFETY: one whole warp (the branch is uniform across it); forwarded contract.
        unsafe { report_bad_ends(ends, p.batch, p.k, errors, tid % 32) };
    }
    let [a_i, a_k] = a_steps;
    let [b_k, b_j] = b_steps;
    // The element a thread starts at and the grid's step, each as (group, row, column): the
    // loop then steps without a division (a 64-bit one costs registers the launch bound
    // does not leave on every target).
    let per_group = p.m * p.n;
    // SAFETY: M × N elements of each group's C lie in its validated span, so the product
    // does not wrap to zero.
    unsafe { core::hint::assert_unchecked(per_group != 0) };
    let split = |e: u64| (e / per_group, e % per_group / p.n, e % p.n);
    let first = u64::from(_block_idx_x() as u32) * u64::from(THREADS) + u64::from(tid);
    let (mut g, mut i, mut j) = split(first);
    let (sg, si, sj) = split(u64::from(_grid_dim_x() as u32) * u64::from(THREADS));
    while g < p.batch {
        // SAFETY: g < p.batch (forwarded contract).
        let (start, end) = unsafe { k_range(ends, g, p.k, sorted) };
        // The chain walks two addresses and stops at A's end of the range: no k counter, and
        // a trip count LLVM cannot compute without a division, so it does not unroll the
        // loop (whose copies would hold multiples of the strides: registers the launch
        // bound does not leave on every target).
        let mut a_at = p.a + (i * a_i + start * a_k) * E::BYTES;
        let a_end = p.a + (i * a_i + end * a_k) * E::BYTES;
        let mut b_at = p.b + (start * b_k + j * b_j) * E::BYTES;
        let mut acc = 0.0f32;
        while a_at != a_end {
            // SAFETY: row i < M and k < K of A, (k, j) of B: inside the validated spans
            // (forwarded contract).
            let (a, b) = unsafe { (E::load_raw(a_at, 0), E::load_raw(b_at, 0)) };
            acc = fmaf32(E::to_f32(a), E::to_f32(b), acc);
            a_at += a_k * E::BYTES;
            b_at += b_k * E::BYTES;
            // Nor ptxas. SAFETY: a directive, no instruction.
            unsafe {
                asm!(
                    ".pragma \"nounroll\";",
                    options(nomem, nostack, preserves_flags)
                )
            };
        }
        // SAFETY: (i, j) of entry g < p.batch is inside C.
        unsafe {
            finish(
                p,
                (g * p.batch_stride_c + i * p.ldc + j) as usize,
                acc,
                None,
            )
        };
        // sj < N and si < M: one carry each.
        j += sj;
        if j >= p.n {
            j -= p.n;
            i += 1;
        }
        i += si;
        if i >= p.m {
            i -= p.m;
            g += 1;
        }
        g += sg;
    }
}
