// What the GPU test program's files share (test_cuda_gpu.cpp: the cores and the layer, its
// main(); test_cuda_gpu_decode*.cpp: cuda-decode): the tolerances, the host's rounding, random
// inputs, a parallel loop for the float64 references, the error measure and the tally.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "api.hpp"
#include "formats.hpp"

namespace attn_gpu_check {

namespace cu = attn::cuda;
namespace fm = attn::cuda::formats;

inline double tolerance(cu::storage st) { return st == cu::storage::f32 ? 1e-4 : 2e-2; }

inline float round_to(cu::storage st, float x) {
    return st == cu::storage::bf16 ? fm::round_bf16(x) : st == cu::storage::f16 ? fm::round_f16(x) : x;
}

inline std::vector<float> random_vector(std::mt19937_64& rng, std::size_t n, float sigma = 1.0f) {
    std::normal_distribution<float> nd(0.0f, sigma);
    std::vector<float> x(n);
    for (float& e : x) e = nd(rng);
    return x;
}

/// Runs f(i) for i < n on every hardware thread.
inline void parallel_for(std::size_t n, const std::function<void(std::size_t)>& f) {
    const std::size_t t = std::max(1u, std::thread::hardware_concurrency());
    std::vector<std::thread> pool;
    for (std::size_t w = 0; w < std::min(t, n); ++w)
        pool.emplace_back([&, w] {
            for (std::size_t i = w; i < n; i += t) f(i);
        });
    for (auto& th : pool) th.join();
}

/// max |out - ref| / max |ref|; infinity when out holds a NaN or the sizes differ.
template <class T>
double relative_error(const std::vector<T>& out, const std::vector<double>& ref) {
    if (out.size() != ref.size()) return std::numeric_limits<double>::infinity();
    double err = 0, mx = 0;
    for (std::size_t i = 0; i < ref.size(); ++i) {
        const double d = std::abs(double(out[i]) - ref[i]);
        if (!(d <= std::numeric_limits<double>::max())) return std::numeric_limits<double>::infinity();
        err = std::max(err, d);
        mx = std::max(mx, std::abs(ref[i]));
    }
    return mx > 0 ? err / mx : err;
}

struct tally {
    int passed = 0, failed = 0;
    void check(bool ok, const std::string& what) {
        if (ok) {
            ++passed;
        } else {
            ++failed;
            std::printf("FAIL %s\n", what.c_str());
        }
    }
};

inline std::string fmt_err(double e, double tol) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "error %.3g (tolerance %.0e)", e, tol);
    return buf;
}

/// cuda-decode's cases (test_cuda_gpu_decode.cpp): paged, rolling, n_q 1-8, MLA, the options, the
/// mutants. reference_only: no GPU, the mutants' margins over the tolerance alone.
void run_decode_checks(tally& t, std::mt19937_64& rng, bool small, bool reference_only);

} // namespace attn_gpu_check
