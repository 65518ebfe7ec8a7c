// bench.decode -- attnbench-bench's decode mode. Each decode case is two benchmarks over one
// cache of `context` tokens (attn::decode_fixture):
//   <id>       the whole decode step: project the new token of every sequence, append it, attend
//              over context + 1 keys, project out (the cache is cut back before each step);
//   <id>/core  the attention core alone over those context + 1 keys: the part that reads the
//              cache, whose bytes per second are the case's cache bandwidth.
// The case's precision is the cache's type (f32, bf16, f16, int8; attn.core:kv); weights and
// compute stay fp32. Before either is timed, the case is checked against the fp64 reference:
// the decode step at a short context (the last row of the full causal forward) and the core over
// the case's own context (up to 8192 keys, where the reference stays cheap), both on the same
// rounded or dequantized cache; the core's error against fp64 on the unrounded cache is written
// beside (unrounded_*: what the narrower cache loses). Beside the decode cases a triad
// runs as a benchmark of its own (triad-t<threads>), so the bandwidth of the same minutes can
// be paired with theirs: pair_triads() writes, for every core, the triad measured alongside and
// its share of it. With --benchmark_enable_random_interleaving the repetitions of every case and
// of the triad are shuffled together, so drift between families is spread over all of them.
// Each timed run starts with one untimed call, which brings the case's cache back into
// whichever cache level it fits in after the other cases ran. Fixtures are kept between runs
// while their bytes fit --max-memory together; beyond it the least recently timed is released
// and rebuilt when its case runs again.
module;
#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>
#include <benchmark/benchmark.h>
#include <nlohmann/json.hpp>
export module bench.decode;
import bench.harness;
import attn.count;
import attn.peak;
import attn.results;
import attn.stats;

namespace bench {

using benchmark::Counter;

std::vector<timed_case*>& live_fixtures() {
    static std::vector<timed_case*> live;
    return live;
}

std::uint64_t next_use() {
    static std::uint64_t clock = 0;
    return ++clock;
}

/// The case's fixture, built if needed after releasing the least recently timed others until
/// the bytes held together fit max_memory_bytes.
attn::decode_timer& fixture_of(timed_case& c) {
    c.last_use = next_use();
    if (c.fixture) return *c.fixture;
    const double need = double(attn::decode_cost(c.p, c.k.context, c.kv).kv_read_bytes +
                               sizeof(float) * attn::analytic_params(c.p).total());
    auto& live = live_fixtures();
    auto held = [&] {
        double b = 0;
        for (const auto* o : live) b += double(o->fixture->bytes());
        return b;
    };
    while (!live.empty() && held() + need > c.max_memory_bytes) {
        auto oldest = std::min_element(live.begin(), live.end(), [](const timed_case* a, const timed_case* b) {
            return a->last_use < b->last_use;
        });
        (*oldest)->fixture.reset();
        live.erase(oldest);
    }
    c.fixture = attn::allocating("the K/V cache of case " + c.k.id(), need, [&] {
        return attn::with_kv_storage(c.kv, [&]<class S>(S) -> std::unique_ptr<attn::decode_timer> {
            return std::make_unique<attn::decode_fixture<float, S>>(*c.var, c.p, c.k.context, c.opt, c.seed);
        });
    });
    live.push_back(&c);
    return *c.fixture;
}

/// The memory guard and the check, once per case; false (and the benchmark skipped with the
/// reason) when the case cannot be timed.
bool ready(benchmark::State& state, timed_case& c) {
    const std::size_t L = c.k.context;
    const double cache_bytes = double(attn::decode_cost(c.p, L, c.kv).kv_read_bytes);
    if (cache_bytes > c.max_memory_bytes) {
        state.SkipWithError(
            ("the cache would need " + mib(cache_bytes) + " > --max-memory " + mib(c.max_memory_bytes)).c_str());
        return false;
    }
    if (!c.checked) {
        c.checked = true;
        const std::size_t short_l = std::min<std::size_t>(L, 15);
        const auto fill = attn::decode_fill::prefill;
        const auto step = attn::with_kv_storage(c.kv, [&]<class S>(S) {
            if constexpr (std::is_same_v<S, float>)
                return attn::check_decode<float>(*c.var, c.p, short_l, fill, c.opt, c.seed);
            else
                return attn::check_decode_kv<S>(*c.var, c.p, short_l, fill, c.opt, c.seed).same;
        });
        const auto core = attn::with_kv_storage(c.kv, [&]<class S>(S) {
            return attn::check_decode_core<S>(*c.var, attn::decode_problem(c.p, std::min<std::size_t>(L, 8192)), c.opt,
                                              c.seed);
        });
        c.check_ratio = std::max(step.ratio, core.same.ratio);
        c.unrounded = core.unrounded;
        if (!step.pass)
            c.check_error =
                "decode step output differs from the fp64 reference: " + std::to_string(step.ratio) + " x the bound";
        else if (!core.same.pass)
            c.check_error = "decode core output differs from the fp64 reference: " + std::to_string(core.same.ratio) +
                            " x the bound";
    }
    if (!c.check_error.empty()) state.SkipWithError(c.check_error.c_str());
    return c.check_error.empty();
}

/// Counters both benchmarks of a case carry: the ceilings and the core's intensity.
void ceilings(benchmark::State& state, const timed_case& c) {
    state.counters["intensity"] = Counter(attn::decode_intensity(c.p, c.kv));
    state.counters["peak_gbs"] = Counter(c.peak_gbs);
    state.counters["peak_gflops"] = Counter(c.peak_gflops);
    state.counters["peak_load_cpus"] = Counter(c.peak_load_cpus);
}

export void run_decode_step(benchmark::State& state, timed_case& c) {
    if (!ready(state, c)) return;
    auto& f = fixture_of(c);
    f.step(); // untimed: the cache back in whichever level it fits
    time_calls(state, c, [&] {
        f.step();
        benchmark::DoNotOptimize(f.output());
        benchmark::ClobberMemory();
    });
    const std::size_t L = c.k.context;
    const auto cost = attn::decode_cost(c.p, L, c.kv);
    const double B = double(c.p.batch), l3 = double(attn::machine().l3_bytes);
    state.counters["us_per_token"] = Counter(B * 1e-6, Counter::kIsIterationInvariantRate | Counter::kInvert);
    state.counters["tokens_per_s"] = Counter(B, Counter::kIsIterationInvariantRate);
    state.counters["gflops_matmul"] = Counter(double(cost.matmul_flops) * 1e-9, Counter::kIsIterationInvariantRate);
    state.counters["gflops_full"] = Counter(double(cost.full_flops) * 1e-9, Counter::kIsIterationInvariantRate);
    state.counters["step_gbs"] =
        Counter(double(cost.kv_read_bytes + cost.weight_bytes) * 1e-9, Counter::kIsIterationInvariantRate);
    state.counters["kv_bytes_per_token"] = Counter(double(cost.kv_read_bytes) / B);
    state.counters["kv_bytes_per_cached_token"] = Counter(double(attn::kv_cache_bytes_per_token(c.p, c.kv)));
    state.counters["cache_mib"] = Counter(double(cost.kv_read_bytes) / 1048576.0);
    state.counters["weight_mib"] = Counter(double(cost.weight_bytes) / 1048576.0);
    state.counters["cache_ratio_to_mha"] = Counter(attn::decode_cache_ratio_to_mha(c.p));
    state.counters["llc_mib"] = Counter(l3 / 1048576.0);
    state.counters["llc_context"] = Counter(double(attn::decode_context_exceeding(c.p, std::uint64_t(l3), c.kv)));
    ceilings(state, c);
}

export void run_decode_core(benchmark::State& state, timed_case& c) {
    if (!ready(state, c)) return;
    auto& f = fixture_of(c);
    f.core(); // untimed, as for the step
    for (auto _ : state) {
        f.core();
        benchmark::DoNotOptimize(f.context_output());
        benchmark::ClobberMemory();
    }
    const auto cost = attn::decode_cost(c.p, c.k.context, c.kv);
    state.counters["check_ratio"] = Counter(c.check_ratio);
    state.counters["unrounded_max_abs"] = Counter(c.unrounded.max_abs);
    state.counters["unrounded_ratio"] = Counter(c.unrounded.ratio);
    state.counters["unrounded_nmse"] = Counter(c.unrounded.nmse);
    state.counters["core_us"] = Counter(1e-6, Counter::kIsIterationInvariantRate | Counter::kInvert);
    state.counters["kv_gbs"] = Counter(double(cost.kv_read_bytes) * 1e-9, Counter::kIsIterationInvariantRate);
    state.counters["gflops_core"] = Counter(double(cost.attention_flops) * 1e-9, Counter::kIsIterationInvariantRate);
    ceilings(state, c);
    state.SetLabel(nlohmann::json(c.k).dump());
}

export std::string triad_name(int threads) { return "triad-t" + std::to_string(threads); }

/// The triad beside the decode cases: one pass of a[i] = b[i] + s c[i] per iteration over
/// arrays far larger than the last-level cache (attn::peak::triad_probe, allocated once), timed
/// by the probe itself; triad_gbs is the mean rate of the iterations.
export void run_triad(benchmark::State& state, int threads) {
    static std::unique_ptr<attn::peak::triad_probe> probe;
    if (!probe) probe = std::make_unique<attn::peak::triad_probe>();
    const std::size_t array_bytes = attn::peak::triad_array_bytes({});
    const double bytes = 3.0 * double(array_bytes); // read b and c, write a (STREAM's count)
    double sum = 0;
    for (auto _ : state) {
        const double gbs = probe->measure(threads, 1).median;
        state.SetIterationTime(bytes / (gbs * 1e9));
        sum += gbs;
    }
    state.counters["triad_gbs"] = Counter(sum, Counter::kAvgIterations);
    state.SetLabel(nlohmann::json{{"probe", "triad"}, {"threads", threads}, {"array_bytes", array_bytes}}.dump());
}

/// For every decode core of the runs, the triad measured alongside at its thread count (the
/// median of the triad benchmark's repetitions in the same process) and the core's bandwidth
/// as a share of it and of the roofline it gives: triad_alongside_gbs, pct_triad_alongside,
/// roof_alongside_gbs, pct_roof_alongside.
export void pair_triads(std::vector<benchmark::BenchmarkReporter::Run>& runs) {
    using Run = benchmark::BenchmarkReporter::Run;
    auto label = [](const Run& r) {
        return nlohmann::json::parse(r.report_label, nullptr, false); // discarded (not an object) if not JSON
    };
    std::map<int, std::vector<double>> triads;
    for (const auto& r : runs) {
        if (r.run_type != Run::RT_Iteration || r.error_occurred || !r.counters.count("triad_gbs")) continue;
        const auto j = label(r);
        if (j.is_object()) triads[j.value("threads", 0)].push_back(r.counters.at("triad_gbs").value);
    }
    const std::string core = "/core";
    for (auto& r : runs) {
        const auto& name = r.run_name.function_name;
        if (r.run_type != Run::RT_Iteration || r.error_occurred || name.size() < core.size() ||
            name.compare(name.size() - core.size(), core.size(), core) != 0)
            continue;
        const auto j = label(r);
        if (!j.is_object()) continue;
        const auto it = triads.find(j.value("threads", 0));
        if (it == triads.end() || !r.counters.count("kv_gbs")) continue;
        const double triad = attn::stats::median(it->second), kv = r.counters.at("kv_gbs").value;
        const double roof =
            attn::roofline_gbs(triad, r.counters.at("peak_gflops").value, r.counters.at("intensity").value);
        r.counters["triad_alongside_gbs"] = Counter(triad);
        r.counters["pct_triad_alongside"] = Counter(100.0 * kv / triad);
        r.counters["roof_alongside_gbs"] = Counter(roof);
        r.counters["pct_roof_alongside"] = Counter(100.0 * kv / roof);
    }
}

} // namespace bench
