//! Staging of A and B tiles through a cp.async pipeline and the MMA steps: the only code that
//! decides the reduction order of the tensor-core tier (see the module docs of `tensor`).

use super::config::{
    BK, BM, CHUNKS_PER_THREAD, CHUNK_ELEMS, FRAGS_M, FRAGS_N, K_PITCH, MMA_K, MN_PITCH, STAGES,
    STAGE_BYTES, THREADS, TILE_BYTES, WARPS_N, WARP_M, WARP_N,
};
use crate::arch::cp_async::{cp_async_cg_16, cp_async_commit_group, cp_async_wait_group};
use crate::arch::ldmatrix::{ldmatrix_x4, ldmatrix_x4_trans};
use crate::arch::shared::st_shared_v4_b32;
use crate::arch::sync::bar_sync;
use crate::element::MmaElement;
use crate::params::GemmParams;
use crate::schedule::Tile;

/// The accumulators of one thread: `acc[i][j]` is the C fragment (`arch::mma`) of m16
/// fragment `i` and n8 fragment `j` of its warp's (WARP_M, WARP_N) piece.
pub type Accumulators = [[[f32; 4]; FRAGS_N]; FRAGS_M];

/// Byte offset of element (mn, k) inside a staged operand tile. The tile keeps the operand's
/// contiguous dimension contiguous: (BM, K_PITCH) when K-contiguous, (BK, MN_PITCH) when not.
#[inline(always)]
fn tile_offset<const K_CONTIGUOUS: bool>(mn: u32, k: u32) -> u32 {
    if K_CONTIGUOUS {
        (mn * K_PITCH + k) * 2
    } else {
        (k * MN_PITCH + mn) * 2
    }
}

/// First element (mn, k) of chunk `r` of thread `tid` inside a (BM, BK) operand tile; a chunk
/// is 8 elements along the contiguous dimension. Neighbouring threads take neighbouring
/// chunks, so global reads coalesce.
#[inline(always)]
fn chunk_of<const K_CONTIGUOUS: bool>(tid: u32, r: usize) -> (u32, u32) {
    let c = tid + r as u32 * THREADS;
    let per_row = if K_CONTIGUOUS { BK } else { BM } / CHUNK_ELEMS;
    let (row, col) = (c / per_row, (c % per_row) * CHUNK_ELEMS);
    if K_CONTIGUOUS {
        (row, col)
    } else {
        (col, row)
    }
}

/// What one thread copies of one operand (A as (M, K), B as (N, K)) for every K tile: its
/// `CHUNKS_PER_THREAD` chunks, with everything that does not change along K worked out once,
/// so the pipeline keeps few registers live.
struct Loader<const K_CONTIGUOUS: bool> {
    /// Byte address of the operand's batch entry: 16-byte aligned on the cp.async path, and
    /// the source of copies that read nothing.
    base: u64,
    /// Byte address of each chunk in K tile 0 (meaningful only for chunks inside the matrix).
    src: [u64; CHUNKS_PER_THREAD],
    /// Bytes from a chunk in K tile kt to the same chunk in tile kt + 1.
    tile_step: u64,
    /// K of the matrix.
    k: u64,
    /// Each chunk's k within a K tile.
    chunk_k: [u32; CHUNKS_PER_THREAD],
    /// Each chunk's elements inside the matrix along M (or N): 0 to 8 (all or nothing when
    /// K-contiguous, where a chunk is one row's run of k).
    mn_valid: [u32; CHUNKS_PER_THREAD],
}

impl<const K_CONTIGUOUS: bool> Loader<K_CONTIGUOUS> {
    /// The loader of the (BM, BK) tiles whose first row (or column) is `mn0`, for an operand
    /// at byte address `base` with leading dimension `ld` and extents `mn` × `k`.
    #[inline(always)]
    fn new(tid: u32, base: u64, ld: u64, mn: u64, k: u64, mn0: u64) -> Self {
        let mut l = Loader {
            base,
            src: [0; CHUNKS_PER_THREAD],
            tile_step: if K_CONTIGUOUS {
                BK as u64 * 2
            } else {
                BK as u64 * ld * 2
            },
            k,
            chunk_k: [0; CHUNKS_PER_THREAD],
            mn_valid: [0; CHUNKS_PER_THREAD],
        };
        for r in 0..CHUNKS_PER_THREAD {
            let (cmn, ck) = chunk_of::<K_CONTIGUOUS>(tid, r);
            let gmn = mn0 + cmn as u64;
            let index = if K_CONTIGUOUS {
                gmn * ld + ck as u64
            } else {
                ck as u64 * ld + gmn
            };
            l.src[r] = base + index * 2;
            l.chunk_k[r] = ck;
            l.mn_valid[r] = if gmn >= mn {
                0
            } else if K_CONTIGUOUS {
                CHUNK_ELEMS
            } else {
                (mn - gmn).min(CHUNK_ELEMS as u64) as u32
            };
        }
        l
    }

    /// Copies this thread's chunks of K tile `kt` into the staged tile at shared address
    /// `tile`, zero-filling everything outside the matrix. With `CP_ASYNC` each whole chunk
    /// (or one wholly outside) is one 16-byte `cp.async` (the host guarantees 16-byte
    /// aligned chunks); a chunk only partly inside the matrix, and every chunk without
    /// `CP_ASYNC`, is eight element loads and one shared store (any 2-byte alignment). The
    /// partial chunks take the element path because a `cp.async` with fewer source bytes
    /// is still a 16-byte read to compute-sanitizer's memcheck, which then reports the
    /// matrix's last chunk reading past the end of an exactly sized buffer. The tile's
    /// contents are the same either way.
    ///
    /// # Safety
    /// `tile` is a staged-tile address inside the block's shared memory; the operand is
    /// readable wherever it is inside the matrix.
    #[inline(always)]
    unsafe fn load<const CP_ASYNC: bool>(&self, tile: u32, tid: u32, kt: u64) {
        for r in 0..CHUNKS_PER_THREAD {
            let (cmn, ck) = chunk_of::<K_CONTIGUOUS>(tid, r);
            let dst = tile + tile_offset::<K_CONTIGUOUS>(cmn, ck);
            let gk = kt * BK as u64 + self.chunk_k[r] as u64;
            // Elements of the chunk inside the matrix, 0 to 8, along its contiguous dimension.
            let valid = if gk >= self.k {
                0
            } else if K_CONTIGUOUS {
                (self.k - gk).min(self.mn_valid[r] as u64) as u32
            } else {
                self.mn_valid[r]
            };
            let src = self.src[r] + kt * self.tile_step;
            if CP_ASYNC && (valid == CHUNK_ELEMS || valid == 0) {
                // With nothing to read, the source is the operand's base: aligned and valid.
                let src = if valid > 0 { src } else { self.base };
                // SAFETY: `dst` lies in the tile; `src` is 16-byte aligned (host-checked
                // base, leading dimension and batch stride, and chunks start at multiples of
                // 8 elements) and its `valid` elements (all or none) are inside the matrix.
                unsafe { cp_async_cg_16(dst, src, valid * 2) };
            } else {
                let src = src as *const u16;
                let mut v = [0u32; 4];
                unroll8!(e => {
                    if (e as u32) < valid {
                        // SAFETY: element e of the chunk is inside the matrix.
                        let h = unsafe { *src.add(e) } as u32;
                        v[e / 2] |= h << (16 * (e % 2));
                    }
                });
                // SAFETY: `dst` is a 16-byte aligned chunk of the tile.
                unsafe { st_shared_v4_b32(dst, v) };
            }
        }
    }
}

/// One 16 × 16 (mn, k) fragment of a staged tile, as four 8 × 8 matrices. `A_ORDER` puts
/// them in the register order of the A operand (mn block fastest: (0,0) (1,0) (0,1) (1,1),
/// blocks of 8 as (mn, k)); otherwise k block fastest, which is two B fragments of n8 each.
/// A K-contiguous tile stores fragment rows as rows (`ldmatrix`); an MN-contiguous one
/// stores them as columns (`ldmatrix.trans`).
///
/// # Safety
/// All lanes of the warp call it together; (mn0 + 16, k0 + 16) is inside the tile at `tile`.
#[inline(always)]
unsafe fn fragment<const K_CONTIGUOUS: bool, const A_ORDER: bool>(
    tile: u32,
    lane: u32,
    mn0: u32,
    k0: u32,
) -> [u32; 4] {
    let (matrix, row) = (lane / 8, lane % 8);
    let (mn_block, k_block) = if A_ORDER {
        (matrix % 2, matrix / 2)
    } else {
        (matrix / 2, matrix % 2)
    };
    let (mn, k) = (mn0 + mn_block * 8, k0 + k_block * 8);
    // SAFETY: forwarded contract; rows are 16-byte aligned (config's pitch assertions).
    unsafe {
        if K_CONTIGUOUS {
            ldmatrix_x4(tile + tile_offset::<true>(mn + row, k))
        } else {
            ldmatrix_x4_trans(tile + tile_offset::<false>(mn, k + row))
        }
    }
}

/// Computes one output tile's accumulators over the whole of K.
///
/// # Safety
/// As for `tensor::gemm`; all threads of the block call it together (it has barriers).
#[inline(always)]
pub unsafe fn run<
    E: MmaElement,
    const A_K_CONTIGUOUS: bool,
    const B_K_CONTIGUOUS: bool,
    const CP_ASYNC: bool,
>(
    p: &GemmParams,
    t: &Tile,
    tid: u32,
    smem: u32,
) -> Accumulators {
    let a = Loader::<A_K_CONTIGUOUS>::new(
        tid,
        p.a + t.batch * p.batch_stride_a * 2,
        p.lda,
        p.m,
        p.k,
        t.m0,
    );
    let b = Loader::<B_K_CONTIGUOUS>::new(
        tid,
        p.b + t.batch * p.batch_stride_b * 2,
        p.ldb,
        p.n,
        p.k,
        t.n0,
    );
    // Stage s holds K tile kt: (BM, BK) of A, then (BN, BK) of B.
    let load_stage = |s: u32, kt: u64| {
        let tile = smem + s * STAGE_BYTES;
        // SAFETY: stage s < STAGES lies inside the SMEM_BYTES the block was launched with;
        // the loaders read only elements inside the validated operands.
        unsafe {
            a.load::<CP_ASYNC>(tile, tid, kt);
            b.load::<CP_ASYNC>(tile + TILE_BYTES, tid, kt);
        }
    };

    let mut acc: Accumulators = [[[0.0f32; 4]; FRAGS_N]; FRAGS_M];
    let k_tiles = p.k.div_ceil(BK as u64);
    for s in 0..STAGES - 1 {
        if (s as u64) < k_tiles {
            load_stage(s, s as u64);
        }
        cp_async_commit_group();
    }
    let (warp, lane) = (tid / 32, tid % 32);
    let (wm, wn) = ((warp / WARPS_N) * WARP_M, (warp % WARPS_N) * WARP_N);
    let mut kt = 0u64;
    while kt < k_tiles {
        // Tile kt has landed (at most STAGES - 2 younger groups in flight) for every thread,
        // and every warp is done with the stage the next copy overwrites.
        cp_async_wait_group::<{ STAGES - 2 }>();
        bar_sync();
        let next = kt + (STAGES - 1) as u64;
        if next < k_tiles {
            load_stage((next % STAGES as u64) as u32, next);
        }
        cp_async_commit_group();

        let a_tile = smem + (kt % STAGES as u64) as u32 * STAGE_BYTES;
        let b_tile = a_tile + TILE_BYTES;
        // The MMA steps of this stage, ascending k. The last stage's second step is skipped
        // when it lies wholly past K: the contract pads K only to a multiple of MMA_K.
        let steps = if p.k - kt * (BK as u64) > MMA_K as u64 {
            2
        } else {
            1
        };
        for step in 0..2u32 {
            if step < steps {
                let kk = step * MMA_K;
                // SAFETY (all fragment loads): the warp's fragments lie inside the staged
                // tiles; all lanes run this together (`steps` is uniform across the block).
                let mut bf = [[0u32; 4]; FRAGS_N / 2];
                for (jj, f) in bf.iter_mut().enumerate() {
                    let n0 = wn + jj as u32 * 16;
                    *f = unsafe { fragment::<B_K_CONTIGUOUS, false>(b_tile, lane, n0, kk) };
                }
                // A one m16 fragment at a time, so only 4 of its registers are live.
                for (i, acc_i) in acc.iter_mut().enumerate() {
                    let m0 = wm + i as u32 * 16;
                    let af = unsafe { fragment::<A_K_CONTIGUOUS, true>(a_tile, lane, m0, kk) };
                    for (j, acc_ij) in acc_i.iter_mut().enumerate() {
                        let bj = [bf[j / 2][(j % 2) * 2], bf[j / 2][(j % 2) * 2 + 1]];
                        // The one operation of the chain: k ascends with kt, then step.
                        E::mma_m16n8k16(acc_ij, &af, &bj);
                    }
                }
            }
        }
        kt += 1;
    }
    // No copy in flight and no warp still reading: the block may reuse shared memory for its
    // next tile.
    cp_async_wait_group::<0>();
    bar_sync();
    acc
}
