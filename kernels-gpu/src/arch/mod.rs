//! One wrapper per PTX instruction, named after it. The asm block is each wrapper's whole
//! body; no other module writes `asm!`.

pub mod convert;
pub mod cp_async;
pub mod ldmatrix;
pub mod mma;
pub mod shared;
pub mod sync;
