// attn.cases' values: the checks of a value of each kind (checked_value, parse_value), and what
// the field table's rows compose (schema.cpp has the rows): the id, the text, the run group and
// finish_case, the one place a case's implied fields are filled in.
module;
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <string>
#include <vector>
#include <nlohmann/json.hpp>
module attn.cases;

namespace attn {

namespace {

using json = nlohmann::json;
using std::to_string;

std::string kind_text(value_kind k) {
    return k == value_kind::size   ? "a whole number >= 0"
           : k == value_kind::flag ? "true or false"
           : k == value_kind::real ? "a finite number"
                                   : "a name";
}

} // namespace

json checked_value(const case_field& f, const json& v) {
    const auto wrong = [&](const std::string& what) {
        return error("the case's field '" + f.name + "' must be " + what + ", not " + v.dump());
    };
    switch (f.kind) {
    case value_kind::size:
        // nlohmann converts any number to an integer with a plain cast: -1 would wrap and 1e300 is
        // undefined behaviour. A size must be a non-negative JSON integer.
        if (!v.is_number_integer() || (!v.is_number_unsigned() && v.get<std::int64_t>() < 0))
            throw wrong("a non-negative integer");
        return json(v.get<std::uint64_t>());
    case value_kind::flag:
        if (!v.is_boolean()) throw wrong("true or false");
        return v;
    case value_kind::real:
        if (!v.is_number() || !std::isfinite(v.get<double>())) throw wrong("a finite number");
        return json(v.get<double>());
    case value_kind::name:
        if (!v.is_string()) throw error("the case's field '" + f.name + "' has the wrong type (" + v.type_name() + ")");
        return v;
    }
    return v;
}

json parse_value(const case_field& f, const std::string& s, const std::string& where) {
    const auto bad = [&](const std::string& what) { return error(where + ": '" + s + "' is not " + what); };
    switch (f.kind) {
    case value_kind::size: {
        const std::string what = "a whole number >= " + to_string(f.min);
        if (s.empty() || s.find_first_not_of("0123456789") != std::string::npos) throw bad(what);
        if (s.size() > 1 && s[0] == '0') throw bad(what + " (no leading zeros: 010 would be read as 8)");
        std::uint64_t v = 0;
        const auto r = std::from_chars(s.data(), s.data() + s.size(), v);
        if (r.ec != std::errc()) throw bad(what + " that fits in 64 bits");
        if (std::int64_t(std::min<std::uint64_t>(v, std::uint64_t(std::numeric_limits<std::int64_t>::max()))) < f.min)
            throw bad(what);
        if (f.max > 0 && double(v) > f.max)
            throw error(where + " " + s + " is out of range: at most " + to_string(std::uint64_t(f.max)) + " (" +
                        f.help + ")");
        return json(v);
    }
    case value_kind::flag:
        if (s == "1" || s == "true") return json(true);
        if (s == "0" || s == "false") return json(false);
        throw bad("0, 1, true or false");
    case value_kind::real: {
        char* end = nullptr;
        const double v = s.empty() ? 0.0 : std::strtod(s.c_str(), &end);
        if (s.empty() || end != s.c_str() + s.size() || s.find_first_of("xX \t") != std::string::npos)
            throw bad("a number");
        if (!std::isfinite(v) || !(v > 0) || (f.max > 0 && v > f.max))
            throw bad("a finite number in (0, " + detail::value_text(json(f.max)) + "]");
        return json(v);
    }
    case value_kind::name: {
        const auto known = f.names ? f.names() : std::vector<std::string>{};
        if (std::find(known.begin(), known.end(), s) != known.end()) return json(s);
        std::string list;
        for (const auto& k : known) list += (list.empty() ? "" : ", ") + k;
        throw error(where + ": '" + s + "' is not one of " + list);
    }
    }
    throw bad(kind_text(f.kind));
}

std::string sweep_case::id() const {
    std::string s;
    for (const auto& f : case_schema()) s += f.id(*this);
    return s;
}

std::string sweep_case::text() const {
    // the provider first ("simd core d_model=512 ..."), then every other row's part in order
    std::string s = find_case_field("variant").text(*this);
    for (const auto& f : case_schema())
        if (f.name != "variant") s += f.text(*this);
    return s;
}

std::string sweep_case::magnitude_text() const {
    char buf[32];
    const auto r = std::to_chars(buf, buf + sizeof buf, magnitude);
    return std::string(buf, r.ptr);
}

std::string sweep_case::run_group() const {
    if (!decode()) return id();
    sweep_case key = *this;
    key.kv_heads = 0;
    key.family = attn::family::mha;
    key.form = attn::form::none;
    key.d_head = key.d_v = key.kv_lora_rank = key.q_lora_rank = key.qk_rope_head_dim = 0;
    if (window) key.context = key.n_kv = 0; // a rolling buffer's steps: one run over every L
    key.grids.clear();
    return "decode:" + nlohmann::json(key).dump();
}

void finish_case(sweep_case& c) {
    if (!c.kv_heads) c.kv_heads = c.heads;
    check_threads(c.threads, "the case's threads");
    require(std::isfinite(c.magnitude) && c.magnitude > 0 && c.magnitude <= 1e6,
            "the case's magnitude " + std::to_string(c.magnitude) + " is not in (0, 1e6]");
    require(c.heads > 0 && (c.d_head || c.d_model % c.heads == 0), "the case's heads " + std::to_string(c.heads) +
                                                                       " does not divide d_model " +
                                                                       std::to_string(c.d_model) + " (give d_head)");
    if (!c.d_head) c.d_head = c.d_model / c.heads;
    if (derived_family(c.family)) c.family = family_of(c.d_model, c.heads, c.kv_heads, c.d_head);
    if (c.d_v == c.d_head) c.d_v = 0; // one spelling: 0 when the value head is the query/key head
    if (c.decode()) {
        require(c.context < std::numeric_limits<std::size_t>::max(),
                "the case's context " + std::to_string(c.context) + " is too large");
        c.n_q = 1;
        c.n_kv = c.context + 1;
        c.causal = false;
        to_kv_dtype(c.precision); // the cache's type: f32, bf16, f16 or int8
    } else {
        if (!c.n_kv) c.n_kv = c.n_q;
        c.context = 0;
        to_precision(c.precision); // the storage type: f64, f32, bf16 or f16
    }
    c.shape().validate();
}

} // namespace attn
