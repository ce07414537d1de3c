"""What the mode registers: one kernel per ATen op and dispatch key, each routing what the
engine takes and handing everything else to torch's own kernel.

:func:`kernels` lists them for :mod:`sgemm_bi.dispatch`, which installs them with
``torch.library.Library("aten", "IMPL")``:

* on the ``CPU`` and ``CUDA`` keys, ``mm``, ``addmm``, ``bmm`` and ``baddbmm`` and their
  ``out=`` overloads — what ``aten::matmul`` (``torch.matmul``, ``@``), ``torch.einsum`` and
  ``aten::linear`` decompose into on both devices, what torch's autograd formulas of all of
  them call, and what ``torch.compile``'s generated code calls (``extern_kernels.mm(...,
  out=...)``);
* on the ``CPU`` and ``CUDA`` keys, ``_grouped_mm`` (``F.grouped_mm``, and the gradients its
  autograd formula computes with it) where torch has it: :func:`sgemm_bi.grouped_mm`'s
  engine call;
* with ``bias_grad="engine"`` (:func:`kernels` with ``linear=True``), on the
  ``AutogradCPU`` and ``AutogradCUDA`` keys, ``linear`` — ahead of its decomposition into
  ``addmm``, so that ``F.linear`` / ``nn.Linear`` run :func:`sgemm_bi.linear` and the bias
  gradient is the engine's fixed-order column sum as well. Autocast's kernel runs before
  this key, so the operands arrive already cast.

A kernel on a backend key runs below autograd (torch's autograd kernel has already recorded
the op), so the routes call the lean path (:func:`sgemm_bi.plan.run`) with no autograd of
their own. Anything a route does not take — another dtype (float64, integers, complex),
mixed dtypes or devices, a tensor subclass, wrong ranks or shapes (so that torch raises its
own error) — goes to the kernel torch had on that key before the mode was installed
(:func:`torch.library.get_kernel`, fetched at install time), so nothing recurses and torch's
result, bits and errors are unchanged. Sparse, quantized, meta and fake tensors never reach
these keys.

``addmm``/``baddbmm`` with ``beta = alpha = 1`` and a bias-shaped ``input`` (a row vector
broadcast over the rows) pass it to the engine as the bias; otherwise the product is
computed in f32 and ``beta·input + alpha·product`` is rounded once to the output dtype. The
``out=`` forms write into ``out`` directly when it is a contiguous tensor of the result's
shape and dtype, and otherwise resize and copy.
"""

from __future__ import annotations

from typing import Any, Callable, Optional

import torch
from torch import Tensor

from . import native as _native
from . import plan as _plan
from .checks import TORCH_DTYPES
from .functional import linear as _linear_fn
from .grouped import _run as _grouped_run

__all__ = ["kernels", "tier"]

tier: str = "auto"
"""The tier of the routes: set by :mod:`sgemm_bi.dispatch` (the innermost active mode's)."""

_PLAIN = (Tensor, torch.nn.Parameter)
_TIER_CODES = _native.TIER_CODES
_F32 = torch.float32


def _pair(a: Tensor, b: Tensor, dims: int) -> bool:
    """``a @ b`` is a product the engine takes: plain tensors of one supported dtype and one
    device, ``dims``-D, with shapes that multiply (else torch's kernel says what is
    wrong)."""
    if type(a) not in _PLAIN or type(b) not in _PLAIN:
        return False
    dt = a.dtype
    if dt not in TORCH_DTYPES or b.dtype != dt or a.dim() != dims or b.dim() != dims:
        return False
    if a.get_device() != b.get_device():
        return False
    if dims == 2:
        return a.shape[1] == b.shape[0]
    return a.shape[2] == b.shape[1] and a.shape[0] == b.shape[0]


def _bias_vector(t: Tensor, n: int) -> Optional[Tensor]:
    """``t`` as a ``[n]`` vector when it is one broadcast over every leading dimension."""
    dim = t.dim()
    if dim == 1:
        return t if t.shape[0] == n else None
    if dim == 0 or t.shape[-1] != n:
        return None
    for size, stride in zip(t.shape[:-1], t.stride()[:-1]):
        if size != 1 and stride != 0:
            return None
    return t[(0,) * (dim - 1)]


def _mm_kernel(dims: int, torch_kernel: Any) -> Callable[..., Any]:
    def kernel(ks: Any, a: Tensor, b: Tensor) -> Tensor:
        if _pair(a, b, dims):
            return _plan.run(a, b, None, tier)
        return torch_kernel.call_boxed(ks, a, b)

    return kernel


def _addmm_value(c: Tensor, a: Tensor, b: Tensor, beta: Any, alpha: Any) -> Tensor:
    """``beta·c + alpha·(a @ b)`` of routable ``a``, ``b``: the bias path when it applies."""
    if beta == 1 and alpha == 1:
        vec = _bias_vector(c, b.shape[-1])
        if vec is not None:
            return _plan.run(a, b, vec, tier)
    prod = _plan.run(a, b, None, tier, _F32)
    if alpha != 1:
        prod = prod * alpha
    if beta != 0:
        prod = prod + beta * c.to(_F32)
    return prod.to(a.dtype)


def _addmm_kernel(dims: int, torch_kernel: Any, native_bias: Any = None) -> Callable[..., Any]:
    """``native_bias``: ``sgemm_bi::matmul_bias`` where the key's kernels are native (2-D
    only), which runs the bias path with no more Python."""
    def kernel(ks: Any, c: Tensor, a: Tensor, b: Tensor, *, beta: Any = 1,
               alpha: Any = 1) -> Tensor:
        if native_bias is not None and beta == 1 and alpha == 1 and type(a) in _PLAIN and (
                type(b) in _PLAIN and type(c) in _PLAIN and c.dtype is a.dtype
                and a.dim() == 2 and c.dim() == 1):
            # F.linear's call with a bias, straight to the native op, which checks the rest
            # (dtypes, devices, shapes) itself and refuses with a RuntimeError what it does
            # not take; the checks below then route it or hand it to torch. This Python
            # kernel is the call's floor (addmm takes Scalars, which a native kernel cannot
            # receive), so every check it does not need is time over that floor.
            try:
                return native_bias(a, b, c, _TIER_CODES[tier], False)
            except RuntimeError:
                pass
        if _pair(a, b, dims) and type(c) in _PLAIN and c.dtype == a.dtype and (
                c.get_device() == a.get_device()):
            if native_bias is not None and beta == 1 and alpha == 1:
                vec = _bias_vector(c, b.shape[-1])
                if vec is not None:
                    return native_bias(a, b, vec, _TIER_CODES[tier], False)
            return _addmm_value(c, a, b, beta, alpha)
        return torch_kernel.call_boxed(ks, c, a, b, beta=beta, alpha=alpha)

    return kernel


def _into(out: Tensor, res: Tensor) -> Tensor:
    if out.shape != res.shape:
        out.resize_(res.shape)
    out.copy_(res)
    return out


def _direct(out: Tensor, a: Tensor, b: Tensor, bias: Optional[Tensor]) -> bool:
    """Launches ``a @ b (+ bias)`` straight into ``out`` when it is a plain contiguous
    tensor of the result's shape and dtype; False (nothing done) otherwise."""
    if type(out) not in _PLAIN or out.dtype != a.dtype or not out.is_contiguous() or (
            out.get_device() != a.get_device()):
        return False
    plan = _plan.plan_for(a, b, bias, tier)
    if list(out.shape) != plan.shape:
        return False
    _plan.launch(plan, a, b, bias, out)
    return True


def _mm_out_kernel(dims: int, torch_kernel: Any) -> Callable[..., Any]:
    def kernel(ks: Any, a: Tensor, b: Tensor, *, out: Tensor) -> Tensor:
        if _pair(a, b, dims) and type(out) in _PLAIN and out.dtype == a.dtype:
            if _direct(out, a, b, None):
                return out
            return _into(out, _plan.run(a, b, None, tier))
        return torch_kernel.call_boxed(ks, a, b, out=out)

    return kernel


def _addmm_out_kernel(dims: int, torch_kernel: Any) -> Callable[..., Any]:
    def kernel(ks: Any, c: Tensor, a: Tensor, b: Tensor, *, beta: Any = 1, alpha: Any = 1,
               out: Tensor) -> Tensor:
        if _pair(a, b, dims) and type(c) in _PLAIN and c.dtype == a.dtype and (
                c.get_device() == a.get_device()) and type(out) in _PLAIN and (
                out.dtype == a.dtype):
            if beta == 1 and alpha == 1:
                vec = _bias_vector(c, b.shape[-1])
                if vec is not None and _direct(out, a, b, vec):
                    return out
            return _into(out, _addmm_value(c, a, b, beta, alpha))
        return torch_kernel.call_boxed(ks, c, a, b, beta=beta, alpha=alpha, out=out)

    return kernel


def _linear_eligible(x: Any, w: Any, b: Any) -> bool:
    """``F.linear(x, w, b)`` is one :func:`sgemm_bi.linear` takes with torch's semantics
    (else torch's own composite runs, and raises its own errors)."""
    if type(x) not in _PLAIN or type(w) not in _PLAIN:
        return False
    dt = x.dtype
    if dt not in TORCH_DTYPES or w.dtype != dt or w.dim() != 2 or x.dim() == 0:
        return False
    if x.shape[-1] != w.shape[1] or x.get_device() != w.get_device():
        return False
    if b is None:
        return True
    return type(b) in _PLAIN and (b.dtype == dt or b.dtype == _F32) and b.dim() == 1 and (
        b.shape[0] == w.shape[0]) and b.get_device() == x.get_device()


def _linear_kernel(torch_kernel: Any) -> Callable[..., Any]:
    def kernel(ks: Any, x: Tensor, w: Tensor, b: Optional[Tensor] = None) -> Tensor:
        if _linear_eligible(x, w, b):
            return _linear_fn(x, w, b, tier=tier)
        return torch_kernel.call_boxed(ks, x, w, b)

    return kernel


def _grouped_eligible(a: Any, b: Any, offs: Any, bias: Any, out_dtype: Any) -> bool:
    """``aten::_grouped_mm(a, b, offs, bias, out_dtype)`` is a call the engine takes with
    torch's semantics (else torch's kernel runs, and raises its own errors)."""
    if type(a) not in _PLAIN or type(b) not in _PLAIN or bias is not None:
        return False
    if a.dtype not in TORCH_DTYPES or b.dtype != a.dtype or a.device != b.device:
        return False
    if out_dtype is not None and out_dtype not in TORCH_DTYPES:
        return False
    if a.dim() not in (2, 3) or b.dim() not in (2, 3) or a.shape[-1] != b.shape[-2]:
        return False
    if a.dim() == 3 and b.dim() == 3:
        return offs is None and a.shape[0] == b.shape[0]
    if type(offs) is not Tensor or offs.dtype != torch.int32 or offs.dim() != 1:
        return False
    if offs.device != a.device and offs.device.type != "cpu":
        return False
    groups = offs.shape[0]
    if a.dim() == 2 and b.dim() == 3:
        return b.shape[0] == groups
    return a.dim() == 2 or a.shape[0] == groups


def _grouped_kernel(torch_kernel: Any) -> Callable[..., Any]:
    """``aten::_grouped_mm`` (what ``F.grouped_mm`` calls, and torch's autograd formula of it
    calls again for both gradients): the engine's grouped call, below autograd."""
    def kernel(ks: Any, a: Tensor, b: Tensor, offs: Optional[Tensor] = None,
               bias: Optional[Tensor] = None, out_dtype: Any = None) -> Tensor:
        if _grouped_eligible(a, b, offs, bias, out_dtype):
            return _grouped_run(a, b, offs, None, tier, out_dtype)
        return torch_kernel.call_boxed(ks, a, b, offs, bias, out_dtype)

    return kernel


_OPS: dict[str, tuple[Callable[[int, Any], Callable[..., Any]], int]] = {
    "mm": (_mm_kernel, 2),
    "mm.out": (_mm_out_kernel, 2),
    "bmm": (_mm_kernel, 3),
    "bmm.out": (_mm_out_kernel, 3),
    "addmm": (_addmm_kernel, 2),
    "addmm.out": (_addmm_out_kernel, 2),
    "baddbmm": (_addmm_kernel, 3),
    "baddbmm.out": (_addmm_out_kernel, 3),
}


def kernels(linear: bool = False, native: frozenset[str] = frozenset(),
            ) -> list[tuple[str, str, Callable[..., Any]]]:
    """(op, dispatch key, kernel) for every registration of the mode; ``linear`` adds the
    ``linear`` kernels on the autograd keys (``bias_grad="engine"``); on the keys in
    ``native`` (whose mm and bmm are :mod:`sgemm_bi.native`'s), ``addmm``'s bias path calls
    the native ``sgemm_bi::matmul_bias``. Each kernel falls back to torch's kernel of its
    key, fetched now: call this before registering any Python route (only the native mm and
    bmm, which no route falls back to, may be registered already), so that the fallbacks
    are torch's own and never one of these."""
    out = []
    ops = _native.ops() if native else None
    # The operator's C++ callable, without OpOverload.__call__'s Python frame.
    native_bias = getattr(ops[1], "_op", ops[1]) if ops is not None else None
    for backend, autograd in (("CPU", "AutogradCPU"), ("CUDA", "AutogradCUDA")):
        try:
            theirs = {op: torch.library.get_kernel(f"aten::{op}", backend) for op in _OPS}
            if linear:
                theirs["linear"] = torch.library.get_kernel("aten::linear", autograd)
        except RuntimeError:
            # "no kernel for CUDA": a torch built without that backend has no tensors of it
            # to route, so its key gets no kernels of ours either.
            continue
        for op, (make, dims) in _OPS.items():
            if op == "addmm" and backend in native:
                out.append((op, backend, _addmm_kernel(dims, theirs[op], native_bias)))
            else:
                out.append((op, backend, make(dims, theirs[op])))
        if linear:
            out.append(("linear", autograd, _linear_kernel(theirs["linear"])))
        try:
            grouped = torch.library.get_kernel("aten::_grouped_mm", backend)
        except (RuntimeError, AttributeError):
            continue  # a torch without grouped_mm on this backend: nothing to route
        out.append(("_grouped_mm", backend, _grouped_kernel(grouped)))
    return out
