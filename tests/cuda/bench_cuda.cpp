// attn_cuda_bench: the timing table scripts/gpu.sh prints, as CSV on stdout (one header line per
// mode). Times are medians of CUDA-event timings, each call with a cold L2 (core_case::time_ms with
// flush_l2), after warm-up calls; inputs are uniform in [-1, 1), never zeros.
//   attn_cuda_bench peak     the device's ceilings (cuBLAS bf16 GEMM, read kernel, D2D copy)
//   attn_cuda_bench flash    cuda-flash and cuda-hopper, every tile candidate (core_options::tile),
//                            bf16, hidden 2048 (H = 2048 / d), N 1k-16k, batch x N >= 16k and
//                            B x H >= 132, d 64 and 128, causal and not (issue 47's table): ms and
//                            TFLOP/s (4 B H d x visible pairs, counted row by row)
//   attn_cuda_bench window   the same kernels at B 8, H 16, d 128, N 16384, causal, windows 1024 and
//                            4096 beside the full causal mask (issue 48): ms, TFLOP/s, the speed-up
//                            over the same kernel and tile's full causal time, the counted FLOP ratio
//   attn_cuda_bench shape reps d N causal [W]   one shape of the flash table (for Nsight Compute)
//   attn_cuda_bench decode [reps] [read GB/s]   cuda-decode: issue 45's table and candidates, n_q,
//                            pages, cache types, the rolling buffer, MLA (bench_cuda_decode.cpp)
// Not a test: it asserts nothing (attn_cuda_gpu_tests checks the outputs).
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <vector>
#include "api.hpp"
#include "bench_inputs.hpp"
#include "formats.hpp"

namespace cu = attn::cuda;

/// cuda-decode's table (bench_cuda_decode.cpp); read_ceiling 0: measured here.
void bench_decode(int reps, double read_ceiling);

namespace {

/// Uniform in [-1, 1) (bench_inputs.hpp).
void fill(std::vector<float>& x, std::uint64_t seed) {
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = attn_bench::uniform_at(i, seed);
}

using attn_bench::median;

/// (query, key) pairs scored in one head: the keys of every row (bottom-right causal, a window W).
double visible_pairs(const cu::shape& s) {
    double pairs = 0;
    for (std::size_t i = 0; i < s.n_q; ++i) {
        long long end = (long long)s.n_kv;
        if (s.causal) end = std::min<long long>(end, (long long)i + (long long)s.n_kv - (long long)s.n_q + 1);
        end = std::max(0LL, end);
        pairs += double(s.window > 0 ? std::min<long long>(end, (long long)s.window) : end);
    }
    return pairs;
}

/// Every tile candidate of cuda-flash and cuda-hopper on s; one CSV row each, and the times by
/// "kernel tile" for the caller. A kernel the device cannot run prints one "# refused" line.
std::vector<std::pair<std::string, double>> time_candidates(const cu::shape& s, int reps) {
    std::vector<float> q(s.batch * s.n_q * s.heads * s.d_qk), k(s.batch * s.n_kv * s.kv_heads * s.d_qk), v(k.size());
    fill(q, 1);
    fill(k, 2);
    fill(v, 3);
    const double flop = 4.0 * double(s.batch * s.heads * s.d_qk) * visible_pairs(s);
    std::vector<std::pair<std::string, double>> times;
    for (cu::kernel kn : {cu::kernel::flash, cu::kernel::hopper}) {
        if (const std::string why = cu::refusal(kn, s, cu::storage::bf16); !why.empty()) {
            std::printf("# %s refused: %s\n", cu::name(kn), why.c_str());
            continue;
        }
        const std::vector<std::string> tiles = cu::tile_candidates(kn, s);
        for (std::size_t t = 0; t < tiles.size(); ++t) {
            cu::core_options opt;
            opt.tile = int(t + 1);
            try {
                cu::core_case c(kn, s, cu::storage::bf16, q.data(), k.data(), v.data(), opt);
                const double ms = median(c.time_ms(reps, 3, true));
                std::printf("%s,%s,bf16,%zu,%zu,%zu,%zu,%zu,%d,%zu,%.4f,%.1f\n", cu::name(kn), tiles[t].c_str(),
                            s.batch, s.heads, s.kv_heads, s.n_q, s.d_qk, int(s.causal), s.window, ms, flop / ms * 1e-9);
                times.push_back({std::string(cu::name(kn)) + " " + tiles[t], ms});
            } catch (const std::exception& e) {
                std::printf("# %s %s d %zu n %zu causal %d window %zu: %s\n", cu::name(kn), tiles[t].c_str(), s.d_qk,
                            s.n_q, int(s.causal), s.window, e.what());
            }
            std::fflush(stdout);
        }
    }
    return times;
}

constexpr const char* core_header = "kernel,tile,storage,batch,heads,kv_heads,n,d,causal,window,ms,tflops\n";

/// A shape of the prefill table: hidden 2048 (H = 2048 / d), batch x N >= 16k and B x H >= 132.
cu::shape table_shape(std::size_t d, std::size_t n, bool causal, std::size_t window = 0) {
    cu::shape s;
    s.heads = s.kv_heads = 2048 / d;
    s.batch = std::max<std::size_t>(16384 / n, (132 + s.heads - 1) / s.heads);
    s.n_q = s.n_kv = n;
    s.d_qk = d;
    s.causal = causal;
    s.window = window;
    return s;
}

void bench_flash(int reps) {
    std::printf("%s", core_header);
    for (std::size_t d : {64, 128})
        for (std::size_t n : {1024, 2048, 4096, 8192, 16384})
            for (bool causal : {false, true}) time_candidates(table_shape(d, n, causal), reps);
}

/// One shape of the prefill table (Nsight Compute's run): d, N, causal, window as given.
void bench_shape(int reps, std::size_t d, std::size_t n, bool causal, std::size_t window) {
    std::printf("%s", core_header);
    time_candidates(table_shape(d, n, causal, window), reps);
}

void bench_window(int reps) {
    std::printf("%s", core_header);
    cu::shape s;
    s.batch = 8;
    s.heads = s.kv_heads = 16;
    s.n_q = s.n_kv = 16384;
    s.d_qk = 128;
    s.causal = true;
    const double full_pairs = visible_pairs(s);
    const auto full = time_candidates(s, reps);
    std::vector<std::string> summary;
    for (std::size_t w : {1024, 4096}) {
        s.window = w;
        const double ratio = full_pairs / visible_pairs(s);
        for (const auto& [what, ms] : time_candidates(s, reps))
            for (const auto& [what_full, ms_full] : full)
                if (what == what_full) {
                    char b[200];
                    std::snprintf(b, sizeof b,
                                  "# %s W %zu: %.2fx over full causal, counted FLOP ratio %.2fx (%.2f of it)",
                                  what.c_str(), w, ms_full / ms, ratio, ms_full / ms / ratio);
                    summary.push_back(b);
                }
    }
    for (const std::string& line : summary) std::printf("%s\n", line.c_str());
}

} // namespace

int main(int argc, char** argv) {
    const std::string mode = argc > 1 ? argv[1] : "";
    const int reps = argc > 2 ? std::max(1, std::atoi(argv[2])) : 10;
    if (mode != "peak" && mode != "flash" && mode != "window" && mode != "decode" && mode != "shape") {
        std::fprintf(stderr,
                     "usage: %s peak|flash|window|decode [repetitions] [read GB/s, decode]\n"
                     "       %s shape repetitions d N causal(0|1) [window]\n",
                     argv[0], argv[0]);
        return 2;
    }
    if (mode == "shape" && (argc < 6 || std::atoi(argv[3]) <= 0 || std::atoi(argv[4]) <= 0)) {
        std::fprintf(stderr, "%s shape: needs repetitions, a positive d and N, causal 0 or 1\n", argv[0]);
        return 2;
    }
    const cu::device_info dev = cu::query();
    if (!dev.present) {
        std::printf("skipped: %s\n", dev.reason.c_str());
        return 77;
    }
    try {
        if (mode == "peak") {
            const cu::peak p = cu::measure_peak(reps);
            std::printf("measure,value,unit,size\n");
            std::printf("tensor,%.1f,TFLOP/s,%zu^3 bf16 GEMM\n", p.tensor_tflops, p.gemm_n);
            std::printf("tensor_f16,%.1f,TFLOP/s,%zu^3 f16 GEMM\n", p.f16_tflops, p.gemm_n);
            for (const auto& c : p.read_candidates)
                std::printf("read_candidate,%.1f,GB/s,%s\n", c.gbs, c.shape.c_str());
            std::printf("read,%.1f,GB/s,%zu bytes\n", p.read_gbs, p.read_bytes);
            std::printf("copy,%.1f,GB/s,%zu bytes each way\n", p.copy_gbs, p.read_bytes);
        } else if (mode == "flash") {
            bench_flash(reps);
        } else if (mode == "window") {
            bench_window(reps);
        } else if (mode == "shape") {
            bench_shape(reps, std::size_t(std::atoi(argv[3])), std::size_t(std::atoi(argv[4])), std::atoi(argv[5]) != 0,
                        argc > 6 ? std::size_t(std::atoll(argv[6])) : 0);
        } else {
            bench_decode(reps, argc > 3 ? std::atof(argv[3]) : 0.0);
        }
    } catch (const std::exception& e) {
        std::printf("error: %s\n", e.what());
        return 1;
    }
    return 0;
}
