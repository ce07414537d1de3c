//! Tile shape of the tensor-core kernels (mma.sync path). Plain constants, shared by
//! the kernels and the host's launcher, so launch sizes cannot drift.

/// Output rows per block tile.
pub const BM: u32 = 128;
/// Output columns per block tile.
pub const BN: u32 = 128;
/// K per pipeline stage: two MMA steps.
pub const BK: u32 = 32;
/// K of one `mma.sync.m16n8k16`: the step of the reduction (the contract's unit).
pub const MMA_K: u32 = 16;
/// Pipeline depth: stages of (A, B) tiles in flight in shared memory.
pub const STAGES: u32 = 4;
/// Warps along M and along N; each warp owns a (WARP_M, WARP_N) piece of the block tile.
pub const WARPS_M: u32 = 2;
pub const WARPS_N: u32 = 4;
/// Threads per block.
pub const THREADS: u32 = 32 * WARPS_M * WARPS_N;
/// Rows and columns of a warp's piece.
pub const WARP_M: u32 = BM / WARPS_M;
pub const WARP_N: u32 = BN / WARPS_N;
/// m16 fragments along a warp's rows, n8 fragments along its columns.
pub const FRAGS_M: usize = (WARP_M / 16) as usize;
pub const FRAGS_N: usize = (WARP_N / 8) as usize;

/// Elements of padding after each shared-memory row: a row is then an odd number of 16-byte
/// units long, so the eight 16-byte rows one `ldmatrix` matrix reads hit eight different
/// bank groups.
pub const PAD: u32 = 8;
/// Row pitch (elements) of an operand tile stored K-contiguous: (BM rows, BK k) + padding.
pub const K_PITCH: u32 = BK + PAD;
/// Row pitch (elements) of an operand tile stored M- (or N-) contiguous: (BK rows, BM).
pub const MN_PITCH: u32 = BM + PAD;
/// Bytes of one operand tile in either orientation (16-bit elements).
pub const TILE_BYTES: u32 = max(BM * K_PITCH * 2, BK * MN_PITCH * 2);
/// Bytes of one pipeline stage: the A tile then the B tile.
pub const STAGE_BYTES: u32 = 2 * TILE_BYTES;
/// Dynamic shared memory a block needs (above 48 KiB: the host raises the function's limit).
pub const SMEM_BYTES: u32 = STAGES * STAGE_BYTES;
/// 16-byte chunks (8 elements) of one operand tile, and how many each thread copies.
pub const CHUNKS: u32 = BM * BK / 8;
pub const CHUNKS_PER_THREAD: usize = (CHUNKS / THREADS) as usize;
/// Elements per 16-byte chunk: the alignment (in elements) the cp.async loader needs of
/// every operand's leading dimension and batch stride.
pub const CHUNK_ELEMS: u32 = 8;

#[inline]
const fn max(a: u32, b: u32) -> u32 {
    if a > b {
        a
    } else {
        b
    }
}

const _: () = {
    assert!(BM == BN, "A and B tiles share one staging layout");
    assert!(BK % MMA_K == 0, "a stage holds whole MMA steps");
    assert!(
        BK == 2 * MMA_K,
        "the mainloop skips only the second step of a stage"
    );
    assert!(STAGES >= 2, "the pipeline needs at least double buffering");
    assert!(
        WARP_M % 16 == 0 && WARP_N % 16 == 0,
        "warp pieces are whole ldmatrix.x4 loads"
    );
    assert!(
        CHUNKS % THREADS == 0,
        "every thread copies the same number of chunks"
    );
    assert!(
        (K_PITCH * 2) % 16 == 0 && (MN_PITCH * 2) % 16 == 0,
        "rows stay 16-byte aligned"
    );
    assert!(
        (K_PITCH * 2 / 16) % 2 == 1 && (MN_PITCH * 2 / 16) % 2 == 1,
        "an odd number of 16-byte units per row: 8 consecutive rows start in 8 bank groups"
    );
};
