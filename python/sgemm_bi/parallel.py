"""Tensor- and data-parallel training with ``torch.distributed`` that keeps sgemm-bi's bits.

:class:`ColumnParallelLinear` splits a linear layer's output features (N) across the ranks
of a process group. Because the engine's reduction order is a function of K alone
(N-invariance), each rank's shard of the output, of the weight gradient and of the bias
gradient has exactly the bits of the same columns of the unsharded :class:`sgemm_bi.Linear`.
The only sum across ranks is the input gradient, ``dX = Σ_r dY_r · W_r``; how it is formed
is chosen by ``dx_reduction``:

``"exact"`` (default): identical to the unsharded layer.
    Every rank gathers the shards of ``dY`` and of the weight (both concatenated in rank
    order, i.e. in ascending output feature) and computes ``dX = dY · W`` over the whole N:
    the chain over n, in ascending order, that the unsharded layer computes. Costs per
    backward: an all-gather of ``dY`` (M·N elements) and of the weight (N·K), and the full
    dX GEMM on every rank (M·N·K multiply-adds instead of M·N·K / world).

``"rank_order"``: reproducible, not identical to the unsharded layer.
    Each rank computes its partial ``dY_r · W_r`` in f32; the partials are all-gathered and
    summed in ascending rank order on every rank, ``(P_0 + P_1) + P_2 …``, and rounded once
    to the input dtype. The bits depend on the world size (and on where N is split), not
    on the run, the transport or NCCL's settings. Costs an all-gather of world · M·K f32.

Neither mode uses an all-reduce: every collective here is an all-gather, which moves bytes
without arithmetic, so the bits never depend on NCCL's algorithm, protocol, channel count
or topology (an NCCL all-reduce sums in an order that NCCL chooses).

:func:`all_reduce_rank_order` is that rank-ordered sum for any tensor, and
:func:`rank_order_allreduce_hook` applies it to DistributedDataParallel's gradient buckets
(``ddp.register_comm_hook(group, rank_order_allreduce_hook)``), so data-parallel gradients
are averaged in an order that is ours.
"""

from __future__ import annotations

from typing import Any, Optional

import torch
import torch.distributed as dist
from torch import Tensor, nn
from torch.autograd.function import once_differentiable

from .autograd import bias_grad
from .autograd import gemm as _gemm
from .checks import check_inputs, check_tier
from .functional import _autocast

__all__ = [
    "ColumnParallelLinear",
    "DX_REDUCTIONS",
    "all_reduce_rank_order",
    "rank_order_allreduce_hook",
]

DX_REDUCTIONS = ("exact", "rank_order")
"""The accepted values of ``ColumnParallelLinear(dx_reduction=...)``."""


# -- ranks, shards and collectives ---------------------------------------------------------


def _rank_world(group: Any) -> tuple[int, int]:
    """(rank, world size) in ``group``; (0, 1) when torch.distributed is not initialized."""
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(group), dist.get_world_size(group)
    if group is not None:
        raise RuntimeError("a process group was given but torch.distributed is not initialized")
    return 0, 1


def _shard_sizes(n: int, world: int) -> list[int]:
    """How ``n`` features split over ``world`` ranks: as even as possible, the first
    ``n % world`` ranks one larger (``torch.tensor_split``'s rule)."""
    base, extra = divmod(n, world)
    return [base + (1 if r < extra else 0) for r in range(world)]


def _all_gather_cat(t: Tensor, dim: int, sizes: list[int], group: Any) -> Tensor:
    """The ranks' ``t`` concatenated along ``dim`` in rank order, rank r contributing
    ``sizes[r]`` entries there. Shards are zero-padded to the largest size for the
    all-gather (collectives take equal shapes) and trimmed after it. Exact: no arithmetic."""
    dim = dim % t.dim()
    width = max(sizes)
    t = t.contiguous()
    if t.shape[dim] < width:
        pad = list(t.shape)
        pad[dim] = width - t.shape[dim]
        t = torch.cat([t, t.new_zeros(pad)], dim=dim)
    if t.numel() == 0:  # every rank holds the same shape here: nothing to exchange
        parts = [t] * len(sizes)
    else:
        parts = [torch.empty_like(t) for _ in sizes]
        dist.all_gather(parts, t, group=group)
    return torch.cat([p.narrow(dim, 0, s) for p, s in zip(parts, sizes)], dim=dim)


def _sum_in_rank_order(t: Tensor, group: Any) -> Tensor:
    """Σ_r t_r in ascending rank order, in f32 (f64 for f64), unrounded: every rank gathers
    every ``t_r`` and adds them one by one, so all ranks get the same bits."""
    acc_dtype = torch.promote_types(t.dtype, torch.float32)
    t = t.contiguous()
    parts = [torch.empty_like(t) for _ in range(dist.get_world_size(group))]
    dist.all_gather(parts, t, group=group)
    acc = parts[0].to(acc_dtype, copy=True)
    for p in parts[1:]:
        acc.add_(p.to(acc_dtype))
    return acc


def all_reduce_rank_order(tensor: Tensor, group: Any = None) -> Tensor:
    """The sum of ``tensor`` over the ranks of ``group``, the same bits on every rank and
    in every run: ``((t_0 + t_1) + t_2) + …`` in ascending rank order, accumulated in f32
    (f64 for float64 tensors) and rounded once to ``tensor``'s dtype. Returns a new tensor.

    Built from one all-gather (each rank receives world × the tensor: the same traffic as
    a ring all-reduce for two ranks, ``world / 2`` times it beyond), so NCCL's algorithm
    and protocol do not enter the result. Without torch.distributed (or in a group of one)
    it returns a copy of ``tensor``.
    """
    if _rank_world(group)[1] == 1:
        return tensor.clone()
    return _sum_in_rank_order(tensor, group).to(tensor.dtype)


# Unannotated: DDP compares a hook's annotations with dist.GradBucket and Future[Tensor] as
# objects, and this module's annotations are strings.
def rank_order_allreduce_hook(state, bucket):  # type: ignore[no-untyped-def]
    """A DistributedDataParallel communication hook that averages each gradient bucket with
    :func:`all_reduce_rank_order`: ``(g_0 + g_1 + … + g_{W-1}) / W`` summed in f32 in
    ascending rank order, divided once, rounded once to the gradient dtype.

    ``ddp.register_comm_hook(group, rank_order_allreduce_hook)`` (``state`` is the process
    group, or None for the default one). The averaged gradients are then reproducible and
    identical on every rank for a given world size, whatever NCCL's settings and DDP's
    bucket layout (each element is summed over the ranks alone).
    """
    buf = bucket.buffer()
    world = dist.get_world_size(state)
    if world > 1:
        total = _sum_in_rank_order(buf, state)
        total.div_(world)
        buf.copy_(total)
    # A CUDA-aware future for a CUDA bucket: DDP's reader then waits on the current stream.
    fut: torch.futures.Future[Tensor] = (
        torch.futures.Future(devices=[buf.device]) if buf.is_cuda else torch.futures.Future()
    )
    fut.set_result(buf)
    return fut


# -- autograd ------------------------------------------------------------------------------


class _Shards:
    """Where a layer's output features live: the group, this rank and every rank's count."""

    def __init__(self, group: Any, rank: int, sizes: list[int]) -> None:
        self.group, self.rank, self.sizes = group, rank, sizes
        self.start = sum(sizes[:rank])
        self.end = self.start + sizes[rank]


class _LocalColumns(torch.autograd.Function):
    """``y_r = x · W_rᵀ + b_r`` for this rank's columns; backward gives dW_r and db_r (the
    unsharded layer's rows and entries, by N-invariance) and dX by ``dx_reduction``."""

    @staticmethod
    def forward(ctx, x2, w, b, tier, shards, dx_reduction):  # type: ignore[no-untyped-def]
        ctx.save_for_backward(x2, w)
        ctx.tier, ctx.shards, ctx.dx_reduction = tier, shards, dx_reduction
        ctx.bias_dtype = None if b is None else b.dtype
        return _gemm(x2, w.t(), b, tier, None)

    @staticmethod
    @once_differentiable
    def backward(ctx, grad):  # type: ignore[no-untyped-def]
        x2, w = ctx.saved_tensors
        g = grad if grad.dtype == x2.dtype else grad.to(x2.dtype)
        dx = dw = db = None
        if ctx.needs_input_grad[0]:
            dx = _input_grad(g, w, ctx.tier, ctx.shards, ctx.dx_reduction)
        if ctx.needs_input_grad[1]:
            # dW_r = dY_rᵀ · X: the unsharded layer's chain over the rows, for rows r of dW.
            dw = _gemm(g.t(), x2, None, ctx.tier, None)
        if ctx.bias_dtype is not None and ctx.needs_input_grad[2]:
            db = bias_grad(grad, ctx.bias_dtype)
        return dx, dw, db, None, None, None


def _input_grad(g: Tensor, w: Tensor, tier: str, shards: _Shards, dx_reduction: str) -> Tensor:
    """dX from this rank's ``g = dY_r`` ([M, N_r]) and ``w = W_r`` ([N_r, K])."""
    if len(shards.sizes) == 1:
        return _gemm(g, w, None, tier, None)
    if dx_reduction == "exact":
        g_all = _all_gather_cat(g, -1, shards.sizes, shards.group)  # [M, N]
        w_all = _all_gather_cat(w, 0, shards.sizes, shards.group)  # [N, K]
        return _gemm(g_all, w_all, None, tier, None)
    partial = _gemm(g, w, None, tier, torch.float32)  # [M, K], unrounded
    return _sum_in_rank_order(partial, shards.group).to(g.dtype)


class _GatherColumns(torch.autograd.Function):
    """All-gather along the last dimension in rank order; backward keeps this rank's
    columns of the gradient (every rank holds the whole output and the same loss)."""

    @staticmethod
    def forward(ctx, y, shards):  # type: ignore[no-untyped-def]
        ctx.shards = shards
        return _all_gather_cat(y, -1, shards.sizes, shards.group)

    @staticmethod
    def backward(ctx, grad):  # type: ignore[no-untyped-def]
        s = ctx.shards
        return grad[..., s.start:s.end], None


# -- the layer -----------------------------------------------------------------------------


class ColumnParallelLinear(nn.Module):
    """``y = x @ weight.T + bias`` with the output features split across the ranks of a
    process group: rank r holds rows ``out_range`` of the unsharded ``[out, in]`` weight
    (and those entries of the bias) and computes those columns of ``y``.

    Bit for bit the unsharded :class:`sgemm_bi.Linear`: the output (gathered or this rank's
    columns of it), the weight and bias gradients (this rank's rows and entries of the
    unsharded ones) and, with ``dx_reduction="exact"``, the input gradient. With
    ``dx_reduction="rank_order"`` the input gradient is reproducible run to run and the same
    on every rank, but rounded differently from the unsharded layer for more than one rank
    (see :mod:`sgemm_bi.parallel`). Every collective is an all-gather; no bits depend on
    NCCL's settings.

    The input must be the same on every rank of the group (replicated, as in Megatron-style
    tensor parallelism); with ``gather_output=True`` (default) every rank gets the whole
    output and must compute the same loss from it, and the backward keeps this rank's
    columns of the output gradient. With ``gather_output=False`` the output is this rank's
    columns, ``[..., out_range]``.

    Features split as evenly as possible, the first ``out_features % world`` ranks holding
    one more. Without torch.distributed initialized (and ``group=None``) the layer is the
    one-rank case.

    Args:
        in_features, out_features, bias, device, dtype: as for :class:`torch.nn.Linear`.
            Initialization draws the whole layer from the current RNG, as
            ``sgemm_bi.Linear(in_features, out_features)`` would (a transient full weight),
            and keeps this rank's rows: with one seed on every rank, the shards are those
            of the unsharded layer that seed gives.
        tier: ``"auto"``, ``"scalar"`` or ``"tensor_cores"`` (see :func:`sgemm_bi.matmul`).
        group: the process group (None: the default group).
        gather_output: all-gather the output (True) or return this rank's columns.
        dx_reduction: ``"exact"`` (identical to the unsharded layer) or ``"rank_order"``
            (reproducible, cheaper), see :mod:`sgemm_bi.parallel`.
    """

    in_features: int
    out_features: int
    tier: str
    gather_output: bool
    dx_reduction: str

    def __init__(
        self,
        in_features: int,
        out_features: int,
        bias: bool = True,
        device: Any = None,
        dtype: Optional[torch.dtype] = None,
        *,
        tier: str = "auto",
        group: Any = None,
        gather_output: bool = True,
        dx_reduction: str = "exact",
    ) -> None:
        super().__init__()
        self._setup(in_features, out_features, tier, group, gather_output, dx_reduction)
        full = nn.Linear(in_features, out_features, bias, device=device, dtype=dtype)
        self._take_shard(full)

    @classmethod
    def from_linear(
        cls,
        linear: nn.Linear,
        *,
        tier: Optional[str] = None,
        group: Any = None,
        gather_output: bool = True,
        dx_reduction: str = "exact",
    ) -> ColumnParallelLinear:
        """This rank's shard of ``linear`` (an :class:`torch.nn.Linear` or
        :class:`sgemm_bi.Linear`, the same on every rank): new parameters holding copies of
        its rows ``out_range`` (and bias entries). ``tier`` defaults to ``linear.tier`` for
        an ``sgemm_bi.Linear``, else ``"auto"``."""
        if not isinstance(linear, nn.Linear):
            raise TypeError(f"linear must be a torch.nn.Linear, not {type(linear).__name__}")
        if tier is None:
            tier = getattr(linear, "tier", "auto")
        self = cls.__new__(cls)
        nn.Module.__init__(self)
        self._setup(linear.in_features, linear.out_features, tier, group, gather_output,
                    dx_reduction)
        self._take_shard(linear)
        self.train(linear.training)
        return self

    def _setup(self, in_features: int, out_features: int, tier: str, group: Any,
               gather_output: bool, dx_reduction: str) -> None:
        if dx_reduction not in DX_REDUCTIONS:
            raise ValueError(f"dx_reduction is {dx_reduction!r}: expected 'exact' or 'rank_order'")
        self.in_features, self.out_features = in_features, out_features
        self.tier = check_tier(tier)
        self.gather_output = bool(gather_output)
        self.dx_reduction = dx_reduction
        rank, world = _rank_world(group)
        self._shards = _Shards(group, rank, _shard_sizes(out_features, world))

    def _take_shard(self, full: nn.Linear) -> None:
        s = self._shards
        w = full.weight
        self.weight = nn.Parameter(w.detach()[s.start:s.end].clone(),
                                   requires_grad=w.requires_grad)
        if full.bias is None:
            self.register_parameter("bias", None)
        else:
            self.bias = nn.Parameter(full.bias.detach()[s.start:s.end].clone(),
                                     requires_grad=full.bias.requires_grad)

    @property
    def rank(self) -> int:
        """This process's rank in the layer's group."""
        return self._shards.rank

    @property
    def world_size(self) -> int:
        """The number of ranks the output features are split over."""
        return len(self._shards.sizes)

    @property
    def group(self) -> Any:
        """The process group (None: the default group)."""
        return self._shards.group

    @property
    def out_range(self) -> tuple[int, int]:
        """``(start, end)``: the output features (weight rows) this rank holds."""
        return self._shards.start, self._shards.end

    def forward(self, input: Tensor) -> Tensor:
        """``input @ weight.T + bias`` for this rank's columns, gathered in rank order when
        ``gather_output``."""
        x, w, b = _autocast(input.device.type, input, self.weight, self.bias)
        check_inputs(x, w, b, names=("x", "weight", "bias"))
        k = self.in_features
        if x.dim() == 0 or x.shape[-1] != k:
            raise ValueError(
                f"shape mismatch: x is {list(x.shape)}; its last dimension must equal "
                f"in_features ({k})"
            )
        x2 = x if x.dim() == 2 else x.reshape(-1, k)
        y = _LocalColumns.apply(x2, w, b, self.tier, self._shards, self.dx_reduction)
        if self.gather_output and self.world_size > 1:
            y = _GatherColumns.apply(y, self._shards)
        return y if x.dim() == 2 else y.reshape(*x.shape[:-1], y.shape[-1])

    def extra_repr(self) -> str:
        """Sizes, this rank's rows, the tier and the modes."""
        start, end = self.out_range
        return (
            f"in_features={self.in_features}, out_features={self.out_features}, "
            f"bias={self.bias is not None}, rank={self.rank}/{self.world_size} holds "
            f"[{start}:{end}], tier={self.tier!r}, gather_output={self.gather_output}, "
            f"dx_reduction={self.dx_reduction!r}"
        )
