//! Where a device pointer points, asked of the driver before a launch. A kernel that reads
//! host memory the GPU cannot see, memory of another GPU, or a freed allocation faults, and a
//! fault leaves the whole CUDA context unusable (every later call of the process fails); the
//! driver's pointer attributes (`cuPointerGetAttributes`) turn each of these into an
//! [`Error::InaccessibleMemory`] before anything runs.
//!
//! What is accepted: device memory of the engine's device (from `cuMemAlloc`, a stream-ordered
//! pool or the virtual memory API), managed memory (from any device), and pinned or registered
//! host memory (which every device reads through unified addressing). Ordinary host memory
//! (`malloc`, the stack) is accepted only on systems whose device reads pageable memory
//! (`CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS`: HMM or ATS). Each buffer's first and last
//! element are checked; the driver cannot say whether a buffer is long enough when a caching
//! allocator (torch's) hands out pieces of one larger allocation, so the extent between them
//! stays the caller's guarantee.

use std::ffi::c_void;

use cudarc::driver::sys::{self, CUmemorytype, CUpointer_attribute};

use super::Loaded;
use crate::error::{Error, Operand as Which, Result};
use crate::types::{DType, Device, Gemm, GemmPointers};
use crate::validate::Extents;

/// What the driver says about one address.
#[derive(Debug, PartialEq, Eq)]
enum Memory {
    /// Device memory of the device with this ordinal.
    Device(usize),
    /// Managed (unified) memory: migrates to whichever device touches it.
    Managed,
    /// Pinned or registered host memory, mapped for every device.
    PinnedHost,
    /// A CUDA array (not linear memory).
    Array,
    /// An address the driver does not know.
    Unknown,
}

/// Asks the driver about `addr` (one `cuPointerGetAttributes` call).
fn memory_at(addr: usize) -> Result<Memory> {
    let mut attributes = [
        CUpointer_attribute::CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
        CUpointer_attribute::CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
        CUpointer_attribute::CU_POINTER_ATTRIBUTE_IS_MANAGED,
    ];
    // The driver writes an `unsigned int`, an `int` and a boolean; zeroed 8-byte slots hold
    // each whatever its width (an address the driver does not know leaves them zero).
    let (mut memory_type, mut ordinal, mut managed) = (0u32, 0i32, 0u64);
    let mut data: [*mut c_void; 3] = [
        (&raw mut memory_type).cast(),
        (&raw mut ordinal).cast(),
        (&raw mut managed).cast(),
    ];
    // SAFETY: three attributes and three slots of the types the driver writes for them; an
    // address is only looked up, never accessed.
    let status = unsafe {
        sys::cuPointerGetAttributes(
            attributes.len() as u32,
            attributes.as_mut_ptr(),
            data.as_mut_ptr(),
            addr as sys::CUdeviceptr,
        )
    };
    match status {
        sys::CUresult::CUDA_SUCCESS => {}
        // The driver documents default values, not an error, for an address it does not
        // know; should a version answer with one of these instead, the answer is the same.
        sys::CUresult::CUDA_ERROR_INVALID_VALUE | sys::CUresult::CUDA_ERROR_INVALID_DEVICE => {
            return Ok(Memory::Unknown)
        }
        e => {
            return Err(Error::Driver {
                call: "cuPointerGetAttributes",
                message: format!("{addr:#x}: {:?}", e),
            })
        }
    }
    const HOST: u32 = CUmemorytype::CU_MEMORYTYPE_HOST as u32;
    const DEVICE: u32 = CUmemorytype::CU_MEMORYTYPE_DEVICE as u32;
    const ARRAY: u32 = CUmemorytype::CU_MEMORYTYPE_ARRAY as u32;
    const UNIFIED: u32 = CUmemorytype::CU_MEMORYTYPE_UNIFIED as u32;
    Ok(match memory_type {
        _ if managed != 0 => Memory::Managed,
        HOST => Memory::PinnedHost,
        DEVICE | UNIFIED if ordinal >= 0 => Memory::Device(ordinal as usize),
        ARRAY => Memory::Array,
        _ => Memory::Unknown,
    })
}

/// Why `memory` is not usable by the device of `loaded`, if it is not.
fn unusable(loaded: &Loaded, memory: Memory) -> Option<String> {
    match memory {
        Memory::Device(o) if o == loaded.ordinal => None,
        Memory::Managed | Memory::PinnedHost => None,
        Memory::Unknown if loaded.pageable_memory_access => None,
        Memory::Device(o) => Some(format!(
            "memory of cuda:{o} (copy it to cuda:{} first, or use an engine of cuda:{o})",
            loaded.ordinal
        )),
        Memory::Array => Some("a CUDA array, not linear device memory".into()),
        Memory::Unknown => Some(
            "not memory the CUDA driver knows: ordinary host memory (malloc, the stack, a CPU \
             tensor), a freed allocation, or not an address"
                .into(),
        ),
    }
}

/// Checks the first and the last element of every buffer the call touches.
pub(super) fn check(loaded: &Loaded, g: &Gemm, ext: &Extents, p: &GemmPointers) -> Result<()> {
    let buffers = [
        (Which::A, p.a, ext.a, g.a.dtype),
        (Which::B, p.b, ext.b, g.b.dtype),
        (Which::Bias, p.bias, ext.bias, g.bias.unwrap_or(DType::F32)),
        (Which::C, p.c.cast_const(), ext.c, g.c.mode.dtype()),
    ];
    for (operand, ptr, elems, dtype) in buffers {
        check_buffer(loaded, operand, ptr, elems, dtype.size())?;
    }
    Ok(())
}

/// Checks the first and the last of the `elems` elements of `size` bytes at `ptr`.
pub(super) fn check_buffer(
    loaded: &Loaded,
    operand: Which,
    ptr: *const c_void,
    elems: usize,
    size: usize,
) -> Result<()> {
    if elems == 0 {
        return Ok(());
    }
    let first = ptr as usize;
    // Validation bounds every extent by isize::MAX bytes; a wrap here would be a bogus
    // pointer, which the lookup then rejects.
    let last = first.wrapping_add((elems - 1) * size);
    for (addr, which_end) in [(first, None), (last, Some(elems - 1))] {
        if which_end.is_some() && addr == first {
            continue;
        }
        if let Some(why) = unusable(loaded, memory_at(addr)?) {
            let found = match which_end {
                None => why,
                Some(i) => format!(
                    "{why} (this is its last element, {i} elements past its start at \
                     {first:#x})"
                ),
            };
            return Err(Error::InaccessibleMemory {
                operand,
                addr,
                found,
                device: Device::Cuda(loaded.ordinal),
            });
        }
    }
    Ok(())
}
