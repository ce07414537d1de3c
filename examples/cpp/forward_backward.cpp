// forward_backward.cpp: a bf16 linear layer through the C++ wrappers of sgemm_bi.hpp, on the
// CPU backend: forward with an f32 bias, dW accumulated in f32 over two micro-batches, dX.
// Each result is checked bit for bit against the scalar tier's contract written as loops
// (f32 fma chain in ascending k from +0.0, bias added once, one round to bf16), and the
// forward pass of one row alone is checked against the same row of the whole batch (batch
// invariance). Errors come back as sgemm_bi::Error exceptions.
//
// Build (with the library installed by scripts/install):
//   c++ -std=c++17 -Wall -Wextra -Werror examples/cpp/forward_backward.cpp
//       $(pkg-config --cflags --libs sgemm_bi) -o forward_backward_cpp
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <utility>
#include <vector>

#include "sgemm_bi.hpp"

namespace {

using bf16 = uint16_t;  // bfloat16 bits

float to_f32(bf16 h) {
    uint32_t bits = static_cast<uint32_t>(h) << 16;
    float f;
    std::memcpy(&f, &bits, sizeof f);
    return f;
}

// Round to nearest, ties to even (the values here are finite).
bf16 to_bf16(float f) {
    uint32_t bits;
    std::memcpy(&bits, &f, sizeof bits);
    return static_cast<bf16>((bits + 0x7FFFu + ((bits >> 16) & 1u)) >> 16);
}

struct Rng {
    uint64_t state;
    float unit() {  // uniform in [-1, 1)
        state = state * 6364136223846793005ull + 1442695040888963407ull;
        return static_cast<float>(state >> 40) / static_cast<float>(1u << 23) - 1.0f;
    }
};

std::vector<bf16> random_bf16(size_t n, Rng &rng) {
    std::vector<bf16> v(n);
    for (auto &x : v) x = to_bf16(rng.unit());
    return v;
}

int count_diffs(const char *what, const void *got, const void *want, size_t bytes) {
    if (std::memcmp(got, want, bytes) == 0) {
        std::printf("%s: bit-identical\n", what);
        return 0;
    }
    std::fprintf(stderr, "%s: bits differ\n", what);
    return 1;
}

}  // namespace

int main() {
    constexpr uint64_t M = 24, K = 41, N = 19;  // W stored [K, N] (in × out)
    Rng rng{7};
    const auto x = random_bf16(M * K, rng), w = random_bf16(K * N, rng);
    const auto dy1 = random_bf16(M * N, rng), dy2 = random_bf16(M * N, rng);
    std::vector<float> bias(N);
    for (auto &b : bias) b = rng.unit();

    // The contract as loops.
    std::vector<bf16> y_want(M * N), dx_want(M * K);
    std::vector<float> dw_want(K * N, 0.0f);
    for (uint64_t i = 0; i < M; i++)
        for (uint64_t j = 0; j < N; j++) {
            float acc = 0.0f;
            for (uint64_t k = 0; k < K; k++) acc = std::fma(to_f32(x[i * K + k]), to_f32(w[k * N + j]), acc);
            y_want[i * N + j] = to_bf16(bias[j] + acc);
        }
    for (const auto *dy : {&dy1, &dy2})
        for (uint64_t k = 0; k < K; k++)
            for (uint64_t j = 0; j < N; j++) {
                float acc = 0.0f;
                for (uint64_t i = 0; i < M; i++) acc = std::fma(to_f32(x[i * K + k]), to_f32((*dy)[i * N + j]), acc);
                dw_want[k * N + j] = dw_want[k * N + j] + acc;
            }
    for (uint64_t i = 0; i < M; i++)
        for (uint64_t k = 0; k < K; k++) {
            float acc = 0.0f;
            for (uint64_t j = 0; j < N; j++) acc = std::fma(to_f32(dy2[i * N + j]), to_f32(w[k * N + j]), acc);
            dx_want[i * K + k] = to_bf16(acc);
        }

    int bad = 0;
    try {
        sgemm_bi::Engine engine = sgemm_bi::Engine::cpu();
        std::printf("libsgemm_bi %s, CPU engine, scalar tier: %s\n", sgemm_bi_version(),
                    engine.supports(sgemm_bi::Tier::Scalar) ? "yes" : "no");
        // Tier::Auto picks tensor cores for bf16 on a GPU that has them, the scalar tier here.
        bad += engine.resolve_tier(sgemm_bi::Tier::Auto, sgemm_bi::DType::BF16) != sgemm_bi::Tier::Scalar;
        const auto layer = sgemm_bi::linear(M, K, N, sgemm_bi::DType::BF16, sgemm_bi::WeightLayout::KN);

        std::vector<bf16> y(M * N, 0xFFFF), dx(M * K, 0xFFFF);
        std::vector<float> dw(K * N, 0.0f);
        engine.forward(layer, x.data(), w.data(), bias.data(), sgemm_bi::DType::F32, y.data());
        engine.backward_dw_accumulate(layer, dy1.data(), x.data(), dw.data());
        engine.backward_dw_accumulate(layer, dy2.data(), x.data(), dw.data());
        engine.backward_dx(layer, dy2.data(), w.data(), dx.data());
        bad += count_diffs("Y (bf16) vs the contract", y.data(), y_want.data(), y.size() * sizeof(bf16));
        bad += count_diffs("dW (f32, two micro-batches) vs the contract", dw.data(), dw_want.data(), dw.size() * sizeof(float));
        bad += count_diffs("dX (bf16) vs the contract", dx.data(), dx_want.data(), dx.size() * sizeof(bf16));

        // Batch invariance: row 5 alone gives the bits of row 5 of the batch.
        const auto one = sgemm_bi::linear(1, K, N, sgemm_bi::DType::BF16, sgemm_bi::WeightLayout::KN);
        std::vector<bf16> row(N);
        engine.forward(one, &x[5 * K], w.data(), bias.data(), sgemm_bi::DType::F32, row.data());
        bad += count_diffs("row 5 alone vs row 5 of the batch", row.data(), &y[5 * N], N * sizeof(bf16));

        // A bad call throws, names the problem, and leaves the engine usable.
        auto broken = layer;
        broken.weight_layout = 7;
        try {
            engine.forward(broken, x.data(), w.data(), nullptr, sgemm_bi::DType::F32, y.data());
            std::fprintf(stderr, "an unknown weight layout was accepted\n");
            bad++;
        } catch (const sgemm_bi::Error &e) {
            std::printf("rejected as expected: %s\n", e.what());
            bad += e.status() != SGEMM_BI_STATUS_INVALID_ARGUMENT ||
                   std::strstr(e.what(), "layer->weight_layout") == nullptr;
        }
        auto desc = sgemm_bi::dense(M, N, K, sgemm_bi::DType::BF16);
        desc.has_bias = 1;
        desc.bias_dtype = SGEMM_BI_DTYPE_F32;  // an f32 bias on bf16 inputs
        std::vector<bf16> y2(M * N);
        engine.gemm(desc, x.data(), w.data(), bias.data(), y2.data());
        bad += count_diffs("the same forward through Engine::gemm vs forward", y2.data(), y.data(), y.size() * sizeof(bf16));

        // The handle moves with the object; the moved-from engine owns nothing.
        sgemm_bi::Engine moved = std::move(engine);
        bad += engine.get() != nullptr || moved.get() == nullptr || !moved.supports(sgemm_bi::Tier::Scalar);
    } catch (const sgemm_bi::Error &e) {
        std::fprintf(stderr, "unexpected error: %s\n", e.what());
        return 1;
    }
    if (bad == 0) std::printf("C++ example: ok\n");
    return bad == 0 ? 0 : 1;
}
