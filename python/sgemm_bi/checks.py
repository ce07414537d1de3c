"""What every entry point checks, once: the tier names, the supported dtypes, and the
operands of a ``gemm`` (types, dtypes, devices, dimensions, shapes).

Layer 3 of the package, below the ops. The lean call path (:mod:`sgemm_bi.plan`) runs these
checks the first time it sees a call's key (shapes, strides, dtypes, devices, tier) and not
again for that key, so a check here may depend on nothing outside the key. The C ABI
checks every descriptor and pointer itself on every call (leading dimensions, overlap,
alignment, overflow, the tier on the device).
"""

from __future__ import annotations

from typing import Optional

import torch
from torch import Tensor

from ._capi import DType, Tier
from .engine import engine_for

__all__ = [
    "TORCH_DTYPES",
    "TIERS",
    "TIER_DEFAULT",
    "check_tier",
    "pick_tier",
    "check_inputs",
    "check_operands",
    "check_gemm",
    "check_accumulator",
    "resolve_tier",
]

TORCH_DTYPES: dict[torch.dtype, DType] = {
    torch.float32: DType.F32,
    torch.bfloat16: DType.BF16,
    torch.float16: DType.F16,
}
"""The torch dtypes the engine takes, and their ``sgemm_bi_dtype``."""

TIERS = ("auto", "scalar", "tensor_cores")
"""The accepted values of every ``tier`` argument."""


def check_tier(tier: object) -> str:
    """``tier`` if it is one of :data:`TIERS`, else a :class:`ValueError`."""
    if not isinstance(tier, str) or tier not in TIERS:
        raise ValueError(f"tier is {tier!r}: expected 'auto', 'scalar' or 'tensor_cores'")
    return tier


class _DefaultTier(str):
    """The type of :data:`TIER_DEFAULT` (a ``str`` equal to ``"auto"``)."""

    __slots__ = ()


TIER_DEFAULT: str = _DefaultTier("auto")
"""The default of every ``tier`` argument: equal to ``"auto"`` (and shown as ``'auto'``), but
a distinct object, so that :func:`pick_tier` can tell a ``tier`` left out from an explicit
``tier="auto"`` and refuse ``tier`` and ``tensor_cores`` given together. (A ``None``
default would do the same, but the signatures would stop saying what the default means.)"""


def pick_tier(tier: object, tensor_cores: Optional[bool] = None) -> str:
    """The tier named by an entry point's ``tier`` and ``tensor_cores`` arguments, as a
    plain ``str`` of :data:`TIERS`.

    ``tensor_cores`` is sgemm-bi 0.1's spelling: ``True`` is ``tier="tensor_cores"``,
    ``False`` is ``tier="scalar"``, ``None`` (the default) leaves ``tier`` in charge. Giving
    both is a :class:`TypeError` (even when they agree), a ``tensor_cores`` that is not a
    ``bool`` a :class:`TypeError`, a ``tier`` not in :data:`TIERS` a :class:`ValueError`.
    """
    if tensor_cores is None:
        return str(check_tier(tier))
    if not isinstance(tensor_cores, bool):
        raise TypeError(
            f"tensor_cores is {tensor_cores!r}: it must be True, False or None"
        )
    if tier is not TIER_DEFAULT:
        raise TypeError(
            f"tier={tier!r} and tensor_cores={tensor_cores!r} were both given: pass one of "
            "them (tensor_cores=True is tier='tensor_cores', tensor_cores=False is "
            "tier='scalar')"
        )
    return "tensor_cores" if tensor_cores else "scalar"


def resolve_tier(tier: str, device: torch.device, dtype: torch.dtype) -> Tier:
    """The tier a call runs on. ``"auto"`` is the device's engine's choice
    (``sgemm_bi_engine_resolve_tier``, the one policy of Rust, C and Python: tensor cores for
    bf16/f16 on a GPU whose engine runs them, the scalar tier otherwise). An explicit tier is
    never replaced: if the device cannot run it, the engine's error says why."""
    if tier == "scalar":
        return Tier.SCALAR
    if tier == "tensor_cores":
        return Tier.TENSOR_CORES
    check_tier(tier)
    return engine_for(device).resolve_tier(Tier.AUTO, dtype)


# -- checking ------------------------------------------------------------------------------


def _check_tensor(t: object, name: str) -> Tensor:
    if not isinstance(t, Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, not {type(t).__name__}")
    return t


def _check_dtype(t: Tensor, name: str) -> None:
    if t.dtype not in TORCH_DTYPES:
        raise TypeError(
            f"{name} is {t.dtype}: sgemm-bi takes torch.float32, torch.bfloat16 and "
            "torch.float16"
        )


def check_inputs(
    a: object,
    b: object,
    bias: object = None,
    names: tuple[str, str, str] = ("a", "b", "bias"),
) -> None:
    """Checks what every entry point checks before looking at shapes: that the inputs are
    tensors of a supported dtype, of one dtype, on one CPU or CUDA device, and that the bias
    (if any) is f32 or the inputs' dtype. Raises :class:`TypeError` or :class:`ValueError`
    with a message that names the argument."""
    na, nb, nbias = names
    a = _check_tensor(a, na)
    b = _check_tensor(b, nb)
    _check_dtype(a, na)
    _check_dtype(b, nb)
    if a.dtype != b.dtype:
        raise TypeError(
            f"dtype mismatch: {na} is {a.dtype} but {nb} is {b.dtype}; both inputs must have "
            "one dtype (cast one of them, or use torch.autocast)"
        )
    if a.device != b.device:
        raise ValueError(f"device mismatch: {na} is on {a.device} but {nb} is on {b.device}")
    if a.device.type not in ("cpu", "cuda", "meta"):
        raise ValueError(f"{na} is on {a.device}: sgemm-bi runs on CPU and CUDA tensors")
    if bias is not None:
        bias = _check_tensor(bias, nbias)
        if bias.dtype not in (torch.float32, a.dtype):
            raise TypeError(
                f"{nbias} is {bias.dtype}: it must be torch.float32 or the inputs' dtype "
                f"({a.dtype})"
            )
        if bias.device != a.device:
            raise ValueError(
                f"device mismatch: {nbias} is on {bias.device} but {na} is on {a.device}"
            )


def check_operands(
    a: Tensor,
    b: Tensor,
    bias: Optional[Tensor] = None,
    names: tuple[str, str, str] = ("a", "b", "bias"),
) -> list[int]:
    """Checks the operands of a ``gemm`` (:func:`check_inputs`, then dimensions and shapes)
    and returns the result's shape. Works on real, fake and meta tensors alike."""
    check_inputs(a, b, bias, names)
    na, nb, nbias = names
    if a.dim() not in (2, 3) or b.dim() not in (2, 3):
        raise ValueError(
            f"{na} has shape {list(a.shape)} and {nb} has shape {list(b.shape)}: the op takes "
            "[M, K] or [B, M, K] times [K, N] or [B, K, N]"
        )
    (m, k), (k2, n) = a.shape[-2:], b.shape[-2:]
    if k != k2:
        raise ValueError(
            f"shape mismatch: {na} is {list(a.shape)} and {nb} is {list(b.shape)}; the last "
            f"dimension of {na} ({k}) must equal the second-to-last of {nb} ({k2})"
        )
    batch = None
    if a.dim() == 3 and b.dim() == 3:
        if a.shape[0] != b.shape[0]:
            raise ValueError(
                f"batch mismatch: {na} is {list(a.shape)} and {nb} is {list(b.shape)}"
            )
    if a.dim() == 3:
        batch = a.shape[0]
    elif b.dim() == 3:
        batch = b.shape[0]
    if bias is not None and (bias.dim() != 1 or bias.shape[0] != n):
        raise ValueError(f"{nbias} has shape {list(bias.shape)}; it must be [N] = [{n}]")
    return [m, n] if batch is None else [batch, m, n]


def check_gemm(
    a: Tensor, b: Tensor, bias: Optional[Tensor], tier: str, out_dtype: Optional[torch.dtype]
) -> tuple[list[int], torch.dtype]:
    """The result's shape and dtype of ``gemm(a, b, bias, tier, out_dtype)``, after
    checking every argument."""
    shape = check_operands(a, b, bias)
    check_tier(tier)
    if out_dtype is not None and out_dtype not in TORCH_DTYPES:
        raise TypeError(f"out_dtype is {out_dtype}: expected float32, bfloat16 or float16")
    return shape, out_dtype or a.dtype


def check_accumulator(c: object, a: Tensor, b: Tensor, tier: str) -> None:
    """Checks ``gemm_accumulate_(c, a, b, tier)``: ``c`` a contiguous f32 tensor of the
    product's shape on ``a``'s device."""
    shape = check_operands(a, b)
    check_tier(tier)
    c = _check_tensor(c, "c")
    if c.dtype != torch.float32 or list(c.shape) != shape or not c.is_contiguous():
        raise ValueError(
            f"the accumulator is {c.dtype} {list(c.shape)}: it must be a contiguous "
            f"torch.float32 tensor of shape {shape}"
        )
    if c.device != a.device:
        raise ValueError(f"device mismatch: the accumulator is on {c.device}, a on {a.device}")

