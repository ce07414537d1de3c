"""The examples run (small settings, on the CPU) and pass their own checks."""

from __future__ import annotations

import os
import subprocess
import sys

from conftest import INSTALLED, PYTHON_DIR


def _run(*args: str) -> str:
    env = dict(os.environ)
    if not INSTALLED:
        env["PYTHONPATH"] = str(PYTHON_DIR) + os.pathsep + env.get("PYTHONPATH", "")
    r = subprocess.run([sys.executable, *args], env=env, capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


def test_train_deterministic() -> None:
    out = _run(str(PYTHON_DIR / "examples" / "train_deterministic.py"), "--device", "cpu",
               "--steps", "4")
    assert "bit-identical weights" in out
    assert "batch invariance under the mode" in out


def test_batch_invariance_example() -> None:
    out = _run(str(PYTHON_DIR / "examples" / "batch_invariance.py"), "--device", "cpu",
               "--dtype", "f32", "--k", "96", "--n", "32", "--max-m", "256")
    assert "sgemm-bi: 0 of" in out


def test_moe_block_example() -> None:
    out = _run(str(PYTHON_DIR / "examples" / "moe_block.py"), "--device", "cpu", "--steps", "2",
               "--tokens", "48")
    assert "bit-identical weights" in out
    assert "sgemm-bi: a token alone vs in a batch of 48: 0 of" in out
    assert "moe_block: ok" in out
