"""The mode as aten kernel registrations (sgemm_bi.dispatch, sgemm_bi.routes): what is
routed, that everything else is torch's own kernel with torch's bits and errors, that
disable() gives torch its kernels back, nesting, threads, and errors in the mode's calls."""

from __future__ import annotations

import threading
import warnings

import pytest
import torch
import torch.nn.functional as F
from reference import Launches, assert_same_bits, gemm_ref, rand
from torch import nn

import sgemm_bi
from sgemm_bi import dispatch, plan


@pytest.fixture
def launches(monkeypatch) -> list[int]:
    """Counts engine launches (every torch-layer call ends in sgemm_bi.plan.launch)."""
    seen = Launches(1)
    original = plan.launch

    def spy(*args, **kwargs):  # type: ignore[no-untyped-def]
        seen.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(plan, "launch", spy)
    return seen


@pytest.fixture(autouse=True)
def mode_off():
    """Every test starts and ends with the mode off (a failure must not leak it)."""
    assert not sgemm_bi.is_enabled()
    yield
    sgemm_bi.disable()
    assert not sgemm_bi.is_enabled(), "a mode() block was left open"


def _dispatch_table(op: str) -> str | None:
    """The dispatcher's registrations of ``op`` (to see ours come and go), where this torch
    can print them."""
    dump = getattr(torch._C, "_dispatch_dump", None)
    return None if dump is None else dump(f"aten::{op}")


def test_routes_mm_addmm_bmm_baddbmm_and_out_forms(launches, gen) -> None:
    a, b = rand((5, 7), torch.float32, gen), rand((7, 3), torch.float32, gen)
    bias = rand((3,), torch.float32, gen)
    out = torch.empty(5, 3)
    ptr = out.data_ptr()
    with sgemm_bi.mode(tier="scalar"):
        torch.mm(a, b, out=out)
        got_addmm_out = torch.addmm(bias, a, b, out=torch.empty(0))
        got_bmm = torch.bmm(a[None], b[None])
    assert len(launches) == 3
    assert out.data_ptr() == ptr, "a contiguous out= of the right shape is written in place"
    assert_same_bits(out, gemm_ref(a, b), "mm(out=)")
    assert_same_bits(got_addmm_out, gemm_ref(a, b, bias), "addmm(out=) with a bias")
    assert_same_bits(got_bmm[0], gemm_ref(a, b), "bmm")


def test_unrouted_ops_are_torch_s_own(launches, gen) -> None:
    """Bits and errors of everything the mode does not take are torch's."""
    a64, b64 = rand((4, 5), torch.float64, gen), rand((5, 3), torch.float64, gen)
    x, y = rand((4, 5), torch.float32, gen), rand((5,), torch.float32, gen)
    ints = torch.arange(6).reshape(2, 3)
    c64 = rand((4, 3), torch.float64, gen)
    plain = (a64 @ b64, torch.mv(x, y), x + 1, ints @ ints.t(), torch.addmm(c64, a64, b64))

    def errors() -> list[str]:
        msgs = []
        for bad in (lambda: torch.mm(x, b64), lambda: torch.mm(x, x),
                    lambda: torch.addmm(b64[0], x, x.t()), lambda: torch.bmm(x, x),
                    # a bias vector of the inputs' dtype: the native op is asked first and
                    # refuses (the shapes do not multiply), then torch's kernel raises
                    lambda: torch.addmm(x[0], x, x),
                    lambda: F.linear(x, x.bfloat16())):
            with pytest.raises(RuntimeError) as e:
                bad()
            msgs.append(str(e.value))
        return msgs

    plain_errors = errors()
    with sgemm_bi.mode():
        assert sgemm_bi.is_enabled()
        routed = (a64 @ b64, torch.mv(x, y), x + 1, ints @ ints.t(),
                  torch.addmm(c64, a64, b64))
        mode_errors = errors()
    assert launches == []
    for p, r in zip(plain, routed):
        assert torch.equal(p, r)
    assert mode_errors == plain_errors


def test_disable_gives_torch_its_kernels_back(launches, gen) -> None:
    a, b = rand((4, 4), torch.float32, gen), rand((4, 4), torch.float32, gen)
    before = torch.mm(a, b)
    table = _dispatch_table("mm")
    sgemm_bi.enable("scalar")
    assert dispatch._library is not None
    assert_same_bits(torch.mm(a, b), gemm_ref(a, b), "enabled")
    if table is not None:
        assert _dispatch_table("mm") != table
    sgemm_bi.disable()
    assert dispatch._library is None and not sgemm_bi.is_enabled()
    assert torch.equal(torch.mm(a, b), before)
    if table is not None:
        assert _dispatch_table("mm") == table, "the dispatch table is torch's again"
    assert len(launches) == 1


def test_nesting_uses_the_innermost_tier(gen) -> None:
    a = rand((4, 16), torch.bfloat16, gen)
    b = rand((16, 4), torch.bfloat16, gen)
    scalar = sgemm_bi.matmul(a, b, tier="scalar")
    tc = sgemm_bi.matmul(a, b, tier="tensor_cores")
    with sgemm_bi.mode("tensor_cores"):
        assert_same_bits(a @ b, tc, "outer")
        with sgemm_bi.mode("scalar"):
            assert dispatch.active_tier() == "scalar"
            assert_same_bits(a @ b, scalar, "inner")
            sgemm_bi.enable("tensor_cores")  # entered last: its tier now
            assert_same_bits(a @ b, tc, "enable inside")
            sgemm_bi.disable()
            assert_same_bits(a @ b, scalar, "after disable: the inner block again")
        assert dispatch.active_tier() == "tensor_cores"
        assert_same_bits(a @ b, tc, "outer again")
        sgemm_bi.disable()  # no enable() active: the block stays
        assert sgemm_bi.is_enabled()
    assert not sgemm_bi.is_enabled() and dispatch.active_tier() is None


def test_enable_replaces_its_tier_and_disable_leaves_blocks(gen) -> None:
    sgemm_bi.enable("scalar")
    with sgemm_bi.mode("tensor_cores"):
        sgemm_bi.enable("auto")  # replaces enable()'s entry in place: the block is innermost
        assert dispatch.active_tier() == "tensor_cores"
    assert dispatch.active_tier() == "auto"
    sgemm_bi.disable()
    assert not sgemm_bi.is_enabled()


def test_an_exception_in_a_block_ends_it() -> None:
    with pytest.raises(KeyError):
        with sgemm_bi.mode():
            raise KeyError("out")
    assert not sgemm_bi.is_enabled()


def test_bad_arguments_change_nothing() -> None:
    with pytest.raises(ValueError, match="tier is 'gpu'"):
        sgemm_bi.enable("gpu")
    with pytest.raises(TypeError, match="both given"):
        sgemm_bi.enable("scalar", tensor_cores=True)
    with pytest.raises(ValueError, match="tier is 'gpu'"):
        with sgemm_bi.mode("gpu"):
            pass
    assert not sgemm_bi.is_enabled() and dispatch._entries == []


def test_the_mode_is_process_wide(launches, gen) -> None:
    """Registrations belong to the process: a block on one thread routes another's."""
    a = rand((3, 3), torch.float32, gen)
    seen: list[bool] = []
    entered, done = threading.Event(), threading.Event()

    def worker() -> None:
        entered.wait()
        seen.append(sgemm_bi.is_enabled())
        a @ a
        done.set()

    t = threading.Thread(target=worker)
    t.start()
    with sgemm_bi.mode():
        entered.set()
        done.wait(30)
    t.join()
    assert seen == [True] and len(launches) == 1


def test_blocks_on_many_threads(gen) -> None:
    """Blocks entered and left on several threads at once: every matmul inside one is the
    engine's, and the last exit turns the mode off."""
    a, b = rand((4, 6), torch.float32, gen), rand((6, 3), torch.float32, gen)
    want = sgemm_bi.matmul(a, b, tier="scalar")
    failures: list[str] = []

    def worker() -> None:
        for _ in range(20):
            with sgemm_bi.mode("scalar"):
                if not torch.equal(a @ b, want):
                    failures.append("a matmul inside a block was not the engine's")

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == [] and not sgemm_bi.is_enabled()


def test_linear_under_inference_mode_takes_the_bias_path(launches, gen) -> None:
    """No autograd key under inference_mode: linear decomposes into addmm with the bias,
    which the addmm route passes to the engine — the bits of sgemm_bi.linear."""
    layer = nn.Linear(6, 4)
    x = rand((2, 3, 6), torch.float32, gen)
    want = sgemm_bi.linear(x, layer.weight.detach(), layer.bias.detach(), tier="scalar")
    with torch.inference_mode(), sgemm_bi.mode("scalar"):
        got = layer(x)
    assert_same_bits(got, want, "inference_mode")
    assert len(launches) == 2  # want's call and the routed one


def test_linear_gradients_are_the_engine_s_under_the_mode(gen) -> None:
    """With bias_grad="engine", F.linear on a 3-D input with a bias (which aten::linear
    would fold into addmm) runs sgemm_bi.linear: the bias gradient is the engine's column
    sum."""
    layer = nn.Linear(6, 4).bfloat16()
    x = rand((2, 5, 6), torch.bfloat16, gen).requires_grad_()
    dy = rand((2, 5, 4), torch.bfloat16, gen)
    with sgemm_bi.mode("scalar", bias_grad="engine"):
        y = layer(x)
        y.backward(dy)
    grads = [t.grad.clone() for t in (x, layer.weight, layer.bias)]
    for t in (x, layer.weight, layer.bias):
        t.grad = None
    ref = sgemm_bi.linear(x, layer.weight, layer.bias, tier="scalar")
    ref.backward(dy)
    assert_same_bits(y, ref, "forward")
    for got, t in zip(grads, (x, layer.weight, layer.bias)):
        assert_same_bits(got, t.grad, "gradient")


def test_torch_compile_under_the_mode_routes_the_compiled_code(launches, gen) -> None:
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
    x = rand((6, 8), torch.float32, gen)
    compiled = torch.compile(model, backend="aot_eager")
    with sgemm_bi.mode(tier="scalar"):
        eager = model(x)
        n = len(launches)
        got = compiled(x)
    assert len(launches) > n, "the compiled graph's matmuls ran on the engine"
    assert_same_bits(got, eager, "compiled")


def test_a_small_llama_is_batch_invariant_under_the_mode() -> None:
    """The check of the benchmark, at a tiny size: a prompt's logits alone and in a batch
    of 8 are bit-identical under the mode (eager attention: its matmuls are routed)."""
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    config = transformers.LlamaConfig(
        vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    config._attn_implementation = "eager"
    model = transformers.LlamaForCausalLM(config).eval()
    ids = torch.randint(0, 128, (8, 12), generator=torch.Generator().manual_seed(1))
    with torch.no_grad(), sgemm_bi.mode():
        alone = model(ids[:1]).logits
        batch = model(ids).logits
    assert_same_bits(alone[0], batch[0], "logits alone vs in a batch of 8")


def test_a_backend_torch_was_built_without_gets_no_kernels(monkeypatch, gen) -> None:
    """A CPU-only torch has no CUDA kernels to fall back to: the mode registers the CPU key
    alone and works."""
    from sgemm_bi import routes

    real = torch.library.get_kernel

    def cpu_only(op, key):  # type: ignore[no-untyped-def]
        if "CUDA" in str(key):
            raise RuntimeError(f"no kernel for {key} for {op}")
        return real(op, key)

    monkeypatch.setattr(torch.library, "get_kernel", cpu_only)
    assert {key for _, key, _ in routes.kernels()} == {"CPU"}
    assert {key for _, key, _ in routes.kernels(linear=True)} == {"CPU", "AutogradCPU"}
    a, b = rand((3, 4), torch.float32, gen), rand((4, 2), torch.float32, gen)
    with sgemm_bi.mode("scalar"):
        assert_same_bits(a @ b, gemm_ref(a, b), "CPU key only")


@pytest.mark.skipif(not sgemm_bi.native.available(), reason="no native kernels here")
def test_cpu_mm_and_bmm_run_natively_with_torch_s_fallbacks_and_errors(monkeypatch,
                                                                       gen) -> None:
    """On Linux the mode's CPU mm and bmm are libsgemm_bi's own kernels: no Python route
    runs (plan.launch is never called), the bits are the engine's, other dtypes get
    torch's kernel, and torch's checks raise torch's errors through the native kernel."""
    from sgemm_bi import native

    calls: list[int] = []
    original = plan.launch
    monkeypatch.setattr(plan, "launch", lambda *a, **k: (calls.append(1), original(*a, **k)))
    a, b = rand((5, 7), torch.float32, gen), rand((7, 3), torch.float32, gen)
    a3, b3 = rand((2, 5, 7), torch.bfloat16, gen), rand((2, 7, 3), torch.bfloat16, gen)
    before = native.engine_calls()
    with sgemm_bi.mode("scalar"):
        assert dispatch._native
        got_mm, got_bmm = a @ b, torch.bmm(a3, b3)
        got_t = torch.mm(a.t().contiguous().t(), b)  # column-major A, read in place
        got_f64 = torch.mm(a.double(), b.double())
        with pytest.raises(RuntimeError, match=r"shapes cannot be multiplied \(5x7 and 5x7\)"):
            torch.mm(a, a)
        with pytest.raises(RuntimeError):
            torch.mm(a, b.double())
    assert calls == [] and native.engine_calls() - before == 3
    assert_same_bits(got_mm, gemm_ref(a, b), "mm")
    assert_same_bits(got_t, gemm_ref(a, b), "mm of a column-major A")
    for i in range(2):
        assert_same_bits(got_bmm[i], gemm_ref(a3[i], b3[i]), "bmm")
    assert_same_bits(got_f64, torch.mm(a.double(), b.double()), "float64: torch's kernel")
    assert not dispatch._native  # uninstalled with the mode


@pytest.mark.skipif(not sgemm_bi.native.available(), reason="no native kernels here")
def test_addmm_s_bias_path_is_native_and_the_rest_stays_python(monkeypatch, gen) -> None:
    """addmm with beta = alpha = 1 and a bias vector (F.linear with a bias) ends in the
    native sgemm_bi::addmm_bias, with the bits of the engine's bias epilogue, for a
    contiguous, a strided and a broadcast bias; other beta/alpha take the Python route."""
    from sgemm_bi import native

    calls: list[int] = []
    original = plan.launch
    monkeypatch.setattr(plan, "launch", lambda *a, **k: (calls.append(1), original(*a, **k)))
    x, w = rand((5, 7), torch.float32, gen), rand((3, 7), torch.float32, gen)
    bias = rand((6,), torch.float32, gen)
    before = native.engine_calls()
    with sgemm_bi.mode("scalar"):
        got = [F.linear(x, w, bias[:3]), F.linear(x, w, bias[::2]),
               torch.addmm(bias[:3].expand(5, 3), x, w.t())]
        assert calls == [] and native.engine_calls() - before == 3
        scaled = torch.addmm(bias[:3], x, w.t(), beta=0.5)
        assert len(calls) == 1
    for y, b, what in zip(got, (bias[:3], bias[::2], bias[:3]),
                          ("contiguous bias", "strided bias", "broadcast bias")):
        assert_same_bits(y, gemm_ref(x, w.t(), b), what)
    want = (gemm_ref(x, w.t(), out_dtype=torch.float32) + 0.5 * bias[:3]).to(torch.float32)
    assert_same_bits(scaled, want, "beta = 0.5: the Python route")


def test_a_torch_without_what_the_native_kernels_need_gets_the_python_routes(
        monkeypatch, launches, gen) -> None:
    """If the native kernels cannot be installed (a torch lacking one of their functions),
    the mode warns once and its Python routes serve every key, with the same bits."""
    from sgemm_bi import native

    def refuse(tier: str) -> frozenset[str]:
        raise RuntimeError("sgemm_bi: the native kernels could not be installed: no symbol")

    monkeypatch.setattr(native, "available", lambda: True)
    monkeypatch.setattr(native, "install", refuse)
    a, b = rand((5, 7), torch.float32, gen), rand((7, 3), torch.float32, gen)
    with pytest.warns(RuntimeWarning, match="uses its Python routes"):
        sgemm_bi.enable("scalar")
    try:
        library = dispatch._library
        assert dispatch._native == frozenset()
        got = a @ b
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            sgemm_bi.enable("auto")  # a new tier only: nothing re-registered, no warning
        assert dispatch._library is library
    finally:
        sgemm_bi.disable()
    assert_same_bits(got, gemm_ref(a, b), "mm through the Python route")
    assert len(launches) == 1


def test_without_native_kernels_the_python_routes_serve_the_cpu(monkeypatch, launches,
                                                                gen) -> None:
    """SGEMM_BI_NATIVE=0 (and tier="tensor_cores", whose f32 errors are typed) keep the
    Python routes on the CPU key: the same bits."""
    monkeypatch.setenv("SGEMM_BI_NATIVE", "0")
    a, b = rand((5, 7), torch.float32, gen), rand((7, 3), torch.float32, gen)
    with sgemm_bi.mode("scalar"):
        assert not dispatch._native
        got = a @ b
    assert_same_bits(got, gemm_ref(a, b), "mm through the Python route")
    assert len(launches) == 1


@pytest.mark.skipif(not sgemm_bi.native.available(), reason="no native kernels here")
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_native_kernels_give_the_contract_bits_at_every_shape_and_layout(dtype, gen) -> None:
    """Empty and one-element shapes, both layouts of each operand, a strided slice (copied:
    it fits no layout) and a batch broadcast from one matrix (stride 0), all on the
    native kernels, all the scalar contract's bits."""
    from sgemm_bi import native

    before = native.engine_calls()
    cases = 0
    with sgemm_bi.mode("scalar"):
        for m, k, n in [(0, 3, 4), (3, 0, 4), (3, 4, 0), (1, 1, 1), (5, 7, 3), (17, 33, 9)]:
            a, b = rand((m, k), dtype, gen), rand((k, n), dtype, gen)
            for col_a in (False, True):
                for col_b in (False, True):
                    aa = a.t().contiguous().t() if col_a else a
                    bb = b.t().contiguous().t() if col_b else b
                    assert_same_bits(aa @ bb, gemm_ref(a, b), f"{m}x{k}x{n} {col_a} {col_b}")
                    cases += 1
            if m > 1 and k > 1:
                sliced = rand((m, 2 * k), dtype, gen)[:, ::2]
                assert_same_bits(sliced @ b, gemm_ref(sliced.contiguous(), b), "a slice")
                cases += 1
            a3 = rand((3, m, k), dtype, gen)
            b1 = rand((1, k, n), dtype, gen).expand(3, k, n)
            got = torch.bmm(a3, b1)
            cases += 1
            for i in range(3):
                assert_same_bits(got[i], gemm_ref(a3[i], b1[i].contiguous()), "broadcast B")
    assert native.engine_calls() - before == cases


@pytest.mark.gpu
@pytest.mark.skipif(not sgemm_bi.native.available(), reason="no native kernels here")
def test_cuda_mm_and_bmm_run_natively_with_torch_s_fallbacks_and_errors(monkeypatch,
                                                                        gen) -> None:
    """On a GPU the mode's CUDA mm and bmm are libsgemm_bi's own kernels too: no Python
    route runs, auto picks tensor cores for bf16 (the bits of sgemm_bi.matmul) and the
    scalar tier for f32 (the CPU's bits), float64 gets torch's kernel, and torch's checks
    raise torch's errors, word for word."""
    from sgemm_bi import native

    cuda = torch.device("cuda")
    calls: list[int] = []
    original = plan.launch
    a, b = rand((65, 96), torch.bfloat16, gen), rand((96, 40), torch.bfloat16, gen)
    a3, b3 = rand((3, 17, 32), torch.bfloat16, gen), rand((3, 32, 24), torch.bfloat16, gen)
    f, g = rand((9, 33), torch.float32, gen), rand((33, 7), torch.float32, gen)
    ga, gb, ga3, gb3, gf, gg = (t.to(cuda) for t in (a, b, a3, b3, f, g))
    want_mm, want_bmm = sgemm_bi.matmul(ga, gb), sgemm_bi.matmul(ga3, gb3)
    want_col = sgemm_bi.matmul(ga.t().contiguous().t(), gb)

    def errors() -> list[str]:
        msgs = []
        for bad in (lambda: torch.mm(ga, ga), lambda: torch.mm(ga, gb.float()),
                    lambda: torch.bmm(ga, gb), lambda: torch.mm(ga, b)):
            with pytest.raises(RuntimeError) as e:
                bad()
            msgs.append(str(e.value))
        return msgs

    plain_errors = errors()
    monkeypatch.setattr(plan, "launch", lambda *a, **k: (calls.append(1), original(*a, **k)))
    before = native.engine_calls()
    with sgemm_bi.mode():
        assert dispatch._native == frozenset({"CPU", "CUDA"})
        got = [ga @ gb, torch.bmm(ga3, gb3), torch.mm(ga.t().contiguous().t(), gb), gf @ gg]
        got_f64 = torch.mm(gf.double(), gg.double())
        mode_errors = errors()
    assert calls == [] and native.engine_calls() - before == 4
    assert_same_bits(got[0], want_mm, "mm, bf16, auto: tensor cores")
    assert_same_bits(got[1], want_bmm, "bmm, bf16, auto: tensor cores")
    assert_same_bits(got[2], want_col, "mm of a column-major A")
    assert_same_bits(got[3].cpu(), gemm_ref(f, g), "mm, f32, auto: the scalar tier")
    assert_same_bits(got_f64, torch.mm(gf.double(), gg.double()), "float64: torch's kernel")
    assert mode_errors == plain_errors
    with sgemm_bi.mode("scalar"):
        got_scalar = ga @ gb
    assert_same_bits(got_scalar.cpu(), gemm_ref(a, b), "mm, bf16, scalar: the CPU's bits")


@pytest.mark.gpu
@pytest.mark.skipif(not sgemm_bi.native.available(), reason="no native kernels here")
def test_native_cuda_kernels_run_on_torch_s_current_stream_and_in_graphs(gen) -> None:
    """A native call is ordered after the work already on the current stream (a side
    stream here, busy for a while before it overwrites the operand), and a CUDA graph
    captured under the mode replays it on new data."""
    cuda = torch.device("cuda")
    a, b = rand((64, 128), torch.bfloat16, gen).to(cuda), rand((128, 64), torch.bfloat16,
                                                                gen).to(cuda)
    a2 = rand((64, 128), torch.bfloat16, gen).to(cuda)
    want = sgemm_bi.matmul(a2, b)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with sgemm_bi.mode():
        with torch.cuda.stream(side):
            torch.cuda._sleep(50_000_000)  # ~tens of ms of GPU time on this stream
            a.copy_(a2)
            got = a @ b
        side.synchronize()
        assert_same_bits(got, want, "after the side stream's copy")

        static_a = a.clone()
        graph = torch.cuda.CUDAGraph()
        warm = torch.cuda.Stream()
        warm.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(warm):
            static_a @ b
        torch.cuda.current_stream().wait_stream(warm)
        with torch.cuda.graph(graph):
            static_y = static_a @ b
        static_a.copy_(a2 * 2)
        graph.replay()
        torch.cuda.synchronize()
    assert_same_bits(static_y, sgemm_bi.matmul(a2 * 2, b), "graph replay")
