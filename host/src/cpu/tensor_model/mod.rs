//! The tensor-core tier on the CPU (contract C4): bit for bit what the sm_90 tensor cores
//! compute, from a model of their arithmetic measured on an H200
//! (`tests/data/tc-h200/README.md`).
//!
//! **The order** is the GPU kernels' (`kernels-gpu/src/tensor/mod.rs`): every output element
//! is one f32 accumulator starting at +0.0; K is consumed in ascending steps of 16, step s
//! adding the 16 products `A[i, 16s + t] · B[16s + t, j]`, t = 0..16; the K tail is padded
//! with zeros to a multiple of 16 and no step lies wholly past K. Then the scalar tier's end:
//! bias add, accumulate add, canonical NaN, one round-to-nearest-even (`cpu/epilogue`).
//!
//! **One step** is [`step`]: E = the largest encoded exponent among the products and the
//! accumulator (a subnormal counts as its format's smallest normal exponent), but at least
//! −133; every term truncated toward zero to a multiple of 2^(E−25), an exact sum,
//! truncation toward zero to f32, ±Inf from 2^128 on, +0.0 for a zero. It is integer
//! arithmetic on small integers (see `step.rs` for why 32 bits suffice). NaN and Inf
//! follow IEEE 754.
//!
//! The model reproduces all 196,608 recorded H200 outputs and the H200's bits on the
//! 6,283,105 outputs of the wider comparison of 2026-11-29 (`tests/gpu_tc_model.rs`); the
//! tests replay every golden file and the kept differences from the first model
//! (`tests/data/tc-h200/mismatches-*.tsv`). It is the sm_90 definition: other GPU families
//! may compute a step differently, and `tests/gpu_tc_model.rs` is how to check one.
//!
//! What is added for speed does not touch the arithmetic: `pack.rs` decodes blocks of A and
//! B once (exact), `kernel.rs` runs the steps of NR lanes side by side in vector registers,
//! and the loop nest below splits C into tiles that threads compute independently. Each
//! output element is owned by one tile and its steps run in ascending order, the
//! accumulator parked in f32 (exact) between K blocks: blocking, threading and the
//! instruction set change the speed only.

mod kernel;
mod pack;
#[cfg(test)]
mod reference;
pub(crate) mod step;
#[cfg(test)]
mod tests;
#[cfg(target_arch = "x86_64")]
mod x86;

use super::epilogue::{self, Dest};
use super::kernel::{Isa, Tile, MR, NR};
use super::threads::{each_chunk, each_small, helpers, pieces};
use crate::types::{Gemm, GemmPointers};
use kernel::Simd;
use pack::{BStep, StepOperand, STEP_K};
use step::{Dec, Format};

/// Steps of one K block: the B panel of a block (KB · 4 KiB) stays in L2 while the tiles of
/// one panel run.
const KB: usize = 32;
/// Rows of a chunk (a multiple of MR): bounds the packed A (MCH · KB · 128 bytes).
const MCH: usize = 40 * MR;
/// Columns of a chunk (a multiple of NR): bounds the packed B (NC / NR · KB · 4 KiB) and,
/// with MCH, the parked accumulators.
const NC: usize = 16 * NR;
/// Below this many multiply-adds per batch entry, an entry runs on one thread (the step
/// costs about ten times a scalar fma, so the threshold is lower than the scalar one).
const PARALLEL_MIN_MACS: usize = 1 << 17;

/// Runs the tensor-core tier of `g`; `bias` is the bias upcast to f32 (N values), if any.
///
/// # Safety
/// As for `cpu::gemm`; `g` has bf16 or f16 inputs (validation rejects f32 for the tier).
pub(super) unsafe fn gemm(isa: Isa, g: &Gemm, p: &GemmPointers, bias: Option<&[f32]>) {
    // SAFETY: forwarded contract.
    unsafe { gemm_with(Simd::detect(), isa, g, p, bias) }
}

/// [`gemm`] with a chosen instruction set for the model's kernel (the tests run each one).
///
/// # Safety
/// As for [`gemm`].
unsafe fn gemm_with(simd: Simd, isa: Isa, g: &Gemm, p: &GemmPointers, bias: Option<&[f32]>) {
    let format = Format::of(g.a.dtype).expect("the tensor-core tier takes bf16 or f16 inputs");
    if g.m == 0 || g.n == 0 || g.batch == 0 {
        return;
    }
    let (a, b, c) = (StepOperand::a(g, p), StepOperand::b(g, p), Dest::new(g, p));
    let entry = |batch: usize| Entry {
        simd,
        isa,
        format,
        m: g.m,
        n: g.n,
        k: g.k,
        a: a.entry(batch),
        b: b.entry(batch),
        c: c.entry(batch),
        bias,
    };
    let macs = g.m.saturating_mul(g.n).saturating_mul(g.k.max(1));
    let parallel = macs >= PARALLEL_MIN_MACS && helpers();
    if !parallel && g.batch > 1 {
        // SAFETY: entry b reads and writes only its own validated spans, and validation
        // guarantees distinct entries write disjoint parts of C.
        each_small(g.batch, |b| unsafe { run(&entry(b), false) });
    } else {
        for b in 0..g.batch {
            // SAFETY: as above, one entry at a time.
            unsafe { run(&entry(b), parallel) };
        }
    }
}

/// One batch entry, ready to run.
struct Entry<'a> {
    simd: Simd,
    isa: Isa,
    format: Format,
    m: usize,
    n: usize,
    k: usize,
    a: StepOperand,
    b: StepOperand,
    c: Dest,
    bias: Option<&'a [f32]>,
}

/// Runs one batch entry; `parallel` spreads it over rayon's pool.
///
/// ```text
/// for each chunk of ≤ MCH rows × ≤ NC columns of C:
///     for each block of ≤ KB steps, in ascending k:        ← the only loop over k
///         decode A[rows, block] and B[block, columns] (in parallel)
///         for each MR × NR tile, in parallel: continue its accumulators by the block's
///             steps; after the last block, run the epilogue.
/// ```
///
/// # Safety
/// The sources, the destination and M, N, K describe validated spans (`cpu::gemm`'s
/// contract), and no other thread touches this entry's C during the call.
unsafe fn run(e: &Entry<'_>, parallel: bool) {
    let steps = e.k.div_ceil(STEP_K);
    // K = 0 still runs one (empty) block: the accumulators stay +0.0 and are stored.
    let n_blocks = steps.div_ceil(KB).max(1);
    let ns_max = steps.min(KB);
    let (mch_max, nc_max) = (MCH.min(e.m), NC.min(e.n));
    let mut a_buf = vec![[Dec::ZERO; STEP_K]; mch_max * ns_max];
    let mut b_buf = vec![BStep::ZERO; nc_max.div_ceil(NR) * ns_max];
    let mut tiles: Vec<Tile> = vec![[0.0; MR * NR]; mch_max.div_ceil(MR) * nc_max.div_ceil(NR)];

    for i0 in (0..e.m).step_by(MCH) {
        let mch = MCH.min(e.m - i0);
        let n_it = mch.div_ceil(MR);
        for j0 in (0..e.n).step_by(NC) {
            let nch = NC.min(e.n - j0);
            let n_jt = nch.div_ceil(NR);
            let tiles = &mut tiles[..n_it * n_jt];
            // Every accumulator starts at +0.0.
            tiles.fill([0.0; MR * NR]);
            for blk in 0..n_blocks {
                let s0 = blk * KB;
                let ns = KB.min(steps - s0.min(steps));
                let last = blk + 1 == n_blocks;

                // (mch rows, ns steps) and (⌈nch / NR⌉ panels, ns steps)
                let ap = &mut a_buf[..mch * ns];
                let bp = &mut b_buf[..n_jt * ns];
                if ns > 0 {
                    let a_piece = pieces(parallel, mch);
                    each_chunk(parallel, ap, a_piece * ns, |q, dst| {
                        // SAFETY: the dst.len() / ns rows from i0 + q · a_piece on are
                        // inside this chunk's rows, so inside A.
                        unsafe { pack::lanes(e.format, &e.a, i0 + q * a_piece, s0, ns, dst) };
                    });
                    let b_piece = pieces(parallel, n_jt);
                    each_chunk(parallel, bp, b_piece * ns, |q, dst| {
                        let j = q * b_piece * NR;
                        // SAFETY: columns j0 + j .. j0 + min(j + panels · NR, nch) are inside B.
                        unsafe {
                            pack::panels(
                                e.simd,
                                e.format,
                                &e.b,
                                j0 + j,
                                (nch - j).min(dst.len() / ns * NR),
                                s0,
                                ns,
                                dst,
                            )
                        };
                    });
                }
                let (ap, bp) = (&*ap, &*bp);

                // Tile t is (row block t % n_it, panel t / n_it): consecutive tiles share
                // their B panel, which then stays in the thread's cache.
                each_chunk(parallel, tiles, 1, |t, tile| {
                    let tile = &mut tile[0];
                    let (ti, tj) = (t % n_it, t / n_it);
                    let (r0, c0) = (ti * MR, tj * NR);
                    let (rows, cols) = (MR.min(mch - r0), NR.min(nch - c0));
                    if ns > 0 {
                        kernel::run(
                            e.simd,
                            e.format,
                            rows,
                            &ap[r0 * ns..],
                            &bp[tj * ns..][..ns],
                            tile,
                        );
                    }
                    if last {
                        // SAFETY: the block is inside C, and tile t alone writes it.
                        unsafe {
                            epilogue::store(e.isa, &e.c, e.bias, tile, i0 + r0, j0 + c0, rows, cols)
                        };
                    }
                });
            }
        }
    }
}
