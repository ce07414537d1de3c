//! The CPU backend of the scalar tier (contract C3): every output element is one f32 fma
//! chain over ascending k starting from +0.0, then one f32 add of the bias, then (in
//! accumulate mode) one f32 add into C, then one round-to-nearest-even to the output dtype.
//!
//! The arithmetic is that of the naive triple loop, kept as `reference.rs` for the tests,
//! which compare every bit of every path against it. What is added is speed, and none of
//! it touches the arithmetic:
//!
//! - `kernel/`: the MR × NR microkernel — the only code that decides the order of the
//!   fmas — in three forms chosen at run time: AVX-512F (inline asm), AVX2 + FMA
//!   (intrinsics), and portable `f32::mul_add`;
//! - `pack/`: blocks of A and B copied to contiguous f32, upcast exactly (AVX2 + F16C or
//!   portable);
//! - `epilogue/`: bias add, accumulate add, rounding and NaN canonicalisation (vectorised,
//!   or the `crate::numeric` functions one element at a time);
//! - `blocking.rs`: the cache-blocked loop nest and its split into tasks;
//! - `threads.rs`: running tasks on rayon's pool.
//!
//! `Tier::TensorCores` runs `tensor_model/` instead: the sm_90 tensor cores' arithmetic
//! (contract C4), with its own packing and kernel, and this backend's epilogue and threads.
//!
//! Speed on the 2-core development VM (AVX-512, `cargo run -p sgemm-bi-host --release
//! --example cpu_gflops`): about 150–200 GFLOP/s in f32, bf16 and f16 at 1024³, against
//! ~1 for the naive loop.

mod blocking;
mod epilogue;
mod kernel;
mod pack;
#[cfg(test)]
mod reference;
mod tensor_model;
#[cfg(test)]
mod tests;
mod threads;

use crate::types::{Gemm, GemmPointers, Tier};
use blocking::Entry;
use epilogue::Dest;
use kernel::Isa;
use pack::{OperandView, PackBuf};

/// Below this many fmas per batch entry (about 100³), an entry runs on one thread: rayon's
/// fork-join costs microseconds, which such an entry does not repay. Batched calls of small
/// entries are then spread over the pool one entry per task instead.
const PARALLEL_MIN_FMAS: usize = 1 << 20;

/// Runs `g` on the calling thread pool.
///
/// # Safety
/// The pointers of `p` are valid host pointers for the spans `validate::check(g)` returned,
/// C overlaps no input, and nothing else touches C during the call.
pub(crate) unsafe fn gemm(g: &Gemm, p: &GemmPointers) {
    // SAFETY: forwarded contract; `detect` names only instruction sets this CPU has.
    unsafe { gemm_with(Isa::detect(), g, p) }
}

/// [`gemm`] with a chosen instruction set (the tests run every one).
///
/// # Safety
/// As for [`gemm`].
unsafe fn gemm_with(isa: Isa, g: &Gemm, p: &GemmPointers) {
    if g.m == 0 || g.n == 0 || g.batch == 0 {
        return;
    }
    let mut bias_buf = PackBuf::new(if g.bias.is_some() { g.n } else { 0 });
    let bias: Option<&[f32]> = g.bias.map(|d| {
        let upcast = bias_buf.as_mut_slice();
        for (j, v) in upcast.iter_mut().enumerate() {
            // SAFETY: a bias of dtype d holds N elements.
            *v = unsafe { pack::load(p.bias as *const u8, d, j) };
        }
        &*upcast
    });
    if g.tier == Tier::TensorCores {
        // SAFETY: forwarded contract; validation admits only bf16 and f16 for the tier.
        unsafe { tensor_model::gemm(isa, g, p, bias) };
        return;
    }
    let (a, b, c) = (OperandView::a(g, p), OperandView::b(g, p), Dest::new(g, p));
    let entry = |batch: usize| Entry {
        isa,
        m: g.m,
        n: g.n,
        k: g.k,
        a: a.entry(batch),
        b: b.entry(batch),
        c: c.entry(batch),
        bias,
    };
    let fmas = g.m.saturating_mul(g.n).saturating_mul(g.k.max(1));
    let parallel = fmas >= PARALLEL_MIN_FMAS && threads::helpers();
    if !parallel && g.batch > 1 {
        // SAFETY: entry b reads and writes only its own validated spans, and validation
        // guarantees distinct entries write disjoint parts of C.
        threads::each_small(g.batch, |b| unsafe { blocking::run(&entry(b), false) });
    } else {
        for b in 0..g.batch {
            // SAFETY: as above, one entry at a time.
            unsafe { blocking::run(&entry(b), parallel) };
        }
    }
}
