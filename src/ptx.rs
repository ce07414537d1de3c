//! The PTX modules built from `kernels-gpu/` by `build.rs`, embedded in the library, and,
//! where the build made them, their machine code for compute capability 9.0.

use sgemm_bi_host::KernelImages;

/// Whether the embedded PTX was compiled by this build (`"fresh"`) or taken from
/// `kernels-gpu/ptx` (`"vendored"`, when the pinned nightly is not installed).
pub const SOURCE: &str = env!("SGEMM_BI_PTX_SOURCE");

/// The sm_80 module: every kernel that needs nothing newer than Ampere.
pub const SM80: &str = include_str!(concat!(env!("OUT_DIR"), "/sm80.ptx"));

/// The sm90a module: the tensor-core tier's Hopper path (wgmma + TMA), loaded on compute
/// capability 9.0 only.
pub const SM90A: &str = include_str!(concat!(env!("OUT_DIR"), "/sm90a.ptx"));

/// An embedded image, aligned as an ELF file's headers want (the driver reads them in
/// place).
#[repr(C, align(64))]
struct Aligned<T: ?Sized>(T);

static SM80_CUBIN_SM90_IMAGE: &Aligned<[u8]> = &Aligned(*include_bytes!(concat!(
    env!("OUT_DIR"),
    "/sm80.sm_90.cubin"
)));
static SM90A_CUBIN_IMAGE: &Aligned<[u8]> =
    &Aligned(*include_bytes!(concat!(env!("OUT_DIR"), "/sm90a.cubin")));

/// The sm80 module as machine code for compute capability 9.0, or empty (built only by
/// release builds with `SGEMM_BI_PTXAS` set: `build.rs`).
pub static SM80_CUBIN_SM90: &[u8] = &SM80_CUBIN_SM90_IMAGE.0;

/// The sm90a module as machine code (sm_90a), or empty, as [`SM80_CUBIN_SM90`].
pub static SM90A_CUBIN: &[u8] = &SM90A_CUBIN_IMAGE.0;

/// Every module, as the engine loads them.
pub static KERNELS: KernelImages = KernelImages {
    sm80: SM80,
    sm90a: SM90A,
    sm80_cubin_sm90: SM80_CUBIN_SM90,
    sm90a_cubin: SM90A_CUBIN,
};
