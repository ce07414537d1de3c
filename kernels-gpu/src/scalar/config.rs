//! Tile shape of the scalar kernels.

/// Output rows per block tile.
pub const BM: u32 = 128;
/// Output columns per block tile.
pub const BN: u32 = 128;
/// K steps staged in shared memory at a time.
pub const BK: u32 = 8;
/// Threads per block: a 16 × 16 grid of threads, each owning an 8 × 8 sub-tile.
pub const THREADS: u32 = 256;
/// Rows (and columns) of the sub-tile a thread accumulates.
pub const TM: usize = 8;
/// Threads along N in the block's thread grid.
pub const THREADS_N: u32 = 16;
/// Row pitch of a staged tile in shared memory, in f32. The 4 extra words let the
/// k-contiguous layouts store 8 k values of one row to 8 different banks.
pub const PITCH: u32 = BM + 4;
/// Bytes of one staged operand tile: (BK, PITCH) f32.
pub const TILE_BYTES: u32 = BK * PITCH * 4;
/// Bytes of one pipeline stage: the A tile then the B tile.
pub const STAGE_BYTES: u32 = 2 * TILE_BYTES;
/// Dynamic shared memory a block needs: two stages (double buffering).
pub const SMEM_BYTES: u32 = 2 * STAGE_BYTES;
/// Elements each thread moves from global to shared memory per operand and K tile.
pub const LOADS_PER_THREAD: usize = (BM * BK / THREADS) as usize;

const _: () = {
    assert!(BM == BN, "the staging code maps A and B tiles the same way");
    assert!(
        BM == 2 * 4 * THREADS_N,
        "each thread owns two 4-wide column groups"
    );
    assert!(
        (BM * BK) % THREADS == 0,
        "every thread loads the same number of elements"
    );
    assert!(
        PITCH % 4 == 0,
        "16-byte shared loads need a 16-byte aligned pitch"
    );
    assert!(
        TM == 8,
        "the mainloop reads fragments as two float4 per operand"
    );
};
