//! # sgemm-bi
//!
//! Deterministic, batch-invariant GEMM for training and serving: forward, dW and dX in f32,
//! bf16 and f16, on the CPU and on NVIDIA GPUs.
//!
//! The scalar tier's contract: every output element is
//! `round_out(bias_j + fma(a[i,K-1], b[K-1,j], … fma(a[i,0], b[0,j], +0.0) …))` in f32 with
//! one rounding per fma, k ascending, inputs upcast exactly, one round-to-nearest-even to the
//! output dtype. The reduction order is a function of K alone, so a row's bits never depend
//! on the batch size (M), a column's never on N, and the CPU backend and every GPU agree bit
//! for bit.
//!
//! ```
//! use sgemm_bi::{DType, Device, Engine, Gemm};
//! let engine = Engine::new(Device::Cpu)?;
//! let (m, n, k) = (2, 3, 4);
//! let a: Vec<f32> = (0..m * k).map(|v| v as f32).collect();
//! let b: Vec<f32> = (0..k * n).map(|v| v as f32 * 0.5).collect();
//! let mut c = vec![0.0f32; m * n];
//! engine.gemm_host(&Gemm::dense(m, n, k, DType::F32), (&a).into(), (&b).into(), None, (&mut c).into())?;
//! assert_eq!(c[0], 0.0 * 0.0 + 1.0 * 1.5 + 2.0 * 3.0 + 3.0 * 4.5);
//! # Ok::<(), sgemm_bi::Error>(())
//! ```

mod build_info;
pub mod kernels;

pub use build_info::{build_info, BuildInfo, ModuleInfo};

pub use sgemm_bi_host::{
    bf16, check_offsets, f16, numeric, validate, DType, Device, Error, ErrorOperand, Gemm,
    GemmPointers, GroupCall, GroupOffsets, GroupSplit, GroupedGemm, HostSlice, HostSliceMut,
    ImageKind, KernelImages, Layout, Linear, LoadedImage, Operand, Output, OutputMode, Result,
    Stream, Tier, WeightLayout,
};

/// A GEMM engine on one device, with the library's embedded kernels (see
/// [`sgemm_bi_host::Engine`] for every method).
#[derive(Debug)]
pub struct Engine(sgemm_bi_host::Engine);

impl Engine {
    /// Creates an engine on `device`. On a CUDA device the kernels load as calls first need
    /// them, from the machine code embedded for the device's architecture (or, on a GPU
    /// without any, from the PTX, compiled by the driver one kernel at a time); without a
    /// CUDA driver it returns [`Error::NoDriver`] and `Device::Cpu` still works.
    pub fn new(device: Device) -> Result<Self> {
        sgemm_bi_host::Engine::with_kernels(device, &kernels::KERNELS).map(Engine)
    }

    /// As [`Engine::new`], loading the PTX even where machine code is embedded (tests and
    /// measurements of the fallback); not part of the API.
    #[doc(hidden)]
    pub fn from_ptx(device: Device) -> Result<Self> {
        sgemm_bi_host::Engine::with_kernels_from_ptx(device, &kernels::KERNELS).map(Engine)
    }

    /// As [`Engine::new`], with the tensor-core tier restricted to one path (tests compare
    /// the mma.sync and Hopper paths with it); not part of the API.
    #[doc(hidden)]
    pub fn with_tc_path(device: Device, path: sgemm_bi_host::TcPath) -> Result<Self> {
        sgemm_bi_host::Engine::with_kernels_and_tc_path(device, &kernels::KERNELS, path).map(Engine)
    }
}

#[doc(hidden)]
pub use sgemm_bi_host::TcPath;

impl std::ops::Deref for Engine {
    type Target = sgemm_bi_host::Engine;
    fn deref(&self) -> &Self::Target {
        &self.0
    }
}
