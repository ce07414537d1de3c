"""What the first use of sgemm-bi costs from Python on this machine: ``import torch``,
``import sgemm_bi``, the first call of each tier and a second call, then what the library
holds and which image each kernel module loaded (``sgemm_bi.build_info``).

Run it in a fresh process with an empty driver compute cache to see a fresh machine::

    CUDA_CACHE_PATH=$(mktemp -d) python3 python/benchmarks/first_use.py

``SGEMM_BI_FORCE_PTX=1`` loads the PTX instead of the machine code (what a GPU without
embedded machine code pays). Prints one line per step; ``--json`` prints the figures as
one JSON object last.
"""

from __future__ import annotations

import json
import sys
import time

START = time.perf_counter()


def since_start() -> float:
    return (time.perf_counter() - START) * 1e3


def main() -> None:
    import torch

    t_torch = since_start()
    import sgemm_bi

    t_import = since_start()
    print(f"import torch: {t_torch:9.1f} ms after start")
    print(f"import sgemm_bi: {t_import - t_torch:6.1f} ms more")
    figures: dict[str, object] = {"import_torch_ms": t_torch, "import_sgemm_bi_ms": t_import - t_torch}
    device = "cuda" if torch.cuda.is_available() else "cpu"
    torch.manual_seed(0)
    for tier, dtype in (("scalar", torch.float32), ("tensor_cores", torch.bfloat16)):
        x = torch.randn(64, 4096, dtype=dtype, device=device)
        w = torch.randn(4096, 4096, dtype=dtype, device=device)
        if device == "cuda":
            torch.cuda.synchronize()
        before = since_start()
        sgemm_bi.linear(x, w, tier=tier)
        if device == "cuda":
            torch.cuda.synchronize()
        first = since_start()
        sgemm_bi.linear(x, w, tier=tier)
        if device == "cuda":
            torch.cuda.synchronize()
        second = since_start()
        print(f"first {tier} call (64x4096x4096 {str(dtype)[6:]}): {first:9.1f} ms after start "
              f"({first - before:.1f} ms for the call; the next {second - first:.2f} ms)")
        figures[f"first_{tier}_ms_after_start"] = first
        figures[f"first_{tier}_call_ms"] = first - before
    info = sgemm_bi.build_info(device if device == "cpu" else "cuda:0")
    print("build:", json.dumps({k: v for k, v in info.items() if k != "loaded"}))
    for image in info.get("loaded", []):
        print("loaded:", json.dumps(image))
    figures["build_info"] = info
    if "--json" in sys.argv:
        print(json.dumps(figures))


if __name__ == "__main__":
    main()
