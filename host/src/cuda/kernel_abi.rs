//! The kernels' parameters and launch: the parameter structs, tile constants and the
//! catalogue of entry points come from `sgemm-bi-abi`, the crate the device code uses for
//! them too, so the host and the kernels cannot disagree on a layout, a block size or which
//! struct an entry takes.

use std::marker::PhantomData;

use cudarc::driver::{result, sys};

use crate::error::{Error, Result};
use crate::types::{DType, Gemm, GemmPointers, OutputMode};
use sgemm_bi_abi::catalogue::{KernelSpec, ParamKind};
use sgemm_bi_abi::params::{
    GemmParams, GroupedHopperParams, GroupedParams, GroupedReductionParams, HopperParams,
    BIAS_BF16, BIAS_F16, BIAS_F32, BIAS_NONE, OUT_ACCUMULATE_F32, OUT_BF16, OUT_F16, OUT_F32,
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

/// A kernel parameter struct: what an entry point takes, by value, as its one parameter
/// (the catalogue's [`ParamKind`]). Like cudarc's `DeviceRepr`, it lets a launch take the
/// entry's own parameter type ([`Kernel::launch`]) instead of an untyped pointer.
///
/// # Safety
/// 1. The type is `#[repr(C)]` plain data (no pointers the driver must not copy, no
///    padding the device reads), defined once in `sgemm-bi-abi` for the host and the
///    device code alike.
/// 2. `KIND` names this very type: every entry the catalogue lists with that `ParamKind`
///    takes exactly one value of it.
pub(crate) unsafe trait KernelParams: Copy {
    /// The catalogue's name for this parameter type.
    const KIND: ParamKind;
}

// SAFETY: `#[repr(C)]` plain data from sgemm-bi-abi; the catalogue's `ParamKind::Gemm`
// entries take one `GemmParams` (their device code is defined from the same list).
unsafe impl KernelParams for GemmParams {
    const KIND: ParamKind = ParamKind::Gemm;
}

// SAFETY: as above, for `ParamKind::Hopper` (`build.rs` declares the parameter 64-byte
// aligned, as the tensor maps in it need).
unsafe impl KernelParams for HopperParams {
    const KIND: ParamKind = ParamKind::Hopper;
}

// SAFETY: as above, for `ParamKind::GroupedHopper` (a `HopperParams` first, declared 64-byte
// aligned by `build.rs` as well).
unsafe impl KernelParams for GroupedHopperParams {
    const KIND: ParamKind = ParamKind::GroupedHopper;
}

// SAFETY: as above, for `ParamKind::Grouped`.
unsafe impl KernelParams for GroupedParams {
    const KIND: ParamKind = ParamKind::Grouped;
}

// SAFETY: as above, for `ParamKind::GroupedReduction`.
unsafe impl KernelParams for GroupedReductionParams {
    const KIND: ParamKind = ParamKind::GroupedReduction;
}

/// A loaded entry point whose parameter is `P`: only a catalogue entry of that parameter type
/// becomes one (`catalogue::Entries::get`), so a launch cannot pass the wrong struct.
pub(crate) struct Kernel<P> {
    pub(crate) function: sys::CUfunction,
    pub(crate) spec: &'static KernelSpec,
    /// Blocks of it the whole device runs at once (measured for the families whose grid
    /// is sized by it, `u32::MAX` for the others).
    pub(crate) resident: u32,
    pub(crate) params: PhantomData<fn(&P)>,
}

impl<P> Clone for Kernel<P> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<P> Copy for Kernel<P> {}

impl<P: KernelParams> Kernel<P> {
    /// The catalogue's entry of this kernel.
    pub(crate) fn spec(&self) -> &'static KernelSpec {
        self.spec
    }

    /// Launches `grid` blocks of the entry's own block size and shared memory
    /// (`KernelSpec::threads`, `KernelSpec::smem_bytes`) with `params` by value, and the
    /// launch `attributes` (a cluster size, programmatic dependent launch; none is the plain
    /// `cuLaunchKernel`).
    ///
    /// # Safety
    /// 1. `params` meets the entry's contract: a validated call whose layouts, alignment and
    ///    extents the family's planner accepted, on buffers that stay valid for the work on
    ///    `stream`.
    /// 2. `stream` is a stream of the current context (or null).
    /// 3. `grid` and `attributes` are what the entry is built for (whole clusters of the
    ///    size it expects).
    pub(crate) unsafe fn launch(
        &self,
        grid: u32,
        params: &P,
        stream: sys::CUstream,
        attributes: &mut [sys::CUlaunchAttribute],
    ) -> Result<()> {
        // The driver copies the parameter from this address and never writes through it.
        let mut args = [std::ptr::from_ref(params)
            .cast_mut()
            .cast::<std::ffi::c_void>()];
        let (threads, smem) = (self.spec.threads(), self.spec.smem_bytes());
        let failed = |message: String| Error::Launch {
            kernel: self.spec.name.to_string(),
            message,
        };
        if attributes.is_empty() {
            // SAFETY: the entry takes exactly one `P` by value (`KernelParams`, and `Entries`
            // hands out a `Kernel<P>` only for entries of `P::KIND`); block size and shared
            // memory are the catalogue's for it (the limit raised at load where above the
            // default); the rest is the caller's contract.
            return unsafe {
                result::launch_kernel(
                    self.function,
                    (grid, 1, 1),
                    (threads, 1, 1),
                    smem,
                    stream,
                    &mut args,
                )
            }
            .map_err(|e| failed(e.to_string()));
        }
        let config = sys::CUlaunchConfig {
            gridDimX: grid,
            gridDimY: 1,
            gridDimZ: 1,
            blockDimX: threads,
            blockDimY: 1,
            blockDimZ: 1,
            sharedMemBytes: smem,
            hStream: stream,
            attrs: attributes.as_mut_ptr(),
            numAttrs: attributes.len() as u32,
        };
        // SAFETY: as above; `config` and `args` outlive the call, which reads them only.
        let status = unsafe {
            sys::cuLaunchKernelEx(
                &config,
                self.function,
                args.as_mut_ptr(),
                std::ptr::null_mut(),
            )
        };
        if status != sys::CUresult::CUDA_SUCCESS {
            return Err(failed(format!("cuLaunchKernelEx: {status:?}")));
        }
        Ok(())
    }
}
