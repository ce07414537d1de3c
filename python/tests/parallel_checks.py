"""The checks of :mod:`sgemm_bi.parallel`, written once and run three ways: in the pytest
process without torch.distributed (one rank), in processes spawned with a gloo group on the
CPU, and with an NCCL group on two GPUs (test_parallel.py, test_parallel_gpu.py).

Every check runs on every rank and compares the rank's results with the unsharded
``sgemm_bi.Linear`` that each rank builds from the same seed; a failing rank raises, and
``torch.multiprocessing.spawn`` stops the others and re-raises with the rank's traceback.
"""

from __future__ import annotations

import copy
import datetime
import gc
import os
import socket
from typing import Any, Optional

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn.functional as F
from reference import assert_same_bits, rand, same_bits
from torch import Tensor, nn
from torch.nn.parallel import DistributedDataParallel as DDP

import sgemm_bi
from sgemm_bi.parallel import (
    ColumnParallelLinear,
    all_reduce_rank_order,
    rank_order_allreduce_hook,
)

# -- running a check on every rank -----------------------------------------------------------


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def spawn(world: int, device: str, check: str, *args: Any) -> None:
    """Runs ``check(device, *args)`` (a function of this module) on ``world`` spawned
    processes joined in one group: gloo for ``device="cpu"``, NCCL for ``"cuda"`` (rank r on
    GPU r). Raises when a rank fails."""
    mp.spawn(_entry, args=(world, free_port(), device, check, args), nprocs=world, join=True)


def _entry(rank: int, world: int, port: int, device: str, check: str,
           args: tuple[Any, ...]) -> None:
    os.environ["NCCL_NVLS_ENABLE"] = "0"  # never NVLink multicast (only all-gathers run here)
    if device == "cuda":
        torch.cuda.set_device(rank)
        dev, backend = f"cuda:{rank}", "nccl"
    else:
        dev, backend = "cpu", "gloo"
    dist.init_process_group(backend, init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=world, timeout=datetime.timedelta(seconds=120))
    try:
        globals()[check](dev, *args)
        gc.collect()  # DDP wrappers in reference cycles: freed before the group, not at exit
        dist.barrier()
    finally:
        dist.destroy_process_group()


# -- the checks ------------------------------------------------------------------------------

# (x's leading shape, in_features, out_features, bias): out_features odd, so two ranks hold
# unequal shards; a 3-D input; a shard narrower than 16 columns; no bias.
CASES = [((7,), 24, 13, True), ((2, 5), 40, 6, True), ((9,), 17, 33, False)]


def compare_with_unsharded(device: str, dtype: torch.dtype, tier: str, group: Any,
                           dx_reduction: str, gather_output: bool) -> None:
    """One forward and backward of ColumnParallelLinear against sgemm_bi.Linear, for every
    case: the output, dW, dbias bit for bit; dX bit for bit (``"exact"`` or one rank) or
    equal to the rank-ordered sum of the per-rank partials (``"rank_order"``)."""
    for i, (lead, k, n, bias) in enumerate(CASES):
        what = (f"{dtype} tier={tier} dx={dx_reduction} gather={gather_output} "
                f"x={[*lead, k]} n={n}")
        gen = torch.Generator().manual_seed(100 + i)
        torch.manual_seed(i)
        full = sgemm_bi.Linear(k, n, bias=bias, dtype=dtype, tier=tier).to(device)
        cp = ColumnParallelLinear.from_linear(full, group=group, gather_output=gather_output,
                                              dx_reduction=dx_reduction)
        s, e = cp.out_range
        x_ref = rand((*lead, k), dtype, gen, device).requires_grad_()
        x = x_ref.detach().clone().requires_grad_()
        y_ref, y = full(x_ref), cp(x)
        assert_same_bits(y, y_ref if gather_output else y_ref[..., s:e], f"y, {what}")
        dy = rand(y_ref.shape, dtype, gen, device)
        y_ref.backward(dy)
        y.backward(dy if gather_output else dy[..., s:e].contiguous())
        assert_same_bits(cp.weight.grad, full.weight.grad[s:e], f"dW, {what}")
        if bias:
            assert_same_bits(cp.bias.grad, full.bias.grad[s:e], f"dbias, {what}")
        if dx_reduction == "exact" or cp.world_size == 1:
            assert_same_bits(x.grad, x_ref.grad, f"dX, {what}")
        else:
            assert_same_bits(x.grad, _rank_order_dx(dy, full, cp), f"dX, {what}")


def _rank_order_dx(dy: Tensor, full: nn.Linear, cp: ColumnParallelLinear) -> Tensor:
    """What ``dx_reduction="rank_order"`` defines, computed on one rank from the whole layer:
    ``(P_0 + P_1) + …`` in f32 with ``P_r = dY[:, cols_r] · W[cols_r]`` (f32, unrounded),
    rounded once."""
    k, n, world = full.in_features, full.out_features, cp.world_size
    dy2, w = dy.reshape(-1, n), full.weight.detach()
    base, extra = divmod(n, world)
    acc: Optional[Tensor] = None
    start = 0
    for r in range(world):
        end = start + base + (1 if r < extra else 0)
        p = torch.ops.sgemm_bi.gemm(dy2[:, start:end], w[start:end], None, cp.tier,
                                    torch.float32)
        acc = p if acc is None else acc + p
        start = end
    assert acc is not None
    return acc.to(dy.dtype).reshape(*dy.shape[:-1], k)


def train_matches_unsharded(device: str, dtype: torch.dtype, tier: str, group: Any,
                            steps: int = 3) -> None:
    """A three-layer MLP whose middle layer is column-parallel, trained with SGD next to
    the same MLP unsharded: after every step the first and last layers are bit-identical
    and the middle layer's shard holds the unsharded rows (dX of the middle layer feeds the
    first layer's gradients, so this needs ``"exact"``)."""
    torch.manual_seed(0)
    ref = nn.Sequential(sgemm_bi.Linear(8, 16, tier=tier), nn.GELU(),
                        sgemm_bi.Linear(16, 21, tier=tier), nn.GELU(),
                        sgemm_bi.Linear(21, 4, tier=tier)).to(device=device, dtype=dtype)
    tp = nn.Sequential(*(ColumnParallelLinear.from_linear(m, group=group)
                         if i == 2 else _copy_linear(m) for i, m in enumerate(ref)))
    s, e = tp[2].out_range
    opts = [torch.optim.SGD(m.parameters(), lr=0.05) for m in (ref, tp)]
    gen = torch.Generator().manual_seed(1)
    for step in range(steps):
        x = rand((12, 8), dtype, gen, device)
        target = rand((12, 4), dtype, gen, device)
        for model, opt in zip((ref, tp), opts):
            loss = F.mse_loss(model(x).float(), target.float())
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        for i in (0, 4):
            assert_same_bits(tp[i].weight, ref[i].weight, f"step {step}, layer {i} weight")
            assert_same_bits(tp[i].bias, ref[i].bias, f"step {step}, layer {i} bias")
        assert_same_bits(tp[2].weight, ref[2].weight[s:e], f"step {step}, shard weight")
        assert_same_bits(tp[2].bias, ref[2].bias[s:e], f"step {step}, shard bias")


def _copy_linear(m: nn.Module) -> nn.Module:
    """A copy of ``m`` with its own parameters (GELU passes through)."""
    if not isinstance(m, nn.Linear):
        return m
    c = sgemm_bi.Linear(m.in_features, m.out_features, tier=m.tier, device=m.weight.device,
                        dtype=m.weight.dtype)
    c.load_state_dict(m.state_dict())
    return c


def check_all_reduce_rank_order(device: str, dtype: torch.dtype) -> None:
    """all_reduce_rank_order: ``((t_0 + t_1) + t_2) …`` in f32, rounded once, on every rank."""
    rank, world = dist.get_rank(), dist.get_world_size()
    ts = [rand((5, 7), dtype, torch.Generator().manual_seed(50 + r), device) * (10.0 ** r)
          for r in range(world)]
    got = all_reduce_rank_order(ts[rank])
    acc = ts[0].float()
    for t in ts[1:]:
        acc = acc + t.float()
    assert_same_bits(got, acc.to(dtype), f"all_reduce_rank_order rank {rank}")
    assert same_bits(ts[rank], ts[rank].clone())  # the input is untouched (a new tensor)


def check_ddp_hook(device: str) -> None:
    """rank_order_allreduce_hook: DDP's gradients are ``(g_0 + g_1 + …) / W`` in f32, each
    ``g_r`` being rank r's own gradient (recomputed here from every rank's input)."""
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = sgemm_bi.Linear(6, 3).to(device)
    ref = copy.deepcopy(model)
    ddp = DDP(model, device_ids=[rank] if device.startswith("cuda") else None)
    ddp.register_comm_hook(None, rank_order_allreduce_hook)
    xs = [rand((4, 6), torch.float32, torch.Generator().manual_seed(70 + r), device) * (10.0 ** r)
          for r in range(world)]
    ddp(xs[rank]).square().sum().backward()
    local = []
    for x in xs:
        ref.zero_grad(set_to_none=True)
        ref(x).square().sum().backward()
        local.append([ref.weight.grad.clone(), ref.bias.grad.clone()])
    for i, (name, p) in enumerate((("weight", model.weight), ("bias", model.bias))):
        acc = local[0][i].clone()
        for g in local[1:]:
            acc += g[i]
        assert_same_bits(p.grad, acc / world, f"DDP {name}.grad, rank {rank}")


def all_checks(device: str, dtypes: list[torch.dtype], tiers: list[str]) -> None:
    """Every check on the whole group, on ranks 0 and 1 when the world is larger, and on a
    group of one rank (each rank its own); then the rank-ordered sums."""
    rank, world = dist.get_rank(), dist.get_world_size()
    # Every rank makes every group, in one order.
    pair = dist.new_group([0, 1]) if world > 2 else None
    singles = [dist.new_group([r]) for r in range(world)]
    groups: list[Any] = [None, singles[rank]]
    if pair is not None and rank < 2:
        groups.append(pair)
    for group in groups:
        for dtype in dtypes:
            for tier in tiers:
                for dx in ("exact", "rank_order"):
                    for gather in (True, False):
                        compare_with_unsharded(device, dtype, tier, group, dx, gather)
            train_matches_unsharded(device, dtype, tiers[0], group)
    for dtype in dtypes:
        check_all_reduce_rank_order(device, dtype)
    check_ddp_hook(device)
