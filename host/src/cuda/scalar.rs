//! Choosing and launching the scalar-tier kernels. Every candidate computes each element with
//! the same chain (see `kernels-gpu/src/scalar`), so the choice is free to depend on dtype and
//! layouts.

use cudarc::driver::{result, sys};

use super::kernel_abi::params::{
    ScalarGemmParams, BIAS_BF16, BIAS_F16, BIAS_F32, BIAS_NONE, OUT_ACCUMULATE_F32, OUT_BF16,
    OUT_F16, OUT_F32,
};
use super::kernel_abi::scalar_config::{BM, BN, SMEM_BYTES, THREADS};
use crate::error::{Error, Result};
use crate::types::{DType, Gemm, GemmPointers, Layout, OutputMode};

const DTYPES: [DType; 3] = [DType::F32, DType::BF16, DType::F16];
const LAYOUTS: [(Layout, Layout); 4] = [
    (Layout::RowMajor, Layout::RowMajor),
    (Layout::RowMajor, Layout::ColMajor),
    (Layout::ColMajor, Layout::RowMajor),
    (Layout::ColMajor, Layout::ColMajor),
];

fn entry_name(dtype: DType, (a, b): (Layout, Layout)) -> String {
    let l = |x| if x == Layout::RowMajor { 'r' } else { 'c' };
    format!("sgemm_bi_scalar_{}_{}{}", dtype.name(), l(a), l(b))
}

/// The twelve scalar entry points: `[dtype][layout pair]`.
pub(crate) struct ScalarKernels {
    functions: [[sys::CUfunction; 4]; 3],
}

impl ScalarKernels {
    pub(crate) fn load(get: &dyn Fn(&str) -> Result<sys::CUfunction>) -> Result<Self> {
        let mut functions = [[std::ptr::null_mut(); 4]; 3];
        for (d, dtype) in DTYPES.iter().enumerate() {
            for (l, layouts) in LAYOUTS.iter().enumerate() {
                functions[d][l] = get(&entry_name(*dtype, *layouts))?;
            }
        }
        Ok(ScalarKernels { functions })
    }

    /// # Safety
    /// As for `CudaBackend::gemm`, with the context current on this thread.
    pub(crate) unsafe fn launch(
        &self,
        g: &Gemm,
        p: &GemmPointers,
        stream: sys::CUstream,
    ) -> Result<()> {
        let d = DTYPES.iter().position(|&x| x == g.a.dtype).unwrap();
        let l = LAYOUTS
            .iter()
            .position(|&x| x == (g.a.layout, g.b.layout))
            .unwrap();
        let tiles_m = g.m.div_ceil(BM as usize) as u64;
        let tiles_n = g.n.div_ceil(BN as usize) as u64;
        let total = tiles_m * tiles_n * g.batch as u64;
        let mut params = ScalarGemmParams {
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
            tiles_m,
            tiles_n,
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
        };
        // Blocks loop over tiles, so the grid only has to be large enough to fill the GPU.
        let grid = total.min(i32::MAX as u64) as u32;
        let mut args = [&mut params as *mut ScalarGemmParams as *mut std::ffi::c_void];
        // SAFETY: the function takes exactly one ScalarGemmParams by value (kernel_abi shares
        // its definition with the device code); the block size and shared memory are the ones
        // the kernel is built for; the buffers satisfy the caller's contract.
        unsafe {
            result::launch_kernel(
                self.functions[d][l],
                (grid, 1, 1),
                (THREADS, 1, 1),
                SMEM_BYTES,
                stream,
                &mut args,
            )
        }
        .map_err(|e| Error::Launch {
            kernel: entry_name(g.a.dtype, (g.a.layout, g.b.layout)),
            message: e.to_string(),
        })
    }
}
