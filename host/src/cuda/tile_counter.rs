//! The counter of the grouped kernels' dynamic tile order (`kernels-gpu/src/hopper/grouped.rs`):
//! one `u32` per call, zero when the kernel starts, from which its blocks take their next
//! tiles.
//!
//! Stream-ordered: allocated and zeroed on the call's stream before the launch and freed on
//! it after (`cuMemAllocFromPoolAsync`, `cuMemsetD32Async`, `cuMemFreeAsync`), so two calls
//! in flight never share a counter, the host waits for nothing, and a CUDA graph capture
//! records the three as nodes of the graph (each replay gets a zeroed counter of its own).
//!
//! The counters come from a memory pool of the library's own ([`CounterPool`]) that keeps
//! the memory its counters free for the next ones. The device's default pool hands its free
//! memory back to the driver at every synchronization (its release threshold is 0, and a
//! library should not change a pool it does not own); on an H100 the dynamic order's
//! forward took 6–29 µs less a call from the library's pool (docs/perf-notes.md).

use std::sync::OnceLock;

use cudarc::driver::sys;

use super::driver_error;
use super::relaxed_capture::RelaxedCapture;
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
    pub(crate) unsafe fn new(pool: &CounterPool, stream: sys::CUstream) -> Result<Self> {
        let mut address = 0;
        let bytes = size_of::<u32>();
        let (allocated, call) = match pool.get() {
            // SAFETY: `address` is a valid place for the pointer; the stream is the
            // caller's; the pool is a live pool of this context's device (never destroyed).
            Some(pool) => unsafe {
                let r = sys::cuMemAllocFromPoolAsync(&mut address, bytes, pool, stream);
                (r, "cuMemAllocFromPoolAsync")
            },
            // SAFETY: as above, from the device's default pool.
            None => unsafe {
                let r = sys::cuMemAllocAsync(&mut address, bytes, stream);
                (r, "cuMemAllocAsync")
            },
        };
        allocated.result().map_err(driver_error(call))?;
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

/// The memory pool of one device's tile counters, created with its first counter: pinned
/// device memory that stays with the pool once freed (release threshold `u64::MAX`). Where
/// the pool cannot be made, counters come from the device's default pool.
pub(crate) struct CounterPool {
    ordinal: i32,
    pool: OnceLock<Option<PoolHandle>>,
}

/// A pool the process keeps (as it keeps the device's modules), so never destroyed.
#[derive(Clone, Copy)]
struct PoolHandle(sys::CUmemoryPool);

// SAFETY: a memory pool handle is usable from any thread of the process (the driver API is
// thread-safe); the pool is never destroyed.
unsafe impl Send for PoolHandle {}
// SAFETY: as above.
unsafe impl Sync for PoolHandle {}

impl CounterPool {
    pub(crate) fn new(ordinal: usize) -> Self {
        CounterPool {
            ordinal: ordinal as i32,
            pool: OnceLock::new(),
        }
    }

    /// The pool, made on first use (`None` where the driver would not make it).
    fn get(&self) -> Option<sys::CUmemoryPool> {
        self.pool
            .get_or_init(|| {
                // A call's first counter may come while a stream captures a graph, where
                // the default capture mode refuses `cuMemPoolCreate` and the refusal
                // invalidates the capture: the pool is made outside of it, not recorded.
                let _relaxed = RelaxedCapture::new();
                // SAFETY: plain-data struct; zero is "no handle types, no limit".
                let mut props: sys::CUmemPoolProps = unsafe { std::mem::zeroed() };
                props.allocType = sys::CUmemAllocationType::CU_MEM_ALLOCATION_TYPE_PINNED;
                props.location.type_ = sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE;
                props.location.id = self.ordinal;
                let mut pool = std::ptr::null_mut();
                // SAFETY: valid pointers to the handle and the properties.
                unsafe { sys::cuMemPoolCreate(&mut pool, &props) }
                    .result()
                    .ok()?;
                let mut keep_all = u64::MAX;
                // SAFETY: the pool just made; the attribute takes a `u64`. Should it fail,
                // the pool still trims like the default one and is as usable.
                let _ = unsafe {
                    sys::cuMemPoolSetAttribute(
                        pool,
                        sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_RELEASE_THRESHOLD,
                        (&raw mut keep_all).cast(),
                    )
                };
                Some(PoolHandle(pool))
            })
            .map(|h| h.0)
    }
}
