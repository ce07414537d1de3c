/*
 * abi_errors.c: every error path of libsgemm_bi's C ABI that a CPU engine can reach, from C.
 * Each rejected call must return its documented code, leave a message that names the
 * problem, and write nothing; after each one the engine still computes the contract's bits.
 * The codes only a GPU can produce (MISALIGNED, DRIVER_ERROR, LAUNCH_FAILED) are checked by
 * gpu_cpu_same_bits.c where it can; PANIC by the Rust unit tests (no public call panics).
 *
 * Prints "abi_errors: N passed, 0 failed" and exits 0 when every check holds.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "sgemm_bi.h"

/* The ABI, as numbers and sizes a program compiled against this header relies on. */
_Static_assert(SGEMM_BI_ABI_VERSION == 1, "ABI version");
_Static_assert(SGEMM_BI_STATUS_OK == 0 && SGEMM_BI_STATUS_NULL_PARAMETER == 1 &&
                   SGEMM_BI_STATUS_PANIC == 2 && SGEMM_BI_STATUS_INVALID_ARGUMENT == 3 &&
                   SGEMM_BI_STATUS_OVERFLOW == 4 && SGEMM_BI_STATUS_BAD_LEADING_DIMENSION == 5 &&
                   SGEMM_BI_STATUS_OVERLAPPING_BATCHES == 6 &&
                   SGEMM_BI_STATUS_UNSUPPORTED_DTYPE == 7 &&
                   SGEMM_BI_STATUS_BUFFER_TOO_SMALL == 8 && SGEMM_BI_STATUS_DTYPE_MISMATCH == 9 &&
                   SGEMM_BI_STATUS_MISALIGNED == 10 && SGEMM_BI_STATUS_TIER_UNAVAILABLE == 11 &&
                   SGEMM_BI_STATUS_NO_DRIVER == 12 && SGEMM_BI_STATUS_NO_DEVICE == 13 &&
                   SGEMM_BI_STATUS_WRONG_DEVICE == 14 && SGEMM_BI_STATUS_DRIVER_ERROR == 15 &&
                   SGEMM_BI_STATUS_LAUNCH_FAILED == 16 && SGEMM_BI_STATUS_OTHER == 17 &&
                   SGEMM_BI_STATUS_OVERLAPPING_OPERANDS == 18 &&
                   SGEMM_BI_STATUS_INACCESSIBLE_MEMORY == 19 &&
                   SGEMM_BI_STATUS_BAD_OFFSETS == 20 && SGEMM_BI_STATUS_UNSUPPORTED == 21,
               "status numbers are stable");
/* The last code of this header. */
#define LAST_STATUS SGEMM_BI_STATUS_UNSUPPORTED
_Static_assert(sizeof(sgemm_bi_status) == 4, "statuses are uint32_t");
_Static_assert(sizeof(sgemm_bi_operand) == 24 && sizeof(sgemm_bi_output) == 24 &&
                   sizeof(sgemm_bi_gemm_desc) == 152 && sizeof(sgemm_bi_linear) == 56 &&
                   sizeof(sgemm_bi_capabilities) == 40,
               "struct sizes");

enum { M = 3, K = 5, N = 4 };

static sgemm_bi_engine *engine;
static float a[M * K], b[K * N], bias[N], c[M * N], c_before[M * N], c_want[M * N];
static int passed, failed;

static void check(int cond, const char *what) {
    if (cond) {
        passed++;
    } else {
        failed++;
        fprintf(stderr, "FAILED: %s\n", what);
    }
}

/* A valid dense f32 call with a bias: the starting point of every error. */
static sgemm_bi_gemm_desc valid(void) {
    sgemm_bi_gemm_desc d;
    sgemm_bi_status s = sgemm_bi_gemm_desc_dense(M, N, K, SGEMM_BI_DTYPE_F32, &d);
    check(s == SGEMM_BI_STATUS_OK, "sgemm_bi_gemm_desc_dense");
    d.has_bias = 1;
    d.bias_dtype = SGEMM_BI_DTYPE_F32;
    return d;
}

/* C is poisoned, the call runs, C must be untouched if the call was rejected. */
static void poison_c(void) {
    for (int i = 0; i < M * N; i++) c[i] = (float)(1000 + i);
    memcpy(c_before, c, sizeof c);
}

/* The engine computes the contract's bits (fma chain, ascending k, bias added last). */
static void still_works(const char *after) {
    sgemm_bi_gemm_desc d = valid();
    char what[256];
    poison_c();
    snprintf(what, sizeof what, "a valid call succeeds after %s", after);
    check(sgemm_bi_gemm(engine, &d, a, b, bias, c, NULL) == SGEMM_BI_STATUS_OK, what);
    snprintf(what, sizeof what, "the message is empty after a success (after %s)", after);
    check(sgemm_bi_last_error_message()[0] == '\0', what);
    snprintf(what, sizeof what, "the result has the contract's bits after %s", after);
    check(memcmp(c, c_want, sizeof c) == 0, what);
    poison_c(); /* the next check of the same group expects C poisoned again */
}

/* `got` is `want`, the message is non-empty and mentions `needle`, and C is unchanged. */
static void expect(sgemm_bi_status got, sgemm_bi_status want, const char *needle,
                   const char *label) {
    const char *msg = sgemm_bi_last_error_message();
    char what[512];
    snprintf(what, sizeof what, "%s: returns %s (got %s: \"%s\")", label,
             sgemm_bi_status_name(want), sgemm_bi_status_name(got), msg);
    check(got == want, what);
    snprintf(what, sizeof what, "%s: the message \"%s\" mentions \"%s\"", label, msg, needle);
    check(msg[0] != '\0' && strstr(msg, needle) != NULL, what);
    snprintf(what, sizeof what, "%s: C is unchanged", label);
    check(memcmp(c, c_before, sizeof c) == 0, what);
    still_works(label);
}

/* Runs sgemm_bi_gemm with `d` on the valid buffers (bias as given). */
static void gemm_case(sgemm_bi_gemm_desc d, const void *bias_ptr, sgemm_bi_status want,
                      const char *needle, const char *label) {
    sgemm_bi_status s;
    poison_c();
    s = sgemm_bi_gemm(engine, &d, a, b, bias_ptr, c, NULL);
    expect(s, want, needle, label);
}

static void descriptor_errors(void) {
    sgemm_bi_gemm_desc d;
    d = valid(); d.struct_size = 64;
    gemm_case(d, bias, SGEMM_BI_STATUS_INVALID_ARGUMENT, "desc->struct_size", "struct_size");
    d = valid(); d.reserved[0] = 7;
    gemm_case(d, bias, SGEMM_BI_STATUS_INVALID_ARGUMENT, "desc->reserved[0]", "reserved field");
    d = valid(); d.tier = 3;
    gemm_case(d, bias, SGEMM_BI_STATUS_INVALID_ARGUMENT, "desc->tier", "unknown tier");
    d = valid(); d.a.dtype = 3;
    gemm_case(d, bias, SGEMM_BI_STATUS_INVALID_ARGUMENT, "desc->a.dtype", "unknown A dtype");
    d = valid(); d.a.layout = 2;
    gemm_case(d, bias, SGEMM_BI_STATUS_INVALID_ARGUMENT, "desc->a.layout", "unknown A layout");
    d = valid(); d.b.dtype = 0xFFFFFFFFu;
    gemm_case(d, bias, SGEMM_BI_STATUS_INVALID_ARGUMENT, "desc->b.dtype", "unknown B dtype");
    d = valid(); d.b.layout = 5;
    gemm_case(d, bias, SGEMM_BI_STATUS_INVALID_ARGUMENT, "desc->b.layout", "unknown B layout");
    d = valid(); d.bias_dtype = 9;
    gemm_case(d, bias, SGEMM_BI_STATUS_INVALID_ARGUMENT, "desc->bias_dtype", "unknown bias dtype");
    d = valid(); d.has_bias = 2;
    gemm_case(d, bias, SGEMM_BI_STATUS_INVALID_ARGUMENT, "desc->has_bias", "has_bias not 0/1");
    d = valid(); d.c.mode = 3;
    gemm_case(d, bias, SGEMM_BI_STATUS_INVALID_ARGUMENT, "desc->c.mode", "unknown output mode");
    d = valid(); d.c.dtype = 4;
    gemm_case(d, bias, SGEMM_BI_STATUS_INVALID_ARGUMENT, "desc->c.dtype", "unknown C dtype");
    d = valid(); d.has_bias = 0;
    gemm_case(d, bias, SGEMM_BI_STATUS_INVALID_ARGUMENT, "has_bias is 0", "bias without has_bias");
}

static void pointer_errors(void) {
    sgemm_bi_gemm_desc d = valid();
    sgemm_bi_status s;
    poison_c();
    s = sgemm_bi_gemm(NULL, &d, a, b, bias, c, NULL);
    expect(s, SGEMM_BI_STATUS_NULL_PARAMETER, "engine", "NULL engine");
    s = sgemm_bi_gemm(engine, NULL, a, b, bias, c, NULL);
    expect(s, SGEMM_BI_STATUS_NULL_PARAMETER, "desc", "NULL descriptor");
    poison_c();
    s = sgemm_bi_gemm(engine, &d, NULL, b, bias, c, NULL);
    expect(s, SGEMM_BI_STATUS_NULL_PARAMETER, "null pointer for A", "NULL A");
    s = sgemm_bi_gemm(engine, &d, a, NULL, bias, c, NULL);
    expect(s, SGEMM_BI_STATUS_NULL_PARAMETER, "null pointer for B", "NULL B");
    s = sgemm_bi_gemm(engine, &d, a, b, NULL, c, NULL);
    expect(s, SGEMM_BI_STATUS_NULL_PARAMETER, "null pointer for bias", "NULL bias");
    s = sgemm_bi_gemm(engine, &d, a, b, bias, NULL, NULL);
    expect(s, SGEMM_BI_STATUS_NULL_PARAMETER, "null pointer for C", "NULL C");
    /* An empty call reads and writes nothing, so NULL buffers are fine there. */
    d.m = 0;
    check(sgemm_bi_gemm(engine, &d, NULL, NULL, NULL, NULL, NULL) == SGEMM_BI_STATUS_OK,
          "M = 0 accepts NULL buffers");
}

static void shape_and_dtype_errors(void) {
    sgemm_bi_gemm_desc d;
    d = valid(); d.a.ld = K - 1;
    gemm_case(d, bias, SGEMM_BI_STATUS_BAD_LEADING_DIMENSION, "leading dimension of A", "small lda");
    d = valid(); d.b.layout = SGEMM_BI_LAYOUT_COL_MAJOR; /* ld N=4 < K=5 rows */
    gemm_case(d, bias, SGEMM_BI_STATUS_BAD_LEADING_DIMENSION, "leading dimension of B", "small ldb");
    d = valid(); d.c.ldc = N - 1;
    gemm_case(d, bias, SGEMM_BI_STATUS_BAD_LEADING_DIMENSION, "leading dimension of C", "small ldc");
    d = valid(); d.a.ld = UINT64_MAX / 2;
    gemm_case(d, bias, SGEMM_BI_STATUS_OVERFLOW, "overflows", "extent overflow");
    d = valid(); d.batch = 3; d.b.batch_stride = UINT64_MAX / 4;
    gemm_case(d, bias, SGEMM_BI_STATUS_OVERFLOW, "extent of B overflows", "batch stride overflow");
    d = valid(); d.batch = 2; d.c.batch_stride = M * N - 1;
    gemm_case(d, bias, SGEMM_BI_STATUS_OVERLAPPING_BATCHES, "overlap", "overlapping C");
    d = valid(); d.b.dtype = SGEMM_BI_DTYPE_BF16;
    gemm_case(d, bias, SGEMM_BI_STATUS_UNSUPPORTED_DTYPE, "same dtype", "mixed inputs");
    d = valid(); d.bias_dtype = SGEMM_BI_DTYPE_F16;
    gemm_case(d, bias, SGEMM_BI_STATUS_UNSUPPORTED_DTYPE, "bias is f16", "f16 bias, f32 inputs");
    d = valid(); d.c.mode = SGEMM_BI_OUTPUT_MODE_ACCUMULATE_F32; d.c.dtype = SGEMM_BI_DTYPE_BF16;
    gemm_case(d, bias, SGEMM_BI_STATUS_UNSUPPORTED_DTYPE, "ACCUMULATE_F32", "bf16 accumulate");
    d = valid(); d.tier = SGEMM_BI_TIER_TENSOR_CORES;
    gemm_case(d, bias, SGEMM_BI_STATUS_UNSUPPORTED_DTYPE, "tensor-core tier", "f32 tensor cores");
    /* In bf16 the tier runs on the CPU (the sm_90 model of the tensor cores). */
    d = valid(); d.tier = SGEMM_BI_TIER_TENSOR_CORES;
    d.a.dtype = d.b.dtype = d.c.dtype = SGEMM_BI_DTYPE_BF16;
    check(sgemm_bi_gemm(engine, &d, a, b, bias, c, NULL) == SGEMM_BI_STATUS_OK,
          "tensor cores on the CPU");
    /* A negative size converted to uint64_t: rejected even where the call would be empty. */
    d = valid(); d.m = (uint64_t)-1;
    gemm_case(d, bias, SGEMM_BI_STATUS_OVERFLOW, "m is 18446744073709551615", "M = -1");
    d = valid(); d.k = (uint64_t)-3; d.n = 0;
    gemm_case(d, bias, SGEMM_BI_STATUS_OVERFLOW, "it is -3", "K = -3 in an empty call");
    d = valid(); d.c.ldc = (uint64_t)-2;
    gemm_case(d, bias, SGEMM_BI_STATUS_OVERFLOW, "ldc is", "ldc = -2");
    d = valid(); d.batch = 2; d.a.batch_stride = (uint64_t)-15;
    gemm_case(d, bias, SGEMM_BI_STATUS_OVERFLOW, "batch stride of A", "A batch stride = -15");
    /* A leading dimension of 0 is too small even for one column. */
    d = valid(); d.b.ld = 0;
    gemm_case(d, bias, SGEMM_BI_STATUS_BAD_LEADING_DIMENSION, "leading dimension of B is 0",
              "ldb = 0");
}

/* C sharing memory with an input: rejected before anything runs, nothing written. */
static void overlap_errors(void) {
    static float buf[M * K + K * N + M * N];
    float *xa = buf, *xb = buf + M * K;
    sgemm_bi_gemm_desc d = valid();
    float saved[sizeof buf / sizeof buf[0]];
    sgemm_bi_status s;
    memcpy(buf, a, sizeof a);
    memcpy(buf + M * K, b, sizeof b);
    memcpy(saved, buf, sizeof buf);
    poison_c();
    s = sgemm_bi_gemm(engine, &d, xa, xb, bias, xa, NULL);
    expect(s, SGEMM_BI_STATUS_OVERLAPPING_OPERANDS, "overlaps A", "C = A");
    s = sgemm_bi_gemm(engine, &d, xa, xb, bias, xb + K * N - 1, NULL);
    expect(s, SGEMM_BI_STATUS_OVERLAPPING_OPERANDS, "overlaps B", "C starting at B's last element");
    s = sgemm_bi_gemm(engine, &d, xa, xb, c + M * N - 2, c, NULL);
    expect(s, SGEMM_BI_STATUS_OVERLAPPING_OPERANDS, "overlaps bias", "bias inside C");
    check(memcmp(buf, saved, sizeof buf) == 0, "the shared buffer is unchanged");
    /* Adjacent but not overlapping: C right after B is fine. */
    s = sgemm_bi_gemm(engine, &d, xa, xb, bias, xb + K * N, NULL);
    check(s == SGEMM_BI_STATUS_OK && memcmp(xb + K * N, c_want, sizeof c_want) == 0,
          "C right after B in one buffer gives the contract's bits");
    /* A and B may share memory (both are only read). */
    d = valid(); d.n = M; d.k = K; d.b.layout = SGEMM_BI_LAYOUT_COL_MAJOR; d.b.ld = K; d.c.ldc = M;
    s = sgemm_bi_gemm(engine, &d, a, a, bias, c, NULL);
    check(s == SGEMM_BI_STATUS_OK, "A·Aᵀ with B = A is accepted");
    poison_c();
}

static void pointer_check_switch(void) {
    sgemm_bi_status s;
    poison_c();
    s = sgemm_bi_engine_set_pointer_checks(NULL, true);
    expect(s, SGEMM_BI_STATUS_NULL_PARAMETER, "engine", "set_pointer_checks: NULL engine");
    check(sgemm_bi_engine_set_pointer_checks(engine, false) == SGEMM_BI_STATUS_OK,
          "the CPU engine accepts the pointer-check switch");
    still_works("pointer checks off on the CPU");
    check(sgemm_bi_engine_set_pointer_checks(engine, true) == SGEMM_BI_STATUS_OK,
          "and back on");
}

static sgemm_bi_linear layer(void) {
    sgemm_bi_linear l;
    memset(&l, 0, sizeof l);
    l.struct_size = sizeof l;
    l.dtype = SGEMM_BI_DTYPE_F32;
    l.weight_layout = SGEMM_BI_WEIGHT_LAYOUT_KN;
    l.tier = SGEMM_BI_TIER_SCALAR;
    l.m = M;
    l.k = K;
    l.n = N;
    return l;
}

static void convenience_errors(void) {
    static float dy[M * N], dw[K * N], dx[M * K];
    sgemm_bi_linear l = layer();
    sgemm_bi_status s;
    poison_c(); /* the conveniences below write only their own outputs */
    s = sgemm_bi_forward(engine, NULL, a, b, bias, SGEMM_BI_DTYPE_F32, c, NULL);
    expect(s, SGEMM_BI_STATUS_NULL_PARAMETER, "layer", "forward: NULL layer");
    l.struct_size = 8;
    s = sgemm_bi_forward(engine, &l, a, b, bias, SGEMM_BI_DTYPE_F32, c, NULL);
    expect(s, SGEMM_BI_STATUS_INVALID_ARGUMENT, "layer->struct_size", "forward: struct_size");
    l = layer(); l.reserved[1] = 1;
    s = sgemm_bi_forward(engine, &l, a, b, bias, SGEMM_BI_DTYPE_F32, c, NULL);
    expect(s, SGEMM_BI_STATUS_INVALID_ARGUMENT, "layer->reserved[1]", "forward: reserved");
    l = layer(); l.weight_layout = 2;
    s = sgemm_bi_forward(engine, &l, a, b, bias, SGEMM_BI_DTYPE_F32, c, NULL);
    expect(s, SGEMM_BI_STATUS_INVALID_ARGUMENT, "layer->weight_layout", "forward: weight layout");
    l = layer(); l.dtype = 3;
    s = sgemm_bi_forward(engine, &l, a, b, bias, SGEMM_BI_DTYPE_F32, c, NULL);
    expect(s, SGEMM_BI_STATUS_INVALID_ARGUMENT, "layer->dtype", "forward: dtype");
    l = layer(); l.tier = 7;
    s = sgemm_bi_forward(engine, &l, a, b, bias, SGEMM_BI_DTYPE_F32, c, NULL);
    expect(s, SGEMM_BI_STATUS_INVALID_ARGUMENT, "layer->tier", "forward: tier");
    l = layer();
    s = sgemm_bi_forward(engine, &l, a, b, bias, 6, c, NULL);
    expect(s, SGEMM_BI_STATUS_INVALID_ARGUMENT, "bias_dtype", "forward: bias dtype");
    s = sgemm_bi_forward(engine, &l, a, NULL, bias, SGEMM_BI_DTYPE_F32, c, NULL);
    expect(s, SGEMM_BI_STATUS_NULL_PARAMETER, "null pointer for w", "forward: NULL W");
    s = sgemm_bi_backward_dw(engine, &l, dy, a, dw, 2, SGEMM_BI_DTYPE_F32, NULL);
    expect(s, SGEMM_BI_STATUS_INVALID_ARGUMENT, "output_mode", "dW: output mode");
    s = sgemm_bi_backward_dw(engine, &l, dy, a, dw, SGEMM_BI_OUTPUT_MODE_OVERWRITE, 9, NULL);
    expect(s, SGEMM_BI_STATUS_INVALID_ARGUMENT, "dw_dtype", "dW: dtype");
    s = sgemm_bi_backward_dw(engine, &l, dy, a, dw, SGEMM_BI_OUTPUT_MODE_ACCUMULATE_F32,
                             SGEMM_BI_DTYPE_F16, NULL);
    expect(s, SGEMM_BI_STATUS_UNSUPPORTED_DTYPE, "dw_dtype", "dW: f16 accumulate");
    s = sgemm_bi_backward_dw(NULL, &l, dy, a, dw, 0, 0, NULL);
    expect(s, SGEMM_BI_STATUS_NULL_PARAMETER, "engine", "dW: NULL engine");
    s = sgemm_bi_backward_dx(engine, &l, dy, b, NULL, NULL);
    expect(s, SGEMM_BI_STATUS_NULL_PARAMETER, "null pointer for dx", "dX: NULL dX");
    s = sgemm_bi_backward_dx(engine, NULL, dy, b, dx, NULL);
    expect(s, SGEMM_BI_STATUS_NULL_PARAMETER, "layer", "dX: NULL layer");
}

static void engine_errors(void) {
    sgemm_bi_engine *e = (sgemm_bi_engine *)&passed; /* must be overwritten with NULL */
    sgemm_bi_capabilities caps;
    bool yes = false;
    sgemm_bi_status s;
    poison_c();
    s = sgemm_bi_engine_create(SGEMM_BI_DEVICE_KIND_CPU, 0, NULL);
    expect(s, SGEMM_BI_STATUS_NULL_PARAMETER, "out", "create: NULL out");
    s = sgemm_bi_engine_create(2, 0, &e);
    expect(s, SGEMM_BI_STATUS_INVALID_ARGUMENT, "device_kind", "create: unknown device kind");
    check(e == NULL, "a failed create sets *out to NULL");
    s = sgemm_bi_engine_create(SGEMM_BI_DEVICE_KIND_CPU, 1, &e);
    expect(s, SGEMM_BI_STATUS_INVALID_ARGUMENT, "ordinal", "create: CPU ordinal 1");
    s = sgemm_bi_engine_create(SGEMM_BI_DEVICE_KIND_CUDA, 4096, &e);
    if (s == SGEMM_BI_STATUS_NO_DRIVER) {
        expect(s, SGEMM_BI_STATUS_NO_DRIVER, "driver", "create: CUDA without a driver");
    } else {
        expect(s, SGEMM_BI_STATUS_NO_DEVICE, "no CUDA device 4096", "create: CUDA ordinal 4096");
    }
    check(e == NULL, "a failed CUDA create sets *out to NULL");
    check(sgemm_bi_engine_destroy(NULL) == SGEMM_BI_STATUS_OK, "destroy(NULL) is a no-op");

    memset(&caps, 0, sizeof caps);
    s = sgemm_bi_engine_capabilities(engine, NULL);
    expect(s, SGEMM_BI_STATUS_NULL_PARAMETER, "out", "capabilities: NULL out");
    s = sgemm_bi_engine_capabilities(engine, &caps); /* struct_size left 0 */
    expect(s, SGEMM_BI_STATUS_INVALID_ARGUMENT, "out->struct_size is 0", "capabilities: size");
    s = sgemm_bi_engine_capabilities(NULL, &caps);
    expect(s, SGEMM_BI_STATUS_NULL_PARAMETER, "engine", "capabilities: NULL engine");
    caps.struct_size = sizeof caps;
    check(sgemm_bi_engine_capabilities(engine, &caps) == SGEMM_BI_STATUS_OK &&
              caps.device_kind == SGEMM_BI_DEVICE_KIND_CPU &&
              caps.tiers == ((1u << SGEMM_BI_TIER_SCALAR) | (1u << SGEMM_BI_TIER_TENSOR_CORES) |
                             (1u << SGEMM_BI_TIER_AUTO)) &&
              caps.compute_capability_major == 0,
          "capabilities of the CPU engine");
    s = sgemm_bi_engine_supports(engine, 3, &yes);
    expect(s, SGEMM_BI_STATUS_INVALID_ARGUMENT, "tier is 3", "supports: unknown tier");
    s = sgemm_bi_engine_supports(engine, SGEMM_BI_TIER_SCALAR, NULL);
    expect(s, SGEMM_BI_STATUS_NULL_PARAMETER, "out", "supports: NULL out");
    check(sgemm_bi_engine_supports(engine, SGEMM_BI_TIER_SCALAR, &yes) == SGEMM_BI_STATUS_OK && yes,
          "the CPU runs the scalar tier");
    check(sgemm_bi_engine_supports(engine, SGEMM_BI_TIER_TENSOR_CORES, &yes) ==
                  SGEMM_BI_STATUS_OK && yes,
          "the CPU runs the tensor-core tier");
    {
        uint32_t resolved = 99;
        check(sgemm_bi_engine_resolve_tier(engine, SGEMM_BI_TIER_AUTO, SGEMM_BI_DTYPE_BF16,
                                           &resolved) == SGEMM_BI_STATUS_OK &&
                  resolved == SGEMM_BI_TIER_SCALAR,
              "auto on the CPU is the scalar tier");
        s = sgemm_bi_engine_resolve_tier(engine, 3, SGEMM_BI_DTYPE_BF16, &resolved);
        expect(s, SGEMM_BI_STATUS_INVALID_ARGUMENT, "tier is 3", "resolve_tier: unknown tier");
    }

    s = sgemm_bi_gemm_desc_dense(1, 1, 1, SGEMM_BI_DTYPE_F32, NULL);
    expect(s, SGEMM_BI_STATUS_NULL_PARAMETER, "out", "desc_dense: NULL out");
    {
        sgemm_bi_gemm_desc d;
        s = sgemm_bi_gemm_desc_dense(1, 1, 1, 3, &d);
        expect(s, SGEMM_BI_STATUS_INVALID_ARGUMENT, "dtype is 3", "desc_dense: unknown dtype");
    }
}

static void status_names(void) {
    for (uint32_t i = 0; i <= LAST_STATUS; i++) {
        const char *name = sgemm_bi_status_name(i);
        check(strncmp(name, "SGEMM_BI_STATUS_", 16) == 0 && strcmp(name, "SGEMM_BI_STATUS_UNKNOWN") != 0,
              "every code has a name");
        for (uint32_t j = 0; j < i; j++) {
            check(strcmp(name, sgemm_bi_status_name(j)) != 0, "names are distinct");
        }
    }
    check(strcmp(sgemm_bi_status_name(SGEMM_BI_STATUS_TIER_UNAVAILABLE),
                 "SGEMM_BI_STATUS_TIER_UNAVAILABLE") == 0,
          "names spell the header's constants");
    check(strcmp(sgemm_bi_status_name(SGEMM_BI_STATUS_OVERLAPPING_OPERANDS),
                 "SGEMM_BI_STATUS_OVERLAPPING_OPERANDS") == 0,
          "an appended code has its name");
    check(strcmp(sgemm_bi_status_name(LAST_STATUS + 1), "SGEMM_BI_STATUS_UNKNOWN") == 0,
          "an unknown number has the UNKNOWN name");
}

/* A grouped call (rows split, two experts): each group's rows have the bits of the dense
 * call of those rows with its expert's B and bias; bad offsets and arguments are rejected
 * with C untouched. */
static float experts[2 * K * N], expert_bias[2 * N];

static void grouped_calls(void) {
    sgemm_bi_gemm_desc d = valid(), one;
    const int32_t offsets[2] = {1, M};
    float want[M * N];
    d.batch = 2;
    d.b.batch_stride = K * N;
    poison_c();
    check(sgemm_bi_grouped_gemm(engine, &d, SGEMM_BI_GROUP_SPLIT_ROWS, offsets,
                                SGEMM_BI_OFFSETS_LOCATION_HOST, a, experts, expert_bias, c,
                                NULL) == SGEMM_BI_STATUS_OK,
          "a grouped call succeeds");
    /* Group 0: row 0 with expert 0; group 1: rows 1.. with expert 1. */
    one = valid();
    one.m = 1;
    check(sgemm_bi_gemm(engine, &one, a, experts, expert_bias, want, NULL) == SGEMM_BI_STATUS_OK,
          "group 0 as a dense call");
    one.m = M - 1;
    check(sgemm_bi_gemm(engine, &one, a + K, experts + K * N, expert_bias + N, want + N, NULL) ==
              SGEMM_BI_STATUS_OK,
          "group 1 as a dense call");
    check(memcmp(c, want, sizeof want) == 0, "each group has its dense call's bits");

    const int32_t decreasing[2] = {2, 1}, past_end[2] = {1, M + 1};
    poison_c();
    expect(sgemm_bi_grouped_gemm(engine, &d, SGEMM_BI_GROUP_SPLIT_ROWS, decreasing,
                                 SGEMM_BI_OFFSETS_LOCATION_HOST, a, experts, expert_bias, c, NULL),
           SGEMM_BI_STATUS_BAD_OFFSETS, "group 1", "decreasing offsets");
    expect(sgemm_bi_grouped_gemm(engine, &d, SGEMM_BI_GROUP_SPLIT_ROWS, past_end,
                                 SGEMM_BI_OFFSETS_LOCATION_HOST, a, experts, expert_bias, c, NULL),
           SGEMM_BI_STATUS_BAD_OFFSETS, "past the end", "offsets past the end");
    expect(sgemm_bi_grouped_gemm(engine, &d, 3, offsets, SGEMM_BI_OFFSETS_LOCATION_HOST, a,
                                 experts, expert_bias, c, NULL),
           SGEMM_BI_STATUS_INVALID_ARGUMENT, "split", "unknown split");
    expect(sgemm_bi_grouped_gemm(engine, &d, SGEMM_BI_GROUP_SPLIT_ROWS, offsets, 2, a, experts,
                                 expert_bias, c, NULL),
           SGEMM_BI_STATUS_INVALID_ARGUMENT, "offsets_location", "unknown offsets location");
    expect(sgemm_bi_grouped_gemm(engine, &d, SGEMM_BI_GROUP_SPLIT_ROWS, NULL,
                                 SGEMM_BI_OFFSETS_LOCATION_HOST, a, experts, expert_bias, c, NULL),
           SGEMM_BI_STATUS_NULL_PARAMETER, "offsets", "NULL offsets");
    expect(sgemm_bi_grouped_gemm(engine, &d, SGEMM_BI_GROUP_SPLIT_ROWS, offsets,
                                 SGEMM_BI_OFFSETS_LOCATION_DEVICE, a, experts, expert_bias, c,
                                 NULL),
           SGEMM_BI_STATUS_WRONG_DEVICE, "host memory", "device offsets on the CPU");

    /* The CPU engine checks offsets before it runs: it never has a device error pending,
     * not even after the rejected calls above. */
    check(sgemm_bi_engine_take_device_error(engine) == SGEMM_BI_STATUS_OK,
          "a CPU engine has no device error");
    check(sgemm_bi_last_error_message()[0] == '\0', "no device error, no message");
    poison_c();
    expect(sgemm_bi_engine_take_device_error(NULL), SGEMM_BI_STATUS_NULL_PARAMETER, "engine",
           "take_device_error: NULL engine");
}

int main(void) {
    uint64_t state = 7;
    check(sgemm_bi_abi_version() == SGEMM_BI_ABI_VERSION, "runtime ABI version = header's");
    check(sgemm_bi_engine_create(SGEMM_BI_DEVICE_KIND_CPU, 0, &engine) == SGEMM_BI_STATUS_OK,
          "CPU engine");
    for (int i = 0; i < M * K; i++) a[i] = (float)((state = state * 48271 % 2147483647) % 2001) / 1000.0f - 1.0f;
    for (int i = 0; i < K * N; i++) b[i] = (float)((state = state * 48271 % 2147483647) % 2001) / 1000.0f - 1.0f;
    for (int i = 0; i < N; i++) bias[i] = (float)i - 1.5f;
    for (int i = 0; i < 2 * K * N; i++) experts[i] = (float)(i % 7) * 0.25f - 0.5f;
    for (int i = 0; i < 2 * N; i++) expert_bias[i] = (float)i * 0.5f;
    for (int i = 0; i < M; i++) {
        for (int j = 0; j < N; j++) {
            float acc = 0.0f;
            for (int k = 0; k < K; k++) acc = fmaf(a[i * K + k], b[k * N + j], acc);
            c_want[i * N + j] = bias[j] + acc;
        }
    }
    still_works("start-up");
    descriptor_errors();
    pointer_errors();
    shape_and_dtype_errors();
    overlap_errors();
    pointer_check_switch();
    convenience_errors();
    engine_errors();
    grouped_calls();
    status_names();
    check(sgemm_bi_engine_destroy(engine) == SGEMM_BI_STATUS_OK, "destroy");
    printf("abi_errors: %d passed, %d failed\n", passed, failed);
    return failed == 0 ? 0 : 1;
}
