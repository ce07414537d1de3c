//! Vector accesses to global memory (`.global` state space, 64-bit generic addresses that
//! point into global memory). Rust's own loads and stores of arrays split into scalar
//! accesses; these keep one 4- or 8-byte transaction per thread.

use core::arch::asm;

/// `st.global.b32`
///
/// # Safety
/// `addr` is a 4-byte aligned global address, valid for 4 bytes of writes.
#[inline(always)]
pub unsafe fn st_global_b32(addr: u64, v: u32) {
    // SAFETY: forwarded contract.
    unsafe {
        asm!(
            "st.global.b32 [{a}], {x};",
            a = in(reg64) addr,
            x = in(reg32) v,
            options(nostack)
        )
    };
}

/// `st.global.v2.b32`
///
/// # Safety
/// `addr` is an 8-byte aligned global address, valid for 8 bytes of writes.
#[inline(always)]
pub unsafe fn st_global_v2_b32(addr: u64, v: [u32; 2]) {
    // SAFETY: forwarded contract.
    unsafe {
        asm!(
            "st.global.v2.b32 [{a}], {{{x}, {y}}};",
            a = in(reg64) addr,
            x = in(reg32) v[0],
            y = in(reg32) v[1],
            options(nostack)
        )
    };
}

/// `ld.global.v2.f32`
///
/// # Safety
/// `addr` is an 8-byte aligned global address, valid for 8 bytes of reads, not written by
/// another thread during the kernel.
#[inline(always)]
pub unsafe fn ld_global_v2_f32(addr: u64) -> [f32; 2] {
    let (x, y): (f32, f32);
    // SAFETY: forwarded contract.
    unsafe {
        asm!(
            "ld.global.v2.f32 {{{x}, {y}}}, [{a}];",
            a = in(reg64) addr,
            x = out(reg32) x,
            y = out(reg32) y,
            options(readonly, nostack)
        )
    };
    [x, y]
}

/// `ld.global.v2.b32`
///
/// # Safety
/// `addr` is an 8-byte aligned global address, valid for 8 bytes of reads, not written by
/// another thread during the kernel.
#[inline(always)]
pub unsafe fn ld_global_v2_b32(addr: u64) -> [u32; 2] {
    let (x, y): (u32, u32);
    // SAFETY: forwarded contract.
    unsafe {
        asm!(
            "ld.global.v2.b32 {{{x}, {y}}}, [{a}];",
            a = in(reg64) addr,
            x = out(reg32) x,
            y = out(reg32) y,
            options(readonly, nostack)
        )
    };
    [x, y]
}

/// `ld.global.v4.b32`
///
/// # Safety
/// `addr` is a 16-byte aligned global address, valid for 16 bytes of reads, not written by
/// another thread during the kernel.
#[inline(always)]
pub unsafe fn ld_global_v4_b32(addr: u64) -> [u32; 4] {
    let (x, y, z, w): (u32, u32, u32, u32);
    // SAFETY: forwarded contract.
    unsafe {
        asm!(
            "ld.global.v4.b32 {{{x}, {y}, {z}, {w}}}, [{a}];",
            a = in(reg64) addr,
            x = out(reg32) x,
            y = out(reg32) y,
            z = out(reg32) z,
            w = out(reg32) w,
            options(readonly, nostack)
        )
    };
    [x, y, z, w]
}

/// `st.release.sys.global.b32`: a store that every thread of the system — the host
/// included, for mapped host memory — sees only after this thread's earlier writes.
///
/// # Safety
/// `addr` is a 4-byte aligned global address (device or mapped host memory), valid for 4
/// bytes of writes.
#[inline(always)]
pub unsafe fn st_global_release_sys_b32(addr: u64, v: u32) {
    // SAFETY: forwarded contract.
    unsafe {
        asm!(
            "st.release.sys.global.b32 [{a}], {x};",
            a = in(reg64) addr,
            x = in(reg32) v,
            options(nostack)
        )
    };
}

/// `atom.relaxed.gpu.global.add.u32`: adds `v` to the word at `addr` and returns the value it
/// held before. Relaxed: the callers order nothing else by it, they only take distinct
/// values from it.
///
/// # Safety
/// `addr` is a 4-byte aligned global address valid for reads and writes of 4 bytes, which
/// other threads touch only by atomics while the kernel runs.
#[inline(always)]
pub unsafe fn atom_add_relaxed_gpu_u32(addr: u64, v: u32) -> u32 {
    let old: u32;
    // SAFETY: forwarded contract.
    unsafe {
        asm!(
            "atom.relaxed.gpu.global.add.u32 {o}, [{a}], {v};",
            a = in(reg64) addr,
            v = in(reg32) v,
            o = out(reg32) old,
            options(nostack)
        )
    };
    old
}
