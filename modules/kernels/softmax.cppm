// attn.kernels:softmax -- the streaming-softmax primitives the tiled and the decode cores share:
// a row's maximum, and exp(x - max) in place with its sum, through the vector exp for
// non-positive arguments (isa::exp_nonpos).
module;
#include <algorithm>
#include <cstddef>
#include <limits>
#include <xsimd/xsimd.hpp>
export module attn.kernels:softmax;
import :isa;

export namespace attn::kernels::detail {

/// max of x[0:n]
inline float row_max(const float* x, std::size_t n) {
    batch mx(-std::numeric_limits<float>::infinity());
    std::size_t j = 0;
    for (; j + lanes <= n; j += lanes) mx = xsimd::max(mx, batch::load_unaligned(x + j));
    alignas(64) float t[lanes];
    mx.store_aligned(t);
    float r = t[0];
    for (std::size_t k = 1; k < lanes; ++k) r = std::max(r, t[k]);
    for (; j < n; ++j) r = std::max(r, x[j]);
    return r;
}

/// x[j] = exp(x[j] - m) for j < n (x has room for a whole batch past n); returns the sum.
inline float exp_row(float* x, std::size_t n, float m) {
    const batch mb(m);
    batch sum(0.0f);
    std::size_t j = 0;
    for (; j + lanes <= n; j += lanes) {
        const batch e = isa::exp_nonpos(batch::load_unaligned(x + j) - mb);
        e.store_unaligned(x + j);
        sum += e;
    }
    if (j < n) { // the tail through the same vector exp, padded with -inf (exp = 0)
        alignas(64) float t[lanes];
        for (std::size_t k = 0; k < lanes; ++k) t[k] = j + k < n ? x[j + k] : -std::numeric_limits<float>::infinity();
        const batch e = isa::exp_nonpos(batch::load_aligned(t) - mb);
        e.store_unaligned(x + j);
        sum += e;
    }
    return xsimd::hadd(sum);
}

/// The aligned batches s[0, n * lanes) become exp(s - m), lane by lane; returns their sum as a
/// batch (the decode core keeps one running maximum per lane group).
inline batch exp_batches(float* s, std::size_t n, batch m) {
    batch sum(0.0f);
    for (std::size_t i = 0; i < n; ++i) {
        const batch e = isa::exp_nonpos(batch::load_aligned(s + i * lanes) - m);
        e.store_aligned(s + i * lanes);
        sum += e;
    }
    return sum;
}

} // namespace attn::kernels::detail
