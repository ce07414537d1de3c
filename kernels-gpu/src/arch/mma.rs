//! Warp-level matrix multiply-accumulate (`mma.sync`, sm_80+).
//!
//! Fragment layouts (PTX ISA, "Matrix Fragments for mma.m16n8k16"), with `g = lane / 4` and
//! `t = lane % 4`; each `u32` holds two 16-bit values, the lower-indexed one in the low half:
//! * A (16 × 16, row-major): `a[0]` rows g, k 2t..2t+1; `a[1]` rows g+8, k 2t..; `a[2]` rows g,
//!   k 2t+8..; `a[3]` rows g+8, k 2t+8..
//! * B (16 × 8, "col"): `b[0]` k 2t..2t+1, column g; `b[1]` k 2t+8.., column g.
//! * C/D (16 × 8, f32): `d[0..2]` row g, columns 2t, 2t+1; `d[2..4]` row g+8, same columns.

use core::arch::asm;

/// `mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32`: `d = a · b + d` for one 16 × 8
/// tile and 16 k, bf16 inputs, f32 accumulator.
#[inline(always)]
pub fn mma_m16n8k16_f32_bf16(d: &mut [f32; 4], a: &[u32; 4], b: &[u32; 2]) {
    // SAFETY: register-only; every lane of the warp executes it together (callers keep it
    // out of lane-dependent branches).
    unsafe {
        asm!(
            "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {{{d0}, {d1}, {d2}, {d3}}}, {{{a0}, {a1}, {a2}, {a3}}}, {{{b0}, {b1}}}, {{{d0}, {d1}, {d2}, {d3}}};",
            d0 = inout(reg32) d[0],
            d1 = inout(reg32) d[1],
            d2 = inout(reg32) d[2],
            d3 = inout(reg32) d[3],
            a0 = in(reg32) a[0],
            a1 = in(reg32) a[1],
            a2 = in(reg32) a[2],
            a3 = in(reg32) a[3],
            b0 = in(reg32) b[0],
            b1 = in(reg32) b[1],
            options(pure, nomem, nostack)
        )
    };
}

/// `mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32`: as
/// [`mma_m16n8k16_f32_bf16`] with f16 inputs.
#[inline(always)]
pub fn mma_m16n8k16_f32_f16(d: &mut [f32; 4], a: &[u32; 4], b: &[u32; 2]) {
    // SAFETY: as for `mma_m16n8k16_f32_bf16`.
    unsafe {
        asm!(
            "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {{{d0}, {d1}, {d2}, {d3}}}, {{{a0}, {a1}, {a2}, {a3}}}, {{{b0}, {b1}}}, {{{d0}, {d1}, {d2}, {d3}}};",
            d0 = inout(reg32) d[0],
            d1 = inout(reg32) d[1],
            d2 = inout(reg32) d[2],
            d3 = inout(reg32) d[3],
            a0 = in(reg32) a[0],
            a1 = in(reg32) a[1],
            a2 = in(reg32) a[2],
            a3 = in(reg32) a[3],
            b0 = in(reg32) b[0],
            b1 = in(reg32) b[1],
            options(pure, nomem, nostack)
        )
    };
}
