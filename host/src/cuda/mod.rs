//! The CUDA backend: one device's primary context, the loaded PTX modules, and launches on
//! the caller's stream. No stream, allocation or synchronization of its own per call, so
//! calls can be captured in CUDA graphs.
//!
//! The modules of a device are loaded once per process and kept until it exits, shared by
//! every engine of that device (`Loaded`): dropping an engine never unloads a kernel that
//! work still queued on a stream, or a captured graph, may run, and creating and dropping
//! engines in a loop neither reloads the PTX nor leaks modules.

mod catalogue;
mod device_errors;
mod grouped;
mod grouped_scalar;
mod hopper;
mod images;
mod kernel_abi;
mod modules;
mod offsets;
mod plan;
mod pointers;
mod relaxed_capture;
mod scalar;
mod tensor;
mod tile_counter;

use std::sync::{Arc, Mutex, PoisonError};

use cudarc::driver::{result, sys, CudaContext};
use device_errors::{EngineRecord, RecordPool};

use crate::error::{Error, Operand as Which, Result};
use crate::grouped::GroupedGemm;
use crate::types::{Gemm, GemmPointers, Stream, Tier};
use crate::validate::Extents;

pub use images::{Compressed, Cubin, KernelImages, ModuleImages};
use modules::ModuleLoader;
pub use modules::{ImageKind, LoadedImage};
use plan::Planner;

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

/// One device's primary context and its kernels, loaded as calls first need them
/// (`modules.rs`): created once per process for each device and set of kernel images, and
/// never dropped (see the module comment).
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
    /// The grouped form of the Hopper kernels; as `hopper`.
    grouped: Option<grouped::GroupedKernels>,
    /// The scalar tier's grouped kernel; as `scalar`.
    grouped_scalar: Option<grouped_scalar::ScalarGroupedKernels>,
    /// The modules the tables' functions come from: `sm80` on sm_80 and newer, `sm90a` on
    /// compute capability 9.0.
    sm80: Option<Arc<ModuleLoader>>,
    sm90a: Option<Arc<ModuleLoader>>,
    /// The grouped kernels' error records that no engine holds (`device_errors.rs`): kept
    /// for the process, as the modules are, since work an engine launched may outlive it.
    records: Arc<RecordPool>,
}

// SAFETY: CUfunction handles are immutable after loading and the CUDA driver API is
// thread-safe; every use binds the context to the calling thread first. The lazily filled
// tables and loaders synchronize their own state (OnceLock, Mutex).
unsafe impl Send for Loaded {}
// SAFETY: as above.
unsafe impl Sync for Loaded {}

/// Every `Loaded` of this process, by device ordinal, kernel images (their address) and
/// whether PTX is forced.
type LoadedKey = (usize, usize, bool);
static LOADED: Mutex<Vec<(LoadedKey, Arc<Loaded>)>> = Mutex::new(Vec::new());

impl Loaded {
    /// The kernels of device `ordinal` (an existing device), set up on first use.
    fn get(ordinal: usize, kernels: &'static KernelImages, force_ptx: bool) -> Result<Arc<Self>> {
        let key = (ordinal, std::ptr::from_ref(kernels) as usize, force_ptx);
        // A panic while setting up leaves the list as it was: its entries are all complete.
        let mut all = LOADED.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((_, l)) = all.iter().find(|e| e.0 == key) {
            return Ok(l.clone());
        }
        let loaded = Arc::new(Self::load(ordinal, kernels, force_ptx)?);
        all.push((key, loaded.clone()));
        Ok(loaded)
    }

    /// Sets up the device's kernel tables; loads no module (each loads with its first
    /// entry point).
    fn load(ordinal: usize, kernels: &'static KernelImages, force_ptx: bool) -> Result<Self> {
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
        let loader = |images: &'static ModuleImages| {
            Arc::new(ModuleLoader::new(&ctx, images, capability, force_ptx))
        };
        let sm90a =
            (capability == (9, 0) && kernels.sm90a.available()).then(|| loader(&kernels.sm90a));
        let sm80 =
            (capability >= (8, 0) && kernels.sm80.available()).then(|| loader(&kernels.sm80));
        let entries = Arc::new(catalogue::Entries::new(
            sm80.clone(),
            sm90a.clone(),
            sms as u32,
        ));
        let scalar = sm80.as_ref().map(|_| scalar::ScalarKernels::new(&entries));
        let tensor = sm80.as_ref().map(|_| tensor::TensorKernels::new(&entries));
        let hopper = sm90a
            .as_ref()
            .map(|_| hopper::HopperKernels::new(&entries, sms as usize));
        let grouped = sm90a
            .as_ref()
            .map(|_| grouped::GroupedKernels::new(&entries, sms as usize, ordinal));
        let grouped_scalar = sm80
            .as_ref()
            .map(|_| grouped_scalar::ScalarGroupedKernels::new(&entries, sms as u32));
        let records = Arc::new(RecordPool::new(&ctx));
        Ok(Loaded {
            ctx,
            ordinal,
            capability,
            pageable_memory_access,
            scalar,
            tensor,
            hopper,
            grouped,
            grouped_scalar,
            sm80,
            sm90a,
            records,
        })
    }

    /// What each module of this device has loaded so far.
    fn loaded_images(&self) -> Vec<LoadedImage> {
        [&self.sm80, &self.sm90a]
            .into_iter()
            .flatten()
            .map(|m| m.loaded_image())
            .collect()
    }
}

/// The engine's state on one CUDA device: the device's shared kernels, this engine's
/// choice of tensor-core path, and where its grouped kernels report bad group ends.
pub(crate) struct CudaBackend {
    loaded: Arc<Loaded>,
    tc_path: TcPath,
    errors: EngineRecord,
}

impl CudaBackend {
    pub(crate) fn new(
        ordinal: usize,
        kernels: &'static KernelImages,
        tc_path: TcPath,
        force_ptx: bool,
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
        let loaded = Loaded::get(ordinal, kernels, force_ptx)?;
        // Creating an engine leaves its context current on the calling thread, loaded now or
        // before (callers allocate right after, as with any CUDA library).
        loaded
            .ctx
            .bind_to_thread()
            .map_err(driver_error("cuCtxSetCurrent"))?;
        let errors = EngineRecord::new(&loaded.records);
        Ok(CudaBackend {
            loaded,
            tc_path,
            errors,
        })
    }

    pub(crate) fn context(&self) -> &Arc<CudaContext> {
        &self.loaded.ctx
    }

    pub(crate) fn compute_capability(&self) -> (u32, u32) {
        self.loaded.capability
    }

    pub(crate) fn loaded_images(&self) -> Vec<LoadedImage> {
        self.loaded.loaded_images()
    }

    /// Why `tier` cannot run here, if it cannot.
    pub(crate) fn tier_unavailable(&self, tier: Tier) -> Option<String> {
        let missing = match tier {
            // `Auto` falls back to the scalar tier (the engine resolves it before a call).
            Tier::Scalar | Tier::Auto => self.loaded.scalar.is_none(),
            Tier::TensorCores => self.loaded.tensor.is_none(),
        };
        let (major, minor) = self.loaded.capability;
        missing.then(|| {
            if (major, minor) >= (8, 0) {
                format!("this engine was created without kernels for the {tier} tier")
            } else {
                format!(
                    "compute capability {major}.{minor} is older than 8.0, the oldest the \
                     {tier} kernels are built for"
                )
            }
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
            // The engine resolves `Auto` before a call reaches a backend; its fallback is the
            // scalar tier.
            Tier::Scalar | Tier::Auto => unsafe {
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

    /// Checks where each buffer of `g` lies (its spans `ext`), as [`CudaBackend::gemm`] does
    /// before a launch with `check_memory` (`pointers.rs`): a grouped call checks its whole
    /// spans once, before its first group runs.
    pub(crate) fn check_memory(&self, g: &Gemm, ext: &Extents, p: &GemmPointers) -> Result<()> {
        self.loaded
            .ctx
            .bind_to_thread()
            .map_err(driver_error("cuCtxSetCurrent"))?;
        pointers::check(&self.loaded, g, ext, p)
    }

    /// How the grouped call `gg` with its ends in device memory runs here: the tensor-core
    /// tier's Hopper grouped kernels (sm_90, see `grouped.rs`), the scalar tier's grouped
    /// kernels for a rows or reduction split (`grouped_scalar.rs`), or group by group after
    /// reading the ends back. Host arithmetic only.
    fn grouped_launch(&self, gg: &GroupedGemm, p: &GemmPointers) -> GroupedLaunch {
        match gg.gemm.tier {
            Tier::TensorCores if self.tc_path != TcPath::Portable => {
                match self.loaded.grouped.as_ref().map(|k| k.plan(gg, p)) {
                    Some(Ok(plan)) => GroupedLaunch::Hopper(plan),
                    _ => GroupedLaunch::ReadBack,
                }
            }
            Tier::TensorCores => GroupedLaunch::ReadBack,
            // The engine resolves `Auto` before a call reaches a backend; its fallback is the
            // scalar tier.
            Tier::Scalar | Tier::Auto => {
                match self.loaded.grouped_scalar.as_ref().map(|k| k.plan(gg)) {
                    Some(Ok(plan)) => GroupedLaunch::Scalar(plan),
                    _ => GroupedLaunch::ReadBack,
                }
            }
        }
    }

    /// Runs the grouped call `gg`, whose group ends are at device address `ends`, as one
    /// grouped kernel that reads them (no wait for them; see `grouped.rs` and
    /// `grouped_scalar.rs`), after the same alignment and memory checks as
    /// [`CudaBackend::gemm`] (and the ends' memory). The kernel clamps a bad end and reports
    /// the first one in this engine's record, which the host sees once the kernel has run
    /// ([`CudaBackend::take_device_error`]). `false` when no grouped kernel takes the call
    /// (nothing was checked or launched: the caller reads the ends and runs the groups one
    /// by one).
    ///
    /// # Safety
    /// As for [`CudaBackend::gemm`] with `whole` (the call over every group) and its `ext`;
    /// `ends` is a device pointer valid for `gg.groups()` `i32`s until the work on `stream`
    /// completes; the call is not empty.
    #[allow(clippy::too_many_arguments)]
    pub(crate) unsafe fn grouped_on_device(
        &self,
        gg: &GroupedGemm,
        whole: &Gemm,
        ends: *const i32,
        p: &GemmPointers,
        ext: &Extents,
        stream: Stream,
        check_memory: bool,
    ) -> Result<bool> {
        let launch = self.grouped_launch(gg, p);
        if launch == GroupedLaunch::ReadBack {
            return Ok(false);
        }
        check_alignment(whole, p)?;
        self.loaded
            .ctx
            .bind_to_thread()
            .map_err(driver_error("cuCtxSetCurrent"))?;
        if check_memory {
            self.check_memory(whole, ext, p)?;
            let bytes = std::mem::size_of::<i32>();
            pointers::check_buffer(
                &self.loaded,
                Which::Offsets,
                ends.cast(),
                gg.groups(),
                bytes,
            )?;
        }
        // The kernel clamps a bad end (it never waits for the ends) and reports the first
        // one in this engine's record, for `take_device_error`.
        let errors = self.errors.device_address()?;
        let stream = stream.0 as sys::CUstream;
        const PLANNED: &str = "a grouped launch is planned only where its kernels are loaded";
        match launch {
            GroupedLaunch::Hopper(plan) => {
                let kernels = self.loaded.grouped.as_ref().expect(PLANNED);
                // SAFETY: the caller's contract; the plan is the kernels' own for this call;
                // the record is valid for the process (`device_errors.rs`).
                unsafe { kernels.launch(&plan, gg, ends, errors, p, stream) }
            }
            GroupedLaunch::Scalar(plan) => {
                let kernels = self.loaded.grouped_scalar.as_ref().expect(PLANNED);
                // SAFETY: as above.
                unsafe { kernels.launch(&plan, gg, ends, errors, p, stream) }
            }
            GroupedLaunch::ReadBack => unreachable!("a read-back call returned above"),
        }?;
        Ok(true)
    }

    /// The bad group end a grouped kernel of this engine reported since the last look, as
    /// [`Error::BadOffsets`], and the report cleared (`device_errors.rs`).
    pub(crate) fn take_device_error(&self) -> Result<()> {
        self.errors.take_error()
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
                let planner = h.planner(self.tc_path == TcPath::HopperPingPong);
                match planner.plan(g, p) {
                    Ok(plan) => Some((planner, plan)),
                    Err(e) if forced => {
                        return Err(Error::Launch {
                            kernel: "sgemm_bi_hopper_*".into(),
                            message: format!("forced Hopper path cannot run this call: {e}"),
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
        // SAFETY (both arms): forwarded contract; each plan is its planner's own.
        match hopper {
            Some((planner, plan)) => unsafe { planner.launch(&plan, g, p, stream) },
            None => {
                let tensor = self
                    .loaded
                    .tensor
                    .as_ref()
                    .expect("tier availability is checked before launch");
                let plan = tensor.plan(g, p).map_err(|e| Error::Launch {
                    kernel: "sgemm_bi_tc_*".into(),
                    message: e.to_string(),
                })?;
                unsafe { tensor.launch(&plan, g, p, stream) }
            }
        }
    }
}

/// How a grouped call whose ends are in device memory runs ([`CudaBackend::grouped_launch`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum GroupedLaunch {
    /// The Hopper grouped kernels (tensor-core tier, sm_90): no wait for the ends.
    Hopper(grouped::GroupedPlan),
    /// The scalar tier's grouped kernels (rows or reduction split): no wait for the ends.
    Scalar(grouped_scalar::ScalarGroupedPlan),
    /// Group by group, after reading the ends back on the call's stream (a wait, which a
    /// CUDA graph capture refuses: `offsets.rs`).
    ReadBack,
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
