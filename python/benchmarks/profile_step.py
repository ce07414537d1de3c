"""Where the time of a step goes, with and without ``sgemm_bi.mode()``: torch.profiler's
kernel table (CUDA time per kernel name) and the host's busiest ops, for an ``nn.Linear``
forward + backward and for a Llama training step (transformers, random weights). A
diagnosis tool: it prints tables, it asserts nothing.

    python python/benchmarks/profile_step.py [--rows 12] [--what linear|llama|both]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

import torch  # noqa: E402
from torch import nn  # noqa: E402
from torch.profiler import ProfilerActivity, profile  # noqa: E402

import sgemm_bi  # noqa: E402


def show(title: str, step, rows: int, iters: int = 5) -> None:
    for on in (False, True):
        for _ in range(3):
            if on:
                sgemm_bi.enable()
            step()
            if on:
                sgemm_bi.disable()
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            if on:
                sgemm_bi.enable()
            for _ in range(iters):
                step()
            torch.cuda.synchronize()
            if on:
                sgemm_bi.disable()
        print(f"\n### {title}, {'under the mode' if on else 'plain'} ({iters} steps)")
        print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=rows,
                                        max_name_column_width=60))


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--rows", type=int, default=12)
    p.add_argument("--what", default="both", choices=("linear", "llama", "both"))
    args = p.parse_args()
    dev, dt = torch.device("cuda"), torch.bfloat16
    if args.what in ("linear", "both"):
        layer = nn.Linear(4096, 4096, device=dev, dtype=dt)
        x = torch.randn(8, 4096, device=dev, dtype=dt, requires_grad=True)
        dy = torch.randn(8, 4096, device=dev, dtype=dt)
        show("nn.Linear 8x4096x4096 fwd+bwd", lambda: layer(x).backward(dy), args.rows, 20)
    if args.what in ("llama", "both"):
        import transformers
        from bench_llama import SIZES, make_model

        model = make_model(transformers, SIZES["cuda"]["llama-1.1B"], "sdpa", dev, dt, 600)
        ids = torch.randint(0, 32000, (4, 512), device=dev)
        opt = torch.optim.SGD(model.parameters(), lr=1e-6)

        def step() -> None:
            model(input_ids=ids, labels=ids).loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)

        show("llama-1.1B sdpa training step 4x512", step, args.rows, 3)


if __name__ == "__main__":
    main()
