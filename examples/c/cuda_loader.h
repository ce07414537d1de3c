/*
 * cuda_loader.h: the few CUDA driver API calls the C examples and tests need (device memory,
 * copies, a stream), loaded at run time with dlopen("libcuda.so.1"), so that the programs
 * build without a CUDA toolkit and still run where there is no driver.
 *
 * libsgemm_bi takes device pointers of the device's primary context and streams of that
 * context: cuda_open() retains the primary context of a device and makes it current.
 *
 * Header-only (every function is static); define _POSIX_C_SOURCE before including it in
 * strict ISO C modes.
 */
#ifndef SGEMM_BI_CUDA_LOADER_H
#define SGEMM_BI_CUDA_LOADER_H

#include <dlfcn.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

typedef int CUresult; /* 0 is CUDA_SUCCESS */
typedef int CUdevice;
typedef struct CUctx_st *CUcontext;
typedef struct CUstream_st *CUstream;
typedef unsigned long long CUdeviceptr;

#define CU_STREAM_NON_BLOCKING 0x1u

typedef struct cuda_api {
    void *lib;
    CUdevice device;
    CUcontext ctx;
    CUresult (*cuInit)(unsigned int);
    CUresult (*cuDeviceGet)(CUdevice *, int);
    CUresult (*cuDevicePrimaryCtxRetain)(CUcontext *, CUdevice);
    CUresult (*cuDevicePrimaryCtxRelease)(CUdevice);
    CUresult (*cuCtxSetCurrent)(CUcontext);
    CUresult (*cuStreamCreate)(CUstream *, unsigned int);
    CUresult (*cuStreamSynchronize)(CUstream);
    CUresult (*cuStreamDestroy)(CUstream);
    CUresult (*cuMemAlloc)(CUdeviceptr *, size_t);
    CUresult (*cuMemFree)(CUdeviceptr);
    CUresult (*cuMemcpyHtoDAsync)(CUdeviceptr, const void *, size_t, CUstream);
    CUresult (*cuMemcpyDtoHAsync)(void *, CUdeviceptr, size_t, CUstream);
    CUresult (*cuGetErrorString)(CUresult, const char **);
} cuda_api;

/* Looks `name` up into the function pointer at `slot` (memcpy: ISO C has no cast from
 * void * to a function pointer). */
static int cuda_sym(cuda_api *api, void *slot, const char *name) {
    void *sym = dlsym(api->lib, name);
    if (sym == NULL) {
        fprintf(stderr, "cuda_loader: %s not found in libcuda.so.1\n", name);
        return 0;
    }
    memcpy(slot, &sym, sizeof sym);
    return 1;
}

/* Reports a failed driver call; returns whether `r` is success. */
static int cuda_ok(const cuda_api *api, CUresult r, const char *call) {
    const char *text = "unknown error";
    if (r == 0) {
        return 1;
    }
    if (api->cuGetErrorString != NULL) {
        api->cuGetErrorString(r, &text);
    }
    fprintf(stderr, "cuda_loader: %s failed: %d (%s)\n", call, r, text);
    return 0;
}

/* Loads the driver and makes the primary context of `ordinal` current on this thread.
 * Returns 0 (and prints why) when that is not possible. */
static int cuda_open(cuda_api *api, int ordinal) {
    memset(api, 0, sizeof *api);
    api->lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (api->lib == NULL) {
        fprintf(stderr, "cuda_loader: %s\n", dlerror());
        return 0;
    }
    if (!(cuda_sym(api, &api->cuInit, "cuInit") &&
          cuda_sym(api, &api->cuDeviceGet, "cuDeviceGet") &&
          cuda_sym(api, &api->cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain") &&
          cuda_sym(api, &api->cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2") &&
          cuda_sym(api, &api->cuCtxSetCurrent, "cuCtxSetCurrent") &&
          cuda_sym(api, &api->cuStreamCreate, "cuStreamCreate") &&
          cuda_sym(api, &api->cuStreamSynchronize, "cuStreamSynchronize") &&
          cuda_sym(api, &api->cuStreamDestroy, "cuStreamDestroy_v2") &&
          cuda_sym(api, &api->cuMemAlloc, "cuMemAlloc_v2") &&
          cuda_sym(api, &api->cuMemFree, "cuMemFree_v2") &&
          cuda_sym(api, &api->cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2") &&
          cuda_sym(api, &api->cuMemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2") &&
          cuda_sym(api, &api->cuGetErrorString, "cuGetErrorString"))) {
        dlclose(api->lib);
        api->lib = NULL;
        return 0;
    }
    if (!cuda_ok(api, api->cuInit(0), "cuInit") ||
        !cuda_ok(api, api->cuDeviceGet(&api->device, ordinal), "cuDeviceGet") ||
        !cuda_ok(api, api->cuDevicePrimaryCtxRetain(&api->ctx, api->device),
                 "cuDevicePrimaryCtxRetain")) {
        dlclose(api->lib);
        api->lib = NULL;
        return 0;
    }
    return cuda_ok(api, api->cuCtxSetCurrent(api->ctx), "cuCtxSetCurrent");
}

static void cuda_close(cuda_api *api) {
    if (api->lib != NULL) {
        api->cuDevicePrimaryCtxRelease(api->device);
        dlclose(api->lib);
        api->lib = NULL;
    }
}

/* A device copy of `bytes` bytes of `host` (uploaded on `stream`), or 0 on failure. */
static CUdeviceptr cuda_upload(const cuda_api *api, const void *host, size_t bytes,
                               CUstream stream) {
    CUdeviceptr p = 0;
    if (!cuda_ok(api, api->cuMemAlloc(&p, bytes), "cuMemAlloc")) {
        return 0;
    }
    if (!cuda_ok(api, api->cuMemcpyHtoDAsync(p, host, bytes, stream), "cuMemcpyHtoDAsync")) {
        api->cuMemFree(p);
        return 0;
    }
    return p;
}

/* Copies `bytes` bytes back to `host` and waits for `stream`. */
static int cuda_download(const cuda_api *api, void *host, CUdeviceptr p, size_t bytes,
                         CUstream stream) {
    return cuda_ok(api, api->cuMemcpyDtoHAsync(host, p, bytes, stream), "cuMemcpyDtoHAsync") &&
           cuda_ok(api, api->cuStreamSynchronize(stream), "cuStreamSynchronize");
}

/* A device pointer as the void * that libsgemm_bi takes. */
static void *cuda_ptr(CUdeviceptr p) { return (void *)(uintptr_t)p; }

#endif /* SGEMM_BI_CUDA_LOADER_H */
