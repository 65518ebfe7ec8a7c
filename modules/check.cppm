// attn.check -- is a variant computing the same function as the fp64 reference?
//
// Tolerance policy (one, used by `attnbench check` and the tests alike). Every output element
// gets its own bound from a forward error analysis of what every variant computes, in any
// summation order, with unit roundoff u (2^-24 float, 2^-53 double). A sum or dot product of
// n terms is charged lambda*sqrt(n)*u relative to the sum of |terms| (Higham & Mary's
// probabilistic rounding-error bound; it holds with probability >= 1 - 2exp(-lambda^2/2) per
// sum, and lambda = 6 makes a false failure about one in 10^8 sums), not the worst case n*u,
// which is hundreds of times looser than any real kernel and would let real bugs through.
// For query row i of one head, with n visible keys:
//   S_i = scale * max_j sum_t |q_it| |k_jt|          (largest score magnitude the row forms)
//   V_i = max_{j visible, t} |v_jt|
//   score error      <= (lambda sqrt(d) + 2) u S_i        (dot product, scale, a pre-scaled Q)
//   exp argument     <= 2 (score error) + 2 u S_i          (s - max, both sides perturbed)
//   weight (rel.)    <= 2 (argument error + 4u) + 2 lambda sqrt(n) u   (a 4-ulp exp; sum; divide)
//   output           <= V_i (weight error + lambda sqrt(n) u) + u V_i n/8   (P V; online-softmax
//                       rescaling, 2u per key tile of >= 16 keys)
// so |do| <= u V_i [ (4 lambda sqrt(d) + 12) S_i + 3 lambda sqrt(n) + n/8 + 8 ].
// The bound grows with sqrt(d_head), sqrt(n_kv) and the score magnitude: scores of 1e4 lose
// about 1e4 u of accuracy in the weights, which it admits, and a wrong kernel (errors of order
// V_i) never meets. For the layer the projections' errors are carried in: with
// Q~ = |x| |W_q|^T + |b_q| (K~, V~ likewise), |dq| <= lambda sqrt(d_model) u Q~, which adds
// 4 lambda sqrt(d_model) u scale max_j sum_t (Q~_t |k_jt| + |q_t| K~_jt) to the weights'
// error and lambda sqrt(d_model) u max V~ to the values; the output projection adds
// sum_k |W_o,rk| (context error) + lambda sqrt(H d_head) u (sum_k |W_o,rk| V + |b_o,r|).
// The reference's own error (same formula at 2^-53) is added. A case passes when every element
// is within its bound; `ratio` reports the worst error / bound.
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
    double max_abs = 0;    ///< max |out - ref|
    double max_rel = 0;    ///< max |out - ref| / |ref| over elements with |ref| > 0
    double nmse = 0;       ///< sum (out - ref)^2 / sum ref^2
    double max_ulp = 0;    ///< max distance in units in the last place of the variant's type
    double ratio = 0;      ///< max |out - ref| / bound: <= 1 passes
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
std::vector<double> widen(const std::vector<T>& v) {
    return {v.begin(), v.end()};
}

inline std::vector<double> absolute(std::vector<double> v) {
    for (auto& x : v) x = std::abs(x);
    return v;
}

inline constexpr double lambda = 6.0;

/// Per-row bound on the context, in units of u, for every (b, h, i) at [(b*n_q + i)*H + h].
/// q, k, v: magnitudes of the attention inputs (interleaved layout). For the layer, qm, km, vm
/// are the projections' magnitude bounds Q~, K~, V~ and d_in is d_model (0 for the core alone).
/// v_max receives V_i.
inline std::vector<double> context_bounds(const problem& p, const std::vector<double>& q, const std::vector<double>& k,
                                          const std::vector<double>& v, const std::vector<double>* qm,
                                          const std::vector<double>* km, const std::vector<double>* vm,
                                          std::size_t d_in, std::vector<double>& v_max) {
    const std::size_t d = p.head_dim(), qw = p.q_width(), kw = p.kv_width();
    const double scale = std::abs(p.softmax_scale()), proj = lambda * std::sqrt(double(d_in));
    std::vector<double> out(p.batch * p.n_q * p.heads, 0.0);
    v_max.assign(out.size(), 0.0);
    for (std::size_t b = 0; b < p.batch; ++b)
        for (std::size_t h = 0; h < p.heads; ++h) {
            const std::size_t g = p.kv_head_of(h);
            for (std::size_t i = 0; i < p.n_q; ++i) {
                const std::size_t n = p.visible(i), qi = (b * p.n_q + i) * qw + h * d;
                double s_max = 0, cross_max = 0, vmax = 0, vm_max = 0;
                for (std::size_t j = 0; j < n; ++j) {
                    const std::size_t kj = (b * p.n_kv + j) * kw + g * d;
                    double s = 0, cross = 0;
                    for (std::size_t t = 0; t < d; ++t) {
                        s += q[qi + t] * k[kj + t];
                        vmax = std::max(vmax, v[kj + t]);
                        if (qm) {
                            cross += (*qm)[qi + t] * k[kj + t] + q[qi + t] * (*km)[kj + t];
                            vm_max = std::max(vm_max, (*vm)[kj + t]);
                        }
                    }
                    s_max = std::max(s_max, scale * s);
                    cross_max = std::max(cross_max, scale * cross);
                }
                const double weights = (4 * lambda * std::sqrt(double(d)) + 12) * s_max + 4 * proj * cross_max +
                                       3 * lambda * std::sqrt(double(n)) + double(n) / 8 + 8;
                const std::size_t at = (b * p.n_q + i) * p.heads + h;
                out[at] = n ? vmax * weights + proj * vm_max : 0.0;
                v_max[at] = vmax + proj * vm_max * 0x1.0p-24;
            }
        }
    return out;
}

/// The layer's per-element bound from its context rows' bounds: the output projection carries
/// the context's error, sum_k |W_o,rk| (ctx error + lambda sqrt(H d_head) u V), plus its own
/// lambda sqrt(H d_head) u |b_o,r|. Output [B n_q, d_model].
inline std::vector<double> output_bounds(const problem& p, const weights<double>& w, const std::vector<double>& ctx,
                                         const std::vector<double>& v_max) {
    const std::size_t rq = p.batch * p.n_q;
    const double out_proj = lambda * std::sqrt(double(p.q_width()));
    std::vector<double> bound(rq * p.d_model);
    for (std::size_t c = 0; c < p.d_model; ++c) {
        double wo_row = 0;
        for (std::size_t t = 0; t < p.q_width(); ++t) wo_row += std::abs(w.wo[c * p.q_width() + t]);
        const double bo = w.bo.empty() ? 0.0 : std::abs(w.bo[c]);
        for (std::size_t r = 0; r < rq; ++r) {
            double ctx_err = 0, ctx_mag = 0;
            for (std::size_t h = 0; h < p.heads; ++h) {
                ctx_err = std::max(ctx_err, ctx[r * p.heads + h]);
                ctx_mag = std::max(ctx_mag, v_max[r * p.heads + h]);
            }
            bound[r * p.d_model + c] = wo_row * (ctx_err + out_proj * ctx_mag) + out_proj * bo;
        }
    }
    return bound;
}

} // namespace detail

/// The reference output (fp64) and the per-element bound in units of roundoff (multiply by
/// the variant's u plus the reference's 2^-53). Computed once, shared by every variant.
struct expectation {
    std::vector<double> ref, bound;
};

inline expectation expect(const problem& p, mode m, const inputs& in) {
    const std::size_t d = p.head_dim(), rq = p.batch * p.n_q, rkv = p.batch * p.n_kv;
    expectation e;
    std::vector<double> v_max;
    if (m == mode::core) {
        const auto q = detail::widen(in.q), k = detail::widen(in.k), v = detail::widen(in.v);
        e.ref.resize(rq * p.q_width());
        reference::core<double>(p, {interleaved_heads<const double>(q.data(), p.batch, p.n_q, p.heads, d),
                                    interleaved_heads<const double>(k.data(), p.batch, p.n_kv, p.kv_heads, d),
                                    interleaved_heads<const double>(v.data(), p.batch, p.n_kv, p.kv_heads, d),
                                    interleaved_heads<double>(e.ref.data(), p.batch, p.n_q, p.heads, d)});
        const auto row = detail::context_bounds(p, detail::absolute(q), detail::absolute(k), detail::absolute(v),
                                                nullptr, nullptr, nullptr, 0, v_max);
        e.bound.resize(e.ref.size());
        for (std::size_t r = 0; r < rq; ++r)
            for (std::size_t h = 0; h < p.heads; ++h)
                for (std::size_t t = 0; t < d; ++t) e.bound[(r * p.heads + h) * d + t] = row[r * p.heads + h];
        return e;
    }
    const auto w = in.w.cast<double>();
    const auto xq = detail::widen(in.x_q), xkv = detail::widen(in.x_kv);
    e.ref.resize(rq * p.d_model);
    reference::layer<double>(p, w, xq.data(), xkv.data(), e.ref.data());
    auto bias = [](const std::vector<double>& b) { return b.empty() ? nullptr : b.data(); };
    // the projections, and their magnitude bounds |x| |W|^T + |b|
    auto project = [&](const std::vector<double>& x, std::size_t rows, const std::vector<double>& wt,
                       const std::vector<double>& b, std::size_t out, bool magnitude) {
        std::vector<double> y(rows * out);
        const auto xa = magnitude ? detail::absolute(x) : x, wa = magnitude ? detail::absolute(wt) : wt,
                   ba = magnitude ? detail::absolute(b) : b;
        reference::linear<double>({xa.data(), wa.data(), bias(ba), y.data(), rows, p.d_model, out});
        return magnitude ? y : detail::absolute(y);
    };
    const auto q = project(xq, rq, w.wq, w.bq, p.q_width(), false),
               k = project(xkv, rkv, w.wk, w.bk, p.kv_width(), false),
               v = project(xkv, rkv, w.wv, w.bv, p.kv_width(), false);
    const auto qm = project(xq, rq, w.wq, w.bq, p.q_width(), true),
               km = project(xkv, rkv, w.wk, w.bk, p.kv_width(), true),
               vm = project(xkv, rkv, w.wv, w.bv, p.kv_width(), true);
    const auto ctx = detail::context_bounds(p, q, k, v, &qm, &km, &vm, p.d_model, v_max);
    e.bound = detail::output_bounds(p, w, ctx, v_max);
    return e;
}

/// A decode check over a cache of given values: the fp64 layer output for x_q [B, n_q, d_model]
/// whose keys and values are k and v [B, n_kv, G*d_head] as they are, not projected -- a cache's
/// contents, rounded or dequantized: exact inputs here. The queries are projected in fp64 and
/// their projection error charged as in layer mode; the keys and values carry none.
inline expectation expect_over_cache(const problem& p, const weights<float>& wf, const std::vector<float>& x_q,
                                     const std::vector<float>& k_in, const std::vector<float>& v_in) {
    const std::size_t d = p.head_dim(), rq = p.batch * p.n_q;
    const auto w = wf.cast<double>();
    const auto x = detail::widen(x_q), k = detail::widen(k_in), v = detail::widen(v_in);
    auto bias = [](const std::vector<double>& b) { return b.empty() ? nullptr : b.data(); };
    std::vector<double> q(rq * p.q_width()), qm(q.size()), ctx(q.size());
    reference::linear<double>({x.data(), w.wq.data(), bias(w.bq), q.data(), rq, p.d_model, p.q_width()});
    const auto xa = detail::absolute(x), wqa = detail::absolute(w.wq), bqa = detail::absolute(w.bq);
    reference::linear<double>({xa.data(), wqa.data(), bias(bqa), qm.data(), rq, p.d_model, p.q_width()});
    reference::core<double>(p, {interleaved_heads<const double>(q.data(), p.batch, p.n_q, p.heads, d),
                                interleaved_heads<const double>(k.data(), p.batch, p.n_kv, p.kv_heads, d),
                                interleaved_heads<const double>(v.data(), p.batch, p.n_kv, p.kv_heads, d),
                                interleaved_heads<double>(ctx.data(), p.batch, p.n_q, p.heads, d)});
    expectation e;
    e.ref.resize(rq * p.d_model);
    reference::linear<double>({ctx.data(), w.wo.data(), bias(w.bo), e.ref.data(), rq, p.q_width(), p.d_model});
    const std::vector<double> none(k.size(), 0.0);
    std::vector<double> v_max;
    const auto row = detail::context_bounds(p, detail::absolute(q), detail::absolute(k), detail::absolute(v), &qm,
                                            &none, &none, p.d_model, v_max);
    e.bound = detail::output_bounds(p, w, row, v_max);
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
constexpr double unit_roundoff() {
    return (sizeof(T) == 4 ? 0x1.0p-24 : 0x1.0p-53) + 0x1.0p-53;
}

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

/// The last `rows` query rows of every sequence as a problem of their own. Under the
/// bottom-right causal alignment, row r of the tail sees exactly the keys row n_q - rows + r of
/// the whole problem sees, so checking a tail is checking those rows of the full output, at a
/// fraction of the reference's cost: large sweeps check the tail before they time anything.
inline problem tail_problem(const problem& p, std::size_t rows) {
    problem t = p;
    t.n_q = std::min(rows, p.n_q);
    return t;
}

/// The inputs of tail_problem(p, rows): the last rows of the queries, keys and values whole.
inline inputs tail_inputs(const problem& p, mode m, const inputs& in, std::size_t rows) {
    const problem t = tail_problem(p, rows);
    inputs out = in;
    auto tail = [&](const std::vector<float>& x, std::size_t width) {
        std::vector<float> r;
        r.reserve(p.batch * t.n_q * width);
        for (std::size_t b = 0; b < p.batch; ++b) {
            const auto first = x.begin() + long((b * p.n_q + p.n_q - t.n_q) * width);
            r.insert(r.end(), first, first + long(t.n_q * width));
        }
        return r;
    };
    if (m == mode::core)
        out.q = tail(in.q, p.q_width());
    else
        out.x_q = tail(in.x_q, p.d_model);
    return out;
}

/// The last `rows` rows of every sequence of an output [B, n_q, width].
template <class T>
std::vector<T> tail_rows(const std::vector<T>& out, const problem& p, std::size_t width, std::size_t rows) {
    const std::size_t n = std::min(rows, p.n_q);
    std::vector<T> r;
    r.reserve(p.batch * n * width);
    for (std::size_t b = 0; b < p.batch; ++b) {
        const auto first = out.begin() + long((b * p.n_q + p.n_q - n) * width);
        r.insert(r.end(), first, first + long(n * width));
    }
    return r;
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
    add(single_head(17, 7));          // d_head 17
    add(mha(64, 4, 129));             // d_head 16, N 129
    add(mha(4, 4, 7));                // d_head 1
    add(mqa(48, 16, 7));              // d_head 3, MQA
    problem gq = gqa(512, 8, 2, 129); // d_head 64, GQA
    gq.bias = true;
    add(gq);
    problem g80 = gqa(320, 4, 2, 33); // d_head 80, batch 2
    g80.batch = 2;
    add(g80);
    add(wide(32, 4, 7));           // the wide-head counterfactual
    add(mha(64, 8, 1));            // N 1
    problem cross = mha(64, 4, 7); // cross-attention, fewer queries than keys
    cross.n_kv = 129;
    cross.bias = true;
    add(cross);
    problem rev = gqa(48, 4, 2, 129); // more queries than keys: causal rows that see nothing
    rev.n_kv = 7;
    rev.batch = 3;
    add(rev);
    add(mha(4, 4, 7), 100.0);  // d_head 1, inputs of 100: scores up to +-1e4
    add(mqa(64, 4, 33), 12.0); // d_head 16: scores of a few thousand
    return g;
}

} // namespace attn::check
