/*
 * tc_golden.c: the tensor-core tier on the CPU backend, through the C ABI, against the
 * outputs recorded on an H200 (tests/data/tc-h200, format in its README.md): for each of
 * the 12 files, C[64][256] f32 = A[64][64] · B (B stored as Bt[256][64], i.e. column-major),
 * compared bit for bit with both recorded columns (mma.sync and wgmma).
 *
 * Usage: tc_golden <folder of the .bin files>. Prints "tc_golden: N of N outputs match" and
 * exits 0 when every output matches.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sgemm_bi.h"

enum { M = 64, K = 64, N = 256, FILE_BYTES = 172032 };

static int fail(const char *what, sgemm_bi_status s) {
    fprintf(stderr, "tc_golden: %s: status %u: %s\n", what, (unsigned)s,
            sgemm_bi_last_error_message());
    return 1;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: tc_golden <folder>\n");
        return 2;
    }
    struct sgemm_bi_engine *cpu = NULL;
    sgemm_bi_status s = sgemm_bi_engine_create(SGEMM_BI_DEVICE_KIND_CPU, 0, &cpu);
    if (s != SGEMM_BI_STATUS_OK) return fail("engine", s);
    static unsigned char bytes[FILE_BYTES];
    static uint32_t c[M * N];
    unsigned long matched = 0, total = 0;
    const char *formats[2] = {"bf16", "f16"};
    for (int f = 0; f < 2; f++) {
        for (int dist = 0; dist < 6; dist++) {
            char path[4096];
            snprintf(path, sizeof path, "%s/tc_%s_dist%d.bin", argv[1], formats[f], dist);
            FILE *in = fopen(path, "rb");
            if (!in || fread(bytes, 1, FILE_BYTES, in) != FILE_BYTES) {
                fprintf(stderr, "tc_golden: cannot read %s\n", path);
                return 1;
            }
            fclose(in);
            struct sgemm_bi_gemm_desc d;
            uint32_t dtype = f == 0 ? SGEMM_BI_DTYPE_BF16 : SGEMM_BI_DTYPE_F16;
            s = sgemm_bi_gemm_desc_dense(M, N, K, dtype, &d);
            if (s != SGEMM_BI_STATUS_OK) return fail("desc", s);
            d.tier = SGEMM_BI_TIER_TENSOR_CORES;
            d.b.layout = SGEMM_BI_LAYOUT_COL_MAJOR;
            d.b.ld = K;
            d.c.mode = SGEMM_BI_OUTPUT_MODE_OVERWRITE;
            d.c.dtype = SGEMM_BI_DTYPE_F32;
            d.c.ldc = N;
            /* A at byte 0 (8 KiB), Bt at 8 KiB (32 KiB), then the two recorded C columns. */
            s = sgemm_bi_gemm(cpu, &d, bytes, bytes + 8192, NULL, c, NULL);
            if (s != SGEMM_BI_STATUS_OK) return fail(path, s);
            for (int col = 0; col < 2; col++) {
                const unsigned char *want = bytes + 40960 + col * 65536;
                for (int i = 0; i < M * N; i++) {
                    uint32_t w;
                    memcpy(&w, want + 4 * i, 4); /* little-endian hosts, as the files */
                    total++;
                    if (w == c[i]) {
                        matched++;
                    } else if (total - matched <= 5) {
                        fprintf(stderr, "tc_golden: %s column %d output %d: got %08x, H200 %08x\n",
                                path, col, i, c[i], w);
                    }
                }
            }
        }
    }
    sgemm_bi_engine_destroy(cpu);
    printf("tc_golden: %lu of %lu outputs match\n", matched, total);
    return matched == total ? 0 : 1;
}
