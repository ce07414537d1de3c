//! The kernel images a library embeds (`build.rs` of the `sgemm-bi` crate makes them), and
//! which of them a GPU runs.
//!
//! Each kernel module comes as PTX and as machine code (cubins) for a list of architectures,
//! all zstd-compressed: machine code is what makes the first call fast (the driver compiles
//! nothing), the PTX is the fallback for GPUs no cubin runs on, compiled by the driver. A
//! cubin built for compute capability X.y runs on X.z for every z ≥ y (NVIDIA's binary
//! compatibility within a major version), except the architecture-specific `a` targets,
//! which run on exactly their own capability.

use crate::error::{Error, Result};

/// One zstd-compressed image and its size uncompressed.
#[derive(Debug)]
pub struct Compressed {
    /// The zstd frame.
    pub zstd: &'static [u8],
    /// Bytes once decompressed.
    pub len: usize,
}

impl Compressed {
    /// The image, decompressed into memory aligned for an ELF file's 8-byte fields (the
    /// driver reads cubins in place).
    pub(crate) fn decompress(&self) -> Result<AlignedBytes> {
        let mut words = vec![0u64; self.len.div_ceil(8)];
        // SAFETY: `words` owns `8 * words.len() >= self.len` initialized bytes; u8 has no
        // alignment or validity requirement, and the slice dies before `words` is moved.
        let bytes = unsafe {
            std::slice::from_raw_parts_mut(words.as_mut_ptr().cast::<u8>(), words.len() * 8)
        };
        let written = zstd::bulk::decompress_to_buffer(self.zstd, &mut bytes[..self.len])
            .map_err(|e| corrupt(format!("decompressing a kernel image: {e}")))?;
        if written != self.len {
            return Err(corrupt(format!(
                "a kernel image decompressed to {written} bytes, {} expected",
                self.len
            )));
        }
        Ok(AlignedBytes {
            words,
            len: self.len,
        })
    }
}

impl Compressed {
    /// The image, decompressed (for readers of the embedded images: tests, tools).
    pub fn to_vec(&self) -> Result<Vec<u8>> {
        Ok(self.decompress()?.as_bytes().to_vec())
    }
}

fn corrupt(message: String) -> Error {
    Error::Driver {
        call: "zstd",
        message,
    }
}

/// Decompressed image bytes, 8-byte aligned.
pub(crate) struct AlignedBytes {
    words: Vec<u64>,
    len: usize,
}

impl AlignedBytes {
    pub(crate) fn as_bytes(&self) -> &[u8] {
        // SAFETY: `words` holds at least `len` initialized bytes and outlives the slice.
        unsafe { std::slice::from_raw_parts(self.words.as_ptr().cast::<u8>(), self.len) }
    }
}

/// A module's machine code for one architecture.
#[derive(Debug)]
pub struct Cubin {
    /// ptxas's name of the architecture, e.g. `"sm_86"` or `"sm_90a"`.
    pub arch: &'static str,
    /// The compute capability it is built for.
    pub capability: (u32, u32),
    /// The ELF image.
    pub image: Compressed,
}

impl Cubin {
    /// Architecture-specific targets (`sm_90a`) run on their own capability only.
    fn arch_specific(&self) -> bool {
        self.arch.ends_with('a')
    }

    /// Whether a device of compute capability `device` runs this machine code.
    pub(crate) fn runs_on(&self, device: (u32, u32)) -> bool {
        if self.arch_specific() {
            device == self.capability
        } else {
            device.0 == self.capability.0 && device.1 >= self.capability.1
        }
    }
}

/// One kernel module's images.
#[derive(Debug)]
pub struct ModuleImages {
    /// `"sm80"` or `"sm90a"`, as in `vendored/`.
    pub name: &'static str,
    /// The architecture the PTX is written for (its `.target`): `"sm_80"` runs on every
    /// GPU from 8.0 on, `"sm_90a"` on 9.0 only.
    pub ptx_target: &'static str,
    /// The PTX text. Empty (`len == 0`): the module is not available.
    pub ptx: Compressed,
    /// Machine code, by architecture.
    pub cubins: &'static [Cubin],
}

impl ModuleImages {
    const EMPTY: ModuleImages = ModuleImages {
        name: "",
        ptx_target: "",
        ptx: Compressed { zstd: &[], len: 0 },
        cubins: &[],
    };

    /// The machine code a device of capability `device` runs best: the cubin of the same
    /// major version built for the highest minor version at or below the device's (ptxas
    /// tunes for each), if any.
    pub(crate) fn best_cubin(&self, device: (u32, u32)) -> Option<&'static Cubin> {
        self.cubins
            .iter()
            .filter(|c| c.runs_on(device))
            .max_by_key(|c| c.capability)
    }

    pub(crate) fn available(&self) -> bool {
        self.ptx.len > 0
    }
}

/// Every module the engine may load (see `kernels-gpu/`).
#[derive(Debug)]
pub struct KernelImages {
    /// Kernels that need nothing newer than sm_80: the scalar tier and the tensor-core
    /// tier's mma.sync path, on every GPU from compute capability 8.0 on.
    pub sm80: ModuleImages,
    /// The tensor-core tier's Hopper path (wgmma + TMA) and the scalar tier's `_sm90`
    /// entries, on compute capability 9.0 only.
    pub sm90a: ModuleImages,
}

impl KernelImages {
    /// No kernels: for programs that use only the CPU engine (a CUDA engine with these
    /// runs neither tier).
    pub const NONE: KernelImages = KernelImages {
        sm80: ModuleImages::EMPTY,
        sm90a: ModuleImages::EMPTY,
    };

    /// Both modules, in the order above.
    pub fn modules(&self) -> [&ModuleImages; 2] {
        [&self.sm80, &self.sm90a]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const fn cubin(arch: &'static str, capability: (u32, u32)) -> Cubin {
        Cubin {
            arch,
            capability,
            image: Compressed { zstd: &[], len: 0 },
        }
    }

    static PORTABLE: [Cubin; 6] = [
        cubin("sm_80", (8, 0)),
        cubin("sm_86", (8, 6)),
        cubin("sm_89", (8, 9)),
        cubin("sm_90", (9, 0)),
        cubin("sm_100", (10, 0)),
        cubin("sm_120", (12, 0)),
    ];
    static HOPPER: [Cubin; 1] = [cubin("sm_90a", (9, 0))];

    fn module(cubins: &'static [Cubin]) -> ModuleImages {
        ModuleImages {
            name: "test",
            ptx_target: "sm_80",
            ptx: Compressed { zstd: &[], len: 1 },
            cubins,
        }
    }

    fn best(cubins: &'static [Cubin], device: (u32, u32)) -> Option<&'static str> {
        module(cubins).best_cubin(device).map(|c| c.arch)
    }

    #[test]
    fn each_gpu_gets_the_newest_cubin_of_its_major_version_not_above_it() {
        assert_eq!(best(&PORTABLE, (8, 0)), Some("sm_80"));
        assert_eq!(best(&PORTABLE, (8, 6)), Some("sm_86"));
        assert_eq!(best(&PORTABLE, (8, 7)), Some("sm_86")); // Jetson Orin
        assert_eq!(best(&PORTABLE, (8, 9)), Some("sm_89"));
        assert_eq!(best(&PORTABLE, (9, 0)), Some("sm_90"));
        assert_eq!(best(&PORTABLE, (10, 0)), Some("sm_100"));
        assert_eq!(best(&PORTABLE, (10, 3)), Some("sm_100"));
        assert_eq!(best(&PORTABLE, (12, 1)), Some("sm_120"));
    }

    #[test]
    fn gpus_without_machine_code_compile_the_ptx() {
        // Older than any cubin, or a major version none is built for.
        assert_eq!(best(&PORTABLE, (7, 5)), None);
        assert_eq!(best(&PORTABLE, (11, 0)), None);
        assert_eq!(best(&PORTABLE, (13, 0)), None);
    }

    #[test]
    fn architecture_specific_code_runs_on_its_own_capability_only() {
        assert_eq!(best(&HOPPER, (9, 0)), Some("sm_90a"));
        assert_eq!(best(&HOPPER, (9, 1)), None);
        assert_eq!(best(&HOPPER, (10, 0)), None);
    }

    #[test]
    fn a_corrupt_image_is_an_error_not_a_crash() {
        let bad = Compressed {
            zstd: b"not zstd",
            len: 16,
        };
        assert!(bad.decompress().is_err());
        let good = zstd::bulk::compress(b"0123456789", 3).unwrap();
        let short = Compressed {
            zstd: Box::leak(good.into_boxed_slice()),
            len: 12,
        };
        assert!(short.decompress().is_err());
    }
}
