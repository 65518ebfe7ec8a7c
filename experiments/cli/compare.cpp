// attnbench compare A.json B.json: per case, the two runs' times, their ratio and a Mann-Whitney
// U test over the repetitions, so a claimed speed-up is a tested one. Google Benchmark ships this
// tool (compare.py, Debian's libbenchmark-tools); this command runs it in the project's Python
// (it needs scipy) on two attnbench-bench JSON files, whose cases are matched by name (the id).
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <nlohmann/json.hpp>
#include "commands.hpp"
#include "process.hpp"
import attn.core;
import attn.results;

namespace attn::cli {
namespace {

/// Refuses, in one line naming the file, what compare.py would fail on with a traceback.
void require_benchmark_json(const std::string& path) {
    const auto j = read_json(path);
    require(j.is_object() && j.contains("benchmarks") && j["benchmarks"].is_array(),
            path + ": no \"benchmarks\" array (not Google Benchmark JSON)");
    // the fields compare.py reads from every entry, each of its type
    std::size_t i = 0;
    for (const auto& b : j["benchmarks"]) {
        const std::string at = path + ": benchmarks[" + std::to_string(i++) + "]";
        require(b.is_object(), at + " is " + b.type_name() + ", not an object");
        for (const char* key : {"name", "time_unit"})
            require(b.contains(key) && b[key].is_string(), at + ": field '" + key + "' is missing or not a string");
        for (const char* key : {"real_time", "cpu_time"})
            require(b.contains(key) && b[key].is_number(), at + ": field '" + key + "' is missing or not a number");
        const std::string unit = b["time_unit"];
        require(unit == "ns" || unit == "us" || unit == "ms" || unit == "s",
                at + ": time_unit '" + unit + "' is not ns, us, ms or s");
    }
}

void compare(const std::string& a, const std::string& b, double alpha) {
    require_benchmark_json(a);
    require_benchmark_json(b);
    const std::string python = attn::build().python, tool = attn::build().gbench_compare;
    require(!tool.empty() && std::filesystem::exists(tool),
            "Google Benchmark's compare.py was not found at configure time (install libbenchmark-tools)");
    char alpha_text[32];
    std::snprintf(alpha_text, sizeof alpha_text, "%g", alpha);
    const auto r = run_process({python, tool, "--no-color", "-a", "--alpha", alpha_text, "benchmarks", a, b});
    if (r.exit_code != 0) throw exit_status{r.exit_code < 0 ? 1 : r.exit_code};
}

} // namespace

void add_compare(CLI::App& app) {
    auto a = std::make_shared<std::string>(), b = std::make_shared<std::string>();
    auto alpha = std::make_shared<double>(0.05);
    auto* cmd = app.add_subcommand(
        "compare", "compare two attnbench-bench JSON files case by case (Google Benchmark's compare.py)");
    cmd->add_option("A", *a, "baseline JSON")->required();
    cmd->add_option("B", *b, "candidate JSON")->required();
    cmd->add_option("--alpha", *alpha, "significance level of the U test")
        ->check(finite_in(0.0, 1.0))
        ->capture_default_str();
    cmd->callback([a, b, alpha] { compare(*a, *b, *alpha); });
}

} // namespace attn::cli
