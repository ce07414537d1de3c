"""Test setup: which sgemm_bi is imported, the ``gpu`` marker, shared fixtures.

By default the tests import the package from this source tree (python/ is put first on
sys.path), so they run from a clone without installing anything: the library then comes
from SGEMM_BI_LIB or the repository's target/{release,debug}. With
SGEMM_BI_TEST_INSTALLED=1 (scripts/test-all) they import the installed package instead,
with the library bundled in its wheel.

Tests marked ``gpu`` need a CUDA device: without one they are skipped, or fail when
SGEMM_BI_REQUIRE_GPU=1 (the GPU runner sets it).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

PYTHON_DIR = Path(__file__).resolve().parents[1]
REPO = PYTHON_DIR.parent
INSTALLED = os.environ.get("SGEMM_BI_TEST_INSTALLED") == "1"
if not INSTALLED:
    sys.path.insert(0, str(PYTHON_DIR))

import torch  # noqa: E402

import sgemm_bi  # noqa: E402

if INSTALLED:
    assert Path(sgemm_bi.__file__).resolve().parent.parent != PYTHON_DIR, (
        "SGEMM_BI_TEST_INSTALLED=1 but sgemm_bi was imported from the source tree"
    )

HAS_GPU = torch.cuda.is_available()
REQUIRE_GPU = os.environ.get("SGEMM_BI_REQUIRE_GPU") == "1"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "gpu: needs a CUDA GPU (skipped without one; a failure when SGEMM_BI_REQUIRE_GPU=1)",
    )


def pytest_report_header(config: pytest.Config) -> list[str]:
    try:
        lib = f"{sgemm_bi.library_path()} (version {sgemm_bi.library_version()})"
    except Exception as e:  # reported, and the tests that need it fail with the reason
        lib = f"not loadable: {e}"
    gpu = torch.cuda.get_device_name(0) if HAS_GPU else "none"
    return [
        f"sgemm_bi {sgemm_bi.__version__} from {Path(sgemm_bi.__file__).parent}",
        f"libsgemm_bi: {lib}",
        f"torch {torch.__version__}, GPU: {gpu}",
    ]


def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.get_closest_marker("gpu") and not HAS_GPU:
        if REQUIRE_GPU:
            pytest.fail("SGEMM_BI_REQUIRE_GPU=1, but torch sees no CUDA device")
        pytest.skip("needs a CUDA GPU")


@pytest.fixture
def gen() -> torch.Generator:
    """A seeded CPU generator: every test draws reproducible inputs."""
    return torch.Generator().manual_seed(1234)
