//! One wrapper per PTX instruction, named after it. The asm block is each wrapper's whole
//! body; no other module writes `asm!`. The sm_90a instructions (wgmma, the bulk tensor
//! copy, mbarrier transactions, setmaxnreg) are compiled only into the `sm90a` module.

#[cfg(sgemm_bi_sm90a)]
pub mod cluster;
pub mod convert;
pub mod cp_async;
pub mod global;
pub mod ldmatrix;
#[cfg(sgemm_bi_sm90a)]
pub mod mbarrier;
pub mod mbarrier_sm80;
pub mod mma;
pub mod shared;
pub mod sync;
#[cfg(sgemm_bi_sm90a)]
pub mod tma;
#[cfg(sgemm_bi_sm90a)]
pub mod wgmma;
