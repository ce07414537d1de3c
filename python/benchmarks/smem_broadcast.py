"""What a shared-memory read costs the SM by pattern: a broadcast (every lane of a warp reads
the same address, as the scalar few-row kernel reads A) against 32 distinct conflict-free
16-byte addresses (as it reads its B columns). Prints a markdown table.

Each of 132 blocks (one per SM of an H100 or H200) runs W warps that read shared memory in a
loop of 8 independent loads per trip; a block's ``clock64`` span over its loads, divided by
the warp-loads the block issued, is the SM's cycles per warp-load. Where that figure stops
falling as W grows, the shared-memory pipe is the limit (32 distinct 16-byte reads: four
wavefronts); where it still falls, the loads are latency-bound and the pipe's cost is at
most the figure. docs/perf-notes.md ("Scalar few-row kernel and dW into f32: two H100
profiles") reads the table.

    python3 python/benchmarks/smem_broadcast.py [--warps 4,16,32] [--iters 4096]

Needs CuPy (its NVRTC compiles the probe for the device it finds) and a CUDA GPU; exits 2
without them. Nothing of sgemm-bi is used.
"""

from __future__ import annotations

import argparse
import sys

PROBE = r"""
extern "C" __global__ void probe(unsigned long long* cycles, int iters, int pattern, float* sink) {
  __shared__ __align__(16) float s[8192];
  for (int i = threadIdx.x; i < 8192; i += blockDim.x) s[i] = i * 0.5f;
  __syncthreads();
  unsigned lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  unsigned base = (unsigned)__cvta_generic_to_shared(s);
  float acc[8] = {0.f};
  unsigned long long t0 = clock64();
  for (int it = 0; it < iters; ++it) {
    // 16-byte aligned, moving with the trip and the warp.
    unsigned addr = base + ((it * 64 + warp * 1024) & 4095) * 4;
    if (pattern == 1) addr += lane * 16;
    #pragma unroll
    for (int u = 0; u < 8; ++u) {
      unsigned at = addr + u * 128;
      float a, b, c, d;
      if (pattern <= 1) {
        asm volatile("ld.shared.v4.f32 {%0,%1,%2,%3}, [%4];"
                     : "=f"(a), "=f"(b), "=f"(c), "=f"(d) : "r"(at));
      } else if (pattern == 2) {
        asm volatile("ld.shared.v2.f32 {%0,%1}, [%2];" : "=f"(a), "=f"(b) : "r"(at));
      } else {
        asm volatile("ld.shared.f32 %0, [%1];" : "=f"(a) : "r"(at));
      }
      acc[u] += a;
    }
  }
  unsigned long long t1 = clock64();
  __syncthreads();
  if (threadIdx.x == 0) cycles[blockIdx.x] = t1 - t0;
  float t = 0.f;
  for (int u = 0; u < 8; ++u) t += acc[u];
  if (t == 12345.f) sink[threadIdx.x] = t;
}
"""

PATTERNS = [
    "`ld.shared.v4` broadcast (one address per warp)",
    "`ld.shared.v4`, 32 distinct addresses without conflicts",
    "`ld.shared.v2` broadcast",
    "`ld.shared.b32` broadcast",
]
BLOCKS = 132
LOADS_PER_TRIP = 8


def parse_warps(text: str) -> list[int]:
    """``"4,16,32"`` → ``[4, 16, 32]``: warps per block, 1 … 32 each."""
    try:
        warps = [int(w) for w in text.split(",") if w]
    except ValueError:
        warps = []
    if not warps or any(not 1 <= w <= 32 for w in warps):
        raise argparse.ArgumentTypeError(f"warps {text!r}: comma-separated counts of 1 to 32")
    return warps


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--warps", type=parse_warps, default=[4, 16, 32],
                    help="warps per block, comma-separated (default 4,16,32)")
    ap.add_argument("--iters", type=int, default=4096, help="loop trips per warp")
    args = ap.parse_args()
    try:
        import cupy as cp
    except ImportError as e:
        print(f"smem_broadcast: CuPy is needed ({e})", file=sys.stderr)
        sys.exit(2)
    try:
        arch = f"sm_{cp.cuda.Device(0).compute_capability}"  # "90" → sm_90
        name = cp.cuda.runtime.getDeviceProperties(0)["name"].decode()
    except cp.cuda.runtime.CUDARuntimeError as e:
        print(f"smem_broadcast: no CUDA GPU ({e})", file=sys.stderr)
        sys.exit(2)
    probe = cp.RawModule(code=PROBE, options=(f"-arch={arch}",)).get_function("probe")
    sink = cp.zeros(1024, dtype=cp.float32)
    print(f"# Shared-memory reads by pattern, {name}\n")
    print("SM cycles per warp-load (a block's `clock64` span over the loads of its warps), "
          f"median of {BLOCKS} blocks, {args.iters} trips of {LOADS_PER_TRIP} loads per warp.\n")
    print("| read | " + " | ".join(f"{w} warps per SM" for w in args.warps) + " |")
    print("|---|" + "---:|" * len(args.warps))
    for pattern, label in enumerate(PATTERNS):
        cells = []
        for warps in args.warps:
            cycles = cp.zeros(BLOCKS, dtype=cp.uint64)
            for _ in range(3):  # the last of three launches: warm clocks and instruction cache
                probe((BLOCKS,), (32 * warps,), (cycles, cp.int32(args.iters),
                                                 cp.int32(pattern), sink))
            cp.cuda.runtime.deviceSynchronize()
            span = float(cp.median(cycles.astype(cp.float64)).get())
            cells.append(f"{span / (args.iters * LOADS_PER_TRIP * warps):.2f}")
        print(f"| {label} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
