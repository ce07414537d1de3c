//! The end of every chain: one f32 add of the bias, one f32 add into C in accumulate mode,
//! NaN canonicalised (so the bits match the CPU backend, which propagates payloads
//! differently), and one round-to-nearest-even to the output dtype.

use super::mainloop::{col_of, row_of, Accumulators};
use super::scheduler::Tile;
use crate::arch::convert::{cvt_f32_f16, cvt_rn_bf16_f32, cvt_rn_f16_f32};
use crate::params::{
    ScalarGemmParams, BIAS_BF16, BIAS_F16, BIAS_F32, BIAS_NONE, OUT_ACCUMULATE_F32, OUT_BF16,
    OUT_F16,
};

const CANONICAL_NAN_F32: u32 = 0x7FFF_FFFF;
const CANONICAL_NAN_16: u16 = 0x7FFF;

/// Bias element `j` as f32 (exact upcast).
///
/// # Safety
/// `j < N` and the bias buffer holds N elements of `p.bias_dtype`.
#[inline(always)]
unsafe fn bias_at(p: &ScalarGemmParams, j: u64) -> f32 {
    // SAFETY: forwarded contract.
    unsafe {
        match p.bias_dtype {
            BIAS_F32 => *(p.bias as *const f32).add(j as usize),
            BIAS_BF16 => f32::from_bits((*(p.bias as *const u16).add(j as usize) as u32) << 16),
            BIAS_F16 => cvt_f32_f16(*(p.bias as *const u16).add(j as usize)),
            _ => 0.0,
        }
    }
}

/// Finishes and stores this thread's part of tile `t`.
///
/// # Safety
/// C, and the bias when present, are valid for the spans the host validated.
#[inline(always)]
pub unsafe fn store(p: &ScalarGemmParams, t: &Tile, tid: u32, acc: &Accumulators) {
    let c_batch = t.batch * p.batch_stride_c;
    unroll8!(c => {
        let j = t.n0 + col_of(tid, c) as u64;
        if j < p.n {
            // SAFETY: j < N.
            let bias = if p.bias_dtype == BIAS_NONE { None } else { Some(unsafe { bias_at(p, j) }) };
            unroll8!(r => {
                let i = t.m0 + row_of(tid, r) as u64;
                if i < p.m {
                    let idx = (c_batch + i * p.ldc + j) as usize;
                    // SAFETY: (i, j) is inside C, so idx is inside its validated span.
                    unsafe { finish(p, idx, acc[r][c], bias) };
                }
            });
        }
    });
}

/// Finishes one element and stores it at `idx` of C.
///
/// # Safety
/// `idx` is inside C's validated span.
#[inline(always)]
unsafe fn finish(p: &ScalarGemmParams, idx: usize, chain: f32, bias: Option<f32>) {
    let mut v = chain;
    if let Some(b) = bias {
        v += b;
    }
    // SAFETY: forwarded contract.
    unsafe {
        match p.out_mode {
            OUT_BF16 => {
                let h = if v != v {
                    CANONICAL_NAN_16
                } else {
                    cvt_rn_bf16_f32(v)
                };
                *(p.c as *mut u16).add(idx) = h;
            }
            OUT_F16 => {
                let h = if v != v {
                    CANONICAL_NAN_16
                } else {
                    cvt_rn_f16_f32(v)
                };
                *(p.c as *mut u16).add(idx) = h;
            }
            mode => {
                let dst = (p.c as *mut f32).add(idx);
                if mode == OUT_ACCUMULATE_F32 {
                    v += *dst;
                }
                *dst = if v != v {
                    f32::from_bits(CANONICAL_NAN_F32)
                } else {
                    v
                };
            }
        }
    }
}
