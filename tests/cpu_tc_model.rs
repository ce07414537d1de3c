//! The tensor-core tier on the CPU backend, through the public API (contract C4): the CPU
//! computes the bits of the sm_90 tensor cores from the step model of
//! `tests/data/tc-h200/README.md`.
//!
//! - Every output recorded on an H200 (12 files, 16,384 outputs each, both kernels'
//!   columns) is reproduced bit for bit by `Engine::gemm_host` with `Tier::TensorCores` on
//!   `Device::Cpu`, in every output mode and for every operand layout.
//! - Every output where the H200 differed from the first model in the wider comparison of
//!   2026-11-29 (`tests/data/tc-h200/mismatches-*.tsv`: subnormal inputs, tiny bf16
//!   products, negative sums that truncate to zero, K tails, bias and accumulate modes) is
//!   the GPU's bits through the API: each as the diagonal of a square call, and a sample as
//!   1 × 1 calls in both operand layouts.
//! - The tier's order through the API: a K tail is padded with zeros (K = 37 gives the bits
//!   of K = 48 with zero columns). That rows do not depend on M, columns not on N, entries
//!   not on the batch count is checked in `tests/contract.rs` (`cpu_tensor_model`).
//!
//! The golden files are kept in the repository (`tests/data/tc-h200/`, recorded
//! on an H200, about 2 MiB, and the curated mismatch records, about 0.5 MiB)
//! so that a clean clone runs these tests.

use sgemm_bi::{
    bf16, f16, DType, Device, Engine, Error, Gemm, HostSlice, HostSliceMut, Layout, Operand,
    Output, OutputMode, Tier,
};

use sgemm_bi::numeric::CANONICAL_NAN_F32;

fn cpu() -> Engine {
    Engine::new(Device::Cpu).expect("the CPU engine always exists")
}

#[path = "data/tc-h200/golden.rs"]
mod golden;

/// One golden file, its input format as this file's tests name it.
struct Golden {
    name: String,
    dtype: DType,
    a: Vec<u16>,
    bt: Vec<u16>,
    c: [Vec<u32>; 2],
}

fn golden_files() -> Vec<Golden> {
    golden::read_all(&std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/tc-h200"))
        .into_iter()
        .map(|f| Golden {
            name: f.name,
            dtype: if f.bf16 { DType::BF16 } else { DType::F16 },
            a: f.a,
            bt: f.bt,
            c: f.c,
        })
        .collect()
}

/// A vector of 16-bit bit patterns as a host slice of `dtype`.
enum Bits16 {
    BF16(Vec<bf16>),
    F16(Vec<f16>),
}

impl Bits16 {
    fn new(dtype: DType, bits: &[u16]) -> Bits16 {
        match dtype {
            DType::BF16 => Bits16::BF16(bits.iter().map(|&b| bf16::from_bits(b)).collect()),
            DType::F16 => Bits16::F16(bits.iter().map(|&b| f16::from_bits(b)).collect()),
            DType::F32 => unreachable!("the tier takes 16-bit inputs"),
        }
    }
    fn slice(&self) -> HostSlice<'_> {
        match self {
            Bits16::BF16(v) => v.into(),
            Bits16::F16(v) => v.into(),
        }
    }
    fn slice_mut(&mut self) -> HostSliceMut<'_> {
        match self {
            Bits16::BF16(v) => v.into(),
            Bits16::F16(v) => v.into(),
        }
    }
    fn bits(&self) -> Vec<u16> {
        match self {
            Bits16::BF16(v) => v.iter().map(|x| x.to_bits()).collect(),
            Bits16::F16(v) => v.iter().map(|x| x.to_bits()).collect(),
        }
    }
}

/// `C[64×256] = A · Bᵀ` of a golden file on the tier, with A and B in the given layouts.
fn golden_gemm(g: &Golden, la: Layout, lb: Layout, mode: OutputMode) -> Gemm {
    let a = match la {
        Layout::RowMajor => Operand::row_major(g.dtype, 64),
        Layout::ColMajor => Operand::col_major(g.dtype, 64),
    };
    let b = match lb {
        Layout::RowMajor => Operand::row_major(g.dtype, 256),
        Layout::ColMajor => Operand::col_major(g.dtype, 64),
    };
    Gemm {
        a,
        b,
        c: Output {
            mode,
            ldc: 256,
            batch_stride: 0,
        },
        tier: Tier::TensorCores,
        ..Gemm::dense(64, 256, 64, g.dtype)
    }
}

/// A (row-major [64][64]) and B (= Btᵀ, [64][256]) stored in the given layouts.
fn golden_operands(g: &Golden, la: Layout, lb: Layout) -> (Bits16, Bits16) {
    let a: Vec<u16> = match la {
        Layout::RowMajor => g.a.clone(),
        Layout::ColMajor => (0..64 * 64).map(|x| g.a[(x % 64) * 64 + x / 64]).collect(),
    };
    // Bt row j is column j of B: B column-major with ld 64 is Bt as it is.
    let b: Vec<u16> = match lb {
        Layout::ColMajor => g.bt.clone(),
        Layout::RowMajor => (0..64 * 256)
            .map(|x| g.bt[(x % 256) * 64 + x / 256])
            .collect(),
    };
    (Bits16::new(g.dtype, &a), Bits16::new(g.dtype, &b))
}

/// Overwrite(F32) gives the recorded accumulators themselves (no bias; NaN would be
/// canonicalised, and none is recorded); AccumulateF32 into zeros gives +0.0 + them, the
/// same bits (no −0.0 is recorded). Both kernels' columns, every file, A row-major and
/// B = Btᵀ (column-major, ld 64), as recorded.
#[test]
fn every_h200_golden_output_is_reproduced_through_the_api() {
    let engine = cpu();
    assert!(engine.supports(Tier::TensorCores));
    let mut matched = 0usize;
    for g in golden_files() {
        let (a, b) = golden_operands(&g, Layout::RowMajor, Layout::ColMajor);
        for mode in [OutputMode::Overwrite(DType::F32), OutputMode::AccumulateF32] {
            let desc = golden_gemm(&g, Layout::RowMajor, Layout::ColMajor, mode);
            let mut c = vec![0.0f32; 64 * 256];
            engine
                .gemm_host(&desc, a.slice(), b.slice(), None, (&mut c).into())
                .unwrap_or_else(|e| panic!("{}: {e}", g.name));
            for (kernel, want) in ["mma.sync", "wgmma"].iter().zip(&g.c) {
                for (idx, (got, &w)) in c.iter().zip(want).enumerate() {
                    assert_ne!(w, 0x8000_0000, "the files record no -0.0");
                    let w = if f32::from_bits(w).is_nan() {
                        CANONICAL_NAN_F32
                    } else {
                        w
                    };
                    assert_eq!(
                        got.to_bits(),
                        w,
                        "{} {mode:?}: C[{}][{}] against {kernel}",
                        g.name,
                        idx / 256,
                        idx % 256
                    );
                }
                if mode == OutputMode::Overwrite(DType::F32) {
                    matched += want.len();
                }
            }
        }
    }
    assert_eq!(matched, 2 * 196_608, "196,608 outputs per kernel");
    println!("{matched} golden outputs matched (196,608 per kernel, mma.sync and wgmma)");
}

/// The layout of A and B does not change a bit, and a 16-bit output is the golden f32
/// rounded once to nearest-even.
#[test]
fn golden_outputs_do_not_depend_on_layouts_and_round_once_to_16_bits() {
    let engine = cpu();
    for g in golden_files() {
        for la in [Layout::RowMajor, Layout::ColMajor] {
            for lb in [Layout::RowMajor, Layout::ColMajor] {
                let (a, b) = golden_operands(&g, la, lb);
                let desc = golden_gemm(&g, la, lb, OutputMode::Overwrite(DType::F32));
                let mut c = vec![0.0f32; 64 * 256];
                engine
                    .gemm_host(&desc, a.slice(), b.slice(), None, (&mut c).into())
                    .unwrap();
                let bits: Vec<u32> = c.iter().map(|x| x.to_bits()).collect();
                assert!(bits == g.c[0], "{} A {la:?} B {lb:?}", g.name);
            }
        }
        let (a, b) = golden_operands(&g, Layout::RowMajor, Layout::ColMajor);
        for out in [DType::BF16, DType::F16] {
            let desc = golden_gemm(
                &g,
                Layout::RowMajor,
                Layout::ColMajor,
                OutputMode::Overwrite(out),
            );
            let mut c = Bits16::new(out, &vec![0u16; 64 * 256]);
            engine
                .gemm_host(&desc, a.slice(), b.slice(), None, c.slice_mut())
                .unwrap();
            let want: Vec<u16> = g.c[0]
                .iter()
                .map(|&w| {
                    let v = f32::from_bits(w);
                    match out {
                        DType::BF16 => bf16::from_f32(v).to_bits(),
                        _ => f16::from_f32(v).to_bits(),
                    }
                })
                .collect();
            assert!(c.bits() == want, "{} to {out}", g.name);
        }
    }
}

#[path = "data/tc-h200/mismatches.rs"]
mod mismatches;

use mismatches::{Bias, Mismatch, Mode};

fn mismatch_records() -> Vec<Mismatch> {
    mismatches::read_all(
        &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/tc-h200"),
    )
}

/// A float buffer of `dtype` from raw bits (f32, or 16-bit values in the low half).
enum AnyBuf {
    F32(Vec<f32>),
    Half(Bits16),
}

impl AnyBuf {
    fn new(dtype: DType, bits: &[u32]) -> AnyBuf {
        match dtype {
            DType::F32 => AnyBuf::F32(bits.iter().map(|&b| f32::from_bits(b)).collect()),
            d => AnyBuf::Half(Bits16::new(
                d,
                &bits.iter().map(|&b| b as u16).collect::<Vec<_>>(),
            )),
        }
    }
    fn slice(&self) -> HostSlice<'_> {
        match self {
            AnyBuf::F32(v) => v.into(),
            AnyBuf::Half(h) => h.slice(),
        }
    }
    fn slice_mut(&mut self) -> HostSliceMut<'_> {
        match self {
            AnyBuf::F32(v) => v.into(),
            AnyBuf::Half(h) => h.slice_mut(),
        }
    }
    fn bits(&self) -> Vec<u32> {
        match self {
            AnyBuf::F32(v) => v.iter().map(|x| x.to_bits()).collect(),
            AnyBuf::Half(h) => h.bits().into_iter().map(u32::from).collect(),
        }
    }
}

fn record_dtype(r: &Mismatch) -> DType {
    if r.bf16 {
        DType::BF16
    } else {
        DType::F16
    }
}

fn record_mode(r: &Mismatch) -> OutputMode {
    match r.mode {
        Mode::OverwriteF32 => OutputMode::Overwrite(DType::F32),
        Mode::OverwriteBf16 => OutputMode::Overwrite(DType::BF16),
        Mode::OverwriteF16 => OutputMode::Overwrite(DType::F16),
        Mode::AccumulateF32 => OutputMode::AccumulateF32,
    }
}

/// The bias dtype of a record and its bits.
fn record_bias(r: &Mismatch) -> Option<(DType, u32)> {
    match r.bias {
        Bias::None => None,
        Bias::F32(x) => Some((DType::F32, x)),
        Bias::Input(x) => Some((record_dtype(r), x as u32)),
    }
}

/// Runs records that share dtype, K, output mode and bias dtype as the diagonal of one
/// square call through `Engine::gemm_host` (record j is row j of A and column j of B, in
/// the given layouts) and returns the diagonal.
fn diagonal(engine: &Engine, part: &[&Mismatch], la: Layout, lb: Layout) -> Vec<u32> {
    let (n, k) = (part.len(), part[0].k);
    let dtype = record_dtype(part[0]);
    let mode = record_mode(part[0]);
    let bias_dtype = record_bias(part[0]).map(|(d, _)| d);
    let mut a = vec![0u16; n * k];
    let mut b = vec![0u16; n * k];
    for (j, r) in part.iter().enumerate() {
        for t in 0..k {
            // A[j][t] and B[t][j].
            a[match la {
                Layout::RowMajor => j * k + t,
                Layout::ColMajor => t * n + j,
            }] = r.a[t];
            b[match lb {
                Layout::RowMajor => t * n + j,
                Layout::ColMajor => j * k + t,
            }] = r.b[t];
        }
    }
    let op = |layout, rows: usize, cols: usize| match layout {
        Layout::RowMajor => Operand::row_major(dtype, cols.max(1)),
        Layout::ColMajor => Operand::col_major(dtype, rows.max(1)),
    };
    let g = Gemm {
        a: op(la, n, k),
        b: op(lb, k, n),
        bias: bias_dtype,
        c: Output {
            mode,
            ldc: n,
            batch_stride: 0,
        },
        tier: Tier::TensorCores,
        ..Gemm::dense(n, n, k, dtype)
    };
    let bias_bits: Vec<u32> = part
        .iter()
        .map(|r| record_bias(r).map_or(0, |(_, x)| x))
        .collect();
    let bias = bias_dtype.map(|d| AnyBuf::new(d, &bias_bits));
    let mut c0 = vec![0u32; n * n];
    for (j, r) in part.iter().enumerate() {
        c0[j * n + j] = r.old.unwrap_or(0);
    }
    let mut c = AnyBuf::new(mode.dtype(), &c0);
    engine
        .gemm_host(
            &g,
            Bits16::new(dtype, &a).slice(),
            Bits16::new(dtype, &b).slice(),
            bias.as_ref().map(AnyBuf::slice),
            c.slice_mut(),
        )
        .unwrap_or_else(|e| panic!("{}: {e}", part[0].at));
    let c = c.bits();
    (0..n).map(|j| c[j * n + j]).collect()
}

/// Every recorded output where the H200 differed from the first model is the GPU's bits
/// through the public API, in every pair of operand layouts; one record in seven also as
/// a 1 × 1 call of its own.
#[test]
fn every_recorded_h200_difference_is_reproduced_through_the_api() {
    let engine = cpu();
    let records = mismatch_records();
    assert!(records.len() >= 1000, "{} records", records.len());
    let mut groups: std::collections::BTreeMap<_, Vec<&Mismatch>> = Default::default();
    for r in &records {
        let bias = record_bias(r).map(|(d, _)| d.size());
        groups
            .entry((r.bf16, r.k, r.mode as u8, bias))
            .or_default()
            .push(r);
    }
    let mut matched = 0;
    for (q, group) in groups.values().enumerate() {
        for part in group.chunks(40) {
            for (la, lb) in [
                (Layout::RowMajor, Layout::ColMajor),
                (Layout::ColMajor, Layout::RowMajor),
                (Layout::RowMajor, Layout::RowMajor),
                (Layout::ColMajor, Layout::ColMajor),
            ] {
                let got = diagonal(&engine, part, la, lb);
                for (r, &g) in part.iter().zip(&got) {
                    assert_eq!(
                        g, r.gpu,
                        "{} ({}, K {}, A {la:?}, B {lb:?}): CPU {g:#010x}, H200 {:#010x}",
                        r.at, r.kind, r.k, r.gpu
                    );
                }
            }
            matched += part.len();
        }
        for (i, r) in group.iter().enumerate() {
            if (q + i) % 7 == 0 {
                let got = diagonal(&engine, &[r], Layout::RowMajor, Layout::ColMajor)[0];
                assert_eq!(got, r.gpu, "{} as a 1 × 1 call", r.at);
                assert_ne!(got, r.first_model, "{}: a record of a difference", r.at);
            }
        }
    }
    assert_eq!(matched, records.len());
    println!("{matched} recorded H200 differences from the first model reproduced");
}

/// f32 inputs are rejected for the tier on the CPU as on a GPU: it takes bf16 or f16.
#[test]
fn the_tier_takes_16_bit_inputs_only() {
    let engine = cpu();
    let g = Gemm {
        tier: Tier::TensorCores,
        ..Gemm::dense(2, 2, 2, DType::F32)
    };
    let (a, b, mut c) = (vec![1.0f32; 4], vec![1.0f32; 4], vec![0.0f32; 4]);
    let err = engine
        .gemm_host(&g, (&a).into(), (&b).into(), None, (&mut c).into())
        .unwrap_err();
    assert!(matches!(err, Error::UnsupportedDtype(_)), "{err:?}");
}

/// splitmix64: seeded data.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// A value in ±[2^−8, 2^8) with a random mantissa, as bits of `dtype`.
    fn value(&mut self, dtype: DType) -> u16 {
        let r = self.next();
        let v = f32::from_bits((r as u32 & 0x807F_FFFF) | (119 + (r >> 40) as u32 % 16) << 23);
        match dtype {
            DType::BF16 => bf16::from_f32(v).to_bits(),
            _ => f16::from_f32(v).to_bits(),
        }
    }
}

/// Runs a dense row-major `C[M,N] = A[M,K] · B[K,N]` (f32 output) on the tier.
fn run_dense(
    engine: &Engine,
    dtype: DType,
    m: usize,
    n: usize,
    k: usize,
    a: &[u16],
    b: &[u16],
) -> Vec<u32> {
    let g = Gemm {
        c: Output {
            mode: OutputMode::Overwrite(DType::F32),
            ldc: n,
            batch_stride: 0,
        },
        tier: Tier::TensorCores,
        ..Gemm::dense(m, n, k, dtype)
    };
    let mut c = vec![f32::from_bits(0x7FA5_5A5A); m * n];
    engine
        .gemm_host(
            &g,
            Bits16::new(dtype, a).slice(),
            Bits16::new(dtype, b).slice(),
            None,
            (&mut c).into(),
        )
        .unwrap();
    c.iter().map(|x| x.to_bits()).collect()
}

/// The K tail is padded with zeros to a multiple of 16: K = 37 gives the bits of K = 48
/// with A's extra columns and B's extra rows zero; long K (700 steps) too.
#[test]
fn the_k_tail_is_zero_padded() {
    let engine = cpu();
    let mut rng = Rng(0x7c_4001);
    for dtype in [DType::BF16, DType::F16] {
        for (m, n, k) in [
            (5usize, 40usize, 37usize),
            (3, 33, 1),
            (2, 70, 16 * 700 - 3),
        ] {
            let kp = k.next_multiple_of(16);
            let a: Vec<u16> = (0..m * k).map(|_| rng.value(dtype)).collect();
            let b: Vec<u16> = (0..k * n).map(|_| rng.value(dtype)).collect();
            let mut ap = vec![0u16; m * kp];
            for i in 0..m {
                ap[i * kp..i * kp + k].copy_from_slice(&a[i * k..(i + 1) * k]);
            }
            let mut bp = b.clone();
            bp.resize(kp * n, 0);
            assert_eq!(
                run_dense(&engine, dtype, m, n, k, &a, &b),
                run_dense(&engine, dtype, m, n, kp, &ap, &bp),
                "{dtype} {m}×{n}×{k}"
            );
        }
    }
}
