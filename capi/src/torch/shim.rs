//! The part of torch the native kernels use, looked up in the libtorch the process has
//! already loaded. Nothing here links against torch: one build of this library serves every
//! torch that exports these functions (2.9 and later; the set is checked when the kernels
//! are installed).
//!
//! Two kinds of function: torch's stable C ABI (`torch/csrc/inductor/aoti_torch/c/shim.h`,
//! plain C, errors as return codes), and torch's own per-device kernels of `mm` and `bmm`
//! (`at::cpu::mm`, `at::cuda::bmm`, ...), which the native kernels hand every call they do
//! not take. Those are C++ functions, called by their Itanium-mangled names so that their
//! exceptions — torch's checks and messages — propagate unchanged (the stable ABI's
//! `aoti_torch_cpu_mm_out` catches them, and torch 2.11 has no way to read the message).

use std::ffi::{c_char, c_void, CStr};

use libloading::os::unix::{Library, Symbol, RTLD_NOW};

/// glibc's `RTLD_NOLOAD` (libloading does not name it): find a loaded library, load nothing.
pub(super) const RTLD_NOLOAD: std::ffi::c_int = 0x4;

/// `AOTITorchError`: 0 is success.
pub type TorchError = i32;
/// `AtenTensorHandle`: an owned `at::Tensor*` (the stable ABI defines it as one).
pub type TensorHandle = *mut c_void;
/// `TorchLibraryHandle`: a `torch::Library*`.
pub type LibraryHandle = *mut c_void;
/// A boxed kernel over a stack of `StableIValue`s (`uint64_t`): arguments in, results out.
pub type BoxedKernel = unsafe extern "C-unwind" fn(*mut u64, u64, u64);

/// The memory a C++ function returning `at::Tensor` by value constructs its result in: the
/// tensor is one intrusive pointer at the start. `at::Tensor` has a non-trivial destructor,
/// so the C++ ABI returns it through a pointer the caller passes (rdi on x86-64, x8 on
/// aarch64); a Rust `extern "C"` function returning a struct of more than two registers
/// passes its result memory the same way, which is why this is larger than the tensor.
#[repr(C)]
pub struct ReturnedTensor {
    pub tensor: *mut c_void,
    _unused: [usize; 2],
}

/// `at::<device>::mm(const Tensor& self, const Tensor& mat2) -> Tensor` and `bmm`: a
/// `const at::Tensor&` is an `at::Tensor*`, which is what a `TensorHandle` is. May throw
/// (hence `C-unwind`).
pub type TorchMatmul = unsafe extern "C-unwind" fn(TensorHandle, TensorHandle) -> ReturnedTensor;

/// Looks up `name` in `lib` as a `T`.
///
/// # Safety
/// The symbol, if present, has type `T`.
unsafe fn symbol<T: Copy>(lib: &Library, path: &str, name: &CStr) -> Result<T, String> {
    // SAFETY: the caller's contract.
    let s: Symbol<T> = unsafe { lib.get(name.to_bytes_with_nul()) }
        .map_err(|e| format!("{path} has no {}: {e}", name.to_string_lossy()))?;
    Ok(*s)
}

/// Finds the already loaded library `path` (`RTLD_NOLOAD`: torch loaded it; this only finds
/// it, so no initialiser runs twice).
fn loaded(path: &str) -> Result<Library, String> {
    // SAFETY: RTLD_NOLOAD runs no initialisers: the library is already loaded.
    unsafe { Library::open(Some(path), RTLD_NOLOAD | RTLD_NOW) }
        .map_err(|e| format!("{path} is not loaded in this process: {e}"))
}

macro_rules! shim {
    ($($name:ident: $ty:ty,)*) => {
        /// The functions of `libtorch_cpu`, resolved once.
        pub struct Shim {
            _lib: Library,
            $(pub $name: $ty,)*
            /// torch's CPU kernels of mm and bmm (`at::cpu::mm`, `at::cpu::bmm`).
            pub cpu_mm: TorchMatmul,
            pub cpu_bmm: TorchMatmul,
            /// Where torch exports it (2.15 does, 2.11 does not): the message of the last
            /// error a shim function caught on this thread (`torch_exception_get_what_without_backtrace`).
            pub last_error: Option<unsafe extern "C" fn() -> *const c_char>,
        }

        impl Shim {
            /// Resolves every function in the already loaded `path`.
            ///
            /// # Safety
            /// `path` names torch's `libtorch_cpu`, whose functions have these signatures.
            pub unsafe fn open(path: &str) -> Result<Self, String> {
                let lib = loaded(path)?;
                // SAFETY (each lookup): the caller's contract: the symbols have these types.
                unsafe {
                    $(
                        let $name: $ty = symbol(&lib, path, &CStr::from_bytes_with_nul(
                            concat!(stringify!($name), "\0").as_bytes()).expect("one NUL"))?;
                    )*
                    let cpu_mm = symbol(&lib, path, c"_ZN2at3cpu2mmERKNS_6TensorES3_")?;
                    let cpu_bmm = symbol(&lib, path, c"_ZN2at3cpu3bmmERKNS_6TensorES3_")?;
                    let last_error = symbol(
                        &lib, path, c"torch_exception_get_what_without_backtrace").ok();
                    Ok(Shim { _lib: lib, $($name,)* cpu_mm, cpu_bmm, last_error })
                }
            }
        }
    };
}

shim! {
    aoti_torch_library_init_impl: unsafe extern "C" fn(*const c_char, *const c_char, *const c_char, u32, *mut LibraryHandle) -> TorchError,
    aoti_torch_library_init_fragment: unsafe extern "C" fn(*const c_char, *const c_char, u32, *mut LibraryHandle) -> TorchError,
    aoti_torch_library_def: unsafe extern "C" fn(LibraryHandle, *const c_char) -> TorchError,
    aoti_torch_library_impl: unsafe extern "C" fn(LibraryHandle, *const c_char, BoxedKernel) -> TorchError,
    aoti_torch_delete_library_object: unsafe extern "C" fn(LibraryHandle) -> TorchError,
    aoti_torch_delete_tensor_object: unsafe extern "C" fn(TensorHandle) -> TorchError,
    aoti_torch_new_tensor_handle: unsafe extern "C" fn(TensorHandle, *mut TensorHandle) -> TorchError,
    aoti_torch_new_uninitialized_tensor: unsafe extern "C" fn(*mut TensorHandle) -> TorchError,
    aoti_torch_assign_tensors: unsafe extern "C" fn(TensorHandle, TensorHandle) -> TorchError,
    aoti_torch_get_dtype: unsafe extern "C" fn(TensorHandle, *mut i32) -> TorchError,
    aoti_torch_get_device_type: unsafe extern "C" fn(TensorHandle, *mut i32) -> TorchError,
    aoti_torch_get_device_index: unsafe extern "C" fn(TensorHandle, *mut i32) -> TorchError,
    aoti_torch_get_dim: unsafe extern "C" fn(TensorHandle, *mut i64) -> TorchError,
    aoti_torch_get_sizes: unsafe extern "C" fn(TensorHandle, *mut *mut i64) -> TorchError,
    aoti_torch_get_strides: unsafe extern "C" fn(TensorHandle, *mut *mut i64) -> TorchError,
    aoti_torch_get_data_ptr: unsafe extern "C" fn(TensorHandle, *mut *mut c_void) -> TorchError,
    aoti_torch_empty_strided: unsafe extern "C" fn(i64, *const i64, *const i64, i32, i32, i32, *mut TensorHandle) -> TorchError,
    aoti_torch_clone: unsafe extern "C" fn(TensorHandle, *mut TensorHandle) -> TorchError,
    aoti_torch_dtype_float32: unsafe extern "C" fn() -> i32,
    aoti_torch_dtype_bfloat16: unsafe extern "C" fn() -> i32,
    aoti_torch_dtype_float16: unsafe extern "C" fn() -> i32,
    aoti_torch_device_type_cpu: unsafe extern "C" fn() -> i32,
    aoti_torch_device_type_cuda: unsafe extern "C" fn() -> i32,
}

/// The functions of `libtorch_cuda`, resolved once (when torch has CUDA).
pub struct CudaShim {
    _lib: Library,
    /// `aoti_torch_get_current_cuda_stream(device_index, &stream)`: the `cudaStream_t`
    /// torch's current stream of that device is.
    pub current_stream: unsafe extern "C" fn(i32, *mut *mut c_void) -> TorchError,
    /// torch's CUDA kernels of mm and bmm (`at::cuda::mm`, `at::cuda::bmm`).
    pub mm: TorchMatmul,
    pub bmm: TorchMatmul,
}

impl CudaShim {
    /// Resolves the functions in the already loaded `path`.
    ///
    /// # Safety
    /// `path` names torch's `libtorch_cuda`, whose functions have these signatures.
    pub unsafe fn open(path: &str) -> Result<Self, String> {
        let lib = loaded(path)?;
        // SAFETY: the caller's contract: the symbols have these types.
        unsafe {
            Ok(CudaShim {
                current_stream: symbol(&lib, path, c"aoti_torch_get_current_cuda_stream")?,
                mm: symbol(&lib, path, c"_ZN2at4cuda2mmERKNS_6TensorES3_")?,
                bmm: symbol(&lib, path, c"_ZN2at4cuda3bmmERKNS_6TensorES3_")?,
                _lib: lib,
            })
        }
    }
}
