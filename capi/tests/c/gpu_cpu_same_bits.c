/*
 * gpu_cpu_same_bits.c: through the C ABI, CUDA device 0 and the CPU backend give the same
 * bits on the scalar tier, for f32, bf16 and f16, both layouts of each operand, padding,
 * batches, a bias, both output modes, on a stream of the caller's and on the default stream.
 * Also the GPU-only error paths that can be provoked: a misaligned device pointer
 * (SGEMM_BI_STATUS_MISALIGNED), C overlapping A in device memory (OVERLAPPING_OPERANDS),
 * host memory given to the GPU (INACCESSIBLE_MEMORY) and a device ordinal that does not
 * exist (NO_DEVICE).
 *
 * Without a GPU it prints why and exits 0, or 1 when SGEMM_BI_REQUIRE_GPU=1.
 * Prints "gpu_cpu_same_bits: N passed, M failed".
 */
#define _POSIX_C_SOURCE 200809L

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_loader.h"
#include "sgemm_bi.h"

static int passed, failed;
static sgemm_bi_engine *cpu, *gpu;
static cuda_api cu;
static CUstream stream;

static void check(int cond, const char *what) {
    if (cond) {
        passed++;
    } else {
        failed++;
        fprintf(stderr, "FAILED: %s (%s)\n", what, sgemm_bi_last_error_message());
    }
}

static uint64_t rng_state = 99;
static uint32_t next_u32(void) {
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(rng_state >> 32);
}

static size_t dtype_size(uint32_t d) { return d == SGEMM_BI_DTYPE_F32 ? 4 : 2; }

/* `n` random finite values of magnitude below 2 in `dtype`, and 4 bytes of padding (the
 * copies move one byte more than the data, so that none is empty). */
static void *random_buffer(uint32_t dtype, size_t n) {
    size_t bytes = n * dtype_size(dtype) + 4;
    unsigned char *p = malloc(bytes);
    for (size_t i = 0; i < n; i++) {
        uint32_t r = next_u32();
        uint32_t sign = r >> 31, mant = r & 0x7FFFFF, exp = 112 + (r >> 23) % 16; /* 2^-15..2^0 */
        uint32_t f32 = sign << 31 | exp << 23 | mant;
        if (dtype == SGEMM_BI_DTYPE_F32) {
            memcpy(p + 4 * i, &f32, 4);
        } else {
            uint16_t h = dtype == SGEMM_BI_DTYPE_BF16
                             ? (uint16_t)(f32 >> 16)
                             : (uint16_t)(sign << 15 | (1 + (r >> 23) % 15) << 10 | (mant & 0x3FF));
            memcpy(p + 2 * i, &h, 2);
        }
    }
    return p;
}

/* Elements spanned by a rows × cols operand (0 when empty). */
static size_t span(uint64_t rows, uint64_t cols, uint32_t layout, uint64_t ld, uint64_t batch,
                   uint64_t stride) {
    uint64_t outer = layout == SGEMM_BI_LAYOUT_ROW_MAJOR ? rows : cols;
    uint64_t inner = layout == SGEMM_BI_LAYOUT_ROW_MAJOR ? cols : rows;
    if (rows == 0 || cols == 0 || batch == 0) return 0;
    return (size_t)((batch - 1) * stride + (outer - 1) * ld + inner);
}

/* Runs `d` on the CPU and on the GPU (on `s`) from the same inputs and C, compares C. */
static void same_bits(const sgemm_bi_gemm_desc *d, CUstream s, const char *label) {
    size_t na = span(d->m, d->k, d->a.layout, d->a.ld, d->batch, d->a.batch_stride);
    size_t nb = span(d->k, d->n, d->b.layout, d->b.ld, d->batch, d->b.batch_stride);
    size_t nc = span(d->m, d->n, SGEMM_BI_LAYOUT_ROW_MAJOR, d->c.ldc, d->batch, d->c.batch_stride);
    size_t ba = na * dtype_size(d->a.dtype), bb = nb * dtype_size(d->b.dtype);
    size_t bbias = d->n * dtype_size(d->bias_dtype), bc = nc * dtype_size(d->c.dtype);
    void *a = random_buffer(d->a.dtype, na), *b = random_buffer(d->b.dtype, nb);
    void *bias = random_buffer(d->bias_dtype, d->n);
    void *c_cpu = random_buffer(d->c.dtype, nc), *c_gpu = malloc(bc + 4);
    CUdeviceptr da = 0, db = 0, dbias = 0, dc = 0;
    char what[256];
    int ok;

    check((da = cuda_upload(&cu, a, ba + 1, s)) != 0 && (db = cuda_upload(&cu, b, bb + 1, s)) != 0 &&
              (dbias = cuda_upload(&cu, bias, bbias + 1, s)) != 0 &&
              (dc = cuda_upload(&cu, c_cpu, bc + 1, s)) != 0,
          "uploads");
    check(cuda_ok(&cu, cu.cuStreamSynchronize(s), "cuStreamSynchronize"), "uploads done");
    /* Only now may the CPU overwrite c_cpu: the GPU starts from the same C. */
    snprintf(what, sizeof what, "%s: CPU call", label);
    ok = sgemm_bi_gemm(cpu, d, a, b, d->has_bias ? bias : NULL, c_cpu, NULL) == SGEMM_BI_STATUS_OK;
    check(ok, what);
    snprintf(what, sizeof what, "%s: GPU call", label);
    ok = sgemm_bi_gemm(gpu, d, cuda_ptr(da), cuda_ptr(db), d->has_bias ? cuda_ptr(dbias) : NULL,
                       cuda_ptr(dc), s) == SGEMM_BI_STATUS_OK;
    check(ok, what);
    check(cuda_download(&cu, c_gpu, dc, bc + 1, s), "download");
    snprintf(what, sizeof what, "%s: GPU and CPU give the same bits", label);
    check(memcmp(c_cpu, c_gpu, bc) == 0, what);

    if (da) cu.cuMemFree(da);
    if (db) cu.cuMemFree(db);
    if (dbias) cu.cuMemFree(dbias);
    if (dc) cu.cuMemFree(dc);
    free(a);
    free(b);
    free(bias);
    free(c_cpu);
    free(c_gpu);
}

static void sweep(void) {
    static const uint64_t shapes[][3] = {{1, 1, 1}, {37, 53, 29}, {130, 67, 257}, {5, 0, 9}};
    static const uint32_t dtypes[] = {SGEMM_BI_DTYPE_F32, SGEMM_BI_DTYPE_BF16, SGEMM_BI_DTYPE_F16};
    char label[160];
    for (size_t t = 0; t < 3; t++) {
        for (size_t sh = 0; sh < sizeof shapes / sizeof shapes[0]; sh++) {
            for (uint32_t layouts = 0; layouts < 4; layouts++) {
                uint64_t m = shapes[sh][0], n = shapes[sh][1], k = shapes[sh][2];
                sgemm_bi_gemm_desc d;
                sgemm_bi_gemm_desc_dense(m, n, k, dtypes[t], &d);
                d.a.layout = layouts & 1;
                d.b.layout = layouts >> 1;
                d.a.ld = (d.a.layout == SGEMM_BI_LAYOUT_ROW_MAJOR ? k : m) + 3;
                d.b.ld = (d.b.layout == SGEMM_BI_LAYOUT_ROW_MAJOR ? n : k) + 1;
                d.c.ldc = n + 2;
                d.batch = 3;
                d.a.batch_stride = span(m, k, d.a.layout, d.a.ld, 1, 0) + 5;
                d.b.batch_stride = layouts == 3 ? 0 : span(k, n, d.b.layout, d.b.ld, 1, 0);
                d.c.batch_stride = m * d.c.ldc + 1;
                d.has_bias = 1;
                d.bias_dtype = (layouts & 1) ? SGEMM_BI_DTYPE_F32 : dtypes[t];
                snprintf(label, sizeof label, "dtype %u, %llux%llux%llu, layouts %u, overwrite",
                         dtypes[t], (unsigned long long)m, (unsigned long long)n,
                         (unsigned long long)k, layouts);
                same_bits(&d, stream, label);
                d.c.mode = SGEMM_BI_OUTPUT_MODE_ACCUMULATE_F32;
                d.c.dtype = SGEMM_BI_DTYPE_F32;
                d.has_bias = layouts == 0;
                snprintf(label, sizeof label, "dtype %u, %llux%llux%llu, layouts %u, accumulate",
                         dtypes[t], (unsigned long long)m, (unsigned long long)n,
                         (unsigned long long)k, layouts);
                same_bits(&d, layouts == 2 ? NULL : stream, label);
            }
        }
    }
}

static void gpu_errors(void) {
    sgemm_bi_gemm_desc d;
    sgemm_bi_engine *e = NULL;
    CUdeviceptr p = 0;
    float host[64] = {0};
    sgemm_bi_status s;
    sgemm_bi_gemm_desc_dense(4, 4, 4, SGEMM_BI_DTYPE_F32, &d);
    check((p = cuda_upload(&cu, host, sizeof host, stream)) != 0, "upload");
    s = sgemm_bi_gemm(gpu, &d, cuda_ptr(p + 2), cuda_ptr(p), NULL, cuda_ptr(p + 128), stream);
    check(s == SGEMM_BI_STATUS_MISALIGNED, "a misaligned A is SGEMM_BI_STATUS_MISALIGNED");
    check(strstr(sgemm_bi_last_error_message(), "not a multiple of its element size") != NULL,
          "the message says why");
    /* C on top of A in device memory. */
    s = sgemm_bi_gemm(gpu, &d, cuda_ptr(p), cuda_ptr(p + 128), NULL, cuda_ptr(p + 32), stream);
    check(s == SGEMM_BI_STATUS_OVERLAPPING_OPERANDS, "C overlapping A is OVERLAPPING_OPERANDS");
    check(strstr(sgemm_bi_last_error_message(), "overlaps A") != NULL, "the message says so");
    /* Host memory for A: rejected by the pointer checks (accepted only where the GPU reads
     * pageable memory, HMM/ATS, which the result then shows). */
    s = sgemm_bi_gemm(gpu, &d, host, cuda_ptr(p), NULL, cuda_ptr(p + 128), stream);
    check(s == SGEMM_BI_STATUS_INACCESSIBLE_MEMORY || s == SGEMM_BI_STATUS_OK,
          "host memory for A is INACCESSIBLE_MEMORY (or fine on an HMM system)");
    if (s == SGEMM_BI_STATUS_INACCESSIBLE_MEMORY) {
        check(strstr(sgemm_bi_last_error_message(), "not memory the CUDA driver knows") != NULL,
              "the message says why");
    } else {
        printf("gpu_cpu_same_bits: this GPU reads pageable host memory\n");
    }
    cu.cuStreamSynchronize(stream);
    cu.cuMemFree(p);
    s = sgemm_bi_engine_create(SGEMM_BI_DEVICE_KIND_CUDA, 4096, &e);
    check(s == SGEMM_BI_STATUS_NO_DEVICE && e == NULL, "ordinal 4096 is SGEMM_BI_STATUS_NO_DEVICE");
    check(strstr(sgemm_bi_last_error_message(), "no CUDA device 4096") != NULL,
          "the message names the ordinal");
}

int main(void) {
    const char *require = getenv("SGEMM_BI_REQUIRE_GPU");
    sgemm_bi_status s = sgemm_bi_engine_create(SGEMM_BI_DEVICE_KIND_CUDA, 0, &gpu);
    if (s == SGEMM_BI_STATUS_NO_DRIVER || s == SGEMM_BI_STATUS_NO_DEVICE) {
        printf("gpu_cpu_same_bits: skipped (%s)\n", sgemm_bi_last_error_message());
        return require != NULL && strcmp(require, "1") == 0;
    }
    check(s == SGEMM_BI_STATUS_OK, "CUDA engine on device 0");
    check(sgemm_bi_engine_create(SGEMM_BI_DEVICE_KIND_CPU, 0, &cpu) == SGEMM_BI_STATUS_OK, "CPU");
    if (failed || !cuda_open(&cu, 0) ||
        !cuda_ok(&cu, cu.cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate")) {
        printf("gpu_cpu_same_bits: %d passed, %d failed\n", passed, failed + 1);
        return 1;
    }
    sweep();
    gpu_errors();
    cu.cuStreamDestroy(stream);
    sgemm_bi_engine_destroy(gpu);
    sgemm_bi_engine_destroy(cpu);
    cuda_close(&cu);
    printf("gpu_cpu_same_bits: %d passed, %d failed\n", passed, failed);
    return failed == 0 ? 0 : 1;
}
