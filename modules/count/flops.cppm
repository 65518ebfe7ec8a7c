// attn.count:flops -- operations by stage and kind under the three conventions, parameters by
// tensor and the crossover length, in closed form (see attn.count). The measured count, the
// reference on counting scalars, is attn.check's: these formulas import the problem types alone.
module;
#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>
export module attn.count:flops;
import attn.core;

export namespace attn {

/// The projection stages (Q, K, V, output) as opposed to the attention stages (QK^T .. P V).
inline constexpr bool is_projection(stage s) {
    return s == stage::proj_q || s == stage::proj_k || s == stage::proj_v || s == stage::proj_o;
}

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

/// The analytic count: closed-form per stage, causal rows discounted exactly through
/// problem::visible. P = visible pairs, Z = rows seeing any key, per (batch, head).
inline flop_counts analytic_flops(const problem& p) {
    p.validate();
    flop_counts c;
    auto& f = c.full;
    const std::uint64_t B = p.batch, d = p.d_model, dqk = p.qk_dim(), dv = p.v_dim();
    const std::uint64_t qw = p.q_width(), kw = p.k_width(), vw = p.v_width(), ow = p.o_width();
    const std::uint64_t rq = B * p.n_q, rkv = B * p.n_kv, bias = p.bias ? 1 : 0;
    // y = x W^T + b: each output is 1 multiply, in-1 multiply-adds, and one add for the bias.
    auto linear = [&](stage s, std::uint64_t rows, std::uint64_t in, std::uint64_t out) {
        f.at(s, op::mul) = rows * out * in;
        f.at(s, op::add) = rows * out * (in - 1 + bias);
        c.macs[std::size_t(s)] = rows * out * in;
    };
    linear(stage::proj_q, rq, d, qw);
    linear(stage::proj_k, rkv, d, kw);
    linear(stage::proj_v, rkv, d, vw);
    linear(stage::proj_o, rq, ow, d);
    const std::uint64_t heads = B * p.heads, P = p.visible_pairs(), Z = p.rows_with_keys();
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
    return c;
}

/// Parameters by tensor, in closed form from the problem's sizes.
struct param_counts {
    std::uint64_t wq = 0, wk = 0, wv = 0, wo = 0, bq = 0, bk = 0, bv = 0, bo = 0;
    std::uint64_t weights() const { return wq + wk + wv + wo; }
    std::uint64_t biases() const { return bq + bk + bv + bo; }
    std::uint64_t total() const { return weights() + biases(); }
};

inline param_counts analytic_params(const problem& p) {
    p.validate();
    const std::uint64_t d = p.d_model, qw = p.q_width(), kw = p.k_width(), vw = p.v_width(), ow = p.o_width();
    param_counts c;
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
/// the projections'. Projections grow like N, attention like N^2, so there is one crossover.
struct crossover {
    double closed_form = 0;    ///< real root of attention(N) = projections(N), from the formula
    std::uint64_t first_n = 0; ///< smallest integer N with attention(N) > projections(N), by search
};

/// Closed form. Per token, projections cost C (independent of N); per sequence, the attention
/// stages cost H*(a2*P - a1*Z) with P visible pairs and Z rows that see a key:
///   full:   a2 = 2 (d_qk + d_v) + 5, a1 = d_v + 2 (qk 2d_qk-1, scale 1, max/sum -1 per row,
///           exp+subtract 2, div 1, pv 2d_v per pair with -d_v per row);
///           C = (qw + kw + vw)(2 d - 1 + b) + d (2 ow - 1 + b);
///   matmul: a2 = 2 (d_qk + d_v), a1 = 0, C = 2 d (qw + kw + vw + ow)
/// (qw, kw, vw: the query, key and value widths H d_qk, G d_qk, G d_v; ow = H d_v).
/// Non-causal P = N^2, Z = N:  N* = (C/H + a1) / a2.
/// Causal P = N(N+1)/2, Z = N: N* = 2 (C/H + a1) / a2 - 1.
/// For MHA without bias under matmul-only this is N* = 2 d_model (non-causal).
inline double crossover_closed_form(const problem& p, convention c) {
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
    return p.causal ? 2 * (C / H + a1) / a2 - 1 : (C / H + a1) / a2;
}

/// Searches the analytic counts (not the closed form) for the first N where attention wins.
inline std::uint64_t crossover_search(problem p, convention c) {
    p.batch = 1;
    auto attention_wins = [&](std::uint64_t n) {
        p.n_q = p.n_kv = n;
        const auto f = analytic_flops(p);
        return c == convention::full ? f.attention_full() > f.projection_full()
                                     : f.attention_matmul() > f.projection_matmul();
    };
    std::uint64_t hi = 1;
    while (!attention_wins(hi)) {
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
