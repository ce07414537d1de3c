//! The named entry points the host launches: one per tier, input dtype and operand layouts.
//! Names: `sgemm_bi_scalar_<dtype>_<A layout><B layout>[_n64]` (128 × 128 tiles, or 128 × 64),
//! `sgemm_bi_scalar_rows_<dtype>_<B layout>_m<rows>` (few rows, `scalar::rows`) and
//! `sgemm_bi_tc_<dtype>_<A layout><B layout>[_unaligned]`, `r` = row-major, `c` =
//! column-major; `_unaligned` loads operands element by element (any 2-byte alignment).
//! The sm90a module has `sgemm_bi_hopper_<dtype>_<A layout><B layout>_n<BN>[_pp][_x2|_m<BM>]`
//! (ping-pong consumers, `hopper::pingpong`; clusters of two; tiles of BM < 128 rows), and `sgemm_bi_scalar_<dtype>_<A layout><B
//! layout>_sm90`: the 128 × 128 scalar tiles with more k steps per loop trip, which ptxas
//! fits in 128 registers only for sm_90 (`scalar::config::wide`).

#[cfg(not(sgemm_bi_sm90a))]
pub use sm80::*;
#[cfg(sgemm_bi_sm90a)]
pub use sm90a::*;

#[cfg(not(sgemm_bi_sm90a))]
mod sm80 {
    use crate::element::{Bf16, F16, F32};
    use crate::params::GemmParams;
    use crate::scalar;
    use crate::tensor;

    macro_rules! scalar_entry {
        ($name:ident, $narrow:ident, $elem:ty, a_k_contiguous: $a:expr, b_k_contiguous: $b:expr, cursors: ($cw:expr, $cn:expr)) => {
            /// Scalar-tier GEMM entry point, 128 × 128 tiles (see `scalar`).
            ///
            /// # Safety
            /// Launched by the host with a validated `GemmParams`, `scalar::config::THREADS`
            /// threads and `scalar::config::wide::SMEM_BYTES` of dynamic shared memory.
            #[no_mangle]
            pub unsafe extern "ptx-kernel" fn $name(p: GemmParams) {
                use scalar::config::wide::{BK, BN, STEPS, TN};
                // SAFETY: forwarded launch contract.
                unsafe { scalar::gemm::<$elem, $a, $b, BN, BK, TN, STEPS, false, $cw>(&p) }
            }

            /// Scalar-tier GEMM entry point, 128 × 64 tiles (see `scalar`).
            ///
            /// # Safety
            /// Launched by the host with a validated `GemmParams`, `scalar::config::THREADS`
            /// threads and `scalar::config::narrow::SMEM_BYTES` of dynamic shared memory.
            #[no_mangle]
            pub unsafe extern "ptx-kernel" fn $narrow(p: GemmParams) {
                use scalar::config::narrow::{BK, BN, STEPS, TN};
                // SAFETY: forwarded launch contract.
                unsafe { scalar::gemm::<$elem, $a, $b, BN, BK, TN, STEPS, false, $cn>(&p) }
            }
        };
    }

    // `cursors: (wide, narrow)`: whether the entry reads its whole K tiles through cursors
    // (`scalar::mainloop::Cursor`), which cost no index arithmetic or bounds test per K tile
    // (f32 4096³ on the H200: 42.8 → 44.3 TFLOP/s in the `_sm90` entries). A cursor per
    // operand beside the general loop's state makes ptxas spill some entries at 128
    // registers, for sm_80 or sm_90a: these keep the general loads. `tests/ptx_vendored.rs`
    // fails on any spill, so a `true` here that spills cannot land.
    scalar_entry!(sgemm_bi_scalar_f32_rr, sgemm_bi_scalar_f32_rr_n64, F32, a_k_contiguous: true, b_k_contiguous: false, cursors: (false, true));
    scalar_entry!(sgemm_bi_scalar_f32_rc, sgemm_bi_scalar_f32_rc_n64, F32, a_k_contiguous: true, b_k_contiguous: true, cursors: (true, true));
    scalar_entry!(sgemm_bi_scalar_f32_cr, sgemm_bi_scalar_f32_cr_n64, F32, a_k_contiguous: false, b_k_contiguous: false, cursors: (false, false));
    scalar_entry!(sgemm_bi_scalar_f32_cc, sgemm_bi_scalar_f32_cc_n64, F32, a_k_contiguous: false, b_k_contiguous: true, cursors: (false, true));
    scalar_entry!(sgemm_bi_scalar_bf16_rr, sgemm_bi_scalar_bf16_rr_n64, Bf16, a_k_contiguous: true, b_k_contiguous: false, cursors: (false, true));
    scalar_entry!(sgemm_bi_scalar_bf16_rc, sgemm_bi_scalar_bf16_rc_n64, Bf16, a_k_contiguous: true, b_k_contiguous: true, cursors: (true, true));
    scalar_entry!(sgemm_bi_scalar_bf16_cr, sgemm_bi_scalar_bf16_cr_n64, Bf16, a_k_contiguous: false, b_k_contiguous: false, cursors: (false, true));
    scalar_entry!(sgemm_bi_scalar_bf16_cc, sgemm_bi_scalar_bf16_cc_n64, Bf16, a_k_contiguous: false, b_k_contiguous: true, cursors: (false, true));
    scalar_entry!(sgemm_bi_scalar_f16_rr, sgemm_bi_scalar_f16_rr_n64, F16, a_k_contiguous: true, b_k_contiguous: false, cursors: (false, true));
    scalar_entry!(sgemm_bi_scalar_f16_rc, sgemm_bi_scalar_f16_rc_n64, F16, a_k_contiguous: true, b_k_contiguous: true, cursors: (true, true));
    scalar_entry!(sgemm_bi_scalar_f16_cr, sgemm_bi_scalar_f16_cr_n64, F16, a_k_contiguous: false, b_k_contiguous: false, cursors: (false, true));
    scalar_entry!(sgemm_bi_scalar_f16_cc, sgemm_bi_scalar_f16_cc_n64, F16, a_k_contiguous: false, b_k_contiguous: true, cursors: (false, true));

    macro_rules! scalar_rows_entries {
        ($($name:ident $elem:ty, b_k_contiguous: $b:expr, tm: $tm:expr;)*) => {$(
            /// Scalar-tier GEMM entry point for few rows (see `scalar::rows`).
            ///
            /// # Safety
            /// Launched by the host with a validated `GemmParams` whose A is read along K and
            /// whose operands are 16-byte aligned as `scalar::rows` requires,
            /// `scalar::config::rows::THREADS` threads and `scalar::config::rows::smem_bytes`
            /// of dynamic shared memory.
            #[no_mangle]
            pub unsafe extern "ptx-kernel" fn $name(p: GemmParams) {
                // SAFETY: forwarded launch contract.
                unsafe { scalar::rows::gemm::<$elem, $b, $tm>(&p) }
            }
        )*};
    }

    // `_m<rows>`: blocks of 4, 16, 32 or 64 rows (1, 4, 8 or 16 per warp); A is read along K, so
    // only B's layout names an entry.
    scalar_rows_entries! {
        sgemm_bi_scalar_rows_f32_r_m4 F32, b_k_contiguous: false, tm: 1;
        sgemm_bi_scalar_rows_f32_c_m4 F32, b_k_contiguous: true, tm: 1;
        sgemm_bi_scalar_rows_f32_r_m16 F32, b_k_contiguous: false, tm: 4;
        sgemm_bi_scalar_rows_f32_c_m16 F32, b_k_contiguous: true, tm: 4;
        sgemm_bi_scalar_rows_f32_r_m32 F32, b_k_contiguous: false, tm: 8;
        sgemm_bi_scalar_rows_f32_r_m64 F32, b_k_contiguous: false, tm: 16;
        sgemm_bi_scalar_rows_f32_c_m32 F32, b_k_contiguous: true, tm: 8;
        sgemm_bi_scalar_rows_f32_c_m64 F32, b_k_contiguous: true, tm: 16;
        sgemm_bi_scalar_rows_bf16_r_m4 Bf16, b_k_contiguous: false, tm: 1;
        sgemm_bi_scalar_rows_bf16_c_m4 Bf16, b_k_contiguous: true, tm: 1;
        sgemm_bi_scalar_rows_bf16_r_m16 Bf16, b_k_contiguous: false, tm: 4;
        sgemm_bi_scalar_rows_bf16_c_m16 Bf16, b_k_contiguous: true, tm: 4;
        sgemm_bi_scalar_rows_bf16_r_m32 Bf16, b_k_contiguous: false, tm: 8;
        sgemm_bi_scalar_rows_bf16_r_m64 Bf16, b_k_contiguous: false, tm: 16;
        sgemm_bi_scalar_rows_bf16_c_m32 Bf16, b_k_contiguous: true, tm: 8;
        sgemm_bi_scalar_rows_bf16_c_m64 Bf16, b_k_contiguous: true, tm: 16;
        sgemm_bi_scalar_rows_f16_r_m4 F16, b_k_contiguous: false, tm: 1;
        sgemm_bi_scalar_rows_f16_c_m4 F16, b_k_contiguous: true, tm: 1;
        sgemm_bi_scalar_rows_f16_r_m16 F16, b_k_contiguous: false, tm: 4;
        sgemm_bi_scalar_rows_f16_c_m16 F16, b_k_contiguous: true, tm: 4;
        sgemm_bi_scalar_rows_f16_r_m32 F16, b_k_contiguous: false, tm: 8;
        sgemm_bi_scalar_rows_f16_r_m64 F16, b_k_contiguous: false, tm: 16;
        sgemm_bi_scalar_rows_f16_c_m32 F16, b_k_contiguous: true, tm: 8;
        sgemm_bi_scalar_rows_f16_c_m64 F16, b_k_contiguous: true, tm: 16;
    }

    macro_rules! tensor_entry {
        ($name:ident, $elem:ty, a_k_contiguous: $a:expr, b_k_contiguous: $b:expr, cp_async: $cp:expr) => {
            /// Tensor-core GEMM entry point (see `tensor`).
            ///
            /// # Safety
            /// Launched by the host with a validated `GemmParams`, `tensor::config::THREADS`
            /// threads and `tensor::config::SMEM_BYTES` of dynamic shared memory; the cp.async
            /// entries only for 16-byte aligned operands.
            #[no_mangle]
            pub unsafe extern "ptx-kernel" fn $name(p: GemmParams) {
                // SAFETY: forwarded launch contract.
                unsafe { tensor::gemm::<$elem, $a, $b, $cp>(&p) }
            }
        };
    }

    tensor_entry!(sgemm_bi_tc_bf16_rr, Bf16, a_k_contiguous: true, b_k_contiguous: false, cp_async: true);
    tensor_entry!(sgemm_bi_tc_bf16_rc, Bf16, a_k_contiguous: true, b_k_contiguous: true, cp_async: true);
    tensor_entry!(sgemm_bi_tc_bf16_cr, Bf16, a_k_contiguous: false, b_k_contiguous: false, cp_async: true);
    tensor_entry!(sgemm_bi_tc_bf16_cc, Bf16, a_k_contiguous: false, b_k_contiguous: true, cp_async: true);
    tensor_entry!(sgemm_bi_tc_f16_rr, F16, a_k_contiguous: true, b_k_contiguous: false, cp_async: true);
    tensor_entry!(sgemm_bi_tc_f16_rc, F16, a_k_contiguous: true, b_k_contiguous: true, cp_async: true);
    tensor_entry!(sgemm_bi_tc_f16_cr, F16, a_k_contiguous: false, b_k_contiguous: false, cp_async: true);
    tensor_entry!(sgemm_bi_tc_f16_cc, F16, a_k_contiguous: false, b_k_contiguous: true, cp_async: true);
    tensor_entry!(sgemm_bi_tc_bf16_rr_unaligned, Bf16, a_k_contiguous: true, b_k_contiguous: false, cp_async: false);
    tensor_entry!(sgemm_bi_tc_bf16_rc_unaligned, Bf16, a_k_contiguous: true, b_k_contiguous: true, cp_async: false);
    tensor_entry!(sgemm_bi_tc_bf16_cr_unaligned, Bf16, a_k_contiguous: false, b_k_contiguous: false, cp_async: false);
    tensor_entry!(sgemm_bi_tc_bf16_cc_unaligned, Bf16, a_k_contiguous: false, b_k_contiguous: true, cp_async: false);
    tensor_entry!(sgemm_bi_tc_f16_rr_unaligned, F16, a_k_contiguous: true, b_k_contiguous: false, cp_async: false);
    tensor_entry!(sgemm_bi_tc_f16_rc_unaligned, F16, a_k_contiguous: true, b_k_contiguous: true, cp_async: false);
    tensor_entry!(sgemm_bi_tc_f16_cr_unaligned, F16, a_k_contiguous: false, b_k_contiguous: false, cp_async: false);
    tensor_entry!(sgemm_bi_tc_f16_cc_unaligned, F16, a_k_contiguous: false, b_k_contiguous: true, cp_async: false);
}

#[cfg(sgemm_bi_sm90a)]
mod sm90a {
    use crate::element::{Bf16, F16, F32};
    use crate::hopper;
    use crate::params::{GemmParams, HopperParams};
    use crate::scalar;
    use crate::scalar::config::wide::{STEPS_SM90, STEPS_SM90_F32_CR};

    macro_rules! scalar_entry_sm90 {
        ($name:ident, $elem:ty, a_k_contiguous: $a:expr, b_k_contiguous: $b:expr, copy_async: $cp:expr, steps: $st:expr, cursors: $cu:expr) => {
            /// Scalar-tier GEMM entry point, 128 × 128 tiles with the loop that sm_90
            /// assembles unspilled (`scalar::config::wide`; the same chain as the sm80
            /// module's entry of this name without `_sm90`).
            ///
            /// # Safety
            /// Launched by the host with a validated `GemmParams`, `scalar::config::THREADS`
            /// threads and `scalar::config::wide::SMEM_BYTES` of dynamic shared memory.
            #[no_mangle]
            pub unsafe extern "ptx-kernel" fn $name(p: GemmParams) {
                use scalar::config::wide::{BK, BN, TN};
                // SAFETY: forwarded launch contract.
                unsafe { scalar::gemm::<$elem, $a, $b, BN, BK, TN, $st, $cp, $cu>(&p) }
            }
        };
    }

    // f32 copies its M- or N-contiguous operands by cp.async, which frees registers for a
    // longer loop trip; the 16-bit types are converted on the way, so they cannot.
    // `cursors`: as in the sm80 module (where ptxas fits them without spills).
    scalar_entry_sm90!(sgemm_bi_scalar_f32_rr_sm90, F32, a_k_contiguous: true, b_k_contiguous: false, copy_async: true, steps: STEPS_SM90, cursors: true);
    scalar_entry_sm90!(sgemm_bi_scalar_f32_rc_sm90, F32, a_k_contiguous: true, b_k_contiguous: true, copy_async: true, steps: STEPS_SM90, cursors: true);
    scalar_entry_sm90!(sgemm_bi_scalar_f32_cr_sm90, F32, a_k_contiguous: false, b_k_contiguous: false, copy_async: true, steps: STEPS_SM90_F32_CR, cursors: false);
    scalar_entry_sm90!(sgemm_bi_scalar_f32_cc_sm90, F32, a_k_contiguous: false, b_k_contiguous: true, copy_async: true, steps: STEPS_SM90, cursors: true);
    scalar_entry_sm90!(sgemm_bi_scalar_bf16_rr_sm90, Bf16, a_k_contiguous: true, b_k_contiguous: false, copy_async: false, steps: STEPS_SM90, cursors: true);
    scalar_entry_sm90!(sgemm_bi_scalar_bf16_rc_sm90, Bf16, a_k_contiguous: true, b_k_contiguous: true, copy_async: false, steps: STEPS_SM90, cursors: false);
    scalar_entry_sm90!(sgemm_bi_scalar_bf16_cr_sm90, Bf16, a_k_contiguous: false, b_k_contiguous: false, copy_async: false, steps: STEPS_SM90, cursors: false);
    scalar_entry_sm90!(sgemm_bi_scalar_bf16_cc_sm90, Bf16, a_k_contiguous: false, b_k_contiguous: true, copy_async: false, steps: STEPS_SM90, cursors: true);
    scalar_entry_sm90!(sgemm_bi_scalar_f16_rr_sm90, F16, a_k_contiguous: true, b_k_contiguous: false, copy_async: false, steps: STEPS_SM90, cursors: true);
    scalar_entry_sm90!(sgemm_bi_scalar_f16_rc_sm90, F16, a_k_contiguous: true, b_k_contiguous: true, copy_async: false, steps: STEPS_SM90, cursors: false);
    scalar_entry_sm90!(sgemm_bi_scalar_f16_cr_sm90, F16, a_k_contiguous: false, b_k_contiguous: false, copy_async: false, steps: STEPS_SM90, cursors: false);
    scalar_entry_sm90!(sgemm_bi_scalar_f16_cc_sm90, F16, a_k_contiguous: false, b_k_contiguous: true, copy_async: false, steps: STEPS_SM90, cursors: true);

    macro_rules! hopper_entry {
        ($name:ident, $elem:ty, a_k_contiguous: $a:expr, b_k_contiguous: $b:expr, bm: $bm:expr, bn: $bn:expr, cluster: $c:expr, schedule: $s:ty) => {
            /// Hopper tensor-core GEMM entry point (see `hopper`).
            ///
            /// # Safety
            /// Launched by the host with a validated `HopperParams` (tensor maps built for
            /// these layouts and this tile), `hopper::config::threads(BM)` threads and
            /// `hopper::config::SMEM_BYTES` of dynamic shared memory.
            #[no_mangle]
            pub unsafe extern "ptx-kernel" fn $name(p: HopperParams) {
                let map_a = crate::kernel_param_generic_address!($name, 0);
                let map_b = crate::kernel_param_generic_address!($name, 128);
                let map_c = crate::kernel_param_generic_address!($name, 256);
                // SAFETY: forwarded launch contract.
                unsafe {
                    hopper::gemm::<$elem, $a, $b, $bn, $bm, $c, $s>(&p.gemm, [map_a, map_b, map_c])
                }
            }
        };
    }

    macro_rules! hopper_entries {
        ($($name:ident $elem:ty, $a:expr, $b:expr, $bm:expr, $bn:expr, $c:expr;)*) => {
            $(hopper_entry!($name, $elem, a_k_contiguous: $a, b_k_contiguous: $b, bm: $bm, bn: $bn, cluster: $c, schedule: hopper::Cooperative);)*
        };
    }

    // Ping-pong consumers (`hopper::pingpong`): (128, 128) tiles, one per consumer warpgroup.
    macro_rules! hopper_pingpong_entries {
        ($($name:ident $elem:ty, $a:expr, $b:expr, $c:expr;)*) => {
            $(hopper_entry!($name, $elem, a_k_contiguous: $a, b_k_contiguous: $b, bm: 128, bn: 128, cluster: $c, schedule: hopper::pingpong::PingPong);)*
        };
    }

    hopper_entries! {
        sgemm_bi_hopper_bf16_rr_n256 Bf16, true, false, 128, 256, 1;
        sgemm_bi_hopper_bf16_rc_n256 Bf16, true, true, 128, 256, 1;
        sgemm_bi_hopper_bf16_cr_n256 Bf16, false, false, 128, 256, 1;
        sgemm_bi_hopper_bf16_cc_n256 Bf16, false, true, 128, 256, 1;
        sgemm_bi_hopper_f16_rr_n256 F16, true, false, 128, 256, 1;
        sgemm_bi_hopper_f16_rc_n256 F16, true, true, 128, 256, 1;
        sgemm_bi_hopper_f16_cr_n256 F16, false, false, 128, 256, 1;
        sgemm_bi_hopper_f16_cc_n256 F16, false, true, 128, 256, 1;
        sgemm_bi_hopper_bf16_rr_n192 Bf16, true, false, 128, 192, 1;
        sgemm_bi_hopper_bf16_rc_n192 Bf16, true, true, 128, 192, 1;
        sgemm_bi_hopper_bf16_cr_n192 Bf16, false, false, 128, 192, 1;
        sgemm_bi_hopper_bf16_cc_n192 Bf16, false, true, 128, 192, 1;
        sgemm_bi_hopper_f16_rr_n192 F16, true, false, 128, 192, 1;
        sgemm_bi_hopper_f16_rc_n192 F16, true, true, 128, 192, 1;
        sgemm_bi_hopper_f16_cr_n192 F16, false, false, 128, 192, 1;
        sgemm_bi_hopper_f16_cc_n192 F16, false, true, 128, 192, 1;
        sgemm_bi_hopper_bf16_rr_n128 Bf16, true, false, 128, 128, 1;
        sgemm_bi_hopper_bf16_rc_n128 Bf16, true, true, 128, 128, 1;
        sgemm_bi_hopper_bf16_cr_n128 Bf16, false, false, 128, 128, 1;
        sgemm_bi_hopper_bf16_cc_n128 Bf16, false, true, 128, 128, 1;
        sgemm_bi_hopper_f16_rr_n128 F16, true, false, 128, 128, 1;
        sgemm_bi_hopper_f16_rc_n128 F16, true, true, 128, 128, 1;
        sgemm_bi_hopper_f16_cr_n128 F16, false, false, 128, 128, 1;
        sgemm_bi_hopper_f16_cc_n128 F16, false, true, 128, 128, 1;
        sgemm_bi_hopper_bf16_rr_n64 Bf16, true, false, 128, 64, 1;
        sgemm_bi_hopper_bf16_rc_n64 Bf16, true, true, 128, 64, 1;
        sgemm_bi_hopper_bf16_cr_n64 Bf16, false, false, 128, 64, 1;
        sgemm_bi_hopper_bf16_cc_n64 Bf16, false, true, 128, 64, 1;
        sgemm_bi_hopper_f16_rr_n64 F16, true, false, 128, 64, 1;
        sgemm_bi_hopper_f16_rc_n64 F16, true, true, 128, 64, 1;
        sgemm_bi_hopper_f16_cr_n64 F16, false, false, 128, 64, 1;
        sgemm_bi_hopper_f16_cc_n64 F16, false, true, 128, 64, 1;
        // Clusters of two blocks along M sharing each stage's B tile (multicast).
        sgemm_bi_hopper_bf16_rr_n256_x2 Bf16, true, false, 128, 256, 2;
        sgemm_bi_hopper_bf16_rc_n256_x2 Bf16, true, true, 128, 256, 2;
        sgemm_bi_hopper_bf16_cr_n256_x2 Bf16, false, false, 128, 256, 2;
        sgemm_bi_hopper_bf16_cc_n256_x2 Bf16, false, true, 128, 256, 2;
        sgemm_bi_hopper_f16_rr_n256_x2 F16, true, false, 128, 256, 2;
        sgemm_bi_hopper_f16_rc_n256_x2 F16, true, true, 128, 256, 2;
        sgemm_bi_hopper_f16_cr_n256_x2 F16, false, false, 128, 256, 2;
        sgemm_bi_hopper_f16_cc_n256_x2 F16, false, true, 128, 256, 2;
        // Small M (decode): tiles of 64 rows, and of 32, 16 and 8 for a K-contiguous A.
        sgemm_bi_hopper_bf16_rr_n64_m64 Bf16, true, false, 64, 64, 1;
        sgemm_bi_hopper_bf16_rc_n64_m64 Bf16, true, true, 64, 64, 1;
        sgemm_bi_hopper_bf16_cr_n64_m64 Bf16, false, false, 64, 64, 1;
        sgemm_bi_hopper_bf16_cc_n64_m64 Bf16, false, true, 64, 64, 1;
        sgemm_bi_hopper_f16_rr_n64_m64 F16, true, false, 64, 64, 1;
        sgemm_bi_hopper_f16_rc_n64_m64 F16, true, true, 64, 64, 1;
        sgemm_bi_hopper_f16_cr_n64_m64 F16, false, false, 64, 64, 1;
        sgemm_bi_hopper_f16_cc_n64_m64 F16, false, true, 64, 64, 1;
        sgemm_bi_hopper_bf16_rr_n64_m32 Bf16, true, false, 32, 64, 1;
        sgemm_bi_hopper_bf16_rc_n64_m32 Bf16, true, true, 32, 64, 1;
        sgemm_bi_hopper_f16_rr_n64_m32 F16, true, false, 32, 64, 1;
        sgemm_bi_hopper_f16_rc_n64_m32 F16, true, true, 32, 64, 1;
        sgemm_bi_hopper_bf16_rr_n64_m16 Bf16, true, false, 16, 64, 1;
        sgemm_bi_hopper_bf16_rc_n64_m16 Bf16, true, true, 16, 64, 1;
        sgemm_bi_hopper_f16_rr_n64_m16 F16, true, false, 16, 64, 1;
        sgemm_bi_hopper_f16_rc_n64_m16 F16, true, true, 16, 64, 1;
        sgemm_bi_hopper_bf16_rr_n64_m8 Bf16, true, false, 8, 64, 1;
        sgemm_bi_hopper_bf16_rc_n64_m8 Bf16, true, true, 8, 64, 1;
        sgemm_bi_hopper_f16_rr_n64_m8 F16, true, false, 8, 64, 1;
        sgemm_bi_hopper_f16_rc_n64_m8 F16, true, true, 8, 64, 1;
    }

    hopper_pingpong_entries! {
        sgemm_bi_hopper_bf16_rr_n128_pp Bf16, true, false, 1;
        sgemm_bi_hopper_bf16_rc_n128_pp Bf16, true, true, 1;
        sgemm_bi_hopper_bf16_cr_n128_pp Bf16, false, false, 1;
        sgemm_bi_hopper_bf16_cc_n128_pp Bf16, false, true, 1;
        sgemm_bi_hopper_f16_rr_n128_pp F16, true, false, 1;
        sgemm_bi_hopper_f16_rc_n128_pp F16, true, true, 1;
        sgemm_bi_hopper_f16_cr_n128_pp F16, false, false, 1;
        sgemm_bi_hopper_f16_cc_n128_pp F16, false, true, 1;
        sgemm_bi_hopper_bf16_rr_n128_pp_x2 Bf16, true, false, 2;
        sgemm_bi_hopper_bf16_rc_n128_pp_x2 Bf16, true, true, 2;
        sgemm_bi_hopper_bf16_cr_n128_pp_x2 Bf16, false, false, 2;
        sgemm_bi_hopper_bf16_cc_n128_pp_x2 Bf16, false, true, 2;
        sgemm_bi_hopper_f16_rr_n128_pp_x2 F16, true, false, 2;
        sgemm_bi_hopper_f16_rc_n128_pp_x2 F16, true, true, 2;
        sgemm_bi_hopper_f16_cr_n128_pp_x2 F16, false, false, 2;
        sgemm_bi_hopper_f16_cc_n128_pp_x2 F16, false, true, 2;
    }
}
