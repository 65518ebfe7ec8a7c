// attn.cases:schema -- the field table: one row per field of the case, saying everything the suite
// does with it: its JSON key (and perf.csv column), the label of its column in a report table, its
// kind and default, the sweep key and flag that list its values, the modes it applies to, and its
// part of the id and of the one-line text. JSON both ways, the id, the text, a sweep's [[perf.grid]]
// keys, attnbench-bench's grid flags, expand(), perf.csv's columns and perf.json's schema all read
// this table, so a new field is one row: for a member of sweep_case, its `bind` below; for a field
// of an experiment's own, register_case_field (kept in the `extra` maps, tested by
// tests/report/throwaway_field.cpp).
module;
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>
#include <nlohmann/json.hpp>
export module attn.cases:schema;
import :types;

export namespace attn {

/// The modes a field applies to (bits): in a mode it does not apply to, a case keeps its default
/// and a grid's list of it is not crossed.
inline constexpr std::uint8_t for_core = 1, for_layer = 2, for_decode = 4, for_all = 7;
inline constexpr std::uint8_t mode_bit_of(mode m) {
    return m == mode::core ? for_core : m == mode::layer ? for_layer : for_decode;
}

/// What a field's values are: a size (a whole number >= 0), a yes/no, a real (a positive finite
/// number), or a name (one of a kind's names: a storage type, a family, a variant ...).
enum class value_kind : std::uint8_t { size, flag, real, name };

/// One field of the case, and everything the suite does with it.
struct case_field {
    std::string name;  ///< its JSON key and perf.csv column ("window")
    std::string label; ///< its column in a report table ("W")
    value_kind kind = value_kind::size;
    nlohmann::json fallback; ///< the default: what a case that leaves it out has
    std::string axis;        ///< the sweep key that lists its values ("seq" for n_q; "": not a sweep key)
    std::string flag;        ///< attnbench-bench's flag that lists them ("--seq"; "": none)
    std::string help;        ///< what the flag and the sweep key mean
    std::int64_t min = 0;    ///< a size: the least value a sweep or a flag may give
    double max = 0;          ///< a size: the largest (0: none); a real: values in (0, max]
    /// A name: the names a sweep may give (empty: every name the kind has; `names` is read when the
    /// flags and keys are read, so a variant registered before then is known).
    std::function<std::vector<std::string>()> names;
    std::uint8_t modes = for_all; ///< the modes it applies to
    std::uint8_t required = 0;    ///< the modes whose case JSON must give it
    bool outer = false;           ///< the provider and the mode: expand's own loops, not a crossed axis
    std::string tag;              ///< a registered field's id part: "-<tag><value>" away from its default

    // Filled by bind() for a member of sweep_case and by register_case_field for an extra one.
    std::function<nlohmann::json(const sweep_case&)> get;        ///< its value as JSON
    std::function<void(sweep_case&, const nlohmann::json&)> put; ///< sets a value of the right kind
    std::function<std::vector<nlohmann::json>(const grid&)> list;
    std::function<void(grid&, const std::vector<nlohmann::json>&)> put_list;
    std::function<std::size_t(const grid&)> count;                   ///< how many values the grid crosses
    std::function<void(sweep_case&, const grid&, std::size_t)> take; ///< the grid's i-th value into a case
    std::function<std::string(const sweep_case&)> id;                ///< its part of the id ("" none)
    std::function<std::string(const sweep_case&)> text;              ///< its part of the text ("" none)
};

namespace detail {

template <class T>
inline constexpr bool is_kind_enum = std::is_enum_v<T>;

template <class T>
constexpr value_kind kind_of() {
    if constexpr (std::is_same_v<T, bool>)
        return value_kind::flag;
    else if constexpr (std::is_same_v<T, double>)
        return value_kind::real;
    else if constexpr (std::is_same_v<T, std::size_t>)
        return value_kind::size;
    else
        return value_kind::name;
}

template <class T>
nlohmann::json to_value(const T& v) {
    if constexpr (is_kind_enum<T>)
        return std::string(enum_name(v));
    else
        return v;
}

template <class T>
T from_value(const nlohmann::json& j) {
    if constexpr (is_kind_enum<T>)
        return parse_enum<T>(j.get<std::string>());
    else
        return j.get<T>();
}

/// A value's text in an id or a line: a name, a whole number, a real at its shortest round trip.
inline std::string value_text(const nlohmann::json& v) {
    if (v.is_string()) return v.get<std::string>();
    if (v.is_boolean()) return v.get<bool>() ? "1" : "0";
    if (v.is_number_float()) {
        char buf[32];
        const auto r = std::to_chars(buf, buf + sizeof buf, v.get<double>());
        return std::string(buf, r.ptr);
    }
    return v.dump();
}

} // namespace detail

/// A row bound to a member of sweep_case and its list in grid (or none: `L` nullptr): get, put,
/// list, count and take read and write them directly, typed (no JSON between a grid and a case).
template <auto M, auto L>
case_field bind(case_field f) {
    using T = std::remove_cvref_t<decltype(std::declval<sweep_case&>().*M)>;
    f.kind = detail::kind_of<T>();
    f.fallback = detail::to_value(sweep_case{}.*M);
    f.get = [](const sweep_case& c) { return detail::to_value(c.*M); };
    f.put = [](sweep_case& c, const nlohmann::json& v) { c.*M = detail::from_value<T>(v); };
    if constexpr (!std::is_same_v<decltype(L), std::nullptr_t>) {
        f.list = [](const grid& g) {
            std::vector<nlohmann::json> out;
            for (const auto& x : g.*L) out.push_back(detail::to_value(T(x)));
            return out;
        };
        f.put_list = [](grid& g, const std::vector<nlohmann::json>& vs) {
            (g.*L).clear();
            for (const auto& v : vs) (g.*L).push_back(detail::from_value<T>(v));
        };
        f.count = [](const grid& g) { return (g.*L).size(); };
        f.take = [](sweep_case& c, const grid& g, std::size_t i) { c.*M = T((g.*L)[i]); };
    }
    return f;
}

/// Every field, in the one order: the id's, the text's, JSON's and perf.csv's. Built-in rows first,
/// then the registered ones.
const std::vector<case_field>& case_schema();

/// The row named `name`; throws attn::error listing the fields otherwise.
const case_field& find_case_field(std::string_view name);

/// The number of built-in rows: every member of sweep_case but `extra` and `grids` (a test holds
/// the member count to it).
std::size_t builtin_case_fields();

/// Adds a field after the built-in ones (an experiment's own axis, a test's throwaway one), kept
/// in `extra` of every case and grid: name, kind, fallback (its default), label and, for a sweep
/// axis, `axis` and `flag`; its id part is "-<tag><value>" and its text " <label>=<value>" away
/// from the default. Call it before anything reads a case (a static initialiser); throws
/// attn::error if the name or a key is taken.
void register_case_field(case_field f);

/// A value of the field's kind from JSON: a non-negative integer for a size (JSON numbers that
/// are not, 1.5 or -1, are refused, never cast), a boolean, a finite number, or one of the names;
/// throws attn::error naming the field and the value.
nlohmann::json checked_value(const case_field& f, const nlohmann::json& v);

/// A value of the field's kind from a flag's or a file's text ("512", "1", "bf16"), held to the
/// field's range; throws attn::error "<where>: '<text>' is not ..." naming the value.
nlohmann::json parse_value(const case_field& f, const std::string& text, const std::string& where);

/// The case with every field the others imply filled in, and held to what it must be: G = H
/// when kv_heads is 0, d_head = d_model / H when 0, the family the shape derives (a named one
/// checked), d_v 0 when it is d_head, for decode n_q = 1 and n_kv = context + 1 over a cache
/// type, otherwise n_kv = n_q when 0 and a compute precision; the magnitude in (0, 1e6], the
/// threads in range and the problem valid. Throws attn::error naming the field.
void finish_case(sweep_case& c);

/// nlohmann's ADL hooks, for json and ordered_json alike: every row's value under its name, the
/// grids the case came from, and where set, the extra fields under theirs.
template <class Json>
void to_json(Json& j, const sweep_case& c) {
    j = Json::object();
    for (const auto& f : case_schema()) j[f.name] = f.get(c);
    j["grids"] = c.grids;
}

/// Reads a case; every field but those a mode requires has a default. Throws attn::error naming
/// the field that is missing or of the wrong type. A case written before the family, form and
/// device existed reads as the family its shape gives, no form, on the CPU.
template <class Json>
void from_json(const Json& j, sweep_case& c) {
    require(j.is_object(), "a case must be a JSON object, not " + std::string(j.type_name()));
    c = sweep_case{};
    const auto& rows = case_schema();
    // the mode first: which fields are required depends on it
    std::optional<family> named;
    for (const auto& f : rows) {
        const auto it = j.find(f.name);
        if (it == j.end()) {
            if (f.name == "mode") require(false, "the case has no field 'mode'");
            if (f.required & mode_bit_of(c.mode)) require(false, "the case has no field '" + f.name + "'");
            f.put(c, f.fallback);
            continue;
        }
        const nlohmann::json v = checked_value(f, nlohmann::json(*it));
        try {
            if (f.name == "family") named = parse_enum<family>(v.get<std::string>());
            f.put(c, v);
        } catch (const error& e) { // a kind's name it does not have
            throw error("the case's field '" + f.name + "': " + e.what());
        }
    }
    if (const auto it = j.find("grids"); it != j.end()) {
        require(it->is_array(), "the case's field 'grids' has the wrong type (" + std::string(it->type_name()) + ")");
        for (const auto& g : *it) {
            require(g.is_string(), "the case's field 'grids' must list names");
            c.grids.push_back(g.template get<std::string>());
        }
    }
    require(!named || *named != family::mla || c.d_head,
            "the case's family mla needs d_head (qk_nope_head_dim + qk_rope_head_dim)");
    finish_case(c);
    require(!named || *named == c.family, "the case's family '" + std::string(enum_name(*named)) +
                                              "' does not match its shape (d_model " + std::to_string(c.d_model) +
                                              ", heads " + std::to_string(c.heads) + ", kv_heads " +
                                              std::to_string(c.kv_heads) + ", d_head " + std::to_string(c.d_head) +
                                              ": " + std::string(enum_name(c.family)) + ")");
}

} // namespace attn
