//! Loading kernels on first use: a module's image is chosen when a device's kernels are set
//! up, but nothing is decompressed, loaded or compiled until a call needs one of its entry
//! points, and then only what that entry point needs.
//!
//! - Machine code: the module's cubin is loaded whole on its first use (the driver, with
//!   CUDA's default lazy loading, then loads each function when it is first looked up), in
//!   tens of milliseconds.
//! - PTX (a GPU no cubin runs on, or one the driver refused): each entry point becomes a
//!   module of its own, the module's header plus that entry, so the driver JIT-compiles only
//!   the kernels calls use, about a second each, instead of the whole module (minutes).
//!
//! Function handles are cached by the kernel tables ([`Lazy`]), so a call after the first
//! costs one atomic load per lookup.

use std::ffi::CString;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use cudarc::driver::{result, sys, CudaContext};

use super::driver_error;
use super::images::{AlignedBytes, Cubin, ModuleImages};
use super::relaxed_capture::RelaxedCapture;
use crate::error::{Error, Result};

/// A value computed on first use and kept: the kernel tables' function handles.
pub(crate) struct Lazy<T>(OnceLock<T>);

impl<T> Default for Lazy<T> {
    fn default() -> Self {
        Lazy(OnceLock::new())
    }
}

impl<T> Lazy<T> {
    /// The value, computed by `init` if this is the first use. Two threads may both run
    /// `init` the first time; one result is kept (both are the same function of the same
    /// module, so either is right).
    ///
    /// `init` runs with this thread's stream-capture mode relaxed ([`RelaxedCapture`]): a
    /// call's first use of a kernel may come while a stream is being captured into a CUDA
    /// graph, and loading a module, looking up a function or asking its occupancy is then
    /// a call the driver refuses under the default (global) capture mode, which
    /// invalidates the capture. None of these calls enqueues work, so none belongs in the
    /// graph.
    pub(crate) fn get_or_try(&self, init: impl FnOnce() -> Result<T>) -> Result<&T> {
        if let Some(v) = self.0.get() {
            return Ok(v);
        }
        let v = {
            let _relaxed = RelaxedCapture::new();
            init()?
        };
        Ok(self.0.get_or_init(|| v))
    }

    /// The value, if it has been computed.
    pub(crate) fn get(&self) -> Option<&T> {
        self.0.get()
    }

    /// The value, if it has been computed, leaving none.
    pub(crate) fn take(&mut self) -> Option<T> {
        self.0.take()
    }
}

/// A loaded module; unloaded on drop.
struct Module {
    ctx: Arc<CudaContext>,
    raw: sys::CUmodule,
}

impl Module {
    /// Loads `image`, a cubin or a NUL-terminated PTX text, into the context.
    ///
    /// # Safety
    /// `image` is a whole ELF image or NUL-terminated PTX; the driver reads it during the
    /// call only.
    unsafe fn load(ctx: &Arc<CudaContext>, image: &[u8]) -> Result<Self> {
        ctx.bind_to_thread()
            .map_err(driver_error("cuCtxSetCurrent"))?;
        // SAFETY: the caller's contract; the context is current on this thread.
        let raw = unsafe { result::module::load_data(image.as_ptr().cast()) }
            .map_err(driver_error("cuModuleLoadData"))?;
        Ok(Module {
            ctx: ctx.clone(),
            raw,
        })
    }

    fn function(&self, name: &str) -> Result<sys::CUfunction> {
        let c_name = CString::new(name).map_err(|_| Error::Driver {
            call: "cuModuleGetFunction",
            message: format!("{name:?}: entry name with a NUL byte"),
        })?;
        // SAFETY: `self.raw` is a loaded module until `self` drops.
        unsafe { result::module::get_function(self.raw, c_name) }.map_err(|e| Error::Driver {
            call: "cuModuleGetFunction",
            message: format!("{name}: {e}"),
        })
    }
}

impl Drop for Module {
    fn drop(&mut self) {
        // Errors cannot be returned from drop; a failed unload only leaks the module.
        if self.ctx.bind_to_thread().is_ok() {
            // SAFETY: loaded by `Module::load`, unloaded only here.
            let _ = unsafe { result::module::unload(self.raw) };
        }
    }
}

// SAFETY: a CUmodule handle is immutable after loading and the driver API is thread-safe;
// every use binds the context to the calling thread first.
unsafe impl Send for Module {}
// SAFETY: as above; `Module` has no interior mutability.
unsafe impl Sync for Module {}

/// The image a module is loaded from on this device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ImageKind {
    /// Machine code for `arch` (ptxas's name, e.g. `"sm_90a"`): nothing is compiled.
    MachineCode {
        /// The architecture the cubin is built for.
        arch: &'static str,
    },
    /// PTX, compiled by the driver for the device, one entry point at a time. `refused` is
    /// set when there was machine code for the device but the driver did not take it (a
    /// cubin from a newer ptxas than the driver knows).
    Ptx {
        /// Whether the driver refused this device's machine code.
        refused: bool,
    },
}

/// What a device has loaded of one module, for `Engine::loaded_images`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoadedImage {
    /// `"sm80"` or `"sm90a"`.
    pub module: &'static str,
    /// The image its kernels come from (chosen when the device's kernels were set up; loaded
    /// with the first entry point).
    pub image: ImageKind,
    /// Entry points looked up so far: 0 means nothing of the module is loaded yet.
    pub entry_points: usize,
}

impl std::fmt::Display for LoadedImage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.image {
            ImageKind::MachineCode { arch } => write!(f, "{}: machine code {arch}", self.module)?,
            ImageKind::Ptx { refused: false } => write!(f, "{}: PTX (JIT)", self.module)?,
            ImageKind::Ptx { refused: true } => write!(
                f,
                "{}: PTX (JIT; the driver refused the machine code)",
                self.module
            )?,
        }
        write!(f, ", {} entry points loaded", self.entry_points)
    }
}

/// One module's kernels on one device, loaded as calls need them.
pub(crate) struct ModuleLoader {
    ctx: Arc<CudaContext>,
    images: &'static ModuleImages,
    /// The machine code this device runs, unless PTX is forced.
    cubin: Option<&'static Cubin>,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// The module loaded from `cubin`, once an entry point was asked for.
    cubin_module: Option<Module>,
    /// The driver refused the cubin: PTX from then on.
    cubin_refused: bool,
    /// The decompressed PTX, once the PTX path was first needed.
    ptx: Option<AlignedBytes>,
    /// One module per entry point loaded from PTX.
    ptx_modules: Vec<(String, Module)>,
    /// Entry points handed out.
    entry_points: usize,
}

impl ModuleLoader {
    /// A loader of `images` for a device of compute capability `capability`; with
    /// `force_ptx`, machine code is never used (tests of the fallback).
    pub(crate) fn new(
        ctx: &Arc<CudaContext>,
        images: &'static ModuleImages,
        capability: (u32, u32),
        force_ptx: bool,
    ) -> Self {
        ModuleLoader {
            ctx: ctx.clone(),
            images,
            cubin: if force_ptx {
                None
            } else {
                images.best_cubin(capability)
            },
            state: Mutex::new(State::default()),
        }
    }

    /// The entry point `name`, loading what it needs on first use.
    pub(crate) fn function(&self, name: &str) -> Result<sys::CUfunction> {
        // A panic while loading leaves the state consistent: every field is set last.
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let f = self.function_locked(&mut state, name)?;
        state.entry_points += 1;
        Ok(f)
    }

    fn function_locked(&self, state: &mut State, name: &str) -> Result<sys::CUfunction> {
        if let (Some(cubin), false) = (self.cubin, state.cubin_refused) {
            if state.cubin_module.is_none() {
                let image = cubin.image.decompress()?;
                // SAFETY: `image` is a whole ELF image (checked by the build and the vendoring
                // test), alive during the call.
                match unsafe { Module::load(&self.ctx, image.as_bytes()) } {
                    Ok(m) => state.cubin_module = Some(m),
                    // Machine code the driver does not take (built by a newer ptxas than
                    // it knows) costs only the compile it was to save.
                    Err(_) => state.cubin_refused = true,
                }
            }
            if let Some(m) = &state.cubin_module {
                return m.function(name);
            }
        }
        if let Some((_, m)) = state.ptx_modules.iter().find(|(n, _)| n == name) {
            return m.function(name);
        }
        if state.ptx.is_none() {
            state.ptx = Some(self.images.ptx.decompress()?);
        }
        let ptx = state.ptx.as_ref().expect("set above").as_bytes();
        let text = entry_module(ptx, name).ok_or_else(|| Error::Driver {
            call: "cuModuleGetFunction",
            message: format!(
                "{name}: no such entry point in the {} PTX",
                self.images.name
            ),
        })?;
        // SAFETY: `text` is NUL-terminated PTX, alive during the call.
        let module = unsafe { Module::load(&self.ctx, &text) }?;
        let f = module.function(name)?;
        state.ptx_modules.push((name.to_string(), module));
        Ok(f)
    }

    pub(crate) fn loaded_image(&self) -> LoadedImage {
        let state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let image = match (self.cubin, state.cubin_refused) {
            (Some(c), false) => ImageKind::MachineCode { arch: c.arch },
            (Some(_), true) => ImageKind::Ptx { refused: true },
            (None, _) => ImageKind::Ptx { refused: false },
        };
        LoadedImage {
            module: self.images.name,
            image,
            entry_points: state.entry_points,
        }
    }
}

/// A PTX module holding one entry point of `ptx`: the module's header (everything before
/// its first entry: `.version`, `.target`, the shared-memory window, the panic handler) and
/// that entry's text, NUL-terminated. The kernels call no function of another entry, so the
/// result assembles on its own. `None` when `ptx` has no entry `name`.
fn entry_module(ptx: &[u8], name: &str) -> Option<Vec<u8>> {
    let text = std::str::from_utf8(ptx).ok()?;
    const ENTRY: &str = "\n.visible .entry ";
    let first = text.find(ENTRY)?;
    let start = text.find(&format!("{ENTRY}{name}("))?;
    let body = &text[start + 1..];
    let end = body[1..].find(ENTRY).map_or(body.len(), |e| e + 1);
    let mut module = Vec::with_capacity(first + end + 2);
    module.extend_from_slice(&text.as_bytes()[..first + 1]);
    module.extend_from_slice(&body.as_bytes()[..end]);
    module.extend_from_slice(b"\n\0");
    Some(module)
}

#[cfg(test)]
mod tests {
    use super::*;

    const PTX: &str = "\
.version 8.0
.target sm_90a
.address_size 64

.func panic()
{
\ttrap;
}
\t// .globl\tfirst
.visible .entry first(
\t.param .b64 first_param_0
)
{
\tret;
}
\t// .globl\tsecond
.visible .entry second(
\t.param .b64 second_param_0
)
{
\texit;
}
";

    fn module(name: &str) -> String {
        let m = entry_module(PTX.as_bytes(), name).unwrap();
        assert_eq!(m.last(), Some(&0), "NUL-terminated");
        String::from_utf8(m[..m.len() - 1].to_vec()).unwrap()
    }

    #[test]
    fn an_entry_module_is_the_header_and_that_entry_alone() {
        let first = module("first");
        assert!(first.starts_with(".version 8.0\n.target sm_90a\n"));
        assert!(first.contains(".func panic()"));
        assert!(first.contains(".visible .entry first(") && first.contains("ret;"));
        assert!(!first.contains(".entry second"));
        let second = module("second");
        assert!(second.contains(".func panic()"));
        assert!(second.contains(".visible .entry second(") && second.contains("exit;"));
        assert!(!second.contains(".entry first"));
    }

    #[test]
    fn a_missing_entry_or_a_prefix_of_a_name_is_not_found() {
        assert!(entry_module(PTX.as_bytes(), "third").is_none());
        assert!(entry_module(PTX.as_bytes(), "firs").is_none());
        assert!(entry_module(b"\xff\xfe", "first").is_none());
    }
}
