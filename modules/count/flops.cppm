// attn.count:flops -- operations by stage and kind under the three conventions, parameters by
// tensor and the crossover length, in closed form (see attn.count). The measured count, the
// reference on counting scalars, is attn.check's: these formulas import the problem types alone.
module;
#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <utility>
#include <vector>
export module attn.count:flops;
import attn.core;

export namespace attn {

/// The per-token stages (the projections, and MLA's norms, rotary embedding and absorbed maps) as
/// opposed to the attention stages (QK^T .. P V).
inline constexpr bool is_projection(stage s) { return !is_attention_stage(s); }

/// All three conventions for one problem.
struct flop_counts {
    flop_table full;                            ///< every operation, as the reference does it
    std::array<std::uint64_t, n_stages> macs{}; ///< matmul multiply-adds (M*N*K), per stage

    std::uint64_t total_macs() const {
        std::uint64_t t = 0;
        for (auto v : macs) t += v;
        return t;
    }
    /// Matmul-only, 2 FLOPs per multiply-add; biases, scaling and softmax excluded.
    std::uint64_t matmul_flops() const { return 2 * total_macs(); }
    std::uint64_t full_flops() const { return full.total(); }
    std::uint64_t projection_full() const {
        std::uint64_t t = 0;
        for (std::size_t s = 0; s < n_stages; ++s)
            if (is_projection(stage(s))) t += full.stage_total(stage(s));
        return t;
    }
    std::uint64_t attention_full() const { return full_flops() - projection_full(); }
    std::uint64_t projection_matmul() const {
        std::uint64_t t = 0;
        for (std::size_t s = 0; s < n_stages; ++s)
            if (is_projection(stage(s))) t += 2 * macs[s];
        return t;
    }
    std::uint64_t attention_matmul() const { return matmul_flops() - projection_matmul(); }
};

namespace detail {

/// y = x W^T + b: each output is 1 multiply, in-1 multiply-adds, and one add for the bias.
inline void count_linear(flop_counts& c, stage s, std::uint64_t rows, std::uint64_t in, std::uint64_t out,
                         std::uint64_t bias) {
    c.full.at(s, op::mul) += rows * out * in;
    c.full.at(s, op::add) += rows * out * (in - 1 + bias);
    c.macs[std::size_t(s)] += rows * out * in;
}

/// The attention core's stages on its problem a: P visible pairs, Z rows seeing any key, per
/// (batch, head).
inline void count_attention(flop_counts& c, const problem& a) {
    auto& f = c.full;
    const std::uint64_t dqk = a.qk_dim(), dv = a.v_dim();
    const std::uint64_t heads = std::uint64_t(a.batch) * a.heads, P = a.visible_pairs(), Z = a.rows_with_keys();
    f.at(stage::qk, op::mul) = heads * P * dqk;
    f.at(stage::qk, op::add) = heads * P * (dqk - 1);
    c.macs[std::size_t(stage::qk)] = heads * P * dqk;
    f.at(stage::scale, op::mul) = heads * P;
    f.at(stage::softmax_max, op::cmp) = heads * (P - Z);
    f.at(stage::softmax_exp, op::add) = heads * P; // the subtraction of the row maximum
    f.at(stage::softmax_exp, op::exp) = heads * P;
    f.at(stage::softmax_sum, op::add) = heads * (P - Z);
    f.at(stage::softmax_div, op::div) = heads * P;
    f.at(stage::pv, op::mul) = heads * P * dv;
    f.at(stage::pv, op::add) = heads * (P - Z) * dv;
    c.macs[std::size_t(stage::pv)] = heads * P * dv;
}

/// RMSNorm of `rows` rows of n (attn.families:mla's order): n squares and n-1 adds, the mean (a
/// divide), + eps, a sqrt and its reciprocal, then x * (1/r) * w: 3n mul, n add, 2 div, 1 sqrt.
inline void count_rmsnorm(flop_counts& c, stage s, std::uint64_t rows, std::uint64_t n) {
    c.full.at(s, op::mul) += rows * 3 * n;
    c.full.at(s, op::add) += rows * n;
    c.full.at(s, op::div) += rows * 2;
    c.full.at(s, op::sqrt) += rows;
}

/// MLA (attn.core:latent; attn.families:mla computes it in this order).
inline flop_counts analytic_latent(const problem& p) {
    flop_counts c;
    const std::uint64_t B = p.batch, d = p.d_model, H = p.heads, C = p.latent.kv_rank, Cq = p.latent.q_rank,
                        Dr = p.latent.rope, Dn = p.nope_dim(), Dv = p.v_dim();
    const std::uint64_t rq = B * p.n_q, rkv = B * p.n_kv;
    if (Cq) {
        count_linear(c, stage::q_down, rq, d, Cq, 0);
        count_rmsnorm(c, stage::q_norm, rq, Cq);
        count_linear(c, stage::proj_q, rq, Cq, H * (Dn + Dr), 0);
    } else {
        count_linear(c, stage::proj_q, rq, d, H * (Dn + Dr), 0);
    }
    count_linear(c, stage::kv_down, rkv, d, C + Dr, 0);
    count_rmsnorm(c, stage::kv_norm, rkv, C);
    // each rotated pair (a, b) -> (a cos - b sin, a sin + b cos): 4 mul, 2 add; every query head's
    // rope part and the one shared key's
    const std::uint64_t pairs = (rq * H + rkv) * (Dr / 2);
    c.full.at(stage::rope, op::mul) = 4 * pairs;
    c.full.at(stage::rope, op::add) = 2 * pairs;
    if (p.form == form::absorb) {
        count_linear(c, stage::absorb_q, rq * H, Dn, C, 0); // q_nope_h W^UK_h per head and row
        count_linear(c, stage::absorb_o, rq * H, C, Dv, 0); // ctx_h W^UV_h^T per head and row
    } else {
        count_linear(c, stage::kv_up, rkv, C, H * (Dn + Dv), 0);
    }
    count_attention(c, core_problem(p));
    count_linear(c, stage::proj_o, rq, H * Dv, d, 0);
    return c;
}

} // namespace detail

/// The analytic count: closed-form per stage, causal rows discounted exactly through
/// problem::visible. P = visible pairs, Z = rows seeing any key, per (batch, head). MLA's layer
/// has stages of its own (detail::analytic_latent).
inline flop_counts analytic_flops(const problem& p) {
    p.validate();
    if (p.latent_family()) return detail::analytic_latent(p);
    flop_counts c;
    const std::uint64_t B = p.batch, d = p.d_model;
    const std::uint64_t qw = p.q_width(), kw = p.k_width(), vw = p.v_width(), ow = p.o_width();
    const std::uint64_t rq = B * p.n_q, rkv = B * p.n_kv, bias = p.bias ? 1 : 0;
    detail::count_linear(c, stage::proj_q, rq, d, qw, bias);
    detail::count_linear(c, stage::proj_k, rkv, d, kw, bias);
    detail::count_linear(c, stage::proj_v, rkv, d, vw, bias);
    detail::count_linear(c, stage::proj_o, rq, ow, d, bias);
    detail::count_attention(c, p);
    return c;
}

/// Parameters by tensor, in closed form from the problem's sizes: the q/k/v family's four
/// matrices and biases, MLA's down- and up-projections (wq when it has no query latent) and its
/// two RMSNorm weight vectors, listed apart.
struct param_counts {
    std::uint64_t wq = 0, wk = 0, wv = 0, wo = 0, bq = 0, bk = 0, bv = 0, bo = 0;
    std::uint64_t wq_a = 0, wq_b = 0, wkv_a = 0, wkv_b = 0, q_norm = 0, kv_norm = 0; ///< MLA
    std::uint64_t weights() const { return wq + wk + wv + wo + wq_a + wq_b + wkv_a + wkv_b; }
    std::uint64_t biases() const { return bq + bk + bv + bo; }
    std::uint64_t norms() const { return q_norm + kv_norm; }
    std::uint64_t total() const { return weights() + biases() + norms(); }
};

inline param_counts analytic_params(const problem& p) {
    p.validate();
    const std::uint64_t d = p.d_model, qw = p.q_width(), kw = p.k_width(), vw = p.v_width(), ow = p.o_width();
    param_counts c;
    if (p.latent_family()) {
        const std::uint64_t H = p.heads, C = p.latent.kv_rank, Cq = p.latent.q_rank, Dr = p.latent.rope,
                            Dn = p.nope_dim(), Dv = p.v_dim();
        if (Cq) {
            c.wq_a = Cq * d;
            c.q_norm = Cq;
            c.wq_b = H * (Dn + Dr) * Cq;
        } else {
            c.wq = H * (Dn + Dr) * d;
        }
        c.wkv_a = (C + Dr) * d;
        c.kv_norm = C;
        c.wkv_b = H * (Dn + Dv) * C;
        c.wo = d * H * Dv;
        return c;
    }
    c.wq = qw * d;
    c.wk = kw * d;
    c.wv = vw * d;
    c.wo = d * ow;
    if (p.bias) {
        c.bq = qw;
        c.bk = kw;
        c.bv = vw;
        c.bo = d;
    }
    return c;
}

/// Which FLOP convention a comparison uses.
enum class convention { matmul, full };

inline constexpr std::string_view convention_name(convention c) {
    return c == convention::matmul ? "matmul-only (2 FLOPs per multiply-add)" : "full (every add, mul, div, exp, cmp)";
}

/// The self-attention length N (N_q = N_kv = N) at which the attention stages' FLOPs overtake
/// the projections'. Projections grow like N, attention like N^2, so there is one crossover;
/// under a sliding window W attention grows like N W past N = W, and there is none when each
/// token's W scored keys cost less than its projections.
struct crossover {
    double closed_form = 0;    ///< real root of attention(N) = projections(N), from the formula; inf: none
    std::uint64_t first_n = 0; ///< smallest integer N with attention(N) > projections(N), by search; 0: none
    bool never() const { return first_n == 0; }
};

namespace detail {
/// The root of H (a2 P(N) - a1 N) = C N for a causal self-attention with window W (0: none).
/// Up to N = W, P = N(N+1)/2: N* = 2 (C/H + a1) / a2 - 1. Past it P = W(W+1)/2 + (N - W) W, so
/// N (a2 W - a1 - C/H) = a2 W (W - 1) / 2: N* = a2 W (W-1) / 2 / (a2 W - a1 - C/H), none (inf)
/// unless a2 W > a1 + C/H (the attention per token then never reaches the projections').
inline double causal_root(double a2, double a1, double C_per_head, std::size_t window) {
    const double n = 2 * (C_per_head + a1) / a2 - 1;
    const double W = double(window);
    if (window == 0 || n <= W) return n;
    const double slope = a2 * W - a1 - C_per_head;
    return slope > 0 ? a2 * W * (W - 1) / 2 / slope : std::numeric_limits<double>::infinity();
}
} // namespace detail

/// Closed form. Per token, projections cost C (independent of N); per sequence, the attention
/// stages cost H*(a2*P - a1*Z) with P visible pairs and Z rows that see a key:
///   full:   a2 = 2 (d_qk + d_v) + 5, a1 = d_v + 2 (qk 2d_qk-1, scale 1, max/sum -1 per row,
///           exp+subtract 2, div 1, pv 2d_v per pair with -d_v per row);
///           C = (qw + kw + vw)(2 d - 1 + b) + d (2 ow - 1 + b);
///   matmul: a2 = 2 (d_qk + d_v), a1 = 0, C = 2 d (qw + kw + vw + ow)
/// (qw, kw, vw: the query, key and value widths H d_qk, G d_qk, G d_v; ow = H d_v).
/// Non-causal P = N^2, Z = N:  N* = (C/H + a1) / a2.
/// Causal P = N(N+1)/2, Z = N: N* = 2 (C/H + a1) / a2 - 1; with a window, detail::causal_root.
/// For MHA without bias under matmul-only this is N* = 2 d_model (non-causal).
inline double crossover_closed_form(const problem& p, convention c) {
    if (p.latent_family()) { // per-token stages from the count of one token, the pair terms of the core's problem
        problem one = p;
        one.batch = one.n_q = one.n_kv = 1;
        one.causal = false;
        one.window = 0;
        const flop_counts f = analytic_flops(one);
        const problem a = core_problem(p);
        const double H = double(a.heads), dqk = double(a.qk_dim()), dv = double(a.v_dim());
        const bool full = c == convention::full;
        const double a2 = 2 * (dqk + dv) + (full ? 5 : 0), a1 = full ? dv + 2 : 0;
        const double C = double(full ? f.projection_full() : f.projection_matmul());
        return p.causal ? detail::causal_root(a2, a1, C / H, p.window) : (C / H + a1) / a2;
    }
    const double d = double(p.d_model), H = double(p.heads), dqk = double(p.qk_dim()), dv = double(p.v_dim());
    const double qw = double(p.q_width()), kw = double(p.k_width()), vw = double(p.v_width()), ow = double(p.o_width()),
                 b = p.bias ? 1.0 : 0.0;
    double a2, a1, C;
    if (c == convention::full) {
        a2 = 2 * (dqk + dv) + 5;
        a1 = dv + 2;
        C = (qw + kw + vw) * (2 * d - 1 + b) + d * (2 * ow - 1 + b);
    } else {
        a2 = 2 * (dqk + dv);
        a1 = 0;
        C = 2 * d * (qw + kw + vw + ow);
    }
    return p.causal ? detail::causal_root(a2, a1, C / H, p.window) : (C / H + a1) / a2;
}

/// Searches the analytic counts (not the closed form) for the first N where attention wins.
inline std::uint64_t crossover_search(problem p, convention c) {
    p.batch = 1;
    auto margin = [&](std::uint64_t n) { // attention minus projections at N = n
        p.n_q = p.n_kv = n;
        const auto f = analytic_flops(p);
        return c == convention::full ? double(f.attention_full()) - double(f.projection_full())
                                     : double(f.attention_matmul()) - double(f.projection_matmul());
    };
    auto attention_wins = [&](std::uint64_t n) { return margin(n) > 0; };
    std::uint64_t hi = 1;
    while (!attention_wins(hi)) {
        // under a window, past N = W every token adds the same margin: when attention has not
        // won by twice the window and a token adds none, it never does (0: none)
        if (p.window && hi > 2 * p.window && margin(2 * p.window + 2) <= margin(2 * p.window + 1)) return 0;
        require(hi < (std::uint64_t(1) << 40), "no crossover below N=2^40 for " + p.describe());
        hi *= 2;
    }
    std::uint64_t lo = hi / 2; // attention does not win at lo (or lo == 0)
    while (hi - lo > 1) {
        const std::uint64_t mid = lo + (hi - lo) / 2;
        (attention_wins(mid) ? hi : lo) = mid;
    }
    return hi;
}

inline crossover attention_crossover(const problem& p, convention c) {
    p.validate();
    crossover x;
    x.closed_form = crossover_closed_form(p, c);
    x.first_n = crossover_search(p, c);
    return x;
}

} // namespace attn
