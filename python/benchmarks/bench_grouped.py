"""Grouped GEMM at Mixture-of-Experts shapes: ``sgemm_bi.grouped_mm`` next to
``F.grouped_mm`` and a loop of per-expert ``torch.matmul`` on the same CUDA tensors. Prints a
markdown table.

Shapes: 128 experts, top-8 routing (tokens × 8 rows routed), hidden 2048 or 4096, expert
width 768 or 1536, 4k and 16k tokens (``--only`` for others); routing balanced or Zipf-like (expert i drawn with
weight 1/(i+1)). Each shape is timed for the experts' forward (``[T·8, H] × [E, H, W]``)
and for forward + backward (the input gradient and the experts' weight gradient).

Ours runs with the offsets on the GPU (what a model passes) and, as its own row, on the
host. Each sample is a plain loop of ``--calls`` calls between two CUDA events, not a graph
replay, so a call's host cost counts where it exceeds its GPU time (with host offsets ours
launches one kernel per group); a row is the median per-call GPU time over ``--samples``
samples, back to back on warm buffers, the candidates' samples interleaved (A B, B A, ...)
so that the GPU's clocks drifting over a run favour none of them.
Floors: FLOPs over 989e12 (H200 dense bf16) and bytes of A + B + C over 4.8e12 B/s.

Before timing, each shape checks that ours repeats its bits and that every expert's rows
have the bits of the dense ``sgemm_bi.matmul`` of those rows (two experts sampled).

    SGEMM_BI_LIB=$PWD/.gpu/lib/libsgemm_bi.so python3 python/benchmarks/bench_grouped.py
    ... --quick     # two shapes, few samples
    ... --ours-vs-torch   # only F.grouped_mm and ours with device offsets (A/B runs)
    ... --passes    # dx and dw rows beside fwd and fwd+bwd
    ... --pass dw   # only the weight gradient's rows (repeatable)
    ... --only 4096:2048   # the shapes of 4096 tokens and hidden 2048 only
    ... --only 65536:4096  # 64k tokens, hidden 4096

Exits 2 without PyTorch or a CUDA GPU.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path
from typing import Any, Callable, Optional

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

try:
    import torch
    import torch.nn.functional as F

    import sgemm_bi
    IMPORT_ERROR: Optional[BaseException] = None
except ImportError as e:
    torch = F = sgemm_bi = None  # type: ignore[assignment]
    IMPORT_ERROR = e

PEAK_FLOPS = 989e12
PEAK_BW = 4.8e12
EXPERTS = 128
TOP_K = 8


def routing(tokens: int, experts: int, zipf: bool, gen: Any) -> Any:
    rows = tokens * TOP_K
    if zipf:
        w = 1.0 / torch.arange(1, experts + 1, dtype=torch.float64)
    else:
        w = torch.ones(experts, dtype=torch.float64)
    picks = torch.multinomial(w, rows, replacement=True, generator=gen)
    return torch.bincount(picks, minlength=experts).cumsum(0).to(torch.int32)


def timed(fn: Callable[[], Any], calls: int, samples: int) -> float:
    """Median µs per call of ``fn``, each sample ``calls`` calls between CUDA events (NaN,
    with the reason on stderr, when ``fn`` raises)."""
    return timed_together({"a candidate": fn}, calls, samples)["a candidate"]


def timed_together(fns: dict[str, Optional[Callable[[], Any]]], calls: int,
                   samples: int) -> dict[str, float]:
    """:func:`timed` for several candidates, their samples interleaved (A B, then B A, ...):
    a drift of the clocks or the temperature over the run falls on all of them alike, not
    on whichever runs last. NaN for a candidate that is None or raises."""
    live: dict[str, Callable[[], Any]] = {}
    for name, fn in fns.items():
        if fn is None:
            continue
        try:
            for _ in range(3):
                fn()
            live[name] = fn
        except (RuntimeError, NotImplementedError) as e:
            print(f"skipped {name}: {e}", file=sys.stderr)
    torch.cuda.synchronize()
    times: dict[str, list[float]] = {name: [] for name in live}
    names = list(live)
    for i in range(samples):
        for name in (names if i % 2 == 0 else names[::-1]):
            fn = live[name]
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(calls):
                fn()
            end.record()
            end.synchronize()
            times[name].append(start.elapsed_time(end) * 1e3 / calls)
    return {name: statistics.median(times[name]) if name in times else float("nan")
            for name in fns}


def check(x: Any, w: Any, offs: Any) -> None:
    a = sgemm_bi.grouped_mm(x, w.transpose(-2, -1), offs=offs)
    b = sgemm_bi.grouped_mm(x, w.transpose(-2, -1), offs=offs)
    assert torch.equal(a.view(torch.int16), b.view(torch.int16)), "ours does not repeat"
    ends = offs.tolist()
    for e in (0, len(ends) // 2):
        s, t = (ends[e - 1] if e else 0), ends[e]
        if t > s:
            dense = sgemm_bi.linear(x[s:t], w[e])
            assert torch.equal(a[s:t].view(torch.int16), dense.view(torch.int16)), (
                f"expert {e}: not the dense call's bits")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--calls", type=int, default=5)
    ap.add_argument("--samples", type=int, default=15)
    ap.add_argument("--ours-vs-torch", action="store_true",
                    help="skip the loop of matmul and ours with host offsets")
    ap.add_argument("--passes", action="store_true",
                    help="also time the input gradient (dx) and the experts' weight "
                         "gradient (dw) alone")
    ap.add_argument("--pass", dest="only_passes", action="append", default=[],
                    choices=["fwd", "dx", "dw", "fwd+bwd"],
                    help="time only this pass (repeatable; implies --passes)")
    ap.add_argument("--only", action="append", default=[], metavar="TOKENS:HIDDEN",
                    help="only the shapes of these tokens (any number) and hidden size "
                         "(2048 or 4096), e.g. 4096:2048 or 65536:4096 (repeatable)")
    args = ap.parse_args()
    if IMPORT_ERROR is not None or not torch.cuda.is_available():
        print(f"needs torch and a CUDA GPU ({IMPORT_ERROR or 'no GPU'})", file=sys.stderr)
        return 2
    dev = torch.device("cuda")
    gen = torch.Generator().manual_seed(0)
    # The operands are drawn on the GPU: at 64k tokens × 4096, x alone is 2^31 normals.
    dev_gen = torch.Generator(device=dev).manual_seed(0)
    widths = {2048: 768, 4096: 1536}
    layers = [(t, h) for t in (4096, 16384) for h in widths]
    if args.only:
        layers = [tuple(int(v) for v in o.split(":")) for o in args.only]
        unknown = sorted({h for _, h in layers} - widths.keys())
        if unknown:
            ap.error(f"--only: hidden sizes are {sorted(widths)}, not {unknown}")
    shapes = [(t, h, widths[h], z) for t, h in layers for z in (False, True)]
    samples = args.samples
    if args.quick:
        shapes, samples = [(4096, 2048, 768, False), (4096, 2048, 768, True)], 5
    has_torch_grouped = hasattr(F, "grouped_mm")
    print(f"# Grouped GEMM, {torch.cuda.get_device_name(0)}, torch {torch.__version__}, "
          f"sgemm-bi {sgemm_bi.library_version()}; {EXPERTS} experts, top-{TOP_K}, bf16; "
          f"median of {samples} samples × {args.calls} calls, back to back, warm; µs per call")
    print()
    print("| tokens | hidden × width | routing | pass | floor | F.grouped_mm | loop of matmul "
          "| ours (device offs) | ours (host offs) | F.grouped_mm / ours |")
    print("|---:|---|---|---|---:|---:|---:|---:|---:|---:|")
    for tokens, hidden, width, zipf in shapes:
        offs = routing(tokens, EXPERTS, zipf, gen).to(dev)
        offs_host = offs.cpu()
        rows = tokens * TOP_K
        bf16 = {"generator": dev_gen, "device": dev, "dtype": torch.bfloat16}
        x = torch.randn(rows, hidden, **bf16)
        w = torch.randn(EXPERTS, width, hidden, **bf16) * 0.02
        dy = torch.randn(rows, width, **bf16)
        check(x, w, offs)
        ends = offs_host.tolist()
        starts = [0] + ends[:-1]

        def loop_fwd() -> Any:
            return [x[s:e] @ w[g].t() for g, (s, e) in enumerate(zip(starts, ends))]

        def loop_bwd() -> Any:
            out = []
            for g, (s, e) in enumerate(zip(starts, ends)):
                out.append(dy[s:e] @ w[g])          # dx
                out.append(dy[s:e].t() @ x[s:e])    # dw
            return out

        wt = w.transpose(-2, -1)
        flops = 2.0 * rows * hidden * width
        bytes_ = 2.0 * (rows * hidden + EXPERTS * hidden * width + rows * width)
        passes = [("fwd", 1), ("fwd+bwd", 3)]
        if args.passes or args.only_passes:
            passes = [("fwd", 1), ("dx", 1), ("dw", 1), ("fwd+bwd", 3)]
        if args.only_passes:
            passes = [(name, mult) for name, mult in passes if name in args.only_passes]
        for pass_, mult in passes:
            floor = max(mult * flops / PEAK_FLOPS, mult * bytes_ / PEAK_BW) * 1e6

            def calls_of(mm: Callable[..., Any], o: Any) -> Callable[[], Any]:
                def fwd() -> Any:
                    return mm(x, wt, offs=o)

                def dx() -> Any:
                    return mm(dy, w, offs=o)

                def dw() -> Any:
                    return mm(dy.t(), x, offs=o)                      # [E, W, H]

                def both() -> Any:
                    fwd()
                    dx()
                    return dw()
                return {"fwd": fwd, "dx": dx, "dw": dw, "fwd+bwd": both}[pass_]

            def ours(o: Any) -> Callable[[], Any]:
                return calls_of(sgemm_bi.grouped_mm, o)

            theirs = calls_of(F.grouped_mm, offs) if has_torch_grouped else None

            with_host = not args.ours_vs_torch and pass_ in ("fwd", "fwd+bwd")
            t = timed_together({"theirs": theirs, "dev": ours(offs),
                                "host": ours(offs_host) if with_host else None},
                               args.calls, samples)
            t_theirs, t_dev, t_host = t["theirs"], t["dev"], t["host"]
            t_loop = float("nan")
            if with_host:
                t_loop = timed(loop_fwd if mult == 1 else (lambda: (loop_fwd(), loop_bwd())),
                               1, max(3, samples // 3))
            print(f"| {tokens} | {hidden} × {width} | {'zipf' if zipf else 'balanced'} | "
                  f"{pass_} | {floor:.0f} | {t_theirs:.0f} | {t_loop:.0f} | {t_dev:.0f} | "
                  f"{t_host:.0f} | {t_theirs / t_dev:.2f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
