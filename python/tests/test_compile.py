"""The custom ops under torch.library's checks and torch.compile (CPU)."""

from __future__ import annotations

import shutil

import pytest
import torch
from reference import assert_same_bits, rand
from torch import nn

import sgemm_bi


@pytest.mark.parametrize(
    "sa, sb, bias",
    [((4, 5), (5, 3), True), ((2, 4, 5), (5, 3), False), ((4, 5), (2, 5, 3), True),
     ((2, 4, 5), (2, 5, 3), False)],
)
def test_opcheck(sa, sb, bias, gen) -> None:
    """Schema, fake (meta) implementation, autograd registration and AOT dispatch."""
    a = rand(sa, torch.float32, gen).requires_grad_()
    b = rand(sb, torch.float32, gen).requires_grad_()
    c = rand((sb[-1],), torch.float32, gen).requires_grad_() if bias else None
    torch.library.opcheck(torch.ops.sgemm_bi.gemm.default, (a, b, c, "scalar", None))
    acc = torch.zeros(4, 3)
    torch.library.opcheck(torch.ops.sgemm_bi.gemm_accumulate_.default,
                          (acc, a.detach()[..., :4, :] if a.dim() == 2 else a.detach()[0],
                           b.detach() if b.dim() == 2 else b.detach()[0], "scalar"))


def _step(model: nn.Module, x: torch.Tensor) -> tuple[torch.Tensor, list[torch.Tensor]]:
    model.zero_grad(set_to_none=True)
    y = model(x)
    y.square().sum().backward()
    return y.detach(), [p.grad.clone() for p in model.parameters()]


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = sgemm_bi.Linear(8, 16, tier="scalar")
        self.fc2 = sgemm_bi.Linear(16, 4, tier="scalar")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.fc1(x))
        return self.fc2(h) + sgemm_bi.matmul(x, self.fc1.weight.t()[:, :4], tier="scalar")


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_torch_compile_gives_the_eager_bits(backend: str, gen) -> None:
    if backend == "inductor" and not any(shutil.which(c) for c in ("g++", "c++", "clang++")):
        pytest.skip("inductor on the CPU needs a C++ compiler, and there is none here")
    torch.manual_seed(0)
    model = Net()
    x = rand((6, 8), torch.float32, gen)
    y_eager, g_eager = _step(model, x)
    compiled = torch.compile(model, backend=backend, fullgraph=True)
    y, g = _step(compiled, x)
    assert_same_bits(y, y_eager, "forward")
    for i, (a, b) in enumerate(zip(g, g_eager)):
        assert_same_bits(a, b, f"gradient {i}")


def test_torch_compile_of_the_mode(gen) -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 4))
    x = rand((6, 8), torch.float32, gen)
    with sgemm_bi.mode(tier="scalar"):
        y_eager = model(x)
        y = torch.compile(model, backend="aot_eager")(x)
    assert_same_bits(y, y_eager, "compiled under the mode")
