"""The functional API: :func:`matmul` and :func:`linear`, differentiable, for CPU and CUDA
tensors of float32, bfloat16 and float16.

Both reshape their arguments into the one op, ``torch.ops.sgemm_bi.gemm`` (see
:mod:`sgemm_bi.ops`), without copying whenever the strides allow it, and follow
``torch.autocast``: inside an enabled autocast region of the inputs' device type, floating
inputs (float64 excepted) are cast to the region's dtype first, as torch casts the inputs
of its own ``linear`` and ``matmul``.
"""

from __future__ import annotations

import math
from typing import Optional

import torch
from torch import Tensor

from .ops import TIER_DEFAULT, _check_tensor, _flat_rows, check_inputs, pick_tier

__all__ = ["matmul", "linear"]


def _autocast(device_type: str, *tensors: Optional[Tensor]) -> tuple[Optional[Tensor], ...]:
    """The tensors cast as torch's autocast casts the inputs of ``linear``/``matmul`` (the
    "lower precision" list): floating tensors other than float64 to the region's dtype."""
    if device_type not in ("cpu", "cuda") or not torch.is_autocast_enabled(device_type):
        return tensors
    dtype = torch.get_autocast_dtype(device_type)
    return tuple(
        t.to(dtype) if t is not None and t.is_floating_point() and t.dtype != torch.float64
        else t
        for t in tensors
    )


def matmul(a: Tensor, b: Tensor, bias: Optional[Tensor] = None, *, tier: str = TIER_DEFAULT,
           tensor_cores: Optional[bool] = None) -> Tensor:
    """``a @ b (+ bias)`` through the engine, with ``torch.matmul``'s shape rules.

    ``a`` is ``[..., M, K]`` (or ``[K]``), ``b`` is ``[K, N]``, batched ``[..., K, N]`` (or
    ``[K]``); batch dimensions broadcast; any strides. ``bias`` is ``[N]``, float32 or the
    inputs' dtype, added once in f32 after each output element's chain. The result has the
    inputs' dtype. ``tier`` is ``"auto"`` (tensor cores for bf16/f16 on a GPU whose engine
    runs them, the scalar tier otherwise), ``"scalar"`` (the bit contract: the same bits on
    the CPU and on every GPU) or ``"tensor_cores"`` (an error where unavailable; never
    replaced by another tier). ``tensor_cores=True``/``False`` is sgemm-bi 0.1's spelling of
    ``tier="tensor_cores"``/``"scalar"``; giving it and ``tier`` together is a
    :class:`TypeError`.

    Differentiable in ``a``, ``b`` and ``bias``; every gradient is computed by the engine
    (see :mod:`sgemm_bi.ops`). Rows of the result never depend on the number of rows or on
    the batch size (batch invariance).
    """
    _check_tensor(a, "a")
    _check_tensor(b, "b")
    tier = pick_tier(tier, tensor_cores)
    a, b, bias = _autocast(a.device.type, a, b, bias)
    check_inputs(a, b, bias)
    if a.dim() == 0 or b.dim() == 0:
        raise ValueError(
            f"a has shape {list(a.shape)} and b has shape {list(b.shape)}: matmul needs at "
            "least one dimension on each"
        )
    vec_a, vec_b = a.dim() == 1, b.dim() == 1
    if vec_a:
        a = a.unsqueeze(0)
    if vec_b:
        b = b.unsqueeze(-1)
    k, n = a.shape[-1], b.shape[-1]
    if b.shape[-2] != k:
        raise ValueError(
            f"shape mismatch: a is {list(a.shape)} and b is {list(b.shape)}; the last "
            f"dimension of a ({k}) must equal the second-to-last of b ({b.shape[-2]})"
        )
    if bias is not None and (bias.dim() != 1 or bias.shape[0] != n):
        raise ValueError(f"bias has shape {list(bias.shape)}; it must be [N] = [{n}]")
    gemm = torch.ops.sgemm_bi.gemm
    if b.dim() == 2:
        if a.dim() == 2 or (a.dim() == 3 and _flat_rows(a) is None):
            out = gemm(a, b, bias, tier, None)  # [B, M, K] · [K, N] unflattenable: batched
        else:
            out = gemm(a.reshape(-1, k), b, bias, tier, None).reshape(*a.shape[:-1], n)
    else:
        try:
            batch = torch.broadcast_shapes(a.shape[:-2], b.shape[:-2])
        except RuntimeError:
            raise ValueError(
                f"a is {list(a.shape)} and b is {list(b.shape)}: their batch dimensions "
                "do not broadcast"
            ) from None
        out = gemm(_batched(a, batch), _batched(b, batch), bias, tier, None)
        out = out.reshape(*batch, a.shape[-2], n)
    if vec_a:
        out = out.squeeze(-2)
    if vec_b:
        out = out.squeeze(-1)
    return out


def _batched(t: Tensor, batch: torch.Size) -> Tensor:
    """``t`` as the op's operand: 2-D when its batch dimensions hold one matrix (shared by
    every entry), else ``[prod(batch), R, C]`` (expanded to the broadcast batch shape)."""
    if math.prod(t.shape[:-2]) == 1 and math.prod(batch) != 0:
        return t.reshape(t.shape[-2:])
    if tuple(t.shape[:-2]) != tuple(batch):
        t = t.expand(*batch, *t.shape[-2:])
    return t.reshape(-1, *t.shape[-2:])


def linear(x: Tensor, weight: Tensor, bias: Optional[Tensor] = None, *,
           tier: str = TIER_DEFAULT, tensor_cores: Optional[bool] = None) -> Tensor:
    """``x @ weight.T (+ bias)`` with ``torch.nn.functional.linear``'s semantics.

    ``x`` is ``[..., in_features]``, ``weight`` is ``[out_features, in_features]`` (torch's
    layout, read in place as a column-major operand), ``bias`` is ``[out_features]``
    (float32 or the inputs' dtype). ``tier`` and ``tensor_cores`` as for :func:`matmul`.
    Differentiable; the weight gradient is computed directly in the weight's ``[out, in]``
    layout, and the bias gradient is the fixed-order column sum of
    :func:`sgemm_bi.ops.bias_grad`.
    """
    _check_tensor(x, "x")
    _check_tensor(weight, "weight")
    tier = pick_tier(tier, tensor_cores)
    x, weight, bias = _autocast(x.device.type, x, weight, bias)
    check_inputs(x, weight, bias, names=("x", "weight", "bias"))
    if weight.dim() != 2:
        raise ValueError(
            f"weight has shape {list(weight.shape)}: it must be [out_features, in_features]"
        )
    n, k = weight.shape
    if x.dim() == 0 or x.shape[-1] != k:
        raise ValueError(
            f"shape mismatch: x is {list(x.shape)} and weight is {list(weight.shape)}; the "
            f"last dimension of x must equal in_features ({k})"
        )
    if bias is not None and (bias.dim() != 1 or bias.shape[0] != n):
        raise ValueError(f"bias has shape {list(bias.shape)}; it must be [out_features] = [{n}]")
    x2 = x if x.dim() == 2 else x.reshape(-1, k)
    y = torch.ops.sgemm_bi.gemm(x2, weight.t(), bias, tier, None)
    return y if x.dim() == 2 else y.reshape(*x.shape[:-1], n)
