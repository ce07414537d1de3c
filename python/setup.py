"""The one build step that pyproject.toml cannot declare: build libsgemm_bi with cargo and
put it in the wheel next to the package.

``pip install ./python`` (from a clone of the repository) runs
``cargo build --release -p sgemm-bi-capi`` in the repository root and copies the cdylib
that cargo reports into ``sgemm_bi/``. The wheel is tagged ``py3-none-<platform>``: it
holds a native library, but no CPython extension, so any Python 3 of that platform can
load it. On Linux the platform is ``manylinux_2_<N>_<arch>``, with N the newest glibc
symbol version the library needs (read from the library itself; it needs nothing but
glibc, libgcc_s and the C++-free system libraries manylinux allows, and opens libcuda at
run time): ``auditwheel show`` accepts the wheel under that tag (scripts/test-all checks
it). ``SGEMM_BI_WHEEL_PLATFORM`` overrides the platform tag.

``SGEMM_BI_PREBUILT_LIB=/path/to/libsgemm_bi.so`` bundles that file instead of running
cargo (for packaging on machines without a Rust toolchain).
"""

from __future__ import annotations

import json
import os
import platform
import re
import shutil
import subprocess
import sys
from pathlib import Path

from setuptools import Distribution, setup
from setuptools.command.build_py import build_py

try:  # setuptools >= 70.1 ships bdist_wheel itself
    from setuptools.command.bdist_wheel import bdist_wheel
except ImportError:  # pragma: no cover - older setuptools with the wheel package
    from wheel.bdist_wheel import bdist_wheel  # type: ignore[no-redef]

HERE = Path(__file__).resolve().parent
REPO = HERE.parent


def build_library() -> Path:
    """Builds libsgemm_bi (release) with cargo and returns the cdylib's path."""
    prebuilt = os.environ.get("SGEMM_BI_PREBUILT_LIB")
    if prebuilt:
        path = Path(prebuilt)
        if not path.is_file():
            sys.exit(f"SGEMM_BI_PREBUILT_LIB={prebuilt} is not a file")
        return path
    if not (REPO / "capi" / "Cargo.toml").is_file():
        sys.exit(
            f"sgemm-bi: {REPO} is not the sgemm-bi repository (no capi/Cargo.toml), so "
            "libsgemm_bi cannot be built: run `pip install ./python` from a clone, or set "
            "SGEMM_BI_PREBUILT_LIB"
        )
    cargo = os.environ.get("CARGO", "cargo")
    cmd = [cargo, "build", "--release", "-p", "sgemm-bi-capi",
           "--message-format=json-render-diagnostics"]
    print("sgemm-bi: " + " ".join(cmd), file=sys.stderr, flush=True)
    try:
        proc = subprocess.run(cmd, cwd=REPO, stdout=subprocess.PIPE, text=True, check=True)
    except FileNotFoundError:
        sys.exit("sgemm-bi: cargo not found: install Rust (https://rustup.rs) to build "
                 "libsgemm_bi, or set SGEMM_BI_PREBUILT_LIB")
    except subprocess.CalledProcessError as e:
        sys.exit(f"sgemm-bi: cargo failed with exit code {e.returncode} (its messages are above)")
    found = []
    for line in proc.stdout.splitlines():
        try:
            msg = json.loads(line)
        except ValueError:
            continue
        if msg.get("reason") != "compiler-artifact" or "cdylib" not in msg["target"]["kind"]:
            continue
        if msg["target"]["name"] == "sgemm_bi":
            found += [Path(f) for f in msg["filenames"]
                      if f.endswith((".so", ".dylib", ".dll"))]
    if not found:
        sys.exit("sgemm-bi: cargo reported no cdylib for sgemm-bi-capi")
    return found[0]


_built_library: Path | None = None


def glibc_needed(lib: Path) -> tuple[int, int] | None:
    """The newest ``GLIBC_x.y`` symbol version ``lib`` refers to (the version names of its
    dynamic string table), or None for a library that needs none."""
    found = {(int(a), int(b)) for a, b in re.findall(rb"GLIBC_(\d+)\.(\d+)", lib.read_bytes())}
    return max(found) if found else None


def manylinux_platform(plat: str) -> str:
    """``linux_<arch>`` → ``manylinux_<glibc>_<arch>`` for the library that was bundled."""
    tag = os.environ.get("SGEMM_BI_WHEEL_PLATFORM")
    if tag:
        return tag
    if not plat.startswith("linux_") or _built_library is None:
        return plat
    needed = glibc_needed(_built_library)
    if needed is None or platform.libc_ver()[0] != "glibc":
        return plat
    # manylinux2014 (glibc 2.17) is the oldest tag auditwheel and pip still use.
    major, minor = max(needed, (2, 17))
    return f"manylinux_{major}_{minor}_{plat[len('linux_'):]}"


class BuildPyWithLibrary(build_py):
    """build_py, then libsgemm_bi into the built package."""

    def run(self) -> None:
        global _built_library
        super().run()
        lib = build_library()
        _built_library = lib
        dest = Path(self.build_lib) / "sgemm_bi" / lib.name
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(lib, dest)
        print(f"sgemm-bi: bundled {lib} as {dest}", file=sys.stderr)


class PlatformWheel(bdist_wheel):
    """A wheel for one platform but any Python 3 (the library is loaded with ctypes)."""

    def finalize_options(self) -> None:
        super().finalize_options()
        self.root_is_pure = False

    def get_tag(self) -> tuple[str, str, str]:
        _, _, plat = super().get_tag()
        return "py3", "none", manylinux_platform(plat)


class BinaryDistribution(Distribution):
    """A distribution with a native library: installed to platlib, not purelib (auditwheel
    refuses shared libraries in purelib), though it has no extension module."""

    def has_ext_modules(self) -> bool:
        return True


setup(
    cmdclass={"build_py": BuildPyWithLibrary, "bdist_wheel": PlatformWheel},
    distclass=BinaryDistribution,
)
