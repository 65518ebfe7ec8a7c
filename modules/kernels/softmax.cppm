// attn.kernels:softmax -- the streaming-softmax primitives the tiled and the decode cores share:
// a row's maximum, and exp(x - max) (or 2^(x - max)) in place with its sum, through the vector
// exp for non-positive arguments (isa::exp_nonpos, isa::exp2_nonpos).
module;
#include <algorithm>
#include <cstddef>
#include <limits>
#include <numbers>
#include <xsimd/xsimd.hpp>
export module attn.kernels:softmax;
import :isa;
import attn.core;

export namespace attn::kernels::detail {

/// The queries' scale for a softmax in base 2, the tiled and the decode cores' alike: the
/// problem's softmax scale times log2 e, so that 2^(s' - m') of the scaled scores s' is
/// exp(s - m) of the plain ones, each exponential one isa::exp2_nonpos (12 vector operations on
/// AVX2, where exp_nonpos takes 17), and the running maxima are in the same base-2 units.
inline float base2_scale(const problem& p) { return float(p.softmax_scale() * std::numbers::log2e); }

/// max of x[0:n]: two running maxima (one is a chain of dependent vmaxps, 4 cycles a batch),
/// joined by a tree (isa::hmax)
inline float row_max(const float* x, std::size_t n) {
    batch m0(-std::numeric_limits<float>::infinity()), m1 = m0;
    std::size_t j = 0;
    for (; j + 2 * lanes <= n; j += 2 * lanes) {
        m0 = xsimd::max(m0, batch::load_unaligned(x + j));
        m1 = xsimd::max(m1, batch::load_unaligned(x + j + lanes));
    }
    if (j + lanes <= n) {
        m0 = xsimd::max(m0, batch::load_unaligned(x + j));
        j += lanes;
    }
    float r = isa::hmax(xsimd::max(m0, m1));
    for (; j < n; ++j) r = std::max(r, x[j]);
    return r;
}

/// x[j] = Exp(x[j] - m) for j < n (x has room for a whole batch past n); returns the sum, lane by
/// lane (the tiled core keeps a row's running sum in lanes and adds them once, at the end).
/// Exp: isa::exp_nonpos or isa::exp2_nonpos.
template <batch (*Exp)(batch)>
batch exp_row_lanes(float* x, std::size_t n, float m) {
    const batch mb(m);
    batch sum(0.0f), sum1(0.0f);
    std::size_t j = 0;
    // two batches an iteration, two sums: each exp is a chain of ~12 dependent operations, and two
    // independent chains keep both FMA pipes busy where one left them waiting on its latency
    for (; j + 2 * lanes <= n; j += 2 * lanes) {
        const batch e0 = Exp(batch::load_unaligned(x + j) - mb);
        const batch e1 = Exp(batch::load_unaligned(x + j + lanes) - mb);
        e0.store_unaligned(x + j);
        e1.store_unaligned(x + j + lanes);
        sum += e0;
        sum1 += e1;
    }
    sum += sum1;
    for (; j + lanes <= n; j += lanes) {
        const batch e = Exp(batch::load_unaligned(x + j) - mb);
        e.store_unaligned(x + j);
        sum += e;
    }
    if (j < n) { // the tail through the same vector exp, padded with -inf (exp = 0)
        alignas(64) float t[lanes];
        for (std::size_t k = 0; k < lanes; ++k) t[k] = j + k < n ? x[j + k] : -std::numeric_limits<float>::infinity();
        const batch e = Exp(batch::load_aligned(t) - mb);
        e.store_unaligned(x + j);
        sum += e;
    }
    return sum;
}

/// x[j] = exp(x[j] - m) for j < n (x has room for a whole batch past n); returns the sum.
inline float exp_row(float* x, std::size_t n, float m) { return xsimd::hadd(exp_row_lanes<isa::exp_nonpos>(x, n, m)); }

/// x[j] = 2^(x[j] - m) for j < n, the same way; returns the sum lane by lane (the tiled core's).
inline batch exp2_row_lanes(float* x, std::size_t n, float m) { return exp_row_lanes<isa::exp2_nonpos>(x, n, m); }

/// x[j] = 2^(x[j] - m) for j < n; returns the sum.
inline float exp2_row(float* x, std::size_t n, float m) { return xsimd::hadd(exp2_row_lanes(x, n, m)); }

/// The aligned batches s[0, n * lanes) become 2^(s - m), lane by lane; returns their sum as a
/// batch (the decode core keeps one running maximum per lane group).
inline batch exp2_batches(float* s, std::size_t n, batch m) {
    batch sum(0.0f);
    for (std::size_t i = 0; i < n; ++i) {
        const batch e = isa::exp2_nonpos(batch::load_aligned(s + i * lanes) - m);
        e.store_aligned(s + i * lanes);
        sum += e;
    }
    return sum;
}

} // namespace attn::kernels::detail
