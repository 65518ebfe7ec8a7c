// attn.kernels:decode -- the attention core for one query row per sequence (n_q = 1: a decode
// step over a key/value cache). The tiled core would pack every key tile into GEMM panels for a
// single row of scores, a transposed copy of the whole cache per query head; here the cache is
// read in place and streamed once:
//  - one work item is (sequence b, key/value head g, key chunk c). Its R = H/G query heads share
//    g, so each K and V tile, read from memory once, serves all R heads from L1;
//  - the R heads fill the lanes: a batch holds RB heads x C dims (RB * C = lanes, RB = R rounded
//    up to a power of two, at most lanes), so a score costs d_head/C FMAs on full batches whether
//    R is 1 (dot products, C = lanes), 4 (GQA) or 16 (MQA, C = 1): the step stays a matter of
//    bandwidth, not of wasted lanes (decode_item has the details);
//  - while a tile is computed, the rows decode_prefetch keys ahead are prefetched into L2, past
//    the end of the item into the next chunk of the same head, so memory and arithmetic overlap
//    instead of taking turns. Into L1 it is slower: the current and the next K and V tiles
//    together exceed its 32 KiB;
//  - items go to the threads in contiguous runs (OpenMP's guided schedule), so a thread's next
//    item usually continues the keys it is streaming and the prefetch runs on across the chunk
//    boundary;
//  - keys are split into chunks (a function of n_kv only, never of the thread count), each chunk
//    leaves (max m, sum l, unnormalised output acc) per head, and a final pass combines them in
//    chunk order: out = sum_c exp(m_c - M) acc_c / sum_c exp(m_c - M) l_c. The split is what lets
//    two threads share one head's stream (MQA at batch 1 has a single head), and because it does
//    not depend on the thread count, any thread count gives the same bytes.
//  - the cache may be stored narrower than fp32 (attn.core:kv: bf16, f16, int8 with a scale per
//    row); memory carries the narrow bytes and everything after the load -- scores, softmax,
//    P V, the combine -- is the fp32 core above, accumulating in fp32. With one query head per
//    key/value head (MHA: C = lanes) the rows are read in place and widened in registers
//    (isa::widen), int8's row scale multiplying the key's score and the value's weight: the
//    widening adds an instruction or two per 8 elements and no traffic. With R > 1 heads per
//    key/value head each tile of keys and values is widened to fp32 once (times the scale)
//    into two thread-local tiles that serve all R heads from L1/L2.
// Rounding: the combine rescales each chunk's partial output once more than a single pass would
// (one multiply by exp(m_c - M) per chunk of >= 256 keys), well inside attn.check's budget of
// 2u per key tile. Extra memory: per thread the rearranged queries (about R x d_head floats) and a
// tile of scores, plus the partials, B x G x chunks x R x (d_head + 2) floats with chunks <= 16:
// O(batch x d_model), whatever the context length. The buffers are thread_local and grow only,
// so steady-state decode steps allocate nothing.
// Measured: MQA, batch 8, L = 64k, 21 ms a step without the L2 prefetch, 14 ms with it.
module;
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <xsimd/xsimd.hpp>
export module attn.kernels:decode;
import :isa;
import :gemm;
import :softmax;
import attn.core;

export namespace attn::kernels {

/// How decode_core splits the keys of one (sequence, key/value head): `chunks` contiguous ranges
/// of `chunk` keys (the last one shorter). A function of n_kv only.
struct key_split {
    std::size_t chunks = 1, chunk = 0;
};

inline constexpr std::size_t decode_tile = 64;       ///< keys scored at a time (K and V tiles stay in L1)
inline constexpr std::size_t decode_prefetch = 128;  ///< keys ahead of the tile whose rows are prefetched into L2
inline constexpr std::size_t decode_min_chunk = 256; ///< no chunk shorter than this (unless n_kv is)
inline constexpr std::size_t decode_max_chunks = 16; ///< bounds the partials at O(d_model)

inline key_split split_keys(std::size_t n_kv) {
    key_split s;
    s.chunks = std::clamp<std::size_t>((n_kv + decode_min_chunk - 1) / decode_min_chunk, 1, decode_max_chunks);
    s.chunk = round_up((n_kv + s.chunks - 1) / s.chunks, decode_tile);
    s.chunks = (n_kv + s.chunk - 1) / s.chunk;
    return s;
}

/// The decode core's shapes for a problem: its R = H/G query heads per key/value head go RB to a
/// batch, in blocks of RB (R rounded up to a power of two, at most lanes), C = lanes / RB lanes each.
struct decode_shape {
    std::size_t rb = 1, c = lanes, blocks = 1, rows = 1, d = 0, dp = 0;
    explicit decode_shape(const problem& p) {
        const std::size_t r = p.heads / p.kv_heads;
        rb = r >= lanes ? lanes : std::bit_ceil(r);
        c = lanes / rb;
        blocks = (r + rb - 1) / rb;
        rows = blocks * rb;
        d = p.head_dim();
        dp = round_up(d, lanes);
    }
    std::size_t qs_floats() const { return std::max(blocks * (d / c) * lanes, lanes); } ///< rearranged queries
    std::size_t s_floats() const { return decode_tile / c * lanes; }                    ///< one tile's scores
    std::size_t ml_floats() const { return 2 * blocks * lanes; }                        ///< running max and sum
    /// partial results of one item: `rows` outputs of dp, then `rows` maxima and sums (aligned)
    std::size_t partial_floats() const { return round_up(rows * (dp + 2), lanes); }
};

/// Extra memory of decode_core on `threads` threads, in bytes; `widens`: the cache is narrower
/// than fp32 (two widened tiles per thread).
inline std::size_t decode_scratch_bytes(const problem& p, int threads, bool widens = false) {
    const decode_shape sh(p);
    const std::size_t per_thread =
        sh.qs_floats() + sh.s_floats() + sh.ml_floats() + (widens ? 2 * decode_tile * sh.d : 0);
    const std::size_t partials = p.batch * p.kv_heads * split_keys(p.n_kv).chunks * sh.partial_floats();
    return sizeof(float) * (per_thread * std::size_t(std::max(threads, 1)) + partials);
}

namespace detail {

/// Grow-only buffers, one set per thread, reused by every call.
struct decode_buffers {
    aligned_vector<float> qs, s, ml, partials, kt, vt; // kt, vt: widened tiles of a narrow cache
    static void grow(aligned_vector<float>& v, std::size_t n) {
        if (v.size() < n) v.resize(n);
    }
};

inline decode_buffers& decode_local() {
    static thread_local decode_buffers b;
    return b;
}

/// Lane permutation i -> i ^ H, and the lanes with bit H set, as xsimd compile-time constants.
template <std::size_t H>
struct xor_lane {
    static constexpr std::uint32_t get(std::size_t i, std::size_t) { return std::uint32_t(i ^ H); }
};
template <std::size_t H>
struct lane_bit {
    static constexpr bool get(std::size_t i, std::size_t) { return (i & H) != 0; }
};

template <std::size_t H>
batch swap_lanes(batch x) {
    return xsimd::swizzle(x, xsimd::make_batch_constant<xsimd::batch<std::uint32_t>, xor_lane<H>>());
}

/// Every lane of each group of C lanes gets the group's sum (max): log2(C) swaps.
template <std::size_t C>
batch group_sum(batch x) {
    if constexpr (C > 1) x = group_sum<C / 2>(x + swap_lanes<C / 2>(x));
    return x;
}
template <std::size_t C>
batch group_max(batch x) {
    if constexpr (C > 1) x = group_max<C / 2>(xsimd::max(x, swap_lanes<C / 2>(x)));
    return x;
}

/// v[0..2H) hold per-key partial sums, lane r*2H + c of v[k] a part of key k's score for head r.
/// Leaves in v[0] lane r*2H + k the sum over c of v[k]'s group r: a transpose-and-add within
/// each group, log2(2H) rounds of (blend, blend, swap, add) -- LLVM folds each round into two
/// shuffles and an add.
template <std::size_t H>
void transpose_sum(batch* v) {
    if constexpr (H >= 1) {
        constexpr auto hi = xsimd::make_batch_bool_constant<batch, lane_bit<H>>();
        for (std::size_t k = 0; k < H; ++k)
            v[k] = xsimd::select(hi, v[k + H], v[k]) + swap_lanes<H>(xsimd::select(hi, v[k], v[k + H]));
        transpose_sum<H / 2>(v);
    }
}

/// Asks for the cache lines of a row of `bytes` (the next tile's, while this one is computed).
inline void prefetch_row(const void* p, std::size_t bytes) {
    const char* c = static_cast<const char*>(p);
    for (std::size_t off = 0; off < bytes; off += 64) isa::prefetch_l2(c + off);
}

/// Where the rows after a tile lie in the cache, for prefetching: row j at at + j * stride, each
/// `bytes` long.
struct next_rows {
    const char* at = nullptr;
    std::size_t stride = 0, bytes = 0, n = 0;
    void fetch(std::size_t j) const {
        if (j < n) prefetch_row(at + j * stride, bytes);
    }
};

/// Rows [i0, i0 + n) of (b, g) widened to fp32 into dst (rows d apart), int8 times its row scale.
template <class S>
void widen_rows(float* dst, const kv_rows<S>& src, std::size_t b, std::size_t g, std::size_t i0, std::size_t n,
                std::size_t d) {
    for (std::size_t j = 0; j < n; ++j) {
        const S* r = src.data.row(b, g, i0 + j);
        float* o = dst + j * d;
        std::size_t t = 0;
        if constexpr (std::is_same_v<S, std::int8_t>) {
            const float sc = *src.scale.row(b, g, i0 + j);
            for (; t + lanes <= d; t += lanes) (isa::widen(r + t) * batch(sc)).store_unaligned(o + t);
            for (; t < d; ++t) o[t] = float(r[t]) * sc;
        } else {
            for (; t + lanes <= d; t += lanes) isa::widen(r + t).store_unaligned(o + t);
            for (; t < d; ++t) o[t] = float(r[t]);
        }
    }
}

/// out rows [0, RB) (each dp apart) = out * corr[r*C] + sum_{j<n} P[r, j] v_j, where P[r, j] is
/// lane r*C + j%C of score group j/C: RV heads x DC batches of the output in registers per pass,
/// so each V row loaded serves RV heads with one broadcast per head.
/// The rows v are of type E (fp32, or the cache's own type when it is read in place) and for int8
/// have a scale per row, vsc, folded into the row's weight.
template <std::size_t C, std::size_t DC, class E>
void decode_pv(float* out, std::size_t dp, std::size_t d, const float* corr, const float* s, const E* v, std::size_t vs,
               const float* vsc, std::size_t n, const next_rows& v_next) {
    constexpr std::size_t RB = lanes / C, RV = std::min<std::size_t>(RB, DC <= 2 ? 8 : DC <= 4 ? 4 : 2);
    constexpr std::size_t D = DC > 0 ? DC : 1;
    for (std::size_t r0 = 0; r0 < RB; r0 += RV) {
        batch a[RV][D];
        for (std::size_t r = 0; r < RV; ++r) {
            const batch cb(corr[(r0 + r) * C]);
            for (std::size_t c = 0; c < DC; ++c) a[r][c] = batch::load_aligned(out + (r0 + r) * dp + c * lanes) * cb;
        }
        for (std::size_t j = 0; j < n; ++j) {
            const E* vj = v + j * vs;
            if (r0 == 0) v_next.fetch(j);
            const float* pj = s + j / C * lanes + j % C + r0 * C;
            batch vb[D];
            for (std::size_t c = 0; c < DC; ++c) vb[c] = isa::widen(vj + c * lanes);
            for (std::size_t r = 0; r < RV; ++r) {
                const batch pr(vsc ? pj[r * C] * vsc[j] : pj[r * C]);
                for (std::size_t c = 0; c < DC; ++c) a[r][c] = isa::fused(pr, vb[c], a[r][c]);
            }
        }
        for (std::size_t r = 0; r < RV; ++r) {
            float* o = out + (r0 + r) * dp;
            for (std::size_t c = 0; c < DC; ++c) a[r][c].store_aligned(o + c * lanes);
            for (std::size_t t = DC * lanes; t < d; ++t) { // the d % lanes tail (and d beyond 8 batches)
                float x = o[t] * corr[(r0 + r) * C];
                for (std::size_t j = 0; j < n; ++j) {
                    const float pw = s[j / C * lanes + j % C + (r0 + r) * C];
                    x += (vsc ? pw * vsc[j] : pw) * float(v[j * vs + t]);
                }
                o[t] = x;
            }
        }
    }
}

/// One work item: keys [j0, j1) of key/value head g in sequence b, for its R query heads, with
/// RB = lanes / C heads per batch. Per tile of keys and block of RB heads:
///  - scores: lane r*C + c of key j's accumulator sums q_r[i] k_j[i] over i = c (mod C): one
///    broadcasting load of C key elements and one FMA per C dims serve all RB heads, and MK keys
///    share each load of the (scaled, rearranged) queries; transpose_sum then turns C keys'
///    accumulators into one batch of scores, lane r*C + c = (head r, key c), stored per group;
///  - streaming softmax on whole batches: running max and sum per head live replicated in its C
///    lanes (group_max, group_sum), one vector exp per RB x C scores;
///  - P V with decode_pv.
/// All lanes do useful work whatever R is (up to padding R to RB); R = 1 is the plain dot
/// product (C = lanes) and R >= lanes puts the heads in the lanes (C = 1).
template <std::size_t C, std::size_t DC, class S>
void decode_item(const problem& p, const kv_core_io<S>& io, std::size_t b, std::size_t g, std::size_t j0,
                 std::size_t j1, float* part) {
    constexpr std::size_t RB = lanes / C, MK = C >= 8 ? C : 8;
    const decode_shape sh(p);
    const std::size_t R = p.heads / p.kv_heads, d = sh.d, dp = sh.dp, nch = d / C, tail = nch * C;
    const float scale = float(p.softmax_scale());
    auto& w = decode_local();
    decode_buffers::grow(w.qs, sh.qs_floats());
    decode_buffers::grow(w.s, sh.s_floats());
    decode_buffers::grow(w.ml, sh.ml_floats());
    constexpr bool narrow = !std::is_same_v<S, float>;
    if constexpr (narrow && C < lanes) {
        decode_buffers::grow(w.kt, decode_tile * d);
        decode_buffers::grow(w.vt, decode_tile * d);
    }
    alignas(64) float kk[lanes];
    for (std::size_t i = 0; i < lanes; ++i) kk[i] = float(i % C);
    const batch key_in_group = batch::load_aligned(kk), neg_inf(-std::numeric_limits<float>::infinity());
    // qa[(blk*nch + ch)*lanes + r*C + c] = scale * q_{blk*RB + r}[ch*C + c]; zero for padding heads
    for (std::size_t blk = 0; blk < sh.blocks; ++blk)
        for (std::size_t ch = 0; ch < nch; ++ch)
            for (std::size_t r = 0; r < RB; ++r) {
                const std::size_t h = blk * RB + r;
                float* dst = w.qs.data() + (blk * nch + ch) * lanes + r * C;
                for (std::size_t c = 0; c < C; ++c)
                    dst[c] = h < R ? io.q.row(b, g * R + h, 0)[ch * C + c] * scale : 0.0f;
            }
    std::fill(part, part + sh.rows * dp, 0.0f);
    for (std::size_t blk = 0; blk < sh.blocks; ++blk) {
        neg_inf.store_aligned(w.ml.data() + 2 * blk * lanes);
        batch(0.0f).store_aligned(w.ml.data() + (2 * blk + 1) * lanes);
    }
    // One query head per key/value head (C = lanes) reads a narrow cache in place, widening in
    // registers (int8's row scales folded into the scores and the weights); more heads per
    // key/value head read it through the widened tiles kt, vt.
    constexpr bool in_place = !narrow || C == lanes;
    constexpr bool scaled = in_place && std::is_same_v<S, std::int8_t>;
    using E = std::conditional_t<in_place, S, float>;
    const std::size_t ks = in_place ? io.k.data.row_stride : d, vs = in_place ? io.v.data.row_stride : d;
    float* s = w.s.data();
    for (std::size_t t0 = j0; t0 < j1; t0 += decode_tile) {
        const std::size_t n = std::min(decode_tile, j1 - t0), groups = (n + C - 1) / C;
        const E* k;
        const E* v;
        const float* ksc = nullptr;
        const float* vsc = nullptr;
        if constexpr (in_place) {
            k = io.k.data.row(b, g, t0);
            v = io.v.data.row(b, g, t0);
            if constexpr (scaled) {
                ksc = io.k.scale.row(b, g, t0);
                vsc = io.v.scale.row(b, g, t0);
            }
        } else {
            widen_rows(w.kt.data(), io.k, b, g, t0, n, d);
            widen_rows(w.vt.data(), io.v, b, g, t0, n, d);
            k = w.kt.data();
            v = w.vt.data();
        }
        // the rows decode_prefetch keys ahead, up to the end of the head's keys, prefetched while
        // this tile is computed
        // (the same distance in bytes for a narrow cache: more keys ahead)
        constexpr std::size_t dist = decode_prefetch * sizeof(float) / sizeof(S);
        const std::size_t n_next = t0 + dist < p.n_kv ? std::min(n, p.n_kv - t0 - dist) : 0;
        auto ahead = [&](const kv_rows<S>& x) {
            if (!n_next) return next_rows{};
            return next_rows{reinterpret_cast<const char*>(x.data.row(b, g, t0 + dist)), x.data.row_stride * sizeof(S),
                             d * sizeof(S), n_next};
        };
        const next_rows k_next = ahead(io.k), v_next = ahead(io.v);
        for (std::size_t blk = 0; blk < sh.blocks; ++blk) {
            const float* qa = w.qs.data() + blk * nch * lanes;
            for (std::size_t kb = 0; kb < n; kb += MK) {
                if (blk == 0)
                    for (std::size_t i = kb; i < kb + MK; ++i) k_next.fetch(i);
                const E* kr[MK];
                for (std::size_t i = 0; i < MK; ++i)
                    kr[i] = k + std::min(kb + i, n - 1) * ks; // past n: a real key, masked below
                batch acc[MK];
                for (std::size_t i = 0; i < MK; ++i) acc[i] = batch(0.0f);
                if (C == lanes && nch == DC) { // one head: key by key, rows read in order, q in registers
                    batch qb[DC > 0 ? DC : 1];
                    for (std::size_t ch = 0; ch < DC; ++ch) qb[ch] = batch::load_aligned(qa + ch * lanes);
                    for (std::size_t i = 0; i < MK; ++i) {
                        if (kb + i >= n) break;
                        for (std::size_t ch = 0; ch < DC; ++ch)
                            acc[i] = isa::fused(isa::widen(kr[i] + ch * C), qb[ch], acc[i]);
                    }
                } else {
                    for (std::size_t ch = 0; ch < nch; ++ch) {
                        const batch qv = batch::load_aligned(qa + ch * lanes);
                        for (std::size_t i = 0; i < MK; ++i) {
                            if constexpr (C == lanes)
                                acc[i] = isa::fused(isa::widen(kr[i] + ch * C), qv, acc[i]);
                            else
                                acc[i] = isa::fused(isa::broadcast_chunk<C>(kr[i] + ch * C), qv, acc[i]);
                        }
                    }
                }
                if constexpr (scaled) // int8: each key's partial sums times its row's scale
                    for (std::size_t i = 0; i < MK; ++i) acc[i] *= batch(ksc[std::min(kb + i, n - 1)]);
                for (std::size_t gi = 0; gi < MK / C; ++gi) {
                    transpose_sum<C / 2>(acc + gi * C);
                    const std::size_t key0 = kb + gi * C;
                    batch sc = acc[gi * C];
                    if (key0 + C > n)
                        sc = xsimd::select(key_in_group < batch(float(n > key0 ? n - key0 : 0)), sc, neg_inf);
                    sc.store_aligned(s + key0 / C * lanes);
                }
            }
            if (tail < d) // the d % C dims, in scalar
                for (std::size_t j = 0; j < n; ++j)
                    for (std::size_t r = 0; r < RB && blk * RB + r < R; ++r) {
                        const float* q = io.q.row(b, g * R + blk * RB + r, 0);
                        const E* kj = k + j * ks;
                        float x = 0.0f;
                        for (std::size_t i = tail; i < d; ++i) x += q[i] * float(kj[i]);
                        s[j / C * lanes + r * C + j % C] += ksc ? x * scale * ksc[j] : x * scale;
                    }
            float* mp = w.ml.data() + 2 * blk * lanes;
            const batch m = batch::load_aligned(mp), l = batch::load_aligned(mp + lanes);
            batch mx = m;
            for (std::size_t gi = 0; gi < groups; ++gi) mx = xsimd::max(mx, batch::load_aligned(s + gi * lanes));
            mx = group_max<C>(mx);
            const batch corr = isa::exp_nonpos(m - mx); // 0 on the first tile
            const batch sum = exp_batches(s, groups, mx);
            mx.store_aligned(mp);
            (l * corr + group_sum<C>(sum)).store_aligned(mp + lanes);
            alignas(64) float cr[lanes];
            corr.store_aligned(cr);
            decode_pv<C, DC>(part + blk * RB * dp, dp, d, cr, s, v, vs, vsc, n, blk == 0 ? v_next : next_rows{});
        }
    }
    float* m_out = part + sh.rows * dp;
    float* l_out = m_out + sh.rows;
    for (std::size_t h = 0; h < sh.rows; ++h) {
        m_out[h] = w.ml[2 * (h / RB) * lanes + h % RB * C];
        l_out[h] = w.ml[(2 * (h / RB) + 1) * lanes + h % RB * C];
    }
}

/// decode_item for the C that R needs.
template <std::size_t DC, class S, std::size_t C = lanes>
void decode_item_for(std::size_t c_needed, const problem& p, const kv_core_io<S>& io, std::size_t b, std::size_t g,
                     std::size_t j0, std::size_t j1, float* part) {
    if constexpr (C == 1) {
        (void)c_needed;
        decode_item<1, DC>(p, io, b, g, j0, j1, part);
    } else if (c_needed == C) {
        decode_item<C, DC>(p, io, b, g, j0, j1, part);
    } else {
        decode_item_for<DC, S, C / 2>(c_needed, p, io, b, g, j0, j1, part);
    }
}

/// Combines the chunks of (b, g) for query head g*R + r and writes its output row.
template <class S>
void decode_combine(const problem& p, const kv_core_io<S>& io, std::size_t b, std::size_t g, std::size_t r,
                    const float* parts, std::size_t chunks) {
    const decode_shape sh(p);
    const std::size_t R = p.heads / p.kv_heads, d = sh.d, dp = sh.dp, rows = sh.rows;
    const std::size_t stride = sh.partial_floats();
    auto m_of = [&](std::size_t c) { return parts[c * stride + rows * dp + r]; };
    auto l_of = [&](std::size_t c) { return parts[c * stride + rows * dp + rows + r]; };
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

template <std::size_t DC, class S>
void decode_core_dc(const problem& p, const kv_core_io<S>& io, int threads) {
    const key_split ks = split_keys(p.n_kv);
    const decode_shape sh(p);
    const std::size_t items = p.batch * p.kv_heads * ks.chunks, stride = sh.partial_floats();
    auto& own = decode_local();
    decode_buffers::grow(own.partials, items * stride);
    float* parts = own.partials.data();
    const std::size_t R = p.heads / p.kv_heads, rows = p.batch * p.heads;
#pragma omp parallel num_threads(threads) if (threads > 1)
    {
#pragma omp for schedule(guided) // contiguous runs of items: see the prefetch above
        for (std::size_t it = 0; it < items; ++it) {
            const std::size_t c = it % ks.chunks, bg = it / ks.chunks;
            const std::size_t j0 = c * ks.chunk, j1 = std::min(p.n_kv, j0 + ks.chunk);
            decode_item_for<DC>(sh.c, p, io, bg / p.kv_heads, bg % p.kv_heads, j0, j1, parts + it * stride);
        }
#pragma omp for schedule(static)
        for (std::size_t row = 0; row < rows; ++row) {
            const std::size_t b = row / p.heads, h = row % p.heads, g = h / R;
            decode_combine(p, io, b, g, h % R, parts + (b * p.kv_heads + g) * ks.chunks * stride, ks.chunks);
        }
    }
}

template <class S, std::size_t DC = 8>
void decode_core_dispatch(std::size_t dc, const problem& p, const kv_core_io<S>& io, int threads) {
    if constexpr (DC == 0) {
        (void)dc;
        decode_core_dc<0>(p, io, threads);
    } else if (dc == DC) {
        decode_core_dc<DC>(p, io, threads);
    } else {
        decode_core_dispatch<S, DC - 1>(dc, p, io, threads);
    }
}

} // namespace detail

/// The attention core for n_q == 1 (any causal flag: the one row sees every key), q [B, H, 1, d],
/// k and v [B, G, n_kv, d] with any strides (a cache's views), out [B, H, 1, d].
/// d_head up to 8 x lanes in registers; wider heads keep 8 x lanes in registers and do the rest
/// as the scalar tail (correct, not fast).
inline void decode_core(const problem& p, const core_io<float>& io, int threads) {
    const kv_core_io<float> kv{io.q, {io.k, {}}, {io.v, {}}, io.out};
    detail::decode_core_dispatch(std::min<std::size_t>(p.head_dim() / lanes, 8), p, kv, threads);
}

/// decode_core over a cache of type S (bf16, f16, int8): k and v [B, G, n_kv, d] in S (int8 with
/// a scale per row), q and out in fp32; the same function of the cache's values as fp32 would be.
template <class S>
void decode_core_kv(const problem& p, const kv_core_io<S>& io, int threads) {
    detail::decode_core_dispatch(std::min<std::size_t>(p.head_dim() / lanes, 8), p, io, threads);
}

} // namespace attn::kernels
