// attn.peak -- the FMA ceiling: `Chains` independent FMA chains per thread on the batch and FMA
// instruction attn.kernels:isa chooses, with 8, 12 or 16 chains tried and the fastest kept; and,
// where the CPU has AVX512_BF16, the bf16 dot-product ceiling (vdpbf16ps) the same way, and where
// it has AMX-BF16 (and Linux grants the tiles), the tile ceiling (tdpbf16ps).
module;
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <iterator>
#include <string>
#include <vector>
#include <omp.h>
#if defined(__x86_64__)
#include <immintrin.h>
#endif
#include <xsimd/xsimd.hpp>
module attn.peak;
import :probe;

namespace attn::peak {

namespace {

// The FMA and vdpbf16ps loops are attn.kernels:isa's (fma_chains, bf16_dot_chains), which the
// kernels' choice of vdpbf16ps times too (isa::bf16_dot_over_fma); this file times them on threads.
using kernels::isa::fma_chains;
#if defined(__x86_64__)
using kernels::isa::bf16_dot_chains;
#endif

constexpr double fma_flop = kernels::isa::fma_step_flop; // one FMA batch: 2 FLOP a lane
constexpr fma_kernel fma_kernels[] = {
    {8, &fma_chains<8>, fma_flop}, {12, &fma_chains<12>, fma_flop}, {16, &fma_chains<16>, fma_flop}};

#if defined(__x86_64__)
/// `iters` rounds of four tdpbf16ps, C tiles 0-3 each accumulating one of the A tiles 4-5 times one
/// of the B tiles 6-7 (16 x 16 fp32 += 16 x 32 bf16 times 32 x 16 bf16: 16,384 FLOP), every bf16
/// operand 2^-30 as in isa::bf16_dot_chains. Four chains: a tile product's latency is a few times
/// its issue interval, so four in flight keep the unit busy. Each thread configures its own tiles, as the
/// bf16 core does (isa::amx_begin).
[[gnu::target("amx-tile,amx-bf16")]] float amx_bf16_chains(std::size_t iters, float seed) {
    alignas(64) unsigned short ab[16 * 32];
    std::fill(std::begin(ab), std::end(ab), (unsigned short)0x3080); // 2^-30 in bf16
    alignas(64) float c[4][16 * 16];
    for (int t = 0; t < 4; ++t) std::fill(std::begin(c[t]), std::end(c[t]), seed + 0.001f * float(t));
    kernels::isa::amx_begin();
    _tile_loadd(0, c[0], 64);
    _tile_loadd(1, c[1], 64);
    _tile_loadd(2, c[2], 64);
    _tile_loadd(3, c[3], 64);
    _tile_loadd(4, ab, 64);
    _tile_loadd(5, ab, 64);
    _tile_loadd(6, ab, 64);
    _tile_loadd(7, ab, 64);
    for (std::size_t it = 0; it < iters; ++it) {
        _tile_dpbf16ps(0, 4, 6);
        _tile_dpbf16ps(1, 4, 7);
        _tile_dpbf16ps(2, 5, 6);
        _tile_dpbf16ps(3, 5, 7);
    }
    _tile_stored(0, c[0], 64);
    _tile_stored(1, c[1], 64);
    _tile_stored(2, c[2], 64);
    _tile_stored(3, c[3], 64);
    kernels::isa::amx_end();
    float s = 0;
    for (int t = 0; t < 4; ++t) s += c[t][0] + c[t][255];
    return s;
}
#endif

} // namespace

fma_kernel bf16_dot_kernel() {
#if defined(__x86_64__)
    if (kernels::isa::cpu_has_avx512_bf16())
        return {kernels::isa::bf16_dot_chain_count, &bf16_dot_chains, kernels::isa::bf16_dot_step_flop};
#endif
    return {0, nullptr, 0};
}

fma_kernel amx_bf16_kernel() {
#if defined(__x86_64__)
    if (kernels::isa::amx_granted()) return {4, &amx_bf16_chains, 16.0 * 16.0 * 32.0 * 2.0};
#endif
    return {0, nullptr, 0};
}

fma_kernel kernel_with(int chains) {
    for (const auto& k : fma_kernels)
        if (k.chains == chains) return k;
    throw error("peak: FMA accumulators must be 0 (choose), 8, 12 or 16 (got " + std::to_string(chains) + ")");
}

namespace {

/// GFLOP/s of a `threads`-wide team each running `iters` rounds of `k`; sets `granted`.
double time_fma(const fma_kernel& k, int threads, std::size_t iters, int& granted, double* seconds = nullptr) {
    std::vector<float> sink(std::size_t(std::max(threads, 1)), 0.0f);
    int team = 1;
    auto t0 = steady::now();
#pragma omp parallel num_threads(threads)
    {
#pragma omp single nowait
        team = omp_get_num_threads();
        sink[std::size_t(omp_get_thread_num())] = k.run(iters, 1.0f + 0.01f * float(omp_get_thread_num()));
    }
    const double s = std::max(seconds_since(t0), 1e-9);
    escape(sink.data());
    for (float v : sink) require(std::isfinite(v), "peak: FMA kernel produced a non-finite value");
    granted = team;
    if (seconds) *seconds = s;
    return k.flop * double(team) * double(iters) * double(k.chains) / s * 1e-9;
}

/// Rounds of `k` that take about `target` seconds on one thread (the runs warm the core up).
std::size_t calibrate(const fma_kernel& k, double target) {
    std::size_t iters = 256;
    int granted = 0;
    double s = 0;
    time_fma(k, 1, iters, granted, &s);
    while (s < std::min(0.01, target) && iters < (std::size_t(1) << 40)) {
        iters *= 4;
        time_fma(k, 1, iters, granted, &s);
    }
    return std::max<std::size_t>(1, std::size_t(double(iters) * target / s));
}

} // namespace

/// The chain count that runs fastest here: best of three short runs each.
fma_kernel choose_kernel(const options& opt) {
    if (opt.accumulators) return kernel_with(opt.accumulators);
    fma_kernel best = fma_kernels[0];
    double best_rate = 0;
    for (const auto& k : fma_kernels) {
        const std::size_t iters = calibrate(k, opt.fma_seconds / 4);
        int granted = 0;
        double rate = 0;
        for (int r = 0; r < 3; ++r) rate = std::max(rate, time_fma(k, 1, iters, granted));
        if (rate > best_rate) {
            best_rate = rate;
            best = k;
        }
    }
    return best;
}

stats fma_impl(const fma_kernel& k, int threads, const options& opt, int& granted) {
    const std::size_t iters = calibrate(k, opt.fma_seconds);
    return repeated(opt.repetitions, [&] { return time_fma(k, threads, iters, granted); });
}

stats fma_gflops(int threads, const options& opt) {
    check_options(opt);
    int granted = 0;
    return fma_impl(choose_kernel(opt), resolve_threads(threads), opt, granted);
}

} // namespace attn::peak
