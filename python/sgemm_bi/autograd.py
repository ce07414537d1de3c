"""The differentiable gemm every entry point calls: :func:`gemm`, and the gradient formulas
it shares with the custom op ``sgemm_bi::gemm``.

Two ways in, one set of formulas, the same bits:

* Eager calls on plain tensors take the lean path: :class:`Gemm`, a
  :class:`torch.autograd.Function` over :func:`sgemm_bi.plan.run`, when a gradient is
  needed, and :func:`sgemm_bi.plan.run` alone when none is. Measured on the CPU (torch
  2.15, docs/perf-notes.md "From PyTorch: the call path"), a trivial custom op costs about
  11 µs a call and a trivial autograd Function 4–6 µs; the dispatcher's custom-op
  machinery was most of a call's cost.
* Under ``torch.compile`` tracing, for meta tensors and for any tensor that is not a plain
  ``Tensor`` / ``Parameter`` (fake, functional and other subclass tensors), :func:`gemm` calls the
  custom op ``torch.ops.sgemm_bi.gemm`` (:mod:`sgemm_bi.ops`), whose fake kernel lets the
  compiler trace it as one node without a graph break; its autograd formula is the one
  below.

The gradients (each one a chain in ascending order, so training is bit-reproducible, and on
the scalar tier identical on the CPU and on every GPU):

* ``dA = dC · Bᵀ`` and ``dB = Aᵀ · dC``: :func:`gemm` calls on transposed views, reduced
  over N and over M respectively. A 2-D operand shared across a batch gets the sum over the
  batch as one longer chain (the batch entries concatenated along the reduced dimension, in
  ascending batch order), not a sum of per-batch results. Each gradient is produced in the
  memory layout of its input (a column-major ``weight.t()`` gets a column-major gradient),
  so torch's gradient-layout contract holds without a copy.
* ``dbias = onesᵀ · dC``: a :func:`gemm` with ``M = 1`` and ``K`` = the number of rows, on
  the scalar tier whatever the call's tier: ``dbias[j] = round(Σᵢ dC[i, j])`` summed in f32
  in ascending row order, rounded once to the bias dtype.

Because the backward is made of :func:`gemm` calls, double backward works.
"""

from __future__ import annotations

from typing import Any, Optional

import torch
from torch import Tensor

from . import plan as _plan
from .plan import is_col_major

__all__ = ["gemm", "gemm_accumulate_", "Gemm", "LinearFn", "bias_grad", "ones_row", "plain"]

_PLAIN = (Tensor, torch.nn.Parameter)
_is_compiling = torch.compiler.is_compiling


def plain(t: Optional[Tensor]) -> bool:
    """``t`` is None or a plain tensor (not a subclass: fake, functional, DTensor...)."""
    return t is None or type(t) in _PLAIN


def gemm(a: Tensor, b: Tensor, bias: Optional[Tensor], tier: str,
         out_dtype: Optional[torch.dtype]) -> Tensor:
    """``a @ b (+ bias)``, differentiable: the semantics of ``torch.ops.sgemm_bi.gemm``
    (see :mod:`sgemm_bi.ops`) at the cost of the lean path where it can be taken."""
    if _is_compiling() or type(a) not in _PLAIN or type(b) not in _PLAIN or not plain(bias) or (
            a.is_meta):
        return torch.ops.sgemm_bi.gemm(a, b, bias, tier, out_dtype)  # traced, fake or meta
    if torch.is_grad_enabled() and (a.requires_grad or b.requires_grad or (
            bias is not None and bias.requires_grad)):
        return Gemm.apply(a, b, bias, tier, out_dtype)
    return _plan.run(a, b, bias, tier, out_dtype)


def gemm_accumulate_(c: Tensor, a: Tensor, b: Tensor, tier: str) -> None:
    """``c += a @ b`` into an f32 ``c``: ``torch.ops.sgemm_bi.gemm_accumulate_``, by the lean
    path where :func:`gemm` takes it (not differentiable, as the op is not)."""
    if _is_compiling() or type(a) not in _PLAIN or type(b) not in _PLAIN or not plain(c):
        torch.ops.sgemm_bi.gemm_accumulate_(c, a, b, tier)
    else:
        _plan.accumulate(c, a, b, tier)


class Gemm(torch.autograd.Function):
    """``sgemm_bi::gemm`` as an autograd Function over the lean path (eager calls).

    The classic form, ``forward(ctx, ...)``: with a separate ``setup_context``,
    ``Function.apply`` binds the arguments through ``inspect.signature`` on every call
    (about 60 µs, measured on the CPU with torch 2.15)."""

    @staticmethod
    def forward(ctx, a, b, bias, tier, out_dtype):  # type: ignore[no-untyped-def, override]
        plan = _plan.plan_for(a, b, bias, tier, out_dtype)
        out = torch.empty(plan.shape, dtype=plan.dtype, device=a.device)
        _plan.launch(plan, a, b, bias, out)
        # setup_context's work, with the layouts from the plan (is_col_major of each).
        _save(ctx, a, b, bias, tier, plan.a_col, plan.b_col)
        ctx.a_dim, ctx.b_dim = a.dim(), b.dim()
        return out

    @staticmethod
    def backward(ctx, grad):  # type: ignore[no-untyped-def, override]
        return backward(ctx, grad)


class LinearFn(torch.autograd.Function):
    """``linear(x, weight, bias)`` as one autograd node: :class:`Gemm` of ``x`` flattened to
    rows and ``weight.t()``, without the graph nodes of those views (a reshape of ``x`` and
    a transpose of ``weight``, each a node in the backward). Takes the call's
    :class:`~sgemm_bi.plan.Plan`, built and checked by :func:`sgemm_bi.linear` for these
    arguments, which it reads in place. The gradients are :class:`Gemm`'s formulas."""

    @staticmethod
    def forward(ctx, x, weight, bias, tier, plan, shape):  # type: ignore[no-untyped-def, override]
        out = torch.empty(shape, dtype=plan.dtype, device=x.device)
        _plan.launch(plan, x, weight, bias, out)
        # The layouts of x's rows and of weight.t(), as the plan reads them.
        _save(ctx, x, weight, bias, tier, plan.a_col, plan.b_col)
        return out

    @staticmethod
    def backward(ctx, grad):  # type: ignore[no-untyped-def, override]
        x, w = ctx.saved_tensors
        tier = ctx.tier
        g = grad if grad.dtype == ctx.in_dtype else grad.to(ctx.in_dtype)
        g2 = g.reshape(-1, g.shape[-1])
        dx = dw = dbias = None
        if ctx.needs_input_grad[0]:
            dx = _grad_a(g2, w.t(), 2, ctx.a_col, tier).reshape(grad.shape[:-1] + w.shape[1:])
        if ctx.needs_input_grad[1]:
            x2 = x.reshape(-1, x.shape[-1])
            dw = _grad_b(x2, g2, 2, ctx.b_col, tier).t()  # d(weight.t()), transposed back
        if ctx.bias_dtype is not None and ctx.needs_input_grad[2]:
            dbias = bias_grad(grad, ctx.bias_dtype)
        return dx, dw, dbias, None, None, None


_ONES_MAX = 64
_ones: dict[tuple[Any, ...], Tensor] = {}
_capturing = torch.cuda.is_current_stream_capturing


def ones_row(rows: int, like: Tensor) -> Tensor:
    """A ``[1, rows]`` tensor of ones of ``like``'s dtype and device, kept per (rows, dtype,
    device, stream) for plain tensors: a bias gradient is ``onesᵀ · dY``, and a fresh
    ``torch.ones`` cost 8 µs of host time a call on the H200 (docs/perf-notes.md). Never
    written to. A fresh one when ``like`` is not a plain tensor or torch is tracing (a kept
    fake or functional tensor would leak into real calls), and while a CUDA graph is being
    captured (the fill would exist only in the graph); kept per stream so that no stream
    reads it before the fill queued on another has run."""
    dtype, device = like.dtype, like.device
    cuda = device.type == "cuda"
    if type(like) not in _PLAIN or _is_compiling() or (cuda and _capturing()):
        return torch.ones((1, rows), dtype=dtype, device=device)
    stream = None
    if cuda:
        stream = _plan._raw_stream(device.index if device.index is not None
                                   else torch.cuda.current_device())
    key = (rows, dtype, device, stream)
    t = _ones.get(key)
    if t is None:
        if len(_ones) >= _ONES_MAX:
            _ones.clear()
        t = _ones[key] = torch.ones((1, rows), dtype=dtype, device=device)
    return t


def bias_grad(grad: Tensor, dtype: torch.dtype) -> Tensor:
    """``dbias = onesᵀ · grad`` over every row of ``grad`` (``[..., N]``), in ``dtype``: one
    f32 chain per column in ascending row order on the scalar tier, rounded once."""
    n = grad.shape[-1]
    g2 = grad.reshape(-1, n)
    return gemm(ones_row(g2.shape[0], g2), g2, None, "scalar", dtype).reshape(n)


def _mm(a: Tensor, b: Tensor, tier: str) -> Tensor:
    return gemm(a, b, None, tier, None)


def _grad_a(g: Tensor, b: Tensor, a_dim: int, a_col: bool, tier: str) -> Tensor:
    """dA for ``C = A·B`` given ``g = dC``, in A's layout."""
    if a_dim == 2 and b.dim() == 3:
        # A shared by the batch: dA = Σ_b g[b]·b[b]ᵀ as one chain over (b, n).
        bsz, k, n = b.shape
        m = g.shape[-2]
        g2 = g.permute(1, 0, 2).reshape(m, bsz * n)  # [M, B·N]
        b2 = b.permute(0, 2, 1).reshape(bsz * n, k)  # [B·N, K]
        return _mm(b2.t(), g2.t(), tier).t() if a_col else _mm(g2, b2, tier)
    if a_col:
        return _mm(b, g.transpose(-1, -2), tier).transpose(-1, -2)  # dAᵀ = B·gᵀ
    return _mm(g, b.transpose(-1, -2), tier)


def _grad_b(a: Tensor, g: Tensor, b_dim: int, b_col: bool, tier: str) -> Tensor:
    """dB for ``C = A·B`` given ``g = dC``, in B's layout."""
    if b_dim == 2 and a.dim() == 3:
        # B shared by the batch: dB = Σ_b a[b]ᵀ·g[b] as one chain over (b, m).
        bsz, m, k = a.shape
        n = g.shape[-1]
        a2 = a.reshape(bsz * m, k)
        g2 = g.reshape(bsz * m, n)
        return _mm(g2.t(), a2, tier).t() if b_col else _mm(a2.t(), g2, tier)
    if b_col:
        return _mm(g.transpose(-1, -2), a, tier).transpose(-1, -2)  # dBᵀ = gᵀ·A
    return _mm(a.transpose(-1, -2), g, tier)


def _save(ctx: Any, a: Tensor, b: Tensor, bias: Optional[Tensor], tier: str, a_col: bool,
          b_col: bool) -> None:
    """What every backward here needs: an operand only where the other one's gradient is
    asked for, the layouts (a gradient comes back in its input's layout) and the dtypes."""
    need_a, need_b = ctx.needs_input_grad[0], ctx.needs_input_grad[1]
    ctx.save_for_backward(a if need_b else None, b if need_a else None)
    ctx.a_col, ctx.b_col = a_col, b_col
    ctx.in_dtype = a.dtype
    ctx.bias_dtype = None if bias is None else bias.dtype
    ctx.tier = tier


def setup_context(ctx: Any, inputs: tuple[Any, ...], output: Tensor) -> None:
    """What the backward needs: an operand only where the other one's gradient is asked
    for, the layouts (a gradient comes back in its input's layout) and the dtypes."""
    a, b, bias, tier, out_dtype = inputs
    need_a, need_b = ctx.needs_input_grad[0], ctx.needs_input_grad[1]
    _save(ctx, a, b, bias, tier, need_a and is_col_major(a), need_b and is_col_major(b))
    ctx.a_dim, ctx.b_dim = a.dim(), b.dim()


def backward(ctx: Any, grad: Tensor) -> tuple[Optional[Tensor], ...]:
    """The gradients of ``gemm(a, b, bias, tier, out_dtype)`` (see the module docstring)."""
    a, b = ctx.saved_tensors
    g = grad if grad.dtype == ctx.in_dtype else grad.to(ctx.in_dtype)
    ga = gb = gbias = None
    if ctx.needs_input_grad[0]:
        ga = _grad_a(g, b, ctx.a_dim, ctx.a_col, ctx.tier)
    if ctx.needs_input_grad[1]:
        gb = _grad_b(a, g, ctx.b_dim, ctx.b_col, ctx.tier)
    if ctx.bias_dtype is not None and ctx.needs_input_grad[2]:
        gbias = bias_grad(grad, ctx.bias_dtype)
    return ga, gb, gbias, None, None
