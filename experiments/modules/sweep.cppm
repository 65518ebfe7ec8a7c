// attn.sweep -- sweep files: what `attnbench report` runs, as a TOML file a researcher commits
// next to their paper (experiments/sweeps/*.toml are the embedded presets). Read with toml++;
// every unknown key, wrong type and impossible combination is one attn::error
// "file:line: key 'x' ...". The grids it holds become cases through attn::expand.
module;
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>
export module attn.sweep;
export import attn.cases;
export import attn.peers;

export namespace attn {

/// The grid `check` runs on ([check]); empty lists mean check's own embedded grid.
struct check_grid {
    std::vector<std::size_t> d_model, heads, kv_heads, seq, batch;
    check_modes mode = check_modes::both;
    /// `attnbench check --precision` names (f32, f64, bf16, f16, int8, all); empty: check's own
    /// (f32, f64). A sweep that times 16-bit kernels (the GPU's) checks them in their formats.
    std::vector<std::string> precisions;
};

/// A whole sweep file, validated.
struct sweep_spec {
    std::string source;      ///< the file name, or "preset:quick"
    std::string text;        ///< the file's text, stored with the run
    std::string name;        ///< `name`, e.g. "quick"
    std::string description; ///< `description`
    std::uint64_t seed = 1;  ///< `seed`: inputs and weights of every stage
    std::vector<std::string> stages;
    int peak_repetitions = 5;       ///< [peak] repetitions
    check_grid check;               ///< [check]
    int repetitions = 3;            ///< [perf] repetitions (Google Benchmark's, for medians)
    double min_time = 0.1;          ///< [perf] min_time in seconds per repetition
    std::vector<attn::grid> grids;  ///< [[perf.grid]], defaults from [perf]; attn::expand makes the cases
    std::vector<std::string> peers; ///< [peers] providers (attn.peers): run beside the grids' cases
    /// [peers] rounds: a shape with peers runs ours, then each peer, this many times over
    /// (`repetitions` each time), so drift hits both sides; medians over the rounds
    int peer_rounds = 3;
};

/// Parses and validates `text`; `source` names it in errors ("quick.toml:12: key 'heads' ...").
/// `known_stages` are what the binary offers; variants are checked against attn::select_variants.
sweep_spec parse_sweep(const std::string& text, const std::string& source,
                       const std::vector<std::string>& known_stages);

} // namespace attn
