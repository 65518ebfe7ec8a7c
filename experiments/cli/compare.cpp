// attnbench compare A.json B.json: per case, the median time of each run, their ratio, and a
// Mann-Whitney U p-value over the repetitions, so a claimed speed-up is a tested one. Reads
// Google Benchmark JSON (attnbench-bench --benchmark_out=F, ideally with
// --benchmark_repetitions=N); cases are matched by name.
#include <cstdio>
#include <fstream>
#include <map>
#include <string>
#include <vector>
#include <nlohmann/json.hpp>
#include "commands.hpp"
import attn.core;
import attn.stats;

namespace attn::cli {
namespace {

/// run name -> per-iteration real times (in the file's time unit, normalised to ms)
std::map<std::string, std::vector<double>> load_times(const std::string& path) {
    std::ifstream f(path);
    require(bool(f), path + ": cannot read");
    nlohmann::json j;
    try {
        j = nlohmann::json::parse(f);
    } catch (const std::exception& e) {
        throw error(path + ": not JSON (" + std::string(e.what()) + ")");
    }
    require(j.contains("benchmarks") && j["benchmarks"].is_array(), path + ": no \"benchmarks\" array (not Google Benchmark JSON)");
    const std::map<std::string, double> to_ms{{"ns", 1e-6}, {"us", 1e-3}, {"ms", 1.0}, {"s", 1e3}};
    std::map<std::string, std::vector<double>> t;
    for (const auto& b : j["benchmarks"]) {
        if (b.value("run_type", "iteration") != "iteration" || b.value("error_occurred", false)) continue;
        const std::string unit = b.value("time_unit", "ns");
        require(to_ms.count(unit) == 1, path + ": unknown time_unit '" + unit + "'");
        t[b.value("run_name", b.value("name", ""))].push_back(b.value("real_time", 0.0) * to_ms.at(unit));
    }
    require(!t.empty(), path + ": holds no successful benchmark");
    return t;
}

void compare(const std::string& a_path, const std::string& b_path, double alpha) {
    const auto a = load_times(a_path), b = load_times(b_path);
    std::printf("%-52s %12s %12s %8s %10s  %s\n", "case", "A median ms", "B median ms", "B/A", "p (U test)", "verdict");
    std::size_t matched = 0;
    for (const auto& [name, ta] : a) {
        const auto it = b.find(name);
        if (it == b.end()) continue;
        ++matched;
        const double ma = stats::median(ta), mb = stats::median(it->second);
        const auto u = stats::mann_whitney_u(ta, it->second);
        std::string verdict = "no significant difference";
        if (ta.size() < 2 || it->second.size() < 2) verdict = "one repetition: run with --benchmark_repetitions";
        else if (u.p < alpha) verdict = mb < ma ? "B faster" : "B slower";
        std::printf("%-52s %12.3f %12.3f %8.3f %10.2g  %s (n=%zu,%zu%s)\n", name.c_str(), ma, mb, mb / ma, u.p,
                    verdict.c_str(), ta.size(), it->second.size(), u.exact ? ", exact" : "");
    }
    require(matched > 0, "no case appears in both " + a_path + " and " + b_path);
    std::printf("\nB/A < 1: B takes less time. p: two-sided Mann-Whitney U over repetitions; significant below %.2g.\n", alpha);
}

} // namespace

void add_compare(CLI::App& app) {
    auto a = std::make_shared<std::string>(), b = std::make_shared<std::string>();
    auto alpha = std::make_shared<double>(0.05);
    auto* cmd = app.add_subcommand("compare", "compare two attnbench-bench JSON files case by case");
    cmd->add_option("A", *a, "baseline JSON")->required();
    cmd->add_option("B", *b, "candidate JSON")->required();
    cmd->add_option("--alpha", *alpha, "significance level")->check(CLI::Range(0.0, 1.0))->capture_default_str();
    cmd->callback([a, b, alpha] { compare(*a, *b, *alpha); });
}

} // namespace attn::cli
