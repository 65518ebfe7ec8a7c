// attn.peak -- this machine's measured ceilings, the roofline every "% of peak" refers to:
// fp32 FMA throughput (the batch and FMA instruction attn.kernels:isa picks, enough independent
// accumulators to hide the FMA latency on every FMA port), STREAM-style triad bandwidth and a
// read-only stream's bandwidth over arrays far larger than the last-level cache, each on one
// thread and on all threads; and, on
// all threads, a streaming probe that does a fixed number of FMAs per byte read from DRAM, which
// shows where between the two ceilings this machine's roofline min(triad, FMA / intensity) is
// reached.
// Units: modules/results/peak.cpp (measure, options), peak/fma.cpp, peak/triad.cpp, peak/stream.cpp (the
// probes), peak/sampler.cpp (other processes' CPU load), peak/json.cpp; peak/probe.cppm is the
// internal partition attn.peak:probe they share.
module;
#include <cstddef>
#include <memory>
#include <string>
#include <vector>
export module attn.peak;
export import attn.core;

export namespace attn::peak {

/// How long and how big to measure. The defaults are what `attnbench peak` uses.
struct options {
    int threads = 0;             ///< the all-threads runs; 0: omp_get_max_threads()
    int repetitions = 11;        ///< timed repetitions per figure, after one untimed warm-up
    double fma_seconds = 0.1;    ///< target length of one FMA repetition
    int accumulators = 0;        ///< FMA chains per thread: 8, 12 or 16; 0: the fastest of those
    std::size_t triad_bytes = 0; ///< bytes per triad array; 0: max(4 x L3, 64 MiB)
};

/// Repetitions of one measurement, as rates (higher is better).
struct stats {
    double median = 0, best = 0, worst = 0;
    std::vector<double> samples; ///< in the order measured
    /// CPUs that other processes kept busy meanwhile, on average (from /proc/stat minus this
    /// process); well above 0 means the figure is low because the machine was shared. -1: unknown.
    double others_busy_cpus = -1;
};

/// One point of the streaming probe: every batch read once from arrays far larger than the
/// last-level cache feeds `fmas` FMAs into independent accumulators, so a byte read carries
/// flop_per_byte = fmas / 2 FLOPs (2 FLOP per FMA lane, 4 bytes per lane).
struct stream_point {
    int fmas = 0;
    double flop_per_byte = 0;
    stats gbs; ///< bytes read per second, 10^9
};

/// The read probe over a smaller footprint (the first bytes / 2 of b and of c): where a stream of
/// that many bytes still runs faster than DRAM allows, a decode cache of that size is read partly
/// from the caches. A virtual machine's topology may hide how much last-level cache its threads
/// reach (this session's 2 vCPUs report one 32 MiB L3, yet a 64 MiB stream on both runs at 2.4x
/// the DRAM rate), so this is measured, not read from sysfs.
struct footprint_point {
    std::size_t bytes = 0; ///< b's and c's bytes read per pass together
    int threads = 1;
    stats gbs;
};

/// The machine's ceilings. FMA in GFLOP/s (an FMA counts as 2 FLOPs); triad in GB/s
/// (10^9 bytes/s) counting 12 bytes per element -- read b and c, write a -- as STREAM does;
/// the write-allocate read of a that the caches also perform is not counted. Read in GB/s of
/// bytes read by a loop that only reads (each thread sums its share of b and then of c): the
/// memory ceiling of a kernel that reads and writes almost nothing, as a decode step over its cache.
struct ceilings {
    stats fma_1t_gflops, fma_all_gflops;
    stats triad_1t_gbs, triad_all_gbs;
    stats read_1t_gbs, read_all_gbs;   ///< empty (no samples) in files written before the read probe
    int threads = 1;                   ///< threads of the all-thread figures (as OpenMP granted)
    int accumulators = 0;              ///< independent FMA chains per thread
    int simd_lanes = 0;                ///< f32 lanes per batch
    std::string simd_arch;             ///< xsimd architecture of the FMA batches, e.g. "avx512bw"
    std::string fma_instruction;       ///< the instruction the FMA loop runs, e.g. "vfmadd231ps zmm (AVX-512F)"
    std::size_t triad_array_bytes = 0; ///< bytes per array
    std::size_t triad_elements = 0;    ///< elements per array
    std::vector<stream_point> stream;  ///< the streaming probe on all threads (empty in files that predate it)
    /// bf16 dot products (vdpbf16ps zmm: 16 fp32 lanes, each adding two bf16 products, 4 FLOP a
    /// lane) on 1 and all threads, where the CPU has AVX512_BF16; no samples where it has not.
    stats bf16_dot_1t_gflops, bf16_dot_all_gflops;
    /// AMX's bf16 tile products (tdpbf16ps: 16 x 16 fp32 += 16 x 32 times 32 x 16 bf16, 16,384
    /// FLOP) on 1 and all threads, where the CPU has AMX-BF16 and Linux grants the tiles.
    stats amx_bf16_1t_gflops, amx_bf16_all_gflops;
    /// The read probe over 1, 2 and 4 x the reported last-level cache (below the main arrays'
    /// footprint), on 1 and all threads; empty in files that predate it.
    std::vector<footprint_point> read_footprints;
    /// The last-level cache a case's memory is held against: 0, the machine's L3 (attn.results:
    /// machine); a device's own (its L2) for a device's ceilings.
    std::size_t last_level_bytes = 0;
};

/// A read-only stream runs at DRAM speed from this many bytes on (`threads` as the ceilings'
/// figures: 1, or all): the smallest scanned footprint whose read rate, and every larger one's,
/// is within 15 % of the main read figure at those threads (whose own footprint, 2 x
/// triad_array_bytes, ends the scan). 0 when the ceilings have no scan.
std::size_t dram_footprint(const ceilings& c, int threads);

/// fp32 FMA throughput on `threads` threads, in GFLOP/s.
stats fma_gflops(int threads, const options& opt = {});

/// Triad a[i] = b[i] + s*c[i] bandwidth on `threads` threads, in GB/s (12 bytes per element).
stats triad_gbs(int threads, const options& opt = {});

/// Read-only bandwidth on `threads` threads, in GB/s of bytes read.
stats read_gbs(int threads, const options& opt = {});

/// The triad and the read probe on arrays allocated and first-touched once (3 x
/// triad_array_bytes(opt)), for ceilings measured again and again, e.g. beside each decode case
/// of a sweep, as triad_gbs and read_gbs would measure them.
class triad_probe {
  public:
    explicit triad_probe(const options& opt = {});
    ~triad_probe();
    triad_probe(const triad_probe&) = delete;
    triad_probe& operator=(const triad_probe&) = delete;
    /// The triad on `threads` threads (0: all), `repetitions` timed passes after one untimed one.
    stats measure(int threads, int repetitions);
    /// The read probe on the same arrays (b and c), likewise.
    stats measure_read(int threads, int repetitions);

  private:
    struct arrays;
    std::unique_ptr<arrays> arrays_;
};

/// The streaming probe on `threads` threads at `fmas` FMAs per batch read (1, 2, 4, 8, 16 or 24:
/// 0.5 to 12 FLOP/B), reading the arrays of triad_array_bytes(opt) twice over.
stats stream_gbs(int threads, int fmas, const options& opt = {});

/// The FMAs per batch that the streaming probe measures in measure(): 0.5 to 12 FLOP/B (those
/// whose accumulators fit in the ISA's vector registers: up to 12 with AVX2's 16).
inline constexpr int stream_fmas[] = {1, 2, 4, 8, 12, 16, 24};

/// All the figures; the triad arrays are allocated once and shared by both thread counts and
/// the streaming probe.
ceilings measure(const options& opt = {});

/// The bytes per triad array that `opt` asks for (resolving 0 to the default).
std::size_t triad_array_bytes(const options& opt);

/// The ceilings as a JSON object (numbers as numbers; every stats with median, best, worst,
/// repetitions and samples), the form `attnbench peak --json` prints under "peak".
std::string to_json(const ceilings& c, int indent = 2);

/// Reads what to_json wrote (alone, or under a "peak" key as `attnbench peak --json` writes it).
/// Throws attn::error naming what is missing or malformed.
ceilings from_json(const std::string& text);

/// from_json of a file (attnbench peak's peak.json); its errors name the path.
ceilings read_ceilings(const std::string& path);

} // namespace attn::peak
