// attn.kernels:tiled -- the attention core in tiles with a streaming (online) softmax, on the
// SIMD GEMM. One work item is (batch, head, query tile): the scaled query tile is packed once,
// then each key/value tile is packed, scored with one GEMM, folded into a running row maximum
// m and row sum l (the scores are in base 2, the queries scaled by log2 e as they are packed),
// and accumulated with a second GEMM, the softmax in one pass over each row of a key tile: the
// weights against m as it stands (on a row's first tile, its first two batches' maximum), m moved
// (and the running output rescaled) only where the tile's scores rise more than 8 above it
// (softmax_row_one_pass; FlashAttention-4's conditional rescaling). The n_q x n_kv score matrix
// never exists: the extra memory per thread is the tiles, independent of sequence length; where
// a head's keys and values are read by several query tiles (or query heads), they are packed
// once, in rounds of (sequence, kv head) pairs of up to 32 MiB (tiled_core).
// In bf16 and f16 (storage), Q, K and V are widened to fp32 as they are packed, so the GEMMs,
// the softmax and the running output are fp32 exactly as in an fp32 run; P stays fp32 (it is
// never rounded to the storage format); the output row is rounded to nearest even as it is stored.
// Measured level and not kept (2-vCPU Zen 3, d_head 64 and 128, 1 and 2 threads): the scores turned
// into weights in the micro-kernel's registers, and P V per block of mr rows right after its
// weights; a slack of 8 on the maximum with its separate pass kept was level there too. The one
// pass (Xeon, AVX-512) is 0.95-0.96x the two where rows span several key tiles.
module;
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <omp.h>
#include <type_traits>
#include <vector>
#include <xsimd/xsimd.hpp>
export module attn.kernels:tiled;
import :isa;
import :gemm;
import :softmax;
import attn.core;

export namespace attn::kernels {

/// Tile sizes; 0 in run_options means these measured defaults.
struct tiles {
    std::size_t q = 384; ///< query rows per tile (a multiple of mr); measured: see variants/simd.cpp's header
    /// keys per tile (a multiple of nr): one L2 group of panels, 128 keys on AVX2, 256 on AVX-512
    /// (Xeon, AVX-512, d_head 64, 1 thread: 256 keys 0.95-0.97x the time of 128 at N 256 to 2048)
    std::size_t kv = nc_panels * nr;
};

/// The tiles for problem p from a kernel's defaults `base`: the asked ones, else base's, with
/// query tiles twice as tall under a sliding window. A query tile packs the keys of its rows'
/// windows, W + its height, so packing per score is 1/W + 1/height; the band the rows see
/// (detail::band_scores) costs the same whatever the height. Measured (core, H 8, d_head 64, N
/// 4096, W 512, 1 thread, 3 runs of 3 repetitions): 384 x 64 tiles 61-64 ms, 384 x 128 60-69,
/// 768 x 128 56-57, 1152 x 128 57-61.
inline tiles resolve_tiles(const problem& p, const run_options& o, tiles base) {
    if (o.tile_q)
        base.q = o.tile_q;
    else if (p.window)
        base.q *= 2;
    if (o.tile_kv) base.kv = o.tile_kv;
    return base;
}

/// The fp32 core's tiles for problem p. Without a mask its query tile is 64 blocks of mr rows:
/// 384 on AVX2, 512 on AVX-512 (Xeon, 1 thread: 0.98-0.99x the time of 384 at d_head 64, N 1024
/// to 4096, 0.98x at d_head 128, 0.97x at N 512, one tile a head). Under a causal mask it stays
/// 384: a tile computes the masked scores of its diagonal, about N x height / 2 of them (causal N
/// 2048 on 2 threads: 1.04x the time at 512 rows).
inline tiles resolve_tiles(const problem& p, const run_options& o) {
    tiles base;
    if (!p.causal) base.q = 64 * mr;
    return resolve_tiles(p, o, base);
}

/// Whether tiled_core can give each thread whole (sequence, kv head) pairs to pack and compute:
/// the pairs go evenly to the threads, and no sliding window (packs_kv_once).
inline bool threads_own_pairs(const problem& p, int threads) {
    return !p.window && p.batch * p.kv_heads % std::size_t(std::max(threads, 1)) == 0;
}

/// Query tiles that keep `threads` busy: the default tile leaves cores idle when batch x heads x
/// tiles is small (H = 1, B = 1, N = 1024: 3 items of 384 rows for 2 threads, one thread doing
/// two), so the tile shrinks (to no less than 64 rows) until there are 4 items per thread, and the
/// rows are then shared evenly between that many tiles. 8 items per thread where threads_own_pairs:
/// each thread then packs its pairs' keys and values once and computes their query tiles
/// (packs_kv_once), so shorter tiles cost no more packing (2 threads, H 8, d_head 64, alternating
/// pairs against 4 items a thread: N 256 in 128-row tiles 0.959x, 6 of 6; N 512 in 256-row tiles
/// 0.977x, 4 of 4; from N 1024 the tiles stay 512 rows). A row's result does not depend on the
/// query tile -- its scores, softmax and P V run over the same key tiles in the same order
/// whatever rows share its tile -- so the output keeps the same bytes for any thread count.
inline tiles balanced_tiles(const problem& p, tiles t, int threads) {
    if (threads <= 1) return t;
    const std::size_t bh = std::max<std::size_t>(1, p.batch * p.heads);
    const std::size_t want = (threads_own_pairs(p, threads) ? 8 : 4) * std::size_t(threads);
    const std::size_t per = (want + bh - 1) / bh; // query tiles wanted per (sequence, head)
    const std::size_t q = round_up((p.n_q + per - 1) / per, mr);
    t.q = std::min(t.q, std::max(q, round_up(64, mr)));
    // as many tiles, of equal height: N 512 at 384 rows was 384 + 128 a head, and the threads ended
    // on 384-row items (2 threads, H 8, 12 alternating pairs: 256 + 256 faster in 11, by 5 % median)
    const std::size_t n_tiles = (p.n_q + t.q - 1) / t.q;
    t.q = round_up((p.n_q + n_tiles - 1) / n_tiles, mr);
    return t;
}

/// One thread's buffers for tiled_core, for tiles of at most t.q rows and t.kv keys -- and no
/// more than the problem has (N = 32 at d_head 64 took the default 384 x 128 tiles' 450 KiB).
/// Every element is written before it is read (the packed panels with their padding, each key
/// tile's scores and weights over [0, tk_pad), the output rows, m and l at each query tile), so
/// nothing is zeroed here (scratch_vector). Each thread keeps its scratch from call to call
/// (for_each_query_tile), grown to the largest tiles it has run, as decode's buffers: a call
/// allocates nothing once its thread has run tiles as large (N 64 on 2 threads: 0.953x the time
/// of a scratch allocated per call, faster in 7 of 10 alternating pairs; N 256: 0.977x, 6 of 10).
struct tiled_scratch {
    scratch_vector<float> qs, kp, vp, s, acc, m;
    scratch_vector<float> l;            ///< each row's running sum, lane by lane (`lanes` floats a row)
    scratch_vector<std::size_t> lo, hi; ///< each row's keys [lo, hi) within the current key tile
    std::size_t s_ld = 0, acc_ld = 0;

    tiled_scratch() = default;
    tiled_scratch(const problem& p, tiles t) { fit(p, t); }
    /// Sized for p and t; the buffers only grow (a thread keeps its scratch from call to call).
    inline void fit(const problem& p, tiles t) {
        const std::size_t dqk = p.qk_dim(), dv = p.v_dim();
        const std::size_t rows = std::min(t.q, round_up(p.n_q, mr)), keys = std::min(t.kv, round_up(p.n_kv, nr));
        s_ld = round_up(keys, nr);
        acc_ld = round_up(dv, nr);
        grow(qs, rows * dqk);
        grow(kp, packed_size(dqk, keys));
        grow(vp, packed_size(keys, dv));
        grow(s, rows * s_ld);
        grow(acc, rows * acc_ld);
        grow(m, rows);
        grow(l, rows * lanes);
        grow(lo, rows);
        grow(hi, rows);
    }
    std::size_t bytes() const {
        return sizeof(float) * (qs.size() + kp.size() + vp.size() + s.size() + acc.size() + m.size() + l.size()) +
               sizeof(std::size_t) * (lo.size() + hi.size());
    }
};

namespace detail {

inline constexpr float neg_inf = -std::numeric_limits<float>::infinity();

inline void scale_row(float* x, std::size_t n, float f) { // n is a multiple of lanes
    const batch fb(f);
    for (std::size_t j = 0; j < n; j += lanes) (batch::load_aligned(x + j) * fb).store_aligned(x + j);
}

/// The two products of a key tile under a sliding window, over the band the rows see: each
/// block of mr rows scores only the panels holding its rows' keys [lo of its first row, hi of its
/// last) -- both grow with the row -- and sums P V over exactly those keys. Whole-tile GEMMs
/// would compute about W + tile keys per row; the band about W + a panel. The scores outside a
/// row's own [lo, hi) in the block's range are zeros by then (tile_core writes them).
inline void band_scores(std::size_t r0, std::size_t r1, std::size_t d, std::size_t tk, const tiled_scratch& w,
                        float* s) {
    for (std::size_t i = r0; i < r1; i += mr) {
        const std::size_t rows = std::min(mr, r1 - i), c0 = w.lo[i] / nr * nr, c1 = w.hi[i + rows - 1];
        for (std::size_t k0 = 0; k0 < d; k0 += kc) {
            const std::size_t kl = std::min(kc, d - k0);
            for (std::size_t c = c0; c < c1; c += nr)
                micro_rows(rows, kl, w.qs.data() + i * d + k0, d, w.kp.data() + (c / nr * d + k0) * nr,
                           s + i * w.s_ld + c, w.s_ld, std::min(nr, tk - c), k0 > 0);
        }
    }
}

inline void band_pv(std::size_t r0, std::size_t r1, std::size_t dv, std::size_t tk, tiled_scratch& w) {
    for (std::size_t i = r0; i < r1; i += mr) {
        const std::size_t rows = std::min(mr, r1 - i), c0 = w.lo[i], c1 = w.hi[i + rows - 1];
        for (std::size_t k0 = c0; k0 < c1; k0 += kc) {
            const std::size_t kl = std::min(kc, c1 - k0);
            for (std::size_t c = 0; c < dv; c += nr)
                micro_rows(rows, kl, w.s.data() + i * w.s_ld + k0, w.s_ld, w.vp.data() + (c / nr * tk + k0) * nr,
                           w.acc.data() + i * w.acc_ld + c, w.acc_ld, std::min(nr, dv - c), true);
        }
    }
}

/// The rows of the query tile [i0, i0 + tq) that see a key of the key tile [j0, j0 + tk): advances
/// [r0, r1) (both ends of a row's keys grow with the row, so they are one range that moves forward
/// tile by tile) and writes each such row's keys in the tile, [lo, hi), never empty for them;
/// false where no row sees the tile.
inline bool rows_of_key_tile(const problem& p, std::size_t i0, std::size_t tq, std::size_t j0, std::size_t tk,
                             std::size_t& r0, std::size_t& r1, std::size_t* lo, std::size_t* hi) {
    while (r0 < tq && p.keys_end(i0 + r0) <= j0) ++r0; // rows before r0 end before this tile
    r1 = std::max(r1, r0);
    while (r1 < tq && p.keys_begin(i0 + r1) < j0 + tk) ++r1; // rows from r1 start after it
    for (std::size_t r = r0; r < r1; ++r) {
        lo[r] = std::max(p.keys_begin(i0 + r), j0) - j0;
        hi[r] = std::min(p.keys_end(i0 + r), j0 + tk) - j0;
    }
    return r0 < r1;
}

/// A row's running maximum m, sum l and output row acc (acc_ld floats) brought up to a key tile
/// whose weights 2^(s - m_new) sum to `sum`: the tiled cores' softmax steps end here. S is the
/// sum's type: a float (the bf16 products' core), or a batch (the fp32 core keeps a row's sum lane
/// by lane and adds its lanes once, when the row is stored: a horizontal sum is a chain of
/// shuffles on the port the FMAs and the exponentials need, ~3 % of perf's samples of the core
/// on AVX-512 at d_head 64, N 1024, once per key tile). Only the order of the additions differs.
template <class S>
inline void fold_tile(float m_new, S sum, float& m, S& l, float* acc, std::size_t acc_ld) {
    // 2^(m - m_new) rescales what came before: 1 when the maximum holds (most tiles
    // after the first few), nothing to rescale on the row's first tile (its l and output
    // are 0): the scalar exp and the pass over the output row only when it grew
    if (m_new != m && m != neg_inf) {
        const float corr = std::exp2(m - m_new);
        l *= S(corr);
        scale_row(acc, acc_ld, corr);
    }
    l += sum;
    m = m_new;
}

/// A row's keys [lo, hi) in a key tile widened to whole batches [a0, a1) (a1 <= tk_pad): of()
/// makes the other columns of those batches -inf, which a maximum passes over and the vector exp
/// turns into exact zeros, so no batch is split into scalar work (a window's row has two such
/// edges in each of its W / tile + 1 tiles; a causal row, lo = 0, sums the same lanes as one whose
/// tail were padded: the same bits); zero_outside gives the columns outside [a0, a1) weight 0.
struct row_batches {
    std::size_t a0, a1;
    static row_batches of(float* sr, std::size_t lo, std::size_t hi) {
        const row_batches a{lo / lanes * lanes, round_up(hi, lanes)};
        std::fill(sr + a.a0, sr + lo, neg_inf);
        std::fill(sr + hi, sr + a.a1, neg_inf);
        return a;
    }
    void zero_outside(float* sr, std::size_t tk_pad) const {
        std::fill(sr, sr + a0, 0.0f);
        std::fill(sr + a1, sr + tk_pad, 0.0f);
    }
};

/// One row's step of the online softmax over a key tile: its scores s[lo, hi) (in base 2) become
/// the weights 2^(s - m_new) and the rest of s[0, tk_pad) zeros; the running maximum m, sum l
/// (`lanes` floats: fold_tile on a batch) and output row acc (acc_ld floats) are brought up to date.
inline void softmax_row(float* sr, std::size_t lo, std::size_t hi, std::size_t tk_pad, float& m, float* l, float* acc,
                        std::size_t acc_ld) {
    const row_batches a = row_batches::of(sr, lo, hi);
    const float m_new = std::max(m, row_max(sr + a.a0, a.a1 - a.a0));
    const batch sum = exp2_row_lanes(sr + a.a0, a.a1 - a.a0, m_new); // one vector exp per batch
    a.zero_outside(sr, tk_pad);
    batch lv = batch::load_aligned(l);
    fold_tile(m_new, sum, m, lv, acc, acc_ld);
    lv.store_aligned(l);
}

/// How far (in base 2) a row's scores may rise above the maximum its weights are taken against
/// before that maximum moves (softmax_row_one_pass): weights up to 2^8, which the fp32 sums and
/// output rows carry.
inline constexpr float held_slack = 8.0f;

/// softmax_row in one pass: the weights 2^(s - m_ref) are taken against a reference maximum while
/// the pass finds the tile's own -- the row's running maximum m where it has seen keys before, on
/// its first key tile the largest of the tile's first two batches. Where the tile's maximum is at
/// most m_ref + held_slack, m becomes m_ref (a running one stays, and the output row is not
/// rescaled): FlashAttention-4's conditional rescaling, here to spare the separate maximum pass
/// and the exponentials' wait for its horizontal maximum. Where it is higher but within 100 (the
/// weights, up to 2^100, and their sums are finite), m moves to it and the weights are scaled by
/// 2^(m_ref - m_new) -- a weight that this takes below FLT_MIN is one whose exact value is below
/// it too; beyond that the scores are gone: returns false, and the caller computes them again and
/// calls softmax_row (NaN and infinite scores take that way too).
inline bool softmax_row_one_pass(float* sr, std::size_t lo, std::size_t hi, std::size_t tk_pad, float& m, float* l,
                                 float* acc, std::size_t acc_ld) {
    const row_batches a = row_batches::of(sr, lo, hi);
    const auto [a0, a1] = a;
    batch mx0 = batch::load_aligned(sr + a0), mx1(neg_inf); // the first batch holds key lo
    if (a0 + lanes < a1) mx1 = batch::load_aligned(sr + a0 + lanes);
    const float m_ref = m != neg_inf ? m : isa::hmax(xsimd::max(mx0, mx1));
    const batch mb(m_ref);
    batch sum0(0.0f), sum1(0.0f);
    std::size_t j = a0;
    for (; j + 2 * lanes <= a1; j += 2 * lanes) { // two independent chains, as exp_row_lanes
        const batch x0 = batch::load_aligned(sr + j), x1 = batch::load_aligned(sr + j + lanes);
        mx0 = xsimd::max(mx0, x0);
        mx1 = xsimd::max(mx1, x1);
        const batch e0 = isa::exp2_nonpos(x0 - mb), e1 = isa::exp2_nonpos(x1 - mb);
        e0.store_aligned(sr + j);
        e1.store_aligned(sr + j + lanes);
        sum0 += e0;
        sum1 += e1;
    }
    if (j < a1) {
        const batch x0 = batch::load_aligned(sr + j);
        mx0 = xsimd::max(mx0, x0);
        const batch e0 = isa::exp2_nonpos(x0 - mb);
        e0.store_aligned(sr + j);
        sum0 += e0;
    }
    const float m_tile = isa::hmax(xsimd::max(mx0, mx1));
    if (!(m_tile <= m_ref + 100.0f)) return false; // NaN and -inf too
    a.zero_outside(sr, tk_pad);
    batch sum = sum0 + sum1, lv = batch::load_aligned(l);
    if (m_tile > m_ref + held_slack) {
        const float c = std::exp2(m_ref - m_tile);
        scale_row(sr + a0, a1 - a0, c);
        sum *= batch(c);
        fold_tile(m_tile, sum, m, lv, acc, acc_ld); // a running m is m_ref: its rescale is c
    } else {
        lv += sum; // a first tile's l is 0
        m = m_ref;
    }
    lv.store_aligned(l);
    return true;
}

} // namespace detail

/// The work items of a tiled core, (batch x heads x query tiles), spread over `threads`: each
/// thread makes one Scratch(p, t) and calls tile(b, h, i0, tq, scratch, slot) for the rows [i0, i0 +
/// tq) of head h in sequence b. Items are independent and each is computed the same way on any
/// thread: the result does not depend on the thread count.
/// round 0: every item handed out as a thread asks (heavier ones, later under a causal mask,
/// first); no pack. round > 0: the (sequence, kv head) pairs, numbered b kv_heads + g, go in rounds
/// of that many, each round's shared by the threads in equal runs: a thread first calls pack(c0,
/// c1, j0, n, first) for the keys [j0, j0 + n) of its pairs [c0, c1), a panel of keys at a time
/// (`first`: the round's first pair), then computes the query tiles of the heads that read them,
/// `slot` naming their pair's place in the round. What a thread packs it reads itself: read by the
/// other core, packed keys were 1.04x the time of none (2 threads, d_head 64, N 1024).
template <class Scratch, class Pack, class Tile>
void for_each_query_tile(const problem& p, tiles t, int threads, std::size_t round, const Pack& pack,
                         const Tile& tile) {
    const std::size_t n_tiles = (p.n_q + t.q - 1) / t.q, pairs = p.batch * p.kv_heads;
    // the query heads of pair (b, g) are one run of b heads + h (problem::first_head_of), so a run
    // of pairs' heads is one run too
    auto first_bh = [&](std::size_t pair) { return pair / p.kv_heads * p.heads + p.first_head_of(pair % p.kv_heads); };
    // the query tiles of heads [bh0, bh0 + n_bh), heaviest first
    auto tiles_of = [&](std::size_t bh0, std::size_t n_bh, std::size_t it, std::size_t first, Scratch& w) {
        const std::size_t tile_index = n_tiles - 1 - it / n_bh, bh = bh0 + it % n_bh;
        const std::size_t b = bh / p.heads, h = bh % p.heads, i0 = tile_index * t.q;
        tile(b, h, i0, std::min(t.q, p.n_q - i0), w, b * p.kv_heads + p.kv_head_of(h) - first);
    };
#pragma omp parallel num_threads(threads) if (threads > 1)
    {
        auto run = [&](Scratch& w) {
            if (!round) {
#pragma omp for schedule(dynamic, 1)
                for (std::size_t it = 0; it < p.batch * p.heads * n_tiles; ++it)
                    tiles_of(0, p.batch * p.heads, it, 0, w);
                return;
            }
            const std::size_t team = std::size_t(omp_get_num_threads()), me = std::size_t(omp_get_thread_num());
            for (std::size_t first = 0; first < pairs; first += round) {
                const std::size_t in_round = std::min(round, pairs - first);
                const std::size_t c0 = first + in_round * me / team, c1 = first + in_round * (me + 1) / team;
                for (std::size_t j0 = 0; j0 < p.n_kv && c0 < c1; j0 += nr)
                    pack(c0, c1, j0, std::min(nr, p.n_kv - j0), first);
                const std::size_t bh0 = first_bh(c0), n_bh = first_bh(c1) - bh0;
                for (std::size_t it = 0; it < n_bh * n_tiles; ++it) tiles_of(bh0, n_bh, it, first, w);
                if (first + round < pairs) {
#pragma omp barrier
                } // the next round's packs take these slots
            }
        };
        // a scratch that can be refitted is the thread's own, kept between calls; bf16dot's is
        // made per call (its buffers are zeroed on construction, and nothing here has checked
        // that its kernels write every padding word they read)
        if constexpr (requires(Scratch& s) { s.fit(p, t); }) {
            thread_local Scratch w;
            w.fit(p, t);
            run(w);
        } else {
            Scratch w(p, t);
            run(w);
        }
    }
}

/// for_each_query_tile in one round, no pack: tile(b, h, i0, tq, scratch).
template <class Scratch, class Tile>
void for_each_query_tile(const problem& p, tiles t, int threads, const Tile& tile) {
    for_each_query_tile<Scratch>(
        p, t, threads, 0, [](std::size_t, std::size_t, std::size_t, std::size_t, std::size_t) {},
        [&](std::size_t b, std::size_t h, std::size_t i0, std::size_t tq, Scratch& w, std::size_t) {
            tile(b, h, i0, tq, w);
        });
}

/// A (sequence, kv head)'s keys and values packed once for every query tile that reads them: K^T's
/// panels one after another (d x nr floats each), V's key tile by key tile, each tile's panels
/// t.kv x nr floats apart. Key tile j0 (a multiple of t.kv) has its K^T at k + j0 d and its V at
/// v + j0 dv_pad (dv rounded up to nr). Null k: each tile packs its own.
struct packed_kv {
    const float* k = nullptr;
    const float* v = nullptr;

    /// Floats of K^T's part: d x every key, rounded up to a panel.
    static std::size_t k_floats(const problem& p) { return p.qk_dim() * round_up(p.n_kv, nr); }
    /// Where the V rows from key j0 (a multiple of nr) start within V's part: in their key tile,
    /// j0 - j0 % t.kv, that tile's panels t.kv x nr floats apart (v_panel_ld).
    static std::size_t v_at(std::size_t j0, std::size_t dv, tiles t) {
        return (j0 - j0 % t.kv) * round_up(dv, nr) + j0 % t.kv * nr;
    }
    static std::size_t v_panel_ld(tiles t) { return t.kv * nr; }
};

/// Whether tiled_core packs each (sequence, kv head)'s K^T and V once, before the query tiles that
/// read them, rather than every query tile its own key tiles: where more than one tile reads them
/// (a sequence of several query tiles; query heads sharing a kv head, GQA and MQA), and the pairs
/// go evenly to the threads (each thread computes the heads of the pairs it packed). Not under a
/// sliding window (its query tiles read W + height keys each, from a row that is no tile's start),
/// nor with key tiles that are no whole number of panels. Measured: see tiled_core.
inline bool packs_kv_once(const problem& p, tiles t, int threads) {
    return threads_own_pairs(p, threads) && t.kv % nr == 0 && (p.n_q > t.q || p.heads > p.kv_heads);
}

/// Floats of one pair's packed K^T (every key, rounded up to a panel) and V (to a key tile).
inline std::size_t packed_kv_floats(const problem& p, tiles t) {
    return packed_kv::k_floats(p) + round_up(p.v_dim(), nr) * round_up(p.n_kv, t.kv);
}

/// The (sequence, kv head) pairs whose packed keys and values tiled_core holds at once: as many as
/// fit in 32 MiB (a round's are read by all its query tiles, from the last-level cache where it
/// holds them), a multiple of the threads, at least one per thread.
inline std::size_t kv_round(const problem& p, tiles t, int threads) {
    const std::size_t budget = (std::size_t(32) << 20) / sizeof(float), n = std::size_t(std::max(threads, 1));
    const std::size_t fit = budget / std::max<std::size_t>(1, packed_kv_floats(p, t)) / n; // of threads' worth
    return std::min(p.batch * p.kv_heads, std::max<std::size_t>(1, fit) * n);
}

/// The rows [i0, i0+tq) of head h in sequence b; its keys and values packed in `kv`, or by the
/// tile, key tile by key tile, where kv.k is null.
template <class T>
void tile_core(const problem& p, const core_io<T>& io, std::size_t b, std::size_t h, std::size_t i0, std::size_t tq,
               tiles t, tiled_scratch& w, packed_kv kv = {}) {
    const std::size_t d = p.qk_dim(), dv = p.v_dim(), g = p.kv_head_of(h);
    // the softmax in base 2: the queries carry log2 e in their scale, so the weights are
    // 2^(s' - m') = exp(s - m) for s' = s log2 e (the same function; isa::exp2_nonpos)
    const float scale = detail::base2_scale(p);
    for (std::size_t r = 0; r < tq; ++r) {
        float* qs = w.qs.data() + r * d;
        isa::widen(io.q.row(b, h, i0 + r), qs, d);
        for (std::size_t c = 0; c < d; ++c) qs[c] *= scale;
    }
    // zeros for every output row; the first key tile's P V storing them instead (no fill) measured
    // 1.02-1.04x the time on 2 threads at H 1, N 1024, and within noise elsewhere
    std::fill(w.acc.begin(), w.acc.begin() + tq * w.acc_ld, 0.0f);
    std::fill(w.m.begin(), w.m.begin() + tq, detail::neg_inf);
    std::fill(w.l.begin(), w.l.begin() + tq * lanes, 0.0f);
    // both ends of a row's keys grow with the row index: the tile's keys are [first row's begin,
    // last row's end), and the rows that see any key of a key tile are one range [r0, r1)
    const std::size_t kv_begin = p.keys_begin(i0), kv_end = p.keys_end(i0 + tq - 1);
    std::size_t r0 = 0, r1 = 0;
    for (std::size_t j0 = kv_begin; j0 < kv_end; j0 += t.kv) {
        const std::size_t tk = std::min(t.kv, kv_end - j0), tk_pad = round_up(tk, nr);
        if (!detail::rows_of_key_tile(p, i0, tq, j0, tk, r0, r1, w.lo.data(), w.hi.data())) continue;
        const float* kp = kv.k ? kv.k + j0 * d : w.kp.data(); // K^T
        if (!kv.k) pack_b(io.k.row(b, g, j0), 1, io.k.row_stride, d, tk, w.kp.data());
        auto scores = [&](std::size_t from, std::size_t to) { // rows [from, to)
            if (p.window)
                detail::band_scores(from, to, d, tk, w, w.s.data());
            else
                gemm_rows(from, to, tk, d, w.qs.data(), d, kp, w.s.data(), w.s_ld, false);
        };
        scores(r0, r1);
        for (std::size_t r = r0; r < r1; ++r) {
            float* sr = w.s.data() + r * w.s_ld;
            float *l = w.l.data() + r * lanes, *acc = w.acc.data() + r * w.acc_ld;
            if (detail::softmax_row_one_pass(sr, w.lo[r], w.hi[r], tk_pad, w.m[r], l, acc, w.acc_ld)) continue;
            scores(r, r + 1); // they rose by more than the weights carry: the row's again, two passes
            detail::softmax_row(sr, w.lo[r], w.hi[r], tk_pad, w.m[r], l, acc, w.acc_ld);
        }
        const float* vp = kv.k ? kv.v + packed_kv::v_at(j0, dv, t) : w.vp.data(); // V
        if (!kv.k) pack_b(io.v.row(b, g, j0), io.v.row_stride, 1, tk, dv, w.vp.data());
        if (p.window)
            detail::band_pv(r0, r1, dv, tk, w);
        else
            gemm_rows(r0, r1, dv, tk, w.s.data(), w.s_ld, vp, kv.k ? packed_kv::v_panel_ld(t) : tk * nr, w.acc.data(),
                      w.acc_ld, true);
    }
    for (std::size_t r = 0; r < tq; ++r) {
        float* a = w.acc.data() + r * w.acc_ld;
        // no visible key: zeros, by definition (such a row's output was never accumulated: 0 x 0).
        // One vector pass over the row: its cost is per row, so it weighs most under a window
        const float l = xsimd::hadd(batch::load_aligned(w.l.data() + r * lanes));
        const float inv = l == 0.0f ? 0.0f : 1.0f / l;
        if constexpr (std::is_same_v<T, float>) {
            if (dv % lanes == 0) { // fp32: scaled as it is stored, one pass
                float* out = io.out.row(b, h, i0 + r);
                for (std::size_t c = 0; c < dv; c += lanes)
                    (batch::load_aligned(a + c) * batch(inv)).store_unaligned(out + c);
                continue;
            }
        }
        detail::scale_row(a, w.acc_ld, inv);
        isa::narrow(a, io.out.row(b, h, i0 + r), dv);
    }
}

/// The whole core: for_each_query_tile's work items, each tile_core; `round` > 0: in rounds of
/// that many (sequence, kv head) pairs, each pair's keys and values packed once, into the calling
/// thread's buffer (kept from call to call, as the scratch); 0: each query tile packs its own key
/// tiles. Rounds need t.kv a whole number of panels and no window (else `round` is taken as 0).
template <class T>
void tiled_core(const problem& p, const core_io<T>& io, tiles t, int threads, std::size_t round) {
    if (p.window || t.kv % nr) round = 0;
    if (!round) {
        for_each_query_tile<tiled_scratch>(p, t, threads,
                                           [&](std::size_t b, std::size_t h, std::size_t i0, std::size_t tq,
                                               tiled_scratch& w) { tile_core(p, io, b, h, i0, tq, t, w); });
        return;
    }
    const std::size_t d = p.qk_dim(), dv = p.v_dim(), k_floats = packed_kv::k_floats(p);
    const std::size_t pair_floats = packed_kv_floats(p, t);
    thread_local big_scratch_vector<float> kv;
    grow(kv, std::min(round, p.batch * p.kv_heads) * pair_floats);
    float* const base = kv.data(); // slot s: K^T's k_floats, then V's key tiles (packed_kv)
    for_each_query_tile<tiled_scratch>(
        p, t, threads, round,
        [&](std::size_t c0, std::size_t c1, std::size_t j0, std::size_t n, std::size_t first) {
            // every pair's slice of these n rows before the next rows: a row of K (and of V)
            // holds every head's, in one 4 KiB page where d_model is 1024
            const std::size_t v_at = packed_kv::v_at(j0, dv, t);
            for (std::size_t pair = c0; pair < c1; ++pair) {
                const std::size_t b = pair / p.kv_heads, g = pair % p.kv_heads;
                float* k = base + (pair - first) * pair_floats;
                pack_b(io.k.row(b, g, j0), 1, io.k.row_stride, d, n, k + j0 * d);
                pack_b(io.v.row(b, g, j0), io.v.row_stride, 1, n, dv, k + k_floats + v_at, packed_kv::v_panel_ld(t));
            }
        },
        [&](std::size_t b, std::size_t h, std::size_t i0, std::size_t tq, tiled_scratch& w, std::size_t s) {
            const float* k = base + s * pair_floats;
            tile_core(p, io, b, h, i0, tq, t, w, packed_kv{k, k + k_floats});
        });
}

/// The whole core, its keys and values packed once per pair where packs_kv_once (in rounds of
/// kv_round). What a pack costs is mostly reaching the rows, not copying them: a row of one head
/// is 256-512 bytes of a row of every head, 2-4 KiB apart, a page each where d_model is 1024, so
/// a pack packs every pair's slice of a panel of rows before the next (each pair in turn, whole:
/// 0.98x the time at d_head 128; by key tiles: 0.97x). Measured (Xeon, AVX-512, against every
/// query tile packing its own key tiles, alternating pairs of runs, median time ratio): d_head 64,
/// H 8, 1 thread, N 1024 / 2048 0.975x / 0.979x; d_head 128, N 1024 0.980x; 2 threads N 1024 /
/// 2048 0.985x / 0.983x; MQA N 1024 0.976x, N 256 0.982x; GQA 4 N 512 1.001x. Not kept: a pack of
/// every head with one query tile each (N 256: 1.036x), the threads packing what the other reads
/// (1.04x), and each key tile's packed rows prefetched into L2 a tile ahead (1.006-1.010x).
template <class T>
void tiled_core(const problem& p, const core_io<T>& io, tiles t, int threads) {
    tiled_core(p, io, t, threads, packs_kv_once(p, t, threads) ? kv_round(p, t, threads) : 0);
}

/// Extra memory of tiled_core: one scratch per thread, and a round of packed keys and values.
inline std::size_t tiled_scratch_bytes(const problem& p, tiles t, int threads) {
    const std::size_t packed =
        packs_kv_once(p, t, threads) ? kv_round(p, t, threads) * packed_kv_floats(p, t) * sizeof(float) : 0;
    return tiled_scratch(p, t).bytes() * std::size_t(std::max(threads, 1)) + packed;
}

} // namespace attn::kernels
