//! The bulk tensor copy engine (TMA, sm_90): tiles of a tensor described by a tensor map
//! (built on the host by `cuTensorMapEncodeTiled`) copied into shared memory, completing on
//! an mbarrier, or from shared memory back to the tensor in bulk groups, and the proxy fence
//! between generic and async accesses.

use core::arch::asm;

/// `cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes`: copies
/// the box at coordinates (`c0`, `c1`, `c2`) (innermost first) of the tensor map at generic
/// address `map` to shared `dst`; elements outside the tensor are written as zeros. The box's
/// bytes complete as transactions on the barrier `bar`.
///
/// # Safety
/// `map` is the generic address of a valid tensor map (kernel parameter or global memory);
/// `dst` is a shared address aligned as the map's swizzle needs (1024 bytes for 128B), with
/// room for the box; `bar` is an initialised barrier expecting these bytes.
#[inline(always)]
pub unsafe fn cp_async_bulk_tensor_3d(dst: u32, map: u64, c0: i32, c1: i32, c2: i32, bar: u32) {
    // SAFETY: forwarded contract.
    unsafe {
        asm!(
            "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [{d}], [{m}, {{{c0}, {c1}, {c2}}}], [{b}];",
            d = in(reg32) dst,
            m = in(reg64) map,
            c0 = in(reg32) c0,
            c1 = in(reg32) c1,
            c2 = in(reg32) c2,
            b = in(reg32) bar,
            options(nostack)
        )
    };
}

/// `cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster`:
/// as [`cp_async_bulk_tensor_3d`], but the box is written to shared `dst` of every CTA of the
/// cluster in `cta_mask` (bit i = CTA rank i), each completing on its own barrier at the
/// same shared offset as `bar`.
///
/// # Safety
/// As for [`cp_async_bulk_tensor_3d`], in every CTA of the mask: the kernel runs in clusters
/// that hold those ranks, and each destination CTA's barrier at `bar` expects these bytes
/// and stays alive (the CTA does not exit) until they land.
#[inline(always)]
pub unsafe fn cp_async_bulk_tensor_3d_multicast(
    dst: u32,
    map: u64,
    coords: [i32; 3],
    bar: u32,
    cta_mask: u16,
) {
    // SAFETY: forwarded contract.
    unsafe {
        asm!(
            "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster [{d}], [{m}, {{{c0}, {c1}, {c2}}}], [{b}], {k};",
            d = in(reg32) dst,
            m = in(reg64) map,
            c0 = in(reg32) coords[0],
            c1 = in(reg32) coords[1],
            c2 = in(reg32) coords[2],
            b = in(reg32) bar,
            k = in(reg16) cta_mask,
            options(nostack)
        )
    };
}

/// `cp.async.bulk.prefetch.tensor.3d.L2.global.tile`: asks L2 for the box at coordinates
/// (`c0`, `c1`, `c2`) (innermost first) of the tensor map at generic address `map`. A hint:
/// it reads nothing into the SM and is no memory operation of the memory model, so it may be
/// issued before the kernel may read the tensor (before `griddepcontrol.wait`) without
/// changing what a later read returns — L2 is the point of coherence of the device's memory.
///
/// # Safety
/// `map` is the generic address of a valid tensor map.
#[inline(always)]
pub unsafe fn cp_async_bulk_prefetch_tensor_3d_l2(map: u64, coords: [i32; 3]) {
    // SAFETY: forwarded contract.
    unsafe {
        asm!(
            "cp.async.bulk.prefetch.tensor.3d.L2.global.tile [{m}, {{{c0}, {c1}, {c2}}}];",
            m = in(reg64) map,
            c0 = in(reg32) coords[0],
            c1 = in(reg32) coords[1],
            c2 = in(reg32) coords[2],
            options(nostack)
        )
    };
}

/// `cp.async.bulk.tensor.3d.global.shared::cta.tile.bulk_group`: copies shared `src` (a box
/// laid out as the map's swizzle says) to the box at coordinates (`c0`, `c1`, `c2`)
/// (innermost first) of the tensor map at generic address `map`; the parts of the box
/// outside the tensor are not written. Completes as part of this thread's current bulk
/// group ([`cp_async_bulk_commit_group`]).
///
/// # Safety
/// `map` is the generic address of a valid tensor map whose tensor may be written there;
/// `src` is a shared address aligned as the map's swizzle needs (1024 bytes for 128B), holding
/// the box, written before a `fence.proxy.async` and left untouched until
/// [`cp_async_bulk_wait_group_read`] says the copy has read it.
#[inline(always)]
pub unsafe fn cp_async_bulk_tensor_3d_store(map: u64, coords: [i32; 3], src: u32) {
    // SAFETY: forwarded contract.
    unsafe {
        asm!(
            "cp.async.bulk.tensor.3d.global.shared::cta.tile.bulk_group [{m}, {{{c0}, {c1}, {c2}}}], [{s}];",
            m = in(reg64) map,
            c0 = in(reg32) coords[0],
            c1 = in(reg32) coords[1],
            c2 = in(reg32) coords[2],
            s = in(reg32) src,
            options(nostack)
        )
    };
}

/// `cp.async.bulk.commit_group`: closes this thread's bulk group of copies issued since the
/// last commit.
#[inline(always)]
pub fn cp_async_bulk_commit_group() {
    // SAFETY: no operands.
    unsafe { asm!("cp.async.bulk.commit_group;", options(nostack)) };
}

/// `cp.async.bulk.wait_group.read N`: waits until at most `N` of this thread's committed bulk
/// groups still read their shared-memory sources.
#[inline(always)]
pub fn cp_async_bulk_wait_group_read<const N: u32>() {
    // SAFETY: no memory operands.
    unsafe { asm!("cp.async.bulk.wait_group.read {n};", n = const N, options(nostack)) };
}

/// `fence.proxy.async.shared::cta`: orders this thread's generic-proxy shared-memory accesses
/// with later async-proxy ones (copy engine, wgmma).
#[inline(always)]
pub fn fence_proxy_async_shared_cta() {
    // SAFETY: no operands.
    unsafe { asm!("fence.proxy.async.shared::cta;", options(nostack)) };
}

/// `prefetch.tensormap`: brings the tensor map at generic address `map` into the cache.
///
/// # Safety
/// `map` is the generic address of a tensor map.
#[inline(always)]
pub unsafe fn prefetch_tensormap(map: u64) {
    // SAFETY: forwarded contract.
    unsafe { asm!("prefetch.tensormap [{m}];", m = in(reg64) map, options(nostack)) };
}

/// `mov.u64` + `cvta.param.u64`: the generic address of byte `offset` of the calling
/// kernel's first parameter (`<entry>_param_0`), e.g. a tensor map passed by value. `$entry`
/// must be the name of the kernel the expansion is inlined into.
#[macro_export]
macro_rules! kernel_param_generic_address {
    ($entry:ident, $offset:expr) => {{
        let addr: u64;
        // SAFETY: reads the address of the kernel's own parameter; touches no memory.
        unsafe {
            core::arch::asm!(
                concat!(
                    "mov.u64 {a}, ",
                    stringify!($entry),
                    "_param_0;\n\tcvta.param.u64 {a}, {a};"
                ),
                a = out(reg64) addr,
                options(pure, nomem, nostack)
            )
        };
        addr + $offset
    }};
}
