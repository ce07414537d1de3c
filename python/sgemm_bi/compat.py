"""sgemm-bi 0.1's Python names, kept working with their 0.1 meaning on top of the current API.

* :func:`deterministic_linear` — 0.1's functional layer, ``weight`` stored ``[in, out]``.
* ``tensor_cores=True``/``False`` wherever ``tier=`` is taken (:func:`sgemm_bi.matmul`,
  :func:`sgemm_bi.linear`, :class:`sgemm_bi.Linear` and ``Linear.from_torch``,
  :func:`sgemm_bi.mode`, :func:`sgemm_bi.enable`): ``tier="tensor_cores"`` / ``"scalar"``
  (see :func:`sgemm_bi.ops.pick_tier`).
* ``sgemm_bi.Engine(0)`` and the positional pointer forms of ``Engine.forward``,
  ``backward_dw`` and ``backward_dx`` (see :class:`sgemm_bi.Engine`).

0.1's ``tensor_cores`` defaults to ``False``, the scalar tier, so 0.1 code keeps its bits:
the same on the CPU and on every GPU.
"""

from __future__ import annotations

from typing import Optional

from torch import Tensor

from .functional import matmul
from .ops import _check_tensor

__all__ = ["deterministic_linear"]


def deterministic_linear(x: Tensor, weight: Tensor, bias: Optional[Tensor] = None,
                         tensor_cores: bool = False) -> Tensor:
    """``x @ weight + bias``, sgemm-bi 0.1's functional layer: ``matmul(x, weight, bias,
    tier="tensor_cores" if tensor_cores else "scalar")``.

    ``x`` is ``[..., in_features]``; ``weight`` is stored ``[in_features, out_features]``
    (K × N, the transpose of ``nn.Linear.weight``); ``bias`` is ``[out_features]``, float32
    as in 0.1 (the inputs' dtype is accepted too). The result has the inputs' dtype.
    ``tensor_cores=False`` (the default) is the scalar tier — the same bits on the CPU and
    on every GPU; ``True`` is the tensor-core tier (bf16/f16 inputs; an error where the
    engine does not run it). Differentiable in ``x``, ``weight`` and ``bias``, every
    gradient computed by the engine, exactly as :func:`sgemm_bi.matmul`.
    """
    _check_tensor(x, "x")
    _check_tensor(weight, "weight")
    if not isinstance(tensor_cores, bool):
        raise TypeError(f"tensor_cores is {tensor_cores!r}: it must be True or False")
    if weight.dim() != 2:
        raise ValueError(
            f"weight has shape {list(weight.shape)}: it must be [in_features, out_features]"
        )
    if x.dim() == 0 or x.shape[-1] != weight.shape[0]:
        raise ValueError(
            f"shape mismatch: x is {list(x.shape)} and weight is {list(weight.shape)}; the "
            f"last dimension of x must equal in_features ({weight.shape[0]}), weight being "
            "[in_features, out_features]"
        )
    return matmul(x, weight, bias, tensor_cores=tensor_cores)
