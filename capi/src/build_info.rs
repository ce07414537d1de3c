//! What the loaded library holds, for programs that must know before (or after) they rely
//! on it: version, commit, the architectures with machine code, and which image a device
//! runs.

use std::ffi::{c_char, CString};
use std::sync::OnceLock;

use crate::engine::{engine, sgemm_bi_engine};
use crate::status::{boundary, sgemm_bi_status, Failure};

/// The library's build as a NUL-terminated JSON object: `version`, `commit` (empty outside
/// a git clone), `kernels` (where the kernels came from), `ptxas` (the version line of the
/// ptxas that made the machine code) and `modules`, each with its `name`, the `ptx_target`
/// its PTX falls back to, the architectures it has `machine_code` for, `embedded_bytes` and
/// `ptx_bytes`. Static; never NULL.
#[no_mangle]
pub extern "C" fn sgemm_bi_build_info() -> *const c_char {
    static JSON: OnceLock<CString> = OnceLock::new();
    JSON.get_or_init(|| {
        CString::new(sgemm_bi::build_info().to_json(None)).expect("JSON without NUL bytes")
    })
    .as_ptr()
}

/// The build information of `sgemm_bi_build_info()` plus `loaded`: for each kernel module
/// of the engine's device, the `image` it runs (`"machine code"` for `arch`, or `"ptx"`,
/// compiled by the driver), whether the driver refused the machine code, and how many
/// `entry_points` are loaded so far (modules load with their first call). CPU engines have
/// an empty `loaded`.
///
/// Writes the JSON text and a NUL into `buf` when `capacity` (bytes) holds them, and sets
/// `*length` to the text's length without the NUL either way; a `capacity` too small
/// returns `SGEMM_BI_STATUS_BUFFER_TOO_SMALL` and writes nothing into `buf` (call with
/// `buf = NULL, capacity = 0` to ask for the length).
///
/// # Safety
/// 1. `engine` is NULL or a live engine.
/// 2. `buf` is NULL (then `capacity` is 0) or valid for writing `capacity` bytes.
/// 3. `length` is NULL or valid for writing one `size_t`.
#[no_mangle]
pub unsafe extern "C" fn sgemm_bi_engine_build_info(
    engine: *const sgemm_bi_engine,
    buf: *mut c_char,
    capacity: usize,
    length: *mut usize,
) -> sgemm_bi_status {
    boundary(|| {
        // SAFETY: contract 1.
        let e = unsafe { self::engine(engine) }?;
        if length.is_null() {
            return Err(Failure::null("length"));
        }
        if buf.is_null() && capacity != 0 {
            return Err(Failure::null("buf"));
        }
        let json = sgemm_bi::build_info().to_json(Some(&e.loaded_images()));
        // SAFETY: contract 3.
        unsafe { length.write(json.len()) };
        if capacity < json.len() + 1 {
            return Err(Failure::new(
                sgemm_bi_status::BufferTooSmall,
                format!(
                    "buf holds {capacity} bytes; the build information needs {} (with its NUL)",
                    json.len() + 1
                ),
            ));
        }
        // SAFETY: `buf` is valid for `capacity >= json.len() + 1` bytes (contract 2), and a
        // Rust String never overlaps the caller's buffer.
        unsafe {
            std::ptr::copy_nonoverlapping(json.as_ptr(), buf.cast::<u8>(), json.len());
            buf.add(json.len()).write(0);
        }
        Ok(())
    })
}
