// attnbench-bench's grid flags, made from the field table (attn.cases:schema): one flag per row
// that names one (--seq, --window, --precision, ...), each a comma-separated list of the field's
// values, read by the field's kind and range (attn::parse_value) into the grid the harness expands.
// A field registered at run time with a flag gets it here with no other edit. It imports
// attn.cases after its own #includes: include it after every other header.
#pragma once
#include <map>
#include <string>
#include <vector>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
import attn.cases;

namespace attn::cli {

/// The texts each grid flag was given, by field name.
struct case_flags {
    std::map<std::string, std::vector<std::string>> given;
};

/// Adds a flag for every row that has one; the help shows `defaults`' list. A size or real flag is
/// typed UINT or FLOAT, so strict_values (numbers.hpp) holds its text to the number rule; a name
/// flag is one of the field's names, but the provider's, which select_variants reads (it takes
/// selectors and names and says which are known).
inline void add_case_flags(CLI::App& app, case_flags& cf, const grid& defaults) {
    for (const auto& f : case_schema()) {
        if (f.flag.empty()) continue;
        std::string shown;
        for (const auto& v : f.list(defaults)) shown += (shown.empty() ? "" : ",") + detail::value_text(v);
        CLI::Option* opt = app.add_option(f.flag, cf.given[f.name], f.help)->delimiter(',')->default_str(shown);
        if (f.kind == value_kind::size) opt->type_name("UINT");
        if (f.kind == value_kind::real) opt->type_name("FLOAT");
        if (f.kind == value_kind::flag) opt->check(CLI::IsMember({"0", "1"}));
        if (f.kind == value_kind::name && f.name != "variant") opt->check(CLI::IsMember(f.names()));
    }
}

/// `g` with each given list in place of its own, each value read by its field's kind (one line
/// naming the flag and the value otherwise).
inline void apply_case_flags(const case_flags& cf, grid& g) {
    for (const auto& f : case_schema()) {
        const auto it = cf.given.find(f.name);
        if (it == cf.given.end() || it->second.empty()) continue;
        std::vector<nlohmann::json> values;
        for (const auto& t : it->second)
            values.push_back(f.name == "variant" ? nlohmann::json(t) : parse_value(f, t, f.flag));
        f.put_list(g, values);
    }
}

} // namespace attn::cli
