//! Shared-memory addressing and access (`.shared` state space, 32-bit addresses).
//!
//! Kernels use the module's one dynamic shared-memory window, `sgemm_bi_dyn_smem`, which the
//! build step declares at module scope (`.extern .shared`, since rustc cannot declare it).

use core::arch::asm;

/// Shared-memory address of the start of the dynamic shared-memory window.
#[inline(always)]
pub fn dyn_smem_base() -> u32 {
    let addr: u32;
    // SAFETY: reads the address of a module-scope symbol; no memory is touched.
    unsafe {
        asm!("mov.u32 {a}, sgemm_bi_dyn_smem;", a = out(reg32) addr, options(pure, nomem, nostack))
    };
    addr
}

/// `st.shared.f32`
///
/// # Safety
/// `addr` is 4-byte aligned and inside the block's shared-memory allocation.
#[inline(always)]
pub unsafe fn st_shared_f32(addr: u32, v: f32) {
    // SAFETY: forwarded contract.
    unsafe {
        asm!("st.shared.f32 [{a}], {v};", a = in(reg32) addr, v = in(reg32) v, options(nostack))
    };
}

/// `ld.shared.v4.f32`
///
/// # Safety
/// `addr` is 16-byte aligned and the 16 bytes from it are inside the block's shared memory.
#[inline(always)]
pub unsafe fn ld_shared_v4_f32(addr: u32) -> [f32; 4] {
    let (x, y, z, w): (f32, f32, f32, f32);
    // SAFETY: forwarded contract.
    unsafe {
        asm!(
            "ld.shared.v4.f32 {{{x}, {y}, {z}, {w}}}, [{a}];",
            a = in(reg32) addr,
            x = out(reg32) x,
            y = out(reg32) y,
            z = out(reg32) z,
            w = out(reg32) w,
            options(readonly, nostack)
        )
    };
    [x, y, z, w]
}

/// `st.shared.v4.b32`
///
/// # Safety
/// `addr` is 16-byte aligned and the 16 bytes from it are inside the block's shared memory.
#[inline(always)]
pub unsafe fn st_shared_v4_b32(addr: u32, v: [u32; 4]) {
    // SAFETY: forwarded contract.
    unsafe {
        asm!(
            "st.shared.v4.b32 [{a}], {{{x}, {y}, {z}, {w}}};",
            a = in(reg32) addr,
            x = in(reg32) v[0],
            y = in(reg32) v[1],
            z = in(reg32) v[2],
            w = in(reg32) v[3],
            options(nostack)
        )
    };
}

/// `st.shared.b32`
///
/// # Safety
/// `addr` is 4-byte aligned and inside the block's shared-memory allocation.
#[inline(always)]
pub unsafe fn st_shared_b32(addr: u32, v: u32) {
    // SAFETY: forwarded contract.
    unsafe {
        asm!("st.shared.b32 [{a}], {v};", a = in(reg32) addr, v = in(reg32) v, options(nostack))
    };
}

/// `st.shared.v2.b32`
///
/// # Safety
/// `addr` is 8-byte aligned and the 8 bytes from it are inside the block's shared memory.
#[inline(always)]
pub unsafe fn st_shared_v2_b32(addr: u32, v: [u32; 2]) {
    // SAFETY: forwarded contract.
    unsafe {
        asm!(
            "st.shared.v2.b32 [{a}], {{{x}, {y}}};",
            a = in(reg32) addr,
            x = in(reg32) v[0],
            y = in(reg32) v[1],
            options(nostack)
        )
    };
}

/// `ld.shared.b32`
///
/// # Safety
/// `addr` is 4-byte aligned and inside the block's shared-memory allocation.
#[inline(always)]
pub unsafe fn ld_shared_b32(addr: u32) -> u32 {
    let v: u32;
    // SAFETY: forwarded contract.
    unsafe {
        asm!("ld.shared.b32 {v}, [{a}];", a = in(reg32) addr, v = out(reg32) v, options(readonly, nostack))
    };
    v
}

/// `ld.shared.u16`, zero-extended to 32 bits.
///
/// # Safety
/// `addr` is 2-byte aligned and inside the block's shared-memory allocation.
#[inline(always)]
pub unsafe fn ld_shared_u16(addr: u32) -> u32 {
    let v: u32;
    // SAFETY: forwarded contract.
    unsafe {
        asm!("ld.shared.u16 {v}, [{a}];", a = in(reg32) addr, v = out(reg32) v, options(readonly, nostack))
    };
    v
}

/// `ld.shared.v2.b32`
///
/// # Safety
/// `addr` is 8-byte aligned and the 8 bytes from it are inside the block's shared memory.
#[inline(always)]
pub unsafe fn ld_shared_v2_b32(addr: u32) -> [u32; 2] {
    let (x, y): (u32, u32);
    // SAFETY: forwarded contract.
    unsafe {
        asm!(
            "ld.shared.v2.b32 {{{x}, {y}}}, [{a}];",
            a = in(reg32) addr,
            x = out(reg32) x,
            y = out(reg32) y,
            options(readonly, nostack)
        )
    };
    [x, y]
}

/// `ld.shared.v4.b32`
///
/// # Safety
/// `addr` is 16-byte aligned and the 16 bytes from it are inside the block's shared memory.
#[inline(always)]
pub unsafe fn ld_shared_v4_b32(addr: u32) -> [u32; 4] {
    let (x, y, z, w): (u32, u32, u32, u32);
    // SAFETY: forwarded contract.
    unsafe {
        asm!(
            "ld.shared.v4.b32 {{{x}, {y}, {z}, {w}}}, [{a}];",
            a = in(reg32) addr,
            x = out(reg32) x,
            y = out(reg32) y,
            z = out(reg32) z,
            w = out(reg32) w,
            options(readonly, nostack)
        )
    };
    [x, y, z, w]
}
