//! Asynchronous copies from global to shared memory (`cp.async`, sm_80+) and their groups.
//!
//! A thread's copies are collected into groups by `cp.async.commit_group`; a thread waits for
//! its own groups with `cp.async.wait_group`, and a barrier then makes the data visible to
//! the whole block.

use core::arch::asm;

/// `cp.async.cg.shared.global [dst], [src], 16, src_bytes`: copies `src_bytes` (0 to 16)
/// bytes from global `src` to shared `dst` and fills the rest of the 16 bytes with zeros.
/// `src_bytes == 0` reads nothing and writes 16 zero bytes.
///
/// # Safety
/// `dst` is a 16-byte aligned shared address inside the block's allocation; `src` is a
/// 16-byte aligned global address whose first `src_bytes` bytes are readable.
#[inline(always)]
pub unsafe fn cp_async_cg_16(dst: u32, src: u64, src_bytes: u32) {
    // SAFETY: forwarded contract.
    unsafe {
        asm!(
            "cp.async.cg.shared.global [{d}], [{s}], 16, {n};",
            d = in(reg32) dst,
            s = in(reg64) src,
            n = in(reg32) src_bytes,
            options(nostack)
        )
    };
}

/// `cp.async.commit_group`: closes the group of this thread's copies issued since the last
/// commit (an empty group is fine).
#[inline(always)]
pub fn cp_async_commit_group() {
    // SAFETY: no operands; only affects this thread's bookkeeping of its copies.
    unsafe { asm!("cp.async.commit_group;", options(nostack)) };
}

/// `cp.async.wait_group N`: waits until at most `N` of this thread's committed groups are
/// still in flight.
#[inline(always)]
pub fn cp_async_wait_group<const N: u32>() {
    // SAFETY: waits on this thread's own copies; touches no memory itself.
    unsafe { asm!("cp.async.wait_group {n};", n = const N, options(nostack)) };
}
