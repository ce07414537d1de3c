"""Dependent-step latency of a chain of `wgmma.mma_async` steps (m64n8k16 and m64n16k16,
bf16 -> f32, both operands from shared memory, one warpgroup) against the number of steps
issued between commits (`wgmma.commit_group`) and the number of groups left in flight
(`wgmma.wait_group W`), with `mma.sync.m16n8k16` for reference. Prints cycles per step.
The values multiplied do not matter (zeros); only the chain's timing does.

On the GPU host (CuPy compiles the kernels with NVRTC; docs/perf-notes.md, session 28):

    python3 scripts/microbench/wgmma_chain.py
"""
import cupy as cp
src = r'''
#define WG(N, REGS, OUTS, INS, W) \
extern "C" __global__ void wg_n##N##_w##W(long long* cycles, float* out, int trips, int batch) { \
  __shared__ __align__(1024) unsigned char smem[32768]; \
  for (int i = threadIdx.x; i < 32768/4; i += blockDim.x) ((unsigned*)smem)[i] = 0; \
  __syncthreads(); \
  asm volatile("fence.proxy.async.shared::cta;"); \
  unsigned addr = (unsigned)__cvta_generic_to_shared(smem); \
  unsigned long long da = ((addr & 0x3FFFF) >> 4) | (1ull << 16) | (64ull << 32) | (1ull << 62); \
  unsigned long long db = (((addr + 16384) & 0x3FFFF) >> 4) | (1ull << 16) | (64ull << 32) | (1ull << 62); \
  float d[REGS] = {}; \
  asm volatile("wgmma.fence.sync.aligned;"); \
  long long t0 = clock64(); \
  for (int t = 0; t < trips; ++t) { \
    for (int j = 0; j < batch; ++j) { \
      asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n" \
        "wgmma.mma_async.sync.aligned.m64n" #N "k16.f32.bf16.bf16 " OUTS ", %" #REGS ", %" #INS ", p, 1, 1, 0, 0;\n}\n" \
        : ARGS_##N : "l"(da), "l"(db)); \
    } \
    asm volatile("wgmma.commit_group.sync.aligned;"); \
    asm volatile("wgmma.wait_group.sync.aligned " #W ";" ::: "memory"); \
  } \
  asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory"); \
  long long t1 = clock64(); \
  float acc = 0; for (int i = 0; i < REGS; ++i) acc += d[i]; \
  out[threadIdx.x] = acc; if (threadIdx.x == 0) *cycles = t1 - t0; \
}
#define ARGS_8 "+f"(d[0]),"+f"(d[1]),"+f"(d[2]),"+f"(d[3])
#define ARGS_16 "+f"(d[0]),"+f"(d[1]),"+f"(d[2]),"+f"(d[3]),"+f"(d[4]),"+f"(d[5]),"+f"(d[6]),"+f"(d[7])
WG(8, 4, "{%0,%1,%2,%3}", 5, 0)
WG(8, 4, "{%0,%1,%2,%3}", 5, 1)
WG(8, 4, "{%0,%1,%2,%3}", 5, 3)
WG(8, 4, "{%0,%1,%2,%3}", 5, 6)
WG(16, 8, "{%0,%1,%2,%3,%4,%5,%6,%7}", 9, 0)
WG(16, 8, "{%0,%1,%2,%3,%4,%5,%6,%7}", 9, 1)
WG(16, 8, "{%0,%1,%2,%3,%4,%5,%6,%7}", 9, 3)
WG(16, 8, "{%0,%1,%2,%3,%4,%5,%6,%7}", 9, 6)
extern "C" __global__ void hmma(long long* cycles, float* out, int trips, int batch) {
  float d0=0,d1=0,d2=0,d3=0; unsigned a=0x3f803f80u, b=0x3c003c00u;
  long long t0 = clock64();
  for (int t = 0; t < trips*batch; ++t)
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%4,%4,%4}, {%5,%5}, {%0,%1,%2,%3};"
      : "+f"(d0),"+f"(d1),"+f"(d2),"+f"(d3) : "r"(a), "r"(b));
  long long t1 = clock64();
  out[threadIdx.x] = d0+d1+d2+d3; if (threadIdx.x == 0) *cycles = t1 - t0;
}
'''
mod = cp.RawModule(code=src, options=("-arch=sm_90a", "-std=c++17"))
cyc = cp.zeros(1, dtype=cp.int64); out = cp.zeros(128, dtype=cp.float32)
for name, threads in [("hmma", 32)] + [(f"wg_n{n}_w{w}", 128) for n in (8, 16) for w in (0, 1, 3, 6)]:
    k = mod.get_function(name)
    for batch in ((1,) if name == "hmma" else (1, 2, 4, 8, 64)):
        trips = 2048 // batch
        for _ in range(2):
            k((1,), (threads,), (cyc, out, cp.int32(trips), cp.int32(batch)))
        cp.cuda.Device().synchronize()
        print(f"{name}: {batch} steps per commit: {int(cyc.get()[0]) / (trips * batch):.1f} cycles per step")
