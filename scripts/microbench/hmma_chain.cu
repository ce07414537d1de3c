// Dependent-chain latency of mma.sync m16n8k16 (bf16 -> f32): one warp, `steps` dependent
// steps on each of INDEP independent accumulators; prints cycles per step of each chain.
// On the GPU host (docs/perf-notes.md, version 5):
//   nvcc -O3 -arch=sm_90a -o /tmp/hmma scripts/microbench/hmma_chain.cu && /tmp/hmma
#include <cstdio>
#include <cstdint>
template <int INDEP>
__global__ void chain(float* out, long long* cycles, int steps) {
  float d[INDEP][4] = {};
  uint32_t a0 = 0x3f803f80u, a1 = a0, a2 = a0, a3 = a0, b0 = 0x3c003c00u, b1 = b0;
  __syncwarp();
  long long t0 = clock64();
  for (int s = 0; s < steps; ++s) {
#pragma unroll
    for (int i = 0; i < INDEP; ++i) {
      asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                   : "+f"(d[i][0]), "+f"(d[i][1]), "+f"(d[i][2]), "+f"(d[i][3])
                   : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
    }
  }
  long long t1 = clock64();
  float acc = 0;
  for (int i = 0; i < INDEP; ++i) acc += d[i][0] + d[i][1] + d[i][2] + d[i][3];
  out[threadIdx.x] = acc;
  if (threadIdx.x == 0) *cycles = t1 - t0;
}
template <int INDEP>
void run(float* out, long long* cyc) {
  const int steps = 4096;
  chain<INDEP><<<1, 32>>>(out, cyc, steps);
  chain<INDEP><<<1, 32>>>(out, cyc, steps);
  long long h;
  cudaMemcpy(&h, cyc, 8, cudaMemcpyDeviceToHost);
  printf("mma.sync m16n8k16 bf16: %d independent chain(s): %.1f cycles per step of each chain\n", INDEP, double(h) / steps);
}
int main() {
  float* out; long long* cyc;
  cudaMalloc(&out, 4096); cudaMalloc(&cyc, 8);
  run<1>(out, cyc); run<2>(out, cyc); run<4>(out, cyc); run<8>(out, cyc);
  return 0;
}
