//! One step for the NR lanes of a row with AVX2 intrinsics, 8 lanes at a time: the
//! arithmetic of [`super::step::finite`] in vector registers.
//!
//! Per product and 8 lanes: a 32-bit multiply of the signed significands (A's already
//! shifted left by the format's constant), `vpabsd`, `vpsrlvd` by `E − exp_a − exp_b` (which yields 0 for counts of 32
//! and more: a term far below the grid vanishes, as truncation wants), and `vpsignd` to give
//! the term back its sign. The 16 signed terms are summed in i32: each is below 2^27 and
//! at most (2^(p+1) − 1)² · 2^(25 − 2p), so 16 of them stay below 2^31 (2,130,739,200 for
//! bf16, 2,145,387,008 for f16). The accumulator's term (below 2^26) is added in the
//! finish, where an overflow of i32 is detected and the magnitude taken in u32.
//!
//! Why intrinsics and not the compiler's vectoriser: given the lane loops, LLVM vectorised
//! along the 16 products with gathers instead of along the lanes.

use core::arch::x86_64::{
    __m256i, _mm256_abs_epi32, _mm256_add_epi32, _mm256_and_si256, _mm256_andnot_si256,
    _mm256_blendv_epi8, _mm256_cmpeq_epi32, _mm256_loadu_si256, _mm256_max_epi32,
    _mm256_movemask_epi8, _mm256_mullo_epi32, _mm256_or_si256, _mm256_set1_epi32,
    _mm256_setzero_si256, _mm256_sign_epi32, _mm256_slli_epi32, _mm256_srai_epi32,
    _mm256_srli_epi32, _mm256_srlv_epi32, _mm256_storeu_si256, _mm256_sub_epi32, _mm256_xor_si256,
};

use super::super::kernel::NR;
use super::pack::{BStep, STEP_K};
use super::step::{Dec, Format, E_MIN, NAN_EXP, NEG_INF_EXP, POS_INF_EXP, ZERO_EXP};

/// Lanes per register.
const W: usize = 8;

const _: () = assert!(NR % W == 0, "a row is made of whole registers");

/// Whether any of the NR accumulators is NaN or infinite.
///
/// # Safety
/// The CPU supports AVX2.
#[target_feature(enable = "avx2")]
pub(super) unsafe fn any_special(acc: &[f32; NR]) -> bool {
    let p = acc.as_ptr() as *const __m256i;
    // SAFETY: AVX2 by the caller's contract; NR / W unaligned loads inside `acc`.
    unsafe {
        let field = _mm256_set1_epi32(0x7F80_0000);
        let mut any = _mm256_setzero_si256();
        for q in 0..NR / W {
            let bits = _mm256_loadu_si256(p.add(q));
            any = _mm256_or_si256(
                any,
                _mm256_cmpeq_epi32(_mm256_and_si256(bits, field), field),
            );
        }
        _mm256_movemask_epi8(any) != 0
    }
}

/// One step of the NR lanes of a row: `acc[j]` becomes the step of `acc[j]` with the 16
/// pairs `(a[t], lane j of b's depth t)`. `SH` is the format's product shift.
///
/// # Safety
/// The CPU supports AVX2; every operand and accumulator is finite (no NaN or Inf: the
/// caller routes those to `step::step`).
#[target_feature(enable = "avx2")]
pub(super) unsafe fn row_step<const SH: i32>(a: &[Dec; STEP_K], b: &BStep, acc: &mut [f32; NR]) {
    let pa = acc.as_mut_ptr() as *mut __m256i;
    let mut sum = [0i32; NR];
    let mut c_term = [0i32; NR];
    let mut e_out = [0i32; NR];
    // SAFETY: AVX2 by the caller's contract. Loads and stores are unaligned, at lane
    // offsets q · W + W <= NR of `acc`, of each depth row of `b.sig` and `b.exp` (NR lanes
    // each), and of the three local arrays.
    unsafe {
        let exp_mask = _mm256_set1_epi32(0xFF);
        let frac_mask = _mm256_set1_epi32(0x7F_FFFF);
        let hidden = _mm256_set1_epi32(1 << 23);
        let bias = _mm256_set1_epi32(127);
        let one = _mm256_set1_epi32(1);
        let zero_exp = _mm256_set1_epi32(ZERO_EXP);
        let zero = _mm256_setzero_si256();
        for q in 0..NR / W {
            let lane = q * W;
            // The accumulator (`step::decode_acc`): magnitude, exponent (−126 when
            // subnormal, ZERO_EXP when zero); its sign stays in `bits`.
            let bits = _mm256_loadu_si256(pa.add(q));
            let field = _mm256_and_si256(_mm256_srli_epi32::<23>(bits), exp_mask);
            let subnormal = _mm256_cmpeq_epi32(field, zero);
            let c_mag = _mm256_or_si256(
                _mm256_and_si256(bits, frac_mask),
                _mm256_andnot_si256(subnormal, hidden),
            );
            let c_exp = _mm256_sub_epi32(_mm256_max_epi32(field, one), bias);
            let is_zero = _mm256_cmpeq_epi32(_mm256_slli_epi32::<1>(bits), zero);
            let c_exp = _mm256_blendv_epi8(c_exp, zero_exp, is_zero);

            // Rule 1: E (at least E_MIN), keeping each product's exponent for the shifts.
            let mut e = _mm256_max_epi32(c_exp, _mm256_set1_epi32(E_MIN));
            let mut exps = [zero; STEP_K];
            for (t, x) in a.iter().enumerate() {
                let be = _mm256_loadu_si256(b.exp[t].as_ptr().add(lane) as *const __m256i);
                exps[t] = _mm256_add_epi32(_mm256_set1_epi32(x.exp), be);
                e = _mm256_max_epi32(e, exps[t]);
            }
            // Rules 2 and 3: the truncated products, summed with their signs.
            let mut s = zero;
            for (t, x) in a.iter().enumerate() {
                let bs = _mm256_loadu_si256(b.sig[t].as_ptr().add(lane) as *const __m256i);
                // A's significand shifted in advance: |p| < 2^27 is the shifted product.
                let p = _mm256_mullo_epi32(_mm256_set1_epi32(x.sig << SH), bs);
                let v = _mm256_srlv_epi32(_mm256_abs_epi32(p), _mm256_sub_epi32(e, exps[t]));
                s = _mm256_add_epi32(s, _mm256_sign_epi32(v, p));
            }
            let v = _mm256_srlv_epi32(_mm256_slli_epi32::<2>(c_mag), _mm256_sub_epi32(e, c_exp));
            let ct = _mm256_sign_epi32(v, bits);
            _mm256_storeu_si256(sum.as_mut_ptr().add(lane) as *mut __m256i, s);
            _mm256_storeu_si256(c_term.as_mut_ptr().add(lane) as *mut __m256i, ct);
            _mm256_storeu_si256(e_out.as_mut_ptr().add(lane) as *mut __m256i, e);
        }
    }
    // Rule 4, lane by lane (branch-free; the compiler vectorises it).
    for j in 0..NR {
        acc[j] = finish(sum[j], c_term[j], e_out[j]);
    }
}

/// The products' sum `s` (i32, exact) plus the accumulator's term `ct`, times 2^(e − 25),
/// truncated to f32 (`step::to_f32`, without branches).
#[inline(always)]
fn finish(s: i32, ct: i32, e: i32) -> f32 {
    let total = s.wrapping_add(ct);
    // s and ct of one sign whose i32 sum has the other: the true sum is total ± 2^32.
    let overflow = ((s ^ total) & (ct ^ total)) < 0;
    let negative = (total < 0) != overflow;
    let mag = if negative {
        total.wrapping_neg() as u32
    } else {
        total as u32
    };
    let top = 31 - mag.leading_zeros() as i32;
    let exp = top + e - 25;
    let m = (mag >> (top - 23).clamp(0, 31)) << (23 - top).clamp(0, 31);
    let normal = ((exp + 127) as u32) << 23 | (m & 0x7F_FFFF);
    let sh = e + 124;
    let subnormal = if sh < -31 {
        0
    } else {
        (mag << sh.clamp(0, 31)) >> (-sh).clamp(0, 31)
    };
    let bits = if exp >= 128 {
        0x7F80_0000
    } else if exp >= -126 {
        normal
    } else {
        subnormal
    };
    // A sum that is zero or truncates to zero is +0.0.
    f32::from_bits(if mag == 0 || bits == 0 {
        0
    } else {
        bits | (negative as u32) << 31
    })
}

/// [`Format::decode`] of 8 elements, one in the low 16 bits of each 32-bit lane of `bits`
/// (the high bits zero): the significands, the exponents, and a mask of the NaN and Inf
/// lanes. The same cases as the scalar definition, each computed for every lane and
/// selected by masks (the tests compare the two on every 16-bit pattern).
///
/// # Safety
/// The CPU supports AVX2.
#[target_feature(enable = "avx2")]
#[inline]
pub(super) unsafe fn decode8(format: Format, bits: __m256i) -> (__m256i, __m256i, __m256i) {
    let (p, exp_bits, bias) = match format {
        Format::Bf16 => (7, 8, 127),
        Format::F16 => (10, 5, 15),
    };
    // SAFETY: register-only intrinsics, available by the caller's contract.
    #[allow(unused_unsafe)]
    unsafe {
        let zero = _mm256_setzero_si256();
        let e_max = _mm256_set1_epi32((1 << exp_bits) - 1);
        // All ones in the negative lanes.
        let negative = _mm256_srai_epi32::<31>(_mm256_slli_epi32::<16>(bits));
        let field = _mm256_and_si256(_mm256_srlv_epi32(bits, _mm256_set1_epi32(p)), e_max);
        let frac = _mm256_and_si256(bits, _mm256_set1_epi32((1 << p) - 1));
        let special = _mm256_cmpeq_epi32(field, e_max);
        let subnormal = _mm256_cmpeq_epi32(field, zero);
        let frac_zero = _mm256_cmpeq_epi32(frac, zero);
        // Normal: the hidden bit and the unbiased exponent; subnormal (and zero): the
        // fraction and the smallest normal exponent.
        let sig = _mm256_or_si256(
            frac,
            _mm256_andnot_si256(subnormal, _mm256_set1_epi32(1 << p)),
        );
        let exp = _mm256_blendv_epi8(
            _mm256_sub_epi32(field, _mm256_set1_epi32(bias)),
            _mm256_set1_epi32(1 - bias),
            subnormal,
        );
        let exp = _mm256_blendv_epi8(
            exp,
            _mm256_set1_epi32(ZERO_EXP),
            _mm256_and_si256(subnormal, frac_zero),
        );
        // NaN and Inf: no significand, the class in the exponent.
        let inf = _mm256_blendv_epi8(
            _mm256_set1_epi32(POS_INF_EXP),
            _mm256_set1_epi32(NEG_INF_EXP),
            negative,
        );
        let class = _mm256_blendv_epi8(_mm256_set1_epi32(NAN_EXP), inf, frac_zero);
        let exp = _mm256_blendv_epi8(exp, class, special);
        let sig = _mm256_andnot_si256(special, sig);
        // The sign: (sig ^ -1) + 1 = -sig in the negative lanes.
        let sig = _mm256_sub_epi32(_mm256_xor_si256(sig, negative), negative);
        (sig, exp, special)
    }
}
