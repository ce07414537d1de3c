//! Planning and launching the tensor-core tier's mma.sync kernels (sm_80 and newer; see
//! `kernels-gpu/src/tensor` for the contract).
//!
//! The plan picks an entry point by dtype, operand layouts and alignment, and a tile; it
//! never picks the reduction order. Every candidate consumes K in the same ascending steps
//! of one MMA's K into one accumulator per element, so the choice cannot change a bit (C2):
//! `TensorPlan::k_schedule` states the order and the unit tests below check that every plan
//! over a sweep of shapes has the same one.

use std::ops::Range;
use std::sync::Arc;

use cudarc::driver::sys;
use sgemm_bi_abi::catalogue::{Element, Family, Kind, Module};
use sgemm_bi_abi::params::GemmParams;
use sgemm_bi_abi::tensor::{BM, BN, MMA_K};

use super::catalogue::{expect_id, Entries, KernelId};
use super::kernel_abi::{gemm_params, grid_size};
use super::plan::{k_contiguous, layout_index, operand_copyable_16, Planner, Unsupported, LAYOUTS};
use crate::error::{Operand as Which, Result};
use crate::types::{DType, Gemm, GemmPointers, Layout};

/// How a kernel stages its operands into shared memory. Both loaders leave the same values
/// in the same shared-memory layout and the mainloop after them is the same, so the choice
/// never changes a bit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Loader {
    /// 16-byte `cp.async` copies, pipelined: every run of 8 elements along an operand's
    /// contiguous dimension must start 16-byte aligned.
    CpAsync16,
    /// Element-wise loads: any alignment the element type allows.
    Elementwise,
}

/// The loaders the planner asks, fastest first.
const LOADERS: [Loader; 2] = [Loader::CpAsync16, Loader::Elementwise];

impl Loader {
    /// Whether this loader can stage the operands of `g` at addresses `a` and `b`.
    pub(crate) fn can_implement(self, g: &Gemm, a: usize, b: usize) -> Result<(), Unsupported> {
        if self == Loader::Elementwise {
            return Ok(());
        }
        operand_copyable_16(Which::A, &g.a, a, g.batch)?;
        operand_copyable_16(Which::B, &g.b, b, g.batch)
    }
}

/// The input types of the mma.sync kernels, in the order of [`TABLE`]'s first index.
const ELEMENTS: [Element; 2] = [Element::Bf16, Element::F16];

/// The entry points, `[element][layout pair][loader]` (`ELEMENTS`, `LAYOUTS`, `LOADERS`);
/// every slot built.
type Table = [[[KernelId<GemmParams>; 2]; 4]; 2];

const fn table() -> Table {
    let mut table = [[[entry(0, 0, 0); 2]; 4]; 2];
    let mut e = 0;
    while e < 2 {
        let mut l = 0;
        while l < 4 {
            table[e][l] = [entry(e, l, 0), entry(e, l, 1)];
            l += 1;
        }
        e += 1;
    }
    table
}

const fn entry(e: usize, l: usize, loader: usize) -> KernelId<GemmParams> {
    let (a_k_contiguous, b_k_contiguous) = k_contiguous(LAYOUTS[l]);
    expect_id(Kind {
        module: Module::Sm80,
        element: ELEMENTS[e],
        a_k_contiguous,
        b_k_contiguous,
        family: Family::Mma {
            cp_async: matches!(LOADERS[loader], Loader::CpAsync16),
        },
    })
}

const TABLE: Table = table();

/// What the planner chose for one call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct TensorPlan {
    pub(crate) dtype: DType,
    pub(crate) layouts: (Layout, Layout),
    pub(crate) loader: Loader,
    /// The block tile, (rows, columns) of C.
    pub(crate) tile: (u32, u32),
    /// K of one MMA step. There is no split-K: one accumulator per output element takes
    /// every step.
    pub(crate) k_step: u32,
    /// The entry point in the sm80 module.
    pub(crate) entry: KernelId<GemmParams>,
}

impl TensorPlan {
    /// The MMA steps for a given K, in the order they enter the accumulator: the k range each
    /// step covers (the last one padded with zeros up to `k_step`). The statement of the
    /// order the kernels implement, checked against every plan by the tests.
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) fn k_schedule(&self, k: usize) -> Vec<Range<usize>> {
        let step = self.k_step as usize;
        (0..k.div_ceil(step))
            .map(|s| s * step..((s + 1) * step).min(k))
            .collect()
    }
}

/// The plan for `g` with A at address `a` and B at `b`: the first loader that can stage
/// them, and the one tile shape this release has. Only f32 inputs are declined.
pub(crate) fn plan(g: &Gemm, a: usize, b: usize) -> Result<TensorPlan, Unsupported> {
    let e = match g.a.dtype {
        DType::BF16 => 0,
        DType::F16 => 1,
        dtype @ DType::F32 => return Err(Unsupported::Element { dtype }),
    };
    let o = LOADERS
        .iter()
        .position(|l| l.can_implement(g, a, b).is_ok())
        .expect("the element-wise loader stages any operand");
    let entry = TABLE[e][layout_index(g)][o];
    let tile = entry.spec().kind.family.tile();
    debug_assert_eq!(tile, (BM, BN));
    Ok(TensorPlan {
        dtype: g.a.dtype,
        layouts: (g.a.layout, g.b.layout),
        loader: LOADERS[o],
        tile,
        k_step: MMA_K,
        entry,
    })
}

/// The mma.sync kernels of a device (the sm80 module's).
pub(crate) struct TensorKernels {
    entries: Arc<Entries>,
}

impl TensorKernels {
    /// The planner of the sm80 module's tensor-core entry points; loads nothing yet.
    pub(crate) fn new(entries: &Arc<Entries>) -> Self {
        TensorKernels {
            entries: entries.clone(),
        }
    }
}

impl Planner for TensorKernels {
    type Plan = TensorPlan;

    fn plan(&self, g: &Gemm, p: &GemmPointers) -> Result<TensorPlan, Unsupported> {
        plan(g, p.a as usize, p.b as usize)
    }

    unsafe fn launch(
        &self,
        plan: &TensorPlan,
        g: &Gemm,
        p: &GemmPointers,
        stream: sys::CUstream,
    ) -> Result<()> {
        let kernel = self.entries.get(plan.entry)?;
        let params = gemm_params(g, p, plan.tile.0, plan.tile.1);
        // SAFETY: the cp.async entry is chosen only for operands it can stage
        // (`Loader::can_implement`); the buffers satisfy the caller's contract; one block per
        // tile, no cluster.
        unsafe { kernel.launch(grid_size(&params, u32::MAX), &params, stream, &mut []) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{Operand, Output, OutputMode, Tier};

    fn gemm(m: usize, n: usize, k: usize, dtype: DType, layouts: (Layout, Layout)) -> Gemm {
        let op = |layout, rows: usize, cols: usize| Operand {
            dtype,
            layout,
            ld: if layout == Layout::RowMajor {
                cols
            } else {
                rows
            }
            .max(1),
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
                mode: OutputMode::Overwrite(dtype),
                ldc: n.max(1),
                batch_stride: 0,
            },
            tier: Tier::TensorCores,
        }
    }

    /// Every plan over a sweep of M, N, layouts, dtypes and alignments consumes K in the same
    /// steps: the order depends on K alone.
    #[test]
    fn no_plan_changes_the_k_order() {
        let sizes = [
            1, 2, 3, 7, 15, 16, 17, 31, 33, 64, 127, 128, 129, 255, 300, 4095, 4100,
        ];
        for k in [0usize, 1, 15, 16, 17, 31, 32, 33, 48, 4095, 4096] {
            let want: Vec<Range<usize>> = (0..k.div_ceil(16))
                .map(|s| 16 * s..(16 * s + 16).min(k))
                .collect();
            for m in sizes {
                for n in sizes {
                    for dtype in [DType::BF16, DType::F16] {
                        for layouts in LAYOUTS {
                            for (a, b) in [(0x1000, 0x2000), (0x1002, 0x2000), (0x1000, 0x2006)] {
                                let plan = plan(&gemm(m, n, k, dtype, layouts), a, b).unwrap();
                                assert_eq!(plan.k_step, 16);
                                assert_eq!(plan.k_schedule(k), want, "{m}×{n}×{k} {plan:?}");
                            }
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn the_loader_follows_alignment_and_nothing_else_changes() {
        let layouts = (Layout::RowMajor, Layout::RowMajor);
        let g = gemm(100, 64, 256, DType::BF16, layouts);
        let fast = plan(&g, 0x1000, 0x2000).unwrap();
        assert_eq!(fast.loader, Loader::CpAsync16);
        assert_eq!(fast.entry.spec().name, "sgemm_bi_tc_bf16_rr");
        for (g2, a, b, why) in [
            (g, 0x1002, 0x2000, "address"),
            (g, 0x1000, 0x2008, "address"),
            (
                gemm(100, 64, 255, DType::BF16, layouts),
                0x1000,
                0x2000,
                "leading dimension",
            ),
            (
                Gemm {
                    batch: 2,
                    a: g.a.with_batch_stride(100 * 256 + 4),
                    c: Output {
                        batch_stride: 100 * 64,
                        ..g.c
                    },
                    ..g
                },
                0x1000,
                0x2000,
                "batch stride",
            ),
        ] {
            let slow = plan(&g2, a, b).unwrap();
            assert_eq!(slow.loader, Loader::Elementwise, "{why}");
            assert_eq!(slow.entry.spec().name, "sgemm_bi_tc_bf16_rr_unaligned");
            assert_eq!((slow.tile, slow.k_step), (fast.tile, fast.k_step));
            let reason = Loader::CpAsync16
                .can_implement(&g2, a, b)
                .unwrap_err()
                .to_string();
            assert!(reason.contains(why), "{reason}");
        }
        let f16_cc = plan(
            &gemm(5, 5, 5, DType::F16, (Layout::ColMajor, Layout::ColMajor)),
            0x1000,
            0x2000,
        )
        .unwrap();
        assert_eq!(f16_cc.entry.spec().name, "sgemm_bi_tc_f16_cc_unaligned");
        let f32_call = gemm(5, 5, 5, DType::F32, LAYOUTS[0]);
        assert_eq!(
            plan(&f32_call, 0x1000, 0x2000),
            Err(Unsupported::Element { dtype: DType::F32 })
        );
    }
}
