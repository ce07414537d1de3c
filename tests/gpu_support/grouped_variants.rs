//! The grouped kernels' variants that a variable forces (the rows split's tile order,
//! `SGEMM_BI_GROUPED_ORDER`; clusters of either split, `SGEMM_BI_GROUPED_CLUSTER`) checked
//! against the CPU engine, one test binary per setting (`tests/gpu_grouped_dynamic.rs`,
//! `tests/gpu_grouped_static.rs`, `tests/gpu_grouped_clusters.rs`): the engine reads them
//! once per device and process.

use super::{
    first_difference, gpu_engine, offsets_on_device, CapturedGrouped, DeviceBuf, HostBuf,
    RawStream, Rng,
};
use sgemm_bi::{
    DType, Device, Engine, Gemm, GemmPointers, GroupOffsets, GroupSplit, GroupedGemm, Operand,
    Output, OutputMode, Tier,
};

/// The GPU engine with `variable` set to `value`: the caller's test binary has this one
/// test, which sets the variable before any engine exists (the engine reads it once per
/// device and process), so no other thread reads the environment meanwhile.
fn engine_with(variable: &str, value: &str) -> Option<Engine> {
    std::env::set_var(variable, value);
    gpu_engine()
}

/// Cumulative ends from group sizes.
fn ends(sizes: &[usize]) -> Vec<i32> {
    sizes
        .iter()
        .scan(0, |end, s| {
            *end += s;
            Some(*end as i32)
        })
        .collect()
}

/// The routings of `rows` rows to `groups` groups the test runs, by name.
fn routings(rng: &mut Rng, groups: usize, rows: usize) -> Vec<(&'static str, Vec<i32>)> {
    let balanced = (0..groups)
        .map(|g| rows * (g + 1) / groups - rows * g / groups)
        .collect::<Vec<_>>();
    let mut zipf = vec![0usize; groups];
    for _ in 0..rows {
        zipf[rng.below(groups).min(rng.below(groups))] += 1;
    }
    // Empty first, inner and last groups; the other groups' rows stay as balanced's.
    let mut empty = balanced.clone();
    for g in [0, groups / 2, groups - 1] {
        let moved = std::mem::take(&mut empty[g]);
        empty[1] += moved;
    }
    let mut one = vec![0usize; groups];
    one[groups / 3] = rows;
    // 300 rows past the last group's end: whole tiles of them (and a partial one).
    let short = (0..groups)
        .map(|g| (rows - 300) * (g + 1) / groups - (rows - 300) * g / groups)
        .collect::<Vec<_>>();
    vec![
        ("balanced", ends(&balanced)),
        ("zipf", ends(&zipf)),
        ("empty groups", ends(&empty)),
        ("one group", ends(&one)),
        ("rows past the last end", ends(&short)),
    ]
}

/// torch's 2-D × 3-D call: `rows` tokens of K, `groups` experts' weights (B column-major,
/// torch's [G, N, K], or row-major [G, K, N]).
fn rows_call(
    dtype: DType,
    b_col_major: bool,
    bias: Option<DType>,
    out: DType,
    (rows, n, k, groups): (usize, usize, usize, usize),
) -> GroupedGemm {
    let b = if b_col_major {
        Operand::col_major(dtype, k)
    } else {
        Operand::row_major(dtype, n)
    };
    GroupedGemm {
        split: GroupSplit::Rows,
        gemm: Gemm {
            batch: groups,
            tier: Tier::TensorCores,
            b: b.with_batch_stride(k * n),
            bias,
            c: Output {
                mode: OutputMode::Overwrite(out),
                ldc: n,
                batch_stride: 0,
            },
            ..Gemm::dense(rows, n, k, dtype)
        },
    }
}

/// A call's inputs, on the host (for the CPU engine) and on the device.
struct Inputs<'a> {
    a: (&'a HostBuf, &'a DeviceBuf),
    b: (&'a HostBuf, &'a DeviceBuf),
    bias: Option<(&'a HostBuf, &'a DeviceBuf)>,
}

/// Runs `gg` once on the GPU with `offsets` on the device, over `c0`, and on the CPU engine
/// from the same inputs and `c0`; the first output whose bits differ (index, GPU bits, CPU
/// bits), if any. `what` names the call in a failure's message.
fn gpu_and_cpu_differ(
    [gpu, cpu]: [&Engine; 2],
    stream: &RawStream,
    gg: &GroupedGemm,
    offsets: &[i32],
    inputs: &Inputs,
    c0: &HostBuf,
    what: &str,
) -> Option<(usize, u32, u32)> {
    let mut want = c0.clone();
    let host_bias = inputs.bias.map(|(h, _)| h.slice());
    cpu.grouped_gemm_host(
        gg,
        offsets,
        inputs.a.0.slice(),
        inputs.b.0.slice(),
        host_bias,
        want.slice_mut(),
    )
    .expect("CPU grouped call");
    let d_offsets = offsets_on_device(offsets);
    let d_c = DeviceBuf::upload(c0);
    let p = GemmPointers {
        a: inputs.a.1.at(0),
        b: inputs.b.1.at(0),
        bias: inputs
            .bias
            .map_or(std::ptr::null(), |(_, d)| d.at(0).cast_const()),
        c: d_c.at(0),
    };
    let on_device = GroupOffsets::Device(d_offsets.at(0).cast_const().cast());
    // SAFETY: every buffer holds the whole call's span; synchronized below.
    unsafe { gpu.grouped_gemm(gg, on_device, p, stream.handle()) }
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    stream.sync();
    let mut got = c0.clone();
    d_c.download_into(&mut got);
    first_difference(&got, &want)
}

/// Captures `gg` with `offsets` on the device (no bias) and replays it twice, each time over
/// `c0`, asserting the CPU engine's bits; returns the replays checked.
fn replays_the_cpu_bits(
    gpu: &Engine,
    cpu: &Engine,
    stream: &RawStream,
    gg: &GroupedGemm,
    offsets: &[i32],
    [a, b, c0]: [&HostBuf; 3],
) -> usize {
    let mut want = c0.clone();
    cpu.grouped_gemm_host(gg, offsets, a.slice(), b.slice(), None, want.slice_mut())
        .expect("CPU grouped call");
    let (d_a, d_b) = (DeviceBuf::upload(a), DeviceBuf::upload(b));
    let d_offsets = offsets_on_device(offsets);
    let d_c = DeviceBuf::upload(c0);
    let p = GemmPointers {
        a: d_a.at(0),
        b: d_b.at(0),
        bias: std::ptr::null(),
        c: d_c.at(0),
    };
    let on_device = GroupOffsets::Device(d_offsets.at(0).cast_const().cast());
    // SAFETY: the buffers hold the whole call's spans and outlive the graph.
    let graph = unsafe { CapturedGrouped::new(gpu, stream, gg, on_device, p) }
        .unwrap_or_else(|e| panic!("capture: {e}"));
    for replay in 0..2 {
        d_c.upload_from(c0);
        graph.replay(stream);
        let mut got = c0.clone();
        d_c.download_into(&mut got);
        assert_eq!(
            first_difference(&got, &want),
            None,
            "replay {replay}: (output, GPU bits, CPU bits)"
        );
    }
    2
}

/// Every output of the rows split with `variable` set to `value` (`SGEMM_BI_GROUPED_ORDER`
/// `static` or `dynamic`, `SGEMM_BI_GROUPED_CLUSTER` `2`) is the CPU engine's bits:
/// balanced and Zipf-like routings, empty groups (first, inside, last), all rows in one
/// group, rows past the last group's end, both B layouts, with and without a bias, 16-bit
/// and f32 outputs, more tiles than SMs; and a captured call, the process's first grouped
/// call, replays its bits twice.
pub fn the_rows_split_gives_the_cpu_bits(variable: &str, value: &str) {
    let Some(gpu) = engine_with(variable, value) else {
        return;
    };
    let cpu = Engine::new(Device::Cpu).expect("the CPU engine always exists");
    let stream = RawStream::new();
    let mut rng = Rng::new(0x0d_2025);
    // 6000 rows in 24 groups, N = 640 (two whole tiles of 256 columns and a half one), K = 136
    // (a partial last K tile): about 240 tiles, more than the SMs.
    let dims @ (rows, n, k, groups) = (6000, 640, 136, 24);
    let mut checked = 0;
    // Captured once, replayed twice over a poisoned C: in the dynamic order each replay
    // zeroes its own counter. The process's first grouped call, so its first counter (and
    // the counters' memory pool) is made while the stream captures.
    let gg = rows_call(DType::BF16, true, None, DType::BF16, dims);
    let a = HostBuf::random(DType::BF16, rows * k, &mut rng);
    let b = HostBuf::random(DType::BF16, groups * k * n, &mut rng);
    let (_, offsets) = routings(&mut rng, groups, rows).swap_remove(1);
    let c0 = HostBuf::poison(DType::BF16, rows * n);
    checked += replays_the_cpu_bits(&gpu, &cpu, &stream, &gg, &offsets, [&a, &b, &c0]);
    for dtype in [DType::BF16, DType::F16] {
        for b_col_major in [true, false] {
            // Each store once without a bias; the 16-bit one with an f32 and a 16-bit bias.
            for (bias, out) in [
                (None, dtype),
                (Some(DType::F32), dtype),
                (Some(dtype), dtype),
                (None, DType::F32),
            ] {
                let gg = rows_call(dtype, b_col_major, bias, out, dims);
                let a = HostBuf::random(dtype, rows * k, &mut rng);
                let b = HostBuf::random(dtype, groups * k * n, &mut rng);
                let bias_values = bias.map(|d| HostBuf::random(d, groups * n, &mut rng));
                let (d_a, d_b) = (DeviceBuf::upload(&a), DeviceBuf::upload(&b));
                let d_bias = bias_values.as_ref().map(DeviceBuf::upload);
                let poison = HostBuf::poison(out, rows * n);
                for (routing, offsets) in routings(&mut rng, groups, rows) {
                    let what = format!(
                        "{dtype} B {} bias {bias:?} out {out} {routing}",
                        if b_col_major { "col" } else { "row" }
                    );
                    let inputs = Inputs {
                        a: (&a, &d_a),
                        b: (&b, &d_b),
                        bias: bias_values.as_ref().zip(d_bias.as_ref()),
                    };
                    let engines = [&gpu, &cpu];
                    let differ = gpu_and_cpu_differ(
                        engines, &stream, &gg, &offsets, &inputs, &poison, &what,
                    );
                    if let Some((i, g, w)) = differ {
                        panic!(
                            "{what}: output {i} (row {}, column {}) is {g:#x}, the CPU's {w:#x}",
                            i / n,
                            i % n
                        );
                    }
                    checked += 1;
                }
            }
        }
    }
    assert_eq!(checked, 2 * 2 * 4 * 5 + 2);
}

/// torch's 2-D × 2-D call, the experts' weight gradient: `groups` reductions over `tokens`
/// tokens of Xᵀ (`hidden` × tokens, a row-major X read column-major) times dY (tokens × `n`,
/// row-major), one `hidden` × `n` C per group.
fn reduction_call(dtype: DType, out: OutputMode, (hidden, n, tokens, groups): Dims) -> GroupedGemm {
    GroupedGemm {
        split: GroupSplit::Reduction,
        gemm: Gemm {
            batch: groups,
            tier: Tier::TensorCores,
            a: Operand::col_major(dtype, hidden),
            c: Output {
                mode: out,
                ldc: n,
                batch_stride: hidden * n,
            },
            ..Gemm::dense(hidden, n, tokens, dtype)
        },
    }
}

/// (M, N, K, groups) of a call.
type Dims = (usize, usize, usize, usize);

/// Every output of the reduction split with `variable` set to `value`
/// (`SGEMM_BI_GROUPED_CLUSTER` `2`) is the CPU engine's bits: the routings of
/// [`the_rows_split_gives_the_cpu_bits`] (for this split, tokens past the last end belong to
/// no group's range), bf16 and f16, 16-bit and f32 outputs and accumulation into f32; M of
/// two and a half tiles, so the last cluster's second block lies past M; and a captured call
/// replays its bits twice.
pub fn the_reduction_split_gives_the_cpu_bits(variable: &str, value: &str) {
    let Some(gpu) = engine_with(variable, value) else {
        return;
    };
    let cpu = Engine::new(Device::Cpu).expect("the CPU engine always exists");
    let stream = RawStream::new();
    let mut rng = Rng::new(0x0d_2026);
    // M = 320 (three tile rows: two clusters along M, the second's upper block past M), N =
    // 640 (two and a half tiles of 256 columns), 6000 tokens in 24 groups: 288 tiles.
    let dims @ (hidden, n, tokens, groups) = (320, 640, 6000, 24);
    let c_len = groups * hidden * n;
    let mut checked = 0;
    for dtype in [DType::BF16, DType::F16] {
        let a = HostBuf::random(dtype, hidden * tokens, &mut rng);
        let b = HostBuf::random(dtype, tokens * n, &mut rng);
        let (d_a, d_b) = (DeviceBuf::upload(&a), DeviceBuf::upload(&b));
        for out in [
            OutputMode::Overwrite(dtype),
            OutputMode::Overwrite(DType::F32),
            OutputMode::AccumulateF32,
        ] {
            let gg = reduction_call(dtype, out, dims);
            // Accumulating starts from random values (a poisoned C would give NaN everywhere).
            let c0 = match out {
                OutputMode::AccumulateF32 => HostBuf::random(DType::F32, c_len, &mut rng),
                mode => HostBuf::poison(mode.dtype(), c_len),
            };
            for (routing, offsets) in routings(&mut rng, groups, tokens) {
                let what = format!("{dtype} out {out:?} {routing}");
                let inputs = Inputs {
                    a: (&a, &d_a),
                    b: (&b, &d_b),
                    bias: None,
                };
                let engines = [&gpu, &cpu];
                let differ =
                    gpu_and_cpu_differ(engines, &stream, &gg, &offsets, &inputs, &c0, &what);
                if let Some((i, g, w)) = differ {
                    let (group, within) = (i / (hidden * n), i % (hidden * n));
                    panic!(
                        "{what}: group {group} output ({}, {}) is {g:#x}, the CPU's {w:#x}",
                        within / n,
                        within % n
                    );
                }
                checked += 1;
            }
        }
    }
    // Captured once, replayed twice over a poisoned C.
    let gg = reduction_call(DType::BF16, OutputMode::Overwrite(DType::BF16), dims);
    let a = HostBuf::random(DType::BF16, hidden * tokens, &mut rng);
    let b = HostBuf::random(DType::BF16, tokens * n, &mut rng);
    let (_, offsets) = routings(&mut rng, groups, tokens).swap_remove(1);
    let c0 = HostBuf::poison(DType::BF16, c_len);
    checked += replays_the_cpu_bits(&gpu, &cpu, &stream, &gg, &offsets, [&a, &b, &c0]);
    assert_eq!(checked, 2 * 3 * 5 + 2);
}
