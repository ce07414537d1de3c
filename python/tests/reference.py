"""The scalar tier's bit contract written out in exact arithmetic, independent of the
library, for small shapes:

    y[i, j] = round_out(bias_j + chain),
    chain   = fma(a[i, K-1], b[K-1, j], … fma(a[i, 0], b[0, j], +0.0) …)

with every fma rounded once to f32 (computed here exactly with fractions, then rounded to
nearest-even), bf16/f16 inputs upcast exactly, the bias added once in f32, and one
round-to-nearest-even to the output dtype (torch's ``.to()``). Plus helpers shared by the
tests.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import torch
from torch import Tensor


def round_f32(q: Fraction) -> np.float32:
    """The f32 nearest to the exact value ``q`` (ties to even). Finite results only."""
    if q == 0:
        return np.float32(0.0)
    guess = np.float32(float(q))
    cands = [guess, np.nextafter(guess, np.float32(-np.inf)),
             np.nextafter(guess, np.float32(np.inf))]

    def key(c: np.float32) -> tuple[Fraction, int]:
        return abs(Fraction(float(c)) - q), int(np.array(c).view(np.uint32)) & 1

    return min(cands, key=key)


def fma32(a: float, b: float, c: np.float32) -> np.float32:
    """``fma(a, b, c)`` in f32 with a single rounding."""
    return round_f32(Fraction(float(a)) * Fraction(float(b)) + Fraction(float(c)))


def gemm_ref(a: Tensor, b: Tensor, bias: Tensor | None = None,
             out_dtype: torch.dtype | None = None) -> Tensor:
    """``a @ b (+ bias)`` by the scalar contract (2-D, small shapes)."""
    out_dtype = out_dtype or a.dtype
    a64 = a.detach().cpu().double().numpy()
    b64 = b.detach().cpu().double().numpy()
    m, k = a64.shape
    n = b64.shape[1]
    bias32 = None if bias is None else bias.detach().cpu().float().numpy()
    y = np.zeros((m, n), dtype=np.float32)
    for i in range(m):
        for j in range(n):
            acc = np.float32(0.0)
            for kk in range(k):
                acc = fma32(a64[i, kk], b64[kk, j], acc)
            if bias32 is not None:
                acc = np.float32(bias32[j] + acc)  # one f32 add
            y[i, j] = acc
    return torch.from_numpy(y).to(out_dtype)


def colsum_ref(g: Tensor, out_dtype: torch.dtype) -> Tensor:
    """Σ over rows of a 2-D ``g`` in f32, ascending, rounded once: ``onesᵀ · g``."""
    ones = torch.ones(1, g.shape[0], dtype=g.dtype)
    return gemm_ref(ones, g, out_dtype=out_dtype).reshape(-1)


def rand(shape: tuple[int, ...] | list[int], dtype: torch.dtype, gen: torch.Generator,
         device: str | torch.device = "cpu") -> Tensor:
    """Fresh random values in [-1, 1) (never zeros), made on the CPU, then moved."""
    return (torch.rand(shape, generator=gen) * 2 - 1).to(dtype).to(device)


def same_bits(x: Tensor, y: Tensor) -> bool:
    """Bitwise equality of two tensors of one dtype and shape."""
    if x.dtype != y.dtype or x.shape != y.shape:
        return False
    view = torch.int32 if x.element_size() == 4 else torch.int16
    return torch.equal(x.detach().contiguous().view(view).cpu(),
                       y.detach().contiguous().view(view).cpu())


def assert_same_bits(x: Tensor, y: Tensor, what: str = "") -> None:
    """Asserts :func:`same_bits`, reporting how many elements differ."""
    assert x.shape == y.shape, f"{what}: shapes {list(x.shape)} and {list(y.shape)}"
    assert x.dtype == y.dtype, f"{what}: dtypes {x.dtype} and {y.dtype}"
    if not same_bits(x, y):
        diff = (x.detach().float().cpu() - y.detach().float().cpu()).abs()
        bad = int((diff != 0).sum())
        raise AssertionError(f"{what}: {bad} of {x.numel()} elements differ "
                             f"(max |diff| {float(diff.max()):.3e})")


class Launches(list):  # type: ignore[type-arg]
    """The engine launches a test saw: the Python layer's (``sgemm_bi.plan.launch``, recorded
    by a spy that appends to this list) and the native kernels' (``sgemm_bi.native``,
    counted by the library), which are added as ``native_entry`` items whenever the list is
    read."""

    def __init__(self, native_entry: object) -> None:
        super().__init__()
        from sgemm_bi import native

        self._calls = native.engine_calls
        self._entry = native_entry
        self._seen = self._calls()

    def _sync(self) -> None:
        now = self._calls()
        if now > self._seen:
            super().extend([self._entry] * (now - self._seen))
            self._seen = now

    def __len__(self) -> int:
        self._sync()
        return super().__len__()

    def __iter__(self):  # type: ignore[no-untyped-def]
        self._sync()
        return super().__iter__()

    def __getitem__(self, i):  # type: ignore[no-untyped-def]
        self._sync()
        return super().__getitem__(i)
