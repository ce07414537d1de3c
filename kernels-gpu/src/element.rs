//! Input element types as the kernels read them: each is upcast to f32 exactly at load.

use crate::arch::convert::cvt_f32_f16;
use crate::arch::global::{ld_global_v2_b32, ld_global_v4_b32};
use crate::arch::mma::{mma_m16n8k16_f32_bf16, mma_m16n8k16_f32_f16};

/// An input element stored in global memory.
///
/// Loading and upcasting are separate steps: the mainloop keeps prefetched elements as raw
/// bits while the previous tile computes and converts them only when staging them to shared
/// memory, so no instruction waits on a load before it has to. Raw bits 0 are +0.0 in every
/// format (B's fill outside the matrix; A's is [`Element::NEG_ZERO`]).
pub trait Element: Copy {
    /// Bytes of one stored element.
    const BYTES: u64;

    /// Reads the bits of element `idx` from `base`.
    ///
    /// # Safety
    /// `base + idx` is a readable, naturally aligned element in global memory.
    unsafe fn load_raw(base: u64, idx: u64) -> u32;

    /// Four consecutive elements' raw bits as a thread holds them between the global read and
    /// the shared store: four words for f32, two for the 16-bit types (two elements per word,
    /// the first in the low half). They stay packed so that no instruction touches a loaded
    /// register before staging needs it (an unpack right after the load would wait for it).
    type Quad: Copy;

    /// Reads elements `idx .. idx + 4` from `base` with one vector load.
    ///
    /// # Safety
    /// The four elements are readable global memory, not written during the kernel, and the
    /// first is aligned to the size of all four.
    unsafe fn load_quad(base: u64, idx: u64) -> Self::Quad;

    /// The quad of four elements read one by one (`raw[j]` holds element j's bits).
    fn pack_quad(raw: [u32; 4]) -> Self::Quad;

    /// Exact upcast of a quad's four elements, in order.
    fn quad_to_f32(quad: Self::Quad) -> [f32; 4];

    /// Exact upcast of raw bits to f32.
    fn to_f32(raw: u32) -> f32;
    /// Raw bits of −0.0: A's fill outside the matrix. A padded k step then multiplies
    /// −0.0 by B's +0.0 fill, and `fma(−0·+0, acc)` is `acc` for every acc, −0.0 included
    /// (with a +0.0 product it would turn a −0.0 chain into +0.0; the scalar contract has
    /// exactly K fmas).
    const NEG_ZERO: u32;
}

/// Four 16-bit elements' bits, two per word, the first in the low half (the order of a
/// little-endian 8-byte load).
#[inline(always)]
fn pack_quad_16(raw: [u32; 4]) -> [u32; 2] {
    [raw[0] | raw[1] << 16, raw[2] | raw[3] << 16]
}

/// The four 16-bit elements of a packed quad, one per `u32` (low half of each word first).
#[inline(always)]
fn unpack_quad_16(quad: [u32; 2]) -> [u32; 4] {
    [
        quad[0] & 0xffff,
        quad[0] >> 16,
        quad[1] & 0xffff,
        quad[1] >> 16,
    ]
}

/// IEEE binary32.
#[derive(Clone, Copy)]
pub struct F32;
/// bfloat16: the upper half of a binary32.
#[derive(Clone, Copy)]
pub struct Bf16;
/// IEEE binary16.
#[derive(Clone, Copy)]
pub struct F16;

impl Element for F32 {
    const BYTES: u64 = 4;
    const NEG_ZERO: u32 = 0x8000_0000;
    #[inline(always)]
    unsafe fn load_raw(base: u64, idx: u64) -> u32 {
        // SAFETY: forwarded contract.
        unsafe { *(base as *const u32).add(idx as usize) }
    }
    type Quad = [u32; 4];
    #[inline(always)]
    unsafe fn load_quad(base: u64, idx: u64) -> [u32; 4] {
        // SAFETY: forwarded contract (16 bytes, 16-byte aligned).
        unsafe { ld_global_v4_b32(base + idx * Self::BYTES) }
    }
    #[inline(always)]
    fn pack_quad(raw: [u32; 4]) -> [u32; 4] {
        raw
    }
    #[inline(always)]
    fn quad_to_f32(quad: [u32; 4]) -> [f32; 4] {
        quad.map(f32::from_bits)
    }
    #[inline(always)]
    fn to_f32(raw: u32) -> f32 {
        f32::from_bits(raw)
    }
}

impl Element for Bf16 {
    const BYTES: u64 = 2;
    const NEG_ZERO: u32 = 0x8000;
    #[inline(always)]
    unsafe fn load_raw(base: u64, idx: u64) -> u32 {
        // SAFETY: forwarded contract.
        unsafe { *(base as *const u16).add(idx as usize) as u32 }
    }
    type Quad = [u32; 2];
    #[inline(always)]
    unsafe fn load_quad(base: u64, idx: u64) -> [u32; 2] {
        // SAFETY: forwarded contract (8 bytes, 8-byte aligned).
        unsafe { ld_global_v2_b32(base + idx * Self::BYTES) }
    }
    #[inline(always)]
    fn pack_quad(raw: [u32; 4]) -> [u32; 2] {
        pack_quad_16(raw)
    }
    #[inline(always)]
    fn quad_to_f32(quad: [u32; 2]) -> [f32; 4] {
        unpack_quad_16(quad).map(Self::to_f32)
    }
    #[inline(always)]
    fn to_f32(raw: u32) -> f32 {
        f32::from_bits(raw << 16)
    }
}

impl Element for F16 {
    const BYTES: u64 = 2;
    const NEG_ZERO: u32 = 0x8000;
    #[inline(always)]
    unsafe fn load_raw(base: u64, idx: u64) -> u32 {
        // SAFETY: forwarded contract.
        unsafe { *(base as *const u16).add(idx as usize) as u32 }
    }
    type Quad = [u32; 2];
    #[inline(always)]
    unsafe fn load_quad(base: u64, idx: u64) -> [u32; 2] {
        // SAFETY: forwarded contract (8 bytes, 8-byte aligned).
        unsafe { ld_global_v2_b32(base + idx * Self::BYTES) }
    }
    #[inline(always)]
    fn pack_quad(raw: [u32; 4]) -> [u32; 2] {
        pack_quad_16(raw)
    }
    #[inline(always)]
    fn quad_to_f32(quad: [u32; 2]) -> [f32; 4] {
        unpack_quad_16(quad).map(Self::to_f32)
    }
    #[inline(always)]
    fn to_f32(raw: u32) -> f32 {
        cvt_f32_f16(raw as u16)
    }
}

/// A 16-bit input the tensor cores multiply: one `mma.sync.m16n8k16` step with f32
/// accumulators (`crate::tensor`). Fragments hold raw bits, two elements per `u32`.
pub trait MmaElement: Copy {
    /// `d = a · b + d` for one 16 × 8 tile and 16 k (register layouts in `arch::mma`).
    fn mma_m16n8k16(d: &mut [f32; 4], a: &[u32; 4], b: &[u32; 2]);
}

impl MmaElement for Bf16 {
    #[inline(always)]
    fn mma_m16n8k16(d: &mut [f32; 4], a: &[u32; 4], b: &[u32; 2]) {
        mma_m16n8k16_f32_bf16(d, a, b)
    }
}

impl MmaElement for F16 {
    #[inline(always)]
    fn mma_m16n8k16(d: &mut [f32; 4], a: &[u32; 4], b: &[u32; 2]) {
        mma_m16n8k16_f32_f16(d, a, b)
    }
}

/// A 16-bit input the Hopper path multiplies: one `wgmma.m64nNk16` step with f32
/// accumulators (`crate::hopper`), N = `BN` (16, 32, 48, 64, 112, 128, 192, 224 or 256), operands
/// through shared-memory descriptors, transpose immediates `TA`, `TB` (`arch::wgmma`).
#[cfg(sgemm_bi_sm90a)]
pub trait WgmmaElement: MmaElement + Copy {
    /// `d[0..BN/2] += A · B` for one 64 × BN tile and 16 k.
    ///
    /// # Safety
    /// As for `arch::wgmma::wgmma_m64n256k16_f32_bf16`.
    unsafe fn wgmma<const TA: u32, const TB: u32, const BN: u32>(
        d: &mut [f32; 128],
        a: u64,
        b: u64,
    );

    /// `d[D0..D0 + 64] += A · B` for one 64 × 128 tile and 16 k (`D0` 0 or 64): the two
    /// 64-row halves of a ping-pong consumer's 128 × 128 tile in one register array.
    ///
    /// # Safety
    /// As for `arch::wgmma::wgmma_m64n128k16_f32_bf16`.
    unsafe fn wgmma_n128_half<const TA: u32, const TB: u32, const D0: usize>(
        d: &mut [f32; 128],
        a: u64,
        b: u64,
    );
}

#[cfg(sgemm_bi_sm90a)]
macro_rules! wgmma_element {
    (
        $t:ty,
        $n256:ident,
        $n224:ident,
        $n192:ident,
        $n128:ident,
        $n112:ident,
        $n64:ident,
        $n48:ident,
        $n32:ident,
        $n16:ident
    ) => {
        impl WgmmaElement for $t {
            #[inline(always)]
            unsafe fn wgmma<const TA: u32, const TB: u32, const BN: u32>(
                d: &mut [f32; 128],
                a: u64,
                b: u64,
            ) {
                use crate::arch::wgmma::{
                    $n112, $n128, $n16, $n192, $n224, $n256, $n32, $n48, $n64,
                };
                // SAFETY: forwarded contract.
                unsafe {
                    match BN {
                        256 => $n256::<TA, TB>(d, a, b),
                        224 => $n224::<TA, TB>(d, a, b),
                        192 => $n192::<TA, TB>(d, a, b),
                        128 => $n128::<TA, TB, 0>(d, a, b),
                        112 => $n112::<TA, TB>(d, a, b),
                        64 => $n64::<TA, TB>(d, a, b),
                        48 => $n48::<TA, TB>(d, a, b),
                        32 => $n32::<TA, TB>(d, a, b),
                        _ => $n16::<TA, TB>(d, a, b),
                    }
                }
            }

            #[inline(always)]
            unsafe fn wgmma_n128_half<const TA: u32, const TB: u32, const D0: usize>(
                d: &mut [f32; 128],
                a: u64,
                b: u64,
            ) {
                use crate::arch::wgmma::$n128;
                // SAFETY: forwarded contract.
                unsafe { $n128::<TA, TB, D0>(d, a, b) }
            }
        }
    };
}

#[cfg(sgemm_bi_sm90a)]
wgmma_element!(
    Bf16,
    wgmma_m64n256k16_f32_bf16,
    wgmma_m64n224k16_f32_bf16,
    wgmma_m64n192k16_f32_bf16,
    wgmma_m64n128k16_f32_bf16,
    wgmma_m64n112k16_f32_bf16,
    wgmma_m64n64k16_f32_bf16,
    wgmma_m64n48k16_f32_bf16,
    wgmma_m64n32k16_f32_bf16,
    wgmma_m64n16k16_f32_bf16
);
#[cfg(sgemm_bi_sm90a)]
wgmma_element!(
    F16,
    wgmma_m64n256k16_f32_f16,
    wgmma_m64n224k16_f32_f16,
    wgmma_m64n192k16_f32_f16,
    wgmma_m64n128k16_f32_f16,
    wgmma_m64n112k16_f32_f16,
    wgmma_m64n64k16_f32_f16,
    wgmma_m64n48k16_f32_f16,
    wgmma_m64n32k16_f32_f16,
    wgmma_m64n16k16_f32_f16
);
