"""sgemm-bi 0.1's Python names, kept working with their 0.1 meaning on top of the current API.

* :func:`deterministic_linear` — 0.1's functional layer, ``weight`` stored ``[in, out]``.
* :func:`load_01_state_dict` — a 0.1 checkpoint into a model of :class:`sgemm_bi.Linear`
  layers, whose ``weight`` is now ``[out, in]`` (0.1: ``[in, out]``); for one layer,
  ``Linear.load_state_dict(sd, layout="in_out")``.
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

from typing import Any, Mapping, Optional

from torch import Tensor, nn

from .functional import matmul
from .ops import _check_tensor

__all__ = ["deterministic_linear", "load_01_state_dict"]


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


def load_01_state_dict(module: nn.Module, state_dict: Mapping[str, Any], strict: bool = True,
                       assign: bool = False) -> Any:
    """Loads a ``state_dict`` saved with sgemm-bi 0.1 into ``module``: the ``weight`` of every
    :class:`sgemm_bi.Linear` in ``module`` (``module`` itself included) is read as 0.1
    stored it, ``[in_features, out_features]``, and transposed to this version's
    ``[out_features, in_features]``; everything else loads as
    :meth:`torch.nn.Module.load_state_dict` loads it (``strict``, ``assign`` and the return
    value are its own).

    Use it for checkpoints of 0.1 models only: it transposes square weights too, which is
    right for a 0.1 checkpoint and wrong for one saved by this version (nothing in a square
    weight's shape tells the two apart). A weight that is already ``[out_features,
    in_features]`` in a non-square layer is an error.
    """
    from .nn import Linear

    layers = [m for m in module.modules() if isinstance(m, Linear)]
    for m in layers:
        m._sgemm_bi_weight_layout = "in_out"
    try:
        return nn.Module.load_state_dict(module, state_dict, strict=strict, assign=assign)
    finally:
        for m in layers:
            del m._sgemm_bi_weight_layout
