//! What every kernel family's planner shares: the [`Planner`] interface (can it run this
//! call → a plan → a launch), the reasons a family cannot run a call ([`Unsupported`]), and
//! the tables that turn a call's element type and layouts into catalogue keys.
//!
//! A planner never picks a reduction order: every family and every plan computes each
//! element with the contract's one chain, so which family runs a call, and with which tile,
//! changes only speed (C2, C3).

use cudarc::driver::sys;
use sgemm_bi_abi::catalogue::Element;

use crate::error::{Operand as Which, Result};
use crate::types::{DType, Gemm, GemmPointers, Layout, Operand};

/// A kernel family on one device: whether it can run a call, and how ([`Planner::plan`]),
/// then the launch of that plan ([`Planner::launch`]). The backend asks the families in its
/// order of preference and launches the first plan it gets.
pub(crate) trait Planner {
    /// What the family chose for one call: its entry points and launch shape.
    type Plan;

    /// The plan for `g` on `p`, or why this family cannot run it. Host arithmetic only: no
    /// driver call, no allocation.
    fn plan(&self, g: &Gemm, p: &GemmPointers) -> Result<Self::Plan, Unsupported>;

    /// Enqueues `plan` on `stream` (loading its entry points on first use).
    ///
    /// # Safety
    /// 1. As for `CudaBackend::gemm`: `p` points to device buffers of the current context
    ///    valid for `g`'s extents, C overlaps no input, and they outlive the work on
    ///    `stream`, a stream of this context or null.
    /// 2. `plan` is this planner's plan of `g` on `p`.
    unsafe fn launch(
        &self,
        plan: &Self::Plan,
        g: &Gemm,
        p: &GemmPointers,
        stream: sys::CUstream,
    ) -> Result<()>;
}

/// What a value must be a multiple of, or below.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Quantity {
    /// A buffer's address, in bytes.
    Address,
    /// A leading dimension, in elements.
    LeadingDimension,
    /// A batch stride, in elements.
    BatchStride,
}

/// Why a family cannot run a call. Plain data, so that asking a family that declines costs
/// no allocation; the text comes with `Display`, when an error reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Unsupported {
    /// An operand's address, leading dimension or batch stride is not a multiple of
    /// `multiple` (bytes for an address, elements otherwise).
    Misaligned {
        operand: Which,
        what: Quantity,
        value: usize,
        multiple: usize,
    },
    /// An operand's row pitch or batch stride is 2^40 bytes or more: more than a tensor map
    /// holds.
    StrideTooLarge { operand: Which },
    /// K = 0: no MMA step to run (the kernels that take it write the bias alone).
    EmptyK,
    /// An extent exceeds a TMA coordinate (2^31 − 1).
    ExtentTooLarge,
    /// N does not end on the unit (elements of C) in which the copy engine stores rows.
    NotWholeStoreUnits { n: usize, unit: usize },
    /// Accumulate mode stores pairs of columns, so N must be even.
    OddN { n: usize },
    /// M outside the few-row kernels' range.
    Rows { m: usize },
    /// A is not read along K (column-major, with more than one row or elements apart).
    ANotAlongK,
    /// The family has no kernels for this input type.
    Element { dtype: DType },
    /// The family builds no entry point for the tile its heuristics chose (a planner bug:
    /// the tests check that every choice is built).
    NotBuilt,
    /// The grouped kernels take rows split into groups, A read along K (row-major) and an
    /// overwritten C; this grouped call is another form.
    GroupedForm,
}

impl std::fmt::Display for Unsupported {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            Unsupported::Misaligned {
                operand,
                what: Quantity::Address,
                value,
                multiple,
            } => write!(
                f,
                "{operand}'s address {value:#x} is not {multiple}-byte aligned"
            ),
            Unsupported::Misaligned {
                operand,
                what,
                value,
                multiple,
            } => {
                let what = match what {
                    Quantity::LeadingDimension => "leading dimension",
                    _ => "batch stride",
                };
                if multiple == 2 {
                    write!(f, "{operand}'s {what} {value} is odd")
                } else {
                    write!(
                        f,
                        "{operand}'s {what} {value} is not a multiple of {multiple}"
                    )
                }
            }
            Unsupported::StrideTooLarge { operand } => write!(
                f,
                "{operand}'s row pitch or batch stride is 2^40 bytes or more"
            ),
            Unsupported::EmptyK => f.write_str("K = 0 has no MMA step"),
            Unsupported::ExtentTooLarge => {
                f.write_str("an extent exceeds a TMA coordinate (2^31 - 1)")
            }
            Unsupported::NotWholeStoreUnits { n, unit } => write!(
                f,
                "N = {n} is not a multiple of {unit}: the copy engine stores C's rows in \
                 16-byte units"
            ),
            Unsupported::OddN { n } => {
                write!(f, "N = {n} is odd: accumulate mode stores column pairs")
            }
            Unsupported::Rows { m } => write!(f, "M = {m} is not in 1..=64"),
            Unsupported::ANotAlongK => f.write_str("A is not read along K"),
            Unsupported::Element { dtype } => write!(f, "no kernels for {dtype:?} inputs"),
            Unsupported::NotBuilt => f.write_str("no entry point is built for the chosen tile"),
            Unsupported::GroupedForm => f.write_str(
                "the grouped kernels take a rows split, a row-major A and an overwritten C",
            ),
        }
    }
}

/// The copy rule of the 16-byte loaders (`cp.async` pieces, TMA boxes): an operand of
/// `size`-byte elements at `addr` with leading dimension `ld` (`None`: one row, whose pitch
/// is never used) and batch stride `batch_stride` is copied in whole 16-byte pieces when the
/// address is 16-byte aligned and the row pitch and batch stride (with more than one batch
/// entry) are multiples of 16 bytes.
pub(crate) fn copyable_16(
    operand: Which,
    size: usize,
    addr: usize,
    ld: Option<usize>,
    batch_stride: usize,
    batch: usize,
) -> Result<(), Unsupported> {
    let unit = 16 / size;
    let misaligned = |what, value, multiple| Unsupported::Misaligned {
        operand,
        what,
        value,
        multiple,
    };
    if addr % 16 != 0 {
        return Err(misaligned(Quantity::Address, addr, 16));
    }
    if let Some(ld) = ld.filter(|ld| ld % unit != 0) {
        return Err(misaligned(Quantity::LeadingDimension, ld, unit));
    }
    if batch > 1 && batch_stride % unit != 0 {
        return Err(misaligned(Quantity::BatchStride, batch_stride, unit));
    }
    Ok(())
}

/// The operand layout pairs `(A, B)`, in the order the planners' tables are indexed by.
pub(crate) const LAYOUTS: [(Layout, Layout); 4] = [
    (Layout::RowMajor, Layout::RowMajor),
    (Layout::RowMajor, Layout::ColMajor),
    (Layout::ColMajor, Layout::RowMajor),
    (Layout::ColMajor, Layout::ColMajor),
];

/// The input types, in the order the planners' tables are indexed by.
pub(crate) const ELEMENTS: [Element; 3] = [Element::F32, Element::Bf16, Element::F16];

/// The index of `g`'s layout pair in [`LAYOUTS`].
pub(crate) fn layout_index(g: &Gemm) -> usize {
    2 * (g.a.layout == Layout::ColMajor) as usize + (g.b.layout == Layout::ColMajor) as usize
}

/// The index of `dtype` in [`ELEMENTS`].
pub(crate) fn element_index(dtype: DType) -> usize {
    match dtype {
        DType::F32 => 0,
        DType::BF16 => 1,
        DType::F16 => 2,
    }
}

/// Whether A (`(M, K)`) and B (`(K, N)`) of layouts `(a, b)` are K-contiguous: the
/// catalogue's terms for a layout pair.
pub(crate) const fn k_contiguous((a, b): (Layout, Layout)) -> (bool, bool) {
    (matches!(a, Layout::RowMajor), matches!(b, Layout::ColMajor))
}

/// An operand's 16-byte copy check for the tiled loaders (every row and batch entry).
pub(crate) fn operand_copyable_16(
    which: Which,
    op: &Operand,
    addr: usize,
    batch: usize,
) -> Result<(), Unsupported> {
    copyable_16(
        which,
        op.dtype.size(),
        addr,
        Some(op.ld),
        op.batch_stride,
        batch,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tables_agree_with_their_indices() {
        for (i, layouts) in LAYOUTS.into_iter().enumerate() {
            let mut g = Gemm::dense(1, 1, 1, DType::F32);
            (g.a.layout, g.b.layout) = layouts;
            assert_eq!(layout_index(&g), i);
        }
        for (i, dtype) in [DType::F32, DType::BF16, DType::F16]
            .into_iter()
            .enumerate()
        {
            assert_eq!(element_index(dtype), i);
            assert_eq!(ELEMENTS[i].bytes() as usize, dtype.size());
        }
    }

    #[test]
    fn reasons_read_as_sentences() {
        let r = copyable_16(Which::A, 2, 0x1002, Some(8), 0, 1).unwrap_err();
        assert_eq!(r.to_string(), "A's address 0x1002 is not 16-byte aligned");
        let r = copyable_16(Which::B, 4, 0x1000, Some(6), 0, 1).unwrap_err();
        assert_eq!(
            r.to_string(),
            "B's leading dimension 6 is not a multiple of 4"
        );
        let r = copyable_16(Which::B, 2, 0x1000, None, 12, 2).unwrap_err();
        assert_eq!(r.to_string(), "B's batch stride 12 is not a multiple of 8");
        assert!(copyable_16(Which::B, 2, 0x1000, None, 12, 1).is_ok());
    }
}
