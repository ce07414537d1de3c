//! Tile shape of the Hopper tensor-core kernels (wgmma + TMA path). Plain constants and const
//! functions, shared by the kernels and the host's launcher, so launch sizes cannot drift.

/// Output rows of the widest block tile: two consumer warpgroups of 64 rows each.
pub const BM: u32 = 128;
/// The block tile heights (output rows) the kernels are built for. 128 is the training
/// shape. The narrow ones are for small M (decode), where the GPU is fed by streaming B:
/// one consumer warpgroup, and less of each stage spent on A, so that more stages of B are
/// in flight (12, 16, 19 and 21 stages of B at BN = 64). Below 64 rows (A K-contiguous
/// only) the stage holds just the tile's rows of A, and the 64-row wgmma reads on past them
/// into the stage's B tile: rows BM to 63 of the accumulators are sums of those bytes,
/// never stored, and each row of an MMA depends on its own row of A alone. The copy engine
/// then fills no rows past M with zeros, which costs it time (M = 16 in a 64-row box ran
/// at 0.66× of M = 64). None of this changes a bit: each wgmma still adds the same 16
/// products to the same accumulator.
pub const BM_CHOICES: [u32; 5] = [BM, 64, 32, 16, 8];
/// The tile width built for the narrow tile heights (`BM_CHOICES[1..]`) with every layout.
pub const NARROW_BN: u32 = 64;
/// The decode widths of the narrow tile heights, built only for a K-contiguous B (torch's
/// `[out, in]` weight; an N-contiguous B comes in boxes of 64 columns): at decode the GPU is
/// fed by streaming B, and N alone sets how many blocks stream it. Narrower tiles put more
/// blocks to it, each streaming less: N = 4096 gives 64 tiles of 64 columns on 132 SMs but
/// 128 of 32; N = 2048, 128 of 16; N = 5632, 118 of 48 (the host's `narrow_width` picks).
pub const DECODE_BN: [u32; 3] = [48, 32, 16];
/// The wide widths of the tiles of 8 and 16 rows, built only for A and B K-contiguous: for
/// many small products, such as a decode step's attention scores (batch × heads products of
/// one query row by a short K, each over its own keys), where each tile's fixed cost
/// outweighs its bytes and fewer, wider tiles take fewer rounds of the persistent blocks
/// (the host's `narrow_width` picks). Built with ping-pong consumers (two warpgroups taking
/// the tiles in turn).
pub const WIDE_SHORT_BN: [u32; 2] = [256, 128];
/// Whether the (bm, bn) tiles of `WIDE_SHORT_BN` are built: tiles of 8 and 16 rows.
#[inline]
pub const fn wide_short_built(bm: u32) -> bool {
    bm <= 16
}
/// The one-round widths of the 128-row tiles, built only for a K-contiguous B (torch's
/// `[out, in]` weight; an N-contiguous B comes in boxes of 64 columns) and not whole pieces
/// of the 16-bit store (`epilogue::store_tma` stores the rest of a part from registers).
/// They exist for the calls whose whole tile count fits on the SMs only just too loosely
/// with the other widths: on 132 SMs, 256 × 4096 × 14336 runs 112 tiles of 256 columns
/// (20 SMs idle), 128 tiles of 224; 128 × 4096 × 14336 112 of 128 columns, 128 of 112. The
/// host takes them unless `SGEMM_BI_ONE_ROUND=off`. 112 is built for
/// the narrow heights too ([`one_round_built`]): 1 to 64 rows × 4096 × 14336 run 224 tiles
/// of 64 columns, two rounds; 128 tiles of 112 are one.
pub const ONE_ROUND_BN: [u32; 2] = [224, 112];
/// Whether (bm, bn) tiles of a one-round width are built: every one at 128 rows, 112 at
/// every height.
#[inline]
pub const fn one_round_built(bm: u32, bn: u32) -> bool {
    bm == BM || bn == ONE_ROUND_BN[1]
}
/// The block tile widths (output columns) the kernels are instantiated for; the host picks
/// one by M, N and the SM count. Each is the N of the one `wgmma.m64nNk16` per k16 step.
pub const BN_CHOICES: [u32; 9] = [
    256,
    ONE_ROUND_BN[0],
    192,
    128,
    ONE_ROUND_BN[1],
    64,
    DECODE_BN[0],
    DECODE_BN[1],
    DECODE_BN[2],
];
/// K per pipeline stage: 64 16-bit elements = 128 bytes, one 128B-swizzle row.
pub const BK: u32 = 64;
/// K of one `wgmma.m64nNk16`: the step of the reduction (the contract's unit, as mma.sync's).
pub const MMA_K: u32 = 16;
/// Rows of one consumer warpgroup's part of the tile (the M of one wgmma).
pub const WG_M: u32 = 64;
/// Whether the blocks of a cluster of (bm, ·) tiles lie along N, sharing each stage's A tile
/// (multicast), rather than along M sharing its B tile. Along N for the narrow heights: a
/// decode call has one tile row, and with the narrow decode widths each block's A tile (all of
/// A at M ≤ 64) is as large as its strip of the weight or larger (64 × 4096 × 4096 in tiles of
/// 32 columns: 512 KiB of A and 256 KiB of B a block). cuBLAS runs that shape in clusters
/// of two along N (docs/perf-notes.md, "Decode: 32-column tiles").
#[inline]
pub const fn clusters_along_n(bm: u32) -> bool {
    bm < BM
}
/// Consumer warpgroups of a tile of `bm` rows (each owns WG_M rows; one for the narrow
/// tiles); warpgroup 0 is the producer.
#[inline]
pub const fn consumers(bm: u32) -> u32 {
    if bm > WG_M {
        bm / WG_M
    } else {
        1
    }
}
/// The most consumer warpgroups of any tile height.
pub const MAX_CONSUMERS: u32 = consumers(BM);
/// Threads per block for tiles of `bm` rows: the producer warpgroup and the consumers.
#[inline]
pub const fn threads(bm: u32) -> u32 {
    128 * (1 + consumers(bm))
}
/// Registers per thread after `setmaxnreg`: the producer gives back, the consumers take
/// (128 × 40 + 256 × 232 ≤ 65,536).
pub const PRODUCER_REGS: u32 = 40;
pub const CONSUMER_REGS: u32 = 232;
/// Width (elements) of one 128B-swizzle atom: a TMA box of an MN-major operand is this
/// wide, and each box is (BK, SWIZZLE_ELEMS) = 8 KiB.
pub const SWIZZLE_ELEMS: u32 = 64;
/// Bytes of one (BK, 64) box / one 64-row piece of a K-major tile.
pub const BOX_BYTES: u32 = BK * SWIZZLE_ELEMS * 2;
/// Bytes of the A tile of one stage for tiles of `bm` rows: (bm, BK).
#[inline]
pub const fn a_bytes(bm: u32) -> u32 {
    bm * BK * 2
}
/// Shared memory for the stages (the same for every tile: the stage count scales with it).
pub const STAGE_AREA: u32 = 192 * 1024;
/// The deepest pipeline: 24 stages (the narrowest tiles fit 21).
pub const MAX_STAGES: u32 = 24;
/// Bytes for the barriers: a full and an empty barrier per stage.
pub const BARRIER_BYTES: u32 = 2 * MAX_STAGES * 8;
/// Bytes for one word per stage beside the barriers: the grouped kernels' dynamic tile
/// order names in it the tile whose first K tile the stage holds.
pub const TILE_WORD_BYTES: u32 = MAX_STAGES * 4;
/// Bytes for one barrier per stage after the tile words: in the dynamic order with clusters,
/// the block of rank 0 names the next tile in its peer's tile word and signals it there.
pub const ANNOUNCE_BYTES: u32 = MAX_STAGES * 8;
/// Bytes of one piece of the epilogue's output: 64 rows (one consumer warpgroup's) of 128
/// bytes (64 bf16/f16 or 32 f32 columns), one 128B-swizzled box of C's tensor map.
pub const EPILOGUE_PIECE_BYTES: u32 = WG_M * 128;
/// Output pieces in flight per consumer warpgroup: one being written while the copy engine
/// stores the other.
pub const EPILOGUE_BUFFERS: u32 = 2;
/// Shared memory for the epilogue's pieces, after the stages (1024-byte aligned, as the
/// swizzle needs).
pub const EPILOGUE_AREA: u32 = MAX_CONSUMERS * EPILOGUE_BUFFERS * EPILOGUE_PIECE_BYTES;
/// Dynamic shared memory a block needs: the stages, the epilogue's pieces, the barriers and
/// the tile words and their announcement barriers, and slack to align the stages to 1024
/// bytes (128B swizzle).
pub const SMEM_BYTES: u32 =
    1024 + STAGE_AREA + EPILOGUE_AREA + BARRIER_BYTES + TILE_WORD_BYTES + ANNOUNCE_BYTES;
/// The most dynamic shared memory an sm_90 block may use (227 KiB).
pub const SMEM_LIMIT: u32 = 227 * 1024;

/// Bytes of the B tile of one stage: (BN, BK).
#[inline]
pub const fn b_bytes(bn: u32) -> u32 {
    bn * BK * 2
}

/// Whether `bn` is one of the decode widths (`DECODE_BN`).
#[inline]
pub const fn is_decode_bn(bn: u32) -> bool {
    bn == DECODE_BN[0] || bn == DECODE_BN[1] || bn == DECODE_BN[2]
}

/// Whether `bn` is one of the one-round widths of the 128-row tiles (`ONE_ROUND_BN`).
#[inline]
pub const fn is_one_round_bn(bn: u32) -> bool {
    bn == ONE_ROUND_BN[0] || bn == ONE_ROUND_BN[1]
}

/// Bytes of B that a stage of a decode tile carries at least. A block streams its strip of
/// the weight stage by stage, and each stage costs the copy engine and the barriers a
/// fixed time whatever its size: on the H200, one block per strip of 16 rows of a
/// K-contiguous bf16 weight (2048 × 5632) streamed it in 22 µs with stages of 2 KiB, 14 µs
/// of 4 KiB and 9–10 µs of 8 KiB, however many stages were in flight
/// (`scripts/microbench/kmajor_stream.cu`; docs/perf-notes.md).
pub const DECODE_STAGE_B_BYTES: u32 = 8 * 1024;

/// K slices of BK per stage for (bm, bn) tiles: one, but for the decode widths, whose B
/// tile of one slice is small (2–6 KiB), as many slices as make `DECODE_STAGE_B_BYTES` of
/// B (twice that for the 16- and 32-column tiles of 8 and 16 rows, see below). Slice j of a stage is K tile `KB · stage + j`; the consumers still take each slice's
/// four k16 steps in ascending k, so this changes when bytes arrive, not a bit of the sums.
#[inline]
pub const fn k_slices(bn: u32, bm: u32) -> u32 {
    if bm <= 16 && bn <= 32 && is_decode_bn(bn) {
        // The tiles of 8 and 16 rows step by mma.sync (`hopper::decode`), whose chain is
        // short enough that each stage's wait and release show: twice the bytes a stage
        // (H200, cold: 1 × 5632 × 2048 11.3 → 10.6 µs, 1 × 14336 × 4096 33.9 → 32.9; the
        // 48-column tiles, 3 slices, lost: 1 × 2048 × 5632 9.4 → 9.7, so they keep 8 KiB).
        (2 * DECODE_STAGE_B_BYTES).div_ceil(b_bytes(bn))
    } else if bm < BM && is_decode_bn(bn) {
        DECODE_STAGE_B_BYTES.div_ceil(b_bytes(bn))
    } else {
        1
    }
}

/// Bytes of one K slice of a (bm, bn) tile: its (bm, BK) A tile and (bn, BK) B tile.
#[inline]
pub const fn slice_bytes(bn: u32, bm: u32) -> u32 {
    a_bytes(bm) + b_bytes(bn)
}

/// Bytes of one whole stage of a (bm, bn) tile: `k_slices` slices, the A tiles of all of
/// them first, then their B tiles.
#[inline]
pub const fn stage_bytes(bn: u32, bm: u32) -> u32 {
    k_slices(bn, bm) * slice_bytes(bn, bm)
}

/// Distance between stages of a (bm, bn) tile: the stage's bytes, but never fewer than
/// reach the end of the 64 rows of A a wgmma reads from the stage's last A tile when the
/// tile has fewer rows (`BM_CHOICES`): the rows past `bm` then read this stage's later
/// bytes and padding, never the next stage, which the copy engine may be writing. Only
/// tiles of fewer than 64 rows and a `DECODE_BN` width can need padding.
#[inline]
pub const fn stage_pitch(bn: u32, bm: u32) -> u32 {
    let bytes = stage_bytes(bn, bm);
    let reach = (k_slices(bn, bm) - 1) * a_bytes(bm) + WG_M * BK * 2;
    if bytes < reach {
        reach
    } else {
        bytes
    }
}

/// Pipeline depth for a (bm, bn) tile: as many stages as fit, at most MAX_STAGES.
#[inline]
pub const fn stages(bn: u32, bm: u32) -> u32 {
    let s = STAGE_AREA / stage_pitch(bn, bm);
    if s > MAX_STAGES {
        MAX_STAGES
    } else {
        s
    }
}

const _: () = {
    assert!(BK * 2 == 128, "a stage's K is one 128-byte swizzle row");
    assert!(BK % MMA_K == 0, "a stage holds whole MMA steps");
    assert!(
        BM == MAX_CONSUMERS * WG_M,
        "consumers split the tile's rows"
    );
    assert!(SMEM_BYTES <= SMEM_LIMIT, "fits one sm_90 block");
    assert!(
        STAGE_AREA % 1024 == 0 && EPILOGUE_PIECE_BYTES % 1024 == 0,
        "epilogue pieces start on a 128B-swizzle atom"
    );
    assert!(
        PRODUCER_REGS * 128 + CONSUMER_REGS * 128 * MAX_CONSUMERS <= 65536,
        "setmaxnreg budget"
    );
    let mut i = 0;
    while i < BN_CHOICES.len() {
        let bn = BN_CHOICES[i];
        let k_contiguous_only = is_decode_bn(bn) || is_one_round_bn(bn);
        assert!(
            (bn % SWIZZLE_ELEMS == 0 || k_contiguous_only) && bn <= 256,
            "B tiles are whole boxes (or K-contiguous rows) and one wgmma wide"
        );
        assert!(
            b_bytes(bn) % 1024 == 0,
            "each B tile starts on a 128B-swizzle atom"
        );
        assert!(
            bn % 16 == 0,
            "whole swizzle atoms of K-contiguous rows, and pairs of n8 blocks"
        );
        let mut j = 0;
        while j < BM_CHOICES.len() {
            let bm = BM_CHOICES[j];
            assert!(
                stages(bn, bm) >= 2,
                "the pipeline needs at least double buffering"
            );
            assert!(stages(bn, bm) * stage_pitch(bn, bm) <= STAGE_AREA);
            assert!(
                stage_pitch(bn, bm) % 1024 == 0,
                "every stage starts on a 128B-swizzle atom"
            );
            j += 1;
        }
        i += 1;
    }
    assert!(
        NARROW_BN % SWIZZLE_ELEMS == 0,
        "narrow tiles are whole boxes"
    );
    let mut j = 1;
    while j < BM_CHOICES.len() {
        assert!(
            stage_pitch(NARROW_BN, BM_CHOICES[j]) == stage_bytes(NARROW_BN, BM_CHOICES[j]),
            "64-column narrow tiles need no padding"
        );
        let mut d = 0;
        while d < DECODE_BN.len() {
            let (bn, bm) = (DECODE_BN[d], BM_CHOICES[j]);
            assert!(
                stage_pitch(bn, bm) >= (k_slices(bn, bm) - 1) * a_bytes(bm) + WG_M * BK * 2
                    && a_bytes(bm) % 1024 == 0
                    && b_bytes(bn) % 1024 == 0,
                "the 64 rows a wgmma reads from a narrow A tile lie inside its stage, and each \
                 slice's B tile starts on a swizzle atom"
            );
            d += 1;
        }
        j += 1;
    }
};
