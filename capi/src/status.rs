//! The status codes, the thread-local last-error message and the panic boundary that every
//! export goes through.

use std::any::Any;
use std::cell::RefCell;
use std::ffi::{c_char, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};

use sgemm_bi::Error;

/// What a call did. Every function of this library that can fail returns one of these;
/// `sgemm_bi_last_error_message()` then says what went wrong, naming the parameter or
/// operand. The numbers are stable: a code keeps its number in every later release, and new
/// codes are only ever appended. A call that returns anything but `SGEMM_BI_STATUS_OK`
/// launched nothing and wrote none of the caller's buffers (output parameters excepted, as
/// each function says).
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum sgemm_bi_status {
    /// Success.
    Ok = 0,
    /// A required pointer was NULL: the engine handle, a descriptor, an output parameter,
    /// or a buffer the call reads or writes (A, B or C of a non-empty call; the bias when
    /// the descriptor declares one).
    NullParameter = 1,
    /// A panic inside the library was caught at the boundary. This is a bug of the
    /// library; please report it with the message.
    Panic = 2,
    /// An argument has a value this ABI does not define: an unknown enum value, a
    /// `struct_size` that is not this header's `sizeof`, a non-zero reserved field, a bias
    /// pointer when no bias is declared, an ordinal for the CPU backend.
    InvalidArgument = 3,
    /// The memory extent of an operand, in elements or bytes, overflows the address space.
    Overflow = 4,
    /// A leading dimension is smaller than the row (row-major) or column (column-major)
    /// length it must step over.
    BadLeadingDimension = 5,
    /// A batch stride of C makes two batch entries write the same elements.
    OverlappingBatches = 6,
    /// The dtypes do not combine: A and B differ, the bias is neither f32 nor the input
    /// dtype, an accumulating output is not f32, or f32 inputs ask for the tensor-core tier.
    UnsupportedDtype = 7,
    /// A typed buffer is shorter than the call needs (the Rust API's host slices; no
    /// function of this ABI returns it today).
    BufferTooSmall = 8,
    /// A typed buffer's dtype is not the descriptor's (the Rust API's host slices; no
    /// function of this ABI returns it today).
    DtypeMismatch = 9,
    /// A device pointer is not a multiple of its element size (CUDA engines).
    Misaligned = 10,
    /// The engine's device cannot run the requested tier.
    TierUnavailable = 11,
    /// No CUDA driver (libcuda.so.1) could be loaded or initialised. The CPU backend still
    /// works.
    NoDriver = 12,
    /// There is no CUDA device with the requested ordinal.
    NoDevice = 13,
    /// The call needs another kind of engine than the one given.
    WrongDevice = 14,
    /// A CUDA driver call failed; the message names the call and the driver's error.
    DriverError = 15,
    /// A kernel launch failed; the message names the kernel and the driver's error.
    LaunchFailed = 16,
    /// An error that this ABI version has no dedicated code for (from a newer engine); the
    /// message describes it.
    Other = 17,
    /// C shares memory with an input: the bytes C spans (from its first to just past its
    /// last element) meet those of A, B or the bias. The message gives both ranges.
    OverlappingOperands = 18,
    /// A CUDA engine was given a pointer its device cannot use: ordinary host memory (on
    /// systems where the GPU cannot read pageable memory), memory of another GPU, a CUDA
    /// array, or an address the driver does not know (a freed allocation). Found by the
    /// engine's pointer checks (`sgemm_bi_engine_set_pointer_checks`), before anything runs.
    InaccessibleMemory = 19,
    /// A grouped call's offsets are not one non-decreasing end per group between 0 and the
    /// total of the dimension they split (the message names the first bad group). Checked
    /// before anything runs, also for offsets in device memory that are read back first;
    /// those a grouped kernel reads on the device are reported once it has run, by
    /// `sgemm_bi_engine_take_device_error` and the engine's next grouped call.
    BadOffsets = 20,
    /// The call is valid, but this engine cannot run it in this situation (the message says
    /// what would work), e.g. a grouped call reading device offsets back during graph
    /// capture.
    Unsupported = 21,
}

/// Every code, in numeric order (`ALL[i] as u32 == i`).
pub(crate) const ALL: [sgemm_bi_status; 22] = [
    sgemm_bi_status::Ok,
    sgemm_bi_status::NullParameter,
    sgemm_bi_status::Panic,
    sgemm_bi_status::InvalidArgument,
    sgemm_bi_status::Overflow,
    sgemm_bi_status::BadLeadingDimension,
    sgemm_bi_status::OverlappingBatches,
    sgemm_bi_status::UnsupportedDtype,
    sgemm_bi_status::BufferTooSmall,
    sgemm_bi_status::DtypeMismatch,
    sgemm_bi_status::Misaligned,
    sgemm_bi_status::TierUnavailable,
    sgemm_bi_status::NoDriver,
    sgemm_bi_status::NoDevice,
    sgemm_bi_status::WrongDevice,
    sgemm_bi_status::DriverError,
    sgemm_bi_status::LaunchFailed,
    sgemm_bi_status::Other,
    sgemm_bi_status::OverlappingOperands,
    sgemm_bi_status::InaccessibleMemory,
    sgemm_bi_status::BadOffsets,
    sgemm_bi_status::Unsupported,
];

impl sgemm_bi_status {
    /// The code's name as the header spells it, NUL-terminated.
    const fn c_name(self) -> &'static str {
        match self {
            Self::Ok => "SGEMM_BI_STATUS_OK\0",
            Self::NullParameter => "SGEMM_BI_STATUS_NULL_PARAMETER\0",
            Self::Panic => "SGEMM_BI_STATUS_PANIC\0",
            Self::InvalidArgument => "SGEMM_BI_STATUS_INVALID_ARGUMENT\0",
            Self::Overflow => "SGEMM_BI_STATUS_OVERFLOW\0",
            Self::BadLeadingDimension => "SGEMM_BI_STATUS_BAD_LEADING_DIMENSION\0",
            Self::OverlappingBatches => "SGEMM_BI_STATUS_OVERLAPPING_BATCHES\0",
            Self::UnsupportedDtype => "SGEMM_BI_STATUS_UNSUPPORTED_DTYPE\0",
            Self::BufferTooSmall => "SGEMM_BI_STATUS_BUFFER_TOO_SMALL\0",
            Self::DtypeMismatch => "SGEMM_BI_STATUS_DTYPE_MISMATCH\0",
            Self::Misaligned => "SGEMM_BI_STATUS_MISALIGNED\0",
            Self::TierUnavailable => "SGEMM_BI_STATUS_TIER_UNAVAILABLE\0",
            Self::NoDriver => "SGEMM_BI_STATUS_NO_DRIVER\0",
            Self::NoDevice => "SGEMM_BI_STATUS_NO_DEVICE\0",
            Self::WrongDevice => "SGEMM_BI_STATUS_WRONG_DEVICE\0",
            Self::DriverError => "SGEMM_BI_STATUS_DRIVER_ERROR\0",
            Self::LaunchFailed => "SGEMM_BI_STATUS_LAUNCH_FAILED\0",
            Self::Other => "SGEMM_BI_STATUS_OTHER\0",
            Self::OverlappingOperands => "SGEMM_BI_STATUS_OVERLAPPING_OPERANDS\0",
            Self::InaccessibleMemory => "SGEMM_BI_STATUS_INACCESSIBLE_MEMORY\0",
            Self::BadOffsets => "SGEMM_BI_STATUS_BAD_OFFSETS\0",
            Self::Unsupported => "SGEMM_BI_STATUS_UNSUPPORTED\0",
        }
    }

    /// The code of each kind of library error.
    pub(crate) fn of(e: &Error) -> Self {
        match e {
            Error::NullPointer(_) => Self::NullParameter,
            Error::Overflow { .. } => Self::Overflow,
            Error::BadLeadingDimension { .. } => Self::BadLeadingDimension,
            Error::OverlappingBatches { .. } => Self::OverlappingBatches,
            Error::UnsupportedDtype(_) => Self::UnsupportedDtype,
            Error::BufferTooSmall { .. } => Self::BufferTooSmall,
            Error::DtypeMismatch { .. } => Self::DtypeMismatch,
            Error::Misaligned { .. } => Self::Misaligned,
            Error::TierUnavailable { .. } => Self::TierUnavailable,
            Error::NoDriver(_) => Self::NoDriver,
            Error::NoDevice { .. } => Self::NoDevice,
            Error::WrongDevice(_) => Self::WrongDevice,
            Error::Driver { .. } => Self::DriverError,
            Error::Launch { .. } => Self::LaunchFailed,
            Error::OverlappingOperands { .. } => Self::OverlappingOperands,
            Error::InaccessibleMemory { .. } => Self::InaccessibleMemory,
            Error::BadOffsets { .. } => Self::BadOffsets,
            Error::Unsupported(_) => Self::Unsupported,
            // `Error` is non-exhaustive: a kind added later still reaches the caller, with
            // its message, until it gets a code of its own.
            _ => Self::Other,
        }
    }
}

/// Why a call failed: the code returned and the message stored for the calling thread.
#[derive(Debug)]
pub(crate) struct Failure {
    pub status: sgemm_bi_status,
    pub message: String,
}

impl Failure {
    /// `what` (a parameter name, e.g. `"engine"` or `"desc"`) was NULL.
    pub fn null(what: &str) -> Self {
        Failure {
            status: sgemm_bi_status::NullParameter,
            message: format!("{what} is NULL"),
        }
    }

    pub fn invalid(message: impl Into<String>) -> Self {
        Failure {
            status: sgemm_bi_status::InvalidArgument,
            message: message.into(),
        }
    }

    pub fn new(status: sgemm_bi_status, message: impl Into<String>) -> Self {
        Failure {
            status,
            message: message.into(),
        }
    }
}

impl From<Error> for Failure {
    fn from(e: Error) -> Self {
        Failure {
            status: sgemm_bi_status::of(&e),
            message: e.to_string(),
        }
    }
}

pub(crate) type CResult<T = ()> = Result<T, Failure>;

thread_local! {
    /// The message of the last status-returning call on this thread ("" after a success).
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
}

fn set_last_error(message: String) {
    // A message never contains NUL (they come from Display impls), but a CString must not.
    let message = CString::new(message.replace('\0', "\\0")).unwrap_or_default();
    // `try_with` fails only while the thread is being torn down; there is nobody left to
    // read the message then.
    let _ = LAST_ERROR.try_with(|m| *m.borrow_mut() = message);
}

fn panic_message(payload: &(dyn Any + Send)) -> &str {
    if let Some(s) = payload.downcast_ref::<&str>() {
        s
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s
    } else {
        "(a non-string panic payload)"
    }
}

/// Runs the body of an export: catches panics, turns the outcome into a status code and
/// stores its message for `sgemm_bi_last_error_message()`.
pub(crate) fn boundary(body: impl FnOnce() -> CResult) -> sgemm_bi_status {
    // AssertUnwindSafe: after a panic nothing of the body's state is used again; the engine
    // is only borrowed shared, and the one state a call changes (taking a device error
    // report) is complete or untouched at every point a panic could unwind from.
    let (status, message) = match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(())) => (sgemm_bi_status::Ok, String::new()),
        Ok(Err(f)) => (f.status, f.message),
        Err(payload) => (
            sgemm_bi_status::Panic,
            format!(
                "panic inside sgemm_bi (a bug, please report it): {}",
                panic_message(&*payload)
            ),
        ),
    };
    set_last_error(message);
    status
}

/// The message of the last call on the calling thread that returned a status: what went
/// wrong, naming the parameter or operand; the empty string after a call that returned
/// `SGEMM_BI_STATUS_OK`. Never NULL. The pointer stays valid until the next call on this
/// thread of a function that returns a status; copy the text to keep it longer.
#[no_mangle]
pub extern "C" fn sgemm_bi_last_error_message() -> *const c_char {
    let empty: *const c_char = c"".as_ptr();
    catch_unwind(|| {
        LAST_ERROR
            .try_with(|m| m.borrow().as_ptr())
            .unwrap_or(empty)
    })
    .unwrap_or(empty)
}

/// The name of a status code as the header spells it (`"SGEMM_BI_STATUS_NO_DRIVER"`), or
/// `"SGEMM_BI_STATUS_UNKNOWN"` for a number that is not a code. Static; never NULL.
#[no_mangle]
pub extern "C" fn sgemm_bi_status_name(status: u32) -> *const c_char {
    let name = ALL
        .get(status as usize)
        .map_or("SGEMM_BI_STATUS_UNKNOWN\0", |s| s.c_name());
    name.as_ptr().cast()
}
