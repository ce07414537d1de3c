"""Where a grouped pass's time goes when it runs after another kernel: for one MoE layer of
``bench_grouped.py`` (128 experts, top-8, bf16), ``F.grouped_mm`` and ``sgemm_bi.grouped_mm``
each run sequences of passes back to back (``fwd`` the experts' forward, ``dx`` the input
gradient, ``dw`` the experts' weight gradient; ``fwd+dx+dw`` is a training step's three),
and torch.profiler (CUPTI) gives every kernel's time. A diagnosis tool: it prints a markdown
table and asserts nothing.

A pass repeated alone follows itself; in a model it follows another kernel, and a kernel's
time can differ between the two (docs/perf-notes.md, "Grouped GEMM, version 3", session 39:
the static tile order's forward took 237 µs after itself and 286–295 after the gradients).
Columns, per sequence (µs): "wall" the median over ``--samples`` samples of ``--calls``
sequences between two CUDA events, without the profiler; "span" from the first kernel's
start to the last one's end over ``--calls`` profiled sequences, per sequence; "busy" the
kernels' time per sequence; then each kernel name's median time, in launch order, with
its launches per sequence where more than one (torch's small argument-setup kernel
included; its grouped kernels may share a name across passes).

    SGEMM_BI_LIB=$PWD/.gpu/lib/libsgemm_bi.so python3 python/benchmarks/trace_grouped.py
    ... --layer 4096:2048:768:balanced --sequences fwd,dx,dw,fwd+dx+dw
    SGEMM_BI_GROUPED_ORDER=static ...   # the rows split's tile order forced (read once)

Exits 2 without PyTorch or a CUDA GPU.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any, Callable, Optional

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from profile_kernels import GroupedShape, parse_grouped  # noqa: E402

PASSES = ("fwd", "dx", "dw")
EXPERTS, TOP_K = 128, 8

try:
    import torch
    import torch.nn.functional as F
    from torch.profiler import ProfilerActivity, profile

    import sgemm_bi
    from bench_grouped import routing, timed
    IMPORT_ERROR: Optional[BaseException] = None
except ImportError as e:  # reported by main(), so that --help and the parsers still work
    torch = F = sgemm_bi = None  # type: ignore[assignment]
    IMPORT_ERROR = e


def parse_sequences(text: str) -> list[list[str]]:
    """``"fwd,fwd+dx+dw"`` → ``[["fwd"], ["fwd", "dx", "dw"]]``: comma-separated sequences of
    ``+``-joined passes; a clear error for anything else."""
    sequences = [s.split("+") for s in text.split(",") if s]
    if not sequences or any(not s or any(p not in PASSES for p in s) for s in sequences):
        raise argparse.ArgumentTypeError(
            f"sequences {text!r}: comma-separated, each passes of {', '.join(PASSES)} "
            "joined by '+', e.g. fwd,fwd+dx+dw")
    return sequences


def short(name: str, width: int = 48) -> str:
    """A kernel's name cut to ``width`` characters (CUTLASS's run to thousands)."""
    name = name.removeprefix("void ")
    return name if len(name) <= width else name[: width - 1] + "…"


Kernels = list[tuple[str, int, float]]


def kernel_times(fn: Callable[[], Any], calls: int) -> tuple[Kernels, float, float]:
    """``fn`` ``calls`` times under torch.profiler (after three warm-up calls): each kernel
    name in launch order with its launches per call and their median µs, and the busy and
    span µs per call."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
    events = [e for e in prof.events() if e.device_type.name == "CUDA"]
    if not events:
        return [], float("nan"), float("nan")
    by_name: dict[str, list[float]] = defaultdict(list)
    for e in sorted(events, key=lambda e: e.time_range.start):
        by_name[e.name].append(e.time_range.elapsed_us())
    busy = sum(e.time_range.elapsed_us() for e in events) / calls
    span = (max(e.time_range.end for e in events)
            - min(e.time_range.start for e in events)) / calls
    kernels = [(n, round(len(v) / calls), statistics.median(v)) for n, v in by_name.items()]
    return kernels, busy, span


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layer", type=parse_grouped,
                    default=parse_grouped("4096:2048:768:balanced"),
                    help="TOKENS:HIDDEN:WIDTH:balanced|zipf (default 4096:2048:768:balanced)")
    ap.add_argument("--sequences", type=parse_sequences,
                    default=parse_sequences("fwd,dx,dw,fwd+dx,dx+dw,dw+fwd,fwd+dx+dw"))
    ap.add_argument("--calls", type=int, default=20)
    ap.add_argument("--samples", type=int, default=15)
    args = ap.parse_args()
    if IMPORT_ERROR is not None or not torch.cuda.is_available():
        print(f"needs torch and a CUDA GPU ({IMPORT_ERROR or 'no GPU'})", file=sys.stderr)
        return 2
    if not hasattr(F, "grouped_mm"):
        print(f"torch {torch.__version__} has no F.grouped_mm", file=sys.stderr)
        return 2
    layer: GroupedShape = args.layer
    dev = torch.device("cuda")
    gen = torch.Generator().manual_seed(0)
    offs = routing(layer.tokens, EXPERTS, layer.zipf, gen).to(dev)
    rows = layer.tokens * TOP_K
    x = torch.randn(rows, layer.hidden, generator=gen).to(dev, torch.bfloat16)
    w = (torch.randn(EXPERTS, layer.width, layer.hidden, generator=gen) * 0.02).to(
        dev, torch.bfloat16)
    dy = torch.randn(rows, layer.width, generator=gen).to(dev, torch.bfloat16)
    wt = w.transpose(-2, -1)
    print(f"# Grouped passes in sequence, {torch.cuda.get_device_name(0)}, torch "
          f"{torch.__version__}, sgemm-bi {sgemm_bi.library_version()}; {layer.label}, "
          f"{EXPERTS} experts, top-{TOP_K}, bf16; µs per sequence")
    print()
    print("| sequence | who | wall | span | busy | kernels (median µs, launch order) |")
    print("|---|---|---:|---:|---:|---|")
    for seq in args.sequences:
        for who, mm in (("torch", F.grouped_mm), ("ours", sgemm_bi.grouped_mm)):
            ops = {"fwd": lambda mm=mm: mm(x, wt, offs=offs),
                   "dx": lambda mm=mm: mm(dy, w, offs=offs),
                   "dw": lambda mm=mm: mm(dy.t(), x, offs=offs)}

            def run(seq: list[str] = seq, ops: dict[str, Callable[[], Any]] = ops) -> None:
                for p in seq:
                    ops[p]()
            wall = timed(run, 5, args.samples)
            kernels, busy, span = kernel_times(run, args.calls)
            listed = "; ".join(f"{short(n)}{f' ×{c}' if c > 1 else ''} {t:.1f}"
                               for n, c, t in kernels)
            print(f"| {'+'.join(seq)} | {who} | {wall:.1f} | {span:.1f} | {busy:.1f} | "
                  f"{listed} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
