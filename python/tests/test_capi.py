"""The ctypes mirror against include/sgemm_bi.h and the library; status codes as exceptions;
library loading; the low-level Engine on the CPU backend."""

from __future__ import annotations

import ctypes
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import HAS_GPU, INSTALLED, PYTHON_DIR, REPO
from reference import assert_same_bits, gemm_ref, rand

import sgemm_bi
from sgemm_bi import _capi, errors
from sgemm_bi._capi import DType, Layout, OutputMode, Status, Tier, WeightLayout
from sgemm_bi.engine import Engine, GemmDesc

HEADER = REPO / "include" / "sgemm_bi.h"
needs_header = pytest.mark.skipif(not HEADER.is_file(), reason="no include/sgemm_bi.h here")


# -- the mirror ------------------------------------------------------------------------------


@needs_header
def test_enums_match_the_header() -> None:
    text = HEADER.read_text()
    for c_name, py_enum in _capi.C_ENUMS.items():
        body = re.search(r"enum " + c_name + r"\b[^{]*\{(.*?)\};", text, re.S)
        assert body, f"enum {c_name} not in the header"
        values = dict(
            (name, int(v))
            for name, v in re.findall(r"(SGEMM_BI_\w+)\s*=\s*(\d+)", body.group(1))
        )
        prefix = "SGEMM_BI_" + c_name.removeprefix("sgemm_bi_").upper() + "_"
        mirrored = {prefix + m.name: m.value for m in py_enum}
        assert mirrored == values, f"{c_name}: header {values}, mirror {mirrored}"
    abi = re.search(r"#define SGEMM_BI_ABI_VERSION (\d+)", text)
    assert abi and int(abi.group(1)) == _capi.SGEMM_BI_ABI_VERSION


@needs_header
def test_functions_match_the_header() -> None:
    # Declarations start at column 0 with their return type ("const char *sgemm_bi_…(").
    declared = set(re.findall(r"^(?:const )?\w+ \*?(sgemm_bi_\w+)\(", HEADER.read_text(), re.M))
    assert declared == set(_capi.PROTOTYPES), (
        f"only in the header: {declared - set(_capi.PROTOTYPES)}; "
        f"only in the mirror: {set(_capi.PROTOTYPES) - declared}"
    )
    lib = _capi.library()
    for name in declared:
        assert getattr(lib, name).argtypes is not None


def test_struct_sizes_as_the_library_reports_them() -> None:
    lib = _capi.library()
    desc = GemmDesc()
    errors.check(lib.sgemm_bi_gemm_desc_dense(2, 3, 4, DType.F32, ctypes.byref(desc)))
    assert desc.struct_size == ctypes.sizeof(_capi.sgemm_bi_gemm_desc) == 152
    e = Engine("cpu")
    caps = _capi.sgemm_bi_capabilities(struct_size=ctypes.sizeof(_capi.sgemm_bi_capabilities))
    errors.check(lib.sgemm_bi_engine_capabilities(e.handle, ctypes.byref(caps)))
    assert caps.struct_size == ctypes.sizeof(_capi.sgemm_bi_capabilities) == 40
    # The library checks sgemm_bi_linear's struct_size against its own sizeof: a call with
    # ctypes' size is accepted, one byte more is rejected with the library's size named.
    x = np.ones((2, 3), np.float32)
    w = np.ones((4, 3), np.float32)
    y = np.zeros((2, 4), np.float32)
    layer = Engine.linear_desc(2, 3, 4)
    e.forward(layer, x, w, y)
    layer.struct_size += 1
    with pytest.raises(errors.InvalidArgumentError, match=r"sizeof\(sgemm_bi_linear\) is 56"):
        e.forward(layer, x, w, y)
    assert ctypes.sizeof(_capi.sgemm_bi_operand) == ctypes.sizeof(_capi.sgemm_bi_output) == 24


def _c_compiler() -> str | None:
    for cc in (os.environ.get("CC"), "cc", "gcc", "clang"):
        if cc and shutil.which(cc):
            return cc
    return None


@needs_header
@pytest.mark.skipif(_c_compiler() is None, reason="no C compiler to read the header's layouts")
def test_struct_layouts_match_the_header_compiled(tmp_path: Path) -> None:
    """sizeof, alignment and every field's offset, as a C compiler lays out the header."""
    lines = []
    for s in _capi.STRUCTS:
        name = s.__name__
        lines.append(f'printf("{name} size %zu align %zu\\n", sizeof({name}), _Alignof({name}));')
        for field, _ in s._fields_:
            lines.append(f'printf("{name}.{field} %zu\\n", offsetof({name}, {field}));')
    src = tmp_path / "layout.c"
    src.write_text(
        "#include <stddef.h>\n#include <stdio.h>\n#include \"sgemm_bi.h\"\n"
        "int main(void) {\n" + "\n".join(lines) + "\nreturn 0;\n}\n"
    )
    exe = tmp_path / "layout"
    subprocess.run([_c_compiler(), "-std=c11", f"-I{HEADER.parent}", str(src), "-o", str(exe)],
                   check=True)
    got = subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout
    want = []
    for s in _capi.STRUCTS:
        name = s.__name__
        want.append(f"{name} size {ctypes.sizeof(s)} align {ctypes.alignment(s)}")
        want += [f"{name}.{f} {getattr(s, f).offset}" for f, _ in s._fields_]
    assert got.split("\n")[:-1] == want


# -- status codes as exceptions ---------------------------------------------------------------


def test_every_status_has_an_exception_with_the_library_message() -> None:
    for status in Status:
        if status == Status.OK:
            continue
        e = errors.error_for(status, "detail text")
        assert isinstance(e, errors.SgemmBiError)
        assert e.status == status
        assert e.status_name == _capi.status_name(status) == "SGEMM_BI_STATUS_" + status.name
        assert "detail text" in str(e) and e.status_name in str(e)
    unknown = errors.error_for(99, "from a newer library")
    assert type(unknown) is errors.SgemmBiError and "99" in str(unknown)
    assert issubclass(errors.BadLeadingDimensionError, ValueError)
    assert issubclass(errors.UnsupportedDtypeError, ValueError)
    assert not issubclass(errors.UnsupportedDtypeError, TypeError)  # see errors.py


def test_a_rejected_call_raises_with_the_library_message() -> None:
    e = Engine("cpu")
    a, b, c = (np.ones((3, 3), np.float32) for _ in range(3))
    desc = Engine.dense_desc(3, 3, 3)
    desc.a.ld = 2
    with pytest.raises(errors.BadLeadingDimensionError,
                       match=r"leading dimension of A is 2, it must be at least 3.*"
                             r"SGEMM_BI_STATUS_BAD_LEADING_DIMENSION"):
        e.gemm(desc, a, b, c)
    desc = Engine.dense_desc(3, 3, 3)
    desc.reserved[1] = 7
    with pytest.raises(errors.InvalidArgumentError, match=r"reserved\[1\] is 7"):
        e.gemm(desc, a, b, c)
    with pytest.raises(errors.NullParameterError, match="null pointer for C"):
        e.gemm(Engine.dense_desc(3, 3, 3), a, b, None)
    # After a failure the engine still works and the message is cleared by the next success.
    e.gemm(Engine.dense_desc(3, 3, 3), a, b, c)
    assert _capi.last_error_message() == ""


# -- loading ---------------------------------------------------------------------------------


def _python(code: str, **env: str) -> subprocess.CompletedProcess[str]:
    full = dict(os.environ, **env)
    if not INSTALLED:
        full["PYTHONPATH"] = str(PYTHON_DIR) + os.pathsep + full.get("PYTHONPATH", "")
    return subprocess.run([sys.executable, "-c", code], env=full, capture_output=True,
                          text=True, timeout=300)


def test_import_needs_no_library_and_use_names_what_was_tried() -> None:
    code = (
        "import sgemm_bi, torch\n"
        "try:\n"
        "    sgemm_bi.matmul(torch.ones(2, 2), torch.ones(2, 2))\n"
        "except sgemm_bi.LibraryNotFoundError as e:\n"
        "    print('raised:', e)\n"
    )
    r = _python(code, SGEMM_BI_LIB="/nonexistent/libsgemm_bi.so")
    assert r.returncode == 0, r.stderr
    assert "raised: libsgemm_bi not found (SGEMM_BI_LIB is set" in r.stdout
    assert "/nonexistent/libsgemm_bi.so (not there)" in r.stdout


def test_sgemm_bi_lib_overrides_the_path() -> None:
    lib = str(sgemm_bi.library_path())
    r = _python("import sgemm_bi; print(sgemm_bi.library_path())", SGEMM_BI_LIB=lib)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == lib


@pytest.mark.skipif(not INSTALLED, reason="checks the installed wheel (SGEMM_BI_TEST_INSTALLED=1)")
def test_the_installed_package_loads_its_bundled_library() -> None:
    assert "SGEMM_BI_LIB" not in os.environ
    assert sgemm_bi.library_path().parent == Path(sgemm_bi.__file__).resolve().parent
    assert (Path(sgemm_bi.__file__).parent / "py.typed").is_file()


def test_versions_agree() -> None:
    assert sgemm_bi.__version__ == sgemm_bi.library_version()
    cargo = REPO / "Cargo.toml"
    if cargo.is_file():  # [workspace.package] version = "…"
        version = re.search(r'\[workspace\.package\][^\[]*?\nversion = "([^"]+)"',
                            cargo.read_text())
        assert version and version.group(1) == sgemm_bi.__version__


# -- the low-level engine (CPU) ------------------------------------------------------------------


def test_engine_cpu_capabilities() -> None:
    with Engine("cpu") as e:
        caps = e.capabilities
        assert e.device == "cpu" and caps.compute_capability is None
        assert caps.tiers == frozenset({Tier.SCALAR, Tier.TENSOR_CORES, Tier.AUTO})
        assert caps.tier_names == ["scalar", "tensor_cores", "auto"]
        assert e.supports("scalar") and e.supports(Tier.TENSOR_CORES)
        assert e.resolve_tier("auto", "bf16") == Tier.SCALAR
        assert e.resolve_tier(Tier.AUTO, "f32") == Tier.SCALAR
        assert e.resolve_tier("tensor_cores", "f16") == Tier.TENSOR_CORES
        with pytest.raises(ValueError, match="tier is 'fast'"):
            e.resolve_tier("fast", "bf16")
        assert "scalar" in repr(e)
    assert "closed" in repr(e)
    e.close()  # idempotent
    with pytest.raises(ValueError, match="closed"):
        e.supports("scalar")
    with pytest.raises(ValueError, match="only ordinal 0"):
        Engine("cpu:1")
    with pytest.raises(ValueError, match="not supported"):
        Engine("mps")


@pytest.mark.skipif(HAS_GPU, reason="checks the error on machines without a GPU")
def test_engine_cuda_without_a_gpu_raises_clearly() -> None:
    with pytest.raises((errors.NoDriverError, errors.NoDeviceError)) as info:
        Engine("cuda:0")
    assert "CUDA" in str(info.value)


def test_engine_gemm_on_host_pointers(gen: torch.Generator) -> None:
    """A batched, strided, column-major call on raw addresses matches the contract."""
    e = Engine("cpu")
    a = rand((2, 5, 4), torch.float32, gen)  # two [5, 4] matrices
    bt = rand((2, 3, 5), torch.float32, gen)  # Bᵀ stored: B is column-major [5, 3]
    bias = rand((3,), torch.float32, gen)
    c = torch.full((2, 4, 3), float("nan"))
    desc = Engine.dense_desc(4, 3, 5)
    desc.batch = 2
    desc.a.layout, desc.a.ld, desc.a.batch_stride = Layout.COL_MAJOR, 4, 20  # A = a[b].T
    desc.b.layout, desc.b.ld, desc.b.batch_stride = Layout.COL_MAJOR, 5, 15
    desc.has_bias, desc.bias_dtype = 1, DType.F32
    desc.c.batch_stride = 12
    e.gemm(desc, a, bt, c, bias=bias)
    for i in range(2):
        assert_same_bits(c[i], gemm_ref(a[i].T, bt[i].T, bias), f"batch {i}")


def test_engine_training_triad(gen: torch.Generator) -> None:
    """forward, backward_dw (overwrite, accumulate) and backward_dx with torch's [N, K] W."""
    m, k, n = 6, 5, 4
    x, w, dy = rand((m, k), torch.bfloat16, gen), rand((n, k), torch.bfloat16, gen), \
        rand((m, n), torch.bfloat16, gen)
    bias = rand((n,), torch.float32, gen)
    e = Engine("cpu")
    layer = Engine.linear_desc(m, k, n, torch.bfloat16, WeightLayout.NK)
    y = torch.empty(m, n, dtype=torch.bfloat16)
    e.forward(layer, x, w, y, bias=bias, bias_dtype="f32")
    assert_same_bits(y, gemm_ref(x, w.T, bias, torch.bfloat16), "Y")
    dw = torch.empty(n, k, dtype=torch.float32)
    e.backward_dw(layer, dy, x, dw, dw_dtype=torch.float32)
    assert_same_bits(dw, gemm_ref(dy.T, x, out_dtype=torch.float32), "dW")
    acc = dw.clone()
    e.backward_dw(layer, dy, x, acc, mode=OutputMode.ACCUMULATE_F32)
    assert_same_bits(acc, dw + dw, "dW accumulated")
    dx = torch.empty(m, k, dtype=torch.bfloat16)
    e.backward_dx(layer, dy, w, dx)
    assert_same_bits(dx, gemm_ref(dy, w), "dX")
