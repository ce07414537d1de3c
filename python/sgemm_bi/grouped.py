"""Grouped GEMM for Mixture-of-Experts: :func:`grouped_mm`, torch's ``F.grouped_mm`` with the
batch-invariance contract.

``grouped_mm(mat_a, mat_b, *, offs=None, bias=None, out_dtype=None, tier="auto")`` takes
torch's four forms (``offs``: int32 cumulative group ends, on the GPU or the CPU):

=========  ===================  ==================  ==============  =========================
form       ``mat_a``            ``mat_b``           result          split by ``offs``
=========  ===================  ==================  ==============  =========================
2-D × 3-D  ``[T, K]`` tokens    ``[G, K, N]``       ``[T, N]``      rows (experts' forward)
2-D × 2-D  ``[M, T]``           ``[T, N]``          ``[G, M, N]``   the reduction (their dW)
3-D × 2-D  ``[G, M, K]``        ``[K, T]``          ``[M, T]``      columns
3-D × 3-D  ``[G, M, K]``        ``[G, K, N]``       ``[G, M, N]``   none (``offs`` is None)
=========  ===================  ==================  ==============  =========================

The contract: every group's part of the result has the bits of the dense sgemm-bi call of
that part with the group's operand (:func:`sgemm_bi.matmul` of the group's rows and its
expert's weight, for the forward). So a token's output does not depend on how many tokens
the batch sent to each expert, where its group starts, or how many groups there are; the
experts' weight gradient of a group is the dense weight gradient of its rows. Rows (or
columns) past ``offs[-1]`` belong to no group and come out as +0.0.

``bias`` (which torch's ``grouped_mm`` does not take yet): ``[G, N]``, one row per group, for
2-D × 3-D; ``[T]`` for 3-D × 2-D; ``[N]`` for 3-D × 3-D; f32 or the inputs' dtype.

Differentiable (the custom op ``torch.ops.sgemm_bi.grouped_mm``, with a fake kernel for
``torch.compile``; eager calls on plain tensors skip its dispatch and run the same formula as
an autograd function): in every form ``d mat_a = grouped_mm(grad, mat_bᵀ)`` and
``d mat_b = grouped_mm(mat_aᵀ, grad)`` with the same ``offs``, so the gradients are grouped
calls of the engine too (and double backward works); a bias gradient is the fixed-order sum
of its group's rows on the scalar tier.

Offsets on the GPU: on the scalar tier (every GPU, every dtype) for 2-D × 3-D with a
row-major ``mat_a`` (the forward and the input gradient of an MoE layer) and for 2-D × 2-D
in any layout (the weight gradient), and on the
tensor-core tier of an H200 (sm_90, bf16 or f16) for 2-D × 3-D with a row-major ``mat_a``
and for 2-D × 2-D with a column-major ``mat_a`` (``x.t()``) and a row-major ``mat_b`` (the
weight gradient too), one grouped kernel reads them on the GPU, so nothing waits and the
call can be captured in a CUDA graph; there, offsets the call cannot check before it runs
are clamped by the kernel (a decreasing end makes an empty group, an end past the split
dimension is its end), so it never touches memory outside the tensors, and the first bad
end is reported once the kernel has run: the next ``grouped_mm`` on that device (a form with
``offs``) raises it as :class:`~sgemm_bi.errors.BadOffsetsError` (naming the group and the end)
instead of running, and :func:`sgemm_bi.check_device_errors` raises it on request
(synchronize first to be certain to see it). Every other call reads the offsets back first
(one wait for the stream) and checks them (:class:`~sgemm_bi.errors.BadOffsetsError`),
which a CUDA graph capture does not allow (:class:`~sgemm_bi.errors.UnsupportedError`):
pass them on the CPU there.
"""

from __future__ import annotations

import ctypes
from typing import Any, Optional

import torch
from torch import Tensor

from . import _capi
from . import plan as _plan
from ._capi import GroupSplit, OffsetsLocation, OutputMode
from .checks import TORCH_DTYPES, check_tier, resolve_tier
from .engine import GemmDesc, Output, engine_for
from .errors import check
from .functional import _PLAIN, _is_compiling

__all__ = ["grouped_mm", "check_grouped"]

_grouped_fn: Any = None


def _bind() -> Any:
    """``sgemm_bi_grouped_gemm`` with plain ``void *`` pointers (as :mod:`sgemm_bi.plan`
    binds ``sgemm_bi_gemm``), so tensors' addresses go in as integers."""
    global _grouped_fn
    fn = _capi.library()["sgemm_bi_grouped_gemm"]
    fn.restype = ctypes.c_uint32
    v = ctypes.c_void_p
    fn.argtypes = [v, v, ctypes.c_uint32, v, ctypes.c_uint32, v, v, v, v, v]
    _grouped_fn = fn
    return fn


def _describe(t: Any, name: str) -> str:
    if not isinstance(t, Tensor):
        return f"{name} is a {type(t).__name__}, not a Tensor"
    return f"{name} is {list(t.shape)} {t.dtype} on {t.device}"


def check_grouped(a: Any, b: Any, offs: Any, bias: Any, tier: Any,
                  out_dtype: Any) -> tuple[Optional[GroupSplit], list[int], torch.dtype]:
    """Every check of a grouped call (types, dtypes, devices, ranks, shapes, offsets'
    dtype and length, the bias's shape): the split (None for 3-D × 3-D), the result's
    shape and dtype. Raises TypeError or ValueError naming the argument."""
    check_tier(tier)
    for t, name in ((a, "mat_a"), (b, "mat_b")):
        if not isinstance(t, Tensor):
            raise TypeError(_describe(t, name))
        if t.dtype not in TORCH_DTYPES:
            raise TypeError(f"{_describe(t, name)}: expected float32, bfloat16 or float16")
        if t.dim() not in (2, 3):
            raise ValueError(f"{_describe(t, name)}: expected a 2-D or 3-D tensor")
    if a.dtype != b.dtype:
        raise TypeError(f"{_describe(a, 'mat_a')} and {_describe(b, 'mat_b')}: one dtype")
    if a.device != b.device:
        raise ValueError(f"{_describe(a, 'mat_a')} and {_describe(b, 'mat_b')}: one device")
    if out_dtype is not None and out_dtype not in TORCH_DTYPES:
        raise TypeError(f"out_dtype is {out_dtype}: expected float32, bfloat16 or float16")
    dtype = out_dtype or a.dtype
    forms = {
        (2, 3): GroupSplit.ROWS,
        (2, 2): GroupSplit.REDUCTION,
        (3, 2): GroupSplit.COLUMNS,
        (3, 3): None,
    }
    split = forms[(a.dim(), b.dim())]
    if a.shape[-1] != b.shape[-2]:
        raise ValueError(f"{_describe(a, 'mat_a')} and {_describe(b, 'mat_b')}: the last "
                         f"dimension of mat_a must match mat_b's {'second' if b.dim() == 3 else 'first'}")
    if split is None:
        if offs is not None:
            raise ValueError("offs must be None for 3-D × 3-D (the groups are the batch)")
        if a.shape[0] != b.shape[0]:
            raise ValueError(f"{_describe(a, 'mat_a')} and {_describe(b, 'mat_b')}: as many "
                             "groups in each")
        groups, n = a.shape[0], b.shape[-1]
        shape = [groups, a.shape[1], n]
        bias_shape = [n]
    else:
        if not isinstance(offs, Tensor):
            raise TypeError(f"offs is required for a 2-D operand ({_describe(offs, 'offs')})")
        if offs.dtype != torch.int32 or offs.dim() != 1:
            raise TypeError(f"{_describe(offs, 'offs')}: expected a 1-D int32 tensor of group "
                            "ends")
        if offs.device != a.device and offs.device.type != "cpu":
            raise ValueError(f"{_describe(offs, 'offs')}: expected on {a.device} or the CPU")
        groups = offs.shape[0]
        if split == GroupSplit.ROWS:
            if b.shape[0] != groups:
                raise ValueError(f"{_describe(b, 'mat_b')}: {b.shape[0]} groups, but offs "
                                 f"has {groups} ends")
            shape = [a.shape[0], b.shape[-1]]
            bias_shape = [groups, b.shape[-1]]
        elif split == GroupSplit.REDUCTION:
            shape = [groups, a.shape[0], b.shape[1]]
            bias_shape = None
        else:
            if a.shape[0] != groups:
                raise ValueError(f"{_describe(a, 'mat_a')}: {a.shape[0]} groups, but offs "
                                 f"has {groups} ends")
            shape = [a.shape[1], b.shape[1]]
            bias_shape = [b.shape[1]]
    if bias is not None:
        if not isinstance(bias, Tensor):
            raise TypeError(_describe(bias, "bias"))
        if bias_shape is None:
            raise ValueError("bias: a 2-D × 2-D grouped_mm (a weight gradient) takes none")
        if list(bias.shape) != bias_shape:
            raise ValueError(f"{_describe(bias, 'bias')}: expected {bias_shape}")
        if bias.dtype not in (torch.float32, a.dtype) or bias.device != a.device:
            raise TypeError(f"{_describe(bias, 'bias')}: expected float32 or {a.dtype} on "
                            f"{a.device}")
    return split, shape, dtype


class _GroupedPlan:
    """A checked grouped call's descriptor and launch arguments, for its key's next calls."""

    __slots__ = ("desc", "desc_addr", "handle", "split", "location", "shape", "dtype",
                 "cuda_index")

    def __init__(self, desc: GemmDesc, handle: Any, split: GroupSplit,
                 location: OffsetsLocation, shape: list[int], dtype: torch.dtype,
                 cuda_index: Optional[int]) -> None:
        self.desc = desc  # kept alive: the engine reads it through desc_addr
        self.desc_addr = ctypes.addressof(desc)
        self.handle, self.split, self.location = handle, int(split), int(location)
        self.shape, self.dtype, self.cuda_index = shape, dtype, cuda_index


# A call's checks, layouts, tier and descriptor depend only on its arguments' shapes,
# strides, dtypes and devices, the tier and out_dtype: the first call of a key takes the full
# way, and where it read every tensor in place (no copy) the key keeps its plan, so the next
# calls allocate the result and call the engine (~20 µs less a call; docs/perf-notes.md).
_plans: dict[tuple[Any, ...], _GroupedPlan] = {}
_plan.register_cache(_plans)


def _key(a: Any, b: Any, offs: Any, bias: Any, tier: Any,
         out_dtype: Any) -> Optional[tuple[Any, ...]]:
    """The call's plan key, or None where it has none (an argument not a plain tensor)."""
    if type(a) not in _PLAIN or type(b) not in _PLAIN or type(offs) not in _PLAIN or (
            bias is not None and type(bias) not in _PLAIN):
        return None
    key = (a.shape, a.stride(), a.dtype, a.device, b.shape, b.stride(), b.dtype, b.device,
           offs.shape, offs.stride(), offs.dtype, offs.device, tier, out_dtype)
    if bias is None:
        return key
    return key + (bias.shape, bias.stride(), bias.dtype, bias.device)


def _launch(plan: _GroupedPlan, a: Tensor, b: Tensor, offs: Tensor,
            bias: Optional[Tensor]) -> Tensor:
    out = torch.empty(plan.shape, dtype=plan.dtype, device=a.device)
    stream = None if plan.cuda_index is None else _plan._raw_stream(plan.cuda_index)
    status = (_grouped_fn or _bind())(
        plan.handle, plan.desc_addr, plan.split, offs.data_ptr() or None, plan.location,
        a.data_ptr() or None, b.data_ptr() or None,
        None if bias is None else bias.data_ptr(), out.data_ptr() or None, stream)
    if status:
        check(status)
    return out


def _run(a: Tensor, b: Tensor, offs: Optional[Tensor], bias: Optional[Tensor], tier: str,
         out_dtype: Optional[torch.dtype]) -> Tensor:
    """The grouped call through the engine, no autograd: checks, allocates, launches (the
    checks and the descriptor from the key's plan after its first call)."""
    key = _key(a, b, offs, bias, tier, out_dtype)
    if key is not None:
        plan = _plans.get(key)
        if plan is not None:
            assert offs is not None
            return _launch(plan, a, b, offs, bias)
    split, shape, dtype = check_grouped(a, b, offs, bias, tier, out_dtype)
    if split is None:
        return _plan.run(a, b, bias, tier, out_dtype)
    assert offs is not None
    dt = TORCH_DTYPES[a.dtype]
    a_prep, a_op = _plan._operand(a, dt)
    b_prep, b_op = _plan._operand(b, dt)
    in_place = a_prep == b_prep == _plan.AS_IS
    a, b = _plan._prepare(a, a_prep), _plan._prepare(b, b_prep)
    groups = offs.shape[0]
    if split == GroupSplit.ROWS:
        m, k, n = a.shape[0], a.shape[1], b.shape[2]
    elif split == GroupSplit.REDUCTION:
        m, k, n = a.shape[0], a.shape[1], b.shape[1]
    else:
        m, k, n = a.shape[1], a.shape[2], b.shape[1]
    if bias is not None:
        in_place = in_place and bias.is_contiguous()
        bias = bias.contiguous()
    in_place = in_place and offs.is_contiguous()
    offs = offs.contiguous()
    device = a.device
    desc = GemmDesc(
        struct_size=ctypes.sizeof(GemmDesc),
        tier=resolve_tier(tier, device, a.dtype),
        m=m,
        n=n,
        k=k,
        batch=groups,
        a=a_op,
        b=b_op,
        has_bias=0 if bias is None else 1,
        bias_dtype=dt if bias is None else TORCH_DTYPES[bias.dtype],
        c=Output(
            mode=OutputMode.OVERWRITE,
            dtype=TORCH_DTYPES[dtype],
            ldc=max(n, 1),
            batch_stride=m * n if split == GroupSplit.REDUCTION else 0,
        ),
    )
    location = OffsetsLocation.DEVICE if offs.device.type == "cuda" else OffsetsLocation.HOST
    cuda_index = None
    if device.type == "cuda":
        cuda_index = device.index if device.index is not None else torch.cuda.current_device()
    plan = _GroupedPlan(desc, engine_for(device).handle, split, location, shape, dtype,
                        cuda_index)
    out = _launch(plan, a, b, offs, bias)
    if key is not None and in_place:
        if len(_plans) >= _plan.MAX_PLANS:
            _plans.clear()
        _plans[key] = plan
    return out


def _op(a: Tensor, b: Tensor, offs: Optional[Tensor], bias: Optional[Tensor], tier: str,
        out_dtype: Optional[torch.dtype]) -> Tensor:
    """``grouped_mm`` through the engine (see :mod:`sgemm_bi.grouped`)."""
    return _run(a, b, offs, bias, tier, out_dtype)


def _grouped(a: Any, b: Any, offs: Any, bias: Any, tier: Any, out_dtype: Any) -> Tensor:
    """The differentiable grouped call. Eager calls on plain tensors skip the custom op's
    dispatch (~15 µs a call): straight to :func:`_run` when no gradient is needed, else to
    :class:`_GroupedFn` (the op's autograd formula as an autograd function). Traced calls
    and tensor subclasses take the custom op."""
    if type(a) in _PLAIN and type(b) in _PLAIN and not a.is_meta and not _is_compiling():
        if not ((a.requires_grad or b.requires_grad or (
                bias is not None and bias.requires_grad)) and torch.is_grad_enabled()):
            return _run(a, b, offs, bias, tier, out_dtype)
        return _GroupedFn.apply(a, b, offs, bias, tier, out_dtype)  # type: ignore[no-any-return]
    check_grouped(a, b, offs, bias, tier, out_dtype)
    return grouped_mm_op(a, b, offs, bias, tier, out_dtype)  # type: ignore[no-any-return]


grouped_mm_op = torch.library.custom_op("sgemm_bi::grouped_mm", _op, mutates_args=())


@grouped_mm_op.register_fake
def _fake(a, b, offs, bias, tier, out_dtype):  # type: ignore[no-untyped-def]
    _, shape, dtype = check_grouped(a, b, offs, bias, tier, out_dtype)
    return a.new_empty(shape, dtype=dtype)


def _setup_context(ctx: Any, inputs: tuple[Any, ...], output: Tensor) -> None:
    a, b, offs, bias, tier, out_dtype = inputs
    ctx.save_for_backward(a, b, offs)
    ctx.tier = tier
    ctx.in_dtype = a.dtype
    ctx.bias_dtype = None if bias is None else bias.dtype


def _backward(ctx: Any, grad: Tensor) -> tuple[Optional[Tensor], ...]:
    """``d mat_a = grouped_mm(grad, mat_bᵀ)``, ``d mat_b = grouped_mm(mat_aᵀ, grad)`` (the
    same offsets: each form's transposes are another form), the bias's gradient the sum of
    each group's rows (or of each column) on the scalar tier. Differentiable (double
    backward)."""
    a, b, offs = ctx.saved_tensors
    g = grad if grad.dtype == ctx.in_dtype else grad.to(ctx.in_dtype)
    da = db = dbias = None
    if ctx.needs_input_grad[0]:
        da = _grouped(g, b.transpose(-2, -1), offs, None, ctx.tier, None)
    if ctx.needs_input_grad[1]:
        db = _grouped(a.transpose(-2, -1), g, offs, None, ctx.tier, None)
    if ctx.bias_dtype is not None and ctx.needs_input_grad[3]:
        dbias = _bias_grad(grad, offs, a, b, ctx.bias_dtype)
    return da, db, None, dbias, None, None


class _GroupedFn(torch.autograd.Function):
    """The custom op's autograd formula for eager calls (no dispatcher in the way)."""

    @staticmethod
    def forward(ctx: Any, a: Tensor, b: Tensor, offs: Optional[Tensor],  # type: ignore[override]
                bias: Optional[Tensor], tier: str, out_dtype: Optional[torch.dtype]) -> Tensor:
        out = _run(a, b, offs, bias, tier, out_dtype)
        _setup_context(ctx, (a, b, offs, bias, tier, out_dtype), out)
        return out

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Optional[Tensor], ...]:  # type: ignore[override]
        return _backward(ctx, grad)


def _bias_grad(grad: Tensor, offs: Optional[Tensor], a: Tensor, b: Tensor,
               dtype: torch.dtype) -> Tensor:
    """The bias's gradient: for 2-D × 3-D, each group's rows of ``grad`` summed (``onesᵀ ·
    grad`` split by ``offs``); otherwise every row summed. One f32 chain in ascending row
    order per element on the scalar tier, rounded once."""
    if a.dim() == 2 and b.dim() == 3:
        assert offs is not None
        ones = torch.ones((1, grad.shape[0]), dtype=grad.dtype, device=grad.device)
        sums = _grouped(ones, grad, offs, None, "scalar", dtype)  # [G, 1, N]
        return sums.reshape(sums.shape[0], sums.shape[2])
    from .autograd import bias_grad

    return bias_grad(grad, dtype)


torch.library.register_autograd("sgemm_bi::grouped_mm", _backward, setup_context=_setup_context)


def grouped_mm(mat_a: Tensor, mat_b: Tensor, *, offs: Optional[Tensor] = None,
               bias: Optional[Tensor] = None, out_dtype: Optional[torch.dtype] = None,
               tier: str = "auto") -> Tensor:
    """``torch.nn.functional.grouped_mm`` through the engine, with the dense calls' bits for
    every group (see :mod:`sgemm_bi.grouped`); differentiable."""
    return _grouped(mat_a, mat_b, offs, bias, tier, out_dtype)
