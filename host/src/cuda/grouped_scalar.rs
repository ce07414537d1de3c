//! Planning and launching the scalar tier's grouped kernel (`kernels-gpu/src/scalar/grouped.rs`):
//! a rows-split call whose offsets are in device memory, run as one kernel that reads them,
//! so the host never waits for them and the call can be captured in a CUDA graph.
//!
//! It takes the rows split (torch's 2-D × 3-D: the experts' forward and input gradient) with
//! a row-major A, every element type, either layout of B, any alignment and either output
//! mode. Each element is the scalar tier's chain, so its bits are those of the group-by-group
//! form (`Engine::grouped_gemm`), which still runs the other splits (their offsets read back
//! first).

use std::sync::Arc;

use cudarc::driver::sys;
use sgemm_bi_abi::catalogue::{Family, Kind, Module};
use sgemm_bi_abi::params::GroupedParams;
use sgemm_bi_abi::scalar::grouped::{BLOCKS_PER_SM, THREADS};

use super::catalogue::{expect_id, Entries, KernelId};
use super::kernel_abi::gemm_params;
use super::plan::{element_index, Unsupported, ELEMENTS};
use crate::error::Result;
use crate::grouped::{GroupSplit, GroupedGemm};
use crate::types::{GemmPointers, Layout};

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

/// The entry a call runs with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ScalarGroupedPlan {
    entry: KernelId<GroupedParams>,
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
        if gg.split != GroupSplit::Rows {
            return Err(Unsupported::GroupedForm);
        }
        if g.a.layout != Layout::RowMajor {
            return Err(Unsupported::ANotAlongK);
        }
        let b_k_contiguous = g.b.layout == Layout::ColMajor;
        Ok(ScalarGroupedPlan {
            entry: TABLE[element_index(g.a.dtype)][usize::from(b_k_contiguous)],
        })
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
        let kernel = self.entries.get(plan.entry)?;
        let params = GroupedParams {
            gemm: gemm_params(&gg.whole(), p, 1, 1),
            group_ends: ends as u64,
            errors,
        };
        // The blocks loop over the elements: enough of them to fill the device, no more, so
        // that each block's check of the ends serves many elements.
        let elements = (params.gemm.m * params.gemm.n).div_ceil(u64::from(THREADS));
        let most = u64::from(self.sms) * u64::from(BLOCKS_PER_SM);
        let grid = elements.min(most).max(1) as u32;
        // SAFETY: the plan accepted the call (rows split, A read along K; the kernel loads
        // element by element, so any natural alignment); the buffers and `ends` satisfy the
        // caller's contract, and `errors` is 0 or a record; no cluster.
        unsafe { kernel.launch(grid, &params, stream, &mut []) }
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
    }

    /// The rows split with a row-major A, whatever the dtype, B's layout, the bias or the
    /// output mode; nothing else.
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
                    plan.entry.spec().name,
                    format!("sgemm_bi_scalar_grouped_{dtype}_{name}")
                );
            }
        }
        let mut gg = rows(DType::F32, Operand::row_major(DType::F32, 32));
        gg.gemm.a = Operand::col_major(DType::F32, 100);
        assert_eq!(kernels.plan(&gg), Err(Unsupported::ANotAlongK));
        for split in [GroupSplit::Columns, GroupSplit::Reduction] {
            let gg = GroupedGemm { split, ..gg };
            assert_eq!(kernels.plan(&gg), Err(Unsupported::GroupedForm));
        }
    }
}
