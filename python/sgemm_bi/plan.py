"""The lean call path: a gemm's descriptor, built and checked once per key, then one ctypes
call per launch.

Layer 3 of the package, below the ops and the autograd function. A call's *key* is
everything its checks and its descriptor depend on: the shapes and strides of ``a``, ``b``
and the bias, their dtypes and devices, the tier, the output dtype and whether it
accumulates. The first call with a key runs every Python check (:mod:`sgemm_bi.checks`),
decides how each operand is read (in place, or copied when its strides fit no layout),
resolves ``"auto"`` to a tier, and builds the ``sgemm_bi_gemm_desc``; that :class:`Plan` is
kept. A later call with the same key looks the plan up, allocates the result, and makes one
``sgemm_bi_gemm`` call with the data pointers and the current stream. What is not in the
key — the data pointers: alignment, C overlapping an input, a freed or foreign allocation —
the C ABI checks on every call, as it checks every descriptor.

The bits never depend on the cache: a plan is exactly the descriptor the uncached path
built (tests/test_plan.py checks that a changed shape, stride, dtype or tier gets a new
one). A plan holds no tensors, so the cache keeps no memory alive; it holds the handle of a
shared engine (:func:`sgemm_bi.engine.engine_for`, never closed). Dict lookups and inserts
are atomic under the GIL, and a plan is never changed once built, so threads share it.
"""

from __future__ import annotations

import ctypes
from typing import Any, Optional

import torch
from torch import Tensor

from . import _capi
from ._capi import DType, Layout, OutputMode
from .checks import TORCH_DTYPES, check_accumulator, check_gemm, resolve_tier
from .engine import GemmDesc, Operand, Output, engine_for
from .errors import check

__all__ = ["Plan", "run", "accumulate", "launch", "plan_for", "clear", "register_cache",
           "is_col_major", "flat_rows"]

# How an operand is prepared before the call (decided once per key).
AS_IS = 0  # read in place
CONTIGUOUS = 1  # t.contiguous()
BROADCAST = 2  # t[0].contiguous().expand(t.shape): one matrix copied, the batch broadcast

MAX_PLANS = 4096
"""The cache is cleared when it reaches this many plans (shapes that never repeat, such as
a growing sequence length, must not grow it without bound)."""

_plans: dict[tuple[Any, ...], Plan] = {}
_caches: list[dict[Any, Any]] = [_plans]  # every cache of plans, for clear()


class Plan:
    """One key's descriptor and preparation: everything a call does besides allocating the
    result and passing pointers."""

    __slots__ = ("desc", "desc_ref", "handle", "a_prep", "b_prep", "bias_prep", "shape",
                 "dtype", "cuda_index", "a_col", "b_col")

    def __init__(self, desc: GemmDesc, handle: int, a_prep: int, b_prep: int,
                 bias_prep: int, shape: list[int], dtype: torch.dtype,
                 cuda_index: Optional[int]) -> None:
        self.desc = desc
        self.desc_ref = ctypes.byref(desc)  # made once: byref per call costs ~0.2 µs
        self.handle = handle
        self.a_prep, self.b_prep, self.bias_prep = a_prep, b_prep, bias_prep
        self.shape = shape
        self.dtype = dtype
        self.cuda_index = cuda_index  # None on the CPU (no stream)
        # is_col_major() of the operands as given (autograd returns gradients in that
        # layout): a prepared copy is row-major, and so is a 3-D ``a`` read as flat rows.
        self.a_col = desc.a.layout == Layout.COL_MAJOR
        self.b_col = desc.b.layout == Layout.COL_MAJOR


# -- strides to layouts ----------------------------------------------------------------------


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


def _operand(t: Tensor, dtype: DType) -> tuple[int, Operand]:
    """How to prepare ``t`` (``[R, C]`` or ``[B, R, C]``) and the operand descriptor of the
    prepared tensor. A copy is contiguous, so its descriptor follows from the shape."""
    lay = _layout(t)
    batched = t.dim() == 3 and t.shape[0] > 1
    bs = t.stride(0) if batched else 0
    prep = AS_IS
    if lay is None:
        if batched and bs == 0:  # a broadcast batch: copy one matrix, keep the broadcast
            prep = BROADCAST
        else:
            prep = CONTIGUOUS
            bs = t.shape[-2] * t.shape[-1] if batched else 0
        lay = (Layout.ROW_MAJOR, t.shape[-1])
    return prep, Operand(dtype=dtype, layout=lay[0], ld=lay[1], batch_stride=bs)


def flat_rows(a: Tensor) -> tuple[Layout, int] | None:
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


def _prepare(t: Tensor, prep: int) -> Tensor:
    if prep == AS_IS:
        return t
    if prep == CONTIGUOUS:
        return t.contiguous()
    return t[0].contiguous().expand(t.shape)


# -- building a plan -------------------------------------------------------------------------


def _key(a: Tensor, b: Tensor, bias: Optional[Tensor], tier: str,
         out_dtype: Optional[torch.dtype], c: Optional[Tensor]) -> tuple[Any, ...]:
    key: tuple[Any, ...] = (a.shape, a.stride(), a.dtype, a.device, b.shape, b.stride(),
                            b.dtype, b.device, tier, out_dtype)
    if bias is not None:
        key += (bias.shape, bias.stride(), bias.dtype, bias.device)
    if c is not None:  # the accumulator: its checks look at it too
        key += (None, c.shape, c.stride(), c.dtype, c.device)
    return key


def _build(a: Tensor, b: Tensor, bias: Optional[Tensor], tier: str,
           out_dtype: Optional[torch.dtype], c: Optional[Tensor]) -> Plan:
    """Every check, then the descriptor of ``c (+)= a @ b (+ bias)``."""
    if c is None:
        shape, dtype = check_gemm(a, b, bias, tier, out_dtype)
    else:
        check_accumulator(c, a, b, tier)
        shape, dtype = list(c.shape), torch.float32
    dt = TORCH_DTYPES[a.dtype]
    m, k, n = a.shape[-2], a.shape[-1], b.shape[-1]
    batch = 1
    a_prep = AS_IS
    if a.dim() == 3 and b.dim() == 2 and (rows := flat_rows(a)) is not None:
        # [B, M, K] · [K, N] as one [B·M, K] · [K, N]: the same chains, one larger M.
        m *= a.shape[0]
        a_op = Operand(dtype=dt, layout=rows[0], ld=rows[1], batch_stride=0)
    else:
        batch = max(a.shape[0] if a.dim() == 3 else 1, b.shape[0] if b.dim() == 3 else 1)
        a_prep, a_op = _operand(a, dt)
    b_prep, b_op = _operand(b, dt)
    bias_prep = AS_IS
    if bias is not None and bias.stride(0) != 1 and bias.shape[0] > 1:
        bias_prep = CONTIGUOUS
    device = a.device
    desc = GemmDesc(
        struct_size=ctypes.sizeof(GemmDesc),
        tier=resolve_tier(tier, device, a.dtype),
        m=m,
        n=n,
        k=k,
        batch=batch,
        a=a_op,
        b=b_op,
        has_bias=0 if bias is None else 1,
        bias_dtype=dt if bias is None else TORCH_DTYPES[bias.dtype],
        c=Output(
            mode=OutputMode.OVERWRITE if c is None else OutputMode.ACCUMULATE_F32,
            dtype=TORCH_DTYPES[dtype],
            ldc=max(n, 1),
            batch_stride=m * n if batch > 1 else 0,
        ),
    )
    cuda_index = None
    if device.type == "cuda":
        cuda_index = device.index if device.index is not None else torch.cuda.current_device()
    return Plan(desc, engine_for(device).handle, a_prep, b_prep, bias_prep, shape, dtype,
                cuda_index)


def plan_for(a: Tensor, b: Tensor, bias: Optional[Tensor] = None, tier: str = "auto",
             out_dtype: Optional[torch.dtype] = None, c: Optional[Tensor] = None) -> Plan:
    """The cached plan of a call (built, after every check, on the key's first call)."""
    key = _key(a, b, bias, tier, out_dtype, c)
    try:
        plan = _plans.get(key)
    except TypeError:  # an unhashable tier: the checks say what is wrong with it
        check_gemm(a, b, bias, tier, out_dtype)
        raise
    if plan is None:
        plan = _build(a, b, bias, tier, out_dtype, c)
        if len(_plans) >= MAX_PLANS:
            _plans.clear()
        _plans[key] = plan
    return plan


def register_cache(cache: dict[Any, Any]) -> None:
    """Adds a cache that holds plans (the functional API's shortcuts) to what :func:`clear`
    empties."""
    _caches.append(cache)


def clear() -> None:
    """Forgets every plan (for tests and benchmarks; plans never go stale on their own)."""
    for cache in _caches:
        cache.clear()


# -- launching -------------------------------------------------------------------------------

_gemm_fn: Any = None
# The current stream as an int without building a torch.cuda.Stream (~10x cheaper);
# torch.cuda.current_stream(i).cuda_stream where the private function is missing.
_raw_stream: Any = getattr(torch._C, "_cuda_getCurrentRawStream", None) or (
    lambda i: torch.cuda.current_stream(i).cuda_stream)


def _bind() -> Any:
    """``sgemm_bi_gemm`` with plain ``void *`` arguments: a function object of its own, so
    the header mirror's prototype (:data:`sgemm_bi._capi.PROTOTYPES`) stays as it is, and
    the descriptor goes in as the ``byref`` made once per plan."""
    global _gemm_fn
    fn = _capi.library()["sgemm_bi_gemm"]
    fn.restype = ctypes.c_uint32
    fn.argtypes = [ctypes.c_void_p] * 7
    _gemm_fn = fn
    return fn


def launch(plan: Plan, a: Tensor, b: Tensor, bias: Optional[Tensor], c: Tensor) -> None:
    """One ``sgemm_bi_gemm`` call of ``plan`` on these tensors (prepared as the plan says)
    into ``c``, on the current stream of the plan's device."""
    fn = _gemm_fn or _bind()
    if plan.a_prep:
        a = _prepare(a, plan.a_prep)
    if plan.b_prep:
        b = _prepare(b, plan.b_prep)
    if bias is not None:
        if plan.bias_prep:
            bias = bias.contiguous()
        bias_ptr = bias.data_ptr()
    else:
        bias_ptr = None
    stream = None if plan.cuda_index is None else _raw_stream(plan.cuda_index)
    status = fn(plan.handle, plan.desc_ref, a.data_ptr(), b.data_ptr(), bias_ptr, c.data_ptr(),
                stream)
    if status:
        check(status)


def run(a: Tensor, b: Tensor, bias: Optional[Tensor] = None, tier: str = "auto",
        out_dtype: Optional[torch.dtype] = None) -> Tensor:
    """``a @ b (+ bias)`` as a new row-major tensor (``sgemm_bi::gemm``'s body, with no
    dispatcher and no autograd): plain CPU/CUDA tensors, any strides."""
    plan = plan_for(a, b, bias, tier, out_dtype)
    c = torch.empty(plan.shape, dtype=plan.dtype, device=a.device)
    launch(plan, a, b, bias, c)
    return c


def accumulate(c: Tensor, a: Tensor, b: Tensor, tier: str) -> None:
    """``c += a @ b`` into the f32 accumulator ``c`` (the engine's accumulate mode)."""
    plan = plan_for(a, b, None, tier, None, c)
    launch(plan, a, b, None, c)
