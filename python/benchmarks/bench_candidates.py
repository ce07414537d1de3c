"""The integration candidates of docs/perf-notes.md ("From PyTorch: the call path"), each
with a trivial body so that only the machinery is timed: a torch custom op, an autograd
Function in its two forms, a Python kernel registered for an aten op on its device key, and
the two torch modes the mode used to be, on an op they do not route. Prints µs per call.

    python python/benchmarks/bench_candidates.py [--device cpu|cuda]

Rows run interleaved (round robin, median per row) so that a busy machine skews them alike.
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Callable

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode


class _Classic(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):  # type: ignore[no-untyped-def, override]
        return torch.empty_like(x)

    @staticmethod
    def backward(ctx, g):  # type: ignore[no-untyped-def, override]
        return g


class _WithSetupContext(torch.autograd.Function):
    @staticmethod
    def forward(x):  # type: ignore[no-untyped-def, override]
        return torch.empty_like(x)

    @staticmethod
    def setup_context(ctx, inputs, output):  # type: ignore[no-untyped-def, override]
        pass

    @staticmethod
    def backward(ctx, g):  # type: ignore[no-untyped-def, override]
        return g


class _PassDispatch(TorchDispatchMode):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        return func(*args, **(kwargs or {}))


class _PassFunction(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        return func(*args, **(kwargs or {}))


@torch.library.custom_op("sgemm_bi_bench::ident", mutates_args=())
def _ident(x: torch.Tensor) -> torch.Tensor:
    return torch.empty_like(x)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default=None)
    p.add_argument("--calls", type=int, default=3000)
    p.add_argument("--rounds", type=int, default=9)
    args = p.parse_args()
    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    x = torch.randn(8, 64, device=device)
    xg = x.clone().requires_grad_()
    w = torch.randn(64, 64, device=device)
    c = torch.randn(8, 64, device=device)
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)

    # torch.mm with a Python kernel on the device key that hands every call to torch's own
    # kernel (torch.library.get_kernel): the price of the hop alone.
    lib = None
    key = "CUDA" if device.type == "cuda" else "CPU"
    if hasattr(torch.library, "get_kernel"):
        torch_mm = torch.library.get_kernel("aten::mm", key)
        lib = torch.library.Library("aten", "IMPL")
        lib.impl("mm", lambda ks, a, b: torch_mm.call_boxed(ks, a, b), key, with_keyset=True)
    hopped = lambda: torch.mm(x, w)  # noqa: E731

    rows: list[tuple[str, Callable[[], object], Callable[[], object] | None]] = [
        ("empty_like (the bodies' cost)", lambda: torch.empty_like(x), None),
        ("custom op, no grad", lambda: _ident(x), None),
        ("autograd.Function, classic, no grad", lambda: _Classic.apply(x), None),
        ("autograd.Function, classic, grad", lambda: _Classic.apply(xg), None),
        ("autograd.Function, setup_context, grad", lambda: _WithSetupContext.apply(xg), None),
        ("mm with a pass-through Python kernel", hopped, None),
        ("a + c plain", lambda: x + c, None),
    ]
    dmode, fmode = _PassDispatch(), _PassFunction()

    def under_modes() -> object:
        with fmode, dmode:
            return [x + c for _ in range(10)]

    results: dict[str, list[float]] = {name: [] for name, _, _ in rows}
    results["a + c under TorchFunctionMode + TorchDispatchMode"] = []
    for fn in [r[1] for r in rows]:
        for _ in range(200):
            fn()
    for _ in range(args.rounds):
        for name, fn, _ in rows:
            sync()
            t0 = time.perf_counter()
            for _ in range(args.calls):
                fn()
            sync()
            results[name].append((time.perf_counter() - t0) / args.calls * 1e6)
        sync()
        t0 = time.perf_counter()
        for _ in range(args.calls // 10):
            under_modes()
        sync()
        results["a + c under TorchFunctionMode + TorchDispatchMode"].append(
            (time.perf_counter() - t0) / (args.calls // 10 * 10) * 1e6)
    if lib is not None:
        lib._destroy()
        results["mm plain (the kernel removed again)"] = []
        for _ in range(args.rounds):
            t0 = time.perf_counter()
            for _ in range(args.calls):
                hopped()
            sync()
            results["mm plain (the kernel removed again)"].append(
                (time.perf_counter() - t0) / args.calls * 1e6)
    print(f"device {device}; torch {torch.__version__}; {args.calls} calls x {args.rounds} "
          "rounds, median; 8x64 tensors")
    print()
    print("| candidate machinery | µs/call |")
    print("|---|---:|")
    for name, ts in results.items():
        print(f"| {name} | {statistics.median(ts):.2f} |")


if __name__ == "__main__":
    main()
