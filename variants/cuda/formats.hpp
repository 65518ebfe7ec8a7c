// attn::cuda::formats -- the host's rounding of fp32 to the 16-bit storage formats and back, as bit
// patterns (the device types __nv_bfloat16 and __half hold the same bits). Round to nearest, ties
// to even; NaN stays a NaN, overflow goes to infinity; f16 keeps its subnormals. Plain C++17, so the
// tests and the host side of the CUDA sources share it; int8 quantization as attn.core:kv does it.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace attn::cuda::formats {

inline std::uint32_t bits_of(float x) {
    std::uint32_t u;
    std::memcpy(&u, &x, sizeof u);
    return u;
}

inline float float_of(std::uint32_t u) {
    float x;
    std::memcpy(&x, &u, sizeof x);
    return x;
}

/// fp32 -> bf16 bits: the upper half, rounded to nearest even on the dropped 16 bits.
inline std::uint16_t to_bf16(float x) {
    const std::uint32_t u = bits_of(x);
    if ((u & 0x7fffffffu) > 0x7f800000u) return std::uint16_t((u >> 16) | 0x0040u); // quiet NaN
    return std::uint16_t((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);                   // carries into the exponent
}

inline float from_bf16(std::uint16_t h) { return float_of(std::uint32_t(h) << 16); }

/// fp32 -> IEEE binary16 bits.
inline std::uint16_t to_f16(float x) {
    const std::uint32_t u = bits_of(x);
    const std::uint32_t sign = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return std::uint16_t(sign | 0x7e00u);  // NaN
    if (a >= 0x477ff000u) return std::uint16_t(sign | 0x7c00u); // >= 65520 (and inf): infinity
    if (a < 0x38800000u) {                                      // below 2^-14: a multiple of 2^-24
        // |x| * 2^24 is exact (a power-of-two scaling), nearbyint rounds it to nearest even
        const float m = std::nearbyint(float_of(a) * 16777216.0f);
        return std::uint16_t(sign | std::uint32_t(m)); // 1024 is the smallest normal's pattern
    }
    const std::uint32_t mant = a & 0x7fffffu, rest = mant & 0x1fffu;
    std::uint32_t h = (((a >> 23) - 112u) << 10) | (mant >> 13); // exponent rebiased 127 -> 15
    if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;    // carries into the exponent
    return std::uint16_t(sign | h);
}

inline float from_f16(std::uint16_t h) {
    const std::uint32_t sign = std::uint32_t(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    if (e == 0) return (sign ? -1.0f : 1.0f) * float(m) * 5.9604644775390625e-8f; // m * 2^-24
    if (e == 31) return float_of(sign | 0x7f800000u | (m << 13));
    return float_of(sign | ((e + 112u) << 23) | (m << 13));
}

/// x rounded to the format and widened back: the value a bf16 or f16 buffer holds for x.
inline float round_bf16(float x) { return from_bf16(to_bf16(x)); }
inline float round_f16(float x) { return from_f16(to_f16(x)); }

/// One row of n values quantized to int8 as attn.core:kv does (symmetric, scale max|x| / 127,
/// q = round(x / scale) to nearest even, clamped to [-127, 127]); returns the scale (0 for zeros).
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

} // namespace attn::cuda::formats
