//! Grouped GEMM (Mixture-of-Experts): one call of many dense GEMMs that share a shape but for
//! one dimension, whose split into groups is given by cumulative offsets.
//!
//! The contract is the dense call's, group by group: group `g` computes exactly the dense
//! sgemm-bi call of its part (its rows, columns or reduction range) with its own operand, so
//! an output element's bits do not depend on the other groups' sizes, on where the group
//! starts, or on how many groups there are. [`GroupedGemm::group`] is that dense call; the
//! CPU backend runs it group after group, the CUDA one either so (each group's dense kernel)
//! or, for offsets in device memory, as one grouped kernel that reads them: on the Hopper
//! path one that runs each group with the dense kernels' mainloop
//! (`kernels-gpu/src/hopper/grouped.rs`), on the scalar tier one that computes each element's
//! chain as the dense scalar kernels do (`kernels-gpu/src/scalar/grouped.rs`). All give the
//! dense calls' bits.
//!
//! Offsets are checked before anything runs ([`check_offsets`]), except those the grouped
//! kernel reads on the device without a wait: it clamps a bad end and reports it once it
//! has run, to the engine's next grouped call ([`GroupOffsets::Device`]).

use crate::error::{Error, Operand as Which, Result};
use crate::types::{Gemm, Layout};
use crate::validate::{self, Extents};

/// The dimension a grouped call's offsets split.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum GroupSplit {
    /// M: group `g` owns rows `offsets[g-1]..offsets[g]` of A and C and multiplies them by
    /// its own B (entry `g` of B's batch, `g · b.batch_stride` elements on) and adds its own
    /// bias (`bias[g · N ..]`, N per group). torch's 2-D × 3-D `grouped_mm`: the experts'
    /// forward and input gradient.
    Rows = 0,
    /// N: group `g` owns columns `offsets[g-1]..offsets[g]` of B, C and the bias, and its own
    /// A (entry `g` of A's batch). torch's 3-D × 2-D `grouped_mm`.
    Columns = 1,
    /// K: group `g` reduces over `k` in `offsets[g-1]..offsets[g]` (columns of A, rows of B)
    /// into its own C (entry `g` of C's batch). torch's 2-D × 2-D `grouped_mm`: the experts'
    /// weight gradient. No bias.
    Reduction = 2,
}

impl std::fmt::Display for GroupSplit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            GroupSplit::Rows => "rows",
            GroupSplit::Columns => "columns",
            GroupSplit::Reduction => "reduction",
        })
    }
}

/// A grouped GEMM call: `gemm.batch` groups, each the dense call [`GroupedGemm::group`]
/// returns.
///
/// `gemm` describes the call over all groups: `batch` is the number of groups, the split
/// dimension (`m`, `n` or `k`) is its total extent, and the operand each group has its own of
/// steps by its batch stride from group to group (B for [`GroupSplit::Rows`], A for
/// [`GroupSplit::Columns`], C for [`GroupSplit::Reduction`]); the other operands are shared by
/// the groups, and their batch strides are ignored.
///
/// The offsets are `batch` cumulative ends (`i32`, as torch's): non-decreasing, from 0 to at
/// most the total. Rows ([`GroupSplit::Rows`]) or columns ([`GroupSplit::Columns`]) past the
/// last end belong to no group: an overwriting call writes them as +0.0, an accumulating one
/// leaves them as they are. Reduction indices past the last end are not read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GroupedGemm {
    pub split: GroupSplit,
    pub gemm: Gemm,
}

/// The dense call of one group and where its operands start, in elements from the grouped
/// call's base pointers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GroupCall {
    pub gemm: Gemm,
    pub a: usize,
    pub b: usize,
    pub bias: usize,
    pub c: usize,
}

/// Elements between consecutive rows (`RowMajor`: the leading dimension) and consecutive
/// columns of a matrix in `layout`.
fn steps(layout: Layout, ld: usize) -> (usize, usize) {
    match layout {
        Layout::RowMajor => (ld, 1),
        Layout::ColMajor => (1, ld),
    }
}

impl GroupedGemm {
    /// The number of groups.
    pub fn groups(&self) -> usize {
        self.gemm.batch
    }

    /// The total extent of the split dimension.
    pub fn total(&self) -> usize {
        match self.split {
            GroupSplit::Rows => self.gemm.m,
            GroupSplit::Columns => self.gemm.n,
            GroupSplit::Reduction => self.gemm.k,
        }
    }

    /// The dense call of group `group`, which owns `start..end` of the split dimension
    /// (`start <= end <= total`, not checked here).
    pub fn group(&self, group: usize, start: usize, end: usize) -> GroupCall {
        let g = &self.gemm;
        let single = Gemm { batch: 1, ..*g };
        let (a_row, a_col) = steps(g.a.layout, g.a.ld);
        let (b_row, b_col) = steps(g.b.layout, g.b.ld);
        let len = end - start;
        match self.split {
            GroupSplit::Rows => GroupCall {
                gemm: Gemm { m: len, ..single },
                a: start * a_row,
                b: group * g.b.batch_stride,
                bias: group * g.n,
                c: start * g.c.ldc,
            },
            GroupSplit::Columns => GroupCall {
                gemm: Gemm { n: len, ..single },
                a: group * g.a.batch_stride,
                b: start * b_col,
                bias: start,
                c: start,
            },
            GroupSplit::Reduction => GroupCall {
                gemm: Gemm { k: len, ..single },
                a: start * a_col,
                b: start * b_row,
                bias: 0,
                c: group * g.c.batch_stride,
            },
        }
    }

    /// The call that writes +0.0 over the rows or columns `start..total` past the last
    /// group (K = 0, no bias: each element is the empty chain's +0.0), or `None` when there
    /// is nothing to clear (a reduction split, an accumulating call, or no such part).
    pub fn cleared(&self, start: usize) -> Option<GroupCall> {
        let total = self.total();
        let overwrite = matches!(self.gemm.c.mode, crate::types::OutputMode::Overwrite(_));
        if start >= total || self.split == GroupSplit::Reduction || !overwrite {
            return None;
        }
        let mut call = self.group(0, start, total);
        call.gemm.k = 0;
        call.gemm.bias = None;
        call.a = 0;
        call.b = 0;
        call.bias = 0;
        Some(call)
    }

    /// The whole call as one dense descriptor, whose extents cover every group's buffers:
    /// the per-group operand repeated `groups` times (its batch stride), the shared ones
    /// once (batch stride 0).
    pub(crate) fn whole(&self) -> Gemm {
        let g = &self.gemm;
        let mut whole = *g;
        match self.split {
            GroupSplit::Rows => {
                whole.a.batch_stride = 0;
                whole.c.batch_stride = 0;
            }
            GroupSplit::Columns => {
                whole.b.batch_stride = 0;
                whole.c.batch_stride = 0;
            }
            GroupSplit::Reduction => {
                whole.a.batch_stride = 0;
                whole.b.batch_stride = 0;
            }
        }
        whole
    }

    /// Checks the descriptor (as [`validate::check`] does a dense one) and returns the
    /// extent of each buffer over all groups, and the whole call as one descriptor for the
    /// pointer checks.
    pub(crate) fn check(&self) -> Result<(Extents, Gemm)> {
        let g = &self.gemm;
        if self.split == GroupSplit::Reduction && g.bias.is_some() {
            return Err(Error::UnsupportedDtype(
                "a grouped call that splits K takes no bias (each group's output is a weight \
                 gradient)"
                    .into(),
            ));
        }
        let whole = self.whole();
        // The shared operands, the bias and C's rows: one dense call over the totals.
        let mut ext = validate::check(&Gemm { batch: 1, ..whole })?;
        if g.batch == 0 || ext.is_empty() {
            let none = Extents {
                a: 0,
                b: 0,
                bias: 0,
                c: 0,
            };
            return Ok((none, whole));
        }
        let groups = g.batch;
        match self.split {
            GroupSplit::Rows => {
                ext.b = validate::check_operand(Which::B, &g.b, g.k, g.n, groups)?;
                if g.bias.is_some() {
                    ext.bias = g.n.checked_mul(groups).ok_or_else(|| Error::Overflow {
                        operand: Which::Bias,
                        detail: format!("{groups} groups × N = {}", g.n),
                    })?;
                }
            }
            GroupSplit::Columns => {
                ext.a = validate::check_operand(Which::A, &g.a, g.m, g.k, groups)?;
            }
            // Every group writes its C, even one with no K (the empty chain's +0.0).
            GroupSplit::Reduction => ext.c = validate::check_output(g)?,
        }
        Ok((ext, whole))
    }
}

/// Checks host-side offsets for a call of `groups` groups over a split dimension of `total`:
/// one per group, non-negative, non-decreasing, none past `total`.
pub fn check_offsets(offsets: &[i32], groups: usize, total: usize) -> Result<()> {
    if offsets.len() != groups {
        return Err(Error::BadOffsets {
            group: offsets.len().min(groups),
            detail: format!("{} offsets for {groups} groups", offsets.len()),
        });
    }
    let mut previous = 0i64;
    for (group, &end) in offsets.iter().enumerate() {
        let end = i64::from(end);
        if end < previous {
            return Err(Error::BadOffsets {
                group,
                detail: if end < 0 {
                    format!("offset {end} is negative")
                } else {
                    format!("offset {end} is below the previous group's end {previous}")
                },
            });
        }
        if end as u64 > total as u64 {
            return Err(Error::BadOffsets {
                group,
                detail: format!("offset {end} is past the end of the split dimension ({total})"),
            });
        }
        previous = end;
    }
    Ok(())
}

/// The groups of a call with `offsets` (already checked): `(group, start, end)`.
pub(crate) fn ranges(offsets: &[i32]) -> impl Iterator<Item = (usize, usize, usize)> + '_ {
    let mut start = 0usize;
    offsets.iter().enumerate().map(move |(g, &end)| {
        let end = end as usize;
        let range = (g, start, end);
        start = end;
        range
    })
}

/// Where a grouped call's offsets are.
#[derive(Clone, Copy, Debug)]
pub enum GroupOffsets<'a> {
    /// In host memory: checked before anything runs, on every engine.
    Host(&'a [i32]),
    /// In device memory of a CUDA engine's context (torch's `offs` on the GPU). Where a
    /// grouped kernel takes the call, it reads them: nothing waits and the call can be
    /// captured in a CUDA graph. The kernels: the scalar tier's, for a rows split with a
    /// row-major A or a reduction split in any layout (every GPU the scalar tier runs on,
    /// every dtype, either output mode), and the tensor-core tier's Hopper path (sm_90,
    /// bf16/f16; a rows split with a row-major A and an overwritten C, or a reduction split
    /// with a column-major A and a row-major B). The call cannot check ends it does not wait
    /// for: the kernel clamps a bad one into the split dimension (a decreasing end makes an
    /// empty group, one past the end is the end), so it never reads or writes outside the
    /// buffers, and reports the first one to the engine, which returns it as
    /// [`Error::BadOffsets`] from
    /// [`Engine::take_device_error`](crate::Engine::take_device_error) and from the
    /// engine's next grouped call once the kernel has run (certainly after a synchronize of
    /// the stream). Elsewhere (the columns split, and the tensor-core tier off sm_90 or
    /// outside the forms above) the offsets are read back on the call's stream and checked
    /// as host offsets are, before anything runs; that read waits for the stream, so it is
    /// refused during a CUDA graph capture ([`Error::Unsupported`]).
    Device(*const i32),
}
