//! Conversions between f32 and the 16-bit formats.

use core::arch::asm;

/// `cvt.f32.f16`: exact upcast of f16 bits.
#[inline(always)]
pub fn cvt_f32_f16(bits: u16) -> f32 {
    let v: f32;
    // SAFETY: register-only conversion.
    unsafe {
        asm!("cvt.f32.f16 {v}, {h};", v = out(reg32) v, h = in(reg16) bits, options(pure, nomem, nostack))
    };
    v
}

/// `cvt.rn.f16.f32`: one round-to-nearest-even to f16.
#[inline(always)]
pub fn cvt_rn_f16_f32(v: f32) -> u16 {
    let h: u16;
    // SAFETY: register-only conversion.
    unsafe {
        asm!("cvt.rn.f16.f32 {h}, {v};", h = out(reg16) h, v = in(reg32) v, options(pure, nomem, nostack))
    };
    h
}

/// `cvt.rn.bf16.f32`: one round-to-nearest-even to bf16 (sm_80+).
#[inline(always)]
pub fn cvt_rn_bf16_f32(v: f32) -> u16 {
    let h: u16;
    // SAFETY: register-only conversion.
    unsafe {
        asm!("cvt.rn.bf16.f32 {h}, {v};", h = out(reg16) h, v = in(reg32) v, options(pure, nomem, nostack))
    };
    h
}
