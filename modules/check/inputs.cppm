// attn.check:inputs -- what a check runs on (attn::mode core or layer), the inputs drawn from a
// seed, the same inputs rounded to a storage format, and the tail of a problem (its last query
// rows, which see the same keys as in the whole problem).
module;
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>
export module attn.check:inputs;
import attn.core;
import attn.families;

export namespace attn::check {

/// The inputs of one check, drawn in float from a seed (so float and double runs see the same
/// numbers). Core mode (p the core's problem): q [B, n_q, H*d_qk], k [B, n_kv, G*d_qk] and v
/// [B, n_kv, G*d_v] (the layout a projection writes). Layer mode: x_q, x_kv and the family's weights.
struct inputs {
    std::vector<float> q, k, v, x_q, x_kv;
    weights<float> w;
};

inline inputs make_inputs(const problem& p, mode m, std::uint64_t seed, double magnitude = 1.0) {
    inputs in;
    if (m == mode::core) {
        in.q = random_values<float>(p.batch * p.n_q * p.q_width(), seed * 16 + 1, magnitude);
        in.k = random_values<float>(p.batch * p.n_kv * p.k_width(), seed * 16 + 2, magnitude);
        in.v = random_values<float>(p.batch * p.n_kv * p.v_width(), seed * 16 + 3, 1.0);
    } else {
        in.x_q = random_values<float>(p.batch * p.n_q * p.d_model, seed * 16 + 4, magnitude);
        in.x_kv = random_values<float>(p.batch * p.n_kv * p.d_model, seed * 16 + 5, magnitude);
        in.w = random_weights<float>(p, seed);
    }
    return in;
}

/// `in` with every value rounded to T (to nearest even) and held in float: the inputs and
/// weights of a T run, and of its reference.
template <class T>
inputs rounded(const inputs& in) {
    auto r = [](std::vector<float> v) {
        for (auto& x : v) x = float(T(x));
        return v;
    };
    inputs out{r(in.q), r(in.k), r(in.v), r(in.x_q), r(in.x_kv), {}};
    for (const auto& t : in.w.t) out.w.t.push_back(r(t));
    return out;
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

} // namespace attn::check
