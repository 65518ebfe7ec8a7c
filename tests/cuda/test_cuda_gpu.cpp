// attn_cuda_gpu_tests: every CUDA kernel on fresh random inputs against a float64 reference on the
// CPU (plain loops, below), the llm.c habit: the reference first, every variant checked element by
// element, failures printed, only then anything timed (scripts/gpu.sh, attn_cuda_bench).
//  - Error: max |out - ref| / max |ref| over the whole output, NaN failing (the device output is
//    poisoned with NaN before each run, so an unwritten element fails). Below 1e-4 for f32 storage,
//    2e-2 for bf16 and f16 (inputs rounded once on the host; the reference reads the rounded values).
//  - Sizes: n 1, 7, 129, 1000 (and n_q != n_kv both ways), d_head 64 and 128, causal and not
//    (bottom-right), G = H, 2, 1 with H = 4, batch 2.
//  - Mutants: the same outputs must fail against a reference with query head h reading kv head
//    h % G instead of h*G/H, and with the mask one key short; for f32 storage also with the scale
//    1% off. At bf16/f16's 2e-2 a 1% scale error cannot show: it moves the output by about
//    0.01 x Cov_p(logit, v), under 1% of max|ref| (0.7% on the mutant case here, --reference-only
//    prints it), so there the scale is checked by cases whose scale is far from 1/sqrt(d) (0.3).
//  - cuda-decode's cases (contiguous and paged, rolling, n_q 1-8, MLA; caches with NaN wherever no
//    query may read) are in test_cuda_gpu_decode*.cpp (helpers shared through gpu_check.hpp).
// Flags: --small (the sizes compute-sanitizer runs), --reference-only (no GPU: the reference's own
// identities and the mutants' margins over the tolerances, so the GPU checks can tell them apart).
// Without a GPU (or in a build without CUDA) it prints "skipped: <reason>" and exits 77.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <thread>
#include <vector>
#include "api.hpp"
#include "formats.hpp"
#include "gpu_check.hpp"

namespace cu = attn::cuda;
namespace fm = attn::cuda::formats;

using namespace attn_gpu_check;

namespace {

enum class mutant { none, scale, kv_map, mask_short };
constexpr mutant all_mutants[] = {mutant::scale, mutant::kv_map, mutant::mask_short};
const char* mutant_name(mutant m) {
    return m == mutant::scale ? "scale 1% off" : m == mutant::kv_map ? "kv head h % G" : "mask one key short";
}

std::vector<float> rounded(std::vector<float> x, cu::storage st) {
    for (float& e : x) e = round_to(st, e);
    return x;
}

/// Keys query row i sees: bottom-right causal (j <= i + n_kv - n_q), the mutant one short.
std::size_t visible(const cu::shape& s, std::size_t i, mutant m) {
    long long n = (long long)s.n_kv;
    if (s.causal) n = std::min<long long>(n, (long long)i + (long long)s.n_kv - (long long)s.n_q + 1);
    if (m == mutant::mask_short) --n;
    return n < 0 ? 0 : std::size_t(n);
}

/// The attention core in float64: q [B, n_q, H*dq], k [B, n_kv, G*dq], v [B, n_kv, G*dv] ->
/// [B, n_q, H*dv]. Plain loops; `m` plants one mistake.
std::vector<double> core_reference(const cu::shape& in, const float* q, const float* k, const float* v,
                                   mutant m = mutant::none) {
    const cu::shape s = cu::resolved(in);
    const std::size_t H = s.heads, G = s.kv_heads, dq = s.d_qk, dv = s.d_v;
    const double scale = m == mutant::scale ? s.scale * 1.01 : s.scale;
    std::vector<double> out(s.batch * s.n_q * H * dv, 0.0);
    parallel_for(s.batch * H, [&](std::size_t bh) {
        const std::size_t b = bh / H, h = bh % H, g = m == mutant::kv_map ? h % G : h * G / H;
        std::vector<double> p(s.n_kv);
        for (std::size_t i = 0; i < s.n_q; ++i) {
            const std::size_t n = visible(s, i, m);
            double* o = &out[((b * s.n_q + i) * H + h) * dv];
            if (n == 0) continue; // a row that sees no key yields zeros
            const float* qi = q + ((b * s.n_q + i) * H + h) * dq;
            double mx = -std::numeric_limits<double>::infinity();
            for (std::size_t j = 0; j < n; ++j) {
                const float* kj = k + ((b * s.n_kv + j) * G + g) * dq;
                double dot = 0;
                for (std::size_t c = 0; c < dq; ++c) dot += double(qi[c]) * double(kj[c]);
                p[j] = dot * scale;
                mx = std::max(mx, p[j]);
            }
            double sum = 0;
            for (std::size_t j = 0; j < n; ++j) sum += (p[j] = std::exp(p[j] - mx));
            for (std::size_t j = 0; j < n; ++j) {
                const float* vj = v + ((b * s.n_kv + j) * G + g) * dv;
                const double w = p[j] / sum;
                for (std::size_t c = 0; c < dv; ++c) o[c] += w * double(vj[c]);
            }
        }
    });
    return out;
}

std::string describe(const cu::shape& s) {
    char buf[160];
    std::snprintf(buf, sizeof buf, "B%zu H%zu G%zu n_q %zu n_kv %zu d %zu%s", s.batch, s.heads, s.kv_heads, s.n_q,
                  s.n_kv, s.d_qk, s.causal ? " causal" : "");
    return buf;
}

cu::shape make_shape(std::size_t n_q, std::size_t n_kv, std::size_t d, std::size_t h, std::size_t g, bool causal) {
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

/// The mutants a storage type's tolerance can tell from the reference (see the header).
std::vector<mutant> mutants_for(cu::storage st) {
    if (st == cu::storage::f32) return {mutant::scale, mutant::kv_map, mutant::mask_short};
    return {mutant::kv_map, mutant::mask_short};
}

core_data draw_core(std::mt19937_64& rng, const cu::shape& s, float q_sigma = 1.0f) {
    core_data c{cu::resolved(s), {}, {}, {}};
    c.q = random_vector(rng, s.batch * s.n_q * s.heads * c.s.d_qk, q_sigma);
    c.k = random_vector(rng, s.batch * s.n_kv * s.kv_heads * c.s.d_qk);
    c.v = random_vector(rng, s.batch * s.n_kv * s.kv_heads * c.s.d_v);
    return c;
}

constexpr cu::storage core_storages[] = {cu::storage::f32, cu::storage::bf16, cu::storage::f16};
constexpr cu::kernel core_kernels[] = {cu::kernel::naive, cu::kernel::tiled, cu::kernel::flash};

/// Every core kernel that serves (s, st) on the rounded inputs, against the reference; with
/// `mutants`, the outputs must also fail against each mutant reference.
void check_core(tally& t, const core_data& raw, cu::storage st, bool mutants) {
    const core_data c{raw.s, rounded(raw.q, st), rounded(raw.k, st), rounded(raw.v, st)};
    const std::vector<double> ref = core_reference(c.s, c.q.data(), c.k.data(), c.v.data());
    const std::vector<mutant> ms = mutants ? mutants_for(st) : std::vector<mutant>{};
    std::vector<std::vector<double>> mut;
    for (mutant m : ms) mut.push_back(core_reference(c.s, c.q.data(), c.k.data(), c.v.data(), m));
    const double tol = tolerance(st);
    for (cu::kernel k : core_kernels) {
        if (!cu::refusal(k, c.s, st).empty()) continue;
        const std::string what = std::string(cu::name(k)) + " " + cu::name(st) + " " + describe(c.s);
        try {
            cu::core_case cc(k, c.s, st, c.q.data(), c.k.data(), c.v.data());
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

/// x [rows, in] times w [out, in]^T plus b, in float64, each result rounded to the storage type.
std::vector<float> linear_reference(const std::vector<float>& x, std::size_t rows, std::size_t in,
                                    const std::vector<float>& w, std::size_t out, const std::vector<float>* b,
                                    cu::storage st) {
    std::vector<float> y(rows * out);
    parallel_for(rows, [&](std::size_t r) {
        for (std::size_t o = 0; o < out; ++o) {
            double acc = b ? double((*b)[o]) : 0.0;
            for (std::size_t i = 0; i < in; ++i) acc += double(x[r * in + i]) * double(w[o * in + i]);
            y[r * out + o] = round_to(st, float(acc));
        }
    });
    return y;
}

void check_layer(tally& t, std::mt19937_64& rng, const cu::shape& s0, cu::storage st, bool bias) {
    const cu::shape s = cu::resolved(s0);
    const std::size_t dm = s.heads * s.d_qk, H = s.heads, G = s.kv_heads, d = s.d_qk;
    const float ws = 1.0f / std::sqrt(float(dm)); // unit-variance projections
    const auto x_q = rounded(random_vector(rng, s.batch * s.n_q * dm), st);
    const auto x_kv = rounded(random_vector(rng, s.batch * s.n_kv * dm), st);
    const auto wq = rounded(random_vector(rng, H * d * dm, ws), st),
               wk = rounded(random_vector(rng, G * d * dm, ws), st);
    const auto wv = rounded(random_vector(rng, G * d * dm, ws), st),
               wo = rounded(random_vector(rng, dm * H * d, ws), st);
    const auto bq = rounded(random_vector(rng, H * d, 0.1f), st), bk = rounded(random_vector(rng, G * d, 0.1f), st);
    const auto bv = rounded(random_vector(rng, G * d, 0.1f), st), bo = rounded(random_vector(rng, dm, 0.1f), st);
    // the device's stored intermediates, rounded as it rounds them
    const auto q = linear_reference(x_q, s.batch * s.n_q, dm, wq, H * d, bias ? &bq : nullptr, st);
    const auto k = linear_reference(x_kv, s.batch * s.n_kv, dm, wk, G * d, bias ? &bk : nullptr, st);
    const auto v = linear_reference(x_kv, s.batch * s.n_kv, dm, wv, G * d, bias ? &bv : nullptr, st);
    const std::vector<double> a64 = core_reference(s, q.data(), k.data(), v.data());
    std::vector<float> a(a64.size());
    for (std::size_t i = 0; i < a.size(); ++i) a[i] = round_to(st, float(a64[i]));
    std::vector<double> ref(s.batch * s.n_q * dm);
    parallel_for(s.batch * s.n_q, [&](std::size_t r) {
        for (std::size_t o = 0; o < dm; ++o) {
            double acc = bias ? double(bo[o]) : 0.0;
            for (std::size_t i = 0; i < H * d; ++i) acc += double(a[r * H * d + i]) * double(wo[o * H * d + i]);
            ref[r * dm + o] = acc;
        }
    });
    cu::layer_inputs in;
    in.x_q = x_q.data();
    in.x_kv = x_kv.data();
    in.wq = wq.data();
    in.wk = wk.data();
    in.wv = wv.data();
    in.wo = wo.data();
    if (bias) {
        in.bq = bq.data();
        in.bk = bk.data();
        in.bv = bv.data();
        in.bo = bo.data();
    }
    const double tol = tolerance(st);
    for (cu::kernel kn : core_kernels) {
        if (!cu::refusal(kn, s, st).empty()) continue;
        const std::string what =
            std::string("layer ") + cu::name(kn) + " " + cu::name(st) + " " + describe(s) + (bias ? " bias" : "");
        try {
            cu::layer_case lc(s, dm, st, kn, in);
            lc.run();
            const double e = relative_error(lc.output(), ref);
            t.check(e < tol, what + ": " + fmt_err(e, tol));
        } catch (const std::exception& e) {
            t.check(false, what + ": " + e.what());
        }
    }
}

/// What the reference must satisfy by itself, and how far each mutant lies from it.
void check_reference(tally& t, std::mt19937_64& rng) {
    // one key: every row's output is that key's value
    {
        core_data c = draw_core(rng, make_shape(5, 1, 16, 4, 2, false));
        const auto out = core_reference(c.s, c.q.data(), c.k.data(), c.v.data());
        double e = 0;
        for (std::size_t b = 0; b < 2; ++b)
            for (std::size_t i = 0; i < 5; ++i)
                for (std::size_t h = 0; h < 4; ++h)
                    for (std::size_t x = 0; x < 16; ++x)
                        e = std::max(e, std::abs(out[((b * 5 + i) * 4 + h) * 16 + x] - c.v[(b * 2 + h / 2) * 16 + x]));
        t.check(e < 1e-12, "reference: one key gives its value");
    }
    // causal with n_q > n_kv: the first n_q - n_kv rows see nothing and are zero
    {
        core_data c = draw_core(rng, make_shape(9, 4, 8, 2, 1, true));
        const auto out = core_reference(c.s, c.q.data(), c.k.data(), c.v.data());
        bool zero = true, nonzero = true;
        for (std::size_t b = 0; b < 2; ++b)
            for (std::size_t i = 0; i < 9; ++i) {
                double mx = 0;
                for (std::size_t x = 0; x < 2 * 8; ++x) mx = std::max(mx, std::abs(out[(b * 9 + i) * 16 + x]));
                if (i < 5)
                    zero &= mx == 0;
                else
                    nonzero &= mx > 0;
            }
        t.check(zero && nonzero, "reference: causal rows before n_q - n_kv are zero, the others not");
    }
    // equal keys: the output is the mean of the values
    {
        core_data c = draw_core(rng, make_shape(3, 6, 8, 1, 1, false));
        for (std::size_t j = 0; j < c.k.size(); ++j) c.k[j] = c.k[j % 8];
        const auto out = core_reference(c.s, c.q.data(), c.k.data(), c.v.data());
        double e = 0;
        for (std::size_t b = 0; b < 2; ++b)
            for (std::size_t x = 0; x < 8; ++x) {
                double mean = 0;
                for (std::size_t j = 0; j < 6; ++j) mean += c.v[(b * 6 + j) * 8 + x] / 6.0;
                for (std::size_t i = 0; i < 3; ++i) e = std::max(e, std::abs(out[(b * 3 + i) * 8 + x] - mean));
            }
        t.check(e < 1e-12, "reference: equal keys give the mean value");
    }
}

/// The mutant check's shape: causal, n 129, d 64, H 4 over G 2, queries scaled up (scaled scores of
/// standard deviation 3: a softmax neither flat nor one-hot, where a scale error shows most).
core_data mutant_case(std::mt19937_64& rng) { return draw_core(rng, make_shape(129, 129, 64, 4, 2, true), 3.0f); }

void reference_margins(tally& t, std::mt19937_64& rng) {
    const core_data raw = mutant_case(rng);
    for (cu::storage st : core_storages) {
        const core_data c{raw.s, rounded(raw.q, st), rounded(raw.k, st), rounded(raw.v, st)};
        const auto ref = core_reference(c.s, c.q.data(), c.k.data(), c.v.data());
        for (mutant m : all_mutants) {
            const double gap = relative_error(ref, core_reference(c.s, c.q.data(), c.k.data(), c.v.data(), m));
            const auto ms = mutants_for(st);
            const bool checked = std::find(ms.begin(), ms.end(), m) != ms.end();
            std::printf("margin: core %s %s: mutant '%s' at %.3g x the tolerance%s\n", cu::name(st),
                        describe(c.s).c_str(), mutant_name(m), gap / tolerance(st), checked ? "" : " (not checked)");
            if (checked)
                t.check(gap > 2 * tolerance(st), std::string("core ") + cu::name(st) + ": mutant '" + mutant_name(m) +
                                                     "' within twice the tolerance of the reference");
        }
    }
}

} // namespace

int main(int argc, char** argv) {
    bool small = false, reference_only = false;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--small") {
            small = true;
        } else if (a == "--reference-only") {
            reference_only = true;
        } else {
            std::fprintf(stderr, "usage: %s [--small] [--reference-only]\n", argv[0]);
            return 2;
        }
    }
    std::mt19937_64 rng(std::random_device{}()); // fresh inputs every run
    tally t;
    if (reference_only) {
        check_reference(t, rng);
        reference_margins(t, rng);
        run_decode_checks(t, rng, small, true); // cuda-decode's mutants (test_cuda_gpu_decode.cpp)
        std::printf("%d passed, %d failed\n", t.passed, t.failed);
        return t.failed ? 1 : 0;
    }
    const cu::device_info dev = cu::query();
    if (!dev.present) {
        std::printf("skipped: %s\n", dev.reason.c_str());
        return 77;
    }
    std::printf("device: %s, %d SMs, cc %d.%d, L2 %zu MB\n", dev.name.c_str(), dev.sms, dev.cc_major, dev.cc_minor,
                dev.l2_bytes >> 20);
    check_reference(t, rng);

    // the attention core
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
                    for (cu::storage st : core_storages) check_core(t, raw, st, false);
                }
    {
        cu::shape mla = make_shape(small ? 7 : 129, small ? 9 : 130, 96, 4, 2, true);
        mla.d_v = 64;
        const core_data raw = draw_core(rng, mla);
        for (cu::storage st : core_storages) check_core(t, raw, st, false);
    }
    const core_data mc = mutant_case(rng);
    for (cu::storage st : core_storages) check_core(t, mc, st, true);
    for (std::size_t d : {64, 128}) { // a scale far from 1/sqrt(d): the kernels apply the one given
        cu::shape s = make_shape(129, 130, d, 4, 2, true);
        s.scale = 0.3;
        const core_data raw = draw_core(rng, s);
        for (cu::storage st : core_storages) check_core(t, raw, st, false);
    }

    // cuda-decode (test_cuda_gpu_decode_cases.cpp)
    run_decode_checks(t, rng, small, false);

    // the layer
    for (const auto& [n_q, n_kv] : std::vector<std::pair<std::size_t, std::size_t>>{{7, 7}, {129, 129}, {129, 7}})
        for (bool causal : {false, true})
            for (cu::storage st : core_storages)
                check_layer(t, rng, make_shape(n_q, n_kv, 64, 4, 2, causal), st, causal);

    std::printf("%d passed, %d failed\n", t.passed, t.failed);
    return t.failed ? 1 : 0;
}
