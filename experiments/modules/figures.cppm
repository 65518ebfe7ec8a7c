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

/// Which benchmark of a case carries a counter.
enum class part : std::uint8_t {
    run,   ///< the case's own benchmark: the core or layer call, or the whole decode step (ID)
    core,  ///< a decode case's attention core over the cache (ID/core)
    probe, ///< a probe beside the cases: the FMA rate (fma-tT), and beside decode cases the bandwidths (triad-tT,
           ///< read-tT)
};

template <>
struct names_of<part> {
    static constexpr std::string_view kind = "part";
    static constexpr std::array<name_entry<part>, 3> table{
        {{part::run, "run", "the call"}, {part::core, "core", "the attention core"}, {part::probe, "probe", "probe"}}};
    static std::span<const name_entry<part>> entries() { return table; }
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
    std::string_view name, unit, meaning;
    std::uint8_t modes;
    attn::part part;
    attn::source source;
    std::string_view legacy = {}; ///< its name in results written before this table, if another
};

// clang-format off
inline constexpr counter_spec counter_table[] = {
    {"flop_matmul", "FLOP", "matmul FLOPs of one call, 2 per multiply-add (core: QK^T and PV; layer: and the projections; decode: the step's)", in_core | in_layer | in_decode, part::run, source::quantity},
    {"flop_full", "FLOP", "every add, multiply, divide, exp and compare of one call (attn.count's full count)", in_core | in_layer | in_decode, part::run, source::quantity},
    {"bytes", "B", "minimum traffic of one call: every input read once, every output written once, at the case's element size (attn::min_bytes; decode: the cache bytes the core reads)", in_core | in_layer | in_decode, part::run, source::quantity},
    {"intensity", "FLOP/B", "matmul FLOPs per byte (decode: the core's per cache byte read)", in_core | in_layer | in_decode, part::run, source::quantity},
    {"peak_gflops", "GFLOP/s", "the measured fp32 FMA peak at the case's thread count (f64: half of it; bf16 outside decode: the measured AMX-BF16 tile peak where the CPU has it, else the vdpbf16ps peak where it has AVX512_BF16; f16 and decode steps: the fp32 FMA peak for every cache type, though on AVX512-VNNI and AVX512_BF16 an int8 and a bf16 cache's scores run on integer and bf16 dot products)", in_core | in_layer | in_decode, part::run, source::quantity},
    {"peak_load_cpus", "CPUs", "CPUs other processes kept busy while that peak was measured (-1: unknown)", in_core | in_layer | in_decode, part::run, source::quantity},
    {"scratch_mib", "MiB", "the variant's own account of the extra memory it allocates", in_core | in_layer, part::run, source::measured},
    {"extra_mib", "MiB", "measured rise of the peak resident memory during one call (VmHWM after a reset)", in_core | in_layer | in_decode, part::run, source::measured},
    {"gflops_matmul", "GFLOP/s", "flop_matmul per second", in_core | in_layer | in_decode, part::run, source::derived},
    {"gflops_full", "GFLOP/s", "flop_full per second", in_core | in_layer | in_decode, part::run, source::derived},
    {"pct_peak", "%", "gflops_matmul as a share of peak_gflops", in_core | in_layer, part::run, source::derived},
    {"ceiling_speedup", "x", "peak_gflops over gflops_matmul: the largest speed-up over this row any implementation of the counted FLOPs could reach", in_core | in_layer, part::run, source::derived},
    {"peak_in_doubt", "0/1", "1 when pct_peak is above 100, the peak was measured on a loaded machine (peak_load_cpus >= 0.5: rerun `attnbench peak` quiet), or pct_peak_alongside is above 100 (the FMA probe alongside was slowed, the case was not)", in_core | in_layer, part::run, source::derived},
    {"fma_drift", "x", "the FMA probe measured in the same harness run, interleaved with the cases (median), over peak.json's FMA peak at the case's thread count: below 1 the machine gave this run less than when the peak was measured (decode: beside its core, in roof_alongside_gbs)", in_core | in_layer | in_decode, part::run, source::measured},
    {"peak_alongside_gflops", "GFLOP/s", "peak_gflops times fma_drift: the ceiling as the FMA probe found the machine during this run (for a bf16 case held to AMX or vdpbf16ps, that ceiling scaled by the FMA probe's drift)", in_core | in_layer, part::run, source::derived},
    {"pct_peak_alongside", "%", "gflops_matmul as a share of peak_alongside_gflops", in_core | in_layer, part::run, source::derived},
    {"us_per_token", "us", "the step's time per generated token (a step decodes one token of each sequence of the batch)", in_decode, part::run, source::derived},
    {"tokens_per_s", "1/s", "tokens generated per second", in_decode, part::run, source::derived},
    {"step_gbs", "GB/s", "cache and weight bytes over the step's time", in_decode, part::run, source::derived},
    {"kv_read_bytes", "B", "cache bytes one step's core reads: every cached row of the L+1 tokens once (int8 with its scales)", in_decode, part::run, source::quantity},
    {"weight_bytes", "B", "every parameter once, fp32", in_decode, part::run, source::quantity},
    {"cache_mib", "MiB", "kv_read_bytes in MiB", in_decode, part::run, source::quantity},
    {"weight_mib", "MiB", "weight_bytes in MiB", in_decode, part::run, source::quantity},
    {"kv_bytes_per_token", "B", "cache bytes read per generated token (kv_read_bytes / batch)", in_decode, part::run, source::quantity},
    {"kv_bytes_per_cached_token", "B", "cache bytes one cached token takes per sequence, e.g. 2 G (d_head e + s) for the q/k/v family (e the element's bytes, s int8's 4-byte row scale)", in_decode, part::run, source::quantity},
    {"cache_ratio_to_mha", "x", "how many times fewer cache bytes than MHA's at the same d_model and heads", in_decode, part::run, source::quantity},
    {"llc_mib", "MiB", "the last-level cache", in_decode, part::run, source::quantity},
    {"llc_context", "tokens", "the context L past which this batch's cache outgrows the last-level cache", in_decode, part::run, source::quantity},
    {"dram_from_mib", "MiB", "the footprint from which a read-only stream ran at DRAM speed on the case's threads (attnbench peak's scan; twice the last-level cache where the ceilings have none): a smaller cache is read partly from the caches", in_decode, part::run, source::quantity},
    {"flop_attention", "FLOP", "QK^T and PV FLOPs of the core over the cache", in_decode, part::core, source::quantity},
    {"core_us", "us", "the attention core's time per call", in_decode, part::core, source::derived},
    {"kv_gbs", "GB/s", "cache bytes the core reads per second (kv_read_bytes / core time)", in_decode, part::core, source::derived},
    {"gflops_core", "GFLOP/s", "flop_attention per second", in_decode, part::core, source::derived},
    {"triad_ceiling_gbs", "GB/s", "reference: the measured triad at the case's thread count (peak.json; 12 bytes per element, the write-allocate read not counted)", in_decode, part::core, source::quantity, "peak_gbs"},
    {"read_ceiling_gbs", "GB/s", "the measured read-only bandwidth at the case's thread count (peak.json): the memory ceiling of a decode step", in_decode, part::core, source::quantity},
    {"pct_triad", "%", "reference: kv_gbs as a share of triad_ceiling_gbs", in_decode, part::core, source::derived},
    {"pct_read", "%", "kv_gbs as a share of read_ceiling_gbs", in_decode, part::core, source::derived},
    {"roof_gbs", "GB/s", "the roofline as a bandwidth, min(read_ceiling_gbs, peak_gflops / intensity) (the triad where peak.json has no read probe)", in_decode, part::core, source::derived},
    {"pct_roof", "%", "kv_gbs as a share of roof_gbs", in_decode, part::core, source::derived},
    {"arith_roof_gbs", "GB/s", "peak_gflops / intensity: the bytes per second the FMAs could consume", in_decode, part::core, source::derived},
    {"share_mark", "0/1/2", "why a share of a memory ceiling is above 100: 1 the cache is smaller than dram_from_mib (read from the caches in part or whole: ‡), 2 it is not (a measurement to distrust: †); 0 none above 100", in_decode, part::core, source::derived},
    {"triad_alongside_gbs", "GB/s", "reference: the triad measured in the same harness run, interleaved with the cases (median)", in_decode, part::core, source::measured},
    {"pct_triad_alongside", "%", "reference: kv_gbs as a share of triad_alongside_gbs", in_decode, part::core, source::derived},
    {"read_alongside_gbs", "GB/s", "the read probe measured in the same harness run, interleaved with the cases (median)", in_decode, part::core, source::measured},
    {"pct_read_alongside", "%", "kv_gbs as a share of read_alongside_gbs", in_decode, part::core, source::derived},
    {"roof_alongside_gbs", "GB/s", "min(read_alongside_gbs, peak_gflops x fma_drift / intensity): the roofline of the same run (peak_gflops alone where no FMA probe ran)", in_decode, part::core, source::derived},
    {"pct_roof_alongside", "%", "kv_gbs as a share of roof_alongside_gbs", in_decode, part::core, source::derived},
    {"roof_arith", "0/1", "1 where the roofline the share is taken against (roof_alongside_gbs where measured, else roof_gbs) is its arithmetic side, the FMAs' rate below the memory's: compute-bound; 0 memory-bound", in_decode, part::core, source::derived},
    {"check_ratio", "x bound", "worst error / bound against fp64 on the same (rounded or dequantized) cache", in_decode, part::core, source::measured},
    {"unrounded_max_abs", "abs", "the core's max |error| against fp64 on the unrounded cache", in_decode, part::core, source::measured},
    {"unrounded_ratio", "x bound", "that error over fp32's bound", in_decode, part::core, source::measured},
    {"unrounded_nmse", "1", "sum (out - ref)^2 / sum ref^2 against fp64 on the unrounded cache", in_decode, part::core, source::measured},
    {"triad_gbs", "GB/s", "a triad pass's bandwidth (12 bytes per element)", in_decode, part::probe, source::measured},
    {"read_gbs", "GB/s", "a read probe pass's bandwidth (bytes read)", in_decode, part::probe, source::measured},
    {"fma_gflops", "GFLOP/s", "an FMA probe pass's rate (attn.peak's FMA loop, the accumulators peak.json chose)", in_core | in_layer | in_decode, part::probe, source::measured},
    {"fma_ratio", "x", "an FMA probe pass's rate over peak.json's FMA peak at the probe's threads", in_core | in_layer | in_decode, part::probe, source::measured},
};
// clang-format on

inline constexpr std::size_t n_counters = std::size(counter_table);

/// A counter: the index of its row in counter_table, the one list. Code names one by its name,
/// "flop_matmul"_counter, looked up in the table when it is compiled (a name the table lacks does
/// not compile), so no enum repeats the table's names.
struct counter {
    std::uint8_t index = 0;
    constexpr counter() = default;
    constexpr explicit counter(std::size_t i) : index(std::uint8_t(i)) {}
    constexpr explicit operator std::size_t() const { return index; }
    friend constexpr bool operator==(counter, counter) = default;
};

/// The counter named `s`: a compile-time error when the table has no such row.
consteval counter operator""_counter(const char* s, std::size_t n) {
    const std::string_view name(s, n);
    for (std::size_t i = 0; i < n_counters; ++i)
        if (counter_table[i].name == name) return counter(i);
    throw "no counter of that name in counter_table"; // not a constant expression: the build fails
}

namespace detail {
inline const std::array<name_entry<counter>, n_counters>& counter_names() {
    static const auto names = [] {
        std::array<name_entry<counter>, n_counters> a{};
        for (std::size_t i = 0; i < n_counters; ++i) a[i] = {counter(i), counter_table[i].name, counter_table[i].name};
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

/// The counter whose row `s` is.
inline counter id_of(const counter_spec& s) { return counter(std::size_t(&s - counter_table)); }

/// Every counter, in table order.
inline std::vector<counter> all_counters() {
    std::vector<counter> out;
    for (std::size_t i = 0; i < n_counters; ++i) out.push_back(counter(i));
    return out;
}

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
/// half; bf16 outside decode the CPU's fastest bf16 product where it has one, AMX's tiles, else
/// vdpbf16ps: the most any implementation of its products could reach there; f16 and decode steps
/// on fp32 FMAs), the load while it was measured, the triad and the read bandwidth (0 where the
/// peak predates the read probe).
inline void put_ceilings(figures& f, const sweep_case& k, const peak::ceilings& c) {
    const int t = int(k.threads);
    const double half = !k.decode() && k.precision == dtype::f64 ? 0.5 : 1.0;
    const bool bf16 = !k.decode() && k.precision == dtype::bf16;
    const bool amx = bf16 && !c.amx_bf16_1t_gflops.samples.empty();
    const bool dot = bf16 && !amx && !c.bf16_dot_1t_gflops.samples.empty();
    const peak::stats& one = amx ? c.amx_bf16_1t_gflops : dot ? c.bf16_dot_1t_gflops : c.fma_1t_gflops;
    const peak::stats& all = amx ? c.amx_bf16_all_gflops : dot ? c.bf16_dot_all_gflops : c.fma_all_gflops;
    f.put("peak_gflops"_counter, half * fma_ceiling_at(one.median, all.median, c.threads, t));
    f.put("peak_load_cpus"_counter, fma_ceiling_load_at(one.others_busy_cpus, all.others_busy_cpus, c.threads, t));
    if (!k.decode()) return;
    f.put("triad_ceiling_gbs"_counter, bandwidth_ceiling_at(c.triad_1t_gbs.median, c.triad_all_gbs.median, t));
    f.put("read_ceiling_gbs"_counter, bandwidth_ceiling_at(c.read_1t_gbs.median, c.read_all_gbs.median, t));
    const std::size_t dram = peak::dram_footprint(c, t <= 1 ? 1 : c.threads);
    f.put("dram_from_mib"_counter, dram ? double(dram) / 1048576.0 : 2.0 * f.at("llc_mib"_counter));
}

/// What one call of case k does, from attn.count, and the ceilings it is held to: the same
/// numbers whoever ran it (our harness, a peer's).
inline figures quantities(const sweep_case& k, const peak::ceilings& c) {
    figures f;
    const problem layer = k.shape();
    if (k.decode()) {
        const kv_dtype t = to_kv_dtype(k.precision);
        const auto cost = decode_cost(layer, k.context, t);
        const double B = double(layer.batch),
                     llc = double(c.last_level_bytes ? c.last_level_bytes : machine().l3_bytes);
        f.put("flop_matmul"_counter, double(cost.matmul_flops));
        f.put("flop_full"_counter, double(cost.full_flops));
        f.put("flop_attention"_counter, double(cost.attention_flops));
        f.put("intensity"_counter, decode_intensity(layer, t));
        f.put("kv_read_bytes"_counter, double(cost.kv_read_bytes));
        f.put("bytes"_counter, double(cost.kv_read_bytes));
        f.put("weight_bytes"_counter, double(cost.weight_bytes));
        f.put("cache_mib"_counter, double(cost.kv_read_bytes) / 1048576.0);
        f.put("weight_mib"_counter, double(cost.weight_bytes) / 1048576.0);
        f.put("kv_bytes_per_token"_counter, double(cost.kv_read_bytes) / B);
        f.put("kv_bytes_per_cached_token"_counter, double(kv_cache_bytes_per_token(layer, t)));
        f.put("cache_ratio_to_mha"_counter, decode_cache_ratio_to_mha(layer));
        f.put("llc_mib"_counter, llc / 1048576.0);
        f.put("llc_context"_counter, double(decode_context_exceeding(layer, std::uint64_t(llc), t)));
    } else {
        const bool whole = k.mode == mode::layer;
        const problem p = whole ? layer : attention_problem(layer);
        const auto flops = analytic_flops(p);
        const double matmul = double(whole ? flops.matmul_flops() : flops.attention_matmul());
        const double bytes = double(min_bytes(p, whole, bytes_per_element(to_precision(k.precision))));
        f.put("flop_matmul"_counter, matmul);
        f.put("flop_full"_counter, double(whole ? flops.full_flops() : flops.attention_full()));
        f.put("bytes"_counter, bytes);
        f.put("intensity"_counter, matmul / bytes);
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

/// The probes measured alongside a case in the same harness run (medians; 0: none ran): the
/// bandwidths beside decode cores, the FMA rate's ratio to peak.json's beside core and layer calls.
struct alongside {
    double triad_gbs = 0, read_gbs = 0, fma_ratio = 0;
};

/// The figures of one benchmark of case k from its time per call (seconds): `p` the part that
/// time is of. The probes measured alongside give the alongside ceilings and shares.
inline void derive(figures& f, const sweep_case& k, part p, double seconds, const alongside& along = {}) {
    const double triad_alongside = along.triad_gbs, read_alongside = along.read_gbs;
    if (!(seconds > 0)) return;
    const double peak = f.at("peak_gflops"_counter), I = f.at("intensity"_counter);
    auto share = [](double x, double ceiling) { return ceiling > 0 ? 100.0 * x / ceiling : 0.0; };
    if (p == part::run) {
        const double g = f.at("flop_matmul"_counter) * 1e-9 / seconds;
        f.put("gflops_matmul"_counter, g);
        f.put("gflops_full"_counter, f.at("flop_full"_counter) * 1e-9 / seconds);
        if (k.decode()) {
            const double B = double(k.batch);
            f.put("us_per_token"_counter, seconds * 1e6 / B);
            f.put("tokens_per_s"_counter, B / seconds);
            f.put("step_gbs"_counter, (f.at("kv_read_bytes"_counter) + f.at("weight_bytes"_counter)) * 1e-9 / seconds);
        } else if (peak > 0) {
            const double pct = share(g, peak);
            f.put("pct_peak"_counter, pct);
            f.put("ceiling_speedup"_counter, ceiling_speedup(g, peak));
            double pct_along = -1.0;
            if (along.fma_ratio > 0) { // the same run's ceiling: drift of the machine between the two cancels
                const double peak_along = peak * along.fma_ratio;
                pct_along = share(g, peak_along);
                f.put("fma_drift"_counter, along.fma_ratio);
                f.put("peak_alongside_gflops"_counter, peak_along);
                f.put("pct_peak_alongside"_counter, pct_along);
            }
            f.put("peak_in_doubt"_counter, peak_in_doubt(pct, f.at("peak_load_cpus"_counter), pct_along) ? 1.0 : 0.0);
        }
        return;
    }
    if (p != part::core) return;
    const double kv = f.at("kv_read_bytes"_counter) * 1e-9 / seconds;
    const double triad = f.at("triad_ceiling_gbs"_counter), read = f.at("read_ceiling_gbs"_counter);
    const double memory = read > 0 ? read : triad; // the roofline's memory side
    const double roof = roofline_gbs(memory, peak, I);
    f.put("core_us"_counter, seconds * 1e6);
    f.put("kv_gbs"_counter, kv);
    f.put("gflops_core"_counter, f.at("flop_attention"_counter) * 1e-9 / seconds);
    f.put("pct_triad"_counter, share(kv, triad));
    if (read > 0) f.put("pct_read"_counter, share(kv, read));
    f.put("roof_gbs"_counter, roof);
    f.put("pct_roof"_counter, share(kv, roof));
    f.put("arith_roof_gbs"_counter, arithmetic_roof_gbs(peak, I));
    f.put("roof_arith"_counter, arithmetic_roof_gbs(peak, I) < memory ? 1.0 : 0.0);
    const double cache = f.at("kv_read_bytes"_counter), dram = f.at("dram_from_mib"_counter) * 1048576.0;
    double mark = share_mark(share(kv, roof), cache, dram);
    if (triad_alongside > 0) {
        f.put("triad_alongside_gbs"_counter, triad_alongside);
        f.put("pct_triad_alongside"_counter, share(kv, triad_alongside));
    }
    if (along.fma_ratio > 0) f.put("fma_drift"_counter, along.fma_ratio);
    if (read_alongside > 0) {
        const double roof_along = roofline_gbs(read_alongside, along.fma_ratio > 0 ? peak * along.fma_ratio : peak, I);
        f.put("read_alongside_gbs"_counter, read_alongside);
        f.put("pct_read_alongside"_counter, share(kv, read_alongside));
        f.put("roof_alongside_gbs"_counter, roof_along);
        f.put("pct_roof_alongside"_counter, share(kv, roof_along));
        f.put("roof_arith"_counter,
              arithmetic_roof_gbs(along.fma_ratio > 0 ? peak * along.fma_ratio : peak, I) < read_alongside ? 1.0 : 0.0);
        mark = std::max(mark, share_mark(share(kv, roof_along), cache, dram));
    }
    f.put("share_mark"_counter, mark);
}

/// A threshold the report's wording of the decode section turns on (perf.json's schema "wording",
/// which the plots read): its name, value and what crossing it makes the text say.
struct wording_threshold {
    std::string_view name;
    double value;
    std::string_view meaning;
};

inline constexpr wording_threshold decode_wording[] = {
    {"overshoot", 1.05, "a family's speed-up over MHA above this times its cache-byte ratio overshoots the ratio"},
    {"settled", 0.95, "an overshooting family whose speed-up at the largest L is below this times its best settles"},
    {"short_of_ratio", 0.9,
     "a speed-up at the largest L below this times the byte ratio falls short of it, and the "
     "text says why"},
    {"weights_dominate", 2.0, "a cache smaller than this times the weights: the step reads mostly weights"},
    {"capped", 0.7, "a roofline below this times the memory ceiling: the arithmetic caps the read rate"},
};

/// The counters of `m`'s benchmarks of part p (perf.json's and perf.csv's columns, in table order).
inline std::vector<counter> counters_of(std::uint8_t modes) {
    std::vector<counter> out;
    for (const auto& s : counter_table)
        if (s.modes & modes && s.part != part::probe) out.push_back(id_of(s));
    return out;
}

} // namespace attn
