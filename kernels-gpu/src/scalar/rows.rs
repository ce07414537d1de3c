//! The scalar tier at few rows (`M ≤ 64`): decode, and the bias gradient's `onesᵀ · dY`.
//!
//! The tiled kernel (`super::gemm`) gives each block 128 rows, so at M ≤ 64 a 4096-column
//! call has 32 blocks for 132 multiprocessors, and each of its threads runs 64 chains: the
//! call costs what 128 rows cost, 30× the time of streaming W once. Here a block owns
//! `32 · TN` columns and `WARPS · TM` rows; lane `l` of chain warp `w` runs the chains of
//! columns `l, l + 32, …` (`TN` of them) for rows `w · TM .. (w + 1) · TM`, so with one
//! column per lane a 4096-column call has 128 blocks and every chain has a thread of its
//! own. Several columns per lane use each A element a lane reads for several chains, which
//! pays where an SM holds many chains (more rows, or more columns) and shared-memory reads
//! rather than blocks are what bind. The chains are the contract's (C3): each output is
//! one f32 accumulator from +0.0 taking `fma(A[i, k], B[k, j], acc)` for k = 0 … K−1 in
//! order, nothing padded (the last stage runs exactly the k steps that remain).
//!
//! The block is warp-specialized so that a chain never waits for anything but its data:
//! - [`PRODUCER_WARPS`] producer warps copy stages of B (the block's `32 · TN` columns × 64,
//!   128 or 256 bytes of k, [`stage_k_bytes`]) and A by `cp.async` into a ring of `stages`
//!   slots, keeping [`lag`] stages in flight.
//!   When a stage has landed (each producer waits for its own copies), they convert their
//!   own pieces of a 16-bit A to f32 (the lanes of a chain warp all read the same A element,
//!   so converting it inside the chain would cost an instruction per fma) and arrive on the
//!   slot's "full" mbarrier.
//! - The [`WARPS`] chain warps wait on "full", run the stage and arrive on the slot's
//!   "empty" mbarrier, which the producers wait on before refilling it. No block barrier
//!   stands between stages, and the ring runs on from one tile to the next.
//!
//! The host launches these only for operands whose `cp.async` pieces are aligned: A read
//! along K (row-major, or one row), B either way, each base, leading dimension and batch
//! stride a multiple of 16 bytes (`host/src/cuda/scalar.rs`). Everything else takes the
//! tiled kernel, which gives the same bits.

use super::config::rows::{
    a_f32_buffers, a_f32_bytes, a_stage_bytes, b_pitch, b_stage_bytes, block_cols, lag, stage_k,
    stage_k_bytes, stages, GROUP, LANES, MAX_PIECES, PIECE, PRODUCER_THREADS, PRODUCER_WARPS,
    WARPS,
};
use crate::arch::cp_async::{cp_async_cg_16, cp_async_commit_group, cp_async_wait_group};
use crate::arch::mbarrier_sm80 as mbarrier;
use crate::arch::shared::{
    dyn_smem_base, ld_shared_b32, ld_shared_u16, ld_shared_v2_b32, ld_shared_v4_b32,
    ld_shared_v4_f32, st_shared_v4_b32,
};
use crate::arch::sync::{bar_sync, nanosleep, syncwarp};
use crate::element::Element;
use crate::finish::{bias_at, finish};
use crate::params::{GemmParams, BIAS_NONE};
use crate::schedule::{self, Tile};
use core::arch::nvptx::{_block_idx_x, _grid_dim_x, _thread_idx_x};
use core::intrinsics::fmaf32;

/// The whole kernel: the barriers set up, then each warp to its role.
///
/// # Safety
/// `p` describes buffers valid for the spans the host validated, with A read along K and the
/// alignment the module docs name; the block has `THREADS` threads and
/// `config::rows::smem_bytes(TM, TN, E::BYTES)` of dynamic shared memory.
#[inline(always)]
pub unsafe fn gemm<E: Element, const B_K_CONTIGUOUS: bool, const TM: usize, const TN: usize>(
    p: &GemmParams,
) {
    const { assert!(TN <= 4, "columns per lane") };
    let ring = Ring::new::<E, TM, TN>();
    let tid = _thread_idx_x() as u32;
    if tid == 0 {
        let mut s = 0;
        while s < ring.stages {
            // SAFETY: the barriers lie at the end of the block's dynamic shared memory,
            // 8-byte aligned; nobody uses them before the block barrier below.
            unsafe {
                mbarrier::init(ring.full(s), PRODUCER_WARPS);
                mbarrier::init(ring.empty(s), chain_warps::<TM>(p.m));
            }
            s += 1;
        }
    }
    // The one block barrier: the mbarriers are initialised before anyone arrives or waits.
    bar_sync();
    let warp = tid / 32;
    if warp < PRODUCER_WARPS {
        // SAFETY: forwarded contract.
        unsafe { produce::<E, B_K_CONTIGUOUS, TM>(p, &ring, tid) };
    } else if warp - PRODUCER_WARPS < chain_warps::<TM>(p.m) {
        let (warp, lane) = (warp - PRODUCER_WARPS, tid % 32);
        // SAFETY (both): forwarded contract.
        if lookahead(TM) == 2 {
            unsafe { chains::<E, B_K_CONTIGUOUS, TM, TN, 2>(p, &ring, warp, lane) };
        } else {
            unsafe { chains::<E, B_K_CONTIGUOUS, TM, TN, 1>(p, &ring, warp, lane) };
        }
    }
}

/// The chain warps that run: those with rows below M in the first tile row (all four once
/// M fills a block). The rest exit at once, so that nothing polls the ring without need;
/// in a later, partial tile row a running warp whose rows lie past M runs its chains on the
/// zeros the copies fill in and stores nothing.
#[inline(always)]
fn chain_warps<const TM: usize>(m: u64) -> u32 {
    m.div_ceil(TM as u64).min(WARPS as u64) as u32
}

/// The tiles of this block, in order: block b takes tiles b, b + grid, ….
#[inline(always)]
fn first_tile() -> u64 {
    // SAFETY: reads a special register.
    unsafe { _block_idx_x() as u64 }
}

/// The distance between a block's tiles.
#[inline(always)]
fn tile_step() -> u64 {
    // SAFETY: reads a special register.
    unsafe { _grid_dim_x() as u64 }
}

/// [`wait_parity`] with a short sleep between polls: a producer ahead of the chains waits
/// here most of a stage, and its polls would take shared-memory cycles from the chains.
///
/// # Safety
/// As for `mbarrier_sm80::test_wait_parity`.
#[inline(always)]
unsafe fn wait_parity_sleeping(bar: u32, parity: u32) {
    // SAFETY: forwarded contract.
    while !unsafe { mbarrier::test_wait_parity(bar, parity) } {
        nanosleep(32);
    }
}

/// Spins until the phase of parity `parity` of barrier `bar` has completed (sm_80 has no
/// waiting form; the spinning warps are the few without work at that moment).
///
/// # Safety
/// As for `mbarrier_sm80::test_wait_parity`.
#[inline(always)]
unsafe fn wait_parity(bar: u32, parity: u32) {
    // SAFETY: forwarded contract.
    while !unsafe { mbarrier::test_wait_parity(bar, parity) } {}
}

/// Where the stages live in shared memory, and their sizes for one element type and `TM`.
/// A stage's place in the ring is its [`Position`].
struct Ring {
    /// `stages` slots of B, then `stages` slots of A as loaded, then `buffers` of f32 A,
    /// then the "full" and "empty" barriers of each slot.
    b: u32,
    a: u32,
    a_f32: u32,
    barriers: u32,
    stages: u32,
    /// Buffers of f32 A (16-bit inputs).
    buffers: u32,
    /// Stages a producer keeps in flight.
    lag: u32,
    /// k steps per stage.
    k: u64,
    /// Bytes of a staged row of k (A as loaded, and B's columns before their padding).
    row_bytes: u32,
    /// Output columns of the block (`32 · TN`), the staged columns of B.
    cols: u32,
    b_pitch: u32,
    b_slot: u32,
    a_slot: u32,
    a_f32_slot: u32,
}

impl Ring {
    #[inline(always)]
    fn new<E: Element, const TM: usize, const TN: usize>() -> Self {
        let (tm, tn, bytes) = (TM as u32, TN as u32, E::BYTES as u32);
        let base = dyn_smem_base();
        let stages = stages(tm, tn, bytes);
        let (b_slot, a_slot, a_f32_slot) = (
            b_stage_bytes(tm, tn),
            a_stage_bytes(tm, tn),
            a_f32_bytes(tm, tn, bytes),
        );
        let a_f32 = base + stages * (b_slot + a_slot);
        Ring {
            b: base,
            a: base + stages * b_slot,
            a_f32,
            barriers: a_f32 + a_f32_buffers(tm) * a_f32_slot,
            stages,
            buffers: a_f32_buffers(tm),
            lag: lag(tm, tn, bytes),
            k: stage_k(tm, tn, bytes) as u64,
            row_bytes: stage_k_bytes(tm, tn),
            cols: block_cols(tn),
            b_pitch: b_pitch(tm, tn),
            b_slot,
            a_slot,
            a_f32_slot,
        }
    }

    /// The barrier that says slot `s` holds a stage ready for the chains.
    #[inline(always)]
    fn full(&self, s: u32) -> u32 {
        self.barriers + s * 8
    }

    /// The barrier that says the chains are done with slot `s`.
    #[inline(always)]
    fn empty(&self, s: u32) -> u32 {
        self.barriers + (self.stages + s) * 8
    }

    /// The f32 A of a stage at `at` (16-bit inputs).
    #[inline(always)]
    fn a_f32_of(&self, at: Position) -> u32 {
        self.a_f32 + at.buffer * self.a_f32_slot
    }

    /// What a chain warp of rows `warp · TM ..` and lane `lane` reads of the stage at `at`.
    #[inline(always)]
    fn view<E: Element, const TM: usize>(&self, at: Position, warp: u32, lane: u32) -> StageView {
        let a_rows = if E::BYTES != 4 {
            self.a_f32_of(at)
        } else {
            self.a + at.slot * self.a_slot
        };
        StageView {
            b: self.b + at.slot * self.b_slot,
            b_pitch: self.b_pitch,
            b_row: self.cols * E::BYTES as u32,
            a: a_rows + warp * TM as u32 * self.k as u32 * 4,
            a_pitch: self.k as u32 * 4,
            lane,
        }
    }
}

/// Where stage g (counted over all of the block's tiles) lives: slot `g % stages`, phase
/// parity `(g / stages) % 2` of the slot's barriers, f32 A buffer `g % buffers`. Counted along
/// with g rather than divided out of it: the division by the ring's size cost a chain warp
/// some 16 dependent instructions at every stage boundary (SASS of the sm_90 image).
#[derive(Clone, Copy)]
struct Position {
    slot: u32,
    parity: u32,
    buffer: u32,
}

impl Position {
    /// Stage 0.
    const FIRST: Position = Position {
        slot: 0,
        parity: 0,
        buffer: 0,
    };

    /// The next stage's position in `ring`.
    #[inline(always)]
    fn next(self, ring: &Ring) -> Position {
        let wrap = self.slot + 1 == ring.stages;
        Position {
            slot: if wrap { 0 } else { self.slot + 1 },
            parity: self.parity ^ wrap as u32,
            buffer: if self.buffer + 1 == ring.buffers {
                0
            } else {
                self.buffer + 1
            },
        }
    }
}

/// This thread's pieces of one operand, worked out once per tile so that a stage's copies
/// cost an add and a compare each: piece i of stage kt reads from `src[i] + kt · step`
/// into `dst[i]` of the stage's slot, and holds k steps from `kt · stage_k + k[i]`.
struct Pieces {
    count: usize,
    src: [u64; MAX_PIECES as usize],
    dst: [u32; MAX_PIECES as usize],
    k: [u32; MAX_PIECES as usize],
    /// Bytes of the piece inside the matrix across K (its row or columns exist), or 0.
    /// An operand read along K clips this further where K ends.
    width: [u32; MAX_PIECES as usize],
    /// Bytes between one stage's source and the next.
    step: u64,
    /// Whether the piece runs along K (A, a k-contiguous B), so that K's end clips it.
    along_k: bool,
}

impl Pieces {
    /// The pieces of a staged operand of `rows` rows of `row_bytes`, producer thread
    /// `ptid`'s share: piece q (= ptid + i · PRODUCER_THREADS) is piece `q % per_row` of
    /// staged row `q / per_row`. `place(row, seg)` gives (source at stage 0, destination in
    /// the slot, k offset in the stage, bytes inside the matrix across K).
    #[inline(always)]
    fn new(
        (rows, per_row): (u32, u32),
        ptid: u32,
        step: u64,
        along_k: bool,
        place: impl Fn(u32, u32) -> (u64, u32, u32, u32),
    ) -> Self {
        let mut p = Pieces {
            count: 0,
            src: [0; MAX_PIECES as usize],
            dst: [0; MAX_PIECES as usize],
            k: [0; MAX_PIECES as usize],
            width: [0; MAX_PIECES as usize],
            step,
            along_k,
        };
        let total = rows * per_row;
        unroll8!(i => {
            let q = ptid + i as u32 * PRODUCER_THREADS;
            if q < total {
                let (src, dst, k, width) = place(q / per_row, q % per_row);
                (p.src[i], p.dst[i], p.k[i], p.width[i]) = (src, dst, k, width);
                p.count = i + 1;
            }
        });
        p
    }

    /// Issues this thread's copies of stage `kt` into the slot at `slot` (not committed).
    /// Pieces past the matrix or past K are zero-filled and read nothing (from `fallback`,
    /// a valid aligned address).
    ///
    /// # Safety
    /// The pieces were placed inside the operand as validated, for this kernel's stage
    /// layout; `slot` is the stage's slot of this operand.
    #[inline(always)]
    unsafe fn issue<E: Element>(
        &self,
        kt: u64,
        stage_k: u64,
        k_limit: u64,
        slot: u32,
        fallback: u64,
    ) {
        let offset = kt * self.step;
        // Every stage but K's last lies wholly inside K: its pieces copy their precomputed
        // widths, with no per-piece arithmetic on K (the profile of a first version spent
        // most of a decode call here).
        if (kt + 1) * stage_k <= k_limit {
            unroll8!(i => {
                if i < self.count {
                    let bytes = self.width[i];
                    let src = if bytes == 0 { fallback } else { self.src[i] + offset };
                    // SAFETY: `slot + dst[i]` is a 16-byte aligned piece of the slot; `src`
                    // is 16-byte aligned (the host's alignment contract) and its first
                    // `bytes` bytes lie inside the operand (row or column inside it, k
                    // below K).
                    unsafe { cp_async_cg_16(slot + self.dst[i], src, bytes) };
                }
            });
        } else {
            let per_piece = PIECE as u64 / E::BYTES;
            unroll8!(i => {
                if i < self.count {
                    let k = kt * stage_k + self.k[i] as u64;
                    let bytes = if k >= k_limit {
                        0
                    } else if self.along_k && k_limit - k < per_piece {
                        self.width[i].min(((k_limit - k) * E::BYTES) as u32)
                    } else {
                        self.width[i]
                    };
                    let src = if bytes == 0 { fallback } else { self.src[i] + offset };
                    // SAFETY: as above.
                    unsafe { cp_async_cg_16(slot + self.dst[i], src, bytes) };
                }
            });
        }
    }
}

/// The copies of one tile: its pieces of B and of A.
struct Copies {
    b: Pieces,
    a: Pieces,
}

impl Copies {
    /// Producer thread `ptid`'s pieces of tile `t` (the batch entry's A from row `t.m0`, B
    /// from column `t.n0`). A's piece q lands at byte `q · PIECE` of its slot, which is what
    /// [`convert_a`] relies on.
    #[inline(always)]
    fn new<E: Element, const B_K_CONTIGUOUS: bool, const TM: usize>(
        p: &GemmParams,
        t: &Tile,
        ring: &Ring,
        ptid: u32,
    ) -> Self {
        let cols = ring.cols;
        let bytes = E::BYTES;
        let per_piece = PIECE as u64 / bytes;
        let stage_bytes = ring.k * bytes;
        let full = |left: u64| {
            if left >= per_piece {
                PIECE
            } else {
                (left * bytes) as u32
            }
        };
        let a_base = p.a + (t.batch * p.batch_stride_a + t.m0 * p.lda) * bytes;
        let b_base = p.b
            + (t.batch * p.batch_stride_b + if B_K_CONTIGUOUS { t.n0 * p.ldb } else { t.n0 })
                * bytes;
        let b = if B_K_CONTIGUOUS {
            // Staged rows are B's columns n0 .. n0 + 32, each `row_bytes` of k.
            Pieces::new(
                (cols, ring.row_bytes / PIECE),
                ptid,
                stage_bytes,
                true,
                |col, seg| {
                    let inside = t.n0 + (col as u64) < p.n;
                    (
                        b_base + col as u64 * p.ldb * bytes + (seg * PIECE) as u64,
                        col * ring.b_pitch + seg * PIECE,
                        seg * per_piece as u32,
                        if inside { PIECE } else { 0 },
                    )
                },
            )
        } else {
            // Staged rows are B's k rows, each the block's columns.
            let per_row = cols * bytes as u32 / PIECE;
            Pieces::new(
                (ring.k as u32, per_row),
                ptid,
                ring.k * p.ldb * bytes,
                false,
                |k, seg| {
                    let j = t.n0 + (seg as u64) * per_piece;
                    (
                        b_base + k as u64 * p.ldb * bytes + (seg * PIECE) as u64,
                        k * cols * bytes as u32 + seg * PIECE,
                        k,
                        if j < p.n { full(p.n - j) } else { 0 },
                    )
                },
            )
        };
        let rows = WARPS * TM as u32;
        let a = Pieces::new(
            (rows, ring.row_bytes / PIECE),
            ptid,
            stage_bytes,
            true,
            |row, seg| {
                let inside = t.m0 + (row as u64) < p.m;
                (
                    a_base + row as u64 * p.lda * bytes + (seg * PIECE) as u64,
                    row * ring.row_bytes + seg * PIECE,
                    seg * per_piece as u32,
                    if inside { PIECE } else { 0 },
                )
            },
        );
        Copies { b, a }
    }

    /// Issues this thread's copies of stage `kt` into slot `slot` (not committed).
    ///
    /// # Safety
    /// As for [`gemm`]; `self` was made for this tile; the chains are done with the slot.
    #[inline(always)]
    unsafe fn stage<E: Element>(&self, operands: &Bounds, ring: &Ring, kt: u64, slot: u32) {
        let Bounds { k, a, b } = *operands;
        // SAFETY: forwarded contract.
        unsafe {
            self.b
                .issue::<E>(kt, ring.k, k, ring.b + slot * ring.b_slot, b);
            self.a
                .issue::<E>(kt, ring.k, k, ring.a + slot * ring.a_slot, a);
        }
    }
}

/// What the copies read of the parameters, held in registers: the inline `cp.async`
/// statements may write memory as far as the compiler knows, so fields read through the
/// parameter reference would be loaded again after each one.
#[derive(Clone, Copy)]
struct Bounds {
    k: u64,
    /// A's and B's base addresses: a valid, aligned source for zero-filled pieces.
    a: u64,
    b: u64,
}

/// A producer thread's whole run: every stage of every tile of the block, in order, then
/// [`Ring::lag`] steps that only finish the stages still in flight.
///
/// Step g hands stage g − lag over (waits for its own copies of it, converts its own pieces
/// of a 16-bit A into the stage's f32 buffer, arrives on the slot's "full" barrier for its
/// warp), then waits until the chains are done with the slot's previous stage (g − stages)
/// and issues stage g's copies as one `cp.async` group ([`producer_step`]).
///
/// # Safety
/// As for [`gemm`]; `ptid` < `PRODUCER_THREADS`.
#[inline(always)]
unsafe fn produce<E: Element, const B_K_CONTIGUOUS: bool, const TM: usize>(
    p: &GemmParams,
    ring: &Ring,
    ptid: u32,
) {
    let bounds = Bounds {
        k: p.k,
        a: p.a,
        b: p.b,
    };
    let k_tiles = p.k.div_ceil(ring.k);
    let total = p.tiles_m * p.tiles_n * p.batch;
    let rows = (WARPS as usize * TM) as u64;
    let mut cursor = ProducerCursor {
        g: 0,
        issue: Position::FIRST,
        finish: Position::FIRST,
    };
    let mut tile = first_tile();
    while tile < total {
        let t = schedule::tile_at(p, tile, rows, ring.cols as u64);
        let copies = Copies::new::<E, B_K_CONTIGUOUS, TM>(p, &t, ring, ptid);
        let mut kt = 0;
        while kt < k_tiles {
            // SAFETY: forwarded contract; `copies` is this tile's.
            unsafe {
                producer_step::<E, TM>(ring, &mut cursor, Some((&copies, &bounds, kt)), ptid)
            };
            kt += 1;
        }
        tile += tile_step();
    }
    let end = cursor.g + ring.lag as u64;
    while cursor.g < end {
        // SAFETY: forwarded contract.
        unsafe { producer_step::<E, TM>(ring, &mut cursor, None, ptid) };
    }
}

/// A producer's place in its run: step `g`, the position of stage g (whose copies it
/// issues) and of stage g − lag (which it finishes, once g ≥ lag).
struct ProducerCursor {
    g: u64,
    issue: Position,
    finish: Position,
}

/// Step `g` of a producer (see [`produce`]): `copies` is stage g's tile and k tile, or None
/// past the block's last stage. Moves `cursor` on to step g + 1.
///
/// The step hands stage g − lag over before it issues stage g, so that the hand-over waits
/// only for what it needs: its own copies, and for a 16-bit A the f32 buffer, last read at
/// stage g − lag − buffers. With three buffers that stage was released before step g − 1
/// issued its copies (g − lag − 3 = g − 1 − stages), so nothing the chains do now holds the
/// stage back; with two it is the stage whose slot this step refills (g − stages), waited
/// for first.
///
/// # Safety
/// As for [`produce`].
#[inline(always)]
unsafe fn producer_step<E: Element, const TM: usize>(
    ring: &Ring,
    cursor: &mut ProducerCursor,
    copies: Option<(&Copies, &Bounds, u64)>,
    ptid: u32,
) {
    let (g, at) = (cursor.g, cursor.issue);
    cursor.g += 1;
    cursor.issue = at.next(ring);
    let refills = g >= ring.stages as u64;
    let buffer_first = E::BYTES != 4 && ring.buffers == 2;
    if refills && buffer_first {
        // SAFETY: as below.
        unsafe { wait_parity_sleeping(ring.empty(at.slot), at.parity ^ 1) };
    }
    if g >= ring.lag as u64 {
        // SAFETY: forwarded contract; the groups committed so far are those of stages
        // 0 ..= g − 1.
        unsafe { hand_over::<E, TM>(ring, cursor, ptid) };
    }
    if refills && !buffer_first {
        // SAFETY: the barrier is initialised; its phase for stage g − stages is the current
        // one or just completed (stage g − 2 · stages was released before step g − stages
        // went on).
        unsafe { wait_parity_sleeping(ring.empty(at.slot), at.parity ^ 1) };
    }
    if let Some((copies, bounds, kt)) = copies {
        // SAFETY: forwarded contract; the chains are done with the slot (above).
        unsafe { copies.stage::<E>(bounds, ring, kt, at.slot) };
    }
    cp_async_commit_group();
}

/// Hands stage g − lag over at step g (see [`producer_step`]): waits for this thread's
/// copies of it, converts the warp's pieces of a 16-bit A, and arrives on its "full"
/// barrier for the warp.
///
/// # Safety
/// As for [`produce`]; the groups committed are those of stages 0 ..= g − 1, and the f32
/// buffer of stage g − lag is free.
#[inline(always)]
unsafe fn hand_over<E: Element, const TM: usize>(
    ring: &Ring,
    cursor: &mut ProducerCursor,
    ptid: u32,
) {
    // Stage g − lag is the oldest group in flight but `lag − 1`.
    match ring.lag {
        1 => cp_async_wait_group::<0>(),
        2 => cp_async_wait_group::<1>(),
        3 => cp_async_wait_group::<2>(),
        4 => cp_async_wait_group::<3>(),
        5 => cp_async_wait_group::<4>(),
        6 => cp_async_wait_group::<5>(),
        7 => cp_async_wait_group::<6>(),
        8 => cp_async_wait_group::<7>(),
        9 => cp_async_wait_group::<8>(),
        _ => cp_async_wait_group::<9>(),
    }
    let done = cursor.finish;
    cursor.finish = done.next(ring);
    if E::BYTES != 4 {
        // Every lane's copies of the stage, landed (above), for every lane of the warp.
        syncwarp();
        // SAFETY: the warp's copies of the stage have landed and are ordered for this lane;
        // the chains are done with its f32 buffer (the caller's contract).
        unsafe { convert_a::<E, TM>(ring, done.slot, ring.a_f32_of(done), ptid) };
    }
    // The warp's copies and conversions, then one arrival for the warp (release).
    syncwarp();
    if ptid % 32 == 0 {
        // SAFETY: the barrier is initialised; this warp arrives once per phase.
        unsafe { mbarrier::arrive(ring.full(done.slot)) };
    }
}

/// Converts the pieces of a 16-bit A in slot `slot` that producer thread `ptid`'s warp copied
/// (q = ptid + i · PRODUCER_THREADS over its lanes, at byte q · PIECE) to f32 at `dst`: piece
/// q (8 elements) becomes 32 bytes at q · 32, so rows keep their order with twice the pitch.
///
/// Each lane converts half a piece: lanes 2j and 2j + 1 take the halves of the warp's j-th
/// piece of a round, so a warp's 16-byte stores cover 512 consecutive bytes, four
/// conflict-free wavefronts. (One lane per piece, storing 32 bytes at a 32-byte stride,
/// took 8 wavefronts per store instruction: Nsight Compute at 16 × 4096 × 4096 bf16 on an
/// H200, docs/perf-notes.md.)
///
/// # Safety
/// The copies of the warp's lanes into the slot have landed and the warp is synchronised
/// after that (`syncwarp`, which orders them for every lane); nobody reads `dst` until the
/// stage is handed over.
#[inline(always)]
unsafe fn convert_a<E: Element, const TM: usize>(ring: &Ring, slot: u32, dst: u32, ptid: u32) {
    let count = WARPS * TM as u32 * (ring.row_bytes / PIECE);
    let src = ring.a + slot * ring.a_slot;
    let (warp_first, lane) = (ptid - ptid % 32, ptid % 32);
    let half = lane % 2;
    // A plain loop over the rounds: unrolled, ptxas hoisted every round's loads and spilled
    // registers of the 64-row entries for sm_120.
    let mut round = warp_first;
    while round < count {
        unroll2!(j => {
            // The round's pieces of this warp are round + 0 .. 32.
            let q = round + j as u32 * 16 + lane / 2;
            if q < count {
                // SAFETY: half of piece q of the slot, which a lane of this warp copied, and
                // its 16 bytes of f32 lie inside their buffers.
                unsafe {
                    let w = ld_shared_v2_b32(src + q * PIECE + half * 8);
                    let v = unpack8::<E>([w[0], w[1], 0, 0], [0; 4]);
                    st_shared_v4_b32(
                        dst + q * 32 + half * 16,
                        [v[0], v[1], v[2], v[3]].map(f32::to_bits),
                    );
                }
            }
        });
        round += PRODUCER_THREADS;
    }
}

/// Eight consecutive elements from raw words: a 16-bit type's eight are `lo` (low half of
/// each word first); f32's are `lo` then `hi`.
#[inline(always)]
fn unpack8<E: Element>(lo: [u32; 4], hi: [u32; 4]) -> [f32; 8] {
    if E::BYTES == 4 {
        [lo[0], lo[1], lo[2], lo[3], hi[0], hi[1], hi[2], hi[3]].map(E::to_f32)
    } else {
        [
            lo[0] & 0xffff,
            lo[0] >> 16,
            lo[1] & 0xffff,
            lo[1] >> 16,
            lo[2] & 0xffff,
            lo[2] >> 16,
            lo[3] & 0xffff,
            lo[3] >> 16,
        ]
        .map(E::to_f32)
    }
}

/// A chain warp's whole run: for each tile of the block, every stage as the producers hand
/// it over, then the tile's outputs finished and stored. Lane `lane` of chain warp `warp`
/// runs columns `n0 + lane + 32 · c` (c < TN) for rows `m0 + warp · TM ..` (see
/// [`chain_warps`]).
///
/// A stage's barrier is waited for only once it is this warp's turn to run it: reading the
/// next stage's first groups during the current one's last fmas was measured slower on an
/// H100 (docs/perf-notes.md, "Scalar few-row kernel: the stage boundary"), because the
/// producers hand stages over just in time and that earlier wait stalled the last fmas.
///
/// # Safety
/// As for [`gemm`]; `warp` < `WARPS`.
#[inline(always)]
unsafe fn chains<
    E: Element,
    const B_K_CONTIGUOUS: bool,
    const TM: usize,
    const TN: usize,
    const AHEAD: usize,
>(
    p: &GemmParams,
    ring: &Ring,
    warp: u32,
    lane: u32,
) {
    let k = p.k;
    let k_tiles = k.div_ceil(ring.k);
    // Stages 0 .. whole of each tile hold `ring.k` k steps; a last one may hold fewer.
    let whole = k / ring.k;
    let total = p.tiles_m * p.tiles_n * p.batch;
    let rows = (WARPS as usize * TM) as u64;
    let mut at = Position::FIRST;
    let mut tile = first_tile();
    while tile < total {
        let t = schedule::tile_at(p, tile, rows, ring.cols as u64);
        let mut acc = [[0.0f32; TN]; TM];
        let mut kt = 0;
        while kt < k_tiles {
            // SAFETY: the barrier is initialised; the producers cannot complete its next
            // phase before this warp hands the slot back below.
            unsafe { wait_parity(ring.full(at.slot), at.parity) };
            let view = ring.view::<E, TM>(at, warp, lane);
            if kt < whole {
                let groups = ring.k as u32 / GROUP;
                // SAFETY: the stage's slots hold `ring.k` k steps, handed over above.
                unsafe { full_stage::<E, B_K_CONTIGUOUS, TM, TN, AHEAD>(&view, groups, &mut acc) };
            } else {
                let steps = (k - kt * ring.k) as u32;
                // SAFETY: the stage's slots hold `steps` k steps, handed over above.
                unsafe { partial_stage::<E, B_K_CONTIGUOUS, TM, TN>(&view, steps, &mut acc) };
            }
            // Every lane's reads of the slot, then one arrival for the warp (release).
            syncwarp();
            if lane == 0 {
                // SAFETY: the barrier is initialised; this warp arrives once per phase.
                unsafe { mbarrier::arrive(ring.empty(at.slot)) };
            }
            at = at.next(ring);
            kt += 1;
        }
        // SAFETY: forwarded contract.
        unsafe { store::<TM, TN>(p, &t, warp, lane, &acc) };
        tile += tile_step();
    }
}

/// One stage as a lane reads it.
struct StageView {
    /// B's slot, the pitch of a k-contiguous B's staged columns, and the bytes of an
    /// N-contiguous B's staged k rows (the block's columns).
    b: u32,
    b_pitch: u32,
    b_row: u32,
    /// The f32 A row of the warp's first row, and the pitch between rows.
    a: u32,
    a_pitch: u32,
    lane: u32,
}

/// Groups a lane reads ahead of the one it runs. With one row per lane a group is eight
/// dependent fmas, some 32 cycles, about a shared-memory read's latency with the unpacking
/// after it, so one group ahead leaves the chain waiting at every group; two cover it. With
/// four rows or more a group issues at least 32 fmas and a second group of operands in
/// registers (40 of them at four rows) made ptxas spill under the block's register limit.
const fn lookahead(tm: usize) -> usize {
    if tm == 1 {
        2
    } else {
        1
    }
}

/// The operands of the next `AHEAD` ([`lookahead`]) groups, in k order.
type Window<const TN: usize, const AHEAD: usize> = [Operands<TN>; AHEAD];

/// Runs a whole stage (`groups` groups of [`GROUP`] k steps, a constant) on this lane's
/// chains, in ascending k. Unrolled, with the operands of the group [`lookahead`] groups on
/// read while a group's fmas run: a chain waits for nothing but its own previous fma.
///
/// # Safety
/// The stage's B and f32 A hold `groups · GROUP` k steps, visible to this thread.
#[inline(always)]
unsafe fn full_stage<
    E: Element,
    const B_K_CONTIGUOUS: bool,
    const TM: usize,
    const TN: usize,
    const AHEAD: usize,
>(
    v: &StageView,
    groups: u32,
    acc: &mut [[f32; TN]; TM],
) {
    // SAFETY: a whole stage has at least `AHEAD` (≤ 2) groups (config::rows::check).
    let mut window: Window<TN, AHEAD> = core::array::from_fn(|i| unsafe {
        operands::<E, B_K_CONTIGUOUS, TM, TN>(v, i as u32 * GROUP)
    });
    let ahead = AHEAD as u32;
    unroll2!(h => {
        unroll8!(l => {
            let g = (h * 8 + l) as u32;
            if g < groups {
                let current = window[0];
                let later = g + ahead;
                // SAFETY: group `later` lies inside the stage.
                let read = (later < groups)
                    .then(|| unsafe { operands::<E, B_K_CONTIGUOUS, TM, TN>(v, later * GROUP) });
                // The window moves on a group, the read (if any) entering at its end.
                if AHEAD == 2 {
                    window[0] = window[AHEAD - 1];
                }
                if let Some(r) = read {
                    window[AHEAD - 1] = r;
                }
                // SAFETY: forwarded contract.
                unsafe { group::<TM, TN>(v, g * GROUP, &current, acc) };
            }
        });
    });
}

/// Runs the first `steps` k steps of the stage (the last stage of K) on this lane's chains,
/// in ascending k: whole groups, then the rest one at a time. No step past K is taken.
///
/// # Safety
/// The stage's B and f32 A hold at least `steps` k steps, visible to this thread.
#[inline(always)]
unsafe fn partial_stage<
    E: Element,
    const B_K_CONTIGUOUS: bool,
    const TM: usize,
    const TN: usize,
>(
    v: &StageView,
    steps: u32,
    acc: &mut [[f32; TN]; TM],
) {
    let groups = steps / GROUP;
    let mut g = 0;
    while g < groups {
        // SAFETY: forwarded contract; group g lies inside the stage.
        unsafe {
            let current = operands::<E, B_K_CONTIGUOUS, TM, TN>(v, g * GROUP);
            group::<TM, TN>(v, g * GROUP, &current, acc);
        }
        g += 1;
    }
    let mut kk = groups * GROUP;
    while kk < steps {
        let mut b = [0.0f32; TN];
        unroll4!(c => {
            if c < TN {
                // SAFETY: k step kk lies inside the stage.
                b[c] = unsafe { b_element::<E, B_K_CONTIGUOUS>(v, c as u32, kk) };
            }
        });
        each_row::<TM>(|r| {
            // SAFETY: as above.
            let a = unsafe { f32::from_bits(ld_shared_b32(v.a + r as u32 * v.a_pitch + kk * 4)) };
            unroll4!(c => {
                if c < TN {
                    // `fma.rn.f32`, the contract's step.
                    acc[r][c] = fmaf32(a, b[c], acc[r][c]);
                }
            });
        });
        kk += 1;
    }
}

/// Rows of A whose fmas a lane interleaves: four independent chains (times the lane's
/// columns) cover an fma's latency, so each group's fmas issue back to back.
const ROW_CHUNK: usize = 4;

/// What one group needs first: the lane's eight B elements of each of its columns and the
/// first [`ROW_CHUNK`] rows' eight A elements (fewer rows when TM is smaller; the rest stay
/// unread).
#[derive(Clone, Copy)]
struct Operands<const TN: usize> {
    b: [[f32; 8]; TN],
    a: [[f32; 8]; ROW_CHUNK],
}

/// Reads [`Operands`] of the group at stage step `kk`: each of the lane's columns of B (one
/// or two 16-byte reads of a k-contiguous B, eight of an N-contiguous one) and two 16-byte
/// reads per row of A (the same address across the warp).
///
/// # Safety
/// The stage's B and f32 A hold k steps `kk .. kk + GROUP`, visible to this thread.
#[inline(always)]
unsafe fn operands<E: Element, const B_K_CONTIGUOUS: bool, const TM: usize, const TN: usize>(
    v: &StageView,
    kk: u32,
) -> Operands<TN> {
    let bytes = E::BYTES as u32;
    let mut b = [[0.0f32; 8]; TN];
    unroll4!(c => {
        if c < TN {
            // SAFETY (both): forwarded contract.
            b[c] = unsafe {
                if B_K_CONTIGUOUS {
                    let col = v.b + (v.lane + (c as u32) * LANES) * v.b_pitch + kk * bytes;
                    let lo = ld_shared_v4_b32(col);
                    let hi = if bytes == 4 {
                        ld_shared_v4_b32(col + 16)
                    } else {
                        [0; 4]
                    };
                    unpack8::<E>(lo, hi)
                } else {
                    let mut column = [0.0f32; 8];
                    unroll8!(s => {
                        column[s] = b_element::<E, B_K_CONTIGUOUS>(v, c as u32, kk + s as u32);
                    });
                    column
                }
            };
        }
    });
    let mut a = [[0.0f32; 8]; ROW_CHUNK];
    unroll4!(q => {
        if q < TM {
            // SAFETY: forwarded contract.
            a[q] = unsafe { a_row(v, q, kk) };
        }
    });
    Operands { b, a }
}

/// Eight f32 of A's row `r` (of the warp's rows) from stage step `kk`.
///
/// # Safety
/// The stage's f32 A holds k steps `kk .. kk + GROUP` of the row, visible to this thread.
#[inline(always)]
unsafe fn a_row(v: &StageView, r: usize, kk: u32) -> [f32; 8] {
    let row = v.a + r as u32 * v.a_pitch + kk * 4;
    // SAFETY: forwarded contract.
    let (a0, a1) = unsafe { (ld_shared_v4_f32(row), ld_shared_v4_f32(row + 16)) };
    [a0[0], a0[1], a0[2], a0[3], a1[0], a1[1], a1[2], a1[3]]
}

/// k steps `kk .. kk + GROUP` on this lane's chains: rows in chunks of [`ROW_CHUNK`] (the
/// first chunk's A read ahead in `first`), each chunk's fmas k-major so that its chains
/// (rows × the lane's columns) interleave. Every chain still takes its k steps in ascending
/// order.
///
/// # Safety
/// The stage's f32 A holds k steps `kk .. kk + GROUP` of every row, visible to this thread.
#[inline(always)]
unsafe fn group<const TM: usize, const TN: usize>(
    v: &StageView,
    kk: u32,
    first: &Operands<TN>,
    acc: &mut [[f32; TN]; TM],
) {
    unroll4!(chunk => {
        let r0 = chunk * ROW_CHUNK;
        if r0 < TM {
            let a = if chunk == 0 {
                first.a
            } else {
                let mut a = [[0.0f32; 8]; ROW_CHUNK];
                unroll4!(q => {
                    if r0 + q < TM {
                        // SAFETY: forwarded contract.
                        a[q] = unsafe { a_row(v, r0 + q, kk) };
                    }
                });
                a
            };
            unroll8!(s => {
                unroll4!(q => {
                    if r0 + q < TM {
                        unroll4!(c => {
                            if c < TN {
                                // `fma.rn.f32`, the contract's step.
                                acc[r0 + q][c] = fmaf32(a[q][s], first.b[c][s], acc[r0 + q][c]);
                            }
                        });
                    }
                });
            });
        }
    });
}

/// This lane's B element of its column `c` (block column `lane + 32 · c`) at stage step
/// `kk`.
///
/// # Safety
/// Step `kk` lies inside the stage.
#[inline(always)]
unsafe fn b_element<E: Element, const B_K_CONTIGUOUS: bool>(v: &StageView, c: u32, kk: u32) -> f32 {
    let bytes = E::BYTES as u32;
    let column = v.lane + c * LANES;
    let addr = if !B_K_CONTIGUOUS {
        v.b + kk * v.b_row + column * bytes
    } else {
        v.b + column * v.b_pitch + kk * bytes
    };
    // SAFETY: forwarded contract.
    let raw = unsafe {
        if bytes == 4 {
            ld_shared_b32(addr)
        } else {
            ld_shared_u16(addr)
        }
    };
    E::to_f32(raw)
}

/// Finishes and stores this thread's chains: columns `n0 + lane + 32 · c`, rows of its warp.
///
/// # Safety
/// C, and the bias when present, are valid for the spans the host validated.
#[inline(always)]
unsafe fn store<const TM: usize, const TN: usize>(
    p: &GemmParams,
    t: &Tile,
    warp: u32,
    lane: u32,
    acc: &[[f32; TN]; TM],
) {
    let c_batch = t.batch * p.batch_stride_c;
    unroll4!(c => {
        let j = t.n0 + (lane + c as u32 * LANES) as u64;
        if c < TN && j < p.n {
            // SAFETY: j < N.
            let bias = (p.bias_dtype != BIAS_NONE).then(|| unsafe { bias_at(p, j) });
            each_row::<TM>(|r| {
                let i = t.m0 + (warp as usize * TM + r) as u64;
                if i < p.m {
                    // SAFETY: (i, j) is inside C, so the index is inside its validated span.
                    unsafe { finish(p, (c_batch + i * p.ldc + j) as usize, acc[r][c], bias) };
                }
            });
        }
    });
}

/// `f(r)` for r = 0 … TM − 1 (TM ≤ 16), each call with a constant r: the chains are a
/// register array, which LLVM moves to local memory when a loop indexes it.
#[inline(always)]
fn each_row<const TM: usize>(mut f: impl FnMut(usize)) {
    const { assert!(TM <= 16, "rows per warp") };
    unroll2!(h => {
        unroll8!(l => {
            let r = h * 8 + l;
            if r < TM {
                f(r);
            }
        });
    });
}
