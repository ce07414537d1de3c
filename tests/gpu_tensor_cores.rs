//! The tensor-core tier (mma.sync path) on a CUDA GPU: accuracy against a float64 reference
//! over a sweep of shapes, layouts, dtypes, batches, output modes and alignments (C4, C5);
//! every output written and nothing else; the mma.sync and Hopper paths (and the Hopper
//! path's clustered and ping-pong kernels) give the same bits. The contracts every target
//! shares (batch, N and batch-count invariance by slicing, across the two loaders too;
//! run-to-run, stream and engine independence; CUDA graph replay; special values; the
//! training triad; `Tier::Auto`) are in
//! `tests/contract.rs`, run there for this tier's paths as `cuda_tensor_cores`,
//! `cuda_mma_sync` and `cuda_hopper`. Every test needs a GPU, so all are `#[ignore]`d: CI
//! reports them as ignored; `bash .gpu/run` runs them on the GPU host.

mod gpu_support;

use gpu_support::{
    c_elements, first_difference, gpu_engine, DeviceBuf, HostBuf, Problem, RawStream, Rng,
};
use rayon::prelude::*;
use sgemm_bi::{DType, Engine, Gemm, GemmPointers, Layout, Operand, Output, OutputMode, Tier};

const DTYPES: [DType; 2] = [DType::BF16, DType::F16];
const LAYOUTS: [Layout; 2] = [Layout::RowMajor, Layout::ColMajor];
/// Sizes the sweep must cover: tiny, prime, one off an MMA step or a tile, and long tails.
const SPECIAL: [usize; 11] = [1, 2, 3, 7, 15, 17, 31, 33, 127, 129, 4095];

fn tensor(g: Gemm) -> Gemm {
    Gemm {
        tier: Tier::TensorCores,
        ..g
    }
}

/// Elements a `rows × cols` operand spans with leading dimension `ld`.
fn span(layout: Layout, ld: usize, rows: usize, cols: usize) -> usize {
    if layout == Layout::RowMajor {
        (rows - 1) * ld + cols
    } else {
        (cols - 1) * ld + rows
    }
}

/// Rounds `x` up to the cp.async loader's alignment (8 elements) or perturbs it, at random.
fn maybe_aligned(rng: &mut Rng, x: usize, aligned: bool) -> usize {
    if aligned {
        x.next_multiple_of(8)
    } else {
        x + rng.pick(&[0, 1, 3, 5])
    }
}

fn operand(rng: &mut Rng, dtype: DType, rows: usize, cols: usize, aligned: bool) -> Operand {
    let layout = rng.pick(&LAYOUTS);
    let min = if layout == Layout::RowMajor {
        cols
    } else {
        rows
    };
    Operand {
        dtype,
        layout,
        ld: maybe_aligned(rng, min.max(1), aligned),
        batch_stride: 0,
    }
}

/// A random valid tensor-core descriptor whose multiply-adds stay under `budget`.
fn random_gemm(rng: &mut Rng, budget: usize) -> Gemm {
    loop {
        let dim = |rng: &mut Rng| {
            if rng.below(2) == 0 {
                rng.pick(&SPECIAL)
            } else {
                1 + rng.below(300)
            }
        };
        let (m, n, k) = (dim(rng), dim(rng), dim(rng));
        let batch = rng.pick(&[1, 1, 1, 2, 3]);
        if m * n * k * batch > budget {
            continue;
        }
        let dtype = rng.pick(&DTYPES);
        let aligned = rng.below(2) == 0;
        let mut a = operand(rng, dtype, m, k, aligned);
        let mut b = operand(rng, dtype, k, n, aligned);
        if batch > 1 {
            let sa = span(a.layout, a.ld, m, k);
            a.batch_stride = maybe_aligned(rng, sa, aligned);
            // Sometimes every batch entry shares one B (broadcast weights).
            b.batch_stride = if rng.below(3) == 0 {
                0
            } else {
                let sb = span(b.layout, b.ld, k, n);
                maybe_aligned(rng, sb, aligned)
            };
        }
        let other = if dtype == DType::BF16 {
            DType::F16
        } else {
            DType::BF16
        };
        let mode = match rng.below(6) {
            0 => OutputMode::AccumulateF32,
            1 => OutputMode::Overwrite(DType::F32),
            2 => OutputMode::Overwrite(other),
            _ => OutputMode::Overwrite(dtype),
        };
        let ldc = n + rng.pick(&[0, 0, 3]);
        let c = Output {
            mode,
            ldc,
            batch_stride: if batch > 1 {
                (m - 1) * ldc + n + rng.below(4)
            } else {
                0
            },
        };
        let bias = match rng.below(3) {
            0 => None,
            1 => Some(DType::F32),
            _ => Some(dtype),
        };
        return tensor(Gemm {
            m,
            n,
            k,
            batch,
            a,
            b,
            bias,
            c,
            tier: Tier::TensorCores,
        });
    }
}

fn to_f64(h: &HostBuf) -> Vec<f64> {
    match h {
        HostBuf::F32(v) => v.iter().map(|&x| x as f64).collect(),
        HostBuf::BF16(v) => v.iter().map(|x| x.to_f64()).collect(),
        HostBuf::F16(v) => v.iter().map(|x| x.to_f64()).collect(),
    }
}

fn index(op: &Operand, batch: usize, row: usize, col: usize) -> usize {
    batch * op.batch_stride
        + if op.layout == Layout::RowMajor {
            row * op.ld + col
        } else {
            row + col * op.ld
        }
}

/// The exact result in float64 (inputs as stored, bias and, in accumulate mode, C added),
/// as `[batch][m][n]`.
fn reference(p: &Problem) -> Vec<f64> {
    let g = &p.g;
    let (a, b, c0) = (to_f64(&p.a), to_f64(&p.b), to_f64(&p.c0));
    let bias = p.bias.as_ref().map(to_f64);
    let mut out = vec![0.0; g.batch * g.m * g.n];
    out.par_chunks_mut(g.n).enumerate().for_each(|(row, dst)| {
        let (bt, i) = (row / g.m, row % g.m);
        let a_row: Vec<f64> = (0..g.k).map(|k| a[index(&g.a, bt, i, k)]).collect();
        for (j, d) in dst.iter_mut().enumerate() {
            let mut s: f64 = (0..g.k).map(|k| a_row[k] * b[index(&g.b, bt, k, j)]).sum();
            if let Some(bias) = &bias {
                s += bias[j];
            }
            if g.c.mode == OutputMode::AccumulateF32 {
                s += c0[bt * g.c.batch_stride + i * g.c.ldc + j];
            }
            *d = s;
        }
    });
    out
}

/// Whether the planner gives this call the 16-byte cp.async loader (A and B at `a`, `b`).
fn cp_async_path(g: &Gemm, a: usize, b: usize) -> bool {
    [(&g.a, a), (&g.b, b)].iter().all(|(op, addr)| {
        addr % 16 == 0 && op.ld % 8 == 0 && (g.batch == 1 || op.batch_stride % 8 == 0)
    })
}

/// Runs `p` on the GPU with A and B placed `a_off` and `b_off` elements past 256-byte
/// aligned addresses. Returns C and whether the cp.async loader ran.
fn run_at(
    gpu: &Engine,
    stream: &RawStream,
    p: &Problem,
    a_off: usize,
    b_off: usize,
) -> (HostBuf, bool) {
    let size = p.g.a.dtype.size();
    let (a, b) = (
        DeviceBuf::upload_at(&p.a, a_off * size),
        DeviceBuf::upload_at(&p.b, b_off * size),
    );
    let c = DeviceBuf::upload(&p.c0);
    let bias = p.bias.as_ref().map(DeviceBuf::upload);
    let ptrs = GemmPointers {
        a: a.at(a_off * size),
        b: b.at(b_off * size),
        bias: bias.as_ref().map_or(std::ptr::null(), |x| x.at(0)),
        c: c.at(0),
    };
    // SAFETY: every buffer spans the validated extents and lives until the sync below.
    unsafe { gpu.gemm(&p.g, ptrs, stream.handle()) }.expect("GPU gemm");
    stream.sync();
    let mut out = p.c0.clone();
    c.download_into(&mut out);
    let fast = cp_async_path(&p.g, ptrs.a as usize, ptrs.b as usize);
    (out, fast)
}

/// Checks every element of C: inside the matrix written (not poison) and, against the
/// reference, a relative Frobenius error ≤ the output dtype's bound; outside untouched.
/// Returns the relative error.
fn check_output(p: &Problem, got: &HostBuf, case: &str) -> f64 {
    let g = &p.g;
    let want = reference(p);
    let (got_bits, c0_bits) = (got.bits(), p.c0.bits());
    let got_f = to_f64(got);
    let mut inside = vec![false; got_bits.len()];
    let poison = HostBuf::poison(g.c.mode.dtype(), 1).bits()[0];
    let (mut err, mut norm) = (0.0f64, 0.0f64);
    for bt in 0..g.batch {
        for i in 0..g.m {
            for j in 0..g.n {
                let idx = bt * g.c.batch_stride + i * g.c.ldc + j;
                inside[idx] = true;
                assert!(
                    g.c.mode == OutputMode::AccumulateF32 || got_bits[idx] != poison,
                    "{case}: C[{bt}][{i}][{j}] was never written"
                );
                let w = want[(bt * g.m + i) * g.n + j];
                err += (got_f[idx] - w).powi(2);
                norm += w * w;
            }
        }
    }
    for (idx, ins) in inside.iter().enumerate() {
        assert!(
            *ins || got_bits[idx] == c0_bits[idx],
            "{case}: element {idx} of C outside the matrix was written"
        );
    }
    let rel = (err / norm).sqrt();
    let bound = match g.c.mode.dtype() {
        DType::BF16 => 1e-2,
        DType::F16 => 2e-3,
        DType::F32 => 1e-4,
    };
    assert!(rel <= bound, "{case}: relative error {rel:.3e} > {bound:e}");
    rel
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn accuracy_against_f64_over_a_shape_sweep() {
    let Some(gpu) = gpu_engine() else { return };
    let stream = RawStream::new();
    let mut rng = Rng::new(0x7c_0001);
    let cases: usize = std::env::var("SGEMM_BI_SWEEP_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(240);
    let mut covered = std::collections::BTreeSet::new();
    let mut kinds = std::collections::BTreeSet::new();
    let mut errors: Vec<(DType, f64)> = Vec::new();
    for case in 0..cases {
        let g = random_gemm(&mut rng, 6_000_000);
        for d in [g.m, g.n, g.k] {
            covered.insert(d);
        }
        let p = Problem::random(g, &mut rng);
        // One case in four puts A or B one element off a 16-byte boundary.
        let (a_off, b_off) = match rng.below(8) {
            0 => (1, 0),
            1 => (0, 3),
            _ => (0, 0),
        };
        let (got, fast) = run_at(&gpu, &stream, &p, a_off, b_off);
        kinds.insert((
            g.a.dtype.name(),
            format!("{:?}{:?}", g.a.layout, g.b.layout),
            fast,
        ));
        let rel = check_output(
            &p,
            &got,
            &format!("case {case} {g:?} offsets {a_off},{b_off}"),
        );
        errors.push((g.c.mode.dtype(), rel));
    }
    if cases >= 240 {
        for s in SPECIAL {
            assert!(covered.contains(&s), "the sweep never used size {s}");
        }
        assert_eq!(
            kinds.len(),
            16,
            "every dtype × layout pair × loader: {kinds:?}"
        );
    }
    for dtype in [DType::F32, DType::BF16, DType::F16] {
        let mut e: Vec<f64> = errors
            .iter()
            .filter(|x| x.0 == dtype)
            .map(|x| x.1)
            .collect();
        e.sort_by(|a, b| a.partial_cmp(b).unwrap());
        if let (Some(max), Some(med)) = (e.last(), e.get(e.len() / 2)) {
            println!(
                "{dtype} output: {} cases, relative error median {med:.2e}, max {max:.2e}",
                e.len()
            );
        }
    }
    println!(
        "{cases} random descriptors within bounds; {} kernels used",
        kinds.len()
    );
}

/// K = 0 gives the bias (or zeros); long K stays accurate.
#[test]
#[ignore = "needs a CUDA GPU"]
fn empty_and_long_k() {
    let Some(gpu) = gpu_engine() else { return };
    let stream = RawStream::new();
    let mut rng = Rng::new(0x7c_0002);
    for (m, n, k) in [(33, 65, 0), (200, 136, 8191), (64, 64, 16384)] {
        for dtype in DTYPES {
            let g = tensor(Gemm {
                bias: Some(DType::F32),
                c: Output {
                    mode: OutputMode::Overwrite(DType::F32),
                    ..Gemm::dense(m, n, k, dtype).c
                },
                ..Gemm::dense(m, n, k, dtype)
            });
            let p = Problem::random(g, &mut rng);
            let (got, _) = run_at(&gpu, &stream, &p, 0, 0);
            let rel = check_output(&p, &got, &format!("{m}×{n}×{k} {dtype}"));
            println!("{m}×{n}×{k} {dtype}: relative error {rel:.2e}");
        }
    }
}

/// Calls queued back to back on one stream, each reading what the call before it wrote, or
/// overwriting what it read, or accumulating into what it accumulated into, give the bits
/// of the same calls run one at a time: the stream's order holds for every path's kernels,
/// the copy engine's stores included (a kernel that let the next start early, as
/// programmatic dependent launch does, would have to keep it).
#[test]
#[ignore = "needs a CUDA GPU"]
fn back_to_back_calls_see_each_others_writes() {
    let Some(gpu) = gpu_engine() else { return };
    let stream = RawStream::new();
    let mut rng = Rng::new(0x7c_0009);
    const ROUNDS: usize = 6;
    let (m, d) = (2048, 1024);
    let layer = tensor(Gemm::dense(m, d, d, DType::BF16));
    let accumulate = Gemm {
        c: Output {
            mode: OutputMode::AccumulateF32,
            ldc: d,
            batch_stride: 0,
        },
        ..layer
    };
    let x = DeviceBuf::upload(&HostBuf::random(DType::BF16, m * d, &mut rng));
    let w: Vec<DeviceBuf> = (0..3)
        .map(|_| DeviceBuf::upload(&HostBuf::random(DType::BF16, d * d, &mut rng)))
        .collect();
    let f0 = HostBuf::random(DType::F32, m * d, &mut rng);
    let run = |one_at_a_time: bool| -> [HostBuf; 3] {
        let y1 = DeviceBuf::upload(&HostBuf::poison(DType::BF16, m * d));
        let y2 = DeviceBuf::upload(&HostBuf::poison(DType::BF16, m * d));
        let f = DeviceBuf::upload(&f0);
        let call = |g: &Gemm, a: &DeviceBuf, b: &DeviceBuf, c: &DeviceBuf| {
            let ptrs = GemmPointers {
                a: a.at(0),
                b: b.at(0),
                bias: std::ptr::null(),
                c: c.at(0),
            };
            // SAFETY: every buffer holds m × d or d × d elements of the descriptor's dtypes
            // and lives until the stream is synchronized below.
            unsafe { gpu.gemm(g, ptrs, stream.handle()) }.expect("GPU gemm");
            if one_at_a_time {
                stream.sync();
            }
        };
        for _ in 0..ROUNDS {
            call(&layer, &x, &w[0], &y1); // overwrites y1, which the round before read
            call(&layer, &y1, &w[1], &y2); // reads y1
            call(&accumulate, &y2, &w[2], &f); // reads y2, accumulates into f
            call(&layer, &x, &w[2], &y1); // overwrites y1, which the second call read
            call(&accumulate, &y1, &w[1], &f); // reads the new y1, accumulates again
        }
        stream.sync();
        let mut out = [
            HostBuf::poison(DType::BF16, m * d),
            HostBuf::poison(DType::BF16, m * d),
            f0.clone(),
        ];
        for (buf, host) in [&y1, &y2, &f].into_iter().zip(out.iter_mut()) {
            buf.download_into(host);
        }
        out
    };
    let serial = run(true);
    let queued = run(false);
    for (name, (s, q)) in ["y1", "y2", "f"]
        .iter()
        .zip(serial.iter().zip(queued.iter()))
    {
        if let Some((i, a, b)) = first_difference(s, q) {
            panic!("{name}: first difference at {i}: one at a time {a:#x}, queued {b:#x}");
        }
    }
    // The chain ran: nothing left poisoned, the accumulator moved.
    assert!(!serial[1].bits().contains(&0xFFFF), "y2 written");
    assert!(first_difference(&serial[2], &f0).is_some(), "f accumulated");
}

/// Values of one input distribution (the tc-h200 golden-vector families): 0 uniform; 1 wide
/// exponents; 2 cancelling neighbours; 3 one in seven huge, the rest tiny; 4 products near or
/// below the f32 subnormal range; 5 products near the f32 overflow (bf16) / large (f16).
fn distribution(dist: usize, dtype: DType, len: usize, rng: &mut Rng) -> HostBuf {
    let bf = dtype == DType::BF16;
    let mut v: Vec<f32> = (0..len)
        .map(|i| {
            let u = rng.unit();
            let scale = |e: i32| 2f32.powi(e);
            match dist {
                1 => {
                    u * scale(rng.below(if bf { 41 } else { 13 }) as i32 - if bf { 20 } else { 6 })
                }
                3 if i % 7 == 0 => u * if bf { scale(30) } else { 1000.0 },
                3 => u * if bf { scale(-30) } else { 1e-3 },
                4 => u * if bf { scale(-66) } else { scale(-12) },
                5 => u * if bf { scale(63) } else { 30000.0 },
                _ => u,
            }
        })
        .collect();
    if dist == 2 {
        for i in (1..len).step_by(2) {
            v[i] = -v[i - 1];
        }
    }
    match dtype {
        DType::F16 => HostBuf::F16(v.into_iter().map(sgemm_bi::f16::from_f32).collect()),
        _ => HostBuf::BF16(v.into_iter().map(sgemm_bi::bf16::from_f32).collect()),
    }
}

/// Item 4 of the tensor-core issue, measured: on an sm_90 GPU the mma.sync path and the Hopper
/// (wgmma + TMA) path give the same bits for the same inputs, over shapes (K tails, M and N
/// tails, every tile width the planner uses), both dtypes, all four layout pairs, batches,
/// and six input distributions (wide exponents, cancellation, subnormal and near-overflow
/// products). This is what lets the planner mix the two paths (it takes the Hopper path where
/// the copy engine can describe the operands, the mma.sync path elsewhere).
#[test]
#[ignore = "needs a CUDA GPU"]
fn the_mma_sync_and_wgmma_paths_give_the_same_bits() {
    let Some(gpu) = gpu_engine() else { return };
    if gpu.compute_capability() != Some((9, 0)) {
        eprintln!("skipped: needs compute capability 9.0 for the Hopper path");
        return;
    }
    let portable = Engine::with_tc_path(sgemm_bi::Device::Cuda(0), sgemm_bi::TcPath::Portable)
        .expect("portable engine");
    let hopper = Engine::with_tc_path(sgemm_bi::Device::Cuda(0), sgemm_bi::TcPath::Hopper)
        .expect("Hopper engine");
    let stream = RawStream::new();
    let mut rng = Rng::new(0x7c_0004);
    let dims: [usize; 10] = [1, 7, 16, 17, 64, 100, 129, 255, 300, 1000];
    let ks = [1, 8, 15, 16, 17, 63, 64, 65, 200, 1024, 4096];
    let (mut outputs, mut cases, mut differing_cases) = (0usize, 0usize, 0usize);
    for case in 0..240 {
        let dtype = DTYPES[case % 2];
        let dist = (case / 2) % 6;
        // N in whole 16-byte units of a bf16 row: the Hopper path takes only those (its copy
        // engine stores C in such units); its tails are those of the tiles.
        let (m, n, k) = (
            rng.pick(&dims),
            rng.pick(&dims).next_multiple_of(8),
            rng.pick(&ks),
        );
        let batch = rng.pick(&[1, 1, 2]);
        let layout = |rng: &mut Rng| rng.pick(&LAYOUTS);
        let op = |layout: Layout, rows: usize, cols: usize| Operand {
            dtype,
            layout,
            ld: if layout == Layout::RowMajor {
                cols
            } else {
                rows
            }
            .next_multiple_of(8),
            batch_stride: 0,
        };
        let mut a = op(layout(&mut rng), m, k);
        let mut b = op(layout(&mut rng), k, n);
        if batch > 1 {
            a.batch_stride = span(a.layout, a.ld, m, k).next_multiple_of(8);
            b.batch_stride = span(b.layout, b.ld, k, n).next_multiple_of(8);
        }
        let mode = if case % 5 == 4 {
            OutputMode::Overwrite(dtype)
        } else {
            OutputMode::Overwrite(DType::F32)
        };
        let g = tensor(Gemm {
            m,
            n,
            k,
            batch,
            a,
            b,
            bias: None,
            c: Output {
                mode,
                ldc: n,
                batch_stride: if batch > 1 { m * n } else { 0 },
            },
            tier: Tier::TensorCores,
        });
        let mut p = Problem::random(g, &mut rng);
        p.a = distribution(dist, dtype, p.a.len(), &mut rng);
        p.b = distribution(dist, dtype, p.b.len(), &mut rng);
        let x = p.on_gpu(&portable, &stream);
        let y = p.on_gpu(&hopper, &stream);
        let poison = HostBuf::poison(y.dtype(), 1).bits()[0];
        assert!(
            !c_elements(&g, &y).contains(&poison),
            "case {case}: the Hopper path left outputs unwritten"
        );
        cases += 1;
        outputs += x.len();
        if let Some((i, px, py)) = first_difference(&x, &y) {
            differing_cases += 1;
            eprintln!(
                "case {case} ({m}×{n}×{k}, batch {batch}, {dtype}, dist {dist}, {:?}/{:?}): first \
                 difference at {i}: mma.sync {px:#x}, wgmma {py:#x}",
                g.a.layout, g.b.layout
            );
        }
    }
    println!(
        "mma.sync vs wgmma on the H200: {cases} cases, {outputs} outputs, {differing_cases} cases \
         differ"
    );
    assert_eq!(
        differing_cases, 0,
        "the two tensor-core paths give different bits"
    );
}

/// The Hopper path's clustered kernels (two blocks along M sharing each stage's B tile by
/// multicast, picked for the widest tiles when there are several tile rows) give the
/// mma.sync path's bits: odd tile-row counts (the last cluster's second block lies wholly
/// past M), K tails, every layout, bias, accumulate and bf16 output, batches. Accumulate mode
/// takes these kernels only past `PINGPONG_MAX_K` (K > 4096, `host/src/cuda/hopper.rs`), so one
/// shape has such a K.
#[test]
#[ignore = "needs a CUDA GPU"]
fn clustered_tiles_give_the_same_bits() {
    let Some(gpu) = gpu_engine() else { return };
    if gpu.compute_capability() != Some((9, 0)) {
        eprintln!("skipped: needs compute capability 9.0 for the Hopper path");
        return;
    }
    let portable = Engine::with_tc_path(sgemm_bi::Device::Cuda(0), sgemm_bi::TcPath::Portable)
        .expect("portable engine");
    let stream = RawStream::new();
    let mut rng = Rng::new(0x7c_0005);
    // (M, N, K, batch): each gives at least 132 tiles of 128 × 256 (so BN = 256 and
    // clusters), with 15, 16, 9, 3 and 9 tile rows.
    let shapes = [
        (1900, 2560, 200, 1),
        (2048, 2304, 1000, 1),
        (1100, 4096, 72, 1),
        (300, 2560, 129, 9),
        (1100, 4096, 4160, 1),
    ];
    let mut outputs = 0;
    for (case, &(m, n, k, batch)) in shapes.iter().enumerate() {
        for (l, (la, lb)) in [
            (Layout::RowMajor, Layout::RowMajor),
            (Layout::RowMajor, Layout::ColMajor),
            (Layout::ColMajor, Layout::RowMajor),
            (Layout::ColMajor, Layout::ColMajor),
        ]
        .into_iter()
        .enumerate()
        {
            let dtype = DTYPES[(case + l) % 2];
            let op = |layout: Layout, rows: usize, cols: usize| Operand {
                dtype,
                layout,
                ld: if layout == Layout::RowMajor {
                    cols
                } else {
                    rows
                }
                .next_multiple_of(8),
                batch_stride: 0,
            };
            let (mut a, mut b) = (op(la, m, k), op(lb, k, n));
            if batch > 1 {
                a.batch_stride = span(a.layout, a.ld, m, k).next_multiple_of(8);
                b.batch_stride = span(b.layout, b.ld, k, n).next_multiple_of(8);
            }
            let mode = match l {
                0 => OutputMode::Overwrite(dtype),
                1 => OutputMode::AccumulateF32,
                _ => OutputMode::Overwrite(DType::F32),
            };
            let g = tensor(Gemm {
                m,
                n,
                k,
                batch,
                a,
                b,
                bias: (l == 2).then_some(DType::F32),
                c: Output {
                    mode,
                    ldc: n,
                    batch_stride: if batch > 1 { m * n } else { 0 },
                },
                tier: Tier::TensorCores,
            });
            let p = Problem::random(g, &mut rng);
            let x = p.on_gpu(&portable, &stream);
            let y = p.on_gpu(&gpu, &stream);
            outputs += x.len();
            if let Some((i, px, py)) = first_difference(&x, &y) {
                panic!(
                    "{m}×{n}×{k} batch {batch} {dtype} {la:?}/{lb:?}: first difference at {i}: \
                     mma.sync {px:#x}, clustered wgmma {py:#x}"
                );
            }
        }
    }
    println!("clustered wgmma vs mma.sync: {outputs} outputs, all identical");
}

/// The Hopper path's ping-pong kernels (each consumer warpgroup owns every other 128 × 128
/// tile of its block, `kernels-gpu/src/hopper/pingpong.rs`) give the mma.sync path's bits:
/// blocks with one tile (the second warpgroup idle), with many (a turn per tile, K of one
/// stage), odd tile-row counts in clusters of two, M of one tile row (no cluster), K tails,
/// every layout, every output mode, bias, batches.
#[test]
#[ignore = "needs a CUDA GPU"]
fn pingpong_tiles_give_the_same_bits() {
    let Some(gpu) = gpu_engine() else { return };
    if gpu.compute_capability() != Some((9, 0)) {
        eprintln!("skipped: needs compute capability 9.0 for the Hopper path");
        return;
    }
    let portable = Engine::with_tc_path(sgemm_bi::Device::Cuda(0), sgemm_bi::TcPath::Portable)
        .expect("portable engine");
    let pingpong =
        Engine::with_tc_path(sgemm_bi::Device::Cuda(0), sgemm_bi::TcPath::HopperPingPong)
            .expect("ping-pong engine");
    let stream = RawStream::new();
    let mut rng = Rng::new(0x7c_0006);
    // (M, N, K, batch).
    let shapes = [
        (1900, 2560, 200, 1),
        (129, 384, 65, 1),
        (100, 1000, 4096, 1),
        (5000, 4096, 64, 1),
        (700, 1024, 16, 1),
        (300, 2560, 129, 9),
    ];
    let mut outputs = 0;
    for (case, &(m, n, k, batch)) in shapes.iter().enumerate() {
        let pairs = LAYOUTS
            .iter()
            .flat_map(|&la| LAYOUTS.iter().map(move |&lb| (la, lb)));
        for (l, (la, lb)) in pairs.enumerate() {
            let dtype = DTYPES[(case + l) % 2];
            let op = |layout: Layout, rows: usize, cols: usize| Operand {
                dtype,
                layout,
                ld: if layout == Layout::RowMajor {
                    cols
                } else {
                    rows
                }
                .next_multiple_of(8),
                batch_stride: 0,
            };
            let (mut a, mut b) = (op(la, m, k), op(lb, k, n));
            if batch > 1 {
                a.batch_stride = span(a.layout, a.ld, m, k).next_multiple_of(8);
                b.batch_stride = span(b.layout, b.ld, k, n).next_multiple_of(8);
            }
            let mode = match (case + l) % 3 {
                0 => OutputMode::Overwrite(dtype),
                1 => OutputMode::AccumulateF32,
                _ => OutputMode::Overwrite(DType::F32),
            };
            let g = tensor(Gemm {
                m,
                n,
                k,
                batch,
                a,
                b,
                bias: (l == 2).then_some(DType::F32),
                c: Output {
                    mode,
                    ldc: n,
                    batch_stride: if batch > 1 { m * n } else { 0 },
                },
                tier: Tier::TensorCores,
            });
            let p = Problem::random(g, &mut rng);
            let x = p.on_gpu(&portable, &stream);
            let y = p.on_gpu(&pingpong, &stream);
            outputs += x.len();
            if let Some((i, px, py)) = first_difference(&x, &y) {
                panic!(
                    "{m}×{n}×{k} batch {batch} {dtype} {la:?}/{lb:?} {mode:?}: first difference \
                     at {i}: mma.sync {px:#x}, ping-pong wgmma {py:#x}"
                );
            }
        }
    }
    println!("ping-pong wgmma vs mma.sync: {outputs} outputs, all identical");
}
