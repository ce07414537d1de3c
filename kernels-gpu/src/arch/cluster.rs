//! Thread block clusters (sm_90): a CTA's rank in its cluster, the cluster-wide barrier, and
//! addressing and signalling another CTA's shared memory (distributed shared memory).

use core::arch::asm;

/// `%cluster_ctarank`: this CTA's rank in its cluster (0 .. cluster size).
#[inline(always)]
pub fn cluster_ctarank() -> u32 {
    let r: u32;
    // SAFETY: reads a special register.
    unsafe {
        asm!("mov.u32 {r}, %cluster_ctarank;", r = out(reg32) r, options(pure, nomem, nostack))
    };
    r
}

/// `barrier.cluster.arrive.release.aligned` then `barrier.cluster.wait.acquire.aligned`: every
/// thread of every CTA of the cluster arrives, then waits for all; orders shared-memory
/// writes (barrier initialisation included) before the peers' later accesses.
#[inline(always)]
pub fn cluster_sync() {
    // SAFETY: every thread of the cluster executes it the same number of times, outside
    // thread-dependent branches (callers' contract, as for `bar.sync 0`).
    unsafe {
        asm!(
            "barrier.cluster.arrive.release.aligned;",
            "barrier.cluster.wait.acquire.aligned;",
            options(nostack)
        )
    };
}

/// `mapa.shared::cluster.u32`: the shared::cluster address of the variable at shared address
/// `addr` of this CTA, in the CTA of rank `rank` of the cluster.
#[inline(always)]
pub fn mapa_shared_cluster(addr: u32, rank: u32) -> u32 {
    let r: u32;
    // SAFETY: address arithmetic only.
    unsafe {
        asm!(
            "mapa.shared::cluster.u32 {r}, {a}, {k};",
            r = out(reg32) r,
            a = in(reg32) addr,
            k = in(reg32) rank,
            options(pure, nomem, nostack)
        )
    };
    r
}

/// `mbarrier.arrive.shared::cluster.b64`: one arrival on the barrier at shared::cluster
/// address `bar` (possibly another CTA's, from [`mapa_shared_cluster`]). Default semantics
/// (release at CTA scope): it signals "done reading" after a completed wgmma group, whose
/// completion already orders the reads; a cluster-scope release would cost a GPU-wide
/// memory barrier per arrival (`MEMBAR.ALL.GPU` in the SASS).
///
/// # Safety
/// `bar` is an initialised barrier of a CTA of this cluster that is still running.
#[inline(always)]
pub unsafe fn mbarrier_arrive_cluster(bar: u32) {
    // SAFETY: forwarded contract.
    unsafe {
        asm!(
            "mbarrier.arrive.shared::cluster.b64 _, [{b}];",
            b = in(reg32) bar,
            options(nostack)
        )
    };
}

/// `st.shared::cluster.u32 [addr], v`: a store to the shared::cluster address `addr`
/// (possibly another CTA's, from [`mapa_shared_cluster`]).
///
/// # Safety
/// `addr` is 4-byte aligned shared memory of a CTA of this cluster that is still running,
/// which no other thread accesses until a barrier orders it after this store.
#[inline(always)]
pub unsafe fn st_shared_cluster_b32(addr: u32, v: u32) {
    // SAFETY: forwarded contract.
    unsafe {
        asm!(
            "st.shared::cluster.u32 [{a}], {v};",
            a = in(reg32) addr,
            v = in(reg32) v,
            options(nostack)
        )
    };
}

/// `mbarrier.arrive.release.cluster.shared::cluster.b64`: one arrival on the barrier at
/// shared::cluster address `bar` (another CTA's), releasing this thread's earlier writes at
/// cluster scope: for a barrier that hands over data stored with [`st_shared_cluster_b32`],
/// which [`mbarrier_arrive_cluster`]'s CTA-scope release would not order for the peer.
///
/// # Safety
/// `bar` is an initialised barrier of a CTA of this cluster that is still running.
#[inline(always)]
pub unsafe fn mbarrier_arrive_release_cluster(bar: u32) {
    // SAFETY: forwarded contract.
    unsafe {
        asm!(
            "mbarrier.arrive.release.cluster.shared::cluster.b64 _, [{b}];",
            b = in(reg32) bar,
            options(nostack)
        )
    };
}
