// attn.results -- what every run writes next to its numbers: files written atomically, the
// machine and build it ran on (as plain key/value strings, so importers need no JSON headers),
// and a small text-table printer for readable output.
module;
#include <cstddef>
#include <cstdio>
#include <initializer_list>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>
export module attn.results;
export import attn.core;

export namespace attn {

/// Writes `text` to `path` through a temporary file in the same directory renamed into place,
/// so `path` holds either its old content or all of `text`, never part of it. Creates parent
/// directories. Throws attn::error naming `path` on failure (and leaves no temporary behind).
void write_atomic(const std::string& path, const std::string& text);

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

/// Machine, build and run metadata: cpu_model, cpu_simd_flags, logical_cores, simd, l1d_cache,
/// l2_cache, l3_cache, memory_total, transparent_hugepages, os, kernel, hostname, compiler, flags, build_type, blas,
/// openmp_max_threads, commit, date_utc, load_average, seed, threads, preset. Machine and build
/// facts are collected once per process; date_utc and load_average (1, 5, 15 minutes: how busy
/// the shared machine was) are read at the call.
metadata collect_metadata(const run_info& run);

/// The value for `key`, or "" when absent.
std::string lookup(const metadata& m, const std::string& key);

/// A JSON string literal (quotes included) for `s`.
std::string json_quote(const std::string& s);

/// The metadata as one JSON object of strings, keys in order; `indent` spaces per level (0: one line).
std::string to_json(const metadata& m, int indent = 2);

/// "1.50 GiB", "32 KiB", "512 B".
std::string format_bytes(std::size_t bytes);

/// A fixed-point number with `precision` digits after the point ("nan"/"inf" spelled out).
std::string format_number(double value, int precision = 2);

/// An integer with thousands separators: 1048576 -> "1,048,576".
std::string grouped(std::uint64_t v);

/// One column of a text_table: a header, the unit its values are in ("" for none), and
/// whether values are numbers (right-aligned) or text (left-aligned).
struct column {
    std::string header;
    std::string unit;
    bool numeric = true;
};

/// A plain-text table for terminals and logs: a header line with units in brackets, a rule,
/// then rows; numeric columns right-aligned. The same rows also render as CSV.
class text_table {
public:
    explicit text_table(std::vector<column> columns);
    /// Plain headers: the first column text (left-aligned), the others numbers, no units.
    explicit text_table(const std::vector<std::string>& headers);
    text_table(std::initializer_list<std::string> headers) : text_table(std::vector<std::string>(headers)) {}
    /// Adds one row; throws attn::error when it does not have one cell per column.
    void add_row(std::vector<std::string> cells);
    std::string render() const;
    void print(std::FILE* f = stdout) const;
    /// The same table as CSV: headers (units in brackets), then rows; a cell is quoted when it
    /// holds a comma, quote or newline, and grouped integers ("1,048,576") are written plain.
    std::string csv() const;

private:
    std::vector<column> columns_;
    std::vector<std::vector<std::string>> rows_;
};

/// The metadata as a two-column text table (key, value).
std::string render_metadata(const metadata& m);

} // namespace attn
