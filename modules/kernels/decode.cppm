// attn.kernels.decode -- the attention core for one query row per sequence (n_q = 1: a decode
// step over a key/value cache). The tiled core would pack every key tile into GEMM panels for a
// single row of scores -- a transposed copy of the whole cache per query head; here the work is
// what it is, two matrix-vector products over the cache, and the cache is streamed once:
//  - one work item is (sequence b, key/value head g, key chunk c). Its R = H/G query heads share
//    g, so each K and V tile, read from memory once, serves all R heads from L1;
//  - scores are dot products (d_head/lanes FMAs per key, 16 keys reduced together with haddp) or,
//    when at least lanes/2 query heads share the key/value head (MQA), one FMA chain per key
//    with the heads in the lanes (decode_item_lanes),
//    folded into a running maximum and sum per head (streaming softmax), then V is accumulated
//    with one broadcast and d_head/lanes FMAs per key;
//  - keys are split into chunks (a function of n_kv only, never of the thread count), each chunk
//    leaves (max m, sum l, unnormalised output acc) per head, and a final pass combines them in
//    chunk order: out = sum_c exp(m_c - M) acc_c / sum_c exp(m_c - M) l_c. The split is what lets
//    two threads share one head's stream (MQA at batch 1 has a single head), and because it does
//    not depend on the thread count, any thread count gives the same bytes.
// Rounding: the combine rescales each chunk's partial output once more than a single pass would
// (one multiply by exp(m_c - M) per chunk of >= 256 keys), well inside attn.check's budget of
// 2u per key tile. Extra memory: per thread a few rows of d_head and R x 64 scores, plus the
// partials, B x H x chunks x (d_head + 2) floats with chunks <= 16: O(batch x d_model), whatever
// the context length. The buffers are thread_local and grow only, so steady-state decode steps
// allocate nothing.
module;
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <xsimd/xsimd.hpp>
export module attn.kernels.decode;
import attn.kernels.gemm;
import attn.kernels.gemv;
import attn.core;

export namespace attn::kernels {

/// How decode_core splits the keys of one (sequence, key/value head): `chunks` contiguous ranges
/// of `chunk` keys (the last one shorter). A function of n_kv only.
struct key_split {
    std::size_t chunks = 1, chunk = 0;
};

inline constexpr std::size_t decode_tile = 64;        ///< keys scored at a time (K and V tiles stay in L1)
inline constexpr std::size_t decode_min_chunk = 256;  ///< no chunk shorter than this (unless n_kv is)
inline constexpr std::size_t decode_max_chunks = 16;  ///< bounds the partials at O(d_model)

inline key_split split_keys(std::size_t n_kv) {
    key_split s;
    s.chunks = std::clamp<std::size_t>((n_kv + decode_min_chunk - 1) / decode_min_chunk, 1, decode_max_chunks);
    s.chunk = round_up((n_kv + s.chunks - 1) / s.chunks, decode_tile);
    s.chunks = (n_kv + s.chunk - 1) / s.chunk;
    return s;
}

/// Floats of partial results one item leaves: R rows of round_up(d, lanes), then R maxima, R sums.
inline std::size_t decode_partial_floats(const problem& p) {
    const std::size_t r = p.heads / p.kv_heads;
    return r * (round_up(p.head_dim(), lanes) + 2);
}

/// Extra memory of decode_core on `threads` threads, in bytes.
inline std::size_t decode_scratch_bytes(const problem& p, int threads) {
    const std::size_t r = p.heads / p.kv_heads, dp = round_up(p.head_dim(), lanes);
    const std::size_t per_thread = r * dp + r * (decode_tile + lanes);
    const std::size_t partials = p.batch * p.kv_heads * split_keys(p.n_kv).chunks * decode_partial_floats(p);
    return sizeof(float) * (per_thread * std::size_t(std::max(threads, 1)) + partials);
}

namespace detail {

/// Grow-only buffers, one set per thread, reused by every call.
struct decode_buffers {
    aligned_vector<float> qs, s, partials;
    static void grow(aligned_vector<float>& v, std::size_t n) {
        if (v.size() < n) v.resize(n);
    }
};

inline decode_buffers& decode_local() {
    static thread_local decode_buffers b;
    return b;
}

/// Where row i must go for xsimd::haddp to return its sum in lane i. xsimd 8.1's AVX-512 haddp
/// returns the sums in a permuted order (lanes 2,3 <-> 4,5 and 10,11 <-> 12,13, seen on this
/// machine; its AVX2 version is in order), so the order is learnt once, from haddp itself, and
/// the rows are placed accordingly: right for a fixed or a different haddp too.
struct haddp_order {
    std::size_t slot[lanes];
    haddp_order() {
        batch rows[lanes];
        for (std::size_t i = 0; i < lanes; ++i) rows[i] = batch(float(i));
        alignas(64) float out[lanes];
        xsimd::haddp(rows).store_aligned(out); // lane k holds lanes x (the row whose sum landed in k)
        for (std::size_t k = 0; k < lanes; ++k) slot[k] = std::size_t(out[k]) / lanes;
    }
};

inline const haddp_order& haddp_slots() {
    static const haddp_order o;
    return o;
}

/// s[j] = q . k_j for j < n (n <= decode_tile), q zero-padded to DC*lanes + tail, k rows `ks` apart.
/// DC full batches per row (a compile-time count, so q stays in registers); the d % lanes tail is scalar.
template <std::size_t DC>
void decode_scores(const float* q, std::size_t d, const float* k, std::size_t ks, std::size_t n, float* s) {
    batch qb[DC > 0 ? DC : 1];
    for (std::size_t c = 0; c < DC; ++c) qb[c] = batch::load_aligned(q + c * lanes);
    const std::size_t full = DC * lanes;
    const std::size_t* slot = haddp_slots().slot;
    for (std::size_t j0 = 0; j0 < n; j0 += lanes) {
        const std::size_t m = std::min(lanes, n - j0);
        // acc[jj] is key j0 + jj: static indices keep the 16 accumulators in registers (placing
        // them by haddp's lane order at run time spilled them to the stack); the lane order is
        // undone after the reduction instead, on the 16 sums
        batch acc[lanes];
        for (std::size_t jj = 0; jj < lanes; ++jj) {
            batch a(0.0f);
            if (jj < m) {
                const float* kj = k + (j0 + jj) * ks;
                for (std::size_t c = 0; c < DC; ++c) a = fused(qb[c], batch::load_unaligned(kj + c * lanes), a);
            }
            acc[jj] = a;
        }
        alignas(64) float t[lanes], u[lanes];
        xsimd::haddp(acc).store_aligned(u); // lane i holds the sum of row slot[i]
        for (std::size_t i = 0; i < lanes; ++i) t[slot[i]] = u[i];
        if (full < d) {
            for (std::size_t jj = 0; jj < m; ++jj) {
                const float* kj = k + (j0 + jj) * ks;
                float x = 0.0f;
                for (std::size_t c = full; c < d; ++c) x += q[c] * kj[c];
                t[jj] += x;
            }
        }
        std::copy(t, t + lanes, s + j0); // s has room for a whole batch past n
    }
}

/// acc[0:d] = acc * corr (acc need not be aligned) + sum_{j<n} p[j*ps] v_j, v rows `vs` apart.
template <std::size_t DC>
void decode_accumulate(float* acc, std::size_t d, float corr, const float* p, std::size_t ps, const float* v,
                       std::size_t vs, std::size_t n) {
    batch a[DC > 0 ? DC : 1];
    const batch cb(corr);
    for (std::size_t c = 0; c < DC; ++c) a[c] = batch::load_unaligned(acc + c * lanes) * cb;
    for (std::size_t j = 0; j < n; ++j) {
        const batch pj(p[j * ps]);
        const float* vj = v + j * vs;
        for (std::size_t c = 0; c < DC; ++c) a[c] = fused(pj, batch::load_unaligned(vj + c * lanes), a[c]);
    }
    for (std::size_t c = 0; c < DC; ++c) a[c].store_unaligned(acc + c * lanes);
    for (std::size_t c = DC * lanes; c < d; ++c) {
        float x = acc[c] * corr;
        for (std::size_t j = 0; j < n; ++j) x += p[j * ps] * v[j * vs + c];
        acc[c] = x;
    }
}

/// max of x[0:n] (also the tiled core's row maximum)
inline float row_max(const float* x, std::size_t n) {
    batch mx(-std::numeric_limits<float>::infinity());
    std::size_t j = 0;
    for (; j + lanes <= n; j += lanes) mx = xsimd::max(mx, batch::load_unaligned(x + j));
    alignas(64) float t[lanes];
    mx.store_aligned(t);
    float r = t[0];
    for (std::size_t k = 1; k < lanes; ++k) r = std::max(r, t[k]);
    for (; j < n; ++j) r = std::max(r, x[j]);
    return r;
}

/// x[j] = exp(x[j] - m) for j < n (x has room for a whole batch past n); returns the sum.
inline float exp_row(float* x, std::size_t n, float m) {
    const batch mb(m);
    batch sum(0.0f);
    std::size_t j = 0;
    for (; j + lanes <= n; j += lanes) {
        const batch e = xsimd::exp(batch::load_unaligned(x + j) - mb);
        e.store_unaligned(x + j);
        sum += e;
    }
    if (j < n) { // the tail through the same vector exp, padded with -inf (exp = 0)
        alignas(64) float t[lanes];
        for (std::size_t k = 0; k < lanes; ++k) t[k] = j + k < n ? x[j + k] : -std::numeric_limits<float>::infinity();
        const batch e = xsimd::exp(batch::load_aligned(t) - mb);
        e.store_unaligned(x + j);
        sum += e;
    }
    return xsimd::hadd(sum);
}

/// One work item: keys [j0, j1) of key/value head g in sequence b, for its R query heads.
template <std::size_t DC>
void decode_item(const problem& p, const core_io<float>& io, std::size_t b, std::size_t g, std::size_t j0,
                 std::size_t j1, float* part) {
    const std::size_t R = p.heads / p.kv_heads, d = p.head_dim(), dp = round_up(d, lanes);
    const float scale = float(p.softmax_scale()), neg_inf = -std::numeric_limits<float>::infinity();
    auto& w = decode_local();
    decode_buffers::grow(w.qs, R * dp);
    decode_buffers::grow(w.s, R * (decode_tile + lanes));
    for (std::size_t r = 0; r < R; ++r) { // scaled queries, zero-padded rows of dp
        const float* q = io.q.row(b, g * R + r, 0);
        float* qs = w.qs.data() + r * dp;
        for (std::size_t c = 0; c < d; ++c) qs[c] = q[c] * scale;
        std::fill(qs + d, qs + dp, 0.0f);
    }
    float* acc = part;
    float* m = part + R * dp;
    float* l = m + R;
    std::fill(acc, acc + R * dp, 0.0f);
    std::fill(m, m + R, neg_inf);
    std::fill(l, l + R, 0.0f);
    const std::size_t ks = io.k.row_stride, vs = io.v.row_stride;
    for (std::size_t t0 = j0; t0 < j1; t0 += decode_tile) {
        const std::size_t n = std::min(decode_tile, j1 - t0);
        const float* k = io.k.row(b, g, t0);
        const float* v = io.v.row(b, g, t0);
        for (std::size_t r = 0; r < R; ++r) {
            float* s = w.s.data() + r * (decode_tile + lanes);
            decode_scores<DC>(w.qs.data() + r * dp, d, k, ks, n, s);
            const float m_new = std::max(m[r], row_max(s, n));
            const float corr = std::exp(m[r] - m_new); // 0 on the first tile
            l[r] = l[r] * corr + exp_row(s, n, m_new);
            m[r] = m_new;
            decode_accumulate<DC>(acc + r * dp, d, corr, s, 1, v, vs, n);
        }
    }
}

/// One work item when many query heads share the key/value head (R >= lanes/2, e.g. MQA): the
/// heads go in the lanes of a batch instead of the keys. The scores of one key for up to `lanes`
/// heads are one chain of d_head FMAs (a broadcast key element times a column of the transposed
/// queries), the running maximum, exp and sum are one vector operation per key for all of them,
/// and no horizontal reduction is left: about half the instructions per (head, key) of
/// decode_item, which matters because at R = 16 the step is compute- rather than memory-bound.
template <std::size_t DC>
void decode_item_lanes(const problem& p, const core_io<float>& io, std::size_t b, std::size_t g, std::size_t j0,
                       std::size_t j1, float* part) {
    const std::size_t R = p.heads / p.kv_heads, d = p.head_dim(), dp = round_up(d, lanes);
    const float scale = float(p.softmax_scale());
    auto& w = decode_local();
    decode_buffers::grow(w.qs, d * lanes);
    decode_buffers::grow(w.s, decode_tile * lanes + lanes);
    float* m_out = part + R * dp;
    float* l_out = m_out + R;
    std::fill(part, part + R * dp, 0.0f);
    const std::size_t ks = io.k.row_stride, vs = io.v.row_stride;
    for (std::size_t r0 = 0; r0 < R; r0 += lanes) {
        const std::size_t rn = std::min(lanes, R - r0);
        float* qt = w.qs.data(); // qt[c*lanes + r] = scale * q_{r0+r}[c], zero in lanes >= rn
        for (std::size_t c = 0; c < d; ++c)
            for (std::size_t r = 0; r < lanes; ++r) qt[c * lanes + r] = r < rn ? io.q.row(b, g * R + r0 + r, 0)[c] * scale : 0.0f;
        batch m(-std::numeric_limits<float>::infinity()), l(0.0f);
        float* st = w.s.data(); // st[j*lanes + r]: score, then weight, of key j for head r0 + r
        for (std::size_t t0 = j0; t0 < j1; t0 += decode_tile) {
            const std::size_t n = std::min(decode_tile, j1 - t0);
            const float* k = io.k.row(b, g, t0);
            const float* v = io.v.row(b, g, t0);
            std::size_t j = 0;
            for (; j + 4 <= n; j += 4) { // four keys: four independent FMA chains
                const float *k0 = k + j * ks, *k1 = k0 + ks, *k2 = k1 + ks, *k3 = k2 + ks;
                batch a0(0.0f), a1(0.0f), a2(0.0f), a3(0.0f);
                for (std::size_t c = 0; c < d; ++c) {
                    const batch q = batch::load_aligned(qt + c * lanes);
                    a0 = fused(batch(k0[c]), q, a0);
                    a1 = fused(batch(k1[c]), q, a1);
                    a2 = fused(batch(k2[c]), q, a2);
                    a3 = fused(batch(k3[c]), q, a3);
                }
                a0.store_aligned(st + j * lanes);
                a1.store_aligned(st + (j + 1) * lanes);
                a2.store_aligned(st + (j + 2) * lanes);
                a3.store_aligned(st + (j + 3) * lanes);
            }
            for (; j < n; ++j) {
                const float* kj = k + j * ks;
                batch a(0.0f);
                for (std::size_t c = 0; c < d; ++c) a = fused(batch(kj[c]), batch::load_aligned(qt + c * lanes), a);
                a.store_aligned(st + j * lanes);
            }
            batch mx = m;
            for (j = 0; j < n; ++j) mx = xsimd::max(mx, batch::load_aligned(st + j * lanes));
            const batch corr = xsimd::exp(m - mx); // 0 on the first tile
            batch sum(0.0f);
            for (j = 0; j < n; ++j) {
                const batch e = xsimd::exp(batch::load_aligned(st + j * lanes) - mx);
                e.store_aligned(st + j * lanes);
                sum += e;
            }
            l = l * corr + sum;
            m = mx;
            alignas(64) float cr[lanes];
            corr.store_aligned(cr);
            for (std::size_t r = 0; r < rn; ++r)
                decode_accumulate<DC>(part + (r0 + r) * dp, d, cr[r], st + r, lanes, v, vs, n);
        }
        alignas(64) float mt[lanes], lt[lanes];
        m.store_aligned(mt);
        l.store_aligned(lt);
        for (std::size_t r = 0; r < rn; ++r) {
            m_out[r0 + r] = mt[r];
            l_out[r0 + r] = lt[r];
        }
    }
}

/// Combines the chunks of (b, g) for query head g*R + r and writes its output row.
inline void decode_combine(const problem& p, const core_io<float>& io, std::size_t b, std::size_t g, std::size_t r,
                           const float* parts, std::size_t chunks) {
    const std::size_t R = p.heads / p.kv_heads, d = p.head_dim(), dp = round_up(d, lanes);
    const std::size_t stride = decode_partial_floats(p);
    auto m_of = [&](std::size_t c) { return parts[c * stride + R * dp + r]; };
    auto l_of = [&](std::size_t c) { return parts[c * stride + R * dp + R + r]; };
    float mx = m_of(0);
    for (std::size_t c = 1; c < chunks; ++c) mx = std::max(mx, m_of(c));
    float* o = io.out.row(b, g * R + r, 0);
    std::fill(o, o + d, 0.0f);
    float l = 0.0f;
    for (std::size_t c = 0; c < chunks; ++c) {
        const float f = std::exp(m_of(c) - mx);
        l += l_of(c) * f;
        const float* a = parts + c * stride + r * dp;
        for (std::size_t t = 0; t < d; ++t) o[t] += a[t] * f;
    }
    const float inv = 1.0f / l; // l >= 1: the maximum's own term
    for (std::size_t t = 0; t < d; ++t) o[t] *= inv;
}

template <std::size_t DC>
void decode_core_dc(const problem& p, const core_io<float>& io, int threads) {
    const key_split ks = split_keys(p.n_kv);
    const std::size_t items = p.batch * p.kv_heads * ks.chunks, stride = decode_partial_floats(p);
    auto& own = decode_local();
    decode_buffers::grow(own.partials, items * stride);
    float* parts = own.partials.data();
    const std::size_t R = p.heads / p.kv_heads, rows = p.batch * p.heads;
#pragma omp parallel num_threads(threads) if (threads > 1)
    {
#pragma omp for schedule(dynamic, 1)
        for (std::size_t it = 0; it < items; ++it) {
            const std::size_t c = it % ks.chunks, bg = it / ks.chunks;
            const std::size_t j0 = c * ks.chunk, j1 = std::min(p.n_kv, j0 + ks.chunk);
            if (R >= lanes / 2)
                decode_item_lanes<DC>(p, io, bg / p.kv_heads, bg % p.kv_heads, j0, j1, parts + it * stride);
            else
                decode_item<DC>(p, io, bg / p.kv_heads, bg % p.kv_heads, j0, j1, parts + it * stride);
        }
#pragma omp for schedule(static)
        for (std::size_t row = 0; row < rows; ++row) {
            const std::size_t b = row / p.heads, h = row % p.heads, g = h / R;
            decode_combine(p, io, b, g, h % R, parts + (b * p.kv_heads + g) * ks.chunks * stride, ks.chunks);
        }
    }
}

template <std::size_t DC = 8>
void decode_core_dispatch(std::size_t dc, const problem& p, const core_io<float>& io, int threads) {
    if constexpr (DC == 0) {
        (void)dc;
        decode_core_dc<0>(p, io, threads);
    } else if (dc == DC) {
        decode_core_dc<DC>(p, io, threads);
    } else {
        decode_core_dispatch<DC - 1>(dc, p, io, threads);
    }
}

} // namespace detail

/// The attention core for n_q == 1 (any causal flag: the one row sees every key), q [B, H, 1, d],
/// k and v [B, G, n_kv, d] with any strides (a cache's views), out [B, H, 1, d].
/// d_head up to 8 x lanes in registers; wider heads keep 8 x lanes in registers and do the rest
/// as the scalar tail (correct, not fast).
inline void decode_core(const problem& p, const core_io<float>& io, int threads) {
    detail::decode_core_dispatch(std::min<std::size_t>(p.head_dim() / lanes, 8), p, io, threads);
}

} // namespace attn::kernels
