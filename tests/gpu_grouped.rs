//! The grouped GEMM on the GPU: the CPU engine's bits for every split, tier and routing, with
//! the offsets on the host and on the device; a grouped call captured in a CUDA graph (host
//! offsets) replays the direct bits; device offsets inside a capture and bad device offsets
//! are clear errors that leave the context working, reported before anything runs where the
//! engine reads them back and after the grouped kernel has run where it reads them itself.
//! `#[ignore]`d: CI has no GPU; `bash .gpu/run` runs it.

mod gpu_support;

use gpu_support::{gpu_engine, DeviceBuf, HostBuf, RawStream, Rng};
use sgemm_bi::{
    DType, Engine, Error, Gemm, GemmPointers, GroupOffsets, GroupSplit, GroupedGemm, Operand,
    Output, OutputMode, Tier,
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

fn offsets_on_device(offsets: &[i32]) -> DeviceBuf {
    let host = HostBuf::F32(offsets.iter().map(|&o| f32::from_bits(o as u32)).collect());
    DeviceBuf::upload(&host)
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
    use cudarc::driver::sys;
    // Thread-local capture: a global one would also refuse the driver calls of the tests
    // that run beside this one. SAFETY: driver calls on a live stream; the buffers outlive
    // the replay, which is synchronized before C is read.
    unsafe {
        let mode = sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL;
        sys::cuStreamBeginCapture_v2(stream.0, mode)
            .result()
            .unwrap();
        let call = gpu.grouped_gemm(gg, offsets, dev.pointers(), stream.handle());
        let mut graph = std::ptr::null_mut();
        sys::cuStreamEndCapture(stream.0, &mut graph)
            .result()
            .unwrap();
        call?;
        let mut exec = std::ptr::null_mut();
        sys::cuGraphInstantiateWithFlags(&mut exec, graph, 0)
            .result()
            .unwrap();
        sys::cuGraphLaunch(exec, stream.0).result().unwrap();
        stream.sync();
        sys::cuGraphExecDestroy(exec).result().unwrap();
        sys::cuGraphDestroy(graph).result().unwrap();
    }
    let mut got = HostBuf::poison(gg.gemm.c.mode.dtype(), c_len);
    dev.c.download_into(&mut got);
    Ok(got)
}

/// The tensor-core tier's rows split with device offsets runs as one grouped kernel that
/// reads them: it captures and replays the CPU's bits, as host offsets do. Where the engine
/// must read device offsets back (the scalar tier), a capture is refused with a clear error.
#[test]
#[ignore = "needs a CUDA GPU"]
fn captured_grouped_calls_replay_their_bits_and_a_read_back_is_refused() {
    let Some(gpu) = gpu_engine() else { return };
    let stream = RawStream::new();
    let mut rng = Rng::new(5);
    for (dtype, tier) in [
        (DType::BF16, Tier::TensorCores),
        (DType::F16, Tier::TensorCores),
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
                .unwrap_or_else(|e| panic!("{dtype} device offsets {device}: {e}"));
            assert!(
                got.bits() == want.bits(),
                "{dtype} device offsets {device}: replay"
            );
        }
    }
    let (gg, a, b, bias, c_len) = case(
        GroupSplit::Rows,
        DType::F32,
        Tier::Scalar,
        (64, 32, 32, 4),
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
        (
            GroupSplit::Reduction,
            (64, 128, 320, 4),
            [100, 200, 150, 320],
            [100, 200, 200, 320],
            2,
        ),
        (
            GroupSplit::Reduction,
            (64, 128, 320, 4),
            [100, 200, 300, 1 << 30],
            [100, 200, 300, 320],
            3,
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

#[test]
#[ignore = "needs a CUDA GPU"]
fn bad_device_offsets_are_reported_before_anything_runs() {
    let Some(gpu) = gpu_engine() else { return };
    let stream = RawStream::new();
    let mut rng = Rng::new(9);
    let (gg, a, b, bias, c_len) = case(
        GroupSplit::Rows,
        DType::F32,
        Tier::Scalar,
        (64, 32, 32, 4),
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
