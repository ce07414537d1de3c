#!/usr/bin/env python3
"""Turn bench_suite's CSV into docs/perf-bench.md (the table, with date, GPU, driver and
commit) and docs/perf-bench.png (TFLOP/s against M at fixed K and N: ours, cuBLAS default,
cuBLASLt without workspace and, given bench_torch_baseline.py's CSV, torch).

    # on the GPU host
    .gpu/examples/bench_suite --csv bench.csv --commit "$(git rev-parse --short HEAD)"
    SGEMM_BI_LIB=$PWD/.gpu/lib/libsgemm_bi.so \
        python3 python/benchmarks/bench_torch_baseline.py --shapes suite --csv torch.csv
    # here (needs matplotlib:  python3 -m pip install matplotlib)
    python3 scripts/plot_bench.py bench.csv [--torch torch.csv] [--out-dir docs] [--name NAME]

`--name` changes the files' stem (default `perf-bench`): a run on another card gets a page of
its own (`--name perf-bench-h100`) beside the H200's.

With `--torch`, the page also has the table users compare with: torch's `F.linear` /
`torch.matmul` and ours through the Python package on the same tensors, in both timing
methods (back to back on warm buffers, and interleaved on rotating cold buffers), one row
per tensor-core case of the suite; the plot adds torch's curves.

The CSV is what examples/bench_suite/report.rs writes: `# key: value` header lines
(`# note: …` lines are the table's footnotes), then one row per case with the columns of
`CSV_COLUMNS` there. The markdown table here follows `report::markdown`; keep them in step.
"""

import argparse
import csv
import io
import math
import os
import sys

# Nominal H200 figures (docs/ARCHITECTURE.md, "Physical") for the roofline.
H200_BF16_TFLOPS = 989.0
H200_TBPS = 4.3


def read(path):
    meta, notes, lines = [], [], []
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.startswith("#"):
                key, _, value = line[1:].strip().partition(": ")
                if key == "note":
                    notes.append(value)
                else:
                    meta.append((key, value))
            elif line.strip():
                lines.append(line)
    rows = list(csv.DictReader(io.StringIO("".join(lines))))
    return meta, notes, rows


def num(v):
    return float(v) if v not in ("", None) else None


def tflops(v):
    if v is None:
        return "–"
    return f"{v:.2f}" if v < 10 else f"{v:.1f}"


def ratio(v):
    return "–" if v is None else f"{v:.2f}"


def gbs(v):
    return "–" if v is None else f"{v:.0f}"


def table(rows):
    out = [
        "| case | M × K × N | dtype | W | ours TFLOP/s | cuBLAS TFLOP/s | ratio | "
        "cuBLASLt no-ws TFLOP/s | ratio | GB/s ours / cuBLAS / Lt | target | met |",
        "|---|---|---|---|---:|---:|---:|---:|---:|---:|---|---|",
    ]
    for r in rows:
        tier = " (scalar)" if r["tier"] == "scalar" else ""
        bw = "–"
        if r["memory_bound"] == "1":
            bw = " / ".join(gbs(num(r[c])) for c in ("ours_gbs", "cublas_gbs", "cublaslt_gbs"))
        out.append(
            f"| {r['label']} | {r['m']} × {r['k']} × {r['n']} | {r['dtype']}{tier} | {r['weight']} "
            f"| {tflops(num(r['ours_tflops']))} | {tflops(num(r['cublas_tflops']))} "
            f"| {ratio(num(r['ratio']))} | {tflops(num(r['cublaslt_tflops']))} "
            f"| {ratio(num(r['cublaslt_ratio']))} | {bw} | {r['target']} | {r['met']} |"
        )
    return out


def summary(rows):
    """One line: how many rows with a target met it."""
    verdicts = [r["met"] for r in rows if r["met"] in ("yes", "near", "no")]
    if not verdicts:
        return "No row of this run has a target."
    c = {v: verdicts.count(v) for v in ("yes", "near", "no")}
    return (
        f"Targets met: {c['yes']} of {len(verdicts)} rows"
        f" ({c['near']} between the floor and the goal, {c['no']} below)."
    )


def forward_rows(rows, k, n):
    """bf16 tensor-core forward rows at this K and N, by weight layout, sorted by M."""
    by_weight = {}
    for r in rows:
        if r["group"] not in ("train", "small", "decode", "sweep"):
            continue
        if r["dtype"] != "bf16" or r["tier"] == "scalar":
            continue
        if int(r["k"]) != k or int(r["n"]) != n:
            continue
        by_weight.setdefault(r["weight"], {})[int(r["m"])] = r
    return {w: [ms[m] for m in sorted(ms)] for w, ms in by_weight.items()}


def torch_points(torch_rows, k, n, method):
    """(M, TFLOP/s) of torch's bf16 forward at this K and N, by timing method."""
    pts = []
    for r in torch_rows:
        if r["op"] != "fwd" or r["dtype"] != "bf16" or r["method"] != method:
            continue
        m, kk, nn = (int(v) for v in r["layer_MxKxN"].split("x"))
        if kk == k and nn == n:
            pts.append((m, num(r["torch_tflops"])))
    return sorted(pts)


def plot(rows, meta, path, torch_rows=()):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [(k, n, forward_rows(rows, k, n)) for k, n in ((4096, 4096), (4096, 14336))]
    panels = [p for p in panels if any(len(v) >= 2 for v in p[2].values())]
    if not panels:
        print("plot_bench: no bf16 forward rows at K = 4096 to plot", file=sys.stderr)
        return False
    fig, axes = plt.subplots(1, len(panels), figsize=(7.5 * len(panels), 5.2), squeeze=False)
    meta = dict(meta)
    h200 = "H200" in meta.get("gpu", "")
    series = [
        ("ours_tflops", "sgemm-bi (tensor cores)", "tab:blue", "o"),
        ("cublas_tflops", "cuBLAS default", "tab:orange", "s"),
        ("cublaslt_tflops", "cuBLASLt, no workspace", "tab:green", "^"),
    ]
    for ax, (k, n, by_weight) in zip(axes[0], panels):
        all_m = sorted({int(r["m"]) for rs in by_weight.values() for r in rs})
        for wi, (weight, rs) in enumerate(sorted(by_weight.items())):
            suffix = f" (W {weight})" if len(by_weight) > 1 else ""
            for column, label, color, marker in series:
                pts = [(int(r["m"]), num(r[column])) for r in rs if num(r[column])]
                if pts:
                    ax.plot(
                        *zip(*pts),
                        marker=marker,
                        color=color,
                        linestyle="-" if wi == 0 else "--",
                        label=label + suffix,
                    )
        for method, color, marker in zip(TORCH_METHODS, ("black", "0.45"), ("x", "+")):
            pts = torch_points(torch_rows, k, n, method)
            if len(pts) >= 2:
                ax.plot(*zip(*pts), marker=marker, color=color, linestyle="-.",
                        label=f"torch F.linear, W [N, K] ({method})")
        if h200:
            # TB/s × FLOP/byte = TFLOP/s; bf16 moves 2 bytes per element of X, W and Y.
            lo, hi = math.log2(min(all_m)), math.log2(max(all_m))
            ms = [2 ** (lo + (hi - lo) * i / 64) for i in range(65)]
            roof = [
                min(H200_BF16_TFLOPS, H200_TBPS * 2 * m * k * n / (2 * (m * k + k * n + m * n)))
                for m in ms
            ]
            ax.plot(ms, roof, color="0.6", linestyle=":", label="H200 roofline (989 TFLOP/s, 4.3 TB/s)")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xticks(all_m)
        ax.set_xticklabels([str(m) for m in all_m], rotation=45)
        ax.set_xlabel("M (rows: tokens in the batch)")
        ax.set_ylabel("TFLOP/s")
        ax.set_title(f"bf16 forward, K = {k}, N = {n}")
        ax.grid(True, which="major", alpha=0.3)
        ax.legend(fontsize=8, loc="lower right")
    fig.suptitle(
        f"{meta.get('gpu', '?')} · driver {meta.get('driver', '?')} · "
        f"commit {meta.get('commit', '?')} · {meta.get('date', '?')}",
        fontsize=9,
    )
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True


# The suite's groups of tensor-core rows, as the op bench_torch_baseline.py times.
TORCH_OPS = {"train": "fwd", "small": "fwd", "decode": "fwd", "sweep": "fwd",
             "dw": "dW", "dx": "dX"}
TORCH_METHODS = ("back to back, warm", "interleaved, cold")


def torch_key(op, dtype, m, k, n):
    return (op, dtype, int(m), int(k), int(n))


def torch_index(rows):
    """bench_torch_baseline.py's rows by (op, dtype, layer M, K, N) and method."""
    index = {}
    for r in rows:
        m, k, n = r["layer_MxKxN"].split("x")
        index.setdefault(torch_key(r["op"], r["dtype"], m, k, n), {})[r["method"]] = r
    return index


def suite_torch_key(r):
    op = TORCH_OPS.get(r["group"])
    if op is None or r["tier"] == "scalar":
        return None
    return torch_key(op, r["dtype"], r["m"], r["k"], r["n"])


def us(v):
    return "–" if v is None else (f"{v:.1f}" if v >= 10 else f"{v:.2f}")


def torch_table(rows, torch_meta, torch_rows, csv_name):
    """The suite's tensor-core cases against torch, both methods; one row per case (the
    suite's two weight layouts share torch's, W[N, K])."""
    index = torch_index(torch_rows)
    out = [
        "## Against torch: `F.linear` and `torch.matmul`, both timing methods",
        "",
        "Generated from the CSV of `python/benchmarks/bench_torch_baseline.py --shapes suite "
        f"--csv {csv_name}` on the same machine and build: torch's call (`F.linear` with "
        "torch's `[out, in]` weight for the forward; `torch.matmul` on `dY.t()` and `X` for "
        "dW, on `dY` and `W` for dX, each with a bf16/f16 output) and ours through the Python "
        "package (`sgemm_bi.linear` / `sgemm_bi.matmul`, `tier=\"tensor_cores\"`) on the same "
        "CUDA tensors. **Back to back, warm**: one buffer set, each candidate's samples in a "
        "block, L2 keeping what fits. **Interleaved, cold**: buffer sets of at least 256 MiB "
        "rotated call by call, torch and ours alternating sample by sample. torch ÷ ours > 1: "
        "ours is faster. (The suite's dW row accumulates into f32; this one is torch's "
        "`matmul`, a bf16 output.)",
        "",
    ]
    out += [f"- {k}: {v}" for k, v in torch_meta]
    out += [
        "",
        "| case | layer M × K × N | dtype | torch µs, back to back | ours µs | torch ÷ ours "
        "| torch µs, interleaved cold | ours µs | torch ÷ ours |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    seen, ratios = set(), {}
    for r in rows:
        key = suite_torch_key(r)
        if key is None or key in seen or key not in index:
            continue
        seen.add(key)
        cells = []
        for method in TORCH_METHODS:
            t = index[key].get(method)
            if t is None:
                cells += ["–", "–", "–"]
                continue
            ratio_v = num(t["ratio"])
            ratios.setdefault((r["group"], method), []).append(ratio_v)
            cells += [us(num(t["torch_us"])), us(num(t["ours_us"])), ratio(ratio_v)]
        out.append(
            f"| {r['label']} | {r['m']} × {r['k']} × {r['n']} | {r['dtype']} | "
            + " | ".join(cells) + " |"
        )
    out.append("")
    spans = []
    for group in ("train", "dw", "dx", "small", "decode", "sweep"):
        parts = []
        for method in TORCH_METHODS:
            v = ratios.get((group, method))
            if v:
                parts.append(f"{min(v):.2f}–{max(v):.2f} {method.split(',')[0]}")
        if parts:
            spans.append(f"{group}: " + ", ".join(parts))
    if spans:
        out += ["torch ÷ ours by group: " + "; ".join(spans) + ".", ""]
    return out


def markdown(meta, notes, rows, csv_name, png_name, torch_part=None):
    out = [
        "# Benchmark suite: sgemm-bi against cuBLAS" + (" and torch" if torch_part else ""),
        "",
        "Generated by `scripts/plot_bench.py` from the CSV of `.gpu/examples/bench_suite --csv "
        f"{csv_name}` (source: `examples/bench_suite/`, the cases of its target table, `cases.rs`). "
        "Do not edit by hand: run the suite again and then the script.",
        "",
    ]
    out += [f"- {k}: {v}" for k, v in meta]
    shown = "ours, both cuBLAS settings" + (" and torch" if torch_part else "")
    out += ["", f"![TFLOP/s against M, {shown}]({png_name})", ""]
    out += table(rows)
    out += ["", summary(rows), ""]
    out += notes
    if torch_part:
        out += [""] + torch_part
    return "\n".join(out) + "\n"


GROUPED_HEADING = "## Grouped GEMM"


def grouped_section(path):
    """The grouped section of an existing perf-bench.md, from its heading to the end: the
    suite prints the grouped table in its markdown only (not in the CSV), so it is pasted
    there by hand and kept when the dense table is regenerated."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except FileNotFoundError:
        return ""
    at = text.find("\n" + GROUPED_HEADING)
    return text[at + 1 :] if at >= 0 else ""


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("csv", help="the file bench_suite --csv wrote")
    ap.add_argument("--torch", metavar="CSV",
                    help="the file bench_torch_baseline.py --shapes suite --csv wrote")
    ap.add_argument("--out-dir", default=os.path.join(root, "docs"))
    ap.add_argument("--name", default="perf-bench",
                    help="stem of the page and the plot (default: perf-bench)")
    args = ap.parse_args()
    meta, notes, rows = read(args.csv)
    if not rows:
        sys.exit(f"plot_bench: {args.csv} has no rows")
    torch_rows, torch_part = [], None
    if args.torch:
        torch_meta, _, torch_rows = read(args.torch)
        if not torch_rows:
            sys.exit(f"plot_bench: {args.torch} has no rows")
        torch_part = torch_table(rows, torch_meta, torch_rows, os.path.basename(args.torch))
    os.makedirs(args.out_dir, exist_ok=True)
    if not args.name or os.sep in args.name or args.name.startswith("."):
        sys.exit(f"plot_bench: --name {args.name!r} must be a plain file stem")
    md_path = os.path.join(args.out_dir, args.name + ".md")
    png_path = os.path.join(args.out_dir, args.name + ".png")
    kept = grouped_section(md_path)
    with open(md_path, "w", encoding="utf-8") as f:
        f.write(markdown(meta, notes, rows, os.path.basename(args.csv), args.name + ".png",
                         torch_part))
        if kept:
            f.write("\n" + kept)
    print(f"plot_bench: wrote {md_path}")
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        sys.exit("plot_bench: matplotlib is missing (python3 -m pip install matplotlib)")
    if plot(rows, meta, png_path, torch_rows):
        print(f"plot_bench: wrote {png_path}")


if __name__ == "__main__":
    main()
