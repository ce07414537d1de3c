"""GPU time of sgemm-bi's tensor-core tier next to what PyTorch users compare it with:
``F.linear`` (forward) and ``torch.matmul`` (dW, dX) on the same CUDA tensors, at GEMM
shapes of training and of decode. Prints one markdown table per timing method.

Ours is ``sgemm_bi.linear`` / ``sgemm_bi.matmul`` with ``tier="tensor_cores"`` on tensors
that need no gradient: the cheapest documented call, which runs the native op
``torch.ops.sgemm_bi.matmul`` where the library provides it (the header says whether).

Two timing methods, each named in its table's title:

- **back to back, warm**: the same buffers, calls back to back, L2 warm (what most quick
  benchmarks measure); each candidate's samples in one block.
- **interleaved, cold**: rotating buffer sets of at least 256 MiB of inputs (L2 is 50 MiB
  on the H200), and the candidates interleaved sample by sample (torch, ours, torch, ...)
  so that a drift of clocks or temperature hits both alike.

Each sample replays a CUDA graph of ``--calls`` calls (on the rotating buffer sets for the
cold method) between two CUDA events: GPU time, not Python's. A row is the median per-call
time over ``--samples`` samples. A candidate whose capture fails is timed as a plain loop
of the same calls between events, and its row says ``loop``. Before timing, each shape
checks that ours repeats its bits exactly and prints ours' largest difference from torch
(a sanity figure: the two need not sum in the same order); a relative error above 1e-2
stops the run. The full run takes about 70 s on an H200.

    SGEMM_BI_LIB=$PWD/.gpu/lib/libsgemm_bi.so python3 python/benchmarks/bench_torch_baseline.py
    ... --quick                      # one shape of each kind, few samples (a smoke run)
    ... --method cold --shapes decode --csv rows.csv
    ... --method cold --shapes llama  # the decode projections of bench_llama.py's models
    ... --shapes suite --csv torch.csv  # bench_suite's rows, for scripts/plot_bench.py --torch

Floors: FLOPs over 989e12 (H200 dense bf16/f16) and bytes of A + B + C over 4.8e12 B/s
(H200 HBM3e); ``--peak-flops`` / ``--peak-bw`` change them for other GPUs. Exits 2 without
PyTorch or a CUDA GPU.
"""

from __future__ import annotations

import argparse
import csv
import datetime
import math
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # the package of this checkout, as the tests do

try:
    import torch
    import torch.nn.functional as F

    import sgemm_bi
    from sgemm_bi import native
    IMPORT_ERROR: Optional[BaseException] = None
except ImportError as e:  # reported by main(), so that --help and imports still work
    torch = F = sgemm_bi = native = None  # type: ignore[assignment]
    IMPORT_ERROR = e

TIER = "tensor_cores"
COLD_BYTES = 256 << 20
WARMUP_S = 0.2
METHODS = {"warm": "back to back, warm", "cold": "interleaved, cold"}


@dataclass(frozen=True)
class Case:
    """One GEMM of a linear layer ``x[M,K] @ W[N,K]^T``: its forward (``fwd``), weight
    gradient ``dW = dY^T X`` or input gradient ``dX = dY W``; ``m, k, n`` are the layer's."""
    op: str
    m: int
    k: int
    n: int
    dtype: str = "bf16"

    @property
    def gemm(self) -> tuple[int, int, int]:
        """The GEMM actually run, as (rows, reduced, cols) of its output's product."""
        return {"fwd": (self.m, self.k, self.n), "dW": (self.n, self.m, self.k),
                "dX": (self.m, self.n, self.k)}[self.op]

    def operands(self, gen: Any) -> tuple[Any, Any]:
        """Fresh random operands in torch's layouts: (x, W), (dY, X) or (dY, W)."""
        dt = {"bf16": torch.bfloat16, "f16": torch.float16}[self.dtype]
        shapes = {"fwd": ((self.m, self.k), (self.n, self.k)),
                  "dW": ((self.m, self.n), (self.m, self.k)),
                  "dX": ((self.m, self.n), (self.n, self.k))}[self.op]
        a, b = (torch.randn(s, generator=gen, device="cuda", dtype=dt) for s in shapes)
        return a, b

    def calls(self) -> tuple[Callable[[Any, Any], Any], Callable[[Any, Any], Any]]:
        """(torch's call, ours) on the operands of :meth:`operands`. dW passes the
        transposed view ``dY.t()`` to both: sgemm_bi reads it in place (column-major)."""
        if self.op == "fwd":
            return (lambda x, w: F.linear(x, w),
                    lambda x, w: sgemm_bi.linear(x, w, tier=TIER))
        if self.op == "dW":
            return (lambda dy, x: torch.matmul(dy.t(), x),
                    lambda dy, x: sgemm_bi.matmul(dy.t(), x, tier=TIER))
        return (lambda dy, w: torch.matmul(dy, w),
                lambda dy, w: sgemm_bi.matmul(dy, w, tier=TIER))

    def label(self) -> str:
        return f"{self.m}x{self.k}x{self.n}"


def all_cases() -> dict[str, list[Case]]:
    """The shapes of the comparison, grouped by kind (``--shapes`` picks groups)."""
    fwd = [Case("fwd", 16384, 4096, 4096), Case("fwd", 16384, 4096, 4096, "f16"),
           Case("fwd", 4096, 4096, 4096), Case("fwd", 4096, 4096, 4096, "f16"),
           Case("fwd", 16384, 4096, 14336), Case("fwd", 16384, 14336, 4096),
           Case("fwd", 8192, 8192, 8192)]
    decode = [Case("fwd", m, 4096, n) for n in (4096, 14336) for m in (1, 8, 16, 64, 128, 256)]
    layers = [(16384, 4096, 4096), (16384, 14336, 4096)]
    # The projections of bench_llama.py's two models (hidden, q/o, k/v with grouped heads,
    # gate/up, down, the vocabulary head) at decode batch 1 and 8.
    llama = [Case("fwd", m, k, n) for m in (1, 8)
             for k, n in ((1024, 1024), (1024, 512), (1024, 2816), (2816, 1024), (1024, 32000),
                          (2048, 2048), (2048, 256), (2048, 5632), (5632, 2048), (2048, 32000))]
    # Every tensor-core row of examples/bench_suite (cases.rs), layer for layer, so that
    # scripts/plot_bench.py can put torch's times beside the suite's table.
    suite_train = [(16384, 4096, 4096), (16384, 4096, 14336), (16384, 14336, 4096),
                   (8192, 8192, 8192), (4096, 4096, 4096)]
    suite = ([Case("fwd", *s, dt) for dt in ("bf16", "f16") for s in suite_train]
             + [Case(op, *s) for op in ("dW", "dX") for s in suite_train]
             + [Case("fwd", *s) for s in ((2048, 768, 3072), (4096, 1536, 3072),
                                          (2048, 768, 512))]
             + decode
             + [Case("fwd", m, 4096, 4096) for m in (512, 1024, 2048, 8192)])
    return {"train": fwd, "decode": decode, "dW": [Case("dW", *s) for s in layers],
            "dX": [Case("dX", *s) for s in layers], "llama": llama, "suite": suite}


def commit() -> str:
    """The checkout's short commit, ``+dirty`` when tracked files have changes."""
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=HERE, capture_output=True, text=True,
                              check=True).stdout.strip()
    try:
        return git("rev-parse", "--short", "HEAD") + (
            "+dirty" if git("status", "--porcelain", "--untracked-files=no") else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def fail(message: str, code: int = 1) -> None:
    """Stops the run with ``message`` on stderr (exit 2: this machine cannot run it)."""
    print(f"bench_torch_baseline: {message}", file=sys.stderr)
    raise SystemExit(code)


def require_gpu() -> None:
    """Exit 2 with the reason where the benchmark cannot run: no torch, no CUDA GPU."""
    if IMPORT_ERROR is not None:
        fail(f"needs PyTorch with CUDA and a CUDA GPU; the import failed: {IMPORT_ERROR}", 2)
    if not torch.cuda.is_available():
        fail("needs a CUDA GPU: torch.cuda.is_available() is False "
             f"(torch {torch.__version__}, built for CUDA {torch.version.cuda})", 2)


def check(case: Case, ops: tuple[Any, Any]) -> tuple[float, float]:
    """Ours must give the same bits twice (the library's contract); its difference from
    torch is only a sanity figure, since the two need not sum in the same order. A gross difference
    (relative to torch's largest element) means a broken kernel or a wrong call here, and
    timing it would be meaningless: the run stops. Returns (max |diff|, relative)."""
    theirs, ours = case.calls()
    first, again, ref = ours(*ops), ours(*ops), theirs(*ops)
    torch.cuda.synchronize()
    if first.shape != ref.shape or not torch.equal(first, again):
        fail(f"{case.op} {case.dtype} {case.label()}: ours is not bit-identical on repeat "
             f"(or has shape {list(first.shape)} instead of {list(ref.shape)})")
    diff = (first.float() - ref.float()).abs().max().item()
    scale = ref.float().abs().max().item()
    rel = diff / scale if scale else diff
    if not math.isfinite(rel) or rel > 1e-2:
        fail(f"{case.op} {case.dtype} {case.label()}: ours differs from torch by {diff:.3g} "
             f"(relative {rel:.3g} > 1e-2): wrong results, not timed")
    return diff, rel


def runner(fn: Callable[..., Any], sets: list[tuple[Any, Any]], calls: int,
           ) -> tuple[Callable[[], None], str]:
    """A callable that runs ``calls`` calls of ``fn`` (call i on buffer set i mod len), and
    how: a CUDA graph replay, so that a sample measures the GPU, not the Python around the
    launches; else, where capture fails, the plain loop. Outputs are dropped at once, as a
    model drops them, so the allocator may reuse one block for every call."""
    def loop() -> None:
        for i in range(calls):
            fn(*sets[i % len(sets)])

    loop()  # warm-up outside capture: the library loads its kernels on first use
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    try:
        with torch.cuda.graph(graph):
            loop()
    except Exception as e:  # anything capture refuses: time the loop instead
        torch.cuda.synchronize()
        print(f"  (capture failed, timing a loop: {type(e).__name__}: {e})", file=sys.stderr)
        return loop, "loop"
    return graph.replay, "graph"


def sample(runs: list[Callable[[], None]], calls: int, samples: int, interleave: bool,
           ) -> list[float]:
    """Median µs per call of each run. Every sample sits between two CUDA events on the
    current stream; all are queued before one synchronize, so the GPU stays busy and the
    host's timing never enters. Interleaved: sample s of every run before sample s + 1.
    A warm-up of WARMUP_S seconds first, so that an idle GPU's clocks have ramped up."""
    start_s = time.perf_counter()
    while time.perf_counter() - start_s < WARMUP_S:
        for run in runs:
            run()
        torch.cuda.synchronize()
    order = ([(s, j) for s in range(samples) for j in range(len(runs))] if interleave
             else [(s, j) for j in range(len(runs)) for s in range(samples)])
    events = {key: (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
              for key in order}
    for s, j in order:
        start, end = events[(s, j)]
        start.record()
        runs[j]()
        end.record()
    torch.cuda.synchronize()
    return [statistics.median(events[(s, j)][0].elapsed_time(events[(s, j)][1]) * 1e3 / calls
                              for s in range(samples)) for j in range(len(runs))]


def measure(case: Case, method: str, args: argparse.Namespace, gen: Any,
            checked: dict[Case, tuple[float, float]]) -> dict[str, Any]:
    """One row: both candidates on ``case`` with ``method``, plus the floors. The cold
    method takes as many buffer sets as reach COLD_BYTES of inputs (at least two, so no
    call finds its own operands left in L2 by the call before) and at least as many calls
    per sample as sets, so that every set is used."""
    m, k, n = case.gemm
    size = 2  # bf16 and f16
    input_bytes = (m * k + k * n) * size
    count = 1 if method == "warm" else max(2, -(-COLD_BYTES // input_bytes))
    calls = max(args.calls, count)
    sets = [case.operands(gen) for _ in range(count)]
    if case not in checked:
        checked[case] = check(case, sets[0])
    diff, rel = checked[case]
    (run_t, how_t), (run_o, how_o) = (runner(f, sets, calls) for f in case.calls())
    t_us, o_us = sample([run_t, run_o], calls, args.samples, method == "cold")
    flops = 2 * m * k * n
    row = {"method": METHODS[method], "op": case.op, "dtype": case.dtype,
           "layer_MxKxN": case.label(), "gemm_mxkxn": f"{m}x{k}x{n}", "buffer_sets": count,
           "torch_us": t_us, "ours_us": o_us, "ratio": t_us / o_us,
           "torch_tflops": flops / t_us / 1e6, "ours_tflops": flops / o_us / 1e6,
           "flop_floor_us": flops / args.peak_flops * 1e6,
           "byte_floor_us": (input_bytes + m * n * size) / args.peak_bw * 1e6,
           "max_abs_diff": diff, "rel_diff": rel, "timing": f"{how_t}/{how_o}",
           "samples": args.samples, "calls_per_sample": calls}
    del sets, run_t, run_o
    torch.cuda.empty_cache()
    return row


COLUMNS = [("op", "op", "{}"), ("dtype", "dtype", "{}"), ("layer M×K×N", "layer_MxKxN", "{}"),
           ("GEMM m×k×n", "gemm_mxkxn", "{}"), ("torch µs", "torch_us", "{:.1f}"),
           ("ours µs", "ours_us", "{:.1f}"), ("torch/ours", "ratio", "{:.2f}"),
           ("torch TF/s", "torch_tflops", "{:.0f}"), ("ours TF/s", "ours_tflops", "{:.0f}"),
           ("flop floor µs", "flop_floor_us", "{:.1f}"),
           ("byte floor µs", "byte_floor_us", "{:.1f}"),
           ("max abs diff", "max_abs_diff", "{:.2g}"), ("timing", "timing", "{}")]


def print_header(args: argparse.Namespace) -> None:
    """What a reader needs to reproduce or compare a table: GPU, versions, library build,
    commit, date, and the settings that change torch's own speed."""
    try:
        info = sgemm_bi.build_info()
        build = (f"{info.get('version')} (commit {info.get('commit')}, kernels "
                 f"{info.get('kernels')}, ptxas {info.get('ptxas')}) from "
                 f"{sgemm_bi.library_path()}")
    except Exception as e:  # an old library without build_info, or none: the call fails
        build = f"build info unavailable ({type(e).__name__}: {e})"
    has_native = native.ops() is not None
    matmul_flags = torch.backends.cuda.matmul
    now = datetime.datetime.now().astimezone()
    print(f"# sgemm-bi tensor-core tier vs torch, {now:%Y-%m-%d %H:%M %Z}")
    print()
    print(f"- GPU: {torch.cuda.get_device_name()}; torch {torch.__version__} "
          f"(CUDA {torch.version.cuda}); Python {sys.version.split()[0]}")
    print(f"- sgemm_bi {sgemm_bi.__version__}, checkout commit {commit()}; library {build}")
    print(f"- ours: sgemm_bi.linear (fwd) / sgemm_bi.matmul (dW on dY.t(), dX), "
          f"tier={TIER!r}; native op torch.ops.sgemm_bi.matmul: {'yes' if has_native else 'no'}")
    print(f"- torch: F.linear (fwd) / torch.matmul; reduced-precision reductions allowed: bf16 "
          f"{matmul_flags.allow_bf16_reduced_precision_reduction}, f16 "
          f"{matmul_flags.allow_fp16_reduced_precision_reduction}")
    print(f"- per row: median over {args.samples} samples of one CUDA-graph replay of "
          f"{args.calls} calls (cold: at least one call per buffer set), divided by the "
          "calls; torch/ours > 1: ours is faster")
    print(f"- floors: FLOPs / {args.peak_flops:.4g} FLOP/s; bytes (A + B + C) / "
          f"{args.peak_bw:.4g} B/s. timing: torch/ours, graph or loop (capture failed)")


def csv_header(args: argparse.Namespace) -> list[tuple[str, str]]:
    """What the CSV's reader needs to name the run: GPU, torch, library build, settings."""
    try:
        info = sgemm_bi.build_info()
        build = f"{info.get('version')} (commit {info.get('commit')})"
    except Exception as e:  # an old library without build_info
        build = f"unavailable ({type(e).__name__})"
    now = datetime.datetime.now(datetime.timezone.utc)
    return [("date", f"{now:%Y-%m-%d %H:%M} UTC"),
            ("gpu", torch.cuda.get_device_name()),
            ("torch", f"{torch.__version__} (CUDA {torch.version.cuda})"),
            ("checkout", commit()), ("library", build),
            ("samples", f"median of {args.samples} samples, each one CUDA-graph replay of "
                        f"{args.calls} calls (cold: at least one call per buffer set)")]


def print_table_head(method: str) -> None:
    """A table's title, naming its timing method, and column headings; the rows follow as
    they are measured, so a long run shows progress."""
    detail = {"warm": "one buffer set, each candidate's samples back to back",
              "cold": f"buffer sets of >= {COLD_BYTES >> 20} MiB of inputs rotated call by "
                      "call, candidates interleaved sample by sample"}[method]
    print(f"\n## {METHODS[method]} ({detail})\n")
    print("| " + " | ".join(title for title, _, _ in COLUMNS) + " |")
    print("|" + "|".join("---" for _ in COLUMNS) + "|", flush=True)


def print_row(row: dict[str, Any]) -> None:
    print("| " + " | ".join(fmt.format(row[key]) for _, key, fmt in COLUMNS) + " |", flush=True)


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true",
                   help="one shape of each kind, few samples: checks the script runs")
    p.add_argument("--method", choices=["warm", "cold", "both"], default="both")
    p.add_argument("--shapes", choices=["decode", "train", "llama", "suite", "all"],
                   default="all",
                   help="train: the large forward shapes, dW and dX; decode: M <= 256; "
                        "llama: the decode projections of bench_llama.py's models; suite: "
                        "every tensor-core row of bench_suite (for scripts/plot_bench.py)")
    p.add_argument("--csv", metavar="PATH", help="also write every row to this CSV file")
    p.add_argument("--samples", type=int, default=None, help="samples per row (default 40)")
    p.add_argument("--calls", type=int, default=None,
                   help="calls per sample, captured in one graph (default 20)")
    p.add_argument("--peak-flops", type=float, default=989e12,
                   help="dense bf16/f16 FLOP/s of the flop floor (default: H200's 989e12)")
    p.add_argument("--peak-bw", type=float, default=4.8e12,
                   help="memory B/s of the byte floor (default: H200's 4.8e12)")
    args = p.parse_args()
    args.samples = args.samples or (5 if args.quick else 40)
    args.calls = args.calls or (5 if args.quick else 20)
    return args


def main() -> None:
    args = parse_args()
    require_gpu()
    groups = all_cases()
    kinds = {"decode": ["decode"], "train": ["train", "dW", "dX"], "llama": ["llama"],
             "suite": ["suite"], "all": ["train", "decode", "dW", "dX"]}[args.shapes]
    cases = [c for kind in kinds for c in (groups[kind][:1] if args.quick else groups[kind])]
    methods = ["warm", "cold"] if args.method == "both" else [args.method]
    print_header(args)
    gen = torch.Generator(device="cuda").manual_seed(0)
    checked: dict[Case, tuple[float, float]] = {}
    rows = []
    try:
        for method in methods:
            print_table_head(method)
            for case in cases:
                rows.append(measure(case, method, args, gen, checked))
                print_row(rows[-1])
    except sgemm_bi.SgemmBiError as e:  # no tensor-core tier here, no library, ...
        fail(f"sgemm_bi refused the call: {type(e).__name__}: {e}")
    if args.csv:
        with open(args.csv, "w", newline="") as f:
            # `# key: value` lines first, as bench_suite's CSV has: scripts/plot_bench.py
            # prints them above the torch table.
            for key, value in csv_header(args):
                f.write(f"# {key}: {value}\n")
            out = csv.DictWriter(f, fieldnames=list(rows[0]))
            out.writeheader()
            out.writerows(rows)
        print(f"\nwrote {len(rows)} rows to {args.csv}")


if __name__ == "__main__":
    main()
