"""The public surface: the names the spec lists, a docstring on every public name, py.typed."""

from __future__ import annotations

import inspect
from pathlib import Path

import sgemm_bi
from sgemm_bi import _capi, compat, dispatch, engine, errors, functional, nn, ops


def test_the_specified_names_exist() -> None:
    for name in ("__version__", "matmul", "linear", "Linear", "enable", "disable", "mode",
                 "Engine", "deterministic_linear"):
        assert hasattr(sgemm_bi, name), name
    assert callable(sgemm_bi.Linear.from_torch)
    sig = inspect.signature(sgemm_bi.Linear)
    assert list(sig.parameters)[:5] == ["in_features", "out_features", "bias", "device", "dtype"]
    for p in ("tier", "fp32_grad_accumulation"):
        assert sig.parameters[p].kind is inspect.Parameter.KEYWORD_ONLY
    for fn in (sgemm_bi.matmul, sgemm_bi.linear):
        assert inspect.signature(fn).parameters["tier"].default == "auto"


def _public(module) -> list[tuple[str, object]]:
    return [(f"{module.__name__}.{n}", getattr(module, n)) for n in module.__all__]


def test_every_public_name_has_a_docstring() -> None:
    missing = []
    for module in (sgemm_bi, compat, dispatch, engine, errors, functional, nn, ops):
        assert module.__doc__, module.__name__
        for qual, obj in _public(module):
            if inspect.ismodule(obj) or isinstance(obj, (str, tuple, dict)):
                continue
            if not (obj.__doc__ or "").strip():
                missing.append(qual)
            if inspect.isclass(obj) and obj.__module__.startswith("sgemm_bi"):
                for attr in vars(obj):
                    if attr.startswith("_") or not callable(getattr(obj, attr)):
                        continue
                    if not (getattr(obj, attr).__doc__ or "").strip():
                        missing.append(f"{qual}.{attr}")
    assert not missing, f"no docstring: {missing}"
    for cls in _capi.STRUCTS + tuple(_capi.C_ENUMS.values()):
        assert cls.__doc__, cls.__name__


def test_py_typed_is_shipped() -> None:
    assert (Path(sgemm_bi.__file__).parent / "py.typed").is_file()
