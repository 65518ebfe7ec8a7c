// A CPU-backed test device: a variant whose kernels are attn::device_kernels, as a GPU variant's
// are, but whose "device memory" is host memory and whose kernel is the naive variant's fp32 core.
// CI has no GPU; this takes the device path end to end (prepare once: inputs copied in the storage
// type; run; read back; time with the device's own clock) through the fp64 checker
// (tests/test_device.cpp) and, registered, through attnbench-bench (tests/device/bench_device.cpp,
// the ctest harness.device). Core cases, layers, and decode cores over an f32, bf16 or f16 cache
// (the cache widened once at prepare time; MLA's latent cache too, its values read from the key
// rows); f64 and int8 are refused in one line.
// Its copies are made at prepare time, as a GPU's upload is; time_ms times run() alone with the
// steady clock (nothing to flush: `cold` has no effect here).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>
import attn.core;
import attn.families;
import attn.variants;

namespace attn_test {

namespace {

struct host_run final : attn::device_run {
    attn::problem p;
    attn::run_options opt;
    std::vector<float> q, k, v, out; // "device memory": the copies prepare made
    const attn::variant* kernel = &attn::find_variant("naive");

    attn::mode mode = attn::mode::core;
    std::vector<float> x_q, x_kv; // a layer's inputs
    attn::weights<float> w;       // and its weights
    void run() override {
        if (mode == attn::mode::layer) {
            attn::layer_buffers<float> ws;
            attn::run_layer<float>(*kernel, p, w, x_q.data(), x_kv.data(), out.data(), opt, ws);
            return;
        }
        const attn::core_io<float> io{
            attn::interleaved_heads<const float>(q.data(), p.batch, p.n_q, p.heads, p.qk_dim()),
            attn::interleaved_heads<const float>(k.data(), p.batch, p.n_kv, p.kv_heads, p.qk_dim()),
            attn::interleaved_heads<const float>(v.data(), p.batch, p.n_kv, p.kv_heads, p.v_dim()),
            attn::interleaved_heads<float>(out.data(), p.batch, p.n_q, p.heads, p.v_dim())};
        kernel->get<float>().core(p, io, opt);
    }
    std::vector<float> output() override { return out; }
    std::vector<double> time_ms(int repetitions, int warmup, bool) override {
        for (int i = 0; i < warmup; ++i) run();
        std::vector<double> ms;
        for (int i = 0; i < repetitions; ++i) {
            const auto t0 = std::chrono::steady_clock::now();
            run();
            ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
        }
        return ms;
    }
};

std::string refuses(const attn::problem&, attn::mode, attn::dtype t) {
    if (t == attn::dtype::f64 || t == attn::dtype::int8)
        return "test-device stores f32, bf16 or f16, not " + std::string(attn::enum_name(t));
    return "";
}

/// A decode cache [B, G, capacity, ld] in type t (f32, or bf16/f16 bit patterns), the first d
/// elements of its first n rows widened to fp32 in a projection's layout [B, n, G d]: what the
/// naive core reads (d < ld: MLA's values, the leading d_c elements of its latent key rows).
std::vector<float> widened_rows(const void* cache, attn::dtype t, std::size_t B, std::size_t G, std::size_t capacity,
                                std::size_t n, std::size_t d, std::size_t ld) {
    std::vector<float> out(B * n * G * d);
    for (std::size_t b = 0; b < B; ++b)
        for (std::size_t g = 0; g < G; ++g)
            for (std::size_t i = 0; i < n; ++i)
                for (std::size_t c = 0; c < d; ++c) {
                    const std::size_t at = ((b * G + g) * capacity + i) * ld + c;
                    out[((b * n + i) * G + g) * d + c] = t == attn::dtype::f32 ? static_cast<const float*>(cache)[at]
                                                         : t == attn::dtype::bf16
                                                             ? float(static_cast<const attn::bf16*>(cache)[at])
                                                             : float(static_cast<const attn::f16*>(cache)[at]);
                }
    return out;
}

} // namespace

attn::variant host_device_variant() {
    attn::variant v;
    v.name = "test-device";
    v.description = "the device path on the host (tests only): prepare, run, read back, time";
    v.serves.windows = true;
    v.tags = {"test"};
    v.device.refuses = refuses;
    // nominal ceilings, declared, not measured: what the tests hold the harness's shares to
    v.device.peak = [] {
        attn::device_peak d;
        d.matmul_16bit_gflops = 1000;
        d.read_gbs = 100;
        d.copy_gbs = 50;
        d.cache_bytes = std::size_t(1) << 20;
        d.what = "nominal figures of the test device (declared, not measured)";
        return d;
    };
    v.device.prepare = [](const attn::device_inputs& in, const attn::run_options& opt) {
        if (const std::string why = refuses(in.p, in.mode, in.type); !why.empty()) throw attn::error(why);
        auto r = std::make_unique<host_run>();
        r->p = in.p;
        r->opt = opt;
        r->q.assign(in.q.begin(), in.q.end());
        r->mode = in.mode;
        if (in.mode == attn::mode::layer) {
            r->x_q.assign(in.x_q.begin(), in.x_q.end());
            r->x_kv.assign(in.x_kv.begin(), in.x_kv.end());
            for (const auto& t : in.weights) r->w.t.emplace_back(t.begin(), t.end());
            r->out.assign(in.p.batch * in.p.n_q * in.p.d_model, -777.0f);
            return std::unique_ptr<attn::device_run>(std::move(r));
        }
        if (in.mode == attn::mode::decode) { // the cache's rows as stored, widened once here
            const attn::problem& p = in.p;
            const std::size_t dk = p.qk_dim(), dv = p.v_dim();
            r->k = widened_rows(in.k_cache, in.type, p.batch, p.kv_heads, in.capacity, p.n_kv, dk, dk);
            r->v = in.values_in_keys // MLA's latent: the values are the key rows' first d_v elements
                       ? widened_rows(in.k_cache, in.type, p.batch, p.kv_heads, in.capacity, p.n_kv, dv, dk)
                       : widened_rows(in.v_cache, in.type, p.batch, p.kv_heads, in.capacity, p.n_kv, dv, dv);
        } else {
            r->k.assign(in.k.begin(), in.k.end());
            r->v.assign(in.v.begin(), in.v.end());
        }
        r->out.assign(in.p.batch * in.p.n_q * in.p.o_width(), -777.0f); // what run() must overwrite
        return std::unique_ptr<attn::device_run>(std::move(r));
    };
    return v;
}

/// A bf16 core that stores the softmax weights in bf16 before P V, as tensor-core kernels do (the
/// row sum from the unrounded weights, everything else fp32), and declares that rounding: what the
/// checker must charge (tests/test_device.cpp, and `check` through the CLI in harness.device).
attn::variant stores_bf16_weights() {
    attn::variant v;
    v.name = "test-bf16-weights";
    v.description = "a bf16 loop core that stores the weights in bf16 before P V, and declares it (tests only)";
    v.tags = {"test"};
    v.bf16.linear = attn::by_conversion<attn::bf16>(attn::find_variant("naive").f32).linear; // projections
    v.roundings = [](const attn::problem&, attn::mode, attn::dtype) {
        attn::half_roundings r;
        r.weights = true;
        return r;
    };
    v.bf16.core = [](const attn::problem& p, const attn::core_io<attn::bf16>& io, const attn::run_options&) {
        const std::size_t gs = p.heads / p.kv_heads, dk = p.qk_dim(), dv = p.v_dim();
        const float scale = float(p.softmax_scale());
        std::vector<float> s(p.n_kv), o(dv);
        for (std::size_t b = 0; b < p.batch; ++b)
            for (std::size_t h = 0; h < p.heads; ++h)
                for (std::size_t i = 0; i < p.n_q; ++i) {
                    const attn::bf16* q = io.q.row(b, h, i);
                    // the keys row i sees: bottom-right causal alignment, then the window
                    const std::size_t last =
                        p.causal ? std::min(p.n_kv, i + 1 + p.n_kv - std::min(p.n_kv, p.n_q)) : p.n_kv;
                    const std::size_t first = p.window && last > p.window ? last - p.window : 0;
                    float m = -INFINITY, l = 0;
                    for (std::size_t j = first; j < last; ++j) {
                        const attn::bf16* k = io.k.row(b, h / gs, j);
                        float d = 0;
                        for (std::size_t t = 0; t < dk; ++t) d += float(q[t]) * float(k[t]);
                        s[j] = d * scale;
                        m = std::max(m, s[j]);
                    }
                    std::fill(o.begin(), o.end(), 0.0f);
                    for (std::size_t j = first; j < last; ++j) {
                        const float e = std::exp(s[j] - m);
                        l += e;
                        const float stored = float(attn::bf16(e)); // P in bf16, as the matrix units take it
                        const attn::bf16* vr = io.v.row(b, h / gs, j);
                        for (std::size_t t = 0; t < dv; ++t) o[t] += stored * float(vr[t]);
                    }
                    for (std::size_t t = 0; t < dv; ++t) io.out.row(b, h, i)[t] = attn::bf16(o[t] / l);
                }
    };
    return v;
}

} // namespace attn_test
