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

/// `cvt.rn.f16x2.f32`: `lo` and `hi` each rounded once to nearest-even f16, packed (`lo` in
/// bits 0..16): per element the same rounding as [`cvt_rn_f16_f32`], in one instruction of
/// the ALU pipe rather than two conversions.
#[inline(always)]
pub fn cvt_rn_f16x2_f32(lo: f32, hi: f32) -> u32 {
    let h: u32;
    // SAFETY: register-only conversion.
    unsafe {
        asm!("cvt.rn.f16x2.f32 {h}, {hi}, {lo};", h = out(reg32) h, hi = in(reg32) hi, lo = in(reg32) lo, options(pure, nomem, nostack))
    };
    h
}

/// `cvt.rn.bf16x2.f32`: `lo` and `hi` each rounded once to nearest-even bf16, packed (`lo`
/// in bits 0..16): per element the same rounding as [`cvt_rn_bf16_f32`] (sm_80+).
#[inline(always)]
pub fn cvt_rn_bf16x2_f32(lo: f32, hi: f32) -> u32 {
    let h: u32;
    // SAFETY: register-only conversion.
    unsafe {
        asm!("cvt.rn.bf16x2.f32 {h}, {hi}, {lo};", h = out(reg32) h, hi = in(reg32) hi, lo = in(reg32) lo, options(pure, nomem, nostack))
    };
    h
}
