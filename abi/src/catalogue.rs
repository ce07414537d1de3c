//! The kernel catalogue: every entry point of every PTX module, named once.
//!
//! [`kernel_catalogue!`](crate::kernel_catalogue) holds the one list. Three readers expand
//! or read it, so that a kernel cannot be named on one side only:
//!
//! - the device crate (`kernels-gpu/src/entry.rs`) expands it into the `#[no_mangle]`
//!   entry points, one per line, in the list's order (which is the PTX's order);
//! - this module expands it into [`KERNELS`], a `const` table of [`KernelSpec`]s: the name,
//!   module, element type, operand layouts, tile and parameter type of each entry, and its
//!   block size, shared memory and launch bounds;
//! - the root `build.rs` reads [`KERNELS`] for each entry's `.maxntid` / `.minnctapersm`
//!   (which rustc cannot emit) and checks that the PTX has exactly the catalogue's entries;
//!   the host finds an entry by a typed [`Kind`] key ([`find`]), never by a name it builds.
//!
//! Why an X-macro and not a `const` table the device code reads: an entry point is an item
//! (`#[no_mangle] extern "ptx-kernel" fn`) whose generic arguments are types and consts of
//! the device crate, which a table of values cannot instantiate; a `macro_rules!` list can
//! feed both the items and the table, and needs no dependency (no proc macro, no `paste`),
//! so every name is written out whole.

use crate::{hopper, scalar, tensor};

/// The PTX module an entry point is built into (`build.rs`'s `MODULES`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Module {
    /// Everything that needs nothing newer than Ampere; loaded on every GPU from sm_80 on.
    Sm80,
    /// wgmma + TMA, and the scalar tiles with longer loop trips; compute capability 9.0 only.
    Sm90a,
}

impl Module {
    /// The module's name, as `build.rs` and the embedded images spell it.
    pub const fn name(self) -> &'static str {
        match self {
            Module::Sm80 => "sm80",
            Module::Sm90a => "sm90a",
        }
    }
}

/// The input element type of an entry (A and B).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Element {
    F32,
    Bf16,
    F16,
}

impl Element {
    /// Bytes of one element.
    pub const fn bytes(self) -> u32 {
        match self {
            Element::F32 => 4,
            Element::Bf16 | Element::F16 => 2,
        }
    }
}

/// Which `#[repr(C)]` struct an entry takes, by value, as its one parameter
/// ([`crate::params`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ParamKind {
    /// [`crate::params::GemmParams`].
    Gemm,
    /// [`crate::params::HopperParams`] (tensor maps first; its PTX parameter is declared
    /// `.align 64`, as the driver needs).
    Hopper,
    /// [`crate::params::GroupedHopperParams`] (a `HopperParams` first, so also `.align 64`).
    GroupedHopper,
    /// [`crate::params::GroupedParams`] (no tensor maps).
    Grouped,
    /// [`crate::params::GroupedReductionParams`] (no tensor maps).
    GroupedReduction,
}

impl ParamKind {
    /// Whether the parameter starts with tensor maps, which the driver needs 64-byte aligned.
    pub const fn holds_tensor_maps(self) -> bool {
        matches!(self, ParamKind::Hopper | ParamKind::GroupedHopper)
    }
}

/// The two tile widths of the scalar kernels ([`scalar::wide`], [`scalar::narrow`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ScalarTile {
    /// 128 × 128 tiles.
    Wide,
    /// 128 × 64 tiles.
    Narrow,
}

/// How the consumer warpgroups of a Hopper kernel share the work.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Schedule {
    /// Both work on each tile, 64 rows each.
    Cooperative,
    /// Each owns every other tile: one's epilogue overlaps the other's mainloop.
    PingPong,
}

/// What an entry is, without its name: the typed key the host looks entries up by.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Kind {
    pub module: Module,
    pub element: Element,
    /// A is K-contiguous (row-major A); B is K-contiguous (column-major B).
    pub a_k_contiguous: bool,
    pub b_k_contiguous: bool,
    pub family: Family,
}

/// A kernel family and the configuration that tells its entries apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Family {
    /// The scalar tier's 128-row tiles (`scalar::gemm`).
    ScalarTiled { tile: ScalarTile },
    /// The scalar tier's few-row kernel (`scalar::rows`), a lane tile of
    /// [`scalar::rows::VARIANTS`]: `rows_per_warp` (TM) rows × `cols_per_lane` (TN) columns.
    /// A is always read along K.
    ScalarRows {
        rows_per_warp: u32,
        cols_per_lane: u32,
    },
    /// The scalar tier's grouped kernel (`scalar::grouped`): one thread per output element of
    /// the rows split, the group ends read on the device. A is always read along K.
    ScalarGrouped,
    /// The scalar tier's grouped kernel for a split reduction (`scalar::grouped::
    /// gemm_reduction`): one thread per output element of every group's C, each over its
    /// group's K range, the group ends read on the device. Any layout of A and B (strides in
    /// the parameters); its kinds say neither operand is K-contiguous.
    ScalarGroupedReduction,
    /// The tensor-core tier's mma.sync kernels; `cp_async`: 16-byte `cp.async` loads (else
    /// element by element, any alignment).
    Mma { cp_async: bool },
    /// The tensor-core tier's wgmma + TMA kernels, (bm, bn) tiles in clusters of `cluster`.
    Hopper {
        bm: u32,
        bn: u32,
        cluster: u32,
        schedule: Schedule,
    },
    /// The Hopper kernels' grouped form (`hopper::grouped`): (BM, bn) tiles of each group's
    /// rows, cooperative consumers, in clusters of `cluster` blocks along a group's rows, the
    /// group ends read on the device; with `dynamic`, each block takes its next tile from a
    /// counter when it is ready for one (no clusters), else tiles b, b + grid, ….
    HopperGrouped {
        bn: u32,
        cluster: u32,
        dynamic: bool,
    },
    /// The grouped form for a split reduction (`hopper::grouped::gemm_reduction`, the
    /// experts' weight gradient): (BM, bn) tiles of each group's C over the group's K range,
    /// in clusters of `cluster` blocks along M (sharing each stage's B tile); with `dynamic`,
    /// each block (each cluster) takes its next tile from a counter when it is ready for one.
    HopperGroupedReduction {
        bn: u32,
        cluster: u32,
        dynamic: bool,
    },
}

/// `.maxntid` and `.minnctapersm` of an entry: what rustc cannot say in Rust source, and
/// `build.rs` writes into the PTX.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct LaunchBounds {
    /// The most threads a block of the entry is launched with.
    pub max_threads: u32,
    /// Blocks per SM ptxas must leave room for (it caps registers at 64 Ki / (that × threads)).
    pub min_blocks_per_sm: u32,
}

impl Family {
    /// The launch bounds of the family's entries.
    ///
    /// - Few-row scalar: 192 threads ([`scalar::rows::THREADS`]: four chain warps, two
    ///   producers); two blocks per SM allow 168 registers, above the 128 at which ptxas
    ///   spilled the 64-row entries' unrolled stages.
    /// - Tiled scalar: 256 threads ([`scalar::THREADS`]), two blocks per SM to hide latency,
    ///   which caps them at 128 registers (ptxas fits them unspilled).
    /// - Grouped scalar (both splits): 256 threads ([`scalar::grouped::THREADS`]), four
    ///   blocks per SM (64 registers: one chain a thread needs few).
    /// - mma.sync: 256 threads too ([`tensor::THREADS`]), two blocks per SM (2 × 80 KiB of
    ///   shared memory fits sm_80's 164 KiB), so also at most 128 registers.
    /// - Hopper: 384 threads (`hopper::threads(hopper::BM)`, the narrow tiles launch fewer),
    ///   one block per SM (they use most of its shared memory); the cap at entry lets
    ///   `setmaxnreg` move registers from the producer warpgroup to the consumers.
    pub const fn launch_bounds(self) -> LaunchBounds {
        let (max_threads, min_blocks_per_sm) = match self {
            Family::ScalarRows { .. } => (scalar::rows::THREADS, 2),
            Family::ScalarTiled { .. } => (scalar::THREADS, 2),
            Family::ScalarGrouped | Family::ScalarGroupedReduction => {
                (scalar::grouped::THREADS, scalar::grouped::BLOCKS_PER_SM)
            }
            Family::Mma { .. } => (tensor::THREADS, 2),
            Family::Hopper { .. }
            | Family::HopperGrouped { .. }
            | Family::HopperGroupedReduction { .. } => (hopper::threads(hopper::BM), 1),
        };
        LaunchBounds {
            max_threads,
            min_blocks_per_sm,
        }
    }

    /// The parameter type of the family's entries.
    pub const fn param(self) -> ParamKind {
        match self {
            Family::Hopper { .. } => ParamKind::Hopper,
            Family::HopperGrouped { .. } | Family::HopperGroupedReduction { .. } => {
                ParamKind::GroupedHopper
            }
            Family::ScalarGrouped => ParamKind::Grouped,
            Family::ScalarGroupedReduction => ParamKind::GroupedReduction,
            _ => ParamKind::Gemm,
        }
    }

    /// Output rows and columns of one block tile.
    pub const fn tile(self) -> (u32, u32) {
        match self {
            Family::ScalarTiled {
                tile: ScalarTile::Wide,
            } => (scalar::BM, scalar::wide::BN),
            Family::ScalarTiled {
                tile: ScalarTile::Narrow,
            } => (scalar::BM, scalar::narrow::BN),
            Family::ScalarRows {
                rows_per_warp,
                cols_per_lane,
            } => (
                scalar::rows::WARPS * rows_per_warp,
                scalar::rows::block_cols(cols_per_lane),
            ),
            // A block's elements run along a row (and on into the next).
            Family::ScalarGrouped | Family::ScalarGroupedReduction => (1, scalar::grouped::THREADS),
            Family::Mma { .. } => (tensor::BM, tensor::BN),
            Family::Hopper { bm, bn, .. } => (bm, bn),
            Family::HopperGrouped { bn, .. } | Family::HopperGroupedReduction { bn, .. } => {
                (hopper::BM, bn)
            }
        }
    }

    /// Threads per block the host launches.
    pub const fn threads(self) -> u32 {
        match self {
            // Ping-pong consumers: two warpgroups whatever the tile's height.
            Family::Hopper {
                schedule: Schedule::PingPong,
                ..
            } => hopper::threads(hopper::BM),
            Family::Hopper { bm, .. } => hopper::threads(bm),
            Family::HopperGrouped { .. } | Family::HopperGroupedReduction { .. } => {
                hopper::threads(hopper::BM)
            }
            _ => self.launch_bounds().max_threads,
        }
    }

    /// Dynamic shared memory of a block, for inputs of `element`.
    pub const fn smem_bytes(self, element: Element) -> u32 {
        match self {
            Family::ScalarTiled {
                tile: ScalarTile::Wide,
            } => scalar::wide::SMEM_BYTES,
            Family::ScalarTiled {
                tile: ScalarTile::Narrow,
            } => scalar::narrow::SMEM_BYTES,
            Family::ScalarRows {
                rows_per_warp,
                cols_per_lane,
            } => scalar::rows::smem_bytes(rows_per_warp, cols_per_lane, element.bytes()),
            Family::ScalarGrouped | Family::ScalarGroupedReduction => 0,
            Family::Mma { .. } => tensor::SMEM_BYTES,
            Family::Hopper { .. }
            | Family::HopperGrouped { .. }
            | Family::HopperGroupedReduction { .. } => hopper::SMEM_BYTES,
        }
    }

    const fn same(self, other: Family) -> bool {
        match (self, other) {
            (Family::ScalarTiled { tile: x }, Family::ScalarTiled { tile: y }) => {
                x as u8 == y as u8
            }
            (
                Family::ScalarRows {
                    rows_per_warp: x,
                    cols_per_lane: xn,
                },
                Family::ScalarRows {
                    rows_per_warp: y,
                    cols_per_lane: yn,
                },
            ) => x == y && xn == yn,
            (Family::ScalarGrouped, Family::ScalarGrouped) => true,
            (Family::ScalarGroupedReduction, Family::ScalarGroupedReduction) => true,
            (Family::Mma { cp_async: x }, Family::Mma { cp_async: y }) => x == y,
            (
                Family::Hopper {
                    bm,
                    bn,
                    cluster,
                    schedule,
                },
                Family::Hopper {
                    bm: bm2,
                    bn: bn2,
                    cluster: cluster2,
                    schedule: schedule2,
                },
            ) => bm == bm2 && bn == bn2 && cluster == cluster2 && schedule as u8 == schedule2 as u8,
            (
                Family::HopperGrouped {
                    bn,
                    cluster,
                    dynamic,
                },
                Family::HopperGrouped {
                    bn: bn2,
                    cluster: cluster2,
                    dynamic: dynamic2,
                },
            ) => bn == bn2 && cluster == cluster2 && dynamic == dynamic2,
            (
                Family::HopperGroupedReduction {
                    bn,
                    cluster,
                    dynamic,
                },
                Family::HopperGroupedReduction {
                    bn: bn2,
                    cluster: cluster2,
                    dynamic: dynamic2,
                },
            ) => bn == bn2 && cluster == cluster2 && dynamic == dynamic2,
            _ => false,
        }
    }
}

impl Kind {
    /// `==`, usable in `const` code.
    pub const fn same(&self, other: &Kind) -> bool {
        self.module as u8 == other.module as u8
            && self.element as u8 == other.element as u8
            && self.a_k_contiguous == other.a_k_contiguous
            && self.b_k_contiguous == other.b_k_contiguous
            && self.family.same(other.family)
    }
}

/// One entry point of the catalogue.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct KernelSpec {
    /// The PTX entry name (`.visible .entry <name>`).
    pub name: &'static str,
    pub kind: Kind,
}

impl KernelSpec {
    /// The parameter type the entry takes.
    pub const fn param(&self) -> ParamKind {
        self.kind.family.param()
    }

    /// The entry's `.maxntid` / `.minnctapersm`.
    pub const fn launch_bounds(&self) -> LaunchBounds {
        self.kind.family.launch_bounds()
    }

    /// Threads per block the host launches.
    pub const fn threads(&self) -> u32 {
        self.kind.family.threads()
    }

    /// Dynamic shared memory of a block.
    pub const fn smem_bytes(&self) -> u32 {
        self.kind.family.smem_bytes(self.kind.element)
    }
}

/// The index in [`KERNELS`] of the entry of `kind`, if the catalogue has one.
pub const fn find(kind: &Kind) -> Option<usize> {
    let mut i = 0;
    while i < KERNELS.len() {
        if KERNELS[i].kind.same(kind) {
            return Some(i);
        }
        i += 1;
    }
    None
}

/// The one list of entry points. `$callback!` is invoked once with the whole list:
///
/// ```text
/// sm80 { <family> { <entry>; … } … }  sm90a { <family> { <entry>; … } … }
/// ```
///
/// with one line per entry point, in the order the device crate defines them (and the PTX
/// lists them). The columns of each family:
///
/// - `scalar_tiled`: name, element, A K-contiguous, B K-contiguous, tile (`wide` or
///   `narrow`, the module of `scalar`), k steps per loop trip (a constant of that module),
///   f32 operands copied by `cp.async`, whole K tiles read through cursors;
/// - `scalar_rows`: name, element, B K-contiguous, rows per warp, columns per lane;
/// - `scalar_grouped`: name, element, B K-contiguous (A is K-contiguous: the tokens' rows);
/// - `scalar_grouped_reduction`: name, element (any layout of A and B: strides in the
///   parameters);
/// - `mma`: name, element, A K-contiguous, B K-contiguous, 16-byte `cp.async` loads;
/// - `hopper`: name, element, A K-contiguous, B K-contiguous, BM, BN, cluster size,
///   schedule (`Cooperative` or `PingPong`);
/// - `hopper_grouped`: name, element, B K-contiguous, BN, cluster size, dynamic tile order
///   (A is K-contiguous: the tokens' rows);
/// - `hopper_grouped_reduction`: name, element, BN, cluster size, dynamic tile order (A
///   M-contiguous, B N-contiguous: the tokens' rows of Xᵀ and of dY).
///
/// Those of the tiled scalar entries' columns that only the device code uses (steps,
/// `cp.async`, cursors) are per entry because ptxas decides them: `tests/ptx_vendored.rs`
/// fails on any spill, and these are the choices that assemble without one.
#[macro_export]
macro_rules! kernel_catalogue {
    ($callback:ident) => {
        $callback! {
            sm80 {
                // The last column, cursors: whether the entry reads its whole K tiles through
                // cursors (`scalar::mainloop::Cursor`), which cost no index arithmetic or
                // bounds test per K tile (f32 4096³ on the H200: 42.8 → 44.3 TFLOP/s in the
                // `_sm90` entries). A cursor per operand beside the general loop's state makes
                // ptxas spill some entries at 128 registers, for sm_80 or sm_90a: these keep
                // the general loads.
                scalar_tiled {
                    sgemm_bi_scalar_f32_rr F32, true, false, wide, STEPS, false, false;
                    sgemm_bi_scalar_f32_rr_n64 F32, true, false, narrow, STEPS, false, true;
                    sgemm_bi_scalar_f32_rc F32, true, true, wide, STEPS, false, true;
                    sgemm_bi_scalar_f32_rc_n64 F32, true, true, narrow, STEPS, false, true;
                    sgemm_bi_scalar_f32_cr F32, false, false, wide, STEPS, false, false;
                    sgemm_bi_scalar_f32_cr_n64 F32, false, false, narrow, STEPS, false, false;
                    sgemm_bi_scalar_f32_cc F32, false, true, wide, STEPS, false, false;
                    sgemm_bi_scalar_f32_cc_n64 F32, false, true, narrow, STEPS, false, true;
                    sgemm_bi_scalar_bf16_rr Bf16, true, false, wide, STEPS, false, false;
                    sgemm_bi_scalar_bf16_rr_n64 Bf16, true, false, narrow, STEPS, false, true;
                    sgemm_bi_scalar_bf16_rc Bf16, true, true, wide, STEPS, false, true;
                    sgemm_bi_scalar_bf16_rc_n64 Bf16, true, true, narrow, STEPS, false, true;
                    sgemm_bi_scalar_bf16_cr Bf16, false, false, wide, STEPS, false, false;
                    sgemm_bi_scalar_bf16_cr_n64 Bf16, false, false, narrow, STEPS, false, true;
                    sgemm_bi_scalar_bf16_cc Bf16, false, true, wide, STEPS, false, false;
                    sgemm_bi_scalar_bf16_cc_n64 Bf16, false, true, narrow, STEPS, false, true;
                    sgemm_bi_scalar_f16_rr F16, true, false, wide, STEPS, false, false;
                    sgemm_bi_scalar_f16_rr_n64 F16, true, false, narrow, STEPS, false, true;
                    sgemm_bi_scalar_f16_rc F16, true, true, wide, STEPS, false, true;
                    sgemm_bi_scalar_f16_rc_n64 F16, true, true, narrow, STEPS, false, true;
                    sgemm_bi_scalar_f16_cr F16, false, false, wide, STEPS, false, false;
                    sgemm_bi_scalar_f16_cr_n64 F16, false, false, narrow, STEPS, false, true;
                    sgemm_bi_scalar_f16_cc F16, false, true, wide, STEPS, false, false;
                    sgemm_bi_scalar_f16_cc_n64 F16, false, true, narrow, STEPS, false, true;
                }
                // `_m<rows>[_n<columns>]`: blocks of 4, 8 or 16 rows × 32 columns (1, 2 or 4
                // rows per warp, one column per lane), of 8 or 16 rows × 64 columns (2 or 4
                // rows per warp, 2 columns per lane) and of 16 rows × 128 columns (4 rows per
                // warp, 4 columns per lane); A is read along K, so only B's layout names an
                // entry.
                scalar_rows {
                    sgemm_bi_scalar_rows_f32_r_m4 F32, false, 1, 1;
                    sgemm_bi_scalar_rows_f32_c_m4 F32, true, 1, 1;
                    sgemm_bi_scalar_rows_f32_r_m8 F32, false, 2, 1;
                    sgemm_bi_scalar_rows_f32_c_m8 F32, true, 2, 1;
                    sgemm_bi_scalar_rows_f32_r_m8_n64 F32, false, 2, 2;
                    sgemm_bi_scalar_rows_f32_c_m8_n64 F32, true, 2, 2;
                    sgemm_bi_scalar_rows_f32_r_m16 F32, false, 4, 1;
                    sgemm_bi_scalar_rows_f32_c_m16 F32, true, 4, 1;
                    sgemm_bi_scalar_rows_f32_r_m16_n64 F32, false, 4, 2;
                    sgemm_bi_scalar_rows_f32_c_m16_n64 F32, true, 4, 2;
                    sgemm_bi_scalar_rows_f32_r_m16_n128 F32, false, 4, 4;
                    sgemm_bi_scalar_rows_f32_c_m16_n128 F32, true, 4, 4;
                    sgemm_bi_scalar_rows_bf16_r_m4 Bf16, false, 1, 1;
                    sgemm_bi_scalar_rows_bf16_c_m4 Bf16, true, 1, 1;
                    sgemm_bi_scalar_rows_bf16_r_m8 Bf16, false, 2, 1;
                    sgemm_bi_scalar_rows_bf16_c_m8 Bf16, true, 2, 1;
                    sgemm_bi_scalar_rows_bf16_r_m8_n64 Bf16, false, 2, 2;
                    sgemm_bi_scalar_rows_bf16_c_m8_n64 Bf16, true, 2, 2;
                    sgemm_bi_scalar_rows_bf16_r_m16 Bf16, false, 4, 1;
                    sgemm_bi_scalar_rows_bf16_c_m16 Bf16, true, 4, 1;
                    sgemm_bi_scalar_rows_bf16_r_m16_n64 Bf16, false, 4, 2;
                    sgemm_bi_scalar_rows_bf16_c_m16_n64 Bf16, true, 4, 2;
                    sgemm_bi_scalar_rows_bf16_r_m16_n128 Bf16, false, 4, 4;
                    sgemm_bi_scalar_rows_bf16_c_m16_n128 Bf16, true, 4, 4;
                    sgemm_bi_scalar_rows_f16_r_m4 F16, false, 1, 1;
                    sgemm_bi_scalar_rows_f16_c_m4 F16, true, 1, 1;
                    sgemm_bi_scalar_rows_f16_r_m8 F16, false, 2, 1;
                    sgemm_bi_scalar_rows_f16_c_m8 F16, true, 2, 1;
                    sgemm_bi_scalar_rows_f16_r_m8_n64 F16, false, 2, 2;
                    sgemm_bi_scalar_rows_f16_c_m8_n64 F16, true, 2, 2;
                    sgemm_bi_scalar_rows_f16_r_m16 F16, false, 4, 1;
                    sgemm_bi_scalar_rows_f16_c_m16 F16, true, 4, 1;
                    sgemm_bi_scalar_rows_f16_r_m16_n64 F16, false, 4, 2;
                    sgemm_bi_scalar_rows_f16_c_m16_n64 F16, true, 4, 2;
                    sgemm_bi_scalar_rows_f16_r_m16_n128 F16, false, 4, 4;
                    sgemm_bi_scalar_rows_f16_c_m16_n128 F16, true, 4, 4;
                }
                mma {
                    sgemm_bi_tc_bf16_rr Bf16, true, false, true;
                    sgemm_bi_tc_bf16_rc Bf16, true, true, true;
                    sgemm_bi_tc_bf16_cr Bf16, false, false, true;
                    sgemm_bi_tc_bf16_cc Bf16, false, true, true;
                    sgemm_bi_tc_f16_rr F16, true, false, true;
                    sgemm_bi_tc_f16_rc F16, true, true, true;
                    sgemm_bi_tc_f16_cr F16, false, false, true;
                    sgemm_bi_tc_f16_cc F16, false, true, true;
                    sgemm_bi_tc_bf16_rr_unaligned Bf16, true, false, false;
                    sgemm_bi_tc_bf16_rc_unaligned Bf16, true, true, false;
                    sgemm_bi_tc_bf16_cr_unaligned Bf16, false, false, false;
                    sgemm_bi_tc_bf16_cc_unaligned Bf16, false, true, false;
                    sgemm_bi_tc_f16_rr_unaligned F16, true, false, false;
                    sgemm_bi_tc_f16_rc_unaligned F16, true, true, false;
                    sgemm_bi_tc_f16_cr_unaligned F16, false, false, false;
                    sgemm_bi_tc_f16_cc_unaligned F16, false, true, false;
                }
                // Grouped (Mixture-of-Experts), the rows split: the tokens' rows (A,
                // K-contiguous) split into groups by ends read on the device, each group times
                // its own B. `_r`/`_c`: B row- or column-major.
                scalar_grouped {
                    sgemm_bi_scalar_grouped_f32_r F32, false;
                    sgemm_bi_scalar_grouped_f32_c F32, true;
                    sgemm_bi_scalar_grouped_bf16_r Bf16, false;
                    sgemm_bi_scalar_grouped_bf16_c Bf16, true;
                    sgemm_bi_scalar_grouped_f16_r F16, false;
                    sgemm_bi_scalar_grouped_f16_c F16, true;
                }
                // Grouped, the reduction split (the experts' weight gradient): group g's C
                // (batch entry g) is A's columns times B's rows of the group's K range, the
                // ends read on the device. Any layout of A and B (runtime strides).
                scalar_grouped_reduction {
                    sgemm_bi_scalar_grouped_k_f32 F32;
                    sgemm_bi_scalar_grouped_k_bf16 Bf16;
                    sgemm_bi_scalar_grouped_k_f16 F16;
                }
            }
            sm90a {
                // The 128 × 128 scalar tiles with more k steps per loop trip, which ptxas fits
                // in 128 registers only for sm_90 (`scalar::wide::STEPS_SM90`); the same
                // chain as the sm80 entry of the name without `_sm90`. f32 copies its M- or
                // N-contiguous operands by cp.async, which frees registers for a longer loop
                // trip; the 16-bit types are converted on the way, so they cannot.
                scalar_tiled {
                    sgemm_bi_scalar_f32_rr_sm90 F32, true, false, wide, STEPS_SM90, true, true;
                    sgemm_bi_scalar_f32_rc_sm90 F32, true, true, wide, STEPS_SM90, true, true;
                    sgemm_bi_scalar_f32_cr_sm90 F32, false, false, wide, STEPS_SM90_F32_CR, true, false;
                    sgemm_bi_scalar_f32_cc_sm90 F32, false, true, wide, STEPS_SM90, true, true;
                    sgemm_bi_scalar_bf16_rr_sm90 Bf16, true, false, wide, STEPS_SM90, false, true;
                    sgemm_bi_scalar_bf16_rc_sm90 Bf16, true, true, wide, STEPS_SM90, false, false;
                    sgemm_bi_scalar_bf16_cr_sm90 Bf16, false, false, wide, STEPS_SM90, false, false;
                    sgemm_bi_scalar_bf16_cc_sm90 Bf16, false, true, wide, STEPS_SM90, false, true;
                    sgemm_bi_scalar_f16_rr_sm90 F16, true, false, wide, STEPS_SM90, false, true;
                    sgemm_bi_scalar_f16_rc_sm90 F16, true, true, wide, STEPS_SM90, false, false;
                    sgemm_bi_scalar_f16_cr_sm90 F16, false, false, wide, STEPS_SM90, false, false;
                    sgemm_bi_scalar_f16_cc_sm90 F16, false, true, wide, STEPS_SM90, false, true;
                }
                hopper {
                    sgemm_bi_hopper_bf16_rr_n256 Bf16, true, false, 128, 256, 1, Cooperative;
                    sgemm_bi_hopper_bf16_rc_n256 Bf16, true, true, 128, 256, 1, Cooperative;
                    sgemm_bi_hopper_bf16_cr_n256 Bf16, false, false, 128, 256, 1, Cooperative;
                    sgemm_bi_hopper_bf16_cc_n256 Bf16, false, true, 128, 256, 1, Cooperative;
                    sgemm_bi_hopper_f16_rr_n256 F16, true, false, 128, 256, 1, Cooperative;
                    sgemm_bi_hopper_f16_rc_n256 F16, true, true, 128, 256, 1, Cooperative;
                    sgemm_bi_hopper_f16_cr_n256 F16, false, false, 128, 256, 1, Cooperative;
                    sgemm_bi_hopper_f16_cc_n256 F16, false, true, 128, 256, 1, Cooperative;
                    sgemm_bi_hopper_bf16_rr_n192 Bf16, true, false, 128, 192, 1, Cooperative;
                    sgemm_bi_hopper_bf16_rc_n192 Bf16, true, true, 128, 192, 1, Cooperative;
                    sgemm_bi_hopper_bf16_cr_n192 Bf16, false, false, 128, 192, 1, Cooperative;
                    sgemm_bi_hopper_bf16_cc_n192 Bf16, false, true, 128, 192, 1, Cooperative;
                    sgemm_bi_hopper_f16_rr_n192 F16, true, false, 128, 192, 1, Cooperative;
                    sgemm_bi_hopper_f16_rc_n192 F16, true, true, 128, 192, 1, Cooperative;
                    sgemm_bi_hopper_f16_cr_n192 F16, false, false, 128, 192, 1, Cooperative;
                    sgemm_bi_hopper_f16_cc_n192 F16, false, true, 128, 192, 1, Cooperative;
                    sgemm_bi_hopper_bf16_rr_n128 Bf16, true, false, 128, 128, 1, Cooperative;
                    sgemm_bi_hopper_bf16_rc_n128 Bf16, true, true, 128, 128, 1, Cooperative;
                    sgemm_bi_hopper_bf16_cr_n128 Bf16, false, false, 128, 128, 1, Cooperative;
                    sgemm_bi_hopper_bf16_cc_n128 Bf16, false, true, 128, 128, 1, Cooperative;
                    sgemm_bi_hopper_f16_rr_n128 F16, true, false, 128, 128, 1, Cooperative;
                    sgemm_bi_hopper_f16_rc_n128 F16, true, true, 128, 128, 1, Cooperative;
                    sgemm_bi_hopper_f16_cr_n128 F16, false, false, 128, 128, 1, Cooperative;
                    sgemm_bi_hopper_f16_cc_n128 F16, false, true, 128, 128, 1, Cooperative;
                    sgemm_bi_hopper_bf16_rr_n64 Bf16, true, false, 128, 64, 1, Cooperative;
                    sgemm_bi_hopper_bf16_rc_n64 Bf16, true, true, 128, 64, 1, Cooperative;
                    sgemm_bi_hopper_bf16_cr_n64 Bf16, false, false, 128, 64, 1, Cooperative;
                    sgemm_bi_hopper_bf16_cc_n64 Bf16, false, true, 128, 64, 1, Cooperative;
                    sgemm_bi_hopper_f16_rr_n64 F16, true, false, 128, 64, 1, Cooperative;
                    sgemm_bi_hopper_f16_rc_n64 F16, true, true, 128, 64, 1, Cooperative;
                    sgemm_bi_hopper_f16_cr_n64 F16, false, false, 128, 64, 1, Cooperative;
                    sgemm_bi_hopper_f16_cc_n64 F16, false, true, 128, 64, 1, Cooperative;
                    // Clusters of two blocks along M sharing each stage's B tile (multicast).
                    sgemm_bi_hopper_bf16_rr_n256_x2 Bf16, true, false, 128, 256, 2, Cooperative;
                    sgemm_bi_hopper_bf16_rc_n256_x2 Bf16, true, true, 128, 256, 2, Cooperative;
                    sgemm_bi_hopper_bf16_cr_n256_x2 Bf16, false, false, 128, 256, 2, Cooperative;
                    sgemm_bi_hopper_bf16_cc_n256_x2 Bf16, false, true, 128, 256, 2, Cooperative;
                    sgemm_bi_hopper_f16_rr_n256_x2 F16, true, false, 128, 256, 2, Cooperative;
                    sgemm_bi_hopper_f16_rc_n256_x2 F16, true, true, 128, 256, 2, Cooperative;
                    sgemm_bi_hopper_f16_cr_n256_x2 F16, false, false, 128, 256, 2, Cooperative;
                    sgemm_bi_hopper_f16_cc_n256_x2 F16, false, true, 128, 256, 2, Cooperative;
                    // The one-round widths (`hopper::ONE_ROUND_BN`), B K-contiguous only; the
                    // 224-column ones also in clusters of two along M.
                    sgemm_bi_hopper_bf16_rc_n224 Bf16, true, true, 128, 224, 1, Cooperative;
                    sgemm_bi_hopper_bf16_cc_n224 Bf16, false, true, 128, 224, 1, Cooperative;
                    sgemm_bi_hopper_f16_rc_n224 F16, true, true, 128, 224, 1, Cooperative;
                    sgemm_bi_hopper_f16_cc_n224 F16, false, true, 128, 224, 1, Cooperative;
                    sgemm_bi_hopper_bf16_rc_n224_x2 Bf16, true, true, 128, 224, 2, Cooperative;
                    sgemm_bi_hopper_bf16_cc_n224_x2 Bf16, false, true, 128, 224, 2, Cooperative;
                    sgemm_bi_hopper_f16_rc_n224_x2 F16, true, true, 128, 224, 2, Cooperative;
                    sgemm_bi_hopper_f16_cc_n224_x2 F16, false, true, 128, 224, 2, Cooperative;
                    sgemm_bi_hopper_bf16_rc_n112 Bf16, true, true, 128, 112, 1, Cooperative;
                    sgemm_bi_hopper_bf16_cc_n112 Bf16, false, true, 128, 112, 1, Cooperative;
                    sgemm_bi_hopper_f16_rc_n112 F16, true, true, 128, 112, 1, Cooperative;
                    sgemm_bi_hopper_f16_cc_n112 F16, false, true, 128, 112, 1, Cooperative;
                    // 112 columns at the narrow heights too (decode: 1 to 64 rows of a
                    // 14336-wide output in one round of 128 tiles instead of two of 224).
                    sgemm_bi_hopper_bf16_rc_n112_m64 Bf16, true, true, 64, 112, 1, Cooperative;
                    sgemm_bi_hopper_bf16_cc_n112_m64 Bf16, false, true, 64, 112, 1, Cooperative;
                    sgemm_bi_hopper_bf16_rc_n112_m32 Bf16, true, true, 32, 112, 1, Cooperative;
                    sgemm_bi_hopper_bf16_rc_n112_m16 Bf16, true, true, 16, 112, 1, Cooperative;
                    sgemm_bi_hopper_bf16_rc_n112_m8 Bf16, true, true, 8, 112, 1, Cooperative;
                    sgemm_bi_hopper_f16_rc_n112_m64 F16, true, true, 64, 112, 1, Cooperative;
                    sgemm_bi_hopper_f16_cc_n112_m64 F16, false, true, 64, 112, 1, Cooperative;
                    sgemm_bi_hopper_f16_rc_n112_m32 F16, true, true, 32, 112, 1, Cooperative;
                    sgemm_bi_hopper_f16_rc_n112_m16 F16, true, true, 16, 112, 1, Cooperative;
                    sgemm_bi_hopper_f16_rc_n112_m8 F16, true, true, 8, 112, 1, Cooperative;
                    // Small M (decode): tiles of 64 rows, and of 32, 16 and 8 for a
                    // K-contiguous A.
                    sgemm_bi_hopper_bf16_rr_n64_m64 Bf16, true, false, 64, 64, 1, Cooperative;
                    sgemm_bi_hopper_bf16_rc_n64_m64 Bf16, true, true, 64, 64, 1, Cooperative;
                    sgemm_bi_hopper_bf16_cr_n64_m64 Bf16, false, false, 64, 64, 1, Cooperative;
                    sgemm_bi_hopper_bf16_cc_n64_m64 Bf16, false, true, 64, 64, 1, Cooperative;
                    sgemm_bi_hopper_f16_rr_n64_m64 F16, true, false, 64, 64, 1, Cooperative;
                    sgemm_bi_hopper_f16_rc_n64_m64 F16, true, true, 64, 64, 1, Cooperative;
                    sgemm_bi_hopper_f16_cr_n64_m64 F16, false, false, 64, 64, 1, Cooperative;
                    sgemm_bi_hopper_f16_cc_n64_m64 F16, false, true, 64, 64, 1, Cooperative;
                    sgemm_bi_hopper_bf16_rr_n64_m32 Bf16, true, false, 32, 64, 1, Cooperative;
                    sgemm_bi_hopper_bf16_rc_n64_m32 Bf16, true, true, 32, 64, 1, Cooperative;
                    sgemm_bi_hopper_f16_rr_n64_m32 F16, true, false, 32, 64, 1, Cooperative;
                    sgemm_bi_hopper_f16_rc_n64_m32 F16, true, true, 32, 64, 1, Cooperative;
                    sgemm_bi_hopper_bf16_rr_n64_m16 Bf16, true, false, 16, 64, 1, Cooperative;
                    sgemm_bi_hopper_bf16_rc_n64_m16 Bf16, true, true, 16, 64, 1, Cooperative;
                    sgemm_bi_hopper_f16_rr_n64_m16 F16, true, false, 16, 64, 1, Cooperative;
                    sgemm_bi_hopper_f16_rc_n64_m16 F16, true, true, 16, 64, 1, Cooperative;
                    sgemm_bi_hopper_bf16_rr_n64_m8 Bf16, true, false, 8, 64, 1, Cooperative;
                    sgemm_bi_hopper_bf16_rc_n64_m8 Bf16, true, true, 8, 64, 1, Cooperative;
                    sgemm_bi_hopper_f16_rr_n64_m8 F16, true, false, 8, 64, 1, Cooperative;
                    sgemm_bi_hopper_f16_rc_n64_m8 F16, true, true, 8, 64, 1, Cooperative;
                    // Decode tiles of 48, 32 and 16 columns (`hopper::DECODE_BN`), B
                    // K-contiguous only.
                    sgemm_bi_hopper_bf16_rc_n48_m64 Bf16, true, true, 64, 48, 1, Cooperative;
                    sgemm_bi_hopper_bf16_cc_n48_m64 Bf16, false, true, 64, 48, 1, Cooperative;
                    sgemm_bi_hopper_f16_rc_n48_m64 F16, true, true, 64, 48, 1, Cooperative;
                    sgemm_bi_hopper_f16_cc_n48_m64 F16, false, true, 64, 48, 1, Cooperative;
                    sgemm_bi_hopper_bf16_rc_n48_m32 Bf16, true, true, 32, 48, 1, Cooperative;
                    sgemm_bi_hopper_f16_rc_n48_m32 F16, true, true, 32, 48, 1, Cooperative;
                    sgemm_bi_hopper_bf16_rc_n48_m16 Bf16, true, true, 16, 48, 1, Cooperative;
                    sgemm_bi_hopper_f16_rc_n48_m16 F16, true, true, 16, 48, 1, Cooperative;
                    sgemm_bi_hopper_bf16_rc_n48_m8 Bf16, true, true, 8, 48, 1, Cooperative;
                    sgemm_bi_hopper_f16_rc_n48_m8 F16, true, true, 8, 48, 1, Cooperative;
                    sgemm_bi_hopper_bf16_rc_n32_m64 Bf16, true, true, 64, 32, 1, Cooperative;
                    sgemm_bi_hopper_bf16_cc_n32_m64 Bf16, false, true, 64, 32, 1, Cooperative;
                    sgemm_bi_hopper_f16_rc_n32_m64 F16, true, true, 64, 32, 1, Cooperative;
                    sgemm_bi_hopper_f16_cc_n32_m64 F16, false, true, 64, 32, 1, Cooperative;
                    sgemm_bi_hopper_bf16_rc_n32_m32 Bf16, true, true, 32, 32, 1, Cooperative;
                    sgemm_bi_hopper_f16_rc_n32_m32 F16, true, true, 32, 32, 1, Cooperative;
                    sgemm_bi_hopper_bf16_rc_n32_m16 Bf16, true, true, 16, 32, 1, Cooperative;
                    sgemm_bi_hopper_f16_rc_n32_m16 F16, true, true, 16, 32, 1, Cooperative;
                    sgemm_bi_hopper_bf16_rc_n32_m8 Bf16, true, true, 8, 32, 1, Cooperative;
                    sgemm_bi_hopper_f16_rc_n32_m8 F16, true, true, 8, 32, 1, Cooperative;
                    sgemm_bi_hopper_bf16_rc_n16_m64 Bf16, true, true, 64, 16, 1, Cooperative;
                    sgemm_bi_hopper_bf16_cc_n16_m64 Bf16, false, true, 64, 16, 1, Cooperative;
                    sgemm_bi_hopper_f16_rc_n16_m64 F16, true, true, 64, 16, 1, Cooperative;
                    sgemm_bi_hopper_f16_cc_n16_m64 F16, false, true, 64, 16, 1, Cooperative;
                    sgemm_bi_hopper_bf16_rc_n16_m32 Bf16, true, true, 32, 16, 1, Cooperative;
                    sgemm_bi_hopper_f16_rc_n16_m32 F16, true, true, 32, 16, 1, Cooperative;
                    sgemm_bi_hopper_bf16_rc_n16_m16 Bf16, true, true, 16, 16, 1, Cooperative;
                    sgemm_bi_hopper_f16_rc_n16_m16 F16, true, true, 16, 16, 1, Cooperative;
                    sgemm_bi_hopper_bf16_rc_n16_m8 Bf16, true, true, 8, 16, 1, Cooperative;
                    sgemm_bi_hopper_f16_rc_n16_m8 F16, true, true, 8, 16, 1, Cooperative;
                    // Decode tiles of 64 rows in clusters of two along N, sharing each
                    // stage's A tile (`hopper::clusters_along_n`); A and B K-contiguous.
                    sgemm_bi_hopper_bf16_rc_n48_m64_x2 Bf16, true, true, 64, 48, 2, Cooperative;
                    sgemm_bi_hopper_f16_rc_n48_m64_x2 F16, true, true, 64, 48, 2, Cooperative;
                    sgemm_bi_hopper_bf16_rc_n32_m64_x2 Bf16, true, true, 64, 32, 2, Cooperative;
                    sgemm_bi_hopper_f16_rc_n32_m64_x2 F16, true, true, 64, 32, 2, Cooperative;
                    sgemm_bi_hopper_bf16_rc_n16_m64_x2 Bf16, true, true, 64, 16, 2, Cooperative;
                    sgemm_bi_hopper_f16_rc_n16_m64_x2 F16, true, true, 64, 16, 2, Cooperative;
                    // Wide tiles of 8 and 16 rows (`hopper::WIDE_SHORT_BN`), A and B
                    // K-contiguous: many small products (decode attention scores). Ping-pong
                    // consumers: two warpgroups taking the tiles in turn, so that one's
                    // store overlaps the other's chain (`hopper::pingpong`).
                    sgemm_bi_hopper_bf16_rc_n256_m8_pp Bf16, true, true, 8, 256, 1, PingPong;
                    sgemm_bi_hopper_f16_rc_n256_m8_pp F16, true, true, 8, 256, 1, PingPong;
                    sgemm_bi_hopper_bf16_rc_n128_m8_pp Bf16, true, true, 8, 128, 1, PingPong;
                    sgemm_bi_hopper_f16_rc_n128_m8_pp F16, true, true, 8, 128, 1, PingPong;
                    sgemm_bi_hopper_bf16_rc_n256_m16_pp Bf16, true, true, 16, 256, 1, PingPong;
                    sgemm_bi_hopper_f16_rc_n256_m16_pp F16, true, true, 16, 256, 1, PingPong;
                    sgemm_bi_hopper_bf16_rc_n128_m16_pp Bf16, true, true, 16, 128, 1, PingPong;
                    sgemm_bi_hopper_f16_rc_n128_m16_pp F16, true, true, 16, 128, 1, PingPong;
                    // Tiles of 8 and 16 rows by 64 columns of an N-contiguous B: many small
                    // products against row-major values (decode attention's `attn @ v`), more
                    // tiles than blocks. Ping-pong consumers: a block's two tiles' chains run
                    // side by side instead of one after the other.
                    sgemm_bi_hopper_bf16_rr_n64_m8_pp Bf16, true, false, 8, 64, 1, PingPong;
                    sgemm_bi_hopper_f16_rr_n64_m8_pp F16, true, false, 8, 64, 1, PingPong;
                    sgemm_bi_hopper_bf16_rr_n64_m16_pp Bf16, true, false, 16, 64, 1, PingPong;
                    sgemm_bi_hopper_f16_rr_n64_m16_pp F16, true, false, 16, 64, 1, PingPong;
                    // Ping-pong consumers (`hopper::pingpong`): (128, 128) tiles, one per
                    // consumer warpgroup.
                    sgemm_bi_hopper_bf16_rr_n128_pp Bf16, true, false, 128, 128, 1, PingPong;
                    sgemm_bi_hopper_bf16_rc_n128_pp Bf16, true, true, 128, 128, 1, PingPong;
                    sgemm_bi_hopper_bf16_cr_n128_pp Bf16, false, false, 128, 128, 1, PingPong;
                    sgemm_bi_hopper_bf16_cc_n128_pp Bf16, false, true, 128, 128, 1, PingPong;
                    sgemm_bi_hopper_f16_rr_n128_pp F16, true, false, 128, 128, 1, PingPong;
                    sgemm_bi_hopper_f16_rc_n128_pp F16, true, true, 128, 128, 1, PingPong;
                    sgemm_bi_hopper_f16_cr_n128_pp F16, false, false, 128, 128, 1, PingPong;
                    sgemm_bi_hopper_f16_cc_n128_pp F16, false, true, 128, 128, 1, PingPong;
                    sgemm_bi_hopper_bf16_rr_n128_pp_x2 Bf16, true, false, 128, 128, 2, PingPong;
                    sgemm_bi_hopper_bf16_rc_n128_pp_x2 Bf16, true, true, 128, 128, 2, PingPong;
                    sgemm_bi_hopper_bf16_cr_n128_pp_x2 Bf16, false, false, 128, 128, 2, PingPong;
                    sgemm_bi_hopper_bf16_cc_n128_pp_x2 Bf16, false, true, 128, 128, 2, PingPong;
                    sgemm_bi_hopper_f16_rr_n128_pp_x2 F16, true, false, 128, 128, 2, PingPong;
                    sgemm_bi_hopper_f16_rc_n128_pp_x2 F16, true, true, 128, 128, 2, PingPong;
                    sgemm_bi_hopper_f16_cr_n128_pp_x2 F16, false, false, 128, 128, 2, PingPong;
                    sgemm_bi_hopper_f16_cc_n128_pp_x2 F16, false, true, 128, 128, 2, PingPong;
                }
                // Grouped (Mixture-of-Experts): the tokens' rows (A, K-contiguous) split into
                // groups by ends read on the device, each group times its own B. `_r`/`_c`:
                // B row- or column-major (torch's expert weights [G, N, K] read as B are
                // column-major).
                hopper_grouped {
                    sgemm_bi_hopper_grouped_bf16_r_n128 Bf16, false, 128, 1, false;
                    sgemm_bi_hopper_grouped_bf16_c_n128 Bf16, true, 128, 1, false;
                    sgemm_bi_hopper_grouped_bf16_r_n256 Bf16, false, 256, 1, false;
                    sgemm_bi_hopper_grouped_bf16_c_n256 Bf16, true, 256, 1, false;
                    sgemm_bi_hopper_grouped_f16_r_n128 F16, false, 128, 1, false;
                    sgemm_bi_hopper_grouped_f16_c_n128 F16, true, 128, 1, false;
                    sgemm_bi_hopper_grouped_f16_r_n256 F16, false, 256, 1, false;
                    sgemm_bi_hopper_grouped_f16_c_n256 F16, true, 256, 1, false;
                    // The dynamic tile order: a block takes its next tile from a counter of the
                    // call when its producer is ready for one, so the tiles that share a
                    // weight column start together whatever each block's history.
                    sgemm_bi_hopper_grouped_bf16_r_n256_dyn Bf16, false, 256, 1, true;
                    sgemm_bi_hopper_grouped_bf16_c_n256_dyn Bf16, true, 256, 1, true;
                    sgemm_bi_hopper_grouped_f16_r_n256_dyn F16, false, 256, 1, true;
                    sgemm_bi_hopper_grouped_f16_c_n256_dyn F16, true, 256, 1, true;
                    // In clusters of two blocks along a group's rows, sharing each stage's B
                    // tile (the experts' weights: the bytes that dominate at MoE shapes): the
                    // block of rank 0 takes the cluster tiles from the counter and names each
                    // to its peer. (The static order's clusters, which lost at seven of eight
                    // MoE shapes, are not built: the crate's size.)
                    sgemm_bi_hopper_grouped_bf16_r_n256_x2_dyn Bf16, false, 256, 2, true;
                    sgemm_bi_hopper_grouped_bf16_c_n256_x2_dyn Bf16, true, 256, 2, true;
                    sgemm_bi_hopper_grouped_f16_r_n256_x2_dyn F16, false, 256, 2, true;
                    sgemm_bi_hopper_grouped_f16_c_n256_x2_dyn F16, true, 256, 2, true;
                }
                // Grouped, the reduction split (the experts' weight gradient: Xᵀ · dY over each
                // group's tokens, A M-contiguous and B N-contiguous).
                hopper_grouped_reduction {
                    sgemm_bi_hopper_grouped_k_bf16_n128 Bf16, 128, 1, false;
                    sgemm_bi_hopper_grouped_k_bf16_n256 Bf16, 256, 1, false;
                    sgemm_bi_hopper_grouped_k_f16_n128 F16, 128, 1, false;
                    sgemm_bi_hopper_grouped_k_f16_n256 F16, 256, 1, false;
                    // Clusters of two blocks along M sharing each stage's dY tile.
                    sgemm_bi_hopper_grouped_k_bf16_n256_x2 Bf16, 256, 2, false;
                    sgemm_bi_hopper_grouped_k_f16_n256_x2 F16, 256, 2, false;
                    // The same in the dynamic tile order: with uneven groups a tile's work
                    // is its group's tokens, and the static order's equal counts of tiles
                    // per block leave some blocks a long tile more than others.
                    sgemm_bi_hopper_grouped_k_bf16_n256_x2_dyn Bf16, 256, 2, true;
                    sgemm_bi_hopper_grouped_k_f16_n256_x2_dyn F16, 256, 2, true;
                }
            }
        }
    };
}

/// The callback that turns the list into [`KERNELS`].
macro_rules! spec_table {
    ($($module:ident { $($family:ident { $($entry:tt)* })* })*) => {
        /// Every entry point of every module, in the catalogue's order.
        pub const KERNELS: &[KernelSpec] = &{
            let mut all = [KernelSpec {
                name: "",
                kind: Kind {
                    module: Module::Sm80,
                    element: Element::F32,
                    a_k_contiguous: false,
                    b_k_contiguous: false,
                    family: Family::Mma { cp_async: false },
                },
            }; 0 $($($(+ spec_table!(@count $family $entry))*)*)*];
            let mut i = 0;
            $($(spec_table!(@specs all, i, $module, $family $($entry)*);)*)*
            let _ = i;
            all
        };
    };
    // One `;`-terminated line counts one: its last token.
    (@count $family:ident ;) => { 1 };
    (@count $family:ident $other:tt) => { 0 };
    (@specs $all:ident, $i:ident, $module:ident, scalar_tiled
        $($name:ident $elem:ident, $a:literal, $b:literal, $tile:ident, $steps:ident, $cp:literal, $cu:literal;)*) => {
        $(spec_table!(@one $all, $i, $name, $module, $elem, $a, $b,
            Family::ScalarTiled { tile: spec_table!(@tile $tile) });)*
    };
    (@specs $all:ident, $i:ident, $module:ident, scalar_rows
        $($name:ident $elem:ident, $b:literal, $tm:literal, $tn:literal;)*) => {
        $(spec_table!(@one $all, $i, $name, $module, $elem, true, $b,
            Family::ScalarRows { rows_per_warp: $tm, cols_per_lane: $tn });)*
    };
    (@specs $all:ident, $i:ident, $module:ident, scalar_grouped
        $($name:ident $elem:ident, $b:literal;)*) => {
        $(spec_table!(@one $all, $i, $name, $module, $elem, true, $b, Family::ScalarGrouped);)*
    };
    (@specs $all:ident, $i:ident, $module:ident, scalar_grouped_reduction
        $($name:ident $elem:ident;)*) => {
        $(spec_table!(@one $all, $i, $name, $module, $elem, false, false,
            Family::ScalarGroupedReduction);)*
    };
    (@specs $all:ident, $i:ident, $module:ident, mma
        $($name:ident $elem:ident, $a:literal, $b:literal, $cp:literal;)*) => {
        $(spec_table!(@one $all, $i, $name, $module, $elem, $a, $b,
            Family::Mma { cp_async: $cp });)*
    };
    (@specs $all:ident, $i:ident, $module:ident, hopper
        $($name:ident $elem:ident, $a:literal, $b:literal, $bm:literal, $bn:literal, $c:literal, $s:ident;)*) => {
        $(spec_table!(@one $all, $i, $name, $module, $elem, $a, $b,
            Family::Hopper { bm: $bm, bn: $bn, cluster: $c, schedule: Schedule::$s });)*
    };
    (@specs $all:ident, $i:ident, $module:ident, hopper_grouped
        $($name:ident $elem:ident, $b:literal, $bn:literal, $c:literal, $d:literal;)*) => {
        $(spec_table!(@one $all, $i, $name, $module, $elem, true, $b,
            Family::HopperGrouped { bn: $bn, cluster: $c, dynamic: $d });)*
    };
    (@specs $all:ident, $i:ident, $module:ident, hopper_grouped_reduction
        $($name:ident $elem:ident, $bn:literal, $c:literal, $d:literal;)*) => {
        $(spec_table!(@one $all, $i, $name, $module, $elem, false, false,
            Family::HopperGroupedReduction { bn: $bn, cluster: $c, dynamic: $d });)*
    };
    (@tile wide) => { ScalarTile::Wide };
    (@tile narrow) => { ScalarTile::Narrow };
    (@module sm80) => { Module::Sm80 };
    (@module sm90a) => { Module::Sm90a };
    (@one $all:ident, $i:ident, $name:ident, $module:ident, $elem:ident, $a:expr, $b:expr, $family:expr) => {
        $all[$i] = KernelSpec {
            name: stringify!($name),
            kind: Kind {
                module: spec_table!(@module $module),
                element: Element::$elem,
                a_k_contiguous: $a,
                b_k_contiguous: $b,
                family: $family,
            },
        };
        $i += 1;
    };
}

kernel_catalogue!(spec_table);

const _: () = {
    // Names and kinds are unique: each key finds its own entry.
    let mut i = 0;
    while i < KERNELS.len() {
        let spec = &KERNELS[i];
        assert!(
            matches!(find(&spec.kind), Some(j) if j == i),
            "two catalogue entries of one kind"
        );
        let mut j = 0;
        while j < i {
            assert!(
                !str_eq(KERNELS[j].name, spec.name),
                "two catalogue entries of one name"
            );
            j += 1;
        }
        if let Family::Hopper { bm, .. } = spec.kind.family {
            assert!(
                hopper::threads(bm) <= spec.launch_bounds().max_threads,
                "a block fits its launch bound"
            );
        }
        i += 1;
    }
};

const fn str_eq(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}
