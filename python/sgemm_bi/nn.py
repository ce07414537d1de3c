"""``sgemm_bi.Linear``: a drop-in ``torch.nn.Linear`` whose forward and backward run on the
engine."""

from __future__ import annotations

from typing import Any, Mapping, Optional

import torch
from torch import Tensor, nn

from .autograd import gemm, gemm_accumulate_, ones_row
from .checks import TIER_DEFAULT, check_inputs, pick_tier
from .functional import _autocast, linear

__all__ = ["Linear", "WEIGHT_LAYOUTS"]

#: ``layout=`` values of :meth:`Linear.load_state_dict`: ``"out_in"`` is torch's (and this
#: version's) ``[out_features, in_features]``; ``"in_out"`` is sgemm-bi 0.1's
#: ``[in_features, out_features]``, transposed on loading.
WEIGHT_LAYOUTS = ("out_in", "in_out")


class Linear(nn.Linear):
    """``y = x @ weight.T + bias`` through sgemm-bi: deterministic and batch-invariant, with
    every gradient (dX, dW and the bias's) computed by the engine.

    A subclass of :class:`torch.nn.Linear` with the same parameters (``weight`` is
    ``[out_features, in_features]``, ``bias`` is ``[out_features]``), the same
    initialization and the same ``state_dict``, so checkpoints load either way.

    sgemm-bi 0.1's ``Linear`` stored ``weight`` as ``[in_features, out_features]``: load
    its checkpoints with ``load_state_dict(sd, layout="in_out")`` (or, for a whole model,
    :func:`sgemm_bi.compat.load_01_state_dict`). A 0.1 weight loaded without it fails with
    a size mismatch that says so — except in a square layer, where both layouts have the
    same shape and nothing can tell them apart: there the layout must be given.

    Args:
        in_features, out_features, bias, device, dtype: as for :class:`torch.nn.Linear`.
        tier: ``"auto"``, ``"scalar"`` or ``"tensor_cores"`` (see :func:`sgemm_bi.matmul`).
        tensor_cores: sgemm-bi 0.1's spelling of the tier: ``True`` is
            ``tier="tensor_cores"``, ``False`` is ``tier="scalar"``; not together with
            ``tier``.
        fp32_grad_accumulation: accumulate the weight gradient across backward passes into
            an f32 ``weight.main_grad`` (and the bias gradient into ``bias.main_grad``)
            with the engine's accumulate mode, instead of into ``.grad``: for 16-bit
            weights nothing is rounded to 16 bits between micro-batches. ``main_grad`` is
            created (zeros) on the first backward; zero it yourself between optimizer steps
            (:meth:`zero_main_grad`) and give it to the optimizer. ``.grad`` stays ``None``
            and gradient hooks on these parameters do not fire.
    """

    tier: str
    fp32_grad_accumulation: bool

    def __init__(
        self,
        in_features: int,
        out_features: int,
        bias: bool = True,
        device: Any = None,
        dtype: Optional[torch.dtype] = None,
        *,
        tier: str = TIER_DEFAULT,
        fp32_grad_accumulation: bool = False,
        tensor_cores: Optional[bool] = None,
    ) -> None:
        tier = pick_tier(tier, tensor_cores)  # before allocating anything
        super().__init__(in_features, out_features, bias, device=device, dtype=dtype)
        self.tier = tier
        self.fp32_grad_accumulation = bool(fp32_grad_accumulation)

    @classmethod
    def from_torch(
        cls,
        linear: nn.Linear,
        *,
        tier: str = TIER_DEFAULT,
        fp32_grad_accumulation: bool = False,
        tensor_cores: Optional[bool] = None,
    ) -> Linear:
        """A :class:`Linear` that uses ``linear``'s parameters: the same ``Parameter``
        objects, not copies, so an optimizer that holds them keeps working. ``tier``,
        ``fp32_grad_accumulation`` and ``tensor_cores`` as for :class:`Linear`."""
        if not isinstance(linear, nn.Linear):
            raise TypeError(f"linear must be a torch.nn.Linear, not {type(linear).__name__}")
        tier = pick_tier(tier, tensor_cores)
        self = cls.__new__(cls)
        nn.Module.__init__(self)
        self.in_features = linear.in_features
        self.out_features = linear.out_features
        self.weight = linear.weight
        self.bias = linear.bias  # a Parameter or None (registered as such)
        self.tier = tier
        self.fp32_grad_accumulation = bool(fp32_grad_accumulation)
        self.train(linear.training)
        return self

    def forward(self, input: Tensor) -> Tensor:
        """``input @ weight.T + bias`` on the engine."""
        if self.fp32_grad_accumulation and torch.is_grad_enabled() and (
            self.weight.requires_grad or (self.bias is not None and self.bias.requires_grad)
        ):
            return _linear_main_grad(input, self.weight, self.bias, self.tier)
        return linear(input, self.weight, self.bias, tier=self.tier)

    def load_state_dict(self, state_dict: Mapping[str, Any], strict: bool = True,
                        assign: bool = False, *, layout: str = "out_in") -> Any:
        """:meth:`torch.nn.Module.load_state_dict`, with the layout ``state_dict`` stores
        ``weight`` in: ``"out_in"`` (the default: torch's ``[out_features, in_features]``,
        what this class saves) or ``"in_out"`` (sgemm-bi 0.1's ``[in_features,
        out_features]``, transposed while loading). The layout cannot be read off a square
        weight, so a square 0.1 layer loads correctly only with ``layout="in_out"``."""
        _check_layout(layout)
        self._sgemm_bi_weight_layout = layout
        try:
            return super().load_state_dict(state_dict, strict=strict, assign=assign)
        finally:
            del self._sgemm_bi_weight_layout

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict,  # type: ignore[no-untyped-def]
                              missing_keys, unexpected_keys, error_msgs):
        layout = getattr(self, "_sgemm_bi_weight_layout", "out_in")
        key = prefix + "weight"
        w = state_dict.get(key)
        want = (self.out_features, self.in_features)
        if isinstance(w, Tensor) and w.dim() == 2:
            got = tuple(w.shape)
            if layout == "in_out":
                if got == want and want[0] != want[1]:
                    error_msgs.append(
                        f"{key} is stored {list(got)}, [out_features, in_features] already, "
                        "but layout='in_out' ([in_features, out_features], sgemm-bi 0.1's) was "
                        "given: load it with the default layout='out_in'"
                    )
                else:
                    state_dict = dict(state_dict)
                    state_dict[key] = w.t().contiguous()
            elif got == (self.in_features, self.out_features) and got != want:
                error_msgs.append(
                    f"{key} is stored {list(got)}: that is [in_features, out_features], the "
                    "layout of sgemm-bi 0.1's Linear; this version stores [out_features, "
                    "in_features] as torch.nn.Linear does. Load a 0.1 checkpoint with "
                    "Linear.load_state_dict(sd, layout='in_out') or, for a whole model, "
                    "sgemm_bi.compat.load_01_state_dict(model, sd) (square layers must be "
                    "loaded that way too: their shape cannot tell the layouts apart)"
                )
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict,
                                      missing_keys, unexpected_keys, error_msgs)

    def zero_main_grad(self) -> None:
        """Zeroes ``weight.main_grad`` and ``bias.main_grad`` where they exist."""
        for p in (self.weight, self.bias):
            if p is not None and getattr(p, "main_grad", None) is not None:
                p.main_grad.zero_()

    def extra_repr(self) -> str:
        """nn.Linear's description plus the tier and, when on, fp32 grad accumulation."""
        extra = f", tier={self.tier!r}"
        if self.fp32_grad_accumulation:
            extra += ", fp32_grad_accumulation=True"
        return super().extra_repr() + extra


def _check_layout(layout: object) -> None:
    if layout not in WEIGHT_LAYOUTS:
        raise ValueError(
            f"layout is {layout!r}: it must be 'out_in' ([out_features, in_features], torch's "
            "and this version's) or 'in_out' ([in_features, out_features], sgemm-bi 0.1's)"
        )


def _main_grad(p: nn.Parameter) -> Tensor:
    """``p.main_grad``, created as f32 zeros of ``p``'s shape when missing or None."""
    g = getattr(p, "main_grad", None)
    if g is None:
        g = torch.zeros(p.shape, dtype=torch.float32, device=p.device)
        p.main_grad = g
    return g


class _LinearMainGrad(torch.autograd.Function):
    """Linear whose backward accumulates dW (and dbias) into f32 ``main_grad`` tensors."""

    @staticmethod
    def forward(ctx, x2, w, b, tier, w_param, b_param):  # type: ignore[no-untyped-def]
        ctx.save_for_backward(x2, w)
        ctx.tier = tier
        ctx.w_param, ctx.b_param = w_param, b_param
        return gemm(x2, w.t(), b, tier, None)

    @staticmethod
    def backward(ctx, g):  # type: ignore[no-untyped-def]
        x2, w = ctx.saved_tensors
        tier = ctx.tier
        dx = None
        if ctx.needs_input_grad[0]:
            dx = gemm(g, w, None, tier, None)  # dX = dY · W
        if ctx.w_param.requires_grad:
            # main_grad[N, K] += dYᵀ · X, reduced over the rows in ascending order.
            gemm_accumulate_(_main_grad(ctx.w_param), g.t(), x2, tier)
        b = ctx.b_param
        if b is not None and b.requires_grad:
            acc = _main_grad(b).view(1, -1)
            # += onesᵀ · dY
            gemm_accumulate_(acc, ones_row(g.shape[0], g), g, "scalar")
        return dx, None, None, None, None, None


def _linear_main_grad(x: Tensor, weight: nn.Parameter, bias: Optional[nn.Parameter],
                      tier: str) -> Tensor:
    """:func:`linear` with ``fp32_grad_accumulation`` (autocast honoured like ``linear``)."""
    xc, w, b = _autocast(x.device.type, x, weight, bias)
    check_inputs(xc, w, b, names=("x", "weight", "bias"))
    n, k = w.shape
    if xc.dim() == 0 or xc.shape[-1] != k:
        raise ValueError(
            f"shape mismatch: x is {list(xc.shape)} and weight is {list(w.shape)}; the last "
            f"dimension of x must equal in_features ({k})"
        )
    x2 = xc.reshape(-1, k)
    y = _LinearMainGrad.apply(x2, w, b, tier, weight, bias)
    return y.reshape(*xc.shape[:-1], n)
