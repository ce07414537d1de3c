//! sgemm-bi device code. Compiled by `../build.rs` to one PTX module per GPU family:
//!
//! * `sm80`: every kernel that needs nothing newer than Ampere (the scalar tier and the
//!   tensor-core tier's mma.sync path).
//! * `sm90a` (built with `--cfg sgemm_bi_sm90a`): the tensor-core tier's Hopper path
//!   (wgmma + TMA), and the scalar tier's 128 × 128 entries with the longer loop trips that
//!   only sm_90 fits unspilled (`entry.rs`).
//!
//! Layout of this crate: `arch/` holds one wrapper per PTX instruction and nothing else;
//! `params` the `#[repr(C)]` structs the host passes by value and each tier's `config` its
//! tile shape, both from the `sgemm-bi-abi` crate (`../abi`), which the host uses too;
//! `schedule.rs` the tile order every tier shares; `group_ends.rs` the report of bad group
//! ends that every grouped kernel writes; each tier is a folder with its config, mainloop
//! and epilogue, and `entry.rs` instantiates the named entry points.

#![no_std]
#![feature(abi_ptx, stdarch_nvptx, asm_experimental_arch, core_intrinsics)]
#![allow(internal_features)]

#[macro_use]
pub mod unroll;
pub mod arch;
pub mod element;
pub mod entry;
pub mod finish;
pub mod group_ends;
#[cfg(sgemm_bi_sm90a)]
pub mod hopper;
pub use sgemm_bi_abi::params;
pub mod scalar;
pub mod schedule;
pub mod tensor;

#[panic_handler]
fn panic(_: &core::panic::PanicInfo) -> ! {
    // Kernels are written without panicking paths (no bounds-checked indexing, no
    // overflow checks); reaching this would be a bug, so trap rather than hang.
    // SAFETY: `trap` aborts the kernel; it has no operands.
    unsafe { core::arch::asm!("trap;", options(noreturn)) }
}
