//! Choosing and launching the scalar-tier kernels. Every candidate computes each element with
//! the same chain (see `kernels-gpu/src/scalar`), so the choice is free to depend on dtype and
//! layouts.

use std::sync::{Arc, OnceLock};

use cudarc::driver::sys;
use sgemm_bi_abi::catalogue::{Family, Kind, Module, ScalarTile};
use sgemm_bi_abi::params::GemmParams;
use sgemm_bi_abi::scalar::{narrow, rows, wide, BM};

use super::catalogue::{expect_id, Entries, KernelId};
use super::kernel_abi::{gemm_params, grid_size};
use super::plan::{
    copyable_16, element_index, k_contiguous, layout_index, Planner, Unsupported, ELEMENTS, LAYOUTS,
};
use crate::error::{Operand as Which, Result};
use crate::types::{DType, Gemm, GemmPointers, Layout, OutputMode};

/// The tile widths, in the order of [`TiledTable`]'s last index.
const TILES: [ScalarTile; 2] = [ScalarTile::Wide, ScalarTile::Narrow];

/// Output columns of a tile of `tile`.
fn tile_bn(tile: ScalarTile) -> u32 {
    match tile {
        ScalarTile::Wide => wide::BN,
        ScalarTile::Narrow => narrow::BN,
    }
}

/// Time of one tile relative to a wide one, both with the multiprocessor shared as usual:
/// half the work at about 77 % of the wide tiles' rate (H200: 32.5 against 42.4 TFLOP/s of
/// f32 with full waves, docs/perf-notes.md). It only ranks the two widths.
fn relative_tile_time(tile: ScalarTile) -> f64 {
    match tile {
        ScalarTile::Wide => 1.0,
        ScalarTile::Narrow => 0.65,
    }
}

/// How many of a problem's columns, from column 0, go to wide tiles; the rest go to narrow
/// ones, in a second launch. `resident`: blocks of each width (`TILES`' order) the device
/// runs at once.
///
/// Chosen by whole waves: the last wave of a launch is paid in full however few tiles it
/// holds, so each part costs `⌈tiles / resident⌉` waves of its tile time (wide 1.0, narrow
/// [`relative_tile_time`]), and a second launch a little more. 2048 × 3072 on an H200
/// (264 resident blocks of either width): all wide is 384 tiles, two waves (2.0); all narrow
/// 768 tiles, three waves (1.95); 2048 wide columns then 1024 narrow ones, 256 tiles each,
/// one wave of each (1.65). Every element's chain is the same in either part (C3), so the
/// split changes only speed.
pub(crate) fn wide_columns(m: usize, n: usize, batch: usize, resident: [u32; 2]) -> usize {
    // From all wide down to all narrow; the first of equal costs wins (more wide tiles).
    let all_wide = n.div_ceil(wide::BN as usize);
    let mut best = (split_cost(m, n, batch, resident, all_wide), all_wide);
    for wide_tiles_n in (0..all_wide).rev() {
        let cost = split_cost(m, n, batch, resident, wide_tiles_n);
        if cost < best.0 {
            best = (cost, wide_tiles_n);
        }
    }
    (best.1 * wide::BN as usize).min(n)
}

/// The cost, in wide waves, of `wide_tiles_n` columns of wide tiles and narrow ones for the
/// rest (see [`wide_columns`]).
fn split_cost(m: usize, n: usize, batch: usize, resident: [u32; 2], wide_tiles_n: usize) -> f64 {
    /// A second launch: its start, and the drain between the two.
    const SECOND_LAUNCH: f64 = 0.05;
    let tiles_m = m.div_ceil(BM as usize) * batch;
    let waves = |tiles: usize, w: usize| tiles.div_ceil(resident[w].max(1) as usize);
    let wide_cols = (wide_tiles_n * wide::BN as usize).min(n);
    let narrow_tiles_n = (n - wide_cols).div_ceil(narrow::BN as usize);
    let wide = waves(tiles_m * wide_tiles_n, 0) as f64;
    let narrow = waves(tiles_m * narrow_tiles_n, 1) as f64 * relative_tile_time(ScalarTile::Narrow);
    let second = if wide_tiles_n > 0 && narrow_tiles_n > 0 {
        SECOND_LAUNCH
    } else {
        0.0
    };
    wide + narrow + second
}

/// The tiled entry points of one table, `[element][layout pair][tile]` (`ELEMENTS`,
/// `LAYOUTS`, `TILES`).
type TiledTable = [[[KernelId<GemmParams>; 2]; 4]; 3];

/// The table whose wide entries come from `wide_module`: the sm80 module, which every GPU
/// from sm_80 on loads, or the sm90a module's `_sm90` entries (wide tiles with more k steps
/// per loop trip; f32 copied by cp.async), which replace their sm80 twins on compute
/// capability 9.0. The narrow entries are the sm80 module's. Every slot is built: a missing
/// catalogue entry fails the build here.
const fn tiled_table(wide_module: Module) -> TiledTable {
    let mut table = [[[tiled_entry(wide_module, 0, 0, 0); 2]; 4]; 3];
    let mut e = 0;
    while e < 3 {
        let mut l = 0;
        while l < 4 {
            table[e][l] = [
                tiled_entry(wide_module, e, l, 0),
                tiled_entry(wide_module, e, l, 1),
            ];
            l += 1;
        }
        e += 1;
    }
    table
}

const fn tiled_entry(wide_module: Module, e: usize, l: usize, t: usize) -> KernelId<GemmParams> {
    let module = match TILES[t] {
        ScalarTile::Wide => wide_module,
        ScalarTile::Narrow => Module::Sm80,
    };
    let (a_k_contiguous, b_k_contiguous) = k_contiguous(LAYOUTS[l]);
    expect_id(Kind {
        module,
        element: ELEMENTS[e],
        a_k_contiguous,
        b_k_contiguous,
        family: Family::ScalarTiled { tile: TILES[t] },
    })
}

const PORTABLE: TiledTable = tiled_table(Module::Sm80);
const SM90: TiledTable = tiled_table(Module::Sm90a);

/// The few-row entry points, `[element][B k-contiguous][variant]` (`ELEMENTS`,
/// [`rows::VARIANTS`]); every slot built.
type RowsTable = [[[KernelId<GemmParams>; rows::VARIANTS.len()]; 2]; 3];

const fn rows_table() -> RowsTable {
    let mut table = [[[rows_entry(0, 0, 0); rows::VARIANTS.len()]; 2]; 3];
    let mut e = 0;
    while e < 3 {
        let mut b = 0;
        while b < 2 {
            let mut v = 0;
            while v < rows::VARIANTS.len() {
                table[e][b][v] = rows_entry(e, b, v);
                v += 1;
            }
            b += 1;
        }
        e += 1;
    }
    table
}

const fn rows_entry(e: usize, b: usize, v: usize) -> KernelId<GemmParams> {
    expect_id(Kind {
        module: Module::Sm80,
        element: ELEMENTS[e],
        a_k_contiguous: true,
        b_k_contiguous: b == 1,
        family: Family::ScalarRows {
            rows_per_warp: rows::VARIANTS[v].0,
            cols_per_lane: rows::VARIANTS[v].1,
        },
    })
}

const ROWS: RowsTable = rows_table();

/// What the few-row kernels (`kernels-gpu/src/scalar/rows.rs`) run a call with: which of
/// [`rows::VARIANTS`] (rows per warp × columns per lane) and B's layout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct RowsPlan {
    /// Index into [`rows::VARIANTS`].
    variant: usize,
    b_k_contiguous: bool,
    entry: KernelId<GemmParams>,
}

impl RowsPlan {
    /// Output rows per block.
    fn block_rows(self) -> u32 {
        rows::WARPS * rows::VARIANTS[self.variant].0
    }

    /// Output columns per block.
    fn block_cols(self) -> u32 {
        rows::block_cols(rows::VARIANTS[self.variant].1)
    }
}

/// Whether the few-row kernels take `g` on pointers `p`, and with which variant.
///
/// They take M ≤ 64 (above that the 128-row tiles fill the GPU), with A read along K
/// (row-major, or a single row whose elements are adjacent) and every operand's base,
/// leading dimension and batch stride a multiple of 16 bytes, since they copy A and B in
/// 16-byte `cp.async` pieces. The tiled kernels take everything else; both compute every
/// element with the same chain, so the choice changes only speed.
pub(crate) fn rows_plan(g: &Gemm, p: &GemmPointers) -> Result<RowsPlan, Unsupported> {
    if g.m == 0 || g.m > 64 {
        return Err(Unsupported::Rows { m: g.m });
    }
    if !(g.a.layout == Layout::RowMajor || (g.m == 1 && g.a.ld == 1)) {
        return Err(Unsupported::ANotAlongK);
    }
    let size = g.a.dtype.size();
    // A's pitch matters only between rows.
    let a_ld = (g.m > 1).then_some(g.a.ld);
    copyable_16(
        Which::A,
        size,
        p.a as usize,
        a_ld,
        g.a.batch_stride,
        g.batch,
    )?;
    copyable_16(
        Which::B,
        size,
        p.b as usize,
        Some(g.b.ld),
        g.b.batch_stride,
        g.batch,
    )?;
    let variant = forced_rows_variant().unwrap_or_else(|| rows_variant(g.m, g.n * g.batch));
    let b_k_contiguous = g.b.layout == Layout::ColMajor;
    let entry = ROWS[element_index(g.a.dtype)][b_k_contiguous as usize][variant];
    Ok(RowsPlan {
        variant,
        b_k_contiguous,
        entry,
    })
}

/// The lane tile a call of `m` rows and `n` columns (over all batch entries) runs with, an
/// index into [`rows::VARIANTS`]: one row per warp at M ≤ 4, else four rows per warp with
/// more columns per lane as the call's chains grow, so that each A element a lane reads
/// feeds more chains where the SMs hold enough of them. Measured on an H100 over M = 4…64 ×
/// K = 4096 × N = 4096 and 14336, both B layouts, bf16 and f32 (docs/perf-notes.md,
/// "Scalar few-row kernel: lane tiles in the kernel"): the tile taken was the fastest or
/// within 5 % of it at every shape.
fn rows_variant(m: usize, n: usize) -> usize {
    let chains = m * n;
    let tile = if m <= 4 {
        (1, 1)
    } else if chains < 1 << 17 {
        (4, 1)
    } else if chains < 3 << 17 {
        (4, 2)
    } else {
        (4, 4)
    };
    rows::VARIANTS
        .iter()
        .position(|&v| v == tile)
        .expect("a tile of the table")
}

/// The lane tile `SGEMM_BI_SCALAR_ROWS_PER_WARP` (TM) and `SGEMM_BI_SCALAR_COLS_PER_LANE`
/// (TN, 1 when unset) force on every few-row call when they name one of
/// [`rows::VARIANTS`] (read once per process), for benchmarks of the choice and for tests of
/// every tile: a block of fewer rows than M takes several tile rows, each with the same
/// chains, so only speed changes.
fn forced_rows_variant() -> Option<usize> {
    static FORCED: OnceLock<Option<usize>> = OnceLock::new();
    *FORCED.get_or_init(|| {
        let read = |name| std::env::var(name).ok().map(|v| v.parse::<u32>().ok());
        let tm = read("SGEMM_BI_SCALAR_ROWS_PER_WARP")??;
        let tn = read("SGEMM_BI_SCALAR_COLS_PER_LANE").unwrap_or(Some(1))?;
        rows::VARIANTS.iter().position(|&v| v == (tm, tn))
    })
}

/// The few-row kernels of a device (the sm80 module's).
pub(crate) struct Rows {
    entries: Arc<Entries>,
}

impl Planner for Rows {
    type Plan = RowsPlan;

    fn plan(&self, g: &Gemm, p: &GemmPointers) -> Result<RowsPlan, Unsupported> {
        rows_plan(g, p)
    }

    /// Launches the few-row kernel of `plan` on the whole call, one block per tile.
    unsafe fn launch(
        &self,
        plan: &RowsPlan,
        g: &Gemm,
        p: &GemmPointers,
        stream: sys::CUstream,
    ) -> Result<()> {
        let kernel = self.entries.get(plan.entry)?;
        let params = gemm_params(g, p, plan.block_rows(), plan.block_cols());
        // SAFETY: `rows_plan` checked the kernel's layout and alignment; the buffers satisfy
        // the caller's contract; one block per tile, no cluster.
        unsafe { kernel.launch(grid_size(&params, u32::MAX), &params, stream, &mut []) }
    }
}

/// The tiled entries a call runs with: both widths of its element type and layouts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct TiledPlan {
    /// By [`TILES`].
    entries: [KernelId<GemmParams>; 2],
}

/// The 128-row scalar tiles of a device, from one table (the sm80 module's, or on compute
/// capability 9.0 the one with the sm90a module's wide entries). They take every call.
pub(crate) struct Tiled {
    entries: Arc<Entries>,
    table: &'static TiledTable,
}

impl Planner for Tiled {
    type Plan = TiledPlan;

    fn plan(&self, g: &Gemm, _: &GemmPointers) -> Result<TiledPlan, Unsupported> {
        Ok(TiledPlan {
            entries: self.table[element_index(g.a.dtype)][layout_index(g)],
        })
    }

    /// Splits the columns between the widths by whole waves ([`wide_columns`]) and launches
    /// each part: at most one wave of blocks, which then loop over the tiles (block b takes
    /// tiles b, b + grid, …): measured on the H200, as fast as one block per tile for f32 and
    /// 14 % faster for bf16 at 4096³ (docs/perf-notes.md, "Scalar tier").
    unsafe fn launch(
        &self,
        plan: &TiledPlan,
        g: &Gemm,
        p: &GemmPointers,
        stream: sys::CUstream,
    ) -> Result<()> {
        // Both widths' occupancy decide the split, so the first call looks both up.
        let wide = self.entries.get(plan.entries[0])?;
        let narrow = self.entries.get(plan.entries[1])?;
        let wide_cols = wide_columns(g.m, g.n, g.batch, [wide.resident, narrow.resident]);
        let full = gemm_params(g, p, BM, wide::BN);
        // The wide part: columns 0 .. wide_cols.
        if wide_cols > 0 {
            let params = GemmParams {
                n: wide_cols as u64,
                tiles_n: wide_cols.div_ceil(wide::BN as usize) as u64,
                ..full
            };
            let grid = grid_size(&params, wide.resident);
            // SAFETY: the part is a column range of the caller's call, whose buffers satisfy
            // its contract; the tiled kernels take any layout and alignment.
            unsafe { wide.launch(grid, &params, stream, &mut [])? };
        }
        // The narrow part: columns wide_cols .. N, as a problem of its own whose B, bias and
        // C start at column wide_cols (the strides are the full problem's).
        if wide_cols < g.n {
            let j = wide_cols as u64;
            let b_offset = match g.b.layout {
                Layout::RowMajor => j,
                Layout::ColMajor => j * g.b.ld as u64,
            };
            let out_bytes = match g.c.mode {
                OutputMode::Overwrite(dtype) => dtype.size(),
                OutputMode::AccumulateF32 => DType::F32.size(),
            } as u64;
            let params = GemmParams {
                b: full.b + b_offset * g.b.dtype.size() as u64,
                bias: g
                    .bias
                    .map_or(full.bias, |dtype| full.bias + j * dtype.size() as u64),
                c: full.c + j * out_bytes,
                n: (g.n - wide_cols) as u64,
                tiles_n: (g.n - wide_cols).div_ceil(tile_bn(ScalarTile::Narrow) as usize) as u64,
                ..full
            };
            let grid = grid_size(&params, narrow.resident);
            // SAFETY: as above.
            unsafe { narrow.launch(grid, &params, stream, &mut [])? };
        }
        Ok(())
    }
}

/// The scalar tier of a device: the few-row kernels where they take the call, the tiled
/// ones elsewhere, from the sm80 module and on compute capability 9.0 with the sm90a
/// module's faster wide tiles. All compute every element with the same chain, so the choice
/// changes only speed.
pub(crate) struct ScalarKernels {
    rows: Rows,
    portable: Tiled,
    /// Present with the sm90a module.
    sm90: Option<Tiled>,
}

impl ScalarKernels {
    /// The scalar planners of a device whose modules `entries` loads; loads nothing yet.
    pub(crate) fn new(entries: &Arc<Entries>) -> Self {
        let tiled = |table| Tiled {
            entries: entries.clone(),
            table,
        };
        ScalarKernels {
            rows: Rows {
                entries: entries.clone(),
            },
            portable: tiled(&PORTABLE),
            sm90: entries.has(Module::Sm90a).then(|| tiled(&SM90)),
        }
    }

    /// Enqueues `g`: the few-row kernels where they take it, the tiled ones elsewhere (only
    /// the sm80 module's with `portable_only`).
    ///
    /// # Safety
    /// As for `CudaBackend::gemm`, with the context current on this thread.
    pub(crate) unsafe fn launch(
        &self,
        g: &Gemm,
        p: &GemmPointers,
        stream: sys::CUstream,
        portable_only: bool,
    ) -> Result<()> {
        if let Ok(plan) = self.rows.plan(g, p) {
            // SAFETY: forwarded contract; the plan is the planner's own.
            return unsafe { self.rows.launch(&plan, g, p, stream) };
        }
        let tiled = match &self.sm90 {
            Some(t) if !portable_only => t,
            _ => &self.portable,
        };
        let plan = tiled.plan(g, p).expect("the tiled kernels take every call");
        // SAFETY: as above.
        unsafe { tiled.launch(&plan, g, p, stream) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::Operand;

    /// An H200: 132 multiprocessors, two blocks of either width on each.
    const H200: [u32; 2] = [264, 264];

    #[test]
    fn partial_last_waves_move_columns_to_narrow_tiles() {
        // 16 × 24 = 384 wide tiles: two waves of 264. 16 × 16 wide tiles (2048 columns) and
        // 16 × 16 narrow ones (1024 columns) fill one wave each: 1 + 0.65 + 0.05.
        assert_eq!(wide_columns(2048, 3072, 1, H200), 2048);
        // 1024 wide tiles fill 3.9 waves; no split does better than four waves.
        assert_eq!(wide_columns(4096, 4096, 1, H200), 4096);
        // Fewer tiles than blocks either way: narrow halves the one wave.
        assert_eq!(wide_columns(300, 300, 1, H200), 0);
        assert_eq!(wide_columns(1, 1, 1, H200), 0);
        // The batch counts: 4 × 1024 wide tiles fill 15.5 waves (16); 4 × 32 × 30 of them
        // take 15 and the other 256 columns two narrow waves (16.35).
        assert_eq!(wide_columns(4096, 4096, 4, H200), 4096);
        // N not a multiple of 128: the wide part may end with a clipped tile.
        assert_eq!(wide_columns(4096, 4000, 1, H200), 4000);
    }

    #[test]
    fn the_split_never_costs_more_than_one_width() {
        for (m, n, batch) in [
            (2048, 3072, 1),
            (128, 8192, 3),
            (1000, 1000, 1),
            (512, 200, 7),
        ] {
            let split = wide_columns(m, n, batch, H200);
            assert!(
                split % wide::BN as usize == 0 || split == n,
                "{m} × {n}: {split}"
            );
            let cost = split_cost(m, n, batch, H200, split.div_ceil(wide::BN as usize));
            let all_wide = split_cost(m, n, batch, H200, n.div_ceil(wide::BN as usize));
            let all_narrow = split_cost(m, n, batch, H200, 0);
            assert!(
                cost <= all_wide && cost <= all_narrow,
                "{m} × {n} × {batch}: {split}"
            );
        }
    }

    fn call(m: usize, n: usize, k: usize, dtype: DType) -> Gemm {
        Gemm::dense(m, n, k, dtype)
    }

    fn at(a: usize, b: usize) -> GemmPointers {
        GemmPointers {
            a: a as *const _,
            b: b as *const _,
            bias: std::ptr::null(),
            c: 0x1000 as *mut _,
        }
    }

    #[test]
    fn few_rows_take_the_rows_kernel_by_m_and_n() {
        let p = at(0x1000, 0x2000);
        let block = |m, n| {
            rows_plan(&call(m, n, 4096, DType::BF16), &p).map(|r| (r.block_rows(), r.block_cols()))
        };
        assert_eq!(block(1, 4096), Ok((4, 32)));
        assert_eq!(block(4, 14336), Ok((4, 32)));
        assert_eq!(block(5, 4096), Ok((16, 32)));
        assert_eq!(block(16, 4096), Ok((16, 32)));
        assert_eq!(block(16, 14336), Ok((16, 64)));
        assert_eq!(block(32, 4096), Ok((16, 64)));
        assert_eq!(block(64, 4096), Ok((16, 64)));
        assert_eq!(block(32, 14336), Ok((16, 128)));
        assert_eq!(block(64, 14336), Ok((16, 128)));
        assert_eq!(block(65, 4096), Err(Unsupported::Rows { m: 65 }));
        assert_eq!(block(0, 4096), Err(Unsupported::Rows { m: 0 }));
        // A batch counts its entries' chains: 16 rows × 4096 columns four times over take the
        // tile of 64 × 4096, eight times over that of 64 × 14336.
        let batched = call(16, 4096, 4096, DType::BF16);
        let batch_block = |batch| {
            let g = Gemm { batch, ..batched };
            let plan = rows_plan(&g, &p).unwrap();
            (plan.block_rows(), plan.block_cols())
        };
        assert_eq!(batch_block(4), (16, 64));
        assert_eq!(batch_block(8), (16, 128));
    }

    #[test]
    fn the_rows_kernel_needs_16_byte_pieces() {
        let ok = at(0x1000, 0x2000);
        let g = call(8, 304, 4096, DType::BF16);
        let reason = |g: &Gemm, p: &GemmPointers| rows_plan(g, p).unwrap_err().to_string();
        assert!(rows_plan(&g, &ok).is_ok());
        // A or B not 16-byte aligned.
        assert!(reason(&g, &at(0x1008, 0x2000)).contains("A's address 0x1008"));
        assert!(reason(&g, &at(0x1000, 0x2004)).contains("B's address 0x2004"));
        // Leading dimensions that are not a multiple of 16 bytes: K = 4095 (A's rows), N =
        // 300 is 600 bytes (B's rows).
        let k_4095 = call(8, 304, 4095, DType::BF16);
        assert!(reason(&k_4095, &ok).contains("A's leading dimension 4095"));
        let n_300 = call(8, 300, 4096, DType::BF16);
        assert!(reason(&n_300, &ok).contains("B's leading dimension 300"));
        // A column-major A is read along K only as a single row with adjacent elements.
        let mut col_a = call(1, 256, 256, DType::F32);
        col_a.a = Operand {
            layout: Layout::ColMajor,
            ld: 1,
            ..col_a.a
        };
        assert!(rows_plan(&col_a, &ok).is_ok());
        col_a.m = 2;
        col_a.a.ld = 2;
        assert_eq!(rows_plan(&col_a, &ok), Err(Unsupported::ANotAlongK));
        // A batch stride that breaks the alignment of the second entry.
        let mut batched = call(4, 256, 256, DType::F16);
        batched.batch = 2;
        batched.a.batch_stride = 4 * 256 + 1;
        assert!(reason(&batched, &ok).contains("A's batch stride 1025"));
        batched.a.batch_stride = 4 * 256 + 8;
        assert!(rows_plan(&batched, &ok).is_ok());
    }

    #[test]
    fn every_rows_variant_has_its_entry_point() {
        let p = at(0x1000, 0x2000);
        let name = |m, n, dtype, layout| {
            let mut g = call(m, n, 256, dtype);
            g.b.layout = layout;
            g.b.ld = if layout == Layout::ColMajor { 256 } else { n };
            rows_plan(&g, &p).unwrap().entry.spec().name
        };
        assert_eq!(
            name(1, 256, DType::BF16, Layout::ColMajor),
            "sgemm_bi_scalar_rows_bf16_c_m4"
        );
        assert_eq!(
            name(16, 256, DType::F32, Layout::RowMajor),
            "sgemm_bi_scalar_rows_f32_r_m16"
        );
        assert_eq!(
            name(32, 4096, DType::F16, Layout::ColMajor),
            "sgemm_bi_scalar_rows_f16_c_m16_n64"
        );
        assert_eq!(
            name(64, 14336, DType::BF16, Layout::RowMajor),
            "sgemm_bi_scalar_rows_bf16_r_m16_n128"
        );
        // Every slot of the table: its element, B's layout and lane tile, and a block of the
        // tile's size.
        for (e, by_layout) in ROWS.iter().enumerate() {
            for (b, by_variant) in by_layout.iter().enumerate() {
                for (v, id) in by_variant.iter().enumerate() {
                    let kind = id.spec().kind;
                    let (tm, tn) = rows::VARIANTS[v];
                    assert_eq!(kind.element, ELEMENTS[e]);
                    assert_eq!((kind.a_k_contiguous, kind.b_k_contiguous), (true, b == 1));
                    assert_eq!(
                        kind.family,
                        Family::ScalarRows {
                            rows_per_warp: tm,
                            cols_per_lane: tn
                        }
                    );
                    let plan = RowsPlan {
                        variant: v,
                        b_k_contiguous: b == 1,
                        entry: *id,
                    };
                    let block = (plan.block_rows(), plan.block_cols());
                    assert_eq!(block, kind.family.tile());
                }
            }
        }
    }

    #[test]
    fn every_width_has_its_entry_point() {
        let name = |table: &TiledTable, dtype, l: usize, t: usize| {
            table[element_index(dtype)][l][t].spec().name
        };
        assert_eq!(
            name(&SM90, DType::BF16, 2, 1),
            "sgemm_bi_scalar_bf16_cr_n64"
        );
        assert_eq!(name(&SM90, DType::F32, 0, 0), "sgemm_bi_scalar_f32_rr_sm90");
        assert_eq!(name(&PORTABLE, DType::F32, 0, 0), "sgemm_bi_scalar_f32_rr");
        assert_eq!(name(&SM90, DType::F16, 1, 0), "sgemm_bi_scalar_f16_rc_sm90");
        assert_eq!(name(&PORTABLE, DType::F16, 1, 0), "sgemm_bi_scalar_f16_rc");
        for table in [&PORTABLE, &SM90] {
            for (e, row) in table.iter().enumerate() {
                for (l, pair) in row.iter().enumerate() {
                    for (t, id) in pair.iter().enumerate() {
                        let kind = id.spec().kind;
                        assert_eq!(kind.element, ELEMENTS[e]);
                        let layouts = (kind.a_k_contiguous, kind.b_k_contiguous);
                        assert_eq!(layouts, k_contiguous(LAYOUTS[l]));
                        assert_eq!(kind.family, Family::ScalarTiled { tile: TILES[t] });
                        assert_eq!(tile_bn(TILES[t]), kind.family.tile().1);
                    }
                }
            }
        }
    }
}
