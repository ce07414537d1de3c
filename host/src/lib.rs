//! sgemm-bi's engine: devices, plans, the CPU backend and the CUDA launcher.
//!
//! Most users want the `sgemm-bi` crate, which re-exports this one and embeds the kernels.

mod cpu;
mod cuda;
mod engine;
mod error;
mod grouped;
mod host_slice;
pub mod numeric;
mod triad;
mod types;
pub mod validate;

#[doc(hidden)]
pub use cuda::TcPath;
pub use cuda::{Compressed, Cubin, ImageKind, KernelImages, LoadedImage, ModuleImages};
pub use engine::Engine;
pub use error::{Error, Operand as ErrorOperand, Result};
pub use grouped::{check_offsets, GroupCall, GroupOffsets, GroupSplit, GroupedGemm};
pub use half::{bf16, f16};
pub use host_slice::{HostSlice, HostSliceMut};
pub use triad::{Linear, WeightLayout};
pub use types::{
    DType, Device, Gemm, GemmPointers, Layout, Operand, Output, OutputMode, Stream, Tier,
};
