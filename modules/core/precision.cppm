// attn.core:precision -- the number formats a run stores its tensors in, and what each costs.
// f64 is the oracle, f32 the default; bf16 (8-bit exponent, 8-bit significand) and f16 (IEEE
// binary16: 5-bit exponent, 11-bit significand) are storage formats: inputs, weights, projected
// Q/K/V and outputs are held in them, while products and the softmax accumulate in fp32.
//
// The storage types are clang's builtin __bf16 and _Float16. Widening to float is exact (bf16: a
// 16-bit shift; f16: vcvtph2ps with F16C). Narrowing rounds to nearest, ties to even, keeps NaN a
// NaN and overflows to infinity: f16 through vcvtps2ph, bf16 through the compiler runtime's
// __truncsfbf2 (compiler-rt; Debian 12's libgcc 12 lacks it, so the build links clang's builtins
// archive for that one symbol). tests/test_precision.cpp holds both against bit-level formulas
// over every 16-bit pattern.
module;
#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
export module attn.core:precision;
import :error;
import :names;

export namespace attn {

using bf16 = __bf16;
using f16 = _Float16;

/// The compute precisions are storage types (attn.core:names' dtype, dtype.hpp's one list) whose
/// traits say `compute`: f64, f32, bf16, f16.
using precision = dtype;

inline constexpr precision all_precisions[] = {precision::f64, precision::f32, precision::bf16, precision::f16};

/// The storage type as a compute precision; throws for int8 (a cache type only).
inline precision to_precision(dtype t) {
    require(traits(t).compute, "precision '" + std::string(traits(t).name) +
                                   "' is a key/value cache type: it applies to mode 'decode' only");
    return t;
}

/// Bytes one stored element takes.
inline constexpr std::size_t bytes_per_element(dtype t) { return traits(t).bytes; }

/// Unit roundoff u = 2^-t of rounding to nearest with a t-bit significand: 2^-53, 2^-24, 2^-8, 2^-11.
inline constexpr double unit_roundoff(dtype t) { return traits(t).unit_roundoff; }

/// The precision whose storage type is T.
template <class T>
inline constexpr precision precision_of = std::is_same_v<T, double>  ? precision::f64
                                          : std::is_same_v<T, float> ? precision::f32
                                          : std::is_same_v<T, bf16>  ? precision::bf16
                                                                     : precision::f16;

/// x rounded once to T, to nearest with ties to even: a direct double -> T conversion (compiler-rt's
/// __truncdfbf2 and __truncdfhf2 for the 16-bit formats). Never through float, which rounds twice:
/// 1 + 2^-8 + 2^-40 is nearer 1 + 2^-7 than 1 in bf16, but float rounds it to the tie 1 + 2^-8 first,
/// and the tie then goes to the even 1.
template <class T>
inline T round_to(double x) {
    return static_cast<T>(x);
}

/// True for the 16-bit storage formats, whose arithmetic is done in fp32.
template <class T>
inline constexpr bool is_half = std::is_same_v<T, bf16> || std::is_same_v<T, f16>;

/// The type arithmetic on stored T is done in: fp32 for the 16-bit formats, T otherwise.
template <class T>
using compute_t = std::conditional_t<is_half<T>, float, T>;

} // namespace attn
