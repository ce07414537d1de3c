//! Kernel parameters, passed by value as one `#[repr(C)]` struct.
//!
//! The device crate (`kernels-gpu`) and the host crate both use these definitions, so both
//! sides agree on the layout by construction. Plain data with no dependencies.

/// `out_mode`: overwrite C in f32.
pub const OUT_F32: u32 = 0;
/// `out_mode`: overwrite C in bf16 (one RNE rounding).
pub const OUT_BF16: u32 = 1;
/// `out_mode`: overwrite C in f16 (one RNE rounding).
pub const OUT_F16: u32 = 2;
/// `out_mode`: `C = C + result` in f32.
pub const OUT_ACCUMULATE_F32: u32 = 3;

/// `bias_dtype`: no bias.
pub const BIAS_NONE: u32 = 0;
/// `bias_dtype`: f32 bias.
pub const BIAS_F32: u32 = 1;
/// `bias_dtype`: bf16 bias.
pub const BIAS_BF16: u32 = 2;
/// `bias_dtype`: f16 bias.
pub const BIAS_F16: u32 = 3;

/// Parameters of every GEMM kernel, scalar and tensor-core alike. Addresses are device
/// addresses; every count and stride is in elements of its buffer and 64-bit, so no index
/// wraps.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct GemmParams {
    pub a: u64,
    pub b: u64,
    pub bias: u64,
    pub c: u64,
    pub m: u64,
    pub n: u64,
    pub k: u64,
    pub batch: u64,
    pub lda: u64,
    pub ldb: u64,
    pub ldc: u64,
    pub batch_stride_a: u64,
    pub batch_stride_b: u64,
    pub batch_stride_c: u64,
    /// Output tiles along M and N (ceil(M / BM), ceil(N / BN) for the launched kernel's tile),
    /// computed by the host.
    pub tiles_m: u64,
    pub tiles_n: u64,
    pub out_mode: u32,
    pub bias_dtype: u32,
}

/// An opaque CUDA tensor map (`CUtensorMap`, 128 bytes), built on the host by
/// `cuTensorMapEncodeTiled` and read only by the copy engine. The driver needs it 64-byte
/// aligned in parameter space: the build step declares the Hopper entries' parameter
/// `.align 64` (rustc's nvptx ABI accepts at most 16 here).
#[repr(C, align(16))]
#[derive(Clone, Copy, Debug)]
pub struct TensorMap {
    pub opaque: [u64; 16],
}

/// Parameters of the Hopper (wgmma + TMA) kernels: the tensor maps of A, B and C, then the
/// shared GEMM parameters. The maps come first so that they sit at byte offsets 0, 128 and
/// 256 of the 64-byte aligned parameter. C's map is all zeros (unused) in accumulate mode,
/// which the epilogue does from registers.
#[repr(C, align(16))]
#[derive(Clone, Copy, Debug)]
pub struct HopperParams {
    pub map_a: TensorMap,
    pub map_b: TensorMap,
    pub map_c: TensorMap,
    pub gemm: GemmParams,
    /// K tiles of its first tile's B that each block asks L2 for before it waits for the
    /// previous kernel on the stream (`hopper::gemm`): a hint, 0 for none.
    pub l2_prefetch_k_tiles: u32,
}

/// Parameters of the grouped Hopper kernels (torch's 2-D × 3-D `grouped_mm`): `base` is the
/// Hopper call over every group (`gemm.batch` groups, `gemm.m` the rows of all of them, A and
/// C shared, B one batch entry per group, the bias N per group; `map_c` unused), and
/// `group_ends` the device address of the groups' `i32` cumulative row ends, which the
/// kernel reads (so the host never waits for them).
#[repr(C, align(16))]
#[derive(Clone, Copy, Debug)]
pub struct GroupedHopperParams {
    pub base: HopperParams,
    pub group_ends: u64,
    /// The device address of a [`GroupErrorRecord`] where the kernel reports the first group
    /// whose end is out of order or out of range (0: report nothing).
    pub errors: u64,
    /// The device address of a `u32` that is zero when the kernel starts and that the
    /// dynamic tile order's blocks take their next tiles from (`hopper::grouped`); 0 for the
    /// entries of the static order, which do not read it.
    pub tile_counter: u64,
}

/// Parameters of the scalar tier's grouped kernel (`scalar::grouped`; torch's 2-D × 3-D
/// `grouped_mm`, the rows split): `gemm` is the call over every group (`gemm.batch` groups,
/// `gemm.m` the rows of all of them, A and C shared, B one batch entry per group, the bias N
/// per group; `tiles_m` and `tiles_n` unused), and `group_ends` the device address of the
/// groups' `i32` cumulative row ends, which the kernel reads (so the host never waits for
/// them).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct GroupedParams {
    pub gemm: GemmParams,
    pub group_ends: u64,
    /// The device address of a [`GroupErrorRecord`] where the kernel reports the first group
    /// whose end is out of order or out of range (0: report nothing).
    pub errors: u64,
}

/// Parameters of the scalar tier's grouped kernel for a split reduction
/// (`scalar::grouped::gemm_reduction`; torch's 2-D × 2-D `grouped_mm`, the experts' weight
/// gradient): `grouped` as for the rows split, but with `gemm.k` the K of all groups, A and B
/// shared, C one batch entry per group (`gemm.batch_stride_c` apart), no bias, and the group
/// ends cumulative ends along K (`gemm.lda`, `gemm.ldb`, the batch strides of A and B,
/// `tiles_m` and `tiles_n` unused); the operands' layouts are the strides below, so that one
/// entry takes every layout.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct GroupedReductionParams {
    pub grouped: GroupedParams,
    /// Elements between consecutive rows (along M) and consecutive columns (along K) of A.
    pub a_steps: [u64; 2],
    /// Elements between consecutive rows (along K) and consecutive columns (along N) of B.
    pub b_steps: [u64; 2],
}

/// What a grouped kernel reports about its group ends, in memory the host can read without
/// waiting (mapped host memory; `host/src/cuda/device_errors.rs`). One thread of the grid
/// checks every end in order and, at the first bad one, writes `group` and `end`, fences,
/// then sets `flag` to [`GroupErrorRecord::BAD_END`]; the host clears `flag` once it has
/// read the record. Every launch that finds a bad end writes the same record, so the report
/// does not depend on which blocks run first.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GroupErrorRecord {
    /// 0, or [`GroupErrorRecord::BAD_END`].
    pub flag: u32,
    /// The first group whose end is bad.
    pub group: u32,
    /// That end, as the kernel read it.
    pub end: i32,
    /// What the ends may not exceed: the rows (rows split) or K (reduction split).
    pub limit: u32,
}

impl GroupErrorRecord {
    /// `flag`: a group end below the previous end (or below 0), or past `limit`.
    pub const BAD_END: u32 = 1;
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::mem::offset_of;

    /// The Hopper entries find their tensor maps by byte offset in the parameter
    /// (`kernel_param_generic_address!` with 0, 128 and 256 in `kernels-gpu/src/entry.rs`),
    /// so a field placed before them, or a map moved, would hand the copy engine the wrong
    /// bytes.
    #[test]
    fn the_tensor_maps_sit_where_the_entries_read_them() {
        assert_eq!(offset_of!(HopperParams, map_a), 0);
        assert_eq!(offset_of!(HopperParams, map_b), 128);
        assert_eq!(offset_of!(HopperParams, map_c), 256);
        assert_eq!(offset_of!(GroupedHopperParams, base), 0);
        assert!(offset_of!(HopperParams, gemm) >= 384);
        assert!(offset_of!(HopperParams, l2_prefetch_k_tiles) > offset_of!(HopperParams, gemm));
    }
}
