// attn.families:qkv -- the family of the one computation: single-head, MHA, GQA, MQA and the wide
// counterfactual, told apart by (heads, kv_heads, d_head). Its weight set is four projections,
// W_q [H d_qk, d_model], W_k [G d_qk, d_model], W_v [G d_v, d_model], W_o [d_model, H d_v], with
// optional biases; its input stage is three linear maps, its output stage one, and the core runs
// the layer problem itself; its cache is K and V per key/value head. The state dict is PyTorch's
// nn.MultiheadAttention's (in_proj_weight packed for MHA, or q/k/v_proj_weight; in_proj_bias;
// out_proj.weight and .bias).
module;
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <filesystem>
#include <string>
#include <system_error>
#include <vector>
export module attn.families:qkv;
import :ops;
import attn.core;
import attn.bounds;
import attn.reference;
import attn.npy;
import attn.results;

export namespace attn {

/// The q/k/v family's tensors, in its weight set's order.
namespace qkv {
enum tensor : std::size_t { wq, wk, wv, wo, bq, bk, bv, bo, count };
}

struct qkv_family {
    template <class T>
    static core_operands<T> project(const layer_call<T>& c, const T* x_q, const T* x_kv, std::size_t) {
        const problem& p = c.p;
        const std::size_t rq = p.batch * p.n_q, rkv = p.batch * p.n_kv;
        T* q = c.ws.at(0, rq * p.q_width());
        T* k = c.ws.at(1, rkv * p.k_width());
        T* v = c.ws.at(2, rkv * p.v_width());
        reference::announce<T>(stage::proj_q);
        c.k.linear({x_q, c.w[qkv::wq].data(), c.w.data_or_null(qkv::bq), q, rq, p.d_model, p.q_width()}, c.opt);
        reference::announce<T>(stage::proj_k);
        c.k.linear({x_kv, c.w[qkv::wk].data(), c.w.data_or_null(qkv::bk), k, rkv, p.d_model, p.k_width()}, c.opt);
        reference::announce<T>(stage::proj_v);
        c.k.linear({x_kv, c.w[qkv::wv].data(), c.w.data_or_null(qkv::bv), v, rkv, p.d_model, p.v_width()}, c.opt);
        return {interleaved_heads<const T>(q, p.batch, p.n_q, p.heads, p.qk_dim()),
                interleaved_heads<const T>(k, p.batch, p.n_kv, p.kv_heads, p.qk_dim()),
                interleaved_heads<const T>(v, p.batch, p.n_kv, p.kv_heads, p.v_dim())};
    }

    template <class T>
    static void output(const layer_call<T>& c, const T* ctx, T* y) {
        const problem& p = c.p;
        reference::announce<T>(stage::proj_o);
        c.k.linear({ctx, c.w[qkv::wo].data(), c.w.data_or_null(qkv::bo), y, p.batch * p.n_q, p.o_width(), p.d_model},
                   c.opt);
    }

    /// PyTorch-like initialisation: U(-1/sqrt(fan_in), 1/sqrt(fan_in)) for each tensor.
    static std::vector<tensor_spec> tensors(const problem& p) {
        const std::size_t d = p.d_model;
        const double in = 1.0 / std::sqrt(double(d)), out = 1.0 / std::sqrt(double(p.o_width()));
        return {{"q_proj_weight", p.q_width(), d, -in, in},       {"k_proj_weight", p.k_width(), d, -in, in},
                {"v_proj_weight", p.v_width(), d, -in, in},       {"out_proj.weight", d, p.o_width(), -out, out},
                {"q_proj_bias", p.q_width(), 0, -in, in, p.bias}, {"k_proj_bias", p.k_width(), 0, -in, in, p.bias},
                {"v_proj_bias", p.v_width(), 0, -in, in, p.bias}, {"out_proj.bias", d, 0, -out, out, p.bias}};
    }

    /// The layer's reference and bound (the tolerance policy of attn.check:expect, carried through
    /// the projections; its derivation is there).
    static check::expectation expect(const problem& p, const weights<double>& w, const std::vector<double>& xq,
                                     const std::vector<double>& xkv, precision prec) {
        namespace d = check::detail;
        const std::size_t rq = p.batch * p.n_q, rkv = p.batch * p.n_kv, dv = p.v_dim(), ow = p.o_width();
        const bool half = prec == precision::bf16 || prec == precision::f16;
        const double us = half ? unit_roundoff(prec) : 0.0, u32 = 0x1.0p-24;
        auto bias = [](const std::vector<double>& b) { return b.empty() ? nullptr : b.data(); };
        // the projections, signed, and their magnitude bounds |x| |W|^T + |b|
        auto project = [&](const std::vector<double>& x, std::size_t rows, std::size_t wi, std::size_t bi,
                           std::size_t out, bool magnitude) {
            std::vector<double> y(rows * out);
            const auto xa = magnitude ? d::absolute(x) : x, wa = magnitude ? d::absolute(w[wi]) : w[wi],
                       ba = magnitude ? d::absolute(w[bi]) : w[bi];
            reference::linear<double>({xa.data(), wa.data(), bias(ba), y.data(), rows, p.d_model, out});
            return y;
        };
        const auto qs = project(xq, rq, qkv::wq, qkv::bq, p.q_width(), false),
                   ks = project(xkv, rkv, qkv::wk, qkv::bk, p.k_width(), false),
                   vs = project(xkv, rkv, qkv::wv, qkv::bv, p.v_width(), false);
        const auto qm = project(xq, rq, qkv::wq, qkv::bq, p.q_width(), true),
                   km = project(xkv, rkv, qkv::wk, qkv::bk, p.k_width(), true),
                   vm = project(xkv, rkv, qkv::wv, qkv::bv, p.v_width(), true);
        auto attend = [&](const std::vector<double>& values) {
            std::vector<double> o(rq * ow);
            reference::core<double>(
                p, {interleaved_heads<const double>(qs.data(), p.batch, p.n_q, p.heads, p.qk_dim()),
                    interleaved_heads<const double>(ks.data(), p.batch, p.n_kv, p.kv_heads, p.qk_dim()),
                    interleaved_heads<const double>(values.data(), p.batch, p.n_kv, p.kv_heads, dv),
                    interleaved_heads<double>(o.data(), p.batch, p.n_q, p.heads, dv)});
            return o;
        };
        check::expectation e;
        const auto ctx_signed = attend(vs);
        e.ref.resize(rq * p.d_model);
        reference::linear<double>(
            {ctx_signed.data(), w[qkv::wo].data(), bias(w[qkv::bo]), e.ref.data(), rq, ow, p.d_model});
        std::vector<double> score_st, v_max;
        const auto ctx = d::context_bounds(p, d::absolute(qs), d::absolute(ks), d::absolute(vs), &qm, &km, &vm,
                                           p.d_model, v_max, &score_st);
        // Storage roundings, per context element (r, h, t), from the reference's signed projections:
        // stored q and k move every score of the row by <= D = u_s (1 + u_s)^2 score_st, so each
        // weight by a factor within exp(+-2D), and the element by <= expm1(2D) (P|V|)_t; stored v
        // moves it by <= u_s (P|V|)_t. Both are correlated across the row (charged through W_o at
        // worst case); the stored context's own rounding, u_s |ctx|, is independent per element.
        std::vector<double> corr, ctx_abs;
        if (half) {
            corr = attend(d::absolute(vs)); // P |V|
            ctx_abs = d::absolute(ctx_signed);
            for (std::size_t i = 0; i < corr.size(); ++i)
                corr[i] *= std::expm1(2 * us * (1 + us) * (1 + us) * score_st[i / dv]) + us;
        }
        e.bound = d::output_bounds(p, w[qkv::wo], w[qkv::bo], ctx, v_max);
        // the storage roundings through W_o: the correlated part at worst case, the context's own
        // rounding at the smaller of worst case and lambda sqrt(sum W^2 |ctx|^2); then the output
        // rounded as stored
        if (half) {
            e.store.resize(e.ref.size());
            for (std::size_t c = 0; c < p.d_model; ++c)
                for (std::size_t r = 0; r < rq; ++r) {
                    const std::size_t at = r * p.d_model + c;
                    double correlated = 0, worst = 0, squares = 0;
                    for (std::size_t t = 0; t < ow; ++t) {
                        const double wt = w[qkv::wo][c * ow + t], x = ctx_abs[r * ow + t];
                        correlated += std::abs(wt) * corr[r * ow + t];
                        worst += std::abs(wt) * x;
                        squares += wt * wt * x * x;
                    }
                    e.store[at] = correlated + us * (1 + us) * std::min(worst, d::lambda * std::sqrt(squares)) +
                                  us * (std::abs(e.ref[at]) + u32 * e.bound[at]);
                }
        }
        return e;
    }

    /// The layer over a cache's keys and values (family_ops::expect_over_cache): W_q's projection
    /// of x_q and its error as in layer mode, the keys and values exact.
    static check::expectation expect_over_cache(const problem& p, const weights<double>& w,
                                                const std::vector<double>& x, const std::vector<double>& k,
                                                const std::vector<double>& v) {
        namespace d = check::detail;
        const std::size_t rq = p.batch * p.n_q;
        auto bias = [](const std::vector<double>& b) { return b.empty() ? nullptr : b.data(); };
        std::vector<double> q(rq * p.q_width()), qm(q.size()), ctx(rq * p.o_width());
        reference::linear<double>(
            {x.data(), w[qkv::wq].data(), bias(w[qkv::bq]), q.data(), rq, p.d_model, p.q_width()});
        const auto xa = d::absolute(x), wqa = d::absolute(w[qkv::wq]), bqa = d::absolute(w[qkv::bq]);
        reference::linear<double>({xa.data(), wqa.data(), bias(bqa), qm.data(), rq, p.d_model, p.q_width()});
        reference::core<double>(p, {interleaved_heads<const double>(q.data(), p.batch, p.n_q, p.heads, p.qk_dim()),
                                    interleaved_heads<const double>(k.data(), p.batch, p.n_kv, p.kv_heads, p.qk_dim()),
                                    interleaved_heads<const double>(v.data(), p.batch, p.n_kv, p.kv_heads, p.v_dim()),
                                    interleaved_heads<double>(ctx.data(), p.batch, p.n_q, p.heads, p.v_dim())});
        check::expectation e;
        e.ref.resize(rq * p.d_model);
        reference::linear<double>(
            {ctx.data(), w[qkv::wo].data(), bias(w[qkv::bo]), e.ref.data(), rq, p.o_width(), p.d_model});
        const std::vector<double> none_k(k.size(), 0.0), none_v(v.size(), 0.0);
        std::vector<double> v_max;
        const auto row = d::context_bounds(p, d::absolute(q), d::absolute(k), d::absolute(v), &qm, &none_k, &none_v,
                                           p.d_model, v_max);
        e.bound = d::output_bounds(p, w[qkv::wo], w[qkv::bo], row, v_max);
        return e;
    }

    /// nn.MultiheadAttention's state dict. Fills p.d_head and p.bias from what the files hold;
    /// p.d_model, p.heads, p.kv_heads must be set.
    static weights<double> load(const std::string& dir, problem& p) {
        require(std::filesystem::is_directory(dir), dir + ": not a directory");
        const std::string f = dir + "/";
        auto exists = [](const std::string& path) { return std::filesystem::exists(path); };
        const std::size_t d = p.d_model, h = p.heads, g = p.kv_heads;
        weights<double> w;
        w.t.resize(qkv::count);
        if (exists(f + "in_proj_weight.npy")) {
            require(h == g, f + "in_proj_weight.npy: a packed projection means MHA, but kv_heads=" + std::to_string(g) +
                                " != heads=" + std::to_string(h) + " (use q/k/v_proj_weight.npy)");
            p.d_head = d / h;
            require(d % h == 0, "d_model=" + std::to_string(d) + " is not divisible by heads=" + std::to_string(h));
            auto packed = npy::load_shaped(f + "in_proj_weight.npy", {3 * d, d}, "[3*d_model, d_model]");
            w[qkv::wq].assign(packed.begin(), packed.begin() + long(d * d));
            w[qkv::wk].assign(packed.begin() + long(d * d), packed.begin() + long(2 * d * d));
            w[qkv::wv].assign(packed.begin() + long(2 * d * d), packed.end());
        } else {
            const std::string qf = f + "q_proj_weight.npy";
            require(exists(qf), dir + ": neither in_proj_weight.npy nor q_proj_weight.npy is there");
            npy::array q = npy::load(qf);
            require(q.shape.size() == 2 && q.shape[1] == d && q.shape[0] % h == 0 && q.shape[0] > 0,
                    qf + ": shape " + npy::shape_string(q.shape) + ", expected (H*d_head, " + std::to_string(d) +
                        ") with H=" + std::to_string(h));
            p.d_head = q.shape[0] / h;
            require_finite(q.values, qf);
            w[qkv::wq] = std::move(q.values);
            const std::string kv_meaning = "[G*d_head, d_model] with G=" + std::to_string(g);
            w[qkv::wk] = npy::load_shaped(f + "k_proj_weight.npy", {g * p.d_head, d}, kv_meaning);
            w[qkv::wv] = npy::load_shaped(f + "v_proj_weight.npy", {g * p.d_head, d}, kv_meaning);
        }
        const std::size_t qw = p.q_width(), kw = p.k_width(), vw = p.v_width();
        w[qkv::wo] = npy::load_shaped(f + "out_proj.weight.npy", {d, p.o_width()}, "[d_model, H*d_head]");
        const bool in_bias = exists(f + "in_proj_bias.npy"), out_bias = exists(f + "out_proj.bias.npy");
        require(in_bias == out_bias,
                dir + ": in_proj_bias.npy and out_proj.bias.npy must both be present or both absent");
        p.bias = in_bias;
        if (p.bias) {
            auto b = npy::load_shaped(f + "in_proj_bias.npy", {qw + kw + vw}, "[H*d_head + 2*G*d_head]");
            w[qkv::bq].assign(b.begin(), b.begin() + long(qw));
            w[qkv::bk].assign(b.begin() + long(qw), b.begin() + long(qw + kw));
            w[qkv::bv].assign(b.begin() + long(qw + kw), b.end());
            w[qkv::bo] = npy::load_shaped(f + "out_proj.bias.npy", {d}, "[d_model]");
        }
        return w;
    }

    /// Writes under the same names (separate q/k/v projections, so every family of it fits).
    static void save(const std::string& dir, const problem& p, const weights<double>& w) {
        std::filesystem::create_directories(dir);
        const std::string f = dir + "/";
        npy::save(f + "q_proj_weight.npy", {p.q_width(), p.d_model}, w[qkv::wq].data());
        npy::save(f + "k_proj_weight.npy", {p.k_width(), p.d_model}, w[qkv::wk].data());
        npy::save(f + "v_proj_weight.npy", {p.v_width(), p.d_model}, w[qkv::wv].data());
        npy::save(f + "out_proj.weight.npy", {p.d_model, p.o_width()}, w[qkv::wo].data());
        if (p.bias) {
            std::vector<double> b(w[qkv::bq]);
            b.insert(b.end(), w[qkv::bk].begin(), w[qkv::bk].end());
            b.insert(b.end(), w[qkv::bv].begin(), w[qkv::bv].end());
            npy::save(f + "in_proj_bias.npy", {b.size()}, b.data());
            npy::save(f + "out_proj.bias.npy", {p.d_model}, w[qkv::bo].data());
        } else {
            // a folder written before with biases must not keep them: load would use them
            for (const char* name : {"in_proj_bias.npy", "out_proj.bias.npy"}) {
                check_output_file(f + name); // a regular file or nothing: never remove anything else
                std::error_code ec;
                std::filesystem::remove(f + name, ec);
                require(!ec, f + name + ": cannot remove the old bias (" + ec.message() + ")");
            }
        }
    }
};

/// The q/k/v family's record; its id is MHA's, and every family of the one computation finds it.
inline family_ops make_qkv_family() {
    family_ops f;
    f.id = family::mha;
    f.description = "single-head, MHA, GQA, MQA, wide: W_q, W_k, W_v, W_o; K and V cached per key/value head";
    f.tensors = qkv_family::tensors;
    f.attention = [](const problem& p) { return p; };
    f.cache = [](const problem& p) { return cache_layout{p.kv_heads, p.qk_dim(), p.v_dim(), false}; };
    f.set_stages<qkv_family>();
    f.expect = qkv_family::expect;
    f.expect_over_cache = qkv_family::expect_over_cache;
    f.save = qkv_family::save;
    f.load = qkv_family::load;
    return f;
}

} // namespace attn
