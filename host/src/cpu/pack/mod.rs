//! Packing: copies a block of A or B into the contiguous f32 layout the microkernel reads,
//! upcasting bf16 and f16 exactly on the way.
//!
//! Both operands are seen the same way, as a matrix of *lanes × depth*: the lanes of A are
//! its rows, the lanes of B its columns, and the depth is k. A panel of width W (MR for A,
//! NR for B) stores, for each k of the block, the W lane values side by side
//! (`dst[k · W + lane]`). Lanes past the edge of the matrix are zero: they only feed
//! accumulators whose results are never stored. Packing moves values and never computes
//! with them, so it cannot affect the bits of the result.

use crate::numeric::upcast;
use crate::types::{DType, Gemm, GemmPointers, Layout};

use super::kernel::Isa;

#[cfg(target_arch = "x86_64")]
mod x86;
#[cfg(target_arch = "x86_64")]
pub(super) use x86::transpose8x8;

/// Reads element `idx` of a buffer of `dtype` as f32 (exact).
///
/// # Safety
/// `base` points to a buffer of `dtype` with more than `idx` elements (any alignment).
#[inline(always)]
pub(super) unsafe fn load(base: *const u8, dtype: DType, idx: usize) -> f32 {
    // SAFETY: in bounds by the caller's contract; unaligned reads tolerate any alignment.
    unsafe {
        match dtype {
            DType::F32 => (base as *const f32).add(idx).read_unaligned(),
            DType::BF16 | DType::F16 => {
                upcast(dtype, (base as *const u16).add(idx).read_unaligned() as u32)
            }
        }
    }
}

/// A strided view of one input operand (A or B, any dtype) in one batch entry, read by the
/// packers: element `(lane, k)` is at `base + lane · lane_stride + k · k_stride` (in
/// elements of `dtype`).
#[derive(Clone, Copy, Debug)]
pub(super) struct OperandView {
    base: *const u8,
    dtype: DType,
    lane_stride: usize,
    k_stride: usize,
    /// Bytes between batch entries.
    batch_bytes: usize,
}

// SAFETY: a OperandView is only read through, and the contract of `cpu::gemm` guarantees that
// nothing writes the inputs while the call runs, so threads may share it.
unsafe impl Send for OperandView {}
// SAFETY: as above.
unsafe impl Sync for OperandView {}

/// Bytes between batch entries of an operand with this element stride: 0 for an unbatched
/// call, whose stride is ignored and may be any value up to `validate::MAX_DIM` (whose byte
/// size can overflow); for a batched call validation bounds it.
pub(super) fn batch_bytes(g: &Gemm, stride: usize, dtype: DType) -> usize {
    if g.batch > 1 {
        stride * dtype.size()
    } else {
        0
    }
}

impl OperandView {
    /// A (lanes = rows of A), batch entry 0.
    pub(super) fn a(g: &Gemm, p: &GemmPointers) -> OperandView {
        let (lane_stride, k_stride) = match g.a.layout {
            Layout::RowMajor => (g.a.ld, 1),
            Layout::ColMajor => (1, g.a.ld),
        };
        OperandView {
            base: p.a as *const u8,
            dtype: g.a.dtype,
            lane_stride,
            k_stride,
            batch_bytes: batch_bytes(g, g.a.batch_stride, g.a.dtype),
        }
    }

    /// B (lanes = columns of B), batch entry 0.
    pub(super) fn b(g: &Gemm, p: &GemmPointers) -> OperandView {
        let (lane_stride, k_stride) = match g.b.layout {
            Layout::RowMajor => (1, g.b.ld),
            Layout::ColMajor => (g.b.ld, 1),
        };
        OperandView {
            base: p.b as *const u8,
            dtype: g.b.dtype,
            lane_stride,
            k_stride,
            batch_bytes: batch_bytes(g, g.b.batch_stride, g.b.dtype),
        }
    }

    /// The same operand in batch entry `batch`.
    pub(super) fn entry(self, batch: usize) -> OperandView {
        OperandView {
            // wrapping: with K = 0 the pointer may be null, and it is then never read.
            base: self.base.wrapping_add(batch * self.batch_bytes),
            ..self
        }
    }

    fn at(&self, lane: usize, k: usize) -> *const u8 {
        self.base
            .wrapping_add((lane * self.lane_stride + k * self.k_stride) * self.dtype.size())
    }
}

/// Packs lanes `lane0 .. lane0 + lanes` over `k0 .. k0 + kc` of `src` into
/// `⌈lanes / W⌉` consecutive panels of `kc · W` values in `dst`, zero-filling the lanes of
/// the last panel past `lanes`.
///
/// # Safety
/// Every element `(lane0 + l, k0 + k)` with `l < lanes`, `k < kc` lies inside the validated
/// span of `src`.
pub(super) unsafe fn panels<const W: usize>(
    isa: Isa,
    src: &OperandView,
    lane0: usize,
    lanes: usize,
    k0: usize,
    kc: usize,
    dst: &mut [f32],
) {
    assert!(dst.len() == lanes.div_ceil(W) * kc * W, "panel shape");
    #[cfg(not(target_arch = "x86_64"))]
    let _ = isa; // only x86 has SIMD packing
    #[cfg(target_arch = "x86_64")]
    if isa.has_avx2() && src.lane_stride == 1 {
        // SAFETY: `has_avx2` means AVX2 and F16C were detected; the shape was checked above,
        // the span is the caller's, and lanes are contiguous.
        unsafe { x86::lanes_contiguous::<W>(src, lane0, lanes, k0, kc, dst) };
        return;
    }
    if kc == 0 {
        return;
    }
    for (q, panel) in dst.chunks_exact_mut(kc * W).enumerate() {
        let (first, count) = (lane0 + q * W, W.min(lanes - q * W));
        #[cfg(target_arch = "x86_64")]
        if isa.has_avx2() && src.k_stride == 1 {
            // SAFETY: as above, with each lane contiguous along k.
            unsafe { x86::depth_contiguous::<W>(src, first, count, k0, kc, panel) };
            continue;
        }
        // Portable, and the general strides no layout produces: one element at a time.
        for (k, row) in panel.chunks_exact_mut(W).enumerate() {
            for (l, v) in row.iter_mut().enumerate() {
                *v = if l < count {
                    // SAFETY: (first + l, k0 + k) is in the span.
                    unsafe { load(src.at(first + l, k0 + k), src.dtype, 0) }
                } else {
                    0.0
                };
            }
        }
    }
}

/// An f32 buffer whose start is 64-byte aligned, so that each NR-wide row of a packed B
/// panel is exactly one cache line (no split loads in the microkernel).
///
/// Its contents are unspecified (whatever an earlier call left): the packers write every
/// element the microkernel later reads, zero padding included, and parked accumulators are
/// written before they are read (`fresh`). The memory comes from a small per-thread stock
/// and goes back to it when dropped: a small call then neither allocates nor fills a few
/// pages of zeros, which cost more than its arithmetic.
pub(super) struct PackBuf {
    lines: Vec<Line>,
    len: usize,
}

#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct Line([f32; 16]);

/// Buffers a thread keeps between calls: the upcast bias, the two packed operands and the
/// parked accumulators of one call.
const STOCK_BUFFERS: usize = 4;
/// The largest buffer kept (in lines: 2 MiB). Bigger calls allocate afresh, which their
/// arithmetic amortises; the cap bounds what an idle thread holds.
const STOCK_MAX_LINES: usize = (2 << 20) / std::mem::size_of::<Line>();

thread_local! {
    static STOCK: std::cell::RefCell<Vec<Vec<Line>>> = const { std::cell::RefCell::new(Vec::new()) };
}

impl PackBuf {
    pub(super) fn new(len: usize) -> PackBuf {
        let want = len.div_ceil(16);
        // `try_with`/`try_borrow_mut`: during thread teardown, or if a buffer is taken while
        // the stock is borrowed, fall back to a fresh allocation.
        let spare = STOCK
            .try_with(|s| s.try_borrow_mut().ok().and_then(|mut s| s.pop()))
            .ok()
            .flatten();
        let mut lines = spare.unwrap_or_default();
        if lines.len() < want {
            lines.resize(want, Line([0.0; 16]));
        }
        PackBuf { lines, len }
    }

    pub(super) fn as_mut_slice(&mut self) -> &mut [f32] {
        // SAFETY: `Line` is `repr(C)` around 16 f32 with no padding (size 64 = 16 · 4), so
        // the vector is `16 · lines.len() >= len` initialised, exclusively borrowed f32.
        unsafe { std::slice::from_raw_parts_mut(self.lines.as_mut_ptr().cast::<f32>(), self.len) }
    }
}

impl Drop for PackBuf {
    fn drop(&mut self) {
        let lines = std::mem::take(&mut self.lines);
        if lines.capacity() == 0 || lines.len() > STOCK_MAX_LINES {
            return;
        }
        // Ignored failures only mean the buffer is freed instead of kept.
        let _ = STOCK.try_with(|s| {
            if let Ok(mut s) = s.try_borrow_mut() {
                if s.len() < STOCK_BUFFERS {
                    s.push(lines);
                }
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::kernel::{MR, NR};

    /// Packs `(lanes, kc)` of `src` with every instruction set and checks each value against
    /// the exact element load (a NaN only has to stay a NaN).
    fn check<const W: usize>(src: &OperandView, lane0: usize, lanes: usize, k0: usize, kc: usize) {
        for isa in Isa::all() {
            let mut got = vec![f32::NAN; lanes.div_ceil(W) * kc * W];
            // SAFETY: the callers below keep every packed element inside `src`'s buffer.
            unsafe { panels::<W>(isa, src, lane0, lanes, k0, kc, &mut got) };
            for (i, &g) in got.iter().enumerate() {
                // panel i / (kc · W), depth k within it, lane l overall
                let (k, l) = (i % (kc * W) / W, i / (kc * W) * W + i % W);
                let want = if l < lanes {
                    // SAFETY: as above.
                    unsafe { load(src.at(lane0 + l, k0 + k), src.dtype, 0) }
                } else {
                    0.0
                };
                let same = (g.is_nan() && want.is_nan()) || g.to_bits() == want.to_bits();
                assert!(
                    same,
                    "{isa:?} W {W} {src:?} lanes {lanes} kc {kc}: [{k}][{l}] {g} vs {want}"
                );
            }
        }
    }

    #[test]
    fn packing_is_exact_for_every_16_bit_pattern() {
        // All 65536 patterns as a 32-lane × 2048-deep matrix, read both ways, starting one
        // byte off so that no load is aligned.
        let mut bytes = vec![0u8];
        bytes.extend((0..=u16::MAX).flat_map(u16::to_le_bytes));
        for dtype in [DType::BF16, DType::F16] {
            for (lane_stride, k_stride) in [(1, 32), (2048, 1)] {
                let src = OperandView {
                    base: bytes[1..].as_ptr(),
                    dtype,
                    lane_stride,
                    k_stride,
                    batch_bytes: 0,
                };
                check::<NR>(&src, 0, NR, 0, 2048);
                check::<MR>(&src, 0, NR, 0, 2048);
            }
        }
    }

    #[test]
    fn packing_handles_every_edge() {
        // A 40 × 40 matrix of each dtype; panels of both widths with short lane counts,
        // short and odd depths, offsets, both strides.
        let mut bytes = vec![0u8; 1 + 40 * 40 * 4];
        for (i, b) in bytes.iter_mut().enumerate() {
            *b = (i * 151 % 251) as u8;
        }
        for dtype in [DType::F32, DType::BF16, DType::F16] {
            for (lane_stride, k_stride) in [(1, 40), (40, 1), (40, 2), (1, 1)] {
                let src = OperandView {
                    base: bytes[1..].as_ptr(),
                    dtype,
                    lane_stride,
                    k_stride,
                    batch_bytes: 0,
                };
                for kc in [0, 1, 7, 8, 9, 17] {
                    for lanes in [0, 1, 5, 6, 13] {
                        check::<MR>(&src, 3, lanes, 2, kc);
                    }
                    for lanes in [1, 9, 16, 31, 32, 33, 38] {
                        check::<NR>(&src, 1, lanes, 5, kc);
                    }
                }
            }
        }
    }

    #[test]
    fn pack_buf_is_cache_line_aligned() {
        let mut b = PackBuf::new(37);
        let s = b.as_mut_slice();
        assert_eq!(s.len(), 37);
        assert_eq!(s.as_ptr() as usize % 64, 0);
    }

    #[test]
    fn pack_bufs_are_reused_and_grown() {
        let first = {
            let mut b = PackBuf::new(100);
            b.as_mut_slice().fill(1.0);
            b.as_mut_slice().as_ptr()
        };
        // The stock hands the same memory back, with its old contents.
        let mut again = PackBuf::new(50);
        assert_eq!(again.as_mut_slice().as_ptr(), first);
        assert!(again.as_mut_slice().iter().all(|&v| v == 1.0));
        // A buffer taken while another is out, and one bigger than the stock holds.
        let mut other = PackBuf::new(5000);
        assert_eq!(other.as_mut_slice().len(), 5000);
        assert_eq!(other.as_mut_slice().as_ptr() as usize % 64, 0);
        let mut huge = PackBuf::new(STOCK_MAX_LINES * 16 + 1);
        assert_eq!(huge.as_mut_slice().len(), STOCK_MAX_LINES * 16 + 1);
    }
}
