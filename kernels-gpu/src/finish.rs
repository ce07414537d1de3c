//! The end of every chain, the same for every tier: one f32 add of the bias, one f32 add into
//! C in accumulate mode, NaN canonicalised (so the bits match the CPU backend, which
//! propagates payloads differently), and one round-to-nearest-even to the output dtype.

use crate::arch::convert::{cvt_f32_f16, cvt_rn_bf16_f32, cvt_rn_f16_f32};
use crate::arch::global::{ld_global_v4_f32, st_global_v2_b32, st_global_v4_b32};
use crate::params::{
    GemmParams, BIAS_BF16, BIAS_F16, BIAS_F32, OUT_ACCUMULATE_F32, OUT_BF16, OUT_F16,
};

const CANONICAL_NAN_F32: u32 = 0x7FFF_FFFF;
const CANONICAL_NAN_16: u16 = 0x7FFF;

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

/// Bytes of one element of C for `p.out_mode`.
#[inline(always)]
pub fn c_elem_bytes(p: &GemmParams) -> u64 {
    match p.out_mode {
        OUT_BF16 | OUT_F16 => 2,
        _ => 4,
    }
}

/// Whether every run of four elements of C that starts at a column divisible by 4 is
/// aligned for one vector access (4 × the element size): C's address, its leading
/// dimension and its batch stride allow it. The same for every thread of a launch.
#[inline(always)]
pub fn c_vectors_aligned(p: &GemmParams) -> bool {
    let bytes = c_elem_bytes(p);
    (p.c % (4 * bytes)) == 0 && p.ldc % 4 == 0 && p.batch_stride_c % 4 == 0
}

/// Finishes four adjacent elements `idx..idx + 4` of C with one vector load (accumulate
/// mode) and one vector store: element by element the same arithmetic as [`finish`].
///
/// # Safety
/// The four elements are inside C's validated span and `idx` is a multiple of 4 with
/// [`c_vectors_aligned`] true.
#[inline(always)]
pub unsafe fn finish4(p: &GemmParams, idx: usize, chain: [f32; 4], bias: Option<[f32; 4]>) {
    let mut v = chain;
    if let Some(b) = bias {
        for e in 0..4 {
            v[e] += b[e];
        }
    }
    match p.out_mode {
        OUT_BF16 | OUT_F16 => {
            let mut h = [0u32; 4];
            for e in 0..4 {
                let bits16 = if v[e] != v[e] {
                    CANONICAL_NAN_16
                } else if p.out_mode == OUT_BF16 {
                    cvt_rn_bf16_f32(v[e])
                } else {
                    cvt_rn_f16_f32(v[e])
                };
                h[e] = bits16 as u32;
            }
            let addr = p.c + 2 * idx as u64;
            // SAFETY: forwarded contract: 8-byte aligned, inside C.
            unsafe { st_global_v2_b32(addr, [h[0] | (h[1] << 16), h[2] | (h[3] << 16)]) };
        }
        mode => {
            let addr = p.c + 4 * idx as u64;
            if mode == OUT_ACCUMULATE_F32 {
                // SAFETY: forwarded contract: 16-byte aligned, inside C, read only by this
                // thread (each element of C belongs to one thread).
                let old = unsafe { ld_global_v4_f32(addr) };
                for e in 0..4 {
                    v[e] += old[e];
                }
            }
            let mut bits = [0u32; 4];
            for e in 0..4 {
                bits[e] = if v[e] != v[e] {
                    CANONICAL_NAN_F32
                } else {
                    v[e].to_bits()
                };
            }
            // SAFETY: forwarded contract: 16-byte aligned, inside C.
            unsafe { st_global_v4_b32(addr, bits) };
        }
    }
}
