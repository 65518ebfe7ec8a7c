// attn.check -- is a variant computing the same function as the fp64 reference?
//
// Tolerance policy (one, used by `attnbench check` and the tests alike). Each output element
// gets its own bound, from a first-order forward error analysis in unit roundoff u
// (2^-24 for float, 2^-53 for double) of the computation every variant performs, in any
// summation order. For query row i of a head, with n visible keys:
//   S_i  = max_j scale * sum_t |q_it| |k_jt|      (the largest score the row could form)
//   V_i  = max_{j visible, c} |v_jc|
//   score error      |ds_ij| <= (d + 2) u S_i        (d products and sums, the scale, a pre-scale)
//   exponent error   <= 2 |ds| + 2 u S_i              (s - max, both sides perturbed)
//   weight error     rel <= 2 (exp argument error + 4u) + 2 n u   (a 4-ulp exp; the sum; the divide)
//   output error     |do_ic| <= V_i (weight error + n u) + rescaling (2u per key tile, <= 2 n u)
// giving  |do_ic| <= u V_i [ (4d + 16) S_i + 5 n + 9 ].
// The bound grows linearly with d_head (scores) and with n_kv (sums), and with the score
// magnitude S_i: scores of 1e4 legitimately lose about 1e4 u of relative accuracy in the
// weights, which the bound admits and a wrong kernel (errors of order V_i) never meets.
// For the full layer, projection errors are carried in: with Q~ = |x| |W_q|^T + |b_q| (and
// K~, V~ likewise) the score bound uses S~_i from Q~, K~ and d + 2 d_model + 4 in place of
// d + 2; the values add (d_model + 1) u V~_i; the output projection adds
// sum_k |W_o,rk| (context bound) + (H d_head + 1) u (sum_k |W_o,rk| V~ + |b_o,r|).
// The reference's own error (same formula at 2^-53) is added. A case passes when every
// element is within its bound; `ratio` reports the worst error / bound (headroom).
module;
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>
export module attn.check;
import attn.core;
import attn.reference;

export namespace attn::check {

enum class mode { core, layer };
inline const char* mode_name(mode m) { return m == mode::core ? "core" : "layer"; }

/// How far a variant's output is from the fp64 reference (rounded to the variant's precision).
struct metrics {
    double max_abs = 0;  ///< max |out - ref|
    double max_rel = 0;  ///< max |out - ref| / |ref| over elements with |ref| > 0
    double nmse = 0;     ///< sum (out - ref)^2 / sum ref^2
    double max_ulp = 0;  ///< max distance in units in the last place of the variant's type
    double ratio = 0;    ///< max |out - ref| / bound: <= 1 passes
    std::size_t worst = 0; ///< flat index of the element with the largest ratio
    bool pass = true;
};

/// Distance in ulps between two values of type T (via their ordered bit patterns).
template <class T>
double ulp_distance(T a, T b) {
    using U = std::conditional_t<sizeof(T) == 4, std::int32_t, std::int64_t>;
    if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<double>::infinity();
    auto ordered = [](T x) {
        const U i = std::bit_cast<U>(x);
        return i < 0 ? std::numeric_limits<U>::min() - i : i;
    };
    const double d = double(ordered(a)) - double(ordered(b));
    return std::abs(d);
}

/// `bound` is per unit roundoff; `u` is the variant's plus the reference's.
template <class T>
metrics compare(const std::vector<T>& out, const std::vector<double>& ref, const std::vector<double>& bound_per_u,
                double u) {
    metrics m;
    double num = 0, den = 0;
    for (std::size_t i = 0; i < out.size(); ++i) {
        const double o = double(out[i]), r = ref[i], e = std::abs(o - r);
        const double err = std::isnan(o) ? std::numeric_limits<double>::infinity() : e;
        m.max_abs = std::max(m.max_abs, err);
        if (r != 0) m.max_rel = std::max(m.max_rel, err / std::abs(r));
        num += err * err;
        den += r * r;
        m.max_ulp = std::max(m.max_ulp, ulp_distance<T>(out[i], T(r)));
        const double bound = u * bound_per_u[i];
        const double ratio = bound > 0 ? err / bound : (err > 0 ? std::numeric_limits<double>::infinity() : 0.0);
        if (ratio > m.ratio || i == 0) {
            m.ratio = ratio;
            m.worst = i;
        }
    }
    m.nmse = den > 0 ? num / den : num;
    m.pass = m.ratio <= 1.0;
    return m;
}

/// The inputs of one check, drawn in float from a seed (so float and double runs see the same
/// numbers). Core mode: q [B, n_q, H*d], k and v [B, n_kv, G*d] (the layout a projection
/// writes). Layer mode: x_q, x_kv and weights.
struct inputs {
    std::vector<float> q, k, v, x_q, x_kv;
    weights<float> w;
};

inline inputs make_inputs(const problem& p, mode m, std::uint64_t seed, double magnitude = 1.0) {
    inputs in;
    if (m == mode::core) {
        in.q = random_values<float>(p.batch * p.n_q * p.q_width(), seed * 16 + 1, magnitude);
        in.k = random_values<float>(p.batch * p.n_kv * p.kv_width(), seed * 16 + 2, magnitude);
        in.v = random_values<float>(p.batch * p.n_kv * p.kv_width(), seed * 16 + 3, 1.0);
    } else {
        in.x_q = random_values<float>(p.batch * p.n_q * p.d_model, seed * 16 + 4, magnitude);
        in.x_kv = random_values<float>(p.batch * p.n_kv * p.d_model, seed * 16 + 5, magnitude);
        in.w = random_weights<float>(p, seed);
    }
    return in;
}

namespace detail {

template <class T>
std::vector<double> widen(const std::vector<T>& v) { return {v.begin(), v.end()}; }

inline std::vector<double> absolute(std::vector<double> v) {
    for (auto& x : v) x = std::abs(x);
    return v;
}

/// Per-row context bound (see the header) for every (b, h, i): out[(b*n_q + i)*H + h].
/// q, k, v are magnitudes (|.|) in the interleaved layout; `score_terms` is the multiplier of
/// u * S_i, `value_extra` the extra absolute error of the values per unit of V.
inline std::vector<double> context_bounds(const problem& p, const std::vector<double>& q, const std::vector<double>& k,
                                          const std::vector<double>& v, double u, double score_terms,
                                          double value_extra, std::vector<double>* v_max = nullptr) {
    const std::size_t d = p.head_dim(), qw = p.q_width(), kw = p.kv_width();
    const double scale = std::abs(p.softmax_scale());
    std::vector<double> out(p.batch * p.n_q * p.heads, 0.0);
    if (v_max) v_max->assign(out.size(), 0.0);
    for (std::size_t b = 0; b < p.batch; ++b)
        for (std::size_t h = 0; h < p.heads; ++h) {
            const std::size_t g = p.kv_head_of(h);
            for (std::size_t i = 0; i < p.n_q; ++i) {
                const std::size_t n = p.visible(i);
                const double* qi = &q[(b * p.n_q + i) * qw + h * d];
                double s_max = 0, vm = 0;
                for (std::size_t j = 0; j < n; ++j) {
                    const double* kj = &k[(b * p.n_kv + j) * kw + g * d];
                    const double* vj = &v[(b * p.n_kv + j) * kw + g * d];
                    double s = 0;
                    for (std::size_t t = 0; t < d; ++t) {
                        s += qi[t] * kj[t];
                        vm = std::max(vm, vj[t]);
                    }
                    s_max = std::max(s_max, scale * s);
                }
                const double bound = u * vm * ((4 * score_terms + 8) * s_max + 5.0 * double(n) + 9 + value_extra);
                out[(b * p.n_q + i) * p.heads + h] = n ? bound : 0.0;
                if (v_max) (*v_max)[(b * p.n_q + i) * p.heads + h] = vm;
            }
        }
    return out;
}

} // namespace detail

/// The reference output (fp64) and the per-element bound in units of roundoff (multiply by
/// the variant's u plus the reference's 2^-53). Computed once, shared by every variant.
struct expectation {
    std::vector<double> ref, bound;
};

inline expectation expect(const problem& p, mode m, const inputs& in) {
    const std::size_t d = p.head_dim();
    expectation e;
    if (m == mode::core) {
        const auto q = detail::widen(in.q), k = detail::widen(in.k), v = detail::widen(in.v);
        e.ref.resize(p.batch * p.n_q * p.q_width());
        reference::core<double>(p, {interleaved_heads<const double>(q.data(), p.batch, p.n_q, p.heads, d),
                                    interleaved_heads<const double>(k.data(), p.batch, p.n_kv, p.kv_heads, d),
                                    interleaved_heads<const double>(v.data(), p.batch, p.n_kv, p.kv_heads, d),
                                    interleaved_heads<double>(e.ref.data(), p.batch, p.n_q, p.heads, d)});
        const auto row = detail::context_bounds(p, detail::absolute(q), detail::absolute(k), detail::absolute(v),
                                                1.0, double(d + 2), 0.0);
        e.bound.resize(e.ref.size());
        for (std::size_t r = 0; r < p.batch * p.n_q; ++r)
            for (std::size_t h = 0; h < p.heads; ++h)
                for (std::size_t t = 0; t < d; ++t) e.bound[(r * p.heads + h) * d + t] = row[r * p.heads + h];
        return e;
    }
    const auto w = in.w.cast<double>();
    const auto xq = detail::widen(in.x_q), xkv = detail::widen(in.x_kv);
    e.ref.resize(p.batch * p.n_q * p.d_model);
    reference::layer<double>(p, w, xq.data(), xkv.data(), e.ref.data());
    // magnitudes of the projections: |x| |W|^T + |b|
    const auto aw = [](const std::vector<double>& t) { return detail::absolute(t); };
    const weights<double> wa{aw(w.wq), aw(w.wk), aw(w.wv), aw(w.wo), aw(w.bq), aw(w.bk), aw(w.bv), aw(w.bo)};
    const auto axq = detail::absolute(xq), axkv = detail::absolute(xkv);
    const std::size_t rq = p.batch * p.n_q, rkv = p.batch * p.n_kv;
    std::vector<double> qm(rq * p.q_width()), km(rkv * p.kv_width()), vm(rkv * p.kv_width());
    auto bias = [](const std::vector<double>& b) { return b.empty() ? nullptr : b.data(); };
    reference::linear<double>({axq.data(), wa.wq.data(), bias(wa.bq), qm.data(), rq, p.d_model, p.q_width()});
    reference::linear<double>({axkv.data(), wa.wk.data(), bias(wa.bk), km.data(), rkv, p.d_model, p.kv_width()});
    reference::linear<double>({axkv.data(), wa.wv.data(), bias(wa.bv), vm.data(), rkv, p.d_model, p.kv_width()});
    const double uu = 1.0, dm1 = double(p.d_model + 1), qw1 = double(p.q_width() + 1);
    std::vector<double> v_max;
    const auto ctx = detail::context_bounds(p, qm, km, vm, uu, double(d + 2 * p.d_model + 4), dm1, &v_max);
    e.bound.resize(e.ref.size());
    for (std::size_t r = 0; r < rq; ++r) {
        double ctx_err = 0, ctx_mag = 0;
        for (std::size_t h = 0; h < p.heads; ++h) {
            ctx_err = std::max(ctx_err, ctx[r * p.heads + h]);
            ctx_mag = std::max(ctx_mag, v_max[r * p.heads + h]);
        }
        for (std::size_t c = 0; c < p.d_model; ++c) {
            double wo_row = 0;
            for (std::size_t k = 0; k < p.q_width(); ++k) wo_row += wa.wo[c * p.q_width() + k];
            const double bo = wa.bo.empty() ? 0.0 : wa.bo[c];
            e.bound[r * p.d_model + c] = wo_row * (ctx_err + qw1 * uu * ctx_mag) + qw1 * uu * bo;
        }
    }
    return e;
}

/// Runs `var` on `in` at precision T and returns its output.
template <class T>
std::vector<T> run(const variant& var, const problem& p, mode m, const inputs& in, const run_options& opt) {
    const std::size_t d = p.head_dim();
    auto cast = [](const std::vector<float>& v) { return std::vector<T>(v.begin(), v.end()); };
    if (m == mode::core) {
        const auto q = cast(in.q), k = cast(in.k), v = cast(in.v);
        std::vector<T> out(p.batch * p.n_q * p.q_width(), T(-777)); // garbage a kernel must overwrite
        var.get<T>().core(p,
                          {interleaved_heads<const T>(q.data(), p.batch, p.n_q, p.heads, d),
                           interleaved_heads<const T>(k.data(), p.batch, p.n_kv, p.kv_heads, d),
                           interleaved_heads<const T>(v.data(), p.batch, p.n_kv, p.kv_heads, d),
                           interleaved_heads<T>(out.data(), p.batch, p.n_q, p.heads, d)},
                          opt);
        return out;
    }
    const auto w = in.w.cast<T>();
    const auto xq = cast(in.x_q), xkv = cast(in.x_kv);
    std::vector<T> y(p.batch * p.n_q * p.d_model, T(-777));
    layer_workspace<T> ws;
    run_layer<T>(var, p, w, xq.data(), xkv.data(), y.data(), opt, ws);
    return y;
}

/// Unit roundoff of T plus the fp64 reference's own.
template <class T>
constexpr double unit_roundoff() { return (sizeof(T) == 4 ? 0x1.0p-24 : 0x1.0p-53) + 0x1.0p-53; }

/// `var` at precision T on prepared inputs and expectation.
template <class T>
metrics check_prepared(const variant& var, const problem& p, mode m, const inputs& in, const expectation& e,
                       const run_options& opt) {
    return compare(run<T>(var, p, m, in, opt), e.ref, e.bound, unit_roundoff<T>());
}

/// One variant on one problem at precision T, against the fp64 reference.
template <class T>
metrics check_case(const variant& var, const problem& p, mode m, const run_options& opt, std::uint64_t seed,
                   double magnitude = 1.0) {
    const inputs in = make_inputs(p, m, seed, magnitude);
    return check_prepared<T>(var, p, m, in, expect(p, m, in), opt);
}

/// A case of the grid: a problem and the magnitude of its inputs (large ones make scores of 1e4).
struct grid_case {
    problem p;
    double magnitude = 1.0;
};

/// The embedded default grid: every family, odd sizes (N = 1, 7, 129; d_head = 1, 3, 17, 64, 80),
/// causal and not, cross-attention both ways, batch > 1, biases, and scores of about +-1e4.
inline std::vector<grid_case> default_grid() {
    std::vector<grid_case> g;
    auto add = [&](problem p, double mag = 1.0) {
        for (bool causal : {false, true}) {
            p.causal = causal;
            g.push_back({p, mag});
        }
    };
    add(single_head(17, 7));               // d_head 17
    add(mha(64, 4, 129));                  // d_head 16, N 129
    add(mha(4, 4, 7));                     // d_head 1
    add(mqa(48, 16, 7));                   // d_head 3, MQA
    problem gq = gqa(512, 8, 2, 129);      // d_head 64, GQA
    gq.bias = true;
    add(gq);
    problem g80 = gqa(320, 4, 2, 33);      // d_head 80, batch 2
    g80.batch = 2;
    add(g80);
    add(wide(32, 4, 7));                   // the wide-head counterfactual
    add(mha(64, 8, 1));                    // N 1
    problem cross = mha(64, 4, 7);         // cross-attention, fewer queries than keys
    cross.n_kv = 129;
    cross.bias = true;
    add(cross);
    problem rev = gqa(48, 4, 2, 129);      // more queries than keys: causal rows that see nothing
    rev.n_kv = 7;
    rev.batch = 3;
    add(rev);
    add(mha(4, 4, 7), 100.0);              // d_head 1, inputs of 100: scores up to +-1e4
    add(mqa(64, 4, 33), 12.0);             // d_head 16: scores of a few thousand
    return g;
}

} // namespace attn::check
