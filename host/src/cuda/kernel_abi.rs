//! The kernels' parameters and launch: the parameter structs and tile constants come from
//! `sgemm-bi-abi`, the crate the device code uses for them too, so the host and the kernels
//! cannot disagree on a layout or a block size.

use cudarc::driver::{result, sys};

use crate::error::{Error, Result};
use crate::types::{DType, Gemm, GemmPointers, OutputMode};
use sgemm_bi_abi::params::{
    GemmParams, BIAS_BF16, BIAS_F16, BIAS_F32, BIAS_NONE, OUT_ACCUMULATE_F32, OUT_BF16, OUT_F16,
    OUT_F32,
};

/// The kernel parameters of `g` on pointers `p`, for a kernel whose block tile is
/// `tile_m × tile_n`.
pub(crate) fn gemm_params(g: &Gemm, p: &GemmPointers, tile_m: u32, tile_n: u32) -> GemmParams {
    GemmParams {
        a: p.a as u64,
        b: p.b as u64,
        bias: p.bias as u64,
        c: p.c as u64,
        m: g.m as u64,
        n: g.n as u64,
        k: g.k as u64,
        batch: g.batch as u64,
        lda: g.a.ld as u64,
        ldb: g.b.ld as u64,
        ldc: g.c.ldc as u64,
        batch_stride_a: g.a.batch_stride as u64,
        batch_stride_b: g.b.batch_stride as u64,
        batch_stride_c: g.c.batch_stride as u64,
        tiles_m: g.m.div_ceil(tile_m as usize) as u64,
        tiles_n: g.n.div_ceil(tile_n as usize) as u64,
        out_mode: match g.c.mode {
            OutputMode::Overwrite(DType::F32) => OUT_F32,
            OutputMode::Overwrite(DType::BF16) => OUT_BF16,
            OutputMode::Overwrite(DType::F16) => OUT_F16,
            OutputMode::AccumulateF32 => OUT_ACCUMULATE_F32,
        },
        bias_dtype: match g.bias {
            None => BIAS_NONE,
            Some(DType::F32) => BIAS_F32,
            Some(DType::BF16) => BIAS_BF16,
            Some(DType::F16) => BIAS_F16,
        },
    }
}

/// Blocks to launch for `params`: one per tile, at most `max_blocks` (blocks loop over
/// tiles, so a capped grid still covers every tile).
pub(crate) fn grid_size(params: &GemmParams, max_blocks: u32) -> u32 {
    (params.tiles_m * params.tiles_n * params.batch).min(max_blocks.min(i32::MAX as u32) as u64)
        as u32
}

/// Launches `function` (named `name`, for errors) with one `GemmParams` by value, on one
/// block per tile or `max_blocks`, whichever is fewer.
///
/// # Safety
/// `function` takes exactly one `GemmParams` and is built for `threads` threads and
/// `smem_bytes` of dynamic shared memory; the buffers `params` points to stay valid for the
/// work on `stream`, a stream of the current context (or null).
pub(crate) unsafe fn launch(
    function: sys::CUfunction,
    name: impl FnOnce() -> String,
    threads: u32,
    smem_bytes: u32,
    max_blocks: u32,
    mut params: GemmParams,
    stream: sys::CUstream,
) -> Result<()> {
    let grid = grid_size(&params, max_blocks);
    let mut args = [&mut params as *mut GemmParams as *mut std::ffi::c_void];
    // SAFETY: the function takes exactly one GemmParams by value (this module shares its
    // definition with the device code); the rest is the caller's contract.
    unsafe {
        result::launch_kernel(
            function,
            (grid, 1, 1),
            (threads, 1, 1),
            smem_bytes,
            stream,
            &mut args,
        )
    }
    .map_err(|e| Error::Launch {
        kernel: name(),
        message: e.to_string(),
    })
}
