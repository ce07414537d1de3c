"""sgemm-bi 0.1's Python names keep working with their 0.1 meaning.

The examples of 0.1's README live in python/README.md ("Coming from 0.1"); these tests read
them from there and run them exactly as written — on CPU tensors where they can, and on
the GPU (tests marked ``gpu``: skipped without one, failures with SGEMM_BI_REQUIRE_GPU=1) —
and compare every result with the current API bit for bit. The README's blocks are run in
one namespace, in order, with ``device`` set as its text says. Beyond the README: the 0.1
pointer forms of ``Engine`` on the CPU backend in every dtype, next to the descriptor forms;
``tensor_cores=`` on every entry point that takes ``tier=``; the errors.
"""

from __future__ import annotations

import re
from typing import Any, Callable

import pytest
import torch
from conftest import PYTHON_DIR
from reference import assert_same_bits, rand
from torch import nn

import sgemm_bi
from sgemm_bi import errors
from sgemm_bi._capi import WeightLayout
from sgemm_bi.engine import Engine, engine_for

README = PYTHON_DIR / "README.md"
DTYPES = {"float32": torch.float32, "f32": torch.float32, "bfloat16": torch.bfloat16,
          "bf16": torch.bfloat16, "float16": torch.float16, "f16": torch.float16,
          "half": torch.float16}


# -- the README's blocks ---------------------------------------------------------------------


def readme_blocks() -> dict[str, Callable[[dict[str, Any]], None]]:
    """The ```python blocks of python/README.md's "Coming from 0.1" section, by role
    (``"functional"``, ``"tensor_cores"``, ``"engine"``), each compiled so that a traceback
    points at its line in the README."""
    text = README.read_text()
    start = text.index("\n## Coming from 0.1\n")
    end = text.find("\n## ", start + 1)
    section_end = end if end != -1 else len(text)
    found = [(m.group(1), text.count("\n", 0, m.start(1)))
             for m in re.finditer(r"^```python\n(.*?)^```$", text[:section_end], re.S | re.M)
             if m.start() > start and "load_01_state_dict" not in m.group(1)]
    assert len(found) == 3, f"expected 3 python blocks in 'Coming from 0.1', found {len(found)}"
    roles = {}
    for code, line in found:
        if "Engine(0)" in code:
            role = "engine"
        elif "tensor_cores=True" in code:
            role = "tensor_cores"
        else:
            role = "functional"
        assert role not in roles, f"two README blocks look like the {role} one"
        roles[role] = compile("\n" * line + code, str(README), "exec")
    assert "deterministic_linear(x, weight, bias)" in text[start:section_end]

    def runner(obj: Any) -> Callable[[dict[str, Any]], None]:
        return lambda ns: exec(obj, ns)

    return {role: runner(obj) for role, obj in roles.items()}


def check_functional(ns: dict[str, Any]) -> None:
    """The functional block's results against ``matmul``/``linear`` on the scalar tier."""
    x, weight, bias, y = ns["x"], ns["weight"], ns["bias"], ns["y"]
    assert y.dtype == torch.float32 and y.shape == (x.shape[0], weight.shape[1])
    x2, w2, b2 = (t.detach().clone().requires_grad_() for t in (x, weight, bias))
    y2 = sgemm_bi.matmul(x2, w2, b2, tier="scalar")
    y2.sum().backward()
    for name, got, want in (("y", y, y2), ("x.grad", x.grad, x2.grad),
                            ("weight.grad", weight.grad, w2.grad),
                            ("bias.grad", bias.grad, b2.grad)):
        assert_same_bits(got, want, f"0.1 deterministic_linear {name} vs matmul")
    # weight is [in, out]: nn.Linear's layout is its transpose.
    y3 = sgemm_bi.linear(x.detach(), weight.detach().t(), bias.detach(), tier="scalar")
    assert_same_bits(y.detach(), y3, "0.1 deterministic_linear vs linear(x, weight.T)")


def check_tensor_cores(ns: dict[str, Any]) -> None:
    """The tensor-core block's results against ``matmul(..., tier="tensor_cores")``."""
    xh, wh, bh, yh = ns["xh"], ns["wh"], ns["bh"], ns["yh"]
    assert yh.dtype == torch.bfloat16
    x2, w2, b2 = (t.detach().clone().requires_grad_() for t in (xh, wh, bh))
    y2 = sgemm_bi.matmul(x2, w2, b2, tier="tensor_cores")
    y2.float().sum().backward()
    for name, got, want in (("yh", yh, y2), ("xh.grad", xh.grad, x2.grad),
                            ("wh.grad", wh.grad, w2.grad), ("bh.grad", bh.grad, b2.grad)):
        assert_same_bits(got, want, f"0.1 deterministic_linear(tensor_cores=True) {name}")


def check_engine(ns: dict[str, Any]) -> None:
    """The Engine block's buffers against the torch-level API on the scalar tier."""
    X, W, b, Y, dY, dW, dX = (ns[v] for v in ("X", "W", "b", "Y", "dY", "dW", "dX"))
    assert_same_bits(Y, sgemm_bi.matmul(X, W, b, tier="scalar"), "Engine(0).forward")
    want = torch.zeros_like(dW)
    torch.ops.sgemm_bi.gemm_accumulate_(want, X.t(), dY, "scalar")
    assert_same_bits(dW, want, "Engine(0).backward_dw")
    assert_same_bits(dX, sgemm_bi.matmul(dY, W.t(), tier="scalar"), "Engine(0).backward_dx")


def run_tensor_core_block(blocks: dict[str, Callable[[dict[str, Any]], None]],
                          ns: dict[str, Any], device: str, unavailable: str = "") -> bool:
    """Runs the tensor-core block: checked where the device's engine runs the tier, else
    the typed error it must raise (its message matching ``unavailable``). Returns whether
    it ran."""
    if engine_for(device).supports("tensor_cores"):
        blocks["tensor_cores"](ns)
        check_tensor_cores(ns)
        return True
    with pytest.raises(errors.TierUnavailableError, match=unavailable):
        blocks["tensor_cores"](ns)
    return False


def test_the_readme_has_the_01_blocks() -> None:
    assert set(readme_blocks()) == {"functional", "tensor_cores", "engine"}


def test_readme_blocks_on_cpu() -> None:
    blocks = readme_blocks()
    ns: dict[str, Any] = {"device": "cpu"}
    blocks["functional"](ns)
    check_functional(ns)
    # The tensor-core block runs on the CPU's model of the tier (the sm_90 bits).
    assert run_tensor_core_block(blocks, ns, "cpu"), "the CPU engine runs the tensor-core tier"


@pytest.mark.gpu
def test_readme_blocks_on_the_gpu() -> None:
    blocks = readme_blocks()
    ns: dict[str, Any] = {"device": "cuda"}
    blocks["functional"](ns)
    check_functional(ns)
    run_tensor_core_block(blocks, ns, "cuda:0")
    blocks["engine"](ns)
    check_engine(ns)
    ns["engine"].close()


# -- Engine: the 0.1 pointer forms -------------------------------------------------------------


def engine_01_round(e: Engine, dtype: str, device: str, gen: torch.Generator,
                    tensor_cores: bool = False, m: int = 7, k: int = 33,
                    n: int = 5) -> dict[str, torch.Tensor]:
    """One forward (with and without bias), two accumulated dW and one dX through ``e``'s
    0.1 forms, each checked against the current API; returns the results."""
    td = DTYPES[dtype]
    tier = "tensor_cores" if tensor_cores else "scalar"
    x, w, dy = (rand(s, td, gen, device) for s in ((m, k), (k, n), (m, n)))
    b = rand((n,), torch.float32, gen, device)
    stream = torch.cuda.current_stream().cuda_stream if device != "cpu" else 0
    out: dict[str, torch.Tensor] = {}

    y = torch.empty(m, n, dtype=td, device=device)
    e.forward(y.data_ptr(), x.data_ptr(), w.data_ptr(), b.data_ptr(), m, k, n, dtype, stream,
              tensor_cores)
    assert_same_bits(y, sgemm_bi.matmul(x, w, b, tier=tier), f"forward {dtype}")
    # The descriptor form on the same engine gives the same bits.
    y2 = torch.empty_like(y)
    e.forward(Engine.linear_desc(m, k, n, dtype, WeightLayout.KN, tier), x, w, y2, bias=b,
              bias_dtype="f32", stream=stream)
    assert_same_bits(y, y2, f"forward {dtype}: 0.1 form vs descriptor form")
    out["y"] = y

    y0 = torch.empty_like(y)
    e.forward(y_ptr=y0.data_ptr(), x_ptr=x.data_ptr(), w_ptr=w.data_ptr(), bias_ptr=None, m=m,
              k=k, n=n, dtype=dtype, stream=stream, tensor_cores=tensor_cores)
    assert_same_bits(y0, sgemm_bi.matmul(x, w, tier=tier), f"forward {dtype} without bias")

    dw = rand((k, n), torch.float32, gen, device)  # accumulated into: starts non-zero
    want = dw.clone()
    for _ in range(2):
        e.backward_dw(dw.data_ptr(), dy.data_ptr(), x.data_ptr(), m, k, n, dtype, stream,
                      tensor_cores)
        torch.ops.sgemm_bi.gemm_accumulate_(want, x.t(), dy, tier)
    assert_same_bits(dw, want, f"backward_dw {dtype} (accumulated twice)")
    out["dw"] = dw

    dx = torch.empty(m, k, dtype=td, device=device)
    e.backward_dx(dx.data_ptr(), dy.data_ptr(), w.data_ptr(), m, k, n, dtype, stream,
                  tensor_cores)
    assert_same_bits(dx, sgemm_bi.matmul(dy, w.t(), tier=tier), f"backward_dx {dtype}")
    out["dx"] = dx
    return out


@pytest.mark.parametrize("dtype", sorted(DTYPES))
def test_engine_01_forms_on_cpu(dtype: str, gen) -> None:
    with Engine("cpu") as e:
        engine_01_round(e, dtype, "cpu", gen)


def test_engine_01_forms_with_the_cpu_tensor_core_model(gen) -> None:
    with Engine("cpu") as e:
        assert e.supports("tensor_cores")
        td = torch.bfloat16
        m, k, n = 5, 40, 6
        x, w = rand((m, k), td, gen), rand((k, n), td, gen)
        b = rand((n,), torch.float32, gen)
        y, y2 = torch.empty(m, n, dtype=td), torch.empty(m, n, dtype=td)
        e.forward(y.data_ptr(), x.data_ptr(), w.data_ptr(), b.data_ptr(), m, k, n, "bf16",
                  None, True)
        e.forward(Engine.linear_desc(m, k, n, "bf16", WeightLayout.KN, "tensor_cores"),
                  x, w, y2, bias=b, bias_dtype="f32")
        assert_same_bits(y, y2, "tensor_cores=True is the tensor-core tier")
        e.forward(y2.data_ptr(), x.data_ptr(), w.data_ptr(), b.data_ptr(), m, k, n, "bf16",
                  None, False)
        assert_same_bits(y2, sgemm_bi.matmul(x, w, b, tier="scalar"), "False is scalar")


def test_engine_01_errors() -> None:
    e = Engine("cpu")
    x, w, y = torch.ones(2, 3), torch.ones(3, 4), torch.empty(2, 4)
    with pytest.raises(RuntimeError, match=r"null pointer for x.*NULL_PARAMETER") as info:
        e.forward(y.data_ptr(), 0, w.data_ptr(), None, 2, 3, 4, "float32", 0, False)
    assert isinstance(info.value, errors.NullParameterError)
    with pytest.raises(ValueError, match="dtype is 'float64'"):
        e.forward(y.data_ptr(), x.data_ptr(), w.data_ptr(), None, 2, 3, 4, "float64", 0, False)
    with pytest.raises(ValueError, match="m is -1"):
        e.backward_dx(x.data_ptr(), y.data_ptr(), w.data_ptr(), -1, 3, 4, "f32", 0, False)
    with pytest.raises(TypeError, match="tensor_cores is 1"):
        e.backward_dw(w.data_ptr(), y.data_ptr(), x.data_ptr(), 2, 3, 4, "f32", 0, 1)
    with pytest.raises(TypeError, match="missing 1 required positional argument: 'dtype'"):
        e.forward(y.data_ptr(), x.data_ptr(), w.data_ptr(), None, 2, 3, 4)
    e.close()


def test_an_integer_engine_is_that_cuda_device() -> None:
    try:
        e = Engine(0)
    except RuntimeError as err:  # no driver, or no device 0
        assert isinstance(err, (errors.NoDriverError, errors.NoDeviceError)), err
    else:
        assert e.device == "cuda:0"
        e.close()


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["f32", "bfloat16", "half"])
@pytest.mark.parametrize("tensor_cores", [False, True])
def test_engine_01_forms_on_the_gpu(dtype: str, tensor_cores: bool, gen) -> None:
    e = Engine(0)
    try:
        if tensor_cores and dtype == "f32":
            with pytest.raises(errors.UnsupportedDtypeError):
                engine_01_round(e, dtype, "cuda", gen, tensor_cores)
            return
        if tensor_cores and not e.supports("tensor_cores"):
            with pytest.raises(errors.TierUnavailableError):
                engine_01_round(e, dtype, "cuda", gen, tensor_cores)
            return
        m, k, n = 70, 130, 40
        gpu = engine_01_round(e, dtype, "cuda", gen, tensor_cores, m, k, n)
        if not tensor_cores:  # the scalar tier: the CPU backend's bits
            cpu = engine_01_round(Engine("cpu"), dtype, "cpu", gen.manual_seed(1234), False,
                                  m, k, n)
            for name in gpu:
                assert_same_bits(gpu[name].cpu(), cpu[name], f"{name} GPU vs CPU, {dtype}")
    finally:
        e.close()


# -- tensor_cores= wherever tier= is ---------------------------------------------------------


def test_tensor_cores_false_is_the_scalar_tier(gen) -> None:
    a, b = rand((5, 7), torch.float32, gen), rand((7, 3), torch.float32, gen)
    bias = rand((3,), torch.float32, gen)
    want = sgemm_bi.matmul(a, b, bias, tier="scalar")
    assert_same_bits(sgemm_bi.matmul(a, b, bias, tensor_cores=False), want, "matmul")
    assert_same_bits(sgemm_bi.linear(a, b.t(), bias, tensor_cores=False), want, "linear")
    assert_same_bits(sgemm_bi.deterministic_linear(a, b, bias), want, "deterministic_linear")

    layer = sgemm_bi.Linear(7, 3, tensor_cores=False)
    assert layer.tier == "scalar" and type(layer.tier) is str
    with torch.no_grad():
        layer.weight.copy_(b.t())
        layer.bias.copy_(bias)
    assert_same_bits(layer(a).detach(), want, "Linear")
    torch_layer = nn.Linear(7, 3)
    assert sgemm_bi.Linear.from_torch(torch_layer, tensor_cores=False).tier == "scalar"
    assert sgemm_bi.Linear.from_torch(torch_layer, tensor_cores=True).tier == "tensor_cores"
    assert sgemm_bi.Linear(7, 3, tensor_cores=True).tier == "tensor_cores"
    assert sgemm_bi.Linear(7, 3).tier == "auto"

    with sgemm_bi.mode(tensor_cores=False):
        assert sgemm_bi.is_enabled()
        assert_same_bits(torch.addmm(bias, a, b), want, "mode")
    sgemm_bi.enable(tensor_cores=False)
    try:
        assert_same_bits(torch.nn.functional.linear(a, b.t(), bias), want, "enable")
    finally:
        sgemm_bi.disable()


def test_tensor_cores_true_is_the_tensor_core_tier(gen) -> None:
    """0.1's ``tensor_cores=True`` is the tensor-core tier in every form (on the CPU, the
    sm_90 model of it)."""
    a, b = rand((4, 6), torch.bfloat16, gen), rand((6, 3), torch.bfloat16, gen)
    want = sgemm_bi.matmul(a, b, tier="tensor_cores")
    calls = {
        "matmul": lambda: sgemm_bi.matmul(a, b, tensor_cores=True),
        "linear": lambda: sgemm_bi.linear(a, b.t(), tensor_cores=True),
        "deterministic_linear": lambda: sgemm_bi.deterministic_linear(a, b, tensor_cores=True),
        "deterministic_linear positional": lambda: sgemm_bi.deterministic_linear(a, b, None, True),
    }
    for name, call in calls.items():
        assert_same_bits(call(), want, name)
    layer = sgemm_bi.Linear(6, 3, dtype=torch.bfloat16, tensor_cores=True)
    assert_same_bits(layer(a), sgemm_bi.linear(a, layer.weight, layer.bias, tier="tensor_cores"),
                     "Linear(tensor_cores=True)")
    with sgemm_bi.mode(tensor_cores=True):
        got = a @ b
    assert_same_bits(got, want, "mode(tensor_cores=True)")
    with pytest.raises(errors.UnsupportedDtypeError, match="use the scalar tier for f32"):
        sgemm_bi.matmul(a.float(), b.float(), tensor_cores=True)


def test_tier_and_tensor_cores_together_is_an_error() -> None:
    a, b = torch.ones(2, 2), torch.ones(2, 2)
    calls = [
        lambda: sgemm_bi.matmul(a, b, tier="scalar", tensor_cores=False),
        lambda: sgemm_bi.matmul(a, b, tier="auto", tensor_cores=True),  # even the default
        lambda: sgemm_bi.linear(a, b, tier="tensor_cores", tensor_cores=True),
        lambda: sgemm_bi.Linear(2, 2, tier="scalar", tensor_cores=False),
        lambda: sgemm_bi.Linear.from_torch(nn.Linear(2, 2), tier="scalar", tensor_cores=True),
        lambda: sgemm_bi.mode("scalar", tensor_cores=False).__enter__(),
        lambda: sgemm_bi.enable("auto", tensor_cores=False),
    ]
    for call in calls:
        with pytest.raises(TypeError, match="were both given: pass one of them"):
            call()
    assert not sgemm_bi.is_enabled()
    for bad in (1, "yes"):
        with pytest.raises(TypeError, match="tensor_cores is"):
            sgemm_bi.matmul(a, b, tensor_cores=bad)
        with pytest.raises(TypeError, match="tensor_cores is"):
            sgemm_bi.deterministic_linear(a, b, None, bad)


# -- deterministic_linear beyond the README ----------------------------------------------------


def test_deterministic_linear_shapes_and_dtypes(gen) -> None:
    w = rand((6, 4), torch.bfloat16, gen)  # [in, out]
    bias = rand((4,), torch.float32, gen)
    x = rand((2, 3, 6), torch.bfloat16, gen)
    y = sgemm_bi.deterministic_linear(x, w, bias)
    assert y.shape == (2, 3, 4) and y.dtype == torch.bfloat16
    assert_same_bits(y, sgemm_bi.matmul(x, w, bias, tier="scalar"), "batched x")
    # Batch invariance: each row alone gives the row's bits.
    assert_same_bits(sgemm_bi.deterministic_linear(x[1, 2:], w, bias), y[1, 2:], "one row")
    with pytest.raises(ValueError, match=r"weight has shape \[2, 6, 4\]: it must be "
                                         r"\[in_features, out_features\]"):
        sgemm_bi.deterministic_linear(x, w.expand(2, 6, 4), bias)
    with pytest.raises(ValueError, match=r"last dimension of x must equal in_features \(4\)"):
        sgemm_bi.deterministic_linear(x, w.t(), bias)
    with pytest.raises(TypeError, match="weight must be a torch.Tensor"):
        sgemm_bi.deterministic_linear(x, [[1.0]])
