//! Staging of A and B tiles through shared memory and the fma chain: the only code that
//! decides the reduction order of the scalar tier (see the module docs of `scalar`).

use super::config::{
    BK, BM, LOADS_PER_THREAD, PITCH, STAGE_BYTES, THREADS, THREADS_N, TILE_BYTES, TM,
};
use crate::arch::shared::{ld_shared_v4_f32, st_shared_f32};
use crate::arch::sync::bar_sync;
use crate::element::Element;
use crate::params::GemmParams;
use crate::schedule::Tile;
use core::intrinsics::fmaf32;

/// The 8 × 8 accumulators of one thread: `acc[r][c]` is output row `row_of(r)`, column
/// `col_of(c)` of the tile.
pub type Accumulators = [[f32; TM]; TM];

/// Tile row of accumulator row `r` for thread `tid`: two groups of 4 rows, 64 apart, so the
/// fragment loads of a warp hit distinct shared-memory banks.
#[inline(always)]
pub fn row_of(tid: u32, r: usize) -> u32 {
    (tid / THREADS_N) * 4 + (r as u32 % 4) + (r as u32 / 4) * (BM / 2)
}

/// Tile column of accumulator column `c` for thread `tid`.
#[inline(always)]
pub fn col_of(tid: u32, c: usize) -> u32 {
    (tid % THREADS_N) * 4 + (c as u32 % 4) + (c as u32 / 4) * (BM / 2)
}

/// Where load `r` of thread `tid` goes inside a (BK, BM) operand tile, as (kk, mn).
/// When the operand is contiguous along M (or N), neighbouring threads take neighbouring
/// rows so the global reads coalesce; when it is contiguous along K, they take neighbouring
/// k instead.
#[inline(always)]
fn staging_slot<const K_CONTIGUOUS: bool>(tid: u32, r: usize) -> (u32, u32) {
    let idx = tid + r as u32 * THREADS;
    if K_CONTIGUOUS {
        (idx % BK, idx / BK)
    } else {
        (idx / BM, idx % BM)
    }
}

/// Reads this thread's share of one operand tile from global memory into registers,
/// filling with the raw bits `fill` outside the matrix (A: −0.0, B: +0.0, so that padded k
/// steps leave every chain as it is; see `Element::NEG_ZERO`). `mn_limit`/`k_limit` bound
/// the tile's rows and k; `offset(mn, k)` gives the element index of a global
/// (row-or-column, k) pair.
///
/// # Safety
/// Every in-bounds index `offset` returns is readable.
#[inline(always)]
unsafe fn fetch<E: Element, const K_CONTIGUOUS: bool>(
    base: u64,
    tid: u32,
    mn0: u64,
    mn_limit: u64,
    k0: u64,
    k_limit: u64,
    fill: u32,
    offset: impl Fn(u64, u64) -> u64,
) -> [u32; LOADS_PER_THREAD] {
    let mut regs = [fill; LOADS_PER_THREAD];
    for (r, reg) in regs.iter_mut().enumerate() {
        let (kk, mn) = staging_slot::<K_CONTIGUOUS>(tid, r);
        let (gmn, gk) = (mn0 + mn as u64, k0 + kk as u64);
        if gmn < mn_limit && gk < k_limit {
            // SAFETY: in bounds, by the caller's contract.
            *reg = unsafe { E::load_raw(base, offset(gmn, gk)) };
        }
    }
    regs
}

/// Upcasts fetched registers and writes them into a (BK, PITCH) tile at shared address
/// `tile`.
///
/// # Safety
/// `tile` is a staged-tile address inside the block's dynamic shared memory.
#[inline(always)]
unsafe fn stage<E: Element, const K_CONTIGUOUS: bool>(
    tile: u32,
    tid: u32,
    regs: &[u32; LOADS_PER_THREAD],
) {
    for (r, raw) in regs.iter().enumerate() {
        let (kk, mn) = staging_slot::<K_CONTIGUOUS>(tid, r);
        // SAFETY: kk < BK and mn < BM, so the address is inside the tile.
        unsafe { st_shared_f32(tile + (kk * PITCH + mn) * 4, E::to_f32(*raw)) };
    }
}

/// The operands of one K tile, held in registers as raw bits between the global read and the
/// shared-memory write so the read overlaps the previous tile's arithmetic.
struct Fetched {
    a: [u32; LOADS_PER_THREAD],
    b: [u32; LOADS_PER_THREAD],
}

/// Computes one output tile's accumulators over the whole of K.
///
/// # Safety
/// As for `scalar::gemm`; all threads of the block call it together (it has barriers).
#[inline(always)]
pub unsafe fn run<E: Element, const A_K_CONTIGUOUS: bool, const B_K_CONTIGUOUS: bool>(
    p: &GemmParams,
    t: &Tile,
    tid: u32,
    smem: u32,
) -> Accumulators {
    let a_base = p.a + t.batch * p.batch_stride_a * E::BYTES;
    let b_base = p.b + t.batch * p.batch_stride_b * E::BYTES;
    let (lda, ldb) = (p.lda, p.ldb);
    // A is M × K: contiguous along K when row-major.
    let a_at = move |m: u64, k: u64| {
        if A_K_CONTIGUOUS {
            m * lda + k
        } else {
            m + k * lda
        }
    };
    // B is K × N: contiguous along K when column-major.
    let b_at = move |n: u64, k: u64| {
        if B_K_CONTIGUOUS {
            k + n * ldb
        } else {
            k * ldb + n
        }
    };
    let fetch_tile = |k0: u64| -> Fetched {
        // SAFETY: `fetch` reads only in-bounds elements of the validated operands.
        unsafe {
            Fetched {
                a: fetch::<E, A_K_CONTIGUOUS>(a_base, tid, t.m0, p.m, k0, p.k, E::NEG_ZERO, a_at),
                b: fetch::<E, B_K_CONTIGUOUS>(b_base, tid, t.n0, p.n, k0, p.k, 0, b_at),
            }
        }
    };
    let stage_tile = |s: u32, f: &Fetched| {
        let base = smem + s * STAGE_BYTES;
        // SAFETY: stage `s` (0 or 1) lies inside the SMEM_BYTES the block was launched with.
        unsafe {
            stage::<E, A_K_CONTIGUOUS>(base, tid, &f.a);
            stage::<E, B_K_CONTIGUOUS>(base + TILE_BYTES, tid, &f.b);
        }
    };

    let mut acc: Accumulators = [[0.0f32; TM]; TM];
    let k_tiles = p.k.div_ceil(BK as u64);
    if k_tiles == 0 {
        return acc;
    }
    stage_tile(0, &fetch_tile(0));
    bar_sync();
    let a_frag = (tid / THREADS_N) * 4 * 4;
    let b_frag = (tid % THREADS_N) * 4 * 4;
    let mut kt = 0u64;
    while kt < k_tiles {
        let s = (kt & 1) as u32;
        let next = if kt + 1 < k_tiles {
            Some(fetch_tile((kt + 1) * BK as u64))
        } else {
            None
        };
        let a_tile = smem + s * STAGE_BYTES;
        let b_tile = a_tile + TILE_BYTES;
        for kk in 0..BK {
            let row = kk * PITCH * 4;
            // SAFETY: fragment addresses are 16-byte aligned (PITCH % 4 == 0) and inside the
            // staged tiles.
            let (a_lo, a_hi, b_lo, b_hi) = unsafe {
                (
                    ld_shared_v4_f32(a_tile + row + a_frag),
                    ld_shared_v4_f32(a_tile + row + a_frag + BM / 2 * 4),
                    ld_shared_v4_f32(b_tile + row + b_frag),
                    ld_shared_v4_f32(b_tile + row + b_frag + BM / 2 * 4),
                )
            };
            let a = [
                a_lo[0], a_lo[1], a_lo[2], a_lo[3], a_hi[0], a_hi[1], a_hi[2], a_hi[3],
            ];
            let b = [
                b_lo[0], b_lo[1], b_lo[2], b_lo[3], b_hi[0], b_hi[1], b_hi[2], b_hi[3],
            ];
            for r in 0..TM {
                for c in 0..TM {
                    // The one operation of the chain: k ascends with kt, then kk.
                    acc[r][c] = fmaf32(a[r], b[c], acc[r][c]);
                }
            }
        }
        if let Some(f) = next {
            stage_tile(s ^ 1, &f);
        }
        bar_sync();
        kt += 1;
    }
    acc
}
