//! Every way a call can fail. A call that returns one of these launched nothing.

use crate::types::{DType, Device, Tier};

/// Which buffer of a call an error is about, by the name the caller passed it under: A, B,
/// the bias and C for [`Engine::gemm`](crate::Engine::gemm); x, w, the bias and y for the
/// training triad's forward, dy, x and dw for its weight gradient, dy, w and dx for its
/// input gradient.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Operand {
    A,
    B,
    Bias,
    C,
    /// The triad's input X.
    X,
    /// The triad's weight W.
    W,
    /// The forward's output Y.
    Y,
    /// The output gradient dY.
    Dy,
    /// The weight gradient dW.
    Dw,
    /// The input gradient dX.
    Dx,
    /// A grouped call's group offsets.
    Offsets,
}

impl std::fmt::Display for Operand {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Operand::A => "A",
            Operand::B => "B",
            Operand::Bias => "bias",
            Operand::C => "C",
            Operand::X => "x",
            Operand::W => "w",
            Operand::Y => "y",
            Operand::Dy => "dy",
            Operand::Dw => "dw",
            Operand::Dx => "dx",
            Operand::Offsets => "offsets",
        })
    }
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum Error {
    #[error("null pointer for {0} (only the bias may be null, and only when no bias is given)")]
    NullPointer(Operand),

    #[error("the extent of {operand} overflows the address space ({detail})")]
    Overflow { operand: Operand, detail: String },

    #[error("leading dimension of {operand} is {ld}, it must be at least {min}")]
    BadLeadingDimension {
        operand: Operand,
        ld: usize,
        min: usize,
    },

    #[error("batch stride {stride} of {operand} makes batch entries overlap: each spans {span} elements")]
    OverlappingBatches {
        operand: Operand,
        stride: usize,
        span: usize,
    },

    #[error("unsupported dtype combination: {0}")]
    UnsupportedDtype(String),

    #[error("{operand} holds {len} elements of {dtype}, the call needs {needed}")]
    BufferTooSmall {
        operand: Operand,
        dtype: DType,
        len: usize,
        needed: usize,
    },

    #[error("{operand} is {given}, the descriptor says {expected}")]
    DtypeMismatch {
        operand: Operand,
        given: DType,
        expected: DType,
    },

    #[error("the {tier} tier is not available on {device}: {reason}")]
    TierUnavailable {
        tier: Tier,
        device: Device,
        reason: String,
    },

    #[error("no CUDA driver: {0} (the CPU backend, Device::Cpu, still works)")]
    NoDriver(String),

    #[error("no CUDA device {ordinal}: {count} device(s) present")]
    NoDevice { ordinal: usize, count: usize },

    #[error(
        "{operand} is at address {addr:#x}, which is not a multiple of its element size {align}"
    )]
    Misaligned {
        operand: Operand,
        addr: usize,
        align: usize,
    },

    #[error("{0}")]
    WrongDevice(String),

    #[error("CUDA driver call {call} failed: {message}")]
    Driver { call: &'static str, message: String },

    #[error("kernel launch failed ({kernel}): {message}")]
    Launch { kernel: String, message: String },

    /// C's bytes meet an input's: the result would depend on the order in which elements
    /// are computed. The ranges are the bytes each buffer spans (from its first to just past
    /// its last element), so two interleaved strided views of one allocation are rejected
    /// too when their ranges meet.
    #[error(
        "{output} (bytes {c:#x?}) overlaps {input} (bytes {other:#x?}): the output must not \
         share memory with an input"
    )]
    OverlappingOperands {
        /// The output: C, or the triad's y, dw or dx.
        output: Operand,
        input: Operand,
        c: std::ops::Range<usize>,
        other: std::ops::Range<usize>,
    },

    /// A CUDA engine was given a pointer that its device cannot use, found by asking the
    /// driver where the pointer points (`cuPointerGetAttributes`, see
    /// `Engine::set_pointer_checks`).
    #[error("{operand} at {addr:#x} is {found}; the {device} engine needs memory it can access")]
    InaccessibleMemory {
        operand: Operand,
        addr: usize,
        found: String,
        device: Device,
    },

    /// A grouped call's offsets are not `groups` non-decreasing ends between 0 and the total
    /// of the dimension they split.
    #[error("bad group offsets at group {group}: {detail}")]
    BadOffsets { group: usize, detail: String },

    /// The call is valid but this engine cannot run it yet; the message says what would.
    #[error("unsupported: {0}")]
    Unsupported(String),
}

impl Error {
    /// The same error with each operand `(A, B, C)` of the GEMM renamed to the buffer the
    /// caller passed in its place (`names`: what A, B and C are; the bias keeps its name).
    pub(crate) fn with_names(self, names: [Operand; 3]) -> Error {
        let rename = |o: Operand| match o {
            Operand::A => names[0],
            Operand::B => names[1],
            Operand::C => names[2],
            other => other,
        };
        match self {
            Error::NullPointer(o) => Error::NullPointer(rename(o)),
            Error::Overflow { operand, detail } => Error::Overflow {
                operand: rename(operand),
                detail,
            },
            Error::BadLeadingDimension { operand, ld, min } => Error::BadLeadingDimension {
                operand: rename(operand),
                ld,
                min,
            },
            Error::OverlappingBatches {
                operand,
                stride,
                span,
            } => Error::OverlappingBatches {
                operand: rename(operand),
                stride,
                span,
            },
            Error::BufferTooSmall {
                operand,
                dtype,
                len,
                needed,
            } => Error::BufferTooSmall {
                operand: rename(operand),
                dtype,
                len,
                needed,
            },
            Error::DtypeMismatch {
                operand,
                given,
                expected,
            } => Error::DtypeMismatch {
                operand: rename(operand),
                given,
                expected,
            },
            Error::Misaligned {
                operand,
                addr,
                align,
            } => Error::Misaligned {
                operand: rename(operand),
                addr,
                align,
            },
            Error::OverlappingOperands {
                output,
                input,
                c,
                other,
            } => Error::OverlappingOperands {
                output: rename(output),
                input: rename(input),
                c,
                other,
            },
            Error::InaccessibleMemory {
                operand,
                addr,
                found,
                device,
            } => Error::InaccessibleMemory {
                operand: rename(operand),
                addr,
                found,
                device,
            },
            other => other,
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
