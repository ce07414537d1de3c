"""sgemm-bi for PyTorch: deterministic, batch-invariant GEMM — forward, weight gradient and
input gradient — on CUDA GPUs and on the CPU, in float32, bfloat16 and float16.

The API::

    sgemm_bi.matmul(a, b, bias=None, *, tier="auto")      # torch.matmul shapes, + bias
    sgemm_bi.linear(x, weight, bias=None, *, tier="auto")  # F.linear semantics
    sgemm_bi.grouped_mm(a, b, *, offs=None, bias=None, out_dtype=None, tier="auto")
                                                           # F.grouped_mm (MoE experts)
    sgemm_bi.check_device_errors(device=None)              # bad offs found on the GPU
    sgemm_bi.Linear(in_features, out_features, ...)        # a drop-in nn.Linear
    sgemm_bi.Linear.from_torch(linear, *, tier="auto")
    sgemm_bi.enable(tier="auto"); sgemm_bi.disable()       # every matmul of a model
    with sgemm_bi.mode(tier="auto"): ...
    sgemm_bi.Engine(device)                                # raw pointers, explicit stream
    sgemm_bi.deterministic_linear(x, weight_kn, bias, tensor_cores=False)  # the 0.1 name

Tiers: ``"scalar"`` is the bit contract (each output element one f32 fma chain in ascending
k, the same bits on the CPU and on every GPU); ``"tensor_cores"`` uses the GPU's tensor
cores (bf16/f16) in a fixed order, batch-invariant (on the CPU, an exact model of the sm_90
tensor cores gives their bits); ``"auto"`` picks tensor cores for
bf16/f16 on a GPU whose engine runs them, and the scalar tier otherwise. A tier asked for
by name is never replaced by another. Every ``tier=`` also takes sgemm-bi 0.1's
``tensor_cores=True`` / ``False`` (``"tensor_cores"`` / ``"scalar"``), not both.

Importing the package loads nothing: libsgemm_bi is loaded on first use (``SGEMM_BI_LIB``
overrides where from), and a CUDA engine is created the first time a CUDA tensor needs one,
so the package imports on machines without a GPU or driver.
"""

from __future__ import annotations

from pathlib import Path

from . import errors, ops, parallel
from ._version import __version__
from .engine import Capabilities, Engine, check_device_errors
from .errors import (
    LibraryNotFoundError,
    NoDeviceError,
    NoDriverError,
    SgemmBiError,
    TierUnavailableError,
    UnsupportedDtypeError,
)
from .functional import linear, matmul
from .grouped import grouped_mm
from .compat import deterministic_linear
from .dispatch import disable, enable, is_enabled, mode
from .nn import Linear

__all__ = [
    "__version__",
    "matmul",
    "linear",
    "grouped_mm",
    "check_device_errors",
    "deterministic_linear",
    "Linear",
    "enable",
    "disable",
    "mode",
    "is_enabled",
    "Engine",
    "Capabilities",
    "library_path",
    "library_version",
    "build_info",
    "errors",
    "ops",
    "parallel",
    "SgemmBiError",
    "TierUnavailableError",
    "UnsupportedDtypeError",
    "NoDriverError",
    "NoDeviceError",
    "LibraryNotFoundError",
]


def library_path() -> Path:
    """The path of the libsgemm_bi in use (loads it on first call)."""
    from ._capi import library_path as _path

    return _path()


def build_info(device: object = None) -> dict:
    """What the loaded libsgemm_bi holds (``sgemm_bi_build_info()``): ``version``,
    ``commit``, ``kernels`` (where the kernels came from), ``ptxas`` (the version of the
    ptxas that made the machine code) and ``modules``, each with the architectures it has
    ``machine_code`` for and the ``ptx_target`` it falls back to on other GPUs.

    With ``device`` (``"cuda:0"``, a ``torch.device``, ...), also ``loaded``: which image of
    each module that device runs and how many of its entry points are loaded
    (:meth:`Engine.build_info` of the device's shared engine)."""
    import json

    from ._capi import library

    if device is None:
        return json.loads(library().sgemm_bi_build_info().decode())
    from .engine import engine_for

    return engine_for(device).build_info()


def library_version() -> str:
    """The loaded library's own version string (``sgemm_bi_version()``)."""
    from ._capi import library

    return library().sgemm_bi_version().decode()
