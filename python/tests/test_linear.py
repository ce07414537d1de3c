"""sgemm_bi.Linear: nn.Linear's parameters and state_dict, from_torch, training
reproducibility and fp32_grad_accumulation (CPU)."""

from __future__ import annotations

import copy
import io

import pytest
import torch
from reference import assert_same_bits, colsum_ref, gemm_ref, rand
from torch import nn

import sgemm_bi


def test_same_parameters_init_and_state_dict_as_nn_linear() -> None:
    torch.manual_seed(3)
    ref = nn.Linear(7, 5)
    torch.manual_seed(3)
    lin = sgemm_bi.Linear(7, 5)
    assert isinstance(lin, nn.Linear)
    assert [n for n, _ in lin.named_parameters()] == ["weight", "bias"]
    sd = lin.state_dict()
    assert list(sd) == list(ref.state_dict()) == ["weight", "bias"]
    for k in sd:
        assert_same_bits(sd[k], ref.state_dict()[k], f"init of {k}")
    # Round trips both ways, through serialization too.
    buf = io.BytesIO()
    torch.save(lin.state_dict(), buf)
    other = nn.Linear(7, 5)
    other.load_state_dict(torch.load(io.BytesIO(buf.getvalue())))
    back = sgemm_bi.Linear(7, 5)
    back.load_state_dict(other.state_dict())
    assert_same_bits(back.weight.detach(), lin.weight.detach(), "round trip")
    assert "tier='auto'" in repr(lin)
    no_bias = sgemm_bi.Linear(7, 5, bias=False, dtype=torch.bfloat16)
    assert no_bias.bias is None and no_bias.weight.dtype == torch.bfloat16
    assert list(no_bias.state_dict()) == ["weight"]


def test_forward_matches_nn_linear_and_is_the_contract(gen) -> None:
    torch.manual_seed(0)
    lin = sgemm_bi.Linear(6, 4, tier="scalar")
    x = rand((2, 3, 6), torch.float32, gen)
    y = lin(x)
    torch.testing.assert_close(y, nn.functional.linear(x, lin.weight, lin.bias))
    want = gemm_ref(x.reshape(6, 6), lin.weight.T, lin.bias).reshape(2, 3, 4)
    assert_same_bits(y.detach(), want, "Linear forward")


def test_from_torch_shares_parameters(gen) -> None:
    ref = nn.Linear(5, 3)
    opt = torch.optim.SGD(ref.parameters(), lr=0.1)
    lin = sgemm_bi.Linear.from_torch(ref, tier="scalar")
    assert lin.weight is ref.weight and lin.bias is ref.bias
    assert lin.tier == "scalar" and lin.in_features == 5 and lin.out_features == 3
    x = rand((4, 5), torch.float32, gen)
    lin(x).sum().backward()
    opt.step()  # the optimizer of the torch module updates the shared parameters
    assert ref.weight.grad is not None
    assert list(lin.state_dict()) == ["weight", "bias"]
    nb = sgemm_bi.Linear.from_torch(nn.Linear(5, 3, bias=False))
    assert nb.bias is None and nb(x).shape == (4, 3)
    with pytest.raises(TypeError, match="must be a torch.nn.Linear"):
        sgemm_bi.Linear.from_torch(nn.Conv1d(1, 1, 1))
    with pytest.raises(ValueError, match="tier is 'tc'"):
        sgemm_bi.Linear(2, 2, tier="tc")


def _train(seed: int, dtype: torch.dtype) -> dict[str, torch.Tensor]:
    torch.manual_seed(seed)
    model = nn.Sequential(sgemm_bi.Linear(8, 32, dtype=dtype), nn.Tanh(),
                          sgemm_bi.Linear(32, 4, dtype=dtype))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    g = torch.Generator().manual_seed(seed)
    for _ in range(5):
        x = torch.randn(16, 8, generator=g).to(dtype)
        loss = model(x).float().square().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    return copy.deepcopy(model.state_dict())


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_training_twice_is_bit_identical(dtype: torch.dtype) -> None:
    a, b = _train(0, dtype), _train(0, dtype)
    for k in a:
        assert_same_bits(a[k], b[k], k)


def test_fp32_grad_accumulation(gen) -> None:
    """Two micro-batches of bf16: main_grad = dW₁ + dW₂ in f32 (the f32 dWs rounded once each,
    one f32 add), nothing rounded to bf16; .grad stays None."""
    torch.manual_seed(0)
    lin = sgemm_bi.Linear(6, 4, dtype=torch.bfloat16, tier="scalar",
                          fp32_grad_accumulation=True)
    assert "fp32_grad_accumulation=True" in repr(lin)
    xs = [rand((5, 6), torch.bfloat16, gen) for _ in range(2)]
    dys = [rand((5, 4), torch.bfloat16, gen) for _ in range(2)]
    for x, dy in zip(xs, dys):
        lin(x).backward(dy)
    assert lin.weight.grad is None and lin.bias.grad is None
    assert lin.weight.main_grad.dtype == torch.float32
    dw = [gemm_ref(dy.T, x, out_dtype=torch.float32) for x, dy in zip(xs, dys)]
    db = [colsum_ref(dy, torch.float32) for dy in dys]
    assert_same_bits(lin.weight.main_grad, dw[0] + dw[1], "weight.main_grad")
    assert_same_bits(lin.bias.main_grad, db[0] + db[1], "bias.main_grad")
    # Without it, the bf16 .grad is rounded to bf16 after each micro-batch.
    plain = sgemm_bi.Linear(6, 4, dtype=torch.bfloat16, tier="scalar")
    for x, dy in zip(xs, dys):
        plain(x).backward(dy)
    assert plain.weight.grad.dtype == torch.bfloat16
    lin.zero_main_grad()
    assert not lin.weight.main_grad.any() and not lin.bias.main_grad.any()
    # dX is still returned to the input.
    x = xs[0].clone().requires_grad_()
    lin(x).backward(dys[0])
    assert_same_bits(x.grad, gemm_ref(dys[0], lin.weight.detach()), "dX")
    # No grad: a plain forward.
    with torch.no_grad():
        assert_same_bits(lin(xs[0]), sgemm_bi.linear(xs[0], lin.weight, lin.bias), "no_grad")


def test_fp32_grad_accumulation_under_autocast(gen) -> None:
    lin = sgemm_bi.Linear(6, 4, fp32_grad_accumulation=True)  # f32 master weights
    x = rand((5, 6), torch.float32, gen)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = lin(x)
    assert y.dtype == torch.bfloat16
    y.float().sum().backward()
    assert lin.weight.grad is None and lin.weight.main_grad.shape == (4, 6)
    ones = torch.ones(5, 4, dtype=torch.bfloat16)
    assert_same_bits(lin.weight.main_grad, gemm_ref(ones.T, x.bfloat16(), out_dtype=torch.float32),
                     "main_grad from the autocast (bf16) GEMM")


def test_bias_gradients_reuse_one_ones_row_and_never_write_it(gen) -> None:
    """The ``onesᵀ`` of ``dbias = onesᵀ · dY`` is kept per (rows, dtype, device, stream) and
    read only: a second gradient of the same row count gets the same tensor, still all
    ones, and the gradients are the contract's column sums."""
    from sgemm_bi.autograd import bias_grad, ones_row

    like = torch.zeros(2, dtype=torch.float32)
    row = ones_row(6, like)
    assert row is ones_row(6, like)
    assert row.shape == (1, 6) and row.dtype == torch.float32 and bool((row == 1).all())
    assert ones_row(6, like.to(torch.bfloat16)) is not row
    for _ in range(2):
        dy = rand((2, 3, 5), torch.float32, gen)
        assert_same_bits(bias_grad(dy, torch.float32), colsum_ref(dy.reshape(6, 5),
                                                                  torch.float32), "dbias")
    assert bool((row == 1).all())
