//! Warp-collective loads of 8 × 8 matrices of 16-bit elements from shared memory
//! (`ldmatrix`, sm_75+), in the register layout `mma.sync` takes.
//!
//! Lane `l` gives the shared address of one 16-byte row: lanes 0–7 the rows of matrix 0,
//! 8–15 of matrix 1, 16–23 of matrix 2, 24–31 of matrix 3. Register `j` of every lane then
//! holds two elements of matrix `j`: without `.trans`, row `lane / 4`, columns
//! `2 (lane % 4)` and `+1`; with `.trans`, the same of the transposed matrix (column
//! `lane / 4`, rows `2 (lane % 4)` and `+1`).

use core::arch::asm;

/// `ldmatrix.sync.aligned.m8n8.x4.shared.b16`
///
/// # Safety
/// Every lane of the warp calls it together; `row_addr` is 16-byte aligned and the 16 bytes
/// from it lie inside the block's shared memory.
#[inline(always)]
pub unsafe fn ldmatrix_x4(row_addr: u32) -> [u32; 4] {
    let (r0, r1, r2, r3): (u32, u32, u32, u32);
    // SAFETY: forwarded contract.
    unsafe {
        asm!(
            "ldmatrix.sync.aligned.m8n8.x4.shared.b16 {{{r0}, {r1}, {r2}, {r3}}}, [{a}];",
            a = in(reg32) row_addr,
            r0 = out(reg32) r0,
            r1 = out(reg32) r1,
            r2 = out(reg32) r2,
            r3 = out(reg32) r3,
            options(readonly, nostack)
        )
    };
    [r0, r1, r2, r3]
}

/// `ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16`
///
/// # Safety
/// As for [`ldmatrix_x4`].
#[inline(always)]
pub unsafe fn ldmatrix_x4_trans(row_addr: u32) -> [u32; 4] {
    let (r0, r1, r2, r3): (u32, u32, u32, u32);
    // SAFETY: forwarded contract.
    unsafe {
        asm!(
            "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {{{r0}, {r1}, {r2}, {r3}}}, [{a}];",
            a = in(reg32) row_addr,
            r0 = out(reg32) r0,
            r1 = out(reg32) r1,
            r2 = out(reg32) r2,
            r3 = out(reg32) r3,
            options(readonly, nostack)
        )
    };
    [r0, r1, r2, r3]
}
