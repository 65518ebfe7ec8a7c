// attn.kernels:bf16dot -- the tiled core in bf16 on the CPU's bf16 products: AVX512_BF16's dot
// product (vdpbf16ps, the `dot` engine) or AMX's tiles (tdpbf16ps, `amx`), chosen at run time
// (isa::bf16_engine_here). Every function that issues an AVX-512 or AMX instruction carries its
// own target attribute, so the tree's -march stays one.
//
// The tiles, the online softmax's running maximum, sum and output, and the work items are
// tiled_core's; what changes is how the two products are formed, and the per-score work between
// them, fused into two passes over a score row (weights_row). Both instructions take two bf16 per
// fp32 lane from each operand and add both products to the lane (a product of two bf16 is exact
// in fp32; the additions round to nearest even; bf16 subnormals are read as zero), so the operands
// are packed in pairs along the inner dimension, one 32-bit word per pair (AMX's "VNNI" layout
// for B):
//  - Q K^T: the query rows as stored (no scale folded in: rounding q * scale to bf16 again would
//    add an error fp32 packing does not), the keys transposed into panels of 32 keys, each row of a
//    panel the 32 keys' words for one pair of dimensions; the scale (times log2 e: the softmax is
//    in base 2, as in tiled_core) enters the fp32 scores in the exponent's argument, s scale - m;
//  - P V: the weights exp(s - m) rounded to bf16 (nearest even) into the score rows' own memory,
//    the values into panels of 32 columns, each row the words of one pair of keys. The row sum l
//    is taken from the unrounded weights, so each weight carries one bf16 rounding (the checker
//    charges it: half_roundings::weights, attn.check:expect), the output is fp32 until stored.
// The inner dimension is padded with zeros to whole AMX steps (32 bf16: d_head to a multiple of
// 32, key tiles to a multiple of 32 keys), so both engines read the same packed operands.
//  - dot: 12 rows x 32 columns of C in 24 zmm accumulators, two panel registers and one broadcast
//    word: 24 vdpbf16ps (768 bf16 products) per panel row of two loads.
//  - amx: 32 rows x 32 columns of C in four 16 x 16 fp32 tiles, two A tiles (16 rows x 32 bf16)
//    and two B tiles (16 pairs x 16 columns): four tdpbf16ps (32,768 products) per step of 32.
//    Blocks of 32 rows run past a tile's last row: those rows' weights are zeroed before P V, and
//    the buffers hold 32 rows more than a query tile.
module;
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>
#include <immintrin.h>
export module attn.kernels:bf16dot;
import :isa;
import :gemm;
import :softmax;
import :tiled;
import attn.core;

export namespace attn::kernels::bf16dot {

using word = std::uint32_t;                 ///< two bf16: element 2i in the low half, 2i + 1 in the high
inline constexpr std::size_t mr = 12;       ///< dot: rows of C per micro-tile
inline constexpr std::size_t nr = 32;       ///< columns of C per panel: two zmm of 16 fp32 lanes, two AMX tiles
inline constexpr std::size_t amx_rows = 32; ///< amx: rows of C per block (two tiles of 16)
inline constexpr std::size_t step = 16;     ///< words per AMX step (a tile row: 64 bytes, 32 bf16)

/// One thread's buffers.
struct scratch {
    std::size_t d2 = 0, p2 = 0, s_ld = 0, acc_ld = 0; ///< words of a query row, of a P row; floats of s, acc rows
    aligned_vector<word> qw, kp, vp;
    aligned_vector<float> s, acc, m, l; ///< s holds the scores, then (in place) P's words
    std::vector<std::size_t> lo, hi;

    scratch(const problem& p, tiles t) {
        const std::size_t dk = p.qk_dim(), dv = p.v_dim(), tk = round_up(t.kv, nr), rows = t.q + amx_rows;
        d2 = round_up((dk + 1) / 2, step);
        p2 = tk / 2;
        s_ld = tk;
        acc_ld = round_up(dv, nr);
        qw.resize(rows * d2);
        kp.resize(d2 * tk);
        vp.resize(p2 * acc_ld);
        s.resize(rows * s_ld);
        acc.resize(rows * acc_ld);
        m.resize(t.q);
        l.resize(t.q);
        lo.resize(t.q);
        hi.resize(t.q);
    }
    std::size_t bytes() const {
        return sizeof(word) * (qw.size() + kp.size() + vp.size()) +
               sizeof(float) * (s.size() + acc.size() + m.size() + l.size()) +
               sizeof(std::size_t) * (lo.size() + hi.size());
    }
};

namespace detail {

/// The word at p (any alignment, any type behind it: P's words live in float storage).
inline word load_word(const void* p) {
    word w;
    std::memcpy(&w, p, sizeof w);
    return w;
}

inline word bits(bf16 x) { return std::bit_cast<std::uint16_t>(x); }

inline __mmask16 lanes_mask(std::size_t n) { return n >= 16 ? __mmask16(0xffff) : __mmask16((1u << n) - 1); }

/// C[MR x ncols] (+)= A[MR x 2K2] B[2K2 x nr]: A's rows as words (row r's word k at a + r lda_bytes
/// + 4k), B a packed panel (row k: nr words).
template <std::size_t MR>
[[gnu::target("avx512f,avx512bf16")]] void micro(std::size_t K2, const char* a, std::size_t lda_bytes,
                                                 const word* panel, float* c, std::size_t ldc, std::size_t ncols,
                                                 bool accumulate) {
    const __mmask16 m0 = lanes_mask(ncols), m1 = lanes_mask(ncols > 16 ? ncols - 16 : 0);
    __m512 c0[MR], c1[MR];
    for (std::size_t r = 0; r < MR; ++r) {
        c0[r] = accumulate ? _mm512_maskz_loadu_ps(m0, c + r * ldc) : _mm512_setzero_ps();
        c1[r] = accumulate ? _mm512_maskz_loadu_ps(m1, c + r * ldc + 16) : _mm512_setzero_ps();
    }
    // one pair a trip: unrolled, clang hoists both trips' 24 broadcasts and spills accumulators
#pragma clang loop unroll(disable)
    for (std::size_t k = 0; k < K2; ++k) {
        const __m512bh b0 = (__m512bh)_mm512_load_si512(panel + k * nr);
        const __m512bh b1 = (__m512bh)_mm512_load_si512(panel + k * nr + 16);
        for (std::size_t r = 0; r < MR; ++r) {
            const __m512bh ar = (__m512bh)_mm512_set1_epi32(int(load_word(a + r * lda_bytes + 4 * k)));
            c0[r] = _mm512_dpbf16_ps(c0[r], ar, b0);
            c1[r] = _mm512_dpbf16_ps(c1[r], ar, b1);
        }
    }
    for (std::size_t r = 0; r < MR; ++r) {
        _mm512_mask_storeu_ps(c + r * ldc, m0, c0[r]);
        _mm512_mask_storeu_ps(c + r * ldc + 16, m1, c1[r]);
    }
}

template <std::size_t MR = mr>
[[gnu::target("avx512f,avx512bf16")]] void micro_rows(std::size_t rows, std::size_t K2, const char* a,
                                                      std::size_t lda_bytes, const word* panel, float* c,
                                                      std::size_t ldc, std::size_t ncols, bool accumulate) {
    if constexpr (MR == 0) {
        (void)rows, (void)K2, (void)a, (void)lda_bytes, (void)panel, (void)c, (void)ldc, (void)ncols, (void)accumulate;
    } else if (rows == MR) {
        micro<MR>(K2, a, lda_bytes, panel, c, ldc, ncols, accumulate);
    } else {
        micro_rows<MR - 1>(rows, K2, a, lda_bytes, panel, c, ldc, ncols, accumulate);
    }
}

/// Keys [j0, j0 + tk) of head g as K^T panels: panel p, pair k, column c at kp[(p d2 + k) nr + c]
/// is key j0 + p nr + c's dimensions 2k and 2k + 1 (zero past the keys and past d).
inline void pack_keys(const heads_view<const bf16>& k, std::size_t b, std::size_t g, std::size_t j0, std::size_t tk,
                      std::size_t d, std::size_t d2, word* kp) {
    for (std::size_t p = 0; p * nr < tk; ++p) {
        word* panel = kp + p * d2 * nr;
        for (std::size_t c = 0; c < nr; ++c) {
            const std::size_t j = p * nr + c;
            if (j >= tk) {
                for (std::size_t w = 0; w < d2; ++w) panel[w * nr + c] = 0;
                continue;
            }
            const bf16* row = k.row(b, g, j0 + j);
#pragma clang loop vectorize(disable)
            for (std::size_t w = 0; w < d / 2; ++w) panel[w * nr + c] = load_word(row + 2 * w);
            if (d % 2) panel[d / 2 * nr + c] = bits(row[d - 1]);
            for (std::size_t w = (d + 1) / 2; w < d2; ++w) panel[w * nr + c] = 0;
        }
    }
}

/// Values [j0, j0 + tk) of head g as panels of nr columns: panel p, pair k, column c at
/// vp[(p p2 + k) nr + c] is column p nr + c of keys j0 + 2k and j0 + 2k + 1 (zero past the keys and
/// past dv); pairs up to p2 (keys past tk are zero, so P's padding multiplies zeros).
[[gnu::target("avx512f,avx512bf16")]] inline void pack_values(const heads_view<const bf16>& v, std::size_t b,
                                                              std::size_t g, std::size_t j0, std::size_t tk,
                                                              std::size_t dv, std::size_t p2, word* vp) {
    static const bf16 zero_row[1] = {};
    const std::size_t panels = (dv + nr - 1) / nr;
    for (std::size_t k = 0; k < p2; ++k) {
        const bool has0 = 2 * k < tk, has1 = 2 * k + 1 < tk;
        const bf16* r0 = has0 ? v.row(b, g, j0 + 2 * k) : zero_row;
        const bf16* r1 = has1 ? v.row(b, g, j0 + 2 * k + 1) : zero_row;
        for (std::size_t p = 0; p < panels; ++p) {
            word* dst = vp + (p * p2 + k) * nr;
            for (std::size_t h = 0; h < nr; h += 16) {
                const std::size_t c0 = p * nr + h;
                if (has0 && c0 + 16 <= dv) { // 16 columns of both keys: widen, shift, or
                    const __m512i lo =
                        _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(r0 + c0)));
                    const __m512i hi =
                        has1 ? _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(r1 + c0)))
                             : _mm512_setzero_si512();
                    _mm512_store_si512(dst + h, _mm512_or_si512(lo, _mm512_slli_epi32(hi, 16)));
                } else {
                    for (std::size_t c = 0; c < 16; ++c) {
                        const std::size_t col = c0 + c;
                        const word w0 = has0 && col < dv ? bits(r0[col]) : 0, w1 = has1 && col < dv ? bits(r1[col]) : 0;
                        dst[h + c] = w0 | w1 << 16;
                    }
                }
            }
        }
    }
}

/// The lanes j of the 16 columns from c with lo <= c + j < hi.
inline __mmask16 keys_mask(std::size_t c, std::size_t lo, std::size_t hi) {
    const std::size_t a = std::clamp(lo, c, c + 16) - c, z = std::clamp(hi, c, c + 16) - c;
    return __mmask16((0xffffu >> (16 - z)) & ~((1u << a) - 1u));
}

/// One row's step of the online softmax over a key tile, on the products' raw scores s[0, tk_pad)
/// (scale not yet applied), fused into two passes where tiled_core's step and the rounding took
/// five: the maximum of the raw scores of keys [lo, hi) (scale > 0 and rounding are monotone, so
/// m_new = max(m, scale x that) is the maximum of the scaled scores), then each pair of 16 columns
/// becomes 2^(s scale - m_new) (one FMA: the scaled score is not rounded on its own), zero outside
/// [lo, hi), summed unrounded, and stored as bf16 words in place: word k (columns 2k, 2k + 1) in
/// bytes [4k, 4k + 4) of the row, below every column still to be read. The running m, l and
/// output row as tiled_core's (kernels::detail::fold_tile, its sum a float here).
[[gnu::target("avx512f,avx512dq,avx512bf16")]] inline void weights_row(float* s, std::size_t lo, std::size_t hi,
                                                                       std::size_t tk_pad, float scale, float& m,
                                                                       float& l, float* acc, std::size_t acc_ld) {
    // masks only at the row's two edges: the columns between take the plain instructions (a mask's
    // scalar arithmetic cost as much as the vector work it guards)
    __m512 mx = _mm512_set1_ps(kernels::detail::neg_inf);
    for (std::size_t c = lo / 16 * 16; c < hi; c += 16)
        mx = c >= lo && c + 16 <= hi ? _mm512_max_ps(mx, _mm512_loadu_ps(s + c))
                                     : _mm512_mask_max_ps(mx, keys_mask(c, lo, hi), mx, _mm512_loadu_ps(s + c));
    const float m_new = std::max(m, _mm512_reduce_max_ps(mx) * scale);
    const __m512 sc = _mm512_set1_ps(scale), mb = _mm512_set1_ps(m_new);
    __m512 sum0 = _mm512_setzero_ps(), sum1 = _mm512_setzero_ps();
    char* words = reinterpret_cast<char*>(s);
    for (std::size_t c = 0; c < tk_pad; c += nr) {
        __m512bh w = (__m512bh)_mm512_setzero_si512();
        if (c + nr > lo && c < hi) {
            __m512 e0 = isa::exp2_nonpos_zmm(_mm512_fmsub_ps(_mm512_loadu_ps(s + c), sc, mb));
            __m512 e1 = isa::exp2_nonpos_zmm(_mm512_fmsub_ps(_mm512_loadu_ps(s + c + 16), sc, mb));
            if (c < lo || c + nr > hi) {
                e0 = _mm512_maskz_mov_ps(keys_mask(c, lo, hi), e0);
                e1 = _mm512_maskz_mov_ps(keys_mask(c + 16, lo, hi), e1);
            }
            sum0 = _mm512_add_ps(sum0, e0);
            sum1 = _mm512_add_ps(sum1, e1);
            w = _mm512_cvtne2ps_pbh(e1, e0); // e0's 16 in the low half
        }
        _mm512_storeu_si512(words + 2 * c, (__m512i)w);
    }
    kernels::detail::fold_tile(m_new, _mm512_reduce_add_ps(_mm512_add_ps(sum0, sum1)), m, l, acc, acc_ld);
}

/// C[32 x 32] (+)= A[32 x 32 K16] B: A's rows as words (row r's word k at a + r lda_bytes + 4k),
/// B a packed panel (row k: nr words), K16 steps of 16 words. The tiles must be configured
/// (isa::amx_begin) on this thread: C in tiles 0-3, A in 4-5, B in 6-7.
[[gnu::target("amx-tile,amx-bf16")]] inline void amx_block(std::size_t K16, const char* a, std::size_t lda_bytes,
                                                           const word* panel, float* c, std::size_t ldc,
                                                           bool accumulate) {
    const std::size_t cs = ldc * sizeof(float), bs = nr * sizeof(word);
    float* c1 = c + 16 * ldc;
    if (accumulate) {
        _tile_loadd(0, c, cs);
        _tile_loadd(1, c + 16, cs);
        _tile_loadd(2, c1, cs);
        _tile_loadd(3, c1 + 16, cs);
    } else {
        _tile_zero(0);
        _tile_zero(1);
        _tile_zero(2);
        _tile_zero(3);
    }
    for (std::size_t k = 0; k < K16; ++k) {
        const char* ak = a + k * step * sizeof(word);
        const word* bk = panel + k * step * nr;
        _tile_loadd(4, ak, lda_bytes);
        _tile_loadd(5, ak + 16 * lda_bytes, lda_bytes);
        _tile_loadd(6, bk, bs);
        _tile_loadd(7, bk + 16, bs);
        _tile_dpbf16ps(0, 4, 6);
        _tile_dpbf16ps(1, 4, 7);
        _tile_dpbf16ps(2, 5, 6);
        _tile_dpbf16ps(3, 5, 7);
    }
    _tile_stored(0, c, cs);
    _tile_stored(1, c + 16, cs);
    _tile_stored(2, c1, cs);
    _tile_stored(3, c1 + 16, cs);
}

} // namespace detail

/// The rows [i0, i0 + tq) of head h in sequence b (tile_core's loop, on the bf16 products of
/// AMX's tiles or, Amx false, of vdpbf16ps).
template <bool Amx>
[[gnu::target("avx512f,avx512dq,avx512bf16,amx-tile,amx-bf16")]] void
tile_core(const problem& p, const core_io<bf16>& io, std::size_t b, std::size_t h, std::size_t i0, std::size_t tq,
          tiles t, scratch& w) {
    const std::size_t d = p.qk_dim(), dv = p.v_dim(), g = p.kv_head_of(h), d2 = w.d2;
    const float scale = kernels::detail::base2_scale(p);
    for (std::size_t r = 0; r < tq; ++r) {
        const bf16* q = io.q.row(b, h, i0 + r);
        word* dst = w.qw.data() + r * d2;
        for (std::size_t k = 0; k < d / 2; ++k) dst[k] = detail::load_word(q + 2 * k);
        if (d % 2) dst[d / 2] = detail::bits(q[d - 1]);
        std::fill(dst + (d + 1) / 2, dst + d2, word(0));
    }
    std::fill(w.acc.begin(), w.acc.begin() + tq * w.acc_ld, 0.0f);
    std::fill(w.m.begin(), w.m.end(), kernels::detail::neg_inf);
    std::fill(w.l.begin(), w.l.end(), 0.0f);
    if constexpr (Amx) isa::amx_begin();
    const std::size_t kv_begin = p.keys_begin(i0), kv_end = p.keys_end(i0 + tq - 1), block = Amx ? amx_rows : mr;
    const std::size_t q_ld = d2 * sizeof(word), s_ld = w.s_ld * sizeof(float); // rows of A, in bytes
    const char* qa = reinterpret_cast<const char*>(w.qw.data());
    char* pa = reinterpret_cast<char*>(w.s.data());
    std::size_t r0 = 0, r1 = 0;
    for (std::size_t j0 = kv_begin; j0 < kv_end; j0 += t.kv) {
        const std::size_t tk = std::min(t.kv, kv_end - j0), tk_pad = round_up(tk, nr), p2 = tk_pad / 2;
        if (!kernels::detail::rows_of_key_tile(p, i0, tq, j0, tk, r0, r1, w.lo.data(), w.hi.data())) continue;
        detail::pack_keys(io.k, b, g, j0, tk, d, d2, w.kp.data());
        // scores: each block of rows over the panels holding its rows' keys (all of the tile's
        // without a window: lo = 0 and hi = tk for every row)
        for (std::size_t i = r0; i < r1; i += block) {
            const std::size_t rows = std::min(block, r1 - i), c0 = w.lo[i] / nr * nr, c1 = w.hi[i + rows - 1];
            for (std::size_t c = c0; c < c1; c += nr) {
                float* sc = w.s.data() + i * w.s_ld + c;
                if constexpr (Amx)
                    detail::amx_block(d2 / step, qa + i * q_ld, q_ld, w.kp.data() + c * d2, sc, w.s_ld, false);
                else
                    detail::micro_rows(rows, d2, qa + i * q_ld, q_ld, w.kp.data() + c * d2, sc, w.s_ld,
                                       std::min(nr, tk - c), false);
            }
        }
        for (std::size_t r = r0; r < r1; ++r)
            detail::weights_row(w.s.data() + r * w.s_ld, w.lo[r], w.hi[r], tk_pad, scale, w.m[r], w.l[r],
                                w.acc.data() + r * w.acc_ld, w.acc_ld);
        if constexpr (Amx) { // the last block's rows past r1 weigh nothing (zero words)
            const std::size_t end = r0 + round_up(r1 - r0, amx_rows);
            for (std::size_t r = r1; r < end; ++r) std::fill_n(w.s.data() + r * w.s_ld, p2, 0.0f);
        }
        detail::pack_values(io.v, b, g, j0, tk, dv, p2, w.vp.data());
        for (std::size_t i = r0; i < r1; i += block) {
            // the block's keys [lo of its first row, hi of its last) in whole pairs (amx: whole steps)
            const std::size_t rows = std::min(block, r1 - i), hi = w.hi[i + rows - 1];
            const std::size_t k0 = Amx ? w.lo[i] / (2 * step) * step : w.lo[i] / 2;
            const std::size_t k1 = Amx ? std::min(p2, round_up((hi + 1) / 2, step)) : (hi + 1) / 2;
            for (std::size_t c = 0; c < dv; c += nr) {
                const char* a = pa + i * s_ld + k0 * sizeof(word);
                const word* panel = w.vp.data() + (c / nr * p2 + k0) * nr;
                float* acc = w.acc.data() + i * w.acc_ld + c;
                if constexpr (Amx)
                    detail::amx_block((k1 - k0) / step, a, s_ld, panel, acc, w.acc_ld, true);
                else
                    detail::micro_rows(rows, k1 - k0, a, s_ld, panel, acc, w.acc_ld, std::min(nr, dv - c), true);
            }
        }
    }
    if constexpr (Amx) isa::amx_end();
    for (std::size_t r = 0; r < tq; ++r) {
        float* a = w.acc.data() + r * w.acc_ld;
        const float inv = w.l[r] == 0.0f ? 0.0f : 1.0f / w.l[r];
        kernels::detail::scale_row(a, w.acc_ld, inv);
        isa::narrow(a, io.out.row(b, h, i0 + r), dv);
    }
}

/// The whole core on AMX's tiles (Amx) or vdpbf16ps: tiled_core's work items and order. The CPU
/// must have the engine (isa::bf16_engine_here says which it has).
template <bool Amx>
void core(const problem& p, const core_io<bf16>& io, tiles t, int threads) {
    for_each_query_tile<scratch>(p, t, threads,
                                 [&](std::size_t b, std::size_t h, std::size_t i0, std::size_t tq, scratch& w) {
                                     tile_core<Amx>(p, io, b, h, i0, tq, t, w);
                                 });
}

/// The core on AMX's tiles and on vdpbf16ps: defined here, not inline, so that the intrinsics they
/// reach (declared in this unit's global module fragment) are instantiated where they are visible.
void core_amx(const problem& p, const core_io<bf16>& io, tiles t, int threads) { core<true>(p, io, t, threads); }
void core_dot(const problem& p, const core_io<bf16>& io, tiles t, int threads) { core<false>(p, io, t, threads); }

/// Extra memory of core: one scratch per thread.
inline std::size_t scratch_bytes(const problem& p, tiles t, int threads) {
    return scratch(p, t).bytes() * std::size_t(std::max(threads, 1));
}

} // namespace attn::kernels::bf16dot
