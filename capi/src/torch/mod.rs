//! Native kernels for torch: `aten::mm` and `aten::bmm` on the CPU and CUDA keys, and the op
//! `sgemm_bi::addmm_bias`, registered from this library through torch's stable C ABI, so a
//! routed call meets no Python. The hooks of the Python package's mode
//! (`python/sgemm_bi/native.py`), not part of the C ABI: they are left out of `sgemm_bi.h`.
//!
//! Why not `addmm` and `baddbmm` themselves: torch passes a stable-ABI kernel its arguments
//! as `StableIValue`s, and that conversion has no `Scalar` (torch 2.11–2.15), which they
//! take (`beta`, `alpha`). They stay Python routes; `addmm`'s bias path calls
//! `sgemm_bi::addmm_bias`, which takes tensors only. Nothing links against torch: the
//! functions are looked up in the libtorch the process loaded (`shim.rs`), torch's own
//! kernels serve what the engine does not take (`kernel.rs`), and errors are raised as C++
//! exceptions (`throw.rs`).

mod kernel;
mod shim;
mod throw;

use std::ffi::{c_char, c_void, CStr};
use std::sync::atomic::Ordering;
use std::sync::Mutex;

use crate::status::{boundary, sgemm_bi_status, Failure};
use kernel::{Natives, ENGINE_CALLS, NATIVES, TIER};

/// A registration while installed (a `torch::Library*`, one per dispatch key).
struct Registered(*mut c_void);
// SAFETY: the handle is only passed back to torch, under the mutex.
unsafe impl Send for Registered {}

static REGISTERED: Mutex<Vec<Registered>> = Mutex::new(Vec::new());

/// Registers the native kernels of `aten::mm` and `aten::bmm` on the CPU key and, when
/// `libtorch_cuda` is given and loaded, on the CUDA key (replacing torch's until
/// `sgemm_bi_torch_uninstall`), with routed calls on `tier` (0 auto, 1 scalar, 2 tensor
/// cores), and writes to `keys` which keys have them (1 CPU, 2 CUDA). `libtorch_cpu` and
/// `libtorch_cuda` are the paths of the libraries the process has loaded. Installing again
/// only sets the tier (and `keys`).
///
/// # Safety
/// `libtorch_cpu` is a NUL-terminated path, `libtorch_cuda` NULL or one, `keys` NULL or
/// writable; the process runs torch 2.9 or later, and the call holds the GIL or otherwise
/// keeps other threads from changing torch's registrations meanwhile.
#[no_mangle]
pub unsafe extern "C" fn sgemm_bi_torch_install(
    libtorch_cpu: *const c_char,
    libtorch_cuda: *const c_char,
    tier: u32,
    keys: *mut u32,
) -> sgemm_bi_status {
    boundary(|| {
        if libtorch_cpu.is_null() {
            return Err(Failure::null("libtorch_cpu"));
        }
        if tier > 2 {
            return Err(Failure::invalid(format!("tier {tier} is not 0, 1 or 2")));
        }
        // SAFETY: contract: NUL-terminated paths.
        let path = |p: *const c_char| unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned();
        let mut registered = REGISTERED.lock().unwrap_or_else(|e| e.into_inner());
        TIER.store(tier, Ordering::Relaxed);
        if registered.is_empty() {
            if NATIVES.get().is_none() {
                // SAFETY: contract: the paths are torch's libraries.
                let shim =
                    unsafe { shim::Shim::open(&path(libtorch_cpu)) }.map_err(Failure::invalid)?;
                // Without CUDA (a CPU build of torch) only the CPU key gets kernels.
                let cuda = (!libtorch_cuda.is_null())
                    .then(|| unsafe { shim::CudaShim::open(&path(libtorch_cuda)) }.ok())
                    .flatten();
                let thrower = throw::Thrower::open().map_err(Failure::invalid)?;
                let _ = NATIVES.set(Natives::new(shim, cuda, thrower));
            }
            let n = NATIVES.get().expect("set above");
            define_addmm_bias(n)?;
            let mut libs = Vec::new();
            let mut per_key = vec![(
                c"CPU",
                [kernel::mm_cpu, kernel::bmm_cpu, kernel::addmm_bias_cpu],
            )];
            if n.cuda.is_some() {
                per_key.push((
                    c"CUDA",
                    [kernel::mm_cuda, kernel::bmm_cuda, kernel::addmm_bias_cuda],
                ));
            }
            for (key, [mm, bmm, addmm_bias]) in per_key {
                let registered =
                    register(n, c"aten", key, &[(c"mm", mm), (c"bmm", bmm)]).and_then(|lib| {
                        libs.push(lib);
                        register(n, c"sgemm_bi", key, &[(c"addmm_bias", addmm_bias)])
                    });
                match registered {
                    Ok(lib) => libs.push(lib),
                    Err(e) => {
                        for Registered(lib) in libs {
                            // SAFETY: `lib` is live and deleted once.
                            unsafe { (n.shim.aoti_torch_delete_library_object)(lib) };
                        }
                        return Err(e);
                    }
                }
            }
            *registered = libs;
        }
        if !keys.is_null() {
            let cuda = NATIVES.get().is_some_and(|n| n.cuda.is_some());
            // SAFETY: contract: writable when not NULL.
            unsafe { *keys = 1 | if cuda { 2 } else { 0 } };
        }
        Ok(())
    })
}

/// The schema of `sgemm_bi::addmm_bias`, defined once per process and never removed (the
/// Python package keeps the op's handle; only its kernels come and go with the mode).
static DEFINED: Mutex<bool> = Mutex::new(false);

/// Defines `sgemm_bi::addmm_bias(bias, mat1, mat2) = mat1 @ mat2 + bias`, the bias path of
/// the mode's `addmm` route (a Python route: `addmm` takes `Scalar`s), which calls it so
/// that the rest of the call is native. No autograd: the route runs below torch's.
fn define_addmm_bias(n: &Natives) -> Result<(), Failure> {
    let mut defined = DEFINED.lock().unwrap_or_else(|e| e.into_inner());
    if *defined {
        return Ok(());
    }
    let mut lib = std::ptr::null_mut();
    // SAFETY: NUL-terminated strings; `lib` receives a new library handle, kept for the
    // process (deleting it would remove the definition).
    let ok = unsafe {
        (n.shim.aoti_torch_library_init_fragment)(
            c"sgemm_bi".as_ptr(),
            c"sgemm_bi/capi/src/torch/mod.rs".as_ptr(),
            line!(),
            &mut lib,
        ) == 0
            && (n.shim.aoti_torch_library_def)(
                lib,
                c"addmm_bias(Tensor bias, Tensor mat1, Tensor mat2) -> Tensor".as_ptr(),
            ) == 0
    };
    if !ok {
        return Err(Failure::invalid(
            "torch refused to define sgemm_bi::addmm_bias",
        ));
    }
    *defined = true;
    Ok(())
}

/// A `Library` of `ns`'s implementations on `key` holding `kernels`.
fn register(
    n: &Natives,
    ns: &CStr,
    key: &CStr,
    kernels: &[(&CStr, shim::BoxedKernel)],
) -> Result<Registered, Failure> {
    let mut lib = std::ptr::null_mut();
    // SAFETY: NUL-terminated strings; `lib` receives a new library handle.
    let rc = unsafe {
        (n.shim.aoti_torch_library_init_impl)(
            ns.as_ptr(),
            key.as_ptr(),
            c"sgemm_bi/capi/src/torch/mod.rs".as_ptr(),
            line!(),
            &mut lib,
        )
    };
    if rc != 0 {
        return Err(Failure::invalid(format!(
            "torch refused a Library for {ns:?} on the {key:?} key"
        )));
    }
    for &(name, kernel) in kernels {
        // SAFETY: `lib` is live; the kernel has torch's boxed signature.
        if unsafe { (n.shim.aoti_torch_library_impl)(lib, name.as_ptr(), kernel) } != 0 {
            // SAFETY: `lib` is live and deleted once.
            unsafe { (n.shim.aoti_torch_delete_library_object)(lib) };
            return Err(Failure::invalid(format!(
                "torch refused the {key:?} kernel of {name:?}"
            )));
        }
    }
    Ok(Registered(lib))
}

/// Removes the native kernels (torch's own are back). Does nothing when none are installed.
///
/// # Safety
/// As for `sgemm_bi_torch_install`.
#[no_mangle]
pub unsafe extern "C" fn sgemm_bi_torch_uninstall() -> sgemm_bi_status {
    boundary(|| {
        let mut registered = REGISTERED.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(n) = NATIVES.get() {
            for Registered(lib) in registered.drain(..) {
                // SAFETY: `lib` is a live handle install made, deleted once.
                unsafe { (n.shim.aoti_torch_delete_library_object)(lib) };
            }
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
