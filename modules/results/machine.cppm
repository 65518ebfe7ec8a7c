// attn.results:machine -- the machine and build a run ran on, as ordered key/value strings
// (and as nlohmann JSON for the files that carry them), and the process's resident memory from /proc.
module;
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>
#include <nlohmann/json.hpp>
export module attn.results:machine;

export namespace attn {

/// Machine facts that sizing decisions need as numbers (read once, from /proc and /sys).
/// A size is 0 when the system does not report it.
struct machine_info {
    std::string cpu_model;
    int logical_cores = 0;
    std::size_t l1d_bytes = 0, l2_bytes = 0, l3_bytes = 0; ///< per cache instance, as cpu0 sees it
    std::size_t memory_bytes = 0;                          ///< MemTotal
};

/// The machine this process runs on; read on the first call, then cached.
const machine_info& machine();

/// How this binary was built. Defined in the build folder's generated/build_info.cpp (from
/// modules/results/build_info.cpp.in, at configure time), its commit in generated/build_commit.cpp
/// (modules/results/commit.cmake, at every build), so a new commit recompiles that file alone.
struct build_info {
    const char* commit;         ///< HEAD at build time (+"-dirty" if tracked files differ), or "unknown"
    const char* compiler;       ///< CMake's compiler id and version
    const char* flags;          ///< CMAKE_CXX_FLAGS, the build type's flags and OpenMP's
    const char* build_type;     ///< CMAKE_BUILD_TYPE
    const char* python;         ///< the project's Python (plots, the report's render step)
    const char* source_dir;     ///< the source tree (experiments/plots/ lives there)
    const char* gbench_compare; ///< Google Benchmark's compare.py (`attnbench compare` runs it)
};
const build_info& build();

/// A field of /proc/self/status in KiB ("VmRSS", "VmHWM"); -1 when unreadable.
long long proc_status_kib(const std::string& key);

/// Resets the process's peak resident set (VmHWM) to its current one (/proc/self/clear_refs);
/// false when the kernel refuses.
bool reset_peak_rss();

/// What the caller knows about the run and the machine does not.
struct run_info {
    std::uint64_t seed = 0;
    int threads = 1;
    std::string preset = "none";
};

/// Ordered (key, value) strings; keys are snake_case and stable, values are never empty
/// ("unknown" when the system does not say).
using metadata = std::vector<std::pair<std::string, std::string>>;

/// The keys collect_metadata always fills, in order.
const std::vector<std::string>& metadata_keys();

/// Machine, build and run metadata: cpu_model, cpu_simd_flags, bf16_path, bf16_dot_over_fma,
/// logical_cores, simd, l1d_cache,
/// l2_cache, l3_cache, memory_total, transparent_hugepages, os, kernel, hostname, compiler, flags, build_type, blas,
/// openmp_max_threads, commit, date_utc, load_average, seed, threads, preset. Machine and build
/// facts are collected once per process; date_utc and load_average (1, 5, 15 minutes: how busy
/// the shared machine was) are read at the call.
metadata collect_metadata(const run_info& run);

/// The value for `key`, or "" when absent.
std::string lookup(const metadata& m, const std::string& key);

/// The metadata as one JSON object of strings, keys in order.
nlohmann::ordered_json metadata_json(const metadata& m);

/// metadata_json as text; `indent` spaces per level (0: one line).
std::string to_json(const metadata& m, int indent = 2);

/// The metadata as a two-column text table (key, value).
std::string render_metadata(const metadata& m);

} // namespace attn
