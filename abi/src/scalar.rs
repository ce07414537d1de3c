//! Tile shapes of the scalar kernels: every block tile is `BM` = 128 rows; the columns come
//! in two widths, [`wide`] (128) and [`narrow`] (64), and the host picks by how evenly the
//! tiles fill the GPU's waves. Both compute every element with the same chain.

/// Output rows per block tile.
pub const BM: u32 = 128;
/// Threads per block: a 16 × 16 grid of threads, each owning `TM` rows × `TN` columns.
pub const THREADS: u32 = 256;
/// Rows of the sub-tile a thread accumulates.
pub const TM: usize = 8;
/// Threads along N in the block's thread grid.
pub const THREADS_N: u32 = 16;
/// Elements of one vector read from global memory: a quad runs along the operand's
/// contiguous dimension (16 bytes of f32, 8 of a 16-bit type).
pub const QUAD: u32 = 4;

/// Row pitch, in f32, of a staged operand tile of `rows` rows (M or N) per k: 4 extra words
/// put consecutive k rows 4 banks apart, so the transposed stores of k-contiguous quads
/// spread over the banks.
#[inline]
pub const fn pitch(rows: u32) -> u32 {
    rows + 4
}

/// Bytes of one staged operand tile: (bk, pitch(rows)) f32.
#[inline]
pub const fn tile_bytes(rows: u32, bk: u32) -> u32 {
    bk * pitch(rows) * 4
}

/// Dynamic shared memory of a block with `bn`-column tiles staged `bk` k at a time: two
/// stages (double buffering), each the A tile then the B tile.
#[inline]
pub const fn smem_bytes(bn: u32, bk: u32) -> u32 {
    2 * (tile_bytes(BM, bk) + tile_bytes(bn, bk))
}

/// 128 × 128 tiles, 8 k per stage: 64 fmas per thread and k step for 4 shared loads.
pub mod wide {
    /// Output columns per block tile.
    pub const BN: u32 = 128;
    /// K steps staged in shared memory at a time.
    pub const BK: u32 = 8;
    /// Columns of a thread's sub-tile.
    pub const TN: usize = 8;
    /// K steps per trip of the inner loop in the sm80 module's entries. Eight (a whole K
    /// tile) would let the scheduler load fragments further ahead, but then ptxas spills
    /// with 64 accumulators in 128 registers: on sm_80 in most entries, on sm_90 in f32's.
    pub const STEPS: u32 = 2;
    /// K steps per trip in the sm90a module's `_sm90` entries, which sm_90 assembles without
    /// spills at eight: the 16-bit types since version 3 (bf16 4096³ on the H200 41.5 → 43.8
    /// TFLOP/s), f32 since its cursors (`mainloop`) freed registers (4096³ 44.3 → 46.5;
    /// docs/perf-notes.md, "Scalar tier", versions 3 and 5).
    pub const STEPS_SM90: u32 = 8;
    /// f32's `cr` entry (both operands M- or N-contiguous, no cursors): with eight steps
    /// ptxas spills 4 bytes there; four fit.
    pub const STEPS_SM90_F32_CR: u32 = 4;
    /// Dynamic shared memory a block needs.
    pub const SMEM_BYTES: u32 = super::smem_bytes(BN, BK);
}

/// 128 × 64 tiles, 16 k per stage (so that a 64-column k-tile is one quad per thread): twice
/// the tiles of [`wide`], for shapes whose 128-column tiles leave the last wave mostly empty.
pub mod narrow {
    /// Output columns per block tile.
    pub const BN: u32 = 64;
    /// K steps staged in shared memory at a time.
    pub const BK: u32 = 16;
    /// Columns of a thread's sub-tile.
    pub const TN: usize = 4;
    /// K steps per trip of the inner loop: 32 fmas per step leave too little work to cover
    /// the shared loads' latency with fewer.
    pub const STEPS: u32 = 8;
    /// Dynamic shared memory a block needs.
    pub const SMEM_BYTES: u32 = super::smem_bytes(BN, BK);
}

/// The checks every tile shape must pass, at compile time (generic, so that no code for it
/// is ever emitted).
#[inline]
pub const fn check<const BN: u32, const BK: u32, const TN: usize>() {
    let (bn, tn) = (BN, TN);
    assert!(
        bn == THREADS_N * tn as u32,
        "a thread row covers the tile's columns"
    );
    assert!(
        BM == (THREADS / THREADS_N) * TM as u32,
        "a thread column covers the rows"
    );
    assert!(
        tn == 4 || tn == 8,
        "fragments are read as one or two float4"
    );
    assert!(
        pitch(BM) % 32 == 4 && pitch(bn) % 32 == 4,
        "staged rows 4 banks apart"
    );
    check_operand::<BM, BK>();
    check_operand::<BN, BK>();
}

/// An operand tile of `rows` × `bk` is read in whole quads, the same number per thread,
/// by whole rows (k-contiguous) or whole k rows (m- or n-contiguous).
const fn check_operand<const ROWS: u32, const BK: u32>() {
    let (rows, bk) = (ROWS, BK);
    assert!(
        (rows * bk) % (QUAD * THREADS) == 0,
        "every thread reads the same quads"
    );
    assert!(THREADS % rows == 0, "k-contiguous: whole threads per row");
    assert!(
        (bk / QUAD) % (THREADS / rows) == 0,
        "k-contiguous: a row's quads split evenly over its threads"
    );
    assert!(
        THREADS % (rows / QUAD) == 0,
        "m/n-contiguous: whole k rows per pass"
    );
    assert!(
        bk % (THREADS / (rows / QUAD)) == 0,
        "m/n-contiguous: whole passes per k tile"
    );
}

const _: () = assert!(TM == 8, "A fragments are read as two float4");
const _: () = check::<{ wide::BN }, { wide::BK }, { wide::TN }>();
const _: () = check::<{ narrow::BN }, { narrow::BK }, { narrow::TN }>();

/// The few-row kernel (`M ≤ 64`, decode and the bias gradient's `onesᵀ · dY`): a block owns
/// `32 · TN` columns and `4 · TM` rows; each lane of a chain warp runs the chains of `TN`
/// columns (lane `l` takes columns `l, l + 32, …`) for `TM` rows of its own, reading B and A
/// from a ring of `stages` shared-memory stages that producer warps fill by `cp.async` ahead
/// of the chains and hand over through mbarriers. Parallelism comes from N (one block per
/// `32 · TN` columns) and from streaming B, never from splitting K: every chain is the
/// contract's one ascending fma chain.
pub mod rows {
    /// Lanes of a chain warp: a block's columns are `LANES · TN`.
    pub const LANES: u32 = 32;
    /// Chain warps per block, each owning `TM` consecutive rows of the block's tile.
    pub const WARPS: u32 = 4;
    /// Producer warps per block: they copy the stages, convert a 16-bit A to f32 and signal
    /// the chain warps; they come first, so that the chain warps are warps 2–5 and the one
    /// chain warp busy at M ≤ TM has a scheduler without a producer on it.
    pub const PRODUCER_WARPS: u32 = 2;
    /// Producer threads per block.
    pub const PRODUCER_THREADS: u32 = PRODUCER_WARPS * 32;
    /// Threads per block.
    pub const THREADS: u32 = (WARPS + PRODUCER_WARPS) * 32;
    /// Bytes of one `cp.async` piece: a staged row of k is copied in pieces of this size.
    pub const PIECE: u32 = 16;
    /// k steps a lane reads at once from a staged B column: 16 bytes of f32 twice, or of a
    /// 16-bit type once.
    pub const GROUP: u32 = 8;
    /// Most `cp.async` pieces of one operand a producer thread copies per stage.
    pub const MAX_PIECES: u32 = 8;
    /// Buffers of A converted to f32 (16-bit inputs). Two hold the stage the chains read and
    /// the next; with up to four rows per warp a third lets a producer convert a stage as
    /// soon as it lands, without waiting for the chains to finish the stage before the one
    /// they read: at those rows a stage lasts 150–300 ns, less than a producer's round of
    /// sleep, copies and conversion, and the chains waited for it at every stage (H100
    /// probe, docs/perf-notes.md). With more rows per warp (tiles of 8 and 16 rows, which
    /// the kernel had until lane tiles of several columns replaced them) the third buffer
    /// would cost a stage of the ring.
    #[inline]
    pub const fn a_f32_buffers(tm: u32) -> u32 {
        if tm <= 4 {
            3
        } else {
            2
        }
    }
    /// The largest ring: more stages than this buy nothing the lag cannot already cover.
    pub const MAX_STAGES: u32 = 12;
    /// Shared memory a block may use: 99 KiB, the most an sm_86 or sm_89 block may have,
    /// since the sm80 module serves every GPU.
    pub const SMEM_LIMIT: u32 = 99 * 1024;

    /// The lane tiles the host can launch, `(TM, TN)`: rows per warp and columns per lane,
    /// i.e. blocks of 4, 8 or 16 rows × 32 columns, of 8 or 16 rows × 64 columns and of 16
    /// rows × 128 columns. The two of 2 rows per warp give a call of 5–16 rows more busy
    /// warps at the same number of blocks (or two blocks per SM); the planner does not take
    /// them until they are measured (`SGEMM_BI_SCALAR_ROWS_PER_WARP` forces them). More
    /// rows per lane share each B element among more chains, more columns each A element
    /// (fewer shared-memory reads and conversions per fma); smaller blocks leave more warps
    /// busy at a given M and N. Tiles of 8 and 16 rows × 1 column were slower than 4 × 2 or
    /// 4 × 4 at every shape measured (H100, docs/perf-notes.md, "Scalar few-row kernel: lane
    /// tiles in the kernel"), so they are gone.
    pub const VARIANTS: [(u32, u32); 6] = [(1, 1), (2, 1), (2, 2), (4, 1), (4, 2), (4, 4)];

    /// Output columns of a block whose lanes own `tn` columns each.
    #[inline]
    pub const fn block_cols(tn: u32) -> u32 {
        LANES * tn
    }

    /// Bytes of k staged per row and stage: a stage holds `stage_k(tm, tn, bytes)` k steps.
    /// Shorter stages where a block has more rows or columns leave room for more of them in
    /// the ring, and keep B's pieces within [`MAX_PIECES`] per producer.
    #[inline]
    pub const fn stage_k_bytes(tm: u32, tn: u32) -> u32 {
        if tn >= 4 {
            64
        } else if tm >= 8 || tn == 2 {
            128
        } else {
            256
        }
    }

    /// k steps per stage for elements of `bytes` bytes.
    #[inline]
    pub const fn stage_k(tm: u32, tn: u32, bytes: u32) -> u32 {
        stage_k_bytes(tm, tn) / bytes
    }

    /// Byte pitch of a staged B column (k-contiguous B): 16 bytes over the row, so that the
    /// 16-byte reads of eight consecutive lanes fall in distinct banks.
    #[inline]
    pub const fn b_pitch(tm: u32, tn: u32) -> u32 {
        stage_k_bytes(tm, tn) + PIECE
    }

    /// Bytes of one stage's B: the block's columns of `b_pitch` (a k-contiguous B), which
    /// also holds `stage_k` rows of the block's columns (an N-contiguous B).
    #[inline]
    pub const fn b_stage_bytes(tm: u32, tn: u32) -> u32 {
        block_cols(tn) * b_pitch(tm, tn)
    }

    /// Bytes of one stage's A, as loaded: `WARPS · tm` rows of `stage_k_bytes`.
    #[inline]
    pub const fn a_stage_bytes(tm: u32, tn: u32) -> u32 {
        WARPS * tm * stage_k_bytes(tm, tn)
    }

    /// Bytes of A converted to f32 for one stage (16-bit inputs; f32 A is read as loaded).
    #[inline]
    pub const fn a_f32_bytes(tm: u32, tn: u32, bytes: u32) -> u32 {
        if bytes == 4 {
            0
        } else {
            WARPS * tm * stage_k(tm, tn, bytes) * 4
        }
    }

    /// Stages in the ring: as many as fit beside the f32 buffers of A and the barriers in
    /// [`SMEM_LIMIT`], at most [`MAX_STAGES`].
    #[inline]
    pub const fn stages(tm: u32, tn: u32, bytes: u32) -> u32 {
        let fixed = a_f32_buffers(tm) * a_f32_bytes(tm, tn, bytes) + barrier_bytes(MAX_STAGES);
        let fit = (SMEM_LIMIT - fixed) / (b_stage_bytes(tm, tn) + a_stage_bytes(tm, tn));
        if fit > MAX_STAGES {
            MAX_STAGES
        } else {
            fit
        }
    }

    /// Stages a producer is ahead of the one it hands over: at step g it finishes stage
    /// g − lag, then refills the slot of stage g − stages and issues stage g. Two slots of
    /// the ring are the stage the chains read and the one handed over next.
    #[inline]
    pub const fn lag(tm: u32, tn: u32, bytes: u32) -> u32 {
        stages(tm, tn, bytes) - 2
    }

    /// Bytes of the ring's mbarriers: a "full" and an "empty" one per slot, 8 bytes each.
    #[inline]
    pub const fn barrier_bytes(stages: u32) -> u32 {
        2 * stages * 8
    }

    /// Dynamic shared memory of a block: the ring of B and A stages, the f32 buffers of A,
    /// then the barriers.
    #[inline]
    pub const fn smem_bytes(tm: u32, tn: u32, bytes: u32) -> u32 {
        let s = stages(tm, tn, bytes);
        s * (b_stage_bytes(tm, tn) + a_stage_bytes(tm, tn))
            + a_f32_buffers(tm) * a_f32_bytes(tm, tn, bytes)
            + barrier_bytes(s)
    }

    const fn check(tm: u32, tn: u32, bytes: u32) {
        assert!(
            smem_bytes(tm, tn, bytes) <= SMEM_LIMIT,
            "fits sm_86/sm_89 blocks"
        );
        assert!(
            stage_k(tm, tn, bytes) % GROUP == 0 && stage_k(tm, tn, bytes) >= 2 * GROUP,
            "whole groups per stage, at least the two a lane reads ahead"
        );
        assert!(
            stage_k_bytes(tm, tn) % PIECE == 0,
            "whole pieces per staged row"
        );
        assert!(
            (block_cols(tn) * stage_k_bytes(tm, tn) / PIECE) % PRODUCER_THREADS == 0,
            "every producer copies the same number of B pieces"
        );
        assert!(
            block_cols(tn) * stage_k_bytes(tm, tn) / PIECE <= MAX_PIECES * PRODUCER_THREADS,
            "B's pieces fit the producers' registers"
        );
        assert!(
            (block_cols(tn) * bytes) % PIECE == 0,
            "an N-contiguous B's staged row is whole pieces"
        );
        assert!(
            a_stage_bytes(tm, tn) / PIECE <= MAX_PIECES * PRODUCER_THREADS,
            "A's pieces fit the producers' registers"
        );
        assert!(
            lag(tm, tn, bytes) >= 1 && lag(tm, tn, bytes) <= 10,
            "a lag the kernel waits for"
        );
        assert!(tn == 1 || tn == 2 || tn == 4, "columns per lane");
        assert!(tm * tn <= 16, "chains per lane the registers hold");
    }

    const _: () = {
        let mut i = 0;
        while i < VARIANTS.len() {
            let (tm, tn) = VARIANTS[i];
            check(tm, tn, 2);
            check(tm, tn, 4);
            i += 1;
        }
    };
}

/// The grouped kernel (`scalar::grouped`, Mixture-of-Experts rows split): one thread per
/// output element, with nothing staged in shared memory.
pub mod grouped {
    /// Threads per block.
    pub const THREADS: u32 = 256;
    /// Blocks per SM the build leaves registers for (`.minnctapersm`), and the host's grid
    /// per SM: the blocks loop over the elements, so a bounded grid covers any call and each
    /// block checks the group ends once for many elements.
    pub const BLOCKS_PER_SM: u32 = 4;
}
