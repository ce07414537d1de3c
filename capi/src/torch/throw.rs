//! Raising an error out of a native kernel. torch calls a stable-ABI kernel as a C function
//! that returns nothing; its errors are C++ exceptions, which the dispatcher passes up to
//! Python as `RuntimeError` with their message. So an error here is thrown as a
//! `std::runtime_error` through libstdc++'s own entry points (the C++ runtime torch already
//! loaded), and the kernels are `extern "C-unwind"` so that it may unwind through them.

use std::ffi::{c_char, c_void, CString};

use libloading::os::unix::{Library, RTLD_NOW};

use super::shim::RTLD_NOLOAD;

type Allocate = unsafe extern "C" fn(usize) -> *mut c_void;
type Construct = unsafe extern "C" fn(*mut c_void, *const c_char);
type Destroy = unsafe extern "C" fn(*mut c_void);
type Throw = unsafe extern "C-unwind" fn(*mut c_void, *const c_void, Destroy) -> !;

/// libstdc++'s functions for throwing a `std::runtime_error`.
pub struct Thrower {
    _lib: Library,
    allocate: Allocate,
    construct: Construct,
    destroy: Destroy,
    type_info: *const c_void,
    throw: Throw,
}

// SAFETY: plain function pointers and the address of a static type_info object.
unsafe impl Send for Thrower {}
// SAFETY: as above; nothing here is mutated after construction.
unsafe impl Sync for Thrower {}

/// The most bytes a `std::runtime_error` takes in any libstdc++ (16 on x86-64: the vtable
/// pointer and the reference-counted string); the exception object may be larger than the
/// type.
const RUNTIME_ERROR_BYTES: usize = 64;

impl Thrower {
    /// Finds libstdc++ among the process's loaded libraries.
    pub fn open() -> Result<Self, String> {
        // SAFETY: RTLD_NOLOAD runs no initialisers (torch loaded it).
        let lib = unsafe { Library::open(Some("libstdc++.so.6"), RTLD_NOLOAD | RTLD_NOW) }
            .map_err(|e| format!("libstdc++ is not loaded in this process: {e}"))?;
        // SAFETY: these are libstdc++'s exported symbols with these C signatures (the
        // Itanium C++ ABI's __cxa functions, std::runtime_error's constructor from a
        // C string and its destructor, and its type_info object).
        unsafe {
            let allocate = *lib
                .get::<Allocate>(b"__cxa_allocate_exception\0")
                .map_err(|e| e.to_string())?;
            let construct = *lib
                .get::<Construct>(b"_ZNSt13runtime_errorC1EPKc\0")
                .map_err(|e| e.to_string())?;
            let destroy = *lib
                .get::<Destroy>(b"_ZNSt13runtime_errorD1Ev\0")
                .map_err(|e| e.to_string())?;
            let type_info = *lib
                .get::<*const c_void>(b"_ZTISt13runtime_error\0")
                .map_err(|e| e.to_string())?;
            let throw = *lib
                .get::<Throw>(b"__cxa_throw\0")
                .map_err(|e| e.to_string())?;
            Ok(Thrower {
                _lib: lib,
                allocate,
                construct,
                destroy,
                type_info,
                throw,
            })
        }
    }

    /// Throws `std::runtime_error(message)`. Never returns: the exception unwinds to the
    /// dispatcher's caller.
    ///
    /// # Safety
    /// Called from an `extern "C-unwind"` function that C++ called, with nothing of its own
    /// left to drop (unwinding runs no Rust destructors the caller relies on here).
    pub unsafe fn throw(&self, message: &str) -> ! {
        let text = CString::new(message.replace('\0', " ")).expect("NULs replaced");
        // SAFETY: the Itanium ABI sequence: allocate the exception object, construct the
        // runtime_error in it (it copies the message), then throw it with its type_info
        // and destructor. `text` is freed before the throw: nothing Rust-owned is live.
        unsafe {
            let object = (self.allocate)(RUNTIME_ERROR_BYTES);
            (self.construct)(object, text.as_ptr());
            drop(text);
            (self.throw)(object, self.type_info, self.destroy)
        }
    }
}
