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
// bf16 and f16 (storage formats, fp32 arithmetic): the reference runs on the same inputs and
// weights rounded to the format, the bound above is taken at fp32's u, and the roundings the
// kernel adds are charged at the format's u_s: in a layer the stored Q and K (each score off by
// at most u_s times the smaller of 2 sum|q k| and, roundings being independent, lambda
// sqrt(2 sum (q k)^2); the weights by a factor within exp(+-2 that), not linearised since u_s
// times a score need not be small), the stored V (u_s V_i), the stored context (through W_o,
// the smaller of worst case and lambda sqrt(sum W_o^2 |ctx|^2)), and the output (u_s |out|). `unrounded_*` is
// informational: the error against fp64 on the unrounded inputs, what storing in the format costs a user.
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
export import :bounds;
export import :grid;
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
    double unrounded_max_abs = 0; ///< bf16/f16: max |out - fp64 on the unrounded inputs| (else = max_abs)
    double unrounded_max_rel = 0; ///< the same relative to that reference's max |element|
};

/// Distance in ulps between two values of type T (via their ordered bit patterns).
template <class T>
double ulp_distance(T a, T b) {
    using U = std::conditional_t<sizeof(T) == 2, std::int16_t,
                                 std::conditional_t<sizeof(T) == 4, std::int32_t, std::int64_t>>;
    if (std::isnan(double(a)) || std::isnan(double(b))) return std::numeric_limits<double>::infinity();
    auto ordered = [](T x) {
        const U i = std::bit_cast<U>(x);
        return i < 0 ? std::numeric_limits<U>::min() - i : i;
    };
    const double d = double(ordered(a)) - double(ordered(b));
    return std::abs(d);
}

/// `bound` is per unit roundoff; `u` is the variant's plus the reference's; `store` (absolute,
/// may be empty) is what rounding to a storage format adds.
template <class T>
metrics compare(const std::vector<T>& out, const std::vector<double>& ref, const std::vector<double>& bound_per_u,
                double u, const std::vector<double>& store = {}) {
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
        const double bound = u * bound_per_u[i] + (store.empty() ? 0.0 : store[i]);
        const double ratio = bound > 0 ? err / bound : (err > 0 ? std::numeric_limits<double>::infinity() : 0.0);
        if (ratio > m.ratio || i == 0) {
            m.ratio = ratio;
            m.worst = i;
        }
    }
    m.nmse = den > 0 ? num / den : num;
    m.pass = m.ratio <= 1.0;
    m.unrounded_max_abs = m.max_abs;
    m.unrounded_max_rel = m.max_rel;
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

/// The reference output (fp64) and the per-element bound in units of roundoff (multiply by
/// the variant's u plus the reference's 2^-53), plus, for a storage format, what its roundings
/// add (absolute). Computed once per precision, shared by every variant.
struct expectation {
    std::vector<double> ref, bound, store;
};

/// The fp64 reference's output on `in`.
inline std::vector<double> reference_output(const problem& p, mode m, const inputs& in) {
    const std::size_t d = p.head_dim(), rq = p.batch * p.n_q;
    if (m == mode::core) {
        const auto q = detail::widen(in.q), k = detail::widen(in.k), v = detail::widen(in.v);
        std::vector<double> ref(rq * p.q_width());
        reference::core<double>(p, {interleaved_heads<const double>(q.data(), p.batch, p.n_q, p.heads, d),
                                    interleaved_heads<const double>(k.data(), p.batch, p.n_kv, p.kv_heads, d),
                                    interleaved_heads<const double>(v.data(), p.batch, p.n_kv, p.kv_heads, d),
                                    interleaved_heads<double>(ref.data(), p.batch, p.n_q, p.heads, d)});
        return ref;
    }
    const auto w = in.w.cast<double>();
    const auto xq = detail::widen(in.x_q), xkv = detail::widen(in.x_kv);
    std::vector<double> ref(rq * p.d_model);
    reference::layer<double>(p, w, xq.data(), xkv.data(), ref.data());
    return ref;
}

/// `in` with every value rounded to T (to nearest even) and held in float: the inputs and
/// weights of a T run, and of its reference.
template <class T>
inputs rounded(const inputs& in) {
    auto r = [](std::vector<float> v) {
        for (auto& x : v) x = float(T(x));
        return v;
    };
    return {
        r(in.q),    r(in.k),
        r(in.v),    r(in.x_q),
        r(in.x_kv), {r(in.w.wq), r(in.w.wk), r(in.w.wv), r(in.w.wo), r(in.w.bq), r(in.w.bk), r(in.w.bv), r(in.w.bo)}};
}

/// For bf16 and f16, `in` must be rounded<T> already (the reference sees what the kernel sees).
inline expectation expect(const problem& p, mode m, const inputs& in, precision prec = precision::f32) {
    const std::size_t d = p.head_dim(), rq = p.batch * p.n_q, rkv = p.batch * p.n_kv;
    const bool half = prec == precision::bf16 || prec == precision::f16;
    const double us = half ? unit_roundoff(prec) : 0.0, u32 = 0x1.0p-24;
    expectation e;
    e.ref = reference_output(p, m, in);
    std::vector<double> v_max;
    if (m == mode::core) {
        const auto q = detail::widen(in.q), k = detail::widen(in.k), v = detail::widen(in.v);
        const auto row = detail::context_bounds(p, detail::absolute(q), detail::absolute(k), detail::absolute(v),
                                                nullptr, nullptr, nullptr, 0, v_max);
        e.bound.resize(e.ref.size());
        for (std::size_t r = 0; r < rq; ++r)
            for (std::size_t h = 0; h < p.heads; ++h)
                for (std::size_t t = 0; t < d; ++t) e.bound[(r * p.heads + h) * d + t] = row[r * p.heads + h];
        if (half) { // the output rounded as stored: u_s |out|, out within its fp32 bound of ref
            e.store.resize(e.ref.size());
            for (std::size_t i = 0; i < e.ref.size(); ++i) e.store[i] = us * (std::abs(e.ref[i]) + u32 * e.bound[i]);
        }
        return e;
    }
    const auto w = in.w.cast<double>();
    const auto xq = detail::widen(in.x_q), xkv = detail::widen(in.x_kv);
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
    std::vector<double> score_st;
    const auto ctx = detail::context_bounds(p, q, k, v, &qm, &km, &vm, p.d_model, v_max, &score_st);
    // Storage roundings, per context element (r, h, t), from the reference's signed projections:
    // stored q and k move every score of the row by <= D = u_s (1 + u_s)^2 score_st, so each
    // weight by a factor within exp(+-2D), and the element by <= expm1(2D) (P|V|)_t; stored v
    // moves it by <= u_s (P|V|)_t. Both are correlated across the row (charged through W_o at
    // worst case); the stored context's own rounding, u_s |ctx|, is independent per element.
    std::vector<double> corr, ctx_abs;
    if (half) {
        auto signed_proj = [&](const std::vector<double>& x, std::size_t rows, const std::vector<double>& wt,
                               const std::vector<double>& b, std::size_t out) {
            std::vector<double> y(rows * out);
            reference::linear<double>({x.data(), wt.data(), bias(b), y.data(), rows, p.d_model, out});
            return y;
        };
        const auto qs = signed_proj(xq, rq, w.wq, w.bq, p.q_width()),
                   ks = signed_proj(xkv, rkv, w.wk, w.bk, p.kv_width()),
                   vs = signed_proj(xkv, rkv, w.wv, w.bv, p.kv_width());
        auto attend = [&](const std::vector<double>& values) {
            std::vector<double> o(rq * p.q_width());
            reference::core<double>(p, {interleaved_heads<const double>(qs.data(), p.batch, p.n_q, p.heads, d),
                                        interleaved_heads<const double>(ks.data(), p.batch, p.n_kv, p.kv_heads, d),
                                        interleaved_heads<const double>(values.data(), p.batch, p.n_kv, p.kv_heads, d),
                                        interleaved_heads<double>(o.data(), p.batch, p.n_q, p.heads, d)});
            return o;
        };
        corr = attend(v); // P |V| (v holds |v|)
        ctx_abs = detail::absolute(attend(vs));
        for (std::size_t i = 0; i < corr.size(); ++i)
            corr[i] *= std::expm1(2 * us * (1 + us) * (1 + us) * score_st[i / d]) + us;
    }
    e.bound = detail::output_bounds(p, w, ctx, v_max);
    // the storage roundings through W_o: the correlated part at worst case, the context's own
    // rounding at the smaller of worst case and lambda sqrt(sum W^2 |ctx|^2); then the output
    // rounded as stored
    if (half) {
        e.store.resize(e.ref.size());
        for (std::size_t c = 0; c < p.d_model; ++c)
            for (std::size_t r = 0; r < rq; ++r) {
                const std::size_t at = r * p.d_model + c;
                double correlated = 0, worst = 0, squares = 0;
                for (std::size_t t = 0; t < p.q_width(); ++t) {
                    const double wt = w.wo[c * p.q_width() + t], x = ctx_abs[r * p.q_width() + t];
                    correlated += std::abs(wt) * corr[r * p.q_width() + t];
                    worst += std::abs(wt) * x;
                    squares += wt * wt * x * x;
                }
                e.store[at] = correlated + us * (1 + us) * std::min(worst, detail::lambda * std::sqrt(squares)) +
                              us * (std::abs(e.ref[at]) + u32 * e.bound[at]);
            }
    }
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
    auto cast = [](const std::vector<float>& v) {
        std::vector<T> t(v.size());
        for (std::size_t i = 0; i < v.size(); ++i) t[i] = T(v[i]);
        return t;
    };
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
    const weights<T> w{cast(in.w.wq), cast(in.w.wk), cast(in.w.wv), cast(in.w.wo),
                       cast(in.w.bq), cast(in.w.bk), cast(in.w.bv), cast(in.w.bo)};
    const auto xq = cast(in.x_q), xkv = cast(in.x_kv);
    std::vector<T> y(p.batch * p.n_q * p.d_model, T(-777));
    layer_workspace<T> ws;
    run_layer<T>(var, p, w, xq.data(), xkv.data(), y.data(), opt, ws);
    return y;
}

/// Unit roundoff of T's arithmetic (fp32 for bf16 and f16) plus the fp64 reference's own.
template <class T>
constexpr double unit_roundoff() {
    return attn::unit_roundoff(precision_of<compute_t<T>>) + 0x1.0p-53;
}

/// `var` at precision T on prepared inputs (rounded<T> for bf16/f16) and expectation.
template <class T>
metrics check_prepared(const variant& var, const problem& p, mode m, const inputs& in, const expectation& e,
                       const run_options& opt) {
    return compare(run<T>(var, p, m, in, opt), e.ref, e.bound, unit_roundoff<T>(), e.store);
}

/// The error of `out` against the fp64 reference on the unrounded inputs (informational).
template <class T>
void add_unrounded(metrics& r, const std::vector<T>& out, const std::vector<double>& ref_unrounded) {
    double mag = 0, err = 0;
    for (std::size_t i = 0; i < out.size(); ++i) {
        mag = std::max(mag, std::abs(ref_unrounded[i]));
        err = std::max(err, std::abs(double(out[i]) - ref_unrounded[i]));
    }
    r.unrounded_max_abs = err;
    r.unrounded_max_rel = mag > 0 ? err / mag : err;
}

/// One variant on one problem at precision T, against the fp64 reference: for bf16 and f16 on
/// the inputs rounded to T, with the error against the unrounded inputs' reference beside it.
template <class T>
metrics check_case(const variant& var, const problem& p, mode m, const run_options& opt, std::uint64_t seed,
                   double magnitude = 1.0) {
    const inputs in = make_inputs(p, m, seed, magnitude);
    if constexpr (!is_half<T>) {
        return check_prepared<T>(var, p, m, in, expect(p, m, in), opt);
    } else {
        const inputs r = rounded<T>(in);
        const expectation e = expect(p, m, r, precision_of<T>);
        const auto out = run<T>(var, p, m, r, opt);
        metrics res = compare(out, e.ref, e.bound, unit_roundoff<T>(), e.store);
        add_unrounded(res, out, reference_output(p, m, in));
        return res;
    }
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

} // namespace attn::check
