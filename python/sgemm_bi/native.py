"""The mode's native kernels: ``aten::mm`` and ``aten::bmm`` on the CPU key, and on the
CUDA key where torch has CUDA, registered by ``libsgemm_bi`` itself through torch's stable C
ABI (``capi/src/torch``), so that a routed call runs no Python. :mod:`sgemm_bi.dispatch`
installs them with the mode where they can be (Linux, a libtorch that exports the stable
ABI) unless ``SGEMM_BI_NATIVE=0``, and registers Python routes for the rest
(:mod:`sgemm_bi.routes`).
"""

from __future__ import annotations

import ctypes
import os
import sys
from typing import Any, Optional

import torch

from . import _capi

__all__ = ["install", "uninstall", "available", "engine_calls", "ops", "TIER_CODES"]

TIER_CODES = {"auto": 0, "scalar": 1, "tensor_cores": 2}
"""The ``tier`` argument of ``sgemm_bi::matmul`` / ``matmul_bias`` for each tier name."""
_UNSET: Any = object()
_ops: Any = _UNSET
_installed = False
KEYS = {1: "CPU", 2: "CUDA"}


def _libtorch(name: str) -> Optional[str]:
    path = os.path.join(os.path.dirname(torch.__file__), "lib", f"libtorch_{name}.so")
    return path if os.path.exists(path) else None


def _libtorch_cpu() -> Optional[str]:
    return _libtorch("cpu")


def available() -> bool:
    """Whether the native kernels may be installed here."""
    if os.environ.get("SGEMM_BI_NATIVE") == "0" or not sys.platform.startswith("linux"):
        return False
    if _libtorch_cpu() is None:
        return False
    try:
        return hasattr(_capi.library(), "sgemm_bi_torch_install")
    except Exception:
        return False


def _paths() -> tuple[bytes, Optional[bytes]]:
    cpu = _libtorch_cpu()
    assert cpu is not None
    cuda = _libtorch("cuda") if torch.version.cuda else None
    return cpu.encode(), cuda.encode() if cuda else None


def ops() -> Optional[tuple[Any, Any]]:
    """``torch.ops.sgemm_bi.matmul.default`` and ``matmul_bias.default``, the native ops
    (defined by the library on the first call, for the process), or None where the native
    kernels are not available. ``matmul(a, b, tier, weight)``: ``a`` ``[..., K]`` (contiguous
    unless 2-D), ``b`` ``[K, N]`` or with ``weight`` the ``[N, K]``
    weight of ``F.linear``; ``matmul_bias(a, b, bias, tier, weight)`` adds an ``[N]`` bias
    of the inputs' dtype or float32. ``tier`` is a :data:`TIER_CODES` value. They raise
    ``RuntimeError`` for anything else: the callers check first, or fall back to the Python
    path, which raises the typed error."""
    global _ops
    if _ops is not _UNSET:
        return _ops
    _ops = None
    if available():
        fn = _capi.library().sgemm_bi_torch_ops
        fn.restype = ctypes.c_uint32
        fn.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.POINTER(ctypes.c_uint32)]
        keys = ctypes.c_uint32(0)
        if fn(*_paths(), ctypes.byref(keys)) == 0:
            _ops = (torch.ops.sgemm_bi.matmul.default, torch.ops.sgemm_bi.matmul_bias.default)
    return _ops


def install(tier: str) -> frozenset[str]:
    """Registers the native kernels (or sets their tier when they are registered); returns
    the dispatch keys that have them (``"CPU"``, and ``"CUDA"`` where torch has CUDA)."""
    global _installed
    lib = _capi.library()
    fn = lib.sgemm_bi_torch_install
    fn.restype = ctypes.c_uint32
    fn.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_uint32,
                   ctypes.POINTER(ctypes.c_uint32)]
    cpu, cuda = _paths()
    keys = ctypes.c_uint32(0)
    status = fn(cpu, cuda, TIER_CODES[tier], ctypes.byref(keys))
    if status:
        raise RuntimeError(f"sgemm_bi: the native kernels could not be installed: "
                           f"{_capi.last_error_message()}")
    _installed = True
    return frozenset(name for bit, name in KEYS.items() if keys.value & bit)


def uninstall() -> None:
    """Removes the native kernels (torch's own are back)."""
    global _installed
    if not _installed:
        return
    fn = _capi.library().sgemm_bi_torch_uninstall
    fn.restype = ctypes.c_uint32
    fn()
    _installed = False


def engine_calls() -> int:
    """How many calls the native kernels have run on the engine in this process (0 where
    they are not available)."""
    try:
        fn = _capi.library().sgemm_bi_torch_engine_calls
    except (AttributeError, Exception):
        return 0
    fn.restype = ctypes.c_uint64
    return int(fn())
