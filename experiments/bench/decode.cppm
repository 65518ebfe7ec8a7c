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
// beside (unrounded_*: what the narrower cache loses). Beside the decode cases run the bandwidth
// probes (bench.probes: triad-t<threads>, read-t<threads>), paired with every core.
// Each timed run starts with one untimed call, which brings the case's cache back into
// whichever cache level it fits in after the other cases ran. Fixtures are kept between runs
// while their bytes fit --max-memory together; beyond it the least recently timed is released
// and rebuilt when its case runs again.
module;
#include <algorithm>
#include <cstdint>
#include <utility>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>
#include <benchmark/benchmark.h>
export module bench.decode;
import bench.harness;
import attn.count;
import attn.results;

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
            if (c.var->device) return attn::check::metrics{}; // a device times the core alone: no step
            if constexpr (std::is_same_v<S, float>)
                return attn::check_decode<float>(*c.var, c.p, short_l, fill, c.opt, c.seed);
            else
                return attn::check_decode_kv<S>(*c.var, c.p, short_l, fill, c.opt, c.seed).same;
        });
        const auto core = attn::with_kv_storage(c.kv, [&]<class S>(S) {
            return attn::check_decode_core<S>(*c.var, attn::decode_core_of(c.p, std::min<std::size_t>(L, 8192)), c.opt,
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

export void run_decode_step(benchmark::State& state, timed_case& c) {
    if (!ready(state, c)) return;
    auto& f = fixture_of(c);
    f.step(); // untimed: the cache back in whichever level it fits
    time_calls(state, c, [&] {
        f.step();
        benchmark::DoNotOptimize(f.output());
        benchmark::ClobberMemory();
    });
}

/// A device variant's decode core: the case's cache (context + 1 rows of random keys and values,
/// stored as the case's type) built on the host and copied to the device once, then timed by the
/// device's clock, the device's cache clean before each call (so the cache is read from memory).
void time_decode_core_on_device(benchmark::State& state, timed_case& c) {
    if (!c.device) {
        const attn::decode_core core = attn::decode_core_of(c.p, c.k.context); // MLA absorbed: the latent
        const auto in = attn::decode_core_inputs(core, c.seed);
        c.device = attn::with_kv_storage(c.kv, [&]<class S>(S) {
            return attn::prepare_decode_on_device<S>(*c.var, core.p, in.q, attn::filled_cache<S>(core, in), c.opt);
        });
    }
    bench::time_on_device(state, c, attn::part::core);
}

export void run_decode_core(benchmark::State& state, timed_case& c) {
    if (!ready(state, c)) return;
    if (c.var->device) {
        time_decode_core_on_device(state, c);
    } else {
        auto& f = fixture_of(c);
        f.core(); // untimed, as for the step
        for (auto _ : state) {
            f.core();
            benchmark::DoNotOptimize(f.context_output());
            benchmark::ClobberMemory();
        }
        put(state, c.q);
        state.SetLabel(label_of(c.k, attn::part::core));
    }
    put(state, "check_ratio"_counter, c.check_ratio);
    put(state, "unrounded_max_abs"_counter, c.unrounded.max_abs);
    put(state, "unrounded_ratio"_counter, c.unrounded.ratio);
    put(state, "unrounded_nmse"_counter, c.unrounded.nmse);
}

} // namespace bench
