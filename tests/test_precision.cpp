// The storage formats against formulas written here from their definitions: every one of the
// 65,536 bit patterns of bf16 and f16 decoded by its sign, exponent and significand fields, and
// float -> bf16/f16 rounding judged by the nearest representable neighbour (ties to the even
// significand, overflow past the largest finite value plus half an ulp to infinity).
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>
#include <catch2/catch.hpp>
import attn.core;

namespace {

struct format {
    int mant_bits, bias, exp_max; // exp_max: the all-ones exponent field
};
constexpr format bf16_fmt{7, 127, 255}, f16_fmt{10, 15, 31};

/// The value of a 16-bit pattern, from its fields (NaN for a NaN pattern).
double decode(std::uint16_t bits, format f) {
    const int sign = bits >> 15, e = (bits >> f.mant_bits) & f.exp_max;
    const std::uint32_t m = bits & ((1u << f.mant_bits) - 1);
    double v;
    if (e == f.exp_max)
        v = m ? std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::infinity();
    else if (e == 0)
        v = std::ldexp(double(m), 1 - f.bias - f.mant_bits);
    else
        v = std::ldexp(1.0 + double(m) / double(1u << f.mant_bits), e - f.bias);
    return sign ? -v : v;
}

template <class T>
std::uint16_t bits_of(T x) {
    std::uint16_t b;
    std::memcpy(&b, &x, 2);
    return b;
}
template <class T>
T from_bits(std::uint16_t b) {
    T x;
    std::memcpy(&x, &b, 2);
    return x;
}

/// The expected rounding of x: nearest of the finite non-negative patterns (ascending by value
/// and by bits), ties to the even pattern; past the largest finite value the next "pattern" is
/// infinity, whose field is even, so the tie at max + ulp/2 goes to infinity as IEEE says.
std::uint16_t expected_round(float x, format f) {
    const std::uint16_t sign = std::signbit(x) ? 0x8000 : 0;
    const double a = std::abs(double(x));
    const std::uint16_t inf_bits = std::uint16_t(f.exp_max << f.mant_bits);
    if (std::isinf(x)) return sign | inf_bits;
    // the finite non-negative patterns are 0 .. inf_bits-1 and their values increase with the bits
    std::uint16_t lo = 0, hi = inf_bits;
    while (hi - lo > 1) { // largest pattern whose value <= a
        const std::uint16_t mid = std::uint16_t((lo + hi) / 2);
        (decode(mid, f) <= a ? lo : hi) = mid;
    }
    const double vlo = decode(lo, f);
    if (vlo == a) return sign | lo;
    const std::uint16_t up = std::uint16_t(lo + 1);
    // the value one step above the largest finite one: 2^(emax_unbiased + 1)
    const double vup = up == inf_bits ? std::ldexp(1.0, f.exp_max - f.bias) : decode(up, f);
    const double dlo = a - vlo, dup = vup - a;
    std::uint16_t r = dlo < dup ? lo : dup < dlo ? up : (lo % 2 == 0 ? lo : up);
    return sign | r;
}

template <class T>
void check_decode_all(format f) {
    for (std::uint32_t b = 0; b < 65536; ++b) {
        const double want = decode(std::uint16_t(b), f);
        const float got = float(from_bits<T>(std::uint16_t(b)));
        INFO("bits 0x" << std::hex << b);
        if (std::isnan(want)) {
            REQUIRE(std::isnan(got));
        } else {
            REQUIRE(double(got) == want);
            REQUIRE(std::signbit(got) == std::signbit(want));
        }
    }
}

/// Floats that probe the rounding: every representable value, the midpoints between neighbours
/// (the ties), one float ulp either side of them, the overflow threshold, and random patterns.
template <class T>
std::vector<float> probes(format f) {
    std::vector<float> xs;
    for (std::uint32_t b = 0; b + 1 < (std::uint32_t(f.exp_max) << f.mant_bits); ++b) {
        const double v0 = decode(std::uint16_t(b), f), v1 = decode(std::uint16_t(b + 1), f);
        const float mid = float((v0 + v1) / 2); // exact: one bit past the format's significand
        REQUIRE(double(mid) == (v0 + v1) / 2);
        for (const float x :
             {float(v0), mid, std::nextafter(mid, 0.0f), std::nextafter(mid, std::numeric_limits<float>::infinity())}) {
            xs.push_back(x);
            xs.push_back(-x);
        }
    }
    const double max = decode(std::uint16_t((f.exp_max << f.mant_bits) - 1), f);
    const double over = max + std::ldexp(1.0, f.exp_max - 1 - f.bias - f.mant_bits); // max + ulp/2
    if (over < double(std::numeric_limits<float>::max())) {
        const float t = float(over);
        xs.insert(xs.end(), {t, std::nextafter(t, 0.0f), std::nextafter(t, 1e38f), -t});
    }
    xs.insert(xs.end(), {0.0f, -0.0f, std::numeric_limits<float>::max(), std::numeric_limits<float>::denorm_min(),
                         std::numeric_limits<float>::min(), 1e-45f, 3.0e38f});
    attn::rng r(15);
    for (int i = 0; i < 200000; ++i) {
        const float x = std::bit_cast<float>(std::uint32_t(r.next()));
        if (!std::isnan(x)) xs.push_back(x);
    }
    return xs;
}

template <class T>
void check_round(format f) {
    for (const float x : probes<T>(f)) {
        const std::uint16_t want = expected_round(x, f), got = bits_of(T(x));
        INFO("x = " << x << " (0x" << std::hex << std::bit_cast<std::uint32_t>(x) << ") want 0x" << want << " got 0x"
                    << got);
        REQUIRE(got == want);
    }
    const float inf = std::numeric_limits<float>::infinity();
    CHECK(bits_of(T(inf)) == std::uint16_t(f.exp_max << f.mant_bits));
    CHECK(bits_of(T(-inf)) == std::uint16_t(0x8000 | (f.exp_max << f.mant_bits)));
    for (const std::uint32_t nan : {0x7fc00000u, 0xffc00000u, 0x7f800001u, 0x7fbfffffu, 0xff800001u}) {
        INFO("NaN pattern 0x" << std::hex << nan);
        CHECK(std::isnan(float(T(std::bit_cast<float>(nan))))); // a signalling NaN stays a NaN
    }
}

} // namespace

TEST_CASE("precision: every bf16 bit pattern widens to the value of its fields", "[precision]") {
    check_decode_all<attn::bf16>(bf16_fmt);
}

TEST_CASE("precision: every f16 bit pattern widens to the value of its fields", "[precision]") {
    check_decode_all<attn::f16>(f16_fmt);
}

TEST_CASE("precision: float -> bf16 rounds to nearest even (ties, subnormals, overflow, NaN)", "[precision]") {
    check_round<attn::bf16>(bf16_fmt);
    // by hand: 1 + 2^-8 is halfway between 1 and 1 + 2^-7: even (1); 1 + 3*2^-8: up to 1 + 2^-6
    CHECK(bits_of(attn::bf16(1.00390625f)) == 0x3f80);
    CHECK(bits_of(attn::bf16(1.01171875f)) == 0x3f82);
    CHECK(bits_of(attn::bf16(1e-40f)) == 0x0001); // a float subnormal rounds to bf16's smallest one
}

TEST_CASE("precision: float -> f16 rounds to nearest even (ties, subnormals, overflow, NaN)", "[precision]") {
    check_round<attn::f16>(f16_fmt);
    CHECK(bits_of(attn::f16(65519.0f)) == 0x7bff);              // below max + ulp/2: 65504
    CHECK(bits_of(attn::f16(65520.0f)) == 0x7c00);              // the tie at max + ulp/2: infinity
    CHECK(bits_of(attn::f16(std::ldexp(1.0f, -25))) == 0x0000); // half the smallest subnormal: even 0
    CHECK(bits_of(attn::f16(std::ldexp(1.5f, -25))) == 0x0001); // above half: 2^-24
    CHECK(bits_of(attn::f16(std::ldexp(3.0f, -25))) == 0x0002); // 1.5 x 2^-24, a tie: even 2 x 2^-24
}

TEST_CASE("precision: double -> bf16/f16 rounds once (never twice through float)", "[precision]") {
    // Hand-computed: bf16 keeps 8 significant bits, so between 1 and 1 + 2^-7 the midpoint is
    // 1 + 2^-8; f16 keeps 11, midpoint 1 + 2^-11. A value just above the midpoint rounds up; through
    // float it would first become the midpoint (float keeps 24 bits, 2^-40 is lost) and then go to
    // the even neighbour 1.
    const double above_bf16 = 1.0 + 0x1.0p-8 + 0x1.0p-40, above_f16 = 1.0 + 0x1.0p-11 + 0x1.0p-40;
    CHECK(float(attn::round_to<attn::bf16>(above_bf16)) == 1.0f + 0x1.0p-7f);
    CHECK(float(attn::round_to<attn::f16>(above_f16)) == 1.0f + 0x1.0p-10f);
    CHECK(float(attn::bf16(float(above_bf16))) == 1.0f); // the double rounding round_to avoids
    CHECK(float(attn::f16(float(above_f16))) == 1.0f);
    // exact ties still go to even: 1 + 2^-8 -> 1, 1 + 3 * 2^-8 -> 1 + 2^-6 (odd 1 + 2^-7 below)
    CHECK(float(attn::round_to<attn::bf16>(1.0 + 0x1.0p-8)) == 1.0f);
    CHECK(float(attn::round_to<attn::bf16>(1.0 + 3 * 0x1.0p-8)) == 1.0f + 0x1.0p-6f);
    CHECK(float(attn::round_to<attn::f16>(1.0 + 0x1.0p-11)) == 1.0f);
    CHECK(float(attn::round_to<attn::f16>(65520.0)) == std::numeric_limits<float>::infinity()); // f16's overflow tie
}

TEST_CASE("precision: names, parsing, bytes and unit roundoff", "[precision]") {
    using attn::precision;
    for (const precision p : attn::all_precisions) CHECK(attn::parse_enum<precision>(attn::enum_name(p)) == p);
    CHECK_THROWS_WITH(attn::parse_enum<precision>("fp8"), "unknown precision 'fp8' (known: f64, f32, bf16, f16, int8)");
    // the unit roundoff is half the distance from 1 to the next value, from the decoded patterns
    CHECK(attn::unit_roundoff(precision::bf16) == (decode(0x3f81, bf16_fmt) - 1.0) / 2);
    CHECK(attn::unit_roundoff(precision::f16) == (decode(0x3c01, f16_fmt) - 1.0) / 2);
    CHECK(attn::unit_roundoff(precision::f32) == double(std::numeric_limits<float>::epsilon()) / 2);
    CHECK(attn::unit_roundoff(precision::f64) == std::numeric_limits<double>::epsilon() / 2);
    CHECK(attn::bytes_per_element(precision::bf16) == sizeof(attn::bf16));
    CHECK(attn::bytes_per_element(precision::f16) == sizeof(attn::f16));
    CHECK(attn::bytes_per_element(precision::f32) == sizeof(float));
    CHECK(attn::bytes_per_element(precision::f64) == sizeof(double));
}
