//! The grouped GEMM (Mixture-of-Experts): `sgemm_bi_grouped_gemm`, torch's `grouped_mm` for
//! C callers.

use std::ffi::c_void;
use std::mem::size_of;

use sgemm_bi::{GemmPointers, GroupOffsets, GroupSplit, GroupedGemm, Stream};

use crate::desc::{read_struct, sgemm_bi_gemm_desc, CEnum};
use crate::engine::{engine, sgemm_bi_engine};
use crate::status::{boundary, sgemm_bi_status, Failure};

/// The dimension a grouped call's offsets split.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum sgemm_bi_group_split {
    /// M: group g owns rows `offsets[g-1]..offsets[g]` of A and C, its own B (batch entry
    /// g) and its own bias (`bias + g * N`). torch's 2-D × 3-D: the experts' forward and
    /// input gradient.
    Rows = 0,
    /// N: group g owns columns `offsets[g-1]..offsets[g]` of B, C and the bias, and its own
    /// A (batch entry g). torch's 3-D × 2-D.
    Columns = 1,
    /// K: group g reduces over `offsets[g-1]..offsets[g]` (columns of A, rows of B) into
    /// its own C (batch entry g). torch's 2-D × 2-D: the experts' weight gradient. No bias.
    Reduction = 2,
}

/// Where a grouped call's offsets are.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum sgemm_bi_offsets_location {
    /// Host memory, read during the call.
    Host = 0,
    /// Device memory of the engine's context (CUDA engines). Where a grouped kernel takes
    /// the call (the scalar tier's ROWS and REDUCTION, or sm_90's tensor-core tier; see
    /// `sgemm_bi_grouped_gemm`) it reads them on the device without a wait, and reports a bad
    /// end afterwards
    /// (`sgemm_bi_engine_take_device_error`). Elsewhere they are read back on `stream` after
    /// the work queued before, which waits for the stream, so not during graph capture
    /// (`SGEMM_BI_STATUS_UNSUPPORTED`).
    Device = 1,
}

impl CEnum for sgemm_bi_group_split {
    const NAME: &'static str = "sgemm_bi_group_split";
    const VALUES: &'static [(Self, &'static str)] = &[
        (Self::Rows, "SGEMM_BI_GROUP_SPLIT_ROWS"),
        (Self::Columns, "SGEMM_BI_GROUP_SPLIT_COLUMNS"),
        (Self::Reduction, "SGEMM_BI_GROUP_SPLIT_REDUCTION"),
    ];
}

impl CEnum for sgemm_bi_offsets_location {
    const NAME: &'static str = "sgemm_bi_offsets_location";
    const VALUES: &'static [(Self, &'static str)] = &[
        (Self::Host, "SGEMM_BI_OFFSETS_LOCATION_HOST"),
        (Self::Device, "SGEMM_BI_OFFSETS_LOCATION_DEVICE"),
    ];
}

/// A grouped GEMM: `desc->batch` groups, each the dense call of its part, so every output
/// element has the bits of the dense `sgemm_bi_gemm` of its group's part (they do not depend
/// on the other groups' sizes, the part's position or the number of groups).
///
/// `desc` describes the call over all groups: `batch` is the number of groups and the split
/// dimension (`m`, `n` or `k` for `split` ROWS, COLUMNS or REDUCTION) its total. The operand
/// each group has its own of (B for ROWS, A for COLUMNS, C for REDUCTION) steps by its
/// `batch_stride`; the other operands are shared and their `batch_stride` is ignored. With a
/// bias, ROWS reads N per group (`bias + g * N`), COLUMNS one per column of C.
///
/// `offsets` holds `batch` cumulative group ends (`int32_t`, as torch's `offs`):
/// non-decreasing, from 0 up to the total; `SGEMM_BI_STATUS_BAD_OFFSETS` otherwise, before
/// anything runs. Rows (ROWS) or columns (COLUMNS) of C past the last end are written as +0.0,
/// or left as they are when accumulating.
///
/// Device offsets that a grouped kernel reads on the device (the scalar tier, on every GPU:
/// ROWS with a row-major A, REDUCTION in any layout; sm_90's tensor-core tier, bf16 or f16:
/// ROWS with a row-major A and an overwritten C, REDUCTION with a column-major A and a
/// row-major B) are not waited for, so the call cannot check them first: the kernel clamps
/// a bad end into the split
/// dimension (never touching memory outside the buffers) and reports the first one to the
/// engine once it has run. The next grouped call on the engine then
/// returns `SGEMM_BI_STATUS_BAD_OFFSETS` without running, its message naming the group, the
/// end and that it was found on the device; `sgemm_bi_engine_take_device_error` asks directly.
///
/// # Safety
/// As for `sgemm_bi_gemm`, with the extents of the whole call (the per-group operand `batch`
/// times, the bias `batch * N` elements for ROWS); `offsets` is NULL or valid for `batch`
/// `int32_t`s in the memory `offsets_location` names.
#[no_mangle]
#[allow(clippy::too_many_arguments)] // the C signature: one flat list, as sgemm_bi_gemm's
pub unsafe extern "C" fn sgemm_bi_grouped_gemm(
    engine: *const sgemm_bi_engine,
    desc: *const sgemm_bi_gemm_desc,
    split: u32,
    offsets: *const i32,
    offsets_location: u32,
    a: *const c_void,
    b: *const c_void,
    bias: *const c_void,
    c: *mut c_void,
    stream: *mut c_void,
) -> sgemm_bi_status {
    boundary(|| {
        // SAFETY: contract of sgemm_bi_gemm (1).
        let e = unsafe { self::engine(engine) }?;
        // SAFETY: as above.
        let gemm = unsafe { read_struct(desc, "desc") }?.to_gemm()?;
        let split = match sgemm_bi_group_split::parse(split, "split")? {
            sgemm_bi_group_split::Rows => GroupSplit::Rows,
            sgemm_bi_group_split::Columns => GroupSplit::Columns,
            sgemm_bi_group_split::Reduction => GroupSplit::Reduction,
        };
        let location = sgemm_bi_offsets_location::parse(offsets_location, "offsets_location")?;
        if gemm.bias.is_none() && !bias.is_null() {
            return Err(Failure::invalid(
                "bias is not NULL, but desc->has_bias is 0: set has_bias to 1 (and bias_dtype) \
                 to add it, or pass NULL",
            ));
        }
        let groups = gemm.batch;
        if groups > sgemm_bi::validate::MAX_DIM / size_of::<i32>() {
            return Err(Failure::invalid(format!(
                "desc->batch is {groups}: more groups than offsets fit in memory"
            )));
        }
        if offsets.is_null() && groups > 0 {
            return Err(Failure::null("offsets"));
        }
        let offsets = match location {
            // SAFETY: `offsets` is valid for `groups` host int32_t (contract), non-null when
            // `groups` > 0.
            sgemm_bi_offsets_location::Host if groups > 0 => {
                GroupOffsets::Host(unsafe { std::slice::from_raw_parts(offsets, groups) })
            }
            sgemm_bi_offsets_location::Host => GroupOffsets::Host(&[]),
            sgemm_bi_offsets_location::Device => GroupOffsets::Device(offsets),
        };
        let g = GroupedGemm { split, gemm };
        let p = GemmPointers { a, b, bias, c };
        // SAFETY: the remaining contracts are `Engine::grouped_gemm`'s.
        unsafe { e.grouped_gemm(&g, offsets, p, Stream(stream)) }?;
        Ok(())
    })
}
