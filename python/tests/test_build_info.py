"""``sgemm_bi.build_info()``: what the loaded library holds, and which image a device runs."""

from __future__ import annotations

import pytest
import torch

import sgemm_bi


def test_build_info_names_the_version_and_both_modules() -> None:
    info = sgemm_bi.build_info()
    assert info["version"] == sgemm_bi.library_version()
    assert [m["name"] for m in info["modules"]] == ["sm80", "sm90a"]
    assert [m["ptx_target"] for m in info["modules"]] == ["sm_80", "sm_90a"]
    for m in info["modules"]:
        assert m["ptx_bytes"] > 0 and m["embedded_bytes"] > 0
    assert "loaded" not in info


def test_build_info_of_the_cpu_loads_no_module() -> None:
    info = sgemm_bi.build_info("cpu")
    assert info["loaded"] == []
    assert {k: v for k, v in info.items() if k != "loaded"} == sgemm_bi.build_info()


def test_a_bad_device_is_an_error() -> None:
    with pytest.raises((ValueError, TypeError)):
        sgemm_bi.build_info("tpu:0")


@pytest.mark.gpu
def test_a_gpu_call_loads_machine_code_for_its_architecture() -> None:
    x = torch.randn(8, 64, device="cuda")
    w = torch.randn(32, 64, device="cuda")
    sgemm_bi.linear(x, w, tier="scalar")
    torch.cuda.synchronize()
    info = sgemm_bi.build_info("cuda:0")
    loaded = {m["module"]: m for m in info["loaded"]}
    assert loaded["sm80"]["entry_points"] > 0 or loaded.get("sm90a", {}).get("entry_points", 0) > 0
    major, minor = torch.cuda.get_device_capability(0)
    archs = {a for m in info["modules"] for a in m["machine_code"]}
    if f"sm_{major}{minor}" in archs or (major, minor) == (9, 0):
        assert all(m["image"] == "machine code" for m in loaded.values()), info["loaded"]
