//! The PTX modules built from `kernels-gpu/` by `build.rs`, embedded in the library.

use sgemm_bi_host::KernelImages;

/// Whether the embedded PTX was compiled by this build (`"fresh"`) or taken from
/// `kernels-gpu/ptx` (`"vendored"`, when the pinned nightly is not installed).
pub const SOURCE: &str = env!("SGEMM_BI_PTX_SOURCE");

/// The sm_80 module: every kernel that needs nothing newer than Ampere.
pub const SM80: &str = include_str!(concat!(env!("OUT_DIR"), "/sm80.ptx"));

/// The sm90a module: the tensor-core tier's Hopper path (wgmma + TMA), loaded on compute
/// capability 9.0 only.
pub const SM90A: &str = include_str!(concat!(env!("OUT_DIR"), "/sm90a.ptx"));

/// Every module, as the engine loads them.
pub static KERNELS: KernelImages = KernelImages {
    sm80: SM80,
    sm90a: SM90A,
};
