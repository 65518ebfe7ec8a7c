// The fp64 reference against hand calculation and closed-form identities.
#include <cmath>
#include <cstddef>
#include <vector>
#include <catch2/catch.hpp>
import attn.families;
import attn.core;
import attn.reference;

using attn::problem;
using Catch::Matchers::WithinAbs;

namespace {

std::vector<double> identity(std::size_t n) {
    std::vector<double> m(n * n, 0.0);
    for (std::size_t i = 0; i < n; ++i) m[i * n + i] = 1.0;
    return m;
}

std::vector<double> layer(const problem& p, const attn::weights<double>& w, const std::vector<double>& xq,
                          const std::vector<double>& xkv) {
    std::vector<double> y(p.batch * p.n_q * p.d_model);
    attn::reference_layer<double>(p, w, xq.data(), xkv.data(), y.data());
    return y;
}

} // namespace

// Seed 000's "Cat sleeps": X = [[1,2,0,0],[0,0,1,2]], d_model=4, H=2, d_k=2. With identity
// projections, head h's Q = K = V = X[:, 2h:2h+2], as the document sets up.
// By hand: head 1 scores [[5,0],[0,0]], scaled by 1/sqrt(2); Cat's weights are
// [p, 1-p] with p = 1/(1+exp(-5/sqrt(2))) = 0.97168, sleeps' are [0.5, 0.5].
// Head 2 is the mirror image: Cat's query is zero there, so Cat attends 50/50 and gets
// 0.5*[0,0] + 0.5*[1,2] = [0.5, 1.0] (the document prints [0, 0]); sleeps gets p*[1,2].
TEST_CASE("seed 000 worked example, recomputed by hand", "[reference][toy]") {
    const problem p = attn::mha(4, 2, 2);
    attn::weights<double> w;
    w.t.resize(attn::qkv::count);
    w[attn::qkv::wq] = w[attn::qkv::wk] = w[attn::qkv::wv] = w[attn::qkv::wo] = identity(4);
    const std::vector<double> x{1, 2, 0, 0, 0, 0, 1, 2};
    const double pc = 1.0 / (1.0 + std::exp(-5.0 / std::sqrt(2.0)));
    REQUIRE_THAT(pc, WithinAbs(0.97168, 5e-6));
    const std::vector<double> z_hand{pc, 2 * pc, 0.5, 1.0, 0.5, 1.0, pc, 2 * pc};
    const auto z = layer(p, w, x, x);
    for (std::size_t i = 0; i < z.size(); ++i) CHECK_THAT(z[i], WithinAbs(z_hand[i], 1e-15));
}

TEST_CASE("a two-token single head computed by hand", "[reference]") {
    // d_model = 2, identity projections, scale 1: scores = [[1*1+0, 1*0+0*1]] etc.
    problem p = attn::single_head(2, 2);
    p.scale = 1.0;
    attn::weights<double> w;
    w.t.resize(attn::qkv::count);
    w[attn::qkv::wq] = w[attn::qkv::wk] = w[attn::qkv::wv] = w[attn::qkv::wo] = identity(2);
    const std::vector<double> x{1, 0, 0, 1}; // token a = e1, token b = e2
    // row a: scores [1, 0] -> weights [e/(e+1), 1/(e+1)] -> output [e/(e+1), 1/(e+1)]
    const double e = std::exp(1.0);
    const auto y = layer(p, w, x, x);
    CHECK_THAT(y[0], WithinAbs(e / (e + 1), 1e-15));
    CHECK_THAT(y[1], WithinAbs(1 / (e + 1), 1e-15));
    CHECK_THAT(y[2], WithinAbs(1 / (e + 1), 1e-15));
    CHECK_THAT(y[3], WithinAbs(e / (e + 1), 1e-15));
}

TEST_CASE("biases add as in y = x W^T + b", "[reference]") {
    problem p = attn::single_head(1, 1);
    p.bias = true;
    attn::weights<double> w;
    w.t.resize(attn::qkv::count);
    w[attn::qkv::wq] = {2};
    w[attn::qkv::wk] = {3};
    w[attn::qkv::wv] = {5};
    w[attn::qkv::wo] = {7};
    w[attn::qkv::bq] = {1};
    w[attn::qkv::bk] = {1};
    w[attn::qkv::bv] = {-1};
    w[attn::qkv::bo] = {0.5};
    // one token, one key: softmax weight 1, so y = (x*5 - 1)*7 + 0.5
    const auto y = layer(p, w, {2.0}, {2.0});
    CHECK(y[0] == (2.0 * 5 - 1) * 7 + 0.5);
}

TEST_CASE("softmax with scores of +-1e4 stays finite and picks the winner", "[reference][edge]") {
    problem p = attn::single_head(1, 1);
    p.n_kv = 3;
    p.scale = 1.0;
    const std::vector<double> q{1e4}, k{1.0, -1.0, 0.5}, v{3.0, 5.0, 7.0};
    std::vector<double> o(1);
    attn::reference::core<double>(p, {attn::packed_heads<const double>(q.data(), 1, 1, 1, 1),
                                      attn::packed_heads<const double>(k.data(), 1, 1, 3, 1),
                                      attn::packed_heads<const double>(v.data(), 1, 1, 3, 1),
                                      attn::packed_heads<double>(o.data(), 1, 1, 1, 1)});
    CHECK(std::isfinite(o[0]));
    CHECK(o[0] == 3.0); // exp(-5000) and exp(-20000) underflow to 0 beside exp(0)
    const std::vector<double> qn{-1e4};
    attn::reference::core<double>(p, {attn::packed_heads<const double>(qn.data(), 1, 1, 1, 1),
                                      attn::packed_heads<const double>(k.data(), 1, 1, 3, 1),
                                      attn::packed_heads<const double>(v.data(), 1, 1, 3, 1),
                                      attn::packed_heads<double>(o.data(), 1, 1, 1, 1)});
    CHECK(o[0] == 5.0);
}

TEST_CASE("a causal query row that sees no key yields zeros, not NaN", "[reference][edge]") {
    problem p = attn::single_head(2, 3);
    p.n_kv = 1;
    p.causal = true; // queries 0 and 1 see nothing, query 2 sees key 0
    const std::vector<double> q(6, 1.0), k{1.0, 2.0}, v{4.0, 5.0};
    std::vector<double> o(6, -1.0);
    attn::reference::core<double>(p, {attn::packed_heads<const double>(q.data(), 1, 1, 3, 2),
                                      attn::packed_heads<const double>(k.data(), 1, 1, 1, 2),
                                      attn::packed_heads<const double>(v.data(), 1, 1, 1, 2),
                                      attn::packed_heads<double>(o.data(), 1, 1, 3, 2)});
    CHECK(o == std::vector<double>{0, 0, 0, 0, 4, 5});
}

namespace {
// MHA weights in which every query head of a group shares its key/value head's rows.
attn::weights<double> repeat_kv(const problem& gqa, const attn::weights<double>& w) {
    attn::weights<double> m = w;
    const std::size_t d = gqa.qk_dim(), dm = gqa.d_model;
    m[attn::qkv::wk].assign(gqa.q_width() * dm, 0.0);
    m[attn::qkv::wv].assign(gqa.q_width() * dm, 0.0);
    if (gqa.bias) {
        m[attn::qkv::bk].assign(gqa.q_width(), 0.0);
        m[attn::qkv::bv].assign(gqa.q_width(), 0.0);
    }
    for (std::size_t h = 0; h < gqa.heads; ++h) {
        const std::size_t g = h * gqa.kv_heads / gqa.heads;
        for (std::size_t r = 0; r < d; ++r) {
            for (std::size_t c = 0; c < dm; ++c) {
                m[attn::qkv::wk][(h * d + r) * dm + c] = w[attn::qkv::wk][(g * d + r) * dm + c];
                m[attn::qkv::wv][(h * d + r) * dm + c] = w[attn::qkv::wv][(g * d + r) * dm + c];
            }
            if (gqa.bias) {
                m[attn::qkv::bk][h * d + r] = w[attn::qkv::bk][g * d + r];
                m[attn::qkv::bv][h * d + r] = w[attn::qkv::bv][g * d + r];
            }
        }
    }
    return m;
}
} // namespace

TEST_CASE("GQA equals MHA whose heads share their group's key/value weights", "[reference][families]") {
    const std::size_t G = GENERATE(1, 2, 4);
    const bool causal = GENERATE(false, true);
    problem p = attn::gqa(16, 4, G, 5);
    p.n_kv = 7;
    p.batch = 2;
    p.bias = true;
    p.causal = causal;
    const auto w = attn::random_weights<double>(p, 3);
    const auto xq = attn::random_values<double>(p.batch * p.n_q * p.d_model, 11);
    const auto xkv = attn::random_values<double>(p.batch * p.n_kv * p.d_model, 12);
    problem m = p;
    m.kv_heads = p.heads;
    const auto y_gqa = layer(p, w, xq, xkv), y_mha = layer(m, repeat_kv(p, w), xq, xkv);
    for (std::size_t i = 0; i < y_gqa.size(); ++i) CHECK(y_gqa[i] == y_mha[i]); // same arithmetic, bit for bit
}

TEST_CASE("single-head equals MHA with H=1, and MHA with G=H is GQA(G=H)", "[reference][families]") {
    CHECK(attn::single_head(32, 4).describe() == "single-head B=1 Nq=4 Nkv=4 d_model=32 H=1 G=1 d_head=32");
    const problem a = attn::mha(32, 1, 4), b = attn::single_head(32, 4);
    CHECK((a.heads == b.heads && a.kv_heads == b.kv_heads && a.qk_dim() == b.qk_dim()));
    const problem c = attn::mha(32, 4, 4), d = attn::gqa(32, 4, 4, 4);
    CHECK((c.heads == d.heads && c.kv_heads == d.kv_heads && c.family() == d.family()));
}
