//! Choosing and launching the scalar-tier kernels. Every candidate computes each element with
//! the same chain (see `kernels-gpu/src/scalar`), so the choice is free to depend on dtype and
//! layouts.

use std::sync::Arc;

use cudarc::driver::{result, sys};

use super::kernel_abi::{gemm_params, launch};
use super::modules::{Lazy, ModuleLoader};
use crate::error::{Error, Result};
use crate::types::{DType, Gemm, GemmPointers, Layout, OutputMode};
use sgemm_bi_abi::params::GemmParams;
use sgemm_bi_abi::scalar::{narrow, rows, wide, BM, THREADS};

const DTYPES: [DType; 3] = [DType::F32, DType::BF16, DType::F16];
pub(crate) const LAYOUTS: [(Layout, Layout); 4] = [
    (Layout::RowMajor, Layout::RowMajor),
    (Layout::RowMajor, Layout::ColMajor),
    (Layout::ColMajor, Layout::RowMajor),
    (Layout::ColMajor, Layout::ColMajor),
];

/// The two tile widths of the scalar kernels (`sgemm_bi_abi::scalar`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Width {
    /// 128 × 128 tiles.
    Wide,
    /// 128 × 64 tiles.
    Narrow,
}

impl Width {
    fn index(self) -> usize {
        self as usize
    }

    /// Output columns per tile.
    fn bn(self) -> u32 {
        match self {
            Width::Wide => wide::BN,
            Width::Narrow => narrow::BN,
        }
    }

    fn smem_bytes(self) -> u32 {
        match self {
            Width::Wide => wide::SMEM_BYTES,
            Width::Narrow => narrow::SMEM_BYTES,
        }
    }

    /// Time of one tile relative to a wide one, both with the multiprocessor shared as
    /// usual: half the work at about 77 % of the wide tiles' rate (H200: 32.5 against 42.4
    /// TFLOP/s of f32 with full waves, docs/perf-notes.md). It only ranks the two widths.
    fn relative_tile_time(self) -> f64 {
        match self {
            Width::Wide => 1.0,
            Width::Narrow => 0.65,
        }
    }

    fn suffix(self) -> &'static str {
        match self {
            Width::Wide => "",
            Width::Narrow => "_n64",
        }
    }
}

/// How many of a problem's columns, from column 0, go to wide tiles; the rest go to narrow
/// ones, in a second launch.
///
/// Chosen by whole waves: the last wave of a launch is paid in full however few tiles it
/// holds, so each part costs `⌈tiles / resident⌉` waves of its tile time (wide 1.0, narrow
/// [`Width::relative_tile_time`]), and a second launch a little more. 2048 × 3072 on an H200
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
    let waves = |tiles: usize, w: Width| tiles.div_ceil(resident[w.index()].max(1) as usize);
    let wide_cols = (wide_tiles_n * Width::Wide.bn() as usize).min(n);
    let narrow_tiles_n = (n - wide_cols).div_ceil(Width::Narrow.bn() as usize);
    let wide = waves(tiles_m * wide_tiles_n, Width::Wide) as f64;
    let narrow =
        waves(tiles_m * narrow_tiles_n, Width::Narrow) as f64 * Width::Narrow.relative_tile_time();
    let second = if wide_tiles_n > 0 && narrow_tiles_n > 0 {
        SECOND_LAUNCH
    } else {
        0.0
    };
    wide + narrow + second
}

/// `rr`, `rc`, `cr` or `cc`: the operand layouts as entry-point names spell them.
pub(crate) fn layout_suffix((a, b): (Layout, Layout)) -> String {
    let l = |x| if x == Layout::RowMajor { 'r' } else { 'c' };
    format!("{}{}", l(a), l(b))
}

/// Which module a scalar entry point comes from: the sm80 module, which every GPU from
/// sm_80 on loads, or the sm90a module's `_sm90` entries (wide tiles with more k steps per
/// loop trip; f32 copied by cp.async), which replace their sm80 twins on compute capability
/// 9.0.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Source {
    Sm80,
    Sm90a,
}

/// The module that holds the entry of `width` in a table that prefers the sm90a entries.
fn source(width: Width, sm90: bool) -> Source {
    if sm90 && width == Width::Wide {
        Source::Sm90a
    } else {
        Source::Sm80
    }
}

fn entry_name(dtype: DType, layouts: (Layout, Layout), width: Width, from: Source) -> String {
    format!(
        "sgemm_bi_scalar_{}_{}{}{}",
        dtype.name(),
        layout_suffix(layouts),
        width.suffix(),
        if from == Source::Sm90a { "_sm90" } else { "" }
    )
}

/// A call the few-row kernels (`kernels-gpu/src/scalar/rows.rs`) take: which of
/// [`rows::VARIANTS`] (rows per warp) and B's layout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct RowsPlan {
    /// Index into [`rows::VARIANTS`].
    variant: usize,
    b_k_contiguous: bool,
}

impl RowsPlan {
    fn rows_per_warp(self) -> u32 {
        rows::VARIANTS[self.variant]
    }

    /// Output rows per block.
    fn block_rows(self) -> u32 {
        rows::WARPS * self.rows_per_warp()
    }
}

/// Whether the few-row kernels take `g` on pointers `p`, and with which variant.
///
/// They take M ≤ 64 (above that the 128-row tiles fill the GPU), with A read along K
/// (row-major, or a single row whose elements are adjacent) and every operand's base,
/// leading dimension and batch stride a multiple of 16 bytes, since they copy A and B in
/// 16-byte `cp.async` pieces. The tiled kernels take everything else; both compute every
/// element with the same chain, so the choice changes only speed.
pub(crate) fn rows_plan(g: &Gemm, p: &GemmPointers) -> Option<RowsPlan> {
    if g.m == 0 || g.m > 64 {
        return None;
    }
    let bytes = g.a.dtype.size();
    let aligned = |addr: usize, elements: usize| addr % 16 == 0 && (elements * bytes) % 16 == 0;
    let a_along_k = g.a.layout == Layout::RowMajor || (g.m == 1 && g.a.ld == 1);
    let a_ok = a_along_k
        && aligned(p.a as usize, if g.m > 1 { g.a.ld } else { 0 })
        && (g.batch == 1 || aligned(0, g.a.batch_stride));
    let b_ok = aligned(p.b as usize, g.b.ld) && (g.batch == 1 || aligned(0, g.b.batch_stride));
    if !(a_ok && b_ok) {
        return None;
    }
    let variant = rows::VARIANTS
        .iter()
        .position(|&tm| g.m <= (rows::WARPS * tm) as usize)
        .unwrap_or(rows::VARIANTS.len() - 1);
    Some(RowsPlan {
        variant,
        b_k_contiguous: g.b.layout == Layout::ColMajor,
    })
}

fn rows_entry_name(dtype: DType, plan: RowsPlan) -> String {
    format!(
        "sgemm_bi_scalar_rows_{}_{}_m{}",
        dtype.name(),
        if plan.b_k_contiguous { 'c' } else { 'r' },
        plan.block_rows()
    )
}

/// A loaded scalar entry point and the number of its blocks the whole device runs at once.
#[derive(Clone, Copy)]
struct ScalarFunction {
    function: sys::CUfunction,
    resident: u32,
}

/// Twenty-four scalar entry points, `[dtype][layout pair][width]`, each looked up on its
/// first call.
struct Table {
    functions: [[[Lazy<ScalarFunction>; 2]; 4]; 3],
    /// The wide entries are the sm90a module's `_sm90` ones.
    sm90: bool,
}

impl Table {
    fn new(sm90: bool) -> Self {
        Table {
            functions: Default::default(),
            sm90,
        }
    }
}

/// The scalar entry points of a device: the sm80 module's, and on compute capability 9.0 a
/// second table with the sm90a module's faster wide entries. Both compute every
/// element with the same chain, so the choice changes only speed.
pub(crate) struct ScalarKernels {
    sm80: Arc<ModuleLoader>,
    /// The few-row entry points, `[dtype][B k-contiguous][variant]`, from the sm80 module.
    rows: [[[Lazy<sys::CUfunction>; rows::VARIANTS.len()]; 2]; 3],
    sm90a: Option<Arc<ModuleLoader>>,
    sms: u32,
    portable: Table,
    /// Present with the sm90a module.
    sm90a_table: Option<Table>,
}

impl ScalarKernels {
    /// The tables of the sm80 module's entry points and, when given, the sm90a module's,
    /// on a device with `sms` multiprocessors; loads nothing yet.
    pub(crate) fn new(sm80: Arc<ModuleLoader>, sm90a: Option<Arc<ModuleLoader>>, sms: u32) -> Self {
        ScalarKernels {
            sm90a_table: sm90a.as_ref().map(|_| Table::new(true)),
            rows: Default::default(),
            sm80,
            sm90a,
            sms,
            portable: Table::new(false),
        }
    }

    /// The entry point of `(d, l, width)` in `table`, looked up on first use with its
    /// occupancy.
    fn function(&self, table: &Table, d: usize, l: usize, width: Width) -> Result<ScalarFunction> {
        table.functions[d][l][width.index()]
            .get_or_try(|| {
                let from = source(width, table.sm90);
                let name = entry_name(DTYPES[d], LAYOUTS[l], width, from);
                let module = match from {
                    Source::Sm80 => &self.sm80,
                    Source::Sm90a => self.sm90a.as_ref().expect("an sm90 table has the module"),
                };
                let function = module.function(&name)?;
                // SAFETY: `function` is a function of a module loaded in the current context.
                let per_sm = unsafe {
                    result::occupancy::max_active_block_per_multiprocessor(
                        function,
                        THREADS as i32,
                        width.smem_bytes() as usize,
                    )
                }
                .map_err(|e| Error::Driver {
                    call: "cuOccupancyMaxActiveBlocksPerMultiprocessor",
                    message: format!("{name}: {e}"),
                })?;
                Ok(ScalarFunction {
                    function,
                    resident: (per_sm.max(1) as u32).saturating_mul(self.sms),
                })
            })
            .copied()
    }

    /// # Safety
    /// As for `CudaBackend::gemm`, with the context current on this thread.
    pub(crate) unsafe fn launch(
        &self,
        g: &Gemm,
        p: &GemmPointers,
        stream: sys::CUstream,
        portable_only: bool,
    ) -> Result<()> {
        let d = DTYPES.iter().position(|&x| x == g.a.dtype).unwrap();
        if let Some(plan) = rows_plan(g, p) {
            // SAFETY: forwarded contract; `rows_plan` checked what the kernel needs.
            return unsafe { self.launch_rows(g, p, d, plan, stream) };
        }
        let table = match &self.sm90a_table {
            Some(t) if !portable_only => t,
            _ => &self.portable,
        };
        let layouts = (g.a.layout, g.b.layout);
        let l = LAYOUTS.iter().position(|&x| x == layouts).unwrap();
        // Both widths' occupancy decide the split, so the first call looks both up.
        let wide = self.function(table, d, l, Width::Wide)?;
        let narrow = self.function(table, d, l, Width::Narrow)?;
        let wide_cols = wide_columns(g.m, g.n, g.batch, [wide.resident, narrow.resident]);
        let full = gemm_params(g, p, BM, wide::BN);
        // The wide part: columns 0 .. wide_cols.
        if wide_cols > 0 {
            let params = GemmParams {
                n: wide_cols as u64,
                tiles_n: wide_cols.div_ceil(wide::BN as usize) as u64,
                ..full
            };
            // SAFETY: as below.
            unsafe { self.launch_part(table, g, wide, Width::Wide, params, stream)? };
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
                tiles_n: (g.n - wide_cols).div_ceil(narrow::BN as usize) as u64,
                ..full
            };
            // SAFETY: as below.
            unsafe { self.launch_part(table, g, narrow, Width::Narrow, params, stream)? };
        }
        Ok(())
    }

    /// Launches the few-row kernel of `plan` on the whole call, one block per tile.
    ///
    /// # Safety
    /// As for `launch`; `plan` is `rows_plan(g, p)`.
    unsafe fn launch_rows(
        &self,
        g: &Gemm,
        p: &GemmPointers,
        d: usize,
        plan: RowsPlan,
        stream: sys::CUstream,
    ) -> Result<()> {
        let tm = plan.rows_per_warp();
        let smem = rows::smem_bytes(tm, g.a.dtype.size() as u32);
        let function =
            *self.rows[d][plan.b_k_contiguous as usize][plan.variant].get_or_try(|| {
                self.sm80
                    .function_with_smem(&rows_entry_name(g.a.dtype, plan), smem)
            })?;
        let params = gemm_params(g, p, plan.block_rows(), rows::BN);
        // SAFETY: the block size and shared memory are the ones the kernel is built for;
        // `rows_plan` checked its layout and alignment; the buffers satisfy the caller's
        // contract.
        unsafe {
            launch(
                function,
                || rows_entry_name(g.a.dtype, plan),
                rows::THREADS,
                smem,
                u32::MAX,
                params,
                stream,
            )
        }
    }

    /// Launches one part of a call in tiles of `width`.
    ///
    /// # Safety
    /// As for `launch`; `params` describes a column range of the call's problem.
    unsafe fn launch_part(
        &self,
        table: &Table,
        g: &Gemm,
        f: ScalarFunction,
        width: Width,
        params: GemmParams,
        stream: sys::CUstream,
    ) -> Result<()> {
        let layouts = (g.a.layout, g.b.layout);
        // At most one wave of blocks, which then loop over the tiles (block b takes tiles b,
        // b + grid, …): measured on the H200, as fast as one block per tile for f32 and 14 %
        // faster for bf16 at 4096³ (docs/perf-notes.md, "Scalar tier").
        // SAFETY: the block size and shared memory are the ones the kernel is built for; the
        // buffers satisfy the caller's contract.
        unsafe {
            launch(
                f.function,
                || entry_name(g.a.dtype, layouts, width, source(width, table.sm90)),
                THREADS,
                width.smem_bytes(),
                f.resident,
                params,
                stream,
            )
        }
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
    fn few_rows_take_the_rows_kernel_by_m() {
        let p = at(0x1000, 0x2000);
        let plan = |m| rows_plan(&call(m, 4096, 4096, DType::BF16), &p).map(|r| r.block_rows());
        assert_eq!(plan(1), Some(4));
        assert_eq!(plan(4), Some(4));
        assert_eq!(plan(5), Some(16));
        assert_eq!(plan(16), Some(16));
        assert_eq!(plan(17), Some(32));
        assert_eq!(plan(32), Some(32));
        assert_eq!(plan(33), Some(64));
        assert_eq!(plan(64), Some(64));
        assert_eq!(plan(65), None);
        assert_eq!(plan(0), None);
    }

    #[test]
    fn the_rows_kernel_needs_16_byte_pieces() {
        let ok = at(0x1000, 0x2000);
        let g = call(8, 304, 4096, DType::BF16);
        assert!(rows_plan(&g, &ok).is_some());
        // A or B not 16-byte aligned.
        assert!(rows_plan(&g, &at(0x1008, 0x2000)).is_none());
        assert!(rows_plan(&g, &at(0x1000, 0x2004)).is_none());
        // Leading dimensions that are not a multiple of 16 bytes: K = 4095 (A's rows), N =
        // 300 is 600 bytes (B's rows).
        assert!(rows_plan(&call(8, 304, 4095, DType::BF16), &ok).is_none());
        assert!(rows_plan(&call(8, 300, 4096, DType::BF16), &ok).is_none());
        // A column-major A is read along K only as a single row with adjacent elements.
        let mut col_a = call(1, 256, 256, DType::F32);
        col_a.a = Operand {
            layout: Layout::ColMajor,
            ld: 1,
            ..col_a.a
        };
        assert!(rows_plan(&col_a, &ok).is_some());
        col_a.m = 2;
        col_a.a.ld = 2;
        assert!(rows_plan(&col_a, &ok).is_none());
        // A batch stride that breaks the alignment of the second entry.
        let mut batched = call(4, 256, 256, DType::F16);
        batched.batch = 2;
        batched.a.batch_stride = 4 * 256 + 1;
        assert!(rows_plan(&batched, &ok).is_none());
        batched.a.batch_stride = 4 * 256 + 8;
        assert!(rows_plan(&batched, &ok).is_some());
    }

    #[test]
    fn every_rows_variant_has_an_entry_point_name() {
        let plan = |variant, b_k_contiguous| RowsPlan {
            variant,
            b_k_contiguous,
        };
        assert_eq!(
            rows_entry_name(DType::BF16, plan(0, true)),
            "sgemm_bi_scalar_rows_bf16_c_m4"
        );
        assert_eq!(
            rows_entry_name(DType::F32, plan(1, false)),
            "sgemm_bi_scalar_rows_f32_r_m16"
        );
        assert_eq!(
            rows_entry_name(DType::F16, plan(2, true)),
            "sgemm_bi_scalar_rows_f16_c_m32"
        );
        assert_eq!(
            rows_entry_name(DType::F16, plan(3, true)),
            "sgemm_bi_scalar_rows_f16_c_m64"
        );
    }

    #[test]
    fn every_width_has_an_entry_point_name() {
        let name =
            |dtype, layouts, width, sm90| entry_name(dtype, layouts, width, source(width, sm90));
        assert_eq!(
            name(DType::BF16, LAYOUTS[2], Width::Narrow, true),
            "sgemm_bi_scalar_bf16_cr_n64"
        );
        assert_eq!(
            name(DType::F32, LAYOUTS[0], Width::Wide, true),
            "sgemm_bi_scalar_f32_rr_sm90"
        );
        assert_eq!(
            name(DType::F32, LAYOUTS[0], Width::Wide, false),
            "sgemm_bi_scalar_f32_rr"
        );
        assert_eq!(
            name(DType::F16, LAYOUTS[1], Width::Wide, true),
            "sgemm_bi_scalar_f16_rc_sm90"
        );
        assert_eq!(
            name(DType::F16, LAYOUTS[1], Width::Wide, false),
            "sgemm_bi_scalar_f16_rc"
        );
    }
}
