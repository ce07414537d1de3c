//! The vocabulary of a GEMM call: element types, layouts, tiers, devices and the
//! descriptor that says what `C[b] = op(A[b]) · op(B[b]) (+ bias)` means for one call.
//!
//! Everything here is plain data. Checking a descriptor is `validate.rs`'s job, running it is
//! the backends'.

use std::ffi::c_void;
use std::fmt;

/// Element type of an operand, of the bias or of the output.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum DType {
    F32 = 0,
    BF16 = 1,
    F16 = 2,
}

impl DType {
    /// Size of one element in bytes.
    pub const fn size(self) -> usize {
        match self {
            DType::F32 => 4,
            DType::BF16 | DType::F16 => 2,
        }
    }

    /// Lower-case name as users write it (`"f32"`, `"bf16"`, `"f16"`).
    pub const fn name(self) -> &'static str {
        match self {
            DType::F32 => "f32",
            DType::BF16 => "bf16",
            DType::F16 => "f16",
        }
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Storage order of a matrix operand.
///
/// For A (logically M × K): row-major puts `A[i, k]` at `i * ld + k`, column-major at
/// `i + k * ld`. For B (logically K × N): row-major puts `B[k, j]` at `k * ld + j`,
/// column-major at `k + j * ld`. A transposed operand is the same memory read in the other
/// order, so `op(A) = Aᵀ` is expressed by flipping the layout.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum Layout {
    RowMajor = 0,
    ColMajor = 1,
}

/// Which arithmetic contract a call follows (ARCHITECTURE.md, C3 and C4).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum Tier {
    /// One f32 fma chain per output element, ascending k, identical bits on the CPU and on
    /// every GPU.
    Scalar = 0,
    /// Tensor-core MMA steps in ascending k (bf16/f16 inputs, f32 accumulation): one
    /// accumulator per element, K in steps of 16, batch- and N-invariant. On sm_90 the step's
    /// arithmetic is the measured model in the CPU backend, so `Device::Cpu` computes the
    /// H200's bits; other GPU families may differ (tests/gpu_tc_model.rs checks). CUDA GPUs of
    /// compute capability 8.0 or newer, and the CPU (bf16/f16 inputs).
    TensorCores = 1,
    /// The engine's choice, the same in Rust, C and Python: [`Tier::TensorCores`] for bf16
    /// and f16 inputs on a CUDA engine that runs that tier, [`Tier::Scalar`] otherwise (f32
    /// inputs, the CPU backend). A call gives the bits of the tier it resolves to
    /// ([`crate::Engine::resolve_tier`] says which); a tier asked for by name is never
    /// replaced.
    Auto = 2,
}

impl fmt::Display for Tier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Tier::Scalar => "scalar",
            Tier::TensorCores => "tensor_cores",
            Tier::Auto => "auto",
        })
    }
}

/// Where an engine runs its GEMMs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Device {
    /// The CPU backend: multi-threaded, synchronous, bit-identical to the GPU scalar tier.
    Cpu,
    /// The CUDA device with this ordinal.
    Cuda(usize),
}

impl fmt::Display for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Device::Cpu => f.write_str("cpu"),
            Device::Cuda(i) => write!(f, "cuda:{i}"),
        }
    }
}

/// The leading dimension of a densely packed matrix whose rows hold `n` elements: `n`, but at
/// least 1 (the minimum validation accepts, so that empty matrices are valid).
pub const fn dense_ld(n: usize) -> usize {
    if n == 0 {
        1
    } else {
        n
    }
}

/// One input matrix of a GEMM: its element type and where each element lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Operand {
    pub dtype: DType,
    pub layout: Layout,
    /// Leading dimension in elements (distance between rows for row-major, between columns
    /// for column-major).
    pub ld: usize,
    /// Distance in elements between consecutive batch entries (ignored when `batch <= 1`).
    pub batch_stride: usize,
}

impl Operand {
    /// A densely packed row-major matrix with `cols` columns (leading dimension
    /// `max(1, cols)`, the least validation accepts, so empty matrices are valid too).
    pub const fn row_major(dtype: DType, cols: usize) -> Self {
        Operand {
            dtype,
            layout: Layout::RowMajor,
            ld: dense_ld(cols),
            batch_stride: 0,
        }
    }

    /// A densely packed column-major matrix with `rows` rows (leading dimension
    /// `max(1, rows)`).
    pub const fn col_major(dtype: DType, rows: usize) -> Self {
        Operand {
            dtype,
            layout: Layout::ColMajor,
            ld: dense_ld(rows),
            batch_stride: 0,
        }
    }

    /// The same operand with a batch stride.
    pub const fn with_batch_stride(mut self, stride: usize) -> Self {
        self.batch_stride = stride;
        self
    }
}

/// What the GEMM does with C.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OutputMode {
    /// `C = round(bias + chain)` in the given dtype.
    Overwrite(DType),
    /// `C = C + (bias + chain)` in f32 (C must be f32): one f32 add per call, so gradient
    /// accumulation over micro-batches rounds once per micro-batch and never to 16 bits.
    AccumulateF32,
}

impl OutputMode {
    /// Element type of C.
    pub const fn dtype(self) -> DType {
        match self {
            OutputMode::Overwrite(d) => d,
            OutputMode::AccumulateF32 => DType::F32,
        }
    }
}

/// The output matrix C (logically M × N, always row-major).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Output {
    pub mode: OutputMode,
    /// Distance in elements between rows of C (≥ N).
    pub ldc: usize,
    /// Distance in elements between consecutive batch entries of C.
    pub batch_stride: usize,
}

/// A whole GEMM call: `C[b] = A[b] · B[b] (+ bias)` for `b` in `0..batch`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Gemm {
    pub m: usize,
    pub n: usize,
    pub k: usize,
    /// Number of independent GEMMs (1 for an unbatched call; 0 is a no-op).
    pub batch: usize,
    pub a: Operand,
    pub b: Operand,
    /// Element type of the bias vector `bias[N]` (shared by every batch entry), if any: f32
    /// or the input dtype. It is added in f32, once, after the chain.
    pub bias: Option<DType>,
    pub c: Output,
    pub tier: Tier,
}

impl Gemm {
    /// A dense, unbatched, row-major `C[M,N] = A[M,K] · B[K,N]` with output in `dtype`.
    pub const fn dense(m: usize, n: usize, k: usize, dtype: DType) -> Self {
        Gemm {
            m,
            n,
            k,
            batch: 1,
            a: Operand::row_major(dtype, k),
            b: Operand::row_major(dtype, n),
            bias: None,
            c: Output {
                mode: OutputMode::Overwrite(dtype),
                ldc: dense_ld(n),
                batch_stride: 0,
            },
            tier: Tier::Scalar,
        }
    }
}

/// Raw addresses of the operands of one call. On a CUDA engine these are device addresses
/// in the engine's context; on the CPU engine, host addresses. `bias` may be null when the
/// descriptor has no bias.
#[derive(Clone, Copy, Debug)]
pub struct GemmPointers {
    pub a: *const c_void,
    pub b: *const c_void,
    pub bias: *const c_void,
    pub c: *mut c_void,
}

/// A CUDA stream handle (`CUstream` / `cudaStream_t`). Null is the legacy default stream.
/// Ignored by the CPU engine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stream(pub *mut c_void);

impl Stream {
    /// The legacy default stream.
    pub const DEFAULT: Stream = Stream(std::ptr::null_mut());
}

impl Default for Stream {
    fn default() -> Self {
        Stream::DEFAULT
    }
}
