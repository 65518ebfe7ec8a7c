// The rule for flag values, shared by attnbench and attnbench-bench: a value is never empty, and
// a number is written in decimal and means exactly what it says, or it is refused with one line
// naming it. CLI11 alone reads "" as 0 (or as "use the default" for a text flag), "-1" for an
// unsigned flag as 2^64 - 1, "99999999999999999999" as 2^64 - 1, "010" as 8 (octal) and "0x10"
// as 16, and lets "nan" and "inf" through a float flag.
#pragma once
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <string>
#include <CLI/CLI.hpp>

namespace attn::cli {

/// "" when `s` is a number of the kind CLI11 names `type` ("UINT", "INT", "FLOAT"), else why not.
inline std::string number_problem(const std::string& s, const std::string& type) {
    const auto bad = [&](const std::string& what) { return "'" + s + "' is not " + what; };
    if (type == "FLOAT") {
        char* end = nullptr;
        errno = 0;
        const double v = s.empty() ? 0.0 : std::strtod(s.c_str(), &end);
        if (s.empty() || end != s.c_str() + s.size() || std::isspace(static_cast<unsigned char>(s[0])) ||
            s.find_first_of("xX") != std::string::npos) // strtod reads hexadecimal floats too
            return bad("a number");
        if (!std::isfinite(v) || errno == ERANGE) return bad("a finite number");
        return {};
    }
    const bool is_signed = type == "INT";
    const std::size_t digits = is_signed && !s.empty() && s[0] == '-' ? 1 : 0;
    const std::string what = is_signed ? "a whole number" : "a whole number >= 0";
    if (s.size() == digits || s.find_first_not_of("0123456789", digits) != std::string::npos) return bad(what);
    if (s.size() > digits + 1 && s[digits] == '0') return bad(what + " (no leading zeros: 010 would be read as 8)");
    errno = 0;
    if (is_signed)
        (void)std::strtoll(s.c_str(), nullptr, 10);
    else
        (void)std::strtoull(s.c_str(), nullptr, 10);
    if (errno == ERANGE) return bad(what + " that fits in 64 bits");
    return {};
}

/// A sliding-window flag: a whole number of keys in [0, max] (0: no window; the callers pass
/// attn::max_window), one line naming the value otherwise.
inline CLI::Validator window_in(unsigned long long max) {
    return CLI::Validator(
        [max](std::string& s) -> std::string {
            const bool digits = !s.empty() && s.size() <= 20 && s.find_first_not_of("0123456789") == std::string::npos;
            if (!digits) return "window '" + s + "' is not a whole number of keys";
            if (s.size() > 19 || std::stoull(s) > max)
                return "window " + s + " is absurd: at most " + std::to_string(max) + " keys (2^32; 0: none)";
            return {};
        },
        "KEYS");
}

/// Adds the rule to every option of `app` and its subcommands that takes a value: not empty, and
/// for UINT, INT and FLOAT options a decimal number (each item of a list flag on its own).
inline void strict_values(CLI::App& app) {
    for (CLI::Option* opt : app.get_options()) {
        if (opt->get_type_size() == 0) continue; // a flag: no value
        const std::string full = opt->get_type_name();
        const std::string type = full.substr(0, full.find(':'));
        opt->check(CLI::Validator(
            [type](std::string& s) -> std::string {
                if (type == "UINT" || type == "INT" || type == "FLOAT") return number_problem(s, type);
                return s.empty() ? "the value is empty" : "";
            },
            ""));
    }
    for (CLI::App* sub : app.get_subcommands({})) strict_values(*sub);
}

} // namespace attn::cli
