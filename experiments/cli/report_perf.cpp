// attnbench report's performance sweep: the cases still to do go through attnbench-bench (one
// harness process per case, or per (batch, L) for decode), each case's record written as one
// file in cases/ as it finishes; the render step (report_render.cpp) gathers them into perf.json
// and perf.csv.
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
#include <vector>
#include <nlohmann/json.hpp>
#include "output.hpp"
#include "report.hpp"
import attn.count;
import attn.stats;

namespace attn::cli::reporting {

const std::vector<std::string> counter_keys{
    "gflops_matmul", "gflops_full", "pct_peak", "peak_gflops", "peak_load_cpus", "bytes", "intensity", "scratch_mib",
    "extra_mib",
    // decode: the step's (ID) and the core's (ID/core), bench.decode
    "us_per_token", "tokens_per_s", "step_gbs", "cache_mib", "weight_mib", "kv_bytes_per_token", "cache_ratio_to_mha",
    "kv_bytes_per_cached_token", "llc_mib", "llc_context", "core_us", "kv_gbs", "gflops_core", "peak_gbs", "pct_triad",
    "roof_gbs", "pct_roof", "arith_roof_gbs", "triad_alongside_gbs", "pct_triad_alongside", "roof_alongside_gbs",
    "pct_roof_alongside",
    // decode's check: against fp64 on the same (rounded) cache, and the loss against the unrounded one
    "check_ratio", "unrounded_max_abs", "unrounded_ratio", "unrounded_nmse"};

namespace {

double to_ms(double v, const std::string& unit) {
    if (unit == "ns") return v * 1e-6;
    if (unit == "us") return v * 1e-3;
    if (unit == "s") return v * 1e3;
    return v;
}

/// What a benchmark of the harness's JSON measured: the case itself (its label is the case),
/// a decode case's attention core (named ID/core), or the triad run beside decode cases (its
/// label names the probe).
enum class part { whole, core, triad };

part part_of(const json& b) {
    const json label = json::parse(b.value("label", std::string()), nullptr, false);
    if (label.is_object() && label.contains("probe")) return part::triad;
    const std::string name = b.value("run_name", b.value("name", std::string()));
    return name.find("/core") != std::string::npos ? part::core : part::whole;
}

/// The harness's benchmarks of one case (and the triads of its run) -> status and medians over
/// the repetitions: time_ms from the case's own benchmark, core_time_ms from a decode core;
/// each counter the median over the repetitions of the benchmark that reports it.
void summarise(json& rec, const json& benchmarks) {
    std::vector<double> times, cpu, core_times;
    std::map<std::string, std::vector<double>> counters;
    std::string err;
    json harness_case;
    json reps = json::array(), core_reps = json::array();
    for (const auto& b : benchmarks) {
        if (b.value("run_type", std::string("iteration")) != "iteration") continue;
        const part what = part_of(b);
        if (what == part::triad) continue; // the core carries the triad it was paired with
        if (b.value("error_occurred", false)) {
            err = b.value("error_message", std::string("error_occurred without a message"));
            continue;
        }
        const std::string unit = b.value("time_unit", std::string("ns"));
        const double t = to_ms(b.value("real_time", 0.0), unit);
        json rep = {{"time_ms", t},
                    {"cpu_time_ms", to_ms(b.value("cpu_time", 0.0), unit)},
                    {"iterations", b.value("iterations", 0)}};
        for (const auto& k : counter_keys)
            if (b.contains(k) && b[k].is_number()) {
                counters[k].push_back(b[k].get<double>());
                rep[k] = b[k];
            }
        if (what == part::core) {
            if (!harness_case.is_object()) harness_case = json::parse(b.value("label", std::string()), nullptr, false);
            core_times.push_back(t);
            core_reps.push_back(rep);
            continue;
        }
        times.push_back(t);
        cpu.push_back(rep["cpu_time_ms"].get<double>());
        // the harness labels each benchmark with the case it ran, as JSON
        harness_case = json::parse(b.value("label", std::string()), nullptr, false);
        reps.push_back(rep);
    }
    rec["repetitions"] = reps;
    if (!core_reps.empty()) rec["core_repetitions"] = core_reps;
    if (harness_case.is_object()) rec["case"] = harness_case;
    if (!err.empty()) {
        rec["status"] = "failed";
        rec["error"] = err;
        return;
    }
    if (times.empty() && core_times.empty()) {
        rec["status"] = "failed";
        rec["error"] = "the harness reported no benchmark for this case";
        return;
    }
    // a peer's decode case is its attention core alone (ID/core): no whole-step time
    auto med = [](const std::vector<double>& v) { return v.empty() ? json(nullptr) : json(stats::median(v)); };
    json s = {{"time_ms", med(times)},
              {"time_ms_min", times.empty() ? json(nullptr) : json(*std::min_element(times.begin(), times.end()))},
              {"time_ms_max", times.empty() ? json(nullptr) : json(*std::max_element(times.begin(), times.end()))},
              {"cpu_time_ms", med(cpu)},
              {"core_time_ms", core_times.empty() ? json(nullptr) : json(stats::median(core_times))}};
    for (const auto& k : counter_keys) s[k] = counters.count(k) ? json(stats::median(counters[k])) : json(nullptr);
    rec["status"] = "ok";
    rec["summary"] = s;
}

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

/// The case a benchmark of the harness's JSON ran (from its label), or "" for a triad or an
/// unreadable label.
std::string case_id_of(const json& b) {
    const json label = json::parse(b.value("label", std::string()), nullptr, false);
    if (!label.is_object() || label.contains("probe")) return "";
    try {
        return label.get<sweep_case>().id();
    } catch (const error&) {
        return "";
    }
}

/// Runs cases through one harness process; one record per case to store (status ok, failed or
/// interrupted). Several cases share a run only for decode: the G of one (batch, L), whose
/// repetitions the harness interleaves at random with each other's and with the triad it runs
/// beside them. The JSON is split by each benchmark's label (the case); the triads of the run
/// go into every record; a crash fails every case of the run.
std::vector<json> run_cases(const run_context& c, const std::vector<sweep_case>& ks) {
    const fs::path cases = c.dir / "cases";
    const std::string first = ks.front().id();
    const fs::path out = cases / (".partial-" + first + ".json"), log = cases / (".partial-" + first + ".log");
    std::vector<std::string> argv = is_peer(ks.front().variant) ? peer_command(c) : std::vector<std::string>{c.bench};
    for (const auto& k : ks) argv.insert(argv.end(), {"--case", json(k).dump()});
    if (fs::exists(c.dir / "peak.json")) argv.insert(argv.end(), {"--peak", (c.dir / "peak.json").string()});
    argv.push_back("--benchmark_out=" + out.string());
    argv.push_back("--benchmark_out_format=json");
    argv.push_back("--benchmark_color=false");
    argv.push_back("--benchmark_repetitions=" + std::to_string(c.spec.repetitions));
    argv.push_back("--benchmark_min_time=" + format_number(c.spec.min_time, 3));
    if (ks.front().decode()) argv.push_back("--benchmark_enable_random_interleaving=true");
    fs::remove(out);
    const auto r = run_process(argv, log.string(), log.string());
    if (r.interrupted()) throw interrupted{};
    std::vector<std::string> shown{argv.begin(), argv.end()};
    shown[0] = fs::path(shown[0]).filename().string();
    json gb;
    bool parsed = false;
    std::string parse_error;
    if (fs::exists(out)) try {
            gb = parse_json(json_without_nan(read_text(out)), out.string());
            parsed = true;
        } catch (const error& e) {
            parse_error = std::string("the harness's JSON does not parse: ") + e.what();
        }
    std::vector<json> recs;
    for (const auto& k : ks) {
        json rec = {{"id", k.id()}, {"case", k}};
        if (ks.size() > 1) {
            rec["run_with"] = json::array();
            for (const auto& o : ks) rec["run_with"].push_back(o.id());
        }
        rec["exit_code"] = r.exit_code;
        rec["signal"] = r.signal;
        rec["wall_seconds"] = r.seconds;
        rec["command"] = shown;
        if (parsed) {
            json mine = json::array();
            for (const auto& b : gb.value("benchmarks", json::array()))
                if (part_of(b) == part::triad || case_id_of(b) == k.id()) mine.push_back(b);
            rec["harness_context"] = gb.value("context", json::object());
            summarise(rec, mine);
            rec["benchmarks"] = mine;
        }
        if (!parsed || (r.exit_code != 0 && rec.value("status", std::string()) != "failed")) {
            rec["status"] = "failed";
            std::string why = !parse_error.empty() ? parse_error : last_line(log);
            rec["log_tail"] = tail(log, 20);
            if (r.signal == SIGKILL)
                why = "killed by SIGKILL (the kernel's out-of-memory killer, or kill -9)" +
                      (why.empty() ? "" : " (" + why + ")");
            else if (r.signal)
                why = "killed by signal " + std::to_string(r.signal) + (why.empty() ? "" : " (" + why + ")");
            else if (why.empty())
                why = "exit status " + std::to_string(r.exit_code) + ", no output";
            rec["error"] = why;
            rec.erase("summary");
        }
        recs.push_back(rec);
    }
    fs::remove(out);
    fs::remove(log);
    return recs;
}

/// The harness runs of the cases still to do, in the cases' order: one case each, except that
/// the decode cases differing only in kv_heads share one run, and a peer's cases share one run
/// of the peer harness (its library is imported once).
std::vector<std::vector<sweep_case>> harness_runs(const std::vector<sweep_case>& todo) {
    std::vector<std::vector<sweep_case>> runs;
    std::map<std::string, std::size_t> run_of;
    for (const auto& k : todo) {
        const auto [it, fresh] = run_of.emplace(is_peer(k.variant) ? "peer:" + k.variant : k.run_group(), runs.size());
        if (fresh) runs.emplace_back();
        runs[it->second].push_back(k);
    }
    return runs;
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
    std::vector<sweep_case> skipped, timed;
    for (const auto& k : c.cases)
        if (!fs::exists(cases / (k.id() + ".json"))) (failed.count(k.variant) ? skipped : timed).push_back(k);
    std::vector<std::vector<sweep_case>> runs;
    for (const auto& k : skipped) runs.push_back({k}); // recorded as skipped, not run
    for (auto& r : harness_runs(timed)) runs.push_back(std::move(r));
    for (const auto& run : runs) {
        std::vector<json> recs;
        if (failed.count(run.front().variant)) {
            const auto& k = run.front();
            recs.push_back({{"id", k.id()},
                            {"case", k},
                            {"status", "skipped"},
                            {"error", "variant '" + k.variant + "' failed attnbench check; not timed"}});
        } else {
            if (tty)
                std::fprintf(stderr, "\r\033[K[%zu/%zu] running %s%s", done + 1, total, run.front().text().c_str(),
                             run.size() > 1 ? (" and " + std::to_string(run.size() - 1) + " more").c_str() : "");
            recs = run_cases(c, run);
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
        }
        if (c.stop_after && ran >= c.stop_after) {
            std::fprintf(stderr, "\n--stop-after %llu: dying now (SIGKILL), as an interrupted run would\n",
                         static_cast<unsigned long long>(c.stop_after));
            std::fflush(stderr);
            std::raise(SIGKILL);
        }
    }
    if (tty && ran) std::fprintf(stderr, "\n");
    std::fprintf(stderr, "perf: %zu cases, %zu not ok in this run\n", total, failures);
    return outcome::ok;
}

} // namespace attn::cli::reporting
