//! Shared-memory barriers with transaction counts (`mbarrier`, sm_90 forms), the completion
//! mechanism of the bulk tensor copies (`arch::tma`). The portable module's plain forms are in
//! `arch::mbarrier_sm80`.
//!
//! A barrier is 8 bytes of shared memory. Each phase completes when its expected arrivals
//! have arrived and its expected transaction bytes have landed; waiters name the phase by its
//! parity (0, 1, 0, …).

use core::arch::asm;

/// `mbarrier.init.shared::cta.b64 [bar], count`
///
/// # Safety
/// `bar` is an 8-byte aligned shared address no other thread uses until a barrier orders it.
#[inline(always)]
pub unsafe fn mbarrier_init(bar: u32, count: u32) {
    // SAFETY: forwarded contract.
    unsafe {
        asm!("mbarrier.init.shared::cta.b64 [{b}], {c};", b = in(reg32) bar, c = in(reg32) count, options(nostack))
    };
}

/// `fence.mbarrier_init.release.cluster`: makes initialised barriers visible to the copy
/// engine (the async proxy) before they are used.
#[inline(always)]
pub fn fence_mbarrier_init() {
    // SAFETY: no operands.
    unsafe { asm!("fence.mbarrier_init.release.cluster;", options(nostack)) };
}

/// `mbarrier.arrive.expect_tx.shared::cta.b64 _, [bar], bytes`: one arrival that also
/// expects `bytes` more transaction bytes in the current phase.
///
/// # Safety
/// `bar` is an initialised barrier.
#[inline(always)]
pub unsafe fn mbarrier_arrive_expect_tx(bar: u32, bytes: u32) {
    // SAFETY: forwarded contract.
    unsafe {
        asm!("mbarrier.arrive.expect_tx.shared::cta.b64 _, [{b}], {n};", b = in(reg32) bar, n = in(reg32) bytes, options(nostack))
    };
}

/// `mbarrier.arrive.shared::cta.b64 _, [bar]`: one arrival (release semantics).
///
/// # Safety
/// `bar` is an initialised barrier.
#[inline(always)]
pub unsafe fn mbarrier_arrive(bar: u32) {
    // SAFETY: forwarded contract.
    unsafe {
        asm!("mbarrier.arrive.shared::cta.b64 _, [{b}];", b = in(reg32) bar, options(nostack))
    };
}

/// `mbarrier.try_wait.parity.shared::cta.b64`: whether the phase of parity `parity` has
/// completed (waiting a bounded, system-chosen time first). Acquire semantics.
///
/// # Safety
/// `bar` is an initialised barrier.
#[inline(always)]
pub unsafe fn mbarrier_try_wait_parity(bar: u32, parity: u32) -> bool {
    let done: u32;
    // SAFETY: forwarded contract.
    unsafe {
        asm!(
            "{{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [{b}], {ph}; selp.u32 {r}, 1, 0, p; }}",
            b = in(reg32) bar,
            ph = in(reg32) parity,
            r = out(reg32) done,
            options(nostack)
        )
    };
    done != 0
}

/// `mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64`: as
/// [`mbarrier_try_wait_parity`], acquiring at cluster scope, so that once the phase has
/// completed this thread sees what a peer CTA stored before its releasing arrival
/// (`arch::cluster::mbarrier_arrive_release_cluster`).
///
/// # Safety
/// `bar` is an initialised barrier.
#[inline(always)]
pub unsafe fn mbarrier_try_wait_parity_cluster(bar: u32, parity: u32) -> bool {
    let done: u32;
    // SAFETY: forwarded contract.
    unsafe {
        asm!(
            "{{ .reg .pred p; mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 p, [{b}], {ph}; selp.u32 {r}, 1, 0, p; }}",
            b = in(reg32) bar,
            ph = in(reg32) parity,
            r = out(reg32) done,
            options(nostack)
        )
    };
    done != 0
}
