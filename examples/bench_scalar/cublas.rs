//! The few cuBLAS entry points the benchmark compares against, loaded at run time (no CUDA
//! toolkit at build time). Row-major `C[M,N] = A[M,K]·B[K,N]` is the column-major product
//! `Cᵀ = Bᵀ·Aᵀ`, so every call passes B first.

use std::ffi::{c_int, c_void};

use libloading::{Library, Symbol};

type Handle = *mut c_void;
const OP_N: c_int = 0;
const DEFAULT_MATH: c_int = 0;
const CUDA_R_16F: c_int = 2;
const CUDA_R_16BF: c_int = 14;
const COMPUTE_32F: c_int = 68;
const GEMM_DEFAULT: c_int = -1;

pub struct Cublas {
    lib: Library,
    handle: Handle,
}

fn check(what: &str, status: c_int) {
    assert_eq!(status, 0, "{what} returned cuBLAS status {status}");
}

impl Cublas {
    /// Opens `$SGEMM_BI_CUBLAS`, or the first of the usual sonames that loads.
    pub fn open() -> Result<Self, String> {
        let names: Vec<String> = std::env::var("SGEMM_BI_CUBLAS")
            .map(|p| vec![p])
            .unwrap_or_else(|_| {
                ["libcublas.so.13", "libcublas.so.12", "libcublas.so"]
                    .map(String::from)
                    .to_vec()
            });
        let mut errors = Vec::new();
        for name in &names {
            // SAFETY: loading cuBLAS runs only its library constructors.
            match unsafe { Library::new(name) } {
                Ok(lib) => {
                    let mut handle = std::ptr::null_mut();
                    // SAFETY: the symbol has this C signature in every cuBLAS since 10.
                    unsafe {
                        let create: Symbol<unsafe extern "C" fn(*mut Handle) -> c_int> =
                            lib.get(b"cublasCreate_v2").map_err(|e| e.to_string())?;
                        check("cublasCreate", create(&mut handle));
                        let math: Symbol<unsafe extern "C" fn(Handle, c_int) -> c_int> =
                            lib.get(b"cublasSetMathMode").map_err(|e| e.to_string())?;
                        // Default math: SGEMM stays in plain f32 FMA (no TF32).
                        check("cublasSetMathMode", math(handle, DEFAULT_MATH));
                    }
                    return Ok(Cublas { lib, handle });
                }
                Err(e) => errors.push(format!("{name}: {e}")),
            }
        }
        Err(errors.join("; "))
    }

    pub fn set_stream(&self, stream: *mut c_void) {
        // SAFETY: live handle; the stream belongs to the current context.
        unsafe {
            let f: Symbol<unsafe extern "C" fn(Handle, *mut c_void) -> c_int> =
                self.lib.get(b"cublasSetStream_v2").unwrap();
            check("cublasSetStream", f(self.handle, stream));
        }
    }

    /// Row-major f32 `C = A·B` through cublasSgemm.
    ///
    /// # Safety
    /// Device pointers of the current context holding M×K, K×N and M×N f32.
    pub unsafe fn sgemm(&self, m: usize, n: usize, k: usize, a: u64, b: u64, c: u64) {
        type Sgemm = unsafe extern "C" fn(
            Handle,
            c_int,
            c_int,
            c_int,
            c_int,
            c_int,
            *const f32,
            u64,
            c_int,
            u64,
            c_int,
            *const f32,
            u64,
            c_int,
        ) -> c_int;
        let (one, zero) = (1.0f32, 0.0f32);
        // SAFETY: forwarded contract.
        unsafe {
            let f: Symbol<Sgemm> = self.lib.get(b"cublasSgemm_v2").unwrap();
            let (m, n, k) = (m as c_int, n as c_int, k as c_int);
            check(
                "cublasSgemm",
                f(
                    self.handle,
                    OP_N,
                    OP_N,
                    n,
                    m,
                    k,
                    &one,
                    b,
                    n,
                    a,
                    k,
                    &zero,
                    c,
                    n,
                ),
            );
        }
    }

    /// Row-major 16-bit `C = A·B` (f32 accumulate, output in the input type) through
    /// cublasGemmEx: cuBLAS's default tensor-core path.
    ///
    /// # Safety
    /// Device pointers of the current context holding M×K, K×N and M×N elements.
    #[allow(clippy::too_many_arguments)] // cuBLAS's own argument list
    pub unsafe fn gemm_16bit(
        &self,
        bf16: bool,
        m: usize,
        n: usize,
        k: usize,
        a: u64,
        b: u64,
        c: u64,
    ) {
        type GemmEx = unsafe extern "C" fn(
            Handle,
            c_int,
            c_int,
            c_int,
            c_int,
            c_int,
            *const c_void,
            u64,
            c_int,
            c_int,
            u64,
            c_int,
            c_int,
            *const c_void,
            u64,
            c_int,
            c_int,
            c_int,
            c_int,
        ) -> c_int;
        let (one, zero) = (1.0f32, 0.0f32);
        let t = if bf16 { CUDA_R_16BF } else { CUDA_R_16F };
        // SAFETY: forwarded contract.
        unsafe {
            let f: Symbol<GemmEx> = self.lib.get(b"cublasGemmEx").unwrap();
            let (m, n, k) = (m as c_int, n as c_int, k as c_int);
            let (pa, pz) = ((&one as *const f32).cast(), (&zero as *const f32).cast());
            check(
                "cublasGemmEx",
                f(
                    self.handle,
                    OP_N,
                    OP_N,
                    n,
                    m,
                    k,
                    pa,
                    b,
                    t,
                    n,
                    a,
                    t,
                    k,
                    pz,
                    c,
                    t,
                    n,
                    COMPUTE_32F,
                    GEMM_DEFAULT,
                ),
            );
        }
    }
}

impl Drop for Cublas {
    fn drop(&mut self) {
        // SAFETY: created in `open`, destroyed once.
        unsafe {
            if let Ok(f) = self
                .lib
                .get::<unsafe extern "C" fn(Handle) -> c_int>(b"cublasDestroy_v2")
            {
                f(self.handle);
            }
        }
    }
}
