// bench.harness -- what every benchmark of attnbench-bench shares: the case as registered (its
// variant, problem, options, and its quantities and ceilings from attn.figures), the check's
// verdict, the timing loop, and the counters written by attn.figures' one table.
module;
#include <algorithm>
#include <cstdint>
#include <map>
#include <cstdio>
#include <memory>
#include <new>
#include <string>
#include <benchmark/benchmark.h>
#include <nlohmann/json.hpp>
export module bench.harness;
export import attn.cases;
export import attn.check;
export import attn.decode;
export import attn.figures;
import attn.peak;
import attn.results;

export namespace bench {

using attn::operator""_counter;

/// What a registered benchmark measures: its case (null for a probe), which part of it, and at how
/// many threads. The reporters look a run up here by its name, so a label is written for readers of
/// the JSON and never parsed back by the harness itself.
struct registered_benchmark {
    const attn::sweep_case* k = nullptr;
    attn::part part = attn::part::run;
    int threads = 0;
};

/// Every benchmark this process registered, by the name it was registered under.
inline std::map<std::string, registered_benchmark>& registered() {
    static std::map<std::string, registered_benchmark> m;
    return m;
}

/// A benchmark's label: the case as JSON and the part it times ("run", "core"); a probe's: what
/// it probes and at how many threads, part "probe".
inline std::string label_of(const attn::sweep_case& k, attn::part p) {
    nlohmann::json j = k;
    j["part"] = attn::enum_name(p);
    return j.dump();
}

/// One registered case and what Google Benchmark's calls share: its inputs, the check's
/// verdict and, for decode, the step set up over its cache (built on first use; the decode
/// mode may release it to bound the memory held, and builds it again when needed).
struct timed_case {
    attn::sweep_case k;
    const attn::variant* var = nullptr;
    attn::problem p;
    attn::run_options opt;
    attn::figures q; ///< what one call does and the ceilings at its thread count (attn::quantities)
    double max_memory_bytes = 0;
    std::uint64_t seed = 1;
    bool checked = false;
    double extra_bytes = -2; ///< measured peak extra memory of one call (-2: not yet measured)
    std::string check_error;
    std::unique_ptr<attn::check::inputs> in;
    attn::kv_dtype kv = attn::kv_dtype::f32; ///< decode: the cache's type (the case's precision)
    double check_ratio = 0;                  ///< decode: worst err/bound against fp64 on the same cache
    attn::check::metrics unrounded;          ///< decode: the core against fp64 on the unrounded cache
    std::unique_ptr<attn::decode_timer> fixture;
    std::unique_ptr<attn::device_run> device; ///< a device variant's case, prepared once (inputs copied)
    std::uint64_t last_use = 0;               ///< when the fixture was last timed (a counter), for releasing the oldest
};

inline std::string mib(double bytes) {
    char b[32];
    std::snprintf(b, sizeof b, "%.0f MiB", bytes / 1048576.0);
    return b;
}

/// Peak resident memory a call adds, measured: resets the process's high-water mark
/// (/proc/self/clear_refs, "5"), runs `fn`, and subtracts the resident size before it. -1 where
/// the kernel does not offer the reset.
template <class F>
double measured_extra_bytes(F&& fn) {
    if (!attn::reset_peak_rss()) return -1;
    const long long before = attn::proc_status_kib("VmRSS");
    fn();
    const long long high = attn::proc_status_kib("VmHWM");
    return before < 0 || high < 0 ? -1 : std::max(0.0, 1024.0 * double(high) - 1024.0 * double(before));
}

/// Runs one benchmark of `c`; an allocation that fails inside is the case's error
/// (SkipWithError with what could not be allocated, attn::out_of_memory), its inputs and cache
/// are released, and the run goes on with the next case.
template <class F>
void guard_memory(benchmark::State& state, timed_case& c, F&& run) {
    try {
        run();
    } catch (const std::bad_alloc& e) {
        c.in.reset();
        c.fixture.reset();
        const std::string what = dynamic_cast<const attn::out_of_memory*>(&e)
                                     ? e.what()
                                     : "an allocation of case " + c.k.id() + " failed (std::bad_alloc)";
        state.SkipWithError(("out of memory: " + what).c_str());
    }
}

/// Sets a counter, named by attn.figures' table.
inline void put(benchmark::State& state, attn::counter c, double value) {
    state.counters[std::string(attn::enum_name(c))] = benchmark::Counter(value);
}

/// Writes every counter `f` holds (the case's quantities, or measured figures).
inline void put(benchmark::State& state, const attn::figures& f) {
    for (std::size_t i = 0; i < attn::n_counters; ++i)
        if (f.has[i]) put(state, attn::counter(i), f.value[i]);
}

/// Times `step`, then records the case's quantities and the memory one call adds; the label is
/// the case as JSON. Rates and shares are derived from the time afterwards (bench.reporters).
template <class F>
void time_calls(benchmark::State& state, timed_case& c, F&& step) {
    if (c.extra_bytes < -1.5) c.extra_bytes = measured_extra_bytes(step); // once, on first use
    for (auto _ : state) step();
    put(state, c.q);
    put(state, "extra_mib"_counter, std::max(0.0, c.extra_bytes) / 1048576.0);
    state.SetLabel(label_of(c.k, attn::part::run));
}

/// A device's ceilings in attn.peak's form, for attn::quantities: its 16-bit matrix rate is the
/// peak of bf16 and f16 core and layer cases (f32 and f64 get none: the device's rates for them
/// are not measured, so those rows carry no % of peak) and the arithmetic side of every decode
/// case's roofline (a decode core reads far below the ridge, so its memory side decides); its read
/// and copy bandwidths are the read and triad ceilings, its own cache the last level; one "thread".
inline attn::peak::ceilings device_ceilings(const attn::device_peak& d, const attn::sweep_case& k) {
    attn::peak::ceilings c;
    const bool sixteen = k.precision == attn::dtype::bf16 || k.precision == attn::dtype::f16;
    c.fma_1t_gflops.median = c.fma_all_gflops.median = sixteen || k.decode() ? d.matmul_16bit_gflops : 0.0;
    c.read_1t_gbs.median = c.read_all_gbs.median = d.read_gbs;
    c.triad_1t_gbs.median = c.triad_all_gbs.median = d.copy_gbs;
    c.threads = 1;
    c.last_level_bytes = d.cache_bytes;
    return c;
}

/// A device case prepared in c.device, timed: three untimed calls, then each iteration one call
/// timed by the device's own clock with its caches left clean before it (the benchmark is
/// registered with manual time); the label names the part timed.
inline void time_on_device(benchmark::State& state, timed_case& c, attn::part p) {
    c.device->time_ms(1, 3, true);
    for (auto _ : state) state.SetIterationTime(c.device->time_ms(1, 0, true).front() * 1e-3);
    put(state, c.q);
    state.SetLabel(label_of(c.k, p));
}

} // namespace bench
