// attnbench report's performance sweep, its records: what each benchmark of a harness's JSON
// measured (its label, read once), a part's repetitions and median, the probes measured beside
// decode cases, and a case's summary over its rounds (summarise): every counter of attn.figures'
// table, the figures derived from the medians by the same C++ for ours and the peers. The running
// of the harness processes is report_perf.cpp's.
#include <algorithm>
#include <cctype>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>
#include <nlohmann/json.hpp>
#include "output.hpp"
#include "report.hpp"
import attn.figures;
import attn.peak;
import attn.stats;
import attn.variants;

namespace attn::cli::reporting {

namespace {

double to_ms(double v, const std::string& unit) {
    if (unit == "ns") return v * 1e-6;
    if (unit == "us") return v * 1e-3;
    if (unit == "s") return v * 1e3;
    return v;
}

/// What a benchmark of a harness's JSON measured: the case's own call (or decode step), a decode
/// case's attention core, or a bandwidth probe run beside decode cases, as its label's "part"
/// says; read_label() writes it into the benchmark as "part" when the run's JSON is read (the
/// label is parsed once).
part part_of(const json& b) { return parse_enum<part>(b.value("part", std::string("run"))); }

/// One part (the call, or a decode core) of one case in one harness run: its repetitions and
/// the median of their times (Google Benchmark's median aggregate where the run wrote one).
struct part_round {
    std::vector<json> reps; ///< time_ms, cpu_time_ms, iterations and the harness's counters
    double median_ms = 0;
};

/// The medians of the probes a harness run measured beside its cases, per thread count.
struct probe_medians {
    std::map<std::pair<std::string, int>, double> gbs; ///< (triad_gbs | read_gbs | fma_ratio, threads)
    double at(const char* name, std::size_t threads) const {
        const auto it = gbs.find({name, int(threads)});
        return it == gbs.end() ? 0.0 : it->second;
    }
};

/// The repetitions' median, from GB's median aggregate; where a writer gave none, the median of
/// the repetitions (GB's own rule: the middle, or the mean of the two middle ones).
double median_time(const std::vector<json>& reps, const json* aggregate, const std::string& unit) {
    if (aggregate) return to_ms(aggregate->value("real_time", 0.0), unit);
    std::vector<double> t;
    for (const auto& r : reps) t.push_back(r["time_ms"].get<double>());
    return stats::median(t);
}

/// The harness's JSON for one case, one part: repetitions, median aggregate, error.
part_round collect(const std::vector<json>& benchmarks, part which, std::string& err) {
    part_round r;
    const json* median = nullptr;
    std::string unit = "ms";
    for (const auto& b : benchmarks) {
        if (part_of(b) != which) continue;
        if (b.value("error_occurred", false)) {
            if (err.empty()) err = b.value("error_message", std::string("error_occurred without a message"));
            continue;
        }
        unit = b.value("time_unit", std::string("ns"));
        if (b.value("run_type", std::string("iteration")) == "aggregate") {
            if (b.value("aggregate_name", std::string()) == "median") median = &b;
            continue;
        }
        json rep = {{"time_ms", to_ms(b.value("real_time", 0.0), unit)},
                    {"cpu_time_ms", to_ms(b.value("cpu_time", 0.0), unit)},
                    {"iterations", b.value("iterations", 0)}};
        for (const auto& sp : counter_table) // what the harness knows; the derived ones are derived here
            if (sp.source != source::derived && b.contains(sp.name) && b[sp.name].is_number())
                rep[std::string(sp.name)] = b[sp.name];
        r.reps.push_back(rep);
    }
    if (!r.reps.empty()) r.median_ms = median_time(r.reps, median, unit);
    return r;
}

probe_medians probes_of(const std::vector<json>& benchmarks) {
    std::map<std::pair<std::string, int>, std::vector<double>> all;
    for (const auto& b : benchmarks) {
        if (part_of(b) != part::probe || b.value("run_type", std::string("iteration")) != "iteration" ||
            b.value("error_occurred", false))
            continue;
        for (const char* name : {"triad_gbs", "read_gbs", "fma_ratio"})
            if (b.contains(name) && b[name].is_number()) all[{name, b.value("probe_threads", 0)}].push_back(b[name]);
    }
    probe_medians m;
    for (const auto& [k, v] : all) m.gbs[k] = stats::median(v);
    return m;
}

double median_of(std::vector<double> v) { return v.empty() ? 0.0 : stats::median(v); }

} // namespace

label_info read_label(const json& b) {
    label_info l;
    const json label = json::parse(b.value("label", std::string()), nullptr, false);
    if (!label.is_object()) return l;
    try {
        if (label.contains("part")) l.which = parse_enum<part>(label["part"].get<std::string>());
    } catch (const std::exception&) {
    }
    if (l.which == part::probe) {
        l.threads = label.value("threads", 0);
        return l;
    }
    try {
        l.case_id = label.get<sweep_case>().id();
    } catch (const error&) {
    }
    return l;
}

/// The summary of a case over its rounds (one harness run each): the medians of its parts' round
/// medians (GB's aggregates), every counter of attn.figures' table -- the quantities from the
/// case and the run's measured peak (attn::quantities), or as the harness wrote them where it did
/// (attnbench-bench writes the same, from the same function; a peer writes times alone), the
/// measured ones as the harness wrote them, the derived ones by attn::derive from those medians,
/// for our variants and the peers alike -- and the spread of the rounds.
void summarise(json& rec, const sweep_case& k, const std::vector<std::vector<json>>& rounds, const peak_file& peak) {
    std::string err;
    json reps = json::array(), core_reps = json::array(), round_rows = json::array();
    std::vector<double> run_ms, core_ms, cpu_ms, triad, read, fma;
    std::map<std::string, std::vector<double>> measured;
    for (std::size_t r = 0; r < rounds.size(); ++r) {
        const part_round run = collect(rounds[r], part::run, err), core = collect(rounds[r], part::core, err);
        const probe_medians probes = probes_of(rounds[r]);
        json row = json::object();
        for (auto [pr, into, out, key] :
             {std::tuple{&run, &reps, &run_ms, "time_ms"}, std::tuple{&core, &core_reps, &core_ms, "core_time_ms"}}) {
            if (pr->reps.empty()) continue;
            for (auto x : pr->reps) {
                x["round"] = r;
                if (pr == &run) cpu_ms.push_back(x["cpu_time_ms"].get<double>());
                for (const auto& sp : counter_table)
                    if (x.contains(sp.name)) measured[std::string(sp.name)].push_back(x[sp.name].get<double>());
                into->push_back(x);
            }
            out->push_back(pr->median_ms);
            row[key] = pr->median_ms;
        }
        if (const double t = probes.at("triad_gbs", k.threads); t > 0) triad.push_back(t);
        if (const double t = probes.at("read_gbs", k.threads); t > 0) read.push_back(t);
        if (const double t = probes.at("fma_ratio", k.threads); t > 0) fma.push_back(t);
        round_rows.push_back(row);
    }
    rec["repetitions"] = reps;
    if (!core_reps.empty()) rec["core_repetitions"] = core_reps;
    if (rounds.size() > 1) rec["rounds"] = round_rows;
    if (!err.empty()) {
        rec["status"] = "failed";
        rec["error"] = err;
        return;
    }
    if (run_ms.empty() && core_ms.empty()) {
        rec["status"] = "failed";
        rec["error"] = "the harness reported no benchmark for this case";
        return;
    }
    // the figures: quantities from the case (or the harness's where no peak.json is stored),
    // measured medians, derived from the medians over the rounds
    figures f;
    if (peak.present) f = quantities(k, peak.ceilings);
    for (const auto& [name, v] : measured) f.put(parse_enum<counter>(name), median_of(v));
    if (!run_ms.empty()) derive(f, k, part::run, median_of(run_ms) * 1e-3, {0, 0, median_of(fma)});
    if (!core_ms.empty())
        derive(f, k, part::core, median_of(core_ms) * 1e-3, {median_of(triad), median_of(read), median_of(fma)});
    // a peer's decode case is its attention core alone (ID/core): no whole-step time
    auto med = [](const std::vector<double>& v) { return v.empty() ? json(nullptr) : json(median_of(v)); };
    const auto& timed = k.decode() ? core_ms : run_ms; // the time a case is compared by
    json s = {{"time_ms", med(run_ms)},
              {"time_ms_min", reps.empty() ? json(nullptr) : json(1e300)},
              {"time_ms_max", reps.empty() ? json(nullptr) : json(0.0)},
              {"cpu_time_ms", med(cpu_ms)},
              {"core_time_ms", med(core_ms)},
              {"rounds", rounds.size()},
              {"round_spread", timed.size() > 1 ? json((*std::max_element(timed.begin(), timed.end()) -
                                                        *std::min_element(timed.begin(), timed.end())) /
                                                       median_of(timed))
                                                : json(nullptr)}};
    for (const auto& x : reps) { // GB aggregates no min and max: these two are ours
        s["time_ms_min"] = std::min(s["time_ms_min"].get<double>(), x["time_ms"].get<double>());
        s["time_ms_max"] = std::max(s["time_ms_max"].get<double>(), x["time_ms"].get<double>());
    }
    for (const auto& sp : counter_table)
        if (sp.part != part::probe)
            s[std::string(sp.name)] = f.contains(id_of(sp)) ? json(f.at(id_of(sp))) : json(nullptr);
    rec["status"] = "ok";
    rec["summary"] = s;
}

} // namespace attn::cli::reporting
