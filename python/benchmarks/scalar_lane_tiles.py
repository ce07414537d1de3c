"""The chain side of the scalar few-row kernel by lane tile: what a block's chain warps cost
when every stage is already in shared memory, for tiles of TM rows × TN columns per lane.
Prints a markdown table.

The scalar tier's contract runs each output as one f32 ``fma`` chain in ascending k, so at a
few rows a lane runs a small tile of chains and every k step reads its A and B elements from
shared memory: A as a broadcast (one address per warp), B as one element per lane and
column. Which tile costs the fewest cycles per k step decides the kernel's shape, and this
probe measures it without the producers: each block's chain warps run K steps over two
stages of uninitialised shared memory (the timing does not depend on the values), reading
eight k steps per group as the kernel does (A as f32, B in its own element type, 16-bit B
unpacked by shifts). ``kernels-gpu/src/scalar/rows.rs`` is the kernel; its tile today is
TM rows × 1 column, 4 chain warps per block (docs/perf-notes.md reads the table).

    python3 python/benchmarks/scalar_lane_tiles.py [--shapes 16x4096x4096,...] [--tiles 4x1/4x1,...]

A tile is ``TMxTN/WRxWC``: TM rows by TN columns per lane (lane l takes columns l, l + 32,
…), WR × WC chain warps per block (warps split the block's rows WR ways and its columns WC
ways). Cycles per k step are a block's ``clock64`` span over its whole run divided by K,
median over blocks. Needs CuPy (its NVRTC compiles the probe for the device it finds) and a
CUDA GPU; exits 2 without them. Nothing of sgemm-bi is used.
"""

from __future__ import annotations

import argparse
import statistics
import sys

PROBE = r"""
template <int TM, int TN, int WR, int WC, int E>
__global__ void __launch_bounds__(WR * WC * 32)
chains(float* out, unsigned long long* cycles, int M, int N, int K) {
  extern __shared__ __align__(16) unsigned char smem[];
  constexpr int KS = 256 / E;          // k steps per stage: 256 bytes of k per row
  constexpr int ROWS = WR * TM, COLS = WC * 32 * TN;
  constexpr int PITCH = KS * E + 16;   // a staged B column, padded as the kernel pads it
  constexpr int B_STAGE = COLS * PITCH, A_STAGE = ROWS * KS * 4;
  const unsigned char* b_ring = smem;
  const unsigned char* a_ring = smem + 2 * B_STAGE;
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  int wr = warp % WR, wc = warp / WR;
  int tiles_n = N / COLS;
  int m0 = (blockIdx.x / tiles_n) * ROWS, n0 = (blockIdx.x % tiles_n) * COLS;
  float acc[TM][TN];
#pragma unroll
  for (int i = 0; i < TM; ++i)
#pragma unroll
    for (int j = 0; j < TN; ++j) acc[i][j] = 0.f;
  unsigned long long t0 = clock64();
#pragma unroll 2
  for (int k = 0; k < K; k += 8) {
    int stage = (k / KS) & 1, kk = k % KS;
    float b[TN][8];
#pragma unroll
    for (int j = 0; j < TN; ++j) {
      const unsigned char* col =
          b_ring + stage * B_STAGE + (wc * 32 * TN + j * 32 + lane) * PITCH + kk * E;
      if (E == 2) {
        uint4 r = *reinterpret_cast<const uint4*>(col);
        unsigned w[4] = {r.x, r.y, r.z, r.w};
#pragma unroll
        for (int u = 0; u < 4; ++u) {
          b[j][2 * u] = __uint_as_float(w[u] << 16);
          b[j][2 * u + 1] = __uint_as_float(w[u] & 0xffff0000u);
        }
      } else {
        float4 lo = *reinterpret_cast<const float4*>(col);
        float4 hi = *reinterpret_cast<const float4*>(col + 16);
        float v[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
#pragma unroll
        for (int u = 0; u < 8; ++u) b[j][u] = v[u];
      }
    }
    float a[TM][8];
#pragma unroll
    for (int i = 0; i < TM; ++i) {
      const unsigned char* row = a_ring + stage * A_STAGE + (wr * TM + i) * KS * 4 + kk * 4;
      float4 lo = *reinterpret_cast<const float4*>(row);
      float4 hi = *reinterpret_cast<const float4*>(row + 16);
      float v[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
#pragma unroll
      for (int u = 0; u < 8; ++u) a[i][u] = v[u];
    }
#pragma unroll
    for (int u = 0; u < 8; ++u)
#pragma unroll
      for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = __fmaf_rn(a[i][u], b[j][u], acc[i][j]);
  }
  unsigned long long t1 = clock64();
  if (threadIdx.x == 0) cycles[blockIdx.x] = t1 - t0;
#pragma unroll
  for (int i = 0; i < TM; ++i)
#pragma unroll
    for (int j = 0; j < TN; ++j) {
      int r = m0 + wr * TM + i, c = n0 + wc * 32 * TN + j * 32 + lane;
      if (r < M) out[(size_t)r * N + c] = acc[i][j];
    }
}
"""

DEFAULT_SHAPES = "4x4096x4096,16x4096x4096,64x4096x4096,16x4096x14336"
DEFAULT_TILES = ("4x1/4x1,2x1/8x1,8x1/2x1,2x2/4x1,2x2/2x2,1x4/4x1,1x2/4x2,"
                 "4x2/2x1,4x2/4x1,2x4/4x1,4x4/4x1,8x2/4x1")


def parse_shapes(text: str) -> list[tuple[int, int, int]]:
    """``"16x4096x4096"`` → ``[(16, 4096, 4096)]``: M × K × N, K a multiple of 8."""
    shapes = []
    for item in (s for s in text.split(",") if s):
        parts = item.lower().split("x")
        try:
            m, k, n = (int(p) for p in parts)
        except ValueError:
            m = k = n = 0
        if len(parts) != 3 or m < 1 or n < 1 or k < 8 or k % 8:
            raise argparse.ArgumentTypeError(
                f"shape {item!r}: MxKxN, positive, K a multiple of 8")
        shapes.append((m, k, n))
    if not shapes:
        raise argparse.ArgumentTypeError("no shapes")
    return shapes


def parse_tiles(text: str) -> list[tuple[int, int, int, int]]:
    """``"2x2/4x1"`` → ``[(2, 2, 4, 1)]``: TM × TN per lane, WR × WC warps per block."""
    tiles = []
    for item in (s for s in text.split(",") if s):
        try:
            lane, warps = item.lower().split("/")
            tm, tn = (int(p) for p in lane.split("x"))
            wr, wc = (int(p) for p in warps.split("x"))
        except ValueError:
            tm = tn = wr = wc = 0
        if tm not in (1, 2, 4, 8, 16) or tn not in (1, 2, 4) or wr < 1 or wc < 1 \
                or wr * wc > 16 or tm * tn > 32:
            raise argparse.ArgumentTypeError(
                f"tile {item!r}: TMxTN/WRxWC, TM in 1..16 (powers of two), TN in 1, 2, 4, "
                "TM·TN ≤ 32, at most 16 warps")
        tiles.append((tm, tn, wr, wc))
    if not tiles:
        raise argparse.ArgumentTypeError("no tiles")
    return tiles


def smem_bytes(tm: int, tn: int, wr: int, wc: int, elem: int) -> int:
    """Two stages of B columns (256 bytes of k each, padded by 16) and of f32 A rows."""
    ks = 256 // elem
    return 2 * (wc * 32 * tn * (ks * elem + 16) + wr * tm * ks * 4)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shapes", type=parse_shapes, default=parse_shapes(DEFAULT_SHAPES),
                    help=f"M×K×N, comma-separated (default {DEFAULT_SHAPES})")
    ap.add_argument("--tiles", type=parse_tiles, default=parse_tiles(DEFAULT_TILES),
                    help="lane tiles TMxTN/WRxWC, comma-separated (default: twelve)")
    ap.add_argument("--samples", type=int, default=15, help="timed samples per row (median)")
    args = ap.parse_args()
    try:
        import cupy as cp
    except ImportError as e:
        print(f"scalar_lane_tiles: CuPy is needed ({e})", file=sys.stderr)
        sys.exit(2)
    try:
        arch = f"sm_{cp.cuda.Device(0).compute_capability}"  # "90" → sm_90
        name = cp.cuda.runtime.getDeviceProperties(0)["name"].decode()
    except cp.cuda.runtime.CUDARuntimeError as e:
        print(f"scalar_lane_tiles: no CUDA GPU ({e})", file=sys.stderr)
        sys.exit(2)
    kernels = {(t, e): f"chains<{t[0]},{t[1]},{t[2]},{t[3]},{e}>"
               for t in args.tiles for e in (2, 4)}
    module = cp.RawModule(code=PROBE, options=(f"-arch={arch}", "-std=c++17"),
                          name_expressions=list(kernels.values()))
    print(f"# The scalar few-row kernel's chain side by lane tile, {name}\n")
    print("No producers: stages assumed in shared memory. Time: median of "
          f"{args.samples} samples of 10 back-to-back launches; cycles per k step: a block's "
          "`clock64` span over K, median of blocks.\n")
    print("| M × K × N | B | lane tile TM × TN | warps WR × WC | blocks | µs | SM cycles per k step |")
    print("|---|---|---|---|---:|---:|---:|")
    for m, k, n in args.shapes:
        out = cp.zeros(m * n, dtype=cp.float32)
        for (tm, tn, wr, wc) in args.tiles:
            rows, cols = wr * tm, wc * 32 * tn
            if n % cols:
                print(f"| {m} × {k} × {n} | | {tm} × {tn} | {wr} × {wc} | | N not a multiple "
                      f"of {cols} | |")
                continue
            blocks = -(-m // rows) * (n // cols)
            cycles = cp.zeros(blocks, dtype=cp.uint64)
            for elem in (2, 4):
                f = module.get_function(kernels[((tm, tn, wr, wc), elem)])
                smem = smem_bytes(tm, tn, wr, wc, elem)
                if smem > 48 * 1024:
                    f.max_dynamic_shared_size_bytes = smem
                launch = ((blocks,), (wr * wc * 32,),
                          (out, cycles, cp.int32(m), cp.int32(n), cp.int32(k)))
                for _ in range(3):
                    f(*launch, shared_mem=smem)
                times = []
                for _ in range(args.samples):
                    start, stop = cp.cuda.Event(), cp.cuda.Event()
                    start.record()
                    for _ in range(10):
                        f(*launch, shared_mem=smem)
                    stop.record()
                    stop.synchronize()
                    times.append(cp.cuda.get_elapsed_time(start, stop) * 100)  # µs a launch
                span = float(cp.median(cycles.astype(cp.float64)).get())
                print(f"| {m} × {k} × {n} | {'bf16' if elem == 2 else 'f32'} | {tm} × {tn} | "
                      f"{wr} × {wc} | {blocks} | {statistics.median(times):.2f} | "
                      f"{span / k:.1f} |", flush=True)


if __name__ == "__main__":
    main()
