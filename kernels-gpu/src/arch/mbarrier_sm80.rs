//! Shared-memory barriers in the forms PTX ISA 7.1 has for sm_80 (the portable module's
//! `.version`): a ring of stages handed between the warps of one block, without the
//! transaction counts of the sm_90 forms (`arch::mbarrier`).
//!
//! A barrier is 8 bytes of shared memory. Each phase completes when its expected arrivals
//! have arrived; waiters name the phase by its parity (0, 1, 0, …).

use core::arch::asm;

/// `mbarrier.init.shared.b64 [bar], count`
///
/// # Safety
/// `bar` is an 8-byte aligned shared address no other thread uses until a block barrier
/// orders it.
#[inline(always)]
pub unsafe fn init(bar: u32, count: u32) {
    // SAFETY: forwarded contract.
    unsafe {
        asm!("mbarrier.init.shared.b64 [{b}], {c};", b = in(reg32) bar, c = in(reg32) count, options(nostack))
    };
}

/// `mbarrier.arrive.shared.b64`: one arrival on the current phase, with release
/// semantics (this thread's earlier memory accesses happen before whoever observes the
/// phase complete).
///
/// # Safety
/// `bar` is an initialised barrier whose current phase still expects this arrival.
#[inline(always)]
pub unsafe fn arrive(bar: u32) {
    // SAFETY: forwarded contract.
    unsafe {
        asm!(
            "{{ .reg .b64 state; mbarrier.arrive.shared.b64 state, [{b}]; }}",
            b = in(reg32) bar,
            options(nostack)
        )
    };
}

/// `mbarrier.test_wait.parity.shared.b64`: whether the phase of parity `parity` has
/// completed, without waiting. Acquire semantics when it has.
///
/// # Safety
/// `bar` is an initialised barrier whose phase of that parity is the current one or the
/// one just completed (a waiter never falls two phases behind).
#[inline(always)]
pub unsafe fn test_wait_parity(bar: u32, parity: u32) -> bool {
    let done: u32;
    // SAFETY: forwarded contract.
    unsafe {
        asm!(
            "{{ .reg .pred p; mbarrier.test_wait.parity.shared.b64 p, [{b}], {ph}; selp.u32 {r}, 1, 0, p; }}",
            b = in(reg32) bar,
            ph = in(reg32) parity,
            r = out(reg32) done,
            options(nostack)
        )
    };
    done != 0
}
