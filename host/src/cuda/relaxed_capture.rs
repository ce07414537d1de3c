//! Setup calls made while a stream may be capturing into a CUDA graph: loading a module on a
//! kernel's first use, making the tile counters' memory pool. Such a call enqueues no work,
//! so it belongs in no graph, but under the default (global) capture mode the driver
//! refuses it on any thread while some stream captures, and the refusal invalidates the
//! capture.

use cudarc::driver::sys;

/// This thread's stream-capture interaction mode set to relaxed for the guard's lifetime
/// (`cuThreadExchangeStreamCaptureMode`), and the previous mode restored on drop: the
/// driver then lets this thread make calls that are not stream work, such as loading a
/// module, while any stream is capturing (what torch does around its own lazy setup).
pub(crate) struct RelaxedCapture {
    previous: Option<sys::CUstreamCaptureMode>,
}

impl RelaxedCapture {
    pub(crate) fn new() -> Self {
        let mut mode = sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_RELAXED;
        // SAFETY: `mode` is a valid, writable CUstreamCaptureMode; the call only swaps this
        // thread's mode with it. Failure (no driver) leaves the mode as it was.
        let ok = unsafe { sys::cuThreadExchangeStreamCaptureMode(&mut mode) }
            == sys::CUresult::CUDA_SUCCESS;
        RelaxedCapture {
            previous: ok.then_some(mode),
        }
    }
}

impl Drop for RelaxedCapture {
    fn drop(&mut self) {
        if let Some(mut mode) = self.previous {
            // SAFETY: as in `new`; this puts back the mode `new` took out.
            unsafe { sys::cuThreadExchangeStreamCaptureMode(&mut mode) };
        }
    }
}
