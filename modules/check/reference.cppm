// attn.reference -- attention straight from the formulas, in plain loops, templated on the
// scalar. In double it is the oracle every variant is checked against; in float it is the
// `naive` variant; with attn.count's counting scalar it tallies every operation by stage.
//
// The order of operations is part of the contract: attn.count's analytic FLOP formulas count
// exactly these operations, and a test holds the two equal.
//  - a dot product of length n is one multiply, then n-1 multiply-adds: 2n-1 operations;
//  - scores are computed only for visible (query, key) pairs (the causal mask, and a sliding
//    window's keys_begin .. keys_end); masked pairs cost nothing;
//  - softmax per row of n visible scores: n-1 compares (max), n subtracts and n exps,
//    n-1 adds (sum), n divides;
//  - a query row that sees no key (causal, n_q > n_kv) yields zeros and costs nothing.
// A family's layer (attn.families) composes these with its own stages; run on attn::counted
// scalars, every operation is tallied under the stage last announced through stage_hook.
module;
#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <vector>
export module attn.reference;
import attn.core;

export namespace attn::reference {

/// Called as the reference enters each stage; a no-op except for a counting scalar.
template <class T>
struct stage_hook {
    static void enter(stage) noexcept {}
};

/// The counting scalar's hook: the reference announces each stage, the tally follows it.
template <>
struct stage_hook<counted> {
    static void enter(stage s) noexcept { detail::current = s; }
};

/// Optional capture of one head's intermediates (row-major n_q x n_kv), for teaching output.
template <class T>
struct trace {
    std::vector<std::vector<T>> scores, scaled, probs; ///< one per (batch, head), in that order
};

/// Announces the stage the next operations belong to (a no-op but for a counting scalar). The
/// core announces its own stages; a family's layer announces its projections and its own stages.
template <class T>
void announce(stage s) {
    stage_hook<T>::enter(s);
}

template <class T>
void linear(const linear_io<T>& io) {
    for (std::size_t r = 0; r < io.rows; ++r) {
        const T* x = io.x + r * io.in;
        for (std::size_t o = 0; o < io.out; ++o) {
            const T* w = io.w + o * io.in;
            T acc = x[0] * w[0];
            for (std::size_t k = 1; k < io.in; ++k) acc = acc + x[k] * w[k];
            if (io.b) acc = acc + io.b[o];
            io.y[r * io.out + o] = acc;
        }
    }
}

/// Query heads core() takes together: a whole group of heads sharing a key/value head (so its key
/// and value rows are read once for all of them: a decode step's H/G heads), while the group's
/// score rows stay within 2^22 scalars or one head's; one head at a time with a trace.
inline std::size_t heads_together(const problem& p) {
    const std::size_t gs = p.heads / p.kv_heads, one = p.n_q * p.n_kv;
    return gs * one <= std::max<std::size_t>(one, std::size_t(1) << 22) ? gs : 1;
}

/// Extra memory core() allocates: the score rows of the heads it takes together (heads_together),
/// plus a row maximum and sum per query row.
inline std::size_t core_scratch_bytes(const problem& p, std::size_t scalar_bytes) {
    const std::size_t hb = heads_together(p);
    return hb * (p.n_q * p.n_kv + 2 * p.n_q) * scalar_bytes;
}

template <class T>
void core(const problem& p, const core_io<T>& io, trace<T>* tr = nullptr) {
    using std::exp;
    using hook = stage_hook<T>;
    const std::size_t nq = p.n_q, nkv = p.n_kv, dqk = p.qk_dim(), dv = p.v_dim();
    const T scale = T(p.softmax_scale());
    // rows r = (head h0 + r / nq, query i = r % nq) of hb heads sharing one key/value head
    const std::size_t hb = tr ? 1 : heads_together(p), nr = hb * nq;
    std::vector<T> s(nr * nkv, T(0)), row_max(nr, T(0)), row_sum(nr, T(0));
    auto begin = [&](std::size_t r) { return p.keys_begin(r % nq); };
    auto end = [&](std::size_t r) { return p.keys_end(r % nq); };
    constexpr std::size_t row_block = 8; // rows whose sums run together (independent chains)
    std::array<T, row_block> dot{};
    std::array<const T*, row_block> q{};
    std::array<T*, row_block> o{};
    // A block of rows against one key (or value) row at a time (for_each_key_of_rows): each sum is
    // still taken in order (a dot product over the key dimension; an output element over the
    // keys), but the block's sums are independent chains, and a key or value row is read once a
    // block, not once a row (row by row, a dot was one chain of dependent adds, and P V walked one
    // value column down the keys, a cache line and a page per key).
    auto each_block = [&](auto&& body) {
        for (std::size_t r0 = 0; r0 < nr; r0 += row_block)
            for_each_key_of_rows<row_block>(p, r0, std::min(nr, r0 + row_block), body);
    };
    for (std::size_t b = 0; b < p.batch; ++b) {
        for (std::size_t h0 = 0; h0 < p.heads; h0 += hb) {
            const std::size_t g = p.kv_head_of(h0);
            hook::enter(stage::qk); // S = Q K^T over visible pairs
            each_block([&](std::size_t j, const auto& rows, std::size_t n) {
                const T* k = io.k.row(b, g, j);
                for (std::size_t r = 0; r < n; ++r) q[r] = io.q.row(b, h0 + rows[r] / nq, rows[r] % nq);
                for (std::size_t r = 0; r < n; ++r) dot[r] = q[r][0] * k[0];
                for (std::size_t t = 1; t < dqk; ++t)
                    for (std::size_t r = 0; r < n; ++r) dot[r] = dot[r] + q[r][t] * k[t];
                for (std::size_t r = 0; r < n; ++r) s[rows[r] * nkv + j] = dot[r];
            });
            if (tr) tr->scores.push_back(s);
            hook::enter(stage::scale);
            for (std::size_t r = 0; r < nr; ++r)
                for (std::size_t j = begin(r); j < end(r); ++j) s[r * nkv + j] = s[r * nkv + j] * scale;
            if (tr) tr->scaled.push_back(s);
            hook::enter(stage::mask); // nothing to compute: masked pairs were never scored
            hook::enter(stage::softmax_max);
            for (std::size_t r = 0; r < nr; ++r) {
                if (begin(r) == end(r)) continue;
                T m = s[r * nkv + begin(r)];
                for (std::size_t j = begin(r) + 1; j < end(r); ++j)
                    if (m < s[r * nkv + j]) m = s[r * nkv + j];
                row_max[r] = m;
            }
            hook::enter(stage::softmax_exp);
            for (std::size_t r = 0; r < nr; ++r)
                for (std::size_t j = begin(r); j < end(r); ++j) s[r * nkv + j] = exp(s[r * nkv + j] - row_max[r]);
            hook::enter(stage::softmax_sum);
            for (std::size_t r = 0; r < nr; ++r) {
                if (begin(r) == end(r)) continue;
                T sum = s[r * nkv + begin(r)];
                for (std::size_t j = begin(r) + 1; j < end(r); ++j) sum = sum + s[r * nkv + j];
                row_sum[r] = sum;
            }
            hook::enter(stage::softmax_div);
            for (std::size_t r = 0; r < nr; ++r)
                for (std::size_t j = begin(r); j < end(r); ++j) s[r * nkv + j] = s[r * nkv + j] / row_sum[r];
            if (tr) tr->probs.push_back(s);
            hook::enter(stage::pv); // O = P V: a row's first visible key is a product, then multiply-adds
            for (std::size_t r = 0; r < nr; ++r)
                if (begin(r) == end(r)) { // a row that sees no key yields zeros
                    T* out = io.out.row(b, h0 + r / nq, r % nq);
                    for (std::size_t t = 0; t < dv; ++t) out[t] = T(0);
                }
            each_block([&](std::size_t j, const auto& rows, std::size_t n) {
                const T* v = io.v.row(b, g, j);
                for (std::size_t r = 0; r < n; ++r) o[r] = io.out.row(b, h0 + rows[r] / nq, rows[r] % nq);
                for (std::size_t r = 0; r < n; ++r) {
                    const T w = s[rows[r] * nkv + j];
                    if (j == begin(rows[r]))
                        for (std::size_t t = 0; t < dv; ++t) o[r][t] = w * v[t];
                    else
                        for (std::size_t t = 0; t < dv; ++t) o[r][t] = o[r][t] + w * v[t];
                }
            });
        }
    }
}

/// The reference's kernels as a variant's kernel set: the `naive` variant in float, the oracle's
/// in double, the measured count's on attn::counted (a family's layer composes them).
template <class T>
kernel_set<T> kernels() {
    return {[](const problem& p, const core_io<T>& io, const run_options&) { core<T>(p, io); },
            [](const linear_io<T>& io, const run_options&) { linear<T>(io); }};
}

} // namespace attn::reference
