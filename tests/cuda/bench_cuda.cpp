// attn_cuda_bench: the timing table scripts/gpu.sh prints, as CSV on stdout (one header line per
// mode). Times are medians of CUDA-event timings, each call with a cold L2 (core_case::time_ms with
// flush_l2), after warm-up calls; inputs are uniform in [-1, 1), never zeros.
//   attn_cuda_bench peak     the device's ceilings (cuBLAS bf16 GEMM, read kernel, D2D copy)
//   attn_cuda_bench flash    cuda-flash, bf16, hidden 2048 (H = 2048 / d), N 1k-16k, batch x N >= 16k
//                            and B x H >= 132, d 64 and 128, causal and not: ms and TFLOP/s
//                            (4 B H d x visible pairs; causal n_q = n_kv: N (N + 1) / 2 pairs)
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
#include "formats.hpp"

namespace cu = attn::cuda;

/// cuda-decode's table (bench_cuda_decode.cpp); read_ceiling 0: measured here.
void bench_decode(int reps, double read_ceiling);

namespace {

/// Uniform in [-1, 1), from a cheap counter hash (gigabytes of inputs in seconds).
void fill(std::vector<float>& x, std::uint64_t seed) {
    for (std::size_t i = 0; i < x.size(); ++i) {
        std::uint64_t z = (i + 1) * 0x9e3779b97f4a7c15ull + seed;
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        z ^= z >> 31;
        x[i] = float(z >> 40) * (2.0f / 16777216.0f) - 1.0f;
    }
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0.0 : v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

void bench_flash(int reps) {
    std::printf("kernel,storage,batch,heads,kv_heads,n,d,causal,ms,tflops\n");
    for (std::size_t d : {64, 128})
        for (std::size_t n : {1024, 2048, 4096, 8192, 16384})
            for (bool causal : {false, true}) {
                cu::shape s;
                s.heads = s.kv_heads = 2048 / d;
                s.batch = std::max<std::size_t>(16384 / n, (132 + s.heads - 1) / s.heads);
                s.n_q = s.n_kv = n;
                s.d_qk = d;
                s.causal = causal;
                std::vector<float> q(s.batch * n * s.heads * d), k(q.size()), v(q.size());
                fill(q, 1);
                fill(k, 2);
                fill(v, 3);
                try {
                    cu::core_case c(cu::kernel::flash, s, cu::storage::bf16, q.data(), k.data(), v.data());
                    const double ms = median(c.time_ms(reps, 3, true));
                    const double pairs = causal ? double(n) * double(n + 1) / 2 : double(n) * double(n);
                    const double flop = 4.0 * double(s.batch * s.heads * d) * pairs;
                    std::printf("cuda-flash,bf16,%zu,%zu,%zu,%zu,%zu,%d,%.4f,%.1f\n", s.batch, s.heads, s.kv_heads, n,
                                d, int(causal), ms, flop / ms * 1e-9);
                } catch (const std::exception& e) {
                    std::printf("# cuda-flash d %zu n %zu causal %d: %s\n", d, n, int(causal), e.what());
                }
                std::fflush(stdout);
            }
}

} // namespace

int main(int argc, char** argv) {
    const std::string mode = argc > 1 ? argv[1] : "";
    const int reps = argc > 2 ? std::max(1, std::atoi(argv[2])) : 10;
    if (mode != "peak" && mode != "flash" && mode != "decode") {
        std::fprintf(stderr, "usage: %s peak|flash|decode [repetitions] [read GB/s, decode]\n", argv[0]);
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
            for (const auto& c : p.read_candidates) std::printf("read_candidate,%.1f,GB/s,%s\n", c.gbs, c.shape.c_str());
            std::printf("read,%.1f,GB/s,%zu bytes\n", p.read_gbs, p.read_bytes);
            std::printf("copy,%.1f,GB/s,%zu bytes each way\n", p.copy_gbs, p.read_bytes);
        } else if (mode == "flash") {
            bench_flash(reps);
        } else {
            bench_decode(reps, argc > 3 ? std::atof(argv[3]) : 0.0);
        }
    } catch (const std::exception& e) {
        std::printf("error: %s\n", e.what());
        return 1;
    }
    return 0;
}
