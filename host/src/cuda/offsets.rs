//! Group offsets that live in device memory, read back to the host for a grouped call.
//!
//! Where no grouped kernel takes a call (`GroupedLaunch::ReadBack` in `mod.rs`), it launches
//! each group's dense kernel, so its launch sizes need the group sizes on the host. Offsets on the device are copied on the caller's stream (after the
//! work that wrote them) and waited for: a synchronization, so not inside a CUDA graph
//! capture, where the call is refused with a message saying to pass host offsets.

use cudarc::driver::sys;

use super::CudaBackend;
use crate::error::{Error, Result};
use crate::types::Stream;

impl CudaBackend {
    /// The `groups` offsets at device address `offsets`, once the work already queued on
    /// `stream` has completed.
    ///
    /// # Safety
    /// `offsets` is a device pointer of this context valid for `groups` `i32`s until the work
    /// on `stream` completes, and `stream` is a stream of this context (or null).
    pub(crate) unsafe fn read_offsets(
        &self,
        offsets: *const i32,
        groups: usize,
        stream: Stream,
    ) -> Result<Vec<i32>> {
        let failed = |call: &'static str| {
            move |status: sys::CUresult| Error::Driver {
                call,
                message: format!("{status:?}"),
            }
        };
        let ok = |status: sys::CUresult| {
            if status == sys::CUresult::CUDA_SUCCESS {
                Ok(())
            } else {
                Err(status)
            }
        };
        self.loaded
            .ctx
            .bind_to_thread()
            .map_err(super::driver_error("cuCtxSetCurrent"))?;
        let stream = stream.0 as sys::CUstream;
        let mut capture = sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE;
        // SAFETY: `stream` is a stream of this context or null (caller), and `capture` is a
        // valid place for the status.
        ok(unsafe { sys::cuStreamIsCapturing(stream, &mut capture) })
            .map_err(failed("cuStreamIsCapturing"))?;
        if capture != sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE {
            return Err(Error::Unsupported(
                "a grouped call with its offsets in device memory reads them back, which a \
                 CUDA graph capture does not allow; pass the offsets in host memory"
                    .into(),
            ));
        }
        let mut host = vec![0i32; groups];
        if groups > 0 {
            // SAFETY: `host` holds `groups` i32s; `offsets` is valid for as many on the device
            // (caller). The copy is ordered after the work on `stream`, and the synchronize
            // below waits for it before `host` is read or dropped.
            ok(unsafe {
                sys::cuMemcpyDtoHAsync_v2(
                    host.as_mut_ptr().cast(),
                    offsets as sys::CUdeviceptr,
                    groups * size_of::<i32>(),
                    stream,
                )
            })
            .map_err(failed("cuMemcpyDtoHAsync"))?;
            // SAFETY: as above.
            ok(unsafe { sys::cuStreamSynchronize(stream) })
                .map_err(failed("cuStreamSynchronize"))?;
        }
        Ok(host)
    }
}
