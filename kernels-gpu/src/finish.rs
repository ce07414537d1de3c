//! The end of every chain, the same for every tier: one f32 add of the bias, one f32 add into
//! C in accumulate mode, NaN canonicalised (so the bits match the CPU backend, which
//! propagates payloads differently), and one round-to-nearest-even to the output dtype.

use crate::arch::convert::{
    cvt_f32_f16, cvt_rn_bf16_f32, cvt_rn_bf16x2_f32, cvt_rn_f16_f32, cvt_rn_f16x2_f32,
};
use crate::params::{
    GemmParams, BIAS_BF16, BIAS_F16, BIAS_F32, OUT_ACCUMULATE_F32, OUT_BF16, OUT_F16,
};
use sgemm_bi_abi::numeric::{CANONICAL_NAN_16, CANONICAL_NAN_F32};

/// Bias element `j` as f32 (exact upcast).
///
/// # Safety
/// `j < N` and the bias buffer holds N elements of `p.bias_dtype`.
#[inline(always)]
pub unsafe fn bias_at(p: &GemmParams, j: u64) -> f32 {
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

/// `p` with its bias moved to group `group`'s N values: a grouped call's bias is N values
/// per group, and each group's chain ends as its dense call's does.
#[inline(always)]
pub fn group_bias(p: &GemmParams, group: u64) -> GemmParams {
    let bytes: u64 = if p.bias_dtype == BIAS_F32 { 4 } else { 2 };
    GemmParams {
        bias: p.bias + group * p.n * bytes,
        ..*p
    }
}

/// Finishes one element and stores it at `idx` of C.
///
/// # Safety
/// `idx` is inside C's validated span.
#[inline(always)]
pub unsafe fn finish(p: &GemmParams, idx: usize, chain: f32, bias: Option<f32>) {
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

/// Two adjacent finished 16-bit outputs, packed (`v[0]` in bits 0..16): bf16 when `bf16`,
/// else f16. Element by element [`finish`]'s rounding: one round-to-nearest-even (both in
/// one packed conversion), NaN as the canonical NaN (a select). `v` already holds the bias.
#[inline(always)]
pub fn finished_16(v: [f32; 2], bf16: bool) -> u32 {
    let packed = if bf16 {
        cvt_rn_bf16x2_f32(v[0], v[1])
    } else {
        cvt_rn_f16x2_f32(v[0], v[1])
    };
    let lo = if v[0] != v[0] {
        CANONICAL_NAN_16 as u32
    } else {
        packed & 0xFFFF
    };
    let hi = if v[1] != v[1] {
        (CANONICAL_NAN_16 as u32) << 16
    } else {
        packed & 0xFFFF_0000
    };
    lo | hi
}

/// The two adjacent f32 outputs of accumulate mode, from their chains, their bias and what
/// C held (`old`, loaded by the caller, so that it can issue its loads ahead of the adds).
/// Element by element the same arithmetic as [`finish`]: the bias add, the add into C, NaN
/// as the canonical NaN (a select).
#[inline(always)]
pub fn accumulated2_32(chain: [f32; 2], bias: Option<[f32; 2]>, old: [f32; 2]) -> [u32; 2] {
    let v = match bias {
        Some(b) => [chain[0] + b[0], chain[1] + b[1]],
        None => chain,
    };
    [v[0] + old[0], v[1] + old[1]].map(finished_f32)
}

/// The bits of `v` as a finished f32 output: NaN as the canonical NaN.
#[inline(always)]
pub fn finished_f32(v: f32) -> u32 {
    if v != v {
        CANONICAL_NAN_F32
    } else {
        v.to_bits()
    }
}
