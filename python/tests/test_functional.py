"""sgemm_bi.matmul and sgemm_bi.linear on CPU tensors: the bit contract, strides, shapes,
gradients (against torch's autograd within tolerance, and against the contract bit for bit),
batch invariance, autocast and the error messages."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from reference import assert_same_bits, colsum_ref, gemm_ref, rand

import sgemm_bi
from sgemm_bi import errors

DTYPES = [torch.float32, torch.bfloat16, torch.float16]
TOL = {torch.float32: 1e-5, torch.bfloat16: 2e-2, torch.float16: 2e-3}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("bias_dtype", [None, torch.float32, "input"])
def test_matmul_is_the_scalar_contract(dtype: torch.dtype, bias_dtype, gen) -> None:
    a, b = rand((5, 7), dtype, gen), rand((7, 3), dtype, gen)
    bias = None
    if bias_dtype is not None:
        bias = rand((3,), dtype if bias_dtype == "input" else bias_dtype, gen)
    y = sgemm_bi.matmul(a, b, bias, tier="scalar")
    assert y.dtype == dtype and y.shape == (5, 3)
    assert_same_bits(y, gemm_ref(a, b, bias), "Y")
    assert_same_bits(sgemm_bi.matmul(a, b, bias), y, "tier='auto' on the CPU is the scalar tier")


def test_empty_and_k_zero_shapes(gen) -> None:
    bias = rand((3,), torch.float32, gen)
    y = sgemm_bi.matmul(torch.empty(4, 0), torch.empty(0, 3), bias)
    assert_same_bits(y, bias.expand(4, 3).contiguous(), "K = 0 gives the bias")
    assert_same_bits(sgemm_bi.matmul(torch.empty(4, 0), torch.empty(0, 3)), torch.zeros(4, 3))
    assert sgemm_bi.matmul(torch.empty(0, 5), torch.ones(5, 3)).shape == (0, 3)
    assert sgemm_bi.matmul(torch.ones(2, 5), torch.ones(5, 0)).shape == (2, 0)
    assert sgemm_bi.matmul(torch.ones(0, 2, 5), torch.ones(0, 5, 3)).shape == (0, 2, 3)


def _layouts(t: torch.Tensor) -> dict[str, torch.Tensor]:
    """The same matrix values in several memory layouts."""
    r, c = t.shape
    padded = torch.full((r, c + 3), float("nan"), dtype=t.dtype)
    padded[:, :c] = t
    col_padded = torch.full((c, r + 2), float("nan"), dtype=t.dtype)
    col_padded[:, :r] = t.T
    return {
        "contiguous": t.contiguous(),
        "transposed": t.T.contiguous().T,  # column-major
        "row_padded": padded[:, :c],  # ld > columns
        "col_padded": col_padded[:, :r].T,  # column-major with ld > rows
        "every_other": torch.stack([t, t], dim=-1)[..., 0],  # strides (2c, 2): copied
    }


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_any_strides_give_the_same_bits(dtype: torch.dtype, gen) -> None:
    a, b = rand((6, 9), dtype, gen), rand((9, 4), dtype, gen)
    want = gemm_ref(a, b)
    for na, av in _layouts(a).items():
        for nb, bv in _layouts(b).items():
            assert_same_bits(sgemm_bi.matmul(av, bv), want, f"a {na}, b {nb}")
    broadcast_row = rand((1, 9), dtype, gen).expand(6, 9)  # stride 0 over rows
    assert_same_bits(sgemm_bi.matmul(broadcast_row, b),
                     gemm_ref(broadcast_row.contiguous(), b), "a with a broadcast row")


@pytest.mark.parametrize(
    "sa, sb",
    [
        ((5, 4), (4, 3)),
        ((4,), (4, 3)),
        ((5, 4), (4,)),
        ((4,), (4,)),
        ((2, 5, 4), (4, 3)),
        ((2, 3, 5, 4), (4, 3)),
        ((2, 5, 4), (2, 4, 3)),
        ((5, 4), (2, 4, 3)),
        ((1, 5, 4), (3, 4, 2)),
        ((2, 1, 5, 4), (3, 4, 2)),
        ((4,), (2, 4, 3)),
        ((2, 5, 4), (4,)),
    ],
)
def test_matmul_follows_torch_matmul_shapes(sa, sb, gen) -> None:
    a, b = rand(sa, torch.float32, gen), rand(sb, torch.float32, gen)
    y = sgemm_bi.matmul(a, b)
    want = torch.matmul(a, b)
    assert y.shape == want.shape
    torch.testing.assert_close(y, want, rtol=1e-5, atol=1e-5)


def test_batched_with_transposed_batch_entries(gen) -> None:
    """[B, M, K] whose matrices are column-major (not flattenable to rows) stays batched."""
    a = rand((3, 4, 5), torch.float32, gen).transpose(1, 2)  # [3, 5, 4], column-major entries
    b = rand((4, 2), torch.float32, gen)
    y = sgemm_bi.matmul(a, b)
    for i in range(3):
        assert_same_bits(y[i], gemm_ref(a[i], b), f"entry {i}")


def _grads(fn, *inputs: torch.Tensor) -> list[torch.Tensor | None]:
    leaves = [t.detach().clone().requires_grad_(t.is_floating_point()) if t is not None else None
              for t in inputs]
    out = fn(*leaves)
    g = torch.linspace(-1, 1, out.numel(), dtype=torch.float32).reshape(out.shape).to(out.dtype)
    out.backward(g)
    return [t.grad if t is not None else None for t in leaves]


@pytest.mark.parametrize(
    "sa, sb",
    [((6, 5), (5, 4)), ((2, 6, 5), (5, 4)), ((2, 6, 5), (2, 5, 4)), ((6, 5), (2, 5, 4)),
     ((2, 3, 6, 5), (3, 5, 4))],
)
def test_gradients_match_torch_autograd(sa, sb, gen) -> None:
    a, b = rand(sa, torch.float32, gen), rand(sb, torch.float32, gen)
    bias = rand((sb[-1],), torch.float32, gen)
    mine = _grads(lambda x, y, z: sgemm_bi.matmul(x, y, z), a, b, bias)
    theirs = _grads(lambda x, y, z: torch.matmul(x, y) + z, a, b, bias)
    for name, g1, g2 in zip(("a", "b", "bias"), mine, theirs):
        torch.testing.assert_close(g1, g2, rtol=1e-5, atol=1e-5, msg=f"d{name}")


@pytest.mark.parametrize("dtype", DTYPES)
def test_gradients_are_the_contract_bit_for_bit(dtype: torch.dtype, gen) -> None:
    """dX = dY·Wᵀ reduced over N, dW = dYᵀ·X reduced over M (in W's [N, K] layout), dbias =
    Σ dY over M — each one ascending f32 chain."""
    x, w = rand((6, 5), dtype, gen), rand((4, 5), dtype, gen)
    bias = rand((4,), torch.float32, gen)
    dy = rand((6, 4), dtype, gen)
    xl, wl, bl = (t.clone().requires_grad_() for t in (x, w, bias))
    sgemm_bi.linear(xl, wl, bl, tier="scalar").backward(dy)
    assert_same_bits(xl.grad, gemm_ref(dy, w), "dX")
    assert_same_bits(wl.grad, gemm_ref(dy.T, x), "dW")
    assert wl.grad.is_contiguous(), "dW comes in the weight's layout"
    assert_same_bits(bl.grad, colsum_ref(dy, torch.float32), "dbias")


def test_shared_operand_gradient_is_one_chain_over_the_batch(gen) -> None:
    """b shared by a batch: dB = Σ_batch aᵀ·g as one chain over (batch, rows)."""
    a, b = rand((3, 4, 5), torch.float32, gen), rand((5, 2), torch.float32, gen)
    g = rand((3, 4, 2), torch.float32, gen)
    bl = b.clone().requires_grad_()
    sgemm_bi.matmul(a, bl).backward(g)
    assert_same_bits(bl.grad, gemm_ref(a.reshape(12, 5).T, g.reshape(12, 2)), "dB")
    al = a[0].clone().requires_grad_()  # a shared by a batched b: dA = Σ g·bᵀ over (batch, n)
    bb = rand((3, 5, 2), torch.float32, gen)
    sgemm_bi.matmul(al, bb).backward(g)
    want = gemm_ref(g.permute(1, 0, 2).reshape(4, 6), bb.permute(0, 2, 1).reshape(6, 5))
    assert_same_bits(al.grad, want, "dA")


def test_gradient_keeps_the_input_layout(gen) -> None:
    w = rand((4, 5), torch.float32, gen).requires_grad_()
    x = rand((3, 5), torch.float32, gen).requires_grad_()
    sgemm_bi.matmul(x, w.t()).sum().backward()  # w.t() is column-major
    assert w.grad.is_contiguous() and w.grad.shape == (4, 5)


def test_double_backward(gen) -> None:
    a = rand((3, 4), torch.float32, gen).requires_grad_()
    b = rand((4, 2), torch.float32, gen).requires_grad_()
    (ga,) = torch.autograd.grad(sgemm_bi.matmul(a, b).square().sum(), a, create_graph=True)
    (gb,) = torch.autograd.grad(ga.sum(), b)
    a2, b2 = a.detach().requires_grad_(), b.detach().requires_grad_()
    (ga2,) = torch.autograd.grad((a2 @ b2).square().sum(), a2, create_graph=True)
    (gb2,) = torch.autograd.grad(ga2.sum(), b2)
    torch.testing.assert_close(gb, gb2)


@pytest.mark.parametrize("dtype", DTYPES)
def test_batch_invariance(dtype: torch.dtype, gen) -> None:
    x, w = rand((97, 64), dtype, gen), rand((48, 64), dtype, gen)
    bias = rand((48,), dtype, gen)
    full = sgemm_bi.linear(x, w, bias)
    for m in (1, 2, 13, 64):
        assert_same_bits(sgemm_bi.linear(x[:m], w, bias), full[:m], f"M = {m}")
    # N-invariance: a column shard of the layer gives the same columns.
    assert_same_bits(sgemm_bi.linear(x, w[:17], bias[:17]), full[:, :17], "N shard")


def test_linear_matches_torch(gen) -> None:
    for shape in [(7,), (3, 7), (2, 3, 7)]:
        x, w, b = rand(shape, torch.float32, gen), rand((5, 7), torch.float32, gen), \
            rand((5,), torch.float32, gen)
        y = sgemm_bi.linear(x, w, b)
        torch.testing.assert_close(y, F.linear(x, w, b), rtol=1e-5, atol=1e-5)
        assert sgemm_bi.linear(x, w).shape == F.linear(x, w).shape


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_autocast_casts_like_torch_linear(dtype: torch.dtype, gen) -> None:
    x, w, b = rand((4, 6), torch.float32, gen), rand((3, 6), torch.float32, gen), \
        rand((3,), torch.float32, gen)
    with torch.autocast("cpu", dtype=dtype):
        y = sgemm_bi.linear(x, w, b)
        want_dtype = F.linear(x, w, b).dtype
        ym = sgemm_bi.matmul(x, w.T)
    assert y.dtype == want_dtype == dtype and ym.dtype == dtype
    assert_same_bits(y, sgemm_bi.linear(x.to(dtype), w.to(dtype), b.to(dtype)), "autocast")
    xl = x.clone().requires_grad_()
    with torch.autocast("cpu", dtype=dtype):
        sgemm_bi.linear(xl, w, b).float().sum().backward()
    assert xl.grad.dtype == torch.float32  # the cast is part of the graph, as in torch


def test_error_messages(gen) -> None:
    a, b = rand((3, 4), torch.float32, gen), rand((4, 2), torch.float32, gen)
    with pytest.raises(TypeError, match="b must be a torch.Tensor, not list"):
        sgemm_bi.matmul(a, [[1.0]])
    with pytest.raises(TypeError, match="x must be a torch.Tensor, not ndarray"):
        sgemm_bi.linear(a.numpy(), b.T)
    with pytest.raises(TypeError, match=r"dtype mismatch: a is torch.float32 but b is "
                                        r"torch.bfloat16"):
        sgemm_bi.matmul(a, b.bfloat16())
    with pytest.raises(TypeError, match="a is torch.float64: sgemm-bi takes"):
        sgemm_bi.matmul(a.double(), b.double())
    with pytest.raises(TypeError, match="a is torch.int64"):
        sgemm_bi.matmul(a.long(), b.long())
    with pytest.raises(TypeError, match="bias is torch.float16: it must be torch.float32 or"):
        sgemm_bi.matmul(a.bfloat16(), b.bfloat16(), torch.zeros(2, dtype=torch.float16))
    with pytest.raises(ValueError, match=r"shape mismatch: a is \[3, 4\] and b is \[3, 2\]"):
        sgemm_bi.matmul(a, b[:3])
    with pytest.raises(ValueError, match=r"last dimension of x must equal in_features \(3\)"):
        sgemm_bi.linear(a, b.T[:, :3])
    with pytest.raises(ValueError, match=r"bias has shape \[3\]; it must be \[N\] = \[2\]"):
        sgemm_bi.matmul(a, b, torch.zeros(3))
    with pytest.raises(ValueError, match="do not broadcast"):
        sgemm_bi.matmul(torch.ones(2, 3, 4), torch.ones(3, 4, 2))
    with pytest.raises(ValueError, match="device mismatch: a is on cpu but b is on meta"):
        sgemm_bi.matmul(a, b.to("meta"))
    with pytest.raises(ValueError, match="tier is 'fast'"):
        sgemm_bi.matmul(a, b, tier="fast")
    with pytest.raises(errors.UnsupportedDtypeError, match="use the scalar tier for f32"):
        sgemm_bi.matmul(a, b, tier="tensor_cores")


def test_meta_tensors_give_shapes_without_the_library() -> None:
    y = sgemm_bi.matmul(torch.empty(2, 3, 4, device="meta"), torch.empty(4, 5, device="meta"))
    assert y.device.type == "meta" and y.shape == (2, 3, 5)
