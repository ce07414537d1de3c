"""The C ABI of libsgemm_bi as ctypes declarations: a line-for-line mirror of
``include/sgemm_bi.h`` (ABI version 1).

Layer 1 of the package (raw FFI). Everything here is named as the header spells it: the
structs keep their C names and field names, each C enum becomes an :class:`enum.IntEnum`
whose members are the header's constants without the ``SGEMM_BI_<ENUM>_`` prefix, and
:func:`library` returns the loaded library with a prototype on every function.
``tests/test_capi.py`` checks the mirror against the header: every enum value, every
function, and each struct's ``sizeof`` and field offsets (compiled from the header by a C
compiler, and as the library itself reports them).

Nothing here imports torch, and loading is lazy: importing the package never touches the
library, so it imports on machines without the library's GPU or driver.
"""

from __future__ import annotations

import ctypes
import enum
import os
import sys
import threading
from ctypes import POINTER, Structure, c_bool, c_char_p, c_uint32, c_uint64, c_void_p
from pathlib import Path

SGEMM_BI_ABI_VERSION = 1
"""The ABI version this mirror was written against (``SGEMM_BI_ABI_VERSION``)."""


class Status(enum.IntEnum):
    """``enum sgemm_bi_status``: what a call did (0 is success; numbers are stable)."""

    OK = 0
    NULL_PARAMETER = 1
    PANIC = 2
    INVALID_ARGUMENT = 3
    OVERFLOW = 4
    BAD_LEADING_DIMENSION = 5
    OVERLAPPING_BATCHES = 6
    UNSUPPORTED_DTYPE = 7
    BUFFER_TOO_SMALL = 8
    DTYPE_MISMATCH = 9
    MISALIGNED = 10
    TIER_UNAVAILABLE = 11
    NO_DRIVER = 12
    NO_DEVICE = 13
    WRONG_DEVICE = 14
    DRIVER_ERROR = 15
    LAUNCH_FAILED = 16
    OTHER = 17
    OVERLAPPING_OPERANDS = 18
    INACCESSIBLE_MEMORY = 19
    BAD_OFFSETS = 20
    UNSUPPORTED = 21


class DType(enum.IntEnum):
    """``enum sgemm_bi_dtype``: element type of an operand, of the bias or of the output."""

    F32 = 0
    BF16 = 1
    F16 = 2


class Layout(enum.IntEnum):
    """``enum sgemm_bi_layout``: storage order of a matrix operand."""

    ROW_MAJOR = 0
    COL_MAJOR = 1


class Tier(enum.IntEnum):
    """``enum sgemm_bi_tier``: which arithmetic contract a call follows."""

    SCALAR = 0
    TENSOR_CORES = 1
    AUTO = 2


class OutputMode(enum.IntEnum):
    """``enum sgemm_bi_output_mode``: overwrite C, or accumulate into an f32 C."""

    OVERWRITE = 0
    ACCUMULATE_F32 = 1


class DeviceKind(enum.IntEnum):
    """``enum sgemm_bi_device_kind``: the CPU backend or a CUDA device."""

    CPU = 0
    CUDA = 1


class WeightLayout(enum.IntEnum):
    """``enum sgemm_bi_weight_layout``: ``KN`` is ``W[K,N]``, ``NK`` is torch's ``W[N,K]``."""

    KN = 0
    NK = 1


class GroupSplit(enum.IntEnum):
    """``enum sgemm_bi_group_split``: the dimension a grouped call's offsets split."""

    ROWS = 0
    COLUMNS = 1
    REDUCTION = 2


class OffsetsLocation(enum.IntEnum):
    """``enum sgemm_bi_offsets_location``: host or device memory."""

    HOST = 0
    DEVICE = 1


# The header's C enum name of each IntEnum (for the mirror test and for messages).
C_ENUMS: dict[str, type[enum.IntEnum]] = {
    "sgemm_bi_status": Status,
    "sgemm_bi_dtype": DType,
    "sgemm_bi_layout": Layout,
    "sgemm_bi_tier": Tier,
    "sgemm_bi_output_mode": OutputMode,
    "sgemm_bi_device_kind": DeviceKind,
    "sgemm_bi_weight_layout": WeightLayout,
    "sgemm_bi_group_split": GroupSplit,
    "sgemm_bi_offsets_location": OffsetsLocation,
}


class sgemm_bi_capabilities(Structure):
    """``struct sgemm_bi_capabilities``: what an engine's device is and can do."""

    _fields_ = [
        ("struct_size", c_uint32),
        ("device_kind", c_uint32),
        ("ordinal", c_uint32),
        ("tiers", c_uint32),
        ("compute_capability_major", c_uint32),
        ("compute_capability_minor", c_uint32),
        ("reserved", c_uint32 * 4),
    ]


class sgemm_bi_operand(Structure):
    """``struct sgemm_bi_operand``: one input matrix (dtype, layout, ld, batch stride)."""

    _fields_ = [
        ("dtype", c_uint32),
        ("layout", c_uint32),
        ("ld", c_uint64),
        ("batch_stride", c_uint64),
    ]


class sgemm_bi_output(Structure):
    """``struct sgemm_bi_output``: the output matrix C, logically M × N, row-major."""

    _fields_ = [
        ("mode", c_uint32),
        ("dtype", c_uint32),
        ("ldc", c_uint64),
        ("batch_stride", c_uint64),
    ]


class sgemm_bi_gemm_desc(Structure):
    """``struct sgemm_bi_gemm_desc``: a whole call ``C[b] = A[b] · B[b] (+ bias)``."""

    _fields_ = [
        ("struct_size", c_uint32),
        ("tier", c_uint32),
        ("m", c_uint64),
        ("n", c_uint64),
        ("k", c_uint64),
        ("batch", c_uint64),
        ("a", sgemm_bi_operand),
        ("b", sgemm_bi_operand),
        ("has_bias", c_uint32),
        ("bias_dtype", c_uint32),
        ("c", sgemm_bi_output),
        ("reserved", c_uint64 * 4),
    ]


class sgemm_bi_linear(Structure):
    """``struct sgemm_bi_linear``: a linear layer applied to M rows (the training triad)."""

    _fields_ = [
        ("struct_size", c_uint32),
        ("dtype", c_uint32),
        ("weight_layout", c_uint32),
        ("tier", c_uint32),
        ("m", c_uint64),
        ("k", c_uint64),
        ("n", c_uint64),
        ("reserved", c_uint64 * 2),
    ]


STRUCTS: tuple[type[Structure], ...] = (
    sgemm_bi_capabilities,
    sgemm_bi_operand,
    sgemm_bi_output,
    sgemm_bi_gemm_desc,
    sgemm_bi_linear,
)

_engine_p = c_void_p  # struct sgemm_bi_engine * (opaque)
_status = c_uint32  # sgemm_bi_status is uint32_t in C before C23

# name -> (restype, argtypes), in the header's order.
PROTOTYPES: dict[str, tuple[object, list[object]]] = {
    "sgemm_bi_abi_version": (c_uint32, []),
    "sgemm_bi_version": (c_char_p, []),
    "sgemm_bi_build_info": (c_char_p, []),
    "sgemm_bi_engine_build_info": (
        _status, [_engine_p, c_char_p, ctypes.c_size_t, POINTER(ctypes.c_size_t)],
    ),
    "sgemm_bi_engine_create": (_status, [c_uint32, c_uint32, POINTER(_engine_p)]),
    "sgemm_bi_engine_destroy": (_status, [_engine_p]),
    "sgemm_bi_engine_capabilities": (_status, [_engine_p, POINTER(sgemm_bi_capabilities)]),
    "sgemm_bi_engine_supports": (_status, [_engine_p, c_uint32, POINTER(c_bool)]),
    "sgemm_bi_engine_resolve_tier": (_status, [_engine_p, c_uint32, c_uint32, POINTER(c_uint32)]),
    "sgemm_bi_engine_set_pointer_checks": (_status, [_engine_p, c_bool]),
    "sgemm_bi_engine_take_device_error": (_status, [_engine_p]),
    "sgemm_bi_gemm_desc_dense": (
        _status,
        [c_uint64, c_uint64, c_uint64, c_uint32, POINTER(sgemm_bi_gemm_desc)],
    ),
    "sgemm_bi_gemm": (
        _status,
        [_engine_p, POINTER(sgemm_bi_gemm_desc), c_void_p, c_void_p, c_void_p, c_void_p, c_void_p],
    ),
    "sgemm_bi_forward": (
        _status,
        [_engine_p, POINTER(sgemm_bi_linear), c_void_p, c_void_p, c_void_p, c_uint32, c_void_p,
         c_void_p],
    ),
    "sgemm_bi_backward_dw": (
        _status,
        [_engine_p, POINTER(sgemm_bi_linear), c_void_p, c_void_p, c_void_p, c_uint32, c_uint32,
         c_void_p],
    ),
    "sgemm_bi_backward_dx": (
        _status,
        [_engine_p, POINTER(sgemm_bi_linear), c_void_p, c_void_p, c_void_p, c_void_p],
    ),
    "sgemm_bi_grouped_gemm": (
        _status,
        [_engine_p, POINTER(sgemm_bi_gemm_desc), c_uint32, POINTER(ctypes.c_int32), c_uint32,
         c_void_p, c_void_p, c_void_p, c_void_p, c_void_p],
    ),
    "sgemm_bi_last_error_message": (c_char_p, []),
    "sgemm_bi_status_name": (c_char_p, [c_uint32]),
}


class LibraryNotFoundError(OSError):
    """libsgemm_bi could not be found or loaded, or it has another ABI version."""


def _library_name() -> str:
    if sys.platform == "darwin":
        return "libsgemm_bi.dylib"
    if sys.platform == "win32":
        return "sgemm_bi.dll"
    return "libsgemm_bi.so"


def candidate_paths() -> list[Path]:
    """Where the library is looked for, in order.

    ``SGEMM_BI_LIB`` alone when it is set; otherwise the copy bundled in the package
    (``pip install``), then the repository's cargo outputs for development from a clone:
    ``$CARGO_TARGET_DIR/{release,debug}`` when that is set, then ``target/{release,debug}``
    of the repository this package's folder sits in.
    """
    override = os.environ.get("SGEMM_BI_LIB")
    if override:
        return [Path(override)]
    name = _library_name()
    here = Path(__file__).resolve().parent
    paths = [here / name]
    target_dirs = []
    if os.environ.get("CARGO_TARGET_DIR"):
        target_dirs.append(Path(os.environ["CARGO_TARGET_DIR"]))
    target_dirs.append(here.parent.parent / "target")  # <repo>/python/sgemm_bi -> <repo>
    for target in target_dirs:
        paths += [target / "release" / name, target / "debug" / name]
    return paths


_lock = threading.Lock()
_lib: ctypes.CDLL | None = None
_lib_path: Path | None = None


def _declare(lib: ctypes.CDLL) -> None:
    for name, (restype, argtypes) in PROTOTYPES.items():
        fn = getattr(lib, name)
        fn.restype = restype
        fn.argtypes = argtypes


def library() -> ctypes.CDLL:
    """The loaded library (loaded on first use; thread-safe).

    Raises :class:`LibraryNotFoundError` naming every path tried when there is none, or
    when the library's ABI version is not :data:`SGEMM_BI_ABI_VERSION`.
    """
    global _lib, _lib_path
    if _lib is not None:
        return _lib
    with _lock:
        if _lib is not None:
            return _lib
        tried = []
        for path in candidate_paths():
            if not path.is_file():
                tried.append(f"{path} (not there)")
                continue
            try:
                lib = ctypes.CDLL(str(path))
            except OSError as e:
                tried.append(f"{path} ({e})")
                continue
            _declare(lib)
            abi = lib.sgemm_bi_abi_version()
            if abi != SGEMM_BI_ABI_VERSION:
                raise LibraryNotFoundError(
                    f"{path} has ABI version {abi}, but this package binds ABI version "
                    f"{SGEMM_BI_ABI_VERSION}: install the package and the library from one "
                    "checkout"
                )
            _lib, _lib_path = lib, path
            return lib
        how = (
            "SGEMM_BI_LIB is set, but"
            if os.environ.get("SGEMM_BI_LIB")
            else "pip install ./python bundles it; in a clone, `cargo build --release -p "
            "sgemm-bi-capi` builds it; or set SGEMM_BI_LIB to its path. Tried:"
        )
        raise LibraryNotFoundError(f"libsgemm_bi not found ({how} {'; '.join(tried)})")


def library_path() -> Path:
    """The path of the loaded library (loading it if needed)."""
    library()
    assert _lib_path is not None
    return _lib_path


def status_name(status: int) -> str:
    """The header's name of a status code (``"SGEMM_BI_STATUS_NO_DRIVER"``)."""
    return library().sgemm_bi_status_name(status).decode()


def last_error_message() -> str:
    """The calling thread's message of the last call that returned a status."""
    return library().sgemm_bi_last_error_message().decode(errors="replace")
