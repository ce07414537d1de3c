"""The plan cache of the lean call path (sgemm_bi.plan) and the functional API's shortcuts:
a call whose shape, strides, dtype or tier changed is never served an old descriptor, a
cached plan is exactly the one the checks build, and bad input is refused every time."""

from __future__ import annotations

import ctypes

import pytest
import torch
from reference import assert_same_bits, gemm_ref, rand

import sgemm_bi
from sgemm_bi import plan


@pytest.fixture(autouse=True)
def fresh_cache():
    plan.clear()
    yield
    plan.clear()


def _desc_bytes(p: plan.Plan) -> bytes:
    return ctypes.string_at(ctypes.addressof(p.desc), ctypes.sizeof(p.desc))


def test_a_changed_stride_gets_its_own_plan(gen) -> None:
    """The same shape, dtype and tier, once row-major and once a transposed view: a stale
    descriptor would read the second as row-major and give the product of the transpose."""
    a = rand((6, 6), torch.float32, gen)
    b = rand((6, 4), torch.float32, gen)
    assert_same_bits(sgemm_bi.matmul(a, b, tier="scalar"), gemm_ref(a, b), "row-major a")
    at = a.t()  # same shape [6, 6], other strides
    assert_same_bits(sgemm_bi.matmul(at, b, tier="scalar"), gemm_ref(at, b), "a.t()")
    assert_same_bits(plan.run(at, b, None, "scalar"), gemm_ref(at, b), "plan.run of a.t()")


def test_a_tensor_restrided_in_place_is_not_served_its_old_plan(gen) -> None:
    """One tensor object whose strides change in place (t_()): the key is taken from the
    tensor at each call, not from its identity."""
    a = rand((5, 5), torch.float32, gen)
    b = rand((5, 3), torch.float32, gen)
    first = sgemm_bi.linear(b.t().contiguous(), a)  # warm a key with a row-major weight
    a.t_()
    assert_same_bits(sgemm_bi.linear(b.t().contiguous(), a), gemm_ref(b.t(), a.t()),
                     "weight transposed in place")
    assert not torch.equal(first, sgemm_bi.linear(b.t().contiguous(), a))


@pytest.mark.parametrize("fn", ["matmul", "linear", "run"])
def test_changed_shape_dtype_and_tier(fn: str, gen) -> None:
    def call(x: torch.Tensor, w: torch.Tensor, tier: str) -> torch.Tensor:
        if fn == "matmul":
            return sgemm_bi.matmul(x, w.t(), tier=tier)
        if fn == "linear":
            return sgemm_bi.linear(x, w, tier=tier)
        return plan.run(x, w.t(), None, tier)

    cases = [((4, 8), (3, 8), torch.float32, "scalar"),
             ((4, 8), (5, 8), torch.float32, "scalar"),    # N changed
             ((2, 8), (5, 8), torch.float32, "scalar"),    # M changed
             ((2, 8), (5, 8), torch.bfloat16, "scalar"),   # dtype changed
             ((2, 8), (5, 8), torch.bfloat16, "tensor_cores")]  # tier changed
    for _ in range(2):  # the second round is served from the cache
        for xs, ws, dtype, tier in cases:
            x, w = rand(xs, dtype, gen), rand(ws, dtype, gen)
            got = call(x, w, tier)
            assert got.dtype == dtype and got.shape == (xs[0], ws[0])
            if tier == "scalar":
                assert_same_bits(got, gemm_ref(x, w.t()), f"{fn} {xs} {ws} {dtype}")
            else:
                plan.clear()
                assert_same_bits(got, call(x, w, tier), f"{fn} {tier}: cached vs fresh")


def test_a_cached_plan_is_the_plan_the_checks_build(gen) -> None:
    a3 = rand((2, 3, 5), torch.bfloat16, gen)
    cases = [(rand((4, 5), torch.float32, gen), rand((5, 3), torch.float32, gen), None),
             (rand((5, 4), torch.float32, gen).t(), rand((3, 5), torch.float32, gen).t(),
              rand((3,), torch.float32, gen)),
             (a3, rand((5, 4), torch.bfloat16, gen), rand((4,), torch.bfloat16, gen)),
             (a3.transpose(0, 1), rand((5, 4), torch.bfloat16, gen), None),  # not flat
             (a3, rand((2, 5, 4), torch.bfloat16, gen)[:, :, :3], None),
             (a3[:1].expand(4, 3, 5), rand((5, 4), torch.bfloat16, gen), None)]
    for a, b, bias in cases:
        cached = plan.plan_for(a, b, bias, "auto")
        assert plan.plan_for(a, b, bias, "auto") is cached
        fresh = plan._build(a, b, bias, "auto", None, None)
        assert _desc_bytes(fresh) == _desc_bytes(cached)
        assert (fresh.a_prep, fresh.b_prep, fresh.bias_prep, fresh.shape, fresh.dtype) == (
            cached.a_prep, cached.b_prep, cached.bias_prep, cached.shape, cached.dtype)
        got = plan.run(a, b, bias, "scalar")
        for i in range(a.shape[0] if b.dim() == 3 else 1):
            ai, bi, gi = (a[i], b[i], got[i]) if b.dim() == 3 else (
                a.reshape(-1, a.shape[-1]), b, got.reshape(-1, got.shape[-1]))
            assert_same_bits(gi, gemm_ref(ai, bi, bias), f"{list(a.shape)} @ {list(b.shape)}")


def test_bad_input_is_refused_on_every_call(gen) -> None:
    a, b = rand((4, 5), torch.float32, gen), rand((6, 3), torch.float32, gen)
    for _ in range(2):
        with pytest.raises(ValueError, match="shape mismatch"):
            sgemm_bi.matmul(a, b)
        with pytest.raises(ValueError, match="shape mismatch"):
            plan.run(a, b)
        with pytest.raises(ValueError, match="tier is 'fast'"):
            plan.run(a, b.t()[:, :5].t()[:5], None, "fast")
        with pytest.raises(TypeError, match="dtype mismatch"):
            sgemm_bi.linear(a, a.bfloat16())
    assert all(p is None for p in sgemm_bi.functional._shortcuts.values())
    assert not plan._plans


def test_the_cache_is_bounded(monkeypatch, gen) -> None:
    monkeypatch.setattr(plan, "MAX_PLANS", 4)
    b = rand((3, 2), torch.float32, gen)
    for m in range(1, 11):
        a = rand((m, 3), torch.float32, gen)
        assert_same_bits(plan.run(a, b, None, "scalar"), gemm_ref(a, b), f"M = {m}")
        assert len(plan._plans) <= 4


def test_the_shortcut_only_serves_calls_that_read_in_place(gen) -> None:
    """A 3-D x whose rows do not flatten to a view, and a call that needs a gradient, take
    the full path; both give the full path's bits."""
    w, bias = rand((4, 6), torch.float32, gen), rand((4,), torch.float32, gen)
    x = rand((5, 3, 6), torch.float32, gen).transpose(0, 1)  # [3, 5, 6], not flat
    for _ in range(2):
        y = sgemm_bi.linear(x, w, bias, tier="scalar")
        assert_same_bits(y.reshape(15, 4), gemm_ref(x.reshape(15, 6), w.t(), bias), "linear")
    key = sgemm_bi.functional._key("linear", x, w, bias, "scalar")
    assert sgemm_bi.functional._shortcuts[key] is None
    xg = x.detach().clone().requires_grad_()
    for _ in range(2):
        y = sgemm_bi.linear(xg, w, bias, tier="scalar")
        assert y.grad_fn is not None
        y.sum().backward()


def test_strided_out_of_place_copies_keep_their_bits(gen) -> None:
    """Operands whose strides fit no layout are copied (the plan says so), every call."""
    a = rand((4, 1, 5), torch.float32, gen).expand(4, 3, 5)  # rows of stride 0
    b = rand((5, 2), torch.float32, gen)
    for _ in range(2):
        got = plan.run(a, b, None, "scalar")
        assert_same_bits(got.reshape(12, 2), gemm_ref(a.reshape(12, 5), b), "broadcast rows")
    assert plan.plan_for(a, b, None, "scalar").a_prep != plan.AS_IS


@pytest.mark.parametrize("weight_t", [False, True])
def test_the_shortcut_s_linear_node_gives_the_full_path_s_gradients(weight_t: bool, gen) -> None:
    """sgemm_bi.linear on a remembered key (one LinearFn node) against the full path (views
    and Gemm): forward, every gradient and a double backward, bit for bit."""
    x0 = rand((2, 3, 5), torch.float32, gen)
    w0 = rand((5, 4), torch.float32, gen).t() if weight_t else rand((4, 5), torch.float32, gen)
    b0 = rand((4,), torch.float32, gen)
    dy = rand((2, 3, 4), torch.float32, gen)

    def grads(fn) -> list[torch.Tensor]:  # type: ignore[no-untyped-def]
        x, w, b = (t.detach().clone().requires_grad_() for t in (x0, w0, b0))
        if weight_t:
            w = w0.detach().t().clone().t().requires_grad_()  # keep the column-major layout
        y = fn(x, w, b)
        gx, gw, gb = torch.autograd.grad(y, (x, w, b), dy, create_graph=True)
        (ggw,) = torch.autograd.grad(gx.square().sum(), w)
        return [y, gx, gw, gb, ggw]

    full = grads(lambda x, w, b: sgemm_bi.functional.linear_full(x, w, b, "scalar"))
    sgemm_bi.linear(x0, w0, b0, tier="scalar")  # remembers the key
    short = grads(lambda x, w, b: sgemm_bi.linear(x, w, b, tier="scalar"))
    assert short[0].grad_fn.name().endswith("LinearFnBackward")
    for name, f, s in zip(("y", "dx", "dw", "dbias", "d(dx)/dw"), full, short):
        assert_same_bits(s, f, name)
        assert s.stride() == f.stride(), f"{name}: the layout of the full path"
