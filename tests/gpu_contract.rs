//! The scalar tier on a CUDA GPU: bit identity with the CPU backend over a sweep of shapes,
//! layouts, dtypes and batches (C3, C5), and over the kernels the planner picks between.
//! The contracts every target shares (batch and N invariance by slicing, run-to-run,
//! stream and engine independence, CUDA graph replay, special values, the training triad,
//! `Tier::Auto`) are in `tests/contract.rs`, run there
//! for this tier as `cuda_scalar`. Every test needs a GPU, so all are `#[ignore]`d: CI
//! reports them as ignored; `bash .gpu/run` runs them on the GPU host.

mod gpu_support;

use gpu_support::{first_difference, gpu_engine, DeviceBuf, HostBuf, Problem, RawStream, Rng};
use sgemm_bi::{
    DType, Device, Engine, Gemm, GemmPointers, Layout, Operand, Output, OutputMode, TcPath, Tier,
};

const DTYPES: [DType; 3] = [DType::F32, DType::BF16, DType::F16];
const LAYOUTS: [Layout; 2] = [Layout::RowMajor, Layout::ColMajor];
/// Sizes the sweep must cover: tiny, prime, one off a tile, and long tails.
const SPECIAL: [usize; 9] = [1, 2, 3, 7, 31, 33, 127, 4095, 8193];

fn operand(rng: &mut Rng, dtype: DType, rows: usize, cols: usize) -> Operand {
    let layout = rng.pick(&LAYOUTS);
    let min = if layout == Layout::RowMajor {
        cols
    } else {
        rows
    };
    Operand {
        dtype,
        layout,
        ld: min.max(1) + rng.pick(&[0, 0, 1, 5]),
        batch_stride: 0,
    }
}

/// A random valid descriptor whose multiply-adds stay under `budget`.
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
        let mut a = operand(rng, dtype, m, k);
        let mut b = operand(rng, dtype, k, n);
        let span = |o: &Operand, rows: usize, cols: usize| {
            if o.layout == Layout::RowMajor {
                (rows - 1) * o.ld + cols
            } else {
                (cols - 1) * o.ld + rows
            }
        };
        if batch > 1 {
            a.batch_stride = span(&a, m, k) + rng.below(3);
            // Sometimes every batch entry shares one B (broadcast weights).
            b.batch_stride = if rng.below(3) == 0 {
                0
            } else {
                span(&b, k, n) + rng.below(3)
            };
        }
        let mode = match rng.below(5) {
            0 => OutputMode::AccumulateF32,
            1 => OutputMode::Overwrite(DType::F32),
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
        return Gemm {
            m,
            n,
            k,
            batch,
            a,
            b,
            bias,
            c,
            tier: Tier::Scalar,
        };
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn scalar_tier_matches_cpu_bit_for_bit_over_a_shape_sweep() {
    let Some(gpu) = gpu_engine() else { return };
    let cpu = Engine::new(Device::Cpu).unwrap();
    let stream = RawStream::new();
    let mut rng = Rng::new(0x5eed_0001);
    let mut covered = std::collections::BTreeSet::new();
    // SGEMM_BI_SWEEP_CASES shortens the sweep for quick iterations; 240 is the contract run.
    let cases: usize = std::env::var("SGEMM_BI_SWEEP_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(240);
    for case in 0..cases {
        let g = random_gemm(&mut rng, 6_000_000);
        for d in [g.m, g.n, g.k] {
            covered.insert(d);
        }
        let p = Problem::random(g, &mut rng);
        let (want, got) = (p.on_cpu(&cpu), p.on_gpu(&gpu, &stream));
        if let Some((i, w, o)) = first_difference(&want, &got) {
            panic!("case {case} {g:?}: element {i} cpu {w:#x} gpu {o:#x}");
        }
    }
    if cases >= 240 {
        for s in SPECIAL {
            assert!(covered.contains(&s), "the sweep never used size {s}");
        }
    }
    println!("{cases} random descriptors identical on CPU and GPU");
}

/// A scalar-tier call of one batch entry, `m × k × n` in `dtype`, with leading dimensions
/// `pad` elements over the least each layout allows.
fn scalar_call(
    (m, k, n): (usize, usize, usize),
    dtype: DType,
    (a_layout, b_layout): (Layout, Layout),
    pad: usize,
    bias: Option<DType>,
    mode: OutputMode,
) -> Gemm {
    let op = |layout, rows: usize, cols: usize| Operand {
        dtype,
        layout,
        ld: pad
            + if layout == Layout::RowMajor {
                cols
            } else {
                rows
            },
        batch_stride: 0,
    };
    Gemm {
        m,
        n,
        k,
        batch: 1,
        a: op(a_layout, m, k),
        b: op(b_layout, k, n),
        bias,
        c: Output {
            mode,
            ldc: n,
            batch_stride: 0,
        },
        tier: Tier::Scalar,
    }
}

/// `p` on the default GPU engine and on the one restricted to portable kernels, each bit for
/// bit against `want` (the CPU's result).
fn assert_both_engines_give(
    want: &HostBuf,
    p: &Problem,
    (gpu, portable): (&Engine, &Engine),
    stream: &RawStream,
) {
    for (engine, which) in [(gpu, "default"), (portable, "portable")] {
        let got = p.on_gpu(engine, stream);
        if let Some((i, w, o)) = first_difference(want, &got) {
            panic!(
                "{:?} ({which} kernels): element {i} cpu {w:#x} gpu {o:#x}",
                p.g
            );
        }
    }
}

/// Both tile widths of the scalar kernels (128 × 128 and 128 × 64) in every dtype and layout,
/// with leading dimensions that allow the vector loads (multiples of 4) and ones that do not.
/// The planner picks by waves (`host/src/cuda/scalar.rs::wide_columns`): 4096 × 4096 takes
/// the wide tiles on any GPU with 160 or more resident blocks (an H200 has 264), 257 × 300
/// the narrow ones everywhere (a call split between the two: the next test). On sm_90 the
/// wide tiles come from the sm90a module (longer loop trips, f32 copied by cp.async); the
/// engine restricted to portable kernels runs the sm80 module's twins, which other GPUs use.
#[test]
#[ignore = "needs a CUDA GPU"]
fn both_scalar_tile_widths_match_cpu_in_every_layout() {
    let Some(gpu) = gpu_engine() else { return };
    let portable = Engine::with_tc_path(Device::Cuda(0), TcPath::Portable).unwrap();
    let cpu = Engine::new(Device::Cpu).unwrap();
    let stream = RawStream::new();
    let mut rng = Rng::new(0x5eed_0002);
    for shape in [(4096, 27, 4096), (257, 45, 300)] {
        for dtype in DTYPES {
            for layouts in LAYOUTS.into_iter().flat_map(|a| LAYOUTS.map(|b| (a, b))) {
                for pad in [0, 1] {
                    let mode = OutputMode::Overwrite(DType::F32);
                    let g = scalar_call(shape, dtype, layouts, pad, None, mode);
                    let p = Problem::random(g, &mut rng);
                    assert_both_engines_give(&p.on_cpu(&cpu), &p, (&gpu, &portable), &stream);
                }
            }
        }
    }
}

/// A call whose columns the planner splits between the two tile widths (2048 × 3072 on an
/// H200: columns 0..2048 in wide tiles, 2048..3072 in narrow ones, two launches), so that the
/// second part's B, bias and C start mid-row or mid-column: every dtype, layout pair and
/// output mode, with a bias, against the CPU. On a GPU with other occupancy the split may
/// differ (or not happen); the bits must be the CPU's either way.
#[test]
#[ignore = "needs a CUDA GPU"]
fn a_call_split_between_tile_widths_matches_cpu() {
    let Some(gpu) = gpu_engine() else { return };
    let portable = Engine::with_tc_path(Device::Cuda(0), TcPath::Portable).unwrap();
    let cpu = Engine::new(Device::Cpu).unwrap();
    let stream = RawStream::new();
    let mut rng = Rng::new(0x5eed_0003);
    for dtype in DTYPES {
        for layouts in LAYOUTS.into_iter().flat_map(|a| LAYOUTS.map(|b| (a, b))) {
            for mode in [OutputMode::Overwrite(dtype), OutputMode::AccumulateF32] {
                let g = scalar_call((2048, 21, 3072), dtype, layouts, 0, Some(dtype), mode);
                let p = Problem::random(g, &mut rng);
                assert_both_engines_give(&p.on_cpu(&cpu), &p, (&gpu, &portable), &stream);
            }
        }
    }
}

/// The few-row kernel (M ≤ 64, operands in 16-byte pieces; `kernels-gpu/src/scalar/rows.rs`)
/// against the CPU, bit for bit: each of the planner's row counts per block, both B layouts,
/// K that ends mid-group, mid-stage and after many stages, N past and short of a 32-column
/// block, every output mode, with and without a bias, batched with a broadcast B, and a
/// single column-major row of A.
#[test]
#[ignore = "needs a CUDA GPU"]
fn the_few_row_kernel_matches_cpu() {
    let Some(gpu) = gpu_engine() else { return };
    let cpu = Engine::new(Device::Cpu).unwrap();
    let stream = RawStream::new();
    let mut rng = Rng::new(0x5eed_0004);
    let round8 = |x: usize| x.max(1).div_ceil(8) * 8;
    let mut calls = 0;
    for dtype in DTYPES {
        for b_layout in LAYOUTS {
            for m in [1, 3, 4, 5, 16, 17, 32, 33, 64] {
                for (k, n) in [
                    (1, 1),
                    (7, 33),
                    (8, 32),
                    (129, 100),
                    (1000, 264),
                    (4099, 40),
                ] {
                    let mode = [
                        OutputMode::Overwrite(dtype),
                        OutputMode::Overwrite(DType::F32),
                        OutputMode::AccumulateF32,
                    ][calls % 3];
                    let b_ld = round8(if b_layout == Layout::RowMajor { n } else { k });
                    let batch = if calls % 5 == 0 { 3 } else { 1 };
                    let g = Gemm {
                        m,
                        n,
                        k,
                        batch,
                        a: Operand {
                            dtype,
                            layout: Layout::RowMajor,
                            ld: round8(k),
                            batch_stride: if batch > 1 { m * round8(k) } else { 0 },
                        },
                        b: Operand {
                            dtype,
                            layout: b_layout,
                            ld: b_ld,
                            batch_stride: 0,
                        },
                        bias: [None, Some(DType::F32), Some(dtype)][calls % 3],
                        c: Output {
                            mode,
                            ldc: n + 1,
                            batch_stride: if batch > 1 { m * (n + 1) } else { 0 },
                        },
                        tier: Tier::Scalar,
                    };
                    let p = Problem::random(g, &mut rng);
                    let (want, got) = (p.on_cpu(&cpu), p.on_gpu(&gpu, &stream));
                    if let Some((i, w, o)) = first_difference(&want, &got) {
                        panic!("{g:?}: element {i} cpu {w:#x} gpu {o:#x}");
                    }
                    calls += 1;
                }
            }
        }
    }
    // One row of A stored column-major (its elements adjacent: ld 1).
    for dtype in DTYPES {
        let g = Gemm {
            a: Operand {
                dtype,
                layout: Layout::ColMajor,
                ld: 1,
                batch_stride: 0,
            },
            ..Gemm::dense(1, 96, 520, dtype)
        };
        let p = Problem::random(g, &mut rng);
        let (want, got) = (p.on_cpu(&cpu), p.on_gpu(&gpu, &stream));
        if let Some((i, w, o)) = first_difference(&want, &got) {
            panic!("{g:?}: element {i} cpu {w:#x} gpu {o:#x}");
        }
        calls += 1;
    }
    println!("{calls} few-row calls identical on CPU and GPU");
}

/// Every lane tile of the few-row kernel (`sgemm_bi_abi::scalar::rows::VARIANTS`) against the
/// CPU: the planner takes one tile per call shape, so each tile is forced in turn
/// (`SGEMM_BI_SCALAR_ROWS_PER_WARP`, `SGEMM_BI_SCALAR_COLS_PER_LANE`, read once per process)
/// on a child run of this binary's [`the_few_row_kernel_matches_cpu`], whose sweep then runs
/// every M, N and K through that tile: blocks past M and N, K ending mid-group and mid-stage.
#[test]
#[ignore = "needs a CUDA GPU"]
fn every_lane_tile_of_the_few_row_kernel_matches_cpu() {
    let Some(_gpu) = gpu_engine() else { return };
    let exe = std::env::current_exe().expect("this test binary");
    for (tm, tn) in sgemm_bi_abi::scalar::rows::VARIANTS {
        let out = std::process::Command::new(&exe)
            .args([
                "--ignored",
                "--exact",
                "the_few_row_kernel_matches_cpu",
                "--test-threads=1",
            ])
            .env("SGEMM_BI_SCALAR_ROWS_PER_WARP", tm.to_string())
            .env("SGEMM_BI_SCALAR_COLS_PER_LANE", tn.to_string())
            .env("SGEMM_BI_REQUIRE_GPU", "1")
            .output()
            .expect("a child run of this binary");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && stdout.contains("1 passed"),
            "lane tile {tm} x {tn}:\n{stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn indices_past_two_to_the_31_elements_are_right() {
    // C has 2^31 + 2^22 bf16 elements; the last rows are checked against the CPU on the same
    // rows (by batch invariance they are the rows of the full call).
    let Some(gpu) = gpu_engine() else { return };
    let cpu = Engine::new(Device::Cpu).unwrap();
    let stream = RawStream::new();
    let mut rng = Rng::new(23);
    let (m, n, k) = ((1usize << 20) + 2048, 2048, 3);
    let dtype = DType::BF16;
    let g = Gemm::dense(m, n, k, dtype);
    let a_host = HostBuf::random(dtype, m * k, &mut rng);
    let b_host = HostBuf::random(dtype, k * n, &mut rng);
    let (a, b) = (DeviceBuf::upload(&a_host), DeviceBuf::upload(&b_host));
    let c = DeviceBuf::alloc(m * n * dtype.size());
    let ptrs = GemmPointers {
        a: a.at(0),
        b: b.at(0),
        bias: std::ptr::null(),
        c: c.at(0),
    };
    // SAFETY: buffers sized for the descriptor; synchronized before reading.
    unsafe { gpu.gemm(&g, ptrs, stream.handle()) }.unwrap();
    stream.sync();
    let tail = 64;
    let mut last = HostBuf::poison(dtype, tail * n);
    c.download_range((m - tail) * n * dtype.size(), &mut last);
    let HostBuf::BF16(a_all) = &a_host else {
        unreachable!()
    };
    let a_tail = HostBuf::BF16(a_all[(m - tail) * k..].to_vec());
    let mut want = HostBuf::poison(dtype, tail * n);
    cpu.gemm_host(
        &Gemm::dense(tail, n, k, dtype),
        a_tail.slice(),
        b_host.slice(),
        None,
        want.slice_mut(),
    )
    .unwrap();
    assert_eq!(first_difference(&want, &last), None);
}
