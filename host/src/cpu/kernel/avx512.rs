//! The AVX-512F microkernel: the full 6 × 32 block, twelve 16-lane accumulators.
//!
//! Why inline assembly and not intrinsics: the AVX-512 intrinsics and
//! `#[target_feature(enable = "avx512f")]` became stable in Rust 1.89, and this crate's
//! minimum Rust version is 1.85; `asm!` is stable since 1.59 and the assembler accepts
//! AVX-512 instructions whatever the function's target features. The block is chosen at
//! run time only when `is_x86_feature_detected!("avx512f")` holds.
//!
//! Why only zmm0–zmm15: without the avx512f target feature, `asm!` cannot name zmm16–31 or
//! the mask registers as clobbers. zmm0–15 are declared clobbered through their ymm names
//! (in LLVM a ymm register and its zmm share their register units, so the declaration
//! covers the whole zmm register), and no other register is written. On this shape that
//! costs nothing: 12 accumulators + 2 rows of B + 2 broadcasts keep both FMA pipes busy.
//!
//! Arithmetic: `vfmadd231ps` rounds once (round-to-nearest-even under the default MXCSR,
//! the same mode every other path uses), each accumulator sees k in ascending order.

use super::{Tile, MR, NR};
use core::arch::asm;

const _: () = assert!(
    MR == 6 && NR == 32,
    "the assembly below is written for 6 × 32"
);

/// The full MR × NR block (every row, including rows that only hold A's zero padding).
///
/// # Safety
/// 1. The CPU supports AVX-512F and the OS saves its state (`is_x86_feature_detected`).
/// 2. `a.len() >= kc · MR` and `b.len() == kc · NR` with `kc = b.len() / NR`.
#[target_feature(enable = "avx2,fma")]
pub(super) unsafe fn block(a: &[f32], b: &[f32], t: &mut Tile, fresh: bool) {
    let kc = b.len() / NR;
    // SAFETY: (1) makes every instruction available. The loop reads a[k·6 .. k·6 + 6] and
    // b[k·32 .. k·32 + 32] for k < kc, inside both slices by (2); the tile is read and
    // written at byte offsets 0 .. 768 = MR · NR · 4. Every move is unaligned (vmovups).
    // Only zmm0–15 (declared) and the flags (asm! assumes them clobbered) are modified; the
    // stack is not touched.
    unsafe {
        asm!(
            // Accumulators: zmm(2r) = t[r][0..16], zmm(2r+1) = t[r][16..32], or +0.0.
            "test {fresh}, {fresh}",
            "jnz 4f",
            "vmovups zmm0, [{t}]",
            "vmovups zmm1, [{t} + 64]",
            "vmovups zmm2, [{t} + 128]",
            "vmovups zmm3, [{t} + 192]",
            "vmovups zmm4, [{t} + 256]",
            "vmovups zmm5, [{t} + 320]",
            "vmovups zmm6, [{t} + 384]",
            "vmovups zmm7, [{t} + 448]",
            "vmovups zmm8, [{t} + 512]",
            "vmovups zmm9, [{t} + 576]",
            "vmovups zmm10, [{t} + 640]",
            "vmovups zmm11, [{t} + 704]",
            "jmp 5f",
            "4:",
            "vxorps zmm0, zmm0, zmm0",
            "vxorps zmm1, zmm1, zmm1",
            "vxorps zmm2, zmm2, zmm2",
            "vxorps zmm3, zmm3, zmm3",
            "vxorps zmm4, zmm4, zmm4",
            "vxorps zmm5, zmm5, zmm5",
            "vxorps zmm6, zmm6, zmm6",
            "vxorps zmm7, zmm7, zmm7",
            "vxorps zmm8, zmm8, zmm8",
            "vxorps zmm9, zmm9, zmm9",
            "vxorps zmm10, zmm10, zmm10",
            "vxorps zmm11, zmm11, zmm11",
            "5:",
            "test {kc}, {kc}",
            "jz 3f",
            // One step of k: B row k in zmm12–13, then a[k][r] broadcast and two fmas per row.
            "2:",
            "vmovups zmm12, [{b}]",
            "vmovups zmm13, [{b} + 64]",
            "vbroadcastss zmm14, dword ptr [{a}]",
            "vfmadd231ps zmm0, zmm14, zmm12",
            "vfmadd231ps zmm1, zmm14, zmm13",
            "vbroadcastss zmm15, dword ptr [{a} + 4]",
            "vfmadd231ps zmm2, zmm15, zmm12",
            "vfmadd231ps zmm3, zmm15, zmm13",
            "vbroadcastss zmm14, dword ptr [{a} + 8]",
            "vfmadd231ps zmm4, zmm14, zmm12",
            "vfmadd231ps zmm5, zmm14, zmm13",
            "vbroadcastss zmm15, dword ptr [{a} + 12]",
            "vfmadd231ps zmm6, zmm15, zmm12",
            "vfmadd231ps zmm7, zmm15, zmm13",
            "vbroadcastss zmm14, dword ptr [{a} + 16]",
            "vfmadd231ps zmm8, zmm14, zmm12",
            "vfmadd231ps zmm9, zmm14, zmm13",
            "vbroadcastss zmm15, dword ptr [{a} + 20]",
            "vfmadd231ps zmm10, zmm15, zmm12",
            "vfmadd231ps zmm11, zmm15, zmm13",
            "add {a}, 24",  // MR · 4 bytes
            "add {b}, 128", // NR · 4 bytes
            "dec {kc}",
            "jnz 2b",
            "3:",
            "vmovups [{t}], zmm0",
            "vmovups [{t} + 64], zmm1",
            "vmovups [{t} + 128], zmm2",
            "vmovups [{t} + 192], zmm3",
            "vmovups [{t} + 256], zmm4",
            "vmovups [{t} + 320], zmm5",
            "vmovups [{t} + 384], zmm6",
            "vmovups [{t} + 448], zmm7",
            "vmovups [{t} + 512], zmm8",
            "vmovups [{t} + 576], zmm9",
            "vmovups [{t} + 640], zmm10",
            "vmovups [{t} + 704], zmm11",
            // Leave the upper halves clean: with them dirty, every later SSE instruction
            // (the scalar f32 code around us) pays a merge penalty — measured here as a 30×
            // slowdown of the tests. It only zeroes parts of the declared zmm0–15.
            "vzeroupper",
            a = inout(reg) a.as_ptr() => _,
            b = inout(reg) b.as_ptr() => _,
            kc = inout(reg) kc => _,
            t = in(reg) t.as_mut_ptr(),
            fresh = in(reg) usize::from(fresh),
            out("ymm0") _, out("ymm1") _, out("ymm2") _, out("ymm3") _,
            out("ymm4") _, out("ymm5") _, out("ymm6") _, out("ymm7") _,
            out("ymm8") _, out("ymm9") _, out("ymm10") _, out("ymm11") _,
            out("ymm12") _, out("ymm13") _, out("ymm14") _, out("ymm15") _,
            options(nostack),
        );
    }
}
