//! Soak (docs/reliability.md, item 8): many random-shape calls, every result checked.
//!
//! ```text
//! cargo run --release --example soak -- CALLS [--tier scalar|tensor_cores|both]
//!                                            [--threads T] [--seed S] [--max-fmas F]
//!                                            [--kernel-sweep]
//! ```
//!
//! On a GPU (device 0): the scalar tier's every result against the CPU backend bit for bit;
//! the tensor-core tier's (bf16/f16) against itself — the same call again on another stream
//! and engine, a random subset of its rows alone, of its columns alone, and each batch entry
//! alone must give the same bits (C1, C2), every element must be written and every NaN be
//! canonical. Without a GPU the same runs on the CPU backend, the scalar tier then checked
//! against the independent reference of the tests (`tests/common`; slower, so keep CALLS
//! and `--max-fmas` small), the tensor-core tier (the CPU backend's model of it) with the
//! same invariance checks as on a GPU.
//!
//! Shapes: dimensions from 0 to 2048 (tails, primes, tile edges), batches up to 4, both
//! layouts, padded leading dimensions, element offsets that break 16-byte alignment, every
//! bias and output mode; one call in ten with NaN, ±Inf, ±0 and subnormals planted. Threads
//! share the engines, each with its own streams. Prints the counts and exits 1 on any
//! mismatch.
//!
//! `--kernel-sweep` makes the first calls a fixed list (`kernel_sweep`, with
//! random data) that runs every GPU kernel entry point at least once on an H200, then goes
//! on with random calls up to CALLS (the whole list runs even when CALLS is smaller; the
//! number of sweep calls is printed). The same checks apply; without a GPU the sweep runs on
//! the CPU backend (about 12 s on two cores). It also allocates every device buffer at
//! exactly its data's size, for every call, so that an access past an operand's end leaves
//! its allocation. It is for running the soak under compute-sanitizer so that every kernel
//! is covered:
//!
//! ```text
//! for tool in memcheck racecheck initcheck synccheck; do
//!   compute-sanitizer --tool $tool --error-exitcode 1 .gpu/examples/soak 100 --kernel-sweep
//!   SGEMM_BI_FORCE_TC_PATH=portable \
//!     compute-sanitizer --tool $tool --error-exitcode 1 .gpu/examples/soak 100 --kernel-sweep
//! done
//! ```
//!
//! The planner's choice (no variable) runs the Hopper kernels on the aligned calls; the
//! mma.sync kernels with 16-byte loaders (`sgemm_bi_tc_*` without `_unaligned`) then only
//! see K = 0, so run the sweep a second time with `SGEMM_BI_FORCE_TC_PATH=portable` (read at
//! engine creation, host/src/cuda/mod.rs), which sends every tensor-core call to the
//! mma.sync kernels.

#[path = "../tests/common/mod.rs"]
mod common;
#[path = "../tests/gpu_support/mod.rs"]
mod gpu_support;
#[path = "../tests/common/specials.rs"]
mod specials;

use std::ffi::c_void;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use common::{reference, Buf, Rng, NARROW};
use cudarc::driver::result;
use gpu_support::{DeviceBuf, RawStream};
use sgemm_bi::{
    DType, Device, Engine, Gemm, GemmPointers, Layout, Operand, Output, OutputMode, Stream, Tier,
};

struct Args {
    calls: usize,
    tiers: Vec<Tier>,
    threads: usize,
    seed: u64,
    max_fmas: usize,
    kernel_sweep: bool,
}

fn args() -> Args {
    let usage = "usage: soak CALLS [--tier scalar|tensor_cores|both] [--threads T] [--seed S] \
                 [--max-fmas F] [--kernel-sweep]";
    let mut it = std::env::args().skip(1);
    let mut a = Args {
        calls: 0,
        tiers: vec![Tier::Scalar, Tier::TensorCores],
        threads: std::thread::available_parallelism().map_or(4, |n| n.get().min(8)),
        seed: 1,
        max_fmas: 1 << 22,
        kernel_sweep: false,
    };
    let mut calls = None;
    while let Some(arg) = it.next() {
        let mut value = |name: &str| {
            it.next()
                .unwrap_or_else(|| panic!("{name} needs a value; {usage}"))
        };
        match arg.as_str() {
            "--tier" => {
                a.tiers = match value("--tier").as_str() {
                    "scalar" => vec![Tier::Scalar],
                    "tensor_cores" => vec![Tier::TensorCores],
                    "both" => vec![Tier::Scalar, Tier::TensorCores],
                    t => panic!("unknown tier {t}; {usage}"),
                }
            }
            "--threads" => a.threads = value("--threads").parse().expect(usage),
            "--seed" => a.seed = value("--seed").parse().expect(usage),
            "--max-fmas" => a.max_fmas = value("--max-fmas").parse().expect(usage),
            "--kernel-sweep" => a.kernel_sweep = true,
            n if calls.is_none() => calls = Some(n.parse().expect(usage)),
            _ => panic!("{usage}"),
        }
    }
    a.calls = calls.expect(usage);
    a
}

/// The engines under test and where they run.
enum Target {
    Gpu { engines: Vec<Engine>, cpu: Engine },
    Cpu { engine: Engine },
}

/// One worker's device buffers (grown as needed) and streams.
#[derive(Default)]
struct Arena {
    bufs: Vec<Option<DeviceBuf>>,
    streams: Vec<RawStream>,
    /// Allocate each buffer at exactly the size of its data, for every call (instead of
    /// growing to powers of two), so that compute-sanitizer's memcheck sees any access past
    /// the end of an operand.
    exact: bool,
}

fn bytes(b: &Buf) -> &[u8] {
    // SAFETY: plain-old-data elements; the view covers exactly the buffer.
    unsafe { std::slice::from_raw_parts(b.as_ptr().cast(), b.len() * b.dtype().size()) }
}

impl Arena {
    /// A device buffer holding `h` in slot `slot` (copied on `stream`, ordered before the
    /// launch that follows on it).
    fn upload(&mut self, slot: usize, h: &Buf, stream: &RawStream) -> *mut c_void {
        if self.bufs.len() <= slot {
            self.bufs.resize_with(slot + 1, || None);
        }
        let need = bytes(h).len().max(1);
        let fits = |b: &DeviceBuf| b.bytes == need || (!self.exact && b.bytes > need);
        if !self.bufs[slot].as_ref().is_some_and(fits) {
            stream.sync();
            let size = if self.exact {
                need
            } else {
                need.next_power_of_two()
            };
            self.bufs[slot] = Some(DeviceBuf::alloc(size));
        }
        let d = self.bufs[slot].as_ref().unwrap();
        // SAFETY: `d` holds at least `need` bytes; the host buffer outlives the copy, which
        // the caller synchronizes before returning.
        unsafe { result::memcpy_htod_async(d.ptr, bytes(h), stream.0) }.expect("upload");
        d.at(0)
    }

    fn download(&self, slot: usize, into: &mut Buf, stream: &RawStream) {
        let d = self.bufs[slot].as_ref().unwrap();
        let len = into.len() * into.dtype().size();
        // SAFETY: as in `upload`; synchronized right after.
        let dst = unsafe { std::slice::from_raw_parts_mut(into.as_mut_ptr().cast::<u8>(), len) };
        unsafe { result::memcpy_dtoh_async(dst, d.ptr, stream.0) }.expect("download");
        stream.sync();
    }
}

/// One call's inputs. A and B start `a_off` / `b_off` elements into their buffers, so that
/// their addresses are not always 16-byte aligned.
struct Problem {
    g: Gemm,
    a: Buf,
    b: Buf,
    a_off: usize,
    b_off: usize,
    bias: Option<Buf>,
    c0: Buf,
}

/// Element offsets of a sub-call into A, B, the bias and C.
#[derive(Clone, Copy, Default)]
struct Offsets {
    a: usize,
    b: usize,
    bias: usize,
    c: usize,
}

fn span(op: &Operand, rows: usize, cols: usize, batch: usize) -> usize {
    common::span(op.layout, op.ld, rows, cols, batch, op.batch_stride)
}

const SPECIAL_DIMS: [usize; 20] = [
    1, 2, 3, 7, 8, 15, 16, 17, 31, 32, 33, 63, 64, 65, 127, 128, 129, 255, 256, 257,
];

/// How far a leading dimension or batch stride goes beyond the least valid one.
#[derive(Clone, Copy, Debug)]
enum Pad {
    /// Up to the next multiple of 8 elements (16 bytes of bf16 or f16: what the tensor cores'
    /// 16-byte loaders and the Hopper path's copy engine need).
    To8,
    /// This many elements more.
    By(usize),
}

impl Pad {
    fn apply(self, least: usize) -> usize {
        match self {
            Pad::To8 => least.next_multiple_of(8),
            Pad::By(more) => least + more,
        }
    }
}

/// What one problem is made of: drawn by `random_problem`, listed by `kernel_sweep`;
/// `make_problem` turns it into a descriptor and data.
#[derive(Clone, Copy, Debug)]
struct Choice {
    tier: Tier,
    dtype: DType,
    /// M, N, K and the batch count.
    dims: (usize, usize, usize, usize),
    /// The layouts of A and B.
    layouts: (Layout, Layout),
    /// Leading dimensions of A and B, from the least.
    lds: (Pad, Pad),
    /// Batch strides (batch > 1) of A, B and C, from one entry's span; `None` for B: one B
    /// shared by every entry (stride 0).
    strides: (Pad, Option<Pad>, Pad),
    /// C's leading dimension, from N.
    ldc: Pad,
    mode: OutputMode,
    bias: Option<DType>,
    /// Elements into their buffers at which A and B start, so that their addresses are not
    /// always 16-byte aligned.
    offsets: (usize, usize),
}

impl Choice {
    fn gemm(&self) -> Gemm {
        let (m, n, k, batch) = self.dims;
        let op = |layout, pad: Pad, rows, cols| Operand {
            dtype: self.dtype,
            layout,
            ld: pad.apply(common::min_ld(layout, rows, cols)),
            batch_stride: 0,
        };
        let mut a = op(self.layouts.0, self.lds.0, m, k);
        let mut b = op(self.layouts.1, self.lds.1, k, n);
        let ldc = self.ldc.apply(n.max(1));
        let mut c = Output {
            mode: self.mode,
            ldc,
            batch_stride: 0,
        };
        if batch > 1 {
            let (sa, sb, sc) = self.strides;
            a.batch_stride = sa.apply(span(&a, m, k, 1));
            b.batch_stride = sb.map_or(0, |s| s.apply(span(&b, k, n, 1)));
            c.batch_stride = sc.apply(common::one_span(Layout::RowMajor, ldc, m, n));
        }
        Gemm {
            m,
            n,
            k,
            batch,
            a,
            b,
            bias: self.bias,
            c,
            tier: self.tier,
        }
    }
}

fn random_problem(rng: &mut Rng, tier: Tier, max_fmas: usize) -> Problem {
    loop {
        let dim = |rng: &mut Rng| match rng.below(100) {
            0..=1 => 0,
            2..=21 => rng.pick(&SPECIAL_DIMS),
            22..=29 => 257 + rng.below(1792),
            _ => 1 + rng.below(256),
        };
        let (m, n, k) = (dim(rng), dim(rng), dim(rng));
        let batch = [1, 1, 1, 1, 1, 2, 3, 4][rng.below(8)];
        if m * n * k.max(1) * batch > max_fmas {
            continue;
        }
        let dtype = match tier {
            Tier::Scalar | Tier::Auto => rng.pick(&[DType::F32, DType::BF16, DType::F16]),
            Tier::TensorCores => rng.pick(&[DType::BF16, DType::F16]),
        };
        // Leading dimensions: multiples of 8 half the time (the tensor cores' 16-byte
        // loaders and the Hopper path), any padding otherwise.
        let op = |rng: &mut Rng| {
            let layout = rng.pick(&[Layout::RowMajor, Layout::ColMajor]);
            let pad = if rng.bool() {
                Pad::To8
            } else {
                Pad::By(rng.below(10))
            };
            (layout, pad)
        };
        let ((la, pa), (lb, pb)) = (op(rng), op(rng));
        let (sa, sb) = if batch > 1 {
            let sa = Pad::By(rng.below(9));
            let sb = if rng.below(4) == 0 {
                None
            } else {
                Some(Pad::By(rng.below(9)))
            };
            (sa, sb)
        } else {
            (Pad::By(0), None)
        };
        let mode = match rng.below(5) {
            0 => OutputMode::AccumulateF32,
            1 => OutputMode::Overwrite(DType::F32),
            _ => OutputMode::Overwrite(dtype),
        };
        let ldc = Pad::By([0, 0, 1, 8][rng.below(4)]);
        let sc = Pad::By(if batch > 1 { rng.below(5) } else { 0 });
        let bias = [None, Some(DType::F32), Some(dtype)][rng.below(3)];
        // A and B start a random number of elements into their buffers: alignment varies.
        let offsets = (rng.below(8), rng.below(8));
        let choice = Choice {
            tier,
            dtype,
            dims: (m, n, k, batch),
            layouts: (la, lb),
            lds: (pa, pb),
            strides: (sa, sb, sc),
            ldc,
            mode,
            bias,
            offsets,
        };
        return make_problem(rng, &choice);
    }
}

/// The descriptor and data of `choice`: random inputs, one call in ten with special values
/// planted, C poisoned (overwrite) or random (accumulate).
fn make_problem(rng: &mut Rng, choice: &Choice) -> Problem {
    let g = choice.gemm();
    let dtype = choice.dtype;
    let ext = sgemm_bi::validate::check(&g).expect("soak descriptors are valid");
    let (pa, pb) = choice.offsets;
    let mut a_buf = Buf::random(dtype, pa + ext.a.max(1), rng, NARROW);
    let mut b_buf = Buf::random(dtype, pb + ext.b.max(1), rng, NARROW);
    let mut bias_buf = g.bias.map(|d| Buf::random(d, g.n.max(1), rng, NARROW));
    if rng.below(10) == 0 {
        let plant = rng.pick(&specials::PLANTS);
        for buf in [Some(&mut a_buf), Some(&mut b_buf), bias_buf.as_mut()]
            .into_iter()
            .flatten()
        {
            let dtype = buf.dtype();
            for i in 0..buf.len() {
                if let Some(bits) = specials::planted(plant, dtype, || rng.next_u64()) {
                    buf.set_bits(i, bits);
                }
            }
        }
    }
    let c0 = match g.c.mode {
        OutputMode::AccumulateF32 => Buf::random(DType::F32, ext.c.max(1), rng, NARROW),
        OutputMode::Overwrite(d) => Buf::sentinel(d, ext.c.max(1)),
    };
    Problem {
        g,
        a: a_buf,
        b: b_buf,
        a_off: pa,
        b_off: pb,
        bias: bias_buf,
        c0,
    }
}

/// The tensor-core shapes of the kernel sweep (M, N, K, batch; K with tails of the 64-deep
/// Hopper stages and of the 16-deep MMA steps), each with the Hopper entry point the planner
/// picks for it on a GPU of 132 SMs (H200; `tile_m`, `tile_n` and `cluster_size` in
/// host/src/cuda/hopper.rs: recheck these when the planner changes). Every one runs with
/// both dtypes and all four layout pairs, aligned (offset 0, leading dimensions and batch
/// strides of A, B and C and N multiples of 8), so that the Hopper path can take it; with
/// `SGEMM_BI_FORCE_TC_PATH=portable` the same calls run the mma.sync kernels with the
/// 16-byte loaders (`sgemm_bi_tc_*`).
const SWEEP_TC_SHAPES: [(usize, usize, usize, usize); 9] = [
    // 132 tiles of 128 × 256, one round on 132 SMs (narrower tiles take two rounds or more),
    // in twelve tile rows: `_n256_x2` (clusters of two).
    (1500, 2800, 100, 1),
    // The same in one tile row, over twelve batch entries sharing B: `_n256`.
    (120, 2800, 72, 12),
    // 192 tiles of 128 × 192, two rounds (144 of 256 also take two, 276 of 128 three):
    // `_n192`.
    (1500, 2900, 72, 1),
    // 128 tiles of 128 × 128, one round (256 tiles of 128 × 64 take two): `_n128`.
    (1000, 2000, 72, 1),
    // 128 tiles of 128 × 64, one round, too many for 64-row tiles: `_n64`.
    (1000, 1000, 100, 1),
    // 10 tiles at width 64, under half the SMs: 64-row tiles, `_n64_m64`.
    (200, 304, 100, 1),
    // M ≤ 32, 16 and 8: `_n64_m32`, `_n64_m16` and `_n64_m8` for a row-major A,
    // `_n64_m64` for a column-major one.
    (30, 304, 72, 1),
    (13, 304, 100, 1),
    (5, 304, 72, 1),
];

/// The fixed problems of `--kernel-sweep`, chosen so that every GPU entry point
/// (kernels-gpu/src/entry.rs) runs at least once on an H200: the Hopper entries through
/// `SWEEP_TC_SHAPES`, the mma.sync entries with the element-wise loaders
/// (`sgemm_bi_tc_*_unaligned`) through A one element off its 16-byte alignment, those with
/// the 16-byte loaders (`sgemm_bi_tc_*`) through K = 0 (which the Hopper path leaves to them;
/// their main loop runs only under `SGEMM_BI_FORCE_TC_PATH=portable`), and the twenty-four
/// scalar entries (both tile widths). Every output mode and bias kind occurs; one call more
/// is a batch of two.
fn kernel_sweep(tiers: &[Tier]) -> Vec<Choice> {
    const LAYOUT_PAIRS: [(Layout, Layout); 4] = [
        (Layout::RowMajor, Layout::RowMajor),
        (Layout::RowMajor, Layout::ColMajor),
        (Layout::ColMajor, Layout::RowMajor),
        (Layout::ColMajor, Layout::ColMajor),
    ];
    let aligned = |tier, dtype, dims: (usize, usize, usize, usize), layouts| Choice {
        tier,
        dtype,
        dims,
        layouts,
        lds: (Pad::To8, Pad::To8),
        // The batch of twelve shares B (a one-entry map); the batch of two does not. C's rows
        // and batch entries in whole 16 bytes too: the Hopper epilogue's copy engine needs
        // them.
        strides: (Pad::To8, (dims.3 == 2).then_some(Pad::To8), Pad::To8),
        ldc: Pad::To8,
        mode: OutputMode::Overwrite(dtype),
        bias: None,
        offsets: (0, 0),
    };
    let mut sweep = Vec::new();
    if tiers.contains(&Tier::TensorCores) {
        for dtype in [DType::BF16, DType::F16] {
            for layouts in LAYOUT_PAIRS {
                let tc = |dims| aligned(Tier::TensorCores, dtype, dims, layouts);
                sweep.extend(SWEEP_TC_SHAPES.map(tc));
                sweep.push(Choice {
                    offsets: (1, 0),
                    ..tc((130, 70, 90, 1))
                });
                sweep.push(tc((130, 70, 0, 1)));
            }
        }
        sweep.push(aligned(
            Tier::TensorCores,
            DType::BF16,
            (200, 304, 100, 2),
            LAYOUT_PAIRS[0],
        ));
    }
    if tiers.contains(&Tier::Scalar) {
        for dtype in [DType::F32, DType::BF16, DType::F16] {
            for layouts in LAYOUT_PAIRS {
                // 128 × 64 tiles, element-wise loads (odd leading dimensions).
                sweep.push(Choice {
                    lds: (Pad::By(1), Pad::By(3)),
                    ..aligned(Tier::Scalar, dtype, (130, 70, 90, 1), layouts)
                });
                // 128 × 128 tiles (264 of them: one full wave of an H200, where 128 × 64
                // tiles would take two), vector loads; K = 41 is five whole K tiles of 8
                // (read through the mainloop's cursors) and a partial one.
                sweep.push(aligned(Tier::Scalar, dtype, (1536, 2816, 41, 1), layouts));
                // A call split between the widths (an H200: columns 0..2048 in 128 × 128
                // tiles, the rest in 128 × 64 tiles, a second launch from column 2048;
                // those have two whole K tiles of 16 and a partial one).
                sweep.push(aligned(Tier::Scalar, dtype, (2048, 3072, 41, 1), layouts));
            }
        }
    }
    // Output modes and bias kinds in turn: every combination occurs on each tier.
    for (i, c) in sweep.iter_mut().enumerate() {
        c.mode = [
            OutputMode::Overwrite(c.dtype),
            OutputMode::Overwrite(DType::F32),
            OutputMode::AccumulateF32,
        ][i % 3];
        c.bias = [None, Some(DType::F32), Some(c.dtype)][i / 3 % 3];
    }
    sweep
}

/// The elements of `b` from `start` on, as a buffer of their own.
fn part(b: &Buf, start: usize) -> Buf {
    let mut out = Buf::filled(b.dtype(), b.len() - start, 0);
    for i in start..b.len() {
        out.set_bits(i - start, b.bits(i));
    }
    out
}

/// Runs `g` (possibly a sub-call, at `off`) on `p`'s inputs; returns C.
fn run(
    target: &Target,
    arena: &mut Arena,
    which: usize,
    p: &Problem,
    g: &Gemm,
    off: Offsets,
) -> Buf {
    let mut c = p.c0.clone();
    match target {
        Target::Cpu { engine } => {
            let at =
                |b: &Buf, o: usize| (b.as_ptr() as usize + o * b.dtype().size()) as *const c_void;
            let ptrs = GemmPointers {
                a: at(&p.a, p.a_off + off.a),
                b: at(&p.b, p.b_off + off.b),
                bias: p
                    .bias
                    .as_ref()
                    .map_or(std::ptr::null(), |x| at(x, off.bias)),
                c: (c.as_mut_ptr() as usize + off.c * c.dtype().size()) as *mut c_void,
            };
            // SAFETY: every span of the (sub-)call lies inside the host buffers, which are
            // this thread's own; C overlaps no input.
            unsafe { engine.gemm(g, ptrs, Stream::DEFAULT) }.expect("CPU call");
        }
        Target::Gpu { engines, .. } => {
            let engine = &engines[which % engines.len()];
            if arena.streams.len() < 2 {
                arena.streams = vec![RawStream::new(), RawStream::new()];
            }
            let streams = std::mem::take(&mut arena.streams);
            let stream = &streams[which % 2];
            let byte = |b: &Buf, o: usize| o * b.dtype().size();
            let pa = arena.upload(0, &p.a, stream) as usize + byte(&p.a, p.a_off + off.a);
            let pb = arena.upload(1, &p.b, stream) as usize + byte(&p.b, p.b_off + off.b);
            let pbias = p.bias.as_ref().map_or(0, |x| {
                arena.upload(2, x, stream) as usize + byte(x, off.bias)
            });
            let pc = arena.upload(3, &p.c0, stream) as usize + byte(&c, off.c);
            let ptrs = GemmPointers {
                a: pa as *const c_void,
                b: pb as *const c_void,
                bias: pbias as *const c_void,
                c: pc as *mut c_void,
            };
            // SAFETY: every span lies inside the uploaded buffers, which live in the arena
            // until the download below has synchronized the stream.
            unsafe { engine.gemm(g, ptrs, stream.handle()) }.expect("GPU call");
            arena.download(3, &mut c, stream);
            arena.streams = streams;
        }
    }
    c
}

/// Element indices of C that the call `g` at C offset `c_off` writes.
fn written(g: &Gemm, c_off: usize) -> impl Iterator<Item = usize> + '_ {
    (0..g.batch).flat_map(move |bt| {
        (0..g.m).flat_map(move |i| {
            (0..g.n).map(move |j| c_off + bt * g.c.batch_stride + i * g.c.ldc + j)
        })
    })
}

#[derive(Default)]
struct Tally {
    calls: AtomicUsize,
    outputs: AtomicUsize,
    checks: AtomicUsize,
    mismatches: AtomicUsize,
}

fn report(first: &Mutex<Vec<String>>, tally: &Tally, msg: String) {
    tally.mismatches.fetch_add(1, Ordering::Relaxed);
    let mut f = first.lock().unwrap();
    if f.len() < 10 {
        eprintln!("MISMATCH: {msg}");
        f.push(msg);
    }
}

/// Compares `got` with `want` on the elements `idx`; returns the first differing one.
fn differ(got: &Buf, want: &Buf, idx: impl Iterator<Item = usize>) -> Option<usize> {
    idx.into_iter().find(|&i| got.bits(i) != want.bits(i))
}

fn is_nan_not_canonical(b: &Buf, i: usize) -> bool {
    let bits = b.bits(i);
    match b.dtype() {
        DType::F32 => f32::from_bits(bits).is_nan() && bits != common::CANONICAL_NAN_F32,
        DType::BF16 => bits & 0x7F80 == 0x7F80 && bits & 0x7F != 0 && bits != 0x7FFF,
        DType::F16 => bits & 0x7C00 == 0x7C00 && bits & 0x3FF != 0 && bits != 0x7FFF,
    }
}

fn check_one(
    target: &Target,
    arena: &mut Arena,
    rng: &mut Rng,
    p: &Problem,
    tally: &Tally,
    first: &Mutex<Vec<String>>,
) {
    let g = p.g;
    let full = run(target, arena, 0, p, &g, Offsets::default());
    tally
        .outputs
        .fetch_add(g.m * g.n * g.batch, Ordering::Relaxed);
    let mismatch = |what: &str, i: usize, got: &Buf, want: &Buf| {
        report(
            first,
            tally,
            format!(
                "{what}: element {i}: {:#x}, expected {:#x}; {g:?}",
                got.bits(i),
                want.bits(i)
            ),
        )
    };
    match (g.tier, target) {
        (Tier::Scalar, Target::Gpu { cpu, .. }) => {
            let mut want = p.c0.clone();
            cpu.gemm_host(
                &g,
                p.a.slice_from(p.a_off),
                p.b.slice_from(p.b_off),
                p.bias.as_ref().map(Buf::slice),
                want.slice_mut(),
            )
            .expect("CPU oracle");
            tally.checks.fetch_add(1, Ordering::Relaxed);
            if let Some(i) = differ(&full, &want, 0..want.len()) {
                mismatch("scalar GPU vs CPU", i, &full, &want);
            }
        }
        (Tier::Scalar, Target::Cpu { .. }) => {
            let mut want = p.c0.clone();
            let (a, b) = (part(&p.a, p.a_off), part(&p.b, p.b_off));
            reference(&g, &a, &b, p.bias.as_ref(), &mut want);
            tally.checks.fetch_add(1, Ordering::Relaxed);
            if let Some(i) = differ(&full, &want, 0..want.len()) {
                mismatch("scalar CPU vs reference", i, &full, &want);
            }
        }
        (Tier::TensorCores | Tier::Auto, _) => {
            if let Some(i) = written(&g, 0).find(|&i| is_nan_not_canonical(&full, i)) {
                mismatch("tensor cores: a NaN that is not canonical", i, &full, &full);
            }
            if g.c.mode != OutputMode::AccumulateF32 {
                let sentinel = Buf::sentinel(full.dtype(), 1).bits(0);
                if let Some(i) = written(&g, 0).find(|&i| full.bits(i) == sentinel) {
                    mismatch("tensor cores: an output not written", i, &full, &full);
                }
            }
            // Again, on the other stream and engine.
            let again = run(target, arena, 1, p, &g, Offsets::default());
            tally.checks.fetch_add(1, Ordering::Relaxed);
            if let Some(i) = differ(&again, &full, 0..full.len()) {
                mismatch("tensor cores: run to run", i, &again, &full);
            }
            if g.m == 0 || g.n == 0 || g.batch == 0 {
                return;
            }
            // Rows r0..r0+len alone (batch invariance).
            let len = 1 + rng.below(g.m);
            let r0 = rng.below(g.m - len + 1);
            let sub = Gemm { m: len, ..g };
            let off = Offsets {
                a: match g.a.layout {
                    Layout::RowMajor => r0 * g.a.ld,
                    Layout::ColMajor => r0,
                },
                c: r0 * g.c.ldc,
                ..Offsets::default()
            };
            let rows = run(target, arena, 1, p, &sub, off);
            tally.checks.fetch_add(1, Ordering::Relaxed);
            if let Some(i) = differ(&rows, &full, written(&sub, off.c)) {
                mismatch(
                    &format!("tensor cores: rows {r0}..+{len} alone"),
                    i,
                    &rows,
                    &full,
                );
            }
            // Columns c0..c0+w alone (N-invariance).
            let w = 1 + rng.below(g.n);
            let c0 = rng.below(g.n - w + 1);
            let sub = Gemm { n: w, ..g };
            let off = Offsets {
                b: match g.b.layout {
                    Layout::RowMajor => c0,
                    Layout::ColMajor => c0 * g.b.ld,
                },
                bias: c0,
                c: c0,
                ..Offsets::default()
            };
            let cols = run(target, arena, 0, p, &sub, off);
            tally.checks.fetch_add(1, Ordering::Relaxed);
            if let Some(i) = differ(&cols, &full, written(&sub, off.c)) {
                mismatch(
                    &format!("tensor cores: columns {c0}..+{w} alone"),
                    i,
                    &cols,
                    &full,
                );
            }
            // One batch entry alone (batch-count invariance).
            if g.batch > 1 {
                let e = rng.below(g.batch);
                let sub = Gemm { batch: 1, ..g };
                let off = Offsets {
                    a: e * g.a.batch_stride,
                    b: e * g.b.batch_stride,
                    bias: 0,
                    c: e * g.c.batch_stride,
                };
                let one = run(target, arena, 1, p, &sub, off);
                tally.checks.fetch_add(1, Ordering::Relaxed);
                if let Some(i) = differ(&one, &full, written(&sub, off.c)) {
                    mismatch(
                        &format!("tensor cores: batch entry {e} alone"),
                        i,
                        &one,
                        &full,
                    );
                }
            }
        }
    }
}

fn main() {
    let args = args();
    let (target, name) = match gpu_support::gpu_engine() {
        Some(first) => {
            let cc = first.compute_capability().unwrap();
            let mut engines = vec![first];
            engines.push(Engine::new(Device::Cuda(0)).expect("a second engine"));
            (
                Target::Gpu {
                    engines,
                    cpu: Engine::new(Device::Cpu).unwrap(),
                },
                format!("cuda:0 (compute capability {}.{})", cc.0, cc.1),
            )
        }
        None => (
            Target::Cpu {
                engine: Engine::new(Device::Cpu).unwrap(),
            },
            "the CPU backend (no GPU), scalar tier against the reference".to_owned(),
        ),
    };
    let engine0 = match &target {
        Target::Gpu { engines, .. } => &engines[0],
        Target::Cpu { engine } => engine,
    };
    let tiers: Vec<Tier> = args
        .tiers
        .iter()
        .copied()
        .filter(|&t| {
            let ok = engine0.supports(t);
            if !ok {
                println!("soak: the {t} tier is not available on {name}: skipped");
            }
            ok
        })
        .collect();
    assert!(!tiers.is_empty(), "no tier to soak");
    let sweep = if args.kernel_sweep {
        kernel_sweep(&tiers)
    } else {
        Vec::new()
    };
    if args.kernel_sweep {
        let tc = sweep.iter().filter(|c| c.tier == Tier::TensorCores).count();
        let note = match &target {
            Target::Gpu { .. } => "",
            Target::Cpu { .. } => " (no GPU kernel here: the CPU backend runs them)",
        };
        println!(
            "soak: --kernel-sweep: the first {} calls are the kernel sweep ({tc} tensor-core, {} \
             scalar){note}",
            sweep.len(),
            sweep.len() - tc
        );
    }
    let calls = args.calls.max(sweep.len());
    println!(
        "soak: {calls} calls on {name}, {} threads, seed {}, at most {} fmas per random call, \
         tiers {:?}",
        args.threads, args.seed, args.max_fmas, tiers
    );
    let tallies: Vec<Tally> = tiers.iter().map(|_| Tally::default()).collect();
    let first = Mutex::new(Vec::new());
    let next = AtomicUsize::new(0);
    let start = Instant::now();
    std::thread::scope(|s| {
        for t in 0..args.threads {
            let (target, tiers, tallies, first, next, args, sweep) =
                (&target, &tiers, &tallies, &first, &next, &args, &sweep);
            s.spawn(move || {
                if let Target::Gpu { engines, .. } = target {
                    engines[0].cuda_context().unwrap().bind_to_thread().unwrap();
                }
                let mut arena = Arena {
                    exact: args.kernel_sweep,
                    ..Arena::default()
                };
                loop {
                    let call = next.fetch_add(1, Ordering::Relaxed);
                    if call >= calls {
                        break;
                    }
                    // Each call's inputs depend on the seed and its number only.
                    let mut rng = Rng::new(args.seed.wrapping_mul(0x9E37_79B9) ^ call as u64);
                    let (ti, p) = match sweep.get(call) {
                        Some(c) => {
                            let ti = tiers.iter().position(|&t| t == c.tier).unwrap();
                            (ti, make_problem(&mut rng, c))
                        }
                        None => {
                            let ti = call % tiers.len();
                            (ti, random_problem(&mut rng, tiers[ti], args.max_fmas))
                        }
                    };
                    check_one(target, &mut arena, &mut rng, &p, &tallies[ti], first);
                    tallies[ti].calls.fetch_add(1, Ordering::Relaxed);
                    if t == 0 && call % 10_000 == 0 && call > 0 {
                        println!("  … {call} calls, {:.0} s", start.elapsed().as_secs_f64());
                    }
                }
            });
        }
    });
    let mut bad = 0;
    for (tier, tally) in tiers.iter().zip(&tallies) {
        let mismatches = tally.mismatches.load(Ordering::Relaxed);
        bad += mismatches;
        let how = match (tier, &target) {
            (Tier::Scalar, Target::Gpu { .. }) => "compared with the CPU backend",
            (Tier::Scalar, Target::Cpu { .. }) => "compared with the reference",
            (Tier::TensorCores | Tier::Auto, _) => {
                "checked: run to run, rows, columns and batch entries alone"
            }
        };
        println!(
            "  {tier}: {} calls, {} outputs, {} comparisons ({how}): {mismatches} mismatches",
            tally.calls.load(Ordering::Relaxed),
            tally.outputs.load(Ordering::Relaxed),
            tally.checks.load(Ordering::Relaxed),
        );
    }
    println!(
        "soak: {calls} calls in {:.1} s, {bad} mismatches",
        start.elapsed().as_secs_f64()
    );
    if bad > 0 {
        std::process::exit(1);
    }
}
