// attn.count:flops -- operations by stage and kind under the three conventions, parameters by
// tensor, the crossover length, and the counting scalar (see attn.count).
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
import attn.cases;
import attn.reference;

export namespace attn {

/// The kinds of scalar operation the reference performs. A subtraction is counted as an add.
enum class op : int { add, mul, div, exp, cmp, count_ };

inline constexpr std::size_t n_stages = static_cast<std::size_t>(stage::count_);
inline constexpr std::size_t n_ops = static_cast<std::size_t>(op::count_);

inline constexpr std::string_view op_name(op o) {
    constexpr std::string_view names[] = {"add", "mul", "div", "exp", "cmp"};
    return names[static_cast<int>(o)];
}

/// Operation counts by stage and kind; every operation is one FLOP in the full count.
struct flop_table {
    std::array<std::array<std::uint64_t, n_ops>, n_stages> n{};

    std::uint64_t& at(stage s, op o) { return n[std::size_t(s)][std::size_t(o)]; }
    std::uint64_t at(stage s, op o) const { return n[std::size_t(s)][std::size_t(o)]; }
    std::uint64_t stage_total(stage s) const {
        std::uint64_t t = 0;
        for (auto v : n[std::size_t(s)]) t += v;
        return t;
    }
    std::uint64_t op_total(op o) const {
        std::uint64_t t = 0;
        for (const auto& row : n) t += row[std::size_t(o)];
        return t;
    }
    std::uint64_t total() const {
        std::uint64_t t = 0;
        for (std::size_t s = 0; s < n_stages; ++s) t += stage_total(stage(s));
        return t;
    }
    bool operator==(const flop_table&) const = default;
};

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
    const std::uint64_t B = p.batch, d = p.d_model, dh = p.head_dim(), qw = p.q_width(), kw = p.kv_width();
    const std::uint64_t rq = B * p.n_q, rkv = B * p.n_kv, bias = p.bias ? 1 : 0;
    // y = x W^T + b: each output is 1 multiply, in-1 multiply-adds, and one add for the bias.
    auto linear = [&](stage s, std::uint64_t rows, std::uint64_t in, std::uint64_t out) {
        f.at(s, op::mul) = rows * out * in;
        f.at(s, op::add) = rows * out * (in - 1 + bias);
        c.macs[std::size_t(s)] = rows * out * in;
    };
    linear(stage::proj_q, rq, d, qw);
    linear(stage::proj_k, rkv, d, kw);
    linear(stage::proj_v, rkv, d, kw);
    linear(stage::proj_o, rq, qw, d);
    const std::uint64_t heads = B * p.heads, P = p.visible_pairs(), Z = p.rows_with_keys();
    f.at(stage::qk, op::mul) = heads * P * dh;
    f.at(stage::qk, op::add) = heads * P * (dh - 1);
    c.macs[std::size_t(stage::qk)] = heads * P * dh;
    f.at(stage::scale, op::mul) = heads * P;
    f.at(stage::softmax_max, op::cmp) = heads * (P - Z);
    f.at(stage::softmax_exp, op::add) = heads * P; // the subtraction of the row maximum
    f.at(stage::softmax_exp, op::exp) = heads * P;
    f.at(stage::softmax_sum, op::add) = heads * (P - Z);
    f.at(stage::softmax_div, op::div) = heads * P;
    f.at(stage::pv, op::mul) = heads * P * dh;
    f.at(stage::pv, op::add) = heads * (P - Z) * dh;
    c.macs[std::size_t(stage::pv)] = heads * P * dh;
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
    const std::uint64_t d = p.d_model, H = p.heads, G = p.kv_heads, dh = p.head_dim();
    param_counts c;
    c.wq = H * dh * d;
    c.wk = G * dh * d;
    c.wv = G * dh * d;
    c.wo = d * H * dh;
    if (p.bias) {
        c.bq = H * dh;
        c.bk = G * dh;
        c.bv = G * dh;
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
///   full:   a2 = 4 d_head + 5, a1 = d_head + 2 (qk 2dh-1, scale 1, max/sum -1 per row,
///           exp+subtract 2, div 1, pv 2dh per pair with -dh per row);
///           C = (qw + 2 kw)(2 d - 1 + b) + d (2 qw - 1 + b);
///   matmul: a2 = 4 d_head, a1 = 0, C = 4 d (qw + kw).
/// Non-causal P = N^2, Z = N:  N* = (C/H + a1) / a2.
/// Causal P = N(N+1)/2, Z = N: N* = 2 (C/H + a1) / a2 - 1.
/// For MHA without bias under matmul-only this is N* = 2 d_model (non-causal).
inline double crossover_closed_form(const problem& p, convention c) {
    const double d = double(p.d_model), H = double(p.heads), dh = double(p.head_dim()), qw = double(p.q_width()),
                 kw = double(p.kv_width()), b = p.bias ? 1.0 : 0.0;
    double a2, a1, C;
    if (c == convention::full) {
        a2 = 4 * dh + 5;
        a1 = dh + 2;
        C = (qw + 2 * kw) * (2 * d - 1 + b) + d * (2 * qw - 1 + b);
    } else {
        a2 = 4 * dh;
        a1 = 0;
        C = 4 * d * (qw + kw);
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

namespace detail {
inline thread_local flop_table* tally = nullptr;
inline thread_local stage current = stage::proj_q;
inline void tick(op o) {
    if (tally) ++tally->at(current, o);
}
} // namespace detail

/// A double that counts every arithmetic operation into the active tally, by the stage the
/// reference last announced. Construction and copies are free; subtraction counts as an add.
struct counted {
    double v = 0;
    counted() = default;
    counted(double x) : v(x) {}

    friend counted operator+(counted a, counted b) {
        detail::tick(op::add);
        return a.v + b.v;
    }
    friend counted operator-(counted a, counted b) {
        detail::tick(op::add);
        return a.v - b.v;
    }
    friend counted operator*(counted a, counted b) {
        detail::tick(op::mul);
        return a.v * b.v;
    }
    friend counted operator/(counted a, counted b) {
        detail::tick(op::div);
        return a.v / b.v;
    }
    friend bool operator<(counted a, counted b) {
        detail::tick(op::cmp);
        return a.v < b.v;
    }
    friend counted exp(counted a) {
        detail::tick(op::exp);
        return std::exp(a.v);
    }
};

/// While alive, counted arithmetic on this thread goes into `t`.
class counting_scope {
  public:
    explicit counting_scope(flop_table& t) : previous_(detail::tally) {
        detail::tally = &t;
        detail::current = stage::proj_q;
    }
    ~counting_scope() { detail::tally = previous_; }
    counting_scope(const counting_scope&) = delete;
    counting_scope& operator=(const counting_scope&) = delete;

  private:
    flop_table* previous_;
};

/// The measured count: reference::layer run on counted scalars (random inputs and weights).
flop_table measured_flops(const problem& p, std::uint64_t seed = 1);

/// The default grid the analytic count is held to, as grids of the one case type (layer mode,
/// shapes alone): every family, causal and not, N_q = N_kv, N_q < N_kv and N_q > N_kv, with and
/// without bias, batch 1 and 2, odd sizes.
std::vector<grid> flop_check_grids();
/// flop_check_grids() expanded: 160 problems.
std::vector<problem> flop_check_grid();

} // namespace attn

namespace attn::reference {
/// The counting scalar's hook: the reference announces each stage, the tally follows it.
template <>
struct stage_hook<counted> {
    static void enter(stage s) noexcept { detail::current = s; }
};
} // namespace attn::reference

namespace attn {

flop_table measured_flops(const problem& p, std::uint64_t seed) {
    p.validate();
    const auto w = random_weights<counted>(p, seed);
    const auto xq = random_values<counted>(p.batch * p.n_q * p.d_model, seed * 8 + 100);
    const auto xkv = random_values<counted>(p.batch * p.n_kv * p.d_model, seed * 8 + 101);
    std::vector<counted> y(p.batch * p.n_q * p.d_model);
    flop_table t;
    {
        counting_scope scope(t);
        reference::layer<counted>(p, w, xq.data(), xkv.data(), y.data());
    }
    return t;
}

std::vector<grid> flop_check_grids() {
    struct family {
        const char* name;
        std::size_t d_model, heads, kv_heads, d_head;
    };
    const family families[] = {{"single head, odd width", 5, 1, 1, 0},
                               {"MHA, d_head 2", 6, 3, 3, 0},
                               {"MQA, odd d_head 3", 9, 3, 1, 0},
                               {"GQA:2", 8, 4, 2, 0},
                               {"wide: each head as wide as the model", 3, 2, 2, 3}};
    const std::size_t lengths[][2] = {{1, 1}, {5, 5}, {3, 7}, {7, 3}}; // (N_q, N_kv)
    std::vector<grid> grids;
    for (const auto& f : families)
        for (const auto& n : lengths) {
            grid g;
            g.name = std::string(f.name) + ", N_q " + std::to_string(n[0]) + " N_kv " + std::to_string(n[1]);
            g.variants = {};
            g.modes = {"layer"};
            g.threads = {1};
            g.d_model = {f.d_model};
            g.heads = {f.heads};
            g.kv_heads = {f.kv_heads};
            g.d_head = {f.d_head};
            g.seq = {n[0]};
            g.kv_seq = {n[1]};
            g.batch = {1, 2};
            g.causal = {false, true};
            g.bias = {false, true};
            grids.push_back(std::move(g));
        }
    return grids;
}

std::vector<problem> flop_check_grid() {
    std::vector<problem> out;
    for (const auto& c : expand(flop_check_grids(), 1)) out.push_back(c.shape());
    return out;
}

} // namespace attn
