//! Where the grouped kernels report a bad group end: one [`GroupErrorRecord`] per engine, in
//! mapped, page-locked host memory that the kernel writes over the bus and the host reads
//! without a driver call or a wait.
//!
//! The kernel never waits for its offsets (so the call can be captured in a CUDA graph): it
//! clamps a bad end and writes the record when it runs. The host learns of it at its first
//! look after that kernel has run: certain after a synchronize of the stream (or graph) that
//! ran it, and perhaps not yet at the next call's enqueue, while the kernel is still queued.
//! The record keeps one report, not a queue: a launch that finds a bad end while an earlier
//! report is still pending writes over it.
//!
//! A record is allocated with the engine's first grouped-kernel launch, not when the engine
//! is created: most engines never run one, and each record pins a page. The allocation is
//! made with the thread's capture mode relaxed ([`Lazy`]), since that launch may be the
//! first inside a CUDA graph capture.
//!
//! Records are never freed. A kernel, or a captured graph, that an engine launched may still
//! run after the engine is dropped (dropping an engine waits for nothing and invalidates no
//! work) and would write to freed host memory. A dropped engine's record goes back to its
//! device's pool instead ([`RecordPool`], kept with the modules for the process), and the
//! next engine that launches a grouped kernel takes it, cleared: memory stays bounded by the
//! most engines alive at once, and a late write from a dropped engine's work is at worst a
//! report to that next engine.

use std::ptr::{addr_of, addr_of_mut};
use std::sync::atomic::{fence, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use cudarc::driver::{sys, CudaContext};
use sgemm_bi_abi::params::GroupErrorRecord;

use super::driver_error;
use super::modules::Lazy;
use crate::error::{Error, Result};

/// One record in mapped, page-locked host memory: where the host reads it and the address
/// the kernel writes it at.
struct MappedRecord {
    host: *mut GroupErrorRecord,
    device: sys::CUdeviceptr,
}

// SAFETY: the record is plain memory that lives for the process (never freed, see the
// module comment); every access goes through `take`'s volatile reads and writes, serialized
// on the host by `EngineRecord::lock`.
unsafe impl Send for MappedRecord {}
// SAFETY: as above.
unsafe impl Sync for MappedRecord {}

impl MappedRecord {
    /// A new record, cleared, in the current context (which the caller makes current).
    fn allocate() -> Result<Self> {
        let mut host = std::ptr::null_mut();
        let bytes = size_of::<GroupErrorRecord>();
        // Portable: pinned for every context, so the address stays good whichever context
        // is current when it is read. Device-mapped: the kernel writes it directly.
        let flags = sys::CU_MEMHOSTALLOC_DEVICEMAP | sys::CU_MEMHOSTALLOC_PORTABLE;
        // SAFETY: `host` is a valid place for the pointer; the driver allocates `bytes`.
        unsafe { sys::cuMemHostAlloc(&mut host, bytes, flags) }
            .result()
            .map_err(driver_error("cuMemHostAlloc"))?;
        let host = host.cast::<GroupErrorRecord>();
        // SAFETY: `host` was just allocated for one record (the driver aligns to a page),
        // and no kernel knows of it yet.
        unsafe { host.write_volatile(GroupErrorRecord::default()) };
        let mut device = 0;
        // SAFETY: `host` is a mapped allocation of this context (flags above); flags must be 0.
        let mapped = unsafe { sys::cuMemHostGetDevicePointer_v2(&mut device, host.cast(), 0) }
            .result()
            .map_err(driver_error("cuMemHostGetDevicePointer"));
        if let Err(e) = mapped {
            // SAFETY: allocated above, never handed out.
            unsafe { sys::cuMemFreeHost(host.cast()) };
            return Err(e);
        }
        Ok(MappedRecord { host, device })
    }
}

/// A device's records that no engine holds, for the next engines to take (see the module
/// comment for why they are never freed).
pub(crate) struct RecordPool {
    ctx: Arc<CudaContext>,
    free: Mutex<Vec<MappedRecord>>,
}

impl RecordPool {
    pub(crate) fn new(ctx: &Arc<CudaContext>) -> Self {
        RecordPool {
            ctx: ctx.clone(),
            free: Mutex::new(Vec::new()),
        }
    }

    /// A cleared record: a pooled one, or a new one.
    fn take(&self) -> Result<MappedRecord> {
        let pooled = self
            .free
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pop();
        match pooled {
            Some(r) => {
                // SAFETY: a pooled record is valid for the process (module comment).
                unsafe { take(r.host) };
                Ok(r)
            }
            None => {
                self.ctx
                    .bind_to_thread()
                    .map_err(driver_error("cuCtxSetCurrent"))?;
                MappedRecord::allocate()
            }
        }
    }

    fn give_back(&self, record: MappedRecord) {
        self.free
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(record);
    }
}

/// An engine's record: taken from its device's pool with its first grouped-kernel launch,
/// given back when the engine drops.
pub(crate) struct EngineRecord {
    pool: Arc<RecordPool>,
    record: Lazy<MappedRecord>,
    /// Serializes taking the record from the pool (so that no thread takes a second one it
    /// would then drop) and taking a report (so that one report reaches one caller).
    lock: Mutex<()>,
}

impl EngineRecord {
    pub(crate) fn new(pool: &Arc<RecordPool>) -> Self {
        EngineRecord {
            pool: pool.clone(),
            record: Lazy::default(),
            lock: Mutex::new(()),
        }
    }

    /// The device address for a grouped kernel's `errors`, allocating the record on first
    /// use (with the thread's capture mode relaxed).
    pub(crate) fn device_address(&self) -> Result<u64> {
        if let Some(r) = self.record.get() {
            return Ok(r.device);
        }
        let _one = self.lock.lock().unwrap_or_else(PoisonError::into_inner);
        let r = self.record.get_or_try(|| self.pool.take())?;
        Ok(r.device)
    }

    /// The pending report, cleared; `Ok` when there is none. One volatile load when there
    /// is none.
    pub(crate) fn take_error(&self) -> Result<()> {
        let Some(r) = self.record.get() else {
            return Ok(());
        };
        // SAFETY: the record is valid for the process (module comment).
        if unsafe { addr_of!((*r.host).flag).read_volatile() } == 0 {
            return Ok(());
        }
        let _one = self.lock.lock().unwrap_or_else(PoisonError::into_inner);
        // SAFETY: as above; `lock` is held.
        match unsafe { take(r.host) } {
            Some(record) => Err(bad_end(&record)),
            None => Ok(()),
        }
    }
}

impl Drop for EngineRecord {
    fn drop(&mut self) {
        if let Some(r) = self.record.take() {
            self.pool.give_back(r);
        }
    }
}

/// The record at `record` if its flag is set, and the flag cleared; `None` when it is not.
///
/// The kernel writes the fields, fences, then sets the flag: the flag is read first and the
/// fields after it (acquire), so a set flag comes with its fields; the flag is cleared after
/// they are read (release), so a report the kernel writes meanwhile is not cleared unseen
/// before those reads.
///
/// # Safety
/// `record` is valid for reads and writes of a `GroupErrorRecord`, which only the device and
/// this function (on one host thread at a time) access.
unsafe fn take(record: *mut GroupErrorRecord) -> Option<GroupErrorRecord> {
    // SAFETY (every access): the caller's contract. Volatile: the device writes the memory
    // behind the compiler's back.
    let flag = unsafe { addr_of!((*record).flag).read_volatile() };
    if flag == 0 {
        return None;
    }
    fence(Ordering::Acquire);
    let read = unsafe {
        GroupErrorRecord {
            flag,
            group: addr_of!((*record).group).read_volatile(),
            end: addr_of!((*record).end).read_volatile(),
            limit: addr_of!((*record).limit).read_volatile(),
        }
    };
    fence(Ordering::Release);
    unsafe { addr_of_mut!((*record).flag).write_volatile(0) };
    Some(read)
}

/// The error a report stands for. The kernel stops at the first bad end, so the ends before
/// it are in order and within `limit`: an end in `0..=limit` is bad only by being below the
/// previous one.
fn bad_end(r: &GroupErrorRecord) -> Error {
    let (end, limit) = (r.end, r.limit);
    let what = if end < 0 {
        format!("offset {end} is negative")
    } else if end as u32 > limit {
        format!("offset {end} is past the end of the split dimension ({limit})")
    } else {
        format!("offset {end} is below the previous group's end")
    };
    Error::BadOffsets {
        group: r.group as usize,
        detail: format!(
            "{what}, found on the device by an earlier grouped call of this engine (which ran \
             with its ends clamped into 0..={limit})"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(group: u32, end: i32, limit: u32) -> GroupErrorRecord {
        GroupErrorRecord {
            flag: GroupErrorRecord::BAD_END,
            group,
            end,
            limit,
        }
    }

    #[test]
    fn a_report_is_taken_once() {
        let mut record = report(3, 250, 200);
        let p = &raw mut record;
        // SAFETY: `p` points to a live local record only this thread uses.
        assert_eq!(unsafe { take(p) }, Some(report(3, 250, 200)));
        // SAFETY: as above.
        assert_eq!(unsafe { take(p) }, None);
        assert_eq!(record.flag, 0);
        assert_eq!((record.group, record.end, record.limit), (3, 250, 200));
    }

    #[test]
    fn a_clear_record_has_no_report() {
        // Fields without the flag: the kernel had not finished writing, or the report was
        // taken already.
        let mut record = GroupErrorRecord {
            flag: 0,
            ..report(1, 5, 9)
        };
        // SAFETY: a live local record only this thread uses.
        assert_eq!(unsafe { take(&raw mut record) }, None);
    }

    #[test]
    fn the_error_names_the_group_end_and_limit() {
        let cases = [
            (
                report(1, 30, 200),
                "offset 30 is below the previous group's end",
            ),
            (
                report(3, 1 << 30, 200),
                "past the end of the split dimension (200)",
            ),
            (report(0, -4, 64), "offset -4 is negative"),
        ];
        for (r, says) in cases {
            let Error::BadOffsets { group, detail } = bad_end(&r) else {
                panic!("not BadOffsets");
            };
            assert_eq!(group, r.group as usize);
            assert!(detail.contains(says), "{detail}");
            assert!(detail.contains("on the device"), "{detail}");
            assert!(detail.contains("earlier grouped call"), "{detail}");
            assert!(detail.contains(&r.limit.to_string()), "{detail}");
        }
    }
}
