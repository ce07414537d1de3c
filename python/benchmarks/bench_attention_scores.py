"""GPU time of a decode step's attention scores and vocabulary heads: ``torch.matmul`` /
``F.linear`` under ``sgemm_bi``'s mode against the same calls in plain torch, on the same
CUDA tensors. Prints a markdown table.

The scores are what eager attention computes at each decode step: batch × heads products of
one query row by the head size K against that head's cached keys (``q @ k.transpose``, B
K-contiguous), which the mode routes to the tensor-core tier; then the softmaxed scores
times the cached values (``attn @ v``, B N-contiguous). Each sample replays a CUDA
graph of ``--calls`` calls over rotating buffer sets of at least 256 MiB (cold L2) between
two CUDA events; a row is the median per-call time over ``--samples`` samples. Before
timing, each product shape checks batch invariance: the first product computed alone gives
the bits it has inside the batch.

    SGEMM_BI_LIB=$PWD/.gpu/lib/libsgemm_bi.so python3 python/benchmarks/bench_attention_scores.py
    SGEMM_BI_SKINNY=64 ... # force one tile width for the narrow tiles (64, 48, 32, 16, 128, 256)

``SGEMM_BI_SKINNY`` is read once per process, so compare widths in separate runs.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
from typing import Callable, Sequence

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import sgemm_bi  # noqa: E402

# (batch × heads, head size, cached keys): the 0.2B and 1.1B models of bench_llama.py at
# batch 1 and 8 (16 and 32 heads, a static cache of 520), and longer caches.
SCORES = [(16, 64, 520), (32, 64, 520), (128, 64, 520), (256, 64, 520), (256, 64, 2048),
          (256, 128, 2048), (64, 128, 4096)]
# The same with the softmaxed scores times the cached values (``attn @ v``: one row of
# `keys` weights by a row-major keys × head-size V, B N-contiguous).
WEIGHTED = [(16, 64, 520), (32, 64, 520), (256, 64, 520), (256, 64, 2048), (256, 128, 2048)]
# (M, K, N): vocabulary heads and a wide projection at decode.
HEADS = [(1, 2048, 32000), (8, 2048, 32000), (1, 1024, 32000), (1, 4096, 14336),
         (8, 4096, 14336), (16, 4096, 14336)]


def gpu_time(fn: Callable[..., object], args: Sequence[tuple[torch.Tensor, ...]], calls: int,
             samples: int) -> float:
    """Median µs per call of a CUDA graph of `calls` calls of `fn`, cycling over `args`."""
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        for i in range(3):
            fn(*args[i % len(args)])
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for i in range(calls):
            fn(*args[i % len(args)])
    times = []
    for _ in range(samples):
        start, end = (torch.cuda.Event(enable_timing=True) for _ in range(2))
        start.record()
        graph.replay()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) * 1000 / calls)
    return statistics.median(times)


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

    width = os.environ.get("SGEMM_BI_SKINNY", "planner's")
    print(f"{torch.cuda.get_device_name()}; torch {torch.__version__}; sgemm_bi "
          f"{sgemm_bi.__version__}; bf16; narrow tile width: {width}; cold, CUDA graph of "
          f"{args.calls} calls, median of {args.samples}")
    print()
    print("| call | shape | torch µs | mode µs | torch ÷ mode | alone = in the batch |")
    print("|---|---|---:|---:|---:|---|")
    for call, batch, d, keys in [("scores", *s) for s in SCORES] + [("attn @ v", *s) for s in
                                                                      WEIGHTED]:
        sets = max(2, (256 << 20) // (batch * keys * d * 2) + 1)
        if call == "scores":
            data = [(randn(batch, 1, d), randn(batch, keys, d).transpose(1, 2))
                    for _ in range(sets)]
            shape = f"{batch} × (1 × {d}) · ({d} × {keys})"
        else:
            data = [(randn(batch, 1, keys), randn(batch, keys, d)) for _ in range(sets)]
            shape = f"{batch} × (1 × {keys}) · ({keys} × {d})"
        a, b = data[0]
        with sgemm_bi.mode():
            same = torch.equal(torch.matmul(a, b)[:1], torch.matmul(a[:1], b[:1]))
            ours = gpu_time(torch.matmul, data, args.calls, args.samples)
        theirs = gpu_time(torch.matmul, data, args.calls, args.samples)
        print(f"| {call} | {shape} | {theirs:.1f} | {ours:.1f} | {theirs / ours:.2f} | "
              f"{'yes' if same else 'NO'} |", flush=True)
        del data
        torch.cuda.empty_cache()
    linear = torch.nn.functional.linear
    for m, k, n in HEADS:
        sets = max(2, (512 << 20) // (n * k * 2) + 1)
        data = [(randn(m, k), randn(n, k)) for _ in range(sets)]
        with sgemm_bi.mode():  # the graph holds the routed kernels
            ours = gpu_time(linear, data, args.calls, args.samples)
        theirs = gpu_time(linear, data, args.calls, args.samples)
        print(f"| F.linear | {m} × {k} × {n} | {theirs:.1f} | {ours:.1f} | {theirs / ours:.2f} "
              "| |", flush=True)
        del data
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
