//! The kernel images `build.rs` embeds: each module's PTX and its machine code for every
//! architecture in `vendored/`, zstd-compressed (see `build.rs`).

use sgemm_bi_host::ModuleImages;

include!(concat!(env!("OUT_DIR"), "/images.rs"));

/// Where the embedded kernels come from: `"vendored"` (`vendored/`, when the
/// pinned nightly is not installed), `"fresh (equal to the vendored PTX)"` (compiled by this
/// build, the same PTX, so the vendored machine code is embedded), or `"fresh (differs from
/// the vendored PTX)"` (a kernel is being changed: machine code only where `SGEMM_BI_PTXAS`
/// assembled it).
pub const SOURCE: &str = env!("SGEMM_BI_PTX_SOURCE");

/// The ptxas that made the embedded machine code (its version line), or empty when the build
/// embeds none.
pub const PTXAS_VERSION: &str = env!("SGEMM_BI_PTXAS_VERSION");

/// A module's PTX text, decompressed.
pub fn ptx_text(module: &ModuleImages) -> String {
    let bytes = module.ptx.to_vec().expect("the embedded PTX decompresses");
    String::from_utf8(bytes).expect("PTX is ASCII")
}

/// A module's machine code for `arch` (e.g. `"sm_90a"`), decompressed, if embedded.
pub fn cubin(module: &ModuleImages, arch: &str) -> Option<Vec<u8>> {
    let cubin = module.cubins.iter().find(|c| c.arch == arch)?;
    Some(
        cubin
            .image
            .to_vec()
            .expect("the embedded cubin decompresses"),
    )
}
