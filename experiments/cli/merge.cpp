// attnbench merge OUT SHARD_DIR...: the shards of one sweep (attnbench report --shard I/N) joined
// into one results folder that `attnbench plot OUT` renders. Shards of different sweeps, of
// different shard counts or of case lists expanded at different thread counts are refused; missing
// shards and missing cases are named (and refused unless --partial). Shards are grouped by
// machine: the same CPU model, SIMD flags and logical cores, and either the same host or a
// measured 1-thread FMA peak within 10% of the group's first shard's (the all-thread peak is not
// compared: on a shared node it moves with the other jobs, 100 to 202 GFLOP/s across three shards
// on one 2-core host). One machine: OUT is one run folder. Several:
// OUT/machine-K/ is one run folder per machine, never mixed, and OUT/report.md gives each its
// own section.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include "commands.hpp"
#include "report.hpp"

namespace attn::cli {
namespace {

using namespace reporting;

/// Two 1-thread FMA peaks of one kind of machine differ by less than this, relative to the first.
constexpr double same_peak = 0.10;

struct shard {
    fs::path dir;
    json record; ///< shard.json
    json machine;
    double peak_1 = 0, peak_all = 0; ///< FMA GFLOP/s (medians) from peak.json; 0 when absent
    std::size_t index() const { return record.value("shard", std::size_t(0)); }
};

shard read_shard(const fs::path& dir) {
    require(fs::is_directory(dir), dir.string() + ": no such shard folder");
    require(fs::exists(dir / "shard.json"),
            dir.string() + ": not a shard folder (no shard.json; shards come from attnbench report --shard I/N)");
    shard s{dir, read_json(dir / "shard.json"), json::object()};
    s.machine = s.record.value("machine", json::object());
    if (fs::exists(dir / "peak.json")) {
        const json p = read_json(dir / "peak.json").value("peak", json::object());
        auto med = [&](const char* k) { return p.contains(k) ? p[k].value("median", 0.0) : 0.0; };
        s.peak_1 = med("fma_f32_gflops_1_thread");
        s.peak_all = med("fma_f32_gflops_all_threads");
    }
    return s;
}

bool near(double a, double b) { return (a == 0 && b == 0) || (a > 0 && std::abs(b - a) <= same_peak * a); }

/// Shards that ran on one machine, by the rule above, in the order given.
std::vector<std::vector<const shard*>> machines(const std::vector<shard>& shards) {
    std::vector<std::vector<const shard*>> groups;
    for (const auto& s : shards) {
        bool placed = false;
        for (auto& g : groups) {
            const shard& f = *g.front();
            if (f.machine.value("cpu_model", "") == s.machine.value("cpu_model", "") &&
                f.machine.value("cpu_simd_flags", "") == s.machine.value("cpu_simd_flags", "") &&
                f.machine.value("logical_cores", "") == s.machine.value("logical_cores", "") &&
                (f.machine.value("hostname", "") == s.machine.value("hostname", "") || near(f.peak_1, s.peak_1))) {
                g.push_back(&s);
                placed = true;
                break;
            }
        }
        if (!placed) groups.push_back({&s});
    }
    return groups;
}

void copy_top_files(const fs::path& from, const fs::path& to) {
    static const std::set<std::string> own{"shard.json", "run.json", "report.md", "perf.json", "perf.csv"};
    for (const auto& e : fs::directory_iterator(from)) {
        const auto name = e.path().filename().string();
        const auto ext = e.path().extension().string();
        if (!e.is_regular_file() || name[0] == '.' || own.count(name) || ext == ".png" || ext == ".svg") continue;
        attn::write_atomic((to / name).string(), read_text(e.path()));
    }
}

/// One run folder from the shards of one machine: the machine-independent stages' files from
/// shard 0 (when given), this machine's own (peak, check, metadata) from its first shard, the
/// cases of every shard, the stage markers (ok only where every shard's was), each shard's logs.
void write_machine(const fs::path& out, const std::vector<const shard*>& group, const shard* zero,
                   const json& summary) {
    fs::create_directories(out / "cases");
    fs::create_directories(out / "stages");
    if (zero) copy_top_files(zero->dir, out);
    copy_top_files(group.front()->dir, out);
    std::map<std::string, json> stages;
    json given = json::array();
    std::size_t cases = 0;
    for (const shard* s : group) {
        given.push_back({{"shard", s->index()}, {"dir", fs::absolute(s->dir).string()}});
        for (const auto& e : fs::directory_iterator(s->dir / "cases"))
            if (e.path().extension() == ".json" && e.path().filename().string()[0] != '.') {
                attn::write_atomic((out / "cases" / e.path().filename()).string(), read_text(e.path()));
                ++cases;
            }
        if (fs::exists(s->dir / "stages"))
            for (const auto& e : fs::directory_iterator(s->dir / "stages")) {
                json m = read_json(e.path());
                const std::string name = e.path().filename().string();
                if (stages.count(name)) { // ok where every shard's was; the slowest shard's seconds
                    m["ok"] = stages[name].value("ok", false) && m.value("ok", false);
                    m["seconds"] = std::max(stages[name].value("seconds", 0.0), m.value("seconds", 0.0));
                }
                stages[name] = m;
            }
        if (fs::exists(s->dir / "logs")) {
            fs::create_directories(out / "logs");
            fs::copy(s->dir / "logs", out / "logs" / ("shard-" + std::to_string(s->index())),
                     fs::copy_options::recursive | fs::copy_options::overwrite_existing);
        }
    }
    for (const auto& [name, m] : stages) attn::write_atomic((out / "stages" / name).string(), m.dump(2) + "\n");
    json run = read_json((zero ? zero : group.front())->dir / "run.json");
    run["run_id"] = out.filename().string();
    run["cases"] = cases;
    run["merged_from"] = given;
    // what reproduces the merged run on one machine: the sweep unsharded
    const std::string source = run.value("sweep_source", std::string("sweep.toml"));
    run["command"] = source.rfind("preset:", 0) == 0
                         ? json::array({"attnbench", "report", "--preset", source.substr(7)})
                         : json::array({"attnbench", "report", "--sweep", source});
    attn::write_atomic((out / "run.json").string(), run.dump(2) + "\n");
    attn::write_atomic((out / "merge.json").string(), summary.dump(2) + "\n");
}

struct merge_args {
    std::string out;
    std::vector<std::string> shards;
    bool partial = false;
};

void merge(const merge_args& a) {
    const fs::path out = a.out;
    require(!fs::exists(out / "run.json") && !fs::exists(out / "merge.json"),
            out.string() + " holds a run already; merge into a new folder");
    std::vector<shard> shards;
    for (const auto& d : a.shards) shards.push_back(read_shard(d));
    const shard& first = shards.front();
    std::map<std::size_t, const shard*> by_index;
    for (const auto& s : shards) {
        auto field = [&](const char* k) { return s.record.value(k, json()).dump(); };
        auto same = [&](const char* k, const std::string& what) {
            require(field(k) == first.record.value(k, json()).dump(),
                    s.dir.string() + " and " + first.dir.string() + " " + what + " (" + k + " " + field(k) + " vs " +
                        first.record.value(k, json()).dump() + "): never merged");
        };
        same("sweep_fnv1a64", "come from different sweeps");
        same("shards", "split the sweep into different shard counts");
        same("case_list_fnv1a64", "expanded different case lists (different thread counts)");
        const auto [it, fresh] = by_index.emplace(s.index(), &s);
        require(fresh, "shard " + std::to_string(s.index()) + " given twice: " + it->second->dir.string() + " and " +
                           s.dir.string());
    }
    const std::size_t n = first.record.value("shards", std::size_t(1));
    std::vector<std::size_t> missing_shards;
    for (std::size_t i = 0; i < n; ++i)
        if (!by_index.count(i)) missing_shards.push_back(i);
    std::vector<std::string> missing_cases;
    for (const auto& s : shards)
        for (const auto& id : s.record.value("cases", json::array()))
            if (!fs::exists(s.dir / "cases" / (id.get<std::string>() + ".json")))
                missing_cases.push_back(id.get<std::string>() + " (shard " + std::to_string(s.index()) + ")");
    if (!missing_shards.empty() || !missing_cases.empty()) {
        std::string msg = "merge: incomplete:";
        if (!missing_shards.empty()) msg += " shards not given: " + json(missing_shards).dump() + ";";
        if (!missing_cases.empty()) {
            msg += " " + std::to_string(missing_cases.size()) + " cases not run:";
            for (std::size_t i = 0; i < missing_cases.size() && i < 10; ++i) msg += " " + missing_cases[i];
            if (missing_cases.size() > 10) msg += " ...";
        }
        std::fprintf(stderr, "%s%s\n", msg.c_str(),
                     a.partial ? " (--partial: merging what there is)"
                               : " (finish them with attnbench report --resume --out SHARD_DIR, or pass --partial)");
        if (!a.partial) throw exit_status{1};
    }
    const auto groups = machines(shards);
    const shard* zero = by_index.count(0) ? by_index[0] : nullptr;
    json summary = {{"sweep_fnv1a64", first.record["sweep_fnv1a64"]},
                    {"shards", n},
                    {"shards_given", by_index.size()},
                    {"missing_shards", missing_shards},
                    {"missing_cases", missing_cases},
                    {"machine_rule", "one machine: the same cpu_model, cpu_simd_flags and logical_cores, and the same "
                                     "hostname or a 1-thread FMA peak within 10% of the first shard's; cases of "
                                     "different machines are never compared"},
                    {"machines", json::array()}};
    for (std::size_t g = 0; g < groups.size(); ++g) {
        json m = groups[g].front()->machine;
        m["id"] = "machine-" + std::to_string(g + 1);
        m["fma_f32_gflops_1_thread"] = groups[g].front()->peak_1;
        m["fma_f32_gflops_all_threads"] = groups[g].front()->peak_all;
        m["shards"] = json::array();
        m["shard_peaks"] = json::array();
        for (const shard* s : groups[g]) {
            m["shards"].push_back(s->index());
            m["shard_peaks"].push_back({{"shard", s->index()},
                                        {"fma_f32_gflops_1_thread", s->peak_1},
                                        {"fma_f32_gflops_all_threads", s->peak_all}});
        }
        summary["machines"].push_back(m);
    }
    if (groups.size() == 1) {
        write_machine(out, groups[0], zero, summary);
    } else {
        for (std::size_t g = 0; g < groups.size(); ++g) {
            json own = summary; // this machine's part of the merge only
            own["machines"] = json::array({summary["machines"][g]});
            own["part_of_merge_over_machines"] = groups.size();
            write_machine(out / ("machine-" + std::to_string(g + 1)), groups[g], zero, own);
        }
        fs::create_directories(out);
        json run = read_json((zero ? zero : &first)->dir / "run.json");
        run["run_id"] = out.filename().string();
        run["machines"] = groups.size();
        attn::write_atomic((out / "run.json").string(), run.dump(2) + "\n");
        attn::write_atomic((out / "merge.json").string(), summary.dump(2) + "\n");
    }
    std::fprintf(stderr, "merged %zu of %zu shards from %zu machine%s into %s; render with: attnbench plot %s\n",
                 by_index.size(), n, groups.size(), groups.size() == 1 ? "" : "s", out.string().c_str(),
                 out.string().c_str());
    std::printf("%s\n", out.string().c_str());
}

} // namespace

std::vector<fs::path> reporting::machine_folders(const fs::path& dir) {
    std::vector<fs::path> out;
    if (!fs::exists(dir / "merge.json") || fs::exists(dir / "shard.json")) return out;
    const json m = read_json(dir / "merge.json");
    const auto machines = m.value("machines", json::array());
    if (machines.size() > 1)
        for (const auto& k : machines) out.push_back(dir / k.value("id", std::string("machine-?")));
    return out;
}

void add_merge(CLI::App& app) {
    auto a = std::make_shared<merge_args>();
    auto* cmd = app.add_subcommand("merge", "join the shard folders of one sweep (report --shard I/N) into one run");
    cmd->add_option("out", a->out, "the merged run folder (new)")->required();
    cmd->add_option("shards", a->shards, "the shard folders")->required();
    cmd->add_flag("--partial", a->partial, "merge even when shards or cases are missing (they are listed)");
    cmd->callback([a] { merge(*a); });
}

} // namespace attn::cli
