//! Planning and launching the tensor-core tier's Hopper path (wgmma + TMA, sm_90a; see
//! `kernels-gpu/src/hopper` for the contract, the same as the mma.sync path's).
//!
//! The plan picks an entry point by dtype and operand layouts and a tile width by M, N and
//! the SM count; it never picks the reduction order: every candidate consumes K in ascending
//! steps of 16 into one accumulator per element. Tensor maps are built per call on the host
//! (`cuTensorMapEncodeTiled` is a pure host function: nothing is enqueued, so calls can be
//! captured in CUDA graphs) and passed by value in the kernel parameter.

use std::sync::Arc;

use cudarc::driver::sys;
pub(crate) use sgemm_bi_abi::catalogue::Schedule;
use sgemm_bi_abi::catalogue::{Element, Family, Kind, Module};
use sgemm_bi_abi::hopper::{
    clusters_along_n, is_one_round_bn, one_round_built, wide_short_built, BK, BM, BM_CHOICES,
    BN_CHOICES, DECODE_BN, EPILOGUE_PIECE_BYTES, NARROW_BN, ONE_ROUND_BN, SWIZZLE_ELEMS, WG_M,
    WIDE_SHORT_BN,
};
use sgemm_bi_abi::params::{HopperParams, TensorMap};

use super::catalogue::{id, Entries, KernelId};
use super::kernel_abi::gemm_params;
use super::plan::{
    copyable_16, k_contiguous, layout_index, Planner, Quantity, Unsupported, LAYOUTS,
};
use crate::error::{Error, Operand as Which, Result};
use crate::types::{DType, Gemm, GemmPointers, Layout, Operand, OutputMode};

/// Whether the Hopper path takes `g` with A, B and C at addresses `a`, `b` and `c`. The copy
/// engine must describe A and B: base 16-byte aligned, row pitch and batch stride multiples
/// of 16 bytes, K ≥ 1 (a tensor map has no empty dimension; K = 0 needs no MMA at all) and
/// every extent a TMA coordinate (i32). The epilogue (`kernels-gpu/src/hopper/epilogue.rs`)
/// hands an overwritten C to the copy engine too, so C needs the same alignment, and N a
/// whole number of 16-byte units (the engine clips stores in those units);
/// in accumulate mode it stores pairs of adjacent columns from registers: N even, and C's
/// address, leading dimension and batch stride multiples of two elements. Elsewhere the
/// mma.sync path runs the call, with the same bits.
pub(crate) fn can_implement(g: &Gemm, a: usize, b: usize, c: usize) -> Result<(), Unsupported> {
    if g.k == 0 {
        return Err(Unsupported::EmptyK);
    }
    let limit = i32::MAX as usize;
    if g.m > limit || g.n > limit || g.k > limit || g.batch > limit {
        return Err(Unsupported::ExtentTooLarge);
    }
    // The copy engine's rule for an operand of `size`-byte elements: base, row pitch and
    // batch stride multiples of 16 bytes, and each below 2^40 bytes.
    let copyable = |operand, size: usize, ld: usize, bs: usize, addr: usize| {
        copyable_16(operand, size, addr, Some(ld), bs, g.batch)?;
        if ld * size >= 1 << 40 || (g.batch > 1 && bs * size >= 1 << 40) {
            return Err(Unsupported::StrideTooLarge { operand });
        }
        Ok(())
    };
    copyable(Which::A, g.a.dtype.size(), g.a.ld, g.a.batch_stride, a)?;
    copyable(Which::B, g.b.dtype.size(), g.b.ld, g.b.batch_stride, b)?;
    let size = g.c.mode.dtype().size();
    if g.c.mode != OutputMode::AccumulateF32 {
        copyable(Which::C, size, g.c.ldc, g.c.batch_stride, c)?;
        // The copy engine clips a store at C's last column in units of 16 bytes, not
        // elements (measured on the H200: N = 161 f32 columns in rows of 164 wrote column
        // 161), so N must end on one: else it would write past N.
        let unit = 16 / size;
        if g.n % unit != 0 {
            return Err(Unsupported::NotWholeStoreUnits { n: g.n, unit });
        }
        return Ok(());
    }
    let pair = |what, value, multiple| Unsupported::Misaligned {
        operand: Which::C,
        what,
        value,
        multiple,
    };
    if g.n % 2 != 0 {
        Err(Unsupported::OddN { n: g.n })
    } else if c % (2 * size) != 0 {
        Err(pair(Quantity::Address, c, 2 * size))
    } else if g.c.ldc % 2 != 0 {
        Err(pair(Quantity::LeadingDimension, g.c.ldc, 2))
    } else if g.batch > 1 && g.c.batch_stride % 2 != 0 {
        Err(pair(Quantity::BatchStride, g.c.batch_stride, 2))
    } else {
        Ok(())
    }
}

/// The tile height for `g` on a GPU with `sms` multiprocessors. Small M streams B: with A
/// K-contiguous the smallest of 8, 16 and 32 rows that holds M (no zero-filled rows of A),
/// else 64 rows when M ≤ 64, or when the 128-row tiles at the narrowest width would leave
/// half the SMs without a tile (M = 128 at N = 4096: 128 tiles of 64 rows instead of 64 of
/// 128); 128 rows otherwise. Any choice gives the same bits.
pub(crate) fn tile_m(g: &Gemm, sms: usize) -> u32 {
    let a_k = g.a.layout == Layout::RowMajor;
    let tall_tiles = tile_count(g, BM, NARROW_BN);
    let short = BM_CHOICES
        .into_iter()
        .filter(|&bm| bm < 64 && a_k && g.m <= bm as usize)
        .min();
    if let Some(bm) = short {
        bm
    } else if g.m <= 64 || 2 * tall_tiles <= sms {
        64
    } else {
        BM
    }
}

/// What a block tile of width `bn` computes per unit of time, relative to the widest: the
/// narrower tiles reuse each A tile over fewer columns and issue smaller wgmmas. Estimates,
/// checked against the benchmark suite (docs/perf-notes.md), not measured per shape (192:
/// between its neighbours; the one-round widths 224 and 112 likewise, not yet measured).
fn width_rate(bn: u32) -> f64 {
    match bn {
        256 => 1.0,
        224 => 0.98,
        192 => 0.95,
        128 => 0.9,
        112 => 0.85,
        _ => 0.75,
    }
}

/// Whether the 128-row tiles may take the one-round widths (`ONE_ROUND_BN`: 224 and 112
/// columns, B K-contiguous only), `SGEMM_BI_ONE_ROUND` read once per device: on unless it
/// is `off` or `0` (measured faster on an H100, docs/perf-notes.md). They are for the calls
/// whose tiles fill the SMs only just too loosely with the other widths (on 132 SMs:
/// 256 × 4096 × 14336 in 112 tiles of 256 columns, 128 of 224; 128 × 4096 × 14336 in 112
/// of 128, 128 of 112; 1 to 64 rows × 4096 × 14336 in two rounds of 224 tiles of 64
/// columns, one of 128 of 112). Like every width, they never change a bit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum OneRound {
    Off,
    On,
}

impl OneRound {
    fn from_env() -> Self {
        match std::env::var("SGEMM_BI_ONE_ROUND").as_deref() {
            Ok("off") | Ok("0") => OneRound::Off,
            _ => OneRound::On,
        }
    }
}

/// The tile width for `g` with tiles of `bm` rows on a GPU with `sms` multiprocessors. For
/// 128-row tiles, the width whose rounds of tiles over the persistent blocks take the least
/// time: rounds (`ceil(tiles / sms)`) × width / `width_rate`, the widest on a tie. So a
/// shape whose wide tiles leave a second round half empty (2048 × 768 × 3072: 192 tiles of
/// 256 on 132 SMs) takes narrower ones (256 tiles of 192: two full rounds). The one-round
/// widths compete only when `one_round` is on and B is K-contiguous. The narrow tile
/// heights take [`narrow_width`]'s. Any choice gives the same bits.
pub(crate) fn tile_n(g: &Gemm, bm: u32, sms: usize, skinny: SkinnyUse, one_round: OneRound) -> u32 {
    if bm != BM {
        return narrow_width(g, bm, sms, skinny, one_round);
    }
    let cost = |bn: u32| {
        let tiles = tile_count(g, BM, bn);
        tiles.div_ceil(sms.max(1)) as f64 * f64::from(bn) / width_rate(bn)
    };
    let one_round_ok = one_round == OneRound::On && g.b.layout == Layout::ColMajor;
    BN_CHOICES
        .into_iter()
        .filter(|&bn| bn >= NARROW_BN && (one_round_ok || !is_one_round_bn(bn)))
        .min_by(|&x, &y| cost(x).total_cmp(&cost(y)))
        .expect("tile widths are built")
}

/// Where the decode widths (`DECODE_BN`: 48, 32 and 16 columns) run (`SGEMM_BI_SKINNY`, read
/// once per device: `off`, `small`, a width of `BN_CHOICES` below 128, else the default),
/// for measurements.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SkinnyUse {
    /// Never: every narrow tile height is 64 columns wide.
    Off,
    /// Tiles of fewer than 64 rows only (M ≤ 32 with A K-contiguous).
    Small,
    /// Every narrow tile height, 64 rows included (the default: on the H200, 64 × 4096 ×
    /// 4096 went from 0.90× to 0.98× of cuBLAS with 32-column tiles, docs/perf-notes.md).
    All,
    /// This width wherever B is K-contiguous, whatever it costs (a measurement's knob).
    Width(u32),
}

impl SkinnyUse {
    fn from_env() -> Self {
        let forced = |w: &str| {
            let w: u32 = w.parse().ok()?;
            (w == NARROW_BN || DECODE_BN.contains(&w) || WIDE_SHORT_BN.contains(&w))
                .then_some(SkinnyUse::Width(w))
        };
        match std::env::var("SGEMM_BI_SKINNY").as_deref() {
            Ok("off") | Ok("0") => SkinnyUse::Off,
            Ok("small") => SkinnyUse::Small,
            Ok(w) => forced(w).unwrap_or(SkinnyUse::All),
            Err(_) => SkinnyUse::All,
        }
    }
}

/// What a block spends on one tile besides streaming its operands, in bytes of the stream:
/// the pipeline's first stages in flight before the first wgmma, the epilogue, the next
/// tile's start. An estimate (about a microsecond of one SM's share of the H200's memory
/// bandwidth), checked by the decode rows of the benchmarks, not measured per shape.
const TILE_OVERHEAD_BYTES: usize = 64 * 1024;

/// The longest K at which the tiles of 8 and 16 rows may be 256 columns wide. Past it a
/// block streams B more slowly through 256-column tiles than through 128-column ones: on the
/// H200, cold, 1 × 1024 × 32000 took 19.6 µs in one round of 256 and 18.9 in two of 128;
/// at K = 64 (attention scores, 256 products by 520 keys) 256 columns took 18.1 µs and 128
/// took 19.2 (docs/perf-notes.md, "Decode: wide tiles for short products").
const WIDEST_SHORT_MAX_K: usize = 256;

/// The width of the narrow (decode) tiles of `bm` rows: 64 columns, or with a K-contiguous B
/// one of `DECODE_BN` too, and for tiles of 8 and 16 rows one of `WIDE_SHORT_BN`. Decode is
/// bound by streaming B, each block its tiles' columns and their rows of A
/// (docs/perf-notes.md, "Decode: 32-column tiles"), so the width whose busiest block streams
/// the fewest bytes wins: rounds (`ceil(tiles / sms)`) × ((bm + bn) × K × the element's
/// bytes + [`TILE_OVERHEAD_BYTES`]), the widest on a tie. At K = 4096 on 132 SMs: N = 4096
/// takes 32 columns (128 tiles), N = 14336 64 (two rounds of 224 tiles) or with 8 or 16 rows
/// 128 (one round of 112); at K = 2048, N = 5632 takes 48 (118 tiles), N = 2048 16 (128
/// tiles), N = 32000 with 8 or 16 rows 128 (two rounds of 250 tiles instead of four of
/// 500; 256 columns only up to [`WIDEST_SHORT_MAX_K`]); a batch of 256 products of one row
/// by K = 64 and N = 520 (attention scores) 256 (three rounds of two tiles a block, the
/// ping-pong consumers' share, instead of 18 rounds of 64), a batch of 32 such products 128
/// (160 tiles, one round of two a block: a short tile's fixed costs are the call's, and
/// 128 columns have half of 256's to fetch and run; in a captured decode step of the 1.1B
/// model of `bench_llama.py` this took the step from 0.941× to 0.964× of torch's speed,
/// docs/perf-notes.md, "Short calls: the instruction fetch"). With `one_round` on, 112
/// columns compete too (`OneRound`): at N = 14336, 128 tiles in one round.
pub(crate) fn narrow_width(
    g: &Gemm,
    bm: u32,
    sms: usize,
    skinny: SkinnyUse,
    one_round: OneRound,
) -> u32 {
    if g.b.layout != Layout::ColMajor {
        return NARROW_BN;
    }
    let decode = match skinny {
        SkinnyUse::Off => false,
        SkinnyUse::Small => bm < WG_M,
        SkinnyUse::All => true,
        SkinnyUse::Width(w) if WIDE_SHORT_BN.contains(&w) && !wide_short_built(bm) => {
            return NARROW_BN
        }
        SkinnyUse::Width(w) => return w,
    };
    if !decode {
        return NARROW_BN;
    }
    let streamed = |bn: u32| {
        let tiles = tile_count(g, bm, bn);
        let per_tile = (bm + bn) as usize * g.k * g.a.dtype.size() + TILE_OVERHEAD_BYTES;
        // A block of the wide short tiles has two consumer warpgroups taking its tiles in
        // turn (`schedule_for_width`); at short K a tile's time is mostly its consumer's
        // fixed costs, so the block's second tile rides along with its first.
        let per_round = if pingpong_short(bm, bn) && g.k <= WIDEST_SHORT_MAX_K {
            2 * sms.max(1)
        } else {
            sms.max(1)
        };
        tiles.div_ceil(per_round) * per_tile
    };
    let wide = WIDE_SHORT_BN
        .into_iter()
        .filter(|&bn| wide_short_built(bm) && (bn < 256 || g.k <= WIDEST_SHORT_MAX_K));
    // The one-round width of the narrow heights, when asked (`OneRound`).
    let one_round = ONE_ROUND_BN
        .into_iter()
        .filter(|&bn| one_round == OneRound::On && one_round_built(bm, bn));
    // Widest first: `min_by_key` keeps the first of equal costs.
    wide.chain(one_round)
        .chain([NARROW_BN])
        .chain(DECODE_BN)
        .min_by_key(|&bn| streamed(bn))
        .expect("tile widths are built")
}

/// The widths of the 128-row tiles built for clusters of two blocks along M: the widest,
/// and the widest one-round width.
const CLUSTER_BN: [u32; 2] = [256, ONE_ROUND_BN[0]];

/// Blocks per cluster for `g` with (bm, bn) tiles: 2 for the widest tiles (256 and 224
/// columns) when there are at least two tile rows (neighbouring tiles along M share each
/// stage's B tile through multicast), and for the 64-row decode tiles of a K-contiguous A
/// when the tile columns pair up (neighbouring tiles along N share each stage's A tile,
/// `DecodeClusters`); else 1. Like the tile width, it never changes a bit.
pub(crate) fn cluster_size(g: &Gemm, (bm, bn): (u32, u32), decode: DecodeClusters) -> u32 {
    let along_m = bm == BM && CLUSTER_BN.contains(&bn) && g.m > BM as usize;
    let along_n = decode == DecodeClusters::On
        && bm == WG_M
        && DECODE_BN.contains(&bn)
        && g.a.layout == Layout::RowMajor
        && g.b.layout == Layout::ColMajor
        && g.n.div_ceil(bn as usize) % 2 == 0;
    if along_m || along_n {
        2
    } else {
        1
    }
}

/// Whether the 64-row decode tiles run in clusters of two along N (`SGEMM_BI_DECODE_CLUSTER`,
/// read once per device: `on` or `1`; off otherwise, since on an H100 they were no faster —
/// docs/perf-notes.md, "Decode: 64-row tiles in clusters along N"). Each
/// block of such a tile otherwise reads all of A beside its strip of the weight: at 64 ×
/// 4096 × 4096 in tiles of 32 columns, 512 KiB of A and 256 KiB of B, where cuBLAS runs the
/// same tiles in clusters of two along N (docs/perf-notes.md, "Decode: 32-column tiles").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum DecodeClusters {
    Off,
    On,
}

impl DecodeClusters {
    fn from_env() -> Self {
        match std::env::var("SGEMM_BI_DECODE_CLUSTER").as_deref() {
            Ok("on") | Ok("1") => DecodeClusters::On,
            _ => DecodeClusters::Off,
        }
    }
}

/// The tile width of the ping-pong kernels (`kernels-gpu/src/hopper/pingpong.rs`): each
/// consumer warpgroup owns whole (BM, 128) tiles.
pub(crate) const PINGPONG_BN: u32 = 128;

/// When the ping-pong kernels run: by default for accumulate-mode calls (dW) on 128-row
/// tiles with K ≤ [`PINGPONG_MAX_K`] ([`PingPongUse::ShortAccumulate`]), where the
/// epilogue's loads of the old C are long enough beside the mainloop to be worth overlapping
/// (dW 4096³: 0.93× → 1.02× of cuBLAS; the overwrite modes gained nothing, docs/perf-notes.md,
/// version 10). `SGEMM_BI_PINGPONG=off`, `accumulate` (every accumulate-mode call) or `all`
/// changes it, for measurements. The wide tiles of 8 and 16 rows are built with ping-pong
/// consumers only ([`schedule_for_width`]), whatever it says; `off` keeps their 64-column
/// tiles of an N-contiguous B cooperative.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PingPongUse {
    Off,
    ShortAccumulate,
    Accumulate,
    All,
}

impl PingPongUse {
    fn from_env() -> Self {
        match std::env::var("SGEMM_BI_PINGPONG").as_deref() {
            Ok("off") | Ok("0") => PingPongUse::Off,
            Ok("accumulate") => PingPongUse::Accumulate,
            Ok("all") => PingPongUse::All,
            _ => PingPongUse::ShortAccumulate,
        }
    }
}

/// The longest reduction the ping-pong kernels take by default. Beyond it the epilogue is a
/// small share of a tile's time, while the ping-pong tiles (128 × 128, one per warpgroup,
/// each reading its A strip alone) ask L2 for more bytes per output than the cooperative
/// 128 × 256 ones. On an H100 their dW at K = 16384 read 2–4× cuBLAS's DRAM bytes, and at
/// K = 8192 and 16384 ran at 0.64–0.93× of cuBLAS against the cooperative kernels'
/// 0.95–0.98× (docs/perf-notes.md, "dW into f32: the schedule by K").
pub(crate) const PINGPONG_MAX_K: usize = 4096;

/// The consumer schedule for `g` with tiles of `bm` rows. Like the tile, it never changes a
/// bit: each accumulator takes the same steps in the same order.
pub(crate) fn schedule(g: &Gemm, bm: u32, use_: PingPongUse) -> Schedule {
    let wanted = match use_ {
        PingPongUse::Off => false,
        PingPongUse::ShortAccumulate => {
            g.c.mode == OutputMode::AccumulateF32 && g.k <= PINGPONG_MAX_K
        }
        PingPongUse::Accumulate => g.c.mode == OutputMode::AccumulateF32,
        PingPongUse::All => true,
    };
    if wanted && bm == BM {
        Schedule::PingPong
    } else {
        Schedule::Cooperative
    }
}

/// Whether (bm, bn) tiles are the wide short ones, built with ping-pong consumers only.
fn pingpong_short(bm: u32, bn: u32) -> bool {
    wide_short_built(bm) && WIDE_SHORT_BN.contains(&bn)
}

/// Tiles of (bm, bn) that cover `g`'s output, every batch entry.
fn tile_count(g: &Gemm, bm: u32, bn: u32) -> usize {
    g.m.div_ceil(bm as usize) * g.n.div_ceil(bn as usize) * g.batch
}

/// Whether `g`'s (bm, bn) tiles are the 64-column tiles of 8 or 16 rows of an N-contiguous B
/// (decode attention's `attn @ v`: one query row against each head's values) with more tiles
/// than blocks. Those take the ping-pong consumers too: a short tile's chain over K is
/// latency, and with one consumer a block ran its second tile's chain after its first (256
/// products of 1 × 520 × 64 in two rounds on 132 SMs); with two, side by side. Not with
/// `SGEMM_BI_PINGPONG=off`, for measurements.
fn pingpong_short_values(g: &Gemm, bm: u32, bn: u32, sms: usize, use_: PingPongUse) -> bool {
    use_ != PingPongUse::Off
        && wide_short_built(bm)
        && bn == NARROW_BN
        && g.b.layout == Layout::RowMajor
        && tile_count(g, bm, bn) > sms
}

/// The schedule of (bm, bn) tiles once the width is chosen: the wide tiles of 8 and 16 rows
/// (`WIDE_SHORT_BN`) are built with ping-pong consumers only, whose two warpgroups take the
/// tiles in turn (`kernels-gpu/src/hopper/pingpong.rs`): a short tile's time is its
/// consumer's instructions, and the second warpgroup's tile fills their gaps. So are the
/// 64-column ones of an N-contiguous B when there are more tiles than blocks
/// ([`pingpong_short_values`]).
pub(crate) fn schedule_for_width(
    g: &Gemm,
    (bm, bn): (u32, u32),
    sms: usize,
    use_: PingPongUse,
    schedule: Schedule,
) -> Schedule {
    if pingpong_short(bm, bn) || pingpong_short_values(g, bm, bn, sms, use_) {
        Schedule::PingPong
    } else {
        schedule
    }
}

/// Blocks per cluster of the ping-pong kernels for `g`: 2 when there are two tile rows to
/// pair (the pair shares each stage's B tile: dW 4096³ ran at 0.97× of cuBLAS without
/// clusters, 1.02× with), else 1.
pub(crate) fn pingpong_cluster_size(g: &Gemm) -> u32 {
    if g.m > BM as usize {
        2
    } else {
        1
    }
}

/// The input types of the Hopper kernels, in the order of [`TABLE`]'s first index.
const ELEMENTS: [Element; 2] = [Element::Bf16, Element::F16];

/// Cluster sizes the kernels are built for.
const CLUSTERS: [u32; 2] = [1, 2];

/// The schedules, in the order of [`TABLE`]'s last index.
const SCHEDULES: [Schedule; 2] = [Schedule::Cooperative, Schedule::PingPong];

/// Every Hopper tile configuration a plan can name, `[element][layout pair][tile height]
/// [tile width][cluster size − 1][schedule]` (`ELEMENTS`, `LAYOUTS`, `BM_CHOICES`,
/// `BN_CHOICES`, `CLUSTERS`, `SCHEDULES`): the entry point where the catalogue has one. The
/// planner's choices are all built (the tests check every shape they pick).
type Table =
    [[[[[[Option<KernelId<HopperParams>>; 2]; 2]; BN_CHOICES.len()]; BM_CHOICES.len()]; 4]; 2];

const fn table() -> Table {
    let mut table = [[[[[[None; 2]; 2]; BN_CHOICES.len()]; BM_CHOICES.len()]; 4]; 2];
    let mut e = 0;
    while e < 2 {
        let mut l = 0;
        while l < 4 {
            let (a_k_contiguous, b_k_contiguous) = k_contiguous(LAYOUTS[l]);
            let mut m = 0;
            while m < BM_CHOICES.len() {
                let mut n = 0;
                while n < BN_CHOICES.len() {
                    let mut c = 0;
                    while c < 2 {
                        let mut s = 0;
                        while s < 2 {
                            table[e][l][m][n][c][s] = id(Kind {
                                module: Module::Sm90a,
                                element: ELEMENTS[e],
                                a_k_contiguous,
                                b_k_contiguous,
                                family: Family::Hopper {
                                    bm: BM_CHOICES[m],
                                    bn: BN_CHOICES[n],
                                    cluster: CLUSTERS[c],
                                    schedule: SCHEDULES[s],
                                },
                            });
                            s += 1;
                        }
                        c += 1;
                    }
                    n += 1;
                }
                m += 1;
            }
            l += 1;
        }
        e += 1;
    }
    table
}

const TABLE: Table = table();

/// The entry point of (bm, bn) tiles in clusters of `cluster` with `schedule` for `g`'s
/// element type and layouts, if one is built.
fn entry(
    g: &Gemm,
    bm: u32,
    bn: u32,
    cluster: u32,
    schedule: Schedule,
) -> Option<KernelId<HopperParams>> {
    let e = match g.a.dtype {
        DType::BF16 => 0,
        DType::F16 => 1,
        DType::F32 => return None,
    };
    let m = BM_CHOICES.iter().position(|&x| x == bm)?;
    let n = BN_CHOICES.iter().position(|&x| x == bn)?;
    let c = CLUSTERS.iter().position(|&x| x == cluster)?;
    let s = SCHEDULES.iter().position(|&x| x == schedule)?;
    TABLE[e][layout_index(g)][m][n][c][s]
}

/// Builds the map of an operand whose contiguous dimension is `inner` (extent) and the other
/// `outer`, with leading dimension `ld` and batch stride `bs` (elements).
#[allow(clippy::too_many_arguments)]
pub(super) fn encode_raw(
    dtype: DType,
    addr: usize,
    inner: usize,
    outer: usize,
    ld: usize,
    batch: usize,
    bs: usize,
    box_dims: [u32; 2],
) -> std::result::Result<TensorMap, String> {
    let data_type = match dtype {
        DType::F16 => sys::CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
        DType::BF16 => sys::CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_BFLOAT16,
        DType::F32 => sys::CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_FLOAT32,
    };
    let elem = dtype.size() as u64;
    // A batch extent of 1 when the operand is shared (stride 0) or there is one entry; its
    // stride is then never used but must still be valid.
    let shared = batch == 1 || bs == 0;
    let dims: [u64; 3] = [
        inner as u64,
        outer as u64,
        if shared { 1 } else { batch as u64 },
    ];
    let pitch = ld as u64 * elem;
    let batch_pitch = if shared {
        (pitch * outer as u64).next_multiple_of(16)
    } else {
        bs as u64 * elem
    };
    let strides: [u64; 2] = [pitch, batch_pitch];
    let boxes: [u32; 3] = [box_dims[0], box_dims[1], 1];
    let element_strides: [u32; 3] = [1, 1, 1];
    let mut map = std::mem::MaybeUninit::<sys::CUtensorMap>::zeroed();
    // SAFETY: every array has the rank's length; the map is written by the call; the
    // address is only recorded, not dereferenced.
    let status = unsafe {
        sys::cuTensorMapEncodeTiled(
            map.as_mut_ptr(),
            data_type,
            3,
            addr as *mut std::ffi::c_void,
            dims.as_ptr(),
            strides.as_ptr(),
            boxes.as_ptr(),
            element_strides.as_ptr(),
            sys::CUtensorMapInterleave::CU_TENSOR_MAP_INTERLEAVE_NONE,
            sys::CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_128B,
            sys::CUtensorMapL2promotion::CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
            sys::CUtensorMapFloatOOBfill::CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE,
        )
    };
    if status != sys::CUresult::CUDA_SUCCESS {
        return Err(format!("cuTensorMapEncodeTiled: {status:?}"));
    }
    // SAFETY: written by the successful call above.
    let map = unsafe { map.assume_init() };
    Ok(TensorMap { opaque: map.opaque })
}

/// The map of operand `op` (A as (M, K) or B as (N, K) after the layout) for a tile of
/// `tile_mn` rows (BM for A, BN for B).
pub(super) fn operand_map(
    op: &Operand,
    k_contiguous: bool,
    addr: usize,
    mn: usize,
    k: usize,
    batch: usize,
    tile_mn: u32,
) -> std::result::Result<TensorMap, String> {
    if k_contiguous {
        encode_raw(
            op.dtype,
            addr,
            k,
            mn,
            op.ld,
            batch,
            op.batch_stride,
            [BK, tile_mn],
        )
    } else {
        let boxes = [SWIZZLE_ELEMS, BK];
        encode_raw(op.dtype, addr, mn, k, op.ld, batch, op.batch_stride, boxes)
    }
}

/// What the planner chose for one call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct HopperPlan {
    pub(crate) entry: KernelId<HopperParams>,
    /// The block tile, (rows, columns) of C.
    pub(crate) tile: (u32, u32),
    /// Blocks per cluster.
    pub(crate) cluster: u32,
}

/// The Hopper kernels of a device (the sm90a module's).
pub(crate) struct HopperKernels {
    entries: Arc<Entries>,
    sms: usize,
    /// When the ping-pong kernels run (`SGEMM_BI_PINGPONG`).
    pingpong_use: PingPongUse,
    /// Where the decode widths run (`SGEMM_BI_SKINNY`).
    skinny: SkinnyUse,
    /// Whether the 64-row decode tiles run in clusters along N (`SGEMM_BI_DECODE_CLUSTER`).
    decode_clusters: DecodeClusters,
    /// Whether the 128-row tiles may take the one-round widths (`SGEMM_BI_ONE_ROUND`).
    one_round: OneRound,
    /// Launch with programmatic stream serialization (see `launch`); off with
    /// `SGEMM_BI_DEPENDENT_LAUNCH=0`.
    dependent_launch: bool,
    /// K tiles of B each block asks L2 for before it waits for the previous kernel, in calls
    /// of one wave (`l2_prefetch_for`); `SGEMM_BI_L2_PREFETCH=<n>`,
    /// [`DEFAULT_L2_PREFETCH_K_TILES`] when unset.
    l2_prefetch_k_tiles: u32,
}

/// K tiles of B a block asks L2 for before the dependent-launch wait when nothing says
/// otherwise. Measured on the H200 (docs/perf-notes.md, "Decode: the weight asked of L2
/// before the dependent-launch wait"): 8 raised the ratio to cuBLAS by 0.01–0.09 on each of
/// the 16 one-wave decode shapes of the 1.1B Llama; the whole K lowered it by up to 0.20.
pub(crate) const DEFAULT_L2_PREFETCH_K_TILES: u32 = 8;

/// `SGEMM_BI_L2_PREFETCH`: how many K tiles of B each block of a one-wave Hopper call asks
/// L2 for before it waits for the previous kernel (0 for none; more than K is the whole K);
/// [`DEFAULT_L2_PREFETCH_K_TILES`] when unset or not a number.
fn l2_prefetch_from_env() -> u32 {
    std::env::var("SGEMM_BI_L2_PREFETCH")
        .ok()
        .and_then(|v| v.trim().parse::<u32>().ok())
        .unwrap_or(DEFAULT_L2_PREFETCH_K_TILES)
}

/// The K tiles of B each block of a call asks L2 for: `k_tiles` when the grid holds every
/// cluster tile at once (each block has one tile, the one it prefetches for), else none. On
/// the calls of more tiles than the grid (the 32000-column output layer at M = 1 and 8) 8 K
/// tiles lowered the ratio to cuBLAS by 0.01–0.07 on the H200, for a reason not yet found;
/// those calls keep the plain start.
fn l2_prefetch_for(cluster_tiles: u64, clusters: u32, k_tiles: u32) -> u32 {
    if cluster_tiles <= u64::from(clusters) {
        k_tiles
    } else {
        0
    }
}

/// Whether entry points are built for narrow tiles of `bm` rows with A of `a_layout`.
#[cfg(test)]
fn narrow_built(bm: u32, a_layout: Layout) -> bool {
    bm >= 64 || a_layout == Layout::RowMajor
}

impl HopperKernels {
    /// The planner of the sm90a module's Hopper entry points on a device with `sms`
    /// multiprocessors; loads nothing yet.
    pub(crate) fn new(entries: &Arc<Entries>, sms: usize) -> Self {
        HopperKernels {
            entries: entries.clone(),
            sms: sms.max(1),
            pingpong_use: PingPongUse::from_env(),
            skinny: SkinnyUse::from_env(),
            decode_clusters: DecodeClusters::from_env(),
            one_round: OneRound::from_env(),
            dependent_launch: !std::env::var("SGEMM_BI_DEPENDENT_LAUNCH").is_ok_and(|v| v == "0"),
            l2_prefetch_k_tiles: l2_prefetch_from_env(),
        }
    }

    /// The planner, with the ping-pong consumers on every 128-row tile when `all_pingpong`
    /// (for tests and benchmarks of that schedule), else where `SGEMM_BI_PINGPONG` says.
    pub(crate) fn planner(&self, all_pingpong: bool) -> HopperPlanner<'_> {
        HopperPlanner {
            kernels: self,
            pingpong_use: if all_pingpong {
                PingPongUse::All
            } else {
                self.pingpong_use
            },
        }
    }
}

/// [`HopperKernels`] with the use of the ping-pong consumers decided.
pub(crate) struct HopperPlanner<'a> {
    kernels: &'a HopperKernels,
    pingpong_use: PingPongUse,
}

/// The plan for `g` with A, B and C at `a`, `b`, `c` on a GPU with `sms` multiprocessors.
fn plan(
    g: &Gemm,
    (a, b, c): (usize, usize, usize),
    sms: usize,
    use_: PingPongUse,
    skinny: SkinnyUse,
    decode: DecodeClusters,
    one_round: OneRound,
) -> Result<HopperPlan, Unsupported> {
    can_implement(g, a, b, c)?;
    let bm = tile_m(g, sms);
    let schedule = schedule(g, bm, use_);
    let (bn, cluster) = match schedule {
        Schedule::PingPong => (PINGPONG_BN, pingpong_cluster_size(g)),
        Schedule::Cooperative => {
            let bn = tile_n(g, bm, sms, skinny, one_round);
            (bn, cluster_size(g, (bm, bn), decode))
        }
    };
    let schedule = schedule_for_width(g, (bm, bn), sms, use_, schedule);
    if g.a.dtype == DType::F32 {
        return Err(Unsupported::Element { dtype: g.a.dtype });
    }
    let entry = entry(g, bm, bn, cluster, schedule).ok_or(Unsupported::NotBuilt)?;
    Ok(HopperPlan {
        entry,
        tile: (bm, bn),
        cluster,
    })
}

impl Planner for HopperPlanner<'_> {
    type Plan = HopperPlan;

    fn plan(&self, g: &Gemm, p: &GemmPointers) -> Result<HopperPlan, Unsupported> {
        let addresses = (p.a as usize, p.b as usize, p.c as usize);
        plan(
            g,
            addresses,
            self.kernels.sms,
            self.pingpong_use,
            self.kernels.skinny,
            self.kernels.decode_clusters,
            self.kernels.one_round,
        )
    }

    /// Builds the tensor maps and launches a persistent grid of whole clusters.
    unsafe fn launch(
        &self,
        plan: &HopperPlan,
        g: &Gemm,
        p: &GemmPointers,
        stream: sys::CUstream,
    ) -> Result<()> {
        let kernel = self.kernels.entries.get(plan.entry)?;
        let ((bm, bn), cluster) = (plan.tile, plan.cluster);
        let map_err = |message: String| Error::Launch {
            kernel: kernel.spec().name.to_string(),
            message,
        };
        // A is (M, K): K-contiguous when row-major; B is (K, N), seen as (N, K): K-contiguous
        // when column-major. In a cluster each block copies 1 / cluster of the shared tile:
        // A's along N, B's along M.
        let a_k = g.a.layout == Layout::RowMajor;
        let b_k = g.b.layout == Layout::ColMajor;
        let along_n = cluster > 1 && clusters_along_n(bm);
        let (a_box, b_box) = if along_n {
            (bm / cluster, bn)
        } else {
            (bm, bn / cluster)
        };
        let map_a =
            operand_map(&g.a, a_k, p.a as usize, g.m, g.k, g.batch, a_box).map_err(map_err)?;
        let map_b =
            operand_map(&g.b, b_k, p.b as usize, g.n, g.k, g.batch, b_box).map_err(map_err)?;
        // C's map (overwrite modes): boxes of 128 bytes × one consumer warpgroup's rows, the
        // epilogue's pieces. Accumulate mode stores from registers and leaves it unused.
        let map_c = match g.c.mode {
            OutputMode::AccumulateF32 => TensorMap { opaque: [0; 16] },
            mode => {
                let dtype = mode.dtype();
                let box_cols = (EPILOGUE_PIECE_BYTES / WG_M) / dtype.size() as u32;
                encode_raw(
                    dtype,
                    p.c as usize,
                    g.n,
                    g.m,
                    g.c.ldc,
                    g.batch,
                    g.c.batch_stride,
                    [box_cols, WG_M],
                )
                .map_err(map_err)?
            }
        };
        let gemm = gemm_params(g, p, bm, bn);
        // Persistent: one block per SM at most, whole clusters, each cluster a tile of
        // `cluster` tile rows (along N: tile columns).
        let cluster_tiles = if along_n {
            gemm.tiles_m * gemm.tiles_n.div_ceil(cluster as u64) * gemm.batch
        } else {
            gemm.tiles_m.div_ceil(cluster as u64) * gemm.tiles_n * gemm.batch
        };
        let sms = self.kernels.sms;
        let clusters = cluster_tiles.min((sms / cluster as usize).max(1) as u64) as u32;
        let grid = clusters * cluster;
        let params = HopperParams {
            map_a,
            map_b,
            map_c,
            gemm,
            l2_prefetch_k_tiles: l2_prefetch_for(
                cluster_tiles,
                clusters,
                self.kernels.l2_prefetch_k_tiles,
            ),
        };
        // SAFETY: `value` is a plain-data union; each attribute sets the member its id names.
        let mut attributes: [sys::CUlaunchAttribute; 2] = unsafe { std::mem::zeroed() };
        attributes[0].id = sys::CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
        attributes[0].value.clusterDim.x = cluster;
        attributes[0].value.clusterDim.y = 1;
        attributes[0].value.clusterDim.z = 1;
        // Programmatic dependent launch: the kernel's blocks may start (barriers, cluster
        // setup) while the previous kernel's last blocks finish; every Hopper kernel waits for
        // that kernel's completion (`griddepcontrol.wait`) before it touches global memory,
        // so the stream's order of memory effects is the plain one.
        attributes[1].id =
            sys::CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
        attributes[1].value.programmaticStreamSerializationAllowed = 1;
        let attribute_count = if self.kernels.dependent_launch { 2 } else { 1 };
        // SAFETY: `can_implement` accepted the call (the maps describe the caller's buffers,
        // valid for the work on `stream`); the grid is whole clusters of the size the entry
        // is built for.
        unsafe { kernel.launch(grid, &params, stream, &mut attributes[..attribute_count]) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{Output, OutputMode, Tier};

    #[test]
    fn only_calls_of_one_wave_prefetch_the_weight() {
        // 44 tiles on 132 SMs: one tile a block, the count asked for.
        assert_eq!(l2_prefetch_for(44, 44, 8), 8);
        assert_eq!(l2_prefetch_for(132, 132, 3), 3);
        // 250 tiles on 132 blocks: a block's first tile is not its only one; none.
        assert_eq!(l2_prefetch_for(250, 132, 8), 0);
        // Off stays off.
        assert_eq!(l2_prefetch_for(1, 1, 0), 0);
    }

    fn gemm(m: usize, n: usize, k: usize, layouts: (Layout, Layout)) -> Gemm {
        let op = |layout, rows: usize, cols: usize| Operand {
            dtype: DType::BF16,
            layout,
            ld: if layout == Layout::RowMajor {
                cols
            } else {
                rows
            },
            batch_stride: 0,
        };
        Gemm {
            m,
            n,
            k,
            batch: 1,
            a: op(layouts.0, m, k),
            b: op(layouts.1, k, n),
            bias: None,
            c: Output {
                mode: OutputMode::Overwrite(DType::BF16),
                ldc: n,
                batch_stride: 0,
            },
            tier: Tier::TensorCores,
        }
    }

    fn entry_name(
        dtype: DType,
        layouts: (Layout, Layout),
        bm: u32,
        bn: u32,
        cluster: u32,
        schedule: Schedule,
    ) -> &'static str {
        let mut g = gemm(64, 64, 64, layouts);
        (g.a.dtype, g.b.dtype) = (dtype, dtype);
        entry(&g, bm, bn, cluster, schedule).unwrap().spec().name
    }

    /// Every plan over a sweep of shapes, layouts, schedules and SM counts names a built
    /// entry, and every Hopper entry of the catalogue has its slot in the table.
    #[test]
    fn every_plan_has_an_entry_and_every_entry_a_slot() {
        for layouts in LAYOUTS {
            for dtype in [DType::BF16, DType::F16] {
                for m in [1, 8, 9, 17, 33, 64, 65, 128, 129, 256, 1000, 16384] {
                    for n in [8, 64, 200, 4096, 14336] {
                        for sms in [1, 132] {
                            for use_ in [
                                PingPongUse::Off,
                                PingPongUse::ShortAccumulate,
                                PingPongUse::All,
                            ] {
                                for mode in
                                    [OutputMode::Overwrite(dtype), OutputMode::AccumulateF32]
                                {
                                    let mut g = gemm(m, n, 64, layouts);
                                    (g.a.dtype, g.b.dtype, g.c.mode) = (dtype, dtype, mode);
                                    if can_implement(&g, 0, 0, 0).is_err() {
                                        continue;
                                    }
                                    for skinny in [SkinnyUse::Off, SkinnyUse::Small, SkinnyUse::All]
                                    {
                                        for (decode, one_round) in [
                                            (DecodeClusters::Off, OneRound::Off),
                                            (DecodeClusters::On, OneRound::Off),
                                            (DecodeClusters::Off, OneRound::On),
                                        ] {
                                            let plan = plan(
                                                &g,
                                                (0, 0, 0),
                                                sms,
                                                use_,
                                                skinny,
                                                decode,
                                                one_round,
                                            )
                                            .unwrap_or_else(|e| panic!("{m}×{n} {layouts:?}: {e}"));
                                            let family = plan.entry.spec().kind.family;
                                            assert_eq!(family.tile(), plan.tile);
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
        let mut slots: Vec<&str> = TABLE
            .iter()
            .flatten()
            .flatten()
            .flatten()
            .flatten()
            .flatten()
            .flatten()
            .map(|id| id.spec().name)
            .collect();
        slots.sort_unstable();
        let mut entries: Vec<&str> = sgemm_bi_abi::catalogue::KERNELS
            .iter()
            .filter(|k| matches!(k.kind.family, Family::Hopper { .. }))
            .map(|k| k.name)
            .collect();
        entries.sort_unstable();
        assert_eq!(slots, entries);
    }

    /// The epilogue hands an overwritten C to the copy engine (C 16-byte aligned, rows,
    /// batch entries and N 16-byte multiples) and stores accumulated pairs from registers
    /// (N even, C's address, leading dimension and batch stride multiples of two elements);
    /// anything else goes to the mma.sync path, with the reason. A and B come first.
    #[test]
    fn c_must_suit_the_epilogue() {
        let reason = |g: &Gemm, c: usize| can_implement(g, 0, 0, c).unwrap_err().to_string();
        let bf16 = gemm(64, 64, 64, LAYOUTS[0]);
        assert!(can_implement(&bf16, 0, 0, 0).is_ok());
        assert!(reason(&bf16, 8).contains("C's address 0x8 is not 16-byte aligned"));
        let odd_n = Gemm {
            n: 63,
            c: Output { ldc: 64, ..bf16.c },
            ..bf16
        };
        assert!(reason(&odd_n, 0).contains("N = 63 is not a multiple of 8"));
        let n_72 = Gemm {
            n: 72,
            c: Output { ldc: 80, ..bf16.c },
            ..bf16
        };
        assert!(
            can_implement(&n_72, 0, 0, 0).is_ok(),
            "a partial tile of whole 16-byte units"
        );
        let dense_odd_n = Gemm {
            n: 63,
            c: Output { ldc: 63, ..bf16.c },
            ..bf16
        };
        assert!(reason(&dense_odd_n, 0).contains("C's leading dimension 63 is not a multiple of 8"));
        let f32_out = Gemm {
            c: Output {
                mode: OutputMode::Overwrite(DType::F32),
                ldc: 68,
                ..bf16.c
            },
            ..bf16
        };
        assert!(can_implement(&f32_out, 0, 0, 16).is_ok());
        let f32_batched = Gemm {
            batch: 2,
            c: Output {
                batch_stride: 64 * 68 + 2,
                ..f32_out.c
            },
            ..f32_out
        };
        assert!(reason(&f32_batched, 0).contains("C's batch stride 4354 is not a multiple of 4"));
        let acc = Gemm {
            c: Output {
                mode: OutputMode::AccumulateF32,
                ldc: 66,
                ..bf16.c
            },
            ..bf16
        };
        assert!(
            can_implement(&acc, 0, 0, 8).is_ok(),
            "pairs of f32: 8-byte aligned"
        );
        assert!(reason(&acc, 4).contains("C's address 0x4 is not 8-byte aligned"));
        assert!(reason(&Gemm { n: 63, ..acc }, 0).contains("N = 63 is odd"));
        assert!(reason(
            &Gemm {
                c: Output { ldc: 65, ..acc.c },
                ..acc
            },
            0
        )
        .contains("C's leading dimension 65 is odd"));
        assert!(can_implement(&odd_n, 8, 0, 0)
            .unwrap_err()
            .to_string()
            .contains("A's address"));
    }

    /// The planner picks a built width for every shape: whole rounds of the widest tiles,
    /// narrower ones where that leaves fewer rounds or N is narrow.
    #[test]
    fn tile_widths_fill_whole_rounds() {
        for layouts in LAYOUTS {
            for m in [1, 64, 128, 129, 1000, 16384] {
                for n in [8, 32, 64, 100, 4096, 14336] {
                    for sms in [1, 132] {
                        let g = gemm(m, n, 64, layouts);
                        let bm = tile_m(&g, sms);
                        let bn = tile_n(&g, bm, sms, SkinnyUse::All, OneRound::Off);
                        assert!(BN_CHOICES.contains(&bn), "{m}×{n} {layouts:?}: BN {bn}");
                        assert!(BM_CHOICES.contains(&bm), "{m}×{n} {layouts:?}: BM {bm}");
                        assert!(narrow_built(bm, layouts.0));
                        assert!(
                            bm == BM
                                || bn == NARROW_BN
                                || DECODE_BN.contains(&bn)
                                || (WIDE_SHORT_BN.contains(&bn) && wide_short_built(bm))
                        );
                        assert!(bm != BM || bn >= NARROW_BN, "tall tiles are never narrow");
                        assert!(
                            bn >= NARROW_BN || layouts.1 == Layout::ColMajor,
                            "decode widths are built for a K-contiguous B only"
                        );
                    }
                }
            }
            let w = |m, k, n| {
                tile_n(
                    &gemm(m, n, k, layouts),
                    BM,
                    132,
                    SkinnyUse::All,
                    OneRound::Off,
                )
            };
            // Training shapes: whole rounds of the widest tiles.
            assert_eq!(w(16384, 4096, 4096), 256);
            assert_eq!(w(4096, 4096, 4096), 256);
            assert_eq!(w(8192, 8192, 8192), 256);
            // A half-empty second round of wide tiles: two full rounds of 192.
            assert_eq!(w(2048, 768, 3072), 192);
            // One round either way: the narrower, faster tile of 128.
            assert_eq!(w(512, 4096, 4096), 128);
            assert_eq!(w(4096, 1536, 3072), 256);
            // Too few tiles for any width to fill the GPU: the narrowest.
            assert_eq!(w(2048, 768, 512), 64);
            assert_eq!(w(64, 4096, 4096), 64);
            // Narrow N never takes a tile wider than it needs.
            assert_eq!(
                tile_n(
                    &gemm(1000, 100, 64, layouts),
                    BM,
                    1,
                    SkinnyUse::All,
                    OneRound::Off
                ),
                128
            );
            assert_eq!(
                tile_n(
                    &gemm(1000, 60, 64, layouts),
                    BM,
                    1,
                    SkinnyUse::All,
                    OneRound::Off
                ),
                64
            );
        }
    }

    /// The one-round widths only when on, only for a K-contiguous B, and there only where
    /// they put more of the SMs to work in one round: the training shapes keep theirs.
    #[test]
    fn one_round_widths_fill_the_sms_only_where_they_fit() {
        let rc = (Layout::RowMajor, Layout::ColMajor);
        let rr = LAYOUTS[0];
        let width = |m, n, layouts, one_round| {
            let g = gemm(m, n, 4096, layouts);
            tile_n(&g, tile_m(&g, 132), 132, SkinnyUse::All, one_round)
        };
        assert_eq!(width(256, 14336, rc, OneRound::Off), 256);
        assert_eq!(width(256, 14336, rc, OneRound::On), 224);
        assert_eq!(width(128, 14336, rc, OneRound::Off), 128);
        assert_eq!(width(128, 14336, rc, OneRound::On), 112);
        assert_eq!(width(256, 14336, rr, OneRound::On), 256, "B N-contiguous");
        for (m, n) in [(16384, 4096), (16384, 14336), (4096, 4096), (8192, 8192)] {
            assert_eq!(width(m, n, rc, OneRound::On), 256, "{m}×{n}");
        }
        assert_eq!(width(256, 4096, rc, OneRound::On), 64);
        // The narrow heights: one round of 112 columns instead of two of 64 (or, at 8 rows,
        // 112 tiles of 128); at N = 4096 the decode widths stay.
        for m in [1, 8, 16, 33, 64] {
            assert_eq!(width(m, 14336, rc, OneRound::On), 112, "M = {m}");
            assert_eq!(width(m, 4096, rc, OneRound::On), 32, "M = {m}");
        }
        let cc = (Layout::ColMajor, Layout::ColMajor);
        assert_eq!(width(64, 14336, cc, OneRound::On), 112);
        let plan_of = |m| {
            let g = gemm(m, 14336, 4096, rc);
            plan(
                &g,
                (0, 0, 0),
                132,
                PingPongUse::ShortAccumulate,
                SkinnyUse::All,
                DecodeClusters::Off,
                OneRound::On,
            )
            .unwrap()
        };
        assert_eq!(plan_of(256).tile, (BM, 224));
        assert_eq!(plan_of(256).cluster, 2, "two tile rows share each B tile");
        assert_eq!(
            plan_of(256).entry.spec().name,
            "sgemm_bi_hopper_bf16_rc_n224_x2"
        );
        assert_eq!(
            plan_of(128).entry.spec().name,
            "sgemm_bi_hopper_bf16_rc_n112"
        );
        assert_eq!(
            plan_of(1).entry.spec().name,
            "sgemm_bi_hopper_bf16_rc_n112_m8"
        );
        assert_eq!(
            plan_of(64).entry.spec().name,
            "sgemm_bi_hopper_bf16_rc_n112_m64"
        );
    }

    /// Small M streams B through the narrow tile heights; training shapes keep 128 rows.
    #[test]
    fn tile_heights_follow_m() {
        let (rr, cr) = (LAYOUTS[0], (Layout::ColMajor, Layout::RowMajor));
        assert_eq!(rr.0, Layout::RowMajor);
        for m in [1, 8] {
            assert_eq!(tile_m(&gemm(m, 4096, 4096, rr), 132), 8);
            assert_eq!(tile_m(&gemm(m, 4096, 4096, cr), 132), 64);
        }
        for (m, bm) in [(9, 16), (16, 16), (17, 32), (32, 32), (33, 64), (64, 64)] {
            assert_eq!(tile_m(&gemm(m, 14336, 4096, rr), 132), bm);
            assert_eq!(tile_m(&gemm(m, 14336, 4096, cr), 132), 64);
        }
        assert_eq!(tile_m(&gemm(128, 4096, 4096, rr), 132), 64);
        assert_eq!(tile_m(&gemm(256, 4096, 4096, rr), 132), BM);
        assert_eq!(tile_m(&gemm(128, 14336, 4096, rr), 132), BM);
        assert_eq!(tile_m(&gemm(16384, 4096, 4096, rr), 132), BM);
        assert_eq!(
            entry_name(DType::F16, rr, 8, 64, 1, Schedule::Cooperative),
            "sgemm_bi_hopper_f16_rr_n64_m8"
        );
        // B N-contiguous (rr): 64 columns. B K-contiguous (torch's weight): 32 columns
        // where 64 would leave half the SMs idle, on every narrow height (`All`), on those
        // below 64 rows (`Small`), or none (`Off`); a forced width (`Width`) anywhere B is
        // K-contiguous.
        let rc = (Layout::RowMajor, Layout::ColMajor);
        let width = |m, n, layouts, skinny| {
            let g = gemm(m, n, 4096, layouts);
            tile_n(&g, tile_m(&g, 132), 132, skinny, OneRound::Off)
        };
        for m in [1, 64, 128] {
            assert_eq!(width(m, 4096, rr, SkinnyUse::All), NARROW_BN);
        }
        for (m, small, all) in [(1, 32, 32), (32, 32, 32), (33, 64, 32), (64, 64, 32)] {
            assert_eq!(width(m, 4096, rc, SkinnyUse::Small), small, "M = {m}");
            assert_eq!(width(m, 4096, rc, SkinnyUse::All), all, "M = {m}");
            assert_eq!(width(m, 4096, rc, SkinnyUse::Off), NARROW_BN);
            // 224 tiles of 64 columns already fill the GPU, or with 8 rows (where 128
            // columns are built) 112 of 128, one round instead of two.
            let wide_n = if m <= 8 { 128 } else { NARROW_BN };
            assert_eq!(width(m, 14336, rc, SkinnyUse::All), wide_n);
        }
        // M = 128 at N = 4096: 128 tiles of 64 × 64.
        assert_eq!(width(128, 4096, rc, SkinnyUse::All), NARROW_BN);
        assert_eq!(
            entry_name(DType::BF16, rc, 8, 32, 1, Schedule::Cooperative),
            "sgemm_bi_hopper_bf16_rc_n32_m8"
        );
        assert_eq!(width(1, 14336, rc, SkinnyUse::Width(16)), 16);
        assert_eq!(width(1, 14336, rr, SkinnyUse::Width(16)), NARROW_BN);
    }

    /// Batches of short products (a decode step's attention scores: batch × heads products of
    /// one query row by K = the head size) take the wide tiles of 8 and 16 rows where they
    /// need fewer rounds; long K keeps the decode widths.
    #[test]
    fn short_products_take_wide_tiles() {
        let (rc, rr) = (
            (Layout::RowMajor, Layout::ColMajor),
            (Layout::RowMajor, Layout::RowMajor),
        );
        let batched = |batch, m, n, k, layouts| {
            let mut g = gemm(m, n, k, layouts);
            g.batch = batch;
            g
        };
        let width_of = |g: &Gemm| tile_n(g, tile_m(g, 132), 132, SkinnyUse::All, OneRound::Off);
        let width = |batch, m, n, k| width_of(&batched(batch, m, n, k, rc));
        // 32 heads × batch 8 over a static cache of 520 keys: 768 tiles of 256 columns (three
        // rounds of two tiles a block) against 1280 of 128 and 2304 of 64; at batch 1, 160
        // tiles of 128 are one round of two a block, as 96 of 256 are.
        assert_eq!(width(256, 1, 520, 64), 256);
        assert_eq!(width(32, 1, 520, 64), 128);
        assert_eq!(width(16, 1, 520, 64), 128);
        // The shapes of `tests/gpu_tc_model.rs::attention_score_calls_match_the_model`.
        assert_eq!(width(300, 1, 520, 64), 256);
        assert_eq!(width(280, 2, 264, 72), 256);
        assert_eq!(width(140, 11, 250, 128), 256);
        assert_eq!(width(200, 9, 120, 136), 128);
        // Past `WIDEST_SHORT_MAX_K` 128 columns at most; one row by a wide N at decode: one
        // round of 112 tiles of 128 columns instead of two of 224 of 64.
        assert_eq!(width(256, 1, 520, 512), 128);
        assert_eq!(width(1, 1, 14336, 4096), 128);
        // Tiles of 32 rows have no wide widths.
        assert_eq!(width(256, 32, 520, 64), NARROW_BN);
        assert_eq!(
            entry_name(DType::F16, rc, 16, 128, 1, Schedule::PingPong),
            "sgemm_bi_hopper_f16_rc_n128_m16_pp"
        );
        // Their consumers take the tiles in turn (two warpgroups).
        let acc = PingPongUse::ShortAccumulate;
        let for_width = |g: &Gemm, bm, bn, use_| {
            schedule_for_width(g, (bm, bn), 132, use_, Schedule::Cooperative)
        };
        let scores = batched(256, 1, 520, 64, rc);
        assert_eq!(for_width(&scores, 8, 256, acc), Schedule::PingPong);
        assert_eq!(for_width(&scores, 8, 64, acc), Schedule::Cooperative);
        // `attn @ v` (B N-contiguous, 64 columns): ping-pong when the tiles outnumber the
        // blocks (256 products), not in one round (32) nor with `SGEMM_BI_PINGPONG=off`.
        let values = |batch| batched(batch, 1, 64, 520, rr);
        assert_eq!(width_of(&values(256)), NARROW_BN);
        assert_eq!(for_width(&values(256), 8, 64, acc), Schedule::PingPong);
        assert_eq!(for_width(&values(256), 16, 64, acc), Schedule::PingPong);
        assert_eq!(for_width(&values(32), 8, 64, acc), Schedule::Cooperative);
        assert_eq!(
            for_width(&values(256), 8, 64, PingPongUse::Off),
            Schedule::Cooperative
        );
        assert_eq!(
            entry_name(DType::BF16, rr, 8, 64, 1, Schedule::PingPong),
            "sgemm_bi_hopper_bf16_rr_n64_m8_pp"
        );
    }

    /// The decode widths of a Llama-architecture model with hidden size 2048 (K = 2048 but
    /// for the down projection), on 132 SMs: the width whose busiest block streams least.
    #[test]
    fn decode_widths_fill_the_gpu() {
        let rc = (Layout::RowMajor, Layout::ColMajor);
        let width = |m, k, n| {
            let g = gemm(m, n, k, rc);
            tile_n(&g, tile_m(&g, 132), 132, SkinnyUse::All, OneRound::Off)
        };
        for m in [1, 8] {
            // gate / up: 88 tiles of 64 columns, 118 of 48.
            assert_eq!(width(m, 2048, 5632), 48, "M = {m}");
            // q / o and down: 32 tiles of 64, 128 of 16.
            assert_eq!(width(m, 2048, 2048), 16, "M = {m}");
            assert_eq!(width(m, 5632, 2048), 16, "M = {m}");
            // k / v (grouped heads): 16 tiles of 16.
            assert_eq!(width(m, 2048, 256), 16, "M = {m}");
            // The vocabulary head: 500 tiles of 64 take four rounds, 250 of 128 two (256
            // columns are for short K only).
            assert_eq!(width(m, 2048, 32000), 128, "M = {m}");
        }
        assert_eq!(
            entry_name(DType::F16, rc, 16, 48, 1, Schedule::Cooperative),
            "sgemm_bi_hopper_f16_rc_n48_m16"
        );
        assert_eq!(
            entry_name(
                DType::BF16,
                (Layout::ColMajor, Layout::ColMajor),
                64,
                16,
                1,
                Schedule::Cooperative
            ),
            "sgemm_bi_hopper_bf16_cc_n16_m64"
        );
    }

    /// Ping-pong consumers for accumulate mode on 128-row tiles with K ≤ 4096 by default
    /// (every accumulate-mode call with `accumulate`); clusters of two when there are two
    /// tile rows.
    #[test]
    fn pingpong_runs_short_dw_on_tall_tiles() {
        let layouts = (Layout::ColMajor, Layout::RowMajor);
        let mut dw = gemm(4096, 4096, 4096, layouts);
        dw.c.mode = OutputMode::AccumulateF32;
        let mut long_dw = gemm(4096, 4096, PINGPONG_MAX_K + 1, layouts);
        long_dw.c.mode = OutputMode::AccumulateF32;
        let fwd = gemm(4096, 4096, 4096, layouts);
        let acc = PingPongUse::ShortAccumulate;
        assert_eq!(schedule(&dw, BM, acc), Schedule::PingPong);
        assert_eq!(schedule(&long_dw, BM, acc), Schedule::Cooperative);
        assert_eq!(
            schedule(&long_dw, BM, PingPongUse::Accumulate),
            Schedule::PingPong
        );
        assert_eq!(schedule(&dw, 64, acc), Schedule::Cooperative);
        assert_eq!(schedule(&fwd, BM, acc), Schedule::Cooperative);
        assert_eq!(schedule(&fwd, BM, PingPongUse::All), Schedule::PingPong);
        assert_eq!(schedule(&dw, BM, PingPongUse::Off), Schedule::Cooperative);
        assert_eq!(pingpong_cluster_size(&dw), 2);
        assert_eq!(pingpong_cluster_size(&gemm(128, 4096, 4096, layouts)), 1);
        assert_eq!(
            entry_name(DType::BF16, layouts, BM, PINGPONG_BN, 2, Schedule::PingPong),
            "sgemm_bi_hopper_bf16_cr_n128_pp_x2"
        );
        assert_eq!(
            entry_name(DType::F16, layouts, BM, PINGPONG_BN, 1, Schedule::PingPong),
            "sgemm_bi_hopper_f16_cr_n128_pp"
        );
    }

    /// Clusters along M only for the widest tiles (256 and 224 columns) with at least two tile
    /// rows to pair.
    #[test]
    fn clusters_pair_tile_rows_of_the_widest_tiles() {
        let layouts = LAYOUTS[0];
        let size =
            |m, n, bn| cluster_size(&gemm(m, n, 4096, layouts), (BM, bn), DecodeClusters::On);
        assert_eq!(size(16384, 4096, 256), 2);
        assert_eq!(size(129, 4096, 256), 2);
        assert_eq!(size(128, 40960, 256), 1);
        assert_eq!(size(16384, 4096, 128), 1);
        assert_eq!(size(256, 14336, 224), 2, "the widest one-round width");
        assert_eq!(size(128, 14336, 224), 1);
        assert_eq!(size(256, 14336, 112), 1);
        assert_eq!(
            entry_name(DType::BF16, layouts, BM, 256, 2, Schedule::Cooperative),
            "sgemm_bi_hopper_bf16_rr_n256_x2"
        );
    }

    /// Clusters along N for the 64-row decode tiles of a K-contiguous A and B whose tile
    /// columns pair up, unless turned off.
    #[test]
    fn clusters_pair_tile_columns_of_the_64_row_decode_tiles() {
        let rc = (Layout::RowMajor, Layout::ColMajor);
        let size =
            |m, n, layouts, tile, decode| cluster_size(&gemm(m, n, 4096, layouts), tile, decode);
        assert_eq!(size(64, 4096, rc, (64, 32), DecodeClusters::On), 2);
        assert_eq!(size(64, 4096, rc, (64, 32), DecodeClusters::Off), 1);
        // 4096 / 48 = 85.3: 86 tile columns pair up; 4000 / 32 = 125 do not.
        assert_eq!(size(64, 4096, rc, (64, 48), DecodeClusters::On), 2);
        assert_eq!(size(64, 4000, rc, (64, 32), DecodeClusters::On), 1);
        // Not the 64-column tiles, nor an M-contiguous A, nor the shorter tiles.
        assert_eq!(size(64, 4096, rc, (64, 64), DecodeClusters::On), 1);
        let cc = (Layout::ColMajor, Layout::ColMajor);
        assert_eq!(size(64, 4096, cc, (64, 32), DecodeClusters::On), 1);
        assert_eq!(size(8, 4096, rc, (8, 32), DecodeClusters::On), 1);
        assert_eq!(
            entry_name(DType::BF16, rc, 64, 32, 2, Schedule::Cooperative),
            "sgemm_bi_hopper_bf16_rc_n32_m64_x2"
        );
    }
}
