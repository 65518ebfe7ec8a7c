// attn.peak -- the triad a[i] = b[i] + s*c[i] (STREAM's, 12 bytes per element) on arrays far
// larger than the last-level cache, allocated once and shared with the streaming probe.
module;
#include <algorithm>
#include <chrono>
#include <cstddef>
#include <initializer_list>
#include <memory>
#include <string>
module attn.peak;
import :probe;
import attn.results;

namespace attn::peak {

triad_arrays::triad_arrays(std::size_t elements) : n(elements), a(n), b(n), c(n) {
    float *pa = a.get(), *pb = b.get(), *pc = c.get();
    // First touch by all threads with the same static schedule the triad uses.
#pragma omp parallel for schedule(static)
    for (std::size_t i = 0; i < n; ++i) {
        pa[i] = 0.0f;
        pb[i] = 1.0f + float(i % 7);
        pc[i] = 2.0f + float(i % 5);
    }
}

stats triad_impl(triad_arrays& arr, int threads, int repetitions) {
    float *a = arr.a.get(), *b = arr.b.get(), *c = arr.c.get();
    const std::size_t n = arr.n;
    const float scalar = 3.0f;
    const stats st = repeated(repetitions, [&] {
        escape(a);
        escape(b);
        escape(c);
        const auto t0 = steady::now();
#pragma omp parallel for schedule(static) num_threads(threads)
        for (std::size_t i = 0; i < n; ++i) a[i] = b[i] + scalar * c[i];
        const double t = seconds_since(t0);
        escape(a);
        return 12.0 * double(n) / t * 1e-9;
    });
    for (std::size_t i : {std::size_t(0), n / 3, n / 2, n - 1})
        require(a[i] == b[i] + scalar * c[i], "peak: triad produced a wrong value at index " + std::to_string(i));
    return st;
}

std::size_t triad_array_bytes(const options& opt) {
    if (opt.triad_bytes) return opt.triad_bytes;
    const std::size_t l3 = machine().l3_bytes ? machine().l3_bytes : std::size_t(32) << 20;
    return std::max<std::size_t>(4 * l3, std::size_t(64) << 20);
}

struct triad_probe::arrays : triad_arrays {
    using triad_arrays::triad_arrays;
};

triad_probe::triad_probe(const options& opt) {
    check_options(opt);
    arrays_ = std::make_unique<arrays>(std::max<std::size_t>(triad_array_bytes(opt) / sizeof(float), 16));
}

triad_probe::~triad_probe() = default;

stats triad_probe::measure(int threads, int repetitions) {
    require(repetitions >= 1, "peak: triad repetitions must be >= 1 (got " + std::to_string(repetitions) + ")");
    return triad_impl(*arrays_, resolve_threads(threads), repetitions);
}

stats triad_probe::measure_read(int threads, int repetitions) {
    require(repetitions >= 1, "peak: read repetitions must be >= 1 (got " + std::to_string(repetitions) + ")");
    return read_impl(*arrays_, resolve_threads(threads), repetitions);
}

stats triad_gbs(int threads, const options& opt) { return triad_probe(opt).measure(threads, opt.repetitions); }

} // namespace attn::peak
