// attn.bounds -- the building blocks of the one tolerance policy (attn.check:expect derives it):
// what a check expects (the fp64 reference and a bound per element), the per-row error bound of
// the attention core with the terms a storage format's rounding of the projected Q, K, V scales,
// and the output projection's. Below attn.families and attn.check alike: a family derives its
// layer's bound from these (it owns its composition), the check compares against it.
module;
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>
export module attn.bounds;
import attn.core;

export namespace attn::check {

/// The reference output (fp64) and the per-element bound in units of roundoff (multiply by
/// the variant's u plus the reference's 2^-53), plus, for a storage format, what its roundings
/// add (absolute). Computed once per precision, shared by every variant.
struct expectation {
    std::vector<double> ref, bound, store;
};

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
/// q, k, v: magnitudes of the attention inputs (interleaved layout: q [B, n_q, H d_qk], k
/// [B, n_kv, G d_qk], v [B, n_kv, G d_v]). For the layer, qm, km, vm
/// are the projections' magnitude bounds Q~, K~, V~ and d_in is d_model (0 for the core alone).
/// v_max receives V_i; store_rows (layer) the largest score error per unit u_s that rounding the
/// projected q and k to a storage format makes.
inline std::vector<double> context_bounds(const problem& p, const std::vector<double>& q, const std::vector<double>& k,
                                          const std::vector<double>& v, const std::vector<double>* qm,
                                          const std::vector<double>* km, const std::vector<double>* vm,
                                          std::size_t d_in, std::vector<double>& v_max,
                                          std::vector<double>* store_rows = nullptr) {
    const std::size_t dqk = p.qk_dim(), dv = p.v_dim(), qw = p.q_width(), kw = p.k_width(), vw = p.v_width();
    const double scale = std::abs(p.softmax_scale()), proj = lambda * std::sqrt(double(d_in));
    std::vector<double> out(p.batch * p.n_q * p.heads, 0.0);
    v_max.assign(out.size(), 0.0);
    if (store_rows) store_rows->assign(out.size(), 0.0);
    for (std::size_t b = 0; b < p.batch; ++b)
        for (std::size_t h = 0; h < p.heads; ++h) {
            const std::size_t g = p.kv_head_of(h);
            for (std::size_t i = 0; i < p.n_q; ++i) {
                const std::size_t n = p.visible(i), qi = (b * p.n_q + i) * qw + h * dqk;
                double s_max = 0, cross_max = 0, vmax = 0, vm_max = 0, st_max = 0;
                for (std::size_t j = 0; j < n; ++j) {
                    const std::size_t kj = (b * p.n_kv + j) * kw + g * dqk, vj = (b * p.n_kv + j) * vw + g * dv;
                    double s = 0, cross = 0, s2 = 0;
                    for (std::size_t t = 0; t < dqk; ++t) {
                        s += q[qi + t] * k[kj + t];
                        s2 += q[qi + t] * k[kj + t] * q[qi + t] * k[kj + t];
                        if (qm) cross += (*qm)[qi + t] * k[kj + t] + q[qi + t] * (*km)[kj + t];
                    }
                    for (std::size_t t = 0; t < dv; ++t) {
                        vmax = std::max(vmax, v[vj + t]);
                        if (vm) vm_max = std::max(vm_max, (*vm)[vj + t]);
                    }
                    s_max = std::max(s_max, scale * s);
                    cross_max = std::max(cross_max, scale * cross);
                    // the score's error per unit u_s when q and k are rounded to storage: each term
                    // q_t k_t (1 + d_t + e_t), worst case 2 sum |q k|, or (independent roundings,
                    // Hoeffding) lambda sqrt(2 sum (q k)^2); the smaller holds
                    st_max = std::max(st_max, scale * std::min(2 * s, lambda * std::sqrt(2 * s2)));
                }
                const double weights = (4 * lambda * std::sqrt(double(dqk)) + 12) * s_max + 4 * proj * cross_max +
                                       3 * lambda * std::sqrt(double(n)) + double(n) / 8 + 8;
                const std::size_t at = (b * p.n_q + i) * p.heads + h;
                out[at] = n ? vmax * weights + proj * vm_max : 0.0;
                v_max[at] = vmax + proj * vm_max * 0x1.0p-24;
                if (store_rows) (*store_rows)[at] = n ? st_max : 0.0;
            }
        }
    return out;
}

/// The layer's per-element bound from its context rows' bounds: the output projection W_o
/// [d_model, H d_v] carries the context's error, sum_k |W_o,rk| (ctx error + lambda sqrt(H d_v) u V),
/// plus its own lambda sqrt(H d_v) u |b_o,r| (b_o may be empty). Output [B n_q, d_model].
inline std::vector<double> output_bounds(const problem& p, const std::vector<double>& wo,
                                         const std::vector<double>& bo_, const std::vector<double>& ctx,
                                         const std::vector<double>& v_max) {
    const std::size_t rq = p.batch * p.n_q, ow = p.o_width();
    const double out_proj = lambda * std::sqrt(double(ow));
    std::vector<double> bound(rq * p.d_model);
    for (std::size_t c = 0; c < p.d_model; ++c) {
        double wo_row = 0;
        for (std::size_t t = 0; t < ow; ++t) wo_row += std::abs(wo[c * ow + t]);
        const double bo = bo_.empty() ? 0.0 : std::abs(bo_[c]);
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

} // namespace attn::check
