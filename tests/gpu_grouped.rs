//! The grouped GEMM on the GPU: the CPU engine's bits for every split, tier and routing, with
//! the offsets on the host and on the device; a grouped call captured in a CUDA graph (host
//! offsets) replays the direct bits; device offsets inside a capture and bad device offsets
//! are clear errors that leave the context working, reported before anything runs where the
//! engine reads them back and after the grouped kernel has run where it reads them itself;
//! and grouped calls whose operands pass 2³¹ elements, on the grouped kernel and on the
//! group-by-group path (about 25 GB of device memory). `#[ignore]`d: CI has no GPU;
//! `bash .gpu/run` runs it.

mod gpu_support;

use cudarc::driver::result;
use gpu_support::{
    first_difference, gpu_engine, offsets_on_device, run_captured, DeviceBuf, HostBuf, RawStream,
    Rng,
};
use sgemm_bi::{
    DType, Device, Engine, Error, Gemm, GemmPointers, GroupOffsets, GroupSplit, GroupedGemm,
    Operand, Output, OutputMode, TcPath, Tier,
};

const CASES: [(DType, Tier); 4] = [
    (DType::F32, Tier::Scalar),
    (DType::BF16, Tier::Scalar),
    (DType::BF16, Tier::TensorCores),
    (DType::F16, Tier::TensorCores),
];

/// Cumulative ends of a Zipf-like routing of `total` items to `groups` groups, a few items
/// routed nowhere.
fn routing(rng: &mut Rng, groups: usize, total: usize) -> Vec<i32> {
    let mut sizes = vec![0usize; groups];
    for _ in 0..total.saturating_sub(3) {
        sizes[rng.below(groups).min(rng.below(groups))] += 1;
    }
    sizes
        .iter()
        .scan(0, |end, s| {
            *end += s;
            Some(*end as i32)
        })
        .collect()
}

/// A grouped call of `split` with `groups` groups of `(m, n, k)` (the split one the total),
/// its inputs and its C's length.
fn case(
    split: GroupSplit,
    dtype: DType,
    tier: Tier,
    (m, n, k, groups): (usize, usize, usize, usize),
    rng: &mut Rng,
) -> (GroupedGemm, HostBuf, HostBuf, Option<HostBuf>, usize) {
    let mut g = Gemm {
        batch: groups,
        tier,
        ..Gemm::dense(m, n, k, dtype)
    };
    let (mut a_len, mut b_len, mut c_len) = (m * k, k * n, m * n);
    let mut bias_len = n;
    match split {
        GroupSplit::Rows => {
            // torch's [G, N, K] expert weights read as [G, K, N].
            g.b = Operand::col_major(dtype, k).with_batch_stride(k * n);
            b_len *= groups;
            bias_len = groups * n;
            g.bias = Some(DType::F32);
        }
        GroupSplit::Columns => {
            g.a = Operand::row_major(dtype, k).with_batch_stride(m * k);
            a_len *= groups;
            g.bias = Some(dtype);
        }
        GroupSplit::Reduction => {
            // Xᵀ of a row-major X [tokens, m].
            g.a = Operand::col_major(dtype, m);
            g.c = Output {
                mode: OutputMode::Overwrite(dtype),
                ldc: n,
                batch_stride: m * n,
            };
            c_len *= groups;
        }
    }
    let a = HostBuf::random(dtype, a_len, rng);
    let b = HostBuf::random(dtype, b_len, rng);
    let bias = g.bias.map(|d| HostBuf::random(d, bias_len, rng));
    (GroupedGemm { split, gemm: g }, a, b, bias, c_len)
}

fn on_cpu(
    gg: &GroupedGemm,
    offsets: &[i32],
    a: &HostBuf,
    b: &HostBuf,
    bias: Option<&HostBuf>,
    c_len: usize,
) -> HostBuf {
    let c0 = HostBuf::poison(gg.gemm.c.mode.dtype(), c_len);
    on_cpu_from(gg, offsets, a, b, bias, c0)
}

/// The CPU engine's C for `gg`, starting from `c0`.
fn on_cpu_from(
    gg: &GroupedGemm,
    offsets: &[i32],
    a: &HostBuf,
    b: &HostBuf,
    bias: Option<&HostBuf>,
    mut c: HostBuf,
) -> HostBuf {
    let cpu = Engine::new(sgemm_bi::Device::Cpu).unwrap();
    cpu.grouped_gemm_host(
        gg,
        offsets,
        a.slice(),
        b.slice(),
        bias.map(|b| b.slice()),
        c.slice_mut(),
    )
    .expect("CPU grouped call");
    c
}

struct Uploaded {
    a: DeviceBuf,
    b: DeviceBuf,
    bias: Option<DeviceBuf>,
    c: DeviceBuf,
}

impl Uploaded {
    fn new(a: &HostBuf, b: &HostBuf, bias: Option<&HostBuf>, c0: &HostBuf) -> Self {
        Uploaded {
            a: DeviceBuf::upload(a),
            b: DeviceBuf::upload(b),
            bias: bias.map(DeviceBuf::upload),
            c: DeviceBuf::upload(c0),
        }
    }
    fn pointers(&self) -> GemmPointers {
        GemmPointers {
            a: self.a.at(0),
            b: self.b.at(0),
            bias: self
                .bias
                .as_ref()
                .map_or(std::ptr::null(), |b| b.at(0).cast_const()),
            c: self.c.at(0),
        }
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn grouped_calls_give_the_cpu_bits_with_host_and_device_offsets() {
    let Some(gpu) = gpu_engine() else { return };
    let stream = RawStream::new();
    let mut rng = Rng::new(31);
    for split in [GroupSplit::Rows, GroupSplit::Columns, GroupSplit::Reduction] {
        for (dtype, tier) in CASES {
            let dims = match split {
                GroupSplit::Rows => (517, 192, 256, 16),
                GroupSplit::Columns => (40, 700, 128, 8),
                GroupSplit::Reduction => (128, 96, 900, 12),
            };
            let (mut gg, a, b, bias, c_len) = case(split, dtype, tier, dims, &mut rng);
            // The weight gradient accumulated into f32 (the reduction split's other mode).
            if split == GroupSplit::Reduction && dtype == DType::BF16 {
                gg.gemm.c.mode = OutputMode::AccumulateF32;
            }
            let total = gg.total();
            let offsets = routing(&mut rng, gg.groups(), total);
            // Accumulating starts from random values (a poisoned C would give NaN everywhere).
            let poison = match gg.gemm.c.mode {
                OutputMode::AccumulateF32 => HostBuf::random(DType::F32, c_len, &mut rng),
                mode => HostBuf::poison(mode.dtype(), c_len),
            };
            let want = on_cpu_from(&gg, &offsets, &a, &b, bias.as_ref(), poison.clone());
            let d_offsets = offsets_on_device(&offsets);
            for device_offsets in [false, true] {
                let dev = Uploaded::new(&a, &b, bias.as_ref(), &poison);
                let where_ = if device_offsets {
                    GroupOffsets::Device(d_offsets.at(0).cast_const().cast())
                } else {
                    GroupOffsets::Host(&offsets)
                };
                // SAFETY: every buffer holds the whole call's span; synchronized below.
                unsafe { gpu.grouped_gemm(&gg, where_, dev.pointers(), stream.handle()) }
                    .unwrap_or_else(|e| panic!("{split} {dtype} {tier}: {e}"));
                stream.sync();
                let mut got = poison.clone();
                dev.c.download_into(&mut got);
                assert!(
                    got.bits() == want.bits(),
                    "{split} {dtype} {tier} device offsets {device_offsets}: GPU bits differ \
                     from the CPU's"
                );
            }
        }
    }
}

/// Captures `gg` with `offsets` (host or device) on a thread-local capture, replays it once
/// and returns C, or the error of the call under capture.
fn captured(
    gpu: &Engine,
    stream: &RawStream,
    gg: &GroupedGemm,
    offsets: GroupOffsets<'_>,
    dev: &Uploaded,
    c_len: usize,
) -> Result<HostBuf, Error> {
    // SAFETY: the buffers hold the whole call's spans and outlive the replay.
    unsafe { run_captured(gpu, stream, gg, offsets, dev.pointers()) }?;
    let mut got = HostBuf::poison(gg.gemm.c.mode.dtype(), c_len);
    dev.c.download_into(&mut got);
    Ok(got)
}

/// The rows split with device offsets runs as one grouped kernel that reads them, on both
/// tiers (the tensor-core tier's Hopper kernel, the scalar tier's one-thread-per-element
/// kernel): it captures and replays the CPU's bits, as host offsets do. Where the engine
/// must read device offsets back (the scalar tier's columns split), a capture is refused
/// with a clear error.
#[test]
#[ignore = "needs a CUDA GPU"]
fn captured_grouped_calls_replay_their_bits_and_a_read_back_is_refused() {
    let Some(gpu) = gpu_engine() else { return };
    let stream = RawStream::new();
    let mut rng = Rng::new(5);
    for (dtype, tier) in [
        (DType::BF16, Tier::TensorCores),
        (DType::F16, Tier::TensorCores),
        (DType::F32, Tier::Scalar),
        (DType::BF16, Tier::Scalar),
        (DType::F16, Tier::Scalar),
    ] {
        let (gg, a, b, bias, c_len) =
            case(GroupSplit::Rows, dtype, tier, (300, 128, 256, 8), &mut rng);
        let offsets = routing(&mut rng, 8, 300);
        let want = on_cpu(&gg, &offsets, &a, &b, bias.as_ref(), c_len);
        let d_offsets = offsets_on_device(&offsets);
        let poison = HostBuf::poison(dtype, c_len);
        for device in [false, true] {
            let dev = Uploaded::new(&a, &b, bias.as_ref(), &poison);
            let where_ = if device {
                GroupOffsets::Device(d_offsets.at(0).cast_const().cast())
            } else {
                GroupOffsets::Host(&offsets)
            };
            let got = captured(&gpu, &stream, &gg, where_, &dev, c_len)
                .unwrap_or_else(|e| panic!("{dtype} {tier} device offsets {device}: {e}"));
            assert!(
                got.bits() == want.bits(),
                "{dtype} {tier} device offsets {device}: replay"
            );
        }
    }
    let (gg, a, b, bias, c_len) = case(
        GroupSplit::Columns,
        DType::F32,
        Tier::Scalar,
        (32, 64, 32, 4),
        &mut rng,
    );
    let d_offsets = offsets_on_device(&[10, 20, 30, 64]);
    let dev = Uploaded::new(&a, &b, bias.as_ref(), &HostBuf::poison(DType::F32, c_len));
    let refused = captured(
        &gpu,
        &stream,
        &gg,
        GroupOffsets::Device(d_offsets.at(0).cast_const().cast()),
        &dev,
        c_len,
    );
    assert!(
        matches!(refused, Err(Error::Unsupported(_))),
        "{:?}",
        refused.err()
    );
}

/// Ends the grouped kernel reads are clamped: a decreasing end makes an empty group, an end
/// past the rows is the last row. The result is the CPU's for the clamped ends, and nothing
/// outside C is written (the context keeps working).
#[test]
#[ignore = "needs a CUDA GPU"]
fn the_grouped_kernel_clamps_bad_device_offsets() {
    let Some(gpu) = gpu_engine() else { return };
    let stream = RawStream::new();
    let mut rng = Rng::new(13);
    let (gg, a, b, bias, c_len) = case(
        GroupSplit::Rows,
        DType::BF16,
        Tier::TensorCores,
        (200, 128, 128, 4),
        &mut rng,
    );
    let bad = [60, 30, 120, 1 << 30];
    let clamped = [60, 60, 120, 200];
    let want = on_cpu(&gg, &clamped, &a, &b, bias.as_ref(), c_len);
    let poison = HostBuf::poison(DType::BF16, c_len);
    let dev = Uploaded::new(&a, &b, bias.as_ref(), &poison);
    let d = offsets_on_device(&bad);
    // SAFETY: every buffer holds the whole call's span; synchronized below.
    unsafe {
        gpu.grouped_gemm(
            &gg,
            GroupOffsets::Device(d.at(0).cast_const().cast()),
            dev.pointers(),
            stream.handle(),
        )
    }
    .expect("the grouped kernel takes device offsets without reading them on the host");
    stream.sync();
    let mut got = poison.clone();
    dev.c.download_into(&mut got);
    assert!(got.bits() == want.bits(), "clamped ends");
    // The kernel also reports the first bad end (checked by the test below); taken here so
    // that it does not stay pending on this engine.
    match gpu.take_device_error() {
        Ok(()) | Err(Error::BadOffsets { group: 1, .. }) => {}
        Err(e) => panic!("{e}"),
    }
}

/// Runs `gg` with the device ends `ends` on fresh buffers, waits for the stream and returns
/// C, or the call's error (which ran nothing: C is checked to be the poison).
fn on_device_ends(
    gpu: &Engine,
    stream: &RawStream,
    gg: &GroupedGemm,
    ends: &[i32],
    inputs: (&HostBuf, &HostBuf, Option<&HostBuf>),
    c_len: usize,
) -> Result<HostBuf, Error> {
    let (a, b, bias) = inputs;
    let poison = HostBuf::poison(gg.gemm.c.mode.dtype(), c_len);
    let dev = Uploaded::new(a, b, bias, &poison);
    let d = offsets_on_device(ends);
    // SAFETY: every buffer holds the whole call's span; synchronized below, before the
    // buffers drop.
    let call = unsafe {
        gpu.grouped_gemm(
            gg,
            GroupOffsets::Device(d.at(0).cast_const().cast()),
            dev.pointers(),
            stream.handle(),
        )
    };
    stream.sync();
    let mut got = poison.clone();
    dev.c.download_into(&mut got);
    match call {
        Ok(()) => Ok(got),
        Err(e) => {
            assert!(got.bits() == poison.bits(), "a refused call wrote C ({e})");
            Err(e)
        }
    }
}

/// The grouped kernel does not wait for its ends, so it cannot refuse bad ones: it clamps
/// them and reports the first to the engine once it has run. After a synchronize,
/// `take_device_error` returns it (naming the group) and clears it; a grouped call made
/// while a report is pending returns the report instead of running; the calls after it run
/// and give their bits. For both kernels (rows split and reduction split), for an end below
/// the previous one and one past the split dimension, directly and replayed from a graph.
#[test]
#[ignore = "needs a CUDA GPU"]
fn the_grouped_kernel_reports_bad_device_offsets_after_it_has_run() {
    let Some(gpu) = gpu_engine() else { return };
    let stream = RawStream::new();
    let mut rng = Rng::new(17);
    // (split, dims, bad ends, the ends the kernel runs with, the first bad group)
    let cases: [(GroupSplit, _, [i32; 4], [i32; 4], usize); 4] = [
        (
            GroupSplit::Rows,
            (200, 128, 128, 4),
            [60, 30, 120, 200],
            [60, 60, 120, 200],
            1,
        ),
        (
            GroupSplit::Rows,
            (200, 128, 128, 4),
            [60, 90, 250, 200],
            [60, 90, 200, 200],
            2,
        ),
        // The reduction kernel clamps each group's range from its own two ends (no running
        // maximum over the groups before it), so the bad ends sit where that clamping is
        // also a list of ends the CPU can run.
        (
            GroupSplit::Reduction,
            (64, 128, 320, 4),
            [100, 200, 300, 250],
            [100, 200, 300, 300],
            3,
        ),
        (
            GroupSplit::Reduction,
            (64, 128, 320, 4),
            [100, 200, 1 << 30, 320],
            [100, 200, 320, 320],
            2,
        ),
    ];
    let good = |total: i32| [total / 4, total / 2, total / 2, total - 1];
    for (split, dims, bad, clamped, group) in cases {
        let what = format!("{split} {bad:?}");
        let (gg, a, b, bias, c_len) = case(split, DType::BF16, Tier::TensorCores, dims, &mut rng);
        let inputs = (&a, &b, bias.as_ref());
        assert_eq!(gpu.take_device_error(), Ok(()), "{what}: nothing pending");

        // Direct: the clamped ends' bits, and the report once the stream is synchronized.
        let got = on_device_ends(&gpu, &stream, &gg, &bad, inputs, c_len)
            .unwrap_or_else(|e| panic!("{what}: {e}"));
        let want_clamped = on_cpu(&gg, &clamped, &a, &b, bias.as_ref(), c_len);
        assert!(got.bits() == want_clamped.bits(), "{what}: clamped ends");
        match gpu.take_device_error() {
            Err(Error::BadOffsets { group: g, detail }) => {
                assert_eq!(g, group, "{what}: {detail}");
                assert!(detail.contains("on the device"), "{what}: {detail}");
            }
            other => panic!("{what}: no report of the bad end: {other:?}"),
        }
        assert_eq!(
            gpu.take_device_error(),
            Ok(()),
            "{what}: the report was cleared"
        );

        // A report pending at the next grouped call is that call's error, and it runs
        // nothing; the call after it runs.
        let good = good(gg.total() as i32);
        on_device_ends(&gpu, &stream, &gg, &bad, inputs, c_len)
            .unwrap_or_else(|e| panic!("{what}: {e}"));
        let refused = on_device_ends(&gpu, &stream, &gg, &good, inputs, c_len);
        assert!(
            matches!(&refused, Err(Error::BadOffsets { group: g, .. }) if *g == group),
            "{what}: the next call returns the report: {refused:?}"
        );
        let got = on_device_ends(&gpu, &stream, &gg, &good, inputs, c_len)
            .unwrap_or_else(|e| panic!("{what}: after the report: {e}"));
        let want = on_cpu(&gg, &good, &a, &b, bias.as_ref(), c_len);
        assert!(
            got.bits() == want.bits(),
            "{what}: a good call after the report"
        );
        assert_eq!(
            gpu.take_device_error(),
            Ok(()),
            "{what}: good ends, no report"
        );

        // Replayed from a graph: the report comes with the replay.
        let poison = HostBuf::poison(gg.gemm.c.mode.dtype(), c_len);
        let dev = Uploaded::new(&a, &b, bias.as_ref(), &poison);
        let d = offsets_on_device(&bad);
        let ends = GroupOffsets::Device(d.at(0).cast_const().cast());
        let got = captured(&gpu, &stream, &gg, ends, &dev, c_len)
            .unwrap_or_else(|e| panic!("{what}: captured: {e}"));
        assert!(got.bits() == want_clamped.bits(), "{what}: replayed");
        assert!(
            matches!(gpu.take_device_error(), Err(Error::BadOffsets { group: g, .. }) if g == group),
            "{what}: replayed"
        );
    }
}

/// Where the engine reads device offsets back (the scalar tier's columns split: no grouped
/// kernel takes it), bad ones are refused before anything runs.
#[test]
#[ignore = "needs a CUDA GPU"]
fn bad_device_offsets_are_reported_before_anything_runs() {
    let Some(gpu) = gpu_engine() else { return };
    let stream = RawStream::new();
    let mut rng = Rng::new(9);
    let (gg, a, b, bias, c_len) = case(
        GroupSplit::Columns,
        DType::F32,
        Tier::Scalar,
        (32, 64, 32, 4),
        &mut rng,
    );
    let poison = HostBuf::poison(DType::F32, c_len);
    let dev = Uploaded::new(&a, &b, bias.as_ref(), &poison);
    for (bad, group) in [
        (vec![10, 5, 20, 64], 1),
        (vec![10, 20, 30, 1 << 30], 3),
        (vec![-4, 0, 0, 0], 0),
    ] {
        let d = offsets_on_device(&bad);
        // SAFETY: every buffer holds the whole call's span.
        let err = unsafe {
            gpu.grouped_gemm(
                &gg,
                GroupOffsets::Device(d.at(0).cast_const().cast()),
                dev.pointers(),
                stream.handle(),
            )
        }
        .unwrap_err();
        assert!(
            matches!(err, Error::BadOffsets { group: g, .. } if g == group),
            "{bad:?}: {err}"
        );
    }
    stream.sync();
    let mut got = poison.clone();
    dev.c.download_into(&mut got);
    assert!(got.bits() == poison.bits(), "a refused call wrote C");
}

/// A rows split on the scalar tier: random sizes, B's layout, bias and output mode, and a
/// routing with empty groups (the first among them in every other case) and rows past the
/// last end; a NaN with a payload in A.
fn scalar_rows_case(
    dtype: DType,
    b_k_contiguous: bool,
    variant: usize,
    rng: &mut Rng,
) -> (
    GroupedGemm,
    Vec<i32>,
    HostBuf,
    HostBuf,
    Option<HostBuf>,
    HostBuf,
) {
    let (m, n, k) = (1 + rng.below(300), 1 + rng.below(150), 1 + rng.below(96));
    let groups = 1 + rng.below(12);
    let mut g = Gemm {
        batch: groups,
        tier: Tier::Scalar,
        ..Gemm::dense(m, n, k, dtype)
    };
    g.b = if b_k_contiguous {
        Operand::col_major(dtype, k)
    } else {
        Operand::row_major(dtype, n)
    }
    .with_batch_stride(k * n);
    // (output, bias): overwrite in the inputs' dtype with an f32 bias, overwrite in f32 with
    // a bias in the inputs' dtype, accumulate into f32 without a bias.
    match variant {
        0 => g.bias = Some(DType::F32),
        1 => {
            g.bias = Some(dtype);
            g.c.mode = OutputMode::Overwrite(DType::F32);
        }
        _ => g.c.mode = OutputMode::AccumulateF32,
    }
    let mut ends = routing(rng, groups, m);
    if variant != 1 {
        ends[0] = 0;
    }
    let mut a = HostBuf::random(dtype, m * k, rng);
    let nan_at = rng.below(m * k);
    match &mut a {
        HostBuf::F32(v) => v[nan_at] = f32::from_bits(0x7FC0_1234),
        HostBuf::BF16(v) => v[nan_at] = sgemm_bi::bf16::from_bits(0x7FC5),
        HostBuf::F16(v) => v[nan_at] = sgemm_bi::f16::from_bits(0x7E05),
    }
    let b = HostBuf::random(dtype, groups * k * n, rng);
    let bias = g.bias.map(|d| HostBuf::random(d, groups * n, rng));
    let c0 = match g.c.mode {
        OutputMode::AccumulateF32 => HostBuf::random(DType::F32, m * n, rng),
        mode => HostBuf::poison(mode.dtype(), m * n),
    };
    let gg = GroupedGemm {
        split: GroupSplit::Rows,
        gemm: g,
    };
    (gg, ends, a, b, bias, c0)
}

/// The scalar tier's grouped kernel (the rows split with device offsets): every row has the
/// bits of the dense scalar call of its group's rows, for every dtype, both layouts of B, a
/// bias in f32 or the inputs' dtype, overwrite and accumulate, and random routings with empty
/// groups; the rows past the last end are +0.0 (overwrite) or untouched (accumulate). The
/// calls are captured in a CUDA graph, which only the grouped kernel takes with device
/// offsets (the group-by-group path reads them back, which a capture refuses).
#[test]
#[ignore = "needs a CUDA GPU"]
fn the_scalar_grouped_kernel_gives_the_dense_scalar_bits() {
    let Some(gpu) = gpu_engine() else { return };
    let stream = RawStream::new();
    let mut rng = Rng::new(43);
    for dtype in [DType::F32, DType::BF16, DType::F16] {
        for b_k_contiguous in [false, true] {
            for variant in 0..3 {
                let (gg, ends, a, b, bias, c0) =
                    scalar_rows_case(dtype, b_k_contiguous, variant, &mut rng);
                let g = gg.gemm;
                let what = format!(
                    "{dtype} B k-contiguous {b_k_contiguous} variant {variant} \
                     ({} x {} x {}, ends {ends:?})",
                    g.m, g.n, g.k
                );
                assert_eq!(gpu.take_device_error(), Ok(()), "{what}: nothing pending");
                let dev = Uploaded::new(&a, &b, bias.as_ref(), &c0);
                let d_ends = offsets_on_device(&ends);
                let p = dev.pointers();
                // SAFETY: every buffer holds the whole call's span and outlives the replay.
                unsafe {
                    run_captured(
                        &gpu,
                        &stream,
                        &gg,
                        GroupOffsets::Device(d_ends.at(0).cast_const().cast()),
                        p,
                    )
                }
                .unwrap_or_else(|e| panic!("{what}: the grouped kernel must take it: {e}"));
                let mut got = c0.clone();
                dev.c.download_into(&mut got);
                let n = g.n;
                let mut start = 0;
                for (group, &end) in ends.iter().enumerate() {
                    let end = end as usize;
                    if end > start {
                        let rows = start * n..end * n;
                        let dense = dense_alone(
                            &gpu,
                            &stream,
                            &gg,
                            &p,
                            (group, start, end),
                            &part(&c0, rows.clone()),
                        );
                        if let Some((i, x, y)) = first_difference(&part(&got, rows), &dense) {
                            panic!(
                                "{what}: group {group} ({start}..{end}), element {i}: \
                                 {x:#x}, the dense call {y:#x}"
                            );
                        }
                    }
                    start = end;
                }
                let rest = part(&got, start * n..g.m * n).bits();
                let untouched = part(&c0, start * n..g.m * n).bits();
                let rest_ok = match g.c.mode {
                    OutputMode::AccumulateF32 => rest == untouched,
                    OutputMode::Overwrite(_) => rest.iter().all(|&x| x == 0),
                };
                assert!(rest_ok, "{what}: the rows past the last end");
                let cpu = on_cpu_from(&gg, &ends, &a, &b, bias.as_ref(), c0.clone());
                assert!(got.bits() == cpu.bits(), "{what}: the CPU's bits");
                assert_eq!(
                    gpu.take_device_error(),
                    Ok(()),
                    "{what}: good ends, no report"
                );
            }
        }
    }
}

/// The scalar grouped kernel clamps bad device ends as the Hopper one does (a group ends no
/// earlier than the previous group and no later than the last row: the CPU's bits for the
/// clamped ends), writes nothing outside C (a guard after it keeps its poison), and reports
/// the first bad end once it has run: after a synchronize `take_device_error` returns it and
/// clears it, and a grouped call made while it is pending returns it without running. Ends
/// that decrease, lie past the rows, or are negative; run directly and replayed from a graph.
#[test]
#[ignore = "needs a CUDA GPU"]
fn the_scalar_grouped_kernel_clamps_and_reports_bad_device_offsets() {
    let Some(gpu) = gpu_engine() else { return };
    let stream = RawStream::new();
    let mut rng = Rng::new(47);
    // (bad ends, the ends the kernel runs with, the first bad group), for 200 rows.
    let cases: [([i32; 4], [i32; 4], usize); 5] = [
        ([60, 30, 120, 200], [60, 60, 120, 200], 1),
        ([60, 90, 250, 200], [60, 90, 200, 200], 2),
        ([-5, 90, 120, 150], [0, 90, 120, 150], 0),
        ([60, 1 << 30, 100, 150], [60, 200, 200, 200], 1),
        ([100, 50, 150, 120], [100, 100, 150, 150], 1),
    ];
    const GUARD: usize = 4096;
    for dtype in [DType::F32, DType::BF16] {
        let (gg, a, b, bias, c_len) = case(
            GroupSplit::Rows,
            dtype,
            Tier::Scalar,
            (200, 96, 64, 4),
            &mut rng,
        );
        for (bad, clamped, group) in cases {
            let what = format!("{dtype} {bad:?}");
            assert_eq!(gpu.take_device_error(), Ok(()), "{what}: nothing pending");
            let want = on_cpu(&gg, &clamped, &a, &b, bias.as_ref(), c_len);
            let poison = HostBuf::poison(dtype, c_len + GUARD);
            let dev = Uploaded::new(&a, &b, bias.as_ref(), &poison);
            let d = offsets_on_device(&bad);
            let ends = || GroupOffsets::Device(d.at(0).cast_const().cast());
            // SAFETY: every buffer holds the whole call's span; synchronized below.
            unsafe { gpu.grouped_gemm(&gg, ends(), dev.pointers(), stream.handle()) }
                .unwrap_or_else(|e| panic!("{what}: the grouped kernel takes bad ends: {e}"));
            stream.sync();
            let mut got = poison.clone();
            dev.c.download_into(&mut got);
            assert!(
                part(&got, 0..c_len).bits() == want.bits(),
                "{what}: clamped ends"
            );
            assert!(
                part(&got, c_len..c_len + GUARD).bits() == part(&poison, 0..GUARD).bits(),
                "{what}: written past C"
            );
            match gpu.take_device_error() {
                Err(Error::BadOffsets { group: g, detail }) => {
                    assert_eq!(g, group, "{what}: {detail}");
                    assert!(detail.contains("on the device"), "{what}: {detail}");
                }
                other => panic!("{what}: no report of the bad end: {other:?}"),
            }
            assert_eq!(gpu.take_device_error(), Ok(()), "{what}: cleared");

            // Pending at the next grouped call: that call returns it and runs nothing.
            // SAFETY: as above.
            unsafe { gpu.grouped_gemm(&gg, ends(), dev.pointers(), stream.handle()) }
                .unwrap_or_else(|e| panic!("{what}: {e}"));
            stream.sync();
            let good = [50, 100, 100, 199];
            let refused = on_device_ends(&gpu, &stream, &gg, &good, (&a, &b, bias.as_ref()), c_len);
            assert!(
                matches!(&refused, Err(Error::BadOffsets { group: g, .. }) if *g == group),
                "{what}: the next call returns the report: {refused:?}"
            );

            // Replayed from a graph: the clamped bits, and the report with the replay.
            let dev = Uploaded::new(&a, &b, bias.as_ref(), &poison);
            // SAFETY: as above; the replay is synchronized.
            unsafe { run_captured(&gpu, &stream, &gg, ends(), dev.pointers()) }
                .unwrap_or_else(|e| panic!("{what}: captured: {e}"));
            let mut got = poison.clone();
            dev.c.download_into(&mut got);
            assert!(
                part(&got, 0..c_len).bits() == want.bits(),
                "{what}: replayed"
            );
            assert!(
                matches!(gpu.take_device_error(), Err(Error::BadOffsets { group: g, .. }) if g == group),
                "{what}: replayed"
            );
        }
    }
}

/// A reduction split on the scalar tier (the experts' weight gradient): random sizes, both
/// layouts of A and of B with padded leading dimensions, C with padded rows and batch entries
/// (the padding must keep its poison), an output mode of `variant` (overwrite in the inputs'
/// dtype, overwrite in f32, accumulate into f32), and a routing with empty groups and K past
/// the last end, or (`all_in_one`) one group holding all of K and the others empty.
fn scalar_reduction_case(
    dtype: DType,
    (a_k_contiguous, b_k_contiguous): (bool, bool),
    variant: usize,
    all_in_one: bool,
    rng: &mut Rng,
) -> (GroupedGemm, Vec<i32>, HostBuf, HostBuf, HostBuf) {
    let (m, n, k) = (1 + rng.below(70), 1 + rng.below(90), 1 + rng.below(400));
    let groups = 1 + rng.below(9);
    let mut g = Gemm {
        batch: groups,
        tier: Tier::Scalar,
        ..Gemm::dense(m, n, k, dtype)
    };
    let pad = rng.below(3);
    let (a_ld, a_len) = if a_k_contiguous {
        g.a = Operand::row_major(dtype, k);
        (k + pad, m * (k + pad))
    } else {
        g.a = Operand::col_major(dtype, m);
        (m + pad, k * (m + pad))
    };
    g.a.ld = a_ld;
    let (b_ld, b_len) = if b_k_contiguous {
        g.b = Operand::col_major(dtype, k);
        (k + pad, n * (k + pad))
    } else {
        g.b = Operand::row_major(dtype, n);
        (n + pad, k * (n + pad))
    };
    g.b.ld = b_ld;
    let ldc = n + rng.below(3);
    let c_stride = (m - 1) * ldc + n + rng.below(5);
    g.c = Output {
        mode: match variant {
            0 => OutputMode::Overwrite(dtype),
            1 => OutputMode::Overwrite(DType::F32),
            _ => OutputMode::AccumulateF32,
        },
        ldc,
        batch_stride: c_stride,
    };
    let ends = if all_in_one {
        let owner = rng.below(groups);
        (0..groups)
            .map(|g| if g < owner { 0 } else { k as i32 })
            .collect()
    } else {
        let mut ends = routing(rng, groups, k);
        // An empty group first in every other case.
        if variant != 1 {
            ends[0] = 0;
        }
        ends
    };
    let a = HostBuf::random(dtype, a_len, rng);
    let b = HostBuf::random(dtype, b_len, rng);
    let c_len = (groups - 1) * c_stride + (m - 1) * ldc + n;
    let c0 = match g.c.mode {
        OutputMode::AccumulateF32 => HostBuf::random(DType::F32, c_len, rng),
        mode => HostBuf::poison(mode.dtype(), c_len),
    };
    let gg = GroupedGemm {
        split: GroupSplit::Reduction,
        gemm: g,
    };
    (gg, ends, a, b, c0)
}

/// Runs `gg` with host offsets `ends` (group by group: each group's dense scalar call) on
/// fresh buffers holding `a`, `b` and `c0`, and returns C.
fn group_by_group(
    gpu: &Engine,
    stream: &RawStream,
    gg: &GroupedGemm,
    ends: &[i32],
    (a, b): (&HostBuf, &HostBuf),
    c0: &HostBuf,
) -> HostBuf {
    let dev = Uploaded::new(a, b, None, c0);
    // SAFETY: every buffer holds the whole call's span; synchronized below.
    unsafe {
        gpu.grouped_gemm(
            gg,
            GroupOffsets::Host(ends),
            dev.pointers(),
            stream.handle(),
        )
    }
    .unwrap_or_else(|e| panic!("group by group: {e}"));
    stream.sync();
    let mut got = c0.clone();
    dev.c.download_into(&mut got);
    got
}

/// The scalar tier's grouped kernel for the reduction split (device offsets): every group's
/// C has the bits of the group-by-group form (host offsets: each group's dense scalar call
/// over its K range) and of the CPU, for every dtype, both layouts of A and of B, overwrite
/// (in the inputs' dtype and in f32) and accumulate, random routings with empty groups and
/// one group holding all of K; C's padding keeps its poison. The calls are captured in a
/// CUDA graph, which only the grouped kernel takes with device offsets (the group-by-group
/// path reads them back, which a capture refuses).
#[test]
#[ignore = "needs a CUDA GPU"]
fn the_scalar_grouped_reduction_kernel_gives_the_group_by_group_bits() {
    let Some(gpu) = gpu_engine() else { return };
    let stream = RawStream::new();
    let mut rng = Rng::new(53);
    for dtype in [DType::F32, DType::BF16, DType::F16] {
        for layouts in [(false, false), (false, true), (true, false), (true, true)] {
            for variant in 0..3 {
                for all_in_one in [false, true] {
                    let (gg, ends, a, b, c0) =
                        scalar_reduction_case(dtype, layouts, variant, all_in_one, &mut rng);
                    let g = gg.gemm;
                    let what = format!(
                        "{dtype} A, B k-contiguous {layouts:?} variant {variant} ({} x {} x {}, \
                         ends {ends:?})",
                        g.m, g.n, g.k
                    );
                    assert_eq!(gpu.take_device_error(), Ok(()), "{what}: nothing pending");
                    let dev = Uploaded::new(&a, &b, None, &c0);
                    let d_ends = offsets_on_device(&ends);
                    // SAFETY: every buffer holds the whole call's span and outlives the
                    // replay.
                    unsafe {
                        run_captured(
                            &gpu,
                            &stream,
                            &gg,
                            GroupOffsets::Device(d_ends.at(0).cast_const().cast()),
                            dev.pointers(),
                        )
                    }
                    .unwrap_or_else(|e| panic!("{what}: the grouped kernel must take it: {e}"));
                    let mut got = c0.clone();
                    dev.c.download_into(&mut got);
                    let want = group_by_group(&gpu, &stream, &gg, &ends, (&a, &b), &c0);
                    if let Some((i, x, y)) = first_difference(&got, &want) {
                        panic!("{what}: element {i}: {x:#x}, group by group {y:#x}");
                    }
                    let cpu = on_cpu_from(&gg, &ends, &a, &b, None, c0.clone());
                    assert!(got.bits() == cpu.bits(), "{what}: the CPU's bits");
                    assert_eq!(
                        gpu.take_device_error(),
                        Ok(()),
                        "{what}: good ends, no report"
                    );
                }
            }
        }
    }
}

/// The scalar grouped reduction kernel clamps bad device ends as the rows kernel does (a
/// group ends no earlier than the previous group's clamped end and no later than K: the
/// group-by-group bits for the clamped ends), writes nothing outside C (a guard after it
/// keeps its poison), and reports the first bad end once it has run: after a synchronize
/// `take_device_error` returns it and clears it, and a grouped call made while it is
/// pending returns it without running. Ends that decrease, lie past K, or are negative, in
/// both output modes; run directly and replayed from a graph.
#[test]
#[ignore = "needs a CUDA GPU"]
fn the_scalar_grouped_reduction_kernel_clamps_and_reports_bad_device_offsets() {
    let Some(gpu) = gpu_engine() else { return };
    let stream = RawStream::new();
    let mut rng = Rng::new(59);
    // (bad ends, the ends the kernel runs with, the first bad group), for K = 320.
    let cases: [([i32; 4], [i32; 4], usize); 6] = [
        ([100, 50, 80, 300], [100, 100, 100, 300], 1),
        ([100, 200, 1 << 30, 250], [100, 200, 320, 320], 2),
        ([-5, 100, 200, 320], [0, 100, 200, 320], 0),
        ([100, 200, 300, 250], [100, 200, 300, 300], 3),
        ([300, 100, 200, 310], [300, 300, 300, 310], 1),
        ([100, 400, 150, 330], [100, 320, 320, 320], 1),
    ];
    const GUARD: usize = 4096;
    for (dtype, mode) in [
        (DType::F32, OutputMode::Overwrite(DType::F32)),
        (DType::BF16, OutputMode::Overwrite(DType::BF16)),
        (DType::F16, OutputMode::AccumulateF32),
    ] {
        let (mut gg, a, b, _, c_len) = case(
            GroupSplit::Reduction,
            dtype,
            Tier::Scalar,
            (48, 96, 320, 4),
            &mut rng,
        );
        gg.gemm.c.mode = mode;
        let c0 = match mode {
            OutputMode::AccumulateF32 => HostBuf::random(DType::F32, c_len + GUARD, &mut rng),
            mode => HostBuf::poison(mode.dtype(), c_len + GUARD),
        };
        for (bad, clamped, group) in cases {
            let what = format!("{dtype} {mode:?} {bad:?}");
            assert_eq!(gpu.take_device_error(), Ok(()), "{what}: nothing pending");
            let want = group_by_group(&gpu, &stream, &gg, &clamped, (&a, &b), &c0);
            let cpu = on_cpu_from(&gg, &clamped, &a, &b, None, part(&c0, 0..c_len));
            assert!(
                part(&want, 0..c_len).bits() == cpu.bits(),
                "{what}: group by group, the CPU's bits"
            );
            let dev = Uploaded::new(&a, &b, None, &c0);
            let d = offsets_on_device(&bad);
            let ends = || GroupOffsets::Device(d.at(0).cast_const().cast());
            // SAFETY: every buffer holds the whole call's span; synchronized below.
            unsafe { gpu.grouped_gemm(&gg, ends(), dev.pointers(), stream.handle()) }
                .unwrap_or_else(|e| panic!("{what}: the grouped kernel takes bad ends: {e}"));
            stream.sync();
            let mut got = c0.clone();
            dev.c.download_into(&mut got);
            // The whole buffer: C for the clamped ends, the guard after it untouched.
            if let Some((i, x, y)) = first_difference(&got, &want) {
                panic!("{what}: element {i} (C has {c_len}): {x:#x}, group by group {y:#x}");
            }
            match gpu.take_device_error() {
                Err(Error::BadOffsets { group: g, detail }) => {
                    assert_eq!(g, group, "{what}: {detail}");
                    assert!(detail.contains("on the device"), "{what}: {detail}");
                }
                other => panic!("{what}: no report of the bad end: {other:?}"),
            }
            assert_eq!(gpu.take_device_error(), Ok(()), "{what}: cleared");

            // Pending at the next grouped call: that call returns it and runs nothing.
            // SAFETY: as above.
            unsafe { gpu.grouped_gemm(&gg, ends(), dev.pointers(), stream.handle()) }
                .unwrap_or_else(|e| panic!("{what}: {e}"));
            stream.sync();
            let good = [50, 100, 100, 319];
            let refused = on_device_ends(&gpu, &stream, &gg, &good, (&a, &b, None), c_len);
            assert!(
                matches!(&refused, Err(Error::BadOffsets { group: g, .. }) if *g == group),
                "{what}: the next call returns the report: {refused:?}"
            );

            // Replayed from a graph: the clamped bits, and the report with the replay.
            let dev = Uploaded::new(&a, &b, None, &c0);
            // SAFETY: as above; the replay is synchronized.
            unsafe { run_captured(&gpu, &stream, &gg, ends(), dev.pointers()) }
                .unwrap_or_else(|e| panic!("{what}: captured: {e}"));
            let mut got = c0.clone();
            dev.c.download_into(&mut got);
            assert!(got.bits() == want.bits(), "{what}: replayed");
            assert!(
                matches!(gpu.take_device_error(), Err(Error::BadOffsets { group: g, .. }) if g == group),
                "{what}: replayed"
            );
        }
    }
}

// Grouped calls past 2³¹ elements.
//
// The grouped kernels (`plan` in host/src/cuda/grouped.rs) take a call whose extents fit a
// copy-engine coordinate (M, N, K and the groups each below 2³¹), whose strides are under
// 2⁴⁰ bytes and whose tiles count in 32 bits; elsewhere the call runs group by group. The
// offsets are i32, so no group ends past 2³¹ − 1 in any case: a rows split of more than 2³¹
// rows (the kernels' ExtentTooLarge) would be 2³¹ rows past the last group, over 32 GB of A
// and as much of C at the smallest aligned K and N, beyond what these tests allocate. What
// passes 2³¹ here is elements, in A, B and C: an index kept in 32 bits, signed (2³¹) or not
// (2³²), would read or write the wrong element there. Each call runs on both paths, the
// grouped kernel (proved by a CUDA graph capture with device offsets, which only it takes)
// and group by group on the mma.sync kernels (`TcPath::Portable`, which reads the offsets
// back: a capture refuses it), and each is compared bit for bit with dense calls of the
// same rows (rows split) or reduction ranges (reduction split) on the same buffers.

/// Elements of the random pool a large operand repeats: odd, so two addresses 2³¹ or 2³²
/// elements apart hold different values.
const POOL: usize = (1 << 24) + 3;

/// A device buffer of `len` random `dtype` elements: a pool of [`POOL`] uploaded once and
/// repeated by copies on the device (host generation and upload of 9 GB would take most of
/// a minute).
fn periodic(dtype: DType, len: usize, rng: &mut Rng) -> DeviceBuf {
    let pool = DeviceBuf::upload(&HostBuf::random(dtype, POOL.min(len), rng));
    let d = DeviceBuf::alloc(len * dtype.size());
    let total = d.bytes;
    let mut filled = pool.bytes.min(total);
    // SAFETY: both buffers hold the copied ranges; the source and destination of each copy
    // are disjoint (the doubling copies `filled` bytes from the start to right after them).
    unsafe {
        result::memcpy_dtod_sync(d.ptr, pool.ptr, filled).expect("cuMemcpyDtoD");
        while filled < total {
            let len = filled.min(total - filled);
            result::memcpy_dtod_sync(d.ptr + filled as u64, d.ptr, len).expect("cuMemcpyDtoD");
            filled += len;
        }
    }
    // The tests' streams are non-blocking: let the copies land before a kernel reads them.
    result::ctx::synchronize().expect("cuCtxSynchronize");
    d
}

/// A device buffer of `bytes` holding the poison pattern of [`HostBuf::poison`] (all ones).
fn poisoned(bytes: usize) -> DeviceBuf {
    let d = DeviceBuf::alloc(bytes);
    // SAFETY: the whole allocation just made.
    unsafe { result::memset_d8_sync(d.ptr, 0xFF, bytes) }.expect("cuMemsetD8");
    result::ctx::synchronize().expect("cuCtxSynchronize");
    d
}

/// `len` elements of `dtype` of `buf` from element `start` on.
fn download(buf: &DeviceBuf, dtype: DType, start: usize, len: usize) -> HostBuf {
    let mut h = HostBuf::poison(dtype, len);
    buf.download_range(start * dtype.size(), &mut h);
    h
}

/// `h[range]`.
fn part(h: &HostBuf, range: std::ops::Range<usize>) -> HostBuf {
    match h {
        HostBuf::F32(v) => HostBuf::F32(v[range].to_vec()),
        HostBuf::BF16(v) => HostBuf::BF16(v[range].to_vec()),
        HostBuf::F16(v) => HostBuf::F16(v[range].to_vec()),
    }
}

/// The dense call of group `group` over `start..end` of the split dimension (a part of the
/// group: the contract holds row by row) on the grouped call's buffers `p`, into a C of its
/// own that starts as `c0`: what that part of the grouped call's C must hold.
fn dense_alone(
    gpu: &Engine,
    stream: &RawStream,
    gg: &GroupedGemm,
    p: &GemmPointers,
    (group, start, end): (usize, usize, usize),
    c0: &HostBuf,
) -> HostBuf {
    let call = gg.group(group, start, end);
    let g = call.gemm;
    let at = |ptr: *const std::ffi::c_void, elems: usize, size: usize| {
        ptr.cast::<u8>().wrapping_add(elems * size).cast()
    };
    let c = DeviceBuf::upload(c0);
    let q = GemmPointers {
        a: at(p.a, call.a, g.a.dtype.size()),
        b: at(p.b, call.b, g.b.dtype.size()),
        bias: g
            .bias
            .map_or(std::ptr::null(), |d| at(p.bias, call.bias, d.size())),
        c: c.at(0),
    };
    // SAFETY: the group's spans lie inside the grouped call's buffers; C is this call's own
    // buffer, sized by the caller for the dense call; synchronized below.
    unsafe { gpu.gemm(&g, q, stream.handle()) }
        .unwrap_or_else(|e| panic!("dense call of group {group}, {start}..{end}: {e}"));
    stream.sync();
    let mut got = c0.clone();
    c.download_into(&mut got);
    got
}

/// The group of each index `i < ends.last()`.
fn group_of(ends: &[i32], i: usize) -> usize {
    ends.partition_point(|&e| e as usize <= i)
}

/// The engines of the two paths: the planner's choice (the grouped kernel where it takes
/// the call) and the mma.sync kernels only (group by group), whatever
/// `SGEMM_BI_FORCE_TC_PATH` says. `None` (skipped) without a GPU, or off sm_90, where
/// there is no grouped kernel to test.
fn two_paths() -> Option<(Engine, Engine)> {
    let gpu = gpu_engine()?;
    if gpu.compute_capability() != Some((9, 0)) || !gpu.supports(Tier::TensorCores) {
        eprintln!("skipped: the grouped kernels run on sm_90 only");
        return None;
    }
    let auto = Engine::with_tc_path(Device::Cuda(0), TcPath::Auto).unwrap();
    let portable = Engine::with_tc_path(Device::Cuda(0), TcPath::Portable).unwrap();
    Some((auto, portable))
}

/// Runs `gg` with the device offsets `d_ends` on both paths, into `c_kernel` and
/// `c_grouped` (which hold the same initial C), asserting which path each took.
fn on_both_paths(
    (auto, portable): (&Engine, &Engine),
    stream: &RawStream,
    gg: &GroupedGemm,
    d_ends: &DeviceBuf,
    p: GemmPointers,
    c_grouped: &DeviceBuf,
) {
    let what = format!("{} split {}", gg.split, gg.gemm.c.mode.dtype());
    let ends = || GroupOffsets::Device(d_ends.at(0).cast_const().cast());
    // SAFETY (both calls): the buffers hold the whole call's spans and outlive the runs,
    // which are synchronized before returning.
    unsafe { run_captured(auto, stream, gg, ends(), p) }.unwrap_or_else(|e| {
        panic!("{what}: the grouped kernel must take this call (a capture with device offsets runs only there): {e}")
    });
    let q = GemmPointers {
        c: c_grouped.at(0),
        ..p
    };
    let refused = unsafe { run_captured(portable, stream, gg, ends(), q) };
    assert!(
        matches!(refused, Err(Error::Unsupported(_))),
        "{what}: the mma.sync path must run group by group, reading the offsets back \
         (which a capture refuses): {refused:?}"
    );
    // SAFETY: as above.
    unsafe { portable.grouped_gemm(gg, ends(), q, stream.handle()) }
        .unwrap_or_else(|e| panic!("{what}, group by group: {e}"));
    stream.sync();
}

/// A rows split (the experts' forward, torch's [E, N, K] weights) of 1.1 M rows × K = 4096:
/// A has 4.5·10⁹ elements (past 2³¹ and 2³²), C 3.9·10⁹ (past 2³¹, in the middle of a row);
/// eight groups, one empty, one of a single row, three across those boundaries, and rows
/// past the last group (written +0.0). The grouped kernel and the group-by-group path
/// against dense calls of each group's first and last rows, the rows around each boundary
/// and random single rows. About 25 GB of device memory.
#[test]
#[ignore = "needs a CUDA GPU"]
fn a_rows_split_past_two_to_the_31_elements() {
    let Some((auto, portable)) = two_paths() else {
        return;
    };
    let stream = RawStream::new();
    let mut rng = Rng::new(0x6a05);
    let dtype = DType::BF16;
    let (m, n, k) = (1_100_037usize, 3584usize, 4096usize);
    let ends: [i32; 8] = [
        100_003, 100_003, 500_000, 560_001, 620_000, 620_001, 1_060_000, 1_100_032,
    ];
    let groups = ends.len();
    // The rows where A's and C's element index passes 2³¹ or 2³² (C's 2³¹ mid-row).
    let boundaries = [
        (1usize << 31) / k,
        (1usize << 32) / k,
        (1usize << 31) / n,
        (1usize << 31) / n + 1,
    ];
    assert!(m * k > 1 << 32 && m * n > 1 << 31 && boundaries.iter().all(|&b| b < m));
    let gg = GroupedGemm {
        split: GroupSplit::Rows,
        gemm: Gemm {
            batch: groups,
            b: Operand::col_major(dtype, k).with_batch_stride(k * n),
            bias: Some(DType::F32),
            tier: Tier::TensorCores,
            ..Gemm::dense(m, n, k, dtype)
        },
    };
    let a = periodic(dtype, m * k, &mut rng);
    let b = periodic(dtype, groups * k * n, &mut rng);
    let bias = DeviceBuf::upload(&HostBuf::random(DType::F32, groups * n, &mut rng));
    let c_kernel = poisoned(m * n * dtype.size());
    let c_grouped = poisoned(m * n * dtype.size());
    let p = GemmPointers {
        a: a.at(0),
        b: b.at(0),
        bias: bias.at(0),
        c: c_kernel.at(0),
    };
    let d_ends = offsets_on_device(&ends);
    let t = std::time::Instant::now();
    on_both_paths((&auto, &portable), &stream, &gg, &d_ends, p, &c_grouped);
    println!(
        "rows split, {m} × {k} → {n}: both paths in {:.1} s",
        t.elapsed().as_secs_f64()
    );

    // Windows of rows, each inside one group: (group, first row, end).
    const WINDOW: usize = 200;
    let mut windows = Vec::new();
    let mut start = 0;
    for (g, &end) in ends.iter().enumerate() {
        let end = end as usize;
        if end > start {
            windows.push((g, start, end.min(start + WINDOW)));
            windows.push((g, end.saturating_sub(WINDOW).max(start), end));
        }
        for &row in &boundaries {
            if (start..end).contains(&row) {
                let r0 = row.saturating_sub(WINDOW / 2).max(start);
                windows.push((g, r0, (row + WINDOW / 2).min(end)));
            }
        }
        start = end;
    }
    let last = *ends.last().unwrap() as usize;
    for _ in 0..24 {
        let row = rng.below(last);
        windows.push((group_of(&ends, row), row, row + 1));
    }
    for &(g, r0, r1) in &windows {
        let want = dense_alone(
            &auto,
            &stream,
            &gg,
            &p,
            (g, r0, r1),
            &HostBuf::poison(dtype, (r1 - r0) * n),
        );
        for (path, c) in [
            ("grouped kernel", &c_kernel),
            ("group by group", &c_grouped),
        ] {
            let got = download(c, dtype, r0 * n, (r1 - r0) * n);
            if let Some((i, w, o)) = first_difference(&want, &got) {
                panic!(
                    "rows split, {path}: group {g}, row {} column {}: dense {w:#x}, grouped {o:#x}",
                    r0 + i / n,
                    i % n
                );
            }
        }
    }
    // Rows past the last group: +0.0.
    for (path, c) in [
        ("grouped kernel", &c_kernel),
        ("group by group", &c_grouped),
    ] {
        let rest = download(c, dtype, last * n, (m - last) * n);
        assert!(
            rest.bits().iter().all(|&x| x == 0),
            "rows split, {path}: the rows past the last group are not +0.0"
        );
    }
    println!(
        "rows split past 2^31 elements: {} windows of rows identical to their dense calls on \
         both paths",
        windows.len()
    );
}

/// A reduction split (the experts' weight gradient, Xᵀ · dY) over 2.2 M tokens: A = Xᵀ
/// (column-major, 2048 × 2.2 M) has 4.5·10⁹ elements (past 2³¹ and 2³²), B = dY (row-major,
/// 2.2 M × 1536) 3.4·10⁹ (past 2³¹, in the middle of a row); eight groups, one empty, three
/// across those boundaries, and tokens past the last group (not read). Both output modes
/// (bf16 overwritten, f32 accumulated), the grouped kernel and the group-by-group path,
/// against the dense call of every group's reduction range. About 16 GB of device memory.
#[test]
#[ignore = "needs a CUDA GPU"]
fn a_reduction_split_past_two_to_the_31_elements() {
    let Some((auto, portable)) = two_paths() else {
        return;
    };
    let stream = RawStream::new();
    let mut rng = Rng::new(0x6a06);
    let dtype = DType::BF16;
    let (m, n, tokens) = (2048usize, 1536usize, 2_200_013usize);
    let ends: [i32; 8] = [
        300_001, 300_001, 1_000_000, 1_100_003, 1_400_000, 2_000_000, 2_100_000, 2_200_000,
    ];
    let groups = ends.len();
    assert!(tokens * m > 1 << 32 && tokens * n > 1 << 31);
    // Each boundary (A's 2³¹ and 2³², B's 2³¹) inside a group, not at its edge.
    for boundary in [(1usize << 31) / m, (1usize << 32) / m, (1usize << 31) / n] {
        let g = group_of(&ends, boundary);
        let start = if g == 0 { 0 } else { ends[g - 1] as usize };
        assert!(start < boundary && boundary + 1 < ends[g] as usize);
    }
    let a = periodic(dtype, tokens * m, &mut rng);
    let b = periodic(dtype, tokens * n, &mut rng);
    let d_ends = offsets_on_device(&ends);
    for mode in [OutputMode::Overwrite(dtype), OutputMode::AccumulateF32] {
        let out = mode.dtype();
        let gg = GroupedGemm {
            split: GroupSplit::Reduction,
            gemm: Gemm {
                batch: groups,
                a: Operand::col_major(dtype, m),
                c: Output {
                    mode,
                    ldc: n,
                    batch_stride: m * n,
                },
                tier: Tier::TensorCores,
                ..Gemm::dense(m, n, tokens, dtype)
            },
        };
        let c0 = match mode {
            OutputMode::AccumulateF32 => HostBuf::random(DType::F32, groups * m * n, &mut rng),
            _ => HostBuf::poison(out, groups * m * n),
        };
        let (c_kernel, c_grouped) = (DeviceBuf::upload(&c0), DeviceBuf::upload(&c0));
        let p = GemmPointers {
            a: a.at(0),
            b: b.at(0),
            bias: std::ptr::null(),
            c: c_kernel.at(0),
        };
        let t = std::time::Instant::now();
        on_both_paths((&auto, &portable), &stream, &gg, &d_ends, p, &c_grouped);
        println!(
            "reduction split, {m} × {tokens} → {n} ({out}): both paths in {:.1} s",
            t.elapsed().as_secs_f64()
        );
        let (mut got_kernel, mut got_grouped) = (c0.clone(), c0.clone());
        c_kernel.download_into(&mut got_kernel);
        c_grouped.download_into(&mut got_grouped);
        let mut start = 0;
        for (g, &end) in ends.iter().enumerate() {
            let end = end as usize;
            let range = g * m * n..(g + 1) * m * n;
            let want = dense_alone(
                &auto,
                &stream,
                &gg,
                &p,
                (g, start, end),
                &part(&c0, range.clone()),
            );
            for (path, got) in [
                ("grouped kernel", &got_kernel),
                ("group by group", &got_grouped),
            ] {
                if let Some((i, w, o)) = first_difference(&want, &part(got, range.clone())) {
                    panic!(
                        "reduction split ({out}), {path}: group {g} (tokens {start}..{end}), \
                         element ({}, {}): dense {w:#x}, grouped {o:#x}",
                        i / n,
                        i % n
                    );
                }
            }
            start = end;
        }
        println!(
            "reduction split past 2^31 elements ({out}): all {groups} groups identical to their \
             dense calls on both paths"
        );
    }
}
