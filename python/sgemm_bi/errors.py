"""Exceptions: one class per status code of the C ABI, carrying the library's message.

Every failed library call raises a subclass of :class:`SgemmBiError` whose message is the
library's ``sgemm_bi_last_error_message()`` (it names the operand or parameter) followed by
the status name. The classes also derive from the built-in exception that fits, so
``except ValueError`` catches a bad leading dimension or an unsupported dtype combination.
(None derives from :class:`TypeError`: Python turns a TypeError raised inside an operator
such as ``a @ b`` into "unsupported operand type(s)", which would hide the message.)

Input errors that the Python layer finds before calling the library (a non-tensor argument,
mismatched dtypes, devices or shapes) raise plain :class:`TypeError` or :class:`ValueError`.
"""

from __future__ import annotations

from ._capi import LibraryNotFoundError, Status, last_error_message, status_name

__all__ = [
    "SgemmBiError",
    "NullParameterError",
    "PanicError",
    "InvalidArgumentError",
    "ExtentOverflowError",
    "BadLeadingDimensionError",
    "OverlappingBatchesError",
    "UnsupportedDtypeError",
    "BufferTooSmallError",
    "DtypeMismatchError",
    "MisalignedError",
    "TierUnavailableError",
    "NoDriverError",
    "NoDeviceError",
    "WrongDeviceError",
    "DriverError",
    "LaunchFailedError",
    "OverlappingOperandsError",
    "InaccessibleMemoryError",
    "BadOffsetsError",
    "UnsupportedError",
    "LibraryNotFoundError",
    "check",
    "error_for",
]


class SgemmBiError(RuntimeError):
    """A call into libsgemm_bi failed (the base of every status-code exception).

    Attributes: ``status`` (a :class:`sgemm_bi._capi.Status`), ``status_name`` (the
    header's name, e.g. ``"SGEMM_BI_STATUS_NO_DRIVER"``) and ``detail`` (the library's
    message).
    """

    status: Status = Status.OTHER

    def __init__(self, detail: str, status: int | None = None) -> None:
        if status is not None:
            self.status = Status(status)
        self.detail = detail
        self.status_name = "SGEMM_BI_STATUS_" + self.status.name
        super().__init__(f"{detail} [{self.status_name}]")


class NullParameterError(SgemmBiError, ValueError):
    """A required pointer was NULL (``SGEMM_BI_STATUS_NULL_PARAMETER``)."""

    status = Status.NULL_PARAMETER


class PanicError(SgemmBiError):
    """A panic inside the library was caught at the boundary: a bug, please report it."""

    status = Status.PANIC


class InvalidArgumentError(SgemmBiError, ValueError):
    """An argument has a value the ABI does not define (``SGEMM_BI_STATUS_INVALID_ARGUMENT``)."""

    status = Status.INVALID_ARGUMENT


class ExtentOverflowError(SgemmBiError, OverflowError):
    """An operand's extent overflows the address space (``SGEMM_BI_STATUS_OVERFLOW``)."""

    status = Status.OVERFLOW


class BadLeadingDimensionError(SgemmBiError, ValueError):
    """A leading dimension is too small (``SGEMM_BI_STATUS_BAD_LEADING_DIMENSION``)."""

    status = Status.BAD_LEADING_DIMENSION


class OverlappingBatchesError(SgemmBiError, ValueError):
    """Batch entries of C overlap (``SGEMM_BI_STATUS_OVERLAPPING_BATCHES``)."""

    status = Status.OVERLAPPING_BATCHES


class UnsupportedDtypeError(SgemmBiError, ValueError):
    """The dtypes do not combine, e.g. f32 on the tensor-core tier
    (``SGEMM_BI_STATUS_UNSUPPORTED_DTYPE``)."""

    status = Status.UNSUPPORTED_DTYPE


class BufferTooSmallError(SgemmBiError, ValueError):
    """A typed buffer is too short (``SGEMM_BI_STATUS_BUFFER_TOO_SMALL``)."""

    status = Status.BUFFER_TOO_SMALL


class DtypeMismatchError(SgemmBiError, ValueError):
    """A typed buffer's dtype is not the descriptor's (``SGEMM_BI_STATUS_DTYPE_MISMATCH``)."""

    status = Status.DTYPE_MISMATCH


class MisalignedError(SgemmBiError, ValueError):
    """A device pointer is not aligned to its element size (``SGEMM_BI_STATUS_MISALIGNED``)."""

    status = Status.MISALIGNED


class TierUnavailableError(SgemmBiError):
    """The engine's device cannot run the requested tier (``SGEMM_BI_STATUS_TIER_UNAVAILABLE``)."""

    status = Status.TIER_UNAVAILABLE


class NoDriverError(SgemmBiError):
    """No CUDA driver could be loaded; the CPU backend still works
    (``SGEMM_BI_STATUS_NO_DRIVER``)."""

    status = Status.NO_DRIVER


class NoDeviceError(SgemmBiError):
    """There is no CUDA device with the requested ordinal (``SGEMM_BI_STATUS_NO_DEVICE``)."""

    status = Status.NO_DEVICE


class WrongDeviceError(SgemmBiError, ValueError):
    """The call needs another kind of engine (``SGEMM_BI_STATUS_WRONG_DEVICE``)."""

    status = Status.WRONG_DEVICE


class DriverError(SgemmBiError):
    """A CUDA driver call failed (``SGEMM_BI_STATUS_DRIVER_ERROR``)."""

    status = Status.DRIVER_ERROR


class LaunchFailedError(SgemmBiError):
    """A kernel launch failed (``SGEMM_BI_STATUS_LAUNCH_FAILED``)."""

    status = Status.LAUNCH_FAILED


class OverlappingOperandsError(SgemmBiError, ValueError):
    """The output shares memory with an input (``SGEMM_BI_STATUS_OVERLAPPING_OPERANDS``)."""

    status = Status.OVERLAPPING_OPERANDS


class InaccessibleMemoryError(SgemmBiError, ValueError):
    """A CUDA engine was given memory its device cannot use: a CPU tensor or other host
    memory, memory of another GPU, or a freed allocation
    (``SGEMM_BI_STATUS_INACCESSIBLE_MEMORY``)."""

    status = Status.INACCESSIBLE_MEMORY


class BadOffsetsError(SgemmBiError, ValueError):
    """A grouped call's offsets are not one non-decreasing end per group between 0 and the
    length of the dimension they split (``SGEMM_BI_STATUS_BAD_OFFSETS``): checked before the
    call runs, or, for offsets a grouped kernel read on the GPU, found there by an earlier
    call and raised by the next one (see :func:`sgemm_bi.check_device_errors`)."""

    status = Status.BAD_OFFSETS


class UnsupportedError(SgemmBiError, NotImplementedError):
    """A valid call this engine cannot run in this situation, e.g. a grouped call that must
    read its offsets back from the GPU during CUDA graph capture
    (``SGEMM_BI_STATUS_UNSUPPORTED``)."""

    status = Status.UNSUPPORTED


_BY_STATUS: dict[int, type[SgemmBiError]] = {
    cls.status: cls
    for cls in (
        NullParameterError,
        PanicError,
        InvalidArgumentError,
        ExtentOverflowError,
        BadLeadingDimensionError,
        OverlappingBatchesError,
        UnsupportedDtypeError,
        BufferTooSmallError,
        DtypeMismatchError,
        MisalignedError,
        TierUnavailableError,
        NoDriverError,
        NoDeviceError,
        WrongDeviceError,
        DriverError,
        LaunchFailedError,
        OverlappingOperandsError,
        InaccessibleMemoryError,
        BadOffsetsError,
        UnsupportedError,
    )
}


def error_for(status: int, detail: str) -> SgemmBiError:
    """The exception for a non-OK status code with the library's message ``detail``."""
    cls = _BY_STATUS.get(status)
    if cls is not None:
        return cls(detail)
    if status == Status.OTHER:
        return SgemmBiError(detail, status)
    # A code newer than this package: keep its number and name in the message.
    return SgemmBiError(f"{detail} (status {status}, {status_name(status)})", Status.OTHER)


def check(status: int) -> None:
    """Raises the exception for ``status`` (with the calling thread's last-error message)
    unless it is ``SGEMM_BI_STATUS_OK``. Call it right after the library call."""
    if status != Status.OK:
        raise error_for(status, last_error_message())
