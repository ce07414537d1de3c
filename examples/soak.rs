//! Soak (docs/reliability.md, item 8): many random-shape calls, every result checked.
//!
//! ```text
//! cargo run --release --example soak -- CALLS [--tier scalar|tensor_cores|both]
//!                                            [--threads T] [--seed S] [--max-fmas F]
//! ```
//!
//! On a GPU (device 0): the scalar tier's every result against the CPU backend bit for bit;
//! the tensor-core tier's (bf16/f16) against itself — the same call again on another stream
//! and engine, a random subset of its rows alone, of its columns alone, and each batch entry
//! alone must give the same bits (C1, C2), every element must be written and every NaN be
//! canonical. Without a GPU the same runs on the CPU backend, the scalar tier then checked
//! against the independent reference of the tests (`tests/common`; slower, so keep CALLS
//! and `--max-fmas` small), the tensor-core tier only with `SGEMM_BI_CPU_TC_MODEL=1`.
//!
//! Shapes: dimensions from 0 to 2048 (tails, primes, tile edges), batches up to 4, both
//! layouts, padded leading dimensions, element offsets that break 16-byte alignment, every
//! bias and output mode; one call in ten with NaN, ±Inf, ±0 and subnormals planted. Threads
//! share the engines, each with its own streams. Prints the counts and exits 1 on any
//! mismatch.

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
}

fn args() -> Args {
    let usage = "usage: soak CALLS [--tier scalar|tensor_cores|both] [--threads T] [--seed S] \
                 [--max-fmas F]";
    let mut it = std::env::args().skip(1);
    let mut a = Args {
        calls: 0,
        tiers: vec![Tier::Scalar, Tier::TensorCores],
        threads: std::thread::available_parallelism().map_or(4, |n| n.get().min(8)),
        seed: 1,
        max_fmas: 1 << 22,
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
        if self.bufs[slot].as_ref().is_none_or(|b| b.bytes < need) {
            stream.sync();
            self.bufs[slot] = Some(DeviceBuf::alloc(need.next_power_of_two()));
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
            Tier::Scalar => rng.pick(&[DType::F32, DType::BF16, DType::F16]),
            Tier::TensorCores => rng.pick(&[DType::BF16, DType::F16]),
        };
        let op = |rng: &mut Rng, rows: usize, cols: usize| {
            let layout = rng.pick(&[Layout::RowMajor, Layout::ColMajor]);
            let min = common::min_ld(layout, rows, cols);
            // Multiples of 8 half the time (the tensor cores' 16-byte loaders and the Hopper
            // path), any padding otherwise.
            let ld = if rng.bool() {
                min.next_multiple_of(8)
            } else {
                min + rng.below(10)
            };
            Operand {
                dtype,
                layout,
                ld,
                batch_stride: 0,
            }
        };
        let (mut a, mut b) = (op(rng, m, k), op(rng, k, n));
        if batch > 1 {
            a.batch_stride = span(&a, m, k, 1) + rng.below(9);
            b.batch_stride = if rng.below(4) == 0 {
                0
            } else {
                span(&b, k, n, 1) + rng.below(9)
            };
        }
        let mode = match rng.below(5) {
            0 => OutputMode::AccumulateF32,
            1 => OutputMode::Overwrite(DType::F32),
            _ => OutputMode::Overwrite(dtype),
        };
        let ldc = n.max(1) + [0, 0, 1, 8][rng.below(4)];
        let c = Output {
            mode,
            ldc,
            batch_stride: if batch > 1 {
                common::one_span(Layout::RowMajor, ldc, m, n) + rng.below(5)
            } else {
                0
            },
        };
        let bias = [None, Some(DType::F32), Some(dtype)][rng.below(3)];
        let g = Gemm {
            m,
            n,
            k,
            batch,
            a,
            b,
            bias,
            c,
            tier,
        };
        let ext = sgemm_bi::validate::check(&g).expect("soak descriptors are valid");
        // A and B start a random number of elements into their buffers: alignment varies.
        let (pa, pb) = (rng.below(8), rng.below(8));
        let mut a_buf = Buf::random(dtype, pa + ext.a.max(1), rng, NARROW);
        let mut b_buf = Buf::random(dtype, pb + ext.b.max(1), rng, NARROW);
        let mut bias_buf = bias.map(|d| Buf::random(d, n.max(1), rng, NARROW));
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
        let c0 = match mode {
            OutputMode::AccumulateF32 => Buf::random(DType::F32, ext.c.max(1), rng, NARROW),
            OutputMode::Overwrite(d) => Buf::sentinel(d, ext.c.max(1)),
        };
        return Problem {
            g,
            a: a_buf,
            b: b_buf,
            a_off: pa,
            b_off: pb,
            bias: bias_buf,
            c0,
        };
    }
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
        (Tier::TensorCores, _) => {
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
    println!(
        "soak: {} calls on {name}, {} threads, seed {}, at most {} fmas per call, tiers {:?}",
        args.calls, args.threads, args.seed, args.max_fmas, tiers
    );
    let tallies: Vec<Tally> = tiers.iter().map(|_| Tally::default()).collect();
    let first = Mutex::new(Vec::new());
    let next = AtomicUsize::new(0);
    let start = Instant::now();
    std::thread::scope(|s| {
        for t in 0..args.threads {
            let (target, tiers, tallies, first, next, args) =
                (&target, &tiers, &tallies, &first, &next, &args);
            s.spawn(move || {
                if let Target::Gpu { engines, .. } = target {
                    engines[0].cuda_context().unwrap().bind_to_thread().unwrap();
                }
                let mut arena = Arena::default();
                loop {
                    let call = next.fetch_add(1, Ordering::Relaxed);
                    if call >= args.calls {
                        break;
                    }
                    // Each call's inputs depend on the seed and its number only.
                    let mut rng = Rng::new(args.seed.wrapping_mul(0x9E37_79B9) ^ call as u64);
                    let ti = call % tiers.len();
                    let p = random_problem(&mut rng, tiers[ti], args.max_fmas);
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
            (Tier::TensorCores, _) => "checked: run to run, rows, columns and batch entries alone",
        };
        println!(
            "  {tier}: {} calls, {} outputs, {} comparisons ({how}): {mismatches} mismatches",
            tally.calls.load(Ordering::Relaxed),
            tally.outputs.load(Ordering::Relaxed),
            tally.checks.load(Ordering::Relaxed),
        );
    }
    println!(
        "soak: {} calls in {:.1} s, {bad} mismatches",
        args.calls,
        start.elapsed().as_secs_f64()
    );
    if bad > 0 {
        std::process::exit(1);
    }
}
