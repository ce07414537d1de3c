//! Native kernels for torch: `aten::mm` and `aten::bmm` on the CPU key, registered from this
//! library through torch's stable C ABI, so a routed call meets no Python. The hooks of the
//! Python package's mode (`python/sgemm_bi/native.py`), not part of the C ABI: they are left
//! out of `sgemm_bi.h`.
//!
//! Why only these two ops: torch passes a stable-ABI kernel its arguments as
//! `StableIValue`s, and that conversion has no `Scalar` (torch 2.11–2.15), which `addmm`
//! and `baddbmm` take (`beta`, `alpha`); those stay Python routes. Nothing links against
//! torch: the functions are looked up in the libtorch the process loaded (`shim.rs`), and
//! errors are raised as C++ exceptions (`throw.rs`).

mod kernel;
mod shim;
mod throw;

use std::ffi::{c_char, c_void, CStr};
use std::sync::atomic::Ordering;
use std::sync::Mutex;

use crate::status::{boundary, sgemm_bi_status, Failure};
use kernel::{Natives, ENGINE_CALLS, NATIVES, TIER};

/// The registration while installed (a `torch::Library*`).
struct Registered(*mut c_void);
// SAFETY: the handle is only passed back to torch, under the mutex.
unsafe impl Send for Registered {}

static REGISTERED: Mutex<Option<Registered>> = Mutex::new(None);

/// Registers the native CPU kernels of `aten::mm` and `aten::bmm` (replacing torch's until
/// `sgemm_bi_torch_uninstall`), with routed calls on `tier` (0 auto, 1 scalar, 2 tensor
/// cores). `libtorch_cpu` is the path of the `libtorch_cpu` the process has loaded.
/// Installing again only sets the tier.
///
/// # Safety
/// `libtorch_cpu` is NULL or a NUL-terminated path; the process runs torch 2.9 or later,
/// and the call holds the GIL or otherwise keeps other threads from changing torch's
/// registrations meanwhile.
#[no_mangle]
pub unsafe extern "C" fn sgemm_bi_torch_install(
    libtorch_cpu: *const c_char,
    tier: u32,
) -> sgemm_bi_status {
    boundary(|| {
        if libtorch_cpu.is_null() {
            return Err(Failure::null("libtorch_cpu"));
        }
        if tier > 2 {
            return Err(Failure::invalid(format!("tier {tier} is not 0, 1 or 2")));
        }
        // SAFETY: contract: a NUL-terminated path.
        let path = unsafe { CStr::from_ptr(libtorch_cpu) }
            .to_string_lossy()
            .into_owned();
        let mut registered = REGISTERED.lock().unwrap_or_else(|e| e.into_inner());
        TIER.store(tier, Ordering::Relaxed);
        if registered.is_some() {
            return Ok(());
        }
        if NATIVES.get().is_none() {
            // SAFETY: contract: `path` is torch's libtorch_cpu.
            let shim = unsafe { shim::Shim::open(&path) }.map_err(Failure::invalid)?;
            let thrower = throw::Thrower::open().map_err(Failure::invalid)?;
            let _ = NATIVES.set(Natives::new(shim, thrower));
        }
        let n = NATIVES.get().expect("set above");
        let mut lib = std::ptr::null_mut();
        // SAFETY: NUL-terminated strings; `lib` receives a new library handle.
        let rc = unsafe {
            (n.shim.aoti_torch_library_init_impl)(
                c"aten".as_ptr(),
                c"CPU".as_ptr(),
                c"sgemm_bi/capi/src/torch/mod.rs".as_ptr(),
                line!(),
                &mut lib,
            )
        };
        if rc != 0 {
            return Err(Failure::invalid(
                "torch refused a Library for aten on the CPU key",
            ));
        }
        for (name, kernel) in [
            (c"mm", kernel::mm_cpu as shim::BoxedKernel),
            (c"bmm", kernel::bmm_cpu),
        ] {
            // SAFETY: `lib` is live; the kernel has torch's boxed signature.
            if unsafe { (n.shim.aoti_torch_library_impl)(lib, name.as_ptr(), kernel) } != 0 {
                // SAFETY: `lib` is live and deleted once.
                unsafe { (n.shim.aoti_torch_delete_library_object)(lib) };
                return Err(Failure::invalid(format!(
                    "torch refused the kernel of {name:?}"
                )));
            }
        }
        *registered = Some(Registered(lib));
        Ok(())
    })
}

/// Removes the native kernels (torch's own are back). Does nothing when none are installed.
///
/// # Safety
/// As for `sgemm_bi_torch_install`.
#[no_mangle]
pub unsafe extern "C" fn sgemm_bi_torch_uninstall() -> sgemm_bi_status {
    boundary(|| {
        let mut registered = REGISTERED.lock().unwrap_or_else(|e| e.into_inner());
        if let (Some(Registered(lib)), Some(n)) = (registered.take(), NATIVES.get()) {
            // SAFETY: `lib` is the live handle install made, deleted once.
            unsafe { (n.shim.aoti_torch_delete_library_object)(lib) };
        }
        Ok(())
    })
}

/// How many calls the native kernels have run on the engine in this process (tests count
/// routed calls with it).
#[no_mangle]
pub extern "C" fn sgemm_bi_torch_engine_calls() -> u64 {
    ENGINE_CALLS.load(Ordering::Relaxed)
}
