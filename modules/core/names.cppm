// attn.core:names -- the kinds a case is typed by, each an enum with one name table: the mode of
// a run (core, layer, decode), the device it runs on, the storage type of its tensors, the family
// of its attention and the form a family computes it in. Strings exist only where the outside
// world speaks (CLI, JSON, TOML, CSV): enum_name() and parse_enum() read the tables, and nothing
// else spells the names. A table is names_of<E>::entries(), one {value, name, label} row per value
// (the name is what files and flags say, the label what a table shows people: "mha" and "MHA").
// attn.core:precision and :kv add the tables of the compute precision and the cache's type.
// Families are the one open kind: a family registered at run time (attn.families) appends its row.
module;
#include <array>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <ostream>
#include <span>
#include <string>
#include <string_view>
#include <vector>
#include "dtype.hpp" // the one list of storage types, shared with the CUDA backend (plain C++17)
export module attn.core:names;
import :error;

export namespace attn {

template <class E>
struct name_entry {
    E value;
    std::string_view name;  ///< what files, flags and ids say
    std::string_view label; ///< what tables show people
};

/// The name table of kind E: `kind` (what an error calls it) and `entries()`. Specialised per kind.
template <class E>
struct names_of;

/// The value's name; "?" for a value outside the table.
template <class E>
std::string_view enum_name(E e) {
    for (const auto& x : names_of<E>::entries())
        if (x.value == e) return x.name;
    return "?";
}

/// The value's label (what a table shows people).
template <class E>
std::string_view enum_label(E e) {
    for (const auto& x : names_of<E>::entries())
        if (x.value == e) return x.label;
    return "?";
}

/// Every name of kind E, in table order.
template <class E>
std::vector<std::string> enum_names() {
    std::vector<std::string> out;
    for (const auto& x : names_of<E>::entries()) out.emplace_back(x.name);
    return out;
}

/// "core, layer, decode": the names, for messages.
template <class E>
std::string enum_known() {
    std::string s;
    for (const auto& x : names_of<E>::entries()) s += (s.empty() ? "" : ", ") + std::string(x.name);
    return s;
}

/// Every value of kind E, in table order.
template <class E>
std::vector<E> enum_values() {
    std::vector<E> out;
    for (const auto& x : names_of<E>::entries()) out.push_back(x.value);
    return out;
}

/// The value named `s` (its name, or its label); throws attn::error "unknown mode 'x' (known: ...)".
template <class E>
E parse_enum(std::string_view s) {
    for (const auto& x : names_of<E>::entries())
        if (x.name == s || x.label == s) return x.value;
    throw error("unknown " + std::string(names_of<E>::kind) + " '" + std::string(s) + "' (known: " + enum_known<E>() +
                ")");
}

/// Writes a kind's name (what a test's failure message shows).
template <class E>
    requires requires { names_of<E>::kind; }
std::ostream& operator<<(std::ostream& os, E e) {
    return os << enum_name(e);
}

/// Every name of `names` as a value of kind E (parse_enum each).
template <class E>
std::vector<E> parse_enums(const std::vector<std::string>& names) {
    std::vector<E> out;
    for (const auto& n : names) out.push_back(parse_enum<E>(n));
    return out;
}

/// What a run does: the attention core on Q, K, V; the whole layer (projections included); or one
/// decode step over a key/value cache.
enum class mode : std::uint8_t { core, layer, decode };

template <>
struct names_of<mode> {
    static constexpr std::string_view kind = "mode";
    static constexpr std::array<name_entry<mode>, 3> table{
        {{mode::core, "core", "core"}, {mode::layer, "layer", "layer"}, {mode::decode, "decode", "decode"}}};
    static std::span<const name_entry<mode>> entries() { return table; }
};

/// Where a run computes.
enum class device : std::uint8_t { cpu, cuda };

template <>
struct names_of<device> {
    static constexpr std::string_view kind = "device";
    static constexpr std::array<name_entry<device>, 2> table{
        {{device::cpu, "cpu", "CPU"}, {device::cuda, "cuda", "CUDA"}}};
    static std::span<const name_entry<device>> entries() { return table; }
};

/// The storage type a case names (its `precision`): a compute precision for core and layer
/// (attn.core:precision; f64 is the oracle), the key/value cache's type for decode (attn.core:kv;
/// int8 there only). One list with one traits row per type (dtype.hpp: name, bytes, unit roundoff,
/// whether it computes and whether it caches), which `precision` and `kv_dtype` name as well.
using dtype = types::dtype;
using types::dtype_traits;
using types::traits;

template <>
struct names_of<dtype> {
    static constexpr std::string_view kind = "precision";
    static constexpr std::array<name_entry<dtype>, types::dtype_count> table = [] {
        std::array<name_entry<dtype>, types::dtype_count> a{};
        for (std::size_t i = 0; i < types::dtype_count; ++i)
            a[i] = {types::dtype_table[i].value, types::dtype_table[i].name, types::dtype_table[i].label};
        return a;
    }();
    static std::span<const name_entry<dtype>> entries() { return table; }
};

/// Which computation a family's layer runs where it has more than one: MLA's naive form (keys and
/// values decompressed per head and cached) or its absorbed form (the up-projections folded into
/// the query and the output, the latent cached). `none` for a family with one form.
enum class form : std::uint8_t { none, naive, absorb };

template <>
struct names_of<form> {
    static constexpr std::string_view kind = "form";
    static constexpr std::array<name_entry<form>, 3> table{
        {{form::none, "none", "-"}, {form::naive, "naive", "naive"}, {form::absorb, "absorb", "absorbed"}}};
    static std::span<const name_entry<form>> entries() { return table; }
};

/// The attention family. Single-head, MHA, GQA, MQA and the wide counterfactual are one
/// computation with different (heads, kv_heads, d_head), and a case of theirs derives its family
/// from those (family_of in attn.core:problem); later families are named. Open: a family
/// registered at run time (attn.families) gets the next value and a row of the table.
enum class family : std::uint8_t { single_head, mha, gqa, mqa, wide, mla };

/// The families that are one computation told apart by their shape (family_of).
inline constexpr bool derived_family(family f) { return f <= family::wide; }

namespace detail {
inline constexpr std::array<name_entry<family>, 6> builtin_families{
    {{family::single_head, "single-head", "single-head"},
     {family::mha, "mha", "MHA"},
     {family::gqa, "gqa", "GQA"},
     {family::mqa, "mqa", "MQA"},
     {family::wide, "wide", "wide"},
     {family::mla, "mla", "MLA"}}};
struct family_table {
    std::vector<name_entry<family>> rows{builtin_families.begin(), builtin_families.end()};
    std::deque<std::string> text; ///< the registered families' names and labels (stable addresses)
};
inline family_table& families_named() {
    static family_table t;
    return t;
}
} // namespace detail

template <>
struct names_of<family> {
    static constexpr std::string_view kind = "family";
    static std::span<const name_entry<family>> entries() { return detail::families_named().rows; }
};

/// Appends a family's row to the table and returns its value; throws if the name is taken or the
/// table is full. attn.families' register_family is the caller.
inline family add_family_name(const std::string& name, const std::string& label) {
    auto& t = detail::families_named();
    for (const auto& r : t.rows)
        require(r.name != name && r.label != label, "family '" + name + "' (" + label + ") is registered already");
    require(t.rows.size() < 255, "too many families registered (255)");
    t.text.push_back(name);
    const std::string_view n = t.text.back();
    t.text.push_back(label);
    const std::string_view l = t.text.back();
    const family f = family(std::uint8_t(t.rows.size()));
    t.rows.push_back({f, n, l});
    return f;
}

} // namespace attn

export namespace attn::types {
/// Writes a storage type's name (a test's failure message); found by ADL, as dtype lives here.
inline std::ostream& operator<<(std::ostream& os, dtype t) { return os << traits(t).name; }
} // namespace attn::types
