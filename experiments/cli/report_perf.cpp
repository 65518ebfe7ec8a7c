// attnbench report's performance sweep: the cases still to do go through attnbench-bench, one
// harness process per shape (our variants of it together; decode: the G of one batch and L),
// with the shape's peers beside it in rounds (ours, peer, ours, peer ...), each case's record
// written as one file in cases/ as its shape finishes: its times, Google Benchmark's median of
// each round, and every counter of attn.figures' table (the figures derived from the medians by
// the same C++ for ours and the peers). The render step (report_render.cpp) gathers them into
// perf.json and perf.csv.
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

/// A benchmark's label, parsed once: its part, its case's id (none for a probe or an unreadable
/// label), and a probe's thread count.
struct label_info {
    part which = part::run;
    std::string case_id;
    int threads = 0;
};

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

/// One part (the call, or a decode core) of one case in one harness run: its repetitions and
/// the median of their times (Google Benchmark's median aggregate where the run wrote one).
struct part_round {
    std::vector<json> reps; ///< time_ms, cpu_time_ms, iterations and the harness's counters
    double median_ms = 0;
};

/// The medians of the probes a harness run measured beside decode cases, per thread count.
struct probe_medians {
    std::map<std::pair<std::string, int>, double> gbs; ///< (triad_gbs | read_gbs, threads)
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
        for (const char* name : {"triad_gbs", "read_gbs"})
            if (b.contains(name) && b[name].is_number()) all[{name, b.value("probe_threads", 0)}].push_back(b[name]);
    }
    probe_medians m;
    for (const auto& [k, v] : all) m.gbs[k] = stats::median(v);
    return m;
}

double median_of(std::vector<double> v) { return v.empty() ? 0.0 : stats::median(v); }

} // namespace

/// The summary of a case over its rounds (one harness run each): the medians of its parts' round
/// medians (GB's aggregates), every counter of attn.figures' table -- the quantities from the
/// case and the run's measured peak (attn::quantities), or as the harness wrote them where it did
/// (attnbench-bench writes the same, from the same function; a peer writes times alone), the
/// measured ones as the harness wrote them, the derived ones by attn::derive from those medians,
/// for our variants and the peers alike -- and the spread of the rounds.
void summarise(json& rec, const sweep_case& k, const std::vector<std::vector<json>>& rounds, const peak_file& peak) {
    std::string err;
    json reps = json::array(), core_reps = json::array(), round_rows = json::array();
    std::vector<double> run_ms, core_ms, cpu_ms, triad, read;
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
    if (!run_ms.empty()) derive(f, k, part::run, median_of(run_ms) * 1e-3);
    if (!core_ms.empty()) derive(f, k, part::core, median_of(core_ms) * 1e-3, median_of(triad), median_of(read));
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

namespace {

/// Google Benchmark writes a NaN or infinite value (e.g. the cv of an all-zero counter) as a
/// bare NaN / -nan / inf, which JSON does not have: those values become null.
std::string json_without_nan(const std::string& text) {
    std::string out;
    out.reserve(text.size());
    for (std::size_t i = 0; i < text.size();) {
        out += text[i];
        if (text[i++] != ':') continue;
        std::size_t j = i;
        while (j < text.size() && (text[j] == ' ' || text[j] == '\t')) ++j;
        std::size_t k = j + (j < text.size() && (text[j] == '-' || text[j] == '+'));
        std::size_t e = k;
        while (e < text.size() && std::isalpha(static_cast<unsigned char>(text[e]))) ++e;
        std::string word = text.substr(k, e - k);
        for (auto& ch : word) ch = char(std::tolower(static_cast<unsigned char>(ch)));
        if (word == "nan" || word == "inf" || word == "infinity") {
            out += " null";
            i = e;
        }
    }
    return out;
}

/// The last `n` lines of a file, joined with newlines.
std::string tail(const fs::path& p, std::size_t n) {
    std::ifstream f(p);
    std::vector<std::string> lines;
    for (std::string line; std::getline(f, line);) {
        lines.push_back(line);
        if (lines.size() > n) lines.erase(lines.begin());
    }
    std::string s;
    for (const auto& l : lines) s += l + "\n";
    return s;
}

/// One harness process over some cases: how it ended and, per case, the benchmarks of its JSON
/// (split by each benchmark's label, the case; the probes of the run go to every case).
struct harness_run {
    process_result r;
    std::vector<std::string> command;
    json context = json::object();
    std::map<std::string, std::vector<json>> of_case;
    std::string error; ///< why the run wrote no usable JSON, or died (with the log's tail in `log_tail`)
    std::string log_tail;
};

/// Runs `ks` through one process of `argv` (attnbench-bench, or the peer harness): their
/// repetitions interleaved at random (GB's --benchmark_enable_random_interleaving) with each other's
/// and with the probes it runs beside decode cases.
harness_run run_harness(const run_context& c, const std::vector<sweep_case>& ks, std::vector<std::string> argv) {
    const fs::path cases = c.dir / "cases";
    const std::string first = ks.front().id();
    const fs::path out = cases / (".partial-" + first + ".json"), log = cases / (".partial-" + first + ".log");
    for (const auto& k : ks) argv.insert(argv.end(), {"--case", json(k).dump()});
    if (fs::exists(c.dir / "peak.json")) argv.insert(argv.end(), {"--peak", (c.dir / "peak.json").string()});
    argv.push_back("--benchmark_out=" + out.string());
    argv.push_back("--benchmark_out_format=json");
    argv.push_back("--benchmark_color=false");
    argv.push_back("--benchmark_repetitions=" + std::to_string(c.spec.repetitions));
    argv.push_back("--benchmark_min_time=" + format_number(c.spec.min_time, 3));
    argv.push_back("--benchmark_enable_random_interleaving=true");
    fs::remove(out);
    harness_run h;
    h.r = run_process(argv, log.string(), log.string());
    if (h.r.interrupted()) throw interrupted{};
    h.command.assign(argv.begin(), argv.end());
    h.command[0] = fs::path(h.command[0]).filename().string();
    bool parsed = false;
    if (fs::exists(out)) try {
            const json gb = parse_json(json_without_nan(read_text(out)), out.string());
            parsed = true;
            h.context = gb.value("context", json::object());
            for (json b : gb.value("benchmarks", json::array())) {
                const label_info l = read_label(b);
                b["part"] = enum_name(l.which);
                if (l.which == part::probe) {
                    b["probe_threads"] = l.threads;
                    for (const auto& k : ks) h.of_case[k.id()].push_back(b);
                } else {
                    h.of_case[l.case_id].push_back(b);
                }
            }
        } catch (const error& e) {
            h.error = std::string("the harness's JSON does not parse: ") + e.what();
        }
    if (!parsed || h.r.exit_code != 0) {
        std::string why = !h.error.empty() ? h.error : last_line(log);
        h.log_tail = tail(log, 20);
        if (h.r.signal == SIGKILL)
            why = "killed by SIGKILL (the kernel's out-of-memory killer, or kill -9)" +
                  (why.empty() ? "" : " (" + why + ")");
        else if (h.r.signal)
            why = "killed by signal " + std::to_string(h.r.signal) + (why.empty() ? "" : " (" + why + ")");
        else if (why.empty())
            why = "exit status " + std::to_string(h.r.exit_code) + ", no output";
        h.error = why;
    }
    fs::remove(out);
    fs::remove(log);
    return h;
}

/// The cases of one shape run together: ours in one harness process, each peer's in one process of
/// the peer harness; with peers among them, `rounds` times in turn (ours, peer, ours, peer ...),
/// so the machine's drift hits both sides (the peers judged in the first round only). One record
/// per case to store: status ok, failed (a case's error, or a run that died) or interrupted.
std::vector<json> run_group(const run_context& c, const std::vector<sweep_case>& ks) {
    std::vector<std::vector<sweep_case>> runs; // ours first, then one per peer provider
    std::map<std::string, std::size_t> run_of;
    for (const auto& k : ks) {
        const auto [it, fresh] = run_of.emplace(is_peer(k.variant) ? k.variant : "", runs.size());
        if (fresh) runs.emplace_back();
        runs[it->second].push_back(k);
    }
    std::sort(runs.begin(), runs.end(),
              [](const auto& a, const auto& b) { return !is_peer(a.front().variant) && is_peer(b.front().variant); });
    const bool peers = std::any_of(ks.begin(), ks.end(), [](const auto& k) { return is_peer(k.variant); });
    const int rounds = peers ? c.spec.peer_rounds : 1;
    std::map<std::string, std::vector<std::vector<json>>> benchmarks; // per case, per round
    std::map<std::string, const harness_run*> last_run;
    std::vector<harness_run> done;
    done.reserve(std::size_t(rounds) * runs.size());
    for (int round = 0; round < rounds; ++round)
        for (const auto& run : runs) {
            const bool peer = is_peer(run.front().variant);
            std::vector<std::string> argv = peer ? peer_command(c) : std::vector<std::string>{c.bench};
            if (peer && round > 0) argv.push_back("--no-judge");
            done.push_back(run_harness(c, run, argv));
            for (const auto& k : run) {
                benchmarks[k.id()].push_back(done.back().of_case[k.id()]);
                last_run[k.id()] = &done.back();
            }
        }
    const peak_file peak = read_peak(c.dir);
    std::vector<json> recs;
    for (const auto& k : ks) {
        const harness_run& h = *last_run.at(k.id());
        json rec = {{"id", k.id()}, {"case", k}};
        std::vector<std::string> with;
        for (const auto& run : runs)
            if (std::any_of(run.begin(), run.end(), [&](const auto& o) { return o.id() == k.id(); }) && run.size() > 1)
                for (const auto& o : run) with.push_back(o.id());
        if (!with.empty()) rec["run_with"] = with;
        rec["exit_code"] = h.r.exit_code;
        rec["signal"] = h.r.signal;
        rec["wall_seconds"] = h.r.seconds;
        rec["command"] = h.command;
        rec["harness_context"] = h.context;
        summarise(rec, k, benchmarks[k.id()], peak);
        // what ran, where a peer says so in its label: library, version, threads, operator, kernel
        for (const auto& r : benchmarks[k.id()])
            for (const auto& bm : r)
                if (const json label = json::parse(bm.value("label", std::string()), nullptr, false);
                    label.is_object() && label.contains("peer") && !rec["case"].contains("peer"))
                    rec["case"]["peer"] = label["peer"];
        json all = json::array();
        for (const auto& r : benchmarks[k.id()])
            for (const auto& b : r) all.push_back(b);
        rec["benchmarks"] = all;
        // a run that died: its error, unless the case's own benchmarks failed it first
        if (!h.error.empty() && (rec.value("status", std::string()) != "failed" || all.empty())) {
            rec["status"] = "failed";
            rec["error"] = h.error;
            rec["log_tail"] = h.log_tail;
            rec.erase("summary");
        }
        recs.push_back(rec);
    }
    return recs;
}

/// The cases still to do, grouped by shape (every field but the provider; decode: also but
/// kv_heads, the G of one batch and L sharing a run), in the cases' order.
std::vector<std::vector<sweep_case>> shape_groups(const std::vector<sweep_case>& todo) {
    std::vector<std::vector<sweep_case>> groups;
    std::map<std::string, std::size_t> group_of;
    for (const auto& k : todo) {
        sweep_case shape = k;
        shape.variant.clear();
        const auto [it, fresh] = group_of.emplace(shape.run_group(), groups.size());
        if (fresh) groups.emplace_back();
        groups[it->second].push_back(k);
    }
    return groups;
}

} // namespace

outcome stage_perf(run_context& c) {
    const fs::path cases = c.dir / "cases";
    fs::create_directories(cases);
    for (const auto& e : fs::directory_iterator(cases)) {      // what an interrupted case left behind
        const std::string name = e.path().filename().string(); // and the harness's temporary of it
        if (name.rfind(".partial-", 0) == 0 || name.rfind("..partial-", 0) == 0) fs::remove(e.path());
    }
    if (!fs::exists(c.bench)) {
        std::fprintf(stderr,
                     "perf: the harness %s does not exist (build attnbench-bench, or pass --bench PATH); "
                     "stage left undone, --resume runs it\n",
                     c.bench.c_str());
        return outcome::undone;
    }
    const auto failed = failed_check(c.dir);
    const std::size_t total = c.cases.size();
    std::size_t done = 0, ran = 0, failures = 0;
    for (const auto& k : c.cases) done += fs::exists(cases / (k.id() + ".json"));
    const std::size_t todo = total - done;
    const bool tty = isatty(2);
    const auto start = std::chrono::steady_clock::now();
    if (done) std::fprintf(stderr, "perf: %zu of %zu cases already done (resumed)\n", done, total);
    // not run: a variant that failed check, or one that does not serve the case (its device, family,
    // precision or own limits: attn::refusal's line); both recorded as skipped, with the reason
    auto skip_reason = [&](const sweep_case& k) -> std::string {
        if (is_peer(k.variant)) return {};
        if (failed.count(k.variant)) return "variant '" + k.variant + "' failed attnbench check; not timed";
        return refusal(find_variant(k.variant), k.shape(), k.mode, k.precision, k.device);
    };
    std::vector<sweep_case> skipped, timed;
    for (const auto& k : c.cases)
        if (!fs::exists(cases / (k.id() + ".json"))) (skip_reason(k).empty() ? timed : skipped).push_back(k);
    std::vector<std::vector<sweep_case>> runs;
    for (const auto& k : skipped) runs.push_back({k}); // recorded as skipped, not run
    for (auto& r : shape_groups(timed)) runs.push_back(std::move(r));
    for (const auto& run : runs) {
        std::vector<json> recs;
        if (const std::string why = skip_reason(run.front()); !why.empty()) {
            const auto& k = run.front();
            recs.push_back({{"id", k.id()}, {"case", k}, {"status", "skipped"}, {"error", why}});
        } else {
            if (tty)
                std::fprintf(stderr, "\r\033[K[%zu/%zu] running %s%s", done + 1, total, run.front().text().c_str(),
                             run.size() > 1 ? (" and " + std::to_string(run.size() - 1) + " more").c_str() : "");
            recs = run_group(c, run);
        }
        for (std::size_t i = 0; i < run.size(); ++i) {
            const auto& k = run[i];
            const json& rec = recs[i];
            attn::write_atomic((cases / (k.id() + ".json")).string(), rec.dump(2) + "\n");
            ++done;
            ++ran;
            const std::string status = rec["status"];
            failures += status != "ok";
            const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
            const double eta = elapsed / double(ran) * double(todo - ran);
            const json& sum = rec.value("summary", json::object());
            const json t = sum.value("time_ms", json(nullptr)).is_number() ? sum["time_ms"]
                                                                           : sum.value("core_time_ms", json(nullptr));
            std::string result = status == "ok" && t.is_number() ? format_number(t.get<double>(), 3) + " ms"
                                                                 : status + ": " + rec.value("error", std::string());
            if (tty)
                std::fprintf(stderr, "\r\033[K[%zu/%zu] %3.0f%% elapsed %s ETA %s  %s: %s", done, total,
                             100.0 * double(done) / double(total), clock_text(elapsed).c_str(), clock_text(eta).c_str(),
                             k.text().c_str(), result.c_str());
            else
                std::fprintf(stderr, "[%zu/%zu] elapsed %s ETA %s  %s: %s\n", done, total, clock_text(elapsed).c_str(),
                             clock_text(eta).c_str(), k.text().c_str(), result.c_str());
            if (c.stop_after && ran >= c.stop_after) {
                std::fprintf(stderr, "\n--stop-after %llu: dying now (SIGKILL), as an interrupted run would\n",
                             static_cast<unsigned long long>(c.stop_after));
                std::fflush(stderr);
                std::raise(SIGKILL);
            }
        }
    }
    if (tty && ran) std::fprintf(stderr, "\n");
    std::fprintf(stderr, "perf: %zu cases, %zu not ok in this run\n", total, failures);
    return outcome::ok;
}

} // namespace attn::cli::reporting
