// Sweep files: what `attnbench report` runs, as a TOML file a researcher commits next to their
// paper (experiments/sweeps/*.toml are the embedded presets). Read with toml++; every unknown
// key, wrong type and impossible combination is one attn::error "file:line: key 'x' ...".
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace attn::cli {

/// One cross product of the performance sweep ([[perf.grid]], defaults from [perf]).
struct sweep_grid {
    std::string name;
    std::vector<std::string> variants, modes;
    std::vector<std::size_t> d_model, heads, kv_heads, seq, batch, threads, context;
    std::vector<bool> causal;
};

/// The grid `check` runs on ([check]); empty lists mean check's own embedded grid.
struct check_grid {
    std::vector<std::size_t> d_model, heads, kv_heads, seq, batch;
    std::string mode = "both";
};

/// A whole sweep file, validated.
struct sweep_spec {
    std::string source;          ///< the file name, or "preset:quick"
    std::string text;            ///< the file's text, stored with the run
    std::string name;            ///< `name`, e.g. "quick"
    std::string description;     ///< `description`
    std::uint64_t seed = 1;      ///< `seed`: inputs and weights of every stage
    std::vector<std::string> stages;
    int peak_repetitions = 5;    ///< [peak] repetitions
    check_grid check;            ///< [check]
    int repetitions = 3;         ///< [perf] repetitions (Google Benchmark's, for medians)
    double min_time = 0.1;       ///< [perf] min_time in seconds per repetition
    std::vector<sweep_grid> grids;
};

/// One case of the performance sweep: one harness run.
struct bench_case {
    std::vector<std::string> grids; ///< the grids that asked for it (a case is run once)
    std::string variant, mode;
    std::size_t d_model = 0, heads = 0, kv_heads = 0, d_head = 0, seq = 0, batch = 1, threads = 1, context = 0;
    bool causal = false;

    /// Stable and file-name safe: "core-simd-d512-h8-g8-n1024-b1-t2" (+ "-causal", "-ctx4096").
    std::string id() const;
};

/// Parses and validates `text`; `source` names it in errors ("quick.toml:12: key 'heads' ...").
/// `known_stages` and `known_variants` are what the binary offers.
sweep_spec parse_sweep(const std::string& text, const std::string& source,
                       const std::vector<std::string>& known_stages,
                       const std::vector<std::string>& known_variants);

/// Every case of the sweep, grid by grid, without duplicates; threads 0 means all logical CPUs.
/// The `single_threaded` variants run at 1 thread whatever the grid asks (as the harness does).
std::vector<bench_case> expand(const sweep_spec& s, int all_threads, const std::vector<std::string>& single_threaded = {});

/// The embedded presets: names and texts (experiments/sweeps/NAME.toml at configure time).
const std::vector<std::pair<std::string, std::string>>& sweep_presets();

} // namespace attn::cli
