// sgemm_bi.hpp: header-only C++17 wrappers over the C ABI in sgemm_bi.h.
//
//  - sgemm_bi::Engine owns a sgemm_bi_engine (destroyed by its destructor; movable, not
//    copyable) and may be shared by threads like the handle it wraps.
//  - Every failed call throws sgemm_bi::Error, which carries the status code and the
//    library's message.
//  - The descriptors are the C structs, built by sgemm_bi::dense() and sgemm_bi::linear()
//    with struct_size and reserved fields already set.
//
// Written by hand (not generated); tested by examples/cpp/forward_backward.cpp.
#ifndef SGEMM_BI_HPP
#define SGEMM_BI_HPP

#include <cstdint>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>

#include "sgemm_bi.h"

namespace sgemm_bi {

enum class DType : uint32_t {
    F32 = SGEMM_BI_DTYPE_F32,
    BF16 = SGEMM_BI_DTYPE_BF16,
    F16 = SGEMM_BI_DTYPE_F16,
};

enum class Layout : uint32_t {
    RowMajor = SGEMM_BI_LAYOUT_ROW_MAJOR,
    ColMajor = SGEMM_BI_LAYOUT_COL_MAJOR,
};

enum class Tier : uint32_t {
    Scalar = SGEMM_BI_TIER_SCALAR,
    TensorCores = SGEMM_BI_TIER_TENSOR_CORES,
    // The engine's choice: tensor cores for bf16/f16 on a CUDA engine that runs them, the
    // scalar tier otherwise (Engine::resolve_tier says which).
    Auto = SGEMM_BI_TIER_AUTO,
};

enum class WeightLayout : uint32_t {
    KN = SGEMM_BI_WEIGHT_LAYOUT_KN,  // W[K,N]: in × out
    NK = SGEMM_BI_WEIGHT_LAYOUT_NK,  // W[N,K]: out × in (torch)
};

enum class DeviceKind : uint32_t {
    Cpu = SGEMM_BI_DEVICE_KIND_CPU,
    Cuda = SGEMM_BI_DEVICE_KIND_CUDA,
};

// A failed call: its status code, and the message the library gave on this thread.
class Error : public std::runtime_error {
public:
    Error(sgemm_bi_status status, const std::string &message)
        : std::runtime_error(std::string(sgemm_bi_status_name(status)) + ": " + message),
          status_(status) {}
    sgemm_bi_status status() const noexcept { return status_; }

private:
    sgemm_bi_status status_;
};

// Throws sgemm_bi::Error unless `status` is SGEMM_BI_STATUS_OK.
inline void check(sgemm_bi_status status) {
    if (status != SGEMM_BI_STATUS_OK) {
        throw Error(status, sgemm_bi_last_error_message());
    }
}

// A dense, unbatched, row-major C[M,N] = A[M,K] · B[K,N] in `dtype`, scalar tier, no bias.
inline sgemm_bi_gemm_desc dense(uint64_t m, uint64_t n, uint64_t k, DType dtype) {
    sgemm_bi_gemm_desc desc;
    check(sgemm_bi_gemm_desc_dense(m, n, k, static_cast<uint32_t>(dtype), &desc));
    return desc;
}

// A linear layer of M rows, K inputs and N outputs.
inline sgemm_bi_linear linear(uint64_t m, uint64_t k, uint64_t n, DType dtype,
                              WeightLayout weight, Tier tier = Tier::Scalar) {
    sgemm_bi_linear l;
    std::memset(&l, 0, sizeof l);
    l.struct_size = sizeof l;
    l.dtype = static_cast<uint32_t>(dtype);
    l.weight_layout = static_cast<uint32_t>(weight);
    l.tier = static_cast<uint32_t>(tier);
    l.m = m;
    l.k = k;
    l.n = n;
    return l;
}

// A GEMM engine on one device. Pointers are host pointers on the CPU engine and device
// pointers (of the device's primary context) on a CUDA engine; `stream` is a CUstream /
// cudaStream_t (nullptr: the default stream), ignored on the CPU.
class Engine {
public:
    // The CPU backend (always available).
    static Engine cpu() { return Engine(SGEMM_BI_DEVICE_KIND_CPU, 0); }
    // CUDA device `ordinal`; throws with SGEMM_BI_STATUS_NO_DRIVER / NO_DEVICE without one.
    static Engine cuda(uint32_t ordinal = 0) { return Engine(SGEMM_BI_DEVICE_KIND_CUDA, ordinal); }

    sgemm_bi_engine *get() const noexcept { return handle_.get(); }

    sgemm_bi_capabilities capabilities() const {
        sgemm_bi_capabilities caps;
        std::memset(&caps, 0, sizeof caps);
        caps.struct_size = sizeof caps;
        check(sgemm_bi_engine_capabilities(get(), &caps));
        return caps;
    }

    bool supports(Tier tier) const {
        bool yes = false;
        check(sgemm_bi_engine_supports(get(), static_cast<uint32_t>(tier), &yes));
        return yes;
    }

    // The tier a call of `tier` with `input` operands runs (never Tier::Auto).
    Tier resolve_tier(Tier tier, DType input) const {
        uint32_t resolved = 0;
        check(sgemm_bi_engine_resolve_tier(get(), static_cast<uint32_t>(tier),
                                           static_cast<uint32_t>(input), &resolved));
        return static_cast<Tier>(resolved);
    }

    // Pointer checks (on by default): before each CUDA call, ask the driver whether every
    // buffer is memory the device can use (sgemm_bi_engine_set_pointer_checks).
    void set_pointer_checks(bool enabled) const {
        check(sgemm_bi_engine_set_pointer_checks(get(), enabled));
    }

    // C[b] = A[b] · B[b] (+ bias) as `desc` says; `bias` must be nullptr unless
    // desc.has_bias is 1.
    void gemm(const sgemm_bi_gemm_desc &desc, const void *a, const void *b, const void *bias,
              void *c, void *stream = nullptr) const {
        check(sgemm_bi_gemm(get(), &desc, a, b, bias, c, stream));
    }

    // A grouped GEMM (sgemm_bi_grouped_gemm): desc.batch groups split along `split` by the
    // cumulative ends `offsets` (host or device memory, as `location` says).
    void grouped_gemm(const sgemm_bi_gemm_desc &desc, sgemm_bi_group_split split,
                      const int32_t *offsets, sgemm_bi_offsets_location location, const void *a,
                      const void *b, const void *bias, void *c, void *stream = nullptr) const {
        check(sgemm_bi_grouped_gemm(get(), &desc, static_cast<uint32_t>(split), offsets,
                                    static_cast<uint32_t>(location), a, b, bias, c, stream));
    }

    // Throws (SGEMM_BI_STATUS_BAD_OFFSETS) the bad group end a grouped kernel of this engine
    // found on the device since the last look, and clears it: device offsets a grouped kernel
    // reads are clamped, not waited for, and reported once the kernel has run (certainly
    // after a synchronize of its stream). Every grouped_gemm looks first, too
    // (sgemm_bi_engine_take_device_error).
    void take_device_error() const { check(sgemm_bi_engine_take_device_error(get())); }

    // Y = X·W + bias (bias of `bias_dtype`, or no bias when `bias` is nullptr).
    void forward(const sgemm_bi_linear &layer, const void *x, const void *w, const void *bias,
                 DType bias_dtype, void *y, void *stream = nullptr) const {
        check(sgemm_bi_forward(get(), &layer, x, w, bias, static_cast<uint32_t>(bias_dtype), y,
                               stream));
    }

    // dW = Xᵀ·dY, overwritten in `dw_dtype`.
    void backward_dw(const sgemm_bi_linear &layer, const void *dy, const void *x, void *dw,
                     DType dw_dtype, void *stream = nullptr) const {
        check(sgemm_bi_backward_dw(get(), &layer, dy, x, dw, SGEMM_BI_OUTPUT_MODE_OVERWRITE,
                                   static_cast<uint32_t>(dw_dtype), stream));
    }

    // dW += Xᵀ·dY, accumulated in f32.
    void backward_dw_accumulate(const sgemm_bi_linear &layer, const void *dy, const void *x,
                                float *dw, void *stream = nullptr) const {
        check(sgemm_bi_backward_dw(get(), &layer, dy, x, dw, SGEMM_BI_OUTPUT_MODE_ACCUMULATE_F32,
                                   SGEMM_BI_DTYPE_F32, stream));
    }

    // dX = dY·Wᵀ, in the layer's dtype.
    void backward_dx(const sgemm_bi_linear &layer, const void *dy, const void *w, void *dx,
                     void *stream = nullptr) const {
        check(sgemm_bi_backward_dx(get(), &layer, dy, w, dx, stream));
    }

private:
    struct Destroy {
        void operator()(sgemm_bi_engine *e) const noexcept { sgemm_bi_engine_destroy(e); }
    };

    Engine(uint32_t kind, uint32_t ordinal) {
        if (sgemm_bi_abi_version() != SGEMM_BI_ABI_VERSION) {
            throw Error(SGEMM_BI_STATUS_INVALID_ARGUMENT,
                        "libsgemm_bi has ABI version " + std::to_string(sgemm_bi_abi_version()) +
                            ", this program was built against version " +
                            std::to_string(SGEMM_BI_ABI_VERSION));
        }
        sgemm_bi_engine *e = nullptr;
        check(sgemm_bi_engine_create(kind, ordinal, &e));
        handle_.reset(e);
    }

    std::unique_ptr<sgemm_bi_engine, Destroy> handle_;
};

}  // namespace sgemm_bi

#endif  // SGEMM_BI_HPP
