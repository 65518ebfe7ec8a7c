// A family the suite has never heard of, added by this file alone: "wide values", H query heads
// whose values (and context) are twice as wide as their queries and keys, d_v = 2 d_qk, with its
// own weight set (W_q [H d_qk, d], W_k [G d_qk, d], W_v [G 2 d_qk, d], W_o [d, H 2 d_qk], named
// "wq", "wk", "wv", "wo"), its own layer stages, and one variant of its own that serves it alone.
// Nothing else in the tree names it: its registration below is the whole of its plumbing. The
// tests hold its fp64 reference to plain loops written here, every registered variant to that
// reference (core, layer, a decode step), and its own variant's refusal of other families.
#include <cmath>
#include <cstddef>
#include <string>
#include <vector>
#include <catch2/catch.hpp>
import attn.variants;
import attn.families;
import attn.check;
import attn.decode;
import attn.reference;
import attn.results;

using attn::problem;

namespace {

enum : std::size_t { wq, wk, wv, wo, tensors };

/// Its layer's stages: three projections in, one out, like the q/k/v family but with d_v = 2 d_qk.
struct wide_values {
    template <class T>
    static attn::core_operands<T> project(const attn::layer_call<T>& c, const T* x_q, const T* x_kv, std::size_t) {
        const problem& p = c.p;
        const std::size_t rq = p.batch * p.n_q, rkv = p.batch * p.n_kv;
        T* q = c.ws.at(0, rq * p.q_width());
        T* k = c.ws.at(1, rkv * p.k_width());
        T* v = c.ws.at(2, rkv * p.v_width());
        c.k.linear({x_q, c.w[wq].data(), nullptr, q, rq, p.d_model, p.q_width()}, c.opt);
        c.k.linear({x_kv, c.w[wk].data(), nullptr, k, rkv, p.d_model, p.k_width()}, c.opt);
        c.k.linear({x_kv, c.w[wv].data(), nullptr, v, rkv, p.d_model, p.v_width()}, c.opt);
        return {attn::interleaved_heads<const T>(q, p.batch, p.n_q, p.heads, p.qk_dim()),
                attn::interleaved_heads<const T>(k, p.batch, p.n_kv, p.kv_heads, p.qk_dim()),
                attn::interleaved_heads<const T>(v, p.batch, p.n_kv, p.kv_heads, p.v_dim())};
    }
    template <class T>
    static void output(const attn::layer_call<T>& c, const T* ctx, T* y) {
        const problem& p = c.p;
        c.k.linear({ctx, c.w[wo].data(), nullptr, y, p.batch * p.n_q, p.o_width(), p.d_model}, c.opt);
    }
};

/// Registered once, on first use: the family and its one variant.
attn::family wide_values_family() {
    static const attn::family f = [] {
        attn::family_ops ops;
        ops.description = "test family: values twice as wide as queries and keys";
        ops.tensors = [](const problem& p) {
            const double in = 1.0 / std::sqrt(double(p.d_model)), out = 1.0 / std::sqrt(double(p.o_width()));
            return std::vector<attn::tensor_spec>{{"wq", p.q_width(), p.d_model, -in, in},
                                                  {"wk", p.k_width(), p.d_model, -in, in},
                                                  {"wv", p.v_width(), p.d_model, -in, in},
                                                  {"wo", p.d_model, p.o_width(), -out, out}};
        };
        ops.attention = [](const problem& p) { return p; };
        ops.cache = [](const problem& p) { return attn::cache_layout{p.kv_heads, p.qk_dim(), p.v_dim(), false}; };
        ops.set_stages<wide_values>();
        // its bound is the q/k/v family's derivation, which holds for any d_v (no biases here)
        ops.expect = [](const problem& p, const attn::weights<double>& w, const std::vector<double>& xq,
                        const std::vector<double>& xkv, attn::precision prec) {
            attn::weights<double> as_qkv;
            as_qkv.t = {w[wq], w[wk], w[wv], w[wo], {}, {}, {}, {}};
            return attn::qkv_family::expect(p, as_qkv, xq, xkv, prec);
        };
        const attn::family id = attn::register_family(std::move(ops), "wide-values", "wide values");
        attn::variant v;
        v.name = "wide-values-naive";
        v.description = "the reference loops, for the wide-values family only";
        v.f32 = attn::reference::kernels<float>();
        v.f64 = attn::reference::kernels<double>();
        v.serves.families = {id};
        attn::register_variant(std::move(v));
        return id;
    }();
    return f;
}

problem shape(std::size_t heads, std::size_t kv_heads, std::size_t d_qk, std::size_t n, bool causal) {
    problem p = attn::gqa(8 * heads, heads, kv_heads, n);
    p.d_head = d_qk;
    p.d_v = 2 * d_qk;
    p.causal = causal;
    p.named_family = wide_values_family();
    return p;
}

} // namespace

TEST_CASE("a family added by one file: its reference against plain loops", "[families][throwaway]") {
    const problem p = shape(2, 1, 3, 4, true); // d_model 16, MQA-shaped, d_qk 3, d_v 6
    REQUIRE(p.family() == wide_values_family());
    const auto w = attn::random_weights<double>(p, 5);
    REQUIRE(w[wv].size() == 6 * 16);
    REQUIRE(w[wo].size() == 16 * 12);
    const auto x = attn::random_values<double>(p.n_q * p.d_model, 9);
    std::vector<double> y(p.n_q * p.d_model);
    attn::reference_layer<double>(p, w, x.data(), x.data(), y.data());
    // the same layer in plain loops: project, causal softmax attention per head, concatenate, W_o
    auto proj = [&](const std::vector<double>& m, std::size_t out) {
        std::vector<double> r(p.n_q * out, 0.0);
        for (std::size_t i = 0; i < p.n_q; ++i)
            for (std::size_t o = 0; o < out; ++o)
                for (std::size_t c = 0; c < p.d_model; ++c)
                    r[i * out + o] += x[i * p.d_model + c] * m[o * p.d_model + c];
        return r;
    };
    const auto q = proj(w[wq], 6), k = proj(w[wk], 3), v = proj(w[wv], 6);
    std::vector<double> ctx(p.n_q * 12, 0.0);
    for (std::size_t h = 0; h < 2; ++h)
        for (std::size_t i = 0; i < p.n_q; ++i) {
            std::vector<double> s(i + 1);
            double mx = -1e300, sum = 0;
            for (std::size_t j = 0; j <= i; ++j) {
                for (std::size_t t = 0; t < 3; ++t) s[j] += q[i * 6 + h * 3 + t] * k[j * 3 + t];
                s[j] /= std::sqrt(3.0);
                mx = std::max(mx, s[j]);
            }
            for (auto& e : s) sum += (e = std::exp(e - mx));
            for (std::size_t j = 0; j <= i; ++j)
                for (std::size_t t = 0; t < 6; ++t) ctx[i * 12 + h * 6 + t] += s[j] / sum * v[j * 6 + t];
        }
    for (std::size_t i = 0; i < p.n_q; ++i)
        for (std::size_t o = 0; o < p.d_model; ++o) {
            double want = 0;
            for (std::size_t t = 0; t < 12; ++t) want += ctx[i * 12 + t] * w[wo][o * 12 + t];
            CHECK(y[i * p.d_model + o] == Approx(want).epsilon(1e-12).margin(1e-14));
        }
}

TEST_CASE("a family added by one file: every variant serves it, core, layer and decode", "[families][throwaway]") {
    attn::run_options opt;
    opt.threads = 2;
    for (const problem& p : {shape(4, 2, 16, 37, true), shape(2, 2, 8, 129, false), shape(8, 1, 12, 5, true)}) {
        for (const auto& v : attn::registry()) {
            INFO(v.name << " on " << p.describe());
            for (attn::mode m : {attn::mode::core, attn::mode::layer}) {
                INFO(attn::enum_name(m));
                const auto r = attn::check::check_case<float>(v, p, m, opt, 3);
                INFO("err/bound " << r.ratio);
                CHECK(r.pass);
            }
            if (p.causal) {
                const auto d = attn::check_decode<float>(v, p, 20, attn::decode_fill::prefill, opt, 4);
                INFO("decode err/bound " << d.ratio);
                CHECK(d.pass);
            }
        }
    }
}

TEST_CASE("a family added by one file: its own variant refuses the others", "[families][throwaway]") {
    const attn::family f = wide_values_family();
    const auto& v = attn::find_variant("wide-values-naive");
    CHECK(attn::refusal(v, shape(2, 1, 4, 3, false), attn::mode::layer, attn::dtype::f32, attn::device::cpu).empty());
    CHECK(attn::refusal(v, attn::mha(16, 2, 3), attn::mode::core, attn::dtype::f32, attn::device::cpu) ==
          "variant 'wide-values-naive' does not serve family MHA (it serves " + std::string(attn::enum_label(f)) + ")");
    CHECK(attn::refusal(v, shape(2, 1, 4, 3, false), attn::mode::core, attn::dtype::bf16, attn::device::cpu) ==
          "variant 'wide-values-naive' does not run in bf16 on this CPU (" + attn::machine().cpu_model + ")");
    CHECK(attn::parse_enum<attn::family>("wide-values") == f);
    CHECK(attn::enum_label(f) == "wide values");
}
