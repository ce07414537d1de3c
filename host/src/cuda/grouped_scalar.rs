//! Planning and launching the scalar tier's grouped kernels (`kernels-gpu/src/scalar/grouped.rs`):
//! a grouped call whose offsets are in device memory, run as one kernel that reads them, so
//! the host never waits for them and the call can be captured in a CUDA graph.
//!
//! They take the rows split (torch's 2-D × 3-D: the experts' forward and input gradient) with
//! a row-major A and either layout of B, and the reduction split (torch's 2-D × 2-D: the
//! experts' weight gradient) with any layouts of A and B; every element type, any alignment
//! and either output mode. Each element is the scalar tier's chain, so its bits are those of
//! the group-by-group form (`Engine::grouped_gemm`), which still runs the columns split (its
//! offsets read back first).

use std::sync::Arc;

use cudarc::driver::sys;
use sgemm_bi_abi::catalogue::{Family, Kind, Module};
use sgemm_bi_abi::params::{GroupedParams, GroupedReductionParams};
use sgemm_bi_abi::scalar::grouped::{BLOCKS_PER_SM, THREADS};

use super::catalogue::{expect_id, Entries, KernelId};
use super::kernel_abi::gemm_params;
use super::plan::{element_index, Unsupported, ELEMENTS};
use crate::error::Result;
use crate::grouped::{GroupSplit, GroupedGemm};
use crate::types::{GemmPointers, Layout, Operand};

/// The entries, `[element][B K-contiguous]` (`ELEMENTS`); every slot built.
const TABLE: [[KernelId<GroupedParams>; 2]; 3] = {
    let mut table = [[entry(0, false); 2]; 3];
    let mut e = 0;
    while e < 3 {
        table[e] = [entry(e, false), entry(e, true)];
        e += 1;
    }
    table
};

const fn entry(e: usize, b_k_contiguous: bool) -> KernelId<GroupedParams> {
    expect_id(Kind {
        module: Module::Sm80,
        element: ELEMENTS[e],
        a_k_contiguous: true,
        b_k_contiguous,
        family: Family::ScalarGrouped,
    })
}

/// The reduction split's entries, by element (`ELEMENTS`): any layouts (strides in the
/// parameters), so the kinds say neither operand is K-contiguous.
const REDUCTION: [KernelId<GroupedReductionParams>; 3] =
    [reduction_entry(0), reduction_entry(1), reduction_entry(2)];

const fn reduction_entry(e: usize) -> KernelId<GroupedReductionParams> {
    expect_id(Kind {
        module: Module::Sm80,
        element: ELEMENTS[e],
        a_k_contiguous: false,
        b_k_contiguous: false,
        family: Family::ScalarGroupedReduction,
    })
}

/// The entry a call runs with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ScalarGroupedPlan {
    /// The rows split.
    Rows(KernelId<GroupedParams>),
    /// The reduction split.
    Reduction(KernelId<GroupedReductionParams>),
}

impl ScalarGroupedPlan {
    /// The entry's name.
    #[cfg(test)]
    fn name(&self) -> &'static str {
        match self {
            ScalarGroupedPlan::Rows(id) => id.spec().name,
            ScalarGroupedPlan::Reduction(id) => id.spec().name,
        }
    }
}

/// Elements between consecutive rows and consecutive columns of `op`.
fn steps(op: &Operand) -> [u64; 2] {
    let ld = op.ld as u64;
    match op.layout {
        Layout::RowMajor => [ld, 1],
        Layout::ColMajor => [1, ld],
    }
}

/// The scalar grouped kernel of a device (the sm80 module's).
pub(crate) struct ScalarGroupedKernels {
    entries: Arc<Entries>,
    sms: u32,
}

impl ScalarGroupedKernels {
    pub(crate) fn new(entries: &Arc<Entries>, sms: u32) -> Self {
        ScalarGroupedKernels {
            entries: entries.clone(),
            sms: sms.max(1),
        }
    }

    /// The plan for `gg`, or why the kernel cannot run it. Host arithmetic only.
    pub(crate) fn plan(&self, gg: &GroupedGemm) -> Result<ScalarGroupedPlan, Unsupported> {
        let g = &gg.gemm;
        match gg.split {
            GroupSplit::Rows => {
                if g.a.layout != Layout::RowMajor {
                    return Err(Unsupported::ANotAlongK);
                }
                let b_k_contiguous = g.b.layout == Layout::ColMajor;
                Ok(ScalarGroupedPlan::Rows(
                    TABLE[element_index(g.a.dtype)][usize::from(b_k_contiguous)],
                ))
            }
            GroupSplit::Reduction => Ok(ScalarGroupedPlan::Reduction(
                REDUCTION[element_index(g.a.dtype)],
            )),
            GroupSplit::Columns => Err(Unsupported::GroupedForm),
        }
    }

    /// Launches `plan` for `gg` with the group ends at device address `ends`.
    ///
    /// # Safety
    /// 1. `p` points to device buffers of the current context valid for the whole call's
    ///    extents, C overlaps no input, and they outlive the work on `stream`, a stream of
    ///    this context or null.
    /// 2. `ends` is a device address of this context holding `gg.groups()` `i32`s for as long,
    ///    not written by the work the kernel runs alongside.
    /// 3. `plan` is this planner's plan of `gg`, and the call is not empty (M, N and the
    ///    groups all non-zero).
    /// 4. `errors` is 0 or the device address of a `GroupErrorRecord` that stays valid for
    ///    as long (the kernel may write it).
    pub(crate) unsafe fn launch(
        &self,
        plan: &ScalarGroupedPlan,
        gg: &GroupedGemm,
        ends: *const i32,
        errors: u64,
        p: &GemmPointers,
        stream: sys::CUstream,
    ) -> Result<()> {
        let grouped = GroupedParams {
            gemm: gemm_params(&gg.whole(), p, 1, 1),
            group_ends: ends as u64,
            errors,
        };
        // One thread per element of C: M × N of the rows split's one C, of each group's C
        // in the reduction split.
        let per_group = grouped.gemm.m * grouped.gemm.n;
        let elements = match plan {
            ScalarGroupedPlan::Rows(_) => per_group,
            ScalarGroupedPlan::Reduction(_) => per_group * grouped.gemm.batch,
        };
        // The blocks loop over the elements: enough of them to fill the device, no more, so
        // that each block's check of the ends serves many elements.
        let blocks = elements.div_ceil(u64::from(THREADS));
        let most = u64::from(self.sms) * u64::from(BLOCKS_PER_SM);
        let grid = blocks.min(most).max(1) as u32;
        match *plan {
            ScalarGroupedPlan::Rows(entry) => {
                let kernel = self.entries.get(entry)?;
                // SAFETY: the plan accepted the call (rows split, A read along K; the kernel
                // loads element by element, so any natural alignment); the buffers and `ends`
                // satisfy the caller's contract, and `errors` is 0 or a record; no cluster.
                unsafe { kernel.launch(grid, &grouped, stream, &mut []) }
            }
            ScalarGroupedPlan::Reduction(entry) => {
                let kernel = self.entries.get(entry)?;
                let params = GroupedReductionParams {
                    grouped,
                    a_steps: steps(&gg.gemm.a),
                    b_steps: steps(&gg.gemm.b),
                };
                // SAFETY: the plan accepted the call (reduction split: no bias, which the
                // engine refuses for it; any layout, the steps; element by element, so any
                // natural alignment); as above otherwise.
                unsafe { kernel.launch(grid, &params, stream, &mut []) }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{DType, Gemm, Operand, OutputMode};
    use sgemm_bi_abi::catalogue::KERNELS;

    #[test]
    fn every_slot_is_its_entry_and_every_entry_has_a_slot() {
        let mut slots: Vec<&str> = TABLE.iter().flatten().map(|id| id.spec().name).collect();
        assert_eq!(TABLE[0][0].spec().name, "sgemm_bi_scalar_grouped_f32_r");
        assert_eq!(TABLE[1][1].spec().name, "sgemm_bi_scalar_grouped_bf16_c");
        assert_eq!(TABLE[2][0].spec().name, "sgemm_bi_scalar_grouped_f16_r");
        slots.sort_unstable();
        let mut entries: Vec<&str> = KERNELS
            .iter()
            .filter(|k| k.kind.family == Family::ScalarGrouped)
            .map(|k| k.name)
            .collect();
        entries.sort_unstable();
        assert_eq!(slots, entries);
        let reduction: Vec<&str> = REDUCTION.iter().map(|id| id.spec().name).collect();
        assert_eq!(
            reduction,
            [
                "sgemm_bi_scalar_grouped_k_f32",
                "sgemm_bi_scalar_grouped_k_bf16",
                "sgemm_bi_scalar_grouped_k_f16"
            ]
        );
        let entries: Vec<&str> = KERNELS
            .iter()
            .filter(|k| k.kind.family == Family::ScalarGroupedReduction)
            .map(|k| k.name)
            .collect();
        assert_eq!(reduction, entries);
    }

    /// The rows split with a row-major A, whatever the dtype, B's layout, the bias or the
    /// output mode; the reduction split (below); not the columns split.
    #[test]
    fn the_plan_takes_the_rows_split_with_a_row_major_a() {
        let kernels = ScalarGroupedKernels::new(&Arc::new(Entries::new(None, None, 132)), 132);
        let rows = |dtype, b: Operand| GroupedGemm {
            split: GroupSplit::Rows,
            gemm: Gemm {
                batch: 4,
                b: b.with_batch_stride(64 * 32),
                ..Gemm::dense(100, 32, 64, dtype)
            },
        };
        for dtype in [DType::F32, DType::BF16, DType::F16] {
            for (b, name) in [
                (Operand::row_major(dtype, 32), "r"),
                (Operand::col_major(dtype, 64), "c"),
            ] {
                let mut gg = rows(dtype, b);
                gg.gemm.bias = Some(DType::F32);
                gg.gemm.c.mode = OutputMode::AccumulateF32;
                let plan = kernels.plan(&gg).unwrap();
                assert_eq!(
                    plan.name(),
                    format!("sgemm_bi_scalar_grouped_{dtype}_{name}")
                );
            }
        }
        let mut gg = rows(DType::F32, Operand::row_major(DType::F32, 32));
        gg.gemm.a = Operand::col_major(DType::F32, 100);
        assert_eq!(kernels.plan(&gg), Err(Unsupported::ANotAlongK));
        let gg = GroupedGemm {
            split: GroupSplit::Columns,
            ..gg
        };
        assert_eq!(kernels.plan(&gg), Err(Unsupported::GroupedForm));
    }

    /// The reduction split, whatever the dtype, the layouts of A and B or the output mode:
    /// one entry per dtype, the layouts passed as steps.
    #[test]
    fn the_plan_takes_the_reduction_split_in_every_layout() {
        let kernels = ScalarGroupedKernels::new(&Arc::new(Entries::new(None, None, 132)), 132);
        for dtype in [DType::F32, DType::BF16, DType::F16] {
            for a in [Operand::row_major(dtype, 96), Operand::col_major(dtype, 32)] {
                for b in [Operand::row_major(dtype, 64), Operand::col_major(dtype, 96)] {
                    for mode in [OutputMode::Overwrite(DType::F32), OutputMode::AccumulateF32] {
                        let mut gemm = Gemm {
                            batch: 4,
                            a,
                            b,
                            ..Gemm::dense(32, 64, 96, dtype)
                        };
                        gemm.c.batch_stride = 32 * 64;
                        gemm.c.mode = mode;
                        let gg = GroupedGemm {
                            split: GroupSplit::Reduction,
                            gemm,
                        };
                        let plan = kernels.plan(&gg).unwrap();
                        assert_eq!(plan.name(), format!("sgemm_bi_scalar_grouped_k_{dtype}"));
                    }
                }
            }
        }
    }

    /// The steps of each layout: (rows, columns).
    #[test]
    fn the_steps_follow_the_layout() {
        assert_eq!(steps(&Operand::row_major(DType::F32, 7)), [7, 1]);
        assert_eq!(steps(&Operand::col_major(DType::F32, 9)), [1, 9]);
    }
}
