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

use super::kernel_abi::{gemm_params, launch};
use super::modules::{Lazy, ModuleLoader};
use super::scalar::{layout_suffix, LAYOUTS};
use crate::error::Result;
use crate::types::{DType, Gemm, GemmPointers, Layout, Operand};
use sgemm_bi_abi::tensor::{BM, BN, CHUNK_ELEMS, MMA_K, SMEM_BYTES, THREADS};

const DTYPES: [DType; 2] = [DType::BF16, DType::F16];

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

/// Why a candidate kernel cannot run a call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Unsupported {
    pub(crate) reason: String,
}

impl Loader {
    /// Whether this loader can stage the operands of `g` at addresses `a` and `b`.
    pub(crate) fn can_implement(self, g: &Gemm, a: usize, b: usize) -> Result<(), Unsupported> {
        if self == Loader::Elementwise {
            return Ok(());
        }
        let bytes = CHUNK_ELEMS as usize * 2;
        let check = |name: &str, op: &Operand, addr: usize| {
            let reason = if addr % bytes != 0 {
                format!("{name}'s address {addr:#x} is not {bytes}-byte aligned")
            } else if op.ld % CHUNK_ELEMS as usize != 0 {
                format!(
                    "{name}'s leading dimension {} is not a multiple of {CHUNK_ELEMS}",
                    op.ld
                )
            } else if g.batch > 1 && op.batch_stride % CHUNK_ELEMS as usize != 0 {
                format!(
                    "{name}'s batch stride {} is not a multiple of {CHUNK_ELEMS}",
                    op.batch_stride
                )
            } else {
                return Ok(());
            };
            Err(Unsupported { reason })
        };
        check("A", &g.a, a)?;
        check("B", &g.b, b)
    }
}

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
}

impl TensorPlan {
    /// The entry point in the sm80 module.
    pub(crate) fn entry_name(&self) -> String {
        let suffix = match self.loader {
            Loader::CpAsync16 => "",
            Loader::Elementwise => "_unaligned",
        };
        format!(
            "sgemm_bi_tc_{}_{}{suffix}",
            self.dtype.name(),
            layout_suffix(self.layouts)
        )
    }

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
/// them, and the one tile shape this release has.
pub(crate) fn plan(g: &Gemm, a: usize, b: usize) -> TensorPlan {
    let loader = LOADERS
        .into_iter()
        .find(|l| l.can_implement(g, a, b).is_ok())
        .expect("the element-wise loader stages any operand");
    TensorPlan {
        dtype: g.a.dtype,
        layouts: (g.a.layout, g.b.layout),
        loader,
        tile: (BM, BN),
        k_step: MMA_K,
    }
}

fn index(plan: &TensorPlan) -> (usize, usize, usize) {
    (
        DTYPES.iter().position(|&x| x == plan.dtype).unwrap(),
        LAYOUTS.iter().position(|&x| x == plan.layouts).unwrap(),
        LOADERS.iter().position(|&x| x == plan.loader).unwrap(),
    )
}

/// The sixteen tensor-core entry points, `[dtype][layout pair][loader]`, each looked up on
/// its first call.
pub(crate) struct TensorKernels {
    module: Arc<ModuleLoader>,
    functions: [[[Lazy<sys::CUfunction>; 2]; 4]; 2],
}

impl TensorKernels {
    /// The tables of the sm80 module's tensor-core entry points; loads nothing yet.
    pub(crate) fn new(module: Arc<ModuleLoader>) -> Self {
        TensorKernels {
            module,
            functions: Default::default(),
        }
    }

    /// The function of `plan`, looked up on first use and allowed the dynamic shared memory
    /// it needs (more than the default 48 KiB).
    fn function(&self, plan: &TensorPlan) -> Result<sys::CUfunction> {
        let (d, l, o) = index(plan);
        self.functions[d][l][o]
            .get_or_try(|| {
                self.module
                    .function_with_smem(&plan.entry_name(), SMEM_BYTES)
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
    ) -> Result<()> {
        let plan = plan(g, p.a as usize, p.b as usize);
        let function = self.function(&plan)?;
        // SAFETY: the block size and shared memory are the ones the kernel is built for (its
        // limit was raised at load); the cp.async entry is chosen only for aligned operands;
        // the buffers satisfy the caller's contract.
        unsafe {
            launch(
                function,
                || plan.entry_name(),
                THREADS,
                SMEM_BYTES,
                u32::MAX,
                gemm_params(g, p, plan.tile.0, plan.tile.1),
                stream,
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{Output, OutputMode, Tier};

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
                    for dtype in DTYPES {
                        for layouts in LAYOUTS {
                            for (a, b) in [(0x1000, 0x2000), (0x1002, 0x2000), (0x1000, 0x2006)] {
                                let plan = plan(&gemm(m, n, k, dtype, layouts), a, b);
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
        let fast = plan(&g, 0x1000, 0x2000);
        assert_eq!(fast.loader, Loader::CpAsync16);
        assert_eq!(fast.entry_name(), "sgemm_bi_tc_bf16_rr");
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
            let slow = plan(&g2, a, b);
            assert_eq!(slow.loader, Loader::Elementwise, "{why}");
            assert_eq!(slow.entry_name(), "sgemm_bi_tc_bf16_rr_unaligned");
            assert_eq!((slow.tile, slow.k_step), (fast.tile, fast.k_step));
            let reason = Loader::CpAsync16
                .can_implement(&g2, a, b)
                .unwrap_err()
                .reason;
            assert!(reason.contains(why), "{reason}");
        }
        let f16_cc = plan(
            &gemm(5, 5, 5, DType::F16, (Layout::ColMajor, Layout::ColMajor)),
            0x1000,
            0x2000,
        );
        assert_eq!(f16_cc.entry_name(), "sgemm_bi_tc_f16_cc_unaligned");
    }
}
