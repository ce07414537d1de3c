//! The host's side of the kernel catalogue (`sgemm_bi_abi::catalogue`): entry points found
//! by a typed key, never by a name built from pieces, and loaded once per device.
//!
//! Each family's planner holds `const` tables of [`KernelId`]s, made at compile time by
//! [`id`] from the catalogue's [`Kind`] keys, so a call costs an index into an array; the
//! first call of an entry loads it ([`Entries::get`]) with the block size, shared memory and
//! module the catalogue gives it.

use std::marker::PhantomData;
use std::sync::Arc;

use cudarc::driver::{result, sys};
use sgemm_bi_abi::catalogue::{self, Family, KernelSpec, Kind, Module, KERNELS};

use super::kernel_abi::{Kernel, KernelParams};
use super::modules::{Lazy, ModuleLoader};
use crate::error::{Error, Result};

/// The index of a catalogue entry whose parameter is `P`.
pub(crate) struct KernelId<P> {
    index: u16,
    params: PhantomData<fn(&P)>,
}

impl<P> Clone for KernelId<P> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<P> Copy for KernelId<P> {}

impl<P> std::fmt::Debug for KernelId<P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(KERNELS[self.index as usize].name)
    }
}

impl<P> PartialEq for KernelId<P> {
    fn eq(&self, other: &Self) -> bool {
        self.index == other.index
    }
}

impl<P> Eq for KernelId<P> {}

impl<P> KernelId<P> {
    /// The catalogue's entry.
    pub(crate) fn spec(self) -> &'static KernelSpec {
        &KERNELS[self.index as usize]
    }
}

/// The entry of `kind`, if the catalogue has one. Meant for `const` tables: a key whose
/// entry takes another parameter type than `P` fails to compile.
pub(crate) const fn id<P: KernelParams>(kind: Kind) -> Option<KernelId<P>> {
    match catalogue::find(&kind) {
        Some(index) => {
            assert!(
                KERNELS[index].param() as u8 == P::KIND as u8,
                "a catalogue entry of another parameter type"
            );
            Some(KernelId {
                index: index as u16,
                params: PhantomData,
            })
        }
        None => None,
    }
}

/// The entry of `kind`, which the catalogue must have: for the `const` tables of a family
/// whose every slot is built, so that a slot the catalogue lacks fails the build.
pub(crate) const fn expect_id<P: KernelParams>(kind: Kind) -> KernelId<P> {
    match id(kind) {
        Some(id) => id,
        None => panic!("the kernel catalogue has no entry of this kind"),
    }
}

const _: () = assert!(KERNELS.len() <= u16::MAX as usize);

/// Shared memory a function gets without asking (`CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES`
/// raises it, per function).
const DEFAULT_SMEM: u32 = 48 * 1024;

/// A loaded entry point and the number of its blocks the whole device runs at once.
#[derive(Clone, Copy)]
struct Loaded {
    function: sys::CUfunction,
    resident: u32,
}

/// The catalogue's entry points on one device, each loaded on its first call.
pub(crate) struct Entries {
    sm80: Option<Arc<ModuleLoader>>,
    sm90a: Option<Arc<ModuleLoader>>,
    sms: u32,
    /// Indexed like `KERNELS`.
    loaded: Box<[Lazy<Loaded>]>,
}

// SAFETY: CUfunction handles are immutable after loading and the CUDA driver API is
// thread-safe; every use binds the context to the calling thread first. The slots fill
// themselves once (`OnceLock`), the loaders guard their own state (`Mutex`).
unsafe impl Send for Entries {}
// SAFETY: as above.
unsafe impl Sync for Entries {}

impl Entries {
    /// The entries of the modules this device loads, on `sms` multiprocessors; loads nothing
    /// yet.
    pub(crate) fn new(
        sm80: Option<Arc<ModuleLoader>>,
        sm90a: Option<Arc<ModuleLoader>>,
        sms: u32,
    ) -> Self {
        Entries {
            sm80,
            sm90a,
            sms,
            loaded: KERNELS.iter().map(|_| Lazy::default()).collect(),
        }
    }

    /// Whether this device loads `module`.
    pub(crate) fn has(&self, module: Module) -> bool {
        self.module(module).is_some()
    }

    fn module(&self, module: Module) -> Option<&Arc<ModuleLoader>> {
        match module {
            Module::Sm80 => self.sm80.as_ref(),
            Module::Sm90a => self.sm90a.as_ref(),
        }
    }

    /// The entry `id`, loaded on first use: looked up in its module, allowed the dynamic
    /// shared memory it needs where that is above the default, and for the tiled scalar
    /// kernels (whose grid is one wave) measured for occupancy. After the first call, one
    /// atomic load.
    pub(crate) fn get<P: KernelParams>(&self, id: KernelId<P>) -> Result<Kernel<P>> {
        let spec = id.spec();
        let loaded = self.loaded[id.index as usize].get_or_try(|| self.load(spec))?;
        Ok(Kernel {
            function: loaded.function,
            spec,
            resident: loaded.resident,
            params: PhantomData,
        })
    }

    fn load(&self, spec: &KernelSpec) -> Result<Loaded> {
        let module = self.module(spec.kind.module).ok_or_else(|| Error::Launch {
            kernel: spec.name.to_string(),
            message: format!(
                "the {} module is not loaded on this device",
                spec.kind.module.name()
            ),
        })?;
        let function = module.function(spec.name)?;
        let smem = spec.smem_bytes();
        let driver = |call: &'static str| {
            move |e: result::DriverError| Error::Driver {
                call,
                message: format!("{}: {e}", spec.name),
            }
        };
        if smem > DEFAULT_SMEM {
            // SAFETY: `function` is a function of a module loaded in this device's context,
            // which `function` left current on this thread.
            unsafe {
                result::function::set_function_attribute(
                    function,
                    sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                    smem as i32,
                )
            }
            .map_err(driver("cuFuncSetAttribute"))?;
        }
        let resident = match spec.kind.family {
            Family::ScalarTiled { .. } => {
                // SAFETY: as above.
                let per_sm = unsafe {
                    result::occupancy::max_active_block_per_multiprocessor(
                        function,
                        spec.threads() as i32,
                        smem as usize,
                    )
                }
                .map_err(driver("cuOccupancyMaxActiveBlocksPerMultiprocessor"))?;
                (per_sm.max(1) as u32).saturating_mul(self.sms)
            }
            _ => u32::MAX,
        };
        Ok(Loaded { function, resident })
    }
}
