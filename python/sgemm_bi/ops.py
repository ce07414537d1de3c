"""The torch custom ops (``torch.ops.sgemm_bi.*``): every tensor call of the package ends
here, in a launch of the per-device engine on torch's current stream.

Layer 3 of the package. Two ops, registered with :mod:`torch.library` with fake (meta)
implementations, so ``torch.compile`` traces them as single nodes and CUDA graphs capture
their launches:

``sgemm_bi::gemm(a, b, bias, tier, out_dtype) -> Tensor``
    ``a @ b (+ bias)``: ``a`` is ``[M, K]`` or ``[B, M, K]``, ``b`` is ``[K, N]`` or
    ``[B, K, N]`` (a 2-D operand next to a 3-D one is shared by every batch entry), ``bias``
    is ``[N]`` (f32 or the inputs' dtype), the result is a new row-major tensor in
    ``out_dtype`` (default: the inputs' dtype). Differentiable: its backward is made of
    further ``gemm`` calls (below), so double backward works too.

``sgemm_bi::gemm_accumulate_(c, a, b, tier) -> ()``
    ``c += a @ b`` into an f32 ``c`` with the engine's accumulate mode (one f32 add per
    element and call): the weight-gradient accumulation of ``fp32_grad_accumulation``.

Operands may have any strides. A matrix whose last two strides make it row-major or
column-major with some leading dimension (a transpose, a slice, a padded row) is passed as
it is; anything else (a broadcast inner dimension, overlapping rows) is copied with
``contiguous()`` first. The bits never depend on that choice.

How the gradients are computed (each one is a chain in ascending order, so training is
bit-reproducible, and on the scalar tier identical on the CPU and on every GPU):

* ``dA = dC · Bᵀ`` and ``dB = Aᵀ · dC``: ``gemm`` calls on transposed views, reduced over N
  and over M respectively. A 2-D operand shared across a batch gets the sum over the batch
  as one longer chain (the batch entries concatenated along the reduced dimension, in
  ascending batch order), not a sum of per-batch results. Each gradient is produced in the
  memory layout of its input (a column-major ``weight.t()`` gets a column-major gradient),
  so torch's gradient-layout contract holds without a copy.
* ``dbias = onesᵀ · dC``: a ``gemm`` with ``M = 1`` and ``K`` = the number of rows, on the
  scalar tier whatever the call's tier: ``dbias[j] = round(Σᵢ dC[i, j])`` summed in f32 in
  ascending row order, rounded once to the bias dtype, the same bits on the CPU and on
  every GPU.
"""

from __future__ import annotations

import ctypes
from typing import Optional

import torch
from torch import Tensor

from ._capi import DType, Layout, OutputMode, Tier
from .engine import GemmDesc, Operand, Output, engine_for

__all__ = [
    "TORCH_DTYPES",
    "TIERS",
    "TIER_DEFAULT",
    "check_tier",
    "pick_tier",
    "check_inputs",
    "check_operands",
    "resolve_tier",
    "gemm",
    "gemm_accumulate_",
    "run_gemm",
    "bias_grad",
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
    """The tier a call runs on. ``"auto"`` asks the device's engine: tensor cores for
    bf16/f16 on a GPU whose engine reports the tier, the scalar tier otherwise. An explicit
    tier is never replaced: if the device cannot run it, the engine's error says why."""
    if tier == "scalar":
        return Tier.SCALAR
    if tier == "tensor_cores":
        return Tier.TENSOR_CORES
    check_tier(tier)
    if dtype in (torch.bfloat16, torch.float16) and device.type == "cuda":
        if Tier.TENSOR_CORES in engine_for(device).capabilities.tiers:
            return Tier.TENSOR_CORES
    return Tier.SCALAR


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


# -- tensors to descriptors ------------------------------------------------------------------


def _layout(t: Tensor) -> tuple[Layout, int] | None:
    """(layout, ld) of the matrix in the last two dimensions of ``t`` as its strides lay it
    out, or None when it is neither row- nor column-major with a valid leading dimension."""
    r, c = t.shape[-2], t.shape[-1]
    sr, sc = t.stride(-2), t.stride(-1)
    if r == 0 or c == 0:
        return Layout.ROW_MAJOR, max(c, 1)
    if (c == 1 or sc == 1) and (r == 1 or sr >= c):
        return Layout.ROW_MAJOR, sr if r > 1 else c
    if (r == 1 or sr == 1) and (c == 1 or sc >= r):
        return Layout.COL_MAJOR, sc if c > 1 else r
    return None


def is_col_major(t: Tensor) -> bool:
    """Whether ``t``'s matrices are laid out column-major (and not row-major)."""
    lay = _layout(t)
    return lay is not None and lay[0] == Layout.COL_MAJOR


def _operand(t: Tensor, dtype: DType) -> tuple[Tensor, Operand]:
    """The tensor to read (``t``, or a copy when its strides fit no layout) and its operand
    descriptor. ``t`` is ``[R, C]`` or ``[B, R, C]``."""
    lay = _layout(t)
    batched = t.dim() == 3 and t.shape[0] > 1
    bs = t.stride(0) if batched else 0
    if lay is None:
        if batched and bs == 0:  # a broadcast batch: copy one matrix, keep the broadcast
            t = t[0].contiguous().expand(t.shape)
        else:
            t = t.contiguous()
            bs = t.stride(0) if batched else 0
        lay = (Layout.ROW_MAJOR, t.shape[-1])
    return t, Operand(dtype=dtype, layout=lay[0], ld=lay[1], batch_stride=bs)


def _flat_rows(a: Tensor) -> tuple[Layout, int] | None:
    """(ROW_MAJOR, ld) when the rows of a 3-D ``a`` are evenly spaced across its batch
    entries, so ``[B, M, K]`` can be read as one ``[B·M, K]`` matrix (no copy)."""
    lay = _layout(a)
    bsz, m, k = a.shape
    if lay is None or lay[0] != Layout.ROW_MAJOR or a.numel() == 0:
        return None
    if bsz == 1:
        return lay
    if m == 1:
        return (Layout.ROW_MAJOR, a.stride(0)) if a.stride(0) >= k else None
    return lay if a.stride(0) == m * lay[1] else None


def _launch(
    a: Tensor,
    b: Tensor,
    bias: Optional[Tensor],
    c: Tensor,
    tier: str,
    accumulate: bool,
) -> None:
    """Runs ``c (+)= a @ b (+ bias)`` on the engine of ``c``'s device. ``c`` is a new
    contiguous tensor of the result's shape (or the f32 accumulator)."""
    dt = TORCH_DTYPES[a.dtype]
    m, k, n = a.shape[-2], a.shape[-1], b.shape[-1]
    batch = 1
    if a.dim() == 3 and b.dim() == 2 and (rows := _flat_rows(a)) is not None:
        # [B, M, K] · [K, N] as one [B·M, K] · [K, N]: the same chains, one larger M.
        m *= a.shape[0]
        a_op = Operand(dtype=dt, layout=rows[0], ld=rows[1], batch_stride=0)
    else:
        batch = max(a.shape[0] if a.dim() == 3 else 1, b.shape[0] if b.dim() == 3 else 1)
        a, a_op = _operand(a, dt)
    b, b_op = _operand(b, dt)
    if bias is not None and bias.stride(0) != 1 and bias.shape[0] > 1:
        bias = bias.contiguous()
    desc = GemmDesc(
        struct_size=ctypes.sizeof(GemmDesc),
        tier=resolve_tier(tier, c.device, a.dtype),
        m=m,
        n=n,
        k=k,
        batch=batch,
        a=a_op,
        b=b_op,
        has_bias=0 if bias is None else 1,
        bias_dtype=dt if bias is None else TORCH_DTYPES[bias.dtype],
        c=Output(
            mode=OutputMode.ACCUMULATE_F32 if accumulate else OutputMode.OVERWRITE,
            dtype=TORCH_DTYPES[c.dtype],
            ldc=max(n, 1),
            batch_stride=m * n if batch > 1 else 0,
        ),
    )
    device = c.device
    stream = torch.cuda.current_stream(device).cuda_stream if device.type == "cuda" else None
    engine_for(device).gemm(desc, a, b, c, bias=bias, stream=stream)


# -- the ops ---------------------------------------------------------------------------------


def _gemm(
    a: Tensor,
    b: Tensor,
    bias: Optional[Tensor],
    tier: str,
    out_dtype: Optional[torch.dtype],
) -> Tensor:
    """``a @ b (+ bias)`` through the engine (see the module documentation). ``tier`` is
    ``"auto"``, ``"scalar"`` or ``"tensor_cores"``; ``out_dtype`` is None (the inputs'
    dtype) or one of float32, bfloat16, float16."""
    return run_gemm(a, b, bias, tier, out_dtype)


gemm = torch.library.custom_op("sgemm_bi::gemm", _gemm, mutates_args=())
gemm.__doc__ = _gemm.__doc__


def run_gemm(
    a: Tensor,
    b: Tensor,
    bias: Optional[Tensor] = None,
    tier: str = "auto",
    out_dtype: Optional[torch.dtype] = None,
) -> Tensor:
    """The body of :func:`gemm` as a plain function (no dispatcher, no autograd): checks,
    allocates the result and launches. The mode calls it from below autograd."""
    shape, dtype = _check_gemm(a, b, bias, tier, out_dtype)
    c = torch.empty(shape, dtype=dtype, device=a.device)
    _launch(a, b, bias, c, tier, accumulate=False)
    return c


@gemm.register_fake
def _gemm_fake(a, b, bias, tier, out_dtype):  # type: ignore[no-untyped-def]
    shape, dtype = _check_gemm(a, b, bias, tier, out_dtype)
    return a.new_empty(shape, dtype=dtype)


def _check_gemm(
    a: Tensor, b: Tensor, bias: Optional[Tensor], tier: str, out_dtype: Optional[torch.dtype]
) -> tuple[list[int], torch.dtype]:
    shape = check_operands(a, b, bias)
    check_tier(tier)
    if out_dtype is not None and out_dtype not in TORCH_DTYPES:
        raise TypeError(f"out_dtype is {out_dtype}: expected float32, bfloat16 or float16")
    return shape, out_dtype or a.dtype


def _gemm_accumulate(c: Tensor, a: Tensor, b: Tensor, tier: str) -> None:
    """``c += a @ b`` in f32 (the engine's accumulate mode: ``c = c + chain``, one f32 add per
    element). ``c`` is a contiguous float32 tensor of the product's shape."""
    _check_accumulator(c, a, b, tier)
    _launch(a, b, None, c, tier, accumulate=True)


gemm_accumulate_ = torch.library.custom_op(
    "sgemm_bi::gemm_accumulate_", _gemm_accumulate, mutates_args=("c",)
)
gemm_accumulate_.__doc__ = _gemm_accumulate.__doc__


@gemm_accumulate_.register_fake
def _gemm_accumulate_fake(c, a, b, tier):  # type: ignore[no-untyped-def]
    _check_accumulator(c, a, b, tier)


def _check_accumulator(c: object, a: Tensor, b: Tensor, tier: str) -> None:
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


# -- autograd --------------------------------------------------------------------------------


def bias_grad(grad: Tensor, dtype: torch.dtype) -> Tensor:
    """``dbias = onesᵀ · grad`` over every row of ``grad`` (``[..., N]``), in ``dtype``: one
    f32 chain per column in ascending row order on the scalar tier, rounded once."""
    n = grad.shape[-1]
    g2 = grad.reshape(-1, n)
    ones = torch.ones((1, g2.shape[0]), dtype=g2.dtype, device=g2.device)
    return torch.ops.sgemm_bi.gemm(ones, g2, None, "scalar", dtype).reshape(n)


def _mm(a: Tensor, b: Tensor, tier: str) -> Tensor:
    return torch.ops.sgemm_bi.gemm(a, b, None, tier, None)


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


def _setup_context(ctx, inputs, output):  # type: ignore[no-untyped-def]
    a, b, bias, tier, out_dtype = inputs
    need_a, need_b = ctx.needs_input_grad[0], ctx.needs_input_grad[1]
    ctx.save_for_backward(a if need_b else None, b if need_a else None)
    ctx.a_dim, ctx.b_dim = a.dim(), b.dim()
    ctx.a_col, ctx.b_col = is_col_major(a), is_col_major(b)
    ctx.in_dtype = a.dtype
    ctx.bias_dtype = None if bias is None else bias.dtype
    ctx.tier = tier


def _backward(ctx, grad):  # type: ignore[no-untyped-def]
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


torch.library.register_autograd("sgemm_bi::gemm", _backward, setup_context=_setup_context)
