// attn.figures -- the one schema of what a timed case reports, and the one place its figures
// are computed. counter_table lists every counter once: its name, unit, meaning, the modes that
// have it, which benchmark of a case carries it (the case's own run; a decode case's attention
// core, benchmark ID/core; the bandwidth probes run beside decode cases) and who computes it:
//  - quantity: what one call does and the ceilings it is held to, from attn.count and the
//    measured peak (quantities(): the same numbers for our variants and for a peer);
//  - measured: what only the harness can know (memory, the check's error, the probes alongside);
//  - derived: rates and shares from a time and the quantities (derive(): the one computation,
//    applied to our repetitions and to a peer's, so a peer's GFLOP/s is ours).
// attnbench-bench registers its counters by this table, the report names its columns and units
// by it, perf.csv's header is its names, and results/README.md's list is held to it by a test.
module;
#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>
export module attn.figures;
export import attn.cases;
import attn.count;
import attn.families;
import attn.peak;
import attn.results;

export namespace attn {

enum class counter : std::uint8_t {
    // core and layer: what one call does, and the FMA ceiling
    flop_matmul,
    flop_full,
    bytes,
    intensity,
    peak_gflops,
    peak_load_cpus,
    scratch_mib,
    extra_mib,
    gflops_matmul,
    gflops_full,
    pct_peak,
    ceiling_speedup,
    peak_in_doubt,
    // decode, the whole step (ID)
    us_per_token,
    tokens_per_s,
    step_gbs,
    kv_read_bytes,
    weight_bytes,
    cache_mib,
    weight_mib,
    kv_bytes_per_token,
    kv_bytes_per_cached_token,
    cache_ratio_to_mha,
    llc_mib,
    llc_context,
    dram_from_mib,
    // decode, the attention core over the cache (ID/core)
    flop_attention,
    core_us,
    kv_gbs,
    gflops_core,
    triad_ceiling_gbs,
    read_ceiling_gbs,
    pct_triad,
    pct_read,
    roof_gbs,
    pct_roof,
    arith_roof_gbs,
    share_mark,
    triad_alongside_gbs,
    pct_triad_alongside,
    read_alongside_gbs,
    pct_read_alongside,
    roof_alongside_gbs,
    pct_roof_alongside,
    check_ratio,
    unrounded_max_abs,
    unrounded_ratio,
    unrounded_nmse,
    // the probes run beside decode cases (triad-tT, read-tT)
    triad_gbs,
    read_gbs,
    count_
};

inline constexpr std::size_t n_counters = std::size_t(counter::count_);

/// Which benchmark of a case carries a counter.
enum class part : std::uint8_t {
    run,   ///< the case's own benchmark: the core or layer call, or the whole decode step (ID)
    core,  ///< a decode case's attention core over the cache (ID/core)
    probe, ///< a bandwidth probe beside the decode cases (triad-tT, read-tT)
};

/// Who computes a counter.
enum class source : std::uint8_t {
    quantity, ///< quantities(): from the case and the measured peak, whoever ran it
    measured, ///< the harness that ran it
    derived,  ///< derive(): from a time and the quantities
};

template <>
struct names_of<source> {
    static constexpr std::string_view kind = "counter source";
    static constexpr std::array<name_entry<source>, 3> table{{{source::quantity, "quantity", "quantity"},
                                                              {source::measured, "measured", "measured"},
                                                              {source::derived, "derived", "derived"}}};
    static std::span<const name_entry<source>> entries() { return table; }
};

inline constexpr std::uint8_t in_core = 1, in_layer = 2, in_decode = 4;

struct counter_spec {
    attn::counter id;
    std::string_view name, unit, meaning;
    std::uint8_t modes;
    attn::part part;
    attn::source source;
    std::string_view legacy = {}; ///< its name in results written before this table, if another
};

// clang-format off
inline constexpr std::array<counter_spec, n_counters> counter_table{{
    {counter::flop_matmul, "flop_matmul", "FLOP", "matmul FLOPs of one call, 2 per multiply-add (core: QK^T and PV; layer: and the projections; decode: the step's)", in_core | in_layer | in_decode, part::run, source::quantity},
    {counter::flop_full, "flop_full", "FLOP", "every add, multiply, divide, exp and compare of one call (attn.count's full count)", in_core | in_layer | in_decode, part::run, source::quantity},
    {counter::bytes, "bytes", "B", "minimum traffic of one call: every input read once, every output written once, at the case's element size (attn::min_bytes; decode: the cache bytes the core reads)", in_core | in_layer | in_decode, part::run, source::quantity},
    {counter::intensity, "intensity", "FLOP/B", "matmul FLOPs per byte (decode: the core's per cache byte read)", in_core | in_layer | in_decode, part::run, source::quantity},
    {counter::peak_gflops, "peak_gflops", "GFLOP/s", "the measured fp32 FMA peak at the case's thread count (f64: half of it; bf16 and f16 run on fp32 FMAs)", in_core | in_layer | in_decode, part::run, source::quantity},
    {counter::peak_load_cpus, "peak_load_cpus", "CPUs", "CPUs other processes kept busy while that peak was measured (-1: unknown)", in_core | in_layer | in_decode, part::run, source::quantity},
    {counter::scratch_mib, "scratch_mib", "MiB", "the variant's own account of the extra memory it allocates", in_core | in_layer, part::run, source::measured},
    {counter::extra_mib, "extra_mib", "MiB", "measured rise of the peak resident memory during one call (VmHWM after a reset)", in_core | in_layer | in_decode, part::run, source::measured},
    {counter::gflops_matmul, "gflops_matmul", "GFLOP/s", "flop_matmul per second", in_core | in_layer | in_decode, part::run, source::derived},
    {counter::gflops_full, "gflops_full", "GFLOP/s", "flop_full per second", in_core | in_layer | in_decode, part::run, source::derived},
    {counter::pct_peak, "pct_peak", "%", "gflops_matmul as a share of peak_gflops", in_core | in_layer, part::run, source::derived},
    {counter::ceiling_speedup, "ceiling_speedup", "x", "peak_gflops over gflops_matmul: the largest speed-up over this row any implementation of the counted FLOPs could reach", in_core | in_layer, part::run, source::derived},
    {counter::peak_in_doubt, "peak_in_doubt", "0/1", "1 when pct_peak is above 100 or the peak was measured on a loaded machine (peak_load_cpus >= 0.5): rerun `attnbench peak` quiet", in_core | in_layer, part::run, source::derived},
    {counter::us_per_token, "us_per_token", "us", "the step's time per generated token (a step decodes one token of each sequence of the batch)", in_decode, part::run, source::derived},
    {counter::tokens_per_s, "tokens_per_s", "1/s", "tokens generated per second", in_decode, part::run, source::derived},
    {counter::step_gbs, "step_gbs", "GB/s", "cache and weight bytes over the step's time", in_decode, part::run, source::derived},
    {counter::kv_read_bytes, "kv_read_bytes", "B", "cache bytes one step's core reads: every cached row of the L+1 tokens once (int8 with its scales)", in_decode, part::run, source::quantity},
    {counter::weight_bytes, "weight_bytes", "B", "every parameter once, fp32", in_decode, part::run, source::quantity},
    {counter::cache_mib, "cache_mib", "MiB", "kv_read_bytes in MiB", in_decode, part::run, source::quantity},
    {counter::weight_mib, "weight_mib", "MiB", "weight_bytes in MiB", in_decode, part::run, source::quantity},
    {counter::kv_bytes_per_token, "kv_bytes_per_token", "B", "cache bytes read per generated token (kv_read_bytes / batch)", in_decode, part::run, source::quantity},
    {counter::kv_bytes_per_cached_token, "kv_bytes_per_cached_token", "B", "cache bytes one cached token takes per sequence, e.g. 2 G (d_head e + s) for the q/k/v family (e the element's bytes, s int8's 4-byte row scale)", in_decode, part::run, source::quantity},
    {counter::cache_ratio_to_mha, "cache_ratio_to_mha", "x", "how many times fewer cache bytes than MHA's at the same d_model and heads", in_decode, part::run, source::quantity},
    {counter::llc_mib, "llc_mib", "MiB", "the last-level cache", in_decode, part::run, source::quantity},
    {counter::llc_context, "llc_context", "tokens", "the context L past which this batch's cache outgrows the last-level cache", in_decode, part::run, source::quantity},
    {counter::dram_from_mib, "dram_from_mib", "MiB", "the footprint from which a read-only stream ran at DRAM speed on the case's threads (attnbench peak's scan; twice the last-level cache where the ceilings have none): a smaller cache is read partly from the caches", in_decode, part::run, source::quantity},
    {counter::flop_attention, "flop_attention", "FLOP", "QK^T and PV FLOPs of the core over the cache", in_decode, part::core, source::quantity},
    {counter::core_us, "core_us", "us", "the attention core's time per call", in_decode, part::core, source::derived},
    {counter::kv_gbs, "kv_gbs", "GB/s", "cache bytes the core reads per second (kv_read_bytes / core time)", in_decode, part::core, source::derived},
    {counter::gflops_core, "gflops_core", "GFLOP/s", "flop_attention per second", in_decode, part::core, source::derived},
    {counter::triad_ceiling_gbs, "triad_ceiling_gbs", "GB/s", "reference: the measured triad at the case's thread count (peak.json; 12 bytes per element, the write-allocate read not counted)", in_decode, part::core, source::quantity, "peak_gbs"},
    {counter::read_ceiling_gbs, "read_ceiling_gbs", "GB/s", "the measured read-only bandwidth at the case's thread count (peak.json): the memory ceiling of a decode step", in_decode, part::core, source::quantity},
    {counter::pct_triad, "pct_triad", "%", "reference: kv_gbs as a share of triad_ceiling_gbs", in_decode, part::core, source::derived},
    {counter::pct_read, "pct_read", "%", "kv_gbs as a share of read_ceiling_gbs", in_decode, part::core, source::derived},
    {counter::roof_gbs, "roof_gbs", "GB/s", "the roofline as a bandwidth, min(read_ceiling_gbs, peak_gflops / intensity) (the triad where peak.json has no read probe)", in_decode, part::core, source::derived},
    {counter::pct_roof, "pct_roof", "%", "kv_gbs as a share of roof_gbs", in_decode, part::core, source::derived},
    {counter::arith_roof_gbs, "arith_roof_gbs", "GB/s", "peak_gflops / intensity: the bytes per second the FMAs could consume", in_decode, part::core, source::derived},
    {counter::share_mark, "share_mark", "0/1/2", "why a share of a memory ceiling is above 100: 1 the cache is smaller than dram_from_mib (read from the caches in part or whole: ‡), 2 it is not (a measurement to distrust: †); 0 none above 100", in_decode, part::core, source::derived},
    {counter::triad_alongside_gbs, "triad_alongside_gbs", "GB/s", "reference: the triad measured in the same harness run, interleaved with the cases (median)", in_decode, part::core, source::measured},
    {counter::pct_triad_alongside, "pct_triad_alongside", "%", "reference: kv_gbs as a share of triad_alongside_gbs", in_decode, part::core, source::derived},
    {counter::read_alongside_gbs, "read_alongside_gbs", "GB/s", "the read probe measured in the same harness run, interleaved with the cases (median)", in_decode, part::core, source::measured},
    {counter::pct_read_alongside, "pct_read_alongside", "%", "kv_gbs as a share of read_alongside_gbs", in_decode, part::core, source::derived},
    {counter::roof_alongside_gbs, "roof_alongside_gbs", "GB/s", "min(read_alongside_gbs, peak_gflops / intensity)", in_decode, part::core, source::derived},
    {counter::pct_roof_alongside, "pct_roof_alongside", "%", "kv_gbs as a share of roof_alongside_gbs", in_decode, part::core, source::derived},
    {counter::check_ratio, "check_ratio", "x bound", "worst error / bound against fp64 on the same (rounded or dequantized) cache", in_decode, part::core, source::measured},
    {counter::unrounded_max_abs, "unrounded_max_abs", "abs", "the core's max |error| against fp64 on the unrounded cache", in_decode, part::core, source::measured},
    {counter::unrounded_ratio, "unrounded_ratio", "x bound", "that error over fp32's bound", in_decode, part::core, source::measured},
    {counter::unrounded_nmse, "unrounded_nmse", "1", "sum (out - ref)^2 / sum ref^2 against fp64 on the unrounded cache", in_decode, part::core, source::measured},
    {counter::triad_gbs, "triad_gbs", "GB/s", "a triad pass's bandwidth (12 bytes per element)", in_decode, part::probe, source::measured},
    {counter::read_gbs, "read_gbs", "GB/s", "a read probe pass's bandwidth (bytes read)", in_decode, part::probe, source::measured},
}};
// clang-format on

namespace detail {
inline constexpr bool table_in_order() {
    for (std::size_t i = 0; i < n_counters; ++i)
        if (std::size_t(counter_table[i].id) != i) return false;
    return true;
}
static_assert(table_in_order(), "counter_table lists the counters in their enum's order");
inline const std::array<name_entry<counter>, n_counters>& counter_names() {
    static const auto names = [] {
        std::array<name_entry<counter>, n_counters> a{};
        for (std::size_t i = 0; i < n_counters; ++i)
            a[i] = {counter_table[i].id, counter_table[i].name, counter_table[i].name};
        return a;
    }();
    return names;
}
} // namespace detail

template <>
struct names_of<counter> {
    static constexpr std::string_view kind = "counter";
    static std::span<const name_entry<counter>> entries() { return detail::counter_names(); }
};

inline const counter_spec& spec(counter c) { return counter_table[std::size_t(c)]; }

inline std::uint8_t mode_bit(attn::mode m) {
    return m == mode::core ? in_core : m == mode::layer ? in_layer : in_decode;
}

/// A case's counters, set or not.
struct figures {
    std::array<double, n_counters> value{};
    std::array<bool, n_counters> has{};

    void put(counter c, double x) {
        value[std::size_t(c)] = x;
        has[std::size_t(c)] = true;
    }
    bool contains(counter c) const { return has[std::size_t(c)]; }
    double at(counter c) const { return has[std::size_t(c)] ? value[std::size_t(c)] : 0.0; }
};

/// The ceilings a case is held to at its thread count, from the measured peak: the FMA peak (f64:
/// half; bf16 and f16 run on fp32 FMAs), the load while it was measured, the triad and the read
/// bandwidth (0 where the peak predates the read probe).
inline void put_ceilings(figures& f, const sweep_case& k, const peak::ceilings& c) {
    const int t = int(k.threads);
    const double half = !k.decode() && k.precision == dtype::f64 ? 0.5 : 1.0;
    f.put(counter::peak_gflops, half * fma_ceiling_at(c.fma_1t_gflops.median, c.fma_all_gflops.median, c.threads, t));
    f.put(counter::peak_load_cpus,
          fma_ceiling_load_at(c.fma_1t_gflops.others_busy_cpus, c.fma_all_gflops.others_busy_cpus, c.threads, t));
    if (!k.decode()) return;
    f.put(counter::triad_ceiling_gbs, bandwidth_ceiling_at(c.triad_1t_gbs.median, c.triad_all_gbs.median, t));
    f.put(counter::read_ceiling_gbs, bandwidth_ceiling_at(c.read_1t_gbs.median, c.read_all_gbs.median, t));
    const std::size_t dram = peak::dram_footprint(c, t <= 1 ? 1 : c.threads);
    f.put(counter::dram_from_mib, dram ? double(dram) / 1048576.0 : 2.0 * f.at(counter::llc_mib));
}

/// What one call of case k does, from attn.count, and the ceilings it is held to: the same
/// numbers whoever ran it (our harness, a peer's).
inline figures quantities(const sweep_case& k, const peak::ceilings& c) {
    figures f;
    const problem layer = k.shape();
    if (k.decode()) {
        const kv_dtype t = to_kv_dtype(k.precision);
        const auto cost = decode_cost(layer, k.context, t);
        const double B = double(layer.batch), llc = double(machine().l3_bytes);
        f.put(counter::flop_matmul, double(cost.matmul_flops));
        f.put(counter::flop_full, double(cost.full_flops));
        f.put(counter::flop_attention, double(cost.attention_flops));
        f.put(counter::intensity, decode_intensity(layer, t));
        f.put(counter::kv_read_bytes, double(cost.kv_read_bytes));
        f.put(counter::bytes, double(cost.kv_read_bytes));
        f.put(counter::weight_bytes, double(cost.weight_bytes));
        f.put(counter::cache_mib, double(cost.kv_read_bytes) / 1048576.0);
        f.put(counter::weight_mib, double(cost.weight_bytes) / 1048576.0);
        f.put(counter::kv_bytes_per_token, double(cost.kv_read_bytes) / B);
        f.put(counter::kv_bytes_per_cached_token, double(kv_cache_bytes_per_token(layer, t)));
        f.put(counter::cache_ratio_to_mha, decode_cache_ratio_to_mha(layer));
        f.put(counter::llc_mib, llc / 1048576.0);
        f.put(counter::llc_context, double(decode_context_exceeding(layer, std::uint64_t(llc), t)));
    } else {
        const bool whole = k.mode == mode::layer;
        const problem p = whole ? layer : attention_problem(layer);
        const auto flops = analytic_flops(p);
        const double matmul = double(whole ? flops.matmul_flops() : flops.attention_matmul());
        const double bytes = double(min_bytes(p, whole, bytes_per_element(to_precision(k.precision))));
        f.put(counter::flop_matmul, matmul);
        f.put(counter::flop_full, double(whole ? flops.full_flops() : flops.attention_full()));
        f.put(counter::bytes, bytes);
        f.put(counter::intensity, matmul / bytes);
    }
    put_ceilings(f, k, c);
    return f;
}

/// The share rule of a memory ceiling: above 100, the case is marked 1 (its cache is smaller than
/// the footprint from which a read-only stream runs at DRAM speed: read from the caches in part
/// or whole) or 2 (it is not: a measurement to distrust); 0 otherwise.
inline double share_mark(double pct, double cache_bytes, double dram_from_bytes) {
    if (!(pct > 100.0)) return 0.0;
    return cache_bytes < dram_from_bytes ? 1.0 : 2.0;
}

/// The figures of one benchmark of case k from its time per call (seconds): `p` the part that
/// time is of. For a decode core, the probes measured alongside (0: none) give the alongside shares.
inline void derive(figures& f, const sweep_case& k, part p, double seconds, double triad_alongside = 0,
                   double read_alongside = 0) {
    if (!(seconds > 0)) return;
    const double peak = f.at(counter::peak_gflops), I = f.at(counter::intensity);
    auto share = [](double x, double ceiling) { return ceiling > 0 ? 100.0 * x / ceiling : 0.0; };
    if (p == part::run) {
        const double g = f.at(counter::flop_matmul) * 1e-9 / seconds;
        f.put(counter::gflops_matmul, g);
        f.put(counter::gflops_full, f.at(counter::flop_full) * 1e-9 / seconds);
        if (k.decode()) {
            const double B = double(k.batch);
            f.put(counter::us_per_token, seconds * 1e6 / B);
            f.put(counter::tokens_per_s, B / seconds);
            f.put(counter::step_gbs, (f.at(counter::kv_read_bytes) + f.at(counter::weight_bytes)) * 1e-9 / seconds);
        } else if (peak > 0) {
            const double pct = share(g, peak);
            f.put(counter::pct_peak, pct);
            f.put(counter::ceiling_speedup, ceiling_speedup(g, peak));
            f.put(counter::peak_in_doubt, peak_in_doubt(pct, f.at(counter::peak_load_cpus)) ? 1.0 : 0.0);
        }
        return;
    }
    if (p != part::core) return;
    const double kv = f.at(counter::kv_read_bytes) * 1e-9 / seconds;
    const double triad = f.at(counter::triad_ceiling_gbs), read = f.at(counter::read_ceiling_gbs);
    const double memory = read > 0 ? read : triad; // the roofline's memory side
    const double roof = roofline_gbs(memory, peak, I);
    f.put(counter::core_us, seconds * 1e6);
    f.put(counter::kv_gbs, kv);
    f.put(counter::gflops_core, f.at(counter::flop_attention) * 1e-9 / seconds);
    f.put(counter::pct_triad, share(kv, triad));
    if (read > 0) f.put(counter::pct_read, share(kv, read));
    f.put(counter::roof_gbs, roof);
    f.put(counter::pct_roof, share(kv, roof));
    f.put(counter::arith_roof_gbs, arithmetic_roof_gbs(peak, I));
    const double cache = f.at(counter::kv_read_bytes), dram = f.at(counter::dram_from_mib) * 1048576.0;
    double mark = share_mark(share(kv, roof), cache, dram);
    if (triad_alongside > 0) {
        f.put(counter::triad_alongside_gbs, triad_alongside);
        f.put(counter::pct_triad_alongside, share(kv, triad_alongside));
    }
    if (read_alongside > 0) {
        const double roof_along = roofline_gbs(read_alongside, peak, I);
        f.put(counter::read_alongside_gbs, read_alongside);
        f.put(counter::pct_read_alongside, share(kv, read_alongside));
        f.put(counter::roof_alongside_gbs, roof_along);
        f.put(counter::pct_roof_alongside, share(kv, roof_along));
        mark = std::max(mark, share_mark(share(kv, roof_along), cache, dram));
    }
    f.put(counter::share_mark, mark);
}

/// The counters of `m`'s benchmarks of part p (perf.json's and perf.csv's columns, in table order).
inline std::vector<counter> counters_of(std::uint8_t modes) {
    std::vector<counter> out;
    for (const auto& s : counter_table)
        if (s.modes & modes && s.part != part::probe) out.push_back(s.id);
    return out;
}

} // namespace attn
