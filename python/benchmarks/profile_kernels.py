"""Which kernels torch and sgemm-bi run for one linear layer, and what Nsight Compute says of
each: kernel name, grid, block, cluster, registers, duration, SM and DRAM throughput. One
markdown table per shape. Use it before reading a benchmark ratio: the tile, the grid and the
cluster explain most decode gaps (docs/perf-notes.md).

The script runs itself under ``ncu`` once per shape (``--clock-control none``: the clocks float
as in production; the SpeedOfLight and LaunchStats sections only, so a shape takes seconds),
with an NVTX range around one ``F.linear`` and one ``sgemm_bi.linear`` (tensor-core tier) after
a few warm-up calls, so that only those two calls' kernels are profiled.

    SGEMM_BI_LIB=$PWD/.gpu/lib/libsgemm_bi.so python3 python/benchmarks/profile_kernels.py
    ... --shapes 64x4096x4096,256x4096x14336 --dtype f16
    ... --cache cold          # ncu flushes the caches before each kernel (default: warm)
    ... --ncu /path/to/ncu --extra "--section MemoryWorkloadAnalysis"

Shapes are ``MxKxN`` of ``x[M, K] @ W[N, K]^T``. Exits 2 without ncu, PyTorch or a CUDA GPU.
"""

from __future__ import annotations

import argparse
import csv
import io
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
RANGE = "sgemm_bi_profile"
DEFAULT_SHAPES = "64x4096x4096,256x4096x4096,128x4096x14336,256x4096x14336"
# (column title, ncu metric name) in table order; the launch's sizes come from the same page.
METRICS = [
    ("µs", "Duration"),
    ("SM %", "Compute (SM) Throughput"),
    ("DRAM %", "DRAM Throughput"),
    ("regs", "Registers Per Thread"),
    ("cluster", "Cluster Size"),
]
TO_MICROSECONDS = {"nsecond": 1e-3, "ns": 1e-3, "usecond": 1.0, "us": 1.0,
                   "msecond": 1e3, "ms": 1e3, "second": 1e6, "s": 1e6}


def parse_shape(text: str) -> tuple[int, int, int]:
    """``"64x4096x4096"`` → ``(64, 4096, 4096)``; a clear error for anything else."""
    parts = text.lower().split("x")
    if len(parts) != 3 or not all(p.isdigit() and int(p) > 0 for p in parts):
        raise argparse.ArgumentTypeError(f"shape {text!r} is not MxKxN with positive integers")
    m, k, n = (int(p) for p in parts)
    return m, k, n


@dataclass
class Kernel:
    """One profiled launch: its name, launch sizes and the metrics of ``METRICS``."""
    name: str
    grid: str = ""
    block: str = ""
    metrics: dict[str, str] = field(default_factory=dict)

    @property
    def who(self) -> str:
        return "ours" if self.name.startswith("sgemm_bi") else "torch"


def parse_ncu_csv(text: str) -> list[Kernel]:
    """The launches of ``ncu --csv --page details`` output, in launch order. Lines before the
    CSV header (the profiled program's own output, ncu's ``==PROF==`` notes) are skipped."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith('"ID"')), None)
    if start is None:
        return []
    kernels: dict[str, Kernel] = {}
    for row in csv.DictReader(io.StringIO("\n".join(lines[start:]))):
        if not row.get("ID"):
            continue
        k = kernels.setdefault(row["ID"], Kernel(row.get("Kernel Name", "?")))
        k.grid = row.get("Grid Size", k.grid)
        k.block = row.get("Block Size", k.block)
        name, unit = row.get("Metric Name"), row.get("Metric Unit", "")
        value = row.get("Metric Value", "")
        if name == "Duration" and unit in TO_MICROSECONDS:
            try:
                value = f"{float(value.replace(',', '')) * TO_MICROSECONDS[unit]:.1f}"
            except ValueError:
                pass
        if name in {m for _, m in METRICS}:
            k.metrics[name] = value
    return list(kernels.values())


def table(shape: tuple[int, int, int], dtype: str, kernels: list[Kernel]) -> str:
    m, k, n = shape
    head = ["who", "kernel", "grid", "block"] + [t for t, _ in METRICS]
    rows = [f"### {m} × {k} × {n} {dtype}", "", "| " + " | ".join(head) + " |",
            "|" + "---|" * 4 + "---:|" * len(METRICS)]
    for kern in kernels:
        cells = [kern.who, f"`{kern.name}`", kern.grid, kern.block]
        cells += [kern.metrics.get(metric, "–") for _, metric in METRICS]
        rows.append("| " + " | ".join(cells) + " |")
    if not kernels:
        rows.append("| (no kernel profiled: see ncu's output above) |" + " |" * (len(head) - 1))
    return "\n".join(rows)


def child(shape: tuple[int, int, int], dtype: str) -> None:
    """Under ncu: warm up, then one call of each inside the NVTX range."""
    sys.path.insert(0, str(HERE.parent))
    import torch
    import torch.nn.functional as F
    import sgemm_bi

    m, k, n = shape
    dt = {"bf16": torch.bfloat16, "f16": torch.float16}[dtype]
    gen = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn(m, k, device="cuda", dtype=dt, generator=gen)
    w = torch.randn(n, k, device="cuda", dtype=dt, generator=gen)
    for _ in range(3):
        F.linear(x, w)
        sgemm_bi.linear(x, w, tier="tensor_cores")
    torch.cuda.synchronize()
    torch.cuda.nvtx.range_push(RANGE)
    F.linear(x, w)
    sgemm_bi.linear(x, w, tier="tensor_cores")
    torch.cuda.synchronize()
    torch.cuda.nvtx.range_pop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shapes", default=DEFAULT_SHAPES,
                    help=f"comma-separated MxKxN (default {DEFAULT_SHAPES})")
    ap.add_argument("--dtype", choices=["bf16", "f16"], default="bf16")
    ap.add_argument("--cache", choices=["warm", "cold"], default="warm",
                    help="cold: ncu flushes the caches before each kernel")
    ap.add_argument("--ncu", default=os.environ.get("NCU", "ncu"), help="the ncu executable")
    ap.add_argument("--extra", default="", help="more ncu arguments, space-separated")
    ap.add_argument("--timeout", type=float, default=300, help="seconds per shape")
    ap.add_argument("--child", type=parse_shape, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.child, args.dtype)
        return
    shapes = [parse_shape(s) for s in args.shapes.split(",") if s]
    if shutil.which(args.ncu) is None:
        print(f"profile_kernels: {args.ncu} not found (set --ncu or NCU)", file=sys.stderr)
        sys.exit(2)
    try:
        import torch
    except ImportError as e:
        print(f"profile_kernels: PyTorch is needed ({e})", file=sys.stderr)
        sys.exit(2)
    if not torch.cuda.is_available():
        print("profile_kernels: no CUDA GPU", file=sys.stderr)
        sys.exit(2)
    for shape in shapes:
        label = "x".join(map(str, shape))
        cmd = [args.ncu, "--clock-control", "none",
               "--cache-control", "all" if args.cache == "cold" else "none",
               "--section", "SpeedOfLight", "--section", "LaunchStats",
               "--nvtx", "--nvtx-include", f"{RANGE}/", "--csv", "--page", "details",
               *args.extra.split(),
               sys.executable, str(Path(__file__).resolve()), "--child", label,
               "--dtype", args.dtype]
        try:
            out = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout)
        except subprocess.TimeoutExpired:
            print(f"### {label}: ncu ran past {args.timeout:.0f} s\n")
            continue
        kernels = parse_ncu_csv(out.stdout)
        if out.returncode != 0 or not kernels:
            print(f"ncu exited {out.returncode}; its last lines:", file=sys.stderr)
            print("\n".join((out.stdout + out.stderr).splitlines()[-15:]), file=sys.stderr)
        print(table(shape, args.dtype, kernels))
        print()


if __name__ == "__main__":
    main()
