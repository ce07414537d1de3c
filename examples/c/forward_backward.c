/*
 * forward_backward.c: one training step of a linear layer through libsgemm_bi's C ABI,
 * Y = X·Wᵀ + b, dW = dYᵀ·X (overwritten, then accumulated), dX = dY·W, with W stored as
 * torch stores it ([out, in]). The results are checked bit for bit against the scalar
 * tier's contract written out as plain loops: every output element is one f32 fma chain
 * in ascending k starting from +0.0, then the bias added once.
 *
 * It runs on the CPU backend, then on CUDA device 0 when there is one, with device memory
 * and a stream of its own created through the driver API (loaded with dlopen, see
 * cuda_loader.h). Without a GPU the GPU part is skipped, or fails when
 * SGEMM_BI_REQUIRE_GPU=1.
 *
 *   cc -std=c11 -Wall -Wextra -Werror -Iinclude -Iexamples/c examples/c/forward_backward.c \
 *      $(pkg-config --cflags --libs sgemm_bi) -lm -ldl -o forward_backward
 */
#define _POSIX_C_SOURCE 200809L

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_loader.h"
#include "sgemm_bi.h"

/* Not multiples of any tile size, so every kernel's tails run. */
enum { M = 37, K = 53, N = 29 };

/* The inputs and outputs of one step, on the host. */
typedef struct step_data {
    float x[M * K], w[N * K], bias[N], dy[M * N]; /* inputs */
    float y[M * N], dw[N * K], dw_acc[N * K], dx[M * K]; /* outputs; dw_acc starts as given */
} step_data;

/* Uniform in [-1, 1), reproducible. */
static float next_unit(uint64_t *state) {
    *state = *state * 6364136223846793005ull + 1442695040888963407ull;
    return (float)(*state >> 40) / (float)(1u << 23) - 1.0f;
}

/* The contract, written out (W is [N, K], dW likewise, X, Y, dY, dX row-major). */
static void reference(step_data *s) {
    for (int i = 0; i < M; i++) {
        for (int j = 0; j < N; j++) { /* Y[i,j] = b[j] + sum_k X[i,k] W[j,k] */
            float acc = 0.0f;
            for (int k = 0; k < K; k++) {
                acc = fmaf(s->x[i * K + k], s->w[j * K + k], acc);
            }
            s->y[i * N + j] = s->bias[j] + acc;
        }
    }
    for (int j = 0; j < N; j++) {
        for (int k = 0; k < K; k++) { /* dW[j,k] = sum_i dY[i,j] X[i,k], i ascending */
            float acc = 0.0f;
            for (int i = 0; i < M; i++) {
                acc = fmaf(s->dy[i * N + j], s->x[i * K + k], acc);
            }
            s->dw[j * K + k] = acc;
            s->dw_acc[j * K + k] = s->dw_acc[j * K + k] + acc; /* one f32 add */
        }
    }
    for (int i = 0; i < M; i++) {
        for (int k = 0; k < K; k++) { /* dX[i,k] = sum_j dY[i,j] W[j,k], j ascending */
            float acc = 0.0f;
            for (int j = 0; j < N; j++) {
                acc = fmaf(s->dy[i * N + j], s->w[j * K + k], acc);
            }
            s->dx[i * K + k] = acc;
        }
    }
}

static int ok(sgemm_bi_status status, const char *call) {
    if (status == SGEMM_BI_STATUS_OK) {
        return 1;
    }
    fprintf(stderr, "%s failed: %s: %s\n", call, sgemm_bi_status_name(status),
            sgemm_bi_last_error_message());
    return 0;
}

/* The step on `engine`, with pointers of that engine's device; `stream` may be NULL. */
static int step(const sgemm_bi_engine *engine, const void *x, const void *w, const void *bias,
                const void *dy, void *y, void *dw, void *dw_acc, void *dx, void *stream) {
    sgemm_bi_linear layer;
    memset(&layer, 0, sizeof layer); /* reserved fields must be zero */
    layer.struct_size = sizeof layer;
    layer.dtype = SGEMM_BI_DTYPE_F32;
    layer.weight_layout = SGEMM_BI_WEIGHT_LAYOUT_NK;
    layer.tier = SGEMM_BI_TIER_SCALAR;
    layer.m = M;
    layer.k = K;
    layer.n = N;
    return ok(sgemm_bi_forward(engine, &layer, x, w, bias, SGEMM_BI_DTYPE_F32, y, stream),
              "sgemm_bi_forward") &&
           ok(sgemm_bi_backward_dw(engine, &layer, dy, x, dw, SGEMM_BI_OUTPUT_MODE_OVERWRITE,
                                   SGEMM_BI_DTYPE_F32, stream),
              "sgemm_bi_backward_dw (overwrite)") &&
           ok(sgemm_bi_backward_dw(engine, &layer, dy, x, dw_acc,
                                   SGEMM_BI_OUTPUT_MODE_ACCUMULATE_F32, SGEMM_BI_DTYPE_F32, stream),
              "sgemm_bi_backward_dw (accumulate)") &&
           ok(sgemm_bi_backward_dx(engine, &layer, dy, w, dx, stream), "sgemm_bi_backward_dx");
}

/* Counts the elements of `got` whose bits differ from `want`. */
static int compare(const char *what, const float *got, const float *want, int n) {
    int bad = 0;
    for (int i = 0; i < n; i++) {
        if (memcmp(&got[i], &want[i], sizeof(float)) != 0) {
            if (bad < 3) {
                fprintf(stderr, "%s[%d] = %a, the contract says %a\n", what, i, (double)got[i],
                        (double)want[i]);
            }
            bad++;
        }
    }
    return bad;
}

static int compare_all(const char *where, const step_data *got, const step_data *want) {
    int bad = compare("Y", got->y, want->y, M * N) + compare("dW", got->dw, want->dw, N * K) +
              compare("dW (accumulated)", got->dw_acc, want->dw_acc, N * K) +
              compare("dX", got->dx, want->dx, M * K);
    if (bad == 0) {
        printf("%s: ok (Y, dW, dW accumulated and dX bit-identical to the fma-chain loops)\n",
               where);
    } else {
        fprintf(stderr, "%s: %d elements differ from the contract\n", where, bad);
    }
    return bad == 0;
}

/* The step on the CPU backend: host pointers, synchronous. */
static int run_cpu(const step_data *inputs, const step_data *want) {
    sgemm_bi_engine *engine = NULL;
    static step_data s;
    int good;
    if (!ok(sgemm_bi_engine_create(SGEMM_BI_DEVICE_KIND_CPU, 0, &engine), "engine_create")) {
        return 0;
    }
    s = *inputs;
    good = step(engine, s.x, s.w, s.bias, s.dy, s.y, s.dw, s.dw_acc, s.dx, NULL) &&
           compare_all("CPU", &s, want);
    sgemm_bi_engine_destroy(engine);
    return good;
}

/* The step on CUDA device 0 with a stream of our own. Returns 1 when done or skipped. */
static int run_gpu(const step_data *inputs, const step_data *want) {
    const char *require = getenv("SGEMM_BI_REQUIRE_GPU");
    int required = require != NULL && strcmp(require, "1") == 0;
    sgemm_bi_engine *engine = NULL;
    sgemm_bi_status status = sgemm_bi_engine_create(SGEMM_BI_DEVICE_KIND_CUDA, 0, &engine);
    sgemm_bi_capabilities caps;
    cuda_api cu;
    CUstream stream = NULL;
    CUdeviceptr d[8] = {0};
    static step_data s;
    int good = 0;

    if (status == SGEMM_BI_STATUS_NO_DRIVER || status == SGEMM_BI_STATUS_NO_DEVICE) {
        printf("GPU: skipped (%s)\n", sgemm_bi_last_error_message());
        if (required) {
            fprintf(stderr, "SGEMM_BI_REQUIRE_GPU=1 but there is no GPU\n");
        }
        return !required;
    }
    if (!ok(status, "engine_create (CUDA 0)")) {
        return 0;
    }
    memset(&caps, 0, sizeof caps);
    caps.struct_size = sizeof caps;
    if (!ok(sgemm_bi_engine_capabilities(engine, &caps), "engine_capabilities")) {
        sgemm_bi_engine_destroy(engine);
        return 0;
    }
    printf("GPU: CUDA device %u, compute capability %u.%u\n", caps.ordinal,
           caps.compute_capability_major, caps.compute_capability_minor);
    if (!cuda_open(&cu, 0)) {
        sgemm_bi_engine_destroy(engine);
        return 0;
    }
    s = *inputs;
    if (cuda_ok(&cu, cu.cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate") &&
        (d[0] = cuda_upload(&cu, s.x, sizeof s.x, stream)) != 0 &&
        (d[1] = cuda_upload(&cu, s.w, sizeof s.w, stream)) != 0 &&
        (d[2] = cuda_upload(&cu, s.bias, sizeof s.bias, stream)) != 0 &&
        (d[3] = cuda_upload(&cu, s.dy, sizeof s.dy, stream)) != 0 &&
        (d[4] = cuda_upload(&cu, s.y, sizeof s.y, stream)) != 0 &&
        (d[5] = cuda_upload(&cu, s.dw, sizeof s.dw, stream)) != 0 &&
        (d[6] = cuda_upload(&cu, s.dw_acc, sizeof s.dw_acc, stream)) != 0 &&
        (d[7] = cuda_upload(&cu, s.dx, sizeof s.dx, stream)) != 0 &&
        step(engine, cuda_ptr(d[0]), cuda_ptr(d[1]), cuda_ptr(d[2]), cuda_ptr(d[3]),
             cuda_ptr(d[4]), cuda_ptr(d[5]), cuda_ptr(d[6]), cuda_ptr(d[7]), stream) &&
        cuda_download(&cu, s.y, d[4], sizeof s.y, stream) &&
        cuda_download(&cu, s.dw, d[5], sizeof s.dw, stream) &&
        cuda_download(&cu, s.dw_acc, d[6], sizeof s.dw_acc, stream) &&
        cuda_download(&cu, s.dx, d[7], sizeof s.dx, stream)) {
        good = compare_all("GPU (own stream)", &s, want);
    }
    for (int i = 0; i < 8; i++) {
        if (d[i] != 0) {
            cu.cuMemFree(d[i]);
        }
    }
    if (stream != NULL) {
        cu.cuStreamDestroy(stream);
    }
    sgemm_bi_engine_destroy(engine);
    cuda_close(&cu);
    return good;
}

int main(void) {
    static step_data inputs, want;
    uint64_t rng = 2024;
    if (sgemm_bi_abi_version() != SGEMM_BI_ABI_VERSION) {
        fprintf(stderr, "libsgemm_bi has ABI version %u, this program was built for %u\n",
                sgemm_bi_abi_version(), (unsigned)SGEMM_BI_ABI_VERSION);
        return 1;
    }
    printf("libsgemm_bi %s, ABI version %u; layer M=%d K=%d N=%d, f32, W as [N,K]\n",
           sgemm_bi_version(), sgemm_bi_abi_version(), M, K, N);
    for (int i = 0; i < M * K; i++) inputs.x[i] = next_unit(&rng);
    for (int i = 0; i < N * K; i++) inputs.w[i] = next_unit(&rng);
    for (int i = 0; i < N; i++) inputs.bias[i] = next_unit(&rng);
    for (int i = 0; i < M * N; i++) inputs.dy[i] = next_unit(&rng);
    for (int i = 0; i < N * K; i++) inputs.dw_acc[i] = next_unit(&rng);
    /* Outputs start as NaN, so an element never written cannot pass. */
    for (int i = 0; i < M * N; i++) inputs.y[i] = NAN;
    for (int i = 0; i < N * K; i++) inputs.dw[i] = NAN;
    for (int i = 0; i < M * K; i++) inputs.dx[i] = NAN;
    want = inputs;
    reference(&want);

    if (!run_cpu(&inputs, &want) || !run_gpu(&inputs, &want)) {
        return 1;
    }
    return 0;
}
