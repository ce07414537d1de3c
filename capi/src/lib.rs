//! The C ABI of sgemm-bi: `libsgemm_bi.so` / `libsgemm_bi.a` with the header
//! `include/sgemm_bi.h`, generated from this crate by cbindgen (`tests/header.rs` fails while
//! the committed header is stale; `SGEMM_BI_UPDATE_HEADER=1 cargo test -p sgemm-bi-capi
//! --test header` rewrites it).
//!
//! Conventions of every function:
//!
//! - It returns a `sgemm_bi_status` (stable numbers; `SGEMM_BI_STATUS_OK` is 0), and
//!   `sgemm_bi_last_error_message()` gives the calling thread's detail of the last call.
//! - Everything is checked before anything runs: NULL handles and pointers, enum values
//!   (passed as `uint32_t`), `struct_size` and reserved fields, shapes whose extents
//!   overflow. A rejected call launched nothing and wrote none of the caller's buffers.
//! - Panics never cross the boundary: one is caught and returned as `SGEMM_BI_STATUS_PANIC`.
//! - Pointers are host pointers on the CPU engine and device pointers (of the device's
//!   primary context) on a CUDA engine; the library cannot see the size of an allocation,
//!   so the caller guarantees the extents the descriptor implies.
//! - One engine may be used by any number of threads at once (the Rust engine is
//!   `Send + Sync` and calls share no state but a device error report, see
//!   `sgemm_bi_engine_take_device_error`); only its destruction must not overlap a call.
//!
//! The Rust items are named as C spells them (`sgemm_bi_status`, `sgemm_bi_gemm_desc`);
//! enum variants become `SGEMM_BI_<ENUM>_<VARIANT>` in the header.
#![allow(non_camel_case_types)]

mod build_info;
mod desc;
mod engine;
mod grouped;
mod status;
#[cfg(test)]
mod tests;
#[cfg(target_os = "linux")]
mod torch;

use std::ffi::c_char;

pub use build_info::{sgemm_bi_build_info, sgemm_bi_engine_build_info};
pub use desc::{
    sgemm_bi_capabilities, sgemm_bi_device_kind, sgemm_bi_dtype, sgemm_bi_gemm_desc,
    sgemm_bi_layout, sgemm_bi_linear, sgemm_bi_operand, sgemm_bi_output, sgemm_bi_output_mode,
    sgemm_bi_tier, sgemm_bi_weight_layout,
};
pub use engine::{
    sgemm_bi_backward_dw, sgemm_bi_backward_dx, sgemm_bi_engine, sgemm_bi_engine_capabilities,
    sgemm_bi_engine_create, sgemm_bi_engine_destroy, sgemm_bi_engine_resolve_tier,
    sgemm_bi_engine_set_pointer_checks, sgemm_bi_engine_supports,
    sgemm_bi_engine_take_device_error, sgemm_bi_forward, sgemm_bi_gemm, sgemm_bi_gemm_desc_dense,
};
pub use grouped::{sgemm_bi_group_split, sgemm_bi_grouped_gemm, sgemm_bi_offsets_location};
pub use status::{sgemm_bi_last_error_message, sgemm_bi_status, sgemm_bi_status_name};

/// The version of this ABI: a program built against this header runs with a library whose
/// `sgemm_bi_abi_version()` returns the same number. It changes whenever a struct layout, a
/// signature or the meaning of a value changes incompatibly.
pub const SGEMM_BI_ABI_VERSION: u32 = 1;

/// The ABI version of the library loaded at run time; compare with `SGEMM_BI_ABI_VERSION`.
#[no_mangle]
pub extern "C" fn sgemm_bi_abi_version() -> u32 {
    SGEMM_BI_ABI_VERSION
}

/// The library version as a NUL-terminated string, e.g. `"0.2.0"`. Static; never NULL.
#[no_mangle]
pub extern "C" fn sgemm_bi_version() -> *const c_char {
    concat!(env!("CARGO_PKG_VERSION"), "\0").as_ptr().cast()
}
