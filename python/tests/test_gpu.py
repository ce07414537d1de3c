"""On a CUDA GPU: every tier and dtype, the scalar tier against the CPU backend bit for bit,
streams, CUDA graph capture, torch.compile, batch invariance through the mode on a model,
training twice. Skipped without a GPU; failures when SGEMM_BI_REQUIRE_GPU=1."""

from __future__ import annotations

import copy
import os
import shutil
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F
from conftest import INSTALLED, PYTHON_DIR
from models import Attention
from reference import assert_same_bits, rand
from torch import nn

import sgemm_bi
from sgemm_bi import errors
from sgemm_bi._capi import Tier
from sgemm_bi.engine import Engine, engine_for
from sgemm_bi.ops import resolve_tier

pytestmark = pytest.mark.gpu

DTYPES = [torch.float32, torch.bfloat16, torch.float16]
CUDA = "cuda"


def tensor_cores() -> bool:
    """Whether the engine of device 0 reports the tensor-core tier."""
    return Tier.TENSOR_CORES in engine_for("cuda:0").capabilities.tiers


def rel_err(y: torch.Tensor, ref: torch.Tensor) -> float:
    return float((y.detach().double() - ref).norm() / ref.norm())


def test_engine_on_the_gpu() -> None:
    e = engine_for("cuda:0")
    caps = e.capabilities
    assert caps.compute_capability is not None and caps.compute_capability >= (8, 0)
    assert Tier.SCALAR in caps.tiers and e.device == "cuda:0"
    print(f"capabilities: {caps}")
    with pytest.raises(errors.NoDeviceError):
        Engine(f"cuda:{torch.cuda.device_count()}")


def test_auto_resolves_from_the_capabilities() -> None:
    dev = torch.device("cuda:0")
    tc = Tier.TENSOR_CORES if tensor_cores() else Tier.SCALAR
    assert resolve_tier("auto", dev, torch.bfloat16) == tc
    assert resolve_tier("auto", dev, torch.float16) == tc
    assert resolve_tier("auto", dev, torch.float32) == Tier.SCALAR
    assert resolve_tier("auto", torch.device("cpu"), torch.bfloat16) == Tier.SCALAR
    # The Python layer and the engine (what C and Rust callers get) agree.
    e = engine_for("cuda:0")
    for dtype in (torch.bfloat16, torch.float16, torch.float32):
        assert e.resolve_tier("auto", dtype) == resolve_tier("auto", dev, dtype)


SHAPES = [(1, 1, 1), (37, 53, 29), (130, 257, 65), (4095, 96, 33), (64, 8193, 17)]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("m, k, n", SHAPES)
def test_scalar_tier_is_the_cpu_bits(dtype: torch.dtype, m: int, k: int, n: int, gen) -> None:
    """Forward (both weight layouts, a bias of each dtype) and the training triad."""
    x, w = rand((m, k), dtype, gen), rand((n, k), dtype, gen)
    bias = rand((n,), torch.float32, gen)
    dy = rand((m, n), dtype, gen)
    outs = {}
    for dev in ("cpu", CUDA):
        xl, wl, bl = (t.to(dev).clone().requires_grad_() for t in (x, w, bias))
        y = sgemm_bi.linear(xl, wl, bl, tier="scalar")
        y.backward(dy.to(dev))
        kn = sgemm_bi.matmul(x.to(dev), w.to(dev).T.contiguous(), bias.to(dev).to(dtype),
                             tier="scalar")
        outs[dev] = [t.detach().cpu() for t in (y, xl.grad, wl.grad, bl.grad, kn)]
    for name, c, g in zip(("Y", "dX", "dW", "dbias", "Y (W as [K, N])"), outs["cpu"], outs[CUDA]):
        assert_same_bits(g, c, f"{name} {dtype} {m}x{k}x{n}")


@pytest.mark.parametrize("dtype", DTYPES)
def test_scalar_tier_batched_and_strided_is_the_cpu_bits(dtype: torch.dtype, gen) -> None:
    a = rand((3, 45, 70), dtype, gen)
    b = rand((3, 33, 70), dtype, gen).transpose(1, 2)  # [3, 70, 33], column-major entries
    cases = [
        lambda a, b: sgemm_bi.matmul(a, b, tier="scalar"),  # batched
        # [3, 33, 45] column-major entries (not flattenable) times a [45, 20] slice (ld 70)
        lambda a, b: sgemm_bi.matmul(a[:, :, :33].transpose(1, 2), a[0, :, :20], tier="scalar"),
        lambda a, b: sgemm_bi.matmul(a[0], b, tier="scalar"),  # A shared by the batch
    ]
    for i, f in enumerate(cases):
        assert_same_bits(f(a.cuda(), b.cuda()).cpu(), f(a, b), f"case {i}")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("tier", ["scalar", "tensor_cores", "auto"])
def test_every_tier_and_dtype(tier: str, dtype: torch.dtype, gen) -> None:
    m, k, n = 257, 1000, 130
    x, w, bias = (rand(s, dtype, gen, CUDA) for s in ((m, k), (n, k), (n,)))
    if tier == "tensor_cores" and dtype == torch.float32:
        with pytest.raises(errors.UnsupportedDtypeError, match="use the scalar tier for f32"):
            sgemm_bi.linear(x, w, bias, tier=tier)
        return
    if tier == "tensor_cores" and not tensor_cores():
        with pytest.raises(errors.TierUnavailableError, match="tensor_cores tier is not available"):
            sgemm_bi.linear(x, w, bias, tier=tier)
        return
    xl, wl, bl = (t.clone().requires_grad_() for t in (x, w, bias))
    y = sgemm_bi.linear(xl, wl, bl, tier=tier)
    ref = F.linear(x.double(), w.double(), bias.double())
    tol = 1e-5 if dtype == torch.float32 else 1e-2
    assert rel_err(y, ref) < tol
    # Batch invariance and N-invariance.
    for rows in (1, 7, 128):
        assert_same_bits(sgemm_bi.linear(x[:rows], w, bias, tier=tier), y[:rows].detach(),
                         f"{tier} {dtype}: {rows} rows of {m}")
    assert_same_bits(sgemm_bi.linear(x, w[:50], bias[:50], tier=tier), y[:, :50].detach(),
                     "N shard")
    # Gradients close to float64, and the same bits on a second run.
    dy = rand((m, n), dtype, gen, CUDA)
    y.backward(dy)
    grads = [xl.grad, wl.grad, bl.grad]
    xd, wd, bd = (t.double().requires_grad_() for t in (x, w, bias))
    F.linear(xd, wd, bd).backward(dy.double())
    for g, r in zip(grads, (xd.grad, wd.grad, bd.grad)):
        assert rel_err(g, r) < tol
    xl2, wl2, bl2 = (t.clone().requires_grad_() for t in (x, w, bias))
    sgemm_bi.linear(xl2, wl2, bl2, tier=tier).backward(dy)
    for g, g2 in zip(grads, (xl2.grad, wl2.grad, bl2.grad)):
        assert_same_bits(g, g2, "run to run")


def test_streams(gen) -> None:
    a, b = rand((300, 200), torch.bfloat16, gen, CUDA), rand((200, 100), torch.bfloat16, gen, CUDA)
    want = sgemm_bi.matmul(a, b, tier="scalar")
    c = torch.full((300, 100), float("nan"), dtype=torch.bfloat16, device=CUDA)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        got = sgemm_bi.matmul(a, b, tier="scalar")
    s.synchronize()
    assert_same_bits(got, want, "on a side stream")
    # The low-level engine with an explicit stream.
    desc = Engine.dense_desc(300, 100, 200, "bf16")
    engine_for("cuda:0").gemm(desc, a, b, c, stream=s)
    s.synchronize()
    assert_same_bits(c, want, "Engine.gemm on a torch stream")


def test_cuda_graph_capture(gen) -> None:
    torch.manual_seed(0)
    model = nn.Sequential(sgemm_bi.Linear(64, 128, device=CUDA, tier="scalar"), nn.GELU(),
                          sgemm_bi.Linear(128, 32, device=CUDA, tier="scalar"))
    reference = copy.deepcopy(model)
    static_x = rand((16, 64), torch.float32, gen, CUDA)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):  # warm up: engine creation and kernel loading happen here
        for _ in range(2):
            model(static_x).square().sum().backward()
    torch.cuda.current_stream().wait_stream(s)
    model.zero_grad(set_to_none=True)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static_y = model(static_x)
        static_y.square().sum().backward()
    for step in range(3):
        x = rand((16, 64), torch.float32, gen, CUDA)
        static_x.copy_(x)
        graph.replay()
        reference.zero_grad(set_to_none=True)
        y = reference(x)
        y.square().sum().backward()
        torch.cuda.synchronize()
        assert_same_bits(static_y, y.detach(), f"replay {step}: forward")
        for p, q in zip(model.parameters(), reference.parameters()):
            assert_same_bits(p.grad, q.grad, f"replay {step}: gradient")


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_torch_compile(backend: str, gen) -> None:
    if backend == "inductor" and not (shutil.which("cc") or shutil.which("gcc")):
        pytest.skip("inductor on CUDA needs a C compiler for triton, and there is none here")
    torch.manual_seed(0)
    model = nn.Sequential(sgemm_bi.Linear(64, 96, device=CUDA, dtype=torch.bfloat16),
                          nn.ReLU(), sgemm_bi.Linear(96, 8, device=CUDA, dtype=torch.bfloat16))
    x = rand((33, 64), torch.bfloat16, gen, CUDA)
    y_eager = model(x)
    y_eager.float().square().sum().backward()
    g_eager = [p.grad.clone() for p in model.parameters()]
    model.zero_grad(set_to_none=True)
    compiled = torch.compile(model, backend=backend, fullgraph=True)
    y = compiled(x)
    y.float().square().sum().backward()
    assert_same_bits(y, y_eager, "forward")
    for p, g in zip(model.parameters(), g_eager):
        assert_same_bits(p.grad, g, "gradient")


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_batch_invariance_through_the_mode_on_a_model(dtype: torch.dtype, gen) -> None:
    torch.manual_seed(0)
    model = nn.Sequential(*(Attention(d=256, heads=8) for _ in range(2))).to(CUDA, dtype).eval()
    x = rand((64, 32, 256), dtype, gen, CUDA)
    with torch.no_grad(), sgemm_bi.mode():
        full = model(x)
        for bs in (1, 5, 63):
            assert_same_bits(model(x[:bs]), full[:bs], f"batch {bs} of 64")
    with torch.no_grad():
        ref = model(x)  # torch's own GEMMs: close, not necessarily invariant
    assert rel_err(full, ref.double()) < (1e-4 if dtype == torch.float32 else 5e-2)


def test_mode_routes_cuda_ops_with_the_cpu_bits(gen) -> None:
    a, b = rand((3, 40, 50), torch.float32, gen), rand((3, 50, 20), torch.float32, gen)
    bias = rand((20,), torch.float32, gen)
    with sgemm_bi.mode(tier="scalar"):
        got = [torch.bmm(a.cuda(), b.cuda()), torch.addmm(bias.cuda(), a[0].cuda(), b[0].cuda())]
        want = [torch.bmm(a, b), torch.addmm(bias, a[0], b[0])]
    for g, w in zip(got, want):
        assert_same_bits(g.cpu(), w, "mode on CUDA vs CPU")


def test_fp32_grad_accumulation_on_the_gpu_is_the_cpu_bits(gen) -> None:
    xs = [rand((40, 24), torch.bfloat16, gen) for _ in range(3)]
    mains = []
    for dev in ("cpu", CUDA):
        torch.manual_seed(0)
        lin = sgemm_bi.Linear(24, 16, dtype=torch.bfloat16, tier="scalar",
                              fp32_grad_accumulation=True).to(dev)
        for x in xs:
            lin(x.to(dev)).float().square().sum().backward()
        mains.append((lin.weight.main_grad.cpu(), lin.bias.main_grad.cpu()))
    assert_same_bits(mains[1][0], mains[0][0], "weight.main_grad")
    assert_same_bits(mains[1][1], mains[0][1], "bias.main_grad")


def test_training_twice_is_bit_identical() -> None:
    """The example: two trainings from one seed, then batch invariance under the mode."""
    env = dict(os.environ)
    if not INSTALLED:
        env["PYTHONPATH"] = str(PYTHON_DIR) + os.pathsep + env.get("PYTHONPATH", "")
    r = subprocess.run(
        [sys.executable, str(PYTHON_DIR / "examples" / "train_deterministic.py"),
         "--device", "cuda", "--steps", "20"],
        env=env, capture_output=True, text=True, timeout=600,
    )
    print(r.stdout)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "bit-identical weights" in r.stdout
