//! The part of torch's stable C ABI (`torch/csrc/inductor/aoti_torch/c/shim.h`) the native
//! kernels use, looked up in the libtorch the process has already loaded. Nothing here
//! links against torch: one build of this library serves every torch that exports these
//! functions (2.9 and later; the set is checked when the kernels are installed).

use std::ffi::{c_char, c_void};

use libloading::os::unix::{Library, Symbol, RTLD_NOW};

/// glibc's `RTLD_NOLOAD` (libloading does not name it): find a loaded library, load nothing.
pub(super) const RTLD_NOLOAD: std::ffi::c_int = 0x4;

/// `AOTITorchError`: 0 is success.
pub type TorchError = i32;
/// `AtenTensorHandle`: an owned `at::Tensor*`.
pub type TensorHandle = *mut c_void;
/// `TorchLibraryHandle`: a `torch::Library*`.
pub type LibraryHandle = *mut c_void;
/// A boxed kernel over a stack of `StableIValue`s (`uint64_t`): arguments in, results out.
pub type BoxedKernel = unsafe extern "C-unwind" fn(*mut u64, u64, u64);

macro_rules! shim {
    ($($name:ident: $ty:ty,)*) => {
        /// The functions, resolved once.
        pub struct Shim {
            _lib: Library,
            $(pub $name: $ty,)*
            /// torch 2.10 and later: the message of the last error a shim function caught
            /// on this thread (`torch_exception_get_what_without_backtrace`).
            pub last_error: Option<unsafe extern "C" fn() -> *const c_char>,
        }

        impl Shim {
            /// Resolves every function in the already loaded `path` (`RTLD_NOLOAD`: torch
            /// loads it; this only finds it).
            ///
            /// # Safety
            /// `path` names torch's `libtorch_cpu`, whose functions have these signatures.
            pub unsafe fn open(path: &str) -> Result<Self, String> {
                // SAFETY: RTLD_NOLOAD runs no initialisers: the library is already loaded.
                let lib = unsafe { Library::open(Some(path), RTLD_NOLOAD | RTLD_NOW) }
                    .map_err(|e| format!("{path} is not loaded in this process: {e}"))?;
                $(
                    // SAFETY: the caller's contract: the symbol has this type.
                    let $name: Symbol<$ty> = unsafe { lib.get(concat!(stringify!($name), "\0").as_bytes()) }
                        .map_err(|e| format!("{path} has no {}: {e}", stringify!($name)))?;
                    let $name = *$name;
                )*
                // SAFETY: as above, when torch exports it.
                let last_error = unsafe {
                    lib.get::<unsafe extern "C" fn() -> *const c_char>(
                        b"torch_exception_get_what_without_backtrace\0",
                    )
                }
                .ok()
                .map(|f| *f);
                Ok(Shim { _lib: lib, $($name,)* last_error })
            }
        }
    };
}

shim! {
    aoti_torch_library_init_impl: unsafe extern "C" fn(*const c_char, *const c_char, *const c_char, u32, *mut LibraryHandle) -> TorchError,
    aoti_torch_library_impl: unsafe extern "C" fn(LibraryHandle, *const c_char, BoxedKernel) -> TorchError,
    aoti_torch_delete_library_object: unsafe extern "C" fn(LibraryHandle) -> TorchError,
    aoti_torch_delete_tensor_object: unsafe extern "C" fn(TensorHandle) -> TorchError,
    aoti_torch_get_dtype: unsafe extern "C" fn(TensorHandle, *mut i32) -> TorchError,
    aoti_torch_get_device_type: unsafe extern "C" fn(TensorHandle, *mut i32) -> TorchError,
    aoti_torch_get_dim: unsafe extern "C" fn(TensorHandle, *mut i64) -> TorchError,
    aoti_torch_get_sizes: unsafe extern "C" fn(TensorHandle, *mut *mut i64) -> TorchError,
    aoti_torch_get_strides: unsafe extern "C" fn(TensorHandle, *mut *mut i64) -> TorchError,
    aoti_torch_get_data_ptr: unsafe extern "C" fn(TensorHandle, *mut *mut c_void) -> TorchError,
    aoti_torch_empty_strided: unsafe extern "C" fn(i64, *const i64, *const i64, i32, i32, i32, *mut TensorHandle) -> TorchError,
    aoti_torch_clone: unsafe extern "C" fn(TensorHandle, *mut TensorHandle) -> TorchError,
    aoti_torch_cpu_mm_out: unsafe extern "C" fn(TensorHandle, TensorHandle, TensorHandle) -> TorchError,
    aoti_torch_cpu_bmm_out: unsafe extern "C" fn(TensorHandle, TensorHandle, TensorHandle) -> TorchError,
    aoti_torch_dtype_float32: unsafe extern "C" fn() -> i32,
    aoti_torch_dtype_bfloat16: unsafe extern "C" fn() -> i32,
    aoti_torch_dtype_float16: unsafe extern "C" fn() -> i32,
    aoti_torch_device_type_cpu: unsafe extern "C" fn() -> i32,
}
