"""The mode: every matmul of an unmodified model through the engine, forward and backward.

``sgemm_bi.enable(tier)`` / ``sgemm_bi.disable()``, or ``with sgemm_bi.mode(tier): ...``,
register kernels for ATen's matmul ops on their CPU and CUDA dispatch keys
(``torch.library.Library("aten", "IMPL")``, see :mod:`sgemm_bi.routes` for what each one
takes):

* ``mm``, ``addmm``, ``bmm`` and ``baddbmm`` and their ``out=`` forms on ``CPU`` and
  ``CUDA`` — what ``torch.matmul``, ``@``, ``torch.einsum`` and ``F.linear`` become, what
  the autograd formulas of all of them call, and what ``torch.compile``'s generated code
  calls, so dX and dW of every matmul in the model run on the engine. ``addmm``/``baddbmm``
  with a bias-shaped ``input`` (a row vector broadcast over the rows) and ``beta = alpha =
  1`` pass it to the engine as the bias; otherwise the product is computed in f32 and
  ``beta·input + alpha·product`` is rounded once to the output dtype.
* torch's own autograd: ``F.linear`` / ``nn.Linear`` decompose into ``addmm`` (2-D inputs,
  and contiguous N-D ones folded to rows) or ``matmul`` + ``add``, and their backward
  formulas call ``mm`` for dX and dW, so forward, dX and dW are the engine's, with the bits
  of :func:`sgemm_bi.linear` wherever torch folds the bias into ``addmm``. The bias gradient
  is torch's reduction of dY over the rows (``sum``): deterministic on each device, but not
  the engine's fixed-order column sum, so it differs between the CPU and a GPU.
* with ``bias_grad="engine"``, also ``linear`` on ``AutogradCPU`` and ``AutogradCUDA``,
  which sends ``F.linear`` to :func:`sgemm_bi.linear`: the bias gradient is then the
  engine's column sum (one f32 chain per column in ascending row order), the same bits on
  the CPU and on every GPU, and an ``nn.Linear`` computes exactly the bits of
  ``sgemm_bi.Linear``. It costs a Python autograd function per ``F.linear`` call (10–20 µs
  of host time a call on the H200, docs/perf-notes.md); use it where a model with biases
  must train to the same bits on the CPU and on a GPU. (Under ``torch.inference_mode``
  there is no autograd key: ``linear`` decomposes into ``addmm`` with the bias, which takes
  the bias path above — the same bits.)

**Native kernels.** On Linux, ``mm`` and ``bmm`` on the ``CPU`` key, and on the ``CUDA`` key
where torch has CUDA, are registered by ``libsgemm_bi`` itself through torch's stable C ABI
(:mod:`sgemm_bi.native`), so a routed matmul runs no Python: the same bits (on a GPU,
``"auto"`` is tensor cores for bf16/f16 and the scalar tier for f32, as in the Python
routes), launched on torch's current stream of the tensors' device; what the engine does
not take goes to torch's own kernel of that device, with torch's checks and messages (an
engine error raises ``RuntimeError``). Not for ``tier="tensor_cores"``, whose f32 calls
raise the typed :class:`~sgemm_bi.errors.UnsupportedDtypeError` from the Python routes, and
not with ``SGEMM_BI_NATIVE=0``. ``addmm`` and ``baddbmm`` (what ``F.linear`` with a bias
becomes) take ``Scalar`` arguments, which torch's stable ABI cannot pass to a native
kernel: they stay Python routes, at the cost of a Python kernel per call.

Ops the mode does not register run exactly as without it and cost nothing more: there is no
Python on their path. (In 0.2.0 and before, the mode was a ``TorchDispatchMode`` plus a
``TorchFunctionMode``, which saw every op: about 2x the cost of a small unrouted op, and
several microseconds on each routed one.)

What falls through to torch's own kernel, unchanged: tensors of other dtypes (float64,
integers, complex), other devices (MPS, XLA, meta), sparse tensors and tensor subclasses
(including the fake tensors of ``torch.compile`` tracing: the compiled code's calls on real
tensors are routed when it runs), ``addmm`` whose ``input`` has another dtype than the
matrices, calls whose shapes or dtypes torch refuses (torch raises its own error), and the
ops not listed (``mv``, ``dot``, ``addmv``, ``addbmm``, ``_addmm_activation``, attention
kernels such as ``scaled_dot_product_attention``). Bias gradients of ``addmm``/``baddbmm``
called directly (not through ``F.linear``) are torch's own reduction.

Inside ``torch.autocast`` torch casts the operands before these kernels see them, so routed
ops compute in the autocast dtype exactly as torch's would.

**Process-wide.** Operator registrations belong to the process, not to a thread (torch's
modes, used in 0.2.0 and before, were per thread). While any ``enable()`` or ``mode()`` is
active, the matmuls of every thread are routed, with the tier of the innermost active one:
the most recently entered ``mode()`` or ``enable()`` call that has not been exited or
disabled, and its ``bias_grad`` (switching it re-registers the kernels). ``mode()`` blocks nest and may be entered from several threads; each exit removes
its own entry. ``enable()`` holds one entry (calling it again replaces its tier in place),
which ``disable()`` removes; ``disable()`` does not end ``mode()`` blocks. When the last
entry goes, the registrations are destroyed and torch's kernels are back. Changes are made
under one lock. A matmul that another thread runs while the state changes runs with the
state before or after the change, and which one is a race: change the mode where no other
thread is computing.

``tier="tensor_cores"`` is never replaced by another tier: a float32 matmul under that mode
raises :class:`~sgemm_bi.errors.UnsupportedDtypeError`; ``"auto"`` picks per call.

Needs ``torch.library.get_kernel`` (torch 2.9 and later) to reach torch's own kernels from
the fallbacks.
"""

from __future__ import annotations

import contextlib
import threading
import warnings
from typing import Any, Callable, Iterator, Optional

import torch

from . import native, routes
from .checks import TIER_DEFAULT, pick_tier

__all__ = ["enable", "disable", "mode", "is_enabled", "active_tier"]


BIAS_GRADS = ("torch", "engine")


def _bias_grad(value: str) -> str:
    if value not in BIAS_GRADS:
        raise ValueError(f"bias_grad must be 'torch' or 'engine', not {value!r}")
    return value


class _Entry:
    """One active ``enable()`` or ``mode()``, with its tier and bias gradient."""

    __slots__ = ("tier", "bias_grad")

    def __init__(self, tier: str, bias_grad: str) -> None:
        self.tier = tier
        self.bias_grad = bias_grad


_lock = threading.RLock()
_entries: list[_Entry] = []  # the active ones, oldest first; the last one's tier is used
_enabled: Optional[_Entry] = None  # enable()'s entry
_library: Optional[torch.library.Library] = None
_library_linear = False  # whether _library holds the linear kernels (bias_grad="engine")


_native: frozenset[str] = frozenset()  # the dispatch keys with native mm and bmm kernels
_library_native = False  # whether _library was built to use them (even where none installed)


def _update() -> None:
    """Makes the registrations and the routes' tier match ``_entries`` (under ``_lock``)."""
    global _library, _library_linear, _library_native, _native
    if _entries:
        tier = _entries[-1].tier
        routes.tier = tier
        linear = _entries[-1].bias_grad == "engine"
        # Native kernels raise a RuntimeError for what the engine refuses; the one refusal
        # a valid call can meet is an f32 call on the tensor-core tier, whose typed error
        # (UnsupportedDtypeError) the Python routes keep.
        use_native = tier != "tensor_cores" and native.available()
        if _library is not None and (_library_linear, _library_native) != (linear, use_native):
            lib, _library = _library, None
            lib._destroy()
            if _native and not use_native:
                native.uninstall()
                _native = frozenset()
        if _library is None:
            if not hasattr(torch.library, "get_kernel"):
                raise RuntimeError(
                    f"sgemm_bi.mode() needs torch 2.9 or later (torch.library.get_kernel); "
                    f"this is torch {torch.__version__}. sgemm_bi.linear / matmul / Linear "
                    f"work on it.")
            keys = _install_native(tier) if use_native else frozenset()
            try:
                # torch's kernels, fetched before any Python route is registered: the
                # routes' fallbacks must be torch's own (the native kernels replace only mm
                # and bmm, whose routes are left out on their keys).
                kernels = routes.kernels(linear=linear, native=keys)
                _library = _install(kernels, keys)
            except BaseException:
                if keys:
                    native.uninstall()
                raise
            _library_linear, _library_native = linear, use_native
            _native = keys
        elif _native:
            native.install(tier)  # already registered: only sets the tier
    elif _library is not None:
        lib, _library = _library, None
        lib._destroy()  # unregisters every kernel: torch's own are back
        if _native:
            native.uninstall()
            _native = frozenset()
        routes.tier = "auto"


def _install_native(tier: str) -> frozenset[str]:
    """The native kernels' keys, or none (a warning says why) where this torch lacks a
    function they need: the Python routes then serve every key."""
    try:
        return native.install(tier)
    except RuntimeError as e:
        warnings.warn(f"{e}; the mode uses its Python routes", RuntimeWarning, stacklevel=4)
        return frozenset()


def _install(kernels: list[tuple[str, str, Callable[..., Any]]],
             native_keys: frozenset[str] = frozenset()) -> torch.library.Library:
    """A Library holding the Python routes ``kernels``, less mm and bmm on ``native_keys``
    (whose kernels are :mod:`sgemm_bi.native`'s)."""
    lib = torch.library.Library("aten", "IMPL")
    try:
        with warnings.catch_warnings():
            # "Overriding a previously registered kernel": that is the point, and
            # destroying the library restores the previous one.
            warnings.simplefilter("ignore", UserWarning)
            for op, key, kernel in kernels:
                if key in native_keys and op in ("mm", "bmm"):
                    continue
                lib.impl(op, kernel, key, with_keyset=True)
    except BaseException:
        lib._destroy()
        raise
    return lib


def enable(tier: str = TIER_DEFAULT, *, tensor_cores: Optional[bool] = None,
           bias_grad: str = "torch") -> None:
    """Routes every matmul of the process through the engine until :func:`disable` (see the
    module documentation for what is routed, and for how it combines with :func:`mode`).
    Calling it again replaces the tier and ``bias_grad``. ``tensor_cores=True``/``False`` is
    sgemm-bi 0.1's spelling of ``tier="tensor_cores"``/``"scalar"`` (not together with
    ``tier``). ``bias_grad="engine"`` makes the bias gradients of ``F.linear`` the engine's
    column sums (see the module documentation); ``"torch"`` leaves them torch's."""
    global _enabled
    tier = pick_tier(tier, tensor_cores)
    bias_grad = _bias_grad(bias_grad)
    with _lock:
        if _enabled is not None:
            _enabled.tier = tier
            _enabled.bias_grad = bias_grad
        else:
            _enabled = _Entry(tier, bias_grad)
            _entries.append(_enabled)
        try:
            _update()
        except BaseException:
            _entries.remove(_enabled)
            _enabled = None
            raise


def disable() -> None:
    """Undoes :func:`enable` (does nothing when it is not enabled). Active :func:`mode`
    blocks stay active."""
    global _enabled
    with _lock:
        if _enabled is None:
            return
        _entries.remove(_enabled)
        _enabled = None
        _update()


@contextlib.contextmanager
def mode(tier: str = TIER_DEFAULT, *, tensor_cores: Optional[bool] = None,
         bias_grad: str = "torch") -> Iterator[None]:
    """``with sgemm_bi.mode(tier):`` — the routing of :func:`enable` for the duration of the
    block, with this tier and ``bias_grad`` while it is the innermost active entry (``tier``,
    ``tensor_cores`` and ``bias_grad`` as for :func:`enable`). Process-wide: see the module
    documentation."""
    entry = _Entry(pick_tier(tier, tensor_cores), _bias_grad(bias_grad))
    with _lock:
        _entries.append(entry)
        try:
            _update()
        except BaseException:
            _entries.remove(entry)
            raise
    try:
        yield
    finally:
        with _lock:
            _entries.remove(entry)
            _update()


def is_enabled() -> bool:
    """Whether the mode is active (an :func:`enable` or a :func:`mode` block, on any
    thread)."""
    return _library is not None


def active_tier() -> Optional[str]:
    """The tier routed matmuls use now, or None when the mode is off."""
    with _lock:
        return _entries[-1].tier if _entries else None
