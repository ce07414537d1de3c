//! The CUDA backend: one device's primary context, the loaded PTX modules, and launches on
//! the caller's stream. No stream, allocation or synchronization of its own per call, so
//! calls can be captured in CUDA graphs.
//!
//! The modules of a device are loaded once per process and kept until it exits, shared by
//! every engine of that device (`Loaded`): dropping an engine never unloads a kernel that
//! work still queued on a stream, or a captured graph, may run, and creating and dropping
//! engines in a loop neither reloads the PTX nor leaks modules.

mod hopper;
mod kernel_abi;
mod pointers;
mod scalar;
mod tensor;

use std::ffi::CString;
use std::sync::{Arc, Mutex, PoisonError};

use cudarc::driver::{result, sys, CudaContext};

use crate::error::{Error, Operand as Which, Result};
use crate::types::{Gemm, GemmPointers, Stream, Tier};
use crate::validate::Extents;

/// PTX text of each module the engine may load (see `kernels-gpu/`), and their machine code
/// for compute capability 9.0 where the build made it.
#[derive(Debug)]
pub struct KernelImages {
    /// Kernels that need nothing newer than sm_80 (the scalar tier and the tensor-core
    /// tier's mma.sync path).
    pub sm80: &'static str,
    /// The tensor-core tier's Hopper path (wgmma + TMA), loaded on compute capability 9.0
    /// only (sm_90a code runs on no other GPU). Empty: not available.
    pub sm90a: &'static str,
    /// `sm80` assembled for sm_90 (a cubin), loaded instead of the PTX on compute
    /// capability 9.0 so that the driver compiles nothing there. Empty: load the PTX.
    pub sm80_cubin_sm90: &'static [u8],
    /// `sm90a` assembled for sm_90a (a cubin), as `sm80_cubin_sm90`.
    pub sm90a_cubin: &'static [u8],
}

/// Which kernels the tensor-core tier may use. Not a tuning knob: the default lets the
/// planner choose; the others exist so the tests can run both paths (and both Hopper
/// schedules) on the same inputs (`SGEMM_BI_FORCE_TC_PATH=portable|hopper|hopper_pingpong`,
/// read once when an engine is created, or `Engine::with_kernels_and_tc_path`). `Portable` also keeps the scalar tier on the sm80
/// module's entries (on sm_90 its 128 × 128 tiles otherwise come from the sm90a
/// module), so that the tests run those on an H200 too.
#[doc(hidden)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum TcPath {
    /// The planner's choice: on sm_90, the Hopper path wherever the copy engine can
    /// describe the operands, the mma.sync path elsewhere (they give the same bits).
    #[default]
    Auto,
    /// Only the mma.sync kernels (and only the sm80 module's scalar kernels).
    Portable,
    /// Only the Hopper kernels; a call they cannot run is an error.
    Hopper,
    /// Only the Hopper kernels, with the ping-pong consumers on every 128-row tile (the
    /// planner's choice elsewhere): for tests and benchmarks of that schedule.
    HopperPingPong,
}

impl TcPath {
    /// The path `SGEMM_BI_FORCE_TC_PATH` asks for (`Auto` when unset or unknown).
    pub fn from_env() -> Self {
        match std::env::var("SGEMM_BI_FORCE_TC_PATH").as_deref() {
            Ok("portable") => TcPath::Portable,
            Ok("hopper") => TcPath::Hopper,
            Ok("hopper_pingpong") => TcPath::HopperPingPong,
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

    /// Loads machine code for this device when there is some (`cubin`, on compute capability
    /// 9.0 only) and the driver takes it, else compiles `ptx`. A cubin the driver refuses
    /// (one from a newer ptxas than the driver knows) costs only the compile it was to save.
    fn load_best(
        ctx: &Arc<CudaContext>,
        capability: (u32, u32),
        cubin: &'static [u8],
        ptx: &str,
    ) -> Result<Self> {
        if capability == (9, 0) && !cubin.is_empty() {
            ctx.bind_to_thread()
                .map_err(driver_error("cuCtxSetCurrent"))?;
            // SAFETY: `cubin` is a whole ELF image in static memory; the driver reads it
            // during the call only; the context is current on this thread.
            if let Ok(raw) = unsafe { result::module::load_data(cubin.as_ptr().cast()) } {
                return Ok(Module {
                    ctx: ctx.clone(),
                    raw,
                });
            }
        }
        Self::load(ctx, ptx)
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

/// One device's primary context and the kernels loaded into it: created once per process
/// for each device and set of kernel images, and never dropped (see the module comment).
struct Loaded {
    ctx: Arc<CudaContext>,
    ordinal: usize,
    capability: (u32, u32),
    /// The device reads ordinary (pageable) host memory (HMM or ATS systems), so the
    /// pointer checks accept addresses the driver does not know.
    pageable_memory_access: bool,
    /// `None` on GPUs older than sm_80, where the sm_80 module cannot load.
    scalar: Option<scalar::ScalarKernels>,
    /// `None` on GPUs older than sm_80 (mma.sync m16n8k16 with bf16 needs sm_80).
    tensor: Option<tensor::TensorKernels>,
    /// `None` except on compute capability 9.0 (sm_90a code).
    hopper: Option<hopper::HopperKernels>,
    // Declared last: dropped after the function handles that point into them.
    _sm80: Option<Module>,
    _sm90a: Option<Module>,
}

// SAFETY: CUmodule and CUfunction handles are immutable after loading and the CUDA driver
// API is thread-safe; every use binds the context to the calling thread first.
unsafe impl Send for Loaded {}
// SAFETY: as above; nothing mutates a `Loaded`.
unsafe impl Sync for Loaded {}

/// Every `Loaded` of this process, by device ordinal and kernel images (their address).
static LOADED: Mutex<Vec<(usize, usize, Arc<Loaded>)>> = Mutex::new(Vec::new());

impl Loaded {
    /// The kernels of device `ordinal` (an existing device), loading them on first use.
    fn get(ordinal: usize, kernels: &'static KernelImages) -> Result<Arc<Self>> {
        let images = std::ptr::from_ref(kernels) as usize;
        // A panic while loading leaves the list as it was: its entries are all complete.
        let mut all = LOADED.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((_, _, l)) = all.iter().find(|e| e.0 == ordinal && e.1 == images) {
            return Ok(l.clone());
        }
        let loaded = Arc::new(Self::load(ordinal, kernels)?);
        all.push((ordinal, images, loaded.clone()));
        Ok(loaded)
    }

    fn load(ordinal: usize, kernels: &KernelImages) -> Result<Self> {
        let ctx = CudaContext::new(ordinal).map_err(driver_error("cuDevicePrimaryCtxRetain"))?;
        let (major, minor) = ctx
            .compute_capability()
            .map_err(driver_error("cuDeviceGetAttribute"))?;
        let capability = (major as u32, minor as u32);
        let pageable_memory_access = ctx
            .attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS)
            .map_err(driver_error("cuDeviceGetAttribute"))?
            != 0;
        let sms = ctx
            .attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
            .map_err(driver_error("cuDeviceGetAttribute"))?;
        let sm90a = if capability == (9, 0) && !kernels.sm90a.is_empty() {
            Some(Module::load_best(
                &ctx,
                capability,
                kernels.sm90a_cubin,
                kernels.sm90a,
            )?)
        } else {
            None
        };
        let sm90a_get = sm90a
            .as_ref()
            .map(|module| move |name: &str| module.function(name));
        let (sm80, scalar, tensor) = if capability >= (8, 0) {
            let module =
                Module::load_best(&ctx, capability, kernels.sm80_cubin_sm90, kernels.sm80)?;
            let get = |name: &str| module.function(name);
            let scalar = scalar::ScalarKernels::load(
                &get,
                sm90a_get.as_ref().map(|f| f as &scalar::Lookup),
                sms as u32,
            )?;
            let tensor = tensor::TensorKernels::load(&get)?;
            (Some(module), Some(scalar), Some(tensor))
        } else {
            (None, None, None)
        };
        let hopper = match &sm90a_get {
            Some(get) => Some(hopper::HopperKernels::load(get, sms as usize)?),
            None => None,
        };
        Ok(Loaded {
            ctx,
            ordinal,
            capability,
            pageable_memory_access,
            scalar,
            tensor,
            hopper,
            _sm80: sm80,
            _sm90a: sm90a,
        })
    }
}

/// The engine's state on one CUDA device: the device's shared kernels and this engine's
/// choice of tensor-core path.
pub(crate) struct CudaBackend {
    loaded: Arc<Loaded>,
    tc_path: TcPath,
}

impl CudaBackend {
    pub(crate) fn new(
        ordinal: usize,
        kernels: &'static KernelImages,
        tc_path: TcPath,
    ) -> Result<Self> {
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
        let loaded = Loaded::get(ordinal, kernels)?;
        // Creating an engine leaves its context current on the calling thread, loaded now or
        // before (callers allocate right after, as with any CUDA library).
        loaded
            .ctx
            .bind_to_thread()
            .map_err(driver_error("cuCtxSetCurrent"))?;
        Ok(CudaBackend { loaded, tc_path })
    }

    pub(crate) fn context(&self) -> &Arc<CudaContext> {
        &self.loaded.ctx
    }

    pub(crate) fn compute_capability(&self) -> (u32, u32) {
        self.loaded.capability
    }

    /// Why `tier` cannot run here, if it cannot.
    pub(crate) fn tier_unavailable(&self, tier: Tier) -> Option<String> {
        let missing = match tier {
            Tier::Scalar => self.loaded.scalar.is_none(),
            Tier::TensorCores => self.loaded.tensor.is_none(),
        };
        missing.then(|| {
            format!(
                "compute capability {}.{} is older than 8.0, the oldest the {tier} kernels are \
                 built for",
                self.loaded.capability.0, self.loaded.capability.1
            )
        })
    }

    /// Enqueues `g` on `stream`, after checking each pointer's alignment and, when
    /// `check_memory` is set, where each buffer lies (`pointers.rs`).
    ///
    /// # Safety
    /// The pointers of `p` are device pointers of this context valid for the spans `ext`
    /// (`validate::check(g)`), C overlaps no input, and they outlive the work on `stream`, a
    /// stream of this context or null.
    pub(crate) unsafe fn gemm(
        &self,
        g: &Gemm,
        p: &GemmPointers,
        ext: &Extents,
        stream: Stream,
        check_memory: bool,
    ) -> Result<()> {
        check_alignment(g, p)?;
        self.loaded
            .ctx
            .bind_to_thread()
            .map_err(driver_error("cuCtxSetCurrent"))?;
        if check_memory {
            pointers::check(&self.loaded, g, ext, p)?;
        }
        let stream = stream.0 as sys::CUstream;
        const CHECKED: &str = "tier availability is checked before launch";
        // SAFETY (both arms): forwarded contract.
        match g.tier {
            Tier::Scalar => unsafe {
                self.loaded.scalar.as_ref().expect(CHECKED).launch(
                    g,
                    p,
                    stream,
                    self.tc_path == TcPath::Portable,
                )
            },
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
        let forced = matches!(self.tc_path, TcPath::Hopper | TcPath::HopperPingPong);
        let hopper = match (self.tc_path, &self.loaded.hopper) {
            (TcPath::Portable, _) => None,
            (_, Some(h)) => {
                match hopper::can_implement(g, p.a as usize, p.b as usize, p.c as usize) {
                    Ok(()) => Some(h),
                    Err(e) if forced => {
                        return Err(Error::Launch {
                            kernel: "sgemm_bi_hopper_*".into(),
                            message: format!(
                                "forced Hopper path cannot run this call: {}",
                                e.reason
                            ),
                        })
                    }
                    Err(_) => None,
                }
            }
            (TcPath::Hopper | TcPath::HopperPingPong, None) => {
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
            Some(h) => unsafe { h.launch(g, p, stream, self.tc_path == TcPath::HopperPingPong) },
            None => unsafe {
                self.loaded
                    .tensor
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
