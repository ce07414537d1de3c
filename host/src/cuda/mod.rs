//! The CUDA backend: one device's primary context, the loaded PTX modules, and launches on
//! the caller's stream. No stream, allocation or synchronization of its own per call, so
//! calls can be captured in CUDA graphs.

mod hopper;
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
    /// The tensor-core tier's Hopper path (wgmma + TMA), loaded on compute capability 9.0
    /// only (sm_90a code runs on no other GPU). Empty: not available.
    pub sm90a: &'static str,
}

/// Which kernels the tensor-core tier may use. Not a tuning knob: the default lets the
/// planner choose; the others exist so the tests can run both paths on the same inputs
/// (`SGEMM_BI_FORCE_TC_PATH=portable|hopper`, read once when an engine is created, or
/// `Engine::with_kernels_and_tc_path`).
#[doc(hidden)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum TcPath {
    /// The planner's choice: on sm_90, the Hopper path wherever the copy engine can
    /// describe the operands, the mma.sync path elsewhere (they give the same bits).
    #[default]
    Auto,
    /// Only the mma.sync kernels.
    Portable,
    /// Only the Hopper kernels; a call they cannot run is an error.
    Hopper,
}

impl TcPath {
    /// The path `SGEMM_BI_FORCE_TC_PATH` asks for (`Auto` when unset or unknown).
    pub fn from_env() -> Self {
        match std::env::var("SGEMM_BI_FORCE_TC_PATH").as_deref() {
            Ok("portable") => TcPath::Portable,
            Ok("hopper") => TcPath::Hopper,
            _ => TcPath::Auto,
        }
    }
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
    /// `None` except on compute capability 9.0 (sm_90a code).
    hopper: Option<hopper::HopperKernels>,
    tc_path: TcPath,
    // Declared last: dropped after the function handles that point into them.
    _sm80: Option<Module>,
    _sm90a: Option<Module>,
}

// SAFETY: CUmodule and CUfunction handles are immutable after loading and the CUDA driver
// API is thread-safe; every use binds the context to the calling thread first.
unsafe impl Send for CudaBackend {}
// SAFETY: as above; no method mutates the backend.
unsafe impl Sync for CudaBackend {}

impl CudaBackend {
    pub(crate) fn new(ordinal: usize, kernels: &KernelImages, tc_path: TcPath) -> Result<Self> {
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
        let (sm90a, hopper) = if capability == (9, 0) && !kernels.sm90a.is_empty() {
            let sms = ctx
                .attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
                .map_err(driver_error("cuDeviceGetAttribute"))?;
            let module = Module::load(&ctx, kernels.sm90a)?;
            let hopper = hopper::HopperKernels::load(&|name| module.function(name), sms as usize)?;
            (Some(module), Some(hopper))
        } else {
            (None, None)
        };
        Ok(CudaBackend {
            ctx,
            capability,
            scalar,
            tensor,
            hopper,
            tc_path,
            _sm80: sm80,
            _sm90a: sm90a,
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
            Tier::TensorCores => unsafe { self.launch_tensor(g, p, stream) },
        }
    }

    /// The tensor-core tier: the Hopper path where it is loaded and can describe the
    /// operands (unless forced off), the mma.sync path otherwise.
    ///
    /// # Safety
    /// As for `gemm`, with the context current.
    unsafe fn launch_tensor(
        &self,
        g: &Gemm,
        p: &GemmPointers,
        stream: sys::CUstream,
    ) -> Result<()> {
        let hopper = match (self.tc_path, &self.hopper) {
            (TcPath::Portable, _) => None,
            (_, Some(h)) => match hopper::can_implement(g, p.a as usize, p.b as usize) {
                Ok(()) => Some(h),
                Err(e) if self.tc_path == TcPath::Hopper => {
                    return Err(Error::Launch {
                        kernel: "sgemm_bi_hopper_*".into(),
                        message: format!("forced Hopper path cannot run this call: {}", e.reason),
                    })
                }
                Err(_) => None,
            },
            (TcPath::Hopper, None) => {
                return Err(Error::Launch {
                    kernel: "sgemm_bi_hopper_*".into(),
                    message: "forced Hopper path, but no sm90a module is loaded (needs compute \
                              capability 9.0)"
                        .into(),
                })
            }
            (TcPath::Auto, None) => None,
        };
        // SAFETY (both arms): forwarded contract.
        match hopper {
            Some(h) => unsafe { h.launch(g, p, stream) },
            None => unsafe {
                self.tensor
                    .as_ref()
                    .expect("tier availability is checked before launch")
                    .launch(g, p, stream)
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
