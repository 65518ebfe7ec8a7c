// attnbench report's performance sweep: the cases still to do go through attnbench-bench, one
// harness process per shape (our variants of it together; decode: the G of one batch and L),
// with the shape's peers beside it in rounds (ours, peer, ours, peer ...), each case's record
// written as one file in cases/ as its shape finishes: its times, Google Benchmark's median of
// each round, and every counter of attn.figures' table (the figures derived from the medians by
// the same C++ for ours and the peers: report_summary.cpp). The render step (report_render.cpp)
// gathers them into perf.json and perf.csv.
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
/// so the machine's drift hits both sides (the peers judged in the first round only). A peer's
/// harness runs no probe: each round of a peer's case is given the probes of our harness's run
/// just before it in the same round (the FMA probe's ratio to peak.json: the ceiling of those
/// minutes), marked "from" that run. One record per case to store: status ok, failed (a case's
/// error, or a run that died) or interrupted.
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
    for (int round = 0; round < rounds; ++round) {
        std::vector<json> our_probes; // this round's, from our harness's run
        for (const auto& run : runs) {
            const bool peer = is_peer(run.front().variant);
            std::vector<std::string> argv = peer ? peer_command(c) : std::vector<std::string>{c.bench};
            if (peer && round > 0) argv.push_back("--no-judge");
            done.push_back(run_harness(c, run, argv));
            if (!peer)
                for (json b : done.back().of_case[run.front().id()])
                    if (b.value("part", std::string()) == enum_name(part::probe)) {
                        b["from"] = "attnbench-bench, the same round";
                        our_probes.push_back(b);
                    }
            for (const auto& k : run) {
                benchmarks[k.id()].push_back(done.back().of_case[k.id()]);
                if (peer)
                    benchmarks[k.id()].back().insert(benchmarks[k.id()].back().end(), our_probes.begin(),
                                                     our_probes.end());
                last_run[k.id()] = &done.back();
            }
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
