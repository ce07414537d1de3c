"""The torch custom ops (``torch.ops.sgemm_bi.*``): the package's calls as torch operators,
for ``torch.compile``, ``torch.library.opcheck`` and anything else that traces.

Layer 3 of the package. Two ops, registered with :mod:`torch.library` with fake (meta)
implementations, so ``torch.compile`` traces them as single nodes and CUDA graphs capture
their launches:

``sgemm_bi::gemm(a, b, bias, tier, out_dtype) -> Tensor``
    ``a @ b (+ bias)``: ``a`` is ``[M, K]`` or ``[B, M, K]``, ``b`` is ``[K, N]`` or
    ``[B, K, N]`` (a 2-D operand next to a 3-D one is shared by every batch entry), ``bias``
    is ``[N]`` (f32 or the inputs' dtype), the result is a new row-major tensor in
    ``out_dtype`` (default: the inputs' dtype). Differentiable: its backward is made of
    further ``gemm`` calls (below), so double backward works too.

``sgemm_bi::gemm_accumulate_(c, a, b, tier) -> ()``
    ``c += a @ b`` into an f32 ``c`` with the engine's accumulate mode (one f32 add per
    element and call): the weight-gradient accumulation of ``fp32_grad_accumulation``.

Operands may have any strides. A matrix whose last two strides make it row-major or
column-major with some leading dimension (a transpose, a slice, a padded row) is passed as
it is; anything else (a broadcast inner dimension, overlapping rows) is copied with
``contiguous()`` first. The bits never depend on that choice.

The gradient formulas (every gradient a gemm on the engine, in a fixed order) are in
:mod:`sgemm_bi.autograd`, shared with the eager path. The bodies run the lean call path of
:mod:`sgemm_bi.plan`; the entry points call the custom op only while ``torch.compile``
traces or for tensors that are not plain (see :func:`sgemm_bi.autograd.gemm`), and eager
calls take an autograd Function that costs a few microseconds less per call.
"""

from __future__ import annotations

from typing import Optional

import torch
from torch import Tensor

from . import plan as _plan
from .autograd import backward as _backward
from .autograd import bias_grad
from .autograd import setup_context as _setup_context
from .checks import (
    TIER_DEFAULT,
    TIERS,
    TORCH_DTYPES,
    _check_tensor,  # noqa: F401  (importable from here, where it was defined before)
    check_accumulator,
    check_gemm,
    check_inputs,
    check_operands,
    check_tier,
    pick_tier,
    resolve_tier,
)
from .plan import flat_rows as _flat_rows  # noqa: F401  (as _check_tensor)
from .plan import is_col_major

__all__ = [
    "TORCH_DTYPES",
    "TIERS",
    "TIER_DEFAULT",
    "check_tier",
    "pick_tier",
    "check_inputs",
    "check_operands",
    "resolve_tier",
    "gemm",
    "gemm_accumulate_",
    "run_gemm",
    "bias_grad",
    "is_col_major",
]

def _gemm(
    a: Tensor,
    b: Tensor,
    bias: Optional[Tensor],
    tier: str,
    out_dtype: Optional[torch.dtype],
) -> Tensor:
    """``a @ b (+ bias)`` through the engine (see the module documentation). ``tier`` is
    ``"auto"``, ``"scalar"`` or ``"tensor_cores"``; ``out_dtype`` is None (the inputs'
    dtype) or one of float32, bfloat16, float16."""
    return _plan.run(a, b, bias, tier, out_dtype)


gemm = torch.library.custom_op("sgemm_bi::gemm", _gemm, mutates_args=())
gemm.__doc__ = _gemm.__doc__


def run_gemm(
    a: Tensor,
    b: Tensor,
    bias: Optional[Tensor] = None,
    tier: str = "auto",
    out_dtype: Optional[torch.dtype] = None,
) -> Tensor:
    """The body of :func:`gemm` as a plain function (no dispatcher, no autograd): checks
    (once per key), allocates the result and launches. The mode calls it from below
    autograd."""
    return _plan.run(a, b, bias, tier, out_dtype)


@gemm.register_fake
def _gemm_fake(a, b, bias, tier, out_dtype):  # type: ignore[no-untyped-def]
    shape, dtype = check_gemm(a, b, bias, tier, out_dtype)
    return a.new_empty(shape, dtype=dtype)


def _gemm_accumulate(c: Tensor, a: Tensor, b: Tensor, tier: str) -> None:
    """``c += a @ b`` in f32 (the engine's accumulate mode: ``c = c + chain``, one f32 add per
    element). ``c`` is a contiguous float32 tensor of the product's shape."""
    _plan.accumulate(c, a, b, tier)


gemm_accumulate_ = torch.library.custom_op(
    "sgemm_bi::gemm_accumulate_", _gemm_accumulate, mutates_args=("c",)
)
gemm_accumulate_.__doc__ = _gemm_accumulate.__doc__


@gemm_accumulate_.register_fake
def _gemm_accumulate_fake(c, a, b, tier):  # type: ignore[no-untyped-def]
    check_accumulator(c, a, b, tier)


torch.library.register_autograd("sgemm_bi::gemm", _backward, setup_context=_setup_context)
