// How fast can G blocks stream a weight W[K, N] (bf16, row-major) by column strips, the way a
// decode GEMM reads it (one block per strip of output columns, all of K in order)? No math:
// the copy pattern alone, against the ~4.3 TB/s of a device copy (docs/perf-notes.md, decode).
//
//   tma:  one thread per block issues 2-D bulk tensor copies of (64 k rows, strip) boxes into
//         a ring of stages; the block's other warps wait for each stage and release it at once.
//   ldg:  every thread loads 16-byte pieces of the strip, 8 in flight per thread.
//   tma <mode>: the tma kernel's variants (`tma_modes`, launched with cudaLaunchKernelEx):
//         two blocks per strip that split K (what cuBLAS's split-K does, and C4 forbids),
//         helpers that copy for another block, and the real kernel's stages for M = 256.
//
// What it showed on the H200 (session 10, docs/perf-notes.md "Decode: the strip stream"):
// 64 blocks streaming the 64 strips of 64 columns of a 4096 × 4096 W take 15-20 µs with no
// math at all (1.7-2.2 TB/s), about our decode kernel's time; narrower strips on more blocks,
// deeper or shallower rings, L2 hints and helper blocks did not go faster; only splitting
// K over two blocks did (14-15 µs).
//
// On the GPU host:
//   nvcc -O3 -gencode=arch=compute_90a,code=sm_90a -o /tmp/strips \
//     scripts/microbench/strip_stream.cu -lcuda && /tmp/strips
#include <cuda.h>
#include <cuda_runtime.h>
#include <cstdint>
#include <cstdio>
#include <vector>
#include <algorithm>

#define CK(x) do { auto e = (x); if (e != 0) { printf("error %d at %s:%d\n", (int)e, __FILE__, __LINE__); exit(1); } } while (0)

constexpr int BOX_ROWS = 64;
constexpr int SMEM_STAGE_AREA = 192 * 1024;

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

__device__ __forceinline__ void tma_2d_hint(uint32_t dst, const CUtensorMap* map, int x, int y, uint32_t bar,
                                            uint64_t policy) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.L2::cache_hint [%0], [%1, {%2, %3}], [%4], %5;" ::"r"(dst),
      "l"(map), "r"(x), "r"(y), "r"(bar), "l"(policy)
      : "memory");
}
__device__ __forceinline__ void tma_2d_mc(uint32_t dst, const CUtensorMap* map, int x, int y, uint32_t bar,
                                          uint16_t mask) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster [%0], [%1, {%2, %3}], [%4], %5;" ::"r"(dst),
      "l"(map), "r"(x), "r"(y), "r"(bar), "h"(mask)
      : "memory");
}
__device__ __forceinline__ uint32_t mapa(uint32_t addr, uint32_t rank) {
  uint32_t r;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(r) : "r"(addr), "r"(rank));
  return r;
}
__device__ __forceinline__ void mbar_arrive_cluster(uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0];" ::"r"(bar));
}
__device__ __forceinline__ uint32_t cta_rank() {
  uint32_t r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return r;
}
__device__ __forceinline__ void cluster_sync_all() {
  asm volatile("barrier.cluster.arrive; barrier.cluster.wait;" ::: "memory");
}

// mode 0: block b streams strips b, b + G, ... over all of K.
// mode 1 (half K): 2 blocks per strip, block b streams half (b % 2) of strip b / 2's K.
// mode 2 (evict-first): as mode 0, W's copies with an L2 evict-first policy.
// mode 3 (helper): clusters of two; only CTA 0 consumes; stage s is copied by CTA (s % 2)
//         into CTA 0's shared memory (multicast, mask 1), so two SMs fetch for one.
// mode 4 (two row tiles): 2 blocks per strip, each over all of K (W read twice, as by the
//         two 128-row tiles of M = 256).
// mode 5 (two row tiles + A): as mode 4, and each stage also copies a (128 rows, 64 k) box
//         of an L2-resident A[256, K] (the row tile's A), as the real kernel's stages do.
// mode 6 (prefetch helper): 2 blocks per strip; the even one streams all of K as in mode 0,
//         the odd one only asks the copy engine to bring the strip's second half of K into
//         L2 (no shared memory, no math) and exits.
__global__ void tma_modes(const __grid_constant__ CUtensorMap map, const __grid_constant__ CUtensorMap amap, int k, int n, int strip_cols, int stages,
                          int mode, int* sink) {
  extern __shared__ __align__(1024) uint8_t smem[];
  uint8_t* base = (uint8_t*)(((uintptr_t)smem + 1023) & ~(uintptr_t)1023);
  uint32_t w_bytes = BOX_ROWS * strip_cols * 2;
  uint32_t stage_bytes = w_bytes + (mode == 5 ? 128 * BOX_ROWS * 2 : 0);
  __shared__ __align__(8) uint64_t full[32], empty[32];
  int consumers = blockDim.x / 32 - 1;
  uint32_t rank = mode == 3 ? cta_rank() : 0;
  if (threadIdx.x == 0) {
    for (int s = 0; s < stages; ++s) {
      mbar_init(smem_u32(&full[s]), 1);
      mbar_init(smem_u32(&empty[s]), consumers);
    }
    asm volatile("fence.mbarrier_init.release.cluster;");
  }
  if (mode == 3) cluster_sync_all(); else __syncthreads();
  int strips = n / strip_cols, ktiles = k / BOX_ROWS;
  int unit = blockIdx.x, units = gridDim.x, k_begin = 0, k_end = ktiles;
  if (mode == 1) { unit = blockIdx.x / 2; units = gridDim.x / 2; k_begin = (blockIdx.x % 2) * ktiles / 2; k_end = k_begin + ktiles / 2; }
  if (mode >= 3) { unit = blockIdx.x / 2; units = gridDim.x / 2; }
  int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  uint32_t it = 0;
  uint64_t policy = 0;
  if (mode == 2) asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
  if (mode == 6 && blockIdx.x % 2 == 1) {
    if (threadIdx.x == 0)
      for (int strip = unit; strip < strips; strip += units)
        for (int kt = ktiles / 2; kt < ktiles; ++kt)
          asm volatile("cp.async.bulk.prefetch.tensor.2d.L2.global.tile [%0, {%1, %2}];" ::"l"(&map),
                       "r"(strip * strip_cols), "r"(kt * BOX_ROWS)
                       : "memory");
    return;
  }
  if (warp == 0) {
    if (lane == 0) {
      for (int strip = unit; strip < strips; strip += units)
        for (int kt = k_begin; kt < k_end; ++kt, ++it) {
          int s = it % stages;
          uint32_t par = (it / stages) & 1;
          if (mode == 3) {
            // CTA 0 arms every stage of its own; CTA (s % 2) copies it.
            if (rank == 0) {
              mbar_wait(smem_u32(&empty[s]), par ^ 1);
              mbar_expect_tx(smem_u32(&full[s]), stage_bytes);
              if (s % 2 == 0)
                tma_2d(smem_u32(base + s * stage_bytes), &map, strip * strip_cols, kt * BOX_ROWS, smem_u32(&full[s]));
            } else if (s % 2 == 1) {
              mbar_wait(smem_u32(&empty[s]), par ^ 1);
              tma_2d_mc(smem_u32(base + s * stage_bytes), &map, strip * strip_cols, kt * BOX_ROWS, smem_u32(&full[s]), 1);
            }
            continue;
          }
          mbar_wait(smem_u32(&empty[s]), par ^ 1);
          mbar_expect_tx(smem_u32(&full[s]), stage_bytes);
          if (mode == 5)
            tma_2d(smem_u32(base + s * stage_bytes + w_bytes), &amap, kt * BOX_ROWS, (blockIdx.x % 2) * 128,
                   smem_u32(&full[s]));
          if (mode == 2)
            tma_2d_hint(smem_u32(base + s * stage_bytes), &map, strip * strip_cols, kt * BOX_ROWS, smem_u32(&full[s]), policy);
          else
            tma_2d(smem_u32(base + s * stage_bytes), &map, strip * strip_cols, kt * BOX_ROWS, smem_u32(&full[s]));
        }
    }
  } else if (rank == 0) {
    int acc = 0;
    for (int strip = unit; strip < strips; strip += units)
      for (int kt = k_begin; kt < k_end; ++kt, ++it) {
        int s = it % stages;
        uint32_t par = (it / stages) & 1;
        mbar_wait(smem_u32(&full[s]), par);
        acc += base[s * stage_bytes + lane];
        __syncwarp();
        if (lane == 0) {
          mbar_arrive(smem_u32(&empty[s]));
          if (mode == 3) mbar_arrive_cluster(mapa(smem_u32(&empty[s]), 1));
        }
      }
    if (acc == 0x7fffffff) sink[0] = acc;
  }
  if (mode == 3) cluster_sync_all();
}

// Block b streams strips b, b + G, ...; each strip is `strip_cols` columns over all K rows,
// in boxes of BOX_ROWS rows. Warp 0 lane 0 produces; warps 1.. consume (wait and release).
__global__ void tma_strips(const __grid_constant__ CUtensorMap map, int k, int n, int strip_cols, int stages,
                           int* sink) {
  extern __shared__ __align__(1024) uint8_t smem[];
  uint8_t* base = (uint8_t*)(((uintptr_t)smem + 1023) & ~(uintptr_t)1023);
  uint32_t stage_bytes = BOX_ROWS * strip_cols * 2;
  __shared__ __align__(8) uint64_t full[32], empty[32];
  int consumers = blockDim.x / 32 - 1;
  if (threadIdx.x == 0) {
    for (int s = 0; s < stages; ++s) {
      mbar_init(smem_u32(&full[s]), 1);
      mbar_init(smem_u32(&empty[s]), consumers);
    }
    asm volatile("fence.mbarrier_init.release.cluster;");
  }
  __syncthreads();
  int strips = n / strip_cols, ktiles = k / BOX_ROWS;
  int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  uint32_t it = 0;
  if (warp == 0) {
    if (lane == 0) {
      for (int strip = blockIdx.x; strip < strips; strip += gridDim.x)
        for (int kt = 0; kt < ktiles; ++kt, ++it) {
          int s = it % stages;
          uint32_t par = (it / stages) & 1;
          mbar_wait(smem_u32(&empty[s]), par ^ 1);
          mbar_expect_tx(smem_u32(&full[s]), stage_bytes);
          tma_2d(smem_u32(base + s * stage_bytes), &map, strip * strip_cols, kt * BOX_ROWS, smem_u32(&full[s]));
        }
    }
  } else {
    int acc = 0;
    for (int strip = blockIdx.x; strip < strips; strip += gridDim.x)
      for (int kt = 0; kt < ktiles; ++kt, ++it) {
        int s = it % stages;
        uint32_t par = (it / stages) & 1;
        mbar_wait(smem_u32(&full[s]), par);
        acc += base[s * stage_bytes + lane];
        __syncwarp();
        if (lane == 0) mbar_arrive(smem_u32(&empty[s]));
      }
    if (acc == 0x7fffffff) sink[0] = acc;
  }
}

// The same strips by plain 16-byte loads: thread t of the block loads piece t + i·blockDim.
__global__ void ldg_strips(const uint4* __restrict__ w, int k, int n, int strip_cols, int* sink) {
  int strips = n / strip_cols;
  int pieces_per_row = strip_cols * 2 / 16, row_pieces = n * 2 / 16;
  int total = k * pieces_per_row;
  uint32_t acc = 0;
  for (int strip = blockIdx.x; strip < strips; strip += gridDim.x) {
    for (int base = threadIdx.x; base < total; base += blockDim.x * 8) {
      uint4 v[8];
#pragma unroll
      for (int u = 0; u < 8; ++u) {
        int piece = base + u * blockDim.x;
        if (piece < total) {
          int r = piece / pieces_per_row, c = piece % pieces_per_row;
          v[u] = __ldg(&w[(size_t)r * row_pieces + strip * pieces_per_row + c]);
        } else {
          v[u] = make_uint4(0, 0, 0, 0);
        }
      }
#pragma unroll
      for (int u = 0; u < 8; ++u) acc ^= v[u].x ^ v[u].w;
    }
  }
  if (acc == 0x12345678) sink[0] = acc;
}

int main() {
  const int K = 4096;
  const int Ns[] = {4096, 14336};
  const size_t rotate_bytes = 512ull << 20;
  int* sink;
  CK(cudaMalloc(&sink, 4));
  CK(cudaFuncSetAttribute(tma_strips, cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM_STAGE_AREA + 1024));
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  printf("| kind | N | strip cols | blocks | stages | promo | µs | TB/s |\n|---|---|---|---|---|---|---|---|\n");
  for (int N : Ns) {
    size_t wbytes = (size_t)K * N * 2;
    int copies = (int)std::max<size_t>(2, rotate_bytes / wbytes);
    std::vector<void*> ws(copies);
    for (auto& p : ws) {
      CK(cudaMalloc(&p, wbytes));
      CK(cudaMemset(p, 1, wbytes));
    }
    auto time_it = [&](auto launch) {
      for (int i = 0; i < 3; ++i) launch(ws[i % copies]);
      std::vector<float> t;
      for (int i = 0; i < 30; ++i) {
        CK(cudaEventRecord(e0));
        launch(ws[(i + 3) % copies]);
        CK(cudaEventRecord(e1));
        CK(cudaEventSynchronize(e1));
        float ms;
        CK(cudaEventElapsedTime(&ms, e0, e1));
        t.push_back(ms * 1000);
      }
      std::sort(t.begin(), t.end());
      return t[t.size() / 2];
    };
    {
      const int strip = 64;
      CUtensorMap* maps = new CUtensorMap[copies];
      for (int c = 0; c < copies; ++c) {
        cuuint64_t dims[2] = {(cuuint64_t)N, (cuuint64_t)K};
        cuuint64_t strides[1] = {(cuuint64_t)N * 2};
        cuuint32_t box[2] = {(cuuint32_t)strip, BOX_ROWS};
        cuuint32_t es[2] = {1, 1};
        CK(cuTensorMapEncodeTiled(&maps[c], CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, ws[c], dims, strides, box, es,
                                  CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                  CU_TENSOR_MAP_L2_PROMOTION_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE));
      }
      CK(cudaFuncSetAttribute(tma_modes, cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM_STAGE_AREA + 1024));
      CK(cudaFuncSetAttribute(tma_modes, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
      const char* names[] = {"plain", "half-K", "evict-first", "helper", "two row tiles", "two row tiles + A", "prefetch helper"};
      void* a_buf;
      CK(cudaMalloc(&a_buf, 256 * K * 2));
      CK(cudaMemset(a_buf, 1, 256 * K * 2));
      CUtensorMap amap;
      {
        cuuint64_t dims[2] = {(cuuint64_t)K, 256};
        cuuint64_t strides[1] = {(cuuint64_t)K * 2};
        cuuint32_t box[2] = {BOX_ROWS, 128};
        cuuint32_t es[2] = {1, 1};
        CK(cuTensorMapEncodeTiled(&amap, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, a_buf, dims, strides, box, es,
                                  CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                  CU_TENSOR_MAP_L2_PROMOTION_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE));
      }
      int strips = N / strip;
      // Warm the clocks first: the first kernels of a fresh process ran slower.
      for (int i = 0; i < 200; ++i) ldg_strips<<<132, 1024>>>((const uint4*)ws[i % copies], K, N, 64, sink);
      CK(cudaDeviceSynchronize());
      for (int mode = 0; mode < 7; ++mode)
        for (int st0 : {24, 12}) {
          int st = mode == 5 ? std::min(st0, SMEM_STAGE_AREA / (BOX_ROWS * strip * 2 + 128 * BOX_ROWS * 2)) : st0;
          std::vector<int> grids;
          bool no_cluster_attr = mode == -1;
          int kmode = mode < 0 ? 0 : mode;
          if (mode == 1 || mode >= 3) grids = {2 * std::min(strips, 66), 2 * std::min(strips, 64)};
          else grids = {std::min(strips, 132), std::min(strips, 64)};
          for (int blocks : grids) {
            float us = time_it([&](void* w) {
              int c = 0;
              for (; c < copies; ++c) if (ws[c] == w) break;
              cudaLaunchConfig_t cfg = {};
              cfg.gridDim = dim3(blocks);
              cfg.blockDim = dim3(160);
              cfg.dynamicSmemBytes = SMEM_STAGE_AREA + 1024;
              cudaLaunchAttribute attr[1];
              attr[0].id = cudaLaunchAttributeClusterDimension;
              attr[0].val.clusterDim.x = mode == 3 ? 2 : 1;
              attr[0].val.clusterDim.y = 1;
              attr[0].val.clusterDim.z = 1;
              cfg.attrs = attr;
              cfg.numAttrs = no_cluster_attr ? 0 : 1;
              CK(cudaLaunchKernelEx(&cfg, tma_modes, maps[c], amap, K, N, strip, st, kmode, sink));
            });
            CK(cudaGetLastError());
            printf("| tma %s | %d | %d | %d | %d | none | %.1f | %.2f |\n",
                   no_cluster_attr ? "plain, no cluster attribute" : names[kmode], N, strip, blocks, st, us,
                   wbytes / us / 1e6);
          }
        }
      delete[] maps;
      CK(cudaFree(a_buf));
    }
    for (int strip : {32, 64, 128}) {
      for (int promo : {0, 2}) {
        std::vector<CUtensorMap> maps(copies);
        for (int c = 0; c < copies; ++c) {
          cuuint64_t dims[2] = {(cuuint64_t)N, (cuuint64_t)K};
          cuuint64_t strides[1] = {(cuuint64_t)N * 2};
          cuuint32_t box[2] = {(cuuint32_t)strip, BOX_ROWS};
          cuuint32_t es[2] = {1, 1};
          CUtensorMapSwizzle sw = strip == 128 ? CU_TENSOR_MAP_SWIZZLE_NONE
                                  : strip == 64 ? CU_TENSOR_MAP_SWIZZLE_128B
                                                : CU_TENSOR_MAP_SWIZZLE_64B;
          CK(cuTensorMapEncodeTiled(&maps[c], CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, ws[c], dims, strides, box, es,
                    CU_TENSOR_MAP_INTERLEAVE_NONE, sw,
                    promo == 0 ? CU_TENSOR_MAP_L2_PROMOTION_NONE : CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                    CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE));
        }
        int stage_bytes = BOX_ROWS * strip * 2;
        int stages = std::min(24, SMEM_STAGE_AREA / stage_bytes);
        for (int blocks : {64, 128, 132, 264}) {
          if (blocks > N / strip * 2) continue;
          int stage_list[] = {stages, std::max(4, stages / 3)};
          for (int st : stage_list) {
            float us = time_it([&](void* w) {
              int c = 0;
              for (; c < copies; ++c) if (ws[c] == w) break;
              tma_strips<<<blocks, 160, SMEM_STAGE_AREA + 1024>>>(maps[c], K, N, strip, st, sink);
            });
            CK(cudaGetLastError());
            printf("| tma | %d | %d | %d | %d | %s | %.1f | %.2f |\n", N, strip, blocks, st,
                   promo ? "256B" : "none", us, wbytes / us / 1e6);
          }
        }
      }
      for (int blocks : {64, 128, 132, 264}) {
        float us = time_it([&](void* w) { ldg_strips<<<blocks, 1024>>>((const uint4*)w, K, N, strip, sink); });
        CK(cudaGetLastError());
        printf("| ldg | %d | %d | %d | – | – | %.1f | %.2f |\n", N, strip, blocks, us, wbytes / us / 1e6);
      }
    }
    for (auto p : ws) CK(cudaFree(p));
  }
  return 0;
}
