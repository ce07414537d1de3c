//! The microkernel: one MR × NR block of outputs advanced by `kc` steps of k.
//!
//! This is the only place that decides the reduction order of the CPU backend (contract
//! C3): for every output element of the block, k ascends and each step is exactly one fused
//! multiply-add into that element's own f32 accumulator. Nothing is split, reordered or
//! summed across lanes, so the SIMD width, the block shape and the thread that runs a block
//! cannot change a single bit. Between calls the accumulators live in an f32 [`Tile`]: a
//! store and a reload are exact, so a chain may be continued across several calls (the
//! caller's K blocking) without changing it.
//!
//! Operands come packed (see `pack/`): `a` holds `kc` groups of MR row values (k-major),
//! `b` holds `kc` rows of NR column values, both already upcast to f32.
//!
//! Three implementations, one result: `portable` (plain `f32::mul_add`), `avx2` (AVX2 + FMA
//! intrinsics) and `avx512` (AVX-512F, inline assembly). The tests run each against the
//! plain fma chain.

#[cfg(target_arch = "x86_64")]
mod avx2;
#[cfg(target_arch = "x86_64")]
mod avx512;

/// Rows of the output block. 6 × 32 with AVX-512 keeps 12 accumulators, 2 rows of B and 2
/// broadcasts of A in 16 vector registers (see `avx512.rs` for why only 16).
pub(super) const MR: usize = 6;
/// Columns of the output block: two 16-lane AVX-512 vectors (four 8-lane AVX2 vectors,
/// which the AVX2 kernel covers in two passes of 16 columns).
pub(super) const NR: usize = 32;

/// The accumulators of one block, row-major `(MR, NR)`.
pub(super) type Tile = [f32; MR * NR];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    /// x86-64 with AVX2, FMA and F16C (every x86 CPU since Haswell / Zen 1).
    #[cfg(target_arch = "x86_64")]
    Avx2,
    /// The above and AVX-512F (Skylake-SP and later Xeons, Zen 4).
    #[cfg(target_arch = "x86_64")]
    Avx512,
    /// Any CPU: `f32::mul_add`, which is a true fused multiply-add everywhere (a hardware
    /// instruction where there is one, a correctly rounded libm `fmaf` otherwise).
    Portable,
}

/// The instruction set the backend runs with. Only [`Isa::detect`] (and, in tests,
/// `Isa::all`) can name a SIMD set, and only after checking the CPU, which is what makes
/// [`run`] safe to call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Isa(Kind);

impl Isa {
    /// The fastest instruction set this CPU supports.
    pub(super) fn detect() -> Isa {
        #[cfg(target_arch = "x86_64")]
        if is_x86_feature_detected!("avx2")
            && is_x86_feature_detected!("fma")
            && is_x86_feature_detected!("f16c")
        {
            // `is_x86_feature_detected` also checks that the OS saves the ZMM state.
            if is_x86_feature_detected!("avx512f") {
                return Isa(Kind::Avx512);
            }
            return Isa(Kind::Avx2);
        }
        Isa(Kind::Portable)
    }

    /// Every instruction set this CPU supports, the portable one first.
    #[cfg(test)]
    pub(super) fn all() -> Vec<Isa> {
        let simd: &[Kind] = match Isa::detect().0 {
            #[cfg(target_arch = "x86_64")]
            Kind::Avx512 => &[Kind::Avx2, Kind::Avx512],
            #[cfg(target_arch = "x86_64")]
            Kind::Avx2 => &[Kind::Avx2],
            Kind::Portable => &[],
        };
        let kinds = std::iter::once(Kind::Portable).chain(simd.iter().copied());
        kinds.map(Isa).collect()
    }

    /// True when AVX2, FMA and F16C may be used.
    #[cfg(target_arch = "x86_64")]
    pub(super) fn has_avx2(self) -> bool {
        !matches!(self.0, Kind::Portable)
    }
}

/// Continues the chains of the first `rows` rows of `t` by `kc = b.len() / NR` steps:
/// `t[r][j] = fma(a[k][r], b[k][j], t[r][j])` for k ascending. With `fresh`, the chains
/// start at +0.0 instead and the old contents of `t` are ignored (saves the caller a fill).
/// Rows `rows..MR` of `t` are unspecified afterwards (a kernel may compute them from the
/// zero padding of `a`).
///
/// `a` must hold at least `kc · MR` values (`kc` groups of MR, k-major) and `b` exactly
/// `kc · NR` (`kc` rows of NR); `1 <= rows <= MR`.
#[inline]
pub(super) fn run(isa: Isa, rows: usize, a: &[f32], b: &[f32], t: &mut Tile, fresh: bool) {
    let kc = b.len() / NR;
    assert!(
        b.len() == kc * NR && a.len() >= kc * MR && (1..=MR).contains(&rows),
        "microkernel operands do not match (rows {rows}, a {}, b {})",
        a.len(),
        b.len()
    );
    match isa.0 {
        // Fewer than 3 rows: the full-height AVX-512 block would waste more than half its
        // work on padding, so the row-exact AVX2 kernel is as fast or faster.
        #[cfg(target_arch = "x86_64")]
        // SAFETY: an `Isa` of kind Avx512 exists only when AVX-512F, AVX2, FMA and F16C were
        // detected on this CPU; the operand lengths were checked above.
        Kind::Avx512 if rows >= 3 => unsafe { avx512::block(a, b, t, fresh) },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: kinds Avx512 and Avx2 exist only when AVX2 and FMA were detected; the
        // operand lengths were checked above.
        Kind::Avx2 | Kind::Avx512 => unsafe {
            match rows {
                1 => avx2::block::<1>(a, b, t, fresh),
                2 => avx2::block::<2>(a, b, t, fresh),
                3 => avx2::block::<3>(a, b, t, fresh),
                4 => avx2::block::<4>(a, b, t, fresh),
                5 => avx2::block::<5>(a, b, t, fresh),
                _ => avx2::block::<6>(a, b, t, fresh),
            }
        },
        Kind::Portable => portable(rows, a, b, t, fresh),
    }
}

/// The portable block: the definition of [`run`] in plain Rust.
fn portable(rows: usize, a: &[f32], b: &[f32], t: &mut Tile, fresh: bool) {
    if fresh {
        t.fill(0.0);
    }
    for (k, b_row) in b.chunks_exact(NR).enumerate() {
        let a_col = &a[k * MR..][..rows];
        for (&x, t_row) in a_col.iter().zip(t.chunks_exact_mut(NR)) {
            for (acc, &y) in t_row.iter_mut().zip(b_row) {
                *acc = x.mul_add(y, *acc);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A value with a random 24-bit mantissa and a small exponent spread, so products round.
    fn value(state: &mut u64) -> f32 {
        *state ^= *state << 13;
        *state ^= *state >> 7;
        *state ^= *state << 17;
        let mant = (*state >> 40) as u32 & 0x7F_FFFF;
        let exp = 120 + (*state % 12) as u32;
        let sign = ((*state >> 20) & 1) as u32;
        f32::from_bits(sign << 31 | exp << 23 | mant)
    }

    #[test]
    fn every_isa_and_row_count_is_the_fma_chain() {
        let mut s = 0x9E37_79B9_7F4A_7C15;
        for kc in [0, 1, 2, 3, 5, 16, 33] {
            let a: Vec<f32> = (0..kc * MR).map(|_| value(&mut s)).collect();
            let b: Vec<f32> = (0..kc * NR).map(|_| value(&mut s)).collect();
            // Nonzero starting chains, including -0.0 (a fresh start must be +0.0).
            let mut start: Tile = std::array::from_fn(|_| value(&mut s));
            start[0] = -0.0;
            for rows in 1..=MR {
                let mut want = start;
                for r in 0..rows {
                    for j in 0..NR {
                        for k in 0..kc {
                            let (x, y) = (a[k * MR + r], b[k * NR + j]);
                            want[r * NR + j] = x.mul_add(y, want[r * NR + j]);
                        }
                    }
                }
                for isa in Isa::all() {
                    let mut got = start;
                    run(isa, rows, &a, &b, &mut got, false);
                    let (g, w) = (&got[..rows * NR], &want[..rows * NR]);
                    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                    assert_eq!(bits(g), bits(w), "{isa:?}, kc {kc}, rows {rows}");
                    // A fresh start is the same as starting from +0.0.
                    let (mut fresh, mut zero) = (start, [0.0; MR * NR]);
                    run(isa, rows, &a, &b, &mut fresh, true);
                    run(isa, rows, &a, &b, &mut zero, false);
                    assert_eq!(
                        bits(&fresh[..rows * NR]),
                        bits(&zero[..rows * NR]),
                        "{isa:?}"
                    );
                }
            }
        }
    }
}
