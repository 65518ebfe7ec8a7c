// What the parts of `attnbench report` share: report.cpp (the stages, their registry and the
// command), report_perf.cpp (the performance sweep through attnbench-bench) and
// report_render.cpp (perf.json and the plots from what a run stored). Include it last: it
// imports attn.sweep and attn.results after its own #includes.
#pragma once
#include <cstdint>
#include <filesystem>
#include <set>
#include <string>
#include <vector>
#include <nlohmann/json.hpp>
#include "process.hpp"
import attn.sweep;
import attn.results;
import attn.peak;
import attn.figures; // part (label_info)

namespace attn::cli::reporting {

namespace fs = std::filesystem;
using json = nlohmann::ordered_json;

/// Thrown when a child died of SIGINT/SIGTERM/SIGKILL: this run is being stopped.
struct interrupted {};

std::string utc_stamp(const char* format);
/// Seconds as m:ss, or h:mm:ss from an hour on or when `hours` (a text that names its format).
std::string clock_text(double seconds, bool hours = false);
/// The last non-empty line of a file (a child's error message), or "".
std::string last_line(const fs::path& p);

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

/// The names of the report's stages, in the order it runs them.
std::vector<std::string> stage_names();

/// --shard I/N (or a resumed shard folder): keeps the shard's cases and stages in `c` and, for a
/// new run, records shard.json (shard.cpp). False, and nothing changed, for an unsharded run.
bool select_shard(run_context& c, const std::string& shard_arg, bool resume);

/// A merge over several machines: its per-machine run folders (merge.cpp); none otherwise.
std::vector<fs::path> machine_folders(const fs::path& dir);

/// Variants with at least one failed check case (check.json of this run; none if absent).
std::set<std::string> failed_check(const fs::path& dir);

/// The performance sweep: the cases not done yet through attnbench-bench, one file per case.
outcome stage_perf(run_context& c);

/// The [peers] providers that are installed join c.cases (attn::peer_cases); peers.json says
/// which ran and how to install the others (report_peers.cpp).
void add_peers(run_context& c);
/// How a peer case runs: the peer harness in the project's Python, given this binary.
std::vector<std::string> peer_command(const run_context& c);

/// The run's measured peak (peak.json), where the peak stage stored one.
struct peak_file {
    bool present = false;
    peak::ceilings ceilings;
};
inline peak_file read_peak(const fs::path& dir) {
    peak_file p;
    if (fs::exists(dir / "peak.json")) {
        p.ceilings = peak::read_ceilings((dir / "peak.json").string());
        p.present = true;
    }
    return p;
}

/// A benchmark's label, parsed once: its part, its case's id (none for a probe or an unreadable
/// label), and a probe's thread count.
struct label_info {
    attn::part which = attn::part::run;
    std::string case_id;
    int threads = 0;
};
label_info read_label(const json& b);

/// A case record's summary over its rounds (report_summary.cpp): the medians of its times (Google
/// Benchmark's median aggregates), every counter of attn.figures' table, the rounds' spread.
void summarise(json& rec, const sweep_case& k, const std::vector<std::vector<json>>& rounds, const peak_file& peak);

/// --window: the windows of every grid whose cases are all causal, in place of the sweep's own
/// (report.cpp); `quiet`: without the line saying which grids it reached.
void apply_window(sweep_spec& spec, const std::vector<std::size_t>& window, bool quiet = false);

/// cases/*.json -> perf.json and perf.csv, sorted by case (the order does not depend on the
/// order cases finished in, so an interrupted and resumed run writes the same files).
void aggregate_perf(const fs::path& dir, const sweep_spec* spec = nullptr);

/// The render step: aggregate_perf, then the plots and report.md from what `dir` holds (each
/// machine's folder first for a merge). 0, or 1 when the plots script failed.
int render(const fs::path& dir, const sweep_spec* spec = nullptr);

} // namespace attn::cli::reporting
