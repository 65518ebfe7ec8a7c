module;
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>
#include "../../modules/detail/xtensor.hpp"
module attn.identities;
import attn.reference;
import attn.check;
import attn.families;

namespace attn {
namespace {

// Both sides of an identity are fp64 computations of one function, each within the check
// policy's bound (attn.check: u * bound per element) of the exact result, so they may differ
// by twice that: the identity is compared under the same policy with u = 2 * 2^-53, against the
// bound of the left side's expectation.
identity_result make(std::string name, const problem& p, const check::expectation& e,
                     const std::vector<double>& other) {
    const auto m = check::compare<double>(other, e.ref, e.bound, 2 * 0x1.0p-53);
    identity_result r;
    r.name = std::move(name);
    r.problem = p.describe();
    r.max_abs_diff = m.max_abs;
    r.tolerance = 2 * 0x1.0p-53 * e.bound[m.worst];
    r.pass = m.pass;
    return r;
}

std::vector<double> widen(const std::vector<float>& v) { return {v.begin(), v.end()}; }

std::vector<double> layer(const problem& p, const weights<double>& w, const std::vector<double>& xq,
                          const std::vector<double>& xkv) {
    std::vector<double> y(p.batch * p.n_q * p.d_model);
    reference_layer<double>(p, w, xq.data(), xkv.data(), y.data());
    return y;
}

// Per-head loop (reference::core on strided views) vs one batched tensor computation.
identity_result batched_vs_loop(std::uint64_t seed) {
    problem p = mha(24, 3, 5);
    p.batch = 2;
    p.n_kv = 6;
    const std::size_t B = p.batch, H = p.heads, Nq = p.n_q, Nk = p.n_kv, d = p.qk_dim();
    const auto in = check::make_inputs(p, mode::core, seed);
    const auto q = widen(in.q), k = widen(in.k), v = widen(in.v);
    const auto e = check::expect(p, mode::core, in); // e.ref: reference::core, one head at a time
    // [B, N, H*d] -> reshape [B, N, H, d] -> transpose to [B, H, N, d]
    auto heads = [&](const std::vector<double>& t, std::size_t n) {
        xt::xtensor<double, 4> x = xt::adapt(t, std::vector<std::size_t>{B, n, H, d});
        return xt::xtensor<double, 4>(xt::transpose(x, {0, 2, 1, 3}));
    };
    const auto Q = heads(q, Nq), K = heads(k, Nk), V = heads(v, Nk);
    using xt::all;
    using xt::newaxis;
    const xt::xtensor<double, 4> S =
        xt::sum(xt::view(Q, all(), all(), all(), newaxis(), all()) * xt::view(K, all(), all(), newaxis(), all(), all()),
                {4}) *
        p.softmax_scale();
    // (reductions evaluated, then broadcast back with newaxis: keep_dims broadcasting gave wrong
    // rows with xtensor 0.24 here, which this identity caught)
    const xt::xtensor<double, 3> row_max = xt::amax(S, {3});
    const xt::xtensor<double, 4> E = xt::exp(S - xt::view(row_max, all(), all(), all(), newaxis()));
    const xt::xtensor<double, 3> row_sum = xt::sum(E, {3});
    const xt::xtensor<double, 4> P = E / xt::view(row_sum, all(), all(), all(), newaxis());
    const xt::xtensor<double, 4> O = xt::sum(
        xt::view(P, all(), all(), all(), all(), newaxis()) * xt::view(V, all(), all(), newaxis(), all(), all()), {3});
    const xt::xtensor<double, 4> back = xt::transpose(O, {0, 2, 1, 3}); // [B, N, H, d]
    const std::vector<double> batched(back.begin(), back.end());
    return make("per-head loop = batched (B, H, N, d) tensors", p, e, batched);
}

// MHA vs H single-head attentions, each on its slice of the weights, concatenated, then W_o.
identity_result mha_vs_single_heads(std::uint64_t seed) {
    problem p = mha(16, 4, 5);
    p.bias = true;
    auto in = check::make_inputs(p, mode::layer, seed);
    in.x_kv = in.x_q; // self-attention
    const auto w = in.w.cast<double>();
    const auto x = widen(in.x_q);
    const std::size_t d = p.qk_dim(), dm = p.d_model;
    std::vector<double> ctx(p.n_q * p.q_width());
    for (std::size_t h = 0; h < p.heads; ++h) {
        problem s = single_head(dm, p.n_q);
        s.d_head = d; // one head of width d_model/H reading the full d_model input
        s.bias = true;
        const auto rows = [&](const std::vector<double>& m) {
            return std::vector<double>(m.begin() + long(h * d * dm), m.begin() + long((h + 1) * d * dm));
        };
        const auto brows = [&](const std::vector<double>& b) {
            return std::vector<double>(b.begin() + long(h * d), b.begin() + long((h + 1) * d));
        };
        std::vector<double> q(p.n_q * d), k(p.n_q * d), v(p.n_q * d), o(p.n_q * d);
        const auto wq = rows(w[qkv::wq]), wk = rows(w[qkv::wk]), wv = rows(w[qkv::wv]), bq = brows(w[qkv::bq]),
                   bk = brows(w[qkv::bk]), bv = brows(w[qkv::bv]);
        reference::linear<double>({x.data(), wq.data(), bq.data(), q.data(), p.n_q, dm, d});
        reference::linear<double>({x.data(), wk.data(), bk.data(), k.data(), p.n_q, dm, d});
        reference::linear<double>({x.data(), wv.data(), bv.data(), v.data(), p.n_q, dm, d});
        reference::core<double>(s, {packed_heads<const double>(q.data(), 1, 1, p.n_q, d),
                                    packed_heads<const double>(k.data(), 1, 1, p.n_q, d),
                                    packed_heads<const double>(v.data(), 1, 1, p.n_q, d),
                                    packed_heads<double>(o.data(), 1, 1, p.n_q, d)});
        for (std::size_t i = 0; i < p.n_q; ++i)
            std::copy(o.begin() + long(i * d), o.begin() + long((i + 1) * d),
                      ctx.begin() + long(i * p.q_width() + h * d));
    }
    std::vector<double> y(p.n_q * dm);
    reference::linear<double>({ctx.data(), w[qkv::wo].data(), w[qkv::bo].data(), y.data(), p.n_q, p.o_width(), dm});
    return make("MHA = H single heads, concatenated, then W_o", p, check::expect(p, mode::layer, in), y);
}

// GQA(G) vs MHA with every head of a group given its group's key/value rows.
identity_result gqa_vs_shared_mha(std::size_t G, std::uint64_t seed) {
    problem p = gqa(24, 6, G, 5);
    p.n_kv = 7;
    p.causal = true;
    p.bias = true;
    const auto in = check::make_inputs(p, mode::layer, seed);
    const auto w = in.w.cast<double>();
    const auto xq = widen(in.x_q), xkv = widen(in.x_kv);
    problem m = p;
    m.kv_heads = p.heads;
    weights<double> wm = w;
    const std::size_t d = p.qk_dim(), dm = p.d_model;
    wm[qkv::wk].assign(m.k_width() * dm, 0);
    wm[qkv::wv].assign(m.v_width() * dm, 0);
    wm[qkv::bk].assign(m.k_width(), 0);
    wm[qkv::bv].assign(m.v_width(), 0);
    for (std::size_t h = 0; h < p.heads; ++h) {
        const std::size_t g = p.kv_head_of(h);
        std::copy_n(w[qkv::wk].begin() + long(g * d * dm), d * dm, wm[qkv::wk].begin() + long(h * d * dm));
        std::copy_n(w[qkv::wv].begin() + long(g * d * dm), d * dm, wm[qkv::wv].begin() + long(h * d * dm));
        std::copy_n(w[qkv::bk].begin() + long(g * d), d, wm[qkv::bk].begin() + long(h * d));
        std::copy_n(w[qkv::bv].begin() + long(g * d), d, wm[qkv::bv].begin() + long(h * d));
    }
    const auto b = layer(m, wm, xq, xkv);
    const std::string label = G == p.heads ? "GQA(G=H) = MHA"
                              : G == 1     ? "GQA(G=1) = MQA = MHA with one shared K/V"
                                           : "GQA(G) = MHA with K/V shared per group";
    return make(label, p, check::expect(p, mode::layer, in), b);
}

// MLA's absorbed form (W^UK folded into the query, attention over the latent, W^UV after it) vs
// its naive form (K and V decompressed per head): one function, a query latent, causal, batch 2.
identity_result mla_absorbed_vs_naive(std::uint64_t seed) {
    problem p = mla(32, 4, 8, 8, 4, 2, 3, form::naive, 7);
    p.batch = 2;
    p.causal = true;
    auto in = check::make_inputs(p, mode::layer, seed);
    in.x_kv = in.x_q; // self-attention
    problem absorbed = p;
    absorbed.form = form::absorb;
    const auto x = widen(in.x_q);
    return make("MLA absorbed = MLA naive (W^UK into the query, W^UV after the attention)", p,
                check::expect(p, mode::layer, in), layer(absorbed, in.w.cast<double>(), x, x));
}

} // namespace

std::vector<identity_result> check_identities(std::uint64_t seed) {
    return {batched_vs_loop(seed),      mha_vs_single_heads(seed),  gqa_vs_shared_mha(6, seed),
            gqa_vs_shared_mha(1, seed), gqa_vs_shared_mha(2, seed), mla_absorbed_vs_naive(seed)};
}

} // namespace attn
