// attn.core:kv -- the element types a decode step's key/value cache can be stored in, and the
// view a decode core reads it through. The cache's type is a storage type only: queries,
// weights, projections and every accumulation stay fp32; keys and values are rounded (bf16,
// f16: to nearest even) or quantized (int8) once, when their token is appended, and widened
// back to fp32 as the core reads them.
//  - f32:  4 bytes per element, as computed;
//  - bf16: 2 bytes, fp32's exponent with 8 significant bits (unit roundoff 2^-8);
//  - f16:  2 bytes, IEEE half, 11 significant bits (2^-11), range +-65504;
//  - int8: 1 byte, symmetric: each (token, key/value head) row of d_head values x is stored as
//          q = round(x / s) in [-127, 127] with one fp32 scale s = max|x| / 127 (4 bytes per
//          row), read back as q * s; the error is at most s/2 per element, relative to the
//          row's largest value rather than to the element.
module;
#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
export module attn.core:kv;
import :problem;
import :precision;
import :tensor;

export namespace attn {

/// The cache types are storage types (attn.core:names' dtype, dtype.hpp's one list) whose traits
/// say `cache`: f32, bf16, f16, int8.
using kv_dtype = dtype;

/// The storage type as a cache type; throws for f64 (no cache is stored in it).
inline kv_dtype to_kv_dtype(dtype t) {
    require(traits(t).cache,
            "'" + std::string(traits(t).name) + "' is not a key/value cache type (f32, bf16, f16, int8)");
    return t;
}

/// Bytes of one stored element.
inline constexpr std::size_t kv_element_bytes(kv_dtype t) { return traits(t).bytes; }

/// Bytes stored beside each row of d_head elements (int8's fp32 scale).
inline constexpr std::size_t kv_row_extra_bytes(kv_dtype t) { return traits(t).row_extra_bytes; }

/// The C++ type a cache of each kind stores.
template <kv_dtype T>
using kv_storage = std::conditional_t<
    T == kv_dtype::f32, float,
    std::conditional_t<T == kv_dtype::bf16, bf16, std::conditional_t<T == kv_dtype::f16, f16, std::int8_t>>>;

template <class S>
inline constexpr kv_dtype kv_dtype_of = std::is_same_v<S, float>  ? kv_dtype::f32
                                        : std::is_same_v<S, bf16> ? kv_dtype::bf16
                                        : std::is_same_v<S, f16>  ? kv_dtype::f16
                                                                  : kv_dtype::int8;

/// Cached keys or values of type S as [batch, G, L, d_head], and for int8 the scale of every row
/// as [batch, G, L, 1] (scale.data is null for the other types).
template <class S>
struct kv_rows {
    heads_view<const S> data;
    heads_view<const float> scale;

    /// Element t of row (b, g, i) as the core reads it: widened, times the row's scale for int8.
    float at(std::size_t b, std::size_t g, std::size_t i, std::size_t t) const {
        const float x = float(data.row(b, g, i)[t]);
        if constexpr (std::is_same_v<S, std::int8_t>)
            return x * *scale.row(b, g, i);
        else
            return x;
    }
    /// Rows [first, first + count), with their scales.
    kv_rows rows_from(std::size_t first, std::size_t count) const {
        return {data.rows_from(first, count), scale.data ? scale.rows_from(first, count) : scale};
    }
};

/// A decode core's inputs over a cache of type S: q [B, H, 1, d] and out [B, H, 1, d] in fp32.
template <class S>
struct kv_core_io {
    heads_view<const float> q;
    kv_rows<S> k, v;
    heads_view<float> out;
};

/// f(S{}) with S the storage type of t: runs code written once for every cache type.
template <class F>
decltype(auto) with_kv_storage(kv_dtype t, F&& f) {
    switch (t) {
    case kv_dtype::bf16:
        return f(bf16{});
    case kv_dtype::f16:
        return f(f16{});
    case kv_dtype::int8:
        return f(std::int8_t{});
    default:
        return f(float{});
    }
}

/// Quantizes one row of n values to int8 (symmetric: scale max|x| / 127, round to nearest even);
/// returns the scale (0 for a row of zeros, which stores zeros).
inline float quantize_row(const float* x, std::size_t n, std::int8_t* q) {
    double amax = 0;
    for (std::size_t i = 0; i < n; ++i) amax = std::max(amax, double(std::abs(x[i])));
    if (amax == 0) {
        std::fill(q, q + n, std::int8_t(0));
        return 0.0f;
    }
    const double inv = 127.0 / amax;
    for (std::size_t i = 0; i < n; ++i)
        q[i] = std::int8_t(std::clamp(std::nearbyint(double(x[i]) * inv), -127.0, 127.0));
    return float(amax / 127.0);
}

} // namespace attn
