//! cuBLASLt without workspace: `cublasLtMatmul` with an algorithm from a heuristic query
//! restricted to 0 bytes of workspace, so no split-K (the recipe serving engines use for
//! batch-invariant-ish GEMMs). Loaded at run time like [`super::cublas`], and described with
//! the same [`RowMajorGemm`] (B first, column-major view; see that module's comment).

use std::ffi::{c_int, c_void};

use libloading::Library;

use super::cublas::{candidates, check, cuda_type, open_first, symbol, RowMajorGemm, COMPUTE_32F};

type Handle = *mut c_void;
type MatmulDesc = *mut c_void;
type MatrixLayout = *mut c_void;
type Preference = *mut c_void;

/// `cublasLtMatmulAlgo_t`: opaque, 8 × u64.
#[repr(C)]
#[derive(Clone, Copy)]
struct Algo([u64; 8]);

/// `cublasLtMatmulHeuristicResult_t`.
#[repr(C)]
#[derive(Clone, Copy)]
struct HeuristicResult {
    algo: Algo,
    workspace_size: usize,
    state: c_int,
    _waves_count: f32,
    _reserved: [c_int; 4],
}

// cublasLtMatmulDescAttributes_t
const DESC_TRANSA: c_int = 3;
const DESC_TRANSB: c_int = 4;
// cublasLtMatmulPreferenceAttributes_t (value: uint64_t)
const PREF_MAX_WORKSPACE_BYTES: c_int = 1;

type CreateFn = unsafe extern "C" fn(*mut Handle) -> c_int;
type DestroyFn = unsafe extern "C" fn(Handle) -> c_int;
type GetVersionFn = unsafe extern "C" fn() -> usize;
type DescCreateFn = unsafe extern "C" fn(*mut MatmulDesc, c_int, c_int) -> c_int;
type DescSetFn = unsafe extern "C" fn(MatmulDesc, c_int, *const c_void, usize) -> c_int;
type LayoutCreateFn = unsafe extern "C" fn(*mut MatrixLayout, c_int, u64, u64, i64) -> c_int;
type PrefCreateFn = unsafe extern "C" fn(*mut Preference) -> c_int;
type PrefSetFn = unsafe extern "C" fn(Preference, c_int, *const c_void, usize) -> c_int;
#[rustfmt::skip]
type HeuristicFn = unsafe extern "C" fn(
    Handle, MatmulDesc, MatrixLayout, MatrixLayout, MatrixLayout, MatrixLayout,
    Preference, c_int, *mut HeuristicResult, *mut c_int,
) -> c_int;
#[rustfmt::skip]
type MatmulFn = unsafe extern "C" fn(
    Handle, MatmulDesc,
    *const c_void, u64, MatrixLayout, u64, MatrixLayout,
    *const c_void, u64, MatrixLayout, u64, MatrixLayout,
    *const Algo, *mut c_void, usize, *mut c_void,
) -> c_int;

/// A cuBLASLt handle and the entry points of a zero-workspace matmul.
pub struct CublasLt {
    handle: Handle,
    destroy: DestroyFn,
    desc_create: DescCreateFn,
    desc_destroy: DestroyFn,
    desc_set: DescSetFn,
    layout_create: LayoutCreateFn,
    layout_destroy: DestroyFn,
    pref_create: PrefCreateFn,
    pref_destroy: DestroyFn,
    pref_set: PrefSetFn,
    heuristic: HeuristicFn,
    matmul: MatmulFn,
    /// The library file that loaded.
    pub name: String,
    /// `cublasLtGetVersion` (e.g. 130100).
    pub version: usize,
    // Last: the function pointers above live only as long as the library.
    _lib: Library,
}

/// The names to try: `$SGEMM_BI_CUBLASLT`; else, when `$SGEMM_BI_CUBLAS` names a file, the
/// libcublasLt next to it (the one that libcublas itself loaded); else the usual sonames.
fn lt_candidates() -> Vec<String> {
    let mut names = Vec::new();
    if std::env::var("SGEMM_BI_CUBLASLT").is_err() {
        if let Ok(blas) = std::env::var("SGEMM_BI_CUBLAS") {
            let path = std::path::Path::new(&blas);
            if let Some(file) = path.file_name().and_then(|f| f.to_str()) {
                if let Some(suffix) = file.strip_prefix("libcublas.") {
                    let sibling = path.with_file_name(format!("libcublasLt.{suffix}"));
                    names.push(sibling.to_string_lossy().into_owned());
                }
            }
        }
    }
    names.extend(candidates(
        "SGEMM_BI_CUBLASLT",
        &["libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so"],
    ));
    names
}

impl CublasLt {
    pub fn open() -> Result<Self, String> {
        let (lib, name) = open_first(&lt_candidates())?;
        // SAFETY: each symbol has this C signature in every cuBLASLt since 11, and the
        // pointers are kept next to the library they belong to.
        unsafe {
            let create: CreateFn = symbol(&lib, "cublasLtCreate")?;
            let get_version: GetVersionFn = symbol(&lib, "cublasLtGetVersion")?;
            let mut handle = std::ptr::null_mut();
            check("cublasLtCreate", create(&mut handle));
            Ok(CublasLt {
                handle,
                destroy: symbol(&lib, "cublasLtDestroy")?,
                desc_create: symbol(&lib, "cublasLtMatmulDescCreate")?,
                desc_destroy: symbol(&lib, "cublasLtMatmulDescDestroy")?,
                desc_set: symbol(&lib, "cublasLtMatmulDescSetAttribute")?,
                layout_create: symbol(&lib, "cublasLtMatrixLayoutCreate")?,
                layout_destroy: symbol(&lib, "cublasLtMatrixLayoutDestroy")?,
                pref_create: symbol(&lib, "cublasLtMatmulPreferenceCreate")?,
                pref_destroy: symbol(&lib, "cublasLtMatmulPreferenceDestroy")?,
                pref_set: symbol(&lib, "cublasLtMatmulPreferenceSetAttribute")?,
                heuristic: symbol(&lib, "cublasLtMatmulAlgoGetHeuristic")?,
                matmul: symbol(&lib, "cublasLtMatmul")?,
                version: get_version(),
                name,
                _lib: lib,
            })
        }
    }

    /// The descriptors of `p` and the best algorithm the heuristic offers with no workspace,
    /// or `None` when it offers none.
    pub fn plan(&self, p: &RowMajorGemm) -> Option<LtPlan<'_>> {
        let (m, n, k) = p.blas_mnk();
        let (m, n, k) = (m as u64, n as u64, k as u64);
        let (transa, transb) = p.blas_ops();
        let mut plan = LtPlan {
            lt: self,
            desc: std::ptr::null_mut(),
            layouts: [std::ptr::null_mut(); 3],
            algo: Algo([0; 8]),
            beta: p.beta(),
        };
        // SAFETY: live handle; every out-pointer is a local of the right type, and each
        // object created here is destroyed by LtPlan's Drop (null ones are skipped).
        unsafe {
            let f32_type = cuda_type(sgemm_bi::DType::F32);
            check(
                "cublasLtMatmulDescCreate",
                (self.desc_create)(&mut plan.desc, COMPUTE_32F, f32_type),
            );
            for (attr, op) in [(DESC_TRANSA, transa), (DESC_TRANSB, transb)] {
                let op: i32 = op;
                let status = (self.desc_set)(plan.desc, attr, (&op as *const i32).cast(), 4);
                check("cublasLtMatmulDescSetAttribute", status);
            }
            // Stored shapes (before op), column-major: the first operand is our B.
            let (ra, ca) = if transa == super::cublas::OP_N {
                (m, k)
            } else {
                (k, m)
            };
            let (rb, cb) = if transb == super::cublas::OP_N {
                (k, n)
            } else {
                (n, k)
            };
            let shapes = [
                (cuda_type(p.input), ra, ca, p.ldb),
                (cuda_type(p.input), rb, cb, p.lda),
                (cuda_type(p.output), m, n, p.ldc),
            ];
            for (slot, (t, rows, cols, ld)) in plan.layouts.iter_mut().zip(shapes) {
                let status = (self.layout_create)(slot, t, rows, cols, ld as i64);
                check("cublasLtMatrixLayoutCreate", status);
            }
            let mut pref = std::ptr::null_mut();
            check(
                "cublasLtMatmulPreferenceCreate",
                (self.pref_create)(&mut pref),
            );
            let zero_bytes: u64 = 0;
            let status = (self.pref_set)(
                pref,
                PREF_MAX_WORKSPACE_BYTES,
                (&zero_bytes as *const u64).cast(),
                8,
            );
            check("cublasLtMatmulPreferenceSetAttribute", status);
            let mut result = std::mem::zeroed::<HeuristicResult>();
            let mut found: c_int = 0;
            let [a, b, c] = plan.layouts;
            let status = (self.heuristic)(
                self.handle,
                plan.desc,
                a,
                b,
                c,
                c,
                pref,
                1,
                &mut result,
                &mut found,
            );
            (self.pref_destroy)(pref);
            if status != 0 || found == 0 || result.state != 0 || result.workspace_size != 0 {
                return None;
            }
            plan.algo = result.algo;
        }
        Some(plan)
    }
}

impl Drop for CublasLt {
    fn drop(&mut self) {
        // SAFETY: created in `open`, destroyed once, while the library is still loaded.
        unsafe { (self.destroy)(self.handle) };
    }
}

/// One problem's descriptors and chosen algorithm, ready to run.
pub struct LtPlan<'a> {
    lt: &'a CublasLt,
    desc: MatmulDesc,
    /// Our B, our A, C (= D).
    layouts: [MatrixLayout; 3],
    algo: Algo,
    beta: f32,
}

impl LtPlan<'_> {
    /// Enqueues the matmul on `stream` (C = D, in place), without workspace; `Err` holds
    /// cuBLASLt's status when it refused.
    ///
    /// # Safety
    /// Device pointers of the current context holding A, B and C as the planned problem
    /// describes them; `stream` is a stream of that context (or null).
    pub unsafe fn run(&self, a: u64, b: u64, c: u64, stream: *mut c_void) -> Result<(), c_int> {
        let one = 1.0f32;
        let [la, lb, lc] = self.layouts;
        // SAFETY: forwarded contract; the plan's objects are alive (dropped with it).
        let status = unsafe {
            (self.lt.matmul)(
                self.lt.handle,
                self.desc,
                (&one as *const f32).cast(),
                b,
                la,
                a,
                lb,
                (&self.beta as *const f32).cast(),
                c,
                lc,
                c,
                lc,
                &self.algo,
                std::ptr::null_mut(),
                0,
                stream,
            )
        };
        if status == 0 {
            Ok(())
        } else {
            Err(status)
        }
    }
}

impl Drop for LtPlan<'_> {
    fn drop(&mut self) {
        // SAFETY: each object was created by `plan` (or is still null) and is destroyed once.
        unsafe {
            for &l in &self.layouts {
                if !l.is_null() {
                    (self.lt.layout_destroy)(l);
                }
            }
            if !self.desc.is_null() {
                (self.lt.desc_destroy)(self.desc);
            }
        }
    }
}
