//! The counter of the grouped kernels' dynamic tile order (`kernels-gpu/src/hopper/grouped.rs`):
//! one `u32` per call, zero when the kernel starts, from which its blocks take their next
//! tiles.
//!
//! Stream-ordered: allocated and zeroed on the call's stream before the launch and freed on
//! it after (`cuMemAllocAsync`, `cuMemsetD32Async`, `cuMemFreeAsync`), so two calls in flight
//! never share a counter, the host waits for nothing, and a CUDA graph capture records the
//! three as nodes of the graph (each replay gets a zeroed counter of its own).

use cudarc::driver::sys;

use super::driver_error;
use crate::error::Result;

/// A zeroed `u32` in device memory for the work enqueued on `stream` after it; freed on the
/// same stream, after that work, when dropped.
pub(crate) struct TileCounter {
    address: sys::CUdeviceptr,
    stream: sys::CUstream,
}

impl TileCounter {
    /// Allocates and zeroes the counter on `stream`.
    ///
    /// # Safety
    /// `stream` is a stream of the current context (or null), and stays valid until the
    /// counter is dropped.
    pub(crate) unsafe fn new(stream: sys::CUstream) -> Result<Self> {
        let mut address = 0;
        // SAFETY: `address` is a valid place for the pointer; the stream is the caller's.
        unsafe { sys::cuMemAllocAsync(&mut address, size_of::<u32>(), stream) }
            .result()
            .map_err(driver_error("cuMemAllocAsync"))?;
        // From here on the drop frees it, on the same stream.
        let counter = TileCounter { address, stream };
        // SAFETY: one `u32` of the allocation above, ordered after it on the same stream.
        unsafe { sys::cuMemsetD32Async(address, 0, 1, stream) }
            .result()
            .map_err(driver_error("cuMemsetD32Async"))?;
        Ok(counter)
    }

    /// The counter's device address, for the kernel's parameter.
    pub(crate) fn address(&self) -> u64 {
        self.address
    }
}

impl Drop for TileCounter {
    fn drop(&mut self) {
        // SAFETY: allocated on this stream by `new`; the free is ordered after the work
        // enqueued on the stream since (the launch that reads the counter). A failure here
        // leaks four bytes of the pool and has no one to report to.
        let _ = unsafe { sys::cuMemFreeAsync(self.address, self.stream) };
    }
}
