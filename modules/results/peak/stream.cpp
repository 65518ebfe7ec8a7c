// attn.peak -- the streaming probe: every batch read once from the triad's arrays feeds a fixed
// number of FMAs, which shows where between the triad and the FMA ceiling the roofline bends; and
// the read probe: the same arrays read with adds alone into four independent sums, which is what
// a kernel that only reads (a decode step over its cache) can at most get from memory.
module;
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <initializer_list>
#include <string>
#include <vector>
#include <omp.h>
#include <xsimd/xsimd.hpp>
module attn.peak;
import :probe;
import attn.kernels;

namespace attn::peak {

namespace {

/// Walks x[0, n) once (n a multiple of the batch size) as four streams side by side, each over
/// its quarter and each prefetched 8 KiB ahead into L2, calling feed(v, k) with each batch v read
/// from stream k (the batches past the four quarters from stream 0). A single stream with four
/// accumulators (the read probe before) read 15-30 % slower than this on a 2-vCPU Zen 4 VM over
/// 2 x 256 MiB, 2 threads, and slower than the decode core reads its cache (which prefetches 128
/// rows ahead, from a K and a V stream): up to 129 % of it in the decode preset. What a kernel
/// can get from memory is what the fastest stream found gets, so both probes read this way.
template <class Feed>
[[gnu::always_inline]] inline void prefetched_streams(const float* x, std::size_t n, Feed&& feed) {
    constexpr std::size_t streams = 4, ahead = 8192 / sizeof(float), line = 64 / sizeof(float);
    const std::size_t per = n / streams / batch::size * batch::size;
    const float* s[streams] = {x, x + per, x + 2 * per, x + 3 * per};
    for (std::size_t i = 0; i < per; i += batch::size) {
        if (i % line == 0 && i + ahead < per)
            for (std::size_t k = 0; k < streams; ++k) kernels::isa::prefetch_l2(s[k] + i + ahead);
        for (std::size_t k = 0; k < streams; ++k) feed(batch::load_aligned(s[k] + i), k);
    }
    for (std::size_t i = streams * per; i < n; i += batch::size) feed(batch::load_aligned(x + i), std::size_t(0));
}

/// Reads x[0, n) once (prefetched_streams), each batch feeding Fmas FMAs into as many
/// accumulators. The accumulators start apart and the multiplier is not 1, so no two chains are
/// the same computation and none folds into an add; values grow by at most 8 per batch read. One
/// stream left to the hardware prefetchers (this probe before) measured how far the core's
/// out-of-order window reaches, not where memory and arithmetic stop overlapping: Intel Xeon VM
/// (family 6 model 207), 2 threads, 1 GiB: 72 / 55 / 47 % of the roofline at 2 / 4 / 8 FLOP/B
/// against 90 / 85 / 82 % prefetched so (the decode core, which prefetches its K and V streams,
/// reached 80-87 % at 2 and 4 FLOP/B with the old probe's figures at 72 and 55 %).
template <int Fmas>
float stream_chains(const float* x, std::size_t n) {
    batch acc[Fmas];
    for (int i = 0; i < Fmas; ++i) acc[i] = batch(float(i));
    const batch a(0.5f);
    prefetched_streams(x, n, [&](const batch v, std::size_t) {
#pragma unroll
        for (int k = 0; k < Fmas; ++k) acc[k] = fused(v, a, acc[k]);
    });
    batch sum = acc[0];
    for (int i = 1; i < Fmas; ++i) sum += acc[i];
    return xsimd::hadd(sum);
}

using stream_kernel = float (*)(const float*, std::size_t);

stream_kernel stream_kernel_for(int fmas) {
    switch (fmas) {
    case 1:
        return &stream_chains<1>;
    case 2:
        return &stream_chains<2>;
    case 4:
        return &stream_chains<4>;
    case 8:
        return &stream_chains<8>;
    case 12:
        return &stream_chains<12>;
    case 16:
        return &stream_chains<16>;
    case 24:
        return &stream_chains<24>;
    default:
        throw error("peak: streaming FMAs per batch must be 1, 2, 4, 8, 12, 16 or 24 (got " + std::to_string(fmas) +
                    ")");
    }
}

/// Sums x[0, n) (prefetched_streams): one add per batch read, into the stream's own accumulator.
float read_chains(const float* x, std::size_t n) {
    batch acc[4] = {batch(0.0f), batch(0.0f), batch(0.0f), batch(0.0f)};
    prefetched_streams(x, n, [&](const batch v, std::size_t k) { acc[k] += v; });
    return xsimd::hadd((acc[0] + acc[1]) + (acc[2] + acc[3]));
}

/// Each thread runs `k` over its static share of b[0, n), then of c[0, n) (n <= arr.n; 0: all of
/// them); GB/s of bytes read.
template <class Kernel>
stats read_each_share(triad_arrays& arr, int threads, int repetitions, Kernel k, const char* what,
                      std::size_t elements = 0) {
    const std::size_t n = (elements ? std::min(elements, arr.n) : arr.n) / batch::size * batch::size;
    const float *b = arr.b.get(), *c = arr.c.get();
    return repeated(repetitions, [&] {
        std::vector<float> sink(std::size_t(std::max(threads, 1)), 0.0f);
        const auto t0 = steady::now();
#pragma omp parallel num_threads(threads)
        {
            const std::size_t t = std::size_t(omp_get_thread_num()), nt = std::size_t(omp_get_num_threads());
            const std::size_t per = (n / batch::size + nt - 1) / nt * batch::size;
            const std::size_t i0 = std::min(n, t * per), i1 = std::min(n, i0 + per);
            float s = 0.0f;
            for (const float* x : {b, c}) s += k(x + i0, i1 - i0);
            sink[t] = s;
        }
        const double sec = std::max(seconds_since(t0), 1e-9);
        escape(sink.data());
        for (float v : sink)
            require(std::isfinite(v), std::string("peak: the ") + what + " produced a non-finite value");
        return 2.0 * double(n) * sizeof(float) / sec * 1e-9;
    });
}

} // namespace

stats read_impl(triad_arrays& arr, int threads, int repetitions, std::size_t elements) {
    return read_each_share(arr, threads, repetitions, read_chains, "read probe", elements);
}

stats read_gbs(int threads, const options& opt) {
    check_options(opt);
    triad_arrays arr(std::max<std::size_t>(triad_array_bytes(opt) / sizeof(float), 16));
    return read_impl(arr, resolve_threads(threads), opt.repetitions);
}

/// Each thread reads its static share of b, then of c (the triad's arrays, read only).
stats stream_impl(triad_arrays& arr, int threads, int fmas, int repetitions) {
    return read_each_share(arr, threads, repetitions, stream_kernel_for(fmas), "streaming probe");
}

stats stream_gbs(int threads, int fmas, const options& opt) {
    check_options(opt);
    stream_kernel_for(fmas);
    const std::size_t n = std::max<std::size_t>(triad_array_bytes(opt) / sizeof(float), 16);
    triad_arrays arr(n);
    return stream_impl(arr, resolve_threads(threads), fmas, opt.repetitions);
}

} // namespace attn::peak
