// attn_cuda_gpu_tests: every CUDA kernel on fresh random inputs against a float64 reference on the
// CPU (plain loops, below), the llm.c habit: the reference first, every variant checked element by
// element, failures printed, only then anything timed (scripts/gpu.sh, attn_cuda_bench).
//  - Error: max |out - ref| / max |ref| over the whole output, NaN failing (the device output is
//    poisoned with NaN before each run, so an unwritten element fails). Below 1e-4 for f32 storage,
//    2e-2 for bf16 and f16 (inputs rounded once on the host; the reference reads the rounded values).
//  - Sizes: n 1, 7, 129, 1000 (and n_q != n_kv both ways), d_head 64 and 128 (decode also 80),
//    causal and not (bottom-right), G = H, 2, 1 with H = 4 (and MQA with H = 32 for decode), batch 2;
//    the prefill cores also under sliding windows, with MLA's widths, every tile candidate
//    (test_cuda_gpu_core.cpp; the reference and its mutants: gpu_reference.hpp).
//  - Mutants: the same outputs must fail against a reference with query head h reading kv head
//    h % G instead of h*G/H, and with the mask one key short; for f32 storage also with the scale
//    1% off. At bf16/f16's 2e-2 a 1% scale error cannot show: it moves the output by about
//    0.01 x Cov_p(logit, v), under 1% of max|ref| (0.7% on the mutant case here, --reference-only
//    prints it), so there the scale is checked by cases whose scale is far from 1/sqrt(d) (0.3).
//  - Decode caches carry 3 rows past the L + 1 in use, filled with NaN (int8: NaN scales): a kernel
//    that reads past the end fails.
// Flags: --small (the sizes compute-sanitizer runs), --reference-only (no GPU: the reference's own
// identities and the mutants' margins over the tolerances, so the GPU checks can tell them apart),
// --only <kernel name> (the prefill checks of one kernel, e.g. cuda-hopper; no decode or layer).
// Order: every check of naive, tiled, flash, decode and the layer first, cuda-hopper's last, so a
// hang there (reported by the watchdog: "HANG: ...", exit 124, after 20 s without progress) costs
// nothing else. Without a GPU (or in a build without CUDA) it prints "skipped: <reason>" and exits 77.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <limits>
#include <random>
#include <string>
#include <vector>
#include "gpu_reference.hpp"

using namespace gpu_test;

namespace {

/// A decode cache: host arrays in the storage type, [B, G, capacity, d], rows past n_kv poisoned.
struct cache {
    std::vector<float> f32;         // f32 storage, and the values every type holds (dequantized) for the reference
    std::vector<std::uint16_t> h16; // bf16 / f16 bits
    std::vector<std::int8_t> i8;
    std::vector<float> scales;
    const void* data(cu::storage st) const {
        return st == cu::storage::f32    ? (const void*)f32.data()
               : st == cu::storage::int8 ? (const void*)i8.data()
                                         : (const void*)h16.data();
    }
};

cache make_cache(const std::vector<float>& x, const cu::shape& s, std::size_t cap, cu::storage st) {
    const std::size_t d = s.d_qk, rows = s.batch * s.kv_heads * cap;
    cache c;
    c.f32 = x;
    const float nan = std::numeric_limits<float>::quiet_NaN();
    if (st == cu::storage::bf16 || st == cu::storage::f16) c.h16.resize(rows * d);
    if (st == cu::storage::int8) {
        c.i8.resize(rows * d);
        c.scales.assign(rows, nan);
    }
    for (std::size_t r = 0; r < rows; ++r) {
        const bool used = r % cap < s.n_kv;
        float* xr = &c.f32[r * d];
        if (!used) {
            std::fill(xr, xr + d, nan);
            if (!c.h16.empty()) std::fill(&c.h16[r * d], &c.h16[r * d] + d, std::uint16_t(0x7fff)); // NaN in both
            continue;
        }
        if (st == cu::storage::int8) {
            c.scales[r] = fm::quantize_row(xr, d, &c.i8[r * d]);
            for (std::size_t i = 0; i < d; ++i) xr[i] = float(c.i8[r * d + i]) * c.scales[r];
        } else if (!c.h16.empty()) {
            for (std::size_t i = 0; i < d; ++i) {
                c.h16[r * d + i] = st == cu::storage::bf16 ? fm::to_bf16(xr[i]) : fm::to_f16(xr[i]);
                xr[i] = st == cu::storage::bf16 ? fm::from_bf16(c.h16[r * d + i]) : fm::from_f16(c.h16[r * d + i]);
            }
        }
    }
    return c;
}

/// [B, G, cap, d] -> the reference's [B, n_kv, G*d] (rows in use only).
std::vector<float> interleave(const std::vector<float>& c, const cu::shape& s, std::size_t cap) {
    const std::size_t d = s.d_qk, G = s.kv_heads;
    std::vector<float> x(s.batch * s.n_kv * G * d);
    for (std::size_t b = 0; b < s.batch; ++b)
        for (std::size_t g = 0; g < G; ++g)
            for (std::size_t j = 0; j < s.n_kv; ++j)
                std::copy_n(&c[((b * G + g) * cap + j) * d], d, &x[((b * s.n_kv + j) * G + g) * d]);
    return x;
}

/// cuda-decode over every cache type; with `mutants`, the newest key is made to matter (its key is
/// the query of head 0 scaled up), so that a mask one key short changes the output.
void check_decode(tally& t, std::mt19937_64& rng, const cu::shape& s0, bool mutants, bool reference_only,
                  std::vector<std::pair<std::string, double>>* margins = nullptr) {
    const cu::shape s = cu::resolved(s0);
    const std::size_t d = s.d_qk, cap = s.n_kv + 3, G = s.kv_heads;
    const std::vector<float> q = random_vector(rng, s.batch * s.heads * d, mutants ? 2.0f : 1.0f);
    std::vector<float> k = random_vector(rng, s.batch * G * cap * d), v = random_vector(rng, s.batch * G * cap * d);
    if (mutants)
        for (std::size_t b = 0; b < s.batch; ++b)
            for (std::size_t g = 0; g < G; ++g)
                for (std::size_t i = 0; i < d; ++i)
                    k[((b * G + g) * cap + s.n_kv - 1) * d + i] = 0.5f * q[(b * s.heads + g * s.heads / G) * d + i];
    for (cu::storage st : {cu::storage::f32, cu::storage::bf16, cu::storage::f16, cu::storage::int8}) {
        const cache kc = make_cache(k, s, cap, st), vc = make_cache(v, s, cap, st);
        const std::vector<float> ki = interleave(kc.f32, s, cap), vi = interleave(vc.f32, s, cap);
        const std::vector<double> ref = core_reference(s, q.data(), ki.data(), vi.data());
        const double tol = tolerance(st);
        const std::string what = std::string("cuda-decode ") + cu::name(st) + " " + describe(s);
        const std::vector<mutant> ms = mutants ? mutants_for(st) : std::vector<mutant>{};
        std::vector<std::vector<double>> mut;
        for (mutant m : ms) mut.push_back(core_reference(s, q.data(), ki.data(), vi.data(), m));
        if (reference_only) {
            for (std::size_t i = 0; i < mut.size(); ++i) {
                const double gap = relative_error(ref, mut[i]);
                if (margins) margins->push_back({what + " vs mutant '" + mutant_name(ms[i]) + "'", gap / tol});
                t.check(gap > 2 * tol, what + ": mutant '" + mutant_name(ms[i]) + "' within " + fmt_err(gap, 2 * tol) +
                                           " of the reference");
            }
            continue;
        }
        watchdog::get().at(what);
        try {
            cu::decode_case dc(s, st, q.data(), kc.data(st), vc.data(st),
                               kc.scales.empty() ? nullptr : kc.scales.data(),
                               vc.scales.empty() ? nullptr : vc.scales.data(), cap);
            dc.run();
            const std::vector<float> out = dc.output();
            const double e = relative_error(out, ref);
            t.check(e < tol, what + " (" + std::to_string(dc.chunks()) + " chunks): " + fmt_err(e, tol));
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

void check_layer(tally& t, std::mt19937_64& rng, const cu::shape& s0, cu::storage st, bool bias,
                 const std::vector<cu::kernel>& kernels) {
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
    for (cu::kernel kn : kernels) {
        if (!cu::refusal(kn, s, st).empty()) continue;
        const std::string what =
            std::string("layer ") + cu::name(kn) + " " + cu::name(st) + " " + describe(s) + (bias ? " bias" : "");
        watchdog::get().at(what);
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

void reference_margins(tally& t, std::mt19937_64& rng) {
    core_reference_checks(t, rng);
    std::vector<std::pair<std::string, double>> margins;
    check_decode(t, rng, make_shape(1, 129, 64, 4, 2, false), true, true, &margins);
    for (const auto& [what, x] : margins) std::printf("margin: %s at %.3g x the tolerance\n", what.c_str(), x);
}

} // namespace

int main(int argc, char** argv) {
    bool reference_only = false;
    run_options ro;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--small") {
            ro.small = true;
        } else if (a == "--reference-only") {
            reference_only = true;
        } else if (a == "--only" && i + 1 < argc) {
            const std::string k = argv[++i];
            for (cu::kernel c : {cu::kernel::naive, cu::kernel::tiled, cu::kernel::flash, cu::kernel::hopper})
                if (k == cu::name(c)) ro.kernels.push_back(c);
            if (ro.kernels.empty()) {
                std::fprintf(stderr, "--only: no prefill kernel named %s\n", k.c_str());
                return 2;
            }
        } else {
            std::fprintf(
                stderr,
                "usage: %s [--small] [--reference-only] [--only cuda-naive|cuda-tiled|cuda-flash|cuda-hopper]\n",
                argv[0]);
            return 2;
        }
    }
    const bool small = ro.small;
    std::mt19937_64 rng(std::random_device{}()); // fresh inputs every run
    tally t;
    if (reference_only) {
        check_reference(t, rng);
        reference_margins(t, rng);
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
    std::fflush(stdout);
    watchdog::get().start(20);
    check_reference(t, rng);

    // the prefill cores: every kernel but cuda-hopper first (hopper's, if wanted, last)
    const bool only = !ro.kernels.empty();
    run_options first = ro;
    if (!only) first.kernels = {cu::kernel::naive, cu::kernel::tiled, cu::kernel::flash};
    if (!only || first.wants(cu::kernel::naive) || first.wants(cu::kernel::tiled) || first.wants(cu::kernel::flash)) {
        run_options some = first;
        some.kernels.erase(std::remove(some.kernels.begin(), some.kernels.end(), cu::kernel::hopper),
                           some.kernels.end());
        if (!some.kernels.empty()) core_checks(t, rng, some);
    }

    if (!only) {
        // decode: L + 1 keys of a longer cache
        const std::vector<std::size_t> groups =
            small ? std::vector<std::size_t>{4, 1} : std::vector<std::size_t>{4, 2, 1};
        const std::vector<std::size_t> lengths =
            small ? std::vector<std::size_t>{1, 7, 129} : std::vector<std::size_t>{1, 7, 129, 1000, 4097, 40000};
        for (std::size_t n_kv : lengths)
            for (std::size_t d : {64, 80, 128})
                for (std::size_t g : groups) check_decode(t, rng, make_shape(1, n_kv, d, 4, g, false), false, false);
        check_decode(t, rng, make_shape(1, small ? 129 : 4097, 128, 32, 1, false), false,
                     false); // MQA, 32 heads a block
        check_decode(t, rng, make_shape(1, 129, 64, 4, 2, false), true, false);

        // the layer (a window too)
        const std::vector<cu::kernel> layer_kernels{cu::kernel::naive, cu::kernel::tiled, cu::kernel::flash};
        for (const auto& [n_q, n_kv] : std::vector<std::pair<std::size_t, std::size_t>>{{7, 7}, {129, 129}, {129, 7}})
            for (bool causal : {false, true})
                for (cu::storage st : core_storages)
                    check_layer(t, rng, make_shape(n_q, n_kv, 64, 4, 2, causal), st, causal, layer_kernels);
        cu::shape lw = make_shape(129, 129, 64, 4, 2, true);
        lw.window = 7;
        check_layer(t, rng, lw, cu::storage::bf16, false, layer_kernels);
    }

    // cuda-hopper last: its cores, then a layer through it
    if (ro.wants(cu::kernel::hopper)) {
        run_options h = ro;
        h.kernels = {cu::kernel::hopper};
        std::printf("cuda-hopper checks begin (%d passed, %d failed so far)\n", t.passed, t.failed);
        std::fflush(stdout);
        core_checks(t, rng, h);
        if (!only)
            for (bool causal : {false, true})
                check_layer(t, rng, make_shape(129, 129, 64, 4, 2, causal), cu::storage::bf16, causal,
                            {cu::kernel::hopper});
    }

    std::printf("%d passed, %d failed\n", t.passed, t.failed);
    return t.failed ? 1 : 0;
}
