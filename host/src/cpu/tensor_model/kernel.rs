//! The model's microkernel: up to MR rows × NR columns of accumulators advanced by the steps
//! of one packed K block, steps in ascending order (the tier's K order).
//!
//! For each step and row, the NR lanes are computed side by side: with AVX2 intrinsics
//! (`x86.rs`, chosen at run time) or, on other CPUs, lane by lane with
//! [`step::finite`]. A row-step in which any operand or accumulator is NaN or infinite is
//! computed lane by lane with [`step::step`], which applies the rules for special values.
//! The tests check every instruction set against [`step::step`].

use super::super::kernel::{Tile, MR, NR};
use super::pack::{BStep, STEP_K};
use super::step::{self, Dec, Format};
#[cfg(target_arch = "x86_64")]
use super::x86;

/// The instruction set the kernel runs with (chosen once per call).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Simd {
    /// Any CPU: [`step::finite`] one lane at a time.
    Portable,
    /// x86-64 with AVX2 (every x86 CPU since Haswell / Zen 1): 8 lanes per instruction.
    #[cfg(target_arch = "x86_64")]
    Avx2,
}

impl Simd {
    /// The best instruction set this CPU supports.
    pub(super) fn detect() -> Simd {
        #[cfg(target_arch = "x86_64")]
        if is_x86_feature_detected!("avx2") {
            return Simd::Avx2;
        }
        Simd::Portable
    }

    /// Every instruction set this CPU supports, the portable one first.
    #[cfg(test)]
    pub(super) fn all() -> Vec<Simd> {
        let mut v = vec![Simd::Portable];
        if Simd::detect() != Simd::Portable {
            v.push(Simd::detect());
        }
        v
    }
}

/// Continues the first `rows` rows of `t` by the steps of one K block: `a` holds the steps
/// of each row (`ns` per row, row-major), `b` the `ns` steps of one NR-lane panel.
pub(super) fn run(
    simd: Simd,
    format: Format,
    rows: usize,
    a: &[[Dec; STEP_K]],
    b: &[BStep],
    t: &mut Tile,
) {
    let ns = b.len();
    assert!(
        (1..=MR).contains(&rows) && a.len() >= rows * ns,
        "tensor-model kernel operands do not match (rows {rows}, a {}, b {ns})",
        a.len()
    );
    // Steps outer: one step of the B panel (4 KiB) is read from L1 by every row.
    for (s, bs) in b.iter().enumerate() {
        for (r, acc) in t.chunks_exact_mut(NR).take(rows).enumerate() {
            let acc: &mut [f32; NR] = acc.try_into().unwrap();
            let a_step = &a[r * ns + s];
            let special =
                bs.special || a_step.iter().any(|d| d.is_special()) || any_special(simd, acc);
            if special {
                for (j, c) in acc.iter_mut().enumerate() {
                    *c = step::step(format, *c, a_step, &lane(bs, j));
                }
                continue;
            }
            match (simd, format) {
                #[cfg(target_arch = "x86_64")]
                // SAFETY: `Simd::Avx2` is only made on a CPU with AVX2; nothing in this
                // row-step is NaN or infinite (checked above).
                (Simd::Avx2, Format::Bf16) => unsafe { x86::row_step::<11>(a_step, bs, acc) },
                #[cfg(target_arch = "x86_64")]
                // SAFETY: as above.
                (Simd::Avx2, Format::F16) => unsafe { x86::row_step::<5>(a_step, bs, acc) },
                (Simd::Portable, _) => {
                    for (j, c) in acc.iter_mut().enumerate() {
                        *c = step::finite(format, *c, a_step, &lane(bs, j));
                    }
                }
            }
        }
    }
}

const _: () = assert!(
    Format::Bf16.product_shift() == 11 && Format::F16.product_shift() == 5,
    "the AVX2 kernel is instantiated with each format's product shift"
);

/// Lane `j` of a step of B.
fn lane(b: &BStep, j: usize) -> [Dec; STEP_K] {
    std::array::from_fn(|t| Dec {
        sig: b.sig[t][j],
        exp: b.exp[t][j],
    })
}

/// Whether any accumulator of the row is NaN or infinite.
fn any_special(simd: Simd, acc: &[f32; NR]) -> bool {
    match simd {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `Simd::Avx2` is only made on a CPU with AVX2.
        Simd::Avx2 => unsafe { x86::any_special(acc) },
        Simd::Portable => acc.iter().any(|c| !c.is_finite()),
    }
}
