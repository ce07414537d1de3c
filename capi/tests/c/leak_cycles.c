/*
 * leak_cycles.c: 10^4 cycles of sgemm_bi_engine_create / a call / a rejected call /
 * sgemm_bi_engine_destroy on the CPU backend, through the C ABI, leave the process's
 * resident memory (VmRSS, /proc/self/status) where it was after a warm-up of 10^3 cycles.
 *
 * Prints "leak_cycles: N cycles, resident B KiB before, A KiB after (growth G KiB)" and
 * exits 0 when the growth is at most 256 KiB and every call behaved.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "sgemm_bi.h"

enum { M = 16, K = 24, N = 20, WARMUP = 1000, CYCLES = 10000 };

static float a[M * K], b[K * N], c[M * N], first[M * N];

static long resident_kib(void) {
    char line[256];
    long kib = -1;
    FILE *f = fopen("/proc/self/status", "r");
    if (f == NULL) return -1;
    while (fgets(line, sizeof line, f) != NULL) {
        if (strncmp(line, "VmRSS:", 6) == 0) {
            sscanf(line + 6, "%ld", &kib);
            break;
        }
    }
    fclose(f);
    return kib;
}

/* One engine lifetime; returns 0 when every call did what it should. */
static int cycle(int check_bits) {
    sgemm_bi_engine *e = NULL;
    sgemm_bi_gemm_desc d;
    int ok = sgemm_bi_engine_create(SGEMM_BI_DEVICE_KIND_CPU, 0, &e) == SGEMM_BI_STATUS_OK;
    ok = ok && sgemm_bi_gemm_desc_dense(M, N, K, SGEMM_BI_DTYPE_F32, &d) == SGEMM_BI_STATUS_OK;
    ok = ok && sgemm_bi_gemm(e, &d, a, b, NULL, c, NULL) == SGEMM_BI_STATUS_OK;
    if (ok && check_bits) ok = memcmp(c, first, sizeof c) == 0;
    d.a.ld = 0;
    ok = ok && sgemm_bi_gemm(e, &d, a, b, NULL, c, NULL) == SGEMM_BI_STATUS_BAD_LEADING_DIMENSION;
    ok = ok && sgemm_bi_engine_destroy(e) == SGEMM_BI_STATUS_OK;
    return ok ? 0 : 1;
}

int main(void) {
    long before, after;
    int bad = 0;
    uint32_t s = 12345;
    sgemm_bi_engine *e = NULL;
    sgemm_bi_gemm_desc d;
    for (int i = 0; i < M * K; i++) a[i] = (float)((s = s * 1103515245u + 12345u) >> 20) / 4096.0f - 0.5f;
    for (int i = 0; i < K * N; i++) b[i] = (float)((s = s * 1103515245u + 12345u) >> 20) / 4096.0f - 0.5f;
    if (sgemm_bi_engine_create(SGEMM_BI_DEVICE_KIND_CPU, 0, &e) != SGEMM_BI_STATUS_OK ||
        sgemm_bi_gemm_desc_dense(M, N, K, SGEMM_BI_DTYPE_F32, &d) != SGEMM_BI_STATUS_OK ||
        sgemm_bi_gemm(e, &d, a, b, NULL, first, NULL) != SGEMM_BI_STATUS_OK) {
        fprintf(stderr, "FAILED: the first call: %s\n", sgemm_bi_last_error_message());
        return 1;
    }
    sgemm_bi_engine_destroy(e);
    /* Reading /proc once before the warm-up: its first use sets up stdio, and the pages
     * that brings in would otherwise count as growth (seen: a constant 280 KiB). */
    (void)resident_kib();
    for (int i = 0; i < WARMUP; i++) bad += cycle(1);
    before = resident_kib();
    for (int i = 0; i < CYCLES; i++) bad += cycle(1);
    after = resident_kib();
    printf("leak_cycles: %d cycles, resident %ld KiB before, %ld KiB after (growth %ld KiB)\n",
           CYCLES, before, after, after - before);
    if (bad != 0) fprintf(stderr, "FAILED: %d cycles misbehaved\n", bad);
    if (before < 0) {
        printf("leak_cycles: no /proc/self/status, growth not measured\n");
        return bad != 0;
    }
    return bad != 0 || after - before > 256;
}
