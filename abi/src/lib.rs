//! What the sgemm-bi kernels and the host that launches them share: the `#[repr(C)]`
//! parameter structs the host passes by value ([`params`]), and each kernel family's tile
//! shape ([`scalar`], [`tensor`] for `mma.sync`, [`hopper`] for wgmma + TMA) — block sizes,
//! thread counts, shared memory — and the [`catalogue`] of every entry point, from which the
//! device crate defines them, the build writes their launch bounds and the host finds them.
//!
//! The device crate (`kernels-gpu`, compiled to PTX for `nvptx64-nvidia-cuda`) and the host
//! crate (`sgemm-bi-host`) both depend on this crate, so the two sides cannot disagree on a
//! layout or a launch size. It is `#![no_std]` with no dependencies, plain data and `const
//! fn`s (marked `#[inline]`: the device crate is emitted as one PTX module, so anything it
//! calls from here must be instantiated there). The shapes' contracts are checked at compile
//! time (`const _: () = assert!(…)`) in each module.
//!
//! This is an implementation detail of `sgemm-bi`, published only because the crates that
//! use it are; nothing in it is a stable API.

#![no_std]

pub mod catalogue;
pub mod hopper;
pub mod numeric;
pub mod params;
pub mod scalar;
pub mod tensor;
