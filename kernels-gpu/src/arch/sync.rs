//! Block-level barriers.

use core::arch::asm;

/// `bar.sync 0`: every thread of the block arrives; orders shared-memory accesses.
#[inline(always)]
pub fn bar_sync() {
    // SAFETY: all threads of the block execute the same barrier sequence (callers keep
    // barriers outside thread-dependent branches).
    unsafe { asm!("bar.sync 0;", options(nostack)) };
}
