// attn.sweep:reader -- typed reads of one TOML value for the sweep parser (an internal
// partition): an integer in range, a number of seconds, a string, a list of sizes, names,
// positive numbers or booleans, a table; each refusal one attn::error naming the file, the line
// and the key ("sweep.toml:12: key 'heads' must be an integer, not a string"). It knows no
// sweep key; the schema is experiments/modules/sweep.cpp's.
module;
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <set>
#include <string>
#include <utility>
#include <vector>
#include <toml++/toml.h>
module attn.sweep:reader;
import attn.core;

namespace attn::detail {

const char* type_name(const toml::node& n) {
    switch (n.type()) {
    case toml::node_type::table:
        return "a table";
    case toml::node_type::array:
        return "an array";
    case toml::node_type::string:
        return "a string";
    case toml::node_type::integer:
        return "an integer";
    case toml::node_type::floating_point:
        return "a float";
    case toml::node_type::boolean:
        return "a boolean";
    default:
        return "a date or time";
    }
}

std::string join(const std::vector<std::string>& v) {
    std::string s;
    for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
    return s;
}

/// Reads one sweep file; every error names the file, the line and the key.
class toml_reader {
  public:
    explicit toml_reader(std::string source) : source_(std::move(source)) {}

    /// Line 0 is a key the file does not give: its built-in default is named as such, not as a line.
    [[noreturn]] void fail(std::size_t line, const std::string& key, const std::string& what) const {
        if (!line) throw error(source_ + ": key '" + key + "' (not in the file: its built-in default) " + what);
        throw error(source_ + ":" + std::to_string(line) + ": key '" + key + "' " + what);
    }
    [[noreturn]] void fail(const toml::node& n, const std::string& key, const std::string& what) const {
        fail(n.source().begin.line, key, what);
    }

    /// Refuses keys of `t` not in `known`; `where` names the table ("[perf]").
    void only(const toml::table& t, const std::set<std::string>& known, const std::string& where) const {
        for (auto&& [k, v] : t)
            if (!known.count(std::string(k.str()))) {
                std::vector<std::string> names(known.begin(), known.end());
                fail(k.source().begin.line ? k.source().begin.line : v.source().begin.line, std::string(k.str()),
                     "is unknown in " + where + " (known: " + join(names) + ")");
            }
    }

    std::int64_t integer(const toml::node& n, const std::string& key, std::int64_t min,
                         std::int64_t max = std::numeric_limits<std::int64_t>::max()) const {
        if (!n.is_integer()) fail(n, key, std::string("must be an integer, not ") + type_name(n));
        const std::int64_t v = n.as_integer()->get();
        if (v < min) fail(n, key, "must be >= " + std::to_string(min) + " (got " + std::to_string(v) + ")");
        if (v > max) fail(n, key, "must be <= " + std::to_string(max) + " (got " + std::to_string(v) + ")");
        return v;
    }
    /// An integer stored as int: refused, not narrowed, above INT_MAX.
    int count(const toml::node& n, const std::string& key) const {
        return int(integer(n, key, 1, std::numeric_limits<int>::max()));
    }

    double number(const toml::node& n, const std::string& key) const {
        double v = 0;
        if (n.is_integer())
            v = double(n.as_integer()->get());
        else if (n.is_floating_point())
            v = n.as_floating_point()->get();
        else
            fail(n, key, std::string("must be a number, not ") + type_name(n));
        if (!(v > 0 && v < 1e6)) fail(n, key, "must be a positive number of seconds (got " + std::to_string(v) + ")");
        return v;
    }

    std::string string(const toml::node& n, const std::string& key) const {
        if (!n.is_string()) fail(n, key, std::string("must be a string, not ") + type_name(n));
        return n.as_string()->get();
    }

    /// An integer or a non-empty array of integers, each >= min.
    std::vector<std::size_t> sizes(const toml::node& n, const std::string& key, std::int64_t min) const {
        std::vector<std::size_t> out;
        if (n.is_integer())
            out.push_back(std::size_t(integer(n, key, min)));
        else if (const auto* a = n.as_array()) {
            if (a->empty()) fail(n, key, "must not be an empty array");
            std::set<std::size_t> seen;
            for (const auto& e : *a) {
                if (!e.is_integer())
                    fail(e, key, std::string("must be an array of integers, but holds ") + type_name(e));
                const auto v = std::size_t(integer(e, key, min));
                if (!seen.insert(v).second) fail(e, key, "holds " + std::to_string(v) + " twice");
                out.push_back(v);
            }
        } else
            fail(n, key, std::string("must be an integer or an array of integers, not ") + type_name(n));
        return out;
    }

    /// A string or a non-empty array of strings, each one of `allowed`.
    std::vector<std::string> names(const toml::node& n, const std::string& key, const std::vector<std::string>& allowed,
                                   const std::string& what) const {
        std::vector<const toml::node*> items;
        if (n.is_string())
            items.push_back(&n);
        else if (const auto* a = n.as_array()) {
            if (a->empty()) fail(n, key, "must not be an empty array");
            for (const auto& e : *a) items.push_back(&e);
        } else
            fail(n, key, std::string("must be a string or an array of strings, not ") + type_name(n));
        std::vector<std::string> out;
        for (const auto* e : items) {
            if (!e->is_string()) fail(*e, key, std::string("must be an array of strings, but holds ") + type_name(*e));
            const std::string s = e->as_string()->get();
            if (std::find(allowed.begin(), allowed.end(), s) == allowed.end())
                fail(*e, key, "names unknown " + what + " '" + s + "' (known: " + join(allowed) + ")");
            if (std::find(out.begin(), out.end(), s) != out.end()) fail(*e, key, "names '" + s + "' twice");
            out.push_back(s);
        }
        return out;
    }

    /// A number or a non-empty array of numbers, each in (0, max].
    std::vector<double> positives(const toml::node& n, const std::string& key, double max) const {
        std::vector<const toml::node*> items;
        if (const auto* a = n.as_array()) {
            if (a->empty()) fail(n, key, "must not be an empty array");
            for (const auto& e : *a) items.push_back(&e);
        } else
            items.push_back(&n);
        std::vector<double> out;
        for (const auto* e : items) {
            if (!e->is_integer() && !e->is_floating_point())
                fail(*e, key, std::string("must be a number or an array of numbers, not ") + type_name(*e));
            const double v = e->is_integer() ? double(e->as_integer()->get()) : e->as_floating_point()->get();
            if (!(v > 0 && v <= max))
                fail(*e, key, "must be in (0, " + std::to_string(int(max)) + "] (got " + std::to_string(v) + ")");
            out.push_back(v);
        }
        return out;
    }

    std::vector<bool> booleans(const toml::node& n, const std::string& key) const {
        std::vector<bool> out;
        if (n.is_boolean())
            out.push_back(n.as_boolean()->get());
        else if (const auto* a = n.as_array()) {
            if (a->empty()) fail(n, key, "must not be an empty array");
            for (const auto& e : *a) {
                if (!e.is_boolean())
                    fail(e, key, std::string("must be an array of booleans, but holds ") + type_name(e));
                out.push_back(e.as_boolean()->get());
            }
        } else
            fail(n, key, std::string("must be a boolean or an array of booleans, not ") + type_name(n));
        return out;
    }

    const toml::table& table(const toml::node& n, const std::string& key) const {
        if (!n.is_table()) fail(n, key, std::string("must be a table, not ") + type_name(n));
        return *n.as_table();
    }

  private:
    std::string source_;
};

} // namespace attn::detail
