"""Which kernels torch and sgemm-bi run for one linear layer, and what Nsight Compute says of
each: kernel name, grid, block, cluster, registers, duration, SM and DRAM throughput. One
markdown table per shape. Use it before reading a benchmark ratio: the tile, the grid and the
cluster explain most decode gaps (docs/perf-notes.md).

The script runs itself under ``ncu`` once per shape (``--clock-control none``: the clocks float
as in production; the SpeedOfLight and LaunchStats sections only, so a shape takes seconds),
with an NVTX range around one ``F.linear`` and one ``sgemm_bi.linear`` (the tier ``--tier``
names, tensor cores by default) after a few warm-up calls, so that only those two calls'
kernels are profiled.

    SGEMM_BI_LIB=$PWD/.gpu/lib/libsgemm_bi.so python3 python/benchmarks/profile_kernels.py
    ... --shapes 64x4096x4096,256x4096x14336 --dtype f16
    ... --cache cold          # ncu flushes the caches before each kernel (default: warm)
    ... --tier scalar --dtype f32 --shapes 1x4096x4096,16x4096x4096   # the scalar tier
    ... --ncu /path/to/ncu --extra "--section MemoryWorkloadAnalysis"

Shapes are ``MxKxN`` of ``x[M, K] @ W[N, K]^T``. Exits 2 without ncu, PyTorch or a CUDA GPU.

Grouped GEMM (``--grouped``): the same for one Mixture-of-Experts layer of
``bench_grouped.py`` (128 experts, top-8, bf16): ``F.grouped_mm``'s passes, then
``sgemm_bi.grouped_mm``'s, one call each, in the order ``--passes`` gives (``fwd`` the
experts' forward, ``dx`` the input gradient, ``dw`` the experts' weight gradient), with the
MemoryWorkloadAnalysis section too (the L2 hit rate):

    ... --grouped 4096:2048:768:balanced,16384:4096:1536:zipf --passes fwd,dx,dw
"""

from __future__ import annotations

import argparse
import csv
import io
import math
import os
import re
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
    ("L2 hit %", "L2 Hit Rate"),
]
GROUPED_PASSES = ("fwd", "dx", "dw")
EXPERTS, TOP_K = 128, 8
TO_MICROSECONDS = {"nsecond": 1e-3, "ns": 1e-3, "usecond": 1.0, "us": 1.0,
                   "msecond": 1e3, "ms": 1e3, "second": 1e6, "s": 1e6}


def parse_shape(text: str) -> tuple[int, int, int]:
    """``"64x4096x4096"`` → ``(64, 4096, 4096)``; a clear error for anything else."""
    parts = text.lower().split("x")
    if len(parts) != 3 or not all(p.isdigit() and int(p) > 0 for p in parts):
        raise argparse.ArgumentTypeError(f"shape {text!r} is not MxKxN with positive integers")
    m, k, n = (int(p) for p in parts)
    return m, k, n


@dataclass(frozen=True)
class GroupedShape:
    """One MoE layer: ``tokens`` routed top-8 over 128 experts of ``hidden → width``."""
    tokens: int
    hidden: int
    width: int
    zipf: bool

    @property
    def label(self) -> str:
        routing = "zipf" if self.zipf else "balanced"
        return f"{self.tokens}:{self.hidden}:{self.width}:{routing}"


def parse_grouped(text: str) -> GroupedShape:
    """``"4096:2048:768:balanced"`` → a :class:`GroupedShape`; a clear error otherwise."""
    parts = text.lower().split(":")
    sizes = parts[:3]
    if (len(parts) != 4 or not all(p.isdigit() and int(p) > 0 for p in sizes)
            or parts[3] not in ("balanced", "zipf")):
        raise argparse.ArgumentTypeError(
            f"grouped shape {text!r} is not TOKENS:HIDDEN:WIDTH:balanced|zipf")
    tokens, hidden, width = (int(p) for p in sizes)
    return GroupedShape(tokens, hidden, width, parts[3] == "zipf")


def parse_passes(text: str) -> list[str]:
    """``"fwd,dw"`` → ``["fwd", "dw"]``; each of ``GROUPED_PASSES``, in the order given."""
    passes = [p for p in text.split(",") if p]
    bad = [p for p in passes if p not in GROUPED_PASSES]
    if not passes or bad:
        raise argparse.ArgumentTypeError(
            f"passes {text!r}: a comma-separated list of {', '.join(GROUPED_PASSES)}")
    return passes


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


def short_name(name: str) -> str:
    """A kernel's name as a table cell: CUTLASS's demangled names run to thousands of
    characters, so templates are cut to their outermost level and the parameter list
    dropped, with the CTA tile and the cluster shape (``cute::tuple`` of three ``cute::C``
    sizes; a cluster has at most 16 blocks) and the kernel schedule
    (``Kernel…WarpSpecialized…``) kept after it. Plain names pass as they are."""
    if "<" not in name and "(" not in name:
        return name
    text = name.removeprefix("void ")
    out, depth = [], 0
    for ch in text:
        if ch == "(" and depth == 0:
            break
        if ch == "<":
            depth += 1
            if depth == 1:
                out.append("<…>")
        elif ch == ">":
            depth -= 1
        elif depth == 0:
            out.append(ch)
    notes = []
    # Triples of sizes: a cluster's shape (at most 16 blocks) or the CTA tile.
    triples = re.findall(r"cute::tuple<cute::C<(\d+)>, cute::C<(\d+)>, cute::C<(\d+)>>",
                         name)
    sizes = [(t, math.prod(int(v) for v in t)) for t in triples]
    tile = next((t for t, n in sizes if n > 16), None)
    cluster = next((t for t, n in sizes if n <= 16), None)
    if tile:
        notes.append("tile " + "×".join(tile))
    if cluster:
        notes.append("cluster " + "×".join(cluster))
    schedule = re.search(r"Kernel\w*WarpSpecialized(\w*)", name)
    if schedule:
        notes.append(schedule.group(0).removeprefix("Kernel"))
    short = "".join(out).strip()
    return f"{short} [{', '.join(notes)}]" if notes else short


def table(shape: tuple[int, int, int] | str, dtype: str, kernels: list[Kernel]) -> str:
    """One markdown table of ``kernels`` under a heading: the ``MxKxN`` shape, or a title."""
    title = shape if isinstance(shape, str) else " × ".join(map(str, shape))
    head = ["who", "kernel", "grid", "block"] + [t for t, _ in METRICS]
    rows = [f"### {title} {dtype}", "", "| " + " | ".join(head) + " |",
            "|" + "---|" * 4 + "---:|" * len(METRICS)]
    for kern in kernels:
        cells = [kern.who, f"`{short_name(kern.name)}`", kern.grid, kern.block]
        cells += [kern.metrics.get(metric, "–") for _, metric in METRICS]
        rows.append("| " + " | ".join(cells) + " |")
    if not kernels:
        rows.append("| (no kernel profiled: see ncu's output above) |" + " |" * (len(head) - 1))
    return "\n".join(rows)


def child(shape: tuple[int, int, int], dtype: str, tier: str) -> None:
    """Under ncu: warm up, then one call of each inside the NVTX range."""
    sys.path.insert(0, str(HERE.parent))
    import torch
    import torch.nn.functional as F
    import sgemm_bi

    m, k, n = shape
    dt = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32}[dtype]
    gen = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn(m, k, device="cuda", dtype=dt, generator=gen)
    w = torch.randn(n, k, device="cuda", dtype=dt, generator=gen)
    for _ in range(3):
        F.linear(x, w)
        sgemm_bi.linear(x, w, tier=tier)
    torch.cuda.synchronize()
    torch.cuda.nvtx.range_push(RANGE)
    F.linear(x, w)
    sgemm_bi.linear(x, w, tier=tier)
    torch.cuda.synchronize()
    torch.cuda.nvtx.range_pop()


def grouped_child(shape: GroupedShape, passes: list[str]) -> None:
    """Under ncu: one MoE layer's tensors (as ``bench_grouped.py`` makes them), a warm-up,
    then torch's passes and ours, one call each, inside the NVTX range."""
    sys.path.insert(0, str(HERE.parent))
    import torch
    import torch.nn.functional as F
    import sgemm_bi

    gen = torch.Generator().manual_seed(0)
    rows = shape.tokens * TOP_K
    weights = (1.0 / torch.arange(1, EXPERTS + 1, dtype=torch.float64) if shape.zipf
               else torch.ones(EXPERTS, dtype=torch.float64))
    picks = torch.multinomial(weights, rows, replacement=True, generator=gen)
    offs = torch.bincount(picks, minlength=EXPERTS).cumsum(0).to(torch.int32).cuda()
    x = torch.randn(rows, shape.hidden, generator=gen).to("cuda", torch.bfloat16)
    w = (torch.randn(EXPERTS, shape.width, shape.hidden, generator=gen) * 0.02).to(
        "cuda", torch.bfloat16)
    dy = torch.randn(rows, shape.width, generator=gen).to("cuda", torch.bfloat16)
    operands = {"fwd": (x, w.transpose(-2, -1)), "dx": (dy, w), "dw": (dy.t(), x)}

    def run(mm) -> None:
        for p in passes:
            a, b = operands[p]
            mm(a, b, offs=offs)

    for _ in range(3):
        run(F.grouped_mm)
        run(sgemm_bi.grouped_mm)
    torch.cuda.synchronize()
    torch.cuda.nvtx.range_push(RANGE)
    run(F.grouped_mm)
    run(sgemm_bi.grouped_mm)
    torch.cuda.synchronize()
    torch.cuda.nvtx.range_pop()


def profile(ncu: str, cache: str, extra: list[str], child_args: list[str],
            timeout: float) -> tuple[list[Kernel], str]:
    """Runs this script's child under ncu: its kernels, and ncu's last lines when it failed
    or profiled nothing (else "")."""
    cmd = [ncu, "--clock-control", "none",
           "--cache-control", "all" if cache == "cold" else "none",
           "--section", "SpeedOfLight", "--section", "LaunchStats",
           "--nvtx", "--nvtx-include", f"{RANGE}/", "--csv", "--page", "details",
           *extra, sys.executable, str(Path(__file__).resolve()), *child_args]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    kernels = parse_ncu_csv(out.stdout)
    failed = ""
    if out.returncode != 0 or not kernels:
        failed = f"ncu exited {out.returncode}; its last lines:\n" + "\n".join(
            (out.stdout + out.stderr).splitlines()[-15:])
    return kernels, failed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shapes", default=DEFAULT_SHAPES,
                    help=f"comma-separated MxKxN (default {DEFAULT_SHAPES})")
    ap.add_argument("--dtype", choices=["bf16", "f16", "f32"], default="bf16",
                    help="f32 only with --tier scalar (the tensor-core tier takes 16-bit inputs)")
    ap.add_argument("--tier", choices=["tensor_cores", "scalar"], default="tensor_cores",
                    help="the tier of sgemm_bi.linear profiled next to F.linear")
    ap.add_argument("--cache", choices=["warm", "cold"], default="warm",
                    help="cold: ncu flushes the caches before each kernel")
    ap.add_argument("--ncu", default=os.environ.get("NCU", "ncu"), help="the ncu executable")
    ap.add_argument("--extra", default="", help="more ncu arguments, space-separated")
    ap.add_argument("--timeout", type=float, default=300, help="seconds per shape")
    ap.add_argument("--grouped", default="",
                    help="comma-separated TOKENS:HIDDEN:WIDTH:balanced|zipf MoE layers "
                         "(instead of --shapes)")
    ap.add_argument("--passes", type=parse_passes, default=list(GROUPED_PASSES),
                    help="with --grouped: the passes, in order (default fwd,dx,dw)")
    ap.add_argument("--child", type=parse_shape, help=argparse.SUPPRESS)
    ap.add_argument("--grouped-child", type=parse_grouped, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.child, args.dtype, args.tier)
        return
    if args.grouped_child:
        grouped_child(args.grouped_child, args.passes)
        return
    try:
        shapes = [parse_shape(s) for s in args.shapes.split(",") if s]
        grouped = [parse_grouped(s) for s in args.grouped.split(",") if s]
    except argparse.ArgumentTypeError as e:
        ap.error(str(e))
    if args.dtype == "f32" and args.tier != "scalar":
        ap.error("--dtype f32 needs --tier scalar")
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
    runs: list[tuple[str, list[str], list[str]]]
    if grouped:
        passes = ",".join(args.passes)
        runs = [(f"grouped {g.label}, passes {passes}",
                 ["--section", "MemoryWorkloadAnalysis"],
                 ["--grouped-child", g.label, "--passes", passes]) for g in grouped]
        dtype = "bf16"
    else:
        runs = [(" × ".join(map(str, s)), [],
                 ["--child", "x".join(map(str, s)), "--dtype", args.dtype, "--tier", args.tier])
                for s in shapes]
        dtype = args.dtype if args.tier == "tensor_cores" else f"{args.dtype} (scalar tier)"
    for title, sections, child_args in runs:
        try:
            kernels, failed = profile(args.ncu, args.cache, sections + args.extra.split(),
                                      child_args, args.timeout)
        except subprocess.TimeoutExpired:
            print(f"### {title}: ncu ran past {args.timeout:.0f} s\n")
            continue
        if failed:
            print(failed, file=sys.stderr)
        print(table(title, dtype, kernels))
        print()


if __name__ == "__main__":
    main()
