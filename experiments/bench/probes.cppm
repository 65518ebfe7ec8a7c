// bench.probes -- the probes attnbench-bench runs beside the cases, as benchmarks of their own,
// so that a case's ceiling can be the one measured in the same minutes rather than the one
// peak.json recorded before the sweep (a shared VM gives a process more or less of its cores from
// minute to minute; with --benchmark_enable_random_interleaving the repetitions of every case and
// every probe are shuffled together, so that drift reaches both alike):
//   fma-t<threads>    beside every case on the host: attn.peak's FMA loop, its rate and its ratio
//                     to peak.json's FMA peak at those threads (fma_ratio: the machine's drift);
//   triad-t<threads>  beside decode cases: the triad, the reference bandwidth;
//   read-t<threads>   beside decode cases: a read-only stream, a decode step's memory ceiling.
// pair_probes() gives every case the medians of the probes at its thread count (attn::alongside),
// from which attn::derive writes the alongside ceilings and shares.
module;
#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>
#include <benchmark/benchmark.h>
#include <nlohmann/json.hpp>
export module bench.probes;
import bench.harness;
import attn.count;
import attn.figures;
import attn.peak;
import attn.stats;

namespace bench {

export enum class probe { fma, triad, read };

export std::string probe_name(probe p, int threads) {
    return std::string(p == probe::fma ? "fma" : p == probe::triad ? "triad" : "read") + "-t" + std::to_string(threads);
}

/// The FMA probe: one short measurement of attn.peak's FMA loop per iteration (10 ms timed, after
/// its calibration and warm-up; the accumulators peak.json chose, so that its rate and
/// peak.json's are of the same loop), each iteration's time the whole call's (so that
/// --benchmark_min_time counts what the probe costs the run); fma_gflops is the iterations' mean
/// rate, fma_ratio that over `ceiling` (peak.json's FMA peak at these threads).
void run_fma_probe(benchmark::State& state, int threads, int accumulators, double ceiling) {
    attn::peak::options po;
    po.repetitions = 1;
    po.fma_seconds = 0.01;
    po.accumulators = accumulators;
    double sum = 0;
    for (auto _ : state) {
        const auto t0 = std::chrono::steady_clock::now();
        const double g = attn::peak::fma_gflops(threads, po).median;
        state.SetIterationTime(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
        sum += g;
    }
    const double mean = state.iterations() ? sum / double(state.iterations()) : 0.0;
    state.counters[std::string(attn::enum_name("fma_gflops"_counter))] = benchmark::Counter(mean);
    if (ceiling > 0)
        state.counters[std::string(attn::enum_name("fma_ratio"_counter))] = benchmark::Counter(mean / ceiling);
    state.SetLabel(nlohmann::json{
        {"probe", "fma"},
        {"part", attn::enum_name(attn::part::probe)},
        {"threads", threads},
        {"accumulators",
         accumulators}}.dump());
}

/// A bandwidth probe: one pass per iteration over arrays far larger than the last-level cache
/// (attn::peak::triad_probe, allocated once): the triad a[i] = b[i] + s c[i], or the read probe
/// over b and c, timed by the probe itself; triad_gbs / read_gbs is the mean rate of the
/// iterations.
void run_bandwidth_probe(benchmark::State& state, probe which, int threads) {
    static std::unique_ptr<attn::peak::triad_probe> arrays;
    if (!arrays) arrays = std::make_unique<attn::peak::triad_probe>();
    const std::size_t array_bytes = attn::peak::triad_array_bytes({});
    // bytes counted: the triad reads b and c and writes a (STREAM's 12 per element); the read
    // probe reads b and c
    const double bytes = (which == probe::triad ? 3.0 : 2.0) * double(array_bytes);
    double sum = 0;
    for (auto _ : state) {
        const double gbs =
            (which == probe::triad ? arrays->measure(threads, 1) : arrays->measure_read(threads, 1)).median;
        state.SetIterationTime(bytes / (gbs * 1e9));
        sum += gbs;
    }
    state.counters[std::string(attn::enum_name(which == probe::triad ? "triad_gbs"_counter : "read_gbs"_counter))] =
        benchmark::Counter(sum, benchmark::Counter::kAvgIterations);
    state.SetLabel(nlohmann::json{
        {"probe", which == probe::triad ? "triad" : "read"},
        {"part", attn::enum_name(attn::part::probe)},
        {"threads", threads},
        {"array_bytes",
         array_bytes}}.dump());
}

/// Registers probe `which` at `threads` (once: a second call for the same pair does nothing),
/// its ceiling from `peak` (peak.json, or the harness's own measurement).
export void register_probe(probe which, int threads, const attn::peak::ceilings& peak) {
    const std::string name = probe_name(which, threads);
    if (registered().count(name)) return;
    registered()[name] = {nullptr, attn::part::probe, threads};
    benchmark::internal::Benchmark* b = nullptr;
    if (which == probe::fma) {
        const double ceiling =
            attn::fma_ceiling_at(peak.fma_1t_gflops.median, peak.fma_all_gflops.median, peak.threads, threads);
        b = benchmark::RegisterBenchmark(name.c_str(),
                                         [threads, acc = peak.accumulators, ceiling](benchmark::State& s) {
                                             run_fma_probe(s, threads, acc, ceiling);
                                         });
    } else {
        b = benchmark::RegisterBenchmark(
            name.c_str(), [threads, which](benchmark::State& s) { run_bandwidth_probe(s, which, threads); });
    }
    b->UseManualTime()->Unit(benchmark::kMillisecond);
}

/// For every case of the runs, the probes measured alongside at its thread count (the median of
/// each probe's repetitions in the same process), given to `rederive` (attn::derive with them):
/// a decode core's triad, read and FMA ratio (its roofline), a core or layer call's FMA ratio.
export void pair_probes(std::vector<benchmark::BenchmarkReporter::Run>& runs,
                        void (*rederive)(benchmark::BenchmarkReporter::Run&, const attn::alongside&)) {
    using Run = benchmark::BenchmarkReporter::Run;
    auto known = [](const Run& r) -> const registered_benchmark* {
        const auto it = registered().find(r.run_name.function_name);
        return it == registered().end() ? nullptr : &it->second;
    };
    std::map<std::pair<std::string, int>, std::vector<double>> probes;
    for (const auto& r : runs) {
        const registered_benchmark* b = known(r);
        if (r.run_type != Run::RT_Iteration || r.error_occurred || !b || b->part != attn::part::probe) continue;
        for (const char* name : {"triad_gbs", "read_gbs", "fma_ratio"})
            if (r.counters.count(name)) probes[{name, b->threads}].push_back(r.counters.at(name).value);
    }
    auto median_of = [&](const char* name, int threads) {
        const auto it = probes.find({name, threads});
        return it == probes.end() ? 0.0 : attn::stats::median(it->second);
    };
    for (auto& r : runs) {
        const registered_benchmark* b = known(r);
        if (r.error_occurred || !b || !b->k) continue;
        if (b->part == attn::part::core)
            rederive(r, {median_of("triad_gbs", b->threads), median_of("read_gbs", b->threads),
                         median_of("fma_ratio", b->threads)});
        else if (b->part == attn::part::run && !b->k->decode())
            rederive(r, {0, 0, median_of("fma_ratio", b->threads)});
    }
}

} // namespace bench
