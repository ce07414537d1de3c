//! Input element types as the kernels read them: each is upcast to f32 exactly at load.

use crate::arch::convert::cvt_f32_f16;

/// An input element stored in global memory.
pub trait Element: Copy {
    /// Bytes of one stored element.
    const BYTES: u64;

    /// Reads element `idx` from `base` and upcasts it to f32 exactly.
    ///
    /// # Safety
    /// `base + idx` is a readable, naturally aligned element in global memory.
    unsafe fn load_f32(base: u64, idx: u64) -> f32;
}

/// IEEE binary32.
#[derive(Clone, Copy)]
pub struct F32;
/// bfloat16: the upper half of a binary32.
#[derive(Clone, Copy)]
pub struct Bf16;
/// IEEE binary16.
#[derive(Clone, Copy)]
pub struct F16;

impl Element for F32 {
    const BYTES: u64 = 4;
    #[inline(always)]
    unsafe fn load_f32(base: u64, idx: u64) -> f32 {
        // SAFETY: forwarded contract.
        unsafe { *(base as *const f32).add(idx as usize) }
    }
}

impl Element for Bf16 {
    const BYTES: u64 = 2;
    #[inline(always)]
    unsafe fn load_f32(base: u64, idx: u64) -> f32 {
        // SAFETY: forwarded contract.
        let bits = unsafe { *(base as *const u16).add(idx as usize) };
        f32::from_bits((bits as u32) << 16)
    }
}

impl Element for F16 {
    const BYTES: u64 = 2;
    #[inline(always)]
    unsafe fn load_f32(base: u64, idx: u64) -> f32 {
        // SAFETY: forwarded contract.
        cvt_f32_f16(unsafe { *(base as *const u16).add(idx as usize) })
    }
}
