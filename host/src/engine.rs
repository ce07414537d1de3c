//! The engine: one device, its loaded kernels, and the entry points every binding uses.
//!
//! A call flows validate → plan → run. Validation rejects bad input before anything is
//! launched; the plan picks a kernel but never the reduction order (that is fixed by the
//! tier); the run enqueues on the caller's stream (CUDA) or computes in place (CPU).

use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::cpu;
use crate::cuda::{CudaBackend, KernelImages, LoadedImage, TcPath};
use crate::error::{Error, Operand as Which, Result};
use crate::grouped::{self, GroupCall, GroupOffsets, GroupedGemm};
use crate::host_slice::{HostSlice, HostSliceMut};
use crate::triad::Linear;
use crate::types::{DType, Device, Gemm, GemmPointers, OutputMode, Stream, Tier};
use crate::validate::{self, Extents};

enum Backend {
    Cpu,
    Cuda(Box<CudaBackend>),
}

/// A GEMM engine bound to one device. `Engine` is `Send + Sync`: one engine may be shared by
/// any number of threads, each call independent of the others (but for one report: a bad
/// group end that a grouped kernel found on the device is returned by the engine's next
/// grouped call, see [`Engine::take_device_error`]).
pub struct Engine {
    device: Device,
    backend: Backend,
    /// Ask the driver where each device pointer points before a launch (CUDA engines; see
    /// [`Engine::set_pointer_checks`]).
    pointer_checks: AtomicBool,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("device", &self.device)
            .finish()
    }
}

impl Engine {
    /// Creates an engine for `device`, loading `kernels` on a CUDA device. Prefer
    /// `sgemm_bi::Engine::new`, which passes the PTX embedded in the library.
    pub fn with_kernels(device: Device, kernels: &'static KernelImages) -> Result<Self> {
        Self::with_kernels_and_tc_path(device, kernels, TcPath::from_env())
    }

    /// As [`Engine::with_kernels`], loading the PTX and never the machine code: what a GPU
    /// without embedded machine code runs (the same kernels, compiled by the driver). For
    /// tests and measurements of that fallback; `SGEMM_BI_FORCE_PTX=1` does the same for
    /// every engine. Not part of the API.
    #[doc(hidden)]
    pub fn with_kernels_from_ptx(device: Device, kernels: &'static KernelImages) -> Result<Self> {
        Self::create(device, kernels, TcPath::from_env(), true)
    }

    /// As [`Engine::with_kernels`], with the tensor-core tier restricted to one path. For
    /// tests that compare the mma.sync and Hopper paths; not part of the API.
    #[doc(hidden)]
    pub fn with_kernels_and_tc_path(
        device: Device,
        kernels: &'static KernelImages,
        tc_path: TcPath,
    ) -> Result<Self> {
        let force_ptx = std::env::var("SGEMM_BI_FORCE_PTX").is_ok_and(|v| v == "1");
        Self::create(device, kernels, tc_path, force_ptx)
    }

    fn create(
        device: Device,
        kernels: &'static KernelImages,
        tc_path: TcPath,
        force_ptx: bool,
    ) -> Result<Self> {
        let backend = match device {
            Device::Cpu => Backend::Cpu,
            Device::Cuda(ordinal) => Backend::Cuda(Box::new(CudaBackend::new(
                ordinal, kernels, tc_path, force_ptx,
            )?)),
        };
        let pointer_checks = !std::env::var("SGEMM_BI_CHECK_POINTERS").is_ok_and(|v| v == "0");
        Ok(Engine {
            device,
            backend,
            pointer_checks: AtomicBool::new(pointer_checks),
        })
    }

    /// Turns the pointer checks of a CUDA engine on or off (on by default; off when
    /// `SGEMM_BI_CHECK_POINTERS=0` is set at creation). With them on, every call asks the
    /// driver (`cuPointerGetAttributes`) where the first and the last element of each buffer
    /// lie, and rejects host memory the device cannot read (ordinary `malloc` or stack memory;
    /// pinned and managed memory are fine), memory of another GPU and addresses the driver
    /// does not know (a freed allocation) with [`Error::InaccessibleMemory`], before
    /// anything is launched: such a pointer would otherwise fault inside a kernel and leave
    /// the CUDA context unusable. The checks cost a few driver calls per GEMM; turn them off
    /// where every pointer is known to be right and the call is small enough for that to
    /// matter. The CPU engine has nothing to check and ignores the setting. Takes effect for
    /// calls that start after it returns; other threads may be calling meanwhile.
    pub fn set_pointer_checks(&self, on: bool) {
        self.pointer_checks.store(on, Ordering::Relaxed);
    }

    /// Whether the pointer checks are on (see [`Engine::set_pointer_checks`]).
    pub fn pointer_checks(&self) -> bool {
        self.pointer_checks.load(Ordering::Relaxed)
    }

    /// The device this engine runs on.
    pub fn device(&self) -> Device {
        self.device
    }

    /// Whether this engine can run `tier` ([`Tier::Auto`]: whenever it runs the scalar tier,
    /// which `Auto` falls back to).
    pub fn supports(&self, tier: Tier) -> bool {
        self.tier_unavailable(tier).is_none()
    }

    /// The tier a call of `tier` with `input` operands runs on this engine: `tier` itself
    /// unless it is [`Tier::Auto`], which is [`Tier::TensorCores`] for bf16 and f16 inputs on
    /// a CUDA engine that runs that tier and [`Tier::Scalar`] otherwise.
    pub fn resolve_tier(&self, tier: Tier, input: DType) -> Tier {
        match tier {
            Tier::Auto => {
                let sixteen_bit = matches!(input, DType::BF16 | DType::F16);
                let cuda = matches!(self.backend, Backend::Cuda(_));
                if sixteen_bit && cuda && self.supports(Tier::TensorCores) {
                    Tier::TensorCores
                } else {
                    Tier::Scalar
                }
            }
            named => named,
        }
    }

    /// `g` with its tier resolved ([`Engine::resolve_tier`]): what the checks and the
    /// backends see.
    fn resolved(&self, g: &Gemm) -> Gemm {
        Gemm {
            tier: self.resolve_tier(g.tier, g.a.dtype),
            ..*g
        }
    }

    /// The CUDA compute capability `(major, minor)`, or `None` on the CPU.
    pub fn compute_capability(&self) -> Option<(u32, u32)> {
        match &self.backend {
            Backend::Cpu => None,
            Backend::Cuda(c) => Some(c.compute_capability()),
        }
    }

    /// Which image of each kernel module this engine's device runs (machine code for its
    /// architecture, or PTX compiled by the driver) and how many entry points it has loaded
    /// so far; empty on the CPU. A device's modules load once per process, with the first
    /// call that needs them, and are shared by all its engines.
    pub fn loaded_images(&self) -> Vec<LoadedImage> {
        match &self.backend {
            Backend::Cpu => Vec::new(),
            Backend::Cuda(c) => c.loaded_images(),
        }
    }

    /// The CUDA context (the device's primary context) that device pointers passed to this
    /// engine must belong to, or `None` on the CPU.
    pub fn cuda_context(&self) -> Option<&std::sync::Arc<cudarc::driver::CudaContext>> {
        match &self.backend {
            Backend::Cpu => None,
            Backend::Cuda(c) => Some(c.context()),
        }
    }

    fn tier_unavailable(&self, tier: Tier) -> Option<String> {
        match (tier, &self.backend) {
            // The tensor-core tier on the CPU is the sm_90 model (cpu/tensor_model): the
            // H200's bits on every measured input (tests/cpu_tc_model.rs, gpu_tc_model.rs).
            (Tier::Scalar | Tier::TensorCores | Tier::Auto, Backend::Cpu) => None,
            (Tier::Auto, Backend::Cuda(c)) => c.tier_unavailable(Tier::Scalar),
            (tier, Backend::Cuda(c)) => c.tier_unavailable(tier),
        }
    }

    fn check(&self, g: &Gemm, p: &GemmPointers) -> Result<Extents> {
        let ext = validate::check(g)?;
        self.check_tier(g.tier)?;
        validate::check_pointers(g, &ext, p)?;
        Ok(ext)
    }

    fn check_tier(&self, tier: Tier) -> Result<()> {
        match self.tier_unavailable(tier) {
            None => Ok(()),
            Some(reason) => Err(Error::TierUnavailable {
                tier,
                device: self.device,
                reason,
            }),
        }
    }

    /// Runs `C[b] = A[b] · B[b] (+ bias)` as `g` describes.
    ///
    /// On a CUDA engine the work is enqueued on `stream` and the call returns without
    /// synchronizing; on the CPU engine it completes before returning and `stream` is ignored.
    ///
    /// Checked before anything runs (each a typed [`Error`]): the descriptor
    /// ([`validate::check`]), the tier, null pointers, C's bytes overlapping an input's
    /// ([`Error::OverlappingOperands`]), and on CUDA the alignment of each pointer and, while
    /// [`Engine::pointer_checks`] is on, that each buffer starts and ends in memory the device
    /// can access ([`Error::InaccessibleMemory`]).
    ///
    /// # Safety
    /// 1. Each pointer of `p` that the call reads or writes is valid for the span `g` gives
    ///    it (see [`validate::check`]): device memory of this engine's context on CUDA, host
    ///    memory on the CPU; `bias` may be null only when `g.bias` is `None`. The library
    ///    cannot see the size of an allocation: the pointer checks catch a wrong kind of
    ///    memory, not a buffer that is too short.
    /// 2. On CUDA, the buffers stay alive until the work on `stream` has completed, and
    ///    `stream` is a valid stream of this engine's context (or null).
    /// 3. On the CPU, no other thread writes A, B or the bias, or touches C, during the call.
    pub unsafe fn gemm(&self, g: &Gemm, p: GemmPointers, stream: Stream) -> Result<()> {
        let g = &self.resolved(g);
        let ext = self.check(g, &p)?;
        // (`gemm_host` needs no such check: its C is a unique borrow.)
        validate::check_overlap(g, &ext, &p)?;
        if ext.is_empty() {
            return Ok(());
        }
        match &self.backend {
            // SAFETY: the caller's contract (1, 3) is what cpu::gemm needs; `ext` is the
            // validated span of each pointer, and C overlaps no input (checked above).
            Backend::Cpu => {
                unsafe { cpu::gemm(g, &p) };
                Ok(())
            }
            // SAFETY: the caller's contract (1, 2) is what launching needs; C overlaps no
            // input (checked above).
            Backend::Cuda(c) => unsafe { c.gemm(g, &p, &ext, stream, self.pointer_checks()) },
        }
    }

    /// Safe form of [`Engine::gemm`] over host slices (CPU engine only). The slices' dtypes
    /// must match the descriptor and be long enough for the spans it describes.
    pub fn gemm_host(
        &self,
        g: &Gemm,
        a: HostSlice<'_>,
        b: HostSlice<'_>,
        bias: Option<HostSlice<'_>>,
        mut c: HostSliceMut<'_>,
    ) -> Result<()> {
        self.require_cpu()?;
        let g = &self.resolved(g);
        let p = GemmPointers {
            a: a.as_ptr(),
            b: b.as_ptr(),
            bias: bias.map_or(std::ptr::null(), |s| s.as_ptr()),
            c: c.as_mut_ptr(),
        };
        let ext = self.check(g, &p)?;
        check_slices(g, &ext, &a, &b, bias.as_ref(), &c)?;
        if ext.is_empty() {
            return Ok(());
        }
        // SAFETY: every span was checked against its slice's length and dtype above; C is a
        // unique borrow, so it overlaps no input, and the borrows outlive the synchronous call.
        unsafe { cpu::gemm(g, &p) };
        Ok(())
    }

    /// Runs the grouped call `g`: each group's dense call ([`GroupedGemm::group`]), so every
    /// output element has the bits of the dense call of its group's part.
    ///
    /// Checked before anything runs, as [`Engine::gemm`] checks a dense call, and the offsets
    /// ([`grouped::check_offsets`]: [`Error::BadOffsets`]). Offsets in device memory run in
    /// one grouped kernel that reads them where one applies, and are read back first
    /// elsewhere (see [`GroupOffsets::Device`]).
    ///
    /// First of all, a bad end that an earlier call's grouped kernel found on the device and
    /// has not been taken yet is returned (and cleared), and this call does not run: see
    /// [`Engine::take_device_error`].
    ///
    /// # Safety
    /// As for [`Engine::gemm`], with the spans of the whole call (the per-group operand
    /// `groups` times); for [`GroupOffsets::Device`], a device pointer to `groups` `i32`s.
    pub unsafe fn grouped_gemm(
        &self,
        g: &GroupedGemm,
        offsets: GroupOffsets<'_>,
        p: GemmPointers,
        stream: Stream,
    ) -> Result<()> {
        self.take_device_error()?;
        let g = &GroupedGemm {
            gemm: self.resolved(&g.gemm),
            ..*g
        };
        let (ext, whole) = g.check()?;
        self.check_tier(whole.tier)?;
        validate::check_pointers(&whole, &ext, &p)?;
        validate::check_overlap(&whole, &ext, &p)?;
        let read;
        let offsets = match (offsets, &self.backend) {
            (GroupOffsets::Host(o), _) => o,
            (GroupOffsets::Device(_), Backend::Cpu) => {
                return Err(Error::WrongDevice(
                    "the CPU engine takes group offsets in host memory".into(),
                ))
            }
            (GroupOffsets::Device(o), Backend::Cuda(c)) => {
                if o.is_null() && g.groups() > 0 {
                    return Err(Error::NullPointer(Which::Offsets));
                }
                if ext.is_empty() {
                    return Ok(());
                }
                // One grouped kernel that reads the ends itself, where one takes the call.
                // SAFETY: the caller's contract; checked above, not empty.
                let launched = unsafe {
                    c.grouped_on_device(g, &whole, o, &p, &ext, stream, self.pointer_checks())
                }?;
                if launched {
                    return Ok(());
                }
                // SAFETY: the caller's contract: `groups` i32s of this context's memory.
                read = unsafe { c.read_offsets(o, g.groups(), stream) }?;
                &read[..]
            }
        };
        grouped::check_offsets(offsets, g.groups(), g.total())?;
        if ext.is_empty() {
            return Ok(());
        }
        // The memory of the whole call, once: the groups' spans lie inside it, and nothing
        // runs unless all of it is usable.
        if let (Backend::Cuda(c), true) = (&self.backend, self.pointer_checks()) {
            c.check_memory(&whole, &ext, &p)?;
        }
        let mut end = 0;
        for (group, start, stop) in grouped::ranges(offsets) {
            // SAFETY: each group's spans lie inside the whole call's, which the caller
            // vouches for and which were checked above (C overlaps no input).
            unsafe { self.run_group(&g.group(group, start, stop), &p, stream) }?;
            end = stop;
        }
        if let Some(rest) = g.cleared(end) {
            // SAFETY: as above: rows or columns of C inside its span.
            unsafe { self.run_group(&rest, &p, stream) }?;
        }
        Ok(())
    }

    /// The bad group end that a grouped kernel of this engine found on the device, if one
    /// did since the last look: [`Error::BadOffsets`] naming the group, the end and the
    /// extent it may not pass, and the report cleared (the next look returns `Ok` unless
    /// another kernel has found one since). `Ok` when there is none, and always on the CPU
    /// engine, which checks every offset before it runs.
    ///
    /// The grouped kernel that takes device offsets ([`GroupOffsets::Device`]) never waits
    /// for them: it clamps a bad end, so it still reads and writes only inside the buffers,
    /// and reports the first bad end of its call when it runs. A look sees the report once
    /// that kernel has run: always after a synchronize of the stream it ran on (or of a
    /// graph that replayed it), perhaps not yet while it is still queued. The engine keeps
    /// one report, the latest, not one per call. Every grouped call looks first
    /// ([`Engine::grouped_gemm`]); dense calls do not, since a bad group end says nothing
    /// about them. One volatile load of host memory when there is nothing to report.
    pub fn take_device_error(&self) -> Result<()> {
        match &self.backend {
            Backend::Cpu => Ok(()),
            Backend::Cuda(c) => c.take_device_error(),
        }
    }

    /// One group's dense call (its memory already checked with the whole call's).
    ///
    /// # Safety
    /// `call`'s spans from `p`'s pointers lie inside buffers that are valid as
    /// [`Engine::gemm`] requires, and C's overlaps no input's.
    unsafe fn run_group(&self, call: &GroupCall, p: &GemmPointers, stream: Stream) -> Result<()> {
        let g = &call.gemm;
        let ext = validate::check(g)?;
        if ext.is_empty() {
            return Ok(());
        }
        // `wrapping_add`: an operand the group does not read (K = 0) may start past its
        // buffer; it is never dereferenced.
        let at = |ptr: *const c_void, elems: usize, dtype: DType| {
            ptr.cast::<u8>().wrapping_add(elems * dtype.size()).cast()
        };
        let q = GemmPointers {
            a: at(p.a, call.a, g.a.dtype),
            b: at(p.b, call.b, g.b.dtype),
            bias: match g.bias {
                Some(d) => at(p.bias, call.bias, d),
                None => std::ptr::null(),
            },
            c: at(p.c, call.c, g.c.mode.dtype()).cast_mut(),
        };
        match &self.backend {
            // SAFETY: forwarded contract; `ext` is this group's validated span.
            Backend::Cpu => {
                unsafe { cpu::gemm(g, &q) };
                Ok(())
            }
            // SAFETY: forwarded contract.
            Backend::Cuda(c) => unsafe { c.gemm(g, &q, &ext, stream, false) },
        }
    }

    /// Safe form of [`Engine::grouped_gemm`] over host slices (CPU engine only), with the
    /// offsets in host memory.
    pub fn grouped_gemm_host(
        &self,
        g: &GroupedGemm,
        offsets: &[i32],
        a: HostSlice<'_>,
        b: HostSlice<'_>,
        bias: Option<HostSlice<'_>>,
        mut c: HostSliceMut<'_>,
    ) -> Result<()> {
        self.require_cpu()?;
        let resolved = GroupedGemm {
            gemm: self.resolved(&g.gemm),
            ..*g
        };
        let (ext, whole) = resolved.check()?;
        check_slices(&whole, &ext, &a, &b, bias.as_ref(), &c)?;
        let p = GemmPointers {
            a: a.as_ptr(),
            b: b.as_ptr(),
            bias: bias.map_or(std::ptr::null(), |s| s.as_ptr()),
            c: c.as_mut_ptr(),
        };
        // SAFETY: every span was checked against its slice's length and dtype; C is a
        // unique borrow, so it overlaps no input; the call is synchronous on the CPU.
        unsafe { self.grouped_gemm(g, GroupOffsets::Host(offsets), p, Stream::DEFAULT) }
    }

    /// Safe form of [`Engine::forward`] over host slices (CPU engine only).
    pub fn forward_host(
        &self,
        l: &Linear,
        x: HostSlice<'_>,
        w: HostSlice<'_>,
        bias: Option<HostSlice<'_>>,
        y: HostSliceMut<'_>,
    ) -> Result<()> {
        self.gemm_host(&l.forward(bias.map(|b| b.dtype())), x, w, bias, y)
            .map_err(|e| e.with_names(FORWARD_NAMES))
    }

    /// Safe form of [`Engine::backward_dw`] over host slices (CPU engine only).
    pub fn backward_dw_host(
        &self,
        l: &Linear,
        dy: HostSlice<'_>,
        x: HostSlice<'_>,
        dw: HostSliceMut<'_>,
        mode: OutputMode,
    ) -> Result<()> {
        let (a, b) = l.dw_operands(dy, x);
        self.gemm_host(&l.backward_dw(mode), a, b, None, dw)
            .map_err(|e| e.with_names(dw_names(l)))
    }

    /// Safe form of [`Engine::backward_dx`] over host slices (CPU engine only).
    pub fn backward_dx_host(
        &self,
        l: &Linear,
        dy: HostSlice<'_>,
        w: HostSlice<'_>,
        dx: HostSliceMut<'_>,
    ) -> Result<()> {
        self.gemm_host(&l.backward_dx(), dy, w, None, dx)
            .map_err(|e| e.with_names(DX_NAMES))
    }

    /// `Y = X·W (+ bias)` for the layer `l` (see [`Linear::forward`]).
    ///
    /// # Safety
    /// As for [`Engine::gemm`], with X `[M,K]`, W as `l.weight` says, bias `[N]` and Y
    /// `[M,N]`.
    pub unsafe fn forward(
        &self,
        l: &Linear,
        x: *const c_void,
        w: *const c_void,
        bias: Option<(*const c_void, DType)>,
        y: *mut c_void,
        stream: Stream,
    ) -> Result<()> {
        let g = l.forward(bias.map(|b| b.1));
        let p = GemmPointers {
            a: x,
            b: w,
            bias: bias.map_or(std::ptr::null(), |b| b.0),
            c: y,
        };
        // SAFETY: forwarded contract.
        unsafe { self.gemm(&g, p, stream) }.map_err(|e| e.with_names(FORWARD_NAMES))
    }

    /// `dW (+)= Xᵀ·dY` for the layer `l` (see [`Linear::backward_dw`]).
    ///
    /// # Safety
    /// As for [`Engine::gemm`], with dY `[M,N]`, X `[M,K]` and dW in W's layout.
    pub unsafe fn backward_dw(
        &self,
        l: &Linear,
        dy: *const c_void,
        x: *const c_void,
        dw: *mut c_void,
        mode: OutputMode,
        stream: Stream,
    ) -> Result<()> {
        let g = l.backward_dw(mode);
        let (a, b) = l.dw_operands(dy, x);
        let p = GemmPointers {
            a,
            b,
            bias: std::ptr::null(),
            c: dw,
        };
        // SAFETY: forwarded contract.
        unsafe { self.gemm(&g, p, stream) }.map_err(|e| e.with_names(dw_names(l)))
    }

    /// `dX = dY·Wᵀ` for the layer `l` (see [`Linear::backward_dx`]).
    ///
    /// # Safety
    /// As for [`Engine::gemm`], with dY `[M,N]`, W as `l.weight` says and dX `[M,K]`.
    pub unsafe fn backward_dx(
        &self,
        l: &Linear,
        dy: *const c_void,
        w: *const c_void,
        dx: *mut c_void,
        stream: Stream,
    ) -> Result<()> {
        let g = l.backward_dx();
        let p = GemmPointers {
            a: dy,
            b: w,
            bias: std::ptr::null(),
            c: dx,
        };
        // SAFETY: forwarded contract.
        unsafe { self.gemm(&g, p, stream) }.map_err(|e| e.with_names(DX_NAMES))
    }
}

impl Engine {
    fn require_cpu(&self) -> Result<()> {
        match self.backend {
            Backend::Cpu => Ok(()),
            Backend::Cuda(_) => Err(Error::WrongDevice(format!(
                "host slices need the CPU engine; this engine runs on {} (use Engine::gemm with \
                 device pointers)",
                self.device
            ))),
        }
    }
}

/// Checks that each host slice has the descriptor's dtype and holds the span `ext` gives it.
fn check_slices(
    g: &Gemm,
    ext: &Extents,
    a: &HostSlice<'_>,
    b: &HostSlice<'_>,
    bias: Option<&HostSlice<'_>>,
    c: &HostSliceMut<'_>,
) -> Result<()> {
    let fits = |which, dtype: DType, given: DType, len: usize, needed: usize| {
        if given != dtype {
            Err(Error::DtypeMismatch {
                operand: which,
                given,
                expected: dtype,
            })
        } else if len < needed {
            Err(Error::BufferTooSmall {
                operand: which,
                dtype,
                len,
                needed,
            })
        } else {
            Ok(())
        }
    };
    fits(Which::A, g.a.dtype, a.dtype(), a.len(), ext.a)?;
    fits(Which::B, g.b.dtype, b.dtype(), b.len(), ext.b)?;
    if let (Some(d), Some(s)) = (g.bias, bias) {
        fits(Which::Bias, d, s.dtype(), s.len(), ext.bias)?;
    }
    fits(Which::C, g.c.mode.dtype(), c.dtype(), c.len(), ext.c)?;
    Ok(())
}

/// What the forward's GEMM operands A, B and C are to its caller: an error names the buffer
/// as the caller passed it (`x`, `w`, `y`), not by its role in the GEMM.
const FORWARD_NAMES: [Which; 3] = [Which::X, Which::W, Which::Y];
/// The same for the input gradient: `dX = dY·Wᵀ`.
const DX_NAMES: [Which; 3] = [Which::Dy, Which::W, Which::Dx];

/// The same for the weight gradient, whose A and B depend on the weight layout
/// ([`Linear::dw_operands`]).
fn dw_names(l: &Linear) -> [Which; 3] {
    let (a, b) = l.dw_operands(Which::Dy, Which::X);
    [a, b, Which::Dw]
}
