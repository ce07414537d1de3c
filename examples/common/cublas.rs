//! The few cuBLAS entry points the benchmarks compare against, loaded at run time (no CUDA
//! toolkit at build time). Shared by `bench_scalar`, `bench_tc` and `bench_suite`
//! (`#[path]`-included; each uses part of it).
//!
//! Every call is described in the library's own terms, a row-major `C[M,N] = op(A)·op(B)`
//! ([`RowMajorGemm`]). cuBLAS is column-major: a row-major matrix is the column-major
//! matrix of its transpose, so the call cuBLAS sees is `Cᵀ[N,M] = op(B)ᵀ·op(A)ᵀ`, with B
//! passed first. A row-major operand is then cuBLAS's `OP_N`, a column-major one `OP_T`,
//! and each keeps its leading dimension.

use std::ffi::{c_int, c_void};

use libloading::Library;
use sgemm_bi::{DType, Gemm, Layout, OutputMode};

pub type Handle = *mut c_void;
pub const OP_N: c_int = 0;
pub const OP_T: c_int = 1;
/// `CUBLAS_DEFAULT_MATH`: SGEMM stays in plain f32 FMA (no TF32).
const DEFAULT_MATH: c_int = 0;
/// `CUBLAS_COMPUTE_32F`: f32 accumulation, no TF32 or 16-bit down-conversion.
pub const COMPUTE_32F: c_int = 68;
const GEMM_DEFAULT: c_int = -1;

/// `cudaDataType_t` of an element type.
pub const fn cuda_type(d: DType) -> c_int {
    match d {
        DType::F32 => 0,
        DType::F16 => 2,
        DType::BF16 => 14,
    }
}

/// Panics with the cuBLAS status when a call failed: the benchmark cannot go on without it.
pub fn check(what: &str, status: c_int) {
    assert_eq!(status, 0, "{what} returned cuBLAS status {status}");
}

/// Row-major `C[M,N] = op(A)·op(B)`, or `C += op(A)·op(B)` (beta = 1), as both cuBLAS APIs
/// are asked to compute it. A is logically M×K and B K×N; a column-major operand is the
/// memory of its transpose.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RowMajorGemm {
    pub m: usize,
    pub n: usize,
    pub k: usize,
    pub a_layout: Layout,
    pub lda: usize,
    pub b_layout: Layout,
    pub ldb: usize,
    pub ldc: usize,
    /// Element type of A and B.
    pub input: DType,
    /// Element type of C.
    pub output: DType,
    /// `C += A·B` (beta = 1) instead of `C = A·B` (beta = 0).
    pub accumulate: bool,
}

impl RowMajorGemm {
    /// The dense row-major `C[M,N] = A[M,K]·B[K,N]` with C in the input type.
    pub const fn dense(m: usize, n: usize, k: usize, dtype: DType) -> Self {
        RowMajorGemm {
            m,
            n,
            k,
            a_layout: Layout::RowMajor,
            lda: k,
            b_layout: Layout::RowMajor,
            ldb: n,
            ldc: n,
            input: dtype,
            output: dtype,
            accumulate: false,
        }
    }

    /// The cuBLAS call with the same operands, transposes, output type and beta as the
    /// library's descriptor (unbatched, without bias: cuBLAS's plain GEMM has none).
    pub fn from_gemm(g: &Gemm) -> Self {
        assert!(
            g.batch == 1 && g.bias.is_none(),
            "cuBLAS comparison of {g:?}"
        );
        RowMajorGemm {
            m: g.m,
            n: g.n,
            k: g.k,
            a_layout: g.a.layout,
            lda: g.a.ld,
            b_layout: g.b.layout,
            ldb: g.b.ld,
            ldc: g.c.ldc,
            input: g.a.dtype,
            output: g.c.mode.dtype(),
            accumulate: matches!(g.c.mode, OutputMode::AccumulateF32),
        }
    }

    /// cuBLAS's (m, n, k) of the column-major call: (N, M, K).
    pub fn blas_mnk(&self) -> (c_int, c_int, c_int) {
        (self.n as c_int, self.m as c_int, self.k as c_int)
    }

    /// cuBLAS's `transa` (it applies to our B) and `transb` (our A).
    pub fn blas_ops(&self) -> (c_int, c_int) {
        let op = |l: Layout| if l == Layout::RowMajor { OP_N } else { OP_T };
        (op(self.b_layout), op(self.a_layout))
    }

    /// beta: 1 to accumulate into C, else 0.
    pub fn beta(&self) -> f32 {
        if self.accumulate {
            1.0
        } else {
            0.0
        }
    }
}

/// The names to try for a library: `$var` if set, else the usual sonames.
pub fn candidates(var: &str, sonames: &[&str]) -> Vec<String> {
    std::env::var(var)
        .map(|p| vec![p])
        .unwrap_or_else(|_| sonames.iter().map(|s| s.to_string()).collect())
}

/// Opens the first of `names` that loads, with its name.
pub fn open_first(names: &[String]) -> Result<(Library, String), String> {
    let mut errors = Vec::new();
    for name in names {
        // SAFETY: loading a cuBLAS library runs only its library constructors.
        match unsafe { Library::new(name) } {
            Ok(lib) => return Ok((lib, name.clone())),
            Err(e) => errors.push(format!("{name}: {e}")),
        }
    }
    Err(errors.join("; "))
}

/// Resolves `name` in `lib` as a function pointer of type `T`.
///
/// # Safety
/// `T` is the symbol's C signature; the pointer is used only while `lib` is loaded.
pub unsafe fn symbol<T: Copy>(lib: &Library, name: &str) -> Result<T, String> {
    // SAFETY: forwarded contract.
    unsafe { lib.get::<T>(name.as_bytes()) }
        .map(|s| *s)
        .map_err(|e| format!("{name}: {e}"))
}

type CreateFn = unsafe extern "C" fn(*mut Handle) -> c_int;
type DestroyFn = unsafe extern "C" fn(Handle) -> c_int;
type SetMathModeFn = unsafe extern "C" fn(Handle, c_int) -> c_int;
type SetStreamFn = unsafe extern "C" fn(Handle, *mut c_void) -> c_int;
type GetVersionFn = unsafe extern "C" fn(Handle, *mut c_int) -> c_int;
#[rustfmt::skip]
type SgemmFn = unsafe extern "C" fn(
    Handle, c_int, c_int, c_int, c_int, c_int,
    *const f32, u64, c_int, u64, c_int,
    *const f32, u64, c_int,
) -> c_int;
#[rustfmt::skip]
type GemmExFn = unsafe extern "C" fn(
    Handle, c_int, c_int, c_int, c_int, c_int,
    *const c_void, u64, c_int, c_int, u64, c_int, c_int,
    *const c_void, u64, c_int, c_int,
    c_int, c_int,
) -> c_int;

/// A cuBLAS handle with default math (no TF32) and the entry points the benchmarks call.
pub struct Cublas {
    handle: Handle,
    destroy: DestroyFn,
    set_stream: SetStreamFn,
    sgemm: SgemmFn,
    gemm_ex: GemmExFn,
    /// The library file that loaded.
    pub name: String,
    /// `cublasGetVersion` (e.g. 130100 for 13.1.0).
    pub version: c_int,
    // Last: the function pointers above live only as long as the library.
    _lib: Library,
}

impl Cublas {
    /// Opens `$SGEMM_BI_CUBLAS`, or the first of the usual sonames that loads.
    pub fn open() -> Result<Self, String> {
        let names = candidates(
            "SGEMM_BI_CUBLAS",
            &["libcublas.so.13", "libcublas.so.12", "libcublas.so"],
        );
        let (lib, name) = open_first(&names)?;
        // SAFETY: each symbol has this C signature in every cuBLAS since 11, and the
        // pointers are kept next to the library they belong to.
        unsafe {
            let create: CreateFn = symbol(&lib, "cublasCreate_v2")?;
            let math: SetMathModeFn = symbol(&lib, "cublasSetMathMode")?;
            let get_version: GetVersionFn = symbol(&lib, "cublasGetVersion_v2")?;
            let mut handle = std::ptr::null_mut();
            check("cublasCreate", create(&mut handle));
            // Default math: SGEMM stays in plain f32 FMA (no TF32).
            check("cublasSetMathMode", math(handle, DEFAULT_MATH));
            let mut version = 0;
            check("cublasGetVersion", get_version(handle, &mut version));
            Ok(Cublas {
                handle,
                destroy: symbol(&lib, "cublasDestroy_v2")?,
                set_stream: symbol(&lib, "cublasSetStream_v2")?,
                sgemm: symbol(&lib, "cublasSgemm_v2")?,
                gemm_ex: symbol(&lib, "cublasGemmEx")?,
                name,
                version,
                _lib: lib,
            })
        }
    }

    pub fn set_stream(&self, stream: *mut c_void) {
        // SAFETY: live handle; the stream belongs to the current context.
        check("cublasSetStream", unsafe {
            (self.set_stream)(self.handle, stream)
        });
    }

    /// Row-major f32 `C = A·B` through cublasSgemm.
    ///
    /// # Safety
    /// Device pointers of the current context holding M×K, K×N and M×N f32.
    pub unsafe fn sgemm(&self, m: usize, n: usize, k: usize, a: u64, b: u64, c: u64) {
        let (one, zero) = (1.0f32, 0.0f32);
        let (m, n, k) = (m as c_int, n as c_int, k as c_int);
        // SAFETY: forwarded contract; B first (see the module comment).
        let status = unsafe {
            (self.sgemm)(
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
            )
        };
        check("cublasSgemm", status);
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
        let dtype = if bf16 { DType::BF16 } else { DType::F16 };
        // SAFETY: forwarded contract.
        unsafe { self.gemm_ex(&RowMajorGemm::dense(m, n, k, dtype), a, b, c) }
    }

    /// `p` through cublasGemmEx with the default algorithm, f32 compute and f32 alpha/beta.
    ///
    /// # Safety
    /// Device pointers of the current context holding A, B and C as `p` describes them.
    pub unsafe fn gemm_ex(&self, p: &RowMajorGemm, a: u64, b: u64, c: u64) {
        let (m, n, k) = p.blas_mnk();
        let (transa, transb) = p.blas_ops();
        let (one, beta) = (1.0f32, p.beta());
        let (tin, tout) = (cuda_type(p.input), cuda_type(p.output));
        // SAFETY: forwarded contract; B first (see the module comment).
        let status = unsafe {
            (self.gemm_ex)(
                self.handle,
                transa,
                transb,
                m,
                n,
                k,
                (&one as *const f32).cast(),
                b,
                tin,
                p.ldb as c_int,
                a,
                tin,
                p.lda as c_int,
                (&beta as *const f32).cast(),
                c,
                tout,
                p.ldc as c_int,
                COMPUTE_32F,
                GEMM_DEFAULT,
            )
        };
        check("cublasGemmEx", status);
    }
}

impl Drop for Cublas {
    fn drop(&mut self) {
        // SAFETY: created in `open`, destroyed once, while the library is still loaded.
        unsafe { (self.destroy)(self.handle) };
    }
}
