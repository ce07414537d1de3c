//! The named entry points the host launches: one per line of the kernel catalogue
//! (`sgemm_bi_abi::kernel_catalogue!`, which the host and the build read too), defined here
//! in the catalogue's order. Names: `sgemm_bi_scalar_<dtype>_<A layout><B layout>[_n64]`
//! (128 × 128 tiles, or 128 × 64), `sgemm_bi_scalar_rows_<dtype>_<B layout>_m<rows>[_n<columns>]`
//! (few rows, `scalar::rows`), `sgemm_bi_scalar_grouped_<dtype>_<B layout>` (the grouped rows
//! split, `scalar::grouped`), `sgemm_bi_scalar_grouped_k_<dtype>` (the grouped reduction
//! split, any layouts, `scalar::grouped::gemm_reduction`) and
//! `sgemm_bi_tc_<dtype>_<A layout><B layout>[_unaligned]`, `r` = row-major, `c` =
//! column-major; `_unaligned` loads operands element by element (any 2-byte
//! alignment). The sm90a module has
//! `sgemm_bi_hopper_<dtype>_<A layout><B layout>_n<BN>[_pp][_m<BM>][_x2]` (ping-pong
//! consumers, `hopper::pingpong`; tiles of BM < 128 rows; clusters of two, along M for
//! 128-row tiles and along N for the others, `hopper::walk`), and
//! `sgemm_bi_hopper_grouped_<dtype>_<B layout>_n<BN>[_dyn|_x2_dyn]` and `sgemm_bi_hopper_grouped_k_<dtype>_n<BN>`
//! (the grouped forms, rows split and reduction split, `hopper::grouped`),
//! and `sgemm_bi_scalar_<dtype>_<A layout><B layout>_sm90`: the 128 × 128 scalar tiles with more
//! k steps per loop trip, which ptxas fits in 128 registers only for sm_90
//! (`scalar::config::wide`).

#[cfg(not(sgemm_bi_sm90a))]
pub use sm80::*;
#[cfg(sgemm_bi_sm90a)]
pub use sm90a::*;

/// The catalogue's callback: each module's entries in a module of their own, built only into
/// that PTX module (`--cfg sgemm_bi_sm90a` selects the sm90a one).
macro_rules! define_entries {
    (sm80 { $($f80:ident { $($e80:tt)* })* } sm90a { $($f90:ident { $($e90:tt)* })* }) => {
        #[cfg(not(sgemm_bi_sm90a))]
        mod sm80 {
            #[allow(unused_imports)]
            use crate::element::{Bf16, F16, F32};
            use crate::params::{GemmParams, GroupedParams, GroupedReductionParams};
            use crate::{scalar, tensor};

            $(define_entries!(@$f80 $($e80)*);)*
        }

        #[cfg(sgemm_bi_sm90a)]
        mod sm90a {
            #[allow(unused_imports)]
            use crate::element::{Bf16, F16, F32};
            use crate::hopper::{self, pingpong::PingPong, Cooperative};
            use crate::params::{GemmParams, GroupedHopperParams, HopperParams};
            use crate::scalar;

            $(define_entries!(@$f90 $($e90)*);)*
        }
    };

    (@scalar_tiled $($name:ident $elem:ident, $a:literal, $b:literal, $tile:ident, $steps:ident,
        $cp:literal, $cu:literal;)*) => {$(
        /// Scalar-tier GEMM entry point, 128-row tiles (see `scalar`).
        ///
        /// # Safety
        /// Launched by the host with a validated `GemmParams`, `scalar::config::THREADS`
        /// threads and the tile's `SMEM_BYTES` of dynamic shared memory.
        #[no_mangle]
        pub unsafe extern "ptx-kernel" fn $name(p: GemmParams) {
            use scalar::config::$tile::{BK, BN, TN};
            // SAFETY: forwarded launch contract.
            unsafe {
                scalar::gemm::<$elem, $a, $b, BN, BK, TN, { scalar::config::$tile::$steps }, $cp, $cu>(
                    &p,
                )
            }
        }
    )*};

    (@scalar_rows $($name:ident $elem:ident, $b:literal, $tm:literal, $tn:literal;)*) => {$(
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
            unsafe { scalar::rows::gemm::<$elem, $b, $tm, $tn>(&p) }
        }
    )*};

    (@scalar_grouped $($name:ident $elem:ident, $b:literal;)*) => {$(
        /// Scalar-tier grouped GEMM entry point, rows split (see `scalar::grouped`).
        ///
        /// # Safety
        /// Launched by the host with a validated `GroupedParams` (the group ends in device
        /// memory) and `scalar::config::grouped::THREADS` threads.
        #[no_mangle]
        pub unsafe extern "ptx-kernel" fn $name(p: GroupedParams) {
            // SAFETY: forwarded launch contract.
            unsafe { scalar::grouped::gemm::<$elem, $b>(&p.gemm, p.group_ends, p.errors) }
        }
    )*};

    (@scalar_grouped_reduction $($name:ident $elem:ident;)*) => {$(
        /// Scalar-tier grouped GEMM entry point, reduction split (see
        /// `scalar::grouped::gemm_reduction`).
        ///
        /// # Safety
        /// Launched by the host with a validated `GroupedReductionParams` (the group ends in
        /// device memory) and `scalar::config::grouped::THREADS` threads.
        #[no_mangle]
        pub unsafe extern "ptx-kernel" fn $name(p: GroupedReductionParams) {
            // SAFETY: forwarded launch contract.
            unsafe {
                scalar::grouped::gemm_reduction::<$elem>(
                    &p.grouped.gemm,
                    p.a_steps,
                    p.b_steps,
                    p.grouped.group_ends,
                    p.grouped.errors,
                )
            }
        }
    )*};

    (@mma $($name:ident $elem:ident, $a:literal, $b:literal, $cp:literal;)*) => {$(
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
    )*};

    (@hopper $($name:ident $elem:ident, $a:literal, $b:literal, $bm:literal, $bn:literal,
        $c:literal, $s:ident;)*) => {$(
        /// Hopper tensor-core GEMM entry point (see `hopper`).
        ///
        /// # Safety
        /// Launched by the host with a validated `HopperParams` (tensor maps built for
        /// these layouts and this tile), `hopper::config::threads(BM)` threads (two consumer
        /// warpgroups' worth for a ping-pong schedule) and
        /// `hopper::config::SMEM_BYTES` of dynamic shared memory.
        #[no_mangle]
        pub unsafe extern "ptx-kernel" fn $name(p: HopperParams) {
            let map_a = crate::kernel_param_generic_address!($name, 0);
            let map_b = crate::kernel_param_generic_address!($name, 128);
            let map_c = crate::kernel_param_generic_address!($name, 256);
            // SAFETY: forwarded launch contract.
            unsafe {
                hopper::gemm::<$elem, $a, $b, $bn, $bm, $c, $s>(
                    &p.gemm,
                    [map_a, map_b, map_c],
                    p.l2_prefetch_k_tiles,
                )
            }
        }
    )*};

    (@hopper_grouped $($name:ident $elem:ident, $b:literal, $bn:literal, $c:literal, $d:literal;)*) => {$(
        /// Grouped Hopper tensor-core GEMM entry point (see `hopper::grouped`).
        ///
        /// # Safety
        /// Launched by the host with a validated `GroupedHopperParams` (tensor maps of A, B
        /// and C built for these layouts and this tile, the group ends in device memory),
        /// `hopper::config::threads(BM)` threads and `hopper::config::SMEM_BYTES` of dynamic
        /// shared memory.
        #[no_mangle]
        pub unsafe extern "ptx-kernel" fn $name(p: GroupedHopperParams) {
            let map_a = crate::kernel_param_generic_address!($name, 0);
            let map_b = crate::kernel_param_generic_address!($name, 128);
            let map_c = crate::kernel_param_generic_address!($name, 256);
            // SAFETY: forwarded launch contract.
            unsafe {
                hopper::grouped::gemm::<$elem, $b, $bn, $c, $d>(
                    &p.base.gemm,
                    p.group_ends,
                    p.errors,
                    p.tile_counter,
                    [map_a, map_b, map_c],
                )
            }
        }
    )*};

    (@hopper_grouped_reduction $($name:ident $elem:ident, $bn:literal, $c:literal, $d:literal;)*) => {$(
        /// Grouped Hopper tensor-core GEMM entry point, reduction split (see
        /// `hopper::grouped::gemm_reduction`).
        ///
        /// # Safety
        /// Launched by the host with a validated `GroupedHopperParams` (tensor maps of A, B
        /// and C built for these layouts and this tile, the group ends in device memory),
        /// `hopper::config::threads(BM)` threads and `hopper::config::SMEM_BYTES` of dynamic
        /// shared memory.
        #[no_mangle]
        pub unsafe extern "ptx-kernel" fn $name(p: GroupedHopperParams) {
            let map_a = crate::kernel_param_generic_address!($name, 0);
            let map_b = crate::kernel_param_generic_address!($name, 128);
            let map_c = crate::kernel_param_generic_address!($name, 256);
            // SAFETY: forwarded launch contract.
            unsafe {
                hopper::grouped::gemm_reduction::<$elem, $bn, $c, $d>(
                    &p.base.gemm,
                    p.group_ends,
                    p.errors,
                    p.tile_counter,
                    [map_a, map_b, map_c],
                )
            }
        }
    )*};
}

sgemm_bi_abi::kernel_catalogue!(define_entries);
