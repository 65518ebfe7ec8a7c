// attn.families:latent_ops -- MLA's building blocks below the layer (attn.families:mla composes
// them): its weight set's tensor names, RMSNorm and the rotary embedding as DeepSeek's reference
// code computes them (inference/model.py), the semantics a test may change to build a mutant, and
// a block copy.
module;
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <utility>
export module attn.families:latent_ops;
import attn.core;

export namespace attn {

/// MLA's tensors, in its weight set's order; uk_t is the derived W^UK transposed per head.
namespace latent_w {
enum tensor : std::size_t { wq, wq_a, q_norm, wq_b, wkv_a, kv_norm, wkv_b, wo, uk_t, count };
}

/// RMSNorm's epsilon and the rotary embedding's base (DeepSeek's reference code).
inline constexpr double rms_eps = 1e-6, rope_base = 10000.0;

/// The angle of rotary pair i of a d_h^R-wide rope part at position pos: pos 10000^(-2i/d_h^R).
inline double rope_angle(long long pos, std::size_t i, std::size_t rope) {
    return double(pos) * std::pow(rope_base, -2.0 * double(i) / double(rope));
}

/// What the family's stages fix that a test may change to build a mutant (the checker must reject
/// each): the columns of rotary pair i, whether the latents are normalised, and the position a key
/// is rotated at (its own).
struct latent_semantics {
    static std::pair<std::size_t, std::size_t> pair(std::size_t i, std::size_t /*rope*/) { return {2 * i, 2 * i + 1}; }
    static constexpr bool normalise = true;
    static long long key_position(long long own, long long /*last_query*/) { return own; }
};

namespace detail {

/// RMSNorm of `rows` rows of n (x row stride ldx, y row stride ldy; y may be x), in the compute
/// type: n squares and n-1 adds, the mean, + eps, sqrt, the reciprocal, then (x * 1/r) * w
/// (attn.count's count_rmsnorm counts exactly these).
template <class T>
void rmsnorm_rows(const T* x, std::size_t ldx, const T* w, T* y, std::size_t ldy, std::size_t rows, std::size_t n) {
    using A = compute_t<T>;
    using std::sqrt;
    for (std::size_t r = 0; r < rows; ++r) {
        const T* xr = x + r * ldx;
        A ss = A(xr[0]) * A(xr[0]);
        for (std::size_t i = 1; i < n; ++i) ss = ss + A(xr[i]) * A(xr[i]);
        const A inv = A(1.0) / sqrt(ss / A(double(n)) + A(rms_eps));
        for (std::size_t i = 0; i < n; ++i) y[r * ldy + i] = T((A(xr[i]) * inv) * A(w[i]));
    }
}

/// Rotates the rope part [c0, c0 + rope) of `heads` heads (head_stride apart) of each row (row
/// stride ld) in place, row r at position pos(r); the cosines and sines are computed in double and
/// rounded once to the compute type (not counted: a table of positions).
template <class T, class S, class Pos>
void rope_rows(T* x, std::size_t ld, std::size_t rows, std::size_t heads, std::size_t head_stride, std::size_t c0,
               std::size_t rope, Pos pos) {
    using A = compute_t<T>;
    for (std::size_t r = 0; r < rows; ++r)
        for (std::size_t i = 0; i < rope / 2; ++i) {
            const double th = rope_angle(pos(r), i, rope);
            const A c = A(std::cos(th)), s = A(std::sin(th));
            const auto [ia, ib] = S::pair(i, rope);
            for (std::size_t h = 0; h < heads; ++h) {
                T* px = x + r * ld + h * head_stride + c0;
                const A a = A(px[ia]), b = A(px[ib]);
                px[ia] = T(a * c - b * s);
                px[ib] = T(a * s + b * c);
            }
        }
}

/// Copies `cols` columns of `rows` rows (strides ldx, ldy).
template <class T>
void copy_block(const T* x, std::size_t ldx, T* y, std::size_t ldy, std::size_t rows, std::size_t cols) {
    for (std::size_t r = 0; r < rows; ++r) std::copy_n(x + r * ldx, cols, y + r * ldy);
}

} // namespace detail

} // namespace attn
