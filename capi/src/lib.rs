//! The C ABI of sgemm-bi (libsgemm_bi.so / libsgemm_bi.a). This release exports the version
//! query; the whole engine follows with the C ABI issue.

use std::ffi::c_char;

/// The library version as a NUL-terminated string, e.g. `"0.2.0"`. Never NULL; static.
#[no_mangle]
pub extern "C" fn sgemm_bi_version() -> *const c_char {
    concat!(env!("CARGO_PKG_VERSION"), "\0").as_ptr().cast()
}

#[cfg(test)]
mod tests {
    #[test]
    fn version_is_the_crate_version() {
        // SAFETY: the function returns a static NUL-terminated string.
        let v = unsafe { std::ffi::CStr::from_ptr(super::sgemm_bi_version()) };
        assert_eq!(v.to_str().unwrap(), env!("CARGO_PKG_VERSION"));
    }
}
