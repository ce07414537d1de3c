"""Per-call cost of the PyTorch entry points: sgemm_bi.linear / matmul, F.linear,
torch.matmul and ``@`` under the mode, an op the mode does not route, and nn.Linear forward
+ backward, each next to the torch call it replaces. Prints a table (µs per call).

Each row times a CPU-bound loop: ``--calls`` calls back to back, one synchronize at the end,
repeated ``--repeats`` times; the row is the median of the per-call times. A row with a
baseline alternates with it (a loop of the baseline, a loop of the row, each round), and its
ratio is the median of the rounds' ratios. At the shapes
used here (launch-bound on a GPU) that measures what a call costs the host: the Python,
the dispatcher and the launch, not the kernel.

    python python/benchmarks/bench_calls.py                  # CUDA when present, else CPU
    python python/benchmarks/bench_calls.py --device cpu     # the tiny CPU shape only
    python python/benchmarks/bench_calls.py --quick          # fewer calls (a smoke run)

On CUDA the shapes are M in {1, 8, 64} x 4096 x 4096 and 8 x 1024 x 1024 in bf16; on the
CPU 8 x 64 x 64 in f32 (``--dtype`` changes it). The ratio column divides by the row's
baseline (named in the ``vs`` column).
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import os
import statistics
import subprocess
import sys
import time
import warnings
from pathlib import Path
from typing import Any, Callable, Iterator, Optional

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # the package of this checkout, as the tests do

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402

import sgemm_bi  # noqa: E402

DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16}


def commit() -> str:
    """The checkout's commit, with ``+dirty`` when the work tree has changes."""
    try:
        rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=HERE,
                             capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                               cwd=HERE, capture_output=True, text=True).stdout.strip()
        return rev + ("+dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


@contextlib.contextmanager
def setting(fn: Callable[[], object]) -> Iterator[None]:
    """What a row's calls run inside: the mode (``under_mode``) and its context
    (``around``)."""
    mode = getattr(fn, "under_mode", None)
    context = getattr(fn, "around", contextlib.nullcontext)
    if mode is not None:
        sgemm_bi.enable(**mode)
    try:
        with context():
            yield
    finally:
        if mode is not None:
            sgemm_bi.disable()


def loop_us(fn: Callable[[], object], device: torch.device, calls: int) -> float:
    """µs per call of ``calls`` back-to-back calls in the row's setting, one synchronize at
    the end."""
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    with setting(fn):
        sync()
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        sync()
        return (time.perf_counter() - t0) / calls * 1e6


def warm_up(fn: Callable[[], object], device: torch.device, calls: int) -> None:
    """Caches, the allocator, lazy loads."""
    with setting(fn):
        for _ in range(max(3, calls // 10)):
            fn()
    if device.type == "cuda":
        torch.cuda.synchronize()


def paired_us(fn: Callable[[], object], base: Optional[Callable[[], object]],
              device: torch.device, calls: int, repeats: int) -> tuple[float, float]:
    """(median µs per call, median ratio to ``base``): ``repeats`` rounds, each timing a loop
    of the base and then one of the row, so that the host's drifts (±20 % between rows
    timed apart) fall on both sides of every ratio."""
    warm_up(fn, device, calls)
    if base is not None:
        warm_up(base, device, calls)
    times, ratios = [], []
    for _ in range(repeats):
        b = loop_us(base, device, calls) if base is not None else None
        t = loop_us(fn, device, calls)
        times.append(t)
        if b is not None:
            ratios.append(t / b)
    return statistics.median(times), (statistics.median(ratios) if ratios else float("nan"))


def under_mode(fn: Callable[[], object], **options: str) -> Callable[[], object]:
    """``fn`` with the mode on: ``enable(**options)`` before the loop, disable() after (see
    main)."""
    fn.under_mode = options  # type: ignore[attr-defined]
    return fn


@contextlib.contextmanager
def python_addmm_kernel(device: torch.device) -> Iterator[None]:
    """A Python kernel on ``aten::addmm`` that only calls torch's own: what the dispatcher's
    call into Python costs by itself. ``F.linear`` with a bias meets one under the mode
    (``addmm`` takes ``Scalar``s, which a native kernel cannot receive), so on the CPU, where
    torch's own addmm is cheap, this row is the floor of the mode's ``F.linear``."""
    key = "CUDA" if device.type == "cuda" else "CPU"
    theirs = torch.library.get_kernel("aten::addmm", key)
    lib = torch.library.Library("aten", "IMPL")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        lib.impl("addmm", lambda ks, *a, **kw: theirs.call_boxed(ks, *a, **kw), key,
                 with_keyset=True)
    try:
        yield
    finally:
        lib._destroy()


def around(fn: Callable[[], object], context: Callable[[], Any]) -> Callable[[], object]:
    """``fn`` timed inside ``context()`` (see main)."""
    fn.around = context  # type: ignore[attr-defined]
    return fn


def rows_for(m: int, k: int, n: int, dtype: torch.dtype, device: torch.device,
             ) -> list[tuple[str, Callable[[], object], Optional[str]]]:
    """(name, call, baseline name) for one shape."""
    g = torch.Generator(device="cpu").manual_seed(0)

    def rand(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, generator=g).to(device=device, dtype=dtype)

    x, w, b = rand(m, k), rand(n, k), rand(n)
    wt = w.t()
    a_small, c_small = (torch.randn(64, 64, generator=g).to(device) for _ in range(2))
    layer = nn.Linear(k, n, device=device, dtype=dtype)
    bi_layer = sgemm_bi.Linear.from_torch(layer)
    xg = rand(m, k).requires_grad_()
    dy = rand(m, n)

    # The floor: one engine call on a prepared descriptor and preallocated output, through
    # the C ABI (ctypes) — what the library itself costs, without any torch layer.
    eng = sgemm_bi.engine.engine_for(device)
    desc = sgemm_bi.Engine.dense_desc(m, n, k, {torch.float32: "f32", torch.bfloat16: "bf16",
                                                 torch.float16: "f16"}[dtype])
    desc.b.layout, desc.b.ld = sgemm_bi.engine.Layout.COL_MAJOR, k  # w.t(), read in place
    desc.has_bias, desc.bias_dtype = 1, desc.a.dtype
    desc.tier = sgemm_bi.ops.resolve_tier("auto", device, dtype)
    y = torch.empty(m, n, device=device, dtype=dtype)
    stream = torch.cuda.current_stream(device).cuda_stream if device.type == "cuda" else None
    raw = (eng._lib.sgemm_bi_gemm, eng.handle, ctypes.byref(desc), x.data_ptr(), w.data_ptr(),
           b.data_ptr(), y.data_ptr(), stream)

    def engine_call(y: torch.Tensor = y) -> None:  # y: kept alive as long as the call
        fn, *call_args = raw
        if fn(*call_args):
            raise RuntimeError(sgemm_bi._capi.last_error_message())

    # The floor of a Python function over the native op: the op's own Python binding,
    # called directly (what `sgemm_bi.matmul` calls after its checks).
    native_rows: list[tuple[str, Callable[[], object], Optional[str]]] = []
    native = sgemm_bi.native.ops()
    if native is not None:
        op = getattr(native[0], "_op", native[0])
        code = sgemm_bi.native.TIER_CODES["auto"]
        native_rows.append(("native op sgemm_bi::matmul, direct",
                            lambda: op(x, wt, code, False), "torch.matmul"))

    def fwd_bwd(mod: nn.Module) -> Callable[[], object]:
        def step() -> None:
            mod(xg).backward(dy)
        return step

    return [
        ("torch F.linear", lambda: F.linear(x, w, b), None),
        ("sgemm_bi.linear", lambda: sgemm_bi.linear(x, w, b), "torch F.linear"),
        ("F.linear, mode", under_mode(lambda: F.linear(x, w, b)), "torch F.linear"),
        ("F.linear, torch addmm via Python",
         around(lambda: F.linear(x, w, b), lambda: python_addmm_kernel(device)),
         "torch F.linear"),
        ("engine, raw C call", engine_call, "torch F.linear"),
        # A candidate that lost, kept for the comparison: the custom op, called directly.
        ("custom op sgemm_bi::gemm", lambda: sgemm_bi.ops.gemm(x, wt, b, "auto", None),
         "torch F.linear"),
        ("torch.matmul", lambda: torch.matmul(x, wt), None),
        ("sgemm_bi.matmul", lambda: sgemm_bi.matmul(x, wt), "torch.matmul"),
        *native_rows,
        ("torch.matmul, mode", under_mode(lambda: torch.matmul(x, wt)), "torch.matmul"),
        ("@, mode", under_mode(lambda: x @ wt), "torch.matmul"),
        ("a + c 64x64 f32", lambda: a_small + c_small, None),
        ("a + c, mode", under_mode(lambda: a_small + c_small), "a + c 64x64 f32"),
        ("nn.Linear fwd+bwd", fwd_bwd(layer), None),
        ("nn.Linear fwd+bwd, mode", under_mode(fwd_bwd(layer)), "nn.Linear fwd+bwd"),
        ("nn.Linear fwd+bwd, bias_grad=engine", under_mode(fwd_bwd(layer), bias_grad="engine"),
         "nn.Linear fwd+bwd"),
        ("sgemm_bi.Linear fwd+bwd", fwd_bwd(bi_layer), "nn.Linear fwd+bwd"),
    ]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default=None, help="cuda or cpu (default: cuda if present)")
    p.add_argument("--dtype", choices=sorted(DTYPES), default=None,
                   help="default: bf16 on CUDA, f32 on the CPU")
    p.add_argument("--shape", action="append", default=None, metavar="MxKxN",
                   help="a shape to time (repeatable); default: the issue's shapes")
    p.add_argument("--calls", type=int, default=None, help="calls per timed loop")
    p.add_argument("--repeats", type=int, default=None, help="timed loops per row")
    p.add_argument("--quick", action="store_true", help="few calls: checks the script runs")
    p.add_argument("--threads", type=int, default=None,
                   help="CPU threads for torch and for the engine's CPU backend (rayon); "
                        "1 makes CPU rows less sensitive to other load on the machine")
    args = p.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
        # Read when the engine's thread pool starts, at its first CPU call (after this).
        os.environ["RAYON_NUM_THREADS"] = str(args.threads)

    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    dtype = DTYPES[args.dtype] if args.dtype else (
        torch.bfloat16 if device.type == "cuda" else torch.float32)
    if args.shape:
        shapes = [tuple(int(v) for v in s.lower().split("x")) for s in args.shape]
    elif device.type == "cuda":
        shapes = [(1, 4096, 4096), (8, 4096, 4096), (64, 4096, 4096), (8, 1024, 1024)]
    else:
        shapes = [(8, 64, 64)]
    calls = args.calls or (50 if args.quick else 2000)
    repeats = args.repeats or (3 if args.quick else 15)

    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU"
    print(f"device: {device} ({name}); torch {torch.__version__}; sgemm_bi "
          f"{sgemm_bi.__version__}, commit {commit()}; {calls} calls x {repeats} repeats "
          f"(median); dtype {str(dtype).removeprefix('torch.')}; "
          f"torch threads {torch.get_num_threads()}, engine threads "
          f"{os.environ.get('RAYON_NUM_THREADS', 'default')}")
    print()
    print(f"| {'shape MxKxN':<16} | {'call':<36} | {'µs/call':>9} | {'vs':<20} | {'ratio':>6} |")
    print(f"|{'-' * 18}|{'-' * 38}|{'-' * 11}|{'-' * 22}|{'-' * 8}|")
    for m, k, n in shapes:
        fns: dict[str, Callable[[], object]] = {}
        for row, fn, base in rows_for(m, k, n, dtype, device):
            fns[row] = fn
            us, rel = paired_us(fn, fns[base] if base else None, device, calls, repeats)
            ratio = f"{rel:.2f}x" if base else ""
            print(f"| {f'{m}x{k}x{n}':<16} | {row:<36} | {us:9.1f} | {base or '':<20} | "
                  f"{ratio:>6} |", flush=True)


if __name__ == "__main__":
    main()
