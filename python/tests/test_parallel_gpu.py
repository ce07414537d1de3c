"""sgemm_bi.parallel on two CUDA GPUs over NCCL: the checks of test_parallel.py (the
column-parallel layer against the unsharded one for one and two ranks, every dtype and
tier, the rank-ordered sums, the DDP hook), and the DDP example under torchrun.

Marked ``gpu`` (skipped without a GPU; a failure then when SGEMM_BI_REQUIRE_GPU=1). With
fewer than two GPUs they are skipped with the reason even when SGEMM_BI_REQUIRE_GPU=1, as
the usual GPU test host has one; SGEMM_BI_REQUIRE_MULTI_GPU=1 makes that a failure too
(for a run that is meant to be on two GPUs).
"""

from __future__ import annotations

import os
import subprocess
import sys

import parallel_checks
import pytest
import torch
import torch.distributed as dist
from conftest import INSTALLED, PYTHON_DIR

GPUS = torch.cuda.device_count() if torch.cuda.is_available() else 0
REQUIRE_MULTI_GPU = os.environ.get("SGEMM_BI_REQUIRE_MULTI_GPU") == "1"

pytestmark = pytest.mark.gpu


@pytest.fixture(autouse=True)
def two_gpus() -> None:
    """Skips (or fails, with SGEMM_BI_REQUIRE_MULTI_GPU=1) below two GPUs or without NCCL."""
    if GPUS == 0:
        return  # the gpu marker has decided already (conftest)
    reason = None
    if GPUS < 2:
        reason = f"needs two CUDA GPUs, torch sees {GPUS}"
    elif not (dist.is_available() and dist.is_nccl_available()):
        reason = "needs torch.distributed with NCCL"
    if reason is not None:
        if REQUIRE_MULTI_GPU:
            pytest.fail(f"SGEMM_BI_REQUIRE_MULTI_GPU=1, but this test {reason}")
        pytest.skip(reason)


def test_nccl_two_ranks() -> None:
    """Rank r on cuda:r: every dtype, the auto tier (tensor cores for bf16/f16 where the
    engine runs them) and the scalar tier, against the unsharded layer on the same GPU."""
    dtypes = [torch.float32, torch.bfloat16, torch.float16]
    parallel_checks.spawn(2, "cuda", "all_checks", dtypes, ["auto", "scalar"])


@pytest.mark.parametrize("reduction", ["all_reduce", "rank_order"])
def test_ddp_example_two_gpus(reduction: str) -> None:
    env = dict(os.environ)
    if not INSTALLED:
        env["PYTHONPATH"] = str(PYTHON_DIR) + os.pathsep + env.get("PYTHONPATH", "")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
           str(PYTHON_DIR / "examples" / "ddp_deterministic.py"), "--device", "cuda",
           "--dtype", "bf16", "--grad-reduction", reduction]
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    print(r.stdout)
    assert "trained twice on 2 rank(s) (cuda, nccl" in r.stdout
    assert "NCCL_NVLS_ENABLE=0" in r.stdout
    assert "bit-identical weights across ranks: 2 of 2" in r.stdout
