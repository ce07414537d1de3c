"""The tensor-core tier on the CPU backend, through the Python package, against the outputs
recorded on an H200 (tests/data/tc-h200; the format is in its README.md). On sm_90 the tier
is defined by the step model the CPU backend implements (contract C4), so every recorded
output must come back bit for bit: through the low-level :class:`sgemm_bi.Engine` (f32
output, the recorded values themselves) and through :func:`sgemm_bi.matmul` on CPU tensors
(bf16/f16 output: the recorded value rounded to nearest even).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

import sgemm_bi
from sgemm_bi import Engine
from sgemm_bi._capi import DType, Layout, OutputMode, Tier

DATA = Path(__file__).resolve().parents[2] / "tests" / "data" / "tc-h200"
M, K, N = 64, 64, 256
FILES = [(fmt, dist) for fmt in ("bf16", "f16") for dist in range(6)]


def read(fmt: str, dist: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A [64, 64] and Bt [256, 64] (16-bit bits), and the recorded C [2, 64, 256] (f32 bits:
    mma.sync, then wgmma)."""
    raw = (DATA / f"tc_{fmt}_dist{dist}.bin").read_bytes()
    assert len(raw) == 172_032
    a = np.frombuffer(raw, dtype="<u2", count=M * K).reshape(M, K)
    bt = np.frombuffer(raw, dtype="<u2", count=N * K, offset=8192).reshape(N, K)
    c = np.frombuffer(raw, dtype="<u4", count=2 * M * N, offset=40960).reshape(2, M, N)
    return a, bt, c


def as_tensor(bits: np.ndarray, fmt: str) -> torch.Tensor:
    dtype = torch.bfloat16 if fmt == "bf16" else torch.float16
    return torch.from_numpy(bits.astype(np.int16)).view(dtype)


@pytest.mark.parametrize("fmt,dist", FILES)
def test_engine_gives_the_recorded_f32_outputs(fmt: str, dist: int) -> None:
    a, bt, want = read(fmt, dist)
    dtype = DType.BF16 if fmt == "bf16" else DType.F16
    desc = Engine.dense_desc(M, N, K, dtype)
    desc.tier = Tier.TENSOR_CORES
    desc.b.layout = Layout.COL_MAJOR
    desc.b.ld = K
    desc.c.mode = OutputMode.OVERWRITE
    desc.c.dtype = DType.F32
    a_t, bt_t = as_tensor(a, fmt).contiguous(), as_tensor(bt, fmt).contiguous()
    c = torch.full((M, N), float("nan"), dtype=torch.float32)
    with Engine("cpu") as engine:
        engine.gemm(desc, a_t, bt_t, c)
    got = c.view(torch.int32).numpy().view(np.uint32)
    for column, name in enumerate(("mma.sync", "wgmma")):
        differing = int((got != want[column]).sum())
        assert differing == 0, f"tc_{fmt}_dist{dist}: {differing} outputs differ from {name}"


@pytest.mark.parametrize("fmt,dist", FILES)
def test_matmul_rounds_the_recorded_outputs(fmt: str, dist: int) -> None:
    a, bt, want = read(fmt, dist)
    a_t, b_t = as_tensor(a, fmt), as_tensor(bt, fmt).t()
    got = sgemm_bi.matmul(a_t, b_t, tier="tensor_cores")
    recorded = torch.from_numpy(want[1].astype(np.int64).astype(np.uint32).view(np.int32))
    rounded = recorded.view(torch.float32).to(got.dtype)
    nan = rounded.isnan()
    assert not nan.any() or got[nan].isnan().all()
    same = got.view(torch.int16)[~nan] == rounded.view(torch.int16)[~nan]
    assert bool(same.all()), f"tc_{fmt}_dist{dist}: {int((~same).sum())} outputs differ"
