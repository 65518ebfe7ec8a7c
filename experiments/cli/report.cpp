// attnbench report: the main job. Runs the stages a sweep file names (environment and peak,
// check, params, flops, claims, the performance sweep through attnbench-bench, and whatever
// later experiments register below) into results/<run-id>/, each finished piece written
// atomically as it finishes, then renders the plots and report.md (experiments/plots/report.py).
// attnbench plot DIR re-renders plots and report.md from what is stored.
#include <algorithm>
#include <cctype>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>
#include <omp.h>
#include <unistd.h>
#include <nlohmann/json.hpp>
#include "commands.hpp"
#include "output.hpp"
#include "process.hpp"
#include "presets.hpp"
import attn.sweep;
import attn.results;
import attn.stats;

namespace attn::cli {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::ordered_json;

/// Thrown when a child died of SIGINT/SIGTERM/SIGKILL: this run is being stopped.
struct interrupted {};

std::string read_text(const fs::path& p) {
    std::ifstream f(p, std::ios::binary);
    require(bool(f), p.string() + ": cannot read");
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

json read_json(const fs::path& p) {
    try {
        return json::parse(read_text(p));
    } catch (const json::exception& e) {
        throw error(p.string() + ": not valid JSON (" + e.what() + ")");
    }
}

std::string utc_stamp(const char* format) {
    const std::time_t t = std::time(nullptr);
    std::tm tm{};
    gmtime_r(&t, &tm);
    char buf[64];
    std::strftime(buf, sizeof buf, format, &tm);
    return buf;
}

std::string clock_text(double seconds) {
    const long s = long(seconds + 0.5);
    char buf[32];
    if (s >= 3600)
        std::snprintf(buf, sizeof buf, "%ld:%02ld:%02ld", s / 3600, s / 60 % 60, s % 60);
    else
        std::snprintf(buf, sizeof buf, "%ld:%02ld", s / 60, s % 60);
    return buf;
}

/// The last non-empty line of a file (a child's error message), or "".
std::string last_line(const fs::path& p) {
    std::ifstream f(p);
    std::string line, last;
    while (std::getline(f, line))
        if (line.find_first_not_of(" \t\r") != std::string::npos) last = line;
    return last;
}

// ---------------------------------------------------------------------------------------------
// One report run: where it writes, what it runs with.

struct run_context {
    sweep_spec spec;
    fs::path dir;                 ///< results/<run-id>
    std::string self, bench;      ///< this binary; the harness
    int threads = 1;              ///< all logical CPUs (threads = 0 in a sweep)
    std::uint64_t stop_after = 0; ///< test only: die (SIGKILL) after this many cases
    std::vector<sweep_case> cases;

    fs::path logs() const { return dir / "logs"; }
    void write(const std::string& name, const std::string& text) const {
        attn::write_atomic((dir / name).string(), text);
    }
    /// Runs `attnbench ARGS...` (this binary); stdout and stderr to logs/<log>.{txt,err}.
    process_result self_run(const std::vector<std::string>& args, const std::string& log) const {
        std::vector<std::string> argv{self};
        argv.insert(argv.end(), args.begin(), args.end());
        fs::create_directories(logs());
        const auto r = run_process(argv, (logs() / (log + ".txt")).string(), (logs() / (log + ".err")).string());
        if (r.interrupted()) throw interrupted{};
        return r;
    }
};

/// How a stage ended: done (ok or failed: recorded, not run again by --resume) or undone
/// (it could not run here, e.g. no harness: not recorded, --resume tries again).
enum class outcome { ok, failed, undone };

/// One stage of the report: a name the sweep file's `stages` uses, and what it does. A stage
/// writes its JSON and CSV into the run directory.
struct report_stage {
    std::string name;
    std::string description;
    std::function<outcome(run_context&)> run;
};

/// A stage that runs subcommands of this binary with `--out DIR` (the {out} placeholder), e.g.
/// {"params", "--out", "{out}"}; it succeeds when every command exits 0.
std::function<outcome(run_context&)> subcommands(std::vector<std::vector<std::string>> commands) {
    return [commands](run_context& c) {
        bool ok = true;
        for (auto args : commands) {
            for (auto& a : args)
                if (a.rfind("{out}", 0) == 0) a = c.dir.string() + a.substr(5); // "{out}" or "{out}/sub"
            ok = c.self_run(args, args[0]).exit_code == 0 && ok;
        }
        return ok ? outcome::ok : outcome::failed;
    };
}

// --- the stages ------------------------------------------------------------------------------

outcome stage_peak(run_context& c) {
    const auto r =
        c.self_run({"peak", "--repetitions", std::to_string(c.spec.peak_repetitions), "--out", c.dir.string()}, "peak");
    return r.exit_code == 0 && fs::exists(c.dir / "peak.json") ? outcome::ok : outcome::failed;
}

/// The variants the sweep times: check checks those.
std::vector<std::string> swept_variants(const std::vector<sweep_case>& cases) {
    std::vector<std::string> v;
    for (const auto& k : cases)
        if (std::find(v.begin(), v.end(), k.variant) == v.end()) v.push_back(k.variant);
    return v;
}

outcome stage_check(run_context& c) {
    std::vector<std::string> args{"check",
                                  "--out",
                                  c.dir.string(),
                                  "--seed",
                                  std::to_string(c.spec.seed),
                                  "--threads",
                                  std::to_string(c.threads),
                                  "--mode",
                                  c.spec.check.mode};
    for (const auto& v : swept_variants(c.cases)) args.insert(args.end(), {"--variant", v});
    auto grid = [&](const char* flag, const std::vector<std::size_t>& xs) {
        for (auto x : xs) args.insert(args.end(), {flag, std::to_string(x)});
    };
    grid("--d-model", c.spec.check.d_model);
    grid("--heads", c.spec.check.heads);
    grid("--kv-heads", c.spec.check.kv_heads);
    grid("--seq", c.spec.check.seq);
    grid("--batch", c.spec.check.batch);
    const auto r = c.self_run(args, "check");
    // 0: all pass; 1: something failed (recorded in check.json; those variants are not timed);
    // anything else, or no check.json: check itself did not finish
    if ((r.exit_code != 0 && r.exit_code != 1) || !fs::exists(c.dir / "check.json")) {
        std::fprintf(stderr, "check: did not finish (%s; see %s)\n",
                     r.signal ? ("killed by signal " + std::to_string(r.signal)).c_str()
                              : ("exit status " + std::to_string(r.exit_code)).c_str(),
                     (c.logs() / "check.err").string().c_str());
        return outcome::failed;
    }
    return r.exit_code == 0 ? outcome::ok : outcome::failed;
}

/// Variants with at least one failed check case (check.json of this run; none if absent).
std::set<std::string> failed_check(const fs::path& dir) {
    std::set<std::string> failed;
    if (!fs::exists(dir / "check.json")) return failed;
    // named: a range-for over a member of a temporary would outlive the temporary (until C++23)
    const json check = read_json(dir / "check.json");
    for (const auto& r : check.value("cases", json::array()))
        if (!r.value("pass", false)) failed.insert(r.value("variant", std::string("?")));
    return failed;
}

outcome stage_claims(run_context& c) {
    const outcome ok =
        subcommands({{"toy", "--out", "{out}"}, {"hull", "--out", "{out}"}, {"claims", "--out", "{out}"}})(c);
    if (fs::exists(c.dir / "claims.json"))
        c.write("claims.csv", rows_csv(read_json(c.dir / "claims.json")["claims"],
                                       {"id", "source", "claim", "command", "measured", "verdict", "note"}));
    return ok;
}

// --- the performance sweep --------------------------------------------------------------------

double to_ms(double v, const std::string& unit) {
    if (unit == "ns") return v * 1e-6;
    if (unit == "us") return v * 1e-3;
    if (unit == "s") return v * 1e3;
    return v;
}

const std::vector<std::string> counter_keys{
    "gflops_matmul", "gflops_full", "pct_peak", "peak_gflops", "bytes", "intensity", "scratch_mib", "extra_mib",
    // decode: the step's (ID) and the core's (ID/core), bench.decode
    "us_per_token", "tokens_per_s", "step_gbs", "cache_mib", "weight_mib", "kv_bytes_per_token", "cache_ratio_to_mha",
    "llc_mib", "llc_context", "core_us", "kv_gbs", "gflops_core", "peak_gbs", "pct_triad", "roof_gbs", "pct_roof",
    "arith_roof_gbs", "triad_alongside_gbs", "pct_triad_alongside", "roof_alongside_gbs", "pct_roof_alongside"};

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
    if (times.empty()) {
        rec["status"] = "failed";
        rec["error"] = "the harness reported no benchmark for this case";
        return;
    }
    json s = {{"time_ms", stats::median(times)},
              {"time_ms_min", *std::min_element(times.begin(), times.end())},
              {"time_ms_max", *std::max_element(times.begin(), times.end())},
              {"cpu_time_ms", stats::median(cpu)},
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
    std::vector<std::string> argv{c.bench};
    for (const auto& k : ks) argv.insert(argv.end(), {"--case", json(k).dump()});
    if (fs::exists(c.dir / "peak.json")) argv.insert(argv.end(), {"--peak", (c.dir / "peak.json").string()});
    argv.push_back("--benchmark_out=" + out.string());
    argv.push_back("--benchmark_out_format=json");
    argv.push_back("--benchmark_color=false");
    argv.push_back("--benchmark_repetitions=" + std::to_string(c.spec.repetitions));
    argv.push_back("--benchmark_min_time=" + format_number(c.spec.min_time, 3));
    if (ks.front().mode == "decode") argv.push_back("--benchmark_enable_random_interleaving=true");
    fs::remove(out);
    const auto r = run_process(argv, log.string(), log.string());
    if (r.interrupted()) throw interrupted{};
    std::vector<std::string> shown{argv.begin(), argv.end()};
    shown[0] = fs::path(c.bench).filename().string();
    json gb;
    bool parsed = false;
    std::string parse_error;
    if (fs::exists(out)) try {
            gb = json::parse(json_without_nan(read_text(out)));
            parsed = true;
        } catch (const json::exception& e) {
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
            if (r.signal)
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
/// the decode cases differing only in kv_heads share one run.
std::vector<std::vector<sweep_case>> harness_runs(const std::vector<sweep_case>& todo) {
    std::vector<std::vector<sweep_case>> runs;
    std::map<std::string, std::size_t> decode_run;
    for (const auto& k : todo) {
        if (k.mode != "decode") {
            runs.push_back({k});
            continue;
        }
        sweep_case key = k;
        key.kv_heads = 0;
        key.grids.clear();
        const auto [it, fresh] = decode_run.emplace(json(key).dump(), runs.size());
        if (fresh) runs.emplace_back();
        runs[it->second].push_back(k);
    }
    return runs;
}

outcome stage_perf(run_context& c) {
    const fs::path cases = c.dir / "cases";
    fs::create_directories(cases);
    for (const auto& e : fs::directory_iterator(cases)) // what an interrupted case left behind
        if (e.path().filename().string().rfind(".partial-", 0) == 0) fs::remove(e.path());
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
            std::string result = status == "ok" ? format_number(rec["summary"]["time_ms"].get<double>(), 3) + " ms"
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

/// cases/*.json -> perf.json and perf.csv, sorted by case (the order does not depend on the
/// order cases finished in, so an interrupted and resumed run writes the same files).
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
                               k.value("batch", 0), k.value("threads", 0), k.value("causal", false));
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
        row["error"] = r.value("error", std::string());
        rows.push_back(row);
    }
    json j = {{"unit",
               {{"time_ms", "milliseconds per call, median over repetitions"},
                {"gflops_matmul", "10^9 matmul-only FLOP/s"},
                {"gflops_full", "10^9 FLOP/s, full count"},
                {"pct_peak", "% of the measured FMA peak at the case's thread count"},
                {"bytes", "bytes moved (the harness's model)"},
                {"intensity", "FLOP per byte"},
                {"scratch_mib", "peak extra memory of the kernel, MiB"},
                {"decode", "time_ms: the whole step; core_time_ms: the attention core alone over the cache; "
                           "the other columns as attnbench-bench's context key attnbench_counters says"}}},
              {"cases", rows}};
    attn::write_atomic((dir / "perf.json").string(), j.dump(2) + "\n");
    std::vector<std::string> cols{"id",          "variant",     "mode",        "precision",   "d_model", "heads",
                                  "kv_heads",    "d_head",      "n_q",         "n_kv",        "context", "batch",
                                  "threads",     "causal",      "status",      "repetitions", "time_ms", "time_ms_min",
                                  "time_ms_max", "cpu_time_ms", "core_time_ms"};
    cols.insert(cols.end(), counter_keys.begin(), counter_keys.end());
    cols.push_back("error");
    attn::write_atomic((dir / "perf.csv").string(), rows_csv(rows, cols));
}

// ---------------------------------------------------------------------------------------------
// The stage registry: the order a report runs them in. A later experiment adds one line, e.g.
//   {"NAME", "what it shows", subcommands({{"NAME", "--out", "{out}"}})},

const std::vector<report_stage>& report_stages() {
    static const std::vector<report_stage> stages{
        {"peak", "this machine's FMA and triad ceilings (attnbench peak)", stage_peak},
        {"check", "every swept variant against the fp64 reference (attnbench check)", stage_check},
        {"params", "parameter counts, closed form vs allocated (attnbench params)",
         subcommands({{"params", "--out", "{out}"}})},
        {"flops", "FLOPs by stage and convention, crossover, KV cache (attnbench flops)",
         subcommands({{"flops", "--out", "{out}"}})},
        {"claims", "the seed documents' claims, the toy and the hull experiment (attnbench claims)", stage_claims},
        {"perf", "the performance sweep through attnbench-bench (decode cases included)", stage_perf},
    };
    return stages;
}

std::vector<std::string> stage_names() {
    std::vector<std::string> n;
    for (const auto& s : report_stages()) n.push_back(s.name);
    return n;
}

/// Re-renders the plots and report.md from what `dir` holds.
int render(const fs::path& dir) {
    aggregate_perf(dir);
    std::string python = attn::build().python;
    if (const char* env = std::getenv("ATTNBENCH_PYTHON"); env && *env) python = env;
    require(!python.empty(), "no Python with matplotlib was found at configure time (set ATTNBENCH_PYTHON)");
    const fs::path script = fs::path(attn::build().source_dir) / "experiments" / "plots" / "report.py";
    require(fs::exists(script), script.string() + ": not found (the plots script of this build's source tree)");
    fs::create_directories(dir / "logs");
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

struct report_args {
    std::string preset, sweep, out, bench;
    bool resume = false;
    std::uint64_t stop_after = 0;
};

sweep_spec load_spec(const report_args& a) {
    require(a.preset.empty() || a.sweep.empty(), "--preset and --sweep are exclusive: give one");
    if (!a.sweep.empty()) {
        std::ifstream f(a.sweep);
        require(bool(f), a.sweep + ": cannot read the sweep file");
        return parse_sweep(read_text(a.sweep), a.sweep, stage_names());
    }
    const std::string name = a.preset.empty() ? "quick" : a.preset;
    for (const auto& [n, text] : sweep_presets())
        if (n == name) return parse_sweep(text, "preset:" + n, stage_names());
    std::string known;
    for (const auto& p : sweep_presets()) known += (known.empty() ? "" : ", ") + p.first;
    throw error("unknown preset '" + name + "' (known: " + known + ")");
}

void report(const report_args& a, const std::vector<std::string>& command) {
    run_context c;
    c.threads = omp_get_max_threads();
    c.self = self_exe();
    c.bench = a.bench.empty() ? (fs::path(c.self).parent_path() / "attnbench-bench").string() : a.bench;
    c.stop_after = a.stop_after;
    const bool explicit_spec = !a.preset.empty() || !a.sweep.empty();
    if (a.resume) {
        require(!a.out.empty(), "--resume needs --out DIR, the run to resume");
        c.dir = a.out;
        require(fs::exists(c.dir / "sweep.toml"), (c.dir / "sweep.toml").string() + ": not found; nothing to resume");
        const json run = read_json(c.dir / "run.json");
        c.spec = parse_sweep(read_text(c.dir / "sweep.toml"), (c.dir / "sweep.toml").string(), stage_names());
        c.spec.source = run.value("sweep_source", c.spec.source);
        if (explicit_spec)
            require(load_spec(a).text == c.spec.text, "the sweep given differs from " +
                                                          (c.dir / "sweep.toml").string() +
                                                          ", the one this run started with");
    } else {
        c.spec = load_spec(a);
        c.dir =
            a.out.empty() ? fs::path("results") / (c.spec.name + "-" + utc_stamp("%Y%m%d-%H%M%S")) : fs::path(a.out);
        require(!fs::exists(c.dir / "run.json"),
                c.dir.string() + " holds a run already; pass --resume to finish it, or another --out");
    }
    c.cases = expand(c.spec.grids, c.threads);
    fs::create_directories(c.dir / "stages");
    if (!a.resume) {
        c.write("sweep.toml", c.spec.text);
        const json run = {{"run_id", c.dir.filename().string()},
                          {"sweep_source", c.spec.source},
                          {"preset", c.spec.name},
                          {"command", command},
                          {"started_utc", utc_stamp("%Y-%m-%dT%H:%M:%SZ")},
                          {"stages", c.spec.stages},
                          {"cases", c.cases.size()}};
        c.write("run.json", run.dump(2) + "\n");
        const auto meta = collect_metadata({c.spec.seed, c.threads, c.spec.name});
        json m = metadata_json(meta);
        m["sweep"] = c.spec.source;
        m["run_id"] = c.dir.filename().string();
        c.write("metadata.json", m.dump(2) + "\n");
        text_table t({"key", "value"});
        for (const auto& [k, v] : m.items()) t.add_row({k, v.get<std::string>()});
        c.write("metadata.csv", t.csv());
    }
    std::fprintf(stderr, "attnbench report: %s (%s), %zu performance cases -> %s\n", c.spec.name.c_str(),
                 c.spec.source.c_str(), c.cases.size(), c.dir.string().c_str());
    const auto start = std::chrono::steady_clock::now();
    try {
        for (const auto& st : report_stages()) {
            if (std::find(c.spec.stages.begin(), c.spec.stages.end(), st.name) == c.spec.stages.end()) continue;
            const fs::path marker = c.dir / "stages" / (st.name + ".json");
            if (fs::exists(marker)) {
                std::fprintf(stderr, "%-7s done already (resumed)\n", st.name.c_str());
                continue;
            }
            std::fprintf(stderr, "%-7s %s\n", st.name.c_str(), st.description.c_str());
            const auto t0 = std::chrono::steady_clock::now();
            const outcome result = st.run(c);
            if (result == outcome::undone) continue;
            const bool ok = result == outcome::ok;
            const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            const json m = {
                {"stage", st.name}, {"ok", ok}, {"seconds", secs}, {"finished_utc", utc_stamp("%Y-%m-%dT%H:%M:%SZ")}};
            c.write("stages/" + st.name + ".json", m.dump(2) + "\n");
            std::fprintf(stderr, "%-7s %s in %.1f s\n", st.name.c_str(), ok ? "done" : "FAILED (recorded; going on)",
                         secs);
        }
    } catch (const interrupted&) {
        std::fprintf(stderr,
                     "\nattnbench report: interrupted; finished pieces are kept. Resume with:\n"
                     "  attnbench report --resume --out %s\n",
                     c.dir.string().c_str());
        throw exit_status{130};
    }
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::fprintf(stderr, "stages finished in %s\n", clock_text(secs).c_str());
    const int rc = render(c.dir);
    if (rc) throw exit_status{rc};
    std::printf("%s\n", (c.dir / "report.md").string().c_str());
}

} // namespace

void add_report(CLI::App& app) {
    auto a = std::make_shared<report_args>();
    auto* cmd =
        app.add_subcommand("report", "the main job: every stage of a sweep, plots and report.md in results/<run-id>/");
    cmd->add_option("--preset", a->preset, "an embedded sweep: quick (default, minutes) or full (hours)");
    cmd->add_option("--sweep", a->sweep, "a sweep file (TOML; see experiments/sweeps/)")->option_text("FILE");
    cmd->add_option("--out", a->out, "the run directory (default results/<name>-<UTC date>)")->option_text("DIR");
    cmd->add_flag("--resume", a->resume, "finish the run in --out DIR: skip the stages and cases done");
    cmd->add_option("--bench", a->bench, "the harness to run (default: attnbench-bench next to this binary)")
        ->option_text("PATH");
    cmd->add_option("--stop-after", a->stop_after, "testing only: die (SIGKILL) after N performance cases")
        ->option_text("N");
    cmd->callback([a] {
        std::vector<std::string> command{"attnbench", "report"};
        if (!a->preset.empty()) command.insert(command.end(), {"--preset", a->preset});
        if (!a->sweep.empty()) command.insert(command.end(), {"--sweep", a->sweep});
        if (!a->out.empty()) command.insert(command.end(), {"--out", a->out});
        report(*a, command);
    });

    auto dir = std::make_shared<std::string>();
    auto* plot = app.add_subcommand("plot", "re-render the plots and report.md of a stored run (runs nothing)");
    plot->add_option("dir", *dir, "the run directory, results/<run-id>")->required();
    plot->callback([dir] {
        require(fs::exists(fs::path(*dir) / "run.json"), *dir + ": not a report run (no run.json)");
        if (const int rc = render(*dir)) throw exit_status{rc};
    });
}

} // namespace attn::cli
