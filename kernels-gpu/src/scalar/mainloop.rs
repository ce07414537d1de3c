//! Staging of A and B tiles through shared memory and the fma chain: the only code that
//! decides the reduction order of the scalar tier (see the module docs of `scalar`).
//!
//! Generic over the tile's width `BN`, its k depth per stage `BK`, a thread's columns `TN` and
//! the k steps per loop trip `STEPS` (`config::wide`, `config::narrow`); the chain is the same
//! for all.

use super::config::{pitch, tile_bytes, BM, QUAD, THREADS, THREADS_N, TM};
use crate::arch::cp_async::{cp_async_cg_16, cp_async_commit_group, cp_async_wait_group};
use crate::arch::shared::{ld_shared_v4_f32, st_shared_b32, st_shared_v4_b32};
use crate::arch::sync::bar_sync;
use crate::element::Element;
use crate::params::GemmParams;
use crate::schedule::Tile;
use core::intrinsics::fmaf32;

/// The `TM × TN` accumulators of one thread: `acc[r][c]` is output row `row_of(r)`, column
/// `col_of(c)` of the tile.
pub type Accumulators<const TN: usize> = [[f32; TN]; TM];

/// Most quads a thread reads of one operand per K tile (the arrays' length; a shape uses
/// [`quads_per_thread`] of them).
const MAX_QUADS: usize = 2;

/// Quads each thread reads of a `rows` × `bk` operand tile.
#[inline(always)]
const fn quads_per_thread(rows: u32, bk: u32) -> usize {
    (rows * bk / (QUAD * THREADS)) as usize
}

/// Tile row of accumulator row `r` for thread `tid`: two groups of 4 rows, 64 apart, so the
/// fragment loads of a warp hit distinct shared-memory banks.
#[inline(always)]
pub fn row_of(tid: u32, r: usize) -> u32 {
    (tid / THREADS_N) * 4 + (r as u32 % 4) + (r as u32 / 4) * (BM / 2)
}

/// Tile column of accumulator column `c` for thread `tid` in a `BN`-column tile: groups of
/// 4 columns, `BN / 2` apart.
#[inline(always)]
pub fn col_of<const BN: u32>(tid: u32, c: usize) -> u32 {
    (tid % THREADS_N) * 4 + (c as u32 % 4) + (c as u32 / 4) * (BN / 2)
}

/// Where quad `q` of thread `tid` starts inside a (bk, `ROWS`) operand tile, as (kk, mn);
/// its four elements run along the operand's contiguous dimension.
///
/// K-contiguous: `THREADS / ROWS` threads per row (2 or 4), taking its quads of k in turn, so
/// a warp reads whole 32-byte sectors of 16 or 8 rows and its transposed shared stores, rows
/// `pitch ≡ 4 (mod 32)` words apart, spread over the banks. M- or N-contiguous: a warp reads
/// 128 consecutive elements of a k row (two k rows of 64 in a narrow B tile) and stores them
/// as they came.
#[inline(always)]
fn quad_slot<const K_CONTIGUOUS: bool, const ROWS: u32>(tid: u32, q: usize) -> (u32, u32) {
    let q = q as u32;
    if K_CONTIGUOUS {
        let per_row = THREADS / ROWS;
        (QUAD * (tid % per_row + per_row * q), tid / per_row)
    } else {
        let quads_per_k = ROWS / QUAD;
        (
            tid / quads_per_k + q * (THREADS / quads_per_k),
            QUAD * (tid % quads_per_k),
        )
    }
}

/// One operand of the current output tile as this thread reads it.
#[derive(Clone, Copy)]
struct OperandTile {
    /// Byte address of the batch entry's element (0, 0).
    base: u64,
    /// Leading dimension, in elements.
    ld: u64,
    /// The tile's first row (A) or column (B), and the matrix's extent along that dimension.
    mn0: u64,
    mn_limit: u64,
    /// K of the problem.
    k_limit: u64,
    /// Whether every quad's first element is aligned to the quad's size (the base is, and
    /// `ld` is a multiple of `QUAD`), so that a quad inside the matrix is one vector load.
    vectors: bool,
    /// Whether `vectors` holds and the tile's rows (A) or columns (B) all lie inside the
    /// matrix: then every quad of a K tile that ends at or before K is one vector inside the
    /// matrix, which a [`Cursor`] reads without index arithmetic or bounds tests.
    interior: bool,
    /// Raw bits read outside the matrix (A: −0.0, B: +0.0, so that padded k steps leave
    /// every chain as it is; see `Element::NEG_ZERO`).
    fill: u32,
}

impl OperandTile {
    /// The operand tile of `rows` rows (A) or columns (B) from `mn0`.
    fn new<E: Element>(
        base: u64,
        ld: u64,
        (mn0, rows): (u64, u32),
        mn_limit: u64,
        k_limit: u64,
        fill: u32,
    ) -> Self {
        let quad_bytes = QUAD as u64 * E::BYTES;
        let vectors = base % quad_bytes == 0 && ld % QUAD as u64 == 0;
        OperandTile {
            base,
            ld,
            mn0,
            mn_limit,
            k_limit,
            vectors,
            interior: vectors && mn0 + rows as u64 <= mn_limit,
            fill,
        }
    }
}

/// This thread's quads of an [`interior`](OperandTile::interior) operand tile: a byte
/// address common to the block that moves one K tile per [`advance`](Cursor::advance),
/// plus this thread's fixed 32-bit offset from it. The K tiles wholly inside K then read
/// their quads with no index arithmetic and no bounds test, which otherwise cost about as
/// many issue slots per K tile as a sixth of its fmas; the block's part stays in uniform
/// registers, so a thread holds one register per operand.
struct Cursor {
    /// Address of the tile's element (first row or column, k0).
    origin: u64,
    /// Bytes from `origin` to this thread's quad 0.
    offset: u32,
    /// Bytes from one quad of this thread to the next (the same for every K tile).
    quad_stride: u32,
    /// Bytes from one K tile to the next.
    tile_stride: u64,
}

impl Cursor {
    /// The cursor of `op`'s K tile from `k0`, or `None` when a thread's offsets might not
    /// fit in 31 bits (a leading dimension past about four million f32 or eight million
    /// 16-bit elements); the K tiles then take the general loads.
    #[inline(always)]
    fn new<E: Element, const K_CONTIGUOUS: bool, const ROWS: u32, const BK: u32>(
        op: &OperandTile,
        tid: u32,
        k0: u64,
    ) -> Option<Self> {
        // The farthest element of the tile from its origin is (ROWS, BK) rows or k steps of
        // `ld` elements away at most. (The product cannot wrap: the cursors serve interior
        // tiles with two whole K tiles, so ROWS rows or 2·BK k steps of `ld` are allocated.)
        if (ROWS.max(BK) as u64 + 1) * op.ld * E::BYTES >= 1 << 31 {
            return None;
        }
        let (kk, mn) = quad_slot::<K_CONTIGUOUS, ROWS>(tid, 0);
        // The quads of a thread differ in k only (`quad_slot`), by a constant.
        let quad_dk = quad_slot::<K_CONTIGUOUS, ROWS>(tid, 1).0 - kk;
        let ld = op.ld as u32;
        let bytes = E::BYTES as u32;
        let (origin, offset, k_stride) = if K_CONTIGUOUS {
            (op.mn0 * op.ld + k0, mn * ld + kk, bytes)
        } else {
            (k0 * op.ld + op.mn0, kk * ld + mn, ld * bytes)
        };
        Some(Cursor {
            origin: op.base + origin * E::BYTES,
            offset: offset * bytes,
            quad_stride: quad_dk * k_stride,
            tile_stride: BK as u64 * k_stride as u64,
        })
    }

    /// Address of quad `q` in the current K tile.
    #[inline(always)]
    fn quad(&self, q: usize) -> u64 {
        self.origin + (self.offset + q as u32 * self.quad_stride) as u64
    }

    #[inline(always)]
    fn advance(&mut self) {
        self.origin += self.tile_stride;
    }
}

/// Reads this thread's quads of one operand's K tile starting at `k0` into registers: one
/// vector load per quad inside the matrix when the operand is aligned for it, element by
/// element with a bounds test otherwise (tile edges, odd leading dimensions or pointers).
/// The bits are the same either way; only the number of loads differs.
///
/// # Safety
/// Every in-bounds element of the operand is readable global memory.
#[inline(always)]
unsafe fn fetch<E: Element, const K_CONTIGUOUS: bool, const ROWS: u32, const BK: u32>(
    op: &OperandTile,
    tid: u32,
    k0: u64,
) -> [E::Quad; MAX_QUADS] {
    let mut quads = [E::pack_quad([op.fill; QUAD as usize]); MAX_QUADS];
    // A loop over the whole (constant) array, tested against a constant: LLVM unrolls it and
    // the array stays in registers (an iterator with `take` left it in local memory).
    for (q, quad) in quads.iter_mut().enumerate() {
        if q >= quads_per_thread(ROWS, BK) {
            continue;
        }
        let (kk, mn) = quad_slot::<K_CONTIGUOUS, ROWS>(tid, q);
        let (gmn, gk) = (op.mn0 + mn as u64, k0 + kk as u64);
        // Element j of the quad is (gmn, gk + j) when K is contiguous, (gmn + j, gk) otherwise.
        let (first, line_inside, along, along_limit) = if K_CONTIGUOUS {
            (gmn * op.ld + gk, gmn < op.mn_limit, gk, op.k_limit)
        } else {
            (gk * op.ld + gmn, gk < op.k_limit, gmn, op.mn_limit)
        };
        if op.vectors && line_inside && along + QUAD as u64 <= along_limit {
            // SAFETY: all four elements are inside the matrix, and `vectors` makes the first
            // one aligned to the quad's size.
            *quad = unsafe { E::load_quad(op.base, first) };
        } else if line_inside {
            let mut raw = [op.fill; QUAD as usize];
            for (j, r) in raw.iter_mut().enumerate() {
                if along + (j as u64) < along_limit {
                    // SAFETY: in bounds, by the caller's contract.
                    *r = unsafe { E::load_raw(op.base, first + j as u64) };
                }
            }
            *quad = E::pack_quad(raw);
        }
    }
    quads
}

/// Copies this thread's quads of an M- or N-contiguous f32 operand's K tile starting at `k0`
/// straight into the staged (BK, pitch(ROWS)) tile at shared address `tile`: one 16-byte
/// `cp.async` per quad inside the matrix, so that no register holds them across the k steps;
/// element by element with a bounds test and an immediate shared store otherwise (tile
/// edges, unaligned operands: those wait for their loads). The caller waits for the copies
/// (`cp.async.wait_group`) before the barrier that publishes the tile.
///
/// # Safety
/// `E` is f32 (a quad is then the 16 bytes copied; `run` asserts it). Every in-bounds element
/// of the operand is readable global memory; `tile` is a staged-tile address inside the
/// block's dynamic shared memory that no thread reads until that barrier.
#[inline(always)]
unsafe fn copy_direct<E: Element, const ROWS: u32, const BK: u32>(
    op: &OperandTile,
    tid: u32,
    k0: u64,
    tile: u32,
) {
    for q in 0..MAX_QUADS {
        if q >= quads_per_thread(ROWS, BK) {
            continue;
        }
        let (kk, mn) = quad_slot::<false, ROWS>(tid, q);
        let (gmn, gk) = (op.mn0 + mn as u64, k0 + kk as u64);
        let first = gk * op.ld + gmn;
        let line_inside = gk < op.k_limit;
        let dst = tile + (kk * pitch(ROWS) + mn) * 4;
        if op.vectors && line_inside && gmn + QUAD as u64 <= op.mn_limit {
            // SAFETY: the four elements are inside the matrix and `vectors` makes the first
            // 16-byte aligned; dst is inside the tile (kk < BK, mn + 3 < ROWS) and 16-byte
            // aligned (pitch and mn multiples of 4), unread until the caller's barrier.
            unsafe { cp_async_cg_16(dst, op.base + first * E::BYTES, 16) };
        } else {
            let mut raw = [op.fill; QUAD as usize];
            if line_inside {
                for (j, r) in raw.iter_mut().enumerate() {
                    if gmn + (j as u64) < op.mn_limit {
                        // SAFETY: in bounds, by the caller's contract.
                        *r = unsafe { E::load_raw(op.base, first + j as u64) };
                    }
                }
            }
            let f = E::quad_to_f32(E::pack_quad(raw)).map(f32::to_bits);
            // SAFETY: as for the copy above.
            unsafe { st_shared_v4_b32(dst, f) };
        }
    }
    cp_async_commit_group();
}

/// [`fetch`] for a K tile wholly inside the operand, at `cur`.
///
/// # Safety
/// The operand is [`interior`](OperandTile::interior) and `cur` is at a K tile that ends at
/// or before K: every quad is then one aligned vector inside the matrix.
#[inline(always)]
unsafe fn fetch_whole<E: Element, const ROWS: u32, const BK: u32>(
    cur: &Cursor,
) -> [E::Quad; MAX_QUADS] {
    let mut quads = [E::pack_quad([0; QUAD as usize]); MAX_QUADS];
    for (q, quad) in quads.iter_mut().enumerate() {
        if q < quads_per_thread(ROWS, BK) {
            // SAFETY: by the caller's contract.
            *quad = unsafe { E::load_quad(cur.quad(q), 0) };
        }
    }
    quads
}

/// [`copy_direct`] for a K tile wholly inside the operand, at `cur`.
///
/// # Safety
/// As for [`copy_direct`] and [`fetch_whole`].
#[inline(always)]
unsafe fn copy_whole<const ROWS: u32, const BK: u32>(cur: &Cursor, tid: u32, tile: u32) {
    for q in 0..MAX_QUADS {
        if q < quads_per_thread(ROWS, BK) {
            let (kk, mn) = quad_slot::<false, ROWS>(tid, q);
            // SAFETY: the 16 bytes are an aligned vector inside the matrix (the caller's
            // contract); dst as in `copy_direct`.
            unsafe { cp_async_cg_16(tile + (kk * pitch(ROWS) + mn) * 4, cur.quad(q), 16) };
        }
    }
    cp_async_commit_group();
}

/// Upcasts fetched quads and writes them into a (BK, pitch(ROWS)) tile at shared address
/// `tile`.
///
/// # Safety
/// `tile` is a staged-tile address inside the block's dynamic shared memory.
#[inline(always)]
unsafe fn stage<E: Element, const K_CONTIGUOUS: bool, const ROWS: u32, const BK: u32>(
    tile: u32,
    tid: u32,
    quads: &[E::Quad; MAX_QUADS],
) {
    let row_pitch = pitch(ROWS);
    for (q, &quad) in quads.iter().enumerate() {
        if q >= quads_per_thread(ROWS, BK) {
            continue;
        }
        let (kk, mn) = quad_slot::<K_CONTIGUOUS, ROWS>(tid, q);
        let f = E::quad_to_f32(quad).map(f32::to_bits);
        if K_CONTIGUOUS {
            for (j, &v) in f.iter().enumerate() {
                // SAFETY: kk + j < BK and mn < ROWS, so the address is inside the tile.
                unsafe { st_shared_b32(tile + ((kk + j as u32) * row_pitch + mn) * 4, v) };
            }
        } else {
            // SAFETY: kk < BK, mn + 3 < ROWS, and the pitch and mn are multiples of 4, so the
            // 16 bytes are inside the tile and 16-byte aligned.
            unsafe { st_shared_v4_b32(tile + (kk * row_pitch + mn) * 4, f) };
        }
    }
}

/// The operands of one K tile, held in registers as raw bits between the global read and the
/// shared-memory write so the read overlaps the previous tile's arithmetic.
struct Fetched<E: Element> {
    a: [E::Quad; MAX_QUADS],
    b: [E::Quad; MAX_QUADS],
}

/// Computes one output tile's accumulators over the whole of K.
///
/// # Safety
/// As for `scalar::gemm`; all threads of the block call it together (it has barriers).
#[inline(always)]
pub unsafe fn run<
    E: Element,
    const A_K_CONTIGUOUS: bool,
    const B_K_CONTIGUOUS: bool,
    const BN: u32,
    const BK: u32,
    const TN: usize,
    const STEPS: u32,
    const COPY_ASYNC: bool,
    const CURSORS: bool,
>(
    p: &GemmParams,
    t: &Tile,
    tid: u32,
    smem: u32,
) -> Accumulators<TN> {
    const {
        assert!(
            (STEPS == 2 || STEPS == 4 || STEPS == 8) && BK % STEPS == 0,
            "whole trips per K tile"
        )
    };
    const { assert!(quads_per_thread(BM, BK) <= MAX_QUADS && quads_per_thread(BN, BK) <= MAX_QUADS) };
    let (a_tile_bytes, stage_bytes) = (tile_bytes(BM, BK), tile_bytes(BM, BK) + tile_bytes(BN, BK));
    // A is M × K (contiguous along K when row-major), B is K × N (along K when column-major).
    let a = OperandTile::new::<E>(
        p.a + t.batch * p.batch_stride_a * E::BYTES,
        p.lda,
        (t.m0, BM),
        p.m,
        p.k,
        E::NEG_ZERO,
    );
    let b = OperandTile::new::<E>(
        p.b + t.batch * p.batch_stride_b * E::BYTES,
        p.ldb,
        (t.n0, BN),
        p.n,
        p.k,
        0,
    );
    // With COPY_ASYNC (f32 only), an M- or N-contiguous operand goes to shared memory by
    // `cp.async` as soon as its K tile is fetched (`copy_direct`), and only a K-contiguous one
    // waits in registers for the transposed stores after the k steps: four registers fewer
    // per such operand, which f32's longer loop trips (`config::wide::STEPS_SM90`) need.
    let (a_async, b_async) = (COPY_ASYNC && !A_K_CONTIGUOUS, COPY_ASYNC && !B_K_CONTIGUOUS);
    let fetch_tile = |k0: u64, s: u32| -> Fetched<E> {
        let base = smem + s * stage_bytes;
        let unused = [E::pack_quad([0; QUAD as usize]); MAX_QUADS];
        // SAFETY: `fetch` and `copy_direct` read only in-bounds elements of the validated
        // operands; stage `s` is not read until the barrier after the caller's wait.
        unsafe {
            Fetched {
                a: if a_async {
                    copy_direct::<E, BM, BK>(&a, tid, k0, base);
                    unused
                } else {
                    fetch::<E, A_K_CONTIGUOUS, BM, BK>(&a, tid, k0)
                },
                b: if b_async {
                    copy_direct::<E, BN, BK>(&b, tid, k0, base + a_tile_bytes);
                    unused
                } else {
                    fetch::<E, B_K_CONTIGUOUS, BN, BK>(&b, tid, k0)
                },
            }
        }
    };
    let stage_tile = |s: u32, f: &Fetched<E>| {
        let base = smem + s * stage_bytes;
        // SAFETY: stage `s` (0 or 1) lies inside the `smem_bytes(BN, BK)` the block was
        // launched with.
        unsafe {
            if !a_async {
                stage::<E, A_K_CONTIGUOUS, BM, BK>(base, tid, &f.a);
            }
            if !b_async {
                stage::<E, B_K_CONTIGUOUS, BN, BK>(base + a_tile_bytes, tid, &f.b);
            }
        }
        if a_async || b_async {
            cp_async_wait_group::<0>();
        }
    };

    let mut acc: Accumulators<TN> = [[0.0f32; TN]; TM];
    let k_tiles = p.k.div_ceil(BK as u64);
    if k_tiles == 0 {
        return acc;
    }
    stage_tile(0, &fetch_tile(0, 0));
    bar_sync();
    let compute = |acc: &mut Accumulators<TN>, s: u32| {
        let a_tile = smem + s * stage_bytes;
        // SAFETY: stage `s` holds the staged tiles of `smem_bytes(BN, BK)`.
        unsafe { k_steps::<BN, BK, TN, STEPS>(acc, a_tile, a_tile + a_tile_bytes, tid) };
    };
    let mut kt = 0u64;
    // While the next K tile lies wholly inside both operands (every K tile but the last,
    // partial one, in most problems), its loads go through cursors: in the entries where
    // ptxas fits both loops' registers without spills (`cursors:` in `entry.rs`).
    let whole_tiles = if CURSORS && a.interior && b.interior {
        p.k / BK as u64
    } else {
        0
    };
    if let (true, Some(mut a_cur), Some(mut b_cur)) = (
        whole_tiles > 1,
        Cursor::new::<E, A_K_CONTIGUOUS, BM, BK>(&a, tid, BK as u64),
        Cursor::new::<E, B_K_CONTIGUOUS, BN, BK>(&b, tid, BK as u64),
    ) {
        while kt + 1 < whole_tiles {
            let s = (kt & 1) as u32;
            let base = smem + (s ^ 1) * stage_bytes;
            let unused = [E::pack_quad([0; QUAD as usize]); MAX_QUADS];
            // SAFETY: both operands are interior and the cursors are at K tile kt + 1, which
            // ends at or before K; stage `s ^ 1` is not read until the barrier below.
            let next = unsafe {
                Fetched::<E> {
                    a: if a_async {
                        copy_whole::<BM, BK>(&a_cur, tid, base);
                        unused
                    } else {
                        fetch_whole::<E, BM, BK>(&a_cur)
                    },
                    b: if b_async {
                        copy_whole::<BN, BK>(&b_cur, tid, base + a_tile_bytes);
                        unused
                    } else {
                        fetch_whole::<E, BN, BK>(&b_cur)
                    },
                }
            };
            a_cur.advance();
            b_cur.advance();
            compute(&mut acc, s);
            stage_tile(s ^ 1, &next);
            bar_sync();
            kt += 1;
        }
    }
    // The rest (every K tile without cursors) with bounds tests, the same chain.
    while kt < k_tiles {
        let s = (kt & 1) as u32;
        let next = if kt + 1 < k_tiles {
            Some(fetch_tile((kt + 1) * BK as u64, s ^ 1))
        } else {
            None
        };
        compute(&mut acc, s);
        if let Some(f) = next {
            stage_tile(s ^ 1, &f);
        }
        bar_sync();
        kt += 1;
    }
    acc
}

/// The `BK` k steps of one staged K tile (A at shared address `a_tile`, B at `b_tile`): this
/// thread's fragments of A and B, then `TM × TN` fmas per step.
///
/// # Safety
/// Both addresses are staged tiles inside the block's dynamic shared memory, published by a
/// barrier.
#[inline(always)]
unsafe fn k_steps<const BN: u32, const BK: u32, const TN: usize, const STEPS: u32>(
    acc: &mut Accumulators<TN>,
    a_tile: u32,
    b_tile: u32,
    tid: u32,
) {
    let a_frag = (tid / THREADS_N) * 4 * 4;
    let b_frag = (tid % THREADS_N) * 4 * 4;
    // One k step: this thread's fragments of A and B from the stage, then TM × TN fmas.
    let mut step = |kk: u32| {
        let (a_row, b_row) = (a_tile + kk * pitch(BM) * 4, b_tile + kk * pitch(BN) * 4);
        // SAFETY: fragment addresses are 16-byte aligned (pitches and fragment offsets
        // are multiples of 4 words) and inside the staged tiles.
        let (a_lo, a_hi, b_lo, b_hi) = unsafe {
            (
                ld_shared_v4_f32(a_row + a_frag),
                ld_shared_v4_f32(a_row + a_frag + BM / 2 * 4),
                ld_shared_v4_f32(b_row + b_frag),
                if TN == 8 {
                    ld_shared_v4_f32(b_row + b_frag + BN / 2 * 4)
                } else {
                    [0.0; 4]
                },
            )
        };
        let a = [
            a_lo[0], a_lo[1], a_lo[2], a_lo[3], a_hi[0], a_hi[1], a_hi[2], a_hi[3],
        ];
        let b = [
            b_lo[0], b_lo[1], b_lo[2], b_lo[3], b_hi[0], b_hi[1], b_hi[2], b_hi[3],
        ];
        for r in 0..TM {
            for c in 0..TN {
                // The one operation of the chain: k ascends with kt, then kk.
                acc[r][c] = fmaf32(a[r], b[c], acc[r][c]);
            }
        }
    };
    // STEPS k steps per loop trip (`config`): the loop's own instructions then cost two
    // issue slots per trip, and the scheduler can load a step's fragments ahead.
    if STEPS == 8 {
        for kk8 in 0..BK / 8 {
            unroll8!(u => { step(kk8 * 8 + u as u32) });
        }
    } else if STEPS == 4 {
        for kk4 in 0..BK / 4 {
            unroll4!(u => { step(kk4 * 4 + u as u32) });
        }
    } else {
        for kk2 in 0..BK / 2 {
            for u in 0..2 {
                step(kk2 * 2 + u);
            }
        }
    }
}
