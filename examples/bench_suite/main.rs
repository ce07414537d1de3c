//! The benchmark suite: every case of its target table (`cases.rs`) against cuBLAS default
//! (`cublasGemmEx`; `cublasSgemm` with TF32 off for the scalar tier) and cuBLASLt without
//! workspace, in one process, on the same buffers, with random data.
//!
//! ```text
//! bench_suite [--only TERM[,TERM…]] [--reps N] [--csv PATH] [--commit SHA]
//!             [--weight kn|nk|both] [--list]
//! ```
//!
//! - `--only`: run the cases whose group is TERM (`train`, `dw`, `dx`, `small`, `decode`,
//!   `sweep`, `scalar`, `scalar-decode`, `grouped`) or whose id contains it (ids look like
//!   `decode/bf16/64x4096x14336/kn` or `grouped/fwd/bf16/4096t/2048x768/zipf`; `--list`
//!   prints them). Repeatable; a case runs when any term matches.
//! - `--reps`: timed samples per measurement (default 20, or `$SGEMM_BI_BENCH_REPS`); each
//!   sample runs back-to-back calls for at least 1 ms, so microsecond calls are run many
//!   more times.
//! - `--csv`: also write the rows as CSV (or `$SGEMM_BI_BENCH_CSV`), for
//!   `scripts/plot_bench.py`, which turns it into `docs/perf-bench.md` and the plot (the
//!   dense rows: the grouped table is in the markdown only).
//! - `--commit`: the commit measured (else `$SGEMM_BI_COMMIT`, else the one the binary was
//!   built with when `SGEMM_BI_COMMIT` was set at build time, else "unknown").
//! - `--weight`: the weight layout of the tensor-core rows (default `kn`, `W[K,N]`; `nk` is
//!   torch's `[out, in]`).
//!
//! cuBLAS is opened from `$SGEMM_BI_CUBLAS` (else `libcublas.so.13`/`.12` on the loader
//! path), cuBLASLt from `$SGEMM_BI_CUBLASLT` (else next to `$SGEMM_BI_CUBLAS`, else the
//! loader path). `SGEMM_BI_CHECK_POINTERS=0` turns the engine's per-call pointer checks off.
//!
//! Method: each case rotates through enough disjoint buffer sets (A, B, C) to span 256 MiB,
//! so every call reads its operands from HBM, not from the L2 the previous call warmed; ours
//! and both cuBLAS settings run the same buffer sequence. Warm-up of at least 25 ms each,
//! then the median over `--reps` samples of the time per call between CUDA events, the
//! three contenders' samples interleaved so that clock drift weighs on all of them alike. The full
//! suite should take well under a minute on an H200 (estimated from cuBLAS's speed: about
//! 10 s of timed GEMMs, plus the PTX JIT, 2 GiB of uploads and the warm-ups).
//!
//! The `grouped` group (`grouped.rs`) is a table of its own: Mixture-of-Experts GEMMs
//! (torch's `F.grouped_mm`), 128 experts with top-8 routing, balanced or Zipf-like, the
//! experts' forward (rows split) and weight gradient (reduction split), bf16. Ours is one
//! `Engine::grouped_gemm` with the offsets in device memory; its opponent is a loop of one
//! `cublasGemmEx` per non-empty expert on the same buffers, interleaved with ours as above;
//! each row also shows the floor (the FLOPs at 989 TFLOP/s or the bytes at 4.3 TB/s,
//! whichever takes longer) and which path ours ran (the grouped kernel, or group by group).

#[path = "../common/cublas.rs"]
#[allow(dead_code)] // shared by the benchmarks; each uses part of it
mod cublas;
#[path = "../common/cublaslt.rs"]
mod cublaslt;
// Only its random data: the suite times with its own interleaved sampling.
#[allow(dead_code)]
#[path = "../common/device_data.rs"]
mod device_data;

mod cases;
mod device;
mod grouped;
mod report;

use std::ffi::c_void;

use cudarc::driver::result;
use sgemm_bi::{DType, Device, Engine, GemmPointers, GroupOffsets, Stream, WeightLayout};

use cases::Case;
use cublas::{Cublas, RowMajorGemm};
use cublaslt::CublasLt;
use device::{Arena, Arenas, Needs, Sizes, Timer, Timing};
use grouped::GroupedRow;
use report::Row;

struct Args {
    only: Vec<String>,
    reps: usize,
    csv: Option<String>,
    commit: String,
    weights: Vec<WeightLayout>,
    list: bool,
}

const USAGE: &str = "usage: bench_suite [--only TERM[,TERM...]] [--reps N] [--csv PATH] \
                     [--commit SHA] [--weight kn|nk|both] [--list]";

const HELP: &str = "
  --only TERM    cases whose group is TERM (train, dw, dx, small, decode, sweep, scalar,
                 scalar-decode, grouped) or whose id (see --list) contains it;
                 comma-separated or repeated: any matches
  --reps N       timed samples per measurement (default 20, or $SGEMM_BI_BENCH_REPS)
  --csv PATH     also write the rows as CSV for scripts/plot_bench.py ($SGEMM_BI_BENCH_CSV)
  --commit SHA   the commit measured, for the header ($SGEMM_BI_COMMIT)
  --weight W     weight layout of the tensor-core rows: kn (W[K,N], default), nk, both
  --list         print the ids of the selected cases and exit
cuBLAS: $SGEMM_BI_CUBLAS or libcublas.so.13/.12; cuBLASLt: $SGEMM_BI_CUBLASLT, else next to
$SGEMM_BI_CUBLAS, else libcublasLt.so.13/.12. SGEMM_BI_CHECK_POINTERS=0: no pointer checks.";

fn parse_args() -> Result<Args, String> {
    let env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    let mut args = Args {
        only: Vec::new(),
        reps: env("SGEMM_BI_BENCH_REPS")
            .map_or(Ok(20), |v| v.parse().map_err(|_| v))
            .map_err(|v| format!("SGEMM_BI_BENCH_REPS={v} is not a count"))?,
        csv: env("SGEMM_BI_BENCH_CSV"),
        commit: env("SGEMM_BI_COMMIT")
            .or(option_env!("SGEMM_BI_COMMIT").map(String::from))
            .unwrap_or_else(|| "unknown".into()),
        weights: vec![WeightLayout::KN],
        list: false,
    };
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        let (flag, inline) = match a.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f.to_string(), Some(v.to_string())),
            _ => (a.clone(), None),
        };
        let mut value = || {
            inline
                .clone()
                .or_else(|| it.next())
                .ok_or(format!("{flag} needs a value"))
        };
        match flag.as_str() {
            "--only" => args.only.extend(
                value()?
                    .split(',')
                    .map(|t| t.trim().to_lowercase())
                    .filter(|t| !t.is_empty()),
            ),
            "--reps" => {
                let v = value()?;
                args.reps = v.parse().map_err(|_| format!("--reps {v}: not a count"))?;
            }
            "--csv" => args.csv = Some(value()?),
            "--commit" => args.commit = value()?,
            "--weight" => {
                args.weights = match value()?.to_lowercase().as_str() {
                    "kn" => vec![WeightLayout::KN],
                    "nk" => vec![WeightLayout::NK],
                    "both" => vec![WeightLayout::KN, WeightLayout::NK],
                    v => return Err(format!("--weight {v}: kn, nk or both")),
                }
            }
            "--list" => args.list = true,
            "-h" | "--help" => {
                println!("{USAGE}\n{HELP}");
                std::process::exit(0);
            }
            _ => return Err(format!("unknown argument {a}")),
        }
    }
    Ok(args)
}

/// What cuBLAS runs against a case: the same GEMM on the same buffers, except for the
/// scalar tier, whose opponent is f32 SGEMM (on f32 buffers of the same shape).
fn reference(case: &Case) -> RowMajorGemm {
    if case.scalar() {
        let l = &case.linear;
        RowMajorGemm::dense(l.m, l.n, l.k, DType::F32)
    } else {
        RowMajorGemm::from_gemm(&case.gemm())
    }
}

fn sizes(p: &RowMajorGemm) -> Sizes {
    Sizes {
        a: p.m * p.k * p.input.size(),
        b: p.k * p.n * p.input.size(),
        c: p.m * p.n * p.output.size(),
    }
}

fn main() {
    let args = parse_args().unwrap_or_else(|e| {
        eprintln!("bench_suite: {e}\n{USAGE}");
        std::process::exit(2);
    });
    let cases = cases::select(cases::all(&args.weights), &args.only);
    let grouped_cases = grouped::select(grouped::all(), &args.only);
    if args.list {
        for c in &cases {
            println!("{}", c.id());
        }
        for c in &grouped_cases {
            println!("{}", c.id());
        }
        return;
    }
    if cases.is_empty() && grouped_cases.is_empty() {
        eprintln!(
            "bench_suite: no case matches --only {}",
            args.only.join(",")
        );
        std::process::exit(2);
    }

    let engine = Engine::new(Device::Cuda(0)).unwrap_or_else(|e| {
        eprintln!("bench_suite needs a CUDA GPU: {e}");
        std::process::exit(2);
    });
    let blas = Cublas::open().unwrap_or_else(|e| {
        eprintln!("bench_suite: cuBLAS not found ({e}); set SGEMM_BI_CUBLAS");
        std::process::exit(2);
    });
    let lt = CublasLt::open()
        .map_err(|e| eprintln!("bench_suite: cuBLASLt not found ({e}); its columns stay empty"))
        .ok();
    let stream = result::stream::create(result::stream::StreamKind::NonBlocking).unwrap();
    blas.set_stream(stream as *mut c_void);
    let timer = Timer::new(stream);

    let mut needs = Needs::default();
    for c in &cases {
        let g = RowMajorGemm::from_gemm(&c.gemm());
        needs.add(g.input, sizes(&g));
        let r = reference(c);
        needs.add(r.input, sizes(&r));
    }
    for c in &grouped_cases {
        needs.add(DType::BF16, c.sizes());
    }
    let arenas = Arenas::new(&needs);
    let total = cases.len() + grouped_cases.len();
    eprintln!(
        "bench_suite: {total} cases, {} samples each, {:.1} GiB of device buffers",
        args.reps,
        arenas.bytes() as f64 / (1u64 << 30) as f64
    );

    let started = std::time::Instant::now();
    let mut rows = Vec::new();
    for (index, case) in cases.iter().enumerate() {
        let g = case.gemm();
        let ours_bufs = arenas.buffers(g.a.dtype, sizes(&RowMajorGemm::from_gemm(&g)));
        let r = reference(case);
        let bufs = arenas.buffers(r.input, sizes(&r));
        let scalar = case.scalar();
        // SAFETY (every unsafe block below): each buffer set holds A, B and C as its GEMM
        // describes them (Sizes: `g` for ours, `r` for cuBLAS), inside an arena alive until
        // the end of main; the stream belongs to the engine's context.
        let mut ours = |i: usize| unsafe {
            let (a, b, c) = ours_bufs.at(i);
            let p = GemmPointers {
                a: a as *const c_void,
                b: b as *const c_void,
                bias: std::ptr::null(),
                c: c as *mut c_void,
            };
            engine
                .gemm(&g, p, Stream(stream as *mut c_void))
                .unwrap_or_else(|e| panic!("{}: {e}", case.id()))
        };
        let mut cublas = |i: usize| unsafe {
            let (a, b, c) = bufs.at(i);
            if scalar {
                blas.sgemm(r.m, r.n, r.k, a, b, c)
            } else {
                blas.gemm_ex(&r, a, b, c)
            }
        };
        // A plan whose first run cuBLASLt refuses counts as no plan.
        let plan = lt.as_ref().and_then(|lt| lt.plan(&r)).filter(|plan| {
            let (a, b, c) = bufs.at(0);
            let status = unsafe { plan.run(a, b, c, stream as *mut c_void) };
            status
                .map_err(|s| eprintln!("{}: cublasLtMatmul status {s}", case.id()))
                .is_ok()
        });
        let mut lt_call = |i: usize| {
            let (a, b, c) = bufs.at(i);
            let plan = plan.as_ref().expect("timed only with a plan");
            unsafe { plan.run(a, b, c, stream as *mut c_void) }
                .unwrap_or_else(|s| panic!("cublasLtMatmul status {s}"))
        };
        let timings = if plan.is_some() {
            timer.time_together(args.reps, &mut [&mut ours, &mut cublas, &mut lt_call])
        } else {
            timer.time_together(args.reps, &mut [&mut ours, &mut cublas])
        };
        let (ours, cublas_t, lt_t) = (timings[0], timings[1], timings.get(2).copied());
        let row = Row {
            case: *case,
            ours,
            cublas: cublas_t,
            lt: lt_t,
            slots: ours_bufs.slots,
        };
        let tflops = |t: &Timing| case.flops() / (t.ms * 1e9);
        eprintln!(
            "[{}/{}] {}: ours {:.1}, cuBLAS {:.1}, cuBLASLt {} TFLOP/s",
            index + 1,
            total,
            case.id(),
            tflops(&row.ours),
            tflops(&row.cublas),
            row.lt.map_or("–".into(), |t| format!("{:.1}", tflops(&t))),
        );
        rows.push(row);
    }
    let mut grouped_rows = Vec::new();
    for (index, case) in grouped_cases.iter().enumerate() {
        let gg = case.call();
        let bufs = arenas.buffers(DType::BF16, case.sizes());
        let ends = Arena::from_i32(&case.ends);
        let ends_ptr = ends.base as *const i32;
        let pointers = |i: usize| {
            let (a, b, c) = bufs.at(i);
            GemmPointers {
                a: a as *const c_void,
                b: b as *const c_void,
                bias: std::ptr::null(),
                c: c as *mut c_void,
            }
        };
        // Each non-empty expert's dense call as cuBLAS runs it, and its byte offsets from
        // the grouped call's A, B and C.
        let experts: Vec<(RowMajorGemm, u64, u64, u64)> = case
            .groups()
            .into_iter()
            .map(|(e, start, end)| {
                let call = gg.group(e, start, end);
                let g = &call.gemm;
                let bytes = |elems: usize, d: DType| (elems * d.size()) as u64;
                (
                    RowMajorGemm::from_gemm(g),
                    bytes(call.a, g.a.dtype),
                    bytes(call.b, g.b.dtype),
                    bytes(call.c, g.c.mode.dtype()),
                )
            })
            .collect();
        // SAFETY (every unsafe block below): each buffer set holds the whole grouped call's
        // A, B and C (`GroupedCase::sizes`) inside an arena alive until the end of main, and
        // each expert's span lies inside them; `ends` holds the case's EXPERTS offsets and
        // outlives the case's calls (synchronized by the timer); the stream belongs to the
        // engine's context.
        let path = unsafe { grouped::path(&engine, &gg, ends_ptr, pointers(0), stream) };
        let mut ours = |i: usize| unsafe {
            engine
                .grouped_gemm(
                    &gg,
                    GroupOffsets::Device(ends_ptr),
                    pointers(i),
                    Stream(stream as *mut c_void),
                )
                .unwrap_or_else(|e| panic!("{}: {e}", case.id()))
        };
        let mut cublas_loop = |i: usize| unsafe {
            let (a, b, c) = bufs.at(i);
            for (r, da, db, dc) in &experts {
                blas.gemm_ex(r, a + da, b + db, c + dc);
            }
        };
        let timings = timer.time_together(args.reps, &mut [&mut ours, &mut cublas_loop]);
        let row = GroupedRow {
            case: case.clone(),
            ours: timings[0],
            cublas: timings[1],
            path,
        };
        let tflops = |t: &Timing| case.flops() / (t.ms * 1e9);
        eprintln!(
            "[{}/{total}] {}: ours {:.1} ({path}), cuBLAS loop {:.1} TFLOP/s, floor {:.3} ms",
            cases.len() + index + 1,
            case.id(),
            tflops(&row.ours),
            tflops(&row.cublas),
            case.floor_ms(),
        );
        grouped_rows.push(row);
        // The offsets' buffer is freed here, after the timer's last synchronize.
        drop(ends);
    }
    result::ctx::synchronize().unwrap();
    eprintln!(
        "bench_suite: measured in {:.1} s",
        started.elapsed().as_secs_f64()
    );

    let (gpu, driver) = device::gpu_and_driver();
    let cc = engine
        .compute_capability()
        .map_or(String::new(), |(a, b)| format!(", sm_{a}{b}"));
    let meta: report::Meta = vec![
        ("date", report::utc_now()),
        ("gpu", format!("{gpu}{cc}")),
        ("driver", driver),
        ("commit", args.commit.clone()),
        ("cublas", format!("{} ({})", blas.name, blas.version)),
        (
            "cublaslt",
            lt.as_ref().map_or("not loaded".into(), |l| {
                format!("{} ({})", l.name, l.version)
            }),
        ),
        (
            "method",
            format!(
                "median of {} samples per call after warm-up, ours and both cuBLAS settings \
                 interleaved sample by sample, CUDA events, buffers rotated over ≥ 256 MiB, \
                 random data in [-0.5, 0.5)",
                args.reps
            ),
        ),
        (
            "pointer_checks",
            match std::env::var("SGEMM_BI_CHECK_POINTERS") {
                Ok(v) if v == "0" => "off (SGEMM_BI_CHECK_POINTERS=0)".into(),
                _ => "library default".into(),
            },
        ),
        (
            "command",
            std::iter::once("bench_suite".to_string())
                .chain(std::env::args().skip(1))
                .collect::<Vec<_>>()
                .join(" "),
        ),
    ];
    print!("{}", report::markdown(&meta, &rows, &grouped_rows));
    if let Some(path) = &args.csv {
        match std::fs::write(path, report::csv(&meta, &rows)) {
            Ok(()) => eprintln!("bench_suite: wrote {path}"),
            Err(e) => {
                eprintln!("bench_suite: writing {path}: {e}");
                std::process::exit(1);
            }
        }
    }
}
