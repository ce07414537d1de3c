//! Checks a [`Gemm`] descriptor before anything runs, and measures the memory each operand
//! spans. Every rejection is a typed [`Error`]; an accepted descriptor can be executed by
//! every backend with 64-bit index arithmetic that cannot overflow.

use std::ffi::c_void;
use std::ops::Range;

use crate::error::{Error, Operand as Which, Result};
use crate::types::{DType, Gemm, GemmPointers, Layout, Operand, Tier};

/// The largest size, leading dimension or stride a descriptor may hold. No buffer spans more
/// than `isize::MAX` bytes, so no larger value describes memory; one is most often a negative
/// number converted to an unsigned one (from C or Python), and is rejected even where it
/// would not be used (an empty call, a K of 0).
pub const MAX_DIM: usize = isize::MAX as usize;

/// Elements each buffer of an accepted call spans, from its base address (0 when the call
/// does not read or write it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Extents {
    pub a: usize,
    pub b: usize,
    pub bias: usize,
    pub c: usize,
}

impl Extents {
    /// True when the call reads and writes nothing (M, N or batch is zero).
    pub fn is_empty(&self) -> bool {
        self.c == 0
    }
}

fn overflow(operand: Which, detail: impl Into<String>) -> Error {
    Error::Overflow {
        operand,
        detail: detail.into(),
    }
}

/// Span in elements of a `rows × cols` matrix with leading dimension `ld` repeated `batch`
/// times `batch_stride` apart (0 when any extent is 0). Also checks that the span in bytes
/// fits in `isize`, so every pointer offset inside it is representable.
#[allow(clippy::too_many_arguments)] // one flat description of a strided matrix
fn span(
    which: Which,
    dtype: DType,
    rows: usize,
    cols: usize,
    layout: Layout,
    ld: usize,
    batch: usize,
    batch_stride: usize,
) -> Result<usize> {
    if rows == 0 || cols == 0 || batch == 0 {
        return Ok(0);
    }
    let (outer, inner) = match layout {
        Layout::RowMajor => (rows, cols),
        Layout::ColMajor => (cols, rows),
    };
    let last = (outer - 1)
        .checked_mul(ld)
        .and_then(|x| x.checked_add(inner))
        .and_then(|x| {
            (batch - 1)
                .checked_mul(batch_stride)
                .and_then(|b| b.checked_add(x))
        })
        .ok_or_else(|| {
            overflow(
                which,
                format!("{rows}×{cols}, ld {ld}, batch {batch} × stride {batch_stride}"),
            )
        })?;
    let bytes = last
        .checked_mul(dtype.size())
        .filter(|&b| b <= isize::MAX as usize);
    if bytes.is_none() {
        return Err(overflow(which, format!("{last} elements of {dtype}")));
    }
    Ok(last)
}

fn check_ld(which: Which, layout: Layout, ld: usize, rows: usize, cols: usize) -> Result<()> {
    let min = match layout {
        Layout::RowMajor => cols,
        Layout::ColMajor => rows,
    }
    .max(1);
    if ld < min {
        return Err(Error::BadLeadingDimension {
            operand: which,
            ld,
            min,
        });
    }
    Ok(())
}

pub(crate) fn check_operand(
    which: Which,
    op: &Operand,
    rows: usize,
    cols: usize,
    batch: usize,
) -> Result<usize> {
    check_ld(which, op.layout, op.ld, rows, cols)?;
    span(
        which,
        op.dtype,
        rows,
        cols,
        op.layout,
        op.ld,
        batch,
        op.batch_stride,
    )
}

/// Every size, leading dimension and stride of `g` is at most [`MAX_DIM`].
fn check_dims(g: &Gemm) -> Result<()> {
    let fields = [
        (Which::A, "m", g.m),
        (Which::B, "n", g.n),
        (Which::A, "k", g.k),
        (Which::A, "batch", g.batch),
        (Which::A, "the leading dimension of A", g.a.ld),
        (Which::A, "the batch stride of A", g.a.batch_stride),
        (Which::B, "the leading dimension of B", g.b.ld),
        (Which::B, "the batch stride of B", g.b.batch_stride),
        (Which::C, "ldc", g.c.ldc),
        (Which::C, "the batch stride of C", g.c.batch_stride),
    ];
    match fields.into_iter().find(|f| f.2 > MAX_DIM) {
        None => Ok(()),
        Some((which, name, v)) => Err(overflow(
            which,
            format!(
                "{name} is {v}, above isize::MAX; as a signed 64-bit number it is {}: a \
                 negative size?",
                v as i64
            ),
        )),
    }
}

/// Checks the shapes, strides and dtypes of `g` and returns the extent of each buffer.
pub fn check(g: &Gemm) -> Result<Extents> {
    if g.a.dtype != g.b.dtype {
        return Err(Error::UnsupportedDtype(format!(
            "A is {} and B is {}: both inputs must have the same dtype",
            g.a.dtype, g.b.dtype
        )));
    }
    if let Some(bias) = g.bias {
        if bias != DType::F32 && bias != g.a.dtype {
            return Err(Error::UnsupportedDtype(format!(
                "bias is {bias}: it must be f32 or the input dtype ({})",
                g.a.dtype
            )));
        }
    }
    if g.tier == Tier::TensorCores && g.a.dtype == DType::F32 {
        return Err(Error::UnsupportedDtype(
            "the tensor-core tier takes bf16 or f16 inputs; use the scalar tier for f32".into(),
        ));
    }
    check_dims(g)?;
    let a = check_operand(Which::A, &g.a, g.m, g.k, g.batch)?;
    let b = check_operand(Which::B, &g.b, g.k, g.n, g.batch)?;
    let c = check_output(g)?;
    let bias = match g.bias {
        Some(d) if c > 0 => {
            span(Which::Bias, d, 1, g.n, Layout::RowMajor, g.n, 1, 0)?;
            g.n
        }
        _ => 0,
    };
    if c == 0 {
        return Ok(Extents {
            a: 0,
            b: 0,
            bias: 0,
            c: 0,
        });
    }
    Ok(Extents { a, b, bias, c })
}

/// Checks C's leading dimension and batch stride and returns its span: `g.batch` entries that
/// must not overlap, or the result would depend on the order in which they run.
pub(crate) fn check_output(g: &Gemm) -> Result<usize> {
    check_ld(Which::C, Layout::RowMajor, g.c.ldc, g.m, g.n)?;
    let c_dtype = g.c.mode.dtype();
    let c = span(
        Which::C,
        c_dtype,
        g.m,
        g.n,
        Layout::RowMajor,
        g.c.ldc,
        g.batch,
        g.c.batch_stride,
    )?;
    if g.batch > 1 && g.m > 0 && g.n > 0 {
        // Distinct batch entries must write distinct elements, or the result would depend on
        // the order in which entries run.
        let one = (g.m - 1) * g.c.ldc + g.n;
        if g.c.batch_stride < one {
            return Err(Error::OverlappingBatches {
                operand: Which::C,
                stride: g.c.batch_stride,
                span: one,
            });
        }
    }
    Ok(c)
}

/// Checks that every buffer the call touches has a non-null address.
pub fn check_pointers(g: &Gemm, ext: &Extents, p: &GemmPointers) -> Result<()> {
    if ext.is_empty() {
        return Ok(());
    }
    if ext.a > 0 && p.a.is_null() {
        return Err(Error::NullPointer(Which::A));
    }
    if ext.b > 0 && p.b.is_null() {
        return Err(Error::NullPointer(Which::B));
    }
    if g.bias.is_some() && p.bias.is_null() {
        return Err(Error::NullPointer(Which::Bias));
    }
    if p.c.is_null() {
        return Err(Error::NullPointer(Which::C));
    }
    Ok(())
}

/// The bytes a buffer of `elems` elements of `dtype` at `ptr` spans (`None` when it spans
/// nothing). A range that would pass the end of the address space is cut at its end.
fn bytes(ptr: *const c_void, elems: usize, dtype: DType) -> Option<Range<usize>> {
    if elems == 0 || ptr.is_null() {
        return None;
    }
    let start = ptr as usize;
    // `elems * size` fits: `check` bounds every extent by isize::MAX bytes.
    Some(start..start.saturating_add(elems * dtype.size()))
}

/// Checks that C's bytes meet none of the inputs' (A, B and the bias may share memory with
/// each other: they are only read).
pub fn check_overlap(g: &Gemm, ext: &Extents, p: &GemmPointers) -> Result<()> {
    let Some(c) = bytes(p.c, ext.c, g.c.mode.dtype()) else {
        return Ok(());
    };
    let inputs = [
        (Which::A, p.a, ext.a, g.a.dtype),
        (Which::B, p.b, ext.b, g.b.dtype),
        (Which::Bias, p.bias, ext.bias, g.bias.unwrap_or(DType::F32)),
    ];
    for (input, ptr, elems, dtype) in inputs {
        if let Some(other) = bytes(ptr, elems, dtype) {
            if c.start < other.end && other.start < c.end {
                return Err(Error::OverlappingOperands {
                    output: Which::C,
                    input,
                    c,
                    other,
                });
            }
        }
    }
    Ok(())
}
