//! Choosing and launching the scalar-tier kernels. Every candidate computes each element with
//! the same chain (see `kernels-gpu/src/scalar`), so the choice is free to depend on dtype and
//! layouts.

use cudarc::driver::sys;

use super::kernel_abi::scalar_config::{BM, BN, SMEM_BYTES, THREADS};
use super::kernel_abi::{gemm_params, launch};
use crate::error::Result;
use crate::types::{DType, Gemm, GemmPointers, Layout};

const DTYPES: [DType; 3] = [DType::F32, DType::BF16, DType::F16];
pub(crate) const LAYOUTS: [(Layout, Layout); 4] = [
    (Layout::RowMajor, Layout::RowMajor),
    (Layout::RowMajor, Layout::ColMajor),
    (Layout::ColMajor, Layout::RowMajor),
    (Layout::ColMajor, Layout::ColMajor),
];

/// `rr`, `rc`, `cr` or `cc`: the operand layouts as entry-point names spell them.
pub(crate) fn layout_suffix((a, b): (Layout, Layout)) -> String {
    let l = |x| if x == Layout::RowMajor { 'r' } else { 'c' };
    format!("{}{}", l(a), l(b))
}

fn entry_name(dtype: DType, layouts: (Layout, Layout)) -> String {
    format!(
        "sgemm_bi_scalar_{}_{}",
        dtype.name(),
        layout_suffix(layouts)
    )
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
        let layouts = (g.a.layout, g.b.layout);
        let l = LAYOUTS.iter().position(|&x| x == layouts).unwrap();
        // SAFETY: the block size and shared memory are the ones the kernel is built for; the
        // buffers satisfy the caller's contract.
        unsafe {
            launch(
                self.functions[d][l],
                || entry_name(g.a.dtype, layouts),
                THREADS,
                SMEM_BYTES,
                gemm_params(g, p, BM, BN),
                stream,
            )
        }
    }
}
