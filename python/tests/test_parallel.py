"""sgemm_bi.parallel on the CPU: ColumnParallelLinear against the unsharded Linear for one
rank (in this process, without torch.distributed) and for one, two and three ranks of a
gloo group (spawned processes), the rank-ordered sums, and the DDP example under torchrun
with two CPU processes.
The same checks run on two GPUs in test_parallel_gpu.py."""

from __future__ import annotations

import os
import subprocess
import sys

import parallel_checks
import pytest
import torch
import torch.distributed as dist
from conftest import INSTALLED, PYTHON_DIR
from reference import assert_same_bits, rand

import sgemm_bi
from sgemm_bi.parallel import ColumnParallelLinear, all_reduce_rank_order

pytestmark = pytest.mark.skipif(not dist.is_available(), reason="torch.distributed is not built")

DTYPES = [torch.float32, torch.bfloat16]


@pytest.mark.parametrize("dtype", DTYPES + [torch.float16])
@pytest.mark.parametrize("dx_reduction", ["exact", "rank_order"])
@pytest.mark.parametrize("gather_output", [True, False])
def test_one_rank_is_the_unsharded_layer(dtype: torch.dtype, dx_reduction: str,
                                         gather_output: bool) -> None:
    assert not dist.is_initialized()
    parallel_checks.compare_with_unsharded("cpu", dtype, "auto", None, dx_reduction,
                                           gather_output)


def test_one_rank_training() -> None:
    parallel_checks.train_matches_unsharded("cpu", torch.float32, "scalar", None)


def test_layer_construction(gen) -> None:
    torch.manual_seed(3)
    full = sgemm_bi.Linear(6, 5, tier="scalar")
    torch.manual_seed(3)
    cp = ColumnParallelLinear(6, 5, tier="scalar")  # draws the same weights as the full layer
    assert (cp.rank, cp.world_size, cp.out_range) == (0, 1, (0, 5))
    assert_same_bits(cp.weight, full.weight.detach(), "weight")
    assert_same_bits(cp.bias, full.bias.detach(), "bias")
    assert list(cp.state_dict()) == ["weight", "bias"]
    assert "rank=0/1 holds [0:5]" in repr(cp) and "dx_reduction='exact'" in repr(cp)
    shard = ColumnParallelLinear.from_linear(full)
    assert shard.tier == "scalar" and shard.weight is not full.weight
    nb = ColumnParallelLinear(4, 3, bias=False, dtype=torch.bfloat16)
    assert nb.bias is None and nb.weight.dtype == torch.bfloat16
    x = rand((2, 3, 4), torch.bfloat16, gen)
    assert nb(x).shape == (2, 3, 3)
    with pytest.raises(ValueError, match="dx_reduction is 'sum'"):
        ColumnParallelLinear(2, 2, dx_reduction="sum")
    with pytest.raises(ValueError, match="tier is 'tc'"):
        ColumnParallelLinear(2, 2, tier="tc")
    with pytest.raises(TypeError, match="must be a torch.nn.Linear"):
        ColumnParallelLinear.from_linear(torch.nn.Conv1d(1, 1, 1))
    with pytest.raises(ValueError, match="in_features"):
        nb(rand((2, 5), torch.bfloat16, gen))
    with pytest.raises(RuntimeError, match="not initialized"):
        ColumnParallelLinear(2, 2, group=object())
    t = rand((3,), torch.float32, gen)
    r = all_reduce_rank_order(t)
    assert_same_bits(r, t, "one rank") and r is not t


def test_autocast(gen) -> None:
    torch.manual_seed(0)
    full = sgemm_bi.Linear(8, 6)
    cp = ColumnParallelLinear.from_linear(full)
    x = rand((4, 8), torch.float32, gen)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y, y_ref = cp(x), full(x)
    assert y.dtype == torch.bfloat16
    assert_same_bits(y, y_ref, "autocast")


def test_gloo_ranks() -> None:
    """Three processes in a gloo group: the layer over all three ranks (unequal shards
    5/4/4 of 13 columns; a rank-ordered sum of three partials, where the order matters),
    over ranks 0 and 1, and over each rank alone; all_reduce_rank_order and the DDP hook."""
    parallel_checks.spawn(3, "cpu", "all_checks", DTYPES, ["auto"])


def _torchrun(*args: str, nproc: int = 2) -> str:
    env = dict(os.environ)
    if not INSTALLED:
        env["PYTHONPATH"] = str(PYTHON_DIR) + os.pathsep + env.get("PYTHONPATH", "")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone",
           f"--nproc_per_node={nproc}", str(PYTHON_DIR / "examples" / "ddp_deterministic.py"),
           *args]
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


def test_ddp_example_two_cpu_processes() -> None:
    out = _torchrun("--device", "cpu", "--steps", "4")
    assert "trained twice on 2 rank(s) (cpu, gloo" in out, out
    assert "bit-identical weights across the two runs on every rank" in out
    assert "bit-identical weights across ranks: 2 of 2" in out
    assert "checksum sha256:" in out
