// attn.peak -- all the ceilings together (measure), and the options every probe checks. The
// probes: modules/results/peak/fma.cpp, triad.cpp, stream.cpp; their shared pieces: peak/probe.cppm.
module;
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <string>
#include <vector>
#include <omp.h>
module attn.peak;
import :probe;
import attn.kernels;
import attn.results;

namespace attn::peak {

int resolve_threads(int threads) { return threads > 0 ? threads : omp_get_max_threads(); }

void check_options(const options& opt) {
    require(opt.repetitions >= 1, "peak: repetitions must be >= 1 (got " + std::to_string(opt.repetitions) + ")");
    require(opt.fma_seconds > 0 && std::isfinite(opt.fma_seconds),
            "peak: FMA seconds per repetition must be > 0 (got " + std::to_string(opt.fma_seconds) + ")");
    if (opt.accumulators) kernel_with(opt.accumulators);
    require(opt.threads >= 0, "peak: threads must be >= 0 (got " + std::to_string(opt.threads) + ")");
}

ceilings measure(const options& opt) {
    check_options(opt);
    ceilings c;
    const int all = resolve_threads(opt.threads);
    int granted = 1;
    const fma_kernel k = choose_kernel(opt);
    c.fma_1t_gflops = fma_impl(k, 1, opt, granted);
    c.fma_all_gflops = fma_impl(k, all, opt, granted);
    c.threads = granted;
    c.accumulators = k.chains;
    c.simd_lanes = int(batch::size);
    c.simd_arch = batch::arch_type::name();
    c.fma_instruction = kernels::isa::fma_instruction;
    if (const fma_kernel b = bf16_dot_kernel(); b.chains) {
        c.bf16_dot_1t_gflops = fma_impl(b, 1, opt, granted);
        c.bf16_dot_all_gflops = fma_impl(b, all, opt, granted);
    }
    if (const fma_kernel a = amx_bf16_kernel(); a.chains) {
        c.amx_bf16_1t_gflops = fma_impl(a, 1, opt, granted);
        c.amx_bf16_all_gflops = fma_impl(a, all, opt, granted);
    }
    c.triad_array_bytes = triad_array_bytes(opt);
    c.triad_elements = std::max<std::size_t>(c.triad_array_bytes / sizeof(float), 16);
    triad_arrays arr(c.triad_elements);
    c.triad_1t_gbs = triad_impl(arr, 1, opt.repetitions);
    c.triad_all_gbs = triad_impl(arr, granted, opt.repetitions);
    c.read_1t_gbs = read_impl(arr, 1, opt.repetitions);
    c.read_all_gbs = read_impl(arr, granted, opt.repetitions);
    const std::size_t l3 = machine().l3_bytes ? machine().l3_bytes : std::size_t(32) << 20;
    for (std::size_t k : {1, 2, 4})
        if (k * l3 < 2 * c.triad_array_bytes)
            for (int t : {1, granted})
                c.read_footprints.push_back(
                    {k * l3, t, read_impl(arr, t, opt.repetitions, k * l3 / 2 / sizeof(float))});
    for (int f : stream_fmas) // the accumulators, the multiplier and the batch read must fit in registers
        if (f + 2 <= kernels::isa::vector_registers)
            c.stream.push_back({f, f / 2.0, stream_impl(arr, granted, f, opt.repetitions)});
    return c;
}

std::size_t dram_footprint(const ceilings& c, int threads) {
    const bool one = threads <= 1;
    const stats& dram = one ? c.read_1t_gbs : c.read_all_gbs;
    if (c.read_footprints.empty() || dram.samples.empty()) return 0;
    std::size_t from = 2 * c.triad_array_bytes;
    std::vector<footprint_point> scan;
    for (const auto& f : c.read_footprints)
        if ((f.threads <= 1) == one) scan.push_back(f);
    std::sort(scan.begin(), scan.end(), [](const auto& a, const auto& b) { return a.bytes > b.bytes; });
    for (const auto& f : scan) { // from the largest down, while the stream stays at DRAM speed
        if (f.gbs.median > 1.15 * dram.median) break;
        from = f.bytes;
    }
    return from;
}

} // namespace attn::peak
