//! The named entry points the host launches: one per tier, input dtype and operand layouts.
//! Names: `sgemm_bi_scalar_<dtype>_<A layout><B layout>`, `r` = row-major, `c` = column-major.

use crate::element::{Bf16, F16, F32};
use crate::params::ScalarGemmParams;
use crate::scalar;

macro_rules! scalar_entry {
    ($name:ident, $elem:ty, a_k_contiguous: $a:expr, b_k_contiguous: $b:expr) => {
        /// Scalar-tier GEMM entry point (see `scalar`).
        ///
        /// # Safety
        /// Launched by the host with a validated `ScalarGemmParams`, `scalar::config::THREADS`
        /// threads and `scalar::config::SMEM_BYTES` of dynamic shared memory.
        #[no_mangle]
        pub unsafe extern "ptx-kernel" fn $name(p: ScalarGemmParams) {
            // SAFETY: forwarded launch contract.
            unsafe { scalar::gemm::<$elem, $a, $b>(&p) }
        }
    };
}

scalar_entry!(sgemm_bi_scalar_f32_rr, F32, a_k_contiguous: true, b_k_contiguous: false);
scalar_entry!(sgemm_bi_scalar_f32_rc, F32, a_k_contiguous: true, b_k_contiguous: true);
scalar_entry!(sgemm_bi_scalar_f32_cr, F32, a_k_contiguous: false, b_k_contiguous: false);
scalar_entry!(sgemm_bi_scalar_f32_cc, F32, a_k_contiguous: false, b_k_contiguous: true);
scalar_entry!(sgemm_bi_scalar_bf16_rr, Bf16, a_k_contiguous: true, b_k_contiguous: false);
scalar_entry!(sgemm_bi_scalar_bf16_rc, Bf16, a_k_contiguous: true, b_k_contiguous: true);
scalar_entry!(sgemm_bi_scalar_bf16_cr, Bf16, a_k_contiguous: false, b_k_contiguous: false);
scalar_entry!(sgemm_bi_scalar_bf16_cc, Bf16, a_k_contiguous: false, b_k_contiguous: true);
scalar_entry!(sgemm_bi_scalar_f16_rr, F16, a_k_contiguous: true, b_k_contiguous: false);
scalar_entry!(sgemm_bi_scalar_f16_rc, F16, a_k_contiguous: true, b_k_contiguous: true);
scalar_entry!(sgemm_bi_scalar_f16_cr, F16, a_k_contiguous: false, b_k_contiguous: false);
scalar_entry!(sgemm_bi_scalar_f16_cc, F16, a_k_contiguous: false, b_k_contiguous: true);
