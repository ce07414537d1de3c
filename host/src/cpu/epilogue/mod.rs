//! The epilogue: turns finished chains into stored outputs, in the contract's order — one
//! f32 add of the bias, then (accumulate mode) one f32 add into C, then one rounding to the
//! output dtype with NaN canonicalised (`crate::numeric`, shared with every backend).

use crate::numeric::{round_bf16, round_f16, store_f32};
use crate::types::{DType, Gemm, GemmPointers, OutputMode};

use super::kernel::{Isa, Tile, NR};

#[cfg(target_arch = "x86_64")]
mod x86;

/// C of one batch entry: element `(i, j)` at `c + i · ldc + j` (in elements of the mode's
/// dtype).
#[derive(Clone, Copy, Debug)]
pub(super) struct Dest {
    c: *mut u8,
    mode: OutputMode,
    ldc: usize,
    /// Bytes between batch entries.
    batch_bytes: usize,
}

// SAFETY: threads share a Dest but each output element is written by exactly one task (the
// scheduler partitions C into disjoint blocks), and the contract of `cpu::gemm` guarantees
// nothing else touches C during the call.
unsafe impl Send for Dest {}
// SAFETY: as above.
unsafe impl Sync for Dest {}

impl Dest {
    /// C of batch entry 0.
    pub(super) fn new(g: &Gemm, p: &GemmPointers) -> Dest {
        Dest {
            c: p.c as *mut u8,
            mode: g.c.mode,
            ldc: g.c.ldc,
            batch_bytes: super::pack::batch_bytes(g, g.c.batch_stride, g.c.mode.dtype()),
        }
    }

    /// C of batch entry `batch`.
    pub(super) fn entry(self, batch: usize) -> Dest {
        Dest {
            c: self.c.wrapping_add(batch * self.batch_bytes),
            ..self
        }
    }
}

/// Stores the `rows × cols` top-left part of `t` (finished chains) at rows `i0..`, columns
/// `j0..` of `d`. `bias`, when present, is the whole upcast bias vector (N values).
///
/// # Safety
/// The block lies inside C of this batch entry (validated span), and no other thread
/// writes these elements during the call.
#[allow(clippy::too_many_arguments)] // a block's place and size: grouping them hides nothing
pub(super) unsafe fn store(
    isa: Isa,
    d: &Dest,
    bias: Option<&[f32]>,
    t: &Tile,
    i0: usize,
    j0: usize,
    rows: usize,
    cols: usize,
) {
    let size = d.mode.dtype().size();
    for (r, chains) in t.chunks_exact(NR).take(rows).enumerate() {
        let c = d.c.wrapping_add(((i0 + r) * d.ldc + j0) * size);
        let (chains, bias) = (&chains[..cols], bias.map(|b| &b[j0..j0 + cols]));
        #[cfg(target_arch = "x86_64")]
        let done = if isa.has_avx2() {
            // SAFETY: AVX2 and F16C were detected; the row's `cols` elements at `c` are
            // inside C and this task's alone (the caller's contract).
            unsafe { x86::row(c, d.mode, chains, bias) }
        } else {
            0
        };
        #[cfg(not(target_arch = "x86_64"))]
        let done = {
            let _ = isa;
            0
        };
        // SAFETY: as above, for the columns the vector code left.
        unsafe { scalar_row(c, d.mode, chains, bias, done) };
    }
}

/// Columns `from..chains.len()` of one row at `c`, one element at a time with the shared
/// rounding functions of `crate::numeric`: the definition the vector code must match.
///
/// # Safety
/// `chains.len()` elements of the mode's dtype at `c` are writable (any alignment) and
/// belong to the caller alone; `bias`, if any, is as long as `chains`.
unsafe fn scalar_row(
    c: *mut u8,
    mode: OutputMode,
    chains: &[f32],
    bias: Option<&[f32]>,
    from: usize,
) {
    for j in from..chains.len() {
        let v = match bias {
            Some(b) => chains[j] + b[j],
            None => chains[j],
        };
        // SAFETY: element j < chains.len() is writable and ours (the caller's contract).
        unsafe {
            match mode {
                OutputMode::AccumulateF32 => {
                    let p = (c as *mut f32).add(j);
                    p.write_unaligned(store_f32(p.read_unaligned() + v));
                }
                OutputMode::Overwrite(DType::F32) => {
                    (c as *mut f32).add(j).write_unaligned(store_f32(v))
                }
                OutputMode::Overwrite(DType::BF16) => (c as *mut u16)
                    .add(j)
                    .write_unaligned(round_bf16(v).to_bits()),
                OutputMode::Overwrite(DType::F16) => (c as *mut u16)
                    .add(j)
                    .write_unaligned(round_f16(v).to_bits()),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::kernel::MR;

    /// f32 patterns around every rounding position: all exponents (subnormal, normal, Inf
    /// and NaN), both signs, a few high mantissas, and low bits that sit exactly on, just
    /// below and just above each possible halfway point.
    fn boundary_values() -> Vec<f32> {
        let mut lows = vec![0u32, 1];
        for i in 1..23 {
            lows.extend([(1 << i) - 1, 1 << i, (1 << i) + 1]);
        }
        let highs = [
            0u32,
            0x40_0000,
            0x7F_E000,
            0x55_5555 & !0x1FFF,
            0x00_2000,
            0x7F_0000,
        ];
        let mut v = Vec::new();
        for sign in [0, 1u32 << 31] {
            for exp in 0..=255u32 {
                for &h in &highs {
                    for &l in &lows {
                        v.push(f32::from_bits(sign | exp << 23 | ((h | l) & 0x7F_FFFF)));
                    }
                }
            }
        }
        v
    }

    #[test]
    fn every_isa_rounds_like_numeric() {
        let values = &boundary_values()[..];
        // Tiles of MR rows; store 29 of 32 columns so the vector part and the scalar tail
        // both run. C has ldc 31 and starts one byte off (unaligned).
        let cols = 29;
        for mode in [
            OutputMode::Overwrite(DType::F32),
            OutputMode::Overwrite(DType::BF16),
            OutputMode::Overwrite(DType::F16),
            OutputMode::AccumulateF32,
        ] {
            let size = mode.dtype().size();
            for (n, tile_values) in values.chunks(MR * NR).enumerate() {
                let mut t: Tile = [0.0; MR * NR];
                t[..tile_values.len()].copy_from_slice(tile_values);
                // A bias of zeros, or of boundary values (so the add itself rounds and can
                // make NaN or Inf); C's initial values matter in accumulate mode.
                let rot =
                    |s: usize| (0..NR).map(move |j| values[(n * 7919 + j * 31 + s) % values.len()]);
                let bias: Vec<f32> = rot(1).collect();
                let c0: Vec<u8> = rot(2)
                    .cycle()
                    .take(MR * 31)
                    .flat_map(|v| match size {
                        4 => v.to_bits().to_le_bytes().to_vec(),
                        _ => (v.to_bits() as u16).to_le_bytes().to_vec(),
                    })
                    .collect();
                for bias in [None, Some(&bias[..])] {
                    let outs: Vec<Vec<u8>> = Isa::all()
                        .into_iter()
                        .map(|isa| {
                            let mut c = vec![0u8; 1];
                            c.extend(&c0);
                            let d = Dest {
                                c: c[1..].as_mut_ptr(),
                                mode,
                                ldc: 31,
                                batch_bytes: 0,
                            };
                            // SAFETY: MR rows of ldc 31 >= 29 columns fit in c[1..].
                            unsafe { store(isa, &d, bias, &t, 0, 0, MR, cols) };
                            c
                        })
                        .collect();
                    for (isa, out) in Isa::all().iter().zip(&outs) {
                        assert!(
                            out == &outs[0],
                            "{isa:?} {mode:?} tile {n} bias {}",
                            bias.is_some()
                        );
                    }
                }
            }
        }
    }
}
