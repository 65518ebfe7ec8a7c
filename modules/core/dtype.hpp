// attn::types::dtype -- the one list of storage types, and one traits row per type. A plain
// C++17 header with no module, no macro and no CUDA: attn.core (its global module fragment) and
// the CUDA backend (variants/cuda/api.hpp, which nvcc compiles) include this same file, so a
// type's name, size and rounding are written here once and read everywhere: the core's
// precisions and cache types, the kernels, the counts and the device side.
//  - f64 is the oracle's; f32 the default; bf16 and f16 are 16-bit storage formats whose
//    arithmetic is fp32 (compute types and cache types alike);
//  - int8 is a key/value cache type only: each cached row of d values is stored as round(x / s)
//    in [-127, 127] with one fp32 scale s = max|x| / 127 beside it (4 bytes a row), so its
//    rounding error is relative to the row's largest value; its unit roundoff here is half a
//    step of that grid, 1/254, what a tolerance multiplies by the row's largest magnitude.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace attn::types {

enum class dtype : std::uint8_t { f64, f32, bf16, f16, int8 };

struct dtype_traits {
    dtype value;
    std::string_view name;       ///< what files, flags and ids say
    std::string_view label;      ///< what tables show people
    std::size_t bytes;           ///< one stored element
    double unit_roundoff;        ///< u = 2^-t for a t-bit significand (int8: half a step of the row's grid)
    bool compute;                ///< a precision core and layer cases compute in (not int8)
    bool cache;                  ///< a type a decode step's key/value cache may be stored in (not f64)
    std::size_t row_extra_bytes; ///< bytes stored beside each cached row (int8's fp32 scale)
};

inline constexpr dtype_traits dtype_table[] = {
    {dtype::f64, "f64", "fp64", 8, 0x1.0p-53, true, false, 0},
    {dtype::f32, "f32", "fp32", 4, 0x1.0p-24, true, true, 0},
    {dtype::bf16, "bf16", "bf16", 2, 0x1.0p-8, true, true, 0},
    {dtype::f16, "f16", "fp16", 2, 0x1.0p-11, true, true, 0},
    {dtype::int8, "int8", "int8", 1, 1.0 / 254.0, false, true, 4},
};

inline constexpr std::size_t dtype_count = sizeof(dtype_table) / sizeof(dtype_table[0]);

/// The row of `t` (the table is in the enum's order: checked below).
constexpr const dtype_traits& traits(dtype t) { return dtype_table[static_cast<std::size_t>(t)]; }

namespace detail {
constexpr bool dtype_table_in_order() {
    for (std::size_t i = 0; i < dtype_count; ++i)
        if (static_cast<std::size_t>(dtype_table[i].value) != i) return false;
    return true;
}
static_assert(dtype_table_in_order(), "dtype_table lists the types in their enum's order");
} // namespace detail

} // namespace attn::types
