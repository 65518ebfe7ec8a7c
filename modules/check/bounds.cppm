// attn.bounds -- the building blocks of the one tolerance policy (attn.check:expect derives it):
// what a check expects (the fp64 reference and a bound per element), the per-row error bound of
// the attention core with the terms a storage format's rounding of the projected Q, K, V scales,
// and the output projection's. Below attn.families and attn.check alike: a family derives its
// layer's bound from these (it owns its composition), the check compares against it.
module;
#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <functional>
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
/// [B, n_kv, G d_qk], v [B, n_kv, G d_v]). eq, ek, ev (null: exact inputs): bounds on the inputs'
/// own errors, per element in units of u, from the stages before the core (a projection's
/// lambda sqrt(d_model) u Q~, ...). v_max receives V_i (plus its error); store_rows (layer) the
/// largest score error per unit u_s that rounding q and k to a storage format makes.
inline std::vector<double> context_bounds_given(const problem& p, const std::vector<double>& q,
                                                const std::vector<double>& k, const std::vector<double>& v,
                                                const std::vector<double>* eq, const std::vector<double>* ek,
                                                const std::vector<double>* ev, std::vector<double>& v_max,
                                                std::vector<double>* store_rows = nullptr) {
    const std::size_t dqk = p.qk_dim(), dv = p.v_dim(), qw = p.q_width(), kw = p.k_width(), vw = p.v_width();
    const double scale = std::abs(p.softmax_scale());
    std::vector<double> out(p.batch * p.n_q * p.heads, 0.0);
    v_max.assign(out.size(), 0.0);
    if (store_rows) store_rows->assign(out.size(), 0.0);
    // A block of rows -- (query head, query row) pairs of the heads sharing one key/value head --
    // against one key row at a time: each key and value row is read once a block, not once a query
    // row of every head (a decode step's H/G heads read one cache); the sums in four partial sums:
    // a bound's own rounding is far below what it bounds, so their order is free.
    constexpr std::size_t block = 16;
    struct row_state {
        double s_max = 0, cross_max = 0, vmax = 0, ev_max = 0, st_max = 0;
    };
    std::array<row_state, block> st{};
    const std::size_t gs = p.heads / p.kv_heads, nr = gs * p.n_q; // row r: head g gs + r / n_q, query r % n_q
    for (std::size_t b = 0; b < p.batch; ++b)
        for (std::size_t g = 0; g < p.kv_heads; ++g)
            for (std::size_t r0 = 0; r0 < nr; r0 += block) {
                const std::size_t r1 = std::min(nr, r0 + block);
                st = {};
                for_each_key_of_rows<block>(p, r0, r1, [&](std::size_t j, const auto& rows, std::size_t n) {
                    const std::size_t kj = (b * p.n_kv + j) * kw + g * dqk, vj = (b * p.n_kv + j) * vw + g * dv;
                    double vmax = 0, ev_max = 0; // the value row's largest magnitude (and error)
                    for (std::size_t t = 0; t < dv; ++t) {
                        vmax = std::max(vmax, v[vj + t]);
                        if (ev) ev_max = std::max(ev_max, (*ev)[vj + t]);
                    }
                    for (std::size_t x = 0; x < n; ++x) {
                        const std::size_t r = rows[x], i = r % p.n_q, h = g * gs + r / p.n_q;
                        const std::size_t qi = (b * p.n_q + i) * qw + h * dqk;
                        double s4[4] = {}, sq4[4] = {}, cross = 0;
                        std::size_t t = 0;
                        for (; t + 4 <= dqk; t += 4)
                            for (std::size_t l = 0; l < 4; ++l) {
                                const double qk = q[qi + t + l] * k[kj + t + l];
                                s4[l] += qk;
                                sq4[l] += qk * qk;
                            }
                        for (; t < dqk; ++t) {
                            const double qk = q[qi + t] * k[kj + t];
                            s4[0] += qk;
                            sq4[0] += qk * qk;
                        }
                        if (eq)
                            for (t = 0; t < dqk; ++t) cross += (*eq)[qi + t] * k[kj + t] + q[qi + t] * (*ek)[kj + t];
                        const double s_ = (s4[0] + s4[1]) + (s4[2] + s4[3]), s2 = (sq4[0] + sq4[1]) + (sq4[2] + sq4[3]);
                        row_state& rs = st[r - r0];
                        rs.vmax = std::max(rs.vmax, vmax);
                        rs.ev_max = std::max(rs.ev_max, ev_max);
                        rs.s_max = std::max(rs.s_max, scale * s_);
                        rs.cross_max = std::max(rs.cross_max, scale * cross);
                        // the score's error per unit u_s when q and k are rounded to storage: each
                        // term q_t k_t (1 + d_t + e_t), worst case 2 sum |q k|, or (independent
                        // roundings, Hoeffding) lambda sqrt(2 sum (q k)^2); the smaller holds
                        rs.st_max = std::max(rs.st_max, scale * std::min(2 * s_, lambda * std::sqrt(2 * s2)));
                    }
                });
                for (std::size_t r = r0; r < r1; ++r) {
                    const std::size_t i = r % p.n_q, h = g * gs + r / p.n_q, n = p.visible(i);
                    const row_state& rs = st[r - r0];
                    const double weights = (4 * lambda * std::sqrt(double(dqk)) + 12) * rs.s_max + 4 * rs.cross_max +
                                           3 * lambda * std::sqrt(double(n)) + double(n) / 8 + 8;
                    const std::size_t at = (b * p.n_q + i) * p.heads + h;
                    out[at] = n ? rs.vmax * weights + rs.ev_max : 0.0;
                    v_max[at] = rs.vmax + rs.ev_max * 0x1.0p-24;
                    if (store_rows) (*store_rows)[at] = n ? rs.st_max : 0.0;
                }
            }
    return out;
}

/// context_bounds_given for the q/k/v family's layer: qm, km, vm are the projections' magnitude
/// bounds Q~, K~, V~ and d_in is d_model (0 for the core alone), so each input's error is
/// lambda sqrt(d_in) u times its magnitude bound.
inline std::vector<double> context_bounds(const problem& p, const std::vector<double>& q, const std::vector<double>& k,
                                          const std::vector<double>& v, const std::vector<double>* qm,
                                          const std::vector<double>* km, const std::vector<double>* vm,
                                          std::size_t d_in, std::vector<double>& v_max,
                                          std::vector<double>* store_rows = nullptr) {
    if (!qm) return context_bounds_given(p, q, k, v, nullptr, nullptr, nullptr, v_max, store_rows);
    const double proj = lambda * std::sqrt(double(d_in));
    auto scaled = [&](const std::vector<double>& m) {
        std::vector<double> e(m);
        for (auto& x : e) x *= proj;
        return e;
    };
    const auto eq = scaled(*qm), ek = scaled(*km), ev = scaled(*vm);
    return context_bounds_given(p, q, k, v, &eq, &ek, &ev, v_max, store_rows);
}

/// A tensor of an fp64 reference computation with what a run's roundings may move it by, carried
/// stage by stage to first order (a family whose layer is more than projections around the core
/// derives its bound with these): `e` in units of the run's u (its fp32 or fp64 arithmetic), `s`
/// absolute (a storage format's roundings of every stored intermediate; empty when none).
/// Row-major [rows, cols].
struct tracked {
    std::vector<double> v, e, s;
    std::size_t rows = 0, cols = 0;
    tracked() = default;
    tracked(std::size_t r, std::size_t c, bool store) : v(r * c), e(r * c), s(store ? r * c : 0), rows(r), cols(c) {}
    bool stored() const { return !s.empty(); }
};

/// Exact inputs: the run sees these values (rounded to its storage format already).
inline tracked exact(const std::vector<double>& x, std::size_t rows, std::size_t cols, bool store) {
    tracked t(rows, cols, store);
    t.v = x;
    return t;
}

/// y = x W^T (W [out, in], the weights exact: what the run sees): e_y = |W| e_x + lambda sqrt(in)
/// |x| |W|^T (the dot product's own rounding), s_y = |W| s_x + u_s |y| (y stored in the format).
inline tracked linear_tracked(const tracked& x, const double* w, std::size_t out, double us) {
    const std::size_t in = x.cols;
    tracked y(x.rows, out, x.stored());
    const double dot = lambda * std::sqrt(double(in));
    for (std::size_t r = 0; r < x.rows; ++r) {
        const double* xv = x.v.data() + r * in;
        const double* xe = x.e.data() + r * in;
        for (std::size_t o = 0; o < out; ++o) {
            const double* wr = w + o * in;
            double v = 0, mag = 0, e = 0, s = 0;
            for (std::size_t i = 0; i < in; ++i) {
                v += xv[i] * wr[i];
                mag += std::abs(xv[i] * wr[i]);
                e += std::abs(wr[i]) * xe[i];
                if (x.stored()) s += std::abs(wr[i]) * x.s[r * in + i];
            }
            y.v[r * out + o] = v;
            y.e[r * out + o] = e + dot * mag;
            if (x.stored()) y.s[r * out + o] = s + us * std::abs(v);
        }
    }
    return y;
}

/// RMSNorm of each row's first n columns (from column c0), y = x w / sqrt(mean(x^2) + eps):
/// |dy_i| <= |w_i| / r |dx_i| + |x_i w_i| / r^3 sum_k |x_k| |dx_k| / n to first order; its own
/// rounding, the sum of squares (lambda sqrt(n)), the mean, + eps, sqrt, the reciprocal and the
/// two products, at most (lambda sqrt(n) / 2 + 5) u |y_i|; u_s |y_i| when stored.
inline tracked rmsnorm_tracked(const tracked& x, std::size_t c0, std::size_t n, const double* w, double eps,
                               double us) {
    tracked y(x.rows, n, x.stored());
    const double own = lambda * std::sqrt(double(n)) / 2 + 5;
    for (std::size_t r = 0; r < x.rows; ++r) {
        const std::size_t at = r * x.cols + c0;
        double ss = 0, ex = 0, sx = 0;
        for (std::size_t i = 0; i < n; ++i) {
            ss += x.v[at + i] * x.v[at + i];
            ex += std::abs(x.v[at + i]) * x.e[at + i];
            if (x.stored()) sx += std::abs(x.v[at + i]) * x.s[at + i];
        }
        const double rms = std::sqrt(ss / double(n) + eps), r3 = rms * rms * rms;
        for (std::size_t i = 0; i < n; ++i) {
            const double xi = x.v[at + i], yi = xi * w[i] / rms, wi = std::abs(w[i]);
            y.v[r * n + i] = yi;
            y.e[r * n + i] = wi / rms * x.e[at + i] + std::abs(xi) * wi / r3 * ex / double(n) + own * std::abs(yi);
            if (x.stored())
                y.s[r * n + i] = wi / rms * x.s[at + i] + std::abs(xi) * wi / r3 * sx / double(n) + us * std::abs(yi);
        }
    }
    return y;
}

/// The rotary embedding of columns [c0, c0 + 2m) of each row, in place: pair i is (c0 + 2i,
/// c0 + 2i + 1) of row r rotated by angle(r, i) (a function of the row's position), (a, b) ->
/// (a cos - b sin, a sin + b cos): |dy| <= |cos| |da| + |sin| |db| (and the swap), its own
/// rounding (the tables rounded to the run's type, a product, the sum) at most 3 u (|a cos| +
/// |b sin|); u_s |y| when stored.
template <class Angle>
void rope_tracked(tracked& x, std::size_t c0, std::size_t m, Angle angle, double us) {
    for (std::size_t r = 0; r < x.rows; ++r)
        for (std::size_t i = 0; i < m; ++i) {
            const double th = angle(r, i), c = std::cos(th), s = std::sin(th);
            const std::size_t ia = r * x.cols + c0 + 2 * i, ib = ia + 1;
            const double a = x.v[ia], b = x.v[ib];
            const double y0 = a * c - b * s, y1 = a * s + b * c;
            const double e0 = std::abs(c) * x.e[ia] + std::abs(s) * x.e[ib] + 3 * (std::abs(a * c) + std::abs(b * s));
            const double e1 = std::abs(s) * x.e[ia] + std::abs(c) * x.e[ib] + 3 * (std::abs(a * s) + std::abs(b * c));
            x.v[ia] = y0;
            x.v[ib] = y1;
            x.e[ia] = e0;
            x.e[ib] = e1;
            if (x.stored()) {
                const double s0 = std::abs(c) * x.s[ia] + std::abs(s) * x.s[ib] + us * std::abs(y0);
                const double s1 = std::abs(s) * x.s[ia] + std::abs(c) * x.s[ib] + us * std::abs(y1);
                x.s[ia] = s0;
                x.s[ib] = s1;
            }
        }
}

/// The attention core on tracked operands (interleaved layouts of p, the core's problem): the
/// context with e from context_bounds_given (the inputs' errors carried into the weights and
/// values, the core's own rounding) and, for a storage format, s: the scores moved by at most
/// D = scale max_j sum_t (s_q |k| + |q| s_k), so each weight by a factor within exp(+-2D) and the
/// element by expm1(2D) (P|V|)_t, plus the values' own max_j s_v and u_s |ctx| as it is stored.
/// Output [B n_q, H d_v].
inline tracked
core_tracked(const problem& p, const tracked& q, const tracked& k, const tracked& v, double us,
             const std::function<void(const problem&, const std::vector<double>&, const std::vector<double>&,
                                      const std::vector<double>&, std::vector<double>&)>& attend) {
    const std::size_t rq = p.batch * p.n_q, dv = p.v_dim(), dqk = p.qk_dim();
    tracked o(rq, p.heads * dv, q.stored());
    attend(p, q.v, k.v, v.v, o.v);
    std::vector<double> v_max;
    const auto row = context_bounds_given(p, absolute(q.v), absolute(k.v), absolute(v.v), &q.e, &k.e, &v.e, v_max);
    for (std::size_t r = 0; r < rq; ++r)
        for (std::size_t h = 0; h < p.heads; ++h)
            for (std::size_t t = 0; t < dv; ++t) o.e[(r * p.heads + h) * dv + t] = row[r * p.heads + h];
    if (!q.stored()) return o;
    std::vector<double> pv(o.v.size());
    attend(p, q.v, k.v, absolute(v.v), pv); // P |V|
    const double scale = std::abs(p.softmax_scale());
    const std::size_t qw = p.q_width(), kw = p.k_width(), vw = p.v_width();
    for (std::size_t b = 0; b < p.batch; ++b)
        for (std::size_t i = 0; i < p.n_q; ++i)
            for (std::size_t h = 0; h < p.heads; ++h) {
                const std::size_t g = p.kv_head_of(h), qi = (b * p.n_q + i) * qw + h * dqk;
                double D = 0;
                std::vector<double> sv(dv, 0.0);
                for (std::size_t j = p.keys_begin(i); j < p.keys_end(i); ++j) {
                    const std::size_t kj = (b * p.n_kv + j) * kw + g * dqk, vj = (b * p.n_kv + j) * vw + g * dv;
                    double d = 0;
                    for (std::size_t t = 0; t < dqk; ++t)
                        d += q.s[qi + t] * std::abs(k.v[kj + t]) + std::abs(q.v[qi + t]) * k.s[kj + t] +
                             q.s[qi + t] * k.s[kj + t];
                    D = std::max(D, scale * d);
                    for (std::size_t t = 0; t < dv; ++t) sv[t] = std::max(sv[t], v.s[vj + t]);
                }
                const std::size_t at = ((b * p.n_q + i) * p.heads + h) * dv;
                for (std::size_t t = 0; t < dv; ++t)
                    o.s[at + t] = std::expm1(2 * D) * pv[at + t] + sv[t] + us * std::abs(o.v[at + t]);
            }
    return o;
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
