// attnbench report: the main job. Runs the stages a sweep file names (environment and peak,
// check, params, flops, claims, the performance sweep through attnbench-bench, and whatever
// later experiments register below) into results/<run-id>/, each finished piece written
// atomically as it finishes, then renders the plots and report.md (experiments/plots/report.py).
// attnbench plot DIR re-renders plots and report.md from what is stored.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <memory>
#include <set>
#include <string>
#include <vector>
#include <omp.h>
#include <nlohmann/json.hpp>
#include "commands.hpp"
#include "numbers.hpp"
#include "output.hpp"
#include "presets.hpp"
#include "report.hpp"
import attn.shard;

namespace attn::cli::reporting {

std::string utc_stamp(const char* format) {
    const std::time_t t = std::time(nullptr);
    std::tm tm{};
    gmtime_r(&t, &tm);
    char buf[64];
    std::strftime(buf, sizeof buf, format, &tm);
    return buf;
}

std::string clock_text(double seconds, bool hours) {
    const long s = long(seconds + 0.5);
    char buf[32];
    if (s >= 3600 || hours)
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

std::string window_list(const std::vector<std::size_t>& w) {
    std::string s;
    for (auto x : w) s += (s.empty() ? "" : ",") + std::to_string(x);
    return s;
}

/// --window: the windows of every grid whose cases are all causal, in place of the sweep's own;
/// a grid with non-causal cases keeps its own (a window needs the causal mask). Says in one line
/// which grids it reached; a sweep with none is refused. The windows go into run.json, so a
/// resumed run applies them again.
void apply_window(sweep_spec& spec, const std::vector<std::size_t>& window, bool quiet) {
    if (window.empty()) return;
    std::string took, kept;
    for (auto& g : spec.grids) {
        std::string& names = g.causal_only() ? took : kept;
        names += (names.empty() ? "" : ", ") + g.name;
        if (g.causal_only()) g.window = window;
    }
    require(!took.empty(), "--window " + window_list(window) + ": no grid of " + spec.source +
                               " has only causal cases, and a window needs the causal mask (a sweep file's grid "
                               "takes causal = [true])");
    if (!quiet)
        std::fprintf(stderr, "--window %s: grids %s%s\n", window_list(window).c_str(), took.c_str(),
                     kept.empty() ? "" : ("; not " + kept + " (non-causal cases)").c_str());
}

} // namespace attn::cli::reporting

namespace attn::cli {
namespace {

using namespace reporting;

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
        if (!is_peer(k.variant) && std::find(v.begin(), v.end(), k.variant) == v.end()) v.push_back(k.variant);
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
                                  std::string(enum_name(c.spec.check.mode))};
    // the whole sweep's variants, also on a shard: every shard's check is the same check
    for (const auto& v : swept_variants(expand(c.spec.grids, c.threads))) args.insert(args.end(), {"--variant", v});
    auto grid = [&](const char* flag, const std::vector<std::size_t>& xs) {
        for (auto x : xs) args.insert(args.end(), {flag, std::to_string(x)});
    };
    grid("--d-model", c.spec.check.d_model);
    grid("--heads", c.spec.check.heads);
    grid("--kv-heads", c.spec.check.kv_heads);
    grid("--seq", c.spec.check.seq);
    grid("--batch", c.spec.check.batch);
    for (const auto& p : c.spec.check.precisions) args.insert(args.end(), {"--precision", p});
    const auto r = c.self_run(args, "check");
    // 0: all pass; 1: something failed (recorded in check.json; those variants are not timed);
    // anything else, or no check.json: check itself did not finish
    if ((r.exit_code != 0 && r.exit_code != 1) || !fs::exists(c.dir / "check.json")) {
        const auto log = c.logs() / "check.err";
        std::fprintf(stderr, "check: did not finish (%s%s; see %s): %s\n", exit_text(r).c_str(),
                     r.exit_code == 1 ? ", no check.json" : "", log.string().c_str(), last_line(log).c_str());
        return outcome::failed;
    }
    return r.exit_code == 0 ? outcome::ok : outcome::failed;
}

outcome stage_claims(run_context& c) {
    const outcome ok =
        subcommands({{"toy", "--out", "{out}"}, {"hull", "--out", "{out}"}, {"claims", "--out", "{out}"}})(c);
    if (fs::exists(c.dir / "claims.json"))
        c.write("claims.csv", rows_csv(read_json(c.dir / "claims.json")["claims"],
                                       {"id", "source", "claim", "command", "measured", "verdict", "note"}));
    return ok;
}

// ---------------------------------------------------------------------------------------------
// The stage registry: the order a report runs them in. A later experiment adds one line, e.g.
//   {"NAME", "what it shows", subcommands({{"NAME", "--out", "{out}"}})},

const std::vector<report_stage>& report_stages() {
    static const std::vector<report_stage> stages{
        {"peak", "this machine's FMA and triad ceilings (attnbench peak)", stage_peak},
        {"check", "every swept variant against the fp64 reference (attnbench check)", stage_check},
        {"params", "parameter counts, closed form vs allocated; MLA's configurations (attnbench params)",
         subcommands({{"params", "--out", "{out}"}, {"params", "--family", "mla", "--out", "{out}/latent"}})},
        {"flops", "FLOPs by stage and convention, crossover, KV cache (attnbench flops)",
         subcommands({{"flops", "--out", "{out}"}})},
        {"claims", "the seed documents' claims, the toy and the hull experiment (attnbench claims)", stage_claims},
        {"perf", "the performance sweep through attnbench-bench (decode cases included)", stage_perf},
    };
    return stages;
}

struct report_args {
    std::string preset, sweep, out, bench, shard;
    std::vector<std::size_t> window; ///< --window: every causal-only grid's windows
    bool resume = false, yes = false;
    std::uint64_t stop_after = 0;
};

sweep_spec load_spec(const report_args& a) {
    require(a.preset.empty() || a.sweep.empty(), "--preset and --sweep are exclusive: give one");
    if (!a.sweep.empty()) {
        // a directory opens as an empty stream and an empty file parses as the defaults: either
        // would start the default run under a name the user did not mean
        std::error_code ec;
        require(fs::is_regular_file(a.sweep, ec), a.sweep + ": not a sweep file (" +
                                                      (fs::is_directory(a.sweep, ec) ? "a directory"
                                                       : fs::exists(a.sweep, ec)     ? "not a regular file"
                                                                                     : "no such file") +
                                                      ")");
        const std::string text = read_text(a.sweep);
        require(text.find_first_not_of(" \t\r\n") != std::string::npos,
                a.sweep + ": the sweep file is empty (the embedded presets are --preset quick and --preset full)");
        return parse_sweep(text, a.sweep, stage_names());
    }
    const std::string name = a.preset.empty() ? "quick" : a.preset;
    for (const auto& [n, text] : sweep_presets())
        if (n == name) return parse_sweep(text, "preset:" + n, stage_names());
    std::string known;
    for (const auto& p : sweep_presets()) known += (known.empty() ? "" : ", ") + p.first;
    throw error("unknown preset '" + name + "' (known: " + known + ")");
}

/// Sweeps above this many performance cases start only with --yes (expand refuses more than
/// attn::max_cases regardless).
constexpr std::size_t confirm_cases = 10000;

/// Refuses a sweep too large to start unasked: one line with its case count and the least time
/// its timing alone takes (repetitions x min_time per case).
void confirm_size(const sweep_spec& spec, int threads, bool yes) {
    const std::size_t bound = case_bound(spec.grids);
    require(bound <= max_cases,
            spec.source + ": the grids ask for " +
                (bound == std::numeric_limits<std::size_t>::max() ? std::string("more than 2^64") : grouped(bound)) +
                " cases (the product of their lists' lengths), more than the " + grouped(max_cases) +
                " one run may hold: split the sweep");
    const std::size_t n = expand(spec.grids, threads).size();
    const double seconds = double(n) * spec.repetitions * spec.min_time;
    require(yes || n <= confirm_cases || std::find(spec.stages.begin(), spec.stages.end(), "perf") == spec.stages.end(),
            spec.source + ": " + grouped(n) + " performance cases, at least " + clock_text(seconds, true) +
                " (h:mm:ss) of timing alone (" + std::to_string(spec.repetitions) + " repetitions x " +
                format_number(spec.min_time, 3) + " s each); more than " + grouped(confirm_cases) +
                ": pass --yes to start it");
}

void report(const report_args& a, const std::vector<std::string>& command) {
    forward_signals(); // a stopped report stops its child and keeps the finished pieces
    run_context c;
    c.threads = omp_get_max_threads();
    c.self = self_exe();
    c.bench = a.bench.empty() ? (fs::path(c.self).parent_path() / "attnbench-bench").string() : a.bench;
    c.stop_after = a.stop_after;
    const bool explicit_spec = !a.preset.empty() || !a.sweep.empty();
    if (!a.shard.empty()) parse_shard(a.shard); // a malformed --shard is refused before the folder is made
    if (a.resume) {
        require(!a.out.empty(), "--resume needs --out DIR, the run to resume");
        c.dir = a.out;
        lock_run_dir(c.dir.string());
        require(fs::exists(c.dir / "sweep.toml"), (c.dir / "sweep.toml").string() + ": not found; nothing to resume");
        const json run = read_json(c.dir / "run.json");
        c.spec = parse_sweep(read_text(c.dir / "sweep.toml"), (c.dir / "sweep.toml").string(), stage_names());
        c.spec.source = run.value("sweep_source", c.spec.source);
        if (explicit_spec)
            require(load_spec(a).text == c.spec.text, "the sweep given differs from " +
                                                          (c.dir / "sweep.toml").string() +
                                                          ", the one this run started with");
        const auto window = run.value("window", std::vector<std::size_t>{});
        require(a.window.empty() || a.window == window,
                "--window " + window_list(a.window) + " differs from the run's (" +
                    (window.empty() ? std::string("none given") : window_list(window)) + ", run.json)");
        apply_window(c.spec, window);
    } else {
        c.spec = load_spec(a);
        apply_window(c.spec, a.window);
        confirm_size(c.spec, c.threads, a.yes);
        c.dir =
            a.out.empty() ? fs::path("results") / (c.spec.name + "-" + utc_stamp("%Y%m%d-%H%M%S")) : fs::path(a.out);
        lock_run_dir(c.dir.string()); // one run per folder, before anything in it is read or written
        require(!fs::exists(c.dir / "run.json"),
                c.dir.string() + " holds a run already; pass --resume to finish it, or another --out");
    }
    c.cases = expand(c.spec.grids, c.threads);
    add_peers(c);
    const bool sharded = select_shard(c, a.shard, a.resume);
    fs::create_directories(c.dir / "stages");
    if (!a.resume) {
        c.write("sweep.toml", c.spec.text);
        const json run = {{"run_id", c.dir.filename().string()},
                          {"sweep_source", c.spec.source},
                          {"preset", c.spec.name},
                          {"command", command},
                          {"window", a.window},
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
    if (sharded) { // rendered once, from the merge of every shard
        std::fprintf(stderr, "shard done; merge the shards with: attnbench merge OUT SHARD_DIR...\n");
        std::printf("%s\n", c.dir.string().c_str());
        return;
    }
    const int rc = render(c.dir, &c.spec); // the sweep as read at the start, not read again
    if (rc) throw exit_status{rc};
    std::printf("%s\n", (c.dir / "report.md").string().c_str());
}

} // namespace

std::vector<std::string> reporting::stage_names() {
    std::vector<std::string> n;
    for (const auto& s : report_stages()) n.push_back(s.name);
    return n;
}

void add_report(CLI::App& app) {
    auto a = std::make_shared<report_args>();
    auto* cmd =
        app.add_subcommand("report", "the main job: every stage of a sweep, plots and report.md in results/<run-id>/");
    std::string names; // the embedded presets, as experiments/sweeps/ holds them at configure time
    for (const auto& [name, text] : sweep_presets()) names += (names.empty() ? "" : ", ") + name;
    cmd->add_option("--preset", a->preset,
                    "an embedded sweep (experiments/sweeps/NAME.toml): " + names + "; quick is the default (minutes)");
    cmd->add_option("--sweep", a->sweep, "a sweep file (TOML; see experiments/sweeps/)")->option_text("FILE");
    cmd->add_option("--out", a->out, "the run directory (default results/<name>-<UTC date>)")
        ->option_text("DIR")
        ->check(output_dir());
    cmd->add_option("--window", a->window,
                    "sliding windows W, comma-separated (0: none), in place of the sweep's in every grid whose "
                    "cases are all causal (decode grids included)")
        ->delimiter(',')
        ->check(window_in(max_window));
    cmd->add_flag("--resume", a->resume, "finish the run in --out DIR: skip the stages and cases done");
    cmd->add_flag("--yes", a->yes, "start a sweep of more than 10,000 performance cases");
    cmd->add_option("--shard", a->shard, "run only shard I of N of the sweep's cases (attnbench merge joins them)")
        ->option_text("I/N");
    cmd->add_option("--bench", a->bench, "the harness to run (default: attnbench-bench next to this binary)")
        ->option_text("PATH");
    cmd->add_option("--stop-after", a->stop_after, "testing only: die (SIGKILL) after N performance cases")
        ->option_text("N");
    cmd->callback([a] {
        std::vector<std::string> command{"attnbench", "report"};
        if (!a->preset.empty()) command.insert(command.end(), {"--preset", a->preset});
        if (!a->sweep.empty()) command.insert(command.end(), {"--sweep", a->sweep});
        if (!a->out.empty()) command.insert(command.end(), {"--out", a->out});
        if (!a->shard.empty()) command.insert(command.end(), {"--shard", a->shard});
        if (!a->window.empty()) command.insert(command.end(), {"--window", window_list(a->window)});
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
