// How fast can one block per strip of R output columns stream a K-contiguous weight W[N, K]
// (torch's [out, in] layout, bf16) the way our decode tiles read it, and does a consumer
// that spends a fixed number of cycles per stage (the chain of wgmmas over the stage's k)
// hide behind the stream? No math: the copy pattern alone.
//
//   box k:    the k extent of one copy-engine box (64: 128 bytes a row, 128B swizzle as the
//             kernels' stages; 128 and 256: 256 and 512 bytes a row, no swizzle).
//   boxes:    boxes per stage (one barrier per stage).
//   ring:     bytes of stages in flight per block.
//   chain:    cycles the consumer warp spins per 64 k of each stage before releasing it
//             (0: wait and release; ~300: four dependent wgmma.m64nNk16).
//
// Each sample times 20 launches back to back on weights rotated over 512 MiB (cold L2),
// as bench_torch_baseline's graphs of 20 calls do; median of 15 samples, µs per launch.
//
// On the GPU host:
//   nvcc -O3 -gencode=arch=compute_90a,code=sm_90a -o /tmp/kstream \
//     scripts/microbench/kmajor_stream.cu -lcuda && /tmp/kstream
#include <cuda.h>
#include <cuda_runtime.h>
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <vector>

#define CK(x) do { auto e = (x); if (e != 0) { printf("error %d at %s:%d\n", (int)e, __FILE__, __LINE__); exit(1); } } while (0)

constexpr int SMEM_AREA = 192 * 1024;
constexpr int MAX_STAGES = 64;

__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void mbar_init(uint32_t bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count));
}
__device__ __forceinline__ void mbar_expect_tx(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes));
}
__device__ __forceinline__ void mbar_arrive(uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar));
}
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
  asm volatile(
      "{ .reg .pred p; W: mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1; @!p bra W; }" ::"r"(bar),
      "r"(parity));
}
__device__ __forceinline__ void tma_2d(uint32_t dst, const CUtensorMap* map, int x, int y, uint32_t bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];" ::"r"(dst),
      "l"(map), "r"(x), "r"(y), "r"(bar)
      : "memory");
}

// Block b streams strips b, b + grid, …; strip s is rows s·R … of W over all of K, in stages
// of `boxes` boxes of (box_k, R). Warp 0 lane 0 copies; warp 1 waits, spins `chain` cycles
// per 64 k, releases.
__global__ void stream(const __grid_constant__ CUtensorMap map, int k, int n, int rows, int box_k, int boxes,
                       int stages, int chain, int* sink) {
  extern __shared__ __align__(1024) uint8_t smem[];
  uint8_t* base = (uint8_t*)(((uintptr_t)smem + 1023) & ~(uintptr_t)1023);
  const uint32_t box_bytes = box_k * rows * 2, stage_bytes = box_bytes * boxes;
  __shared__ __align__(8) uint64_t full[MAX_STAGES], empty[MAX_STAGES];
  if (threadIdx.x == 0) {
    for (int s = 0; s < stages; ++s) {
      mbar_init(smem_u32(&full[s]), 1);
      mbar_init(smem_u32(&empty[s]), 1);
    }
    asm volatile("fence.mbarrier_init.release.cluster;");
  }
  __syncthreads();
  const int strips = n / rows, k_stages = k / (box_k * boxes);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  uint32_t it = 0;
  if (warp == 0) {
    if (lane == 0)
      for (int strip = blockIdx.x; strip < strips; strip += gridDim.x)
        for (int ks = 0; ks < k_stages; ++ks, ++it) {
          int s = it % stages;
          mbar_wait(smem_u32(&empty[s]), ((it / stages) & 1) ^ 1);
          mbar_expect_tx(smem_u32(&full[s]), stage_bytes);
          for (int b = 0; b < boxes; ++b)
            tma_2d(smem_u32(base + s * stage_bytes + b * box_bytes), &map, (ks * boxes + b) * box_k, strip * rows,
                   smem_u32(&full[s]));
        }
  } else if (warp == 1) {
    int acc = 0;
    const long long spin = (long long)chain * box_k * boxes / 64;
    for (int strip = blockIdx.x; strip < strips; strip += gridDim.x)
      for (int ks = 0; ks < k_stages; ++ks, ++it) {
        int s = it % stages;
        mbar_wait(smem_u32(&full[s]), (it / stages) & 1);
        acc += base[s * stage_bytes + lane];
        if (spin) {
          long long t0 = clock64();
          while (clock64() - t0 < spin) {
          }
        }
        __syncwarp();
        if (lane == 0) mbar_arrive(smem_u32(&empty[s]));
      }
    if (acc == 0x7fffffff) sink[0] = acc;
  }
}

int main() {
  struct Shape { int n, k; };
  const Shape shapes[] = {{2048, 5632}, {4096, 4096}, {2048, 2048}, {5632, 2048}, {14336, 4096}};
  const size_t rotate_bytes = 512ull << 20;
  int sms = 0;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  int* sink;
  CK(cudaMalloc(&sink, 4));
  CK(cudaFuncSetAttribute(stream, cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM_AREA + 1024));
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  printf("| N × K | R | blocks | box k | boxes | stage KiB | ring KiB | chain | µs | TB/s |\n");
  printf("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  for (auto sh : shapes) {
    const size_t wbytes = (size_t)sh.n * sh.k * 2;
    const int copies = (int)std::max<size_t>(4, rotate_bytes / wbytes);
    std::vector<void*> ws(copies);
    for (auto& p : ws) {
      CK(cudaMalloc(&p, wbytes));
      CK(cudaMemset(p, 1, wbytes));
    }
    // A device copy of the same bytes: the rate the stream is held to.
    {
      void* dst;
      CK(cudaMalloc(&dst, wbytes));
      std::vector<float> t;
      for (int i = 0; i < 15; ++i) {
        CK(cudaEventRecord(e0));
        for (int j = 0; j < 20; ++j) CK(cudaMemcpyAsync(dst, ws[(i * 20 + j) % copies], wbytes, cudaMemcpyDeviceToDevice));
        CK(cudaEventRecord(e1));
        CK(cudaEventSynchronize(e1));
        float ms;
        CK(cudaEventElapsedTime(&ms, e0, e1));
        t.push_back(ms * 1000 / 20);
      }
      std::sort(t.begin(), t.end());
      printf("| %d × %d | copy (read + write) | – | – | – | – | – | – | %.1f | %.2f |\n", sh.n, sh.k, t[7],
             2 * wbytes / t[7] / 1e6);
      CK(cudaFree(dst));
    }
    for (int rows : {16, 32, 64}) {
      if (sh.n / rows < sms / 2 || sh.n / rows > 4 * sms) continue;
      for (int box_k : {64, 128, 256}) {
        std::vector<CUtensorMap> maps(copies);
        for (int c = 0; c < copies; ++c) {
          cuuint64_t dims[2] = {(cuuint64_t)sh.k, (cuuint64_t)sh.n};
          cuuint64_t strides[1] = {(cuuint64_t)sh.k * 2};
          cuuint32_t box[2] = {(cuuint32_t)box_k, (cuuint32_t)rows};
          cuuint32_t es[2] = {1, 1};
          CK(cuTensorMapEncodeTiled(&maps[c], CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, ws[c], dims, strides, box, es,
                                    CU_TENSOR_MAP_INTERLEAVE_NONE,
                                    box_k == 64 ? CU_TENSOR_MAP_SWIZZLE_128B : CU_TENSOR_MAP_SWIZZLE_NONE,
                                    CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE));
        }
        for (int boxes : {1, 2, 4}) {
          if (box_k * boxes > 256 || sh.k % (box_k * boxes)) continue;
          const int stage_bytes = box_k * boxes * rows * 2;
          for (int ring_kib : {32, 64, 128}) {
            const int stages = std::min(MAX_STAGES, ring_kib * 1024 / stage_bytes);
            if (stages < 2) continue;
            const int strips = sh.n / rows;
            const int per_sm = ring_kib <= 64 ? 2 : 1;
            const int blocks = std::min(strips, per_sm * sms);
            for (int chain : {0, 300}) {
              std::vector<float> t;
              for (int i = 0; i < 16; ++i) {
                CK(cudaEventRecord(e0));
                for (int j = 0; j < 20; ++j)
                  stream<<<blocks, 64, ring_kib * 1024 + 1024>>>(maps[(i * 20 + j) % copies], sh.k, sh.n, rows, box_k,
                                                               boxes, stages, chain, sink);
                CK(cudaEventRecord(e1));
                CK(cudaEventSynchronize(e1));
                CK(cudaGetLastError());
                float ms;
                CK(cudaEventElapsedTime(&ms, e0, e1));
                if (i) t.push_back(ms * 1000 / 20);
              }
              std::sort(t.begin(), t.end());
              printf("| %d × %d | %d | %d | %d | %d | %.1f | %d | %d | %.1f | %.2f |\n", sh.n, sh.k, rows, blocks, box_k,
                     boxes, stage_bytes / 1024.0, stages * stage_bytes / 1024, chain, t[7], wbytes / t[7] / 1e6);
            }
          }
        }
      }
    }
    for (auto p : ws) CK(cudaFree(p));
  }
  return 0;
}
