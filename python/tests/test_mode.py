"""sgemm_bi.enable / disable / mode on CPU tensors: what is routed, what falls through, a
small model forward and backward, batch invariance, autocast."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from models import Attention
from reference import Launches, assert_same_bits, colsum_ref, gemm_ref, rand
from torch import nn

import sgemm_bi
from sgemm_bi import errors, plan


@pytest.fixture
def launches(monkeypatch) -> list[str]:
    """Records the device of every engine launch (every torch-layer call ends in
    sgemm_bi.plan.launch)."""
    seen = Launches("cpu")  # the native kernels are the CPU key's
    original = plan.launch

    def spy(p, *args, **kwargs):  # type: ignore[no-untyped-def]
        seen.append("cpu" if p.cuda_index is None else f"cuda:{p.cuda_index}")
        return original(p, *args, **kwargs)

    monkeypatch.setattr(plan, "launch", spy)
    return seen


def test_routes_aten_ops_to_the_engine(launches, gen) -> None:
    a, b = rand((5, 7), torch.float32, gen), rand((7, 3), torch.float32, gen)
    bias = rand((3,), torch.float32, gen)
    a3, b3 = rand((2, 5, 7), torch.float32, gen), rand((2, 7, 3), torch.float32, gen)
    with sgemm_bi.mode(tier="scalar"):
        assert sgemm_bi.is_enabled()
        assert_same_bits(torch.mm(a, b), gemm_ref(a, b), "mm")
        assert_same_bits(a @ b, gemm_ref(a, b), "@")
        assert_same_bits(torch.addmm(bias, a, b), gemm_ref(a, b, bias), "addmm with a bias")
        bm = torch.bmm(a3, b3)
        bb = torch.baddbmm(bias, a3, b3)
        ein = torch.einsum("bmk,bkn->bmn", a3, b3)
        out = torch.empty(0)
        torch.mm(a, b, out=out)
    assert not sgemm_bi.is_enabled()
    for i in range(2):
        assert_same_bits(bm[i], gemm_ref(a3[i], b3[i]), "bmm")
        assert_same_bits(bb[i], gemm_ref(a3[i], b3[i], bias), "baddbmm with a bias")
        assert_same_bits(ein[i], gemm_ref(a3[i], b3[i]), "einsum")
    assert_same_bits(out, gemm_ref(a, b), "mm(out=)")
    assert len(launches) == 7 and set(launches) == {"cpu"}


def test_addmm_with_beta_alpha_and_a_full_input(gen) -> None:
    a, b = rand((4, 6), torch.float32, gen), rand((6, 3), torch.float32, gen)
    c = rand((4, 3), torch.float32, gen)
    a3, b3, c3 = rand((2, 4, 6), torch.float32, gen), rand((2, 6, 3), torch.float32, gen), \
        rand((2, 4, 3), torch.float32, gen)
    with sgemm_bi.mode():
        y = torch.addmm(c, a, b, beta=0.5, alpha=2.0)
        y0 = torch.addmm(c, a, b, beta=0)
        y3 = torch.baddbmm(c3, a3, b3, alpha=-1.0)
    torch.testing.assert_close(y, 0.5 * c + 2.0 * (a @ b))
    torch.testing.assert_close(y0, a @ b)
    torch.testing.assert_close(y3, c3 - a3 @ b3)


def test_unsupported_ops_fall_through(launches, gen) -> None:
    a, b = rand((4, 5), torch.float64, gen), rand((5, 3), torch.float64, gen)
    with sgemm_bi.mode():
        y = a @ b
        yi = torch.ones(2, 3, dtype=torch.int64) @ torch.ones(3, 2, dtype=torch.int64)
        yv = torch.mv(a.float(), b[:, 0].float())
    assert launches == []
    torch.testing.assert_close(y, torch.matmul(a, b))
    assert yi.tolist() == [[3, 3], [3, 3]] and yv.shape == (4,)


def test_enable_disable(launches, gen) -> None:
    a = rand((3, 3), torch.float32, gen)
    sgemm_bi.enable(tier="scalar")
    try:
        assert sgemm_bi.is_enabled()
        a @ a
        sgemm_bi.enable()  # again: replaces the tier, still one mode
        a @ a
    finally:
        sgemm_bi.disable()
    sgemm_bi.disable()  # a no-op when off
    assert not sgemm_bi.is_enabled()
    a @ a
    assert len(launches) == 2
    with pytest.raises(ValueError, match="tier is 'gpu'"):
        sgemm_bi.enable("gpu")
    assert not sgemm_bi.is_enabled()


def test_a_model_forward_and_backward(launches, gen) -> None:
    torch.manual_seed(0)
    model = Attention()
    x = rand((3, 5, 32), torch.float32, gen)
    y_ref = model(x)
    y_ref.square().sum().backward()
    ref_grads = {n: p.grad.clone() for n, p in model.named_parameters()}
    model.zero_grad()
    with sgemm_bi.mode(tier="scalar"):
        y = model(x)
        y.square().sum().backward()
    torch.testing.assert_close(y, y_ref, rtol=1e-5, atol=1e-5)
    for n, p in model.named_parameters():
        torch.testing.assert_close(p.grad, ref_grads[n], rtol=1e-4, atol=1e-5, msg=n)
    n_fwd = 4 + 2  # 4 linear layers, 2 attention products
    assert len(launches) >= n_fwd * 3, "forward and backward GEMMs all ran on the engine"


def test_nn_linear_under_the_mode_with_engine_bias_grads_is_sgemm_bi_linear(gen) -> None:
    """bias_grad="engine": forward and every gradient, the bias's included, bit for bit."""
    torch.manual_seed(0)
    layer = nn.Linear(6, 4)
    x, dy = rand((2, 5, 6), torch.float32, gen), rand((2, 5, 4), torch.float32, gen)
    with sgemm_bi.mode(tier="scalar", bias_grad="engine"):
        layer(x).backward(dy)
    grads = (layer.weight.grad.clone(), layer.bias.grad.clone())
    layer.zero_grad()
    sgemm_bi.Linear.from_torch(layer, tier="scalar")(x).backward(dy)
    assert_same_bits(grads[0], layer.weight.grad, "dW")
    assert_same_bits(grads[1], layer.bias.grad, "dbias")
    assert_same_bits(grads[1], colsum_ref(dy.reshape(10, 4), torch.float32), "dbias contract")


def test_nn_linear_under_the_mode_has_engine_products_and_torch_s_bias_gradient(
        launches, gen) -> None:
    """The default (bias_grad="torch"): forward, dX and dW are the engine's bits (those of
    sgemm_bi.Linear), the bias gradient is torch's own reduction, bit for bit what torch
    gives without the mode; no Python runs at the autograd key."""
    torch.manual_seed(0)
    layer = nn.Linear(6, 4)
    x = rand((2, 5, 6), torch.float32, gen).requires_grad_()
    dy = rand((2, 5, 4), torch.float32, gen)
    layer(x).backward(dy)
    torch_dbias = layer.bias.grad.clone()
    layer.zero_grad()
    x.grad = None
    with sgemm_bi.mode(tier="scalar"):
        y = layer(x)
        y.backward(dy)
    assert len(launches) == 3, "forward, dX and dW on the engine; the bias's sum is torch's"
    got = [t.grad.clone() for t in (x, layer.weight, layer.bias)]
    layer.zero_grad()
    x.grad = None
    ref = sgemm_bi.Linear.from_torch(layer, tier="scalar")(x)
    ref.backward(dy)
    assert_same_bits(y, ref, "forward")
    assert_same_bits(got[0], x.grad, "dX")
    assert_same_bits(got[1], layer.weight.grad, "dW")
    assert_same_bits(got[2], torch_dbias, "dbias is torch's")


def test_bias_grad_must_be_torch_or_engine() -> None:
    with pytest.raises(ValueError, match="bias_grad must be 'torch' or 'engine'"):
        with sgemm_bi.mode(bias_grad="cublas"):
            pass
    with pytest.raises(ValueError, match="bias_grad"):
        sgemm_bi.enable(bias_grad="")
    assert not sgemm_bi.is_enabled()


def test_the_innermost_mode_s_bias_grad_decides(gen) -> None:
    """Nested blocks with different bias_grad re-register the kernels on entry and on exit:
    the engine's column sum inside the "engine" block, torch's sum around it."""
    torch.manual_seed(0)
    layer = nn.Linear(6, 4)
    x, dy = rand((7, 6), torch.float32, gen), rand((7, 4), torch.float32, gen)
    want_engine = colsum_ref(dy, torch.float32)
    layer(x).backward(dy)
    want_torch = layer.bias.grad.clone()

    def dbias() -> torch.Tensor:
        layer.zero_grad()
        layer(x).backward(dy)
        return layer.bias.grad.clone()

    with sgemm_bi.mode("scalar"):
        assert_same_bits(dbias(), want_torch, "outer torch block")
        with sgemm_bi.mode("scalar", bias_grad="engine"):
            assert_same_bits(dbias(), want_engine, "inner engine block")
        assert_same_bits(dbias(), want_torch, "back in the torch block")
    assert not sgemm_bi.is_enabled()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_batch_invariance_through_the_mode(dtype: torch.dtype, gen) -> None:
    torch.manual_seed(0)
    model = Attention().to(dtype).eval()
    x = rand((16, 5, 32), dtype, gen)
    with torch.no_grad(), sgemm_bi.mode():
        full = model(x)
        for bs in (1, 3):
            assert_same_bits(model(x[:bs]), full[:bs], f"batch {bs} of 16")


def test_autocast_under_the_mode(launches, gen) -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2))
    x = rand((4, 8), torch.float32, gen)
    with sgemm_bi.mode(), torch.autocast("cpu", dtype=torch.bfloat16):
        y = model(x)
    assert y.dtype == torch.bfloat16 and len(launches) == 2
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y_torch = model(x)
    torch.testing.assert_close(y.float(), y_torch.float(), rtol=2e-2, atol=2e-2)
    y.float().sum().backward()
    assert model[0].weight.grad.dtype == torch.float32


def test_explicit_tier_is_never_replaced(gen) -> None:
    a = rand((3, 3), torch.float32, gen)
    with sgemm_bi.mode(tier="tensor_cores"):
        with pytest.raises(errors.UnsupportedDtypeError, match="use the scalar tier for f32"):
            a @ a
        # bf16 runs on the CPU's model of the tier, not on the scalar tier.
        got = a.bfloat16() @ a.bfloat16()
    assert_same_bits(got, sgemm_bi.matmul(a.bfloat16(), a.bfloat16(), tier="tensor_cores"),
                     "the tensor-core tier under the mode")
    # A linear layer of another dtype than its input still raises torch's own error.
    with sgemm_bi.mode(), pytest.raises(RuntimeError):
        F.linear(a, a.bfloat16())
