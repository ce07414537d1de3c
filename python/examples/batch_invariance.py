"""Batch invariance: torch's own GEMM (cuBLAS on a GPU) against sgemm-bi.

For ``Y = X · Wᵀ`` with X ``[M, K]`` it compares the first rows of the result for growing
M with the result for M = 1, bit for bit. A batch-invariant GEMM gives the same rows
whatever M is; torch's GEMM picks kernels (tile shapes, split-K) by shape, and the
reduction order, hence the bits, can change with M.

    python python/examples/batch_invariance.py [--device cuda|cpu] [--dtype bf16|f16|f32]
                                               [--k 4096] [--n 4096] [--tier auto|scalar|...]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

try:
    import sgemm_bi
except ImportError:  # running from a clone without `pip install ./python`
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    import sgemm_bi

DTYPES = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32}


def main(argv: list[str] | None = None) -> int:
    gpu = torch.cuda.is_available()
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", default="cuda" if gpu else "cpu")
    p.add_argument("--dtype", default="bf16", choices=DTYPES)
    p.add_argument("--k", type=int, default=4096 if gpu else 512)
    p.add_argument("--n", type=int, default=4096 if gpu else 512)
    p.add_argument("--rows", type=int, default=1, help="how many leading rows to compare")
    p.add_argument("--tier", default="auto", choices=sgemm_bi.ops.TIERS)
    p.add_argument("--max-m", type=int, default=8192 if gpu else 1024)
    args = p.parse_args(argv)

    dtype, dev = DTYPES[args.dtype], torch.device(args.device)
    g = torch.Generator().manual_seed(0)
    ms = [m for m in (1, 2, 3, 8, 16, 64, 128, 256, 1024, 2048, 4096, 8192) if m <= args.max_m]
    x = torch.randn(ms[-1], args.k, generator=g).to(dev, dtype)
    w = (torch.randn(args.n, args.k, generator=g) / args.k**0.5).to(dev, dtype)
    r = max(args.rows, 1)
    base_torch = F.linear(x[:r], w)
    base_bi = sgemm_bi.linear(x[:r], w, tier=args.tier)
    name = "cuBLAS" if dev.type == "cuda" else "torch CPU"
    print(f"Y = X·Wᵀ, K={args.k}, N={args.n}, {args.dtype} on {dev}; rows 0..{r - 1} for M "
          f"against M={r}")
    print(f"{'M':>6} | {name + ' same bits':>18} {'max |diff|':>10} | {'sgemm-bi same bits':>18}")
    torch_changed = bi_changed = 0
    for m in ms:
        if m < r:
            continue
        yt = F.linear(x[:m], w)[:r]
        yb = sgemm_bi.linear(x[:m], w, tier=args.tier)[:r]
        same_t = torch.equal(yt, base_torch)
        same_b = torch.equal(yb, base_bi)
        torch_changed += not same_t
        bi_changed += not same_b
        diff = float((yt.float() - base_torch.float()).abs().max())
        print(f"{m:>6} | {str(same_t):>18} {diff:>10.3e} | {str(same_b):>18}")
    print(f"{name}: rows changed with M at {torch_changed} of {len(ms)} sizes; "
          f"sgemm-bi: {bi_changed} of {len(ms)}")
    return 1 if bi_changed else 0


if __name__ == "__main__":
    sys.exit(main())
