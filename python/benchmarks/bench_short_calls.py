"""GPU time of one short call as a model's decode step makes it: after torch's kernels, not
after another call of ours. Prints a markdown table: torch's call and the same call under
``sgemm_bi``'s mode, µs, on the same CUDA tensors.

Back-to-back benchmarks (``bench_attention_scores.py``, ``bench_torch_baseline.py``) let
each call of ours start while the previous one ends (programmatic dependent launch), which
hides a call's fixed costs; in a model most calls follow a torch kernel. Each sample here
replays a CUDA graph of ``--calls`` rounds of [what comes before, the call, a 1 µs torch
kernel] between two CUDA events, minus the same graph without the call; a row is the median
over ``--samples`` samples, the graphs interleaved. What comes before:

- ``after a kernel``: a 1 µs elementwise kernel (the call's code and operands stay cached);
- ``after a copy``: a 96 MiB copy, then that kernel (the operands leave L2);
- ``after other calls``: three other decode calls (``1 × 2048 × 5632``, ``attn @ v``,
  ``1 × 2048 × 2048``), the copy and the kernel. A call whose kernel is not among theirs
  then starts with code that was not run recently (docs/perf-notes.md, "Short calls: the
  instruction fetch").

    SGEMM_BI_LIB=$PWD/.gpu/lib/libsgemm_bi.so python3 python/benchmarks/bench_short_calls.py
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
from typing import Callable

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import sgemm_bi  # noqa: E402

Call = Callable[[], object]


def graph(fn: Call, calls: int) -> torch.cuda.CUDAGraph:
    """A CUDA graph of `calls` calls of `fn` (warmed up on a side stream first)."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(2):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(calls):
            fn()
    return g


def replay_us(g: torch.cuda.CUDAGraph, calls: int) -> float:
    """µs per round of one replay of `g`."""
    start, end = (torch.cuda.Event(enable_timing=True) for _ in range(2))
    start.record()
    g.replay()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) * 1000 / calls


def captured(under_mode: bool, make: Callable[[], torch.cuda.CUDAGraph]) -> torch.cuda.CUDAGraph:
    """`make()` with the mode on or off: the graph records the kernels chosen then."""
    if not under_mode:
        return make()
    with sgemm_bi.mode():
        return make()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--calls", type=int, default=20)
    p.add_argument("--samples", type=int, default=11)
    args = p.parse_args()
    if not torch.cuda.is_available():
        print("no CUDA device: nothing to benchmark")
        return
    gen = torch.Generator(device="cuda").manual_seed(0)

    def randn(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, device="cuda", dtype=torch.bfloat16, generator=gen)

    # (name, operands, op): a decode step's calls of the 1.1B model of bench_llama.py at
    # batch 1 (32 heads, a static cache of 520 keys) and batch 8 (256 score products).
    rows = [
        ("scores", "32 × (1 × 64) · (64 × 520)", (randn(32, 1, 64), randn(32, 520, 64).mT),
         torch.matmul),
        ("scores", "256 × (1 × 64) · (64 × 520)", (randn(256, 1, 64), randn(256, 520, 64).mT),
         torch.matmul),
        ("attn @ v", "32 × (1 × 520) · (520 × 64)", (randn(32, 1, 520), randn(32, 520, 64)),
         torch.matmul),
        ("F.linear", "1 × 2048 × 2048", (randn(1, 2048), randn(2048, 2048)), F.linear),
        ("F.linear", "1 × 2048 × 256", (randn(1, 2048), randn(256, 2048)), F.linear),
        ("F.linear", "1 × 2048 × 5632", (randn(1, 2048), randn(5632, 2048)), F.linear),
        ("F.linear", "1 × 5632 × 2048", (randn(1, 5632), randn(2048, 5632)), F.linear),
    ]
    others = [((randn(1, 2048), randn(5632, 2048)), F.linear),
              ((randn(32, 1, 520), randn(32, 520, 64)), torch.matmul),
              ((randn(1, 2048), randn(2048, 2048)), F.linear)]
    src = torch.empty(48 << 20, device="cuda", dtype=torch.bfloat16)
    dst = torch.empty_like(src)
    tick = torch.zeros(4096, device="cuda", dtype=torch.bfloat16)
    after = torch.zeros(4096, device="cuda", dtype=torch.bfloat16)

    def before(kind: str) -> Call:
        def run() -> None:
            if kind == "after other calls":
                for operands, op in others:
                    op(*operands)
            if kind != "after a kernel":
                dst.copy_(src)
            tick.mul_(1.0)
        return run

    kinds = ["after a kernel", "after a copy", "after other calls"]
    print(f"{torch.cuda.get_device_name()}; torch {torch.__version__}; sgemm_bi "
          f"{sgemm_bi.__version__}; bf16; CUDA graph of {args.calls} rounds, "
          f"median of {args.samples}; µs per call, torch / mode")
    print()
    print("| call | shape | " + " | ".join(f"{k}: torch | mode | ÷" for k in kinds) + " |")
    print("|---|---|" + "---:|---:|---:|" * len(kinds))
    for name, shape, operands, op in rows:
        graphs = {}
        for kind in kinds:
            pre = before(kind)
            for mode in (False, True):
                graphs[(kind, mode, False)] = captured(
                    mode, lambda: graph(lambda: (pre(), after.mul_(1.0)), args.calls))
                graphs[(kind, mode, True)] = captured(
                    mode, lambda: graph(lambda: (pre(), op(*operands), after.mul_(1.0)),
                                        args.calls))
        samples: dict[tuple[str, bool, bool], list[float]] = {k: [] for k in graphs}
        for _ in range(args.samples):
            for key, g in graphs.items():
                samples[key].append(replay_us(g, args.calls))
        med = {key: statistics.median(v) for key, v in samples.items()}
        cells = []
        for kind in kinds:
            torch_us = med[(kind, False, True)] - med[(kind, False, False)]
            ours_us = med[(kind, True, True)] - med[(kind, True, False)]
            ratio = f"{torch_us / ours_us:.2f}" if ours_us > 0 else "–"
            cells.append(f"{torch_us:.2f} | {ours_us:.2f} | {ratio}")
        print(f"| {name} | {shape} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
