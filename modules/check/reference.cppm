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

/// Extra memory core() allocates: one head's full score matrix plus a row maximum per query.
inline std::size_t core_scratch_bytes(const problem& p, std::size_t scalar_bytes) {
    return (p.n_q * p.n_kv + 2 * p.n_q) * scalar_bytes;
}

template <class T>
void core(const problem& p, const core_io<T>& io, trace<T>* tr = nullptr) {
    using std::exp;
    using hook = stage_hook<T>;
    const std::size_t nq = p.n_q, nkv = p.n_kv, dqk = p.qk_dim(), dv = p.v_dim();
    const T scale = T(p.softmax_scale());
    std::vector<T> s(nq * nkv, T(0)), row_max(nq, T(0)), row_sum(nq, T(0));
    constexpr std::size_t row_block = 8; // query rows scored together (independent sums)
    std::array<T, row_block> dot{};
    std::array<const T*, row_block> q{};
    std::array<std::size_t, row_block> rows{};
    for (std::size_t b = 0; b < p.batch; ++b) {
        for (std::size_t h = 0; h < p.heads; ++h) {
            const std::size_t g = p.kv_head_of(h);
            hook::enter(stage::qk); // S = Q K^T over visible pairs
            // A block of query rows against one key row at a time: each dot product is still
            // summed in order of the key dimension, but the block's sums are independent chains
            // and the key row is read once a block (row by row, a dot was one chain of dependent
            // adds and every key row came from memory once per query row).
            for (std::size_t i0 = 0; i0 < nq; i0 += row_block) {
                const std::size_t i1 = std::min(nq, i0 + row_block);
                std::size_t j_lo = nkv, j_hi = 0;
                for (std::size_t i = i0; i < i1; ++i)
                    if (p.visible(i) > 0) {
                        j_lo = std::min(j_lo, p.keys_begin(i));
                        j_hi = std::max(j_hi, p.keys_end(i));
                    }
                for (std::size_t j = j_lo; j < j_hi; ++j) {
                    const T* k = io.k.row(b, g, j);
                    std::size_t n = 0; // the block's rows that see key j
                    for (std::size_t i = i0; i < i1; ++i)
                        if (p.keys_begin(i) <= j && j < p.keys_end(i)) {
                            rows[n] = i;
                            q[n++] = io.q.row(b, h, i);
                        }
                    for (std::size_t r = 0; r < n; ++r) dot[r] = q[r][0] * k[0];
                    for (std::size_t t = 1; t < dqk; ++t)
                        for (std::size_t r = 0; r < n; ++r) dot[r] = dot[r] + q[r][t] * k[t];
                    for (std::size_t r = 0; r < n; ++r) s[rows[r] * nkv + j] = dot[r];
                }
            }
            if (tr) tr->scores.push_back(s);
            hook::enter(stage::scale);
            for (std::size_t i = 0; i < nq; ++i)
                for (std::size_t j = p.keys_begin(i); j < p.keys_end(i); ++j) s[i * nkv + j] = s[i * nkv + j] * scale;
            if (tr) tr->scaled.push_back(s);
            hook::enter(stage::mask); // nothing to compute: masked pairs were never scored
            hook::enter(stage::softmax_max);
            for (std::size_t i = 0; i < nq; ++i) {
                if (p.visible(i) == 0) continue;
                T m = s[i * nkv + p.keys_begin(i)];
                for (std::size_t j = p.keys_begin(i) + 1; j < p.keys_end(i); ++j)
                    if (m < s[i * nkv + j]) m = s[i * nkv + j];
                row_max[i] = m;
            }
            hook::enter(stage::softmax_exp);
            for (std::size_t i = 0; i < nq; ++i)
                for (std::size_t j = p.keys_begin(i); j < p.keys_end(i); ++j)
                    s[i * nkv + j] = exp(s[i * nkv + j] - row_max[i]);
            hook::enter(stage::softmax_sum);
            for (std::size_t i = 0; i < nq; ++i) {
                if (p.visible(i) == 0) continue;
                T sum = s[i * nkv + p.keys_begin(i)];
                for (std::size_t j = p.keys_begin(i) + 1; j < p.keys_end(i); ++j) sum = sum + s[i * nkv + j];
                row_sum[i] = sum;
            }
            hook::enter(stage::softmax_div);
            for (std::size_t i = 0; i < nq; ++i)
                for (std::size_t j = p.keys_begin(i); j < p.keys_end(i); ++j)
                    s[i * nkv + j] = s[i * nkv + j] / row_sum[i];
            if (tr) tr->probs.push_back(s);
            hook::enter(stage::pv); // O = P V
            // Each output element is the sum over keys in key order (first product, then one
            // multiply-add a key), accumulated in the output row key by key so that value rows are
            // read whole: walking one column down the keys touched a cache line and a page per key.
            for (std::size_t i = 0; i < nq; ++i) {
                T* o = io.out.row(b, h, i);
                const std::size_t j0 = p.keys_begin(i), j1 = p.keys_end(i);
                if (j0 == j1) {
                    for (std::size_t t = 0; t < dv; ++t) o[t] = T(0);
                    continue;
                }
                const T* v0 = io.v.row(b, g, j0);
                for (std::size_t t = 0; t < dv; ++t) o[t] = s[i * nkv + j0] * v0[t];
                for (std::size_t j = j0 + 1; j < j1; ++j) {
                    const T* vj = io.v.row(b, g, j);
                    const T w = s[i * nkv + j];
                    for (std::size_t t = 0; t < dv; ++t) o[t] = o[t] + w * vj[t];
                }
            }
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
