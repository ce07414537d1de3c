//! Packing for the tensor-core model: blocks of A and B decoded into the form the step
//! arithmetic reads ([`Dec`]: signed significand and exponent), grouped by k16 step, with
//! the K tail padded with zeros exactly as the GPU kernels pad it.
//!
//! As in the scalar backend's `pack/`, both operands are *lanes × depth*: the lanes of A are
//! its rows, the lanes of B its columns. A row of A is stored step by step (`[Dec; 16]` per
//! step); a panel of NR columns of B is stored step by step as [`BStep`], the 16 depths of a
//! step for all NR lanes side by side, so the kernel reads whole vectors of lanes. Lanes past
//! the edge of the matrix are zero and feed outputs that are never stored. Decoding is
//! exact and moves values only: it cannot change a bit of the result.

use crate::types::{Gemm, GemmPointers, Layout};

use super::super::kernel::NR;
use super::kernel::Simd;
use super::step::{Dec, Format};

/// K of one step (the MMA instruction's K).
pub(super) const STEP_K: usize = 16;

/// One 16-bit input operand (A or B) of one batch entry, read in MMA steps of `STEP_K`
/// depths, zero past K: element `(lane, k)` is at `base + lane · lane_stride + k · k_stride`
/// (in elements).
#[derive(Clone, Copy, Debug)]
pub(super) struct StepOperand {
    base: *const u16,
    lane_stride: usize,
    k_stride: usize,
    /// Elements between batch entries.
    batch_stride: usize,
    /// K of the matrix: depths from K on are the zero padding.
    k: usize,
}

// SAFETY: a StepOperand is only read through, and the contract of `cpu::gemm` guarantees that
// nothing writes the inputs while the call runs, so threads may share it.
unsafe impl Send for StepOperand {}
// SAFETY: as above.
unsafe impl Sync for StepOperand {}

impl StepOperand {
    /// A (lanes = rows of A), batch entry 0.
    pub(super) fn a(g: &Gemm, p: &GemmPointers) -> StepOperand {
        let (lane_stride, k_stride) = match g.a.layout {
            Layout::RowMajor => (g.a.ld, 1),
            Layout::ColMajor => (1, g.a.ld),
        };
        StepOperand {
            base: p.a as *const u16,
            lane_stride,
            k_stride,
            batch_stride: g.a.batch_stride,
            k: g.k,
        }
    }

    /// B (lanes = columns of B), batch entry 0.
    pub(super) fn b(g: &Gemm, p: &GemmPointers) -> StepOperand {
        let (lane_stride, k_stride) = match g.b.layout {
            Layout::RowMajor => (1, g.b.ld),
            Layout::ColMajor => (g.b.ld, 1),
        };
        StepOperand {
            base: p.b as *const u16,
            lane_stride,
            k_stride,
            batch_stride: g.b.batch_stride,
            k: g.k,
        }
    }

    /// The same operand in batch entry `batch`.
    pub(super) fn entry(self, batch: usize) -> StepOperand {
        StepOperand {
            // wrapping: with K = 0 the pointer may be null, and it is then never read.
            base: self.base.wrapping_add(batch * self.batch_stride),
            ..self
        }
    }

    /// The 16 depths of step `s` of lane `lane`, decoded; depths from K on are zero.
    ///
    /// # Safety
    /// `lane` is inside the matrix and every depth `k < K` of it lies inside the validated
    /// span of the operand.
    #[inline(always)]
    unsafe fn step(&self, format: Format, lane: usize, s: usize) -> [Dec; STEP_K] {
        let row = self.base.wrapping_add(lane * self.lane_stride);
        std::array::from_fn(|t| {
            let k = s * STEP_K + t;
            if k < self.k {
                // SAFETY: (lane, k) is inside the span (the caller's contract); unaligned
                // reads tolerate any alignment.
                format.decode(unsafe { row.add(k * self.k_stride).read_unaligned() })
            } else {
                Dec::ZERO
            }
        })
    }
}

/// One step of an NR-lane panel of B: `sig[t][j]`, `exp[t][j]` of depth t of lane j, and
/// whether any of them is NaN or infinite.
#[derive(Clone, Copy, Debug)]
#[repr(C, align(64))]
pub(super) struct BStep {
    pub sig: [[i32; NR]; STEP_K],
    pub exp: [[i32; NR]; STEP_K],
    pub special: bool,
}

impl BStep {
    pub(super) const ZERO: BStep = BStep {
        sig: [[0; NR]; STEP_K],
        exp: [[Dec::ZERO.exp; NR]; STEP_K],
        special: false,
    };
}

/// Packs `dst.len() / ns` lanes of `src` from `lane0` on, steps `s0 .. s0 + ns`, lane by
/// lane: `dst[l · ns + s]` is step `s0 + s` of lane `lane0 + l`.
///
/// # Safety
/// Every lane `lane0 + l`, `l < dst.len() / ns`, is inside the matrix (see
/// [`StepOperand::step`]); `dst.len()` is a multiple of `ns`.
pub(super) unsafe fn lanes(
    format: Format,
    src: &StepOperand,
    lane0: usize,
    s0: usize,
    ns: usize,
    dst: &mut [[Dec; STEP_K]],
) {
    for (l, steps) in dst.chunks_exact_mut(ns.max(1)).enumerate() {
        for (s, d) in steps.iter_mut().enumerate() {
            // SAFETY: lane0 + l is inside the matrix (the caller's contract).
            *d = unsafe { src.step(format, lane0 + l, s0 + s) };
        }
    }
}

/// Packs lanes `lane0 .. lane0 + lanes` of `src`, steps `s0 .. s0 + ns`, into
/// `⌈lanes / NR⌉` consecutive panels of `ns` [`BStep`]s, zero past `lanes`.
///
/// # Safety
/// As for [`lanes`]; `dst.len() == ⌈lanes / NR⌉ · ns`.
#[allow(clippy::too_many_arguments)] // the block's place and size, as for `lanes`
pub(super) unsafe fn panels(
    simd: Simd,
    format: Format,
    src: &StepOperand,
    lane0: usize,
    lanes: usize,
    s0: usize,
    ns: usize,
    dst: &mut [BStep],
) {
    #[cfg(not(target_arch = "x86_64"))]
    let _ = simd; // only x86 has a vector decoder
    for (q, panel) in dst.chunks_exact_mut(ns.max(1)).enumerate() {
        let count = NR.min(lanes - q * NR);
        for (s, d) in panel.iter_mut().enumerate() {
            // Every lane of a whole panel is written below; a partial one keeps zeros in
            // the rest.
            if count < NR {
                *d = BStep::ZERO;
            } else {
                d.special = false;
            }
            let mut from = 0;
            #[cfg(target_arch = "x86_64")]
            if simd == Simd::Avx2 && (s0 + s + 1) * STEP_K <= src.k {
                // Whole groups of 8 lanes of a step that lies inside K: decoded 8 at a
                // time, which a column-major B (F.linear's weight) otherwise spends more
                // time on than the kernel on the steps.
                while from + 8 <= count {
                    let lane = lane0 + q * NR + from;
                    // SAFETY: Avx2 was detected; lanes lane .. lane + 8 <= lane0 + lanes
                    // are inside the matrix and the step lies inside K (checked above).
                    d.special |= unsafe { step8(format, src, lane, s0 + s, d, from) };
                    from += 8;
                }
            }
            for j in from..count {
                // SAFETY: lane lane0 + q · NR + j < lane0 + lanes is inside the matrix.
                let v = unsafe { src.step(format, lane0 + q * NR + j, s0 + s) };
                for (t, x) in v.iter().enumerate() {
                    d.sig[t][j] = x.sig;
                    d.exp[t][j] = x.exp;
                    d.special |= x.is_special();
                }
            }
        }
    }
}

/// Step `s` of lanes `lane .. lane + 8`, decoded into lanes `j .. j + 8` of `d`; returns
/// whether any of them is NaN or infinite. A k-contiguous operand is read as two 8 × 8
/// blocks (lanes × depths) transposed in registers, any other one depth by depth.
///
/// # Safety
/// The CPU supports AVX2; the 8 lanes are inside the matrix, every depth of the step is
/// below K (so inside the validated span), and `j + 8 <= NR`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn step8(
    format: Format,
    src: &StepOperand,
    lane: usize,
    s: usize,
    d: &mut BStep,
    j: usize,
) -> bool {
    use super::x86::decode8;
    use core::arch::x86_64::{
        __m128i, _mm256_castps_si256, _mm256_castsi256_ps, _mm256_cvtepu16_epi32,
        _mm256_movemask_epi8, _mm256_or_si256, _mm256_setzero_si256, _mm256_storeu_si256,
        _mm_loadu_si128,
    };
    let k0 = s * STEP_K;
    let at = |l: usize, k: usize| {
        src.base
            .wrapping_add(l * src.lane_stride + k * src.k_stride)
    };
    // SAFETY: AVX2 by the contract. The loads read 8 u16 of one lane (k_stride 1: depths
    // k0 + 8h .. + 8) or of one depth (lane_stride 1: lanes lane .. lane + 8), all inside
    // the span by the contract; the stores write lanes j .. j + 8 <= NR of one depth row of
    // `d.sig` and `d.exp`.
    unsafe {
        let mut special = _mm256_setzero_si256();
        let mut put = |t: usize, bits| {
            let (sig, exp, sp) = decode8(format, bits);
            _mm256_storeu_si256(d.sig[t].as_mut_ptr().add(j).cast(), sig);
            _mm256_storeu_si256(d.exp[t].as_mut_ptr().add(j).cast(), exp);
            special = _mm256_or_si256(special, sp);
        };
        if src.k_stride == 1 {
            for h in 0..STEP_K / 8 {
                let mut m = std::array::from_fn(|i| {
                    let row = _mm_loadu_si128(at(lane + i, k0 + 8 * h) as *const __m128i);
                    _mm256_castsi256_ps(_mm256_cvtepu16_epi32(row))
                });
                crate::cpu::pack::transpose8x8(&mut m);
                for (t, &v) in m.iter().enumerate() {
                    put(8 * h + t, _mm256_castps_si256(v));
                }
            }
        } else if src.lane_stride == 1 {
            for t in 0..STEP_K {
                put(
                    t,
                    _mm256_cvtepu16_epi32(_mm_loadu_si128(at(lane, k0 + t) as *const __m128i)),
                );
            }
        } else {
            for t in 0..STEP_K {
                let bits: [u16; 8] = std::array::from_fn(|i| at(lane + i, k0 + t).read_unaligned());
                put(
                    t,
                    _mm256_cvtepu16_epi32(_mm_loadu_si128(bits.as_ptr() as *const __m128i)),
                );
            }
        }
        _mm256_movemask_epi8(special) != 0
    }
}
