//! Every way a call can fail. A call that returns one of these launched nothing.

use crate::types::{DType, Device, Tier};

/// Which buffer of a call an error is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Operand {
    A,
    B,
    Bias,
    C,
}

impl std::fmt::Display for Operand {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Operand::A => "A",
            Operand::B => "B",
            Operand::Bias => "bias",
            Operand::C => "C",
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
        "C (bytes {c:#x?}) overlaps {input} (bytes {other:#x?}): the output must not share \
         memory with an input"
    )]
    OverlappingOperands {
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
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
