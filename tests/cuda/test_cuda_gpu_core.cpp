// attn_cuda_gpu_tests, the prefill cores: cuda-naive, cuda-tiled, cuda-flash and cuda-hopper on
// fresh random inputs against the float64 reference (gpu_reference.hpp), every kernel that serves a
// case checked on it:
//  - the size grid: n 1, 7, 129, 1000 and n_q != n_kv both ways, d 64 and 128, causal and not,
//    G = H, 2, 1 with H = 4, batch 2;
//  - sliding windows 1, 7, 129, 4096 (causal, bottom-right), with n_q < n_kv and n_q > n_kv, and a
//    window of 4096 that hides keys (n_kv 5000);
//  - MLA's naive form: d_qk / d_v 192/128 (DeepSeek V2/V3), 96/64, 72/40, 136/8 (odd widths);
//  - every tile candidate of cuda-flash and cuda-hopper (core_options::tile), and cuda-hopper's
//    persistent loop with 1 and 3 blocks (many tiles a block: the ring wraps, Q is reloaded);
//  - mutants: the outputs must fail against a reference with kv head h % G, the mask one key
//    short (f32: the scale 1% off), and under a window of 7 the window one key short, one long and
//    on the wrong side; a scale far from 1/sqrt(d) (0.3) checks that the kernels apply the one given.
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "gpu_reference.hpp"

namespace gpu_test {

namespace {

constexpr cu::kernel prefill_kernels[] = {cu::kernel::naive, cu::kernel::tiled, cu::kernel::flash, cu::kernel::hopper};

std::string option_text(const cu::core_options& o, cu::kernel k, const cu::shape& s) {
    std::string r;
    if (o.tile > 0) {
        const auto names = cu::tile_candidates(k, s);
        r += " tile " + (std::size_t(o.tile) <= names.size() ? names[std::size_t(o.tile - 1)] : std::to_string(o.tile));
    }
    if (o.ctas > 0) r += " ctas " + std::to_string(o.ctas);
    return r;
}

/// Every prefill kernel of `kernels` that serves (s, st) and that the run wants, on the rounded
/// inputs, against the reference; with `mutants`, the outputs must also fail against each mutant.
void check_core(tally& t, const run_options& ro, const core_data& raw, cu::storage st, bool mutants,
                const cu::core_options& opt = {}, std::vector<cu::kernel> kernels = {}) {
    if (kernels.empty()) kernels.assign(std::begin(prefill_kernels), std::end(prefill_kernels));
    std::vector<cu::kernel> run;
    for (cu::kernel k : kernels)
        if (ro.wants(k) && cu::refusal(k, raw.s, st).empty()) run.push_back(k);
    if (run.empty()) return;
    const core_data c{raw.s, rounded(raw.q, st), rounded(raw.k, st), rounded(raw.v, st)};
    const std::vector<double> ref = core_reference(c.s, c.q.data(), c.k.data(), c.v.data());
    const std::vector<mutant> ms = mutants ? mutants_for(st, c.s) : std::vector<mutant>{};
    std::vector<std::vector<double>> mut;
    for (mutant m : ms) mut.push_back(core_reference(c.s, c.q.data(), c.k.data(), c.v.data(), m));
    const double tol = tolerance(st);
    for (cu::kernel k : run) {
        const std::string what =
            std::string(cu::name(k)) + " " + cu::name(st) + " " + describe(c.s) + option_text(opt, k, c.s);
        watchdog::get().at(what);
        try {
            cu::core_case cc(k, c.s, st, c.q.data(), c.k.data(), c.v.data(), opt);
            cc.run();
            const std::vector<float> out = cc.output();
            const double e = relative_error(out, ref);
            t.check(e < tol, what + ": " + fmt_err(e, tol));
            for (std::size_t i = 0; i < mut.size(); ++i) {
                const double em = relative_error(out, mut[i]);
                t.check(em >= tol, what + ": mutant '" + mutant_name(ms[i]) + "' not rejected, " + fmt_err(em, tol));
            }
        } catch (const std::exception& e) {
            t.check(false, what + ": " + e.what());
        }
    }
}

cu::shape with(cu::shape s, std::size_t window, std::size_t d_v = 0) {
    s.window = window;
    if (d_v) s.d_v = d_v;
    return s;
}

/// The mutant shapes: causal, H 4 over G 2, queries scaled up (scaled scores of standard deviation
/// 3: a softmax neither flat nor one-hot, where a scale error shows most); the second under a window
/// of 7 with n_q < n_kv.
core_data mutant_case(std::mt19937_64& rng) { return draw_core(rng, make_shape(129, 129, 64, 4, 2, true), 3.0f); }
core_data window_mutant_case(std::mt19937_64& rng) {
    return draw_core(rng, with(make_shape(129, 300, 64, 4, 2, true), 7), 3.0f);
}

void time_section(const char* name, std::chrono::steady_clock::time_point since) {
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
    std::printf("section %s: %.1f s\n", name, s);
    std::fflush(stdout);
}

} // namespace

void core_checks(tally& t, std::mt19937_64& rng, const run_options& o) {
    const bool small = o.small;
    auto since = std::chrono::steady_clock::now();
    // the size grid
    const std::vector<std::pair<std::size_t, std::size_t>> sizes =
        small ? std::vector<std::pair<std::size_t, std::size_t>>{{7, 7}, {129, 129}, {129, 7}, {7, 129}}
              : std::vector<std::pair<std::size_t, std::size_t>>{{1, 1},       {7, 7},   {129, 129},
                                                                 {1000, 1000}, {7, 129}, {129, 7}};
    const std::vector<std::size_t> groups = small ? std::vector<std::size_t>{4, 1} : std::vector<std::size_t>{4, 2, 1};
    for (const auto& [n_q, n_kv] : sizes)
        for (std::size_t d : {64, 128})
            for (bool causal : {false, true})
                for (std::size_t g : groups) {
                    const core_data raw = draw_core(rng, make_shape(n_q, n_kv, d, 4, g, causal));
                    for (cu::storage st : core_storages) check_core(t, o, raw, st, false);
                }
    time_section("core sizes", since);

    // sliding windows (causal, bottom-right): 1, 7, 129, 4096, n_q < n_kv and >
    since = std::chrono::steady_clock::now();
    const std::vector<std::pair<std::size_t, std::size_t>> wsizes =
        small ? std::vector<std::pair<std::size_t, std::size_t>>{{129, 129}, {7, 300}}
              : std::vector<std::pair<std::size_t, std::size_t>>{{129, 129}, {7, 300}, {300, 1000}, {1000, 300}};
    for (std::size_t w : {1, 7, 129, 4096})
        for (const auto& [n_q, n_kv] : wsizes)
            for (std::size_t d : {64, 128}) {
                const core_data raw = draw_core(rng, with(make_shape(n_q, n_kv, d, 4, 2, true), w));
                for (cu::storage st : core_storages) check_core(t, o, raw, st, false);
            }
    if (!small) { // a window of 4096 that hides keys: n_kv 5000, n_q < n_kv, MQA
        cu::shape s = with(make_shape(300, 5000, 64, 4, 1, true), 4096);
        s.batch = 1;
        const core_data raw = draw_core(rng, s);
        for (cu::storage st : core_storages) check_core(t, o, raw, st, false);
    }
    time_section("windows", since);

    // MLA's naive form: d_qk != d_v (DeepSeek V2/V3's 192/128, and odd widths), causal, GQA, windows
    since = std::chrono::steady_clock::now();
    for (const auto& [dq, dv] :
         std::vector<std::pair<std::size_t, std::size_t>>{{192, 128}, {96, 64}, {72, 40}, {136, 8}})
        for (std::size_t w : {std::size_t(0), std::size_t(7)}) {
            cu::shape mla = with(make_shape(small ? 7 : 129, small ? 9 : 130, dq, 4, 2, true), w, dv);
            const core_data raw = draw_core(rng, mla);
            for (cu::storage st : core_storages) check_core(t, o, raw, st, false);
        }
    if (!small) {
        const core_data raw = draw_core(rng, with(make_shape(1000, 1000, 192, 4, 4, false), 0, 128));
        for (cu::storage st : {cu::storage::bf16, cu::storage::f16}) check_core(t, o, raw, st, false);
    }
    time_section("mla", since);

    // mutants, and a scale far from 1/sqrt(d): the kernels apply the one given
    since = std::chrono::steady_clock::now();
    const core_data mc = mutant_case(rng), wmc = window_mutant_case(rng);
    for (cu::storage st : core_storages) {
        check_core(t, o, mc, st, true);
        check_core(t, o, wmc, st, true);
    }
    for (std::size_t d : {64, 128}) {
        cu::shape s = make_shape(129, 130, d, 4, 2, true);
        s.scale = 0.3;
        const core_data raw = draw_core(rng, s);
        for (cu::storage st : core_storages) check_core(t, o, raw, st, false);
    }
    time_section("mutants", since);

    // every tile candidate of cuda-flash and cuda-hopper, and cuda-hopper's persistent loop
    since = std::chrono::steady_clock::now();
    const std::size_t n = small ? 200 : 1000;
    for (const auto& [dq, dv] : std::vector<std::pair<std::size_t, std::size_t>>{{64, 64}, {128, 128}, {192, 128}})
        for (std::size_t w : {std::size_t(0), std::size_t(129)})
            for (bool causal : {false, true}) {
                if (w && !causal) continue;
                const core_data raw = draw_core(rng, with(make_shape(n, n + 37, dq, 4, 2, causal), w, dv));
                for (cu::kernel k : {cu::kernel::flash, cu::kernel::hopper}) {
                    const std::size_t count = cu::tile_candidates(k, raw.s).size();
                    for (std::size_t tile = 1; tile <= count; ++tile) {
                        cu::core_options opt;
                        opt.tile = int(tile);
                        check_core(t, o, raw, cu::storage::bf16, false, opt, {k});
                    }
                }
                for (int ctas : {1, 3}) {
                    cu::core_options opt;
                    opt.ctas = ctas;
                    check_core(t, o, raw, cu::storage::f16, false, opt, {cu::kernel::hopper});
                }
            }
    time_section("tiles and persistence", since);
}

void core_reference_checks(tally& t, std::mt19937_64& rng) {
    // a window of 1: every row's output is the value of its last visible key (bottom-right)
    {
        const core_data c = draw_core(rng, with(make_shape(5, 9, 16, 4, 2, true), 1));
        const auto out = core_reference(c.s, c.q.data(), c.k.data(), c.v.data());
        double e = 0;
        for (std::size_t b = 0; b < 2; ++b)
            for (std::size_t i = 0; i < 5; ++i)
                for (std::size_t h = 0; h < 4; ++h)
                    for (std::size_t x = 0; x < 16; ++x) {
                        const std::size_t j = i + 9 - 5; // the last key row i sees
                        e = std::max(
                            e, std::abs(out[((b * 5 + i) * 4 + h) * 16 + x] - c.v[((b * 9 + j) * 2 + h / 2) * 16 + x]));
                    }
        t.check(e < 1e-12, "reference: a window of 1 gives the value of the row's last key");
    }
    // a window at least n_kv is the causal mask: the same numbers
    {
        const core_data c = draw_core(rng, make_shape(7, 12, 8, 2, 1, true));
        const auto a = core_reference(c.s, c.q.data(), c.k.data(), c.v.data());
        const auto b = core_reference(with(c.s, 12), c.q.data(), c.k.data(), c.v.data());
        t.check(a == b, "reference: a window of n_kv changes nothing");
    }
    // the mutants' distance from the reference, at the tolerances the GPU checks use
    for (const core_data& raw : {mutant_case(rng), window_mutant_case(rng)})
        for (cu::storage st : core_storages) {
            const core_data c{raw.s, rounded(raw.q, st), rounded(raw.k, st), rounded(raw.v, st)};
            const auto ref = core_reference(c.s, c.q.data(), c.k.data(), c.v.data());
            const auto ms = mutants_for(st, c.s);
            for (mutant m : all_mutants) {
                const bool windowed =
                    m == mutant::window_short || m == mutant::window_long || m == mutant::window_wrong_side;
                if (windowed && c.s.window == 0) continue;
                const double gap = relative_error(ref, core_reference(c.s, c.q.data(), c.k.data(), c.v.data(), m));
                const bool checked = std::find(ms.begin(), ms.end(), m) != ms.end();
                std::printf("margin: core %s %s: mutant '%s' at %.3g x the tolerance%s\n", cu::name(st),
                            describe(c.s).c_str(), mutant_name(m), gap / tolerance(st),
                            checked ? "" : " (not checked)");
                if (checked)
                    t.check(gap > 2 * tolerance(st), std::string("core ") + cu::name(st) + " " + describe(c.s) +
                                                         ": mutant '" + mutant_name(m) +
                                                         "' within twice the tolerance of the reference");
            }
        }
}

} // namespace gpu_test
