// The metadata block and atomic writes of the report-style subcommands (see output.hpp).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>
#include "commands.hpp"
#include "output.hpp"
import attn.core;
import attn.results;

namespace attn::cli {

nlohmann::json metadata(const std::string& command, std::uint64_t seed, int threads) {
    run_info run;
    run.seed = seed;
    run.threads = threads;
    nlohmann::json j = {{"tool", "attnbench"}, {"command", command}};
    for (const auto& [key, value] : collect_metadata(run)) j[key] = value;
    return j;
}

std::string rows_csv(const nlohmann::ordered_json& rows, std::vector<std::string> keys) {
    if (keys.empty())
        for (const auto& r : rows)
            for (const auto& [k, v] : r.items())
                if (std::find(keys.begin(), keys.end(), k) == keys.end()) keys.push_back(k);
    text_table t(keys);
    for (const auto& r : rows) {
        std::vector<std::string> cells;
        for (const auto& k : keys) {
            const auto it = r.find(k);
            if (it == r.end() || it->is_null())
                cells.push_back("");
            else if (it->is_string())
                cells.push_back(it->get<std::string>());
            else
                cells.push_back(it->dump());
        }
        t.add_row(cells);
    }
    return t.csv();
}

namespace {
template <class F>
CLI::Validator path_rule(F check, const char* what) {
    return CLI::Validator(
        [check](std::string& s) -> std::string {
            try {
                check(s);
                return {};
            } catch (const error& e) {
                return e.what();
            }
        },
        what);
}
} // namespace

CLI::Validator output_dir() {
    return path_rule([](const std::string& s) { check_output_dir(s); }, "DIR");
}
CLI::Validator output_file() {
    return path_rule([](const std::string& s) { check_output_file(s); }, "FILE");
}

CLI::Validator finite_in(double lo, double hi) {
    auto g = [](double x) {
        char b[32];
        std::snprintf(b, sizeof b, "%g", x);
        return std::string(b);
    };
    return CLI::Validator(
        [lo, hi, g](std::string& s) -> std::string {
            double v = 0;
            std::size_t used = 0;
            try {
                v = std::stod(s, &used);
            } catch (const std::exception&) {
                return "'" + s + "' is not a number";
            }
            if (used != s.size() || !std::isfinite(v) || v < lo || v > hi)
                return "'" + s + "' must be a finite number in [" + g(lo) + ", " + g(hi) + "]";
            return {};
        },
        "FINITE in [" + g(lo) + ", " + g(hi) + "]");
}

CLI::Validator threads_in(bool zero_ok) {
    return CLI::Validator(
        [zero_ok](std::string& s) -> std::string {
            std::size_t t = 0, used = 0;
            try {
                if (s.empty() || s[0] == '-' || s[0] == '+') throw std::invalid_argument(s);
                t = std::stoull(s, &used);
            } catch (const std::exception&) {
                return "'" + s + "' is not a whole number";
            }
            if (used != s.size()) return "'" + s + "' is not a whole number";
            try {
                check_threads(t, "value", zero_ok);
            } catch (const error& e) {
                return e.what();
            }
            return {};
        },
        zero_ok ? "THREADS (0: all)" : "THREADS");
}

std::string write_atomic(const std::string& dir, const std::string& name, const std::string& content) {
    const std::string path = (std::filesystem::path(dir) / name).string();
    attn::write_atomic(path, content);
    return path;
}

} // namespace attn::cli
