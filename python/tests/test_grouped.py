"""``sgemm_bi.grouped_mm``: every group's part of the result has the bits of the dense
``sgemm_bi.matmul`` of that part with the group's operand, in all four forms, forward and
backward; a token keeps its bits whatever the other tokens are routed to; bad input is a
typed error; the mode routes ``F.grouped_mm``. The GPU tests check the same on the H200, with
offsets on the device, against the CPU's bits."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import sgemm_bi
from sgemm_bi.errors import BadOffsetsError

CASES = [
    (torch.float32, "scalar"),
    (torch.bfloat16, "scalar"),
    (torch.bfloat16, "tensor_cores"),
    (torch.float16, "tensor_cores"),
]


def bits(t: torch.Tensor) -> torch.Tensor:
    return t.contiguous().view(torch.int16 if t.element_size() == 2 else torch.int32)


def same_bits(got: torch.Tensor, want: torch.Tensor, what: str = "") -> None:
    assert got.shape == want.shape and got.dtype == want.dtype, what
    assert torch.equal(bits(got), bits(want)), what


def routing(gen: torch.Generator, groups: int, total: int, uneven: bool = True) -> torch.Tensor:
    """Cumulative int32 group ends for ``total`` items (Zipf-like when ``uneven``; some
    groups empty)."""
    weights = 1.0 / torch.arange(1, groups + 1, dtype=torch.float64) if uneven else (
        torch.ones(groups, dtype=torch.float64))
    picks = torch.multinomial(weights, total, replacement=True, generator=gen)
    sizes = torch.bincount(picks, minlength=groups)
    return sizes.cumsum(0).to(torch.int32)


def ranges(offs: torch.Tensor) -> list[tuple[int, int]]:
    ends = offs.tolist()
    return list(zip([0] + ends[:-1], ends))


def rand(gen: torch.Generator, *shape: int, dtype: torch.dtype) -> torch.Tensor:
    return torch.randn(*shape, generator=gen).to(dtype)


@pytest.mark.parametrize("dtype,tier", CASES)
def test_experts_forward_is_the_dense_call_of_each_group(gen, dtype, tier) -> None:
    tokens, k, n, groups = 70, 48, 40, 6
    x = rand(gen, tokens, k, dtype=dtype)
    w = rand(gen, groups, n, k, dtype=dtype)  # torch's [G, N, K] expert weights
    bias = rand(gen, groups, n, dtype=torch.float32)
    offs = routing(gen, groups, tokens - 3)  # three tokens routed nowhere
    out = sgemm_bi.grouped_mm(x, w.transpose(-2, -1), offs=offs, bias=bias, tier=tier)
    for g, (s, e) in enumerate(ranges(offs)):
        want = sgemm_bi.linear(x[s:e], w[g], bias[g], tier=tier) if e > s else None
        if want is not None:
            same_bits(out[s:e], want, f"group {g}")
    assert torch.equal(bits(out[int(offs[-1]):]), torch.zeros_like(bits(out[int(offs[-1]):])))


@pytest.mark.parametrize("dtype,tier", CASES)
def test_the_other_forms_are_the_dense_calls_of_each_group(gen, dtype, tier) -> None:
    m, k, t, groups = 9, 20, 50, 4
    offs = routing(gen, groups, t)
    # 2-D x 2-D: the reduction is split (the experts' weight gradient).
    a, b = rand(gen, m, t, dtype=dtype), rand(gen, t, k, dtype=dtype)
    out = sgemm_bi.grouped_mm(a, b, offs=offs, tier=tier)
    assert out.shape == (groups, m, k)
    for g, (s, e) in enumerate(ranges(offs)):
        same_bits(out[g], sgemm_bi.matmul(a[:, s:e], b[s:e], tier=tier), f"2-D x 2-D group {g}")
    # 3-D x 2-D: the columns are split.
    a3, b2 = rand(gen, groups, m, k, dtype=dtype), rand(gen, k, t, dtype=dtype)
    out = sgemm_bi.grouped_mm(a3, b2, offs=offs, tier=tier)
    for g, (s, e) in enumerate(ranges(offs)):
        same_bits(out[:, s:e], sgemm_bi.matmul(a3[g], b2[:, s:e], tier=tier), f"3-D x 2-D {g}")
    # 3-D x 3-D: the groups are the batch.
    b3 = rand(gen, groups, k, m, dtype=dtype)
    same_bits(sgemm_bi.grouped_mm(a3, b3, tier=tier), sgemm_bi.matmul(a3, b3, tier=tier))


@pytest.mark.parametrize("dtype,tier", CASES)
def test_a_token_keeps_its_bits_whatever_the_routing_of_the_others(gen, dtype, tier) -> None:
    k, n, groups = 64, 32, 8
    w = rand(gen, groups, k, n, dtype=dtype)
    token = rand(gen, 1, k, dtype=dtype)
    for expert in (0, 5):
        alone_offs = torch.tensor([0] * expert + [1] * (groups - expert), dtype=torch.int32)
        alone = sgemm_bi.grouped_mm(token, w, offs=alone_offs, tier=tier)
        for tokens in (17, 300):
            x = rand(gen, tokens, k, dtype=dtype)
            offs = routing(gen, groups, tokens)
            s, e = ranges(offs)[expert]
            if e == s:
                continue
            row = s + int(torch.randint(e - s, (1,), generator=gen))
            x[row] = token[0]
            out = sgemm_bi.grouped_mm(x, w, offs=offs, tier=tier)
            same_bits(out[row:row + 1], alone, f"expert {expert}, {tokens} tokens")


@pytest.mark.parametrize("dtype,tier", CASES[::2])
def test_gradients_are_the_dense_gradients_of_each_group(gen, dtype, tier) -> None:
    tokens, k, n, groups = 40, 24, 16, 5
    offs = routing(gen, groups, tokens)
    x = rand(gen, tokens, k, dtype=dtype).requires_grad_()
    w = rand(gen, groups, k, n, dtype=dtype).requires_grad_()
    bias = rand(gen, groups, n, dtype=dtype).requires_grad_()
    dy = rand(gen, tokens, n, dtype=dtype)
    sgemm_bi.grouped_mm(x, w, offs=offs, bias=bias, tier=tier).backward(dy)
    for g, (s, e) in enumerate(ranges(offs)):
        xg = x.detach()[s:e].clone().requires_grad_()
        wg = w.detach()[g].clone().requires_grad_()
        bg = bias.detach()[g].clone().requires_grad_()
        sgemm_bi.matmul(xg, wg, bg, tier=tier).backward(dy[s:e])
        same_bits(x.grad[s:e], xg.grad, f"dx of group {g}")
        same_bits(w.grad[g], wg.grad, f"dw of group {g}")
        same_bits(bias.grad[g], bg.grad, f"dbias of group {g}")


def test_gradients_of_every_form_match_torch_closely(gen) -> None:
    """The formulas are right (against torch's own grouped_mm where it exists, else dense
    per-group torch matmuls), in f32 on the scalar tier."""
    t, m, k, groups = 30, 7, 11, 3
    offs = routing(gen, groups, t)

    def reference(a, b):
        if a.dim() == 2 and b.dim() == 3:
            return torch.cat([a[s:e] @ b[g] for g, (s, e) in enumerate(ranges(offs))]
                             + [a[int(offs[-1]):] @ b[0] * 0])
        if a.dim() == 2 and b.dim() == 2:
            return torch.stack([a[:, s:e] @ b[s:e] for s, e in ranges(offs)])
        return torch.cat([a[g] @ b[:, s:e] for g, (s, e) in enumerate(ranges(offs))]
                         + [a[0] @ b[:, int(offs[-1]):] * 0], dim=1)

    for shape_a, shape_b in (((t, k), (groups, k, m)), ((m, t), (t, k)), ((groups, m, k), (k, t))):
        a = torch.randn(*shape_a, generator=gen, requires_grad=True)
        b = torch.randn(*shape_b, generator=gen, requires_grad=True)
        out = sgemm_bi.grouped_mm(a, b, offs=offs, tier="scalar")
        ra, rb = a.detach().clone().requires_grad_(), b.detach().clone().requires_grad_()
        ref = reference(ra, rb)
        torch.testing.assert_close(out, ref)
        grad = torch.randn(out.shape, generator=gen)
        out.backward(grad)
        ref.backward(grad)
        torch.testing.assert_close(a.grad, ra.grad)
        torch.testing.assert_close(b.grad, rb.grad)


def test_bad_input_is_a_typed_error(gen) -> None:
    x, w = rand(gen, 10, 4, dtype=torch.float32), rand(gen, 3, 4, 5, dtype=torch.float32)
    ok = torch.tensor([2, 5, 10], dtype=torch.int32)
    with pytest.raises(BadOffsetsError, match="group 1"):
        sgemm_bi.grouped_mm(x, w, offs=torch.tensor([5, 2, 10], dtype=torch.int32))
    with pytest.raises(BadOffsetsError, match="past the end"):
        sgemm_bi.grouped_mm(x, w, offs=torch.tensor([2, 5, 11], dtype=torch.int32))
    with pytest.raises(TypeError, match="int32"):
        sgemm_bi.grouped_mm(x, w, offs=ok.to(torch.int64))
    with pytest.raises(TypeError, match="offs is required"):
        sgemm_bi.grouped_mm(x, w)
    with pytest.raises(ValueError, match="3 groups, but offs has 2"):
        sgemm_bi.grouped_mm(x, w, offs=ok[:2])
    with pytest.raises(ValueError, match="takes none"):
        sgemm_bi.grouped_mm(x.t(), x, offs=ok, bias=torch.zeros(4))
    with pytest.raises(ValueError, match=r"expected \[3, 5\]"):
        sgemm_bi.grouped_mm(x, w, offs=ok, bias=torch.zeros(5))
    with pytest.raises(TypeError, match="one dtype"):
        sgemm_bi.grouped_mm(x, w.to(torch.bfloat16), offs=ok)
    with pytest.raises(ValueError, match="tier"):
        sgemm_bi.grouped_mm(x, w, offs=ok, tier="fast")


def test_the_cpu_has_no_device_errors(gen) -> None:
    """The CPU checks every offset before it runs: nothing is ever left to report later."""
    x, w = rand(gen, 10, 4, dtype=torch.float32), rand(gen, 3, 4, 5, dtype=torch.float32)
    with pytest.raises(BadOffsetsError):
        sgemm_bi.grouped_mm(x, w, offs=torch.tensor([5, 2, 10], dtype=torch.int32))
    assert sgemm_bi.check_device_errors("cpu") is None
    assert sgemm_bi.check_device_errors() is None
    with sgemm_bi.Engine("cpu") as e:
        assert e.take_device_error() is None
    assert "check_device_errors" in sgemm_bi.__all__


def test_repeated_calls_keep_the_first_calls_bits_and_checks(gen) -> None:
    """A key's later calls skip the checks and the descriptor (its plan): they must give the
    first call's bits, follow new data in the same tensors' shapes, and still raise for bad
    offsets (checked by the engine, not the plan); transposed or strided operands (copied
    before the call) give the bits of their contiguous copies."""
    from sgemm_bi import grouped

    grouped._plans.clear()
    x, w = rand(gen, 20, 8, dtype=torch.float32), rand(gen, 3, 8, 6, dtype=torch.float32)
    offs = torch.tensor([4, 4, 17], dtype=torch.int32)
    first = sgemm_bi.grouped_mm(x, w, offs=offs, tier="scalar")
    assert len(grouped._plans) == 1
    same_bits(sgemm_bi.grouped_mm(x, w, offs=offs, tier="scalar"), first, "second call")
    x2 = rand(gen, 20, 8, dtype=torch.float32)
    again = sgemm_bi.grouped_mm(x2, w, offs=torch.tensor([1, 9, 20], dtype=torch.int32),
                                tier="scalar")
    grouped._plans.clear()
    same_bits(again, sgemm_bi.grouped_mm(x2, w, offs=torch.tensor([1, 9, 20], dtype=torch.int32),
                                         tier="scalar"), "new data, full way")
    sgemm_bi.grouped_mm(x, w, offs=offs, tier="scalar")
    with pytest.raises(BadOffsetsError, match="group 1"):
        sgemm_bi.grouped_mm(x, w, offs=torch.tensor([5, 2, 10], dtype=torch.int32),
                            tier="scalar")
    w_strided = rand(gen, 3, 6, 8, dtype=torch.float32).transpose(1, 2)[:, :, :6]
    x_strided = rand(gen, 20, 16, dtype=torch.float32)[:, ::2]
    for _ in range(2):  # the full way each time (copies are not cached)
        same_bits(sgemm_bi.grouped_mm(x_strided, w_strided, offs=offs, tier="scalar"),
                  sgemm_bi.grouped_mm(x_strided.contiguous(), w_strided.contiguous(),
                                      offs=offs, tier="scalar"), "strided operands")


def test_eager_calls_and_the_custom_op_agree_to_the_bit(gen) -> None:
    """Eager calls skip the op's dispatch (an autograd function when a gradient is needed):
    forward, first and second derivatives must be the op's bits."""
    from sgemm_bi.grouped import grouped_mm_op

    offs = torch.tensor([3, 3, 10], dtype=torch.int32)
    x = rand(gen, 12, 8, dtype=torch.float32)
    w = rand(gen, 3, 8, 4, dtype=torch.float32)
    bias = rand(gen, 3, 4, dtype=torch.float32)
    dy = rand(gen, 12, 4, dtype=torch.float32)
    results = []
    for call in (lambda *a: sgemm_bi.grouped_mm(*a[:2], offs=a[2], bias=a[3], tier="scalar"),
                 lambda *a: grouped_mm_op(*a, "scalar", None)):
        xs, ws, bs = (t.clone().requires_grad_() for t in (x, w, bias))
        out = call(xs, ws, offs, bs)
        gx, gw = torch.autograd.grad(out, (xs, ws), dy, create_graph=True)
        (gx.square().sum() + gw.square().sum()).backward()
        # dx and dw do not depend on the bias: no second derivative reaches it.
        assert bs.grad is None
        results.append((out, gx, gw, xs.grad, ws.grad))
    for name, got, want in zip(("out", "dx", "dw", "ddx", "ddw"), *results):
        same_bits(got.detach(), want.detach(), name)


def test_the_custom_op_passes_opcheck(gen) -> None:
    from sgemm_bi.grouped import grouped_mm_op

    x = rand(gen, 12, 8, dtype=torch.float32).requires_grad_()
    w = rand(gen, 3, 8, 4, dtype=torch.float32).requires_grad_()
    offs = torch.tensor([3, 3, 10], dtype=torch.int32)
    torch.library.opcheck(grouped_mm_op, (x, w, offs, None, "scalar", None))


def test_torch_compile_traces_it_without_a_graph_break(gen) -> None:
    x = rand(gen, 12, 8, dtype=torch.float32)
    w = rand(gen, 3, 8, 4, dtype=torch.float32)
    offs = torch.tensor([3, 3, 10], dtype=torch.int32)
    fn = torch.compile(lambda x, w, o: sgemm_bi.grouped_mm(x, w, offs=o, tier="scalar"),
                       fullgraph=True, backend="eager")
    same_bits(fn(x, w, offs), sgemm_bi.grouped_mm(x, w, offs=offs, tier="scalar"))


@pytest.mark.skipif(not hasattr(F, "grouped_mm"), reason="this torch has no F.grouped_mm")
def test_the_mode_routes_f_grouped_mm(gen) -> None:
    x = rand(gen, 40, 512, dtype=torch.float32)
    w = rand(gen, 4, 512, 64, dtype=torch.float32)
    offs = torch.tensor([4, 9, 9, 40], dtype=torch.int32)
    want = sgemm_bi.grouped_mm(x, w, offs=offs, tier="scalar")
    try:
        theirs = F.grouped_mm(x, w, offs=offs)
    except (RuntimeError, NotImplementedError) as e:  # a torch without the CPU kernel
        pytest.skip(f"F.grouped_mm on the CPU: {e}")
    # torch's own sums in another order: the check below can tell the routes ran.
    assert not torch.equal(bits(theirs), bits(want))
    with sgemm_bi.mode(tier="scalar"):
        got = F.grouped_mm(x, w, offs=offs)
    same_bits(got, want)
    same_bits(F.grouped_mm(x, w, offs=offs), theirs, "torch's kernel is back after the mode")


# -- on the GPU --------------------------------------------------------------------------------


@pytest.mark.gpu
@pytest.mark.parametrize("dtype,tier", CASES)
def test_gpu_grouped_mm_gives_the_cpu_bits_with_offsets_on_the_device(gen, dtype, tier) -> None:
    tokens, k, n, groups = 300, 256, 192, 16
    x = rand(gen, tokens, k, dtype=dtype)
    w = rand(gen, groups, n, k, dtype=dtype)
    offs = routing(gen, groups, tokens - 5)
    cpu = sgemm_bi.grouped_mm(x, w.transpose(-2, -1), offs=offs, tier=tier)
    dev = torch.device("cuda")
    gpu = sgemm_bi.grouped_mm(x.to(dev), w.to(dev).transpose(-2, -1), offs=offs.to(dev),
                              tier=tier)
    same_bits(gpu.cpu(), cpu)
    # Offsets on the host give the same bits.
    host = sgemm_bi.grouped_mm(x.to(dev), w.to(dev).transpose(-2, -1), offs=offs, tier=tier)
    same_bits(host.cpu(), cpu)
    # Each group is the dense call of its rows, also on the GPU.
    for g, (s, e) in enumerate(ranges(offs)):
        if e > s:
            same_bits(gpu[s:e], sgemm_bi.linear(x[s:e].to(dev), w[g].to(dev), tier=tier))


@pytest.mark.gpu
@pytest.mark.parametrize("dtype,tier", CASES)
def test_gpu_experts_weight_gradient_gives_the_cpu_bits(gen, dtype, tier) -> None:
    """2-D × 2-D (the experts' weight gradient, Xᵀ · dY split by the offsets): one grouped
    kernel with the offsets on the GPU, on the scalar tier (every GPU) and on the H200's
    tensor-core tier."""
    tokens, k, n, groups = 700, 256, 192, 12
    x = rand(gen, tokens, k, dtype=dtype)
    dy = rand(gen, tokens, n, dtype=dtype)
    offs = routing(gen, groups, tokens - 4)
    cpu = sgemm_bi.grouped_mm(x.t(), dy, offs=offs, tier=tier)
    dev = torch.device("cuda")
    gpu = sgemm_bi.grouped_mm(x.to(dev).t(), dy.to(dev), offs=offs.to(dev), tier=tier)
    same_bits(gpu.cpu(), cpu)
    for g, (s, e) in enumerate(ranges(offs)):
        want = sgemm_bi.matmul(x[s:e].t().to(dev), dy[s:e].to(dev), tier=tier)
        same_bits(gpu[g], want, f"group {g}")


@pytest.mark.gpu
def test_gpu_graph_capture_replays_the_bits_and_a_read_back_is_refused(gen) -> None:
    """2-D × 3-D with offsets on the GPU runs in one grouped kernel that reads them on both
    tiers, and so does the scalar tier's 2-D × 2-D (a capture works with them on the GPU or
    the CPU); the scalar tier's 3-D × 2-D reads them back, which a capture refuses with a
    clear error."""
    dev = torch.device("cuda")
    offs = torch.tensor([10, 10, 40, 60], dtype=torch.int32)
    on_device = offs.to(dev)
    for dtype, tier in ((torch.bfloat16, "tensor_cores"), (torch.float32, "scalar"),
                        (torch.bfloat16, "scalar")):
        x = rand(gen, 64, 128, dtype=dtype).to(dev)
        w = rand(gen, 4, 128, 64, dtype=dtype).to(dev)
        want = sgemm_bi.grouped_mm(x.cpu(), w.cpu(), offs=offs, tier=tier)
        for o in (offs, on_device):
            torch.cuda.synchronize()
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                out = sgemm_bi.grouped_mm(x, w, offs=o, tier=tier)
            graph.replay()
            torch.cuda.synchronize()
            same_bits(out.cpu(), want, f"{dtype} {tier}, offsets on {o.device}")
    # 2-D × 2-D (the weight gradient) on the scalar tier: Xᵀ · dY over each group's tokens.
    for dtype in (torch.float32, torch.bfloat16):
        x = rand(gen, 64, 48, dtype=dtype).to(dev)
        dy = rand(gen, 64, 40, dtype=dtype).to(dev)
        want = sgemm_bi.grouped_mm(x.cpu().t(), dy.cpu(), offs=offs, tier="scalar")
        for o in (offs, on_device):
            torch.cuda.synchronize()
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                out = sgemm_bi.grouped_mm(x.t(), dy, offs=o, tier="scalar")
            graph.replay()
            torch.cuda.synchronize()
            same_bits(out.cpu(), want, f"2-D x 2-D {dtype} scalar, offsets on {o.device}")
    a3 = rand(gen, 4, 16, 32, dtype=torch.float32).to(dev)
    b2 = rand(gen, 32, 64, dtype=torch.float32).to(dev)
    with pytest.raises(sgemm_bi.errors.UnsupportedError, match="host memory"):
        graph2 = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph2):
            sgemm_bi.grouped_mm(a3, b2, offs=on_device, tier="scalar")


@pytest.mark.gpu
def test_gpu_bad_device_offsets_are_reported_without_corrupting_anything(gen) -> None:
    """Offsets the call reads back (3-D × 2-D on the scalar tier) are checked before it
    runs."""
    dev = torch.device("cuda")
    a3 = rand(gen, 2, 8, 32, dtype=torch.float32).to(dev)
    b2 = rand(gen, 32, 16, dtype=torch.float32).to(dev)
    with pytest.raises(BadOffsetsError, match="past the end"):
        sgemm_bi.grouped_mm(a3, b2, offs=torch.tensor([4, 1 << 30], dtype=torch.int32, device=dev),
                            tier="scalar")
    # The context still works.
    ok = torch.tensor([4, 16], dtype=torch.int32, device=dev)
    same_bits(sgemm_bi.grouped_mm(a3, b2, offs=ok, tier="scalar").cpu(),
              sgemm_bi.grouped_mm(a3.cpu(), b2.cpu(), offs=ok.cpu(), tier="scalar"))


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_gpu_bad_offsets_the_scalar_grouped_kernel_reads_are_raised_once_it_has_run(
        gen, dtype) -> None:
    """The scalar tier's grouped kernel (2-D × 3-D, any GPU) reads ``offs`` on the GPU
    without a wait, as the H200's tensor-core one does: it clamps a bad end (the result is
    the clamped ends') and reports the first one. After a synchronize
    ``check_device_errors`` raises it, once; a ``grouped_mm`` made while it is pending raises
    it instead of running; the calls after it give their bits."""
    dev = torch.device("cuda")
    x = rand(gen, 200, 64, dtype=dtype)
    w = rand(gen, 4, 64, 48, dtype=dtype)
    xd, wd = x.to(dev), w.to(dev)
    good = torch.tensor([50, 100, 100, 199], dtype=torch.int32)
    want_good = sgemm_bi.grouped_mm(x, w, offs=good, tier="scalar")
    sgemm_bi.check_device_errors(dev)  # nothing pending from earlier tests
    for bad, clamped, group in (([60, 30, 120, 200], [60, 60, 120, 200], 1),
                                ([60, 90, 250, 200], [60, 90, 200, 200], 2),
                                ([-5, 90, 120, 150], [0, 90, 120, 150], 0)):
        offs = torch.tensor(bad, dtype=torch.int32, device=dev)
        out = sgemm_bi.grouped_mm(xd, wd, offs=offs, tier="scalar")
        torch.cuda.synchronize()
        want = sgemm_bi.grouped_mm(x, w, offs=torch.tensor(clamped, dtype=torch.int32),
                                   tier="scalar")
        same_bits(out.cpu(), want, f"{bad}: the clamped ends")
        with pytest.raises(BadOffsetsError, match=f"group {group}:.*on the device"):
            sgemm_bi.check_device_errors(dev)
        sgemm_bi.check_device_errors(dev)  # taken: nothing left

        sgemm_bi.grouped_mm(xd, wd, offs=offs, tier="scalar")
        torch.cuda.synchronize()
        with pytest.raises(BadOffsetsError, match=f"group {group}:"):
            sgemm_bi.grouped_mm(xd, wd, offs=good.to(dev), tier="scalar")
        got = sgemm_bi.grouped_mm(xd, wd, offs=good.to(dev), tier="scalar")
        torch.cuda.synchronize()
        same_bits(got.cpu(), want_good, f"{bad}: a good call after the report")
        sgemm_bi.check_device_errors()


@pytest.mark.gpu
def test_gpu_bad_offsets_the_grouped_kernel_reads_are_raised_once_it_has_run(gen) -> None:
    """The H200's grouped kernel reads ``offs`` on the GPU without a wait: it clamps a bad
    end (the result is the clamped ends') and reports the first one. After a synchronize
    ``check_device_errors`` raises it, once; a ``grouped_mm`` made while it is pending raises
    it instead of running; the calls after it give their bits."""
    if torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("the grouped kernel runs on compute capability 9.0 (an H200)")
    dev = torch.device("cuda")
    x = rand(gen, 200, 128, dtype=torch.bfloat16)
    w = rand(gen, 4, 128, 128, dtype=torch.bfloat16)
    xd, wd = x.to(dev), w.to(dev)
    good = torch.tensor([50, 100, 100, 199], dtype=torch.int32)
    want_good = sgemm_bi.grouped_mm(x, w, offs=good, tier="tensor_cores")
    sgemm_bi.check_device_errors(dev)  # nothing pending from earlier tests
    for bad, clamped, group in (([60, 30, 120, 200], [60, 60, 120, 200], 1),
                                ([60, 90, 250, 200], [60, 90, 200, 200], 2)):
        offs = torch.tensor(bad, dtype=torch.int32, device=dev)
        out = sgemm_bi.grouped_mm(xd, wd, offs=offs, tier="tensor_cores")
        torch.cuda.synchronize()
        want = sgemm_bi.grouped_mm(x, w, offs=torch.tensor(clamped, dtype=torch.int32),
                                   tier="tensor_cores")
        same_bits(out.cpu(), want, f"{bad}: the clamped ends")
        with pytest.raises(BadOffsetsError, match=f"group {group}:.*on the device"):
            sgemm_bi.check_device_errors(dev)
        sgemm_bi.check_device_errors(dev)  # taken: nothing left

        sgemm_bi.grouped_mm(xd, wd, offs=offs, tier="tensor_cores")
        torch.cuda.synchronize()
        with pytest.raises(BadOffsetsError, match=f"group {group}:"):
            sgemm_bi.grouped_mm(xd, wd, offs=good.to(dev), tier="tensor_cores")
        got = sgemm_bi.grouped_mm(xd, wd, offs=good.to(dev), tier="tensor_cores")
        torch.cuda.synchronize()
        same_bits(got.cpu(), want_good, f"{bad}: a good call after the report")
        sgemm_bi.check_device_errors()


@pytest.mark.gpu
@pytest.mark.skipif(not hasattr(F, "grouped_mm"), reason="this torch has no F.grouped_mm")
def test_gpu_the_mode_routes_f_grouped_mm_forward_and_backward(gen) -> None:
    dev = torch.device("cuda")
    x = rand(gen, 96, 64, dtype=torch.bfloat16).to(dev).requires_grad_()
    w = rand(gen, 4, 64, 32, dtype=torch.bfloat16).to(dev).requires_grad_()
    offs = torch.tensor([10, 50, 50, 96], dtype=torch.int32, device=dev)
    dy = rand(gen, 96, 32, dtype=torch.bfloat16).to(dev)
    out = sgemm_bi.grouped_mm(x, w, offs=offs)
    out.backward(dy)
    want = (out.detach(), x.grad.clone(), w.grad.clone())
    x.grad = w.grad = None
    with sgemm_bi.mode():
        got = F.grouped_mm(x, w, offs=offs)
        got.backward(dy)
    same_bits(got.detach(), want[0], "forward")
    same_bits(x.grad, want[1], "dx")
    same_bits(w.grad, want[2], "dw")
