"""Deterministic training with sgemm-bi, then batch-invariant inference with the mode.

1. Trains a small transformer-style model (pre-norm attention + MLP blocks) twice from one
   seed, with every linear layer an ``sgemm_bi.Linear`` and the attention products
   ``sgemm_bi.matmul``, and asserts that the two runs end with bit-identical weights.
2. Loads the trained weights into the same model written with plain ``nn.Linear`` and
   ``torch.matmul`` and runs it under ``sgemm_bi.mode()``: the outputs are bit-identical to
   the sgemm-bi model's, and the output for one sequence does not depend on how many other
   sequences are in the batch (1 vs 64). Without the mode (torch's own GEMMs) the same
   check is reported, not asserted.

Runs on the GPU when there is one, else on the CPU::

    python python/examples/train_deterministic.py [--device cpu|cuda] [--steps N]
                                                  [--tier auto|scalar|tensor_cores]
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path
from typing import Callable

import torch
import torch.nn.functional as F
from torch import Tensor, nn

try:
    import sgemm_bi
except ImportError:  # running from a clone without `pip install ./python`
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    import sgemm_bi


class Block(nn.Module):
    """Pre-norm causal self-attention and a GELU MLP, with residual connections."""

    def __init__(self, d: int, heads: int, make_linear: Callable[[int, int], nn.Module],
                 matmul: Callable[[Tensor, Tensor], Tensor]) -> None:
        super().__init__()
        self.heads, self.matmul = heads, matmul
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = make_linear(d, 3 * d), make_linear(d, d)
        self.fc1, self.fc2 = make_linear(d, 4 * d), make_linear(4 * d, d)

    def forward(self, x: Tensor) -> Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
        q, k, v = (z.reshape(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        scores = self.matmul(q, k.transpose(-1, -2)) / math.sqrt(d // self.heads)
        causal = torch.ones(t, t, dtype=torch.bool, device=x.device).triu(1)
        att = scores.masked_fill(causal, float("-inf")).softmax(dim=-1)
        y = self.matmul(att, v).transpose(1, 2).reshape(b, t, d)
        x = x + self.proj(y)
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class Model(nn.Module):
    """Input projection, ``layers`` blocks, a final norm and an output head."""

    def __init__(self, d_in: int, d: int, heads: int, layers: int, d_out: int,
                 make_linear: Callable[[int, int], nn.Module],
                 matmul: Callable[[Tensor, Tensor], Tensor]) -> None:
        super().__init__()
        self.inp = make_linear(d_in, d)
        self.blocks = nn.ModuleList(Block(d, heads, make_linear, matmul) for _ in range(layers))
        self.ln = nn.LayerNorm(d)
        self.head = make_linear(d, d_out)

    def forward(self, x: Tensor) -> Tensor:
        h = self.inp(x)
        for blk in self.blocks:
            h = blk(h)
        return self.head(self.ln(h))


SIZES = dict(d_in=16, d=64, heads=4, layers=2, d_out=8)


def sgemm_bi_model(tier: str, device: str) -> Model:
    """The model with every GEMM on the engine."""
    return Model(**SIZES, make_linear=lambda i, o: sgemm_bi.Linear(i, o, tier=tier),
                 matmul=lambda a, b: sgemm_bi.matmul(a, b, tier=tier)).to(device)


def torch_model(device: str) -> Model:
    """The same model in plain torch (nn.Linear, torch.matmul)."""
    return Model(**SIZES, make_linear=nn.Linear, matmul=torch.matmul).to(device)


def train(seed: int, steps: int, tier: str, device: str) -> tuple[Model, float]:
    """Trains from ``seed`` on a synthetic sequence task; returns the model and last loss."""
    torch.manual_seed(seed)
    model = sgemm_bi_model(tier, device)
    teacher = torch.randn(SIZES["d_in"], SIZES["d_out"],
                          generator=torch.Generator().manual_seed(seed))
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    data = torch.Generator().manual_seed(seed + 1)
    loss = torch.zeros(())
    for _ in range(steps):
        x = torch.randn(8, 16, SIZES["d_in"], generator=data)
        y = torch.tanh(x.cumsum(dim=1) @ teacher / 4)  # depends on the past: needs attention
        x, y = x.to(device), y.to(device)
        loss = F.mse_loss(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    return model, float(loss.detach())


def same_bits(a: Tensor, b: Tensor) -> bool:
    """Bitwise equality (NaNs included)."""
    return a.shape == b.shape and torch.equal(a.view(torch.int32), b.view(torch.int32))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--tier", default="auto", choices=sgemm_bi.ops.TIERS)
    args = p.parse_args(argv)
    # Every GEMM runs on sgemm-bi; torch is asked to refuse a nondeterministic kernel for the
    # rest of the model (only while training: the comparison with cuBLAS below needs it off).
    torch.use_deterministic_algorithms(True)
    try:
        t0 = time.perf_counter()
        m1, loss1 = train(0, args.steps, args.tier, args.device)
        m2, loss2 = train(0, args.steps, args.tier, args.device)
        elapsed = time.perf_counter() - t0
    finally:
        torch.use_deterministic_algorithms(False)
    s1, s2 = m1.state_dict(), m2.state_dict()
    differing = [k for k in s1 if not same_bits(s1[k].float(), s2[k].float())]
    checksum = sum(float(v.double().sum()) for v in s1.values())
    print(f"trained twice on {args.device} ({args.steps} steps each, tier={args.tier}, "
          f"{elapsed:.1f} s): final loss {loss1:.6f} / {loss2:.6f}, checksum {checksum:.9e}")
    assert not differing, f"the two runs differ in {differing}"
    print(f"  bit-identical weights: {len(s1)} tensors")

    # The trained weights in a plain-torch model, run under the mode.
    plain = torch_model(args.device)
    plain.load_state_dict(s1)
    m1.eval(), plain.eval()
    x = torch.randn(64, 16, SIZES["d_in"], generator=torch.Generator().manual_seed(7))
    x = x.to(args.device)
    with torch.no_grad():
        ref = m1(x)
        with sgemm_bi.mode(tier=args.tier):
            full = plain(x)
            rows = {bs: plain(x[:bs]) for bs in (1, 7, 64)}
        cublas_full, cublas_one = plain(x), plain(x[:1])
    assert same_bits(full, ref), "the mode and sgemm_bi.Linear disagree"
    print("  nn.Linear + torch.matmul under sgemm_bi.mode() == sgemm_bi.Linear: bit-identical")
    for bs, out in rows.items():
        assert same_bits(out, full[:bs]), f"batch {bs} differs from the same rows of batch 64"
    print("  batch invariance under the mode: sequences 0.. of batches 1, 7, 64 are bit-identical")
    torch_same = same_bits(cublas_one, cublas_full[:1])
    backend = "cuBLAS" if args.device.startswith("cuda") else "torch's CPU GEMM"
    print(f"  without the mode ({backend}): batch 1 vs batch 64, sequence 0 "
          f"{'identical' if torch_same else 'DIFFERS'} "
          f"(max |diff| {float((cublas_one - cublas_full[:1]).abs().max()):.3e})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
