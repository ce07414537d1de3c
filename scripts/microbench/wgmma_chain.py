"""Dependent-step latency of a chain of `wgmma.mma_async` steps (m64n8k16 and m64n16k16,
bf16 -> f32, both operands from shared memory, one warpgroup) against the number of steps
issued between commits (`wgmma.commit_group`, each group waited for with `wait_group 0`:
the next group depends on it anyway), with `mma.sync.m16n8k16` for reference. Prints cycles
per step. The values multiplied do not matter (zeros); only the chain's timing does.

Check the machine code before trusting a table: the source compiled with NVRTC
(`nvidia-cuda-nvrtc-cu12`) for sm_90a and assembled with `ptxas -v` must print no C75xx
"Potential Performance Loss" or C7519 line, and `cuobjdump -sass` must show one
`WARPGROUP.ARRIVE` per group and no dummy `HGMMA.64x8x16.F16 RZ`. Variants that leave groups
in flight (`wait_group 1` or `3`) were C7514/C7515-serialized by ptxas at 1 and 64 steps a
group, so they are not built.

On the GPU host (CuPy compiles the kernels with NVRTC; docs/perf-notes.md, session 28):

    python3 scripts/microbench/wgmma_chain.py
"""
import cupy as cp
src = r'''
// One kernel per (N, steps per group, groups in flight): the group's steps are a constant
// count, unrolled, and each group opens with its own `wgmma.fence`. A run-time count of
// steps (the first version of this file) made ptxas inject a `warpgroup.arrive` into every
// unrolled chunk of the group (info C7519) and close each commit group with a dummy
// `HGMMA.64x8x16.F16 RZ`, neither of which the library's kernels have.
template <int N> struct Acc;
template <> struct Acc<8> { float d[4]; };
template <> struct Acc<16> { float d[8]; };
template <int N> __device__ __forceinline__ void step(Acc<N>& a, unsigned long long da, unsigned long long db);
template <> __device__ __forceinline__ void step<8>(Acc<8>& a, unsigned long long da, unsigned long long db) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
    "wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16 {%0,%1,%2,%3}, %4, %5, p, 1, 1, 0, 0;\n}\n"
    : "+f"(a.d[0]), "+f"(a.d[1]), "+f"(a.d[2]), "+f"(a.d[3]) : "l"(da), "l"(db));
}
template <> __device__ __forceinline__ void step<16>(Acc<16>& a, unsigned long long da, unsigned long long db) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
    "wgmma.mma_async.sync.aligned.m64n16k16.f32.bf16.bf16 {%0,%1,%2,%3,%4,%5,%6,%7}, %8, %9, p, 1, 1, 0, 0;\n}\n"
    : "+f"(a.d[0]), "+f"(a.d[1]), "+f"(a.d[2]), "+f"(a.d[3]),
      "+f"(a.d[4]), "+f"(a.d[5]), "+f"(a.d[6]), "+f"(a.d[7]) : "l"(da), "l"(db));
}
template <int N, int BATCH, int W>
__device__ __forceinline__ void chain(long long* cycles, float* out, int trips) {
  __shared__ __align__(1024) unsigned char smem[32768];
  for (int i = threadIdx.x; i < 32768/4; i += blockDim.x) ((unsigned*)smem)[i] = 0;
  __syncthreads();
  asm volatile("fence.proxy.async.shared::cta;");
  unsigned addr = (unsigned)__cvta_generic_to_shared(smem);
  unsigned long long da = ((addr & 0x3FFFF) >> 4) | (1ull << 16) | (64ull << 32) | (1ull << 62);
  unsigned long long db = (((addr + 16384) & 0x3FFFF) >> 4) | (1ull << 16) | (64ull << 32) | (1ull << 62);
  Acc<N> acc = {};
  long long t0 = clock64();
  for (int t = 0; t < trips; ++t) {
    asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
#pragma unroll
    for (int j = 0; j < BATCH; ++j) step<N>(acc, da, db);
    asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
    asm volatile("wgmma.wait_group.sync.aligned %0;" :: "n"(W) : "memory");
  }
  asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
  long long t1 = clock64();
  float s = 0; for (int i = 0; i < N / 2; ++i) s += acc.d[i];
  out[threadIdx.x] = s; if (threadIdx.x == 0) *cycles = t1 - t0;
}
#define WG(N, B, W) extern "C" __global__ void wg_n##N##_b##B##_w##W(long long* c, float* o, int trips) { chain<N, B, W>(c, o, trips); }
#define WGS(N, W) WG(N, 1, W) WG(N, 2, W) WG(N, 4, W) WG(N, 8, W) WG(N, 64, W)
WGS(8, 0) WGS(16, 0)
extern "C" __global__ void hmma(long long* cycles, float* out, int trips) {
  float d0=0,d1=0,d2=0,d3=0; unsigned a=0x3f803f80u, b=0x3c003c00u;
  long long t0 = clock64();
  for (int t = 0; t < trips; ++t)
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%4,%4,%4}, {%5,%5}, {%0,%1,%2,%3};"
      : "+f"(d0),"+f"(d1),"+f"(d2),"+f"(d3) : "r"(a), "r"(b));
  long long t1 = clock64();
  out[threadIdx.x] = d0+d1+d2+d3; if (threadIdx.x == 0) *cycles = t1 - t0;
}
'''
mod = cp.RawModule(code=src, options=("-arch=sm_90a", "-std=c++17"))
cyc = cp.zeros(1, dtype=cp.int64); out = cp.zeros(128, dtype=cp.float32)
runs = [("hmma", 32, 1)] + [(f"wg_n{n}_b{b}_w{w}", 128, b)
                            for n in (8, 16) for w in (0,) for b in (1, 2, 4, 8, 64)]
for name, threads, batch in runs:
    k = mod.get_function(name)
    trips = 2048 // batch
    for _ in range(2):
        k((1,), (threads,), (cyc, out, cp.int32(trips)))
    cp.cuda.Device().synchronize()
    print(f"{name}: {batch} steps per commit: {int(cyc.get()[0]) / (trips * batch):.1f} cycles per step")
