//! The CUDA backend: one device's primary context, the loaded PTX modules, and launches on
//! the caller's stream. No stream, allocation or synchronization of its own per call, so
//! calls can be captured in CUDA graphs.

mod kernel_abi;
mod scalar;
mod tensor;

use std::ffi::CString;
use std::sync::Arc;

use cudarc::driver::{result, sys, CudaContext};

use crate::error::{Error, Operand as Which, Result};
use crate::types::{Gemm, GemmPointers, Stream, Tier};

/// PTX text of each module the engine may load (see `kernels-gpu/`).
#[derive(Debug)]
pub struct KernelImages {
    /// Kernels that need nothing newer than sm_80 (the scalar tier and the tensor-core
    /// tier's mma.sync path).
    pub sm80: &'static str,
}

fn driver_error(call: &'static str) -> impl Fn(result::DriverError) -> Error {
    move |e| Error::Driver {
        call,
        message: e.to_string(),
    }
}

/// A loaded module; unloaded on drop.
struct Module {
    ctx: Arc<CudaContext>,
    raw: sys::CUmodule,
}

impl Module {
    fn load(ctx: &Arc<CudaContext>, ptx: &str) -> Result<Self> {
        let image = CString::new(ptx).map_err(|_| Error::Driver {
            call: "cuModuleLoadData",
            message: "PTX image contains a NUL byte".into(),
        })?;
        ctx.bind_to_thread()
            .map_err(driver_error("cuCtxSetCurrent"))?;
        // SAFETY: `image` is a NUL-terminated PTX text that outlives the call; the context is
        // current on this thread.
        let raw = unsafe { result::module::load_data(image.as_ptr().cast()) }
            .map_err(driver_error("cuModuleLoadData"))?;
        Ok(Module {
            ctx: ctx.clone(),
            raw,
        })
    }

    fn function(&self, name: &str) -> Result<sys::CUfunction> {
        // SAFETY: `self.raw` is a loaded module until `self` drops.
        unsafe { result::module::get_function(self.raw, CString::new(name).unwrap()) }.map_err(
            |e| Error::Driver {
                call: "cuModuleGetFunction",
                message: format!("{name}: {e}"),
            },
        )
    }
}

impl Drop for Module {
    fn drop(&mut self) {
        // Errors cannot be returned from drop; a failed unload only leaks the module.
        if self.ctx.bind_to_thread().is_ok() {
            // SAFETY: loaded by `Module::load`, unloaded only here.
            let _ = unsafe { result::module::unload(self.raw) };
        }
    }
}

/// The engine's state on one CUDA device.
pub(crate) struct CudaBackend {
    ctx: Arc<CudaContext>,
    capability: (u32, u32),
    /// `None` on GPUs older than sm_80, where the sm_80 module cannot load.
    scalar: Option<scalar::ScalarKernels>,
    /// `None` on GPUs older than sm_80 (mma.sync m16n8k16 with bf16 needs sm_80).
    tensor: Option<tensor::TensorKernels>,
    // Declared last: dropped after the function handles that point into it.
    _sm80: Option<Module>,
}

// SAFETY: CUmodule and CUfunction handles are immutable after loading and the CUDA driver
// API is thread-safe; every use binds the context to the calling thread first.
unsafe impl Send for CudaBackend {}
// SAFETY: as above; no method mutates the backend.
unsafe impl Sync for CudaBackend {}

impl CudaBackend {
    pub(crate) fn new(ordinal: usize, kernels: &KernelImages) -> Result<Self> {
        // SAFETY: only probes whether libcuda can be loaded; cudarc panics on first use
        // without it, so this must come first.
        if !unsafe { sys::is_culib_present() } {
            return Err(Error::NoDriver("libcuda.so could not be loaded".into()));
        }
        let count = match CudaContext::device_count() {
            Ok(n) => n.max(0) as usize,
            Err(e) if e.0 == sys::CUresult::CUDA_ERROR_NO_DEVICE => 0,
            Err(e) => return Err(Error::NoDriver(format!("cuInit failed: {e}"))),
        };
        if ordinal >= count {
            return Err(Error::NoDevice { ordinal, count });
        }
        let ctx = CudaContext::new(ordinal).map_err(driver_error("cuDevicePrimaryCtxRetain"))?;
        let (major, minor) = ctx
            .compute_capability()
            .map_err(driver_error("cuDeviceGetAttribute"))?;
        let capability = (major as u32, minor as u32);
        let (sm80, scalar, tensor) = if capability >= (8, 0) {
            let module = Module::load(&ctx, kernels.sm80)?;
            let get = |name: &str| module.function(name);
            let scalar = scalar::ScalarKernels::load(&get)?;
            let tensor = tensor::TensorKernels::load(&get)?;
            (Some(module), Some(scalar), Some(tensor))
        } else {
            (None, None, None)
        };
        Ok(CudaBackend {
            ctx,
            capability,
            scalar,
            tensor,
            _sm80: sm80,
        })
    }

    pub(crate) fn context(&self) -> &Arc<CudaContext> {
        &self.ctx
    }

    pub(crate) fn compute_capability(&self) -> (u32, u32) {
        self.capability
    }

    /// Why `tier` cannot run here, if it cannot.
    pub(crate) fn tier_unavailable(&self, tier: Tier) -> Option<String> {
        let missing = match tier {
            Tier::Scalar => self.scalar.is_none(),
            Tier::TensorCores => self.tensor.is_none(),
        };
        missing.then(|| {
            format!(
                "compute capability {}.{} is older than 8.0, the oldest the {tier} kernels are \
                 built for",
                self.capability.0, self.capability.1
            )
        })
    }

    /// Enqueues `g` on `stream`.
    ///
    /// # Safety
    /// The pointers of `p` are device pointers of this context valid for the spans
    /// `validate::check(g)` gave, C overlaps no input, and they outlive the work on `stream`,
    /// a stream of this context or null.
    pub(crate) unsafe fn gemm(&self, g: &Gemm, p: &GemmPointers, stream: Stream) -> Result<()> {
        check_alignment(g, p)?;
        self.ctx
            .bind_to_thread()
            .map_err(driver_error("cuCtxSetCurrent"))?;
        let stream = stream.0 as sys::CUstream;
        const CHECKED: &str = "tier availability is checked before launch";
        // SAFETY (both arms): forwarded contract.
        match g.tier {
            Tier::Scalar => unsafe { self.scalar.as_ref().expect(CHECKED).launch(g, p, stream) },
            Tier::TensorCores => unsafe {
                self.tensor.as_ref().expect(CHECKED).launch(g, p, stream)
            },
        }
    }
}

/// Device loads are naturally aligned, so each buffer must start on a multiple of its
/// element size (every allocator gives at least 256 bytes).
fn check_alignment(g: &Gemm, p: &GemmPointers) -> Result<()> {
    let checks = [
        (Which::A, p.a as usize, g.a.dtype.size()),
        (Which::B, p.b as usize, g.b.dtype.size()),
        (Which::Bias, p.bias as usize, g.bias.map_or(1, |d| d.size())),
        (Which::C, p.c as usize, g.c.mode.dtype().size()),
    ];
    for (operand, addr, align) in checks {
        if addr % align != 0 {
            return Err(Error::Misaligned {
                operand,
                addr,
                align,
            });
        }
    }
    Ok(())
}
