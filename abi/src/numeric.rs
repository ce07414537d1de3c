//! The canonical NaNs of the contract: every backend (the CPU engine, every GPU kernel's
//! epilogue) stores these bits for a NaN result, because the CPU and the GPU propagate NaN
//! payloads differently; with one NaN per width their bits agree even on NaN outputs.

/// The f32 NaN every backend stores: positive, quiet, every payload bit set.
pub const CANONICAL_NAN_F32: u32 = 0x7FFF_FFFF;
/// The bf16 and f16 NaN every backend stores (a NaN in both formats: positive, quiet, every
/// payload bit set).
pub const CANONICAL_NAN_16: u16 = 0x7FFF;

// Each is a NaN of its format: all exponent bits set and a non-zero mantissa.
const _: () =
    assert!(CANONICAL_NAN_F32 & 0x7F80_0000 == 0x7F80_0000 && CANONICAL_NAN_F32 & 0x7F_FFFF != 0);
const _: () = assert!(CANONICAL_NAN_16 & 0x7F80 == 0x7F80 && CANONICAL_NAN_16 & 0x7F != 0); // bf16
const _: () = assert!(CANONICAL_NAN_16 & 0x7C00 == 0x7C00 && CANONICAL_NAN_16 & 0x3FF != 0); // f16
