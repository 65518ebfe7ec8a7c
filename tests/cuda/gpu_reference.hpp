// What attn_cuda_gpu_tests' files share (test_cuda_gpu.cpp: decode, layer, main; test_cuda_gpu_core.cpp:
// the prefill cores): the float64 reference of one attention core (plain loops, bottom-right causal,
// sliding windows), its mutants, the error measure, the tally of checks, random inputs, and a
// watchdog that ends the run with the name of the check in progress when a kernel hangs.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <limits>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>
#include "api.hpp"
#include "formats.hpp"

namespace gpu_test {

namespace cu = attn::cuda;
namespace fm = attn::cuda::formats;

/// One planted mistake: the scale 1% off, kv head h % G, the causal mask one key short; under a
/// window: one key short (W - 1), one long (W + 1), on the wrong side (the first W keys of the row).
enum class mutant { none, scale, kv_map, mask_short, window_short, window_long, window_wrong_side };
inline constexpr mutant all_mutants[] = {mutant::scale,        mutant::kv_map,      mutant::mask_short,
                                         mutant::window_short, mutant::window_long, mutant::window_wrong_side};
inline const char* mutant_name(mutant m) {
    switch (m) {
    case mutant::scale:
        return "scale 1% off";
    case mutant::kv_map:
        return "kv head h % G";
    case mutant::mask_short:
        return "mask one key short";
    case mutant::window_short:
        return "window one key short";
    case mutant::window_long:
        return "window one key long";
    case mutant::window_wrong_side:
        return "window on the wrong side";
    case mutant::none:
        break;
    }
    return "none";
}

inline double tolerance(cu::storage st) { return st == cu::storage::f32 ? 1e-4 : 2e-2; }

inline float round_to(cu::storage st, float x) {
    return st == cu::storage::bf16 ? fm::round_bf16(x) : st == cu::storage::f16 ? fm::round_f16(x) : x;
}

inline std::vector<float> random_vector(std::mt19937_64& rng, std::size_t n, float sigma = 1.0f) {
    std::normal_distribution<float> nd(0.0f, sigma);
    std::vector<float> x(n);
    for (float& e : x) e = nd(rng);
    return x;
}

inline std::vector<float> rounded(std::vector<float> x, cu::storage st) {
    for (float& e : x) e = round_to(st, e);
    return x;
}

/// Runs f(i) for i < n on every hardware thread.
inline void parallel_for(std::size_t n, const std::function<void(std::size_t)>& f) {
    const std::size_t t = std::max(1u, std::thread::hardware_concurrency());
    std::vector<std::thread> pool;
    for (std::size_t w = 0; w < std::min(t, n); ++w)
        pool.emplace_back([&, w] {
            for (std::size_t i = w; i < n; i += t) f(i);
        });
    for (auto& th : pool) th.join();
}

/// Keys [begin, end) query row i sees: bottom-right causal (j <= i + n_kv - n_q), a window W the
/// last W of them; `m` plants one mistake.
struct key_range {
    std::size_t begin = 0, end = 0;
};
inline key_range keys_seen(const cu::shape& s, std::size_t i, mutant m) {
    long long end = (long long)s.n_kv;
    if (s.causal) end = std::min<long long>(end, (long long)i + (long long)s.n_kv - (long long)s.n_q + 1);
    if (m == mutant::mask_short) --end;
    end = std::max(0LL, end);
    long long begin = 0;
    if (s.window > 0) {
        const long long w = (long long)s.window + (m == mutant::window_short ? -1 : m == mutant::window_long ? 1 : 0);
        if (m == mutant::window_wrong_side)
            end = std::min(end, w);
        else
            begin = std::max(0LL, end - w);
    }
    return {std::size_t(begin), std::size_t(std::max(begin, end))};
}

/// The attention core in float64: q [B, n_q, H*dq], k [B, n_kv, G*dq], v [B, n_kv, G*dv] ->
/// [B, n_q, H*dv]. Plain loops; `m` plants one mistake.
inline std::vector<double> core_reference(const cu::shape& in, const float* q, const float* k, const float* v,
                                          mutant m = mutant::none) {
    const cu::shape s = cu::resolved(in);
    const std::size_t H = s.heads, G = s.kv_heads, dq = s.d_qk, dv = s.d_v;
    const double scale = m == mutant::scale ? s.scale * 1.01 : s.scale;
    std::vector<double> out(s.batch * s.n_q * H * dv, 0.0);
    parallel_for(s.batch * H, [&](std::size_t bh) {
        const std::size_t b = bh / H, h = bh % H, g = m == mutant::kv_map ? h % G : h * G / H;
        std::vector<double> p(s.n_kv);
        for (std::size_t i = 0; i < s.n_q; ++i) {
            const key_range r = keys_seen(s, i, m);
            double* o = &out[((b * s.n_q + i) * H + h) * dv];
            if (r.end == r.begin) continue; // a row that sees no key yields zeros
            const float* qi = q + ((b * s.n_q + i) * H + h) * dq;
            double mx = -std::numeric_limits<double>::infinity();
            for (std::size_t j = r.begin; j < r.end; ++j) {
                const float* kj = k + ((b * s.n_kv + j) * G + g) * dq;
                double dot = 0;
                for (std::size_t c = 0; c < dq; ++c) dot += double(qi[c]) * double(kj[c]);
                p[j] = dot * scale;
                mx = std::max(mx, p[j]);
            }
            double sum = 0;
            for (std::size_t j = r.begin; j < r.end; ++j) sum += (p[j] = std::exp(p[j] - mx));
            for (std::size_t j = r.begin; j < r.end; ++j) {
                const float* vj = v + ((b * s.n_kv + j) * G + g) * dv;
                const double w = p[j] / sum;
                for (std::size_t c = 0; c < dv; ++c) o[c] += w * double(vj[c]);
            }
        }
    });
    return out;
}

/// max |out - ref| / max |ref|; infinity when out holds a NaN or the sizes differ.
template <class T>
double relative_error(const std::vector<T>& out, const std::vector<double>& ref) {
    if (out.size() != ref.size()) return std::numeric_limits<double>::infinity();
    double err = 0, mx = 0;
    for (std::size_t i = 0; i < ref.size(); ++i) {
        const double d = std::abs(double(out[i]) - ref[i]);
        if (!(d <= std::numeric_limits<double>::max())) return std::numeric_limits<double>::infinity();
        err = std::max(err, d);
        mx = std::max(mx, std::abs(ref[i]));
    }
    return mx > 0 ? err / mx : err;
}

struct tally {
    int passed = 0, failed = 0;
    void check(bool ok, const std::string& what) {
        if (ok) {
            ++passed;
        } else {
            ++failed;
            std::printf("FAIL %s\n", what.c_str());
            std::fflush(stdout);
        }
    }
};

inline std::string describe(const cu::shape& s) {
    char buf[200];
    std::snprintf(buf, sizeof buf, "B%zu H%zu G%zu n_q %zu n_kv %zu d %zu", s.batch, s.heads, s.kv_heads, s.n_q, s.n_kv,
                  s.d_qk);
    std::string r = buf;
    if (s.d_v && s.d_v != s.d_qk) r += "/" + std::to_string(s.d_v);
    if (s.causal) r += " causal";
    if (s.window) r += " W " + std::to_string(s.window);
    return r;
}

inline std::string fmt_err(double e, double tol) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "error %.3g (tolerance %.0e)", e, tol);
    return buf;
}

inline cu::shape make_shape(std::size_t n_q, std::size_t n_kv, std::size_t d, std::size_t h, std::size_t g,
                            bool causal) {
    cu::shape s;
    s.batch = 2;
    s.heads = h;
    s.kv_heads = g;
    s.n_q = n_q;
    s.n_kv = n_kv;
    s.d_qk = d;
    s.causal = causal;
    return s;
}

struct core_data {
    cu::shape s;
    std::vector<float> q, k, v;
};

/// The mutants a storage type's tolerance can tell from the reference (test_cuda_gpu.cpp's header);
/// the window's three under a window.
inline std::vector<mutant> mutants_for(cu::storage st, const cu::shape& s = {}) {
    std::vector<mutant> m{mutant::kv_map, mutant::mask_short};
    if (st == cu::storage::f32) m.insert(m.begin(), mutant::scale);
    if (s.window > 0) m.insert(m.end(), {mutant::window_short, mutant::window_long, mutant::window_wrong_side});
    return m;
}

inline core_data draw_core(std::mt19937_64& rng, const cu::shape& s, float q_sigma = 1.0f) {
    core_data c{cu::resolved(s), {}, {}, {}};
    c.q = random_vector(rng, s.batch * s.n_q * s.heads * c.s.d_qk, q_sigma);
    c.k = random_vector(rng, s.batch * s.n_kv * s.kv_heads * c.s.d_qk);
    c.v = random_vector(rng, s.batch * s.n_kv * s.kv_heads * c.s.d_v);
    return c;
}

inline constexpr cu::storage core_storages[] = {cu::storage::f32, cu::storage::bf16, cu::storage::f16};

/// Ends the process (exit 124) with the check in progress named, when no check has begun for
/// `limit` seconds: a kernel that hangs (a TMA or mbarrier mistake) reports itself before any outer
/// timeout kills the binary silently.
class watchdog {
  public:
    static watchdog& get() {
        static watchdog w;
        return w;
    }
    void start(int limit_s) {
        limit_ = limit_s;
        at("start");
        std::thread([this] {
            for (;;) {
                std::this_thread::sleep_for(std::chrono::milliseconds(500));
                std::lock_guard<std::mutex> lk(mu_);
                if (std::chrono::steady_clock::now() - since_ > std::chrono::seconds(limit_)) {
                    std::printf("HANG: no progress for %d s in: %s\n", limit_, what_.c_str());
                    std::fflush(stdout);
                    std::_Exit(124);
                }
            }
        }).detach();
    }
    void at(const std::string& what) {
        std::lock_guard<std::mutex> lk(mu_);
        what_ = what;
        since_ = std::chrono::steady_clock::now();
    }

  private:
    std::mutex mu_;
    std::string what_;
    std::chrono::steady_clock::time_point since_ = std::chrono::steady_clock::now();
    int limit_ = 20;
};

/// The options of a run: which prefill kernels to check (every one when empty), and --small.
struct run_options {
    bool small = false;
    std::vector<cu::kernel> kernels;
    bool wants(cu::kernel k) const {
        return kernels.empty() || std::find(kernels.begin(), kernels.end(), k) != kernels.end();
    }
};

/// The prefill cores (test_cuda_gpu_core.cpp): every served kernel on odd sizes, GQA/MQA, n_q != n_kv,
/// windows, MLA's naive widths, every tile candidate and mutants.
void core_checks(tally& t, std::mt19937_64& rng, const run_options& o);
/// The reference's own identities under windows, and every mutant's margin (no GPU needed).
void core_reference_checks(tally& t, std::mt19937_64& rng);

} // namespace gpu_test
