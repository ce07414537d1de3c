"""The low-level engine: one device, raw pointers, an explicit stream.

Layer 2 of the package: :class:`Engine` wraps an ``sgemm_bi_engine`` handle and turns every
status code into an exception (:mod:`sgemm_bi.errors`). Its calls take addresses (``int``,
or an object with ``data_ptr()`` such as a torch tensor, or a numpy array), descriptors
(:class:`GemmDesc`, :class:`LinearDesc`) and, on a CUDA engine, a stream (a
``cudaStream_t`` as ``int``, a ``torch.cuda.Stream``, or ``None`` for the legacy default
stream). On the CPU engine the addresses are host addresses and every call completes
before it returns; on a CUDA engine they are device addresses of the device's primary
context (the one torch uses) and the work is enqueued on the stream without synchronizing.

The library cannot see allocation sizes: the caller guarantees that each buffer spans what
its descriptor says. The torch layer (:mod:`sgemm_bi.ops`) builds descriptors from tensors
and is the safe way in.

:meth:`Engine.forward`, :meth:`Engine.backward_dw` and :meth:`Engine.backward_dx` also take
sgemm-bi 0.1's positional pointer form (``forward(y_ptr, x_ptr, w_ptr, bias_ptr, m, k, n,
dtype, stream, tensor_cores)``, W stored ``[K, N]``), told apart from the descriptor form by
the first argument. Library failures raise :class:`~sgemm_bi.errors.SgemmBiError`, a
:class:`RuntimeError`, in both forms.

This module does not import torch.
"""

from __future__ import annotations

import ctypes
import json
import operator
import sys
import threading
from dataclasses import dataclass
from typing import Any, overload

from . import _capi
from ._capi import (
    DeviceKind,
    DType,
    Layout,
    OutputMode,
    Tier,
    WeightLayout,
    sgemm_bi_capabilities,
    sgemm_bi_gemm_desc,
    sgemm_bi_linear,
    sgemm_bi_operand,
    sgemm_bi_output,
)
from .errors import check

__all__ = [
    "Engine",
    "Capabilities",
    "GemmDesc",
    "LinearDesc",
    "Operand",
    "Output",
    "DType",
    "Layout",
    "Tier",
    "OutputMode",
    "DeviceKind",
    "WeightLayout",
    "TIER_NAMES",
    "parse_tier",
    "engine_for",
    "check_device_errors",
]

GemmDesc = sgemm_bi_gemm_desc
"""``struct sgemm_bi_gemm_desc`` (see :meth:`Engine.dense_desc`)."""
LinearDesc = sgemm_bi_linear
"""``struct sgemm_bi_linear`` (see :meth:`Engine.linear_desc`)."""
Operand = sgemm_bi_operand
"""``struct sgemm_bi_operand``."""
Output = sgemm_bi_output
"""``struct sgemm_bi_output``."""

TIER_NAMES: dict[Tier, str] = {Tier.SCALAR: "scalar", Tier.TENSOR_CORES: "tensor_cores",
                                Tier.AUTO: "auto"}
"""The Python spelling of each tier."""


def parse_tier(tier: Tier | str | int) -> Tier:
    """A :class:`Tier` from ``"scalar"``, ``"tensor_cores"``, ``"auto"`` or a :class:`Tier`
    value. The engine resolves ``"auto"`` (tensor cores for bf16/f16 on a CUDA engine that
    runs them, the scalar tier otherwise), as it does for C and Rust callers."""
    if isinstance(tier, str):
        for t, name in TIER_NAMES.items():
            if tier == name:
                return t
        raise ValueError(f"tier is {tier!r}: expected 'scalar', 'tensor_cores' or 'auto'")
    return Tier(tier)


_DTYPE_NAMES = {"f32": DType.F32, "float32": DType.F32, "bf16": DType.BF16,
                "bfloat16": DType.BF16, "f16": DType.F16, "float16": DType.F16,
                "half": DType.F16}


def _dtype(d: Any) -> DType:
    """A :class:`DType` from itself, a name (``"bf16"``) or a torch dtype."""
    if isinstance(d, DType):
        return d
    if isinstance(d, str):
        if d in _DTYPE_NAMES:
            return _DTYPE_NAMES[d]
        raise ValueError(f"dtype is {d!r}: expected one of {sorted(_DTYPE_NAMES)}")
    if isinstance(d, int):
        return DType(d)
    name = str(d).removeprefix("torch.")  # torch.float32 -> "float32" (no torch import here)
    if name in _DTYPE_NAMES:
        return _DTYPE_NAMES[name]
    raise TypeError(f"dtype {d!r} is not supported: sgemm-bi takes float32, bfloat16, float16")


def _address(p: Any, name: str) -> int | None:
    """The address of a buffer argument: ``None``, an ``int``, an object with
    ``data_ptr()`` (a torch tensor) or with ``ctypes.data`` (a numpy array)."""
    if p is None:
        return None
    if isinstance(p, int):
        return p
    if hasattr(p, "data_ptr"):
        return int(p.data_ptr())
    if hasattr(p, "ctypes"):
        return int(p.ctypes.data)
    raise TypeError(
        f"{name} must be an address (int), a tensor, a numpy array or None, not "
        f"{type(p).__name__}"
    )


def _stream(s: Any) -> int | None:
    if s is None or isinstance(s, int):
        return s
    if hasattr(s, "cuda_stream"):  # torch.cuda.Stream / ExternalStream
        return int(s.cuda_stream)
    raise TypeError(f"stream must be a cudaStream_t (int), a torch.cuda.Stream or None, "
                    f"not {type(s).__name__}")


def _parse_device(device: Any) -> tuple[DeviceKind, int]:
    """``("cpu" | "cuda" | "cuda:N" | N | torch.device)`` → (kind, ordinal)."""
    if isinstance(device, int):
        return DeviceKind.CUDA, device
    if isinstance(device, str):
        kind, _, index = device.partition(":")
        idx = int(index) if index else None
    elif hasattr(device, "type"):  # torch.device
        kind, idx = device.type, device.index
    else:
        raise TypeError(f"device must be 'cpu', 'cuda[:N]', an ordinal or a torch.device, "
                        f"not {type(device).__name__}")
    if kind == "cpu":
        if idx not in (None, 0):
            raise ValueError(f"device {device!r}: the CPU backend has only ordinal 0")
        return DeviceKind.CPU, 0
    if kind == "cuda":
        if idx is None:
            idx = _current_cuda_device()
        return DeviceKind.CUDA, idx
    raise ValueError(f"device {device!r} is not supported: sgemm-bi runs on 'cpu' and 'cuda'")


def _current_cuda_device() -> int:
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available():
        return int(torch.cuda.current_device())
    return 0


def _descriptor_form(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    """Whether an Engine call is the descriptor form (its first argument a
    :class:`LinearDesc`, or ``layer=`` given) rather than sgemm-bi 0.1's pointer form."""
    if args:
        return isinstance(args[0], LinearDesc)
    return "layer" in kwargs


def _size(v: Any, name: str) -> int:
    """A dimension of a 0.1-form call: a non-negative integer."""
    try:
        i = operator.index(v)
    except TypeError:
        raise TypeError(f"{name} must be an int, not {type(v).__name__}") from None
    if i < 0:
        raise ValueError(f"{name} is {i}: sizes must be >= 0")
    return i


def _layer_01(m: Any, k: Any, n: Any, dtype: Any, tensor_cores: Any) -> LinearDesc:
    """The layer descriptor of a 0.1-form call: W stored ``[K, N]``, the tier from
    ``tensor_cores``."""
    if not isinstance(tensor_cores, bool):
        raise TypeError(f"tensor_cores is {tensor_cores!r}: it must be True or False")
    return Engine.linear_desc(
        _size(m, "m"), _size(k, "k"), _size(n, "n"), _dtype(dtype), WeightLayout.KN,
        Tier.TENSOR_CORES if tensor_cores else Tier.SCALAR,
    )


@dataclass(frozen=True)
class Capabilities:
    """What an engine's device is and can do (``sgemm_bi_capabilities``)."""

    device_kind: DeviceKind
    """The CPU backend or a CUDA device."""
    ordinal: int
    """The CUDA device ordinal (0 on the CPU)."""
    tiers: frozenset[Tier]
    """The tiers the engine can run."""
    compute_capability: tuple[int, int] | None
    """CUDA compute capability ``(major, minor)``, ``None`` on the CPU."""

    @property
    def tier_names(self) -> list[str]:
        """The runnable tiers by name, in ``Tier`` order (``["scalar"]``)."""
        return [TIER_NAMES[t] for t in sorted(self.tiers)]


class Engine:
    """A GEMM engine bound to one device: ``Engine("cpu")``, ``Engine("cuda:0")``,
    ``Engine(0)`` or ``Engine(torch.device(...))``. An integer is a CUDA device ordinal, as
    in sgemm-bi 0.1 (``Engine(0)`` is ``Engine("cuda:0")``); the CPU backend is only ever
    ``"cpu"`` (or ``torch.device("cpu")``).

    Creating a CUDA engine loads the library's kernels (JIT-compiled by the driver once per
    process and device); without a driver it raises :class:`~sgemm_bi.errors.NoDriverError`,
    without that device :class:`~sgemm_bi.errors.NoDeviceError`. One engine may be used by
    any number of threads at once. :meth:`close` (or ``with Engine(...) as e:``) releases it;
    a CUDA engine's enqueued work must have completed by then (``close`` synchronizes the
    device through torch when torch has initialized CUDA).

    The torch layer keeps one shared engine per device (:func:`engine_for`); create your
    own only for raw-pointer work.
    """

    def __init__(self, device: Any = "cpu") -> None:
        self._handle: int | None = None
        self._shared = False  # set by engine_for: never destroyed, not even at exit
        kind, ordinal = _parse_device(device)
        lib = _capi.library()
        handle = ctypes.c_void_p()
        check(lib.sgemm_bi_engine_create(kind, ordinal, ctypes.byref(handle)))
        self._handle = handle.value
        self._lib = lib
        caps = sgemm_bi_capabilities(struct_size=ctypes.sizeof(sgemm_bi_capabilities))
        check(lib.sgemm_bi_engine_capabilities(self._handle, ctypes.byref(caps)))
        cc = (caps.compute_capability_major, caps.compute_capability_minor)
        self._caps = Capabilities(
            device_kind=DeviceKind(caps.device_kind),
            ordinal=caps.ordinal,
            tiers=frozenset(t for t in Tier if caps.tiers & (1 << t)),
            compute_capability=None if caps.device_kind == DeviceKind.CPU else cc,
        )

    # -- description ---------------------------------------------------------------------

    @property
    def device(self) -> str:
        """``"cpu"`` or ``"cuda:N"``."""
        c = self._caps
        return "cpu" if c.device_kind == DeviceKind.CPU else f"cuda:{c.ordinal}"

    @property
    def capabilities(self) -> Capabilities:
        """The device's kind, ordinal, compute capability and runnable tiers."""
        return self._caps

    @property
    def handle(self) -> int:
        """The raw ``sgemm_bi_engine *`` (for calls through :func:`sgemm_bi._capi.library`)."""
        if self._handle is None:
            raise ValueError("this engine is closed")
        return self._handle

    def supports(self, tier: Tier | str) -> bool:
        """Whether the engine can run ``tier`` (asks the library)."""
        out = ctypes.c_bool()
        check(self._lib.sgemm_bi_engine_supports(self.handle, parse_tier(tier), ctypes.byref(out)))
        return bool(out.value)

    def resolve_tier(self, tier: Tier | str, dtype: Any) -> Tier:
        """The tier a call of ``tier`` with ``dtype`` inputs runs on this engine (asks the
        library): ``tier`` itself, or for ``"auto"`` tensor cores for bf16/f16 on a CUDA engine
        that runs them and the scalar tier otherwise."""
        out = ctypes.c_uint32()
        check(self._lib.sgemm_bi_engine_resolve_tier(self.handle, parse_tier(tier),
                                                      _dtype(dtype), ctypes.byref(out)))
        return Tier(out.value)

    def take_device_error(self) -> None:
        """Raises :class:`~sgemm_bi.errors.BadOffsetsError` for the bad group end a grouped
        kernel of this engine found on the GPU since the last look, and clears it
        (``sgemm_bi_engine_take_device_error``); returns when there is none (always on the
        CPU engine, which checks offsets before it runs).

        A grouped call whose offsets are on the GPU and that runs as one grouped kernel does
        not wait for them: the kernel clamps a bad end and reports it when it runs, so a look
        sees it once the kernel has run (certainly after synchronizing its stream). Every
        grouped call looks first and raises the report instead of running."""
        check(self._lib.sgemm_bi_engine_take_device_error(self.handle))

    def build_info(self) -> dict[str, Any]:
        """:func:`sgemm_bi.build_info` plus ``"loaded"``: for each kernel module of this
        engine's device, the image it runs (``"machine code"`` for ``"arch"``, or ``"ptx"``,
        compiled by the driver) and how many entry points it has loaded so far (modules load
        with their first call; empty on the CPU)."""
        length = ctypes.c_size_t()
        status = self._lib.sgemm_bi_engine_build_info(self.handle, None, 0, ctypes.byref(length))
        if status not in (_capi.Status.OK, _capi.Status.BUFFER_TOO_SMALL):
            check(status)
        buf = ctypes.create_string_buffer(length.value + 1)
        check(self._lib.sgemm_bi_engine_build_info(
            self.handle, buf, len(buf), ctypes.byref(length)))
        return json.loads(buf.value.decode())

    def __repr__(self) -> str:
        state = "closed" if self._handle is None else ", ".join(self._caps.tier_names)
        return f"Engine({self.device!r}: {state})"

    # -- descriptors ---------------------------------------------------------------------

    @staticmethod
    def dense_desc(m: int, n: int, k: int, dtype: Any = DType.F32) -> GemmDesc:
        """``sgemm_bi_gemm_desc_dense``: a dense, unbatched, row-major ``C[M,N] = A[M,K] ·
        B[K,N]`` on the scalar tier without bias. Change any field before :meth:`gemm`."""
        desc = GemmDesc()
        check(_capi.library().sgemm_bi_gemm_desc_dense(m, n, k, _dtype(dtype), ctypes.byref(desc)))
        return desc

    @staticmethod
    def linear_desc(
        m: int,
        k: int,
        n: int,
        dtype: Any = DType.F32,
        weight_layout: WeightLayout = WeightLayout.NK,
        tier: Tier | str = Tier.SCALAR,
    ) -> LinearDesc:
        """A ``sgemm_bi_linear``: M rows, K input and N output features, W stored as
        ``weight_layout`` says (``NK`` is torch's ``[out, in]``)."""
        return LinearDesc(
            struct_size=ctypes.sizeof(LinearDesc),
            dtype=_dtype(dtype),
            weight_layout=WeightLayout(weight_layout),
            tier=parse_tier(tier),
            m=m,
            k=k,
            n=n,
        )

    # -- calls ---------------------------------------------------------------------------

    def gemm(self, desc: GemmDesc, a: Any, b: Any, c: Any, *, bias: Any = None,
             stream: Any = None) -> None:
        """``sgemm_bi_gemm``: ``C[b] = A[b] · B[b] (+ bias)`` as ``desc`` describes.

        Every buffer must span what ``desc`` gives it; ``bias`` must be ``None`` unless
        ``desc.has_bias`` is 1.
        """
        check(self._lib.sgemm_bi_gemm(
            self.handle, ctypes.byref(desc), _address(a, "a"), _address(b, "b"),
            _address(bias, "bias"), _address(c, "c"), _stream(stream)))

    # The 0.1 forms. sgemm-bi 0.1's Engine took raw pointers and sizes positionally, W
    # stored [K, N], an f32 bias, dW accumulated in f32 and ``tensor_cores`` as a bool.
    # ``forward``, ``backward_dw`` and ``backward_dx`` accept both that form and the
    # descriptor form above them, told apart by the first argument: a :class:`LinearDesc`
    # (or a ``layer=`` keyword) is the descriptor form, anything else the 0.1 form. The
    # @overload stubs give each form its own signature for readers and type checkers.

    @overload
    def forward(self, layer: LinearDesc, x: Any, w: Any, y: Any, *, bias: Any = None,
                bias_dtype: Any = None, stream: Any = None) -> None: ...

    @overload
    def forward(self, y_ptr: Any, x_ptr: Any, w_ptr: Any, bias_ptr: Any, m: int, k: int,
                n: int, dtype: Any, stream: Any = None, tensor_cores: bool = False) -> None: ...

    def forward(self, *args: Any, **kwargs: Any) -> None:
        """``sgemm_bi_forward``: ``Y[M,N] = X[M,K] · W (+ bias[N])``. Two forms:

        ``forward(layer, x, w, y, *, bias=None, bias_dtype=None, stream=None)``
            W as ``layer`` says; ``bias_dtype`` is f32 or the layer's dtype (default: the
            layer's dtype).
        ``forward(y_ptr, x_ptr, w_ptr, bias_ptr, m, k, n, dtype, stream=None, tensor_cores=False)``
            sgemm-bi 0.1's form: X ``[M,K]``, W ``[K,N]`` and Y ``[M,N]`` dense row-major in
            ``dtype`` (``"float32"``/``"f32"``, ``"bfloat16"``/``"bf16"``,
            ``"float16"``/``"f16"``/``"half"``), ``bias_ptr`` an f32 ``[N]`` or ``None``;
            ``tensor_cores`` picks the tensor-core tier (``True``) or the scalar tier.
        """
        if _descriptor_form(args, kwargs):
            self._forward(*args, **kwargs)
        else:
            self._forward_01(*args, **kwargs)

    @overload
    def backward_dw(self, layer: LinearDesc, dy: Any, x: Any, dw: Any, *,
                    mode: OutputMode = OutputMode.OVERWRITE, dw_dtype: Any = None,
                    stream: Any = None) -> None: ...

    @overload
    def backward_dw(self, dw_ptr: Any, dy_ptr: Any, x_ptr: Any, m: int, k: int, n: int,
                    dtype: Any, stream: Any = None, tensor_cores: bool = False) -> None: ...

    def backward_dw(self, *args: Any, **kwargs: Any) -> None:
        """``sgemm_bi_backward_dw``: ``dW = Xᵀ · dY`` (reduced over the M rows in ascending
        order). Two forms:

        ``backward_dw(layer, dy, x, dw, *, mode=OutputMode.OVERWRITE, dw_dtype=None, stream=None)``
            dW in W's layout, overwritten in ``dw_dtype`` (default: the layer's dtype) or
            accumulated into f32 (``mode=OutputMode.ACCUMULATE_F32``, ``dw_dtype`` f32).
        ``backward_dw(dw_ptr, dy_ptr, x_ptr, m, k, n, dtype, stream=None, tensor_cores=False)``
            sgemm-bi 0.1's form: dY ``[M,N]`` and X ``[M,K]`` in ``dtype``, dW an f32
            ``[K,N]`` accumulated into (``dW += Xᵀ · dY``, one f32 add per element).
        """
        if _descriptor_form(args, kwargs):
            self._backward_dw(*args, **kwargs)
        else:
            self._backward_dw_01(*args, **kwargs)

    @overload
    def backward_dx(self, layer: LinearDesc, dy: Any, w: Any, dx: Any, *,
                    stream: Any = None) -> None: ...

    @overload
    def backward_dx(self, dx_ptr: Any, dy_ptr: Any, w_ptr: Any, m: int, k: int, n: int,
                    dtype: Any, stream: Any = None, tensor_cores: bool = False) -> None: ...

    def backward_dx(self, *args: Any, **kwargs: Any) -> None:
        """``sgemm_bi_backward_dx``: ``dX[M,K] = dY[M,N] · Wᵀ`` in the layer's dtype. Two
        forms:

        ``backward_dx(layer, dy, w, dx, *, stream=None)``
            W as ``layer`` says.
        ``backward_dx(dx_ptr, dy_ptr, w_ptr, m, k, n, dtype, stream=None, tensor_cores=False)``
            sgemm-bi 0.1's form: dY ``[M,N]``, W ``[K,N]`` and dX ``[M,K]`` in ``dtype``.
        """
        if _descriptor_form(args, kwargs):
            self._backward_dx(*args, **kwargs)
        else:
            self._backward_dx_01(*args, **kwargs)

    # The descriptor forms.

    def _forward(self, layer: LinearDesc, x: Any, w: Any, y: Any, *, bias: Any = None,
                 bias_dtype: Any = None, stream: Any = None) -> None:
        bd = DType(layer.dtype) if bias_dtype is None else _dtype(bias_dtype)
        check(self._lib.sgemm_bi_forward(
            self.handle, ctypes.byref(layer), _address(x, "x"), _address(w, "w"),
            _address(bias, "bias"), bd, _address(y, "y"), _stream(stream)))

    def _backward_dw(self, layer: LinearDesc, dy: Any, x: Any, dw: Any, *,
                     mode: OutputMode = OutputMode.OVERWRITE, dw_dtype: Any = None,
                     stream: Any = None) -> None:
        if dw_dtype is None:
            dw_dtype = DType.F32 if mode == OutputMode.ACCUMULATE_F32 else DType(layer.dtype)
        check(self._lib.sgemm_bi_backward_dw(
            self.handle, ctypes.byref(layer), _address(dy, "dy"), _address(x, "x"),
            _address(dw, "dw"), OutputMode(mode), _dtype(dw_dtype), _stream(stream)))

    def _backward_dx(self, layer: LinearDesc, dy: Any, w: Any, dx: Any, *,
                     stream: Any = None) -> None:
        check(self._lib.sgemm_bi_backward_dx(
            self.handle, ctypes.byref(layer), _address(dy, "dy"), _address(w, "w"),
            _address(dx, "dx"), _stream(stream)))

    # The 0.1 forms: a [K, N] layer descriptor, then the descriptor forms.

    def _forward_01(self, y_ptr: Any, x_ptr: Any, w_ptr: Any, bias_ptr: Any, m: int, k: int,
                    n: int, dtype: Any, stream: Any = None, tensor_cores: bool = False) -> None:
        self._forward(_layer_01(m, k, n, dtype, tensor_cores), x_ptr, w_ptr, y_ptr,
                      bias=bias_ptr, bias_dtype=DType.F32, stream=stream)

    def _backward_dw_01(self, dw_ptr: Any, dy_ptr: Any, x_ptr: Any, m: int, k: int, n: int,
                        dtype: Any, stream: Any = None, tensor_cores: bool = False) -> None:
        self._backward_dw(_layer_01(m, k, n, dtype, tensor_cores), dy_ptr, x_ptr, dw_ptr,
                          mode=OutputMode.ACCUMULATE_F32, dw_dtype=DType.F32, stream=stream)

    def _backward_dx_01(self, dx_ptr: Any, dy_ptr: Any, w_ptr: Any, m: int, k: int, n: int,
                        dtype: Any, stream: Any = None, tensor_cores: bool = False) -> None:
        self._backward_dx(_layer_01(m, k, n, dtype, tensor_cores), dy_ptr, w_ptr, dx_ptr,
                          stream=stream)

    # -- lifetime ------------------------------------------------------------------------

    def close(self) -> None:
        """Releases the engine (idempotent). On CUDA, work it enqueued must be complete:
        when torch has initialized CUDA this synchronizes the device first."""
        handle, self._handle = self._handle, None
        if handle is None:
            return
        if self._caps.device_kind == DeviceKind.CUDA:
            torch = sys.modules.get("torch")
            if torch is not None and torch.cuda.is_initialized():
                torch.cuda.synchronize(self._caps.ordinal)
        check(self._lib.sgemm_bi_engine_destroy(handle))

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        if getattr(self, "_shared", True):
            return
        try:
            self.close()
        except Exception:  # interpreter shutdown: nothing left to report to
            pass


_shared: dict[tuple[DeviceKind, int], Engine] = {}
_shared_lock = threading.Lock()


def engine_for(device: Any) -> Engine:
    """The process-wide engine of ``device`` (created on first use, kept until exit).

    The torch layer runs every call on these; they are never closed, so work enqueued on
    any stream can outlive every Python reference.
    """
    key = _parse_device(device)
    e = _shared.get(key)
    if e is None:
        with _shared_lock:
            e = _shared.get(key)
            if e is None:
                e = Engine("cpu" if key[0] == DeviceKind.CPU else f"cuda:{key[1]}")
                e._shared = True
                _shared[key] = e
    return e


def check_device_errors(device: Any = None) -> None:
    """Raises :class:`~sgemm_bi.errors.BadOffsetsError` for a bad group end that a grouped
    kernel found on the GPU, and clears it (:meth:`Engine.take_device_error` of the shared
    engines the torch layer runs on).

    ``grouped_mm`` with ``offs`` on the GPU, where one grouped kernel reads them (an H200's
    tensor-core tier), never waits for them: the kernel clamps a bad end (nothing outside
    the tensors is touched) and reports the first one when it runs. The next ``grouped_mm``
    on that device (a form with ``offs``) raises it instead of running; this asks without a
    call.
    The report is there once the kernel has run: synchronize first
    (``torch.cuda.synchronize()``) to be certain to see it.

    ``device`` (``"cuda:0"``, a ``torch.device``, an ordinal): that device's engine; ``None``:
    every device's engine created so far, raising the first report found. A device with no
    engine yet has nothing to report (none is created)."""
    if device is None:
        engines = list(_shared.values())
    else:
        found = _shared.get(_parse_device(device))
        engines = [] if found is None else [found]
    for e in engines:
        e.take_device_error()
