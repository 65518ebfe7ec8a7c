// attn_cuda_gpu_tests: every CUDA kernel on fresh random inputs against a float64 reference on the
// CPU (plain loops, below), the llm.c habit: the reference first, every variant checked element by
// element, failures printed, only then anything timed (scripts/gpu.sh, attn_cuda_bench).
//  - Error: max |out - ref| / max |ref| over the whole output, NaN failing (the device output is
//    poisoned with NaN before each run, so an unwritten element fails). Below 1e-4 for f32 storage,
//    2e-2 for bf16 and f16 (inputs rounded once on the host; the reference reads the rounded values).
//  - Sizes: n 1, 7, 129, 1000 (and n_q != n_kv both ways), d_head 64 and 128 (decode also 80),
//    causal and not (bottom-right), G = H, 2, 1 with H = 4, batch 2; the prefill cores also under
//    sliding windows, with MLA's widths, every tile candidate (test_cuda_gpu_core.cpp; the reference
//    and its mutants: gpu_reference.hpp);
//  - cuda-decode's cases (contiguous and paged, rolling, n_q 1-8, MLA; caches with NaN wherever no
//    query may read) are in test_cuda_gpu_decode*.cpp (helpers shared through gpu_check.hpp).
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
#include "gpu_check.hpp"
#include "gpu_reference.hpp"

using namespace gpu_test;

namespace {

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
    attn_gpu_check::run_decode_checks(t, rng, false, true); // cuda-decode's mutants (test_cuda_gpu_decode.cpp)
}

} // namespace

int main(int argc, char** argv) {
    bool reference_only = false;
    bool decode_only = false; // --only cuda-decode: the decode checks alone (racecheck's second run)
    run_options ro;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--small") {
            ro.small = true;
        } else if (a == "--reference-only") {
            reference_only = true;
        } else if (a == "--only" && i + 1 < argc) {
            const std::string k = argv[++i];
            const std::size_t before = ro.kernels.size();
            for (cu::kernel c : {cu::kernel::naive, cu::kernel::tiled, cu::kernel::flash, cu::kernel::hopper})
                if (k == cu::name(c)) ro.kernels.push_back(c);
            if (k == "cuda-decode") {
                decode_only = true;
            } else if (ro.kernels.size() == before) {
                std::fprintf(stderr, "--only: no kernel named %s\n", k.c_str());
                return 2;
            }
        } else {
            std::fprintf(stderr,
                         "usage: %s [--small] [--reference-only] [--only "
                         "cuda-naive|cuda-tiled|cuda-flash|cuda-hopper|cuda-decode]\n",
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
    const bool only = !ro.kernels.empty() || decode_only;
    run_options first = ro;
    if (!only) first.kernels = {cu::kernel::naive, cu::kernel::tiled, cu::kernel::flash};
    const bool prefill = !(decode_only && ro.kernels.empty()); // any prefill kernel wanted
    if (prefill &&
        (first.wants(cu::kernel::naive) || first.wants(cu::kernel::tiled) || first.wants(cu::kernel::flash))) {
        run_options some = first;
        some.kernels.erase(std::remove(some.kernels.begin(), some.kernels.end(), cu::kernel::hopper),
                           some.kernels.end());
        if (!some.kernels.empty()) core_checks(t, rng, some);
    }

    // cuda-decode: contiguous and paged, rolling buffers, n_q 1-8, MLA (test_cuda_gpu_decode_cases.cpp)
    if (!only || decode_only) attn_gpu_check::run_decode_checks(t, rng, small, false);

    if (!only) {
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
    if (prefill && ro.wants(cu::kernel::hopper)) {
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
