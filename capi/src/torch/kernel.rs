//! The native kernels of `aten::mm` and `aten::bmm` on torch's CPU and CUDA keys: a call the
//! engine takes runs on it with no Python in between, on the device's current torch stream;
//! any other call goes to torch's own kernel of that device (`at::cpu::mm`,
//! `at::cuda::bmm`, ..., called directly, not through the dispatcher, so it cannot come back
//! here), whose checks and errors are torch's, unchanged.

use std::ffi::{c_void, CStr};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::OnceLock;

use sgemm_bi::{
    DType, Device, Engine, Gemm, GemmPointers, Layout, Operand, Output, OutputMode, Stream, Tier,
};

use super::shim::{CudaShim, ReturnedTensor, Shim, TensorHandle, TorchMatmul};
use super::throw::Thrower;

/// The CUDA devices a process may route (torch's device indices); a call on a device past
/// them goes to torch's kernel.
const MAX_CUDA_DEVICES: usize = 64;

/// The dispatch key a kernel is registered on.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Key {
    Cpu,
    Cuda,
}

/// What the kernels need, resolved when they are first installed and kept for the process
/// (a call may be running on another thread when they are uninstalled).
pub struct Natives {
    pub shim: Shim,
    /// torch's CUDA functions, where torch has CUDA.
    pub cuda: Option<CudaShim>,
    pub thrower: Thrower,
    dtypes: [(i32, DType); 3],
    cpu: i32,
    cuda_type: i32,
    cpu_engine: OnceLock<Result<Engine, String>>,
    cuda_engines: [OnceLock<Result<Engine, String>>; MAX_CUDA_DEVICES],
}

pub static NATIVES: OnceLock<Natives> = OnceLock::new();

/// The tier of routed calls: 0 auto, 1 scalar, 2 tensor cores (`sgemm_bi_tier` + auto).
pub static TIER: AtomicU32 = AtomicU32::new(0);

/// Calls the kernels ran on the engine (for tests that count what the mode routed).
pub static ENGINE_CALLS: AtomicU64 = AtomicU64::new(0);

impl Natives {
    pub fn new(shim: Shim, cuda: Option<CudaShim>, thrower: Thrower) -> Self {
        // SAFETY: the dtype and device-type functions take nothing and return a constant.
        let (f32_, bf16_, f16_, cpu, cuda_type) = unsafe {
            (
                (shim.aoti_torch_dtype_float32)(),
                (shim.aoti_torch_dtype_bfloat16)(),
                (shim.aoti_torch_dtype_float16)(),
                (shim.aoti_torch_device_type_cpu)(),
                (shim.aoti_torch_device_type_cuda)(),
            )
        };
        Natives {
            shim,
            cuda,
            thrower,
            dtypes: [(f32_, DType::F32), (bf16_, DType::BF16), (f16_, DType::F16)],
            cpu,
            cuda_type,
            cpu_engine: OnceLock::new(),
            cuda_engines: [const { OnceLock::new() }; MAX_CUDA_DEVICES],
        }
    }

    /// The engine of a device, made on its first routed call.
    fn engine(&self, key: Key, index: usize) -> Result<&Engine, String> {
        let cell = match key {
            Key::Cpu => &self.cpu_engine,
            Key::Cuda => &self.cuda_engines[index],
        };
        cell.get_or_init(|| {
            let device = match key {
                Key::Cpu => Device::Cpu,
                Key::Cuda => Device::Cuda(index),
            };
            let engine = Engine::new(device).map_err(|e| e.to_string())?;
            // Every pointer these kernels pass is the data of a live torch tensor of this
            // very device (checked per call), allocated by torch for it, with the extents
            // its sizes and strides describe: the driver queries of the pointer checks
            // could only confirm that, at a few microseconds a call (torch's own kernels
            // launch on the same pointers with no check).
            engine.set_pointer_checks(false);
            Ok(engine)
        })
        .as_ref()
        .map_err(Clone::clone)
    }

    /// torch's message for a shim call that failed.
    fn torch_error(&self, what: &str) -> String {
        let detail = self.shim.last_error.and_then(|f| {
            // SAFETY: the function returns NULL or a NUL-terminated string valid until the
            // next error on this thread; it is copied at once.
            let p = unsafe { f() };
            (!p.is_null()).then(|| unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
        });
        detail.unwrap_or_else(|| format!("{what} failed in torch (its message is on stderr)"))
    }

    /// Deletes a tensor handle the kernel owns.
    pub fn delete(&self, t: TensorHandle) {
        // SAFETY: `t` is an owned handle, deleted once.
        unsafe { (self.shim.aoti_torch_delete_tensor_object)(t) };
    }
}

/// What a kernel reads of a tensor: its sizes and strides borrowed from torch (no copy on
/// the hot path), valid while the tensor's handle is held and the tensor is not resized.
struct View<'t> {
    dtype: i32,
    device_type: i32,
    device_index: i32,
    sizes: &'t [i64],
    strides: &'t [i64],
    data: *mut c_void,
}

impl Natives {
    /// # Safety
    /// `t` is a live handle that outlives `'t`, and nothing resizes its tensor meanwhile
    /// (the kernel holds its arguments' handles and its own copies until it returns).
    unsafe fn view<'t>(&self, t: TensorHandle) -> Result<View<'t>, String> {
        let s = &self.shim;
        let (mut dtype, mut device_type, mut device_index, mut dim) = (0, 0, 0, 0i64);
        let (mut sizes, mut strides, mut data) = (
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
        );
        // SAFETY: `t` is a live tensor handle; each call writes its out-parameter; sizes and
        // strides point at `dim` elements owned by the tensor, borrowed for `'t` (contract).
        unsafe {
            let ok = (s.aoti_torch_get_dtype)(t, &mut dtype) == 0
                && (s.aoti_torch_get_device_type)(t, &mut device_type) == 0
                && (s.aoti_torch_get_device_index)(t, &mut device_index) == 0
                && (s.aoti_torch_get_dim)(t, &mut dim) == 0
                && (s.aoti_torch_get_sizes)(t, &mut sizes) == 0
                && (s.aoti_torch_get_strides)(t, &mut strides) == 0
                && (s.aoti_torch_get_data_ptr)(t, &mut data) == 0;
            if !ok {
                return Err(self.torch_error("reading a tensor"));
            }
            let n = dim as usize;
            Ok(View {
                dtype,
                device_type,
                device_index,
                sizes: std::slice::from_raw_parts(sizes, n),
                strides: std::slice::from_raw_parts(strides, n),
                data,
            })
        }
    }

    /// A contiguous copy of `t`, held in `owned` (which the caller deletes).
    ///
    /// # Safety
    /// `t` is live.
    fn copy<'t>(&self, t: TensorHandle, owned: &mut Vec<TensorHandle>) -> Result<View<'t>, String> {
        let mut c = std::ptr::null_mut();
        // SAFETY: `t` is live; `c` receives a new handle, which `owned` keeps.
        if unsafe { (self.shim.aoti_torch_clone)(t, &mut c) } != 0 {
            return Err(self.torch_error("copying an operand"));
        }
        owned.push(c);
        // SAFETY: `c` is held in `owned` until the caller deletes it, after its last use.
        unsafe { self.view(c) }
    }

    /// A new contiguous tensor of `sizes` (at most `MAX_DIMS` dimensions) on a tensor's
    /// device.
    fn empty(&self, sizes: &[i64], like: &View) -> Result<TensorHandle, String> {
        let mut strides = [1i64; MAX_DIMS];
        let strides = &mut strides[..sizes.len()];
        for i in (0..sizes.len().saturating_sub(1)).rev() {
            strides[i] = strides[i + 1] * sizes[i + 1].max(1);
        }
        let mut out = std::ptr::null_mut();
        // SAFETY: sizes and strides hold ndim elements; `out` receives a new handle.
        let rc = unsafe {
            (self.shim.aoti_torch_empty_strided)(
                sizes.len() as i64,
                sizes.as_ptr(),
                strides.as_ptr(),
                like.dtype,
                like.device_type,
                like.device_index.max(0),
                &mut out,
            )
        };
        if rc != 0 {
            return Err(self.torch_error("allocating the result"));
        }
        Ok(out)
    }

    /// The engine's plan of a call when it takes it; None for a call that is torch's
    /// (another dtype or device, mixed dtypes, shapes that do not multiply, a bias that is
    /// not an `[n]` vector of the operands' dtype (or f32 for `Matmul`) and device).
    fn plan<'v>(
        &self,
        call: &Call,
        (va, vb): (&'v View<'v>, &'v View<'v>),
        vbias: Option<&'v View<'v>>,
        key: Key,
    ) -> Option<Planned<'v>> {
        let dt = self.dtypes.iter().find(|d| d.0 == va.dtype).map(|d| d.1)?;
        let device_type = match key {
            Key::Cpu => self.cpu,
            Key::Cuda => self.cuda_type,
        };
        let one_device = va.device_type == device_type
            && vb.device_type == device_type
            && va.device_index == vb.device_index
            && (key == Key::Cpu || (0..MAX_CUDA_DEVICES as i32).contains(&va.device_index));
        if !one_device || vb.dtype != va.dtype {
            return None;
        }
        let (sa, sb) = (va.sizes, vb.sizes);
        let mut shape = [0i64; MAX_DIMS];
        let planned = match call.kind {
            Kind::Mm | Kind::Bmm => {
                let dims = if matches!(call.kind, Kind::Mm) { 2 } else { 3 };
                let multiplies = sa.len() == dims
                    && sb.len() == dims
                    && sa[dims - 1] == sb[dims - 2]
                    && (dims == 2 || sa[0] == sb[0]);
                if !multiplies {
                    return None;
                }
                let (m, k, n) = (sa[dims - 2], sa[dims - 1], sb[dims - 1]);
                let batch = if dims == 3 { sa[0] } else { 1 };
                shape[..dims].copy_from_slice(&[batch, m, n][3 - dims..]);
                Planned {
                    m,
                    k,
                    n,
                    batch,
                    a: Side::new(va, dims, false),
                    b: Side::new(vb, dims, false),
                    dims,
                    shape,
                    bias: None,
                    dt,
                }
            }
            Kind::Matmul { weight } => {
                // `a` is `[..., K]`, read as its rows: any layout in 2-D, contiguous otherwise
                // (one row in 1-D); `b` is `[K, N]`, or the weight `[N, K]` read transposed.
                let d = sa.len();
                if d == 0 || d > MAX_DIMS || sb.len() != 2 {
                    return None;
                }
                let k = sa[d - 1];
                let (bk, n) = if weight {
                    (sb[1], sb[0])
                } else {
                    (sb[0], sb[1])
                };
                if bk != k || (d != 2 && !contiguous(va)) {
                    return None;
                }
                let m = sa[..d - 1].iter().product::<i64>();
                shape[..d - 1].copy_from_slice(&sa[..d - 1]);
                shape[d - 1] = n;
                let a = if d == 2 {
                    Side::new(va, 2, false)
                } else {
                    Side::rows(va)
                };
                Planned {
                    m,
                    k,
                    n,
                    batch: 1,
                    a,
                    b: Side::new(vb, 2, weight),
                    dims: d,
                    shape,
                    bias: None,
                    dt,
                }
            }
        };
        let bias = match vbias {
            None => None,
            Some(v) => {
                let bias_dt = if v.dtype == va.dtype {
                    dt
                } else if matches!(call.kind, Kind::Matmul { .. }) && v.dtype == self.dtypes[0].0 {
                    DType::F32
                } else {
                    return None;
                };
                let fits = v.sizes == [planned.n]
                    && v.device_type == va.device_type
                    && v.device_index == va.device_index;
                if !fits {
                    return None;
                }
                Some((v, bias_dt))
            }
        };
        Some(Planned { bias, ..planned })
    }

    /// Runs a call on the engine when it takes it: a new handle, or None for a call that is
    /// torch's (see [`Natives::plan`]).
    ///
    /// # Safety
    /// The call's handles are live, and the caller holds them until this returns.
    pub unsafe fn take(&self, call: &Call, key: Key) -> Result<Option<TensorHandle>, String> {
        // SAFETY: the contract: the handles outlive this call.
        let (va, vb) = unsafe { (self.view(call.a)?, self.view(call.b)?) };
        // SAFETY: as above.
        let vbias = match call.bias {
            Some(t) => Some(unsafe { self.view(t)? }),
            None => None,
        };
        match self.plan(call, (&va, &vb), vbias.as_ref(), key) {
            Some(p) => self.on_engine(call, &p, key).map(Some),
            None => Ok(None),
        }
    }

    /// torch's own kernel of `aten::mm` (`dims` 2) or `aten::bmm` (3) on `key`: a new
    /// handle. May unwind with torch's C++ exception (its checks), which must reach torch:
    /// never call it inside `catch_unwind`.
    ///
    /// # Safety
    /// As for [`Natives::take`]; `key` is Cuda only when `self.cuda` is set.
    pub unsafe fn torch_kernel(
        &self,
        a: TensorHandle,
        b: TensorHandle,
        dims: usize,
        key: Key,
    ) -> Result<TensorHandle, String> {
        let f: TorchMatmul = match (key, &self.cuda) {
            (Key::Cpu, _) => [self.shim.cpu_mm, self.shim.cpu_bmm][dims - 2],
            (Key::Cuda, Some(c)) => [c.mm, c.bmm][dims - 2],
            (Key::Cuda, None) => unreachable!("CUDA kernels are registered only with its shim"),
        };
        // SAFETY: torch's kernel takes two `const at::Tensor&`, which live handles are.
        let mut returned: ReturnedTensor = unsafe { f(a, b) };
        // `returned` holds the result as a C++ object only Rust owns: a new handle shares it,
        // then the object is assigned an undefined tensor (torch's own assignment releases
        // its reference), so nothing leaks and nothing is released twice.
        let slot = std::ptr::from_mut(&mut returned.tensor).cast::<c_void>();
        let (mut out, mut undefined) = (std::ptr::null_mut(), std::ptr::null_mut());
        // SAFETY: `slot` is the address of a live `at::Tensor`, which is what a handle is;
        // `undefined` is a new handle, deleted once.
        unsafe {
            if (self.shim.aoti_torch_new_tensor_handle)(slot, &mut out) != 0
                || (self.shim.aoti_torch_new_uninitialized_tensor)(&mut undefined) != 0
                || (self.shim.aoti_torch_assign_tensors)(undefined, slot) != 0
            {
                return Err(self.torch_error("taking torch's result"));
            }
            (self.shim.aoti_torch_delete_tensor_object)(undefined);
        }
        Ok(out)
    }

    /// An operand as the engine reads it: in place when its strides fit a layout, else a
    /// contiguous copy (held in `owned`; on a GPU made on the current stream, so freeing it
    /// after the launch is stream-ordered).
    fn operand(
        &self,
        side: &Side,
        (rows, cols): (i64, i64),
        dt: DType,
        owned: &mut Vec<TensorHandle>,
    ) -> Result<(Operand, *mut c_void), String> {
        if let Some(op) = side.layout(rows, cols, dt) {
            return Ok((op, side.view.data));
        }
        let handle = side.handle.ok_or("an operand without its handle")?;
        let copy = self.copy(handle, owned)?;
        let side = Side {
            view: &copy,
            ..*side
        };
        let op = side.layout(rows, cols, dt).ok_or("a copy with no layout")?;
        Ok((op, copy.data))
    }

    fn on_engine(&self, call: &Call, p: &Planned, key: Key) -> Result<TensorHandle, String> {
        let va = p.a.view;
        let index = va.device_index.max(0) as usize;
        let engine = self.engine(key, index)?;
        let stream = match (key, &self.cuda) {
            (Key::Cpu, _) => std::ptr::null_mut(),
            (Key::Cuda, Some(c)) => {
                let mut s = std::ptr::null_mut();
                // SAFETY: `index` is a CUDA device of torch's (the tensors are on it).
                if unsafe { (c.current_stream)(index as i32, &mut s) } != 0 {
                    return Err(self.torch_error("reading the current CUDA stream"));
                }
                s
            }
            (Key::Cuda, None) => unreachable!("CUDA kernels are registered only with its shim"),
        };
        let tier = match (
            call.tier.unwrap_or_else(|| TIER.load(Ordering::Relaxed)),
            key,
        ) {
            (1, _) => Tier::Scalar,
            (2, _) => Tier::TensorCores,
            // auto: the engine's policy, the one every caller gets.
            _ => engine.resolve_tier(Tier::Auto, p.dt),
        };
        let (m, k, n) = (p.m, p.k, p.n);
        let mut owned = Vec::new();
        let mut run = || -> Result<TensorHandle, String> {
            let (ao, ap) = self.operand(&p.a.with(call.a), (m, k), p.dt, &mut owned)?;
            let (bo, bp) = self.operand(&p.b.with(call.b), (k, n), p.dt, &mut owned)?;
            // The engine reads the bias as `n` consecutive elements.
            let bias = match (p.bias, call.bias) {
                (Some((v, _)), _) if n <= 1 || v.strides[0] == 1 => v.data.cast_const(),
                (Some(_), Some(t)) => self.copy(t, &mut owned)?.data.cast_const(),
                _ => std::ptr::null(),
            };
            let out = self.empty(&p.shape[..p.dims], va)?;
            let mut data = std::ptr::null_mut();
            // SAFETY: `out` is live.
            unsafe { (self.shim.aoti_torch_get_data_ptr)(out, &mut data) };
            let g = Gemm {
                m: m as usize,
                n: n as usize,
                k: k as usize,
                batch: p.batch as usize,
                a: ao,
                b: bo,
                bias: p.bias.map(|(_, dt)| dt),
                c: Output {
                    mode: OutputMode::Overwrite(p.dt),
                    ldc: (n as usize).max(1),
                    batch_stride: if p.batch > 1 { (m * n) as usize } else { 0 },
                },
                tier,
            };
            let pointers = GemmPointers {
                a: ap,
                b: bp,
                bias,
                c: data,
            };
            // SAFETY: the pointers are the data of tensors on the engine's device, valid
            // for the extents of their sizes and strides (the descriptor is built from
            // them); `out` is fresh, so C overlaps no input; nothing else writes them during
            // the call (torch holds the arguments; on a GPU the launch is ordered on
            // torch's current stream, like torch's own kernel's; the CPU engine completes
            // before returning).
            match unsafe { engine.gemm(&g, pointers, Stream(stream)) } {
                Ok(()) => Ok(out),
                Err(e) => {
                    self.delete(out);
                    Err(e.to_string())
                }
            }
        };
        let r = run();
        if r.is_ok() {
            ENGINE_CALLS.fetch_add(1, Ordering::Relaxed);
        }
        for c in owned {
            self.delete(c);
        }
        r
    }
}

/// The most dimensions of a `sgemm_bi::matmul` operand `a` (and its result).
const MAX_DIMS: usize = 8;

/// Whether a view's elements are laid out contiguously in its order (size-1 dimensions may
/// have any stride), which lets `[..., K]` be read as `[rows, K]` rows.
fn contiguous(v: &View) -> bool {
    let mut expected = 1;
    for (&size, &stride) in v.sizes.iter().zip(v.strides).rev() {
        if size != 1 && stride != expected {
            return false;
        }
        expected *= size;
    }
    true
}

/// What a kernel computes.
#[derive(Clone, Copy)]
pub enum Kind {
    /// `aten::mm(self, mat2)`.
    Mm,
    /// `aten::bmm(self, mat2)`.
    Bmm,
    /// `sgemm_bi::matmul` / `matmul_bias`: `a @ b (+ bias)` of `a` `[..., K]` and `b`
    /// `[K, N]`, or with `weight` `b` the `[N, K]` weight of `F.linear` read transposed.
    Matmul { weight: bool },
}

/// One call's arguments (their handles are the kernel's, deleted by it).
pub struct Call {
    pub kind: Kind,
    pub a: TensorHandle,
    pub b: TensorHandle,
    pub bias: Option<TensorHandle>,
    /// The call's own tier (`sgemm_bi_tier` + auto); None: the mode's (`TIER`).
    pub tier: Option<u32>,
}

/// How an operand's matrices are read from its view.
#[derive(Clone, Copy)]
struct Side<'v> {
    view: &'v View<'v>,
    /// The handle the view is of (set for the copy of a matrix that fits no layout).
    handle: Option<TensorHandle>,
    /// The matrices are the last two dimensions of a `dims`-D view.
    dims: usize,
    /// Read transposed (a weight `[N, K]` as the `[K, N]` operand).
    transposed: bool,
    /// The view's `[..., K]` read as `rows × K` contiguous rows.
    flat_rows: bool,
}

impl<'v> Side<'v> {
    fn new(view: &'v View<'v>, dims: usize, transposed: bool) -> Self {
        Side {
            view,
            handle: None,
            dims,
            transposed,
            flat_rows: false,
        }
    }

    fn rows(view: &'v View<'v>) -> Self {
        Side {
            flat_rows: true,
            ..Side::new(view, view.sizes.len(), false)
        }
    }

    fn with(&self, handle: TensorHandle) -> Self {
        Side {
            handle: Some(handle),
            ..*self
        }
    }

    /// The operand of `rows × cols` matrices when the strides lay them out row- or
    /// column-major with a valid leading dimension; the batch stride from the first
    /// dimension of a 3-D view.
    fn layout(&self, rows: i64, cols: i64, dtype: DType) -> Option<Operand> {
        let v = self.view;
        if self.flat_rows {
            // Contiguous rows (checked when planned): row-major, ld = K.
            return Some(Operand {
                dtype,
                layout: Layout::RowMajor,
                ld: cols.max(1) as usize,
                batch_stride: 0,
            });
        }
        let d = self.dims;
        let (sr, sc) = if self.transposed {
            (v.strides[d - 1], v.strides[d - 2])
        } else {
            (v.strides[d - 2], v.strides[d - 1])
        };
        let batch_stride = if d == 3 && v.sizes[0] > 1 {
            v.strides[0]
        } else {
            0
        };
        if batch_stride < 0 {
            return None;
        }
        let (layout, ld) = if rows == 0 || cols == 0 {
            (Layout::RowMajor, cols.max(1))
        } else if (cols == 1 || sc == 1) && (rows == 1 || sr >= cols) {
            (Layout::RowMajor, if rows > 1 { sr } else { cols })
        } else if (rows == 1 || sr == 1) && (cols == 1 || sc >= rows) {
            (Layout::ColMajor, if cols > 1 { sc } else { rows })
        } else {
            return None;
        };
        Some(Operand {
            dtype,
            layout,
            ld: ld as usize,
            batch_stride: batch_stride as usize,
        })
    }
}

/// A call as the engine runs it.
struct Planned<'v> {
    m: i64,
    k: i64,
    n: i64,
    batch: i64,
    a: Side<'v>,
    b: Side<'v>,
    /// The result's dimensions (`shape[..dims]`).
    dims: usize,
    shape: [i64; MAX_DIMS],
    bias: Option<(&'v View<'v>, DType)>,
    dt: DType,
}

/// The arguments' handles, deleted when the kernel is done with them — also when torch's
/// kernel unwinds through it with an exception (Rust runs destructors of the frames a C++
/// exception passes through an `extern "C-unwind"` function).
struct Arguments<'n> {
    natives: &'n Natives,
    handles: [TensorHandle; 3],
    count: usize,
}

impl Drop for Arguments<'_> {
    fn drop(&mut self) {
        for &h in &self.handles[..self.count] {
            self.natives.delete(h);
        }
    }
}

/// The operator a kernel is registered for.
#[derive(Clone, Copy)]
enum Op {
    /// `aten::mm(Tensor self, Tensor mat2)`.
    Mm,
    /// `aten::bmm(Tensor self, Tensor mat2)`.
    Bmm,
    /// `sgemm_bi::matmul(Tensor a, Tensor b, int tier, bool weight)`.
    Matmul,
    /// `sgemm_bi::matmul_bias(Tensor a, Tensor b, Tensor bias, int tier, bool weight)`.
    MatmulBias,
}

/// The body of every boxed kernel.
///
/// # Safety
/// torch's boxed-kernel contract: `stack` holds the arguments of `op`'s schema (tensors as
/// owned handles, an int as an `i64`, a bool in the low byte) and receives the result's
/// handle; the kernels are registered only after `NATIVES` is set.
unsafe fn boxed(stack: *mut u64, op: Op, key: Key) {
    let natives = NATIVES.get().expect("registered only after NATIVES is set");
    let tensors = match op {
        Op::MatmulBias => 3,
        _ => 2,
    };
    let mut handles = [std::ptr::null_mut(); 3];
    for (i, h) in handles[..tensors].iter_mut().enumerate() {
        // SAFETY: the contract: `tensors` owned handles first on the stack.
        *h = unsafe { *stack.add(i) } as TensorHandle;
    }
    let args = Arguments {
        natives,
        handles,
        count: tensors,
    };
    let call = match op {
        Op::Mm | Op::Bmm => Call {
            kind: if matches!(op, Op::Mm) {
                Kind::Mm
            } else {
                Kind::Bmm
            },
            a: handles[0],
            b: handles[1],
            bias: None,
            tier: None,
        },
        Op::Matmul | Op::MatmulBias => {
            // SAFETY: the contract: the int and the bool follow the tensors.
            let (tier, weight) = unsafe { (*stack.add(tensors), *stack.add(tensors + 1)) };
            Call {
                kind: Kind::Matmul {
                    weight: weight & 0xff != 0,
                },
                a: handles[0],
                b: handles[1],
                bias: (tensors == 3).then_some(handles[2]),
                tier: Some(tier.min(3) as u32),
            }
        }
    };
    // SAFETY: the handles are deleted only after the calls (by `args`).
    let taken = catch_unwind(AssertUnwindSafe(|| unsafe { natives.take(&call, key) }));
    let result = match (taken, call.kind) {
        (Ok(Ok(Some(out))), _) => Ok(out),
        // Outside catch_unwind: torch's exception must pass through to torch.
        // SAFETY: as above.
        (Ok(Ok(None)), Kind::Mm) => unsafe { natives.torch_kernel(call.a, call.b, 2, key) },
        // SAFETY: as above.
        (Ok(Ok(None)), Kind::Bmm) => unsafe { natives.torch_kernel(call.a, call.b, 3, key) },
        (Ok(Ok(None)), Kind::Matmul { .. }) => {
            Err("sgemm_bi::matmul takes a [..., K] (contiguous \
            unless 2-D) and a [K, N] or weight [N, K] of one engine dtype \
            and device, and an [N] bias of that dtype or float32"
                .to_owned())
        }
        (Ok(Err(message)), _) => Err(message),
        (Err(_), _) => Err("sgemm_bi: a panic in a native kernel".to_owned()),
    };
    drop(args);
    match result {
        // SAFETY: the contract: the result goes in the first slot.
        Ok(out) => unsafe { *stack = out as u64 },
        // SAFETY: C++ called this function; nothing of it is left to drop.
        Err(message) => unsafe { natives.thrower.throw(&message) },
    }
}

macro_rules! kernel {
    ($name:ident, $op:expr, $key:expr) => {
        /// A boxed kernel torch calls.
        ///
        /// # Safety
        /// torch's boxed-kernel contract (see `boxed`).
        pub unsafe extern "C-unwind" fn $name(stack: *mut u64, _args: u64, _results: u64) {
            // SAFETY: the same contract.
            unsafe { boxed(stack, $op, $key) }
        }
    };
}

kernel!(mm_cpu, Op::Mm, Key::Cpu);
kernel!(bmm_cpu, Op::Bmm, Key::Cpu);
kernel!(matmul_cpu, Op::Matmul, Key::Cpu);
kernel!(matmul_bias_cpu, Op::MatmulBias, Key::Cpu);
kernel!(mm_cuda, Op::Mm, Key::Cuda);
kernel!(bmm_cuda, Op::Bmm, Key::Cuda);
kernel!(matmul_cuda, Op::Matmul, Key::Cuda);
kernel!(matmul_bias_cuda, Op::MatmulBias, Key::Cuda);

#[cfg(test)]
mod tests {
    use super::*;

    fn view<'t>(sizes: &'t [i64], strides: &'t [i64]) -> View<'t> {
        View {
            dtype: 0,
            device_type: 0,
            device_index: -1,
            sizes,
            strides,
            data: std::ptr::null_mut(),
        }
    }

    #[test]
    fn contiguous_rows_ignore_the_strides_of_size_one_dimensions() {
        assert!(contiguous(&view(&[2, 3, 4], &[12, 4, 1])));
        assert!(contiguous(&view(&[2, 1, 4], &[4, 99, 1])));
        assert!(contiguous(&view(&[5], &[1])));
        assert!(!contiguous(&view(&[5], &[2])), "a strided row");
        assert!(
            !contiguous(&view(&[3, 2, 4], &[4, 12, 1])),
            "batch dimensions swapped"
        );
        assert!(!contiguous(&view(&[2, 3, 4], &[24, 8, 1])), "padded rows");
    }

    #[test]
    fn a_weight_is_read_transposed_in_place() {
        // w [N = 3, K = 5] row-major is the [K, N] operand column-major with ld 5.
        let w = view(&[3, 5], &[5, 1]);
        let op = Side::new(&w, 2, true)
            .layout(5, 3, DType::F32)
            .expect("a layout");
        assert_eq!(
            (op.layout, op.ld, op.batch_stride),
            (Layout::ColMajor, 5, 0)
        );
        // The same matrix given as [K, N] (w.t()), not transposed: the same operand.
        let wt = view(&[5, 3], &[1, 5]);
        let op2 = Side::new(&wt, 2, false)
            .layout(5, 3, DType::F32)
            .expect("a layout");
        assert_eq!((op2.layout, op2.ld), (Layout::ColMajor, 5));
    }

    #[test]
    fn layouts_follow_the_strides_and_refuse_what_fits_none() {
        let padded = view(&[4, 6], &[8, 1]);
        let op = Side::new(&padded, 2, false)
            .layout(4, 6, DType::BF16)
            .unwrap();
        assert_eq!((op.layout, op.ld), (Layout::RowMajor, 8));
        let strided = view(&[4, 6], &[12, 2]);
        assert!(Side::new(&strided, 2, false)
            .layout(4, 6, DType::BF16)
            .is_none());
        let batched = view(&[3, 4, 6], &[0, 6, 1]);
        let op = Side::new(&batched, 3, false)
            .layout(4, 6, DType::F16)
            .unwrap();
        assert_eq!(op.batch_stride, 0, "a broadcast batch reads one matrix");
        let backwards = view(&[3, 4, 6], &[-24, 6, 1]);
        assert!(Side::new(&backwards, 3, false)
            .layout(4, 6, DType::F16)
            .is_none());
        let rows = view(&[2, 3, 6], &[18, 6, 1]);
        let op = Side::rows(&rows).layout(6, 6, DType::F32).unwrap();
        assert_eq!((op.layout, op.ld), (Layout::RowMajor, 6));
    }
}
