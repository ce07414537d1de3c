//! The executable definition of the CPU backend (contract C3), kept verbatim from the first
//! release: one naive loop per output element. Every tuned path is tested bit for bit
//! against it; it is never used outside the tests.

use crate::numeric::{round_bf16, round_f16, store_f32, upcast};
use crate::types::{DType, Gemm, GemmPointers, Layout, OutputMode};

/// Reads element `idx` of a buffer of `dtype` as f32 (exact).
///
/// # Safety
/// `base` points to a buffer of `dtype` with more than `idx` elements.
#[inline(always)]
unsafe fn load(base: *const u8, dtype: DType, idx: usize) -> f32 {
    // SAFETY: in bounds by the caller's contract; unaligned reads tolerate any alignment.
    unsafe {
        match dtype {
            DType::F32 => (base as *const f32).add(idx).read_unaligned(),
            DType::BF16 => upcast(
                DType::BF16,
                (base as *const u16).add(idx).read_unaligned() as u32,
            ),
            DType::F16 => upcast(
                DType::F16,
                (base as *const u16).add(idx).read_unaligned() as u32,
            ),
        }
    }
}

/// Runs `g` one element at a time on the calling thread.
///
/// # Safety
/// The pointers of `p` are valid host pointers for the spans `validate::check(g)` returned,
/// C overlaps no input, and nothing else touches C during the call.
pub(super) unsafe fn reference(g: &Gemm, p: &GemmPointers) {
    let (a, b, bias, c) = (
        p.a as *const u8,
        p.b as *const u8,
        p.bias as *const u8,
        p.c as *mut u8,
    );
    for batch in 0..g.batch {
        for i in 0..g.m {
            for j in 0..g.n {
                let mut acc = 0.0f32;
                for k in 0..g.k {
                    let ai = match g.a.layout {
                        Layout::RowMajor => i * g.a.ld + k,
                        Layout::ColMajor => i + k * g.a.ld,
                    } + batch * g.a.batch_stride;
                    let bi = match g.b.layout {
                        Layout::RowMajor => k * g.b.ld + j,
                        Layout::ColMajor => k + j * g.b.ld,
                    } + batch * g.b.batch_stride;
                    // SAFETY: indices inside the validated spans.
                    let (x, y) = unsafe { (load(a, g.a.dtype, ai), load(b, g.b.dtype, bi)) };
                    acc = x.mul_add(y, acc);
                }
                if let Some(d) = g.bias {
                    // SAFETY: bias holds N elements.
                    acc += unsafe { load(bias, d, j) };
                }
                let ci = batch * g.c.batch_stride + i * g.c.ldc + j;
                // SAFETY: ci is inside C's validated span.
                unsafe {
                    match g.c.mode {
                        OutputMode::AccumulateF32 => {
                            let dst = (c as *mut f32).add(ci);
                            dst.write_unaligned(store_f32(dst.read_unaligned() + acc));
                        }
                        OutputMode::Overwrite(DType::F32) => {
                            (c as *mut f32).add(ci).write_unaligned(store_f32(acc))
                        }
                        OutputMode::Overwrite(DType::BF16) => (c as *mut u16)
                            .add(ci)
                            .write_unaligned(round_bf16(acc).to_bits()),
                        OutputMode::Overwrite(DType::F16) => (c as *mut u16)
                            .add(ci)
                            .write_unaligned(round_f16(acc).to_bits()),
                    }
                }
            }
        }
    }
}
