"""A Mixture-of-Experts block on ``sgemm_bi.grouped_mm``: trained twice, served alone and in a
batch.

The block routes each token to its top-2 of E experts (a router matmul, a softmax, top-k),
groups the tokens by expert (a stable sort), runs every expert's up projection, a GELU and
its down projection as grouped GEMMs, and adds each token's two expert outputs with its
routing weights. Three checks:

1. Training it twice from one seed ends with bit-identical weights (the grouped GEMMs'
   forward, input gradient and experts' weight gradient are deterministic).
2. A token served alone gives the bits it gives inside a batch of other tokens, though the
   batch sends different numbers of tokens to every expert (each expert's rows have the
   bits of the dense call of those rows).
3. The same with torch's own kernels, counting how many output elements of the token differ:
   ``F.grouped_mm``, and a loop of one ``torch.matmul`` per expert (cuBLAS on a GPU, which
   picks its kernel by each expert's number of tokens). Where a count is not 0, that way is
   not batch-invariant; where it is 0, it happened to be so at this shape (nothing in torch
   promises it).

    python python/examples/moe_block.py [--device cuda|cpu] [--steps 8]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Callable

import torch
import torch.nn.functional as F

try:
    import sgemm_bi
except ImportError:  # running from a clone without `pip install ./python`
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    import sgemm_bi

GroupedMm = Callable[..., torch.Tensor]


class MoE(torch.nn.Module):
    def __init__(self, hidden: int, width: int, experts: int, top_k: int = 2) -> None:
        super().__init__()
        self.top_k, self.experts = top_k, experts
        self.router = torch.nn.Parameter(torch.randn(experts, hidden) * hidden**-0.5)
        self.up = torch.nn.Parameter(torch.randn(experts, width, hidden) * hidden**-0.5)
        self.down = torch.nn.Parameter(torch.randn(experts, hidden, width) * width**-0.5)

    def forward(self, x: torch.Tensor, grouped_mm: GroupedMm) -> torch.Tensor:
        tokens = x.shape[0]
        # The router's logits: a dense sgemm-bi call, so a token's logits do not depend on
        # the batch either.
        logits = sgemm_bi.linear(x, self.router).float()
        weights, chosen = torch.topk(torch.softmax(logits, dim=-1), self.top_k, dim=-1)
        # Group the (token, choice) pairs by expert; a stable sort keeps tokens in order.
        flat = chosen.reshape(-1)
        order = torch.sort(flat, stable=True).indices
        rows = x[order // self.top_k]
        counts = torch.bincount(flat, minlength=self.experts)
        offs = counts.cumsum(0).to(torch.int32)
        h = F.gelu(grouped_mm(rows, self.up.transpose(-2, -1), offs=offs))
        y = grouped_mm(h, self.down.transpose(-2, -1), offs=offs)
        # Back to (token, choice) order, then each token's weighted sum in a fixed order.
        inverse = torch.empty_like(order)
        inverse[order] = torch.arange(order.numel(), device=x.device)
        y = y[inverse].reshape(tokens, self.top_k, -1)
        return (y * weights.unsqueeze(-1).to(y.dtype)).sum(dim=1)


def ours(a: torch.Tensor, b: torch.Tensor, *, offs: torch.Tensor) -> torch.Tensor:
    return sgemm_bi.grouped_mm(a, b, offs=offs)


def matmul_per_expert(a: torch.Tensor, b: torch.Tensor, *, offs: torch.Tensor) -> torch.Tensor:
    """The grouped GEMM as a loop of one ``torch.matmul`` per expert."""
    ends = offs.tolist()
    parts = [a[s:e] @ b[g] for g, (s, e) in enumerate(zip([0] + ends[:-1], ends))]
    return torch.cat(parts)


def train(device: torch.device, dtype: torch.dtype, steps: int, dims: tuple[int, ...]) -> list:
    hidden, width, experts, tokens = dims
    torch.manual_seed(0)
    model = MoE(hidden, width, experts).to(device, dtype)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    g = torch.Generator().manual_seed(1)
    for _ in range(steps):
        x = torch.randn(tokens, hidden, generator=g).to(device, dtype)
        target = torch.randn(tokens, hidden, generator=g).to(device, dtype)
        loss = F.mse_loss(model(x, ours).float(), target.float())
        opt.zero_grad()
        loss.backward()
        opt.step()
    return [p.detach().clone() for p in model.parameters()]


def token_alone_vs_in_batch(model: MoE, x: torch.Tensor, grouped_mm: GroupedMm) -> int:
    """How many output elements of token 0 differ between the batch and the token alone."""
    with torch.no_grad():
        alone = model(x[:1], grouped_mm)
        batch = model(x, grouped_mm)[:1]
    bits = torch.int16 if alone.element_size() == 2 else torch.int32
    return int((alone.view(bits) != batch.view(bits)).sum())


def main(argv: list[str] | None = None) -> int:
    gpu = torch.cuda.is_available()
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", default="cuda" if gpu else "cpu")
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--tokens", type=int, default=1024 if gpu else 96)
    p.add_argument("--hidden", type=int, default=512 if gpu else 64)
    args = p.parse_args(argv)
    device = torch.device(args.device)
    # bf16 on the GPU (the tensor-core tier); f32 on the CPU (the scalar tier).
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    hidden = args.hidden
    dims = (hidden, hidden // 2, 16 if device.type == "cuda" else 8, args.tokens)

    first = train(device, dtype, args.steps, dims)
    second = train(device, dtype, args.steps, dims)
    same = all(torch.equal(a.view(torch.int16 if a.element_size() == 2 else torch.int32),
                           b.view(torch.int16 if b.element_size() == 2 else torch.int32))
               for a, b in zip(first, second))
    print(f"trained twice for {args.steps} steps: "
          f"{'bit-identical weights' if same else 'the weights DIFFER'}")
    if not same:
        return 1

    torch.manual_seed(0)
    model = MoE(*dims[:3]).to(device, dtype)
    x = torch.randn(args.tokens, hidden, generator=torch.Generator().manual_seed(2)).to(device,
                                                                                       dtype)
    differ = token_alone_vs_in_batch(model, x, ours)
    print(f"sgemm-bi: a token alone vs in a batch of {args.tokens}: {differ} of {hidden} "
          "output elements differ")
    if differ:
        return 1
    theirs: list[tuple[str, GroupedMm]] = [("torch.matmul per expert", matmul_per_expert)]
    if hasattr(F, "grouped_mm"):
        theirs.insert(0, ("F.grouped_mm", F.grouped_mm))
    for name, fn in theirs:
        try:
            n = token_alone_vs_in_batch(model, x, fn)
            print(f"{name}: a token alone vs in a batch of {args.tokens}: {n} of {hidden} "
                  "output elements differ")
        except (RuntimeError, NotImplementedError) as e:
            print(f"{name}: not run here ({str(e).splitlines()[0]})")
    print("moe_block: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
