"""The bad-input catalogue through Python (docs/reliability.md, item 1): every kind of bad
input raises its exception class with a message naming the problem, writes nothing, and
leaves the engine working (the next good call gives the contract's bits). The same
catalogue runs through Rust (tests/errors.rs) and C (capi/tests/c/abi_errors.c).

Raw calls go through the low-level :class:`sgemm_bi.Engine` on numpy arrays (host
addresses on the CPU engine); the torch entry points are checked where Python itself
rejects the input. The GPU cases (host memory given to a CUDA engine, pointer checks,
misaligned device pointers, overlap in device memory, a bad ordinal) are marked ``gpu``.
"""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys

import numpy as np
import pytest
import torch
from conftest import INSTALLED, PYTHON_DIR
from reference import assert_same_bits, gemm_ref

import sgemm_bi
from sgemm_bi import _capi, errors
from sgemm_bi._capi import DType, Layout, OutputMode, Tier
from sgemm_bi.engine import Engine, GemmDesc

M, N, K = 3, 4, 5


def _inputs() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(7)
    a = rng.uniform(-1, 1, (M, K)).astype(np.float32)
    b = rng.uniform(-1, 1, (K, N)).astype(np.float32)
    bias = rng.uniform(-1, 1, (N,)).astype(np.float32)
    return a, b, bias


def _valid() -> GemmDesc:
    desc = Engine.dense_desc(M, N, K)
    desc.has_bias, desc.bias_dtype = 1, DType.F32
    return desc


def _expected(a: np.ndarray, b: np.ndarray, bias: np.ndarray) -> torch.Tensor:
    return gemm_ref(torch.from_numpy(a), torch.from_numpy(b), torch.from_numpy(bias))


def _still_works(e: Engine) -> None:
    """A good call after a rejected one gives the contract's bits and clears the message."""
    a, b, bias = _inputs()
    c = np.full((M, N), np.nan, np.float32)
    e.gemm(_valid(), a, b, c, bias=bias)
    assert _capi.last_error_message() == ""
    assert_same_bits(torch.from_numpy(c), _expected(a, b, bias), "after a rejected call")


def _edit(**fields: object) -> GemmDesc:
    """The valid descriptor with ``fields`` set (dotted names reach into a, b and c)."""
    desc = _valid()
    for name, value in fields.items():
        obj = desc
        *path, last = name.split("__")
        for p in path:
            obj = getattr(obj, p)
        if last == "reserved":
            obj.reserved[1] = value
        else:
            setattr(obj, last, value)
    return desc


# (descriptor edits, exception class, message fragment)
DESCRIPTOR_CASES = [
    ({"struct_size": 8}, errors.InvalidArgumentError, "desc->struct_size is 8"),
    ({"reserved": 3}, errors.InvalidArgumentError, "desc->reserved[1] is 3"),
    ({"tier": 7}, errors.InvalidArgumentError, "desc->tier is 7, which is not a sgemm_bi_tier"),
    ({"a__dtype": 9}, errors.InvalidArgumentError, "desc->a.dtype is 9"),
    ({"b__layout": 2}, errors.InvalidArgumentError, "desc->b.layout is 2"),
    ({"c__mode": 5}, errors.InvalidArgumentError, "desc->c.mode is 5"),
    ({"c__dtype": 3}, errors.InvalidArgumentError, "desc->c.dtype is 3"),
    ({"has_bias": 2}, errors.InvalidArgumentError, "desc->has_bias is 2"),
    ({"bias_dtype": 4}, errors.InvalidArgumentError, "desc->bias_dtype is 4"),
    # Negative numbers: ctypes stores them modulo 2**64, the library sees sizes above
    # INT64_MAX and says what they were.
    ({"m": -1}, errors.ExtentOverflowError, "m is 18446744073709551615"),
    ({"k": -3}, errors.ExtentOverflowError, "as a signed 64-bit number it is -3"),
    ({"a__ld": -5}, errors.ExtentOverflowError, "leading dimension of A is"),
    ({"c__ldc": -1}, errors.ExtentOverflowError, "a negative size?"),
    ({"batch": 2, "b__batch_stride": -20}, errors.ExtentOverflowError, "batch stride of B"),
    # Overflowing and too small.
    ({"a__ld": 2**62}, errors.ExtentOverflowError, "the extent of A overflows"),
    ({"batch": 2**40, "a__batch_stride": 2**30}, errors.ExtentOverflowError, "extent of A"),
    ({"a__ld": K - 1}, errors.BadLeadingDimensionError, "leading dimension of A is 4"),
    ({"b__ld": 0}, errors.BadLeadingDimensionError, "leading dimension of B is 0"),
    ({"c__ldc": N - 1}, errors.BadLeadingDimensionError, "leading dimension of C is 3"),
    ({"b__layout": Layout.COL_MAJOR}, errors.BadLeadingDimensionError,
     "leading dimension of B is 4, it must be at least 5"),
    ({"batch": 2, "c__batch_stride": M * N - 1}, errors.OverlappingBatchesError, "overlap"),
    # Dtypes that do not combine, and a tier the CPU does not run.
    ({"b__dtype": DType.BF16}, errors.UnsupportedDtypeError, "A is f32 and B is bf16"),
    ({"bias_dtype": DType.F16}, errors.UnsupportedDtypeError, "bias is f16"),
    ({"c__mode": OutputMode.ACCUMULATE_F32, "c__dtype": DType.BF16},
     errors.UnsupportedDtypeError, "ACCUMULATE_F32"),
    ({"tier": Tier.TENSOR_CORES}, errors.UnsupportedDtypeError, "tensor-core tier takes bf16"),
]


@pytest.mark.parametrize("fields, exc, fragment", DESCRIPTOR_CASES,
                         ids=[",".join(f) for f, _, _ in DESCRIPTOR_CASES])
def test_bad_descriptors(fields: dict[str, object], exc: type[Exception], fragment: str) -> None:
    e = Engine("cpu")
    a, b, bias = _inputs()
    c = np.full((M, N), 1234.0, np.float32)
    # Buffers large enough for anything these descriptors could describe that is accepted.
    with pytest.raises(exc) as info:
        e.gemm(_edit(**fields), a, b, c, bias=bias)
    assert fragment in str(info.value), str(info.value)
    assert info.value.status_name in str(info.value)
    assert (c == 1234.0).all(), "C written by a rejected call"
    _still_works(e)


def test_the_cpu_runs_both_tiers() -> None:
    """A CPU engine runs the tensor-core tier (the sm_90 model of it), so it never raises
    TierUnavailableError: only a GPU without the tier does."""
    e = Engine("cpu")
    assert e.supports("scalar") and e.supports("tensor_cores")
    a16 = torch.ones(M, K, dtype=torch.bfloat16)
    b16 = torch.ones(K, N, dtype=torch.bfloat16)
    c16 = torch.full((M, N), 7.0, dtype=torch.bfloat16)
    desc = Engine.dense_desc(M, N, K, "bf16")
    desc.tier = Tier.TENSOR_CORES
    e.gemm(desc, a16, b16, c16)
    assert (c16 == float(K)).all()
    assert_same_bits(c16, sgemm_bi.matmul(a16, b16, tier="tensor_cores"), "the torch layer")
    _still_works(e)


def test_null_pointers() -> None:
    e = Engine("cpu")
    a, b, bias = _inputs()
    c = np.full((M, N), 1234.0, np.float32)
    for args, bias_arg, fragment in [
        ((None, b, c), bias, "null pointer for A"),
        ((a, None, c), bias, "null pointer for B"),
        ((a, b, c), None, "null pointer for bias"),
        ((a, b, None), bias, "null pointer for C"),
    ]:
        with pytest.raises(errors.NullParameterError, match=fragment):
            e.gemm(_valid(), *args, bias=bias_arg)
        assert (c == 1234.0).all()
    lib = _capi.library()
    desc = _valid()
    status = lib.sgemm_bi_gemm(None, ctypes.byref(desc), a.ctypes.data, b.ctypes.data,
                               bias.ctypes.data, c.ctypes.data, None)
    assert status == _capi.Status.NULL_PARAMETER
    assert _capi.last_error_message() == "engine is NULL"
    status = lib.sgemm_bi_gemm(e.handle, None, a.ctypes.data, b.ctypes.data, bias.ctypes.data,
                               c.ctypes.data, None)
    assert status == _capi.Status.NULL_PARAMETER
    assert _capi.last_error_message() == "desc is NULL"
    status = lib.sgemm_bi_engine_set_pointer_checks(None, True)
    assert status == _capi.Status.NULL_PARAMETER
    _still_works(e)


@pytest.mark.parametrize("layout", [_capi.WeightLayout.KN, _capi.WeightLayout.NK])
def test_triad_errors_name_the_arguments_as_passed(layout: _capi.WeightLayout) -> None:
    """forward / backward_dw / backward_dx name x, w, y, dy, dw, dx — the arguments the
    caller passed — never the GEMM's A, B and C (whose roles dW swaps with the layout)."""
    e = Engine("cpu")
    m, k, n = 3, 4, 5
    layer = Engine.linear_desc(m, k, n, "f32", layout, "scalar")
    x, dy = np.ones((m, k), np.float32), np.ones((m, n), np.float32)
    w = np.ones((k, n) if layout == _capi.WeightLayout.KN else (n, k), np.float32)
    out = np.zeros(64, np.float32)
    calls = [
        (lambda: e.forward(layer, None, w, out), "x"),
        (lambda: e.forward(layer, x, None, out), "w"),
        (lambda: e.forward(layer, x, w, None), "y"),
        (lambda: e.backward_dw(layer, None, x, out), "dy"),
        (lambda: e.backward_dw(layer, dy, None, out), "x"),
        (lambda: e.backward_dw(layer, dy, x, None), "dw"),
        (lambda: e.backward_dx(layer, None, w, out), "dy"),
        (lambda: e.backward_dx(layer, dy, None, out), "w"),
        (lambda: e.backward_dx(layer, dy, w, None), "dx"),
    ]
    for call, name in calls:
        with pytest.raises(errors.NullParameterError) as info:
            call()
        msg = str(info.value)
        assert f"null pointer for {name} " in msg, msg
        assert not any(f"for {g} " in msg for g in "ABC"), msg
    with pytest.raises(errors.OverlappingOperandsError, match=r"^y \(bytes .* overlaps x"):
        e.forward(layer, x, w, x)
    _still_works(e)


def test_zero_sizes_are_no_ops_and_need_no_buffers() -> None:
    e = Engine("cpu")
    for m, n, k in [(0, N, K), (M, 0, K), (0, 0, 0)]:
        e.gemm(Engine.dense_desc(m, n, k), None, None, None)
    desc = Engine.dense_desc(M, N, K)
    desc.batch = 0
    e.gemm(desc, None, None, None)
    # K = 0 reads neither A nor B: C is the bias.
    a, b, bias = _inputs()
    desc = _valid()
    desc.k = 0
    c = np.full((M, N), np.nan, np.float32)
    e.gemm(desc, None, None, c, bias=bias)
    assert (c == bias).all()
    _still_works(e)


def test_output_overlapping_an_input() -> None:
    e = Engine("cpu")
    a, b, bias = _inputs()
    buf = np.concatenate([a.ravel(), b.ravel(), np.zeros(M * N, np.float32)])
    before = buf.copy()
    a_at, b_at, c_at = (buf.ctypes.data + 4 * off for off in (0, M * K, M * K + K * N))
    cases = [
        (a_at, b_at, a_at, "overlaps A"),
        (a_at, b_at, b_at + 4 * (K * N - 1), "overlaps B"),
        (a_at, b_at, c_at - 4, "overlaps B"),
    ]
    for pa, pb, pc, fragment in cases:
        with pytest.raises(errors.OverlappingOperandsError, match=fragment) as info:
            e.gemm(_valid(), pa, pb, pc, bias=bias)
        assert "SGEMM_BI_STATUS_OVERLAPPING_OPERANDS" in str(info.value)
        assert np.array_equal(buf.view(np.uint32), before.view(np.uint32))
    # Right after B: no byte in common.
    e.gemm(_valid(), a_at, b_at, c_at, bias=bias)
    assert_same_bits(torch.from_numpy(buf[M * K + K * N:].reshape(M, N)),
                     _expected(a, b, bias), "C adjacent to B")
    # The torch accumulate op with the accumulator as its own input.
    x = torch.rand(4, 4)
    with pytest.raises(errors.OverlappingOperandsError, match="overlaps A"):
        sgemm_bi.ops.gemm_accumulate_(x, x, torch.rand(4, 4), "scalar")
    _still_works(e)


def test_torch_entry_points_reject_bad_tensors() -> None:
    """What Python checks before the library: types, dtypes, shapes, tiers."""
    a, b = torch.rand(M, K), torch.rand(K, N)
    cases = [
        (lambda: sgemm_bi.matmul(a.double(), b.double()), TypeError, "sgemm-bi takes"),
        (lambda: sgemm_bi.matmul(a, b.bfloat16()), TypeError, "dtype mismatch"),
        (lambda: sgemm_bi.matmul(a.int(), b.int()), TypeError, "sgemm-bi takes"),
        (lambda: sgemm_bi.matmul(a, torch.rand(K + 1, N)), ValueError, "shape mismatch"),
        (lambda: sgemm_bi.matmul(a, b, torch.rand(N).half()), TypeError, "float32 or the"),
        (lambda: sgemm_bi.matmul(a, b, torch.rand(N + 1)), ValueError, "must be [N]"),
        (lambda: sgemm_bi.matmul(a, b, tier="fast"), ValueError, "tier is 'fast'"),
    ]
    for call, exc, fragment in cases:
        with pytest.raises(exc, match=None) as info:
            call()
        assert fragment in str(info.value), f"{info.value!r} lacks {fragment!r}"
    assert_same_bits(sgemm_bi.matmul(a, b, tier="scalar"), gemm_ref(a, b), "after the errors")


def test_every_status_code_has_its_exception() -> None:
    for status, cls in [(_capi.Status.OVERLAPPING_OPERANDS, errors.OverlappingOperandsError),
                        (_capi.Status.INACCESSIBLE_MEMORY, errors.InaccessibleMemoryError)]:
        e = errors.error_for(status, "detail")
        assert type(e) is cls and isinstance(e, ValueError)
        assert e.status_name == _capi.status_name(status)


def test_engine_creation_errors() -> None:
    with pytest.raises(ValueError, match="only ordinal 0"):
        Engine("cpu:1")
    lib = _capi.library()
    handle = ctypes.c_void_p(1)
    assert lib.sgemm_bi_engine_create(2, 0, ctypes.byref(handle)) == \
        _capi.Status.INVALID_ARGUMENT
    assert handle.value is None
    assert "device_kind is 2" in _capi.last_error_message()
    if not torch.cuda.is_available():
        with pytest.raises((errors.NoDriverError, errors.NoDeviceError)) as info:
            Engine("cuda:7")
        assert "CUDA" in str(info.value)


# -- on a GPU ----------------------------------------------------------------------------------


def _python(code: str, **env: str) -> subprocess.CompletedProcess[str]:
    full = dict(os.environ, **env)
    if not INSTALLED:
        full["PYTHONPATH"] = str(PYTHON_DIR) + os.pathsep + full.get("PYTHONPATH", "")
    return subprocess.run([sys.executable, "-c", code], env=full, capture_output=True,
                          text=True, timeout=600)


@pytest.mark.gpu
def test_gpu_host_memory_and_pointer_checks() -> None:
    e = Engine("cuda:0")
    lib = _capi.library()
    a, b, bias = _inputs()
    da, db, dbias = (torch.from_numpy(x).cuda() for x in (a, b, bias))
    dc = torch.full((M, N), 1234.0, device="cuda")
    want = _expected(a, b, bias)
    pageable = _pageable_access()
    host_c = np.zeros((M, N), np.float32)
    for args, operand in [((a, db, dc), "A"), ((da, b, dc), "B"), ((da, db, host_c), "C")]:
        if pageable:
            break  # this system's GPU reads pageable host memory: nothing to reject
        with pytest.raises(errors.InaccessibleMemoryError,
                           match=f"{operand} at 0x.* not memory the CUDA driver knows"):
            e.gemm(_valid(), *args, bias=dbias)
        torch.cuda.synchronize()
        assert (dc == 1234.0).all(), "C written by a rejected call"
    # Pinned host memory is device-accessible: accepted, and gives the same bits.
    pinned_a = torch.from_numpy(a).pin_memory()
    e.gemm(_valid(), pinned_a, db, dc, bias=dbias)
    torch.cuda.synchronize()
    assert_same_bits(dc.cpu(), want, "A in pinned host memory")
    # Misaligned (two bytes into an f32 buffer) and overlapping device pointers.
    with pytest.raises(errors.MisalignedError, match="not a multiple of its element size"):
        e.gemm(_valid(), da.data_ptr() + 2, db, dc, bias=dbias)
    with pytest.raises(errors.OverlappingOperandsError, match="overlaps A"):
        e.gemm(_valid(), da, db, da, bias=dbias)
    # The switch: off, a good call still works; on again.
    assert lib.sgemm_bi_engine_set_pointer_checks(e.handle, False) == 0
    dc.fill_(0)
    e.gemm(_valid(), da, db, dc, bias=dbias)
    assert lib.sgemm_bi_engine_set_pointer_checks(e.handle, True) == 0
    torch.cuda.synchronize()
    assert_same_bits(dc.cpu(), want, "pointer checks off")
    with pytest.raises(errors.NoDeviceError, match=f"no CUDA device {torch.cuda.device_count()}"):
        Engine(f"cuda:{torch.cuda.device_count()}")
    # A CPU tensor through the torch layer is stopped by Python before the library.
    with pytest.raises(ValueError, match="device mismatch"):
        sgemm_bi.matmul(torch.from_numpy(a), db)


def _pageable_access() -> bool:
    """Whether device 0 reads pageable host memory (HMM/ATS): then host memory is valid."""
    try:
        import cupy
    except ImportError:
        return False
    return bool(cupy.cuda.runtime.deviceGetAttribute(88, 0))  # cudaDevAttrPageableMemoryAccess


@pytest.mark.gpu
def test_gpu_expandable_segments_pass_the_pointer_checks() -> None:
    """torch's expandable segments map memory with the virtual memory API; the pointer
    checks must accept it (and results must be right)."""
    code = (
        "import torch, sgemm_bi\n"
        "a = torch.rand(300, 200, device='cuda'); b = torch.rand(200, 100, device='cuda')\n"
        "cpu = sgemm_bi.matmul(a.cpu(), b.cpu(), tier='scalar')\n"
        "gpu = sgemm_bi.matmul(a, b, tier='scalar').cpu()\n"
        "assert torch.equal(cpu.view(torch.int32), gpu.view(torch.int32))\n"
        "print('expandable segments: ok')\n"
    )
    r = _python(code, PYTORCH_CUDA_ALLOC_CONF="expandable_segments:True")
    assert r.returncode == 0, r.stderr[-3000:]
    assert "expandable segments: ok" in r.stdout
