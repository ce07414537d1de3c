"""The native ops ``sgemm_bi::matmul`` / ``matmul_bias`` behind ``sgemm_bi.linear`` and
``sgemm_bi.matmul``: calls that need no gradient run on them with the bits of the Python
path, anything else takes the Python path, and bad input still raises the typed errors."""

from __future__ import annotations

import pytest
import torch
from reference import assert_same_bits, rand

import sgemm_bi
from sgemm_bi import functional, native, plan
from sgemm_bi.errors import UnsupportedDtypeError

pytestmark = pytest.mark.skipif(native.ops() is None, reason="no native ops here")

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)]


@pytest.fixture
def python_launches(monkeypatch) -> list[int]:
    """Counts the Python path's engine launches (plan.launch)."""
    seen: list[int] = []
    original = plan.launch
    monkeypatch.setattr(plan, "launch", lambda *a, **k: (seen.append(1), original(*a, **k)))
    return seen


def python_path(monkeypatch, fn, *args, **kwargs):  # type: ignore[no-untyped-def]
    """``fn`` with the native ops hidden from the functional API (the Python path)."""
    with monkeypatch.context() as m:
        m.setattr(functional, "_native_ops", None)
        return fn(*args, **kwargs)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_calls_without_gradients_run_natively_with_the_python_path_s_bits(
        monkeypatch, python_launches, gen, device, dtype) -> None:
    x3 = rand((2, 5, 24), dtype, gen).to(device)
    w = rand((12, 24), dtype, gen).to(device)
    b, b32 = rand((12,), dtype, gen).to(device), rand((12,), torch.float32, gen).to(device)
    calls = [
        (sgemm_bi.linear, (x3[0], w), {}),                       # 2-D
        (sgemm_bi.linear, (x3, w, b), {}),                       # 3-D contiguous, a bias
        (sgemm_bi.linear, (x3[0, 0], w, b32), {}),               # 1-D, an f32 bias
        (sgemm_bi.linear, (x3[0].t().contiguous().t(), w), {}),  # column-major x
        (sgemm_bi.linear, (x3, w), {"tier": "scalar"}),
        (sgemm_bi.matmul, (x3, w.t()), {}),                      # b [K, N], read in place
        (sgemm_bi.matmul, (x3[1], w.t().contiguous(), b), {}),
    ]
    before = native.engine_calls()
    got = [fn(*args, **kw) for fn, args, kw in calls]
    assert native.engine_calls() - before == len(calls) and python_launches == []
    for (fn, args, kw), y in zip(calls, got):
        assert_same_bits(y, python_path(monkeypatch, fn, *args, **kw), f"{fn.__name__}")
    assert len(python_launches) == len(calls)


def test_what_the_ops_do_not_take_runs_the_python_path(python_launches, gen) -> None:
    """A gradient, a non-contiguous N-D or 1-D x, a batched b: the Python path (and the op
    itself refuses a strided 1-D x rather than read it as one contiguous row)."""
    x = rand((2, 5, 24), torch.float32, gen)
    w = rand((12, 24), torch.float32, gen)
    before = native.engine_calls()
    sgemm_bi.linear(x.clone().requires_grad_(), w)
    sgemm_bi.linear(x.transpose(0, 1), w)
    strided = sgemm_bi.linear(x[0, :, 0], w[:, :5])
    sgemm_bi.matmul(x, rand((2, 24, 3), torch.float32, gen))
    assert native.engine_calls() == before and len(python_launches) == 4
    assert_same_bits(strided, sgemm_bi.linear(x[0, :, 0].contiguous(), w[:, :5]), "1-D")
    with pytest.raises(RuntimeError, match="contiguous"):
        native.ops()[0](x[0, :, 0], w[:, :5], 0, True)


def test_bad_input_raises_the_typed_errors(gen) -> None:
    x, w = rand((3, 5), torch.float32, gen), rand((4, 5), torch.float32, gen)
    before = native.engine_calls()
    with pytest.raises(ValueError, match="shape mismatch"):
        sgemm_bi.linear(x, w[:, :4])
    with pytest.raises(UnsupportedDtypeError):
        sgemm_bi.linear(x, w, tier="tensor_cores")
    with pytest.raises(ValueError, match="tier"):
        sgemm_bi.linear(x, w, tier="gpu")
    with pytest.raises(TypeError):
        sgemm_bi.linear(x, w.double())
    assert native.engine_calls() == before
