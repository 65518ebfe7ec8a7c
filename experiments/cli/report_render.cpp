// attnbench report's render step, which `attnbench plot DIR` runs alone: the stored case records
// (cases/*.json) become perf.json and perf.csv, then experiments/plots/report.py (merged.py for a
// merge over several machines) draws the plots and writes report.md. It reads what a run stored
// and runs nothing but the plots script, so a finished run re-renders the same.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <tuple>
#include <vector>
#include <nlohmann/json.hpp>
#include "output.hpp"
#include "report.hpp"
import attn.count;

namespace attn::cli::reporting {

void aggregate_perf(const fs::path& dir) {
    const fs::path cases = dir / "cases";
    if (!fs::exists(cases)) return;
    std::vector<json> recs;
    for (const auto& e : fs::directory_iterator(cases)) {
        const auto name = e.path().filename().string();
        if (e.path().extension() == ".json" && name[0] != '.') recs.push_back(read_json(e.path()));
    }
    auto key = [](const json& r) {
        const auto& k = r["case"];
        return std::make_tuple(k.value("mode", std::string()), k.value("variant", std::string()),
                               k.value("precision", std::string()), k.value("d_model", 0), k.value("heads", 0),
                               k.value("kv_heads", 0), k.value("n_q", 0), k.value("n_kv", 0), k.value("context", 0),
                               k.value("batch", 0), k.value("threads", 0), k.value("causal", false),
                               k.value("d_head", 0), k.value("bias", false), k.value("magnitude", 1.0));
    };
    std::vector<std::size_t> order(recs.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
        const auto ka = key(recs[a]), kb = key(recs[b]);
        return ka != kb ? ka < kb : a < b;
    });
    json rows = json::array();
    for (auto i : order) {
        const auto& r = recs[i];
        json row = r["case"];
        row.erase("grids");
        row["grids"] = r["case"].value("grids", json::array());
        row["id"] = r["id"];
        row["status"] = r["status"];
        row["repetitions"] = r.value("repetitions", json::array()).size();
        const json s = r.value("summary", json::object());
        for (const char* k : {"time_ms", "time_ms_min", "time_ms_max", "cpu_time_ms", "core_time_ms"})
            row[k] = s.value(k, json(nullptr));
        for (const auto& k : counter_keys) row[k] = s.value(k, json(nullptr));
        // core and layer: how much faster than this row any implementation could be at the FMA ceiling
        const json g = row["gflops_matmul"], peak = row["peak_gflops"];
        row["ceiling_speedup"] = g.is_number() && peak.is_number()
                                     ? json(attn::ceiling_speedup(g.get<double>(), peak.get<double>()))
                                     : json(nullptr);
        // a % of peak above 100, or against a ceiling measured on a loaded machine, is marked
        const json pct = row["pct_peak"], load = row["peak_load_cpus"];
        row["peak_in_doubt"] =
            pct.is_number() ? json(attn::peak_in_doubt(pct.get<double>(), load.is_number() ? load.get<double>() : -1))
                            : json(nullptr);
        row["error"] = r.value("error", std::string());
        rows.push_back(row);
    }
    json j = {{"unit",
               {{"time_ms", "milliseconds per call, median over repetitions"},
                {"gflops_matmul", "10^9 matmul-only FLOP/s"},
                {"gflops_full", "10^9 FLOP/s, full count"},
                {"pct_peak", "% of the measured FMA peak at the case's thread count"},
                {"peak_load_cpus", "CPUs other processes kept busy while that FMA peak was measured (-1: unknown)"},
                {"peak_in_doubt", "pct_peak above 100 or peak_load_cpus >= 0.5 (attn::peak_in_doubt): the "
                                  "peak was measured low, on a loaded machine; rerun `attnbench peak` quiet"},
                {"ceiling_speedup", "the measured FMA peak over gflops_matmul: the largest speed-up over this "
                                    "row any implementation of the counted FLOPs could reach (core, layer)"},
                {"bytes", "bytes moved (the harness's model)"},
                {"intensity", "FLOP per byte"},
                {"scratch_mib", "peak extra memory of the kernel, MiB"},
                {"decode", "time_ms: the whole step; core_time_ms: the attention core alone over the cache; "
                           "the other columns as attnbench-bench's context key attnbench_counters says"}}},
              {"cases", rows}};
    attn::write_atomic((dir / "perf.json").string(), j.dump(2) + "\n");
    std::vector<std::string> cols{"id",       "variant",     "mode",        "precision",   "d_model",     "heads",
                                  "kv_heads", "d_head",      "n_q",         "n_kv",        "context",     "batch",
                                  "threads",  "causal",      "bias",        "magnitude",   "status",      "repetitions",
                                  "time_ms",  "time_ms_min", "time_ms_max", "cpu_time_ms", "core_time_ms"};
    cols.insert(cols.end(), counter_keys.begin(), counter_keys.end());
    cols.push_back("ceiling_speedup");
    cols.push_back("peak_in_doubt");
    cols.push_back("error");
    attn::write_atomic((dir / "perf.csv").string(), rows_csv(rows, cols));
}

/// Re-renders the plots and report.md from what `dir` holds.
int render(const fs::path& dir) {
    // a merge over several machines: each machine's folder is a run of its own, and report.md
    // gives each its section (merged.py)
    const auto machines = machine_folders(dir);
    for (const auto& m : machines)
        if (const int rc = render(m)) return rc;
    aggregate_perf(dir);
    std::string python = attn::build().python;
    if (const char* env = std::getenv("ATTNBENCH_PYTHON"); env && *env) python = env;
    require(!python.empty(), "no Python with matplotlib was found at configure time (set ATTNBENCH_PYTHON)");
    const fs::path script =
        fs::path(attn::build().source_dir) / "experiments" / "plots" / (machines.empty() ? "report.py" : "merged.py");
    require(fs::exists(script), script.string() + ": not found (the plots script of this build's source tree)");
    fs::create_directories(dir / "logs");
    // the versus-peers table's U test is compare.py's own (gbench.report.calc_utest)
    ::setenv("ATTNBENCH_GBENCH_COMPARE", attn::build().gbench_compare, 0);
    const auto r = run_process({python, script.string(), dir.string()}, "", (dir / "logs" / "plot.err").string());
    if (r.interrupted()) throw interrupted{};
    if (r.exit_code != 0) {
        std::fprintf(stderr, "attnbench: plots failed (exit %d): %s (see %s)\n", r.exit_code,
                     last_line(dir / "logs" / "plot.err").c_str(), (dir / "logs" / "plot.err").string().c_str());
        return 1;
    }
    std::fprintf(stderr, "wrote %s\n", (dir / "report.md").string().c_str());
    return 0;
}

} // namespace attn::cli::reporting
