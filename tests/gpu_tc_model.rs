//! The tensor-core tier on a CUDA GPU against the CPU backend's model of it, bit for bit
//! (contract C4). On sm_90 the model is the tier's definition, so every test here
//! must pass on an H100/H200. On another GPU family these tests are how to find out whether
//! its tensor cores compute the same bits: a failure there says how many outputs differ.
//!
//! What the golden files (`tests/data/tc-h200/`) do not cover, and these tests do: NaN and
//! Inf inputs and Inf · 0 (IEEE 754), the sign of a zero that a negative sum truncates to
//! (+0.0), subnormal inputs in bf16 and f16 (they count with the smallest normal exponent),
//! tiny bf16 products (E is never below −133), long K (hundreds of k16 steps), K tails
//! padded with zeros, every layout, bias and accumulate modes, and the crafted steps that
//! separate the model from its nearest alternatives (`crafted_steps_match_the_model` prints
//! them). `a_million_outputs_match_the_model` is the issue's ≥ 10⁶-output comparison.
//!
//! With `SGEMM_BI_TC_MODEL_DUMP=<file>` every output that differs is appended to the file
//! (format: `dump_mismatch`; `tests/data/tc-h200/mismatches-*.tsv` are curated from such a
//! dump, and the CPU tests replay them).
//!
//! Each test needs a GPU, so all are `#[ignore]`d: `bash .gpu/run gpu_tc_model` on the GPU
//! host, with `-- --nocapture` for the tables. Run it once per tensor-core path:
//! `SGEMM_BI_FORCE_TC_PATH=portable` (mma.sync) and `=hopper` (wgmma), and unset (the
//! planner's choice).

mod gpu_support;

use gpu_support::{gpu_engine, HostBuf, Problem, RawStream, Rng};
use sgemm_bi::numeric::CANONICAL_NAN_F32;
use sgemm_bi::{bf16, f16, DType, Device, Engine, Gemm, Layout, Operand, Output, OutputMode, Tier};

const DTYPES: [DType; 2] = [DType::BF16, DType::F16];
const LAYOUTS: [Layout; 2] = [Layout::RowMajor, Layout::ColMajor];

fn cpu() -> Engine {
    Engine::new(Device::Cpu).expect("the CPU engine always exists")
}

/// The kinds of input data: the six distributions of the golden files, and three more for
/// what they do not cover.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Dist {
    /// normal(0, 1)
    Normal,
    /// normal scaled by 2^U(−20..20) (bf16) or 2^U(−6..6) (f16)
    Scaled,
    /// normal, with A[i][2m+1] = −A[i][2m]: products cancel in pairs
    Cancelling,
    /// one value in seven huge, the rest tiny
    OneHuge,
    /// products near or below the f32 subnormal range (bf16), small f16 values
    Tiny,
    /// products near the f32 overflow (bf16), large f16 values
    Large,
    /// half subnormal inputs, half large ones, so products of subnormals with large values
    /// land in the normal range and decide E
    Subnormal,
    /// normal with NaN, ±Inf and zeros planted, zeros opposite some infinities (Inf · 0)
    Specials,
    /// clustered exponents 2^U(−3..3) with a random sign: long K in a narrow range
    Clustered,
}

const DISTS: [Dist; 9] = [
    Dist::Normal,
    Dist::Scaled,
    Dist::Cancelling,
    Dist::OneHuge,
    Dist::Tiny,
    Dist::Large,
    Dist::Subnormal,
    Dist::Specials,
    Dist::Clustered,
];

fn normal(rng: &mut Rng) -> f64 {
    let u = (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
    let v = (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
    (-2.0 * (1.0 - u).ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()
}

fn to_bits(dtype: DType, v: f64) -> u16 {
    match dtype {
        DType::BF16 => bf16::from_f64(v).to_bits(),
        _ => f16::from_f64(v).to_bits(),
    }
}

fn pow2(rng: &mut Rng, lo: i32, hi: i32) -> f64 {
    2f64.powi(lo + rng.below((hi - lo + 1) as usize) as i32)
}

/// One input element of `dist` (before planting), of A or of B.
fn element(rng: &mut Rng, dtype: DType, dist: Dist, in_a: bool) -> u16 {
    let bf = dtype == DType::BF16;
    let x = normal(rng);
    let v = match dist {
        Dist::Normal | Dist::Cancelling | Dist::Specials => x,
        Dist::Scaled => {
            x * if bf {
                pow2(rng, -20, 20)
            } else {
                pow2(rng, -6, 6)
            }
        }
        Dist::OneHuge => {
            let huge = rng.below(7) == 0;
            x * match (bf, huge) {
                (true, true) => 2f64.powi(20),
                (true, false) => 2f64.powi(-20),
                (false, true) => 2f64.powi(7),
                (false, false) => 2f64.powi(-7),
            }
        }
        Dist::Tiny => {
            x * if bf {
                pow2(rng, -76, -64)
            } else {
                pow2(rng, -22, -10)
            }
        }
        Dist::Large => {
            x * if bf {
                pow2(rng, 57, 62)
            } else {
                pow2(rng, 10, 14)
            }
        }
        // A: subnormals and the smallest normals; B: large values. Their products meet in
        // the normal range without overflowing, and a product with a subnormal factor often
        // has the step's largest exponent.
        Dist::Subnormal if in_a => {
            if rng.below(2) == 0 {
                // A subnormal: exponent field 0, random fraction (never zero).
                let frac_bits = if bf { 7 } else { 10 };
                let frac = 1 + rng.below((1 << frac_bits) - 1) as u16;
                let sign = (rng.below(2) as u16) << 15;
                return sign | frac;
            }
            x * if bf {
                pow2(rng, -126, -122)
            } else {
                pow2(rng, -14, -11)
            }
        }
        Dist::Subnormal => {
            x * if bf {
                pow2(rng, 100, 120)
            } else {
                pow2(rng, 8, 14)
            }
        }
        Dist::Clustered => {
            let s = if rng.below(2) == 0 { 1.0 } else { -1.0 };
            s * (1.0 + rng.unit().abs() as f64) * pow2(rng, -3, 3)
        }
    };
    to_bits(dtype, v)
}

/// Index of element (row, col) of batch entry `batch` of an operand.
fn index(op: &Operand, batch: usize, row: usize, col: usize) -> usize {
    batch * op.batch_stride
        + match op.layout {
            Layout::RowMajor => row * op.ld + col,
            Layout::ColMajor => row + col * op.ld,
        }
}

/// A buffer of `len` 16-bit elements from bit patterns.
fn buf16(dtype: DType, bits: &[u16]) -> HostBuf {
    match dtype {
        DType::BF16 => HostBuf::BF16(bits.iter().map(|&b| bf16::from_bits(b)).collect()),
        _ => HostBuf::F16(bits.iter().map(|&b| f16::from_bits(b)).collect()),
    }
}

/// The inputs of `g` drawn from `dist`. Elements outside the matrices (padding, gaps) are
/// NaN: a kernel that read them would make the results differ.
fn problem(g: Gemm, dist: Dist, rng: &mut Rng) -> Problem {
    let ext = sgemm_bi::validate::check(&g).expect("test descriptors are valid");
    let dtype = g.a.dtype;
    let nan = if dtype == DType::BF16 { 0x7FC1 } else { 0x7E01 };
    let inf = if dtype == DType::BF16 { 0x7F80 } else { 0x7C00 };
    let mut a = vec![nan; ext.a.max(1)];
    let mut b = vec![nan; ext.b.max(1)];
    for bt in 0..g.batch {
        for i in 0..g.m {
            for k in 0..g.k {
                let idx = index(&g.a, bt, i, k);
                a[idx] = if dist == Dist::Cancelling && k % 2 == 1 {
                    a[index(&g.a, bt, i, k - 1)] ^ 0x8000
                } else {
                    element(rng, dtype, dist, true)
                };
            }
        }
        for k in 0..g.k {
            for j in 0..g.n {
                b[index(&g.b, bt, k, j)] = element(rng, dtype, dist, false);
            }
        }
        if dist == Dist::Specials && g.m > 0 && g.n > 0 && g.k > 0 {
            // A few specials per entry: each hits one row or column of outputs, and about
            // one output in three of a wide call; some infinities meet a planted zero.
            let count = 1 + (g.m + g.n) / 40;
            for _ in 0..count {
                let (i, j, k) = (rng.below(g.m), rng.below(g.n), rng.below(g.k));
                let v = rng.pick(&[nan, inf, inf | 0x8000, 0, 0x8000]);
                if rng.below(2) == 0 {
                    a[index(&g.a, bt, i, k)] = v;
                    if v & 0x7FFF == inf && rng.below(2) == 0 {
                        b[index(&g.b, bt, k, j)] = rng.pick(&[0, 0x8000]);
                    }
                } else {
                    b[index(&g.b, bt, k, j)] = v;
                    if v & 0x7FFF == inf && rng.below(2) == 0 {
                        a[index(&g.a, bt, i, k)] = rng.pick(&[0, 0x8000]);
                    }
                }
            }
        }
    }
    let bias = g.bias.map(|d| {
        let v: Vec<f64> = (0..g.n.max(1)).map(|_| normal(rng)).collect();
        match d {
            DType::F32 => HostBuf::F32(v.iter().map(|&x| x as f32).collect()),
            _ => buf16(d, &v.iter().map(|&x| to_bits(d, x)).collect::<Vec<_>>()),
        }
    });
    let c0 = match g.c.mode {
        OutputMode::AccumulateF32 => HostBuf::random(DType::F32, ext.c.max(1), rng),
        OutputMode::Overwrite(d) => HostBuf::poison(d, ext.c.max(1)),
    };
    Problem {
        g,
        a: buf16(dtype, &a),
        b: buf16(dtype, &b),
        bias,
        c0,
    }
}

/// Matches and comparisons over a run, with the first mismatches described.
#[derive(Default)]
struct Tally {
    outputs: usize,
    mismatches: usize,
    shown: usize,
    by_kind: std::collections::BTreeMap<String, (usize, usize)>,
}

impl Tally {
    /// Compares the GPU's and the CPU's C of `p` (the whole buffer: padding must be
    /// untouched by both) and records the result under `kind`.
    fn compare(&mut self, p: &Problem, gpu: &HostBuf, cpu: &HostBuf, kind: &str) {
        let g = &p.g;
        let (gb, cb) = (gpu.bits(), cpu.bits());
        let entry = self.by_kind.entry(kind.to_string()).or_default();
        let mut bad = 0;
        for (idx, (x, y)) in gb.iter().zip(&cb).enumerate() {
            if x == y {
                continue;
            }
            bad += 1;
            dump_mismatch(p, idx, *x, *y, kind);
            if self.shown < 8 {
                self.shown += 1;
                let (bt, r) = match g.c.batch_stride {
                    0 => (0, idx),
                    s => (idx / s, idx % s),
                };
                let (i, j) = (r / g.c.ldc, r % g.c.ldc);
                println!("MISMATCH {kind} {g:?}\n  C element {idx} (batch {bt}, row {i}, column {j}): GPU {x:#010x}, CPU model {y:#010x}");
                if i < g.m && j < g.n && g.k <= 256 {
                    let (a, b) = (p.a.bits(), p.b.bits());
                    let row: Vec<String> = (0..g.k)
                        .map(|k| format!("{:04x}", a[index(&g.a, bt, i, k)]))
                        .collect();
                    let col: Vec<String> = (0..g.k)
                        .map(|k| format!("{:04x}", b[index(&g.b, bt, k, j)]))
                        .collect();
                    println!("  A row: {}\n  B column: {}", row.join(" "), col.join(" "));
                }
            }
        }
        let n = g.batch * g.m * g.n;
        self.outputs += n;
        self.mismatches += bad;
        entry.0 += n;
        entry.1 += bad;
    }

    fn report(&self, gpu: &Engine, what: &str) {
        let cc = gpu.compute_capability().unwrap_or((0, 0));
        for (kind, (n, bad)) in &self.by_kind {
            println!("  {kind}: {} of {n} outputs match", n - bad);
        }
        println!(
            "{what}: {} of {} outputs match the CPU model (compute capability {}.{})",
            self.outputs - self.mismatches,
            self.outputs,
            cc.0,
            cc.1
        );
        assert_eq!(
            self.mismatches, 0,
            "{what}: {} of {} outputs differ from the CPU model on compute capability {}.{} \
             (the model is the sm_90 definition; other families may differ)",
            self.mismatches, self.outputs, cc.0, cc.1
        );
    }
}

/// With `SGEMM_BI_TC_MODEL_DUMP=<file>`, appends one line per mismatching output (at most
/// 50,000 per process) for offline study of the model, tab-separated: kind, dtype, output
/// mode, K, GPU and CPU bits (hex: 8 digits for an f32 output, 4 for a 16-bit one), the
/// bias element (8 hex digits for f32, 4 for the input dtype) and C's old value (or `-`),
/// then the A row and the B column (K 16-bit values each, space-separated). It is the
/// format of `tests/data/tc-h200/mismatches-*.tsv` (without their header).
fn dump_mismatch(p: &Problem, idx: usize, gpu: u32, cpu: u32, kind: &str) {
    use std::io::Write;
    use std::sync::atomic::{AtomicUsize, Ordering};
    static DUMPED: AtomicUsize = AtomicUsize::new(0);
    let Some(path) = std::env::var_os("SGEMM_BI_TC_MODEL_DUMP") else {
        return;
    };
    if DUMPED.fetch_add(1, Ordering::Relaxed) >= 50_000 {
        return;
    }
    let g = &p.g;
    let (bt, r) = match g.c.batch_stride {
        0 => (0, idx),
        s => (idx / s, idx % s),
    };
    let (i, j) = (r / g.c.ldc, r % g.c.ldc);
    if i >= g.m || j >= g.n {
        return;
    }
    let (a, b) = (p.a.bits(), p.b.bits());
    let row: Vec<String> = (0..g.k)
        .map(|k| format!("{:04x}", a[index(&g.a, bt, i, k)]))
        .collect();
    let col: Vec<String> = (0..g.k)
        .map(|k| format!("{:04x}", b[index(&g.b, bt, k, j)]))
        .collect();
    let bias = p
        .bias
        .as_ref()
        .map_or("-".to_string(), |b| match b.dtype() {
            DType::F32 => format!("{:08x}", b.bits()[j]),
            _ => format!("{:04x}", b.bits()[j]),
        });
    let (gpu, cpu) = match g.c.mode {
        OutputMode::Overwrite(DType::BF16 | DType::F16) => {
            (format!("{gpu:04x}"), format!("{cpu:04x}"))
        }
        _ => (format!("{gpu:08x}"), format!("{cpu:08x}")),
    };
    let old = match g.c.mode {
        OutputMode::AccumulateF32 => format!("{:08x}", p.c0.bits()[idx]),
        OutputMode::Overwrite(_) => "-".to_string(),
    };
    let line = format!(
        "{kind}\t{:?}\t{:?}\t{}\t{gpu}\t{cpu}\t{bias}\t{old}\t{}\t{}\n",
        g.a.dtype,
        g.c.mode,
        g.k,
        row.join(" "),
        col.join(" ")
    );
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .expect("the dump file opens");
    f.write_all(line.as_bytes())
        .expect("the dump line is written");
}

fn run(gpu: &Engine, cpu: &Engine, stream: &RawStream, p: &Problem, tally: &mut Tally, kind: &str) {
    let on_gpu = p.on_gpu(gpu, stream);
    let on_cpu = p.on_cpu(cpu);
    tally.compare(p, &on_gpu, &on_cpu, kind);
}

fn operand(dtype: DType, layout: Layout, rows: usize, cols: usize, pad: usize) -> Operand {
    let ld = match layout {
        Layout::RowMajor => cols,
        Layout::ColMajor => rows,
    }
    .max(1)
        + pad;
    Operand {
        dtype,
        layout,
        ld,
        batch_stride: 0,
    }
}

/// A tensor-core descriptor with f32 output (no bias), so every accumulator bit is seen.
fn plain(m: usize, n: usize, k: usize, dtype: DType, la: Layout, lb: Layout) -> Gemm {
    Gemm {
        a: operand(dtype, la, m, k, 0),
        b: operand(dtype, lb, k, n, 0),
        c: Output {
            mode: OutputMode::Overwrite(DType::F32),
            ldc: n,
            batch_stride: 0,
        },
        tier: Tier::TensorCores,
        ..Gemm::dense(m, n, k, dtype)
    }
}

/// Every distribution, both dtypes, all four layout pairs, and K from 1 to 64 plus long
/// tails: the step arithmetic, the zero padding of the K tail and the skipped last step.
#[test]
#[ignore = "needs a CUDA GPU"]
fn every_distribution_layout_and_k_tail_matches_the_model() {
    let Some(gpu) = gpu_engine() else { return };
    let (cpu, stream) = (cpu(), RawStream::new());
    let mut rng = Rng::new(0x7c_5001);
    let mut tally = Tally::default();
    for dtype in DTYPES {
        for dist in DISTS {
            for la in LAYOUTS {
                for lb in LAYOUTS {
                    for k in (1..=64).chain([255, 257, 1000, 1023]) {
                        let g = plain(19, 45, k, dtype, la, lb);
                        let p = problem(g, dist, &mut rng);
                        run(
                            &gpu,
                            &cpu,
                            &stream,
                            &p,
                            &mut tally,
                            &format!("{dtype} {dist:?}"),
                        );
                    }
                }
            }
        }
    }
    tally.report(&gpu, "distributions × layouts × K tails");
}

/// Decode calls (M ≤ 16 rows, A and B K-contiguous: torch's `x @ W.T`) in every
/// distribution and output mode: the narrow tiles of 8 and 16 rows, at the decode widths
/// (16, 32 and 48 columns, stored from registers) and 64, K tails of one to three steps, a
/// partial last tile of columns. The decode widths stage several K tiles at once
/// (`k_slices`: four at 16 columns, two at 32 and 48), so K also ends at every place in a
/// stage: its first slice, a whole slice short of its end, a tail of one to four steps after
/// whole slices.
#[test]
#[ignore = "needs a CUDA GPU"]
fn decode_calls_match_the_model() {
    let Some(gpu) = gpu_engine() else { return };
    let (cpu, stream) = (cpu(), RawStream::new());
    let mut rng = Rng::new(0x7c_5007);
    let mut tally = Tally::default();
    for dtype in DTYPES {
        for dist in DISTS {
            for (m, n, k) in [
                (1, 200, 64),
                (3, 136, 520),
                (8, 2056, 1000),
                (9, 64, 88),
                (16, 312, 4104),
                (2, 48, 192),
                (5, 104, 320),
                (1, 4096, 200),
                (8, 5632, 584),
                (4, 2056, 127),
                (1, 4096, 1023),
            ] {
                for mode in [
                    OutputMode::Overwrite(DType::F32),
                    OutputMode::Overwrite(dtype),
                    OutputMode::AccumulateF32,
                ] {
                    let mut g = plain(m, n, k, dtype, Layout::RowMajor, Layout::ColMajor);
                    g.c.mode = mode;
                    let p = problem(g, dist, &mut rng);
                    run(
                        &gpu,
                        &cpu,
                        &stream,
                        &p,
                        &mut tally,
                        &format!("{dtype} {dist:?} decode"),
                    );
                }
            }
        }
    }
    tally.report(&gpu, "decode calls");
}

/// Batches of small products, `(batch, m, n, k)`, with A row-major and B in layout `lb`
/// (each product's operands and output packed one after another), in every dtype,
/// distribution and output mode, against the model.
fn batched_calls_match_the_model(
    lb: Layout,
    shapes: &[(usize, usize, usize, usize)],
    seed: u64,
    kind: &str,
    report: &str,
) {
    let Some(gpu) = gpu_engine() else { return };
    let (cpu, stream) = (cpu(), RawStream::new());
    let mut rng = Rng::new(seed);
    let mut tally = Tally::default();
    for dtype in DTYPES {
        for dist in DISTS {
            for &(batch, m, n, k) in shapes {
                for mode in [
                    OutputMode::Overwrite(DType::F32),
                    OutputMode::Overwrite(dtype),
                    OutputMode::AccumulateF32,
                ] {
                    let mut g = plain(m, n, k, dtype, Layout::RowMajor, lb);
                    g.batch = batch;
                    g.a.batch_stride = m * k;
                    g.b.batch_stride = n * k;
                    g.c.mode = mode;
                    g.c.batch_stride = m * n;
                    let p = problem(g, dist, &mut rng);
                    run(
                        &gpu,
                        &cpu,
                        &stream,
                        &p,
                        &mut tally,
                        &format!("{dtype} {dist:?} {kind}"),
                    );
                }
            }
        }
    }
    tally.report(&gpu, report);
}

/// Batches of small products with A and B K-contiguous, as a decode step's attention scores
/// (one query row by a short K against each head's keys): the host gives them the wide tiles
/// of 8 and 16 rows (`hopper::WIDE_SHORT_BN`; 256 columns for the first three shapes, 128
/// for the last, on the H200's 132 SMs), with K tails and partial last tiles.
#[test]
#[ignore = "needs a CUDA GPU"]
fn attention_score_calls_match_the_model() {
    batched_calls_match_the_model(
        Layout::ColMajor,
        &[
            (300, 1, 520, 64),
            (280, 2, 264, 72),
            (140, 11, 250, 128),
            (200, 9, 120, 136),
        ],
        0x5c_0e55,
        "attention scores",
        "attention score calls",
    );
}

/// Batches of small products with B N-contiguous, as a decode step's `attn @ v` (one row of
/// attention weights against each head's values, 64 columns): with more tiles than the GPU
/// has blocks the host gives the 64-column tiles of 8 and 16 rows ping-pong consumers
/// (`host/src/cuda/hopper.rs`, `pingpong_short_values`; the first four shapes on the H200's
/// 132 SMs, the last in one round with one consumer), with K tails and partial last tiles.
#[test]
#[ignore = "needs a CUDA GPU"]
fn attention_value_calls_match_the_model() {
    batched_calls_match_the_model(
        Layout::RowMajor,
        &[
            (300, 1, 64, 520),
            (280, 2, 64, 264),
            (140, 11, 64, 250),
            (200, 9, 72, 136),
            (40, 1, 64, 520),
        ],
        0x5c_0e56,
        "attention values",
        "attention value calls",
    );
}

/// Hundreds of k16 steps (up to 1,300), with tails, in every distribution: the chaining of
/// steps, where the accumulator's exponent rises above the products'.
#[test]
#[ignore = "needs a CUDA GPU"]
fn long_k_matches_the_model() {
    let Some(gpu) = gpu_engine() else { return };
    let (cpu, stream) = (cpu(), RawStream::new());
    let mut rng = Rng::new(0x7c_5002);
    let mut tally = Tally::default();
    for dtype in DTYPES {
        for dist in DISTS {
            for (k, la, lb) in [
                (16 * 300, Layout::RowMajor, Layout::ColMajor),
                (16 * 700 - 5, Layout::RowMajor, Layout::RowMajor),
                (16 * 1300 + 9, Layout::ColMajor, Layout::ColMajor),
            ] {
                let g = plain(70, 130, k, dtype, la, lb);
                let p = problem(g, dist, &mut rng);
                run(
                    &gpu,
                    &cpu,
                    &stream,
                    &p,
                    &mut tally,
                    &format!("{dtype} {dist:?}"),
                );
            }
        }
    }
    tally.report(&gpu, "long K");
}

/// NaN, ±Inf, Inf · 0 and zeros planted in every layout and both dtypes, every output mode.
/// The model's IEEE rules for them matched all 211,344 outputs on the H200 (2026-11-29).
#[test]
#[ignore = "needs a CUDA GPU"]
fn nan_inf_and_inf_times_zero_match_the_model() {
    let Some(gpu) = gpu_engine() else { return };
    let (cpu, stream) = (cpu(), RawStream::new());
    let mut rng = Rng::new(0x7c_5003);
    let mut tally = Tally::default();
    for dtype in DTYPES {
        for la in LAYOUTS {
            for lb in LAYOUTS {
                for (m, n, k) in [(40, 60, 16), (33, 70, 45), (64, 64, 300)] {
                    for mode in [
                        OutputMode::Overwrite(DType::F32),
                        OutputMode::Overwrite(dtype),
                        OutputMode::AccumulateF32,
                    ] {
                        let mut g = plain(m, n, k, dtype, la, lb);
                        g.c.mode = mode;
                        let p = problem(g, Dist::Specials, &mut rng);
                        run(
                            &gpu,
                            &cpu,
                            &stream,
                            &p,
                            &mut tally,
                            &format!("{dtype} specials"),
                        );
                    }
                }
            }
        }
    }
    tally.report(&gpu, "NaN / Inf / Inf · 0");
}

/// Subnormal inputs in bf16 and f16 (the golden files have them in f16 only, where they did
/// not decide any output): a subnormal counts with its format's smallest normal exponent.
#[test]
#[ignore = "needs a CUDA GPU"]
fn subnormal_inputs_match_the_model() {
    let Some(gpu) = gpu_engine() else { return };
    let (cpu, stream) = (cpu(), RawStream::new());
    let mut rng = Rng::new(0x7c_5004);
    let mut tally = Tally::default();
    for dtype in DTYPES {
        for la in LAYOUTS {
            for lb in LAYOUTS {
                for k in [16, 37, 64, 513] {
                    for dist in [Dist::Subnormal, Dist::Tiny] {
                        let g = plain(64, 96, k, dtype, la, lb);
                        let p = problem(g, dist, &mut rng);
                        run(
                            &gpu,
                            &cpu,
                            &stream,
                            &p,
                            &mut tally,
                            &format!("{dtype} {dist:?}"),
                        );
                    }
                }
            }
        }
    }
    tally.report(&gpu, "subnormal inputs");
}

/// One crafted case: the 16-bit values of A (one row) and B (one column), K = a.len().
struct Crafted {
    name: &'static str,
    dtype: DType,
    a: Vec<f64>,
    b: Vec<f64>,
    /// Raw bits to put at (k, in A?, bits) after the values are encoded (NaN, Inf).
    raw: Vec<(usize, bool, u16)>,
    /// What the model gives (checked on the CPU first) and what a plain IEEE fma chain (or
    /// another rule) would give, for the table.
    model: u32,
    alternative: &'static str,
}

fn p2(e: i32) -> f64 {
    2f64.powi(e)
}

/// Steps that separate the model from its nearest alternatives. Each is a 1 × 1 GEMM (one
/// entry of a batch); two steps when the accumulator must be set up first.
fn crafted() -> Vec<Crafted> {
    let pad = |mut v: Vec<f64>, to: usize| {
        v.resize(to, 0.0);
        v
    };
    let step0_then = |first: Vec<(f64, f64)>, second: Vec<(f64, f64)>| {
        let (mut a, mut b) = (Vec::new(), Vec::new());
        // An empty second step is left out (K = 16).
        for s in [first, second].into_iter().filter(|s| !s.is_empty()) {
            let (x, y): (Vec<f64>, Vec<f64>) = s.into_iter().unzip();
            a.extend(pad(x, 16));
            b.extend(pad(y, 16));
        }
        (a, b)
    };
    let mut v = Vec::new();
    let mut small: Vec<(f64, f64)> = vec![(1.0, 1.0)];
    small.extend([(p2(-13), p2(-13)); 15]);
    for dtype in DTYPES {
        let (a, b): (Vec<f64>, Vec<f64>) = small.iter().copied().unzip();
        v.push(Crafted {
            name: "1 + 15 terms of 2^-26: each below the grid, cut before the sum",
            dtype,
            a,
            b,
            raw: vec![],
            model: 1f32.to_bits(),
            alternative: "1 + 2^-23 if truncated once after an exact sum; 1 + 2^-22 by RNE",
        });
    }
    let (a, b) = step0_then(
        vec![(1.0, 1.0), (-p2(-12), p2(-12) * (1.0 + p2(-7)))],
        vec![],
    );
    v.push(Crafted {
        name: "1 - 2^-24 (1 + 2^-7): a negative term truncated toward zero",
        dtype: DType::BF16,
        a,
        b,
        raw: vec![],
        model: ((1.0 - p2(-24)) as f32).to_bits(),
        alternative: "1 - 2^-23 if truncated downward",
    });
    let (a, b) = step0_then(vec![(p2(-75), 3.0 * p2(-74))], vec![(p2(-76), p2(-76)); 16]);
    v.push(Crafted {
        name: "subnormal accumulator 3 * 2^-149 + 16 * 2^-152: counts as 2^-126",
        dtype: DType::BF16,
        a,
        b,
        raw: vec![],
        model: 3,
        alternative: "5 (0x5) with its true exponent or by an fma chain",
    });
    let (a, b) = step0_then(
        vec![
            (255.0 * p2(120), 1.0),
            (255.0 * p2(112), 1.0),
            (255.0 * p2(104), 1.0),
        ],
        vec![(p2(103), 1.0)],
    );
    v.push(Crafted {
        name: "f32::MAX + 2^103 (half an ulp): truncated, no overflow",
        dtype: DType::BF16,
        a,
        b,
        raw: vec![],
        model: f32::MAX.to_bits(),
        alternative: "+Inf by RNE",
    });
    let (a, b) = step0_then(vec![(p2(127), 2.0)], vec![]);
    v.push(Crafted {
        name: "2^128: overflow to +Inf",
        dtype: DType::BF16,
        a,
        b,
        raw: vec![],
        model: f32::INFINITY.to_bits(),
        alternative: "",
    });
    let (a, b) = step0_then(vec![(p2(24), p2(24))], vec![(-p2(24), p2(24)), (0.5, 0.5)]);
    v.push(Crafted {
        name: "2^48 - 2^48 + 2^-2: the accumulator's grid drops the small product",
        dtype: DType::BF16,
        a,
        b,
        raw: vec![],
        model: 0,
        alternative: "0.25 (0x3e800000) exactly",
    });
    let (a, b) = step0_then(vec![(-p2(-75), p2(-75))], vec![]);
    v.push(Crafted {
        name: "-2^-150: a negative sum that truncates to zero is +0.0",
        dtype: DType::BF16,
        a,
        b,
        raw: vec![],
        model: 0,
        alternative: "-0.0 by IEEE's rounding toward zero",
    });
    let (a, b) = step0_then(vec![(-p2(-75), p2(-75))], vec![(-1.0, 0.0); 16]);
    v.push(Crafted {
        name: "-0.0 accumulator + sixteen -0.0 products: an exact zero sum",
        dtype: DType::BF16,
        a,
        b,
        raw: vec![],
        model: 0,
        alternative: "-0.0 by IEEE",
    });
    let x = 1.0 + p2(-10);
    let (a, b) = step0_then(vec![(p2(-24), p2(15)), (x, p2(-9) * x)], vec![]);
    v.push(Crafted {
        name: "f16 subnormal 2^-24 * 2^15 sets E = 1 (a subnormal counts as 2^-14)",
        dtype: DType::F16,
        a,
        b,
        raw: vec![],
        model: ((p2(-9) + p2(-9) * (1.0 + p2(-9))) as f32).to_bits(),
        alternative: "2^-9 (2 + 2^-9 + 2^-20) with its own exponent (E = -9)",
    });
    let y = 1.0 + p2(-7);
    let (a, b) = step0_then(
        vec![(p2(-130), p2(100)), (p2(-19) * y, p2(-19) * y)],
        vec![],
    );
    v.push(Crafted {
        name: "bf16 subnormal 2^-130 * 2^100 sets E = -26 (a subnormal counts as 2^-126)",
        dtype: DType::BF16,
        a,
        b,
        raw: vec![],
        model: ((p2(-30) + p2(-38) * (1.0 + p2(-6))) as f32).to_bits(),
        alternative: "2^-30 + 2^-38 (1 + 2^-6 + 2^-14) with its own exponent (E = -30)",
    });
    let (a, b) = step0_then(vec![(p2(-68), p2(-68)), (-p2(-80), p2(-80))], vec![]);
    v.push(Crafted {
        name: "bf16 2^-136 - 2^-160: E is at least -133, the small product vanishes",
        dtype: DType::BF16,
        a,
        b,
        raw: vec![],
        model: 0x2000,
        alternative: "0x1fff (8191 * 2^-149) with E = -136 (grid 2^-161)",
    });
    // Specials: raw patterns over finite values.
    let (a, b) = step0_then(vec![(1.0, 1.0), (0.0, 0.0)], vec![(0.0, 0.0)]);
    v.push(Crafted {
        name: "Inf * 0 → NaN",
        dtype: DType::BF16,
        a: a.clone(),
        b: b.clone(),
        raw: vec![(1, true, 0x7F80)],
        model: CANONICAL_NAN_F32,
        alternative: "",
    });
    v.push(Crafted {
        name: "Inf * 1 + (-Inf) * 1 → NaN",
        dtype: DType::BF16,
        a: a.clone(),
        b: b.clone(),
        raw: vec![(0, true, 0x7F80), (1, true, 0xFF80), (1, false, 0x3F80)],
        model: CANONICAL_NAN_F32,
        alternative: "",
    });
    v.push(Crafted {
        name: "-Inf * 1 then finite steps → -Inf",
        dtype: DType::BF16,
        a: a.clone(),
        b: b.clone(),
        raw: vec![(0, true, 0xFF80), (20, true, 0x3F80), (20, false, 0x3F80)],
        model: f32::NEG_INFINITY.to_bits(),
        alternative: "",
    });
    v.push(Crafted {
        name: "NaN * 1 → NaN",
        dtype: DType::F16,
        a: a.clone(),
        b: b.clone(),
        raw: vec![(3, true, 0x7E01), (3, false, 0x3C00)],
        model: CANONICAL_NAN_F32,
        alternative: "",
    });
    v.push(Crafted {
        name: "bf16 overflow in step 0 (+Inf accumulator), -Inf product in step 1 → NaN",
        dtype: DType::BF16,
        a,
        b,
        raw: vec![
            (0, true, 0x7F7F),
            (0, false, 0x7F7F),
            (17, true, 0xFF80),
            (17, false, 0x3F80),
        ],
        model: CANONICAL_NAN_F32,
        alternative: "",
    });
    v
}

fn crafted_problem(c: &Crafted) -> Problem {
    let k = c.a.len();
    let g = plain(1, 1, k, c.dtype, Layout::RowMajor, Layout::ColMajor);
    let mut a: Vec<u16> = c.a.iter().map(|&x| to_bits(c.dtype, x)).collect();
    let mut b: Vec<u16> = c.b.iter().map(|&x| to_bits(c.dtype, x)).collect();
    for (i, (&x, &y)) in c.a.iter().zip(&c.b).enumerate() {
        let back = |bits: u16| match c.dtype {
            DType::BF16 => bf16::from_bits(bits).to_f64(),
            _ => f16::from_bits(bits).to_f64(),
        };
        assert!(
            back(a[i]) == x && back(b[i]) == y,
            "{}: value {i} is not exact",
            c.name
        );
    }
    for &(k, in_a, bits) in &c.raw {
        if in_a {
            a[k] = bits;
        } else {
            b[k] = bits;
        }
    }
    Problem {
        g,
        a: buf16(c.dtype, &a),
        b: buf16(c.dtype, &b),
        bias: None,
        c0: HostBuf::poison(DType::F32, 1),
    }
}

/// The crafted steps on the CPU (must give the model's value) and on the GPU, in a table.
#[test]
#[ignore = "needs a CUDA GPU"]
fn crafted_steps_match_the_model() {
    let cpu = cpu();
    let cases = crafted();
    let problems: Vec<Problem> = cases.iter().map(crafted_problem).collect();
    for (c, p) in cases.iter().zip(&problems) {
        assert_eq!(
            p.on_cpu(&cpu).bits()[0],
            c.model,
            "the CPU model on: {}",
            c.name
        );
    }
    let Some(gpu) = gpu_engine() else { return };
    let stream = RawStream::new();
    let mut tally = Tally::default();
    println!("| case | model | GPU | alternative |\n|---|---|---|---|");
    for (c, p) in cases.iter().zip(&problems) {
        let got = p.on_gpu(&gpu, &stream);
        let bits = got.bits()[0];
        println!(
            "| {} | {:#010x} | {bits:#010x} | {} |",
            c.name, c.model, c.alternative
        );
        tally.compare(p, &got, &p.on_cpu(&cpu), c.name);
    }
    tally.report(&gpu, "crafted steps");
}

/// The comparison: at least 10⁶ outputs of random calls — shapes with K tails, both
/// layouts, bf16 and f16, bias and accumulate modes, batches, every distribution including
/// planted NaN, Inf and subnormals.
#[test]
#[ignore = "needs a CUDA GPU"]
fn a_million_outputs_match_the_model() {
    let Some(gpu) = gpu_engine() else { return };
    let (cpu, stream) = (cpu(), RawStream::new());
    let mut rng = Rng::new(0x7c_5005);
    let mut tally = Tally::default();
    let mut case = 0;
    while tally.outputs < 1_000_000 {
        case += 1;
        let dim = |rng: &mut Rng| {
            if rng.below(3) == 0 {
                rng.pick(&[1, 2, 15, 16, 17, 31, 33, 127, 129, 255])
            } else {
                1 + rng.below(300)
            }
        };
        let (m, n) = (dim(&mut rng), dim(&mut rng));
        let k = if rng.below(4) == 0 {
            1 + rng.below(4000)
        } else {
            1 + rng.below(300)
        };
        let dtype = rng.pick(&DTYPES);
        let batch = rng.pick(&[1, 1, 1, 2, 3]);
        let (la, lb) = (rng.pick(&LAYOUTS), rng.pick(&LAYOUTS));
        let pad = rng.pick(&[0, 0, 1, 3, 8]);
        let mut a = operand(dtype, la, m, k, pad);
        let mut b = operand(dtype, lb, k, n, pad);
        let mode = rng.pick(&[
            OutputMode::Overwrite(DType::F32),
            OutputMode::Overwrite(DType::F32),
            OutputMode::AccumulateF32,
            OutputMode::Overwrite(dtype),
        ]);
        let ldc = n + rng.pick(&[0, 0, 5]);
        if batch > 1 {
            a.batch_stride = a.ld * if la == Layout::RowMajor { m } else { k } + pad;
            b.batch_stride = if rng.below(3) == 0 {
                0
            } else {
                b.ld * if lb == Layout::RowMajor { k } else { n } + pad
            };
        }
        let g = Gemm {
            m,
            n,
            k,
            batch,
            a,
            b,
            bias: rng.pick(&[None, Some(DType::F32), Some(dtype)]),
            c: Output {
                mode,
                ldc,
                batch_stride: if batch > 1 { m * ldc + rng.below(3) } else { 0 },
            },
            tier: Tier::TensorCores,
        };
        let dist = rng.pick(&DISTS);
        let p = problem(g, dist, &mut rng);
        run(
            &gpu,
            &cpu,
            &stream,
            &p,
            &mut tally,
            &format!("{dtype} {dist:?}"),
        );
    }
    println!("{case} random calls");
    tally.report(&gpu, "random calls");
}
