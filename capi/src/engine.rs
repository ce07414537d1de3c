//! The engine handle and the calls that run on it.

use std::ffi::c_void;
use std::mem::size_of;

use sgemm_bi::{DType, Device, Engine, GemmPointers, Stream, Tier};

use crate::desc::{
    self, check_struct_size, read_struct, sgemm_bi_capabilities, sgemm_bi_device_kind,
    sgemm_bi_gemm_desc, sgemm_bi_linear,
};
use crate::status::{boundary, sgemm_bi_status, CResult, Failure};

/// A GEMM engine bound to one device (opaque). Created by `sgemm_bi_engine_create`,
/// released by `sgemm_bi_engine_destroy`.
///
/// Thread safety: an engine may be used by any number of threads at once; every call is
/// independent of the others and the engine holds no per-call state, but for one report: a
/// bad group end that a grouped kernel found on the device, which the engine's next grouped
/// call returns (`sgemm_bi_engine_take_device_error`). Only `sgemm_bi_engine_destroy` must
/// not overlap another call on the same engine.
pub struct sgemm_bi_engine {
    engine: Engine,
}

// The handle is shared between threads as the header promises.
const _: fn() = || {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<sgemm_bi_engine>();
};

/// The engine behind `handle`.
///
/// # Safety
/// 1. `handle` is NULL or a live handle from `sgemm_bi_engine_create`, not destroyed while
///    the returned borrow is used.
pub(crate) unsafe fn engine<'a>(handle: *const sgemm_bi_engine) -> CResult<&'a Engine> {
    // SAFETY: contract 1.
    unsafe { handle.as_ref() }
        .map(|h| &h.engine)
        .ok_or_else(|| Failure::null("engine"))
}

/// Creates an engine: the CPU backend (`device_kind` `SGEMM_BI_DEVICE_KIND_CPU`, `ordinal`
/// 0) or the CUDA device `ordinal` (`SGEMM_BI_DEVICE_KIND_CUDA`), whose primary context then
/// owns every device pointer and stream passed to the engine. On a CUDA device the kernels
/// load as calls first need them, from the machine code embedded for the device (see
/// `sgemm_bi_engine_build_info`); creating an engine loads none.
///
/// On success `*out` is the new engine; on failure it is set to NULL (when `out` is not
/// NULL). Without a CUDA driver the result is `SGEMM_BI_STATUS_NO_DRIVER`, without that
/// device `SGEMM_BI_STATUS_NO_DEVICE`; the CPU backend always exists.
///
/// # Safety
/// 1. `out` is NULL or valid for writing one pointer.
#[no_mangle]
pub unsafe extern "C" fn sgemm_bi_engine_create(
    device_kind: u32,
    ordinal: u32,
    out: *mut *mut sgemm_bi_engine,
) -> sgemm_bi_status {
    boundary(|| {
        if out.is_null() {
            return Err(Failure::null("out"));
        }
        // SAFETY: `out` is valid for a write (contract 1); NULL until an engine exists.
        unsafe { out.write(std::ptr::null_mut()) };
        let device = desc::device(device_kind, ordinal)?;
        let engine = Engine::new(device)?;
        let handle = Box::into_raw(Box::new(sgemm_bi_engine { engine }));
        // SAFETY: as above.
        unsafe { out.write(handle) };
        Ok(())
    })
}

/// Releases an engine. `sgemm_bi_engine_destroy(NULL)` does nothing and returns
/// `SGEMM_BI_STATUS_OK`. Work the engine enqueued on a CUDA stream may still be running (or
/// be captured in a graph): a device's kernels are loaded once per process, shared by its
/// engines, and stay loaded until the process exits, so destroying an engine neither waits
/// for that work nor invalidates it.
///
/// # Safety
/// 1. `engine` is NULL or a live handle from `sgemm_bi_engine_create`, destroyed once.
/// 2. No other call on this engine runs concurrently or afterwards.
#[no_mangle]
pub unsafe extern "C" fn sgemm_bi_engine_destroy(engine: *mut sgemm_bi_engine) -> sgemm_bi_status {
    boundary(|| {
        if !engine.is_null() {
            // SAFETY: the handle came from `Box::into_raw` in `sgemm_bi_engine_create` and is
            // released exactly once with no other user left (contracts 1 and 2).
            drop(unsafe { Box::from_raw(engine) });
        }
        Ok(())
    })
}

/// Describes the engine's device: its kind, ordinal, compute capability and which tiers it
/// runs. The caller sets `out->struct_size = sizeof(sgemm_bi_capabilities)` first.
///
/// # Safety
/// 1. `engine` is NULL or a live engine.
/// 2. `out` is NULL or points to a writable `sgemm_bi_capabilities` (at least its
///    `struct_size` field is readable).
#[no_mangle]
pub unsafe extern "C" fn sgemm_bi_engine_capabilities(
    engine: *const sgemm_bi_engine,
    out: *mut sgemm_bi_capabilities,
) -> sgemm_bi_status {
    boundary(|| {
        // SAFETY: contract 1.
        let e = unsafe { self::engine(engine) }?;
        // SAFETY: contract 2.
        unsafe { check_struct_size(out.cast_const(), "out") }?;
        let (kind, ordinal) = match e.device() {
            Device::Cpu => (sgemm_bi_device_kind::Cpu, 0),
            Device::Cuda(i) => (sgemm_bi_device_kind::Cuda, i as u32),
        };
        let tiers = [Tier::Scalar, Tier::TensorCores, Tier::Auto]
            .into_iter()
            .filter(|&t| e.supports(t))
            .fold(0u32, |bits, t| bits | 1 << desc::c_tier(t));
        let (major, minor) = e.compute_capability().unwrap_or((0, 0));
        let caps = sgemm_bi_capabilities {
            struct_size: size_of::<sgemm_bi_capabilities>() as u32,
            device_kind: kind as u32,
            ordinal,
            tiers,
            compute_capability_major: major,
            compute_capability_minor: minor,
            reserved: [0; 4],
        };
        // SAFETY: `out` points to a whole struct of this size (contract 2, size checked).
        unsafe { out.write(caps) };
        Ok(())
    })
}

/// Sets `*out` to whether the engine can run `tier` (a `sgemm_bi_tier`).
///
/// # Safety
/// 1. `engine` is NULL or a live engine.
/// 2. `out` is NULL or valid for writing one `bool`.
#[no_mangle]
pub unsafe extern "C" fn sgemm_bi_engine_supports(
    engine: *const sgemm_bi_engine,
    tier: u32,
    out: *mut bool,
) -> sgemm_bi_status {
    boundary(|| {
        // SAFETY: contract 1.
        let e = unsafe { self::engine(engine) }?;
        if out.is_null() {
            return Err(Failure::null("out"));
        }
        let t = desc::tier(tier, "tier")?;
        // SAFETY: contract 2.
        unsafe { out.write(e.supports(t)) };
        Ok(())
    })
}

/// Sets `*out` to the tier (a `sgemm_bi_tier`, never `SGEMM_BI_TIER_AUTO`) that a call of
/// `tier` with `input` operands (a `sgemm_bi_dtype`) runs on this engine: `tier` itself,
/// unless it is `SGEMM_BI_TIER_AUTO`, which is tensor cores for bf16/f16 inputs on a CUDA
/// engine that runs them and the scalar tier otherwise. The result bits of a call are those
/// of this tier.
///
/// # Safety
/// 1. `engine` is NULL or a live engine.
/// 2. `out` is NULL or valid for writing one `uint32_t`.
#[no_mangle]
pub unsafe extern "C" fn sgemm_bi_engine_resolve_tier(
    engine: *const sgemm_bi_engine,
    tier: u32,
    input: u32,
    out: *mut u32,
) -> sgemm_bi_status {
    boundary(|| {
        // SAFETY: contract 1.
        let e = unsafe { self::engine(engine) }?;
        if out.is_null() {
            return Err(Failure::null("out"));
        }
        let t = desc::tier(tier, "tier")?;
        let d = desc::dtype(input, "input")?;
        // SAFETY: contract 2.
        unsafe { out.write(desc::c_tier(e.resolve_tier(t, d))) };
        Ok(())
    })
}

/// Turns the engine's pointer checks on (`enabled` true, the default) or off. While they
/// are on, every call on a CUDA engine first asks the driver where the first and the last
/// element of each buffer lie, and rejects memory the device cannot use (ordinary host
/// memory where the GPU cannot read it, memory of another GPU, a freed allocation) with
/// `SGEMM_BI_STATUS_INACCESSIBLE_MEMORY` instead of launching a kernel that would fault and
/// leave the CUDA context unusable. The checks cost a few driver calls per GEMM; turn them
/// off only where every pointer is known to be right. Setting the environment variable
/// `SGEMM_BI_CHECK_POINTERS=0` before an engine is created starts it with the checks off.
/// The CPU engine has nothing to check and ignores the setting. May be called while other
/// threads use the engine; calls that start afterwards see the new setting.
///
/// # Safety
/// 1. `engine` is NULL or a live engine.
#[no_mangle]
pub unsafe extern "C" fn sgemm_bi_engine_set_pointer_checks(
    engine: *const sgemm_bi_engine,
    enabled: bool,
) -> sgemm_bi_status {
    boundary(|| {
        // SAFETY: contract 1.
        let e = unsafe { self::engine(engine) }?;
        e.set_pointer_checks(enabled);
        Ok(())
    })
}

/// Returns, and clears, the bad group end that a grouped kernel of this engine found on the
/// device since the last look: `SGEMM_BI_STATUS_BAD_OFFSETS` with a message
/// (`sgemm_bi_last_error_message`) naming the group, the end, the extent it may not pass,
/// and that an earlier grouped call found it on the device; `SGEMM_BI_STATUS_OK` when there
/// is none (always on the CPU engine, which checks offsets before running).
///
/// A grouped call with offsets in device memory that runs as one grouped kernel (see
/// `sgemm_bi_grouped_gemm`) does not wait for its offsets: the kernel clamps a bad end and
/// reports it when it runs. The report is seen once the kernel has run: certainly after a
/// synchronize of the stream (or the graph launch) that ran it, perhaps not before. The
/// engine keeps one report, the latest. Every grouped call looks first and returns the
/// report without running; dense calls do not look.
///
/// # Safety
/// 1. `engine` is NULL or a live engine.
#[no_mangle]
pub unsafe extern "C" fn sgemm_bi_engine_take_device_error(
    engine: *const sgemm_bi_engine,
) -> sgemm_bi_status {
    boundary(|| {
        // SAFETY: contract 1.
        let e = unsafe { self::engine(engine) }?;
        e.take_device_error()?;
        Ok(())
    })
}

/// Fills `*out` with a dense, unbatched, row-major `C[M,N] = A[M,K] · B[K,N]` in `dtype`
/// (a `sgemm_bi_dtype`) on the scalar tier, without bias: `struct_size` set, leading
/// dimensions `max(1, K)`, `max(1, N)` and `max(1, N)`, reserved fields zero. Change any
/// field before passing it to `sgemm_bi_gemm`.
///
/// # Safety
/// 1. `out` is NULL or valid for writing one `sgemm_bi_gemm_desc`.
#[no_mangle]
pub unsafe extern "C" fn sgemm_bi_gemm_desc_dense(
    m: u64,
    n: u64,
    k: u64,
    dtype: u32,
    out: *mut sgemm_bi_gemm_desc,
) -> sgemm_bi_status {
    boundary(|| {
        if out.is_null() {
            return Err(Failure::null("out"));
        }
        let d = desc::dtype(dtype, "dtype")?;
        let size = |v: u64, name: &str| {
            usize::try_from(v).map_err(|_| {
                Failure::new(
                    sgemm_bi_status::Overflow,
                    format!("{name} is {v}, which overflows size_t on this platform"),
                )
            })
        };
        let g = sgemm_bi::Gemm::dense(size(m, "m")?, size(n, "n")?, size(k, "k")?, d);
        // SAFETY: contract 1.
        unsafe { out.write(sgemm_bi_gemm_desc::from_gemm(&g)) };
        Ok(())
    })
}

/// Runs `C[b] = A[b] · B[b] (+ bias)` for b in 0..batch as `desc` describes.
///
/// On a CUDA engine `a`, `b`, `bias` and `c` are device pointers of the device's primary
/// context, aligned to their element size, and the work is enqueued on `stream` (a
/// `CUstream` / `cudaStream_t` of that context; NULL is the legacy default stream): the
/// call returns without synchronising and allocates nothing, so it can be captured in a
/// CUDA graph. On the CPU engine they are host pointers, the call completes before it
/// returns, and `stream` is ignored.
///
/// Everything is checked before anything runs: the handle and descriptor, every enum and
/// reserved field, the shapes, leading dimensions and strides (extents that overflow, and
/// any size or stride above `INT64_MAX` — a negative number converted — are rejected), the
/// dtypes, the tier, that A, B, C (and the bias when `has_bias` is 1) are not NULL when the
/// call reads or writes them, and that C's bytes meet no input's
/// (`SGEMM_BI_STATUS_OVERLAPPING_OPERANDS`). On a CUDA engine also each pointer's alignment
/// and, while the pointer checks are on (`sgemm_bi_engine_set_pointer_checks`), that each
/// buffer starts and ends in memory the device can use. `bias` must be NULL when `has_bias`
/// is 0. When M, N or batch is 0 the call does nothing.
///
/// # Safety
/// 1. `engine` is NULL or a live engine; `desc` is NULL or a readable `sgemm_bi_gemm_desc`
///    (its `struct_size` is checked before the rest is read).
/// 2. Each of `a`, `b`, `bias`, `c` that the call reads or writes is valid for the extent
///    the descriptor gives it (for A: `(batch-1)*a.batch_stride` plus the last element of
///    an M × K matrix with leading dimension `a.ld`, likewise for B and C; the bias holds
///    N elements). The library cannot check raw pointers against allocations: the caller
///    guarantees the extents.
/// 3. CUDA: the buffers stay alive until the work on `stream` has completed, and `stream`
///    is NULL or a live stream of the device's primary context.
/// 4. CPU: no other thread writes A, B or the bias, or touches C, during the call.
#[no_mangle]
pub unsafe extern "C" fn sgemm_bi_gemm(
    engine: *const sgemm_bi_engine,
    desc: *const sgemm_bi_gemm_desc,
    a: *const c_void,
    b: *const c_void,
    bias: *const c_void,
    c: *mut c_void,
    stream: *mut c_void,
) -> sgemm_bi_status {
    boundary(|| {
        // SAFETY: contract 1.
        let e = unsafe { self::engine(engine) }?;
        // SAFETY: contract 1.
        let g = unsafe { read_struct(desc, "desc") }?.to_gemm()?;
        if g.bias.is_none() && !bias.is_null() {
            return Err(Failure::invalid(
                "bias is not NULL, but desc->has_bias is 0: set has_bias to 1 (and bias_dtype) \
                 to add it, or pass NULL",
            ));
        }
        let p = GemmPointers { a, b, bias, c };
        // SAFETY: contracts 2 to 4 are `Engine::gemm`'s.
        unsafe { e.gemm(&g, p, Stream(stream)) }?;
        Ok(())
    })
}

/// The forward pass of a linear layer: `Y[M,N] = X[M,K] · W (+ bias[N])`, Y in
/// `layer->dtype`. `bias` may be NULL (no bias); otherwise its element type is `bias_dtype`
/// (a `sgemm_bi_dtype`: f32 or the layer's dtype; checked even when `bias` is NULL).
///
/// # Safety
/// As for `sgemm_bi_gemm`, with X `[M,K]` and Y `[M,N]` dense row-major, W `[K,N]` or
/// `[N,K]` row-major as `layer->weight_layout` says, and the bias `[N]`. `layer` is NULL or
/// a readable `sgemm_bi_linear`.
#[no_mangle]
pub unsafe extern "C" fn sgemm_bi_forward(
    engine: *const sgemm_bi_engine,
    layer: *const sgemm_bi_linear,
    x: *const c_void,
    w: *const c_void,
    bias: *const c_void,
    bias_dtype: u32,
    y: *mut c_void,
    stream: *mut c_void,
) -> sgemm_bi_status {
    boundary(|| {
        // SAFETY: forwarded contract.
        let e = unsafe { self::engine(engine) }?;
        // SAFETY: forwarded contract.
        let l = unsafe { read_struct(layer, "layer") }?.to_linear()?;
        let bias_dtype: DType = desc::dtype(bias_dtype, "bias_dtype")?;
        let bias = (!bias.is_null()).then_some((bias, bias_dtype));
        // SAFETY: forwarded contract.
        unsafe { e.forward(&l, x, w, bias, y, Stream(stream)) }?;
        Ok(())
    })
}

/// The weight gradient of a linear layer: `dW = Xᵀ · dY` (reduced over the M rows in
/// ascending order), stored in W's layout. `output_mode` (a `sgemm_bi_output_mode`)
/// overwrites dW in `dw_dtype` (a `sgemm_bi_dtype`), or accumulates `dW += …` in f32
/// (`dw_dtype` must then be `SGEMM_BI_DTYPE_F32`).
///
/// # Safety
/// As for `sgemm_bi_gemm`, with dY `[M,N]` and X `[M,K]` dense row-major and dW `[K,N]` or
/// `[N,K]` as `layer->weight_layout` says. `layer` is NULL or a readable `sgemm_bi_linear`.
#[no_mangle]
pub unsafe extern "C" fn sgemm_bi_backward_dw(
    engine: *const sgemm_bi_engine,
    layer: *const sgemm_bi_linear,
    dy: *const c_void,
    x: *const c_void,
    dw: *mut c_void,
    output_mode: u32,
    dw_dtype: u32,
    stream: *mut c_void,
) -> sgemm_bi_status {
    boundary(|| {
        // SAFETY: forwarded contract.
        let e = unsafe { self::engine(engine) }?;
        // SAFETY: forwarded contract.
        let l = unsafe { read_struct(layer, "layer") }?.to_linear()?;
        let mode = desc::output_mode(output_mode, dw_dtype, "output_mode", "dw_dtype")?;
        // SAFETY: forwarded contract.
        unsafe { e.backward_dw(&l, dy, x, dw, mode, Stream(stream)) }?;
        Ok(())
    })
}

/// The input gradient of a linear layer: `dX[M,K] = dY[M,N] · Wᵀ`, in `layer->dtype`.
///
/// # Safety
/// As for `sgemm_bi_gemm`, with dY `[M,N]` and dX `[M,K]` dense row-major and W as
/// `layer->weight_layout` says. `layer` is NULL or a readable `sgemm_bi_linear`.
#[no_mangle]
pub unsafe extern "C" fn sgemm_bi_backward_dx(
    engine: *const sgemm_bi_engine,
    layer: *const sgemm_bi_linear,
    dy: *const c_void,
    w: *const c_void,
    dx: *mut c_void,
    stream: *mut c_void,
) -> sgemm_bi_status {
    boundary(|| {
        // SAFETY: forwarded contract.
        let e = unsafe { self::engine(engine) }?;
        // SAFETY: forwarded contract.
        let l = unsafe { read_struct(layer, "layer") }?.to_linear()?;
        // SAFETY: forwarded contract.
        unsafe { e.backward_dx(&l, dy, w, dx, Stream(stream)) }?;
        Ok(())
    })
}
