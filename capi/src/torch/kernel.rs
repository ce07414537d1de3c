//! The native kernels of `aten::mm` and `aten::bmm` on torch's CPU key: a call the engine
//! takes runs on it with no Python in between; any other call goes to torch's own CPU
//! kernel (`at::cpu::mm_out` through the shim, not the dispatcher, so it cannot come back
//! here), and a call torch refuses raises torch's error.

use std::ffi::{c_void, CStr};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::OnceLock;

use sgemm_bi::{
    DType, Device, Engine, Gemm, GemmPointers, Layout, Operand, Output, OutputMode, Stream, Tier,
};

use super::shim::{Shim, TensorHandle};
use super::throw::Thrower;

/// What the kernels need, resolved when they are first installed and kept for the process
/// (a call may be running on another thread when they are uninstalled).
pub struct Natives {
    pub shim: Shim,
    pub thrower: Thrower,
    dtypes: [(i32, DType); 3],
    cpu: i32,
    engine: OnceLock<Result<Engine, String>>,
}

pub static NATIVES: OnceLock<Natives> = OnceLock::new();

/// The tier of routed calls: 0 auto, 1 scalar, 2 tensor cores (`sgemm_bi_tier` + auto).
pub static TIER: AtomicU32 = AtomicU32::new(0);

/// Calls the kernels ran on the engine (for tests that count what the mode routed).
pub static ENGINE_CALLS: AtomicU64 = AtomicU64::new(0);

impl Natives {
    pub fn new(shim: Shim, thrower: Thrower) -> Self {
        // SAFETY: the dtype and device-type functions take nothing and return a constant.
        let (f32_, bf16_, f16_, cpu) = unsafe {
            (
                (shim.aoti_torch_dtype_float32)(),
                (shim.aoti_torch_dtype_bfloat16)(),
                (shim.aoti_torch_dtype_float16)(),
                (shim.aoti_torch_device_type_cpu)(),
            )
        };
        Natives {
            shim,
            thrower,
            dtypes: [(f32_, DType::F32), (bf16_, DType::BF16), (f16_, DType::F16)],
            cpu,
            engine: OnceLock::new(),
        }
    }

    fn engine(&self) -> Result<&Engine, String> {
        self.engine
            .get_or_init(|| Engine::new(Device::Cpu).map_err(|e| e.to_string()))
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
        let (mut dtype, mut device_type, mut dim) = (0, 0, 0i64);
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
                sizes: std::slice::from_raw_parts(sizes, n),
                strides: std::slice::from_raw_parts(strides, n),
                data,
            })
        }
    }

    /// A new contiguous tensor of `sizes` (at most three dimensions).
    fn empty(&self, sizes: &[i64], dtype: i32) -> Result<TensorHandle, String> {
        let mut strides = [1i64; 3];
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
                dtype,
                self.cpu,
                0,
                &mut out,
            )
        };
        if rc != 0 {
            return Err(self.torch_error("allocating the result"));
        }
        Ok(out)
    }

    /// `a @ b` for `dims`-D operands (2: mm, 3: bmm): the engine's when it takes the call,
    /// torch's CPU kernel's otherwise. Returns a new handle; `a` and `b` stay the caller's.
    ///
    /// # Safety
    /// `a` and `b` are live tensor handles that the caller holds until this returns.
    pub unsafe fn matmul(
        &self,
        a: TensorHandle,
        b: TensorHandle,
        dims: usize,
    ) -> Result<TensorHandle, String> {
        // SAFETY: the contract: both handles outlive this call.
        let (va, vb) = unsafe { (self.view(a)?, self.view(b)?) };
        let multiplies = va.sizes.len() == dims
            && vb.sizes.len() == dims
            && va.sizes[dims - 1] == vb.sizes[dims - 2]
            && (dims == 2 || va.sizes[0] == vb.sizes[0]);
        let dtype = self.dtypes.iter().find(|d| d.0 == va.dtype).map(|d| d.1);
        match dtype {
            Some(dt)
                if multiplies
                    && va.dtype == vb.dtype
                    && va.device_type == self.cpu
                    && vb.device_type == self.cpu =>
            {
                self.on_engine(a, b, &va, &vb, dims, dt)
            }
            _ => self.fallback(a, b, &va, &vb, dims),
        }
    }

    fn fallback(
        &self,
        a: TensorHandle,
        b: TensorHandle,
        va: &View,
        vb: &View,
        dims: usize,
    ) -> Result<TensorHandle, String> {
        // torch's kernel checks everything and resizes `out`; its shape only needs to be a
        // valid start.
        let shape: Vec<i64> = if va.sizes.len() == dims && vb.sizes.len() == dims {
            let mut s = va.sizes[..dims - 1].to_vec();
            s.push(vb.sizes[dims - 1]);
            s
        } else {
            vec![0; dims]
        };
        let out = self.empty(&shape, va.dtype)?;
        let f = if dims == 2 {
            self.shim.aoti_torch_cpu_mm_out
        } else {
            self.shim.aoti_torch_cpu_bmm_out
        };
        // SAFETY: three live handles; torch writes `out`.
        if unsafe { f(out, a, b) } != 0 {
            let msg = self.torch_error(if dims == 2 { "aten::mm" } else { "aten::bmm" });
            self.delete(out);
            return Err(msg);
        }
        Ok(out)
    }

    fn on_engine(
        &self,
        a: TensorHandle,
        b: TensorHandle,
        va: &View,
        vb: &View,
        dims: usize,
        dt: DType,
    ) -> Result<TensorHandle, String> {
        let engine = self.engine()?;
        let (m, k, n) = (va.sizes[dims - 2], va.sizes[dims - 1], vb.sizes[dims - 1]);
        let batch = if dims == 3 { va.sizes[0] } else { 1 };
        // Operands whose strides fit no layout are copied (a contiguous clone).
        let mut owned = Vec::new();
        let mut operand = |t: TensorHandle,
                           v: &View,
                           rows: i64,
                           cols: i64|
         -> Result<(Operand, *mut c_void), String> {
            if let Some(op) = layout(v, rows, cols, dt, dims) {
                return Ok((op, v.data));
            }
            let mut c = std::ptr::null_mut();
            // SAFETY: `t` is live; `c` receives a new handle, deleted below.
            if unsafe { (self.shim.aoti_torch_clone)(t, &mut c) } != 0 {
                return Err(self.torch_error("copying an operand"));
            }
            owned.push(c);
            // SAFETY: `c` is held in `owned` until the end of this function.
            let vc = unsafe { self.view(c)? };
            let op = layout(&vc, rows, cols, dt, dims).ok_or("a clone with no layout")?;
            Ok((op, vc.data))
        };
        let ((ao, ap), (bo, bp)) = (operand(a, va, m, k)?, operand(b, vb, k, n)?);
        let shape = [batch, m, n];
        let out = self.empty(&shape[3 - dims..], va.dtype)?;
        let run = || -> Result<(), String> {
            let mut data = std::ptr::null_mut();
            // SAFETY: `out` is live.
            unsafe { (self.shim.aoti_torch_get_data_ptr)(out, &mut data) };
            let g = Gemm {
                m: m as usize,
                n: n as usize,
                k: k as usize,
                batch: batch as usize,
                a: ao,
                b: bo,
                bias: None,
                c: Output {
                    mode: OutputMode::Overwrite(dt),
                    ldc: (n as usize).max(1),
                    batch_stride: if batch > 1 { (m * n) as usize } else { 0 },
                },
                tier: match TIER.load(Ordering::Relaxed) {
                    2 => Tier::TensorCores,
                    _ => Tier::Scalar, // auto is the scalar tier on the CPU
                },
            };
            let p = GemmPointers {
                a: ap,
                b: bp,
                bias: std::ptr::null(),
                c: data,
            };
            // SAFETY: the pointers are the tensors' data, valid for the extents of their
            // sizes and strides (the descriptor is built from them); `out` is fresh, so C
            // overlaps no input; nothing else writes them during the call (torch holds
            // the arguments, and the CPU engine completes before returning).
            unsafe { engine.gemm(&g, p, Stream(std::ptr::null_mut())) }.map_err(|e| e.to_string())
        };
        let r = run();
        if r.is_ok() {
            ENGINE_CALLS.fetch_add(1, Ordering::Relaxed);
        }
        for c in owned {
            self.delete(c);
        }
        match r {
            Ok(()) => Ok(out),
            Err(e) => {
                self.delete(out);
                Err(e)
            }
        }
    }
}

/// The operand of `rows × cols` matrices (the last two dimensions of `v`) when its strides
/// lay them out row- or column-major with a valid leading dimension; the batch stride from
/// the first dimension of a 3-D view.
fn layout(v: &View, rows: i64, cols: i64, dtype: DType, dims: usize) -> Option<Operand> {
    let (sr, sc) = (v.strides[dims - 2], v.strides[dims - 1]);
    let batch_stride = if dims == 3 && v.sizes[0] > 1 {
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

macro_rules! boxed {
    ($name:ident, $dims:expr) => {
        /// The boxed kernel torch calls: `(self, mat2) -> Tensor`.
        ///
        /// # Safety
        /// torch's boxed-kernel contract: `stack` holds the two arguments' owned tensor
        /// handles and receives the result's.
        pub unsafe extern "C-unwind" fn $name(stack: *mut u64, _args: u64, _results: u64) {
            let natives = NATIVES.get().expect("registered only after NATIVES is set");
            // SAFETY: the contract: two owned handles on the stack.
            let (a, b) = unsafe { (*stack as TensorHandle, *stack.add(1) as TensorHandle) };
            // SAFETY: the handles are deleted only after the call.
            let result = std::panic::catch_unwind(|| unsafe { natives.matmul(a, b, $dims) });
            natives.delete(a);
            natives.delete(b);
            match result {
                // SAFETY: the contract: the result goes in the first slot.
                Ok(Ok(out)) => unsafe { *stack = out as u64 },
                // SAFETY: C++ called this function; nothing of it is left to drop.
                Ok(Err(message)) => unsafe { natives.thrower.throw(&message) },
                Err(_) => unsafe {
                    natives
                        .thrower
                        .throw("sgemm_bi: a panic in a native kernel")
                },
            }
        }
    };
}

boxed!(mm_cpu, 2);
boxed!(bmm_cpu, 3);
