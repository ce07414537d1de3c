"""The mode: every matmul of an unmodified model through the engine, forward and backward.

``sgemm_bi.enable(tier)`` / ``sgemm_bi.disable()``, or ``with sgemm_bi.mode(tier): ...``,
install two torch modes on the calling thread (torch keeps mode stacks per thread; the
autograd engine carries them into the backward pass):

* a :class:`~torch.utils._python_dispatch.TorchDispatchMode` that routes the ATen ops
  ``mm``, ``addmm``, ``bmm`` and ``baddbmm`` (and their ``out=`` forms) to the engine. They
  are what ``torch.matmul``, ``@``, ``torch.einsum`` and ``F.linear`` become, and what the
  autograd formulas of all of them call, so dX and dW of every matmul in the model run on
  the engine. ``addmm``/``baddbmm`` with a bias-shaped ``input`` (a row vector broadcast
  over the rows) and ``beta = alpha = 1`` pass it to the engine as the bias; otherwise the
  product is computed in f32 and ``beta·input + alpha·product`` is rounded once to the
  output dtype.
* a :class:`~torch.overrides.TorchFunctionMode` that sends ``F.linear`` (``nn.Linear``'s
  forward) to :func:`sgemm_bi.linear`, so the bias gradient of every linear layer is the
  engine's fixed-order column sum too. With the mode on, an ``nn.Linear`` computes
  exactly the bits of ``sgemm_bi.Linear``.

What falls through to torch, unchanged: tensors of other dtypes (float64, integers,
complex), other devices (MPS, XLA, meta), sparse tensors and tensor subclasses (including
the fake tensors of ``torch.compile`` tracing), ``addmm`` whose ``input`` has another dtype
than the matrices, and the ops not listed (``mv``, ``dot``, ``addmv``, ``addbmm``,
``_addmm_activation``, attention kernels such as ``scaled_dot_product_attention``). Bias
gradients of ``addmm``/``baddbmm`` called directly (not through ``F.linear``) are torch's
own reduction.

Inside ``torch.autocast`` torch casts the operands before the dispatch mode sees them, so
routed ops compute in the autocast dtype exactly as torch's would.

``tier="tensor_cores"`` is never replaced by another tier: a float32 matmul under that mode
raises :class:`~sgemm_bi.errors.UnsupportedDtypeError`; ``"auto"`` picks per call.

Each intercepted op costs a few microseconds of Python; the mode is for making existing
models deterministic, not for shaving launch overhead.
"""

from __future__ import annotations

import contextlib
import threading
from typing import Any, Callable, Iterator, Optional

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

from .functional import linear
from .ops import TIER_DEFAULT, TORCH_DTYPES, pick_tier, run_gemm

__all__ = ["enable", "disable", "mode", "is_enabled"]

aten = torch.ops.aten

_PLAIN = (torch.Tensor, torch.nn.Parameter)


def _plain(*ts: Optional[Tensor]) -> bool:
    """All tensors are plain strided CPU/CUDA tensors of one device and a supported dtype."""
    device = None
    for t in ts:
        if t is None:
            continue
        if type(t) not in _PLAIN or t.layout != torch.strided:
            return False
        if t.device.type not in ("cpu", "cuda") or t.dtype not in TORCH_DTYPES:
            return False
        if device is None:
            device = t.device
        elif t.device != device:
            return False
    return True


def _bias_vector(t: Tensor, n: int) -> Optional[Tensor]:
    """``t`` as a ``[n]`` vector when it is one broadcast over every leading dimension."""
    if t.dim() == 0 or t.shape[-1] != n:
        return None
    for size, stride in zip(t.shape[:-1], t.stride()[:-1]):
        if size != 1 and stride != 0:
            return None
    return t[(0,) * (t.dim() - 1)] if t.dim() > 1 else t


def _routable(a: Tensor, b: Tensor, dims: int) -> bool:
    """``a @ b`` is a product the engine takes: plain tensors, one dtype, ``dims``-D."""
    return _plain(a, b) and a.dtype == b.dtype and a.dim() == dims and b.dim() == dims


def _mm(tier: str, a: Tensor, b: Tensor, dims: int) -> Any:
    if not _routable(a, b, dims):
        return NotImplemented
    return run_gemm(a, b, None, tier)


def _addmm(tier: str, c: Tensor, a: Tensor, b: Tensor, dims: int, beta: Any = 1,
           alpha: Any = 1) -> Any:
    if not _routable(a, b, dims) or not _plain(c, a) or c.dtype != a.dtype:
        return NotImplemented
    if beta == 1 and alpha == 1:
        vec = _bias_vector(c, b.shape[-1])
        if vec is not None:
            return run_gemm(a, b, vec, tier)
    prod = run_gemm(a, b, None, tier, torch.float32)
    if alpha != 1:
        prod = prod * alpha
    if beta != 0:
        prod = prod + beta * c.to(torch.float32)
    return prod.to(a.dtype)


def _out(route: Callable[..., Any]) -> Callable[..., Any]:
    """The ``out=`` form of a route: compute, then resize and copy into ``out``."""

    def run(tier: str, *args: Any, out: Tensor, **kwargs: Any) -> Any:
        if not _plain(out):
            return NotImplemented
        res = route(tier, *args, **kwargs)
        if res is NotImplemented or res.dtype != out.dtype:
            return NotImplemented
        out.resize_(res.shape)
        out.copy_(res)
        return out

    return run


def _mm2(tier: str, a: Tensor, b: Tensor) -> Any:
    return _mm(tier, a, b, 2)


def _bmm(tier: str, a: Tensor, b: Tensor) -> Any:
    return _mm(tier, a, b, 3)


def _addmm2(tier: str, c: Tensor, a: Tensor, b: Tensor, *, beta: Any = 1, alpha: Any = 1) -> Any:
    return _addmm(tier, c, a, b, 2, beta, alpha)


def _baddbmm(tier: str, c: Tensor, a: Tensor, b: Tensor, *, beta: Any = 1,
             alpha: Any = 1) -> Any:
    return _addmm(tier, c, a, b, 3, beta, alpha)


_ROUTES: dict[Any, Callable[..., Any]] = {
    aten.mm.default: _mm2,
    aten.mm.out: _out(_mm2),
    aten.bmm.default: _bmm,
    aten.bmm.out: _out(_bmm),
    aten.addmm.default: _addmm2,
    aten.addmm.out: _out(_addmm2),
    aten.baddbmm.default: _baddbmm,
    aten.baddbmm.out: _out(_baddbmm),
}


class _GemmDispatchMode(TorchDispatchMode):
    """Routes aten mm/addmm/bmm/baddbmm of plain CPU/CUDA tensors to the engine."""

    def __init__(self, tier: str) -> None:
        super().__init__()
        self.tier = tier

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        kwargs = kwargs or {}
        route = _ROUTES.get(func)
        if route is not None:
            out = route(self.tier, *args, **kwargs)
            if out is not NotImplemented:
                return out
        return func(*args, **kwargs)


def _linear_eligible(x: Any, w: Any, b: Any) -> bool:
    if not all(t is None or type(t) in _PLAIN for t in (x, w, b)) or x is None or w is None:
        return False
    device = x.device.type
    if device not in ("cpu", "cuda"):
        return False
    if torch.is_autocast_enabled(device):
        return all(t is None or t.is_floating_point() and t.dtype != torch.float64
                   for t in (x, w, b))
    return _plain(x, w, b) and x.dtype == w.dtype and (b is None or b.dtype in (
        torch.float32, x.dtype))


class _LinearFunctionMode(TorchFunctionMode):
    """Sends ``F.linear`` to :func:`sgemm_bi.linear` (engine bias gradient)."""

    def __init__(self, tier: str) -> None:
        super().__init__()
        self.tier = tier

    def __torch_function__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        kwargs = kwargs or {}
        if func is F.linear:
            x, w, b = _linear_args(*args, **kwargs)
            if _linear_eligible(x, w, b):
                return linear(x, w, b, tier=self.tier)
        return func(*args, **kwargs)


def _linear_args(input: Any, weight: Any, bias: Any = None) -> tuple[Any, Any, Any]:
    return input, weight, bias


_state = threading.local()


def _modes(tier: str, tensor_cores: Optional[bool]) -> tuple[_LinearFunctionMode,
                                                             _GemmDispatchMode]:
    tier = pick_tier(tier, tensor_cores)
    return _LinearFunctionMode(tier), _GemmDispatchMode(tier)


def enable(tier: str = TIER_DEFAULT, *, tensor_cores: Optional[bool] = None) -> None:
    """Routes every matmul on this thread through the engine until :func:`disable` (see the
    module documentation for what is routed). Calling it again replaces the tier.
    ``tensor_cores=True``/``False`` is sgemm-bi 0.1's spelling of ``tier="tensor_cores"``/
    ``"scalar"`` (not together with ``tier``)."""
    modes = _modes(tier, tensor_cores)
    disable()
    modes[0].__enter__()
    try:
        modes[1].__enter__()
    except BaseException:
        modes[0].__exit__(None, None, None)
        raise
    _state.modes = modes


def disable() -> None:
    """Undoes :func:`enable` on this thread (does nothing when it is not enabled). Modes
    entered after :func:`enable` must have been exited first."""
    modes = getattr(_state, "modes", None)
    if modes is None:
        return
    _state.modes = None
    fmode, dmode = modes
    try:
        dmode.__exit__(None, None, None)
    finally:
        fmode.__exit__(None, None, None)


@contextlib.contextmanager
def mode(tier: str = TIER_DEFAULT, *, tensor_cores: Optional[bool] = None) -> Iterator[None]:
    """``with sgemm_bi.mode(tier):`` — :func:`enable` for the duration of the block
    (``tier`` and ``tensor_cores`` as for :func:`enable`)."""
    fmode, dmode = _modes(tier, tensor_cores)
    with fmode, dmode:
        yield


def is_enabled() -> bool:
    """Whether a sgemm-bi mode (:func:`enable` or :func:`mode`) is active on this thread."""
    from torch.utils._python_dispatch import _get_current_dispatch_mode_stack

    return any(isinstance(m, _GemmDispatchMode) for m in _get_current_dispatch_mode_stack())
