//! The device crate's parameter structs and tile constants, compiled from the very same
//! source files, so the host and the kernels cannot disagree on a layout or a block size.

#[allow(dead_code)]
#[path = "../../../kernels-gpu/src/params.rs"]
pub mod params;

#[allow(dead_code)]
#[path = "../../../kernels-gpu/src/scalar/config.rs"]
pub mod scalar_config;
