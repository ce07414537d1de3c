//! Large problems on a CUDA GPU (docs/reliability.md, item 7): an output of more than 2³¹
//! elements and a reduction of K = 2²⁰, both tiers. The scalar tier is checked against the
//! CPU backend bit for bit (at sampled rows of the large output, which by batch invariance
//! the CPU computes from those rows alone; at every element of the long-K output); the
//! tensor-core tier against the same rows run alone on the GPU (batch invariance) and a
//! float64 reference; and leading dimensions at the scalar kernels' 32-bit offset bound.
//! Needs about 9 GB of device memory; `#[ignore]`d like every GPU test:
//! `bash .gpu/run gpu_large` runs them on the GPU host.

mod gpu_support;

use gpu_support::{first_difference, gpu_engine, DeviceBuf, HostBuf, RawStream, Rng};
use sgemm_bi::{
    DType, Device, Engine, Gemm, GemmPointers, Layout, Operand, Output, OutputMode, Tier,
};

/// Rows of an M × K operand gathered into a dense row-major matrix of `rows.len()` rows.
fn gather_rows(a: &HostBuf, op: &Operand, m: usize, k: usize, rows: &[usize]) -> HostBuf {
    let at = |i: usize, kk: usize| match op.layout {
        Layout::RowMajor => i * op.ld + kk,
        Layout::ColMajor => i + kk * op.ld,
    };
    let idx: Vec<usize> = rows
        .iter()
        .flat_map(|&i| (0..k).map(move |kk| at(i, kk)))
        .collect();
    assert!(rows.iter().all(|&i| i < m));
    match a {
        HostBuf::F32(v) => HostBuf::F32(idx.iter().map(|&i| v[i]).collect()),
        HostBuf::BF16(v) => HostBuf::BF16(idx.iter().map(|&i| v[i]).collect()),
        HostBuf::F16(v) => HostBuf::F16(idx.iter().map(|&i| v[i]).collect()),
    }
}

/// The sampled rows: the first, the last, around 2³¹ / N (where 32-bit offsets would wrap)
/// and random ones.
fn sample_rows(m: usize, n: usize, rng: &mut Rng) -> Vec<usize> {
    let wrap = (1usize << 31) / n;
    let mut rows = vec![0, 1, wrap - 1, wrap, wrap + 1, m - 2, m - 1];
    rows.extend((0..57).map(|_| rng.below(m)));
    rows.sort_unstable();
    rows.dedup();
    rows.retain(|&r| r < m);
    rows
}

fn f64s(h: &HostBuf) -> Vec<f64> {
    match h {
        HostBuf::F32(v) => v.iter().map(|&x| x as f64).collect(),
        HostBuf::BF16(v) => v.iter().map(|x| x.to_f64()).collect(),
        HostBuf::F16(v) => v.iter().map(|x| x.to_f64()).collect(),
    }
}

/// An output of (2²⁰ + 3) × 2049 > 2³¹ elements: sampled rows against the CPU backend
/// (scalar) or the same rows run alone (tensor cores), for a row-major and a column-major A.
#[test]
#[ignore = "needs a CUDA GPU"]
fn an_output_past_two_to_the_31_elements_at_sampled_rows() {
    let Some(gpu) = gpu_engine() else { return };
    let cpu = Engine::new(Device::Cpu).unwrap();
    let stream = RawStream::new();
    let mut rng = Rng::new(0x1a76e);
    let (m, n, k) = ((1usize << 20) + 3, 2049, 19);
    assert!(m * n > 1 << 31);
    let mut tiers = vec![Tier::Scalar];
    if gpu.supports(Tier::TensorCores) {
        tiers.push(Tier::TensorCores);
    }
    let mut checked = 0;
    for tier in tiers {
        for (a_layout, out) in [
            (Layout::RowMajor, DType::BF16),
            (Layout::ColMajor, DType::F32),
        ] {
            let dtype = DType::BF16;
            let a_op = match a_layout {
                Layout::RowMajor => Operand::row_major(dtype, k),
                Layout::ColMajor => Operand::col_major(dtype, m),
            };
            let g = Gemm {
                a: a_op,
                bias: Some(DType::F32),
                c: Output {
                    mode: OutputMode::Overwrite(out),
                    ldc: n,
                    batch_stride: 0,
                },
                tier,
                ..Gemm::dense(m, n, k, dtype)
            };
            let a_host = HostBuf::random(dtype, m * k, &mut rng);
            let b_host = HostBuf::random(dtype, k * n, &mut rng);
            let bias_host = HostBuf::random(DType::F32, n, &mut rng);
            let (a, b, bias) = (
                DeviceBuf::upload(&a_host),
                DeviceBuf::upload(&b_host),
                DeviceBuf::upload(&bias_host),
            );
            let c = DeviceBuf::alloc(m * n * out.size());
            let ptrs = GemmPointers {
                a: a.at(0),
                b: b.at(0),
                bias: bias.at(0),
                c: c.at(0),
            };
            // SAFETY: buffers sized for the descriptor; synchronized before reading.
            unsafe { gpu.gemm(&g, ptrs, stream.handle()) }.unwrap();
            stream.sync();
            let rows = sample_rows(m, n, &mut rng);
            let mut got = HostBuf::poison(out, rows.len() * n);
            for (r, &row) in rows.iter().enumerate() {
                let mut one = HostBuf::poison(out, n);
                c.download_range(row * n * out.size(), &mut one);
                match (&mut got, one) {
                    (HostBuf::F32(g), HostBuf::F32(o)) => g[r * n..(r + 1) * n].copy_from_slice(&o),
                    (HostBuf::BF16(g), HostBuf::BF16(o)) => {
                        g[r * n..(r + 1) * n].copy_from_slice(&o)
                    }
                    _ => unreachable!(),
                }
            }
            // The same rows alone: on the CPU (scalar), or on the GPU (tensor cores).
            let small = Gemm {
                m: rows.len(),
                a: Operand::row_major(dtype, k),
                ..g
            };
            let a_rows = gather_rows(&a_host, &g.a, m, k, &rows);
            let mut want = HostBuf::poison(out, rows.len() * n);
            match tier {
                Tier::Scalar => cpu
                    .gemm_host(
                        &small,
                        a_rows.slice(),
                        b_host.slice(),
                        Some(bias_host.slice()),
                        want.slice_mut(),
                    )
                    .unwrap(),
                Tier::Auto => unreachable!("this test names its tiers"),
                Tier::TensorCores => {
                    let p = gpu_support::Problem {
                        g: small,
                        a: a_rows.clone(),
                        b: b_host.clone(),
                        bias: Some(bias_host.clone()),
                        c0: want.clone(),
                    };
                    want = p.on_gpu(&gpu, &stream);
                    // And close to the exact result (K = 19: a few output ulps).
                    let (x, w, bi) = (f64s(&a_rows), f64s(&b_host), f64s(&bias_host));
                    let o = f64s(&want);
                    for i in 0..rows.len() {
                        for j in 0..n {
                            let exact: f64 =
                                bi[j] + (0..k).map(|kk| x[i * k + kk] * w[kk * n + j]).sum::<f64>();
                            let tol = if out == DType::BF16 { 2e-2 } else { 1e-5 };
                            assert!(
                                (o[i * n + j] - exact).abs() <= tol * (1.0 + exact.abs()),
                                "{tier} row {} col {j}: {} vs {exact}",
                                rows[i],
                                o[i * n + j]
                            );
                        }
                    }
                }
            }
            if let Some((i, w, o)) = first_difference(&want, &got) {
                panic!(
                    "{tier} {a_layout:?} → {out}: sampled row {} column {}: want {w:#x}, got {o:#x}",
                    rows[i / n],
                    i % n
                );
            }
            checked += rows.len() * n;
            println!(
                "{tier}, A {a_layout:?}, {out} output of {m}×{n} = {} elements: {} sampled rows \
                 ({} outputs) identical",
                m * n,
                rows.len(),
                rows.len() * n
            );
        }
    }
    println!("{checked} outputs checked past 2^31 elements");
}

/// K = 2²⁰: the scalar tier against the CPU backend on every output; the tensor-core tier
/// against the same rows alone and a float64 reference.
#[test]
#[ignore = "needs a CUDA GPU"]
fn a_reduction_of_two_to_the_20() {
    let Some(gpu) = gpu_engine() else { return };
    let cpu = Engine::new(Device::Cpu).unwrap();
    let stream = RawStream::new();
    let mut rng = Rng::new(0x1a76f);
    let (m, n, k) = (37, 41, 1usize << 20);
    for (dtype, tier) in [
        (DType::F32, Tier::Scalar),
        (DType::BF16, Tier::Scalar),
        (DType::BF16, Tier::TensorCores),
        (DType::F16, Tier::TensorCores),
    ] {
        if tier == Tier::TensorCores && !gpu.supports(tier) {
            continue;
        }
        let g = Gemm {
            b: Operand::col_major(dtype, k),
            bias: Some(DType::F32),
            c: Output {
                mode: OutputMode::Overwrite(DType::F32),
                ldc: n,
                batch_stride: 0,
            },
            tier,
            ..Gemm::dense(m, n, k, dtype)
        };
        let p = gpu_support::Problem::random(g, &mut rng);
        let got = p.on_gpu(&gpu, &stream);
        match tier {
            Tier::Scalar => {
                let want = p.on_cpu(&cpu);
                if let Some((i, w, o)) = first_difference(&want, &got) {
                    panic!("{dtype} scalar K=2^20: element {i}: cpu {w:#x} gpu {o:#x}");
                }
                println!(
                    "{dtype} scalar, {m}×{n}, K = 2^20: all {} outputs = CPU",
                    m * n
                );
            }
            Tier::Auto => unreachable!("this test names its tiers"),
            Tier::TensorCores => {
                // Rows 5..17 alone give the same bits.
                let (r0, len) = (5, 12);
                let sub = gpu_support::Problem {
                    g: Gemm { m: len, ..g },
                    a: match &p.a {
                        HostBuf::BF16(v) => HostBuf::BF16(v[r0 * k..(r0 + len) * k].to_vec()),
                        HostBuf::F16(v) => HostBuf::F16(v[r0 * k..(r0 + len) * k].to_vec()),
                        HostBuf::F32(_) => unreachable!(),
                    },
                    b: p.b.clone(),
                    bias: p.bias.clone(),
                    c0: HostBuf::poison(DType::F32, len * n),
                };
                let alone = sub.on_gpu(&gpu, &stream);
                assert_eq!(
                    &alone.bits()[..],
                    &got.bits()[r0 * n..(r0 + len) * n],
                    "{dtype} tensor cores K=2^20: rows alone"
                );
                // Relative error against float64 (inputs in [-1, 1): sums ~ 2^10).
                let (a, b, bias, o) = (
                    f64s(&p.a),
                    f64s(&p.b),
                    f64s(p.bias.as_ref().unwrap()),
                    f64s(&got),
                );
                let (mut err2, mut ref2) = (0.0, 0.0);
                for i in 0..m {
                    for j in 0..n {
                        let exact =
                            bias[j] + (0..k).map(|kk| a[i * k + kk] * b[kk + j * k]).sum::<f64>();
                        err2 += (o[i * n + j] - exact).powi(2);
                        ref2 += exact * exact;
                    }
                }
                let rel = (err2 / ref2).sqrt();
                println!(
                    "{dtype} tensor cores, {m}×{n}, K = 2^20: rows alone identical, relative \
                     error {rel:.2e}"
                );
                // Each k16 step truncates the accumulator toward zero (C4), a bias that grows
                // with the 2^16 steps: ~1e-3 is expected, a wrong index gives ~1.
                assert!(rel < 1e-2, "{dtype}: relative error {rel}");
            }
        }
    }
}

/// A row-major A whose rows lie hundreds of megabytes apart. The scalar kernels read the
/// K tiles wholly inside an operand through a block address plus each thread's 32-bit
/// offset (`kernels-gpu/src/scalar/mainloop.rs`, `Cursor`): at lda = 4·10⁶ f32 those offsets
/// reach 2.0·10⁹ bytes, just under the kernels' 2³¹ bound; at lda = 8.6·10⁶ they would pass
/// 2³² and wrap, so the kernel must take its general loads. Both against the CPU backend,
/// bit for bit.
#[test]
#[ignore = "needs a CUDA GPU"]
fn leading_dimensions_at_the_scalar_offset_bound() {
    let Some(gpu) = gpu_engine() else { return };
    let cpu = Engine::new(Device::Cpu).unwrap();
    let stream = RawStream::new();
    let mut rng = Rng::new(0x1a770);
    // One 128-row tile, K = five K tiles of 8.
    let (m, n, k) = (128, 128, 40);
    for lda in [4_000_000, 8_600_000] {
        let g = Gemm {
            a: Operand::row_major(DType::F32, lda),
            tier: Tier::Scalar,
            ..Gemm::dense(m, n, k, DType::F32)
        };
        let p = gpu_support::Problem::random(g, &mut rng);
        let got = p.on_gpu(&gpu, &stream);
        let want = p.on_cpu(&cpu);
        if let Some((i, w, o)) = first_difference(&want, &got) {
            panic!("f32 scalar, lda = {lda}: element {i}: cpu {w:#x} gpu {o:#x}");
        }
        println!(
            "f32 scalar, {m}×{n}×{k}, lda = {lda}: all {} outputs = CPU",
            m * n
        );
    }
}
