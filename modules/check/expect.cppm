// attn.check:expect -- what a correct variant must produce: the fp64 reference output and a
// per-element bound on its distance from it.
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
// The layer terms above are the q/k/v family's: a family owns its composition, so it derives its
// layer's bound from these building blocks (attn.bounds; family_ops::expect); core mode is here.
module;
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <utility>
#include <vector>
export module attn.check:expect;
import :inputs;
import attn.core;
import attn.bounds;
import attn.families;
import attn.reference;

export namespace attn::check {

namespace detail {
/// The fp64 reference core on q, k, v already in double (the core's interleaved layout).
inline std::vector<double> reference_core(const problem& p, const std::vector<double>& q, const std::vector<double>& k,
                                          const std::vector<double>& v) {
    std::vector<double> ref(p.batch * p.n_q * p.o_width());
    reference::core<double>(p, {interleaved_heads<const double>(q.data(), p.batch, p.n_q, p.heads, p.qk_dim()),
                                interleaved_heads<const double>(k.data(), p.batch, p.n_kv, p.kv_heads, p.qk_dim()),
                                interleaved_heads<const double>(v.data(), p.batch, p.n_kv, p.kv_heads, p.v_dim()),
                                interleaved_heads<double>(ref.data(), p.batch, p.n_q, p.heads, p.v_dim())});
    return ref;
}
} // namespace detail

/// The fp64 reference's output on `in` (core mode: p is the core's problem).
inline std::vector<double> reference_output(const problem& p, mode m, const inputs& in) {
    const std::size_t rq = p.batch * p.n_q;
    if (m == mode::core)
        return detail::reference_core(p, detail::widen(in.q), detail::widen(in.k), detail::widen(in.v));
    const auto w = in.w.cast<double>();
    const auto xq = detail::widen(in.x_q), xkv = detail::widen(in.x_kv);
    std::vector<double> ref(rq * p.d_model);
    reference_layer<double>(p, w, xq.data(), xkv.data(), ref.data());
    return ref;
}

/// For bf16 and f16, `in` must be rounded<T> already (the reference sees what the kernel sees).
/// Core mode here; a layer's bound is its family's (family_ops::expect).
inline expectation expect(const problem& p, mode m, const inputs& in, precision prec = precision::f32) {
    if (m == mode::layer)
        return family_ops_of(p).expect(p, in.w.cast<double>(), detail::widen(in.x_q), detail::widen(in.x_kv), prec);
    const std::size_t dv = p.v_dim(), rq = p.batch * p.n_q;
    const bool half = prec == precision::bf16 || prec == precision::f16;
    const double us = half ? unit_roundoff(prec) : 0.0, u32 = 0x1.0p-24;
    expectation e;
    std::vector<double> v_max;
    auto q = detail::widen(in.q), k = detail::widen(in.k), v = detail::widen(in.v); // once: large at long N
    e.ref = detail::reference_core(p, q, k, v);
    const auto row = detail::context_bounds(p, detail::absolute(std::move(q)), detail::absolute(std::move(k)),
                                            detail::absolute(std::move(v)), nullptr, nullptr, nullptr, 0, v_max);
    e.bound.resize(e.ref.size());
    for (std::size_t r = 0; r < rq; ++r)
        for (std::size_t h = 0; h < p.heads; ++h)
            for (std::size_t t = 0; t < dv; ++t) e.bound[(r * p.heads + h) * dv + t] = row[r * p.heads + h];
    if (half) { // the output rounded as stored: u_s |out|, out within its fp32 bound of ref
        e.store.resize(e.ref.size());
        for (std::size_t i = 0; i < e.ref.size(); ++i) e.store[i] = us * (std::abs(e.ref[i]) + u32 * e.bound[i]);
    }
    return e;
}

/// A decode check over a cache of given values: the fp64 layer output for x_q [B, n_q, d_model]
/// whose core reads the keys k and values v as the cache holds them (the core's layout, [B, n_kv,
/// G*d_qk] and [B, n_kv, G*d_v]) -- a cache's contents, rounded or dequantized: exact inputs here.
/// The family computes it (family_ops::expect_over_cache): the queries are projected in fp64 and
/// their error charged as in layer mode; the keys and values carry none.
inline expectation expect_over_cache(const problem& p, const weights<float>& wf, const std::vector<float>& x_q,
                                     const std::vector<float>& k_in, const std::vector<float>& v_in) {
    return family_ops_of(p).expect_over_cache(p, wf.cast<double>(), detail::widen(x_q), detail::widen(k_in),
                                              detail::widen(v_in));
}

/// A reduced-precision flash kernel's one further rounding (PyTorch's CPU flash attention in bf16
/// and f16): the unnormalised weights exp(s - m) are stored in the format before P V, while the
/// row sum is taken from the unrounded ones, so each weight is off by at most u_s relative and
/// the core's output element (r, h, t) by u_s (P|V|)_t, charged worst case. Adds that to
/// e.store; `in` rounded to the format as for expect().
namespace detail {
/// (P|V|) of every output element: the reference core with the values' magnitudes, the weight each
/// rounding of P (or of the scores) is multiplied by.
inline std::vector<double> weighted_abs_values(const problem& p, const inputs& in) {
    const auto q = widen(in.q), k = widen(in.k), v = absolute(widen(in.v));
    std::vector<double> pv(p.batch * p.n_q * p.heads * p.v_dim());
    reference::core<double>(p, {interleaved_heads<const double>(q.data(), p.batch, p.n_q, p.heads, p.qk_dim()),
                                interleaved_heads<const double>(k.data(), p.batch, p.n_kv, p.kv_heads, p.qk_dim()),
                                interleaved_heads<const double>(v.data(), p.batch, p.n_kv, p.kv_heads, p.v_dim()),
                                interleaved_heads<double>(pv.data(), p.batch, p.n_q, p.heads, p.v_dim())});
    return pv;
}

/// charge_stored_weights with (P|V|) given.
inline void charge_stored_weights(expectation& e, const std::vector<double>& pv, double us) {
    e.store.resize(e.ref.size(), 0.0);
    for (std::size_t i = 0; i < pv.size(); ++i) e.store[i] += us * (1 + us) * pv[i];
}
} // namespace detail

inline void charge_stored_weights(expectation& e, const problem& p, const inputs& in, precision prec) {
    detail::charge_stored_weights(e, detail::weighted_abs_values(p, in), unit_roundoff(prec));
}

/// A decode core whose fp32 queries are rounded to a 16-bit format (unit roundoff us) before
/// Q K^T, as tensor cores take them: each score is off by at most us (1 + 2^-24) scale sum_t
/// |q_t| |k_t| (the scale multiplied in before the rounding), so every weight by a factor within
/// exp(+-2 Delta_i), Delta_i the largest such over the row's keys, and the output element (i, t)
/// by (exp(2 Delta_i) - 1) (P|V|)_it (`pv`, detail::weighted_abs_values). Adds that to e.store
/// (core mode, `in` the cache's values).
inline void charge_rounded_queries(expectation& e, const problem& p, const inputs& in, const std::vector<double>& pv,
                                   double us) {
    const std::size_t dk = p.qk_dim(), dv = p.v_dim(), gs = p.heads / p.kv_heads;
    const double scale = p.softmax_scale() * (1 + 0x1.0p-24);
    const auto q = detail::widen(in.q), k = detail::widen(in.k);
    e.store.resize(e.ref.size(), 0.0);
    for (std::size_t b = 0; b < p.batch; ++b)
        for (std::size_t i = 0; i < p.n_q; ++i)
            for (std::size_t h = 0; h < p.heads; ++h) {
                const double* qr = q.data() + ((b * p.n_q + i) * p.heads + h) * dk;
                double delta = 0;
                for (std::size_t j = 0; j < p.n_kv; ++j) {
                    const double* kr = k.data() + ((b * p.n_kv + j) * p.kv_heads + h / gs) * dk;
                    double s = 0;
                    for (std::size_t t = 0; t < dk; ++t) s += std::abs(qr[t] * kr[t]);
                    delta = std::max(delta, us * scale * s);
                }
                const std::size_t at = ((b * p.n_q + i) * p.heads + h) * dv;
                for (std::size_t t = 0; t < dv; ++t) e.store[at + t] += std::expm1(2 * delta) * pv[at + t];
            }
}

/// A decode core whose queries are in fixed point (half_roundings::query_top): each element of
/// query row i off by at most c_i = 0.51 max_t |q_it| / top, so each score by at most scale c_i
/// sum_t |k_jt| (the scale multiplied in before), every weight by a factor within exp(+-2
/// Delta_i), Delta_i the largest over the row's keys, and the output element (i, t) by
/// (exp(2 Delta_i) - 1) (P|V|)_it, as charge_rounded_queries. Adds that to e.store.
inline void charge_fixed_queries(expectation& e, const problem& p, const inputs& in, const std::vector<double>& pv,
                                 std::int32_t top) {
    const std::size_t dk = p.qk_dim(), dv = p.v_dim(), gs = p.heads / p.kv_heads;
    const double scale = p.softmax_scale() * (1 + 0x1.0p-24);
    const auto q = detail::widen(in.q), k = detail::widen(in.k);
    e.store.resize(e.ref.size(), 0.0);
    for (std::size_t b = 0; b < p.batch; ++b)
        for (std::size_t i = 0; i < p.n_q; ++i)
            for (std::size_t h = 0; h < p.heads; ++h) {
                const double* qr = q.data() + ((b * p.n_q + i) * p.heads + h) * dk;
                double qmax = 0;
                for (std::size_t t = 0; t < dk; ++t) qmax = std::max(qmax, std::abs(qr[t]));
                double ksum = 0;
                for (std::size_t j = 0; j < p.n_kv; ++j) {
                    const double* kr = k.data() + ((b * p.n_kv + j) * p.kv_heads + h / gs) * dk;
                    double s = 0;
                    for (std::size_t t = 0; t < dk; ++t) s += std::abs(kr[t]);
                    ksum = std::max(ksum, s);
                }
                const double delta = scale * 0.51 * qmax / top * ksum;
                const std::size_t at = ((b * p.n_q + i) * p.heads + h) * dv;
                for (std::size_t t = 0; t < dv; ++t) e.store[at + t] += std::expm1(2 * delta) * pv[at + t];
            }
}

/// A decode core over an int8 cache whose weights are in fixed point (half_roundings::
/// weight_top): each weight P_j s_j (s_j key j's value row scale, `v_scales` [B, n_kv, G]) off by
/// at most 0.51 / top times the largest over its tile of keys, which is at most W_i = max_j P_j
/// s_j over the row (P normalised, as the kernel's weights are once it divides by their sum), so
/// the output element (i, t) by 0.51 W_i / top sum_j |v_jt| / s_j (|v| / s: the stored integers).
/// The probabilities are the fp64 reference's (`in` the cache's values); the kernel's own differ
/// from them by its fp32 error, inside the bound already: 2^-10 more is charged for it.
inline void charge_fixed_weights(expectation& e, const problem& p, const inputs& in, std::span<const float> v_scales,
                                 std::int32_t top) {
    const std::size_t dk = p.qk_dim(), dv = p.v_dim(), gs = p.heads / p.kv_heads;
    require(v_scales.size() == p.batch * p.n_kv * p.kv_heads,
            "fixed-point weights are charged against the int8 cache's value scales (" +
                std::to_string(v_scales.size()) + " given, " + std::to_string(p.batch * p.n_kv * p.kv_heads) +
                " rows)");
    const auto q = detail::widen(in.q), k = detail::widen(in.k), v = detail::widen(in.v);
    reference::trace<double> tr;
    std::vector<double> out(p.batch * p.n_q * p.heads * dv);
    reference::core<double>(p,
                            {interleaved_heads<const double>(q.data(), p.batch, p.n_q, p.heads, dk),
                             interleaved_heads<const double>(k.data(), p.batch, p.n_kv, p.kv_heads, dk),
                             interleaved_heads<const double>(v.data(), p.batch, p.n_kv, p.kv_heads, dv),
                             interleaved_heads<double>(out.data(), p.batch, p.n_q, p.heads, dv)},
                            &tr);
    e.store.resize(e.ref.size(), 0.0);
    for (std::size_t b = 0; b < p.batch; ++b)
        for (std::size_t h = 0; h < p.heads; ++h) {
            const std::vector<double>& probs = tr.probs[b * p.heads + h]; // n_q x n_kv
            const std::size_t g = h / gs;
            auto sc = [&](std::size_t j) { return double(v_scales[(b * p.n_kv + j) * p.kv_heads + g]); };
            for (std::size_t i = 0; i < p.n_q; ++i) {
                double w = 0;
                for (std::size_t j = 0; j < p.n_kv; ++j) w = std::max(w, probs[i * p.n_kv + j] * sc(j));
                const double c = 0.51 * w * (1 + 0x1.0p-10) / top;
                const std::size_t at = ((b * p.n_q + i) * p.heads + h) * dv;
                for (std::size_t t = 0; t < dv; ++t) {
                    double stored = 0; // sum_j |v_jt| / s_j
                    for (std::size_t j = 0; j < p.n_kv; ++j)
                        if (sc(j) > 0) stored += std::abs(v[((b * p.n_kv + j) * p.kv_heads + g) * dv + t]) / sc(j);
                    e.store[at + t] += c * stored;
                }
            }
        }
}

/// What variant `var` rounds on core problem p (mode m, storage t: decode's the cache's) beyond
/// fp32 arithmetic, charged on e: the stored weights (charge_stored_weights) and, in decode, the
/// rounded queries (charge_rounded_queries), or queries and weights in fixed point over an int8
/// cache (charge_fixed_queries, charge_fixed_weights: `v_scales` the cache's value row scales).
/// `in` as expect() takes it (decode: the cache's values).
inline void charge_roundings(expectation& e, const variant& var, const problem& p, mode m, dtype t, const inputs& in,
                             std::span<const float> v_scales = {}) {
    // not in a layer: its bound charges the stored Q, K, V and context at the format's u, under
    // which the GPU's layers ran at 0.016-0.086 of it (an H100, 2026-11-26)
    if (m == mode::layer) return;
    const half_roundings r = var.roundings(p, m, t);
    if (!r.weights && !r.queries && !r.query_top && !r.weight_top) return;
    const std::vector<double> pv = detail::weighted_abs_values(p, in); // the charges scale it: once
    const double us = unit_roundoff(to_precision(r.format));
    if (r.weights) detail::charge_stored_weights(e, pv, us);
    if (r.queries) charge_rounded_queries(e, p, in, pv, us);
    if (r.query_top) charge_fixed_queries(e, p, in, pv, r.query_top);
    if (r.weight_top) charge_fixed_weights(e, p, in, v_scales, r.weight_top);
}

} // namespace attn::check
