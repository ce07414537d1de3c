//! The C vocabulary: enums (passed as `uint32_t` and checked, so an unknown value is an
//! error and never undefined behaviour), the GEMM and layer descriptors, the capabilities
//! record, and their conversion into the Rust API's types.

use std::mem::size_of;

use sgemm_bi::{
    DType, Device, Gemm, Layout, Linear, Operand, Output, OutputMode, Tier, WeightLayout,
};

use crate::status::{sgemm_bi_status, CResult, Failure};

/// Element type of an operand, of the bias or of the output.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum sgemm_bi_dtype {
    /// IEEE binary32 (`float`).
    F32 = 0,
    /// bfloat16, stored as `uint16_t` bits.
    Bf16 = 1,
    /// IEEE binary16, stored as `uint16_t` bits.
    F16 = 2,
}

/// Storage order of a matrix operand. For A (M × K) row-major puts `A[i,k]` at
/// `i*ld + k` and column-major at `i + k*ld`; for B (K × N) row-major puts `B[k,j]` at
/// `k*ld + j` and column-major at `k + j*ld`. A transposed operand is the same memory
/// read in the other order.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum sgemm_bi_layout {
    RowMajor = 0,
    ColMajor = 1,
}

/// Which arithmetic contract a call follows.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum sgemm_bi_tier {
    /// One f32 fma chain per output element in ascending k: the same bits on the CPU and on
    /// every GPU.
    Scalar = 0,
    /// Tensor-core MMA steps in ascending k (bf16/f16 inputs); on the CPU, the sm_90 model.
    TensorCores = 1,
    /// The engine's choice: tensor cores for bf16/f16 inputs on a CUDA engine that runs
    /// them, the scalar tier otherwise; `sgemm_bi_engine_resolve_tier` says which.
    Auto = 2,
}

/// What a GEMM does with C.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum sgemm_bi_output_mode {
    /// `C = round(bias + chain)` in the output dtype.
    Overwrite = 0,
    /// `C = C + (bias + chain)` in f32 (the output dtype must be f32): one f32 add per
    /// call, for gradient accumulation over micro-batches.
    AccumulateF32 = 1,
}

/// Where an engine runs.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum sgemm_bi_device_kind {
    /// The CPU backend: synchronous, host pointers, the same bits as the GPU scalar tier.
    Cpu = 0,
    /// A CUDA device (by ordinal): device pointers, work enqueued on the caller's stream.
    Cuda = 1,
}

/// How a layer's weight matrix W is stored (row-major either way).
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum sgemm_bi_weight_layout {
    /// `W[K,N]`: in_features × out_features.
    Kn = 0,
    /// `W[N,K]`: out_features × in_features (torch's `nn.Linear.weight`).
    Nk = 1,
}

/// One input matrix of a GEMM.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct sgemm_bi_operand {
    /// Element type: a `sgemm_bi_dtype`.
    pub dtype: u32,
    /// Storage order: a `sgemm_bi_layout`.
    pub layout: u32,
    /// Leading dimension in elements (distance between rows when row-major, between
    /// columns when column-major); at least 1 and at least the length it steps over.
    pub ld: u64,
    /// Distance in elements between consecutive batch entries (ignored when batch <= 1;
    /// 0 broadcasts one matrix to every entry).
    pub batch_stride: u64,
}

/// The output matrix C: logically M × N, always row-major.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct sgemm_bi_output {
    /// A `sgemm_bi_output_mode`.
    pub mode: u32,
    /// Element type of C: a `sgemm_bi_dtype` (f32 when `mode` is
    /// `SGEMM_BI_OUTPUT_MODE_ACCUMULATE_F32`).
    pub dtype: u32,
    /// Distance in elements between rows of C (at least N, and at least 1).
    pub ldc: u64,
    /// Distance in elements between consecutive batch entries of C (entries must not
    /// overlap).
    pub batch_stride: u64,
}

/// A whole GEMM call: `C[b] = A[b] · B[b] (+ bias)` for b in 0..batch. Set `struct_size` to
/// `sizeof(sgemm_bi_gemm_desc)` and every reserved field to zero (zero-initialise the
/// struct, or start from `sgemm_bi_gemm_desc_dense`). Enum fields hold the values of their
/// enums; anything else is rejected with `SGEMM_BI_STATUS_INVALID_ARGUMENT`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct sgemm_bi_gemm_desc {
    /// `sizeof(sgemm_bi_gemm_desc)` as the caller's header declares it.
    pub struct_size: u32,
    /// A `sgemm_bi_tier`.
    pub tier: u32,
    /// Rows of A and C.
    pub m: u64,
    /// Columns of B and C.
    pub n: u64,
    /// The reduced dimension: columns of A, rows of B (0 gives the bias, or zeros).
    pub k: u64,
    /// Number of independent GEMMs (1 for an unbatched call; 0 is a no-op).
    pub batch: u64,
    /// A, logically M × K.
    pub a: sgemm_bi_operand,
    /// B, logically K × N.
    pub b: sgemm_bi_operand,
    /// 1 when a bias vector `bias[N]` (shared by every batch entry) is added, else 0.
    pub has_bias: u32,
    /// The bias's element type, a `sgemm_bi_dtype`: f32 or the input dtype (checked even
    /// when `has_bias` is 0).
    pub bias_dtype: u32,
    /// C.
    pub c: sgemm_bi_output,
    /// Must be zero.
    pub reserved: [u64; 4],
}

/// A linear layer applied to M rows: `Y[M,N] = X[M,K] · W (+ bias)`, with X, Y, dY, dX dense
/// row-major and W stored as `weight_layout` says. Set `struct_size` to
/// `sizeof(sgemm_bi_linear)` and `reserved` to zero.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct sgemm_bi_linear {
    /// `sizeof(sgemm_bi_linear)` as the caller's header declares it.
    pub struct_size: u32,
    /// Element type of X, W, dY, Y and dX: a `sgemm_bi_dtype`.
    pub dtype: u32,
    /// A `sgemm_bi_weight_layout`.
    pub weight_layout: u32,
    /// A `sgemm_bi_tier`.
    pub tier: u32,
    /// Rows (tokens, samples).
    pub m: u64,
    /// Input features.
    pub k: u64,
    /// Output features.
    pub n: u64,
    /// Must be zero.
    pub reserved: [u64; 2],
}

/// What an engine's device is and can do (filled by `sgemm_bi_engine_capabilities`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct sgemm_bi_capabilities {
    /// Set by the caller to `sizeof(sgemm_bi_capabilities)` before the call.
    pub struct_size: u32,
    /// A `sgemm_bi_device_kind`.
    pub device_kind: u32,
    /// The CUDA device ordinal (0 on the CPU).
    pub ordinal: u32,
    /// Bit `1u << t` is set for each `sgemm_bi_tier` t the engine can run.
    pub tiers: u32,
    /// CUDA compute capability, major (0 on the CPU).
    pub compute_capability_major: u32,
    /// CUDA compute capability, minor (0 on the CPU).
    pub compute_capability_minor: u32,
    /// Zero.
    pub reserved: [u32; 4],
}

/// A C enum carried as `uint32_t`.
pub(crate) trait CEnum: Sized + Copy + 'static {
    /// The C type name.
    const NAME: &'static str;
    /// Every value with its C name, in numeric order.
    const VALUES: &'static [(Self, &'static str)];

    /// The value numbered `v`, or an INVALID_ARGUMENT failure naming `field`.
    fn parse(v: u32, field: &str) -> CResult<Self> {
        Self::VALUES
            .get(v as usize)
            .map(|&(x, _)| x)
            .ok_or_else(|| {
                let known: Vec<String> = Self::VALUES
                    .iter()
                    .enumerate()
                    .map(|(i, (_, name))| format!("{i} = {name}"))
                    .collect();
                Failure::invalid(format!(
                    "{field} is {v}, which is not a {} ({})",
                    Self::NAME,
                    known.join(", ")
                ))
            })
    }
}

impl CEnum for sgemm_bi_dtype {
    const NAME: &'static str = "sgemm_bi_dtype";
    const VALUES: &'static [(Self, &'static str)] = &[
        (Self::F32, "SGEMM_BI_DTYPE_F32"),
        (Self::Bf16, "SGEMM_BI_DTYPE_BF16"),
        (Self::F16, "SGEMM_BI_DTYPE_F16"),
    ];
}

impl CEnum for sgemm_bi_layout {
    const NAME: &'static str = "sgemm_bi_layout";
    const VALUES: &'static [(Self, &'static str)] = &[
        (Self::RowMajor, "SGEMM_BI_LAYOUT_ROW_MAJOR"),
        (Self::ColMajor, "SGEMM_BI_LAYOUT_COL_MAJOR"),
    ];
}

impl CEnum for sgemm_bi_tier {
    const NAME: &'static str = "sgemm_bi_tier";
    const VALUES: &'static [(Self, &'static str)] = &[
        (Self::Scalar, "SGEMM_BI_TIER_SCALAR"),
        (Self::TensorCores, "SGEMM_BI_TIER_TENSOR_CORES"),
        (Self::Auto, "SGEMM_BI_TIER_AUTO"),
    ];
}

impl CEnum for sgemm_bi_output_mode {
    const NAME: &'static str = "sgemm_bi_output_mode";
    const VALUES: &'static [(Self, &'static str)] = &[
        (Self::Overwrite, "SGEMM_BI_OUTPUT_MODE_OVERWRITE"),
        (Self::AccumulateF32, "SGEMM_BI_OUTPUT_MODE_ACCUMULATE_F32"),
    ];
}

impl CEnum for sgemm_bi_device_kind {
    const NAME: &'static str = "sgemm_bi_device_kind";
    const VALUES: &'static [(Self, &'static str)] = &[
        (Self::Cpu, "SGEMM_BI_DEVICE_KIND_CPU"),
        (Self::Cuda, "SGEMM_BI_DEVICE_KIND_CUDA"),
    ];
}

impl CEnum for sgemm_bi_weight_layout {
    const NAME: &'static str = "sgemm_bi_weight_layout";
    const VALUES: &'static [(Self, &'static str)] = &[
        (Self::Kn, "SGEMM_BI_WEIGHT_LAYOUT_KN"),
        (Self::Nk, "SGEMM_BI_WEIGHT_LAYOUT_NK"),
    ];
}

pub(crate) fn dtype(v: u32, field: &str) -> CResult<DType> {
    Ok(match sgemm_bi_dtype::parse(v, field)? {
        sgemm_bi_dtype::F32 => DType::F32,
        sgemm_bi_dtype::Bf16 => DType::BF16,
        sgemm_bi_dtype::F16 => DType::F16,
    })
}

pub(crate) fn c_dtype(d: DType) -> u32 {
    (match d {
        DType::F32 => sgemm_bi_dtype::F32,
        DType::BF16 => sgemm_bi_dtype::Bf16,
        DType::F16 => sgemm_bi_dtype::F16,
    }) as u32
}

fn layout(v: u32, field: &str) -> CResult<Layout> {
    Ok(match sgemm_bi_layout::parse(v, field)? {
        sgemm_bi_layout::RowMajor => Layout::RowMajor,
        sgemm_bi_layout::ColMajor => Layout::ColMajor,
    })
}

pub(crate) fn tier(v: u32, field: &str) -> CResult<Tier> {
    Ok(match sgemm_bi_tier::parse(v, field)? {
        sgemm_bi_tier::Scalar => Tier::Scalar,
        sgemm_bi_tier::TensorCores => Tier::TensorCores,
        sgemm_bi_tier::Auto => Tier::Auto,
    })
}

pub(crate) fn c_tier(t: Tier) -> u32 {
    (match t {
        Tier::Scalar => sgemm_bi_tier::Scalar,
        Tier::TensorCores => sgemm_bi_tier::TensorCores,
        Tier::Auto => sgemm_bi_tier::Auto,
    }) as u32
}

/// The output mode `mode` with element type `dtype_v` (f32 when accumulating); the field
/// names are for messages.
pub(crate) fn output_mode(
    mode: u32,
    dtype_v: u32,
    mode_field: &str,
    dtype_field: &str,
) -> CResult<OutputMode> {
    let m = sgemm_bi_output_mode::parse(mode, mode_field)?;
    let d = dtype(dtype_v, dtype_field)?;
    match m {
        sgemm_bi_output_mode::Overwrite => Ok(OutputMode::Overwrite(d)),
        sgemm_bi_output_mode::AccumulateF32 if d == DType::F32 => Ok(OutputMode::AccumulateF32),
        sgemm_bi_output_mode::AccumulateF32 => Err(Failure::new(
            sgemm_bi_status::UnsupportedDtype,
            format!(
                "{dtype_field} is {d}, but {mode_field} is SGEMM_BI_OUTPUT_MODE_ACCUMULATE_F32, \
                 which accumulates into f32: set {dtype_field} to SGEMM_BI_DTYPE_F32"
            ),
        )),
    }
}

pub(crate) fn device(kind: u32, ordinal: u32) -> CResult<Device> {
    match sgemm_bi_device_kind::parse(kind, "device_kind")? {
        sgemm_bi_device_kind::Cpu if ordinal == 0 => Ok(Device::Cpu),
        sgemm_bi_device_kind::Cpu => Err(Failure::invalid(format!(
            "ordinal is {ordinal}, but the CPU backend has only ordinal 0"
        ))),
        sgemm_bi_device_kind::Cuda => Ok(Device::Cuda(ordinal as usize)),
    }
}

/// A dimension, stride or leading dimension as `size_t`.
fn dim(v: u64, field: &str) -> CResult<usize> {
    usize::try_from(v).map_err(|_| {
        Failure::new(
            sgemm_bi_status::Overflow,
            format!("{field} is {v}, which overflows size_t on this platform"),
        )
    })
}

fn reserved_zero<T: Copy + Into<u64>>(reserved: &[T], field: &str) -> CResult {
    match reserved.iter().position(|&r| r.into() != 0) {
        None => Ok(()),
        Some(i) => Err(Failure::invalid(format!(
            "{field}[{i}] is {}: reserved fields must be zero",
            reserved[i].into()
        ))),
    }
}

/// A `#[repr(C)]` struct whose first field is `uint32_t struct_size`.
pub(crate) trait Sized32: Copy {
    /// The C type name.
    const NAME: &'static str;
}

impl Sized32 for sgemm_bi_gemm_desc {
    const NAME: &'static str = "sgemm_bi_gemm_desc";
}
impl Sized32 for sgemm_bi_linear {
    const NAME: &'static str = "sgemm_bi_linear";
}
impl Sized32 for sgemm_bi_capabilities {
    const NAME: &'static str = "sgemm_bi_capabilities";
}

/// Checks the `struct_size` at `p` (the parameter `param`) against this library's layout.
///
/// # Safety
/// 1. `p` is NULL or points to at least 4 readable bytes aligned for `T`.
pub(crate) unsafe fn check_struct_size<T: Sized32>(p: *const T, param: &str) -> CResult {
    if p.is_null() {
        return Err(Failure::null(param));
    }
    // SAFETY: every struct of this ABI starts with `uint32_t struct_size` (contract 1).
    let size = unsafe { p.cast::<u32>().read() };
    if size as usize != size_of::<T>() {
        return Err(Failure::invalid(format!(
            "{param}->struct_size is {size}, but sizeof({}) is {} in this library (ABI \
             version {}): set it to sizeof({}) and build against the header of the library \
             you link",
            T::NAME,
            size_of::<T>(),
            crate::SGEMM_BI_ABI_VERSION,
            T::NAME
        )));
    }
    Ok(())
}

/// Reads the struct at `p` after checking its `struct_size`.
///
/// # Safety
/// 1. `p` is NULL or points to at least 4 readable bytes aligned for `T`, and to a whole
///    readable `T` when its `struct_size` equals `sizeof(T)`.
pub(crate) unsafe fn read_struct<T: Sized32>(p: *const T, param: &str) -> CResult<T> {
    // SAFETY: contract 1.
    unsafe { check_struct_size(p, param)? };
    // SAFETY: the size matches, so `p` points to a whole `T` (contract 1); every bit pattern
    // is a valid `T` (integers only).
    Ok(unsafe { p.read() })
}

/// An operand's fields, named in full by `names` (dtype, layout, ld, batch_stride): written
/// out by the caller, not formatted here, so that a call whose fields are fine builds no
/// strings (formatting them cost a small call more than its arithmetic).
fn operand(op: &sgemm_bi_operand, names: [&str; 4]) -> CResult<Operand> {
    Ok(Operand {
        dtype: dtype(op.dtype, names[0])?,
        layout: layout(op.layout, names[1])?,
        ld: dim(op.ld, names[2])?,
        batch_stride: dim(op.batch_stride, names[3])?,
    })
}

impl sgemm_bi_gemm_desc {
    /// The Rust descriptor, after checking every field this layer owns (enums, reserved
    /// fields, sizes that do not fit `usize`); shapes are checked by the engine.
    pub(crate) fn to_gemm(self) -> CResult<Gemm> {
        reserved_zero(&self.reserved, "desc->reserved")?;
        let bias_dtype = dtype(self.bias_dtype, "desc->bias_dtype")?;
        let bias = match self.has_bias {
            0 => None,
            1 => Some(bias_dtype),
            v => {
                return Err(Failure::invalid(format!(
                    "desc->has_bias is {v}: it must be 0 or 1"
                )))
            }
        };
        Ok(Gemm {
            m: dim(self.m, "desc->m")?,
            n: dim(self.n, "desc->n")?,
            k: dim(self.k, "desc->k")?,
            batch: dim(self.batch, "desc->batch")?,
            a: operand(
                &self.a,
                [
                    "desc->a.dtype",
                    "desc->a.layout",
                    "desc->a.ld",
                    "desc->a.batch_stride",
                ],
            )?,
            b: operand(
                &self.b,
                [
                    "desc->b.dtype",
                    "desc->b.layout",
                    "desc->b.ld",
                    "desc->b.batch_stride",
                ],
            )?,
            bias,
            c: Output {
                mode: output_mode(self.c.mode, self.c.dtype, "desc->c.mode", "desc->c.dtype")?,
                ldc: dim(self.c.ldc, "desc->c.ldc")?,
                batch_stride: dim(self.c.batch_stride, "desc->c.batch_stride")?,
            },
            tier: tier(self.tier, "desc->tier")?,
        })
    }

    /// The C form of a Rust descriptor.
    pub(crate) fn from_gemm(g: &Gemm) -> Self {
        let op = |o: &Operand| sgemm_bi_operand {
            dtype: c_dtype(o.dtype),
            layout: match o.layout {
                Layout::RowMajor => sgemm_bi_layout::RowMajor,
                Layout::ColMajor => sgemm_bi_layout::ColMajor,
            } as u32,
            ld: o.ld as u64,
            batch_stride: o.batch_stride as u64,
        };
        let (mode, c_dt) = match g.c.mode {
            OutputMode::Overwrite(d) => (sgemm_bi_output_mode::Overwrite, d),
            OutputMode::AccumulateF32 => (sgemm_bi_output_mode::AccumulateF32, DType::F32),
        };
        sgemm_bi_gemm_desc {
            struct_size: size_of::<Self>() as u32,
            tier: c_tier(g.tier),
            m: g.m as u64,
            n: g.n as u64,
            k: g.k as u64,
            batch: g.batch as u64,
            a: op(&g.a),
            b: op(&g.b),
            has_bias: g.bias.is_some() as u32,
            bias_dtype: c_dtype(g.bias.unwrap_or(g.a.dtype)),
            c: sgemm_bi_output {
                mode: mode as u32,
                dtype: c_dtype(c_dt),
                ldc: g.c.ldc as u64,
                batch_stride: g.c.batch_stride as u64,
            },
            reserved: [0; 4],
        }
    }
}

impl sgemm_bi_linear {
    /// The Rust layer, after checking every field.
    pub(crate) fn to_linear(self) -> CResult<Linear> {
        reserved_zero(&self.reserved, "layer->reserved")?;
        Ok(Linear {
            m: dim(self.m, "layer->m")?,
            k: dim(self.k, "layer->k")?,
            n: dim(self.n, "layer->n")?,
            dtype: dtype(self.dtype, "layer->dtype")?,
            weight: match sgemm_bi_weight_layout::parse(self.weight_layout, "layer->weight_layout")?
            {
                sgemm_bi_weight_layout::Kn => WeightLayout::KN,
                sgemm_bi_weight_layout::Nk => WeightLayout::NK,
            },
            tier: tier(self.tier, "layer->tier")?,
        })
    }
}
