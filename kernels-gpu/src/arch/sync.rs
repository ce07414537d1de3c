//! Block-level barriers.

use core::arch::asm;

/// `bar.sync 0`: every thread of the block arrives; orders shared-memory accesses.
#[inline(always)]
pub fn bar_sync() {
    // SAFETY: all threads of the block execute the same barrier sequence (callers keep
    // barriers outside thread-dependent branches).
    unsafe { asm!("bar.sync 0;", options(nostack)) };
}

/// `bar.warp.sync 0xffffffff`: every lane of the warp arrives; orders the lanes' memory
/// accesses, so that one lane's release afterwards covers the whole warp's.
#[inline(always)]
pub fn syncwarp() {
    // SAFETY: callers reach it with all 32 lanes (outside lane-dependent branches).
    unsafe { asm!("bar.warp.sync -1;", options(nostack)) };
}

/// `nanosleep.u32 ns`: suspends the warp for about `ns` nanoseconds (0 to 2 · ns), leaving
/// its scheduler's issue slots and the shared-memory pipe to the others while it polls.
#[inline(always)]
pub fn nanosleep(ns: u32) {
    // SAFETY: touches no memory.
    unsafe { asm!("nanosleep.u32 {t};", t = in(reg32) ns, options(nostack, nomem)) };
}

/// `bar.sync ID, COUNT`: a named barrier for `COUNT` threads (a multiple of 32), e.g. one
/// warpgroup; orders their shared-memory accesses without stopping the rest of the block.
#[inline(always)]
pub fn bar_sync_named<const COUNT: u32>(id: u32) {
    // SAFETY: exactly COUNT threads (whole warps) use barrier `id`, all with the same
    // sequence of calls; no other group of threads uses `id` meanwhile (callers' contract,
    // stated where the ids are chosen).
    unsafe { asm!("bar.sync {id}, {n};", id = in(reg32) id, n = const COUNT, options(nostack)) };
}

/// `bar.arrive ID, COUNT`: counts this warp's threads into named barrier `id` without
/// waiting; with `bar_sync_named::<COUNT>(id)` from the other threads it hands a turn from
/// one group of threads to another (the arriving group goes on at once).
#[inline(always)]
pub fn bar_arrive_named<const COUNT: u32>(id: u32) {
    // SAFETY: as for `bar_sync_named`: the COUNT threads of barrier `id` are the arriving
    // ones plus the waiting ones, whole warps, each group with the same sequence of calls.
    unsafe { asm!("bar.arrive {id}, {n};", id = in(reg32) id, n = const COUNT, options(nostack)) };
}

/// `setmaxnreg.dec.sync.aligned.u32 N`: this warpgroup gives registers back, keeping `N` per
/// thread (sm_90a; needs a register cap at entry, `.maxntid` with one block per SM).
#[inline(always)]
pub fn setmaxnreg_dec<const N: u32>() {
    // SAFETY: every thread of the warpgroup executes it together (one branch per role).
    unsafe { asm!("setmaxnreg.dec.sync.aligned.u32 {n};", n = const N, options(nostack)) };
}

/// `setmaxnreg.inc.sync.aligned.u32 N`: this warpgroup takes registers, up to `N` per thread.
#[inline(always)]
pub fn setmaxnreg_inc<const N: u32>() {
    // SAFETY: as for `setmaxnreg_dec`.
    unsafe { asm!("setmaxnreg.inc.sync.aligned.u32 {n};", n = const N, options(nostack)) };
}

/// `griddepcontrol.wait`: waits until the grids this one depends on (the previous kernel in
/// the stream, when this one was launched with programmatic stream serialization) have
/// completed and their memory operations are visible. Returns at once when the launch has
/// no such dependency.
#[inline(always)]
pub fn griddepcontrol_wait() {
    // SAFETY: touches no memory of its own; only orders this thread after the prerequisites.
    unsafe { asm!("griddepcontrol.wait;", options(nostack)) };
}

/// `griddepcontrol.launch_dependents`: lets the next kernel in the stream, when it was
/// launched with programmatic stream serialization, be scheduled once every block of this
/// grid has issued it (or exited). The first issue in a block counts; later ones do nothing.
/// Memory is not ordered by it: the dependent waits with [`griddepcontrol_wait`].
#[inline(always)]
pub fn griddepcontrol_launch_dependents() {
    // SAFETY: a scheduling hint; touches no memory.
    unsafe { asm!("griddepcontrol.launch_dependents;", options(nostack)) };
}

/// `vote.sync.ballot.b32`: bit l set when lane l's `pred` holds, for every lane of the warp.
#[inline(always)]
pub fn ballot_sync(pred: bool) -> u32 {
    let r: u32;
    // SAFETY: every lane of the warp executes it together (full mask; callers keep it out of
    // lane-dependent branches).
    unsafe {
        asm!(
            "{{ .reg .pred p; setp.ne.u32 p, {x}, 0; vote.sync.ballot.b32 {r}, p, 0xffffffff; }}",
            x = in(reg32) u32::from(pred),
            r = out(reg32) r,
            options(nostack)
        )
    };
    r
}

/// `shfl.sync.idx.b32` from lane 0: lane 0's `v` in every lane. For a value that is already
/// the same in every lane (a warpgroup's index, `tid / 128`) it changes nothing but what
/// ptxas knows: a shuffle's result is warp-uniform, so branches on it are not divergent and
/// what is computed from it can live in uniform registers — the wgmma descriptors are then
/// formed there instead of being moved from vector registers before each wgmma.
#[inline(always)]
pub fn warp_uniform(v: u32) -> u32 {
    let r: u32;
    // SAFETY: every lane of the warp executes it together (full mask; callers keep it out of
    // lane-dependent branches); touches no memory.
    unsafe {
        asm!(
            "shfl.sync.idx.b32 {r}, {v}, 0, 0x1f, 0xffffffff;",
            v = in(reg32) v,
            r = out(reg32) r,
            options(nostack, nomem)
        )
    };
    r
}

/// `bar.red.or.pred`: `bar.sync 0` that also returns whether `pred` holds in any thread of
/// the block.
#[inline(always)]
pub fn bar_red_or(pred: bool) -> bool {
    let r: u32;
    // SAFETY: every thread of the block executes it together (callers keep it outside
    // thread-dependent branches), as for `bar_sync`.
    unsafe {
        asm!(
            "{{ .reg .pred p, q; setp.ne.u32 p, {x}, 0; bar.red.or.pred q, 0, p; selp.u32 {r}, 1, 0, q; }}",
            x = in(reg32) u32::from(pred),
            r = out(reg32) r,
            options(nostack)
        )
    };
    r != 0
}
