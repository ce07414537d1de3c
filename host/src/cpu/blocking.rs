//! The loop nest of one batch entry: cache blocking, packing and the split of C into tasks
//! (the GotoBLAS / BLIS structure, with f32 accumulators kept between K blocks).
//!
//! ```text
//! for each chunk of ≤ MCH rows × ≤ NC columns of C:
//!     for each block of ≤ KC depths, in ascending k:        ← the only loop over k
//!         pack A[rows, block] and B[block, columns] to f32 (in parallel)
//!         for each task (≤ MC rows × ≤ NT columns), in parallel:
//!             for each MR × NR block: continue its chains with the microkernel;
//!             after the last K block, run the epilogue, else park them in `acc`.
//! ```
//!
//! Why the bits do not depend on any of this: each output element belongs to exactly one
//! task, its chain is continued by the K blocks in ascending order, and the microkernel
//! continues it one fma at a time in ascending k. Parking an f32 accumulator in memory and
//! reloading it is exact. The block sizes, the split into tasks, the thread count and the
//! order in which tasks run are free — they change speed only.

use super::epilogue::{self, Dest};
use super::kernel::{self, Isa, Tile, MR, NR};
use super::pack::{self, OperandView, PackBuf};
use super::threads::{each_chunk, each_index, pieces};

/// Depth of a K block: a packed B panel (KC × NR f32 = 32 KiB) stays in L1 while it meets
/// every A panel of a task.
pub(super) const KC: usize = 256;
/// Rows of a task: its packed A (MC × KC f32 = 96 KiB) stays in L2.
const MC: usize = 16 * MR;
/// Columns of a task: enough work per task (MC × NT × KC fma) to amortise scheduling.
const NT: usize = 8 * NR;
/// Rows of a chunk: bounds the packed A (MCH × KC, 1.5 MiB) and the parked accumulators
/// (MCH × NC, 6 MiB). B is packed once per chunk row, so a tall MCH keeps its repacking
/// small.
pub(super) const MCH: usize = 16 * MC;
/// Columns of a chunk: bounds the packed B (KC × NC). A is packed once per chunk column,
/// so a wide NC keeps the repacking of A small.
pub(super) const NC: usize = 4 * NT;

const _: () = assert!(
    MC % MR == 0 && NT % NR == 0,
    "tasks are made of whole blocks"
);

/// One batch entry, ready to run.
pub(super) struct Entry<'a> {
    pub isa: Isa,
    pub m: usize,
    pub n: usize,
    pub k: usize,
    pub a: OperandView,
    pub b: OperandView,
    pub c: Dest,
    /// The bias upcast to f32 (N values), if any.
    pub bias: Option<&'a [f32]>,
}

/// Start of K block `p` of `n` blocks over depth `k`: the blocks differ in size by at most
/// one, so no block is a sliver (and no product can overflow).
fn k_start(p: usize, n: usize, k: usize) -> usize {
    p * (k / n) + p.min(k % n)
}

/// Runs one batch entry; `parallel` spreads it over rayon's pool.
///
/// # Safety
/// The sources, the destination and M, N, K describe validated spans (`cpu::gemm`'s
/// contract), and no other thread touches this entry's C during the call.
pub(super) unsafe fn run(e: &Entry<'_>, parallel: bool) {
    if e.m == 0 || e.n == 0 {
        return;
    }
    if !parallel && small(e.m, e.k) {
        // SAFETY: forwarded contract.
        unsafe { run_small(e) };
        return;
    }
    // K = 0 still runs one (empty) block: the chains stay +0.0 and the epilogue stores them.
    let n_pc = e.k.div_ceil(KC).max(1);
    let kc_max = e.k.div_ceil(n_pc);
    // Task sizes shrink to the matrix, so small calls touch little memory.
    let mc = MC.min(e.m.next_multiple_of(MR));
    let nt = NT.min(e.n.next_multiple_of(NR));
    let (mch_max, nc_max) = (MCH.min(e.m), NC.min(e.n));
    let mut a_buf = PackBuf::new(mch_max.next_multiple_of(MR) * kc_max);
    let mut b_buf = PackBuf::new(nc_max.next_multiple_of(NR) * kc_max);
    let tasks_max = mch_max.div_ceil(mc) * nc_max.div_ceil(nt);
    // Written by each chain's first K block (`fresh`) before it is read.
    let mut acc = PackBuf::new(if n_pc > 1 { tasks_max * mc * nt } else { 0 });

    for i0 in (0..e.m).step_by(MCH) {
        let mch = MCH.min(e.m - i0);
        for j0 in (0..e.n).step_by(NC) {
            let nch = NC.min(e.n - j0);
            let n_jt = nch.div_ceil(nt);
            let n_tasks = mch.div_ceil(mc) * n_jt;
            for p in 0..n_pc {
                let k0 = k_start(p, n_pc, e.k);
                let kc = k_start(p + 1, n_pc, e.k) - k0;
                let last = p + 1 == n_pc;

                // (⌈mch / MR⌉ panels, kc, MR) and (⌈nch / NR⌉ panels, kc, NR)
                let ap = &mut a_buf.as_mut_slice()[..mch.next_multiple_of(MR) * kc];
                let bp = &mut b_buf.as_mut_slice()[..nch.next_multiple_of(NR) * kc];
                if kc > 0 {
                    // One piece of consecutive panels per thread: the source is then read
                    // in runs as long as possible (whole rows of a row-major B), which is
                    // what bounds packing when M or N is small.
                    let a_piece = pieces(parallel, mch.div_ceil(MR)) * MR;
                    each_chunk(parallel, ap, a_piece * kc, |q, dst| {
                        let (i, rows) = (i0 + q * a_piece, a_piece.min(mch - q * a_piece));
                        // SAFETY: rows i .. i + rows <= M, depths k0 .. k0 + kc <= K.
                        unsafe { pack::panels::<MR>(e.isa, &e.a, i, rows, k0, kc, dst) };
                    });
                    let b_piece = pieces(parallel, nch.div_ceil(NR)) * NR;
                    each_chunk(parallel, bp, b_piece * kc, |q, dst| {
                        let (j, cols) = (j0 + q * b_piece, b_piece.min(nch - q * b_piece));
                        // SAFETY: columns j .. j + cols <= N, depths inside K.
                        unsafe { pack::panels::<NR>(e.isa, &e.b, j, cols, k0, kc, dst) };
                    });
                }
                let (ap, bp) = (&*ap, &*bp);

                // Task t covers rows r0..r1 and columns c0..c1 of the chunk; consecutive
                // tasks share their rows, so a thread's packed A block stays in its cache.
                let task = |t: usize, mut parked: Option<&mut [f32]>| {
                    // The chains of one block: in `parked` when K has several blocks (they
                    // must survive until the next one), else on the stack.
                    let mut local: Tile = [0.0; MR * NR];
                    let (r0, c0) = ((t / n_jt) * mc, (t % n_jt) * nt);
                    let (r1, c1) = ((r0 + mc).min(mch), (c0 + nt).min(nch));
                    for (jb, cs) in (c0..c1).step_by(NR).enumerate() {
                        let cols = NR.min(c1 - cs);
                        let b_panel = &bp[cs / NR * kc * NR..][..kc * NR];
                        for (ib, rs) in (r0..r1).step_by(MR).enumerate() {
                            let rows = MR.min(r1 - rs);
                            let a_panel = &ap[rs / MR * kc * MR..][..kc * MR];
                            // This block's slot among the task's parked accumulators.
                            let slot = (jb * (mc / MR) + ib) * MR * NR;
                            let tile: &mut Tile = match parked.as_deref_mut() {
                                Some(acc) => (&mut acc[slot..][..MR * NR]).try_into().unwrap(),
                                None => &mut local,
                            };
                            // p == 0: every chain starts at +0.0.
                            kernel::run(e.isa, rows, a_panel, b_panel, tile, p == 0);
                            if last {
                                // SAFETY: the block is inside C, and task t alone writes it.
                                unsafe {
                                    epilogue::store(
                                        e.isa,
                                        &e.c,
                                        e.bias,
                                        tile,
                                        i0 + rs,
                                        j0 + cs,
                                        rows,
                                        cols,
                                    )
                                };
                            }
                        }
                    }
                };
                if n_pc > 1 {
                    let acc = &mut acc.as_mut_slice()[..n_tasks * mc * nt];
                    each_chunk(parallel, acc, mc * nt, |t, a| task(t, Some(a)));
                } else {
                    each_index(parallel, n_tasks, |t| task(t, None));
                }
            }
        }
    }
}

/// The most packed A values (256 KiB of f32) an entry may have to run [`run_small`]: all of
/// its A is read once per panel of B, so it must stay in L2.
const SMALL_A: usize = 1 << 16;

/// Whether an entry of `m` rows and depth `k` runs [`run_small`] when on one thread: at
/// most one task's rows, and an A that stays in L2.
pub(super) fn small(m: usize, k: usize) -> bool {
    m <= MC && m.next_multiple_of(MR) * k <= SMALL_A
}

/// [`run`] for a small entry on one thread ([`small`]): all of A is packed first, then each
/// panel of NR columns of B is packed, one K block at a time, just before the blocks of C
/// that use it, and used at once.
///
/// ```text
/// pack A[all rows, all depths], K block after K block
/// for each panel of ≤ NR columns:
///     for each block of ≤ KC depths, in ascending k:        ← the only loop over k
///         pack B[block, panel]
///         for each MR × NR block of the panel: continue its chains with the microkernel;
///             after the last K block, run the epilogue, else park them in `tiles`.
/// ```
///
/// Why: with few rows each packed value of B is used by few fmas, and the general nest packs
/// a whole chunk of B (up to KC × NC values) before using any of it; past the L1 cache that
/// is a round trip through L2 for every value, which cost small-M calls more than their
/// arithmetic. Here the packed panel (at most KC × NR f32, 32 KiB) is used while still in
/// L1. The bits are those of [`run`] for the same reason as there: every chain belongs to
/// one block, is started at +0.0 by the first K block and continued by the K blocks in
/// ascending order, and parking it in memory is exact.
///
/// # Safety
/// As for [`run`]; `small(e.m, e.k)`.
unsafe fn run_small(e: &Entry<'_>) {
    let n_pc = e.k.div_ceil(KC).max(1);
    let kc_max = e.k.div_ceil(n_pc);
    let m_pad = e.m.next_multiple_of(MR);
    let row_blocks = m_pad / MR;
    // K block p of A: ⌈M / MR⌉ panels of kc · MR values from k_start(p) · m_pad on.
    let mut a_buf = PackBuf::new(m_pad * e.k);
    let ap = a_buf.as_mut_slice();
    for p in 0..n_pc {
        let k0 = k_start(p, n_pc, e.k);
        let kc = k_start(p + 1, n_pc, e.k) - k0;
        if kc > 0 {
            // SAFETY: rows 0 .. M, depths k0 .. k0 + kc <= K.
            unsafe {
                pack::panels::<MR>(
                    e.isa,
                    &e.a,
                    0,
                    e.m,
                    k0,
                    kc,
                    &mut ap[k0 * m_pad..][..m_pad * kc],
                )
            };
        }
    }
    let ap = &*ap;
    let mut b_buf = PackBuf::new(kc_max * NR);
    let mut tiles = PackBuf::new(row_blocks * MR * NR);
    let tiles = tiles.as_mut_slice();
    for j0 in (0..e.n).step_by(NR) {
        let cols = NR.min(e.n - j0);
        for p in 0..n_pc {
            let k0 = k_start(p, n_pc, e.k);
            let kc = k_start(p + 1, n_pc, e.k) - k0;
            let bp = &mut b_buf.as_mut_slice()[..kc * NR];
            if kc > 0 {
                // SAFETY: columns j0 .. j0 + cols <= N, depths inside K.
                unsafe { pack::panels::<NR>(e.isa, &e.b, j0, cols, k0, kc, bp) };
            }
            let bp = &*bp;
            for (rb, tile) in tiles.chunks_exact_mut(MR * NR).enumerate() {
                let rows = MR.min(e.m - rb * MR);
                let a_panel = &ap[k0 * m_pad + rb * kc * MR..][..kc * MR];
                let tile: &mut Tile = tile.try_into().unwrap();
                // p == 0: every chain starts at +0.0.
                kernel::run(e.isa, rows, a_panel, bp, tile, p == 0);
                if p + 1 == n_pc {
                    // SAFETY: the block is inside C, and this call alone writes it.
                    unsafe { epilogue::store(e.isa, &e.c, e.bias, tile, rb * MR, j0, rows, cols) };
                }
            }
        }
    }
}
