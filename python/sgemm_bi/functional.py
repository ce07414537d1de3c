"""The functional API: :func:`matmul` and :func:`linear`, differentiable, for CPU and CUDA
tensors of float32, bfloat16 and float16.

Both reshape their arguments into the one differentiable gemm
(:func:`sgemm_bi.autograd.gemm`; the op ``torch.ops.sgemm_bi.gemm`` when traced), without
copying whenever the strides allow it, and follow ``torch.autocast``: inside an enabled
autocast region of the inputs' device type, floating inputs (float64 excepted) are cast to
the region's dtype first, as torch casts the inputs of its own ``linear`` and ``matmul``.

The shortcut: a call's checks and reshapes depend only on its arguments' shapes, strides,
dtypes, devices and tier. The first call with a key is checked in full; when its gemm reads
the arguments in place (``x`` flattened to rows by a view, ``weight.t()``) the key is
remembered with the gemm's plan (:mod:`sgemm_bi.plan`). A later call with that key that
needs no gradient, outside autocast and tracing, allocates the result and launches the plan
directly — no view, no check, no autograd node; one that needs a gradient goes straight to
the autograd function (:class:`sgemm_bi.autograd.Gemm`, for ``linear``
:class:`sgemm_bi.autograd.LinearFn`) without the checks.

The native path, before the shortcut: where the library's native ops are available
(:func:`sgemm_bi.native.ops`, Linux), a call that needs no gradient, outside autocast and
tracing, with a 2-D ``b`` (``linear``'s weight) and ``a`` 2-D or contiguous, runs on
``sgemm_bi::matmul`` / ``matmul_bias``: the same engine call, with its checks in Rust and no
Python past this module. What the op refuses (bad input) takes the full path, which raises
the typed error.
"""

from __future__ import annotations

import math
from typing import Any, Optional

import torch
from torch import Tensor

from . import native as _native
from . import plan as _plan
from .autograd import Gemm, LinearFn
from .autograd import gemm as _gemm
from .checks import TIER_DEFAULT, _check_tensor, check_inputs, pick_tier
from .plan import flat_rows as _flat_rows

__all__ = ["matmul", "linear"]

_PLAIN = (Tensor, torch.nn.Parameter)
_is_compiling = torch.compiler.is_compiling
# Whether autocast is on for any device (one call; ``is_autocast_enabled(device)`` for each
# device type where this torch lacks it). Conservative: any region sends calls the full way.
_any_autocast = getattr(torch._C, "_is_any_autocast_enabled", None) or (
    lambda: torch.is_autocast_enabled("cpu") or torch.is_autocast_enabled("cuda"))


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


# -- the shortcut ------------------------------------------------------------------------------


class _Shortcut:
    """A remembered call: its gemm's plan (operands read in place) and the result's shape."""

    __slots__ = ("plan", "shape")

    def __init__(self, plan: _plan.Plan, shape: list[int]) -> None:
        self.plan, self.shape = plan, shape


_shortcuts: dict[tuple[Any, ...], Optional[_Shortcut]] = {}
_plan.register_cache(_shortcuts)
_MISSING = object()


def _key(tag: str, a: Tensor, b: Tensor, bias: Optional[Tensor], tier: str) -> tuple[Any, ...]:
    key = (tag, a.shape, a.stride(), a.dtype, a.device, b.shape, b.stride(), b.dtype, b.device,
           tier)
    if bias is None:
        return key
    return key + (bias.shape, bias.stride(), bias.dtype, bias.device)


def _shortcut(key: tuple[Any, ...], a: Tensor, a2: Tensor, b: Tensor, b2: Tensor,
              bias: Optional[Tensor], tier: str, shape: list[int]) -> Optional[_Shortcut]:
    """Remembers ``key`` (after the full checks passed): a shortcut when the gemm of the
    views ``a2``, ``b2`` reads ``a`` and ``b`` in place, else None (always the full way)."""
    short = None
    if a2.numel() and b2.numel() and a2.data_ptr() == a.data_ptr() and (
            b2.data_ptr() == b.data_ptr()):
        plan = _plan.plan_for(a2, b2, bias, tier)
        if plan.a_prep == plan.b_prep == plan.bias_prep == _plan.AS_IS:
            short = _Shortcut(plan, shape)
    if len(_shortcuts) >= _plan.MAX_PLANS:
        _shortcuts.clear()
    _shortcuts[key] = short
    return short


def _fast(a: Any, b: Any, bias: Any) -> bool:
    """Whether a call may use the shortcut: plain CPU/CUDA tensors, no autocast, not
    traced."""
    if type(a) not in _PLAIN or type(b) not in _PLAIN or (
            bias is not None and type(bias) not in _PLAIN) or a.is_meta:
        return False
    return not _any_autocast() and not _is_compiling()


def _needs_grad(a: Tensor, b: Tensor, bias: Optional[Tensor]) -> bool:
    # The tensors' flags first: in the common case (inference, no tensor needing a
    # gradient) that skips the grad mode's query, part of a call whose Python costs ~1 µs
    # (docs/perf-notes.md, "CPU backend: small calls").
    return (a.requires_grad or b.requires_grad or (
        bias is not None and bias.requires_grad)) and torch.is_grad_enabled()


_TIER_CODES = _native.TIER_CODES
_UNSET: Any = object()
_native_ops: Any = _UNSET  # sgemm_bi.native.ops(), fetched on the first call


def _direct(ops: Optional[tuple[Any, Any]]) -> Optional[tuple[Any, Any]]:
    """The native ops without ``OpOverload.__call__``, a Python frame that only forwards to
    the operator's C++ callable (``_op``): a few hundred nanoseconds of a call that costs
    a few microseconds in all. The overloads themselves where a torch lacks ``_op``."""
    if ops is None:
        return None
    return (getattr(ops[0], "_op", ops[0]), getattr(ops[1], "_op", ops[1]))


def _native_call(a: Any, b: Any, bias: Any, tier: str, weight: bool) -> Optional[Tensor]:
    """The call on the native op when it may take it: plain tensors that need no gradient,
    outside autocast and tracing, ``a`` 2-D or contiguous; None otherwise, or when the
    op refuses (bad input: the full path raises the typed error)."""
    global _native_ops
    ops = _native_ops
    if ops is _UNSET:
        ops = _native_ops = _direct(_native.ops())
    if ops is None or type(a) not in _PLAIN or type(b) not in _PLAIN or (
            bias is not None and type(bias) not in _PLAIN) or a.is_meta:
        return None
    code = _TIER_CODES.get(tier) if isinstance(tier, str) else None
    if code is None or _needs_grad(a, b, bias) or _any_autocast() or _is_compiling() or (
            a.dim() != 2 and not a.is_contiguous()):
        return None
    try:
        if bias is None:
            return ops[0](a, b, code, weight)  # type: ignore[no-any-return]
        return ops[1](a, b, bias, code, weight)  # type: ignore[no-any-return]
    except RuntimeError:
        return None


def _launch(short: _Shortcut, a: Tensor, b: Tensor, bias: Optional[Tensor]) -> Tensor:
    c = torch.empty(short.shape, dtype=short.plan.dtype, device=a.device)
    _plan.launch(short.plan, a, b, bias, c)
    return c


# -- matmul ------------------------------------------------------------------------------------


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
    (see :mod:`sgemm_bi.autograd`). Rows of the result never depend on the number of rows or
    on the batch size (batch invariance).
    """
    if tensor_cores is None and getattr(b, "ndim", 0) == 2:
        out = _native_call(a, b, bias, tier, False)
        if out is not None:
            return out
    tier = pick_tier(tier, tensor_cores)
    if _fast(a, b, bias):
        key = _key("matmul", a, b, bias, tier)
        short = _shortcuts.get(key, _MISSING)
        if short is _MISSING:
            _matmul(a, b, bias, tier, check_only=True)
            short = None
            if a.dim() >= 2 and b.dim() == 2 and (a.dim() == 2 or _flat_rows_nd(a)):
                a2 = a if a.dim() == 2 else a.reshape(-1, a.shape[-1])
                short = _shortcut(key, a, a2, b, b, bias, tier,
                                  [*a.shape[:-1], b.shape[-1]])
            else:
                _shortcuts[key] = None
        if short is not None:
            if not _needs_grad(a, b, bias):
                return _launch(short, a, b, bias)
            # Checked already: straight to the autograd function, on the views it reads.
            a2 = a if a.dim() == 2 else a.reshape(-1, a.shape[-1])
            out = Gemm.apply(a2, b, bias, tier, None)
            return out if a.dim() == 2 else out.view(short.shape)
    return _matmul(a, b, bias, tier)


def _flat_rows_nd(a: Tensor) -> bool:
    """Whether ``a``'s leading dimensions flatten to rows as a view (``reshape`` without a
    copy), as the full path flattens them."""
    return a.dim() > 3 or _flat_rows(a) is not None


def _matmul(a: Any, b: Any, bias: Any, tier: str, check_only: bool = False) -> Any:
    """:func:`matmul` the full way (``tier`` already picked); with ``check_only``, only its
    checks (raising what the call would raise)."""
    _check_tensor(a, "a")
    _check_tensor(b, "b")
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
    batch = None
    if b.dim() != 2:
        try:
            batch = torch.broadcast_shapes(a.shape[:-2], b.shape[:-2])
        except RuntimeError:
            raise ValueError(
                f"a is {list(a.shape)} and b is {list(b.shape)}: their batch dimensions "
                "do not broadcast"
            ) from None
    if check_only:
        return None
    if batch is None:
        if a.dim() == 2 or (a.dim() == 3 and _flat_rows(a) is None):
            out = _gemm(a, b, bias, tier, None)  # [B, M, K] · [K, N] unflattenable: batched
        else:
            out = _gemm(a.reshape(-1, k), b, bias, tier, None).reshape(*a.shape[:-1], n)
    else:
        out = _gemm(_batched(a, batch), _batched(b, batch), bias, tier, None)
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


# -- linear ------------------------------------------------------------------------------------


def linear(x: Tensor, weight: Tensor, bias: Optional[Tensor] = None, *,
           tier: str = TIER_DEFAULT, tensor_cores: Optional[bool] = None) -> Tensor:
    """``x @ weight.T (+ bias)`` with ``torch.nn.functional.linear``'s semantics.

    ``x`` is ``[..., in_features]``, ``weight`` is ``[out_features, in_features]`` (torch's
    layout, read in place as a column-major operand), ``bias`` is ``[out_features]``
    (float32 or the inputs' dtype). ``tier`` and ``tensor_cores`` as for :func:`matmul`.
    Differentiable; the weight gradient is computed directly in the weight's ``[out, in]``
    layout, and the bias gradient is the fixed-order column sum of
    :func:`sgemm_bi.autograd.bias_grad`.
    """
    if tensor_cores is None:
        out = _native_call(x, weight, bias, tier, True)
        if out is not None:
            return out
    tier = pick_tier(tier, tensor_cores)
    if _fast(x, weight, bias):
        key = _key("linear", x, weight, bias, tier)
        short = _shortcuts.get(key, _MISSING)
        if short is _MISSING:
            x2, n = _check_linear(x, weight, bias)
            short = _shortcut(key, x, x2, weight, weight.t(), bias, tier, [*x.shape[:-1], n])
        if short is not None:
            if not _needs_grad(x, weight, bias):
                return _launch(short, x, weight, bias)
            # Checked already: one autograd node over the remembered plan.
            return LinearFn.apply(x, weight, bias, tier, short.plan, short.shape)
    return linear_full(x, weight, bias, tier)


def _check_linear(x: Any, weight: Any, bias: Any) -> tuple[Tensor, int]:
    """The checks of :func:`linear` (after autocast); returns ``x`` as rows and N."""
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
    return (x if x.dim() == 2 else x.reshape(-1, k)), n


def linear_full(x: Any, weight: Any, bias: Any, tier: str) -> Tensor:
    """:func:`linear` the full way (``tier`` already picked): autocast, checks, views, and the
    differentiable gemm."""
    _check_tensor(x, "x")
    _check_tensor(weight, "weight")
    x, weight, bias = _autocast(x.device.type, x, weight, bias)
    x2, n = _check_linear(x, weight, bias)
    y = _gemm(x2, weight.t(), bias, tier, None)
    return y if x.dim() == 2 else y.reshape(*x.shape[:-1], n)
