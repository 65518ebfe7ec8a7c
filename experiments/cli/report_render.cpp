// attnbench report's render step, which `attnbench plot DIR` runs alone: the stored case records
// (cases/*.json) become perf.json and perf.csv, then experiments/plots/report.py (merged.py for a
// merge over several machines) draws the plots and writes report.md. It reads what a run stored
// and runs nothing but the plots script, so a finished run re-renders the same.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>
#include <nlohmann/json.hpp>
#include "output.hpp"
#include "report.hpp"
import attn.count;
import attn.figures;

namespace attn::cli::reporting {

namespace {

/// The sweep's grids and the figures each is drawn as (attn::grid::drawn_as: those it names, or
/// those its axes call for), from the run's own sweep.toml; where a folder has none readable
/// (written by hand), every grid its cases name, drawn as whatever their axes allow.
json grids_drawn(const fs::path& dir, const json& rows, const sweep_spec* given) {
    json out = json::array();
    try {
        sweep_spec spec;
        if (given) {
            spec = *given;
        } else { // a stored run: its sweep and the windows run.json says it applied (--window)
            spec = parse_sweep(read_text(dir / "sweep.toml"), (dir / "sweep.toml").string(), stage_names());
            if (fs::exists(dir / "run.json"))
                apply_window(spec, read_json(dir / "run.json").value("window", std::vector<std::size_t>{}), true);
        }
        for (const auto& g : spec.grids) {
            json fs = json::array();
            for (const auto f : g.drawn_as()) fs.push_back(enum_name(f));
            out.push_back({{"name", g.name}, {"figures", fs}, {"declared", !g.figures.empty()}});
        }
        return out;
    } catch (const error&) {
    }
    std::set<std::string> names;
    for (const auto& r : rows)
        for (const auto& g : r.value("grids", json::array())) names.insert(g.get<std::string>());
    for (const auto& n : names)
        out.push_back({{"name", n}, {"figures", {"vs_n", "vs_heads", "threads", "decode"}}, {"declared", false}});
    return out;
}

} // namespace

void aggregate_perf(const fs::path& dir, const sweep_spec* sweep) {
    const fs::path cases = dir / "cases";
    if (!fs::exists(cases)) return;
    std::vector<json> recs;
    for (const auto& e : fs::directory_iterator(cases)) {
        const auto name = e.path().filename().string();
        if (e.path().extension() == ".json" && name[0] != '.') recs.push_back(read_json(e.path()));
    }
    // sorted by the case's fields in the field table's order (mode and variant first; the family,
    // which the shape derives, and the form last), not by finishing order
    std::vector<std::string> fields;
    for (const auto& f : case_schema()) fields.push_back(f.name);
    auto key = [&](const json& r) {
        std::vector<json> k;
        for (const auto& f : fields)
            if (f != "family" && f != "form") k.push_back(r["case"].value(f, json(nullptr)));
        k.push_back(r["case"].value("family", json(nullptr)));
        k.push_back(r["case"].value("form", json(nullptr)));
        return k;
    };
    std::vector<std::size_t> order(recs.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
        const auto ka = key(recs[a]), kb = key(recs[b]);
        return ka != kb ? ka < kb : a < b;
    });
    const std::vector<std::string> times{"time_ms",      "time_ms_min",         "time_ms_max",
                                         "cpu_time_ms",  "core_time_ms",        "rounds",
                                         "round_spread", "speedup_vs_1_thread", "parallel_efficiency"};
    std::vector<counter> columns;
    for (const auto& sp : counter_table)
        if (sp.part != part::probe) columns.push_back(id_of(sp));
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
        for (const auto& k : times) row[k] = s.value(k, json(nullptr));
        for (const auto c : columns) { // a record written before the table may carry an older name
            const auto& sp = spec(c);
            json v = s.value(std::string(sp.name), json(nullptr));
            if (v.is_null() && !sp.legacy.empty()) v = s.value(std::string(sp.legacy), json(nullptr));
            row[std::string(sp.name)] = v;
        }
        // records written before these two were derived with the others
        const json g = row["gflops_matmul"], peak = row["peak_gflops"], pct = row["pct_peak"];
        if (row["ceiling_speedup"].is_null() && g.is_number() && peak.is_number())
            row["ceiling_speedup"] = ceiling_speedup(g.get<double>(), peak.get<double>());
        if (row["peak_in_doubt"].is_null() && pct.is_number()) {
            const json load = row["peak_load_cpus"];
            row["peak_in_doubt"] = peak_in_doubt(pct.get<double>(), load.is_number() ? load.get<double>() : -1) ? 1 : 0;
        }
        row["error"] = r.value("error", std::string());
        rows.push_back(row);
    }
    // the threads sweep's figures: each row's speed-up over the same provider and shape at 1 thread
    // (the time compared is a decode case's core, the whole call otherwise) and that over its threads
    auto measured = [](const json& r) {
        const json t = r.value("mode", std::string()) == "decode" ? r["core_time_ms"] : r["time_ms"];
        return t.is_number() && r["status"] == "ok" ? t.get<double>() : 0.0;
    };
    auto but_threads = [](const json& r) {
        json k = r["case"];
        for (const char* f : {"threads", "grids", "peer"}) k.erase(f); // a peer's record names its own threads
        return k.dump();
    };
    std::map<std::string, double> one_thread;
    for (std::size_t j = 0; j < rows.size(); ++j)
        if (rows[j].value("threads", 0) == 1) one_thread[but_threads(recs[order[j]])] = measured(rows[j]);
    for (std::size_t j = 0; j < rows.size(); ++j) {
        const auto it = one_thread.find(but_threads(recs[order[j]]));
        const double t1 = it == one_thread.end() ? 0 : it->second, t = measured(rows[j]);
        const double threads = rows[j].value("threads", 1.0);
        rows[j]["speedup_vs_1_thread"] = t1 > 0 && t > 0 ? json(t1 / t) : json(nullptr);
        rows[j]["parallel_efficiency"] = t1 > 0 && t > 0 ? json(t1 / t / threads) : json(nullptr);
    }
    // the schema the plots read: the case's fields, the shape's (every field but the provider and
    // its threads), every column's unit and meaning
    json units = {{"time_ms", "milliseconds per call, the median over the rounds of Google Benchmark's median of "
                              "each round's repetitions"},
                  {"time_ms_min", "milliseconds, the fastest repetition"},
                  {"time_ms_max", "milliseconds, the slowest repetition"},
                  {"cpu_time_ms", "milliseconds of CPU time per call (all threads), median"},
                  {"core_time_ms", "decode: the attention core alone over the cache, milliseconds per call"},
                  {"rounds", "harness runs of the case, alternating with its shape's peers"},
                  {"round_spread", "(slowest - fastest) / median of the rounds' median times"},
                  {"speedup_vs_1_thread", "x: the same provider and shape's time at 1 thread over this row's (a decode "
                                          "case's core time; null without a 1-thread row)"},
                  {"parallel_efficiency", "1: speedup_vs_1_thread / threads"}};
    for (const auto c : columns)
        units[std::string(spec(c).name)] = std::string(spec(c).unit) + ": " + std::string(spec(c).meaning);
    // fields: every row of the field table (name, the label of its column in a report table, its
    // default), which the plots read to show each field that tells two rows of a table apart
    json schema = {{"case_fields", json::array()},
                   {"shape_fields", json::array()},
                   {"fields", json::array()},
                   {"wording", json::array()},
                   {"units", units},
                   {"grids", grids_drawn(dir, rows, sweep)}};
    for (const auto& w : decode_wording)
        schema["wording"].push_back({{"name", w.name}, {"value", w.value}, {"meaning", w.meaning}});
    for (const auto& f : case_schema()) {
        schema["fields"].push_back({{"name", f.name}, {"label", f.label}, {"default", f.fallback}});
        if (f.name == "variant") continue; // the provider: not a field of the shape
        schema["case_fields"].push_back(f.name);
        if (f.name != "threads") schema["shape_fields"].push_back(f.name);
    }
    json j = {{"schema", schema}, {"unit", units}, {"cases", rows}};
    attn::write_atomic((dir / "perf.json").string(), j.dump(2) + "\n");
    std::vector<std::string> cols{"id"};
    for (const auto& f : fields) cols.push_back(f);
    cols.insert(cols.end(), {"status", "repetitions"});
    cols.insert(cols.end(), times.begin(), times.end());
    for (const auto c : columns) cols.emplace_back(spec(c).name);
    cols.push_back("error");
    attn::write_atomic((dir / "perf.csv").string(), rows_csv(rows, cols));
}

/// Re-renders the plots and report.md from what `dir` holds.
int render(const fs::path& dir, const sweep_spec* sweep) {
    // a merge over several machines: each machine's folder is a run of its own, and report.md
    // gives each its section (merged.py)
    const auto machines = machine_folders(dir);
    for (const auto& m : machines)
        if (const int rc = render(m)) return rc;
    aggregate_perf(dir, machines.empty() ? sweep : nullptr);
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
