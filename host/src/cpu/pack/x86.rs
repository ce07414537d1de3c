//! Packing with AVX2 and F16C: eight elements at a time, converted in registers.
//!
//! bf16 is the top half of an f32 (a shift); f16 goes through `vcvtph2ps`, which is exact
//! for every value, subnormals included (it ignores MXCSR's DAZ, which is off in Rust
//! anyway). A NaN stays a NaN, possibly with another payload: every NaN output is
//! canonicalised, so payloads are never visible.

use super::OperandView;
use crate::types::DType;
use core::arch::x86_64::{
    __m128i, __m256, __m256i, _mm256_castsi256_ps, _mm256_cmpgt_epi32, _mm256_cvtepu16_epi32,
    _mm256_cvtph_ps, _mm256_loadu_ps, _mm256_maskstore_ps, _mm256_permute2f128_ps,
    _mm256_set1_epi32, _mm256_setr_epi32, _mm256_setzero_ps, _mm256_shuffle_ps, _mm256_slli_epi32,
    _mm256_storeu_ps, _mm256_unpackhi_ps, _mm256_unpacklo_ps, _mm_loadu_si128,
};

/// [`super::panels`] when the lanes of one depth are contiguous (`lane_stride == 1`:
/// B row-major, A column-major). Depth by depth, so the source is read in long sequential
/// runs (a whole row of B per k) rather than in short pieces a page apart.
///
/// # Safety
/// 1. The CPU supports AVX2 and F16C.
/// 2. `dst.len() == ⌈lanes / W⌉ · kc · W`, and every element `(lane0 + l, k0 + k)`,
///    `l < lanes`, `k < kc`, lies inside the validated span of `src`.
/// 3. `src.lane_stride == 1`.
#[target_feature(enable = "avx2,f16c")]
pub(super) unsafe fn lanes_contiguous<const W: usize>(
    src: &OperandView,
    lane0: usize,
    lanes: usize,
    k0: usize,
    kc: usize,
    dst: &mut [f32],
) {
    // One copy of the loop per dtype, as for `depth_contiguous`.
    // SAFETY: forwarded contract.
    unsafe {
        match src.dtype {
            DType::F32 => lanes_contiguous_of::<W, 0>(src, lane0, lanes, k0, kc, dst),
            DType::BF16 => lanes_contiguous_of::<W, 1>(src, lane0, lanes, k0, kc, dst),
            DType::F16 => lanes_contiguous_of::<W, 2>(src, lane0, lanes, k0, kc, dst),
        }
    }
}

/// [`lanes_contiguous`] for `src.dtype == dtype_of(D)`.
///
/// # Safety
/// As for [`lanes_contiguous`], and `src.dtype == dtype_of(D)`.
#[target_feature(enable = "avx2,f16c")]
#[inline]
unsafe fn lanes_contiguous_of<const W: usize, const D: u8>(
    src: &OperandView,
    lane0: usize,
    lanes: usize,
    k0: usize,
    kc: usize,
    dst: &mut [f32],
) {
    let dtype = const { dtype_of(D) };
    let out = dst.as_mut_ptr();
    let size = dtype.size();
    // SAFETY: (1) makes the intrinsics available. The loads read the
    // `min(8, lanes - l)` elements (lane0 + l, k0 + k), l = q·W + c, inside the span by (2)
    // and (3); the stores write min(8, W - c) floats at panel q, depth k, lane c, inside
    // `dst` by (2).
    unsafe {
        for k in 0..kc {
            let row = src.at(lane0, k0 + k);
            for q in 0..lanes.div_ceil(W) {
                for c in (0..W).step_by(8) {
                    let l = q * W + c;
                    let to = out.add((q * kc + k) * W + c);
                    if l + 8 <= lanes && c + 8 <= W {
                        // The common whole run: one load and one store.
                        _mm256_storeu_ps(to, load8_whole(row.add(l * size), dtype));
                    } else {
                        let v = load8(row.add(l * size), dtype, lanes.saturating_sub(l).min(8));
                        store8(to, (W - c).min(8), v);
                    }
                }
            }
        }
    }
}

/// One panel of [`super::panels`] when each lane is contiguous along k (`k_stride == 1`:
/// A row-major, B column-major): 8 lanes × 8 depths at a time, transposed in registers.
///
/// # Safety
/// 1. The CPU supports AVX2 and F16C.
/// 2. `lanes <= W`, `dst.len() == kc · W`, and every element `(lane0 + l, k0 + k)`,
///    `l < lanes`, `k < kc`, lies inside the validated span of `src`.
/// 3. `src.k_stride == 1`.
#[target_feature(enable = "avx2,f16c")]
pub(super) unsafe fn depth_contiguous<const W: usize>(
    src: &OperandView,
    lane0: usize,
    lanes: usize,
    k0: usize,
    kc: usize,
    dst: &mut [f32],
) {
    // One copy of the loop per dtype: the element load is then a constant, not a branch
    // per row, in what is the hot loop of a small call with a column-major B.
    // SAFETY: forwarded contract.
    unsafe {
        match src.dtype {
            DType::F32 => depth_contiguous_of::<W, 0>(src, lane0, lanes, k0, kc, dst),
            DType::BF16 => depth_contiguous_of::<W, 1>(src, lane0, lanes, k0, kc, dst),
            DType::F16 => depth_contiguous_of::<W, 2>(src, lane0, lanes, k0, kc, dst),
        }
    }
}

/// The dtype a const parameter `D` stands for (0 f32, 1 bf16, 2 f16).
const fn dtype_of(d: u8) -> DType {
    match d {
        0 => DType::F32,
        1 => DType::BF16,
        _ => DType::F16,
    }
}

/// [`depth_contiguous`] for `src.dtype == dtype_of(D)`.
///
/// # Safety
/// As for [`depth_contiguous`], and `src.dtype == dtype_of(D)`.
#[target_feature(enable = "avx2,f16c")]
#[inline]
unsafe fn depth_contiguous_of<const W: usize, const D: u8>(
    src: &OperandView,
    lane0: usize,
    lanes: usize,
    k0: usize,
    kc: usize,
    dst: &mut [f32],
) {
    let dtype = const { dtype_of(D) };
    let out = dst.as_mut_ptr();
    // SAFETY: (1) makes the intrinsics available. The loads read the `nk` elements of lane
    // lane0 + c + i < lane0 + lanes from depth k0 + k, inside the span by (2) and (3);
    // the stores write min(8, W - c) floats at depth k + kk < kc, lane c, inside `dst`.
    unsafe {
        for k in (0..kc).step_by(8) {
            let nk = (kc - k).min(8);
            for c in (0..W).step_by(8) {
                // (8 lanes, 8 depths) → (8 depths, 8 lanes)
                let mut m = [_mm256_setzero_ps(); 8];
                let rows = lanes.saturating_sub(c).min(8);
                if nk == 8 && rows == 8 {
                    // The whole block: no staging, and a constant trip count that unrolls
                    // and keeps `m` in registers.
                    for (i, v) in m.iter_mut().enumerate() {
                        *v = load8_whole(src.at(lane0 + c + i, k0 + k), dtype);
                    }
                } else if nk == 8 {
                    // Fewer lanes than 8 (an A panel of MR rows, or the edge of B).
                    for (i, v) in m.iter_mut().enumerate().take(rows) {
                        *v = load8_whole(src.at(lane0 + c + i, k0 + k), dtype);
                    }
                } else {
                    for (i, v) in m.iter_mut().enumerate().take(rows) {
                        *v = load8(src.at(lane0 + c + i, k0 + k), dtype, nk);
                    }
                }
                transpose8x8(&mut m);
                if nk == 8 && W >= c + 8 {
                    for (kk, &v) in m.iter().enumerate() {
                        _mm256_storeu_ps(out.add((k + kk) * W + c), v);
                    }
                } else if nk == 8 {
                    // A panel narrower than 8 (A's MR): one mask for the block.
                    let mask = lanes_below(W - c);
                    for (kk, &v) in m.iter().enumerate() {
                        _mm256_maskstore_ps(out.add((k + kk) * W + c), mask, v);
                    }
                } else {
                    for (kk, &v) in m.iter().enumerate().take(nk) {
                        store8(out.add((k + kk) * W + c), (W - c).min(8), v);
                    }
                }
            }
        }
    }
}

/// The first `n <= 8` elements at `p`, upcast to f32, zero beyond `n`.
///
/// # Safety
/// The CPU supports AVX2 and F16C; `n` elements of `dtype` are readable at `p` (any
/// alignment).
#[target_feature(enable = "avx2,f16c")]
unsafe fn load8(p: *const u8, dtype: DType, n: usize) -> __m256 {
    let size = dtype.size();
    let mut staged = [0u8; 32];
    let p = if n == 8 {
        p
    } else {
        // A short row or tail: stage it, so no byte past the n elements is read.
        // SAFETY: n · size bytes are readable at p, and staged holds 32 >= n · size.
        unsafe { std::ptr::copy_nonoverlapping(p, staged.as_mut_ptr(), n * size) };
        staged.as_ptr()
    };
    // SAFETY: 8 elements (32 or 16 bytes) are readable at p: the caller's, or `staged`.
    unsafe { load8_whole(p, dtype) }
}

/// The 8 elements at `p`, upcast to f32.
///
/// # Safety
/// The CPU supports AVX2 and F16C; 8 elements of `dtype` are readable at `p` (any
/// alignment).
#[target_feature(enable = "avx2,f16c")]
#[inline]
unsafe fn load8_whole(p: *const u8, dtype: DType) -> __m256 {
    // SAFETY: 8 elements (32 or 16 bytes) are readable at p (the caller's contract).
    unsafe {
        match dtype {
            DType::F32 => _mm256_loadu_ps(p as *const f32),
            DType::BF16 => {
                let h = _mm_loadu_si128(p as *const __m128i);
                _mm256_castsi256_ps(_mm256_slli_epi32::<16>(_mm256_cvtepu16_epi32(h)))
            }
            DType::F16 => _mm256_cvtph_ps(_mm_loadu_si128(p as *const __m128i)),
        }
    }
}

/// Stores the first `n <= 8` lanes of `v` at `p`.
///
/// # Safety
/// The CPU supports AVX2; `n` f32 are writable at `p` (any alignment).
#[target_feature(enable = "avx2")]
unsafe fn store8(p: *mut f32, n: usize, v: __m256) {
    // SAFETY: all 8 lanes are writable when n == 8; otherwise the masked store touches
    // only lanes whose mask is set (index < n), and never faults on the others.
    unsafe {
        if n == 8 {
            _mm256_storeu_ps(p, v);
        } else {
            _mm256_maskstore_ps(p, lanes_below(n), v);
        }
    }
}

/// The store mask of lanes `0..n` (`n <= 8`).
///
/// # Safety
/// The CPU supports AVX2.
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn lanes_below(n: usize) -> __m256i {
    // SAFETY: register-only intrinsics, available by the caller's contract.
    #[allow(unused_unsafe)]
    unsafe {
        let idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
        _mm256_cmpgt_epi32(_mm256_set1_epi32(n as i32), idx)
    }
}

/// Transposes the 8 × 8 matrix whose rows are `m` (the classic unpack / shuffle / permute
/// sequence: pure data movement).
///
/// # Safety
/// The CPU supports AVX2.
#[target_feature(enable = "avx2")]
pub(in crate::cpu) unsafe fn transpose8x8(m: &mut [__m256; 8]) {
    // SAFETY: register-only intrinsics, available by the caller's contract. (Rust 1.87+
    // calls them safe inside a matching target_feature function; the crate's minimum, 1.85,
    // still needs the block.)
    #[allow(unused_unsafe)]
    unsafe {
        let t = [
            _mm256_unpacklo_ps(m[0], m[1]),
            _mm256_unpackhi_ps(m[0], m[1]),
            _mm256_unpacklo_ps(m[2], m[3]),
            _mm256_unpackhi_ps(m[2], m[3]),
            _mm256_unpacklo_ps(m[4], m[5]),
            _mm256_unpackhi_ps(m[4], m[5]),
            _mm256_unpacklo_ps(m[6], m[7]),
            _mm256_unpackhi_ps(m[6], m[7]),
        ];
        let u = [
            _mm256_shuffle_ps::<0x44>(t[0], t[2]),
            _mm256_shuffle_ps::<0xEE>(t[0], t[2]),
            _mm256_shuffle_ps::<0x44>(t[1], t[3]),
            _mm256_shuffle_ps::<0xEE>(t[1], t[3]),
            _mm256_shuffle_ps::<0x44>(t[4], t[6]),
            _mm256_shuffle_ps::<0xEE>(t[4], t[6]),
            _mm256_shuffle_ps::<0x44>(t[5], t[7]),
            _mm256_shuffle_ps::<0xEE>(t[5], t[7]),
        ];
        for i in 0..4 {
            m[i] = _mm256_permute2f128_ps::<0x20>(u[i], u[i + 4]);
            m[i + 4] = _mm256_permute2f128_ps::<0x31>(u[i], u[i + 4]);
        }
    }
}
