//! Native kernels for torch, registered from this library through torch's stable C ABI so
//! that a call meets no Python: the ops `sgemm_bi::matmul` and `sgemm_bi::matmul_bias`
//! (defined once per process, for the functional API and the mode's `addmm` route), and,
//! while the mode is on, `aten::mm` and `aten::bmm`, on the CPU and CUDA keys. The hooks of the Python package's mode
//! (`python/sgemm_bi/native.py`), not part of the C ABI: they are left out of `sgemm_bi.h`.
//!
//! Why not `addmm` and `baddbmm` themselves: torch passes a stable-ABI kernel its arguments
//! as `StableIValue`s, and that conversion has no `Scalar` (torch 2.11–2.15), which they
//! take (`beta`, `alpha`). They stay Python routes; `addmm`'s bias path calls
//! `sgemm_bi::matmul_bias`, which takes no `Scalar`. Nothing links against torch: the
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

/// A `torch::Library*` this library made.
struct Registered(*mut c_void);
// SAFETY: the handle is only passed back to torch, under a mutex.
unsafe impl Send for Registered {}

/// The mode's registrations of `aten::mm` and `aten::bmm` while it is on.
static REGISTERED: Mutex<Vec<Registered>> = Mutex::new(Vec::new());

/// The definition and kernels of `sgemm_bi::matmul` / `matmul_bias`, made once and kept for
/// the process (the Python package keeps the ops' handles).
static OPS: Mutex<Option<Vec<Registered>>> = Mutex::new(None);

/// The schemas of the native ops: `a` `[..., K]`, `b` `[K, N]` (or with `weight` the
/// `[N, K]` weight of `F.linear`), `tier` as `sgemm_bi_tier` plus 0 for auto (tier codes:
/// 0 auto, 1 scalar, 2 tensor cores). No autograd: the callers run below torch's or need
/// no gradient.
const SCHEMAS: [&CStr; 2] = [
    c"matmul(Tensor a, Tensor b, int tier, bool weight) -> Tensor",
    c"matmul_bias(Tensor a, Tensor b, Tensor bias, int tier, bool weight) -> Tensor",
];

/// Resolves torch's functions once per process (`libtorch_cuda` NULL or not loaded: the
/// CPU only).
///
/// # Safety
/// As for `sgemm_bi_torch_ops`.
unsafe fn natives(
    libtorch_cpu: *const c_char,
    libtorch_cuda: *const c_char,
) -> Result<&'static Natives, Failure> {
    if let Some(n) = NATIVES.get() {
        return Ok(n);
    }
    if libtorch_cpu.is_null() {
        return Err(Failure::null("libtorch_cpu"));
    }
    // SAFETY: contract: NUL-terminated paths.
    let path = |p: *const c_char| unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned();
    // SAFETY: contract: the paths are torch's libraries.
    let shim = unsafe { shim::Shim::open(&path(libtorch_cpu)) }.map_err(Failure::invalid)?;
    // Without CUDA (a CPU build of torch) only the CPU key gets kernels.
    let cuda = (!libtorch_cuda.is_null())
        .then(|| unsafe { shim::CudaShim::open(&path(libtorch_cuda)) }.ok())
        .flatten();
    let thrower = throw::Thrower::open().map_err(Failure::invalid)?;
    let _ = NATIVES.set(Natives::new(shim, cuda, thrower));
    Ok(NATIVES.get().expect("set above"))
}

/// The dispatch keys the kernels are registered on (with the bit `keys` reports).
fn keys(n: &Natives) -> impl Iterator<Item = (&'static CStr, u32)> + use<'_> {
    [(c"CPU", 1), (c"CUDA", 2)]
        .into_iter()
        .filter(|&(_, bit)| bit == 1 || n.cuda.is_some())
}

fn write_keys(n: &Natives, out: *mut u32) {
    if !out.is_null() {
        // SAFETY: contract: writable when not NULL.
        unsafe { *out = keys(n).map(|(_, bit)| bit).sum() };
    }
}

/// Defines `sgemm_bi::matmul` and `sgemm_bi::matmul_bias` with kernels on the CPU key and,
/// when `libtorch_cuda` is given and loaded, the CUDA key, once per process (later calls
/// only report), and writes to `keys` which keys have them (1 CPU, 2 CUDA). `libtorch_cpu`
/// and `libtorch_cuda` are the paths of the libraries the process has loaded.
///
/// # Safety
/// `libtorch_cpu` is a NUL-terminated path, `libtorch_cuda` NULL or one, `keys` NULL or
/// writable; the process runs torch 2.9 or later, and the call holds the GIL or otherwise
/// keeps other threads from changing torch's registrations meanwhile.
#[no_mangle]
pub unsafe extern "C" fn sgemm_bi_torch_ops(
    libtorch_cpu: *const c_char,
    libtorch_cuda: *const c_char,
    keys: *mut u32,
) -> sgemm_bi_status {
    boundary(|| {
        let mut ops = OPS.lock().unwrap_or_else(|e| e.into_inner());
        // SAFETY: the contract.
        let n = unsafe { natives(libtorch_cpu, libtorch_cuda) }?;
        if ops.is_none() {
            *ops = Some(define_ops(n)?);
        }
        write_keys(n, keys);
        Ok(())
    })
}

fn define_ops(n: &Natives) -> Result<Vec<Registered>, Failure> {
    let mut libs = Vec::new();
    let made = (|| {
        let mut lib = std::ptr::null_mut();
        // SAFETY: NUL-terminated strings; `lib` receives a new library handle.
        if unsafe {
            (n.shim.aoti_torch_library_init_fragment)(
                c"sgemm_bi".as_ptr(),
                c"sgemm_bi/capi/src/torch/mod.rs".as_ptr(),
                line!(),
                &mut lib,
            )
        } != 0
        {
            return Err(Failure::invalid(
                "torch refused a Library fragment for sgemm_bi",
            ));
        }
        libs.push(Registered(lib));
        for schema in SCHEMAS {
            // SAFETY: `lib` is live; the schema is NUL-terminated.
            if unsafe { (n.shim.aoti_torch_library_def)(lib, schema.as_ptr()) } != 0 {
                return Err(Failure::invalid(format!("torch refused the op {schema:?}")));
            }
        }
        for (key, _) in keys(n) {
            let kernels = if key == c"CPU" {
                [kernel::matmul_cpu, kernel::matmul_bias_cpu]
            } else {
                [kernel::matmul_cuda, kernel::matmul_bias_cuda]
            };
            let names = [c"matmul", c"matmul_bias"];
            libs.push(register(
                n,
                c"sgemm_bi",
                key,
                &[(names[0], kernels[0]), (names[1], kernels[1])],
            )?);
        }
        Ok(())
    })();
    match made {
        Ok(()) => Ok(libs),
        Err(e) => {
            delete_all(n, libs);
            Err(e)
        }
    }
}

fn delete_all(n: &Natives, libs: Vec<Registered>) {
    for Registered(lib) in libs.into_iter().rev() {
        // SAFETY: `lib` is a live handle this library made, deleted once.
        unsafe { (n.shim.aoti_torch_delete_library_object)(lib) };
    }
}

/// Registers the native kernels of `aten::mm` and `aten::bmm` on the keys of
/// `sgemm_bi_torch_ops` (which it runs first), replacing torch's until
/// `sgemm_bi_torch_uninstall`, with routed calls on `tier` (0 auto, 1 scalar, 2 tensor
/// cores), and writes the keys to `keys`. Installing again only sets the tier.
///
/// # Safety
/// As for `sgemm_bi_torch_ops`.
#[no_mangle]
pub unsafe extern "C" fn sgemm_bi_torch_install(
    libtorch_cpu: *const c_char,
    libtorch_cuda: *const c_char,
    tier: u32,
    keys: *mut u32,
) -> sgemm_bi_status {
    // SAFETY: the same contract.
    let status = unsafe { sgemm_bi_torch_ops(libtorch_cpu, libtorch_cuda, keys) };
    if status != sgemm_bi_status::Ok {
        return status;
    }
    boundary(|| {
        if tier > 2 {
            return Err(Failure::invalid(format!("tier {tier} is not 0, 1 or 2")));
        }
        let n = NATIVES.get().expect("set by sgemm_bi_torch_ops");
        let mut registered = REGISTERED.lock().unwrap_or_else(|e| e.into_inner());
        TIER.store(tier, Ordering::Relaxed);
        if registered.is_empty() {
            let mut libs = Vec::new();
            for (key, _) in self::keys(n) {
                let [mm, bmm] = if key == c"CPU" {
                    [kernel::mm_cpu, kernel::bmm_cpu]
                } else {
                    [kernel::mm_cuda, kernel::bmm_cuda]
                };
                match register(n, c"aten", key, &[(c"mm", mm), (c"bmm", bmm)]) {
                    Ok(lib) => libs.push(lib),
                    Err(e) => {
                        delete_all(n, libs);
                        return Err(e);
                    }
                }
            }
            *registered = libs;
        }
        Ok(())
    })
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

/// Removes the native kernels of `aten::mm` and `aten::bmm` (torch's own are back). Does
/// nothing when none are installed. `sgemm_bi::matmul` stays.
///
/// # Safety
/// As for `sgemm_bi_torch_install`.
#[no_mangle]
pub unsafe extern "C" fn sgemm_bi_torch_uninstall() -> sgemm_bi_status {
    boundary(|| {
        let mut registered = REGISTERED.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(n) = NATIVES.get() {
            delete_all(n, std::mem::take(&mut *registered));
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
