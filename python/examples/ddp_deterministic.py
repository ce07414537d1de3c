"""Deterministic data-parallel training: DistributedDataParallel with every GEMM on sgemm-bi.

A small transformer-style language model (token embedding, two pre-norm blocks of causal
attention and a GELU MLP whose linear layers are ``sgemm_bi.Linear`` and whose attention
products are ``sgemm_bi.matmul``, a final LayerNorm and an ``sgemm_bi.Linear`` head) is
trained twice from one seed under DDP, each rank on its own stream of data. The script
asserts that the two runs end with bit-identical weights on every rank and that every rank
holds the same bits, and prints a checksum of the weights (the same on every rank).

Launch (from the repository root; without installing, add PYTHONPATH=python)::

    torchrun --nproc_per_node=2 python/examples/ddp_deterministic.py               # 2 GPUs: NCCL
    torchrun --nproc_per_node=2 python/examples/ddp_deterministic.py --device cpu  # gloo
    python python/examples/ddp_deterministic.py                                    # one process

Options: ``--steps N``, ``--dtype f32|bf16``, ``--tier auto|scalar|tensor_cores``,
``--grad-reduction all_reduce|rank_order``.

What the bits rest on:

* Every matmul runs on sgemm-bi (deterministic and batch-invariant; on the scalar tier the
  same bits on the CPU and every GPU).
* ``torch.use_deterministic_algorithms(True)`` for the rest of the model: the embedding's
  backward, LayerNorm, softmax and AdamW then run deterministic kernels or raise. The
  cross-entropy is written as ``log_softmax`` times a one-hot target, because torch's
  ``NLLLoss`` on CUDA has no deterministic kernel (it raises under that setting).
  ``CUBLAS_WORKSPACE_CONFIG`` is deliberately left unset: no torch matmul remains, and if
  one crept in, torch would raise instead of running cuBLAS. (A model that keeps torch
  matmuls would set ``CUBLAS_WORKSPACE_CONFIG=:4096:8``.)
* The gradient average across ranks, ``--grad-reduction``:

  ``all_reduce`` (default): DDP's own all-reduce, NCCL's on GPUs. NCCL sums in an order it
  chooses from the algorithm, the protocol, the number of channels, the world size and the
  topology; it repeats its bits when all of them are fixed, and every rank receives the
  same result. This script sets, unless already set, ``NCCL_ALGO=Ring`` and
  ``NCCL_PROTO=Simple`` (no switch between Ring/Tree or LL/LL128/Simple with the message
  size or the NCCL tuning), and always ``NCCL_NVLS_ENABLE=0``: NVLink SHARP (multicast,
  reductions inside the NVSwitch) stays off on our machines, whatever the caller set. It
  relies on the same NCCL version, world size, GPU model and topology between runs (the
  channel count follows from them; pinning ``NCCL_MIN_NCHANNELS`` = ``NCCL_MAX_NCHANNELS``
  fixes it explicitly) and on the same DDP bucket layout (same model and
  ``bucket_cap_mb``). On CPUs, gloo's all-reduce is likewise fixed for a fixed world size.

  ``rank_order``: ``sgemm_bi.parallel.rank_order_allreduce_hook`` replaces it: each bucket
  is all-gathered (moving bytes, no arithmetic) and summed in ascending rank order in f32
  on every rank, so the result depends on the world size alone, not on any NCCL setting.
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import math
import os
import socket
import sys
import time
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import Tensor, nn
from torch.nn.parallel import DistributedDataParallel as DDP

try:
    import sgemm_bi
    import sgemm_bi.parallel
except ImportError:  # running from a clone without `pip install ./python`
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    import sgemm_bi
    import sgemm_bi.parallel

# The NCCL settings of a reproducible all-reduce (read by NCCL when the communicator is made).
NCCL_DEFAULTS = {"NCCL_ALGO": "Ring", "NCCL_PROTO": "Simple"}
NCCL_FORCED = {"NCCL_NVLS_ENABLE": "0"}  # never NVLink multicast

VOCAB, SEQ, D, HEADS, LAYERS, BATCH = 32, 16, 64, 4, 2, 8


class Block(nn.Module):
    """Pre-norm causal self-attention and a GELU MLP, with residual connections."""

    def __init__(self, tier: str) -> None:
        super().__init__()
        self.tier = tier
        self.ln1, self.ln2 = nn.LayerNorm(D), nn.LayerNorm(D)
        self.qkv = sgemm_bi.Linear(D, 3 * D, tier=tier)
        self.proj = sgemm_bi.Linear(D, D, tier=tier)
        self.fc1 = sgemm_bi.Linear(D, 4 * D, tier=tier)
        self.fc2 = sgemm_bi.Linear(4 * D, D, tier=tier)

    def forward(self, x: Tensor) -> Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
        q, k, v = (z.reshape(b, t, HEADS, d // HEADS).transpose(1, 2) for z in (q, k, v))
        scores = sgemm_bi.matmul(q, k.transpose(-1, -2), tier=self.tier) / math.sqrt(d // HEADS)
        causal = torch.ones(t, t, dtype=torch.bool, device=x.device).triu(1)
        att = scores.masked_fill(causal, float("-inf")).softmax(dim=-1)
        y = sgemm_bi.matmul(att, v, tier=self.tier).transpose(1, 2).reshape(b, t, d)
        x = x + self.proj(y)
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class TinyLM(nn.Module):
    """Token and position embeddings, ``LAYERS`` blocks, a final norm, a vocabulary head."""

    def __init__(self, tier: str) -> None:
        super().__init__()
        self.tok = nn.Embedding(VOCAB, D)
        self.pos = nn.Parameter(torch.randn(SEQ, D) * 0.02)
        self.blocks = nn.ModuleList(Block(tier) for _ in range(LAYERS))
        self.ln = nn.LayerNorm(D)
        self.head = sgemm_bi.Linear(D, VOCAB, tier=tier)

    def forward(self, tokens: Tensor) -> Tensor:
        h = self.tok(tokens) + self.pos[: tokens.shape[1]]
        for blk in self.blocks:
            h = blk(h)
        return self.head(self.ln(h))


def batch(gen: torch.Generator) -> tuple[Tensor, Tensor]:
    """Random tokens; the target at t is the token before it (at 0, itself): it needs
    attention."""
    x = torch.randint(VOCAB, (BATCH, SEQ), generator=gen)
    return x, torch.cat([x[:, :1], x[:, :-1]], dim=1)


def cross_entropy(logits: Tensor, target: Tensor) -> Tensor:
    """Mean cross-entropy as ``-Σ log_softmax · one_hot`` (no NLLLoss, see the docstring)."""
    logp = F.log_softmax(logits.float(), dim=-1)
    return -(logp * F.one_hot(target, VOCAB).to(logp.dtype)).sum(dim=-1).mean()


def train(args: argparse.Namespace, device: torch.device, rank: int) -> tuple[nn.Module, float]:
    """One training run from ``args.seed``; returns the (unwrapped) model and rank's last loss."""
    torch.manual_seed(args.seed)  # the same initial weights on every rank (DDP broadcasts too)
    dtype = {"f32": torch.float32, "bf16": torch.bfloat16}[args.dtype]
    model = TinyLM(args.tier).to(device=device, dtype=dtype)
    ddp = DDP(model, device_ids=[device.index] if device.type == "cuda" else None)
    if args.grad_reduction == "rank_order":
        ddp.register_comm_hook(None, sgemm_bi.parallel.rank_order_allreduce_hook)
    opt = torch.optim.AdamW(ddp.parameters(), lr=3e-3)
    data = torch.Generator().manual_seed(args.seed * 1000 + rank + 1)  # rank's own data
    loss = torch.zeros(())
    for _ in range(args.steps):
        x, y = batch(data)
        loss = cross_entropy(ddp(x.to(device)), y.to(device))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    return model, float(loss.detach())


def same_bits(a: Tensor, b: Tensor) -> bool:
    """Bitwise equality of two tensors (NaNs included)."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    return torch.equal(a.detach().reshape(-1).view(torch.uint8),
                       b.detach().reshape(-1).view(torch.uint8))


def digest(model: nn.Module) -> str:
    """sha256 of the model's state, name by name, as raw bytes."""
    h = hashlib.sha256()
    for name, t in model.state_dict().items():
        h.update(name.encode())
        h.update(t.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


def init_distributed(device_kind: str) -> tuple[int, int, torch.device]:
    """Joins the torchrun job (or makes a one-process group); returns rank, world, device."""
    for k, v in NCCL_DEFAULTS.items():
        os.environ.setdefault(k, v)
    os.environ.update(NCCL_FORCED)
    if "RANK" not in os.environ:  # plain `python ...`: a group of one on a free local port
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        os.environ.update(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1",
                          MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    local = int(os.environ.get("LOCAL_RANK", "0"))
    if device_kind == "cuda":
        if local >= torch.cuda.device_count():
            raise SystemExit(f"local rank {local} has no GPU: {torch.cuda.device_count()} visible")
        device = torch.device("cuda", local)
        torch.cuda.set_device(device)
        backend = "nccl"
    else:
        device, backend = torch.device("cpu"), "gloo"
    dist.init_process_group(backend)
    return dist.get_rank(), dist.get_world_size(), device


def shutdown_distributed() -> None:
    """Leaves the group so that the process exits cleanly.

    The DDP wrappers that ``train`` dropped sit in reference cycles; left to the interpreter's
    exit, their gloo work is torn down after the process group and the process can abort
    (``terminate called without an active exception``, about one run in ten on a two-core
    machine with plain ``torch.nn.Linear`` layers too). Collecting them first, then meeting
    at a barrier, makes every rank destroy the group with nothing in flight."""
    gc.collect()
    dist.barrier()
    dist.destroy_process_group()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", choices=("cuda", "cpu"),
                   default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--dtype", choices=("f32", "bf16"), default="f32")
    p.add_argument("--tier", default="auto", choices=sgemm_bi.ops.TIERS)
    p.add_argument("--grad-reduction", choices=("all_reduce", "rank_order"), default="all_reduce")
    args = p.parse_args(argv)

    rank, world, device = init_distributed(args.device)
    torch.use_deterministic_algorithms(True)
    try:
        t0 = time.perf_counter()
        m1, loss1 = train(args, device, rank)
        m2, loss2 = train(args, device, rank)
        elapsed = time.perf_counter() - t0

        s1, s2 = m1.state_dict(), m2.state_dict()
        differing = [k for k in s1 if not same_bits(s1[k], s2[k])]
        d1 = digest(m1)
        digests: list[str] = [""] * world
        dist.all_gather_object(digests, d1)
        failures: list[list[str]] = [[]] * world
        dist.all_gather_object(failures, differing)
    finally:
        torch.use_deterministic_algorithms(False)

    if rank == 0:
        backend = dist.get_backend()
        nccl = " ".join(f"{k}={os.environ[k]}" for k in (*NCCL_DEFAULTS, *NCCL_FORCED))
        print(f"trained twice on {world} rank(s) ({device.type}, {backend}"
              f"{', ' + nccl if backend == 'nccl' else ''}; {args.steps} steps each, "
              f"dtype={args.dtype}, tier={args.tier}, grad reduction={args.grad_reduction}, "
              f"{elapsed:.1f} s)")
        print(f"  rank 0 final loss {loss1:.6f} / {loss2:.6f}")
    for r, bad in enumerate(failures):
        assert not bad, f"rank {r}: the two runs differ in {bad}"
    assert len(set(digests)) == 1, f"the ranks hold different weights: {digests}"
    if rank == 0:
        total = sum(float(t.double().sum()) for t in s1.values())
        print(f"  bit-identical weights across the two runs on every rank ({len(s1)} tensors)")
        print(f"  bit-identical weights across ranks: {world} of {world}")
        print(f"  checksum sha256:{d1[:32]} sum {total:.9e}")
    shutdown_distributed()
    return 0


if __name__ == "__main__":
    sys.exit(main())
