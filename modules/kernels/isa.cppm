// attn.kernels:isa -- every instruction-set-specific piece of the kernels (and of attn.peak's
// FMA probe), one section per instruction set as xsimd's arch/ files do, chosen at compile time
// by xsimd's XSIMD_WITH_* macros (which follow -march): AVX-512, AVX/AVX2 with FMA, generic.
// Everything else is written on xsimd::batch<float> and these functions.
// The last section converts the 16-bit storage formats to and from fp32 arrays (the kernels
// widen bf16/f16 operands while packing and narrow results as they store them); it needs AVX2
// and F16C (__F16C__: xsimd 8.1 has no F16C architecture), present in every AVX-512 build; whether
// the CPU has bf16 products (AVX512_BF16's vdpbf16ps, AMX-BF16's tiles), and which the bf16 core
// uses (bf16_engine_here), is asked at run time.
//
// Why explicit FMAs: xsimd 8.1 has FMA kernels only for its fma3<sse4_2|avx|avx2> and fma4
// architectures. xsimd::fma on the default batch of an AVX-512 build (avx512bw), and on plain
// batch<float, avx2>, falls back to x*y + z, which clang (-ffp-contract=on) emits as a separate
// multiply and add: the same throughput as an FMA, but longer latency and two roundings.
//
// widen<S>(p): `lanes` consecutive cache elements of type S (attn.core:kv) as fp32 -- bf16 by a
// 16-bit shift of the zero-extended halves, f16 by F16C's vcvtph2ps, int8 by sign extension to
// int32 and a convert (the caller applies the row's scale).
module;
#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <type_traits>
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <xsimd/xsimd.hpp>
export module attn.kernels:isa;
import attn.core; // bf16, f16

export namespace attn::kernels {

using batch = xsimd::batch<float>;                ///< the kernels' register: xsimd's default arch
inline constexpr std::size_t lanes = batch::size; ///< f32 lanes per batch

namespace isa {

/// C consecutive floats at p repeated across the batch, any C dividing lanes: the portable
/// version (the sections below use one broadcasting load where the ISA has one).
template <std::size_t C>
batch broadcast_chunk_generic(const float* p) {
    if constexpr (C == 1) {
        return batch(*p);
    } else if constexpr (C == lanes) {
        return batch::load_unaligned(p);
    } else {
        alignas(64) float t[lanes];
        for (std::size_t i = 0; i < lanes; ++i) t[i] = p[i % C];
        return batch::load_aligned(t);
    }
}

/// `lanes` elements of type S at p widened to fp32, element by element: the portable version.
template <class S>
batch widen_generic(const S* p) {
    alignas(64) float t[lanes];
    for (std::size_t i = 0; i < lanes; ++i) t[i] = float(p[i]);
    return batch::load_aligned(t);
}

/// Integer dot products over an int8 cache (the AVX-512 section specialises it for std::int8_t
/// where the build has AVX512-VNNI); elsewhere, and for every other type, none.
template <class S>
struct int8_dots {
    static constexpr bool available = false;
    static constexpr std::size_t max_dim = 0;
    static constexpr std::int32_t weight_top = 0, weight_top16 = 0;
    static inline std::int32_t top(std::size_t) { return 0; }
    static inline std::int32_t top_quads(std::size_t) { return 0; }
    struct query {
        float scale = 1;
    };
};

/// bf16 dot products over a bf16 cache (the AVX-512 section specialises it for attn::bf16; the CPU
/// is asked at run time); elsewhere, and for every other type, none.
template <class S>
struct bf16_dots {
    static constexpr bool available = false;
};

#if XSIMD_WITH_AVX512F
// ---- AVX-512: 16 lanes, 32 vector registers --------------------------------------------------
static_assert(lanes == 16, "xsimd's default batch of an AVX-512 build has 16 lanes");

inline constexpr int vector_registers = 32;

/// a * b + c, one vfmadd.
inline batch fused(batch a, batch b, batch c) { return batch(_mm512_fmadd_ps(a, b, c)); }

/// The largest lane: a tree of 4 shuffles and maxima (a scalar loop over the lanes is a chain of
/// 15 dependent vmaxss, 60 cycles of latency once per row and key tile of the tiled core).
inline float hmax(batch x) { return _mm512_reduce_max_ps(x); }

template <std::size_t C>
batch broadcast_chunk(const float* p) {
    if constexpr (C == 2) {
        double x;
        std::memcpy(&x, p, sizeof x);
        return batch(_mm512_castpd_ps(_mm512_set1_pd(x)));
    } else if constexpr (C == 4) {
        return batch(_mm512_broadcast_f32x4(_mm_loadu_ps(p)));
    } else if constexpr (C == 8) {
        return batch(_mm512_castpd_ps(_mm512_broadcast_f64x4(_mm256_loadu_pd(reinterpret_cast<const double*>(p)))));
    } else {
        return broadcast_chunk_generic<C>(p);
    }
}

template <class S>
batch widen(const S* p) {
    if constexpr (std::is_same_v<S, float>) {
        return batch::load_unaligned(p);
    } else if constexpr (std::is_same_v<S, bf16>) {
        const __m512i w = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
        return batch(_mm512_castsi512_ps(_mm512_slli_epi32(w, 16)));
    } else if constexpr (std::is_same_v<S, f16>) {
        return batch(_mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))));
    } else {
        static_assert(std::is_same_v<S, std::int8_t>);
        return batch(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)))));
    }
}

/// exp(x) for x <= 0, -inf included (softmax arguments: score minus running maximum). x clamped
/// at -104 (e^-104 is below the smallest fp32 subnormal), n = round(x log2 e), f = x - n ln2 in
/// two FMAs (Cody-Waite: ln2 split in a head exact in 9 bits and a tail), e^f by its degree-7
/// Taylor polynomial (|f| <= 0.35: truncation below 1e-9 relative) and 2^n by vscalefps, which
/// rounds to subnormals and underflows to exactly 0: 13 vector operations, about half of the
/// general xsimd::exp's range checks and reconstruction.
inline batch exp_nonpos(batch x) {
    x = xsimd::max(x, batch(-104.0f));
    const batch n(
        _mm512_roundscale_ps((x * batch(1.44269504088896341f)).data, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    batch f = fused(n, batch(-0.693359375f), x);
    f = fused(n, batch(2.12194440e-4f), f);
    batch p(1.0f / 5040.0f);
    for (const float c : {1.0f / 720.0f, 1.0f / 120.0f, 1.0f / 24.0f, 1.0f / 6.0f, 0.5f, 1.0f, 1.0f})
        p = fused(p, f, batch(c));
    return batch(_mm512_scalef_ps(p.data, n.data));
}

/// attn.peak's FMA probe: the default batch and its vfmadd.
using fma_batch = batch;
inline fma_batch fma(fma_batch x, fma_batch y, fma_batch z) { return fused(x, y, z); }
inline constexpr const char* fma_instruction = "vfmadd231ps zmm (AVX-512F)";

/// The 16 x 16 block r[0..16) transposed in place (lane j of r[i] <-> lane i of r[j]): pairs
/// interleaved (vunpck[lh]ps), quads (vshufps), then 128-bit quarters in two rounds
/// (vshuff32x4): 64 shuffles for 256 elements, a quarter a element where AVX2's 8 x 8 takes 3/8.
inline void transpose16(batch* r) {
    __m512 t[16], u[16];
    for (int i = 0; i < 16; i += 2) {
        t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
    }
    // u[4q + j], 128-bit quarter L: column 4L + j of rows 4q .. 4q + 3
    for (int q = 0; q < 4; ++q) {
        const __m512 *a = t + 4 * q, *b = t + 4 * q + 2;
        u[4 * q + 0] = _mm512_shuffle_ps(a[0], b[0], 0x44);
        u[4 * q + 1] = _mm512_shuffle_ps(a[0], b[0], 0xee);
        u[4 * q + 2] = _mm512_shuffle_ps(a[1], b[1], 0x44);
        u[4 * q + 3] = _mm512_shuffle_ps(a[1], b[1], 0xee);
    }
    // column 4L + j gathers quarter L of u[j], u[4 + j], u[8 + j], u[12 + j]: quarters (0, 2) and
    // (1, 3) of two registers, then of those pairs again
    for (int j = 0; j < 4; ++j) {
        const __m512 a = _mm512_shuffle_f32x4(u[j], u[4 + j], 0x88), b = _mm512_shuffle_f32x4(u[j], u[4 + j], 0xdd);
        const __m512 c = _mm512_shuffle_f32x4(u[8 + j], u[12 + j], 0x88);
        const __m512 d = _mm512_shuffle_f32x4(u[8 + j], u[12 + j], 0xdd);
        r[j] = batch(_mm512_shuffle_f32x4(a, c, 0x88));
        r[8 + j] = batch(_mm512_shuffle_f32x4(a, c, 0xdd));
        r[4 + j] = batch(_mm512_shuffle_f32x4(b, d, 0x88));
        r[12 + j] = batch(_mm512_shuffle_f32x4(b, d, 0xdd));
    }
}

/// pack_b's transposing case in registers, as the AVX2 section's with 16 x 16 blocks (16 widened
/// loads, 64 shuffles, 16 stores for 256 elements). Without it this section packed K^T element by
/// element: 5 % of perf's samples of the core at d_head 64, N 1024 (Xeon, AVX-512, 1 thread).
template <class S>
std::size_t transpose_panel(const S* b, std::size_t ld_n, std::size_t K, std::size_t cols, float* panel,
                            std::size_t ld_dst) {
    std::size_t k = 0;
    for (; k + lanes <= K; k += lanes)
        for (std::size_t c0 = 0; c0 < cols; c0 += lanes) {
            batch r[lanes];
            for (std::size_t i = 0; i < lanes; ++i) r[i] = widen(b + (c0 + i) * ld_n + k);
            transpose16(r);
            for (std::size_t j = 0; j < lanes; ++j) r[j].store_aligned(panel + (k + j) * ld_dst + c0);
        }
    return k;
}

/// The C 32-bit words at p (C = 2, 4, 8; any alignment) repeated across a register: a key's C pairs
/// of 16-bit elements, broadcast for score_heads_pairs (int8_dots' and bf16_dots' pairs).
template <std::size_t C>
[[gnu::always_inline]] inline __m512i broadcast_words(const void* p) {
    static_assert(C == 2 || C == 4 || C == 8);
    if constexpr (C == 2) {
        std::int64_t x;
        std::memcpy(&x, p, sizeof x);
        return _mm512_set1_epi64(x);
    } else if constexpr (C == 4) {
        return _mm512_broadcast_i32x4(_mm_loadu_si128(static_cast<const __m128i*>(p)));
    } else {
        return _mm512_broadcast_i64x4(_mm256_loadu_si256(static_cast<const __m256i*>(p)));
    }
}

#if defined(__AVX512VNNI__)
/// AVX512-VNNI's integer dot products for a decode core over an int8 cache (decode_item).
/// Scores: the query in 16-bit fixed point, each key element sign-extended to 16 bits
/// (vpmovsxbw, 32 a uop) and multiplied in pairs (vpdpwssd): 3 uops per 32 elements where
/// widening to fp32 and an FMA take 6 per 16; one head's dims in the lanes (quantize, score) or
/// C heads' pairs (widen16, pairs, dot: score_heads_pairs). P V: the weights in 16-bit fixed point
/// as two byte planes, each value element multiplied as a byte (vpdpbusd, four keys to a dword)
/// after two rounds of unpacks (planes, interleave, pv_add, finish: decode_pv_i8).
template <>
struct int8_dots<std::int8_t> {
    static constexpr bool available = true;
    static constexpr std::size_t max_dim = 128;       ///< widest query (4 registers of 32)
    static constexpr std::int32_t weight_top = 65535; ///< a tile's largest weight in fixed point
    /// A query in 16-bit fixed point: element t is q[t / 32] lane t % 32 times `scale`.
    struct query {
        __m512i q[max_dim / 32];
        float scale = 1;
    };
    /// The largest |q_t| becomes `top` (int32 sums of d products with int8 keys cannot overflow:
    /// top * 128 * d < 2^31); each element rounded to nearest, off by at most scale / 2.
    static inline std::int32_t top(std::size_t d) {
        return std::int32_t(std::min<std::size_t>(32767, 2147483647u / (128 * d)));
    }
    /// q[0..d), d a multiple of 32 up to max_dim, 64-byte aligned.
    static inline query quantize(const float* q, std::size_t d) {
        __m512 m = _mm512_setzero_ps();
        for (std::size_t t = 0; t < d; t += 16) m = _mm512_max_ps(m, _mm512_abs_ps(_mm512_load_ps(q + t)));
        const float mx = _mm512_reduce_max_ps(m);
        query r;
        r.scale = mx > 0 ? mx / float(top(d)) : 1.0f;
        const __m512 inv = _mm512_set1_ps(1.0f / r.scale);
        for (std::size_t c = 0; c < d / 32; ++c) {
            const __m512i lo = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_load_ps(q + 32 * c), inv));
            const __m512i hi = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_load_ps(q + 32 * c + 16), inv));
            r.q[c] =
                _mm512_inserti64x4(_mm512_castsi256_si512(_mm512_cvtepi32_epi16(lo)), _mm512_cvtepi32_epi16(hi), 1);
        }
        return r;
    }
    /// Partial sums of q . k over 32-element pieces of the key row k (Pieces of them), lane l
    /// holding the products of dims 32c + 2l and 32c + 2l + 1 for every piece c, in units of
    /// q.scale (exact in int32, rounded once to fp32).
    template <std::size_t Pieces>
    [[gnu::always_inline]] static inline batch score(const std::int8_t* k, const query& q) {
        __m512i a = _mm512_setzero_si512();
        for (std::size_t c = 0; c < Pieces; ++c)
            a = _mm512_dpwssd_epi32(
                a, _mm512_cvtepi8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(k + 32 * c))), q.q[c]);
        return batch(_mm512_cvtepi32_ps(a));
    }
    /// Scores with C query heads' dims in the lanes (1 < C < lanes, GQA): an int8 key row
    /// sign-extended into 16-bit pairs (widen16: 32 a uop), C pairs broadcast across the batch
    /// (pairs), the queries' pairs in the lanes as rearrange_queries packs them (load_pairs).
    struct i32 {
        __m512i v;
    };
    static inline i32 zero() { return {_mm512_setzero_si512()}; }
    /// Pieces of 32 elements, unrolled (decode_item's rows of DC batches: a loop of two pieces
    /// a row, its counter and pointer arithmetic, cost int8 GQA 4 about 7 % of its step in cache).
    template <std::size_t Pieces>
    [[gnu::always_inline]] static inline void widen16(const std::int8_t* k, std::int16_t* dst) {
        for (std::size_t t = 0; t < 32 * Pieces; t += 32)
            _mm512_store_si512(dst + t,
                               _mm512_cvtepi8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(k + t))));
    }
    static inline void widen16(const std::int8_t* k, std::int16_t* dst, std::size_t d) {
        for (std::size_t t = 0; t < d; t += 32) widen16<1>(k + t, dst + t);
    }
    [[gnu::always_inline]] static inline i32 load_pairs(const std::int32_t* q) { return {_mm512_load_si512(q)}; }
    /// C 16-bit pairs at k (2C elements) repeated across the batch.
    template <std::size_t C>
    [[gnu::always_inline]] static inline i32 pairs(const std::int16_t* k) {
        return {broadcast_words<C>(k)};
    }
    [[gnu::always_inline]] static inline i32 dot(i32 acc, i32 k, i32 q) {
        return {_mm512_dpwssd_epi32(acc.v, k.v, q.v)};
    }
    [[gnu::always_inline]] static inline batch to_float(i32 x) { return batch(_mm512_cvtepi32_ps(x.v)); }
    // Scores on byte quads (score_heads_quads: one block of 2 to 8 heads, 1 < C < lanes): the key
    // rows read in place, C dwords of four int8 dims broadcast and made unsigned (+128: the sign
    // bit flipped), against each head's 16-bit fixed-point query split into two signed byte
    // planes, q = 256 h + l (h in [-127, 127] where |q| <= quad_top, l in [-128, 127]); vpdpbusd
    // multiplies four bytes a lane, so one product per plane covers 4C dims where vpdpwssd's
    // covers 2C after each key row's widening to 16 bits. Each lane's sum of q k over its dims is
    // 256 S_h + S_l - 128 sum(q) (S_h, S_l the planes' sums against k + 128; the last term the
    // query's, once an item): the same integer as the 16-bit pairs give, exact (modular int32
    // arithmetic, whose result |q| 128 d < 2^31 fits).
    static constexpr std::int32_t quad_top = 32512; ///< the largest |q| two byte planes hold (127 x 256 + 0)
    /// The fixed point's top for d dims on byte quads: top(d), at most quad_top.
    static inline std::int32_t top_quads(std::size_t d) { return std::min(quad_top, top(d)); }
    /// The C dwords at k (4C int8 elements, any alignment) repeated across the batch, each byte
    /// plus 128 (vpdpbusd's unsigned operand).
    template <std::size_t C>
    [[gnu::always_inline]] static inline i32 quads(const std::int8_t* k) {
        return {plus128(broadcast_words<C>(k))};
    }
    /// Each byte of x plus 128 (mod 256): its sign bit flipped. (Not a template: an intrinsic
    /// reached only from templates instantiated in another unit is not found there.)
    [[gnu::always_inline]] static inline __m512i plus128(__m512i x) {
        return _mm512_xor_si512(x, _mm512_set1_epi8(char(0x80)));
    }
    /// acc + each lane's four products of k's unsigned bytes and q's signed ones (vpdpbusd).
    [[gnu::always_inline]] static inline i32 dot_bytes(i32 acc, i32 k, i32 q) {
        return {_mm512_dpbusd_epi32(acc.v, k.v, q.v)};
    }
    /// 256 hi + lo - bias in fp32 (rounded once): the planes' sums less their +128 offsets.
    [[gnu::always_inline]] static inline batch quads_to_float(i32 hi, i32 lo, i32 bias) {
        return batch(_mm512_cvtepi32_ps(_mm512_sub_epi32(_mm512_add_epi32(_mm512_slli_epi32(hi.v, 8), lo.v), bias.v)));
    }
    // P V on 16-bit pairs (decode_pv_i16: C = 2, where a head's four keys span two score groups
    // and vpdpbusd's dwords of four weight bytes do not form): two keys' weights of a head in
    // 16-bit fixed point as one dword, two value rows' elements of a dim sign-extended into one
    static constexpr std::int32_t weight_top16 = 32767; ///< a tile's largest weight of a head, in fixed point
    /// A batch of weights s times f (lane by lane) rounded to int16 (|s f| <= weight_top16 up to
    /// fp32's roundings; saturated, so a rounding up cannot wrap), as 8 pairs of words: dword m
    /// holds lanes 2m (low) and 2m + 1.
    [[gnu::always_inline]] static inline void pack_weights16(const float* s, batch f, std::uint32_t* out) {
        const __m512i w = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_load_ps(s), f));
        _mm256_store_si256(reinterpret_cast<__m256i*>(out), _mm512_cvtsepi32_epi16(w));
    }
    /// 32 elements of rows a and b, each dim's pair (a's the low word) sign-extended to 16 bits:
    /// lo holds dims 0-7 and 16-23, hi dims 8-15 and 24-31 (finish16 puts them back in order).
    [[gnu::always_inline]] static inline void interleave16(const std::int8_t* a, const std::int8_t* b, i32& lo,
                                                           i32& hi) {
        const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a));
        const __m256i y = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b));
        lo.v = _mm512_cvtepi8_epi16(_mm256_unpacklo_epi8(x, y));
        hi.v = _mm512_cvtepi8_epi16(_mm256_unpackhi_epi8(x, y));
    }
    /// acc + each lane's pair of x . the pair of weights at w (broadcast).
    [[gnu::always_inline]] static inline i32 dot_word(i32 acc, i32 x, const std::uint32_t* w) {
        return {_mm512_dpwssd_epi32(acc.v, x.v, _mm512_set1_epi32(int(*w)))};
    }
    /// out[0..32) = out * corr + (lo, hi) * scale in dim order. Exact in int32 for up to 64 keys:
    /// 32 pairs x 2 x 32767 x 128 < 2^31.
    [[gnu::always_inline]] static inline void finish16(float* out, float corr, float scale, i32 lo, i32 hi) {
        const __m512 sc = _mm512_set1_ps(scale), c = _mm512_set1_ps(corr);
        const __m512 a = _mm512_mul_ps(_mm512_cvtepi32_ps(lo.v), sc), b = _mm512_mul_ps(_mm512_cvtepi32_ps(hi.v), sc);
        _mm512_storeu_ps(out, _mm512_fmadd_ps(_mm512_loadu_ps(out), c, _mm512_shuffle_f32x4(a, b, 0x44)));
        _mm512_storeu_ps(out + 16, _mm512_fmadd_ps(_mm512_loadu_ps(out + 16), c, _mm512_shuffle_f32x4(a, b, 0xee)));
    }
    /// int32 accumulators of a P V pass over 64 value dims: hi and lo byte planes, four each.
    struct pv_acc {
        __m512i hi[4], lo[4];
    };
    static inline void clear(pv_acc& a) {
        for (int x = 0; x < 4; ++x) a.hi[x] = a.lo[x] = _mm512_setzero_si512();
    }
    /// A batch of weights s (16 lanes) times f (lane by lane) rounded to unsigned 16-bit
    /// integers, as two byte planes of 16: hi[i] the high byte of lane i's, lo[i] the low.
    static inline void planes(const float* s, batch f, std::uint8_t* hi, std::uint8_t* lo) {
        const __m512i w = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_load_ps(s), f));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(hi), _mm512_cvtepi32_epi8(_mm512_srli_epi32(w, 8)));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(lo), _mm512_cvtepi32_epi8(w));
    }
    /// Four keys' 64 value elements (rows r[0..4)) interleaved by unpacks of bytes, then of words:
    /// lane 4L + i of x[q] holds dim 16L + 4q + i of the four keys, one byte each, in key order.
    struct quad {
        __m512i x[4];
    };
    [[gnu::always_inline]] static inline quad interleave(const std::int8_t* const* r) {
        const __m512i r0 = _mm512_loadu_si512(r[0]), r1 = _mm512_loadu_si512(r[1]);
        const __m512i r2 = _mm512_loadu_si512(r[2]), r3 = _mm512_loadu_si512(r[3]);
        const __m512i t0 = _mm512_unpacklo_epi8(r0, r1), t1 = _mm512_unpackhi_epi8(r0, r1);
        const __m512i t2 = _mm512_unpacklo_epi8(r2, r3), t3 = _mm512_unpackhi_epi8(r2, r3);
        return {{_mm512_unpacklo_epi16(t0, t2), _mm512_unpackhi_epi16(t0, t2), _mm512_unpacklo_epi16(t1, t3),
                 _mm512_unpackhi_epi16(t1, t3)}};
    }
    /// The quad's value bytes times the four keys' weight bytes (whi, wlo: key q's at bits 8q)
    /// into a.
    [[gnu::always_inline]] static inline void pv_add(pv_acc& a, const quad& x, std::uint32_t whi, std::uint32_t wlo) {
        const __m512i wh = _mm512_set1_epi32(int(whi)), wl = _mm512_set1_epi32(int(wlo));
        for (int q = 0; q < 4; ++q) {
            a.hi[q] = _mm512_dpbusd_epi32(a.hi[q], wh, x.x[q]);
            a.lo[q] = _mm512_dpbusd_epi32(a.lo[q], wl, x.x[q]);
        }
    }
    /// out[0..64) = out * corr + (hi * 256 + lo) * scale, the lanes put back in dim order (a 4 x 4
    /// transpose of the accumulators' 128-bit quarters). Exact in int32 for up to 64 keys:
    /// 16 quads x 4 x 255 x 128 x 256 < 2^31.
    static inline void finish(float* out, float corr, float scale, const pv_acc& a) {
        __m512 f[4];
        for (int q = 0; q < 4; ++q)
            f[q] = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(_mm512_slli_epi32(a.hi[q], 8), a.lo[q])),
                                 _mm512_set1_ps(scale));
        // natural batch L, quarter x = f[x]'s quarter L
        const __m512 p = _mm512_shuffle_f32x4(f[0], f[1], 0x44), b = _mm512_shuffle_f32x4(f[0], f[1], 0xee);
        const __m512 c = _mm512_shuffle_f32x4(f[2], f[3], 0x44), d = _mm512_shuffle_f32x4(f[2], f[3], 0xee);
        const __m512 n[4] = {_mm512_shuffle_f32x4(p, c, 0x88), _mm512_shuffle_f32x4(p, c, 0xdd),
                             _mm512_shuffle_f32x4(b, d, 0x88), _mm512_shuffle_f32x4(b, d, 0xdd)};
        for (int L = 0; L < 4; ++L)
            _mm512_storeu_ps(out + 16 * L, _mm512_fmadd_ps(_mm512_loadu_ps(out + 16 * L), _mm512_set1_ps(corr), n[L]));
    }
};
#endif

/// AVX512_BF16's dot product for the scores of a decode core over a bf16 cache with C query heads'
/// dims in the lanes (1 < C < lanes: score_heads_pairs, as int8_dots' pairs): the key rows read in
/// place as they are stored, C pairs of dims (C 32-bit words) broadcast across the batch, the
/// queries' pairs rounded to bf16 in the lanes (rearrange_queries); vdpbf16ps adds each lane's two
/// products (exact in fp32) to its fp32 sum. One instruction per 2C dims and key, where the fp32
/// path widens each key element and takes one FMA per C dims. The tree is built without
/// AVX512_BF16 (-mno-avx512bf16: CMakeLists.txt), so the instruction is written as inline assembly
/// -- no target attribute, which would keep it from inlining into decode_item -- and runs only
/// where the CPU has it (decode_bf16_dot_scores asks).
template <>
struct bf16_dots<bf16> {
    static constexpr bool available = true;
    struct acc {
        __m512 v;
    };
    struct words {
        __m512i v;
    };
    static inline acc zero() { return {_mm512_setzero_ps()}; }
    [[gnu::always_inline]] static inline words load_pairs(const std::int32_t* q) { return {_mm512_load_si512(q)}; }
    /// C pairs at k (2C elements) repeated across the batch.
    template <std::size_t C>
    [[gnu::always_inline]] static inline words pairs(const bf16* k) {
        return {broadcast_words<C>(k)};
    }
    [[gnu::always_inline]] static inline acc dot(acc a, words k, words q) {
        asm("vdpbf16ps %2, %1, %0" : "+v"(a.v) : "v"(k.v), "v"(q.v));
        return a;
    }
    [[gnu::always_inline]] static inline batch to_float(acc a) { return batch(a.v); }
    // P V (decode_pv_bf16): the weights rounded to bf16 in pairs of keys, each value dim's two
    // keys' elements one 32-bit word, so that one vdpbf16ps adds two keys' products per dim
    /// A batch of fp32 weights rounded to bf16 (nearest even: vcvtneps2bf16) as 8 pairs: word m
    /// holds lanes 2m (low half) and 2m + 1.
    [[gnu::always_inline]] static inline void pack_weights(const float* s, std::uint32_t* out) {
        __m256i h;
        asm("vcvtneps2bf16 %1, %0" : "=v"(h) : "v"(_mm512_load_ps(s)));
        _mm256_store_si256(reinterpret_cast<__m256i*>(out), h);
    }
    /// Rows a and b (32 elements each from the pointers) as 16 words each (dim i: a_i low, b_i
    /// high) in isa::widen_pair's order for bf16: lo holds dims 8k..8k+3 and hi 8k+4..8k+7 of each
    /// 128-bit quarter k, as the fp32 accumulators fed by widen_pair hold them.
    [[gnu::always_inline]] static inline void interleave(const bf16* a, const bf16* b, words& lo, words& hi) {
        const __m512i x = _mm512_loadu_si512(static_cast<const void*>(a));
        const __m512i y = _mm512_loadu_si512(static_cast<const void*>(b));
        lo.v = _mm512_unpacklo_epi16(x, y);
        hi.v = _mm512_unpackhi_epi16(x, y);
    }
    /// a + (each lane's pair of x) . (the pair at w, broadcast from memory: {1to16}).
    [[gnu::always_inline]] static inline acc dot_word(acc a, words x, const std::uint32_t* w) {
        asm("vdpbf16ps %2%{1to16%}, %1, %0" : "+v"(a.v) : "v"(x.v), "m"(*w));
        return a;
    }
};

#elif XSIMD_WITH_AVX
// ---- AVX, AVX2 and FMA: 8 lanes, 16 vector registers ------------------------------------------
inline constexpr int vector_registers = 16;

/// The largest lane: a tree of 3 shuffles and maxima.
inline float hmax(batch x) {
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(x), _mm256_extractf128_ps(x, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    return _mm_cvtss_f32(_mm_max_ss(m, _mm_movehdup_ps(m)));
}

/// a * b + c: one vfmadd with FMA3 and AVX2, a multiply and an add otherwise.
inline batch fused(batch a, batch b, batch c) {
#if XSIMD_WITH_FMA3_AVX2
    return batch(_mm256_fmadd_ps(a, b, c));
#else
    return xsimd::fma(a, b, c);
#endif
}

template <std::size_t C>
batch broadcast_chunk(const float* p) {
    if constexpr (lanes == 8 && C == 2) {
        double x;
        std::memcpy(&x, p, sizeof x);
        return batch(_mm256_castpd_ps(_mm256_set1_pd(x)));
    } else if constexpr (lanes == 8 && C == 4) {
        return batch(_mm256_broadcast_ps(reinterpret_cast<const __m128*>(p)));
    } else {
        return broadcast_chunk_generic<C>(p);
    }
}

template <class S>
batch widen(const S* p) {
    if constexpr (std::is_same_v<S, float>) {
        return batch::load_unaligned(p);
    }
#if XSIMD_WITH_AVX2
    else if constexpr (lanes == 8 && std::is_same_v<S, bf16>) {
        const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
        return batch(_mm256_castsi256_ps(_mm256_slli_epi32(w, 16)));
    } else if constexpr (lanes == 8 && std::is_same_v<S, std::int8_t>) {
        return batch(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)))));
    }
#endif
#ifdef __F16C__
    else if constexpr (lanes == 8 && std::is_same_v<S, f16>) {
        return batch(_mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
    }
#endif
    else {
        return widen_generic(p);
    }
}

#if XSIMD_WITH_AVX2
/// exp(x) for x <= 0, -inf included: the AVX-512 section's reduction and polynomial, with 2^n
/// built in the exponent field (no vscalefps here). x is clamped at -87.33 (n >= -126, so 2^n is
/// normal) and a result whose argument lies below the clamp is 0: a weight below FLT_MIN where
/// the exact one would be subnormal, an absolute error under 1.2e-38 against a row sum >= 1.
/// NaN stays NaN (the compare is unordered-or-greater, the clamp passes x through), so an
/// overflowed score still reaches the output's non-finite check. 17 vector operations, where
/// xsimd's general exp adds range checks and blends (the tiled core's softmax around it was 21 %
/// of perf's samples of the core at d_head 64, N 1024, before the core moved to exp2_nonpos).
inline batch exp_nonpos(batch x) {
    const __m256 lo = _mm256_set1_ps(-87.33654f);
    const __m256 keep = _mm256_cmp_ps(x, lo, _CMP_NLT_UQ); // x >= lo, or NaN
    x = batch(_mm256_max_ps(lo, x));                       // max returns its second operand when either is NaN
    const batch n(
        _mm256_round_ps((x * batch(1.44269504088896341f)).data, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    batch f = fused(n, batch(-0.693359375f), x);
    f = fused(n, batch(2.12194440e-4f), f);
    batch p(1.0f / 5040.0f);
    for (const float c : {1.0f / 720.0f, 1.0f / 120.0f, 1.0f / 24.0f, 1.0f / 6.0f, 0.5f, 1.0f, 1.0f})
        p = fused(p, f, batch(c));
    const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return batch(_mm256_and_ps(_mm256_mul_ps(p, _mm256_castsi256_ps(e)), keep));
}
#else
/// exp(x) for x <= 0: xsimd::exp (AVX without AVX2 has no 256-bit integer shift).
inline batch exp_nonpos(batch x) { return xsimd::exp(x); }
#endif

/// The 8 x 8 block r[0..8) transposed in place (lane j of r[i] <-> lane i of r[j]): pairs
/// interleaved (vunpck[lh]ps), then quads (vshufps), then the 128-bit halves (vperm2f128).
inline void transpose8(batch* r) {
    const __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
    const __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
    const __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
    const __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
    const __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xee);
    const __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xee);
    const __m256 u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xee);
    const __m256 u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xee);
    r[0] = batch(_mm256_permute2f128_ps(u0, u4, 0x20));
    r[1] = batch(_mm256_permute2f128_ps(u1, u5, 0x20));
    r[2] = batch(_mm256_permute2f128_ps(u2, u6, 0x20));
    r[3] = batch(_mm256_permute2f128_ps(u3, u7, 0x20));
    r[4] = batch(_mm256_permute2f128_ps(u0, u4, 0x31));
    r[5] = batch(_mm256_permute2f128_ps(u1, u5, 0x31));
    r[6] = batch(_mm256_permute2f128_ps(u2, u6, 0x31));
    r[7] = batch(_mm256_permute2f128_ps(u3, u7, 0x31));
}

/// pack_b's transposing case in registers: B's columns [0, cols) (cols a multiple of lanes), each
/// contiguous along k and ld_n apart, packed as panel rows ld_dst apart, 8 x 8 blocks at a time
/// (8 widened loads, 24 shuffles, 8 stores for 64 elements). Returns the rows k done, a multiple
/// of 8; the caller packs the rest element by element.
template <class S>
std::size_t transpose_panel(const S* b, std::size_t ld_n, std::size_t K, std::size_t cols, float* panel,
                            std::size_t ld_dst) {
    std::size_t k = 0;
    for (; k + lanes <= K; k += lanes)
        for (std::size_t c0 = 0; c0 < cols; c0 += lanes) {
            batch r[lanes];
            for (std::size_t i = 0; i < lanes; ++i) r[i] = widen(b + (c0 + i) * ld_n + k);
            transpose8(r);
            for (std::size_t j = 0; j < lanes; ++j) r[j].store_aligned(panel + (k + j) * ld_dst + c0);
        }
    return k;
}

#if XSIMD_WITH_FMA3_AVX2
/// attn.peak's FMA probe: xsimd's fma3<avx2> batch, whose fma is one vfmadd.
using fma_batch = xsimd::batch<float, xsimd::fma3<xsimd::avx2>>;
inline fma_batch fma(fma_batch x, fma_batch y, fma_batch z) { return xsimd::fma(x, y, z); }
inline constexpr const char* fma_instruction = "vfmadd231ps ymm (FMA3)";
#else
using fma_batch = batch;
inline fma_batch fma(fma_batch x, fma_batch y, fma_batch z) { return xsimd::fma(x, y, z); }
inline constexpr const char* fma_instruction = "xsimd::fma (no FMA instructions in this build)";
#endif

#else
// ---- generic: whatever xsimd's default batch is -------------------------------------------------
inline constexpr int vector_registers = 16;

inline batch fused(batch a, batch b, batch c) { return xsimd::fma(a, b, c); }

/// The largest lane.
inline float hmax(batch x) {
    alignas(64) float t[lanes];
    x.store_aligned(t);
    float r = t[0];
    for (std::size_t k = 1; k < lanes; ++k) r = t[k] > r ? t[k] : r;
    return r;
}

template <std::size_t C>
batch broadcast_chunk(const float* p) {
    return broadcast_chunk_generic<C>(p);
}

template <class S>
batch widen(const S* p) {
    return widen_generic(p);
}

inline batch exp_nonpos(batch x) { return xsimd::exp(x); }

using fma_batch = batch;
inline fma_batch fma(fma_batch x, fma_batch y, fma_batch z) { return xsimd::fma(x, y, z); }
inline constexpr const char* fma_instruction = "xsimd::fma (no FMA instructions in this build)";

/// pack_b's transposing case in registers: none in this section (0 rows done; the caller packs
/// element by element).
template <class S>
std::size_t transpose_panel(const S*, std::size_t, std::size_t, std::size_t, float*, std::size_t) {
    return 0;
}
#endif

/// exp2_nonpos's constants, below; the bf16 core's zmm copy of it (attn.kernels:bf16dot) reads them too.
namespace exp2_poly {
inline constexpr float lowest = -127.0f;               // the clamp: 2^-127 lands on 0
inline constexpr float shifter = 12582912.0f + 127.0f; // 1.5 * 2^23 + the exponent bias
inline constexpr float lead = 1.53458124e-4f;          // the degree-6 coefficient, then the rest down to 1
inline constexpr float rest[] = {1.33999309e-3f, 9.61848907e-3f, 5.55032864e-2f, 2.40226462e-1f, 6.93147182e-1f, 1.0f};
} // namespace exp2_poly

#if defined(__x86_64__)
/// isa::exp2_nonpos's AVX-512 form on 16 lanes, for any unit that has zmm registers whatever the
/// tree's batch is (the bf16 products' core calls it too: one formula, the same bits).
[[gnu::target("avx512f,avx512dq")]] inline __m512 exp2_nonpos_zmm(__m512 x) {
    const __m512 f = _mm512_reduce_ps(x, _MM_FROUND_TO_NEAREST_INT); // x - round(x): 0 for +-inf
    const __m512 n = _mm512_sub_ps(x, f);                            // exact
    __m512 p = _mm512_set1_ps(exp2_poly::lead);
    for (const float c : exp2_poly::rest) p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(c));
    return _mm512_scalef_ps(p, n); // p 2^n; 2^-inf = 0; NaN in x is NaN in f
}
#endif

/// 2^x for x <= 0, -inf included, in every section: the tiled core's softmax works in base 2
/// (its queries carry log2 e in their scale), which removes exp's range reduction by ln 2.
/// 2^x = 2^n 2^f for x = n + f, n an integer and |f| <= 1/2 (f exact), 2^f a degree-6
/// polynomial, minimax in relative error on [-1/2, 1/2] (Remez, 1.9e-9 in exact arithmetic; 9.5e-8
/// evaluated in fp32; constant term 1, so 2^0 is exactly 1). NaN stays NaN. How n and 2^n are
/// made is the section's:
/// - AVX-512 (exp2_nonpos_zmm): f by vreduceps (x minus x rounded), n = x - f, and 2^n p by
///   vscalefps, which takes n of any size: -inf gives f = 0 and 2^-inf = 0, an x below -149.5 an
///   exact 0, one in (-149.5, -126) a subnormal (within FLT_MIN of 2^x). 9 vector operations.
/// - elsewhere: x clamped at -127; t = x + (1.5 * 2^23 + 127) rounds x to an integer n in t's low
///   mantissa bits with the exponent bias already added (t lies in [2^23, 2^24), where floats are
///   integers), so t's bits shifted left 23 are 2^n -- and 0 for n = -127 (-inf, and any x below
///   -126.5, whose exact 2^x is below FLT_MIN: an absolute error under 1.2e-38 against a row sum
///   >= 1). 12 vector operations, where exp_nonpos takes 17 on AVX2.
/// Measured (Xeon, AVX-512, a 256-float row in L1, 2 batches an iteration): the AVX-512 form 0.80x
/// the time of the clamp-and-shift one.
inline batch exp2_nonpos(batch x) {
#if XSIMD_WITH_AVX512DQ
    return batch(exp2_nonpos_zmm(x));
#else
    using ibatch = xsimd::batch<std::int32_t>;
    x = xsimd::max(batch(exp2_poly::lowest), x); // vmaxps returns its second operand, x, for NaN
    const batch t = x + batch(exp2_poly::shifter);
    const batch f = x - (t - batch(exp2_poly::shifter));
    batch p(exp2_poly::lead);
    for (const float c : exp2_poly::rest) p = fused(p, f, batch(c));
    const ibatch two_n = xsimd::bitwise_cast<ibatch>(t) << 23;
    return p * xsimd::bitwise_cast<batch>(two_n);
#endif
}

/// Asks for the cache line at p into L2 (prefetcht1 on x86).
[[gnu::always_inline]] inline void prefetch_l2(const void* p) {
#if XSIMD_WITH_SSE2
    _mm_prefetch(static_cast<const char*>(p), _MM_HINT_T1);
#else
    __builtin_prefetch(p, 0, 2);
#endif
}

/// Two batches of a cache row (2 x lanes elements of type S at p) widened to fp32, lo and hi, in
/// "pair order": for bf16, one load and two unpacks with zero (vpunpck[lh]wd: each bf16 lands in
/// the top half of a 32-bit lane) replace two zero-extending loads and two shifts, and the
/// unpacks work within 128-bit lanes: on AVX2 lo holds elements 0-3 and 8-11 and hi 4-7 and
/// 12-15, on AVX-512 lo 0-3, 8-11, 16-19, 24-27 and hi the other four-element runs; for every
/// other type the natural order (lo elements 0 to lanes-1, hi the rest). to_pair_order /
/// from_pair_order move two fp32 batches of the natural order into that order and back
/// (vperm2f128; vshuff32x4 twice on AVX-512), so that accumulators fed by widen_pair are loaded
/// and stored in the natural order; each lane's arithmetic is unchanged.
template <class S>
[[gnu::always_inline]] inline void widen_pair(const S* p, batch& lo, batch& hi) {
#if XSIMD_WITH_AVX2 && !XSIMD_WITH_AVX512F // an AVX-512 build has AVX2 too, but 16-lane batches
    if constexpr (lanes == 8 && std::is_same_v<S, bf16>) {
        const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)), z = _mm256_setzero_si256();
        lo = batch(_mm256_castsi256_ps(_mm256_unpacklo_epi16(z, x)));
        hi = batch(_mm256_castsi256_ps(_mm256_unpackhi_epi16(z, x)));
        return;
    }
#endif
#if XSIMD_WITH_AVX512BW
    if constexpr (lanes == 16 && std::is_same_v<S, bf16>) {
        const __m512i x = _mm512_loadu_si512(static_cast<const void*>(p)), z = _mm512_setzero_si512();
        lo = batch(_mm512_castsi512_ps(_mm512_unpacklo_epi16(z, x)));
        hi = batch(_mm512_castsi512_ps(_mm512_unpackhi_epi16(z, x)));
        return;
    }
#endif
    lo = widen(p);
    hi = widen(p + lanes);
}

/// Whether widen_pair reorders S's elements (bf16 on AVX2 and AVX-512BW) ...
template <class S>
inline constexpr bool pair_reorders =
#if XSIMD_WITH_AVX512BW
    lanes == 16 && std::is_same_v<S, bf16>;
#elif XSIMD_WITH_AVX2
    lanes == 8 && std::is_same_v<S, bf16>;
#else
    false;
#endif

/// ... and which: the element of the 2 x lanes that widen_pair puts at position i (lo's lanes
/// 0 to lanes-1, then hi's). A consumer that stores widened pairs as they come (decode's key
/// block) reads them against operands permuted the same way.
template <class S>
constexpr std::size_t pair_element(std::size_t i) {
    if constexpr (!pair_reorders<S>) {
        return i;
    } else {
        const std::size_t in = i % lanes; // four-element runs of one 128-bit lane: lo 0-3, 8-11, ...
        return in / 4 * 8 + (i >= lanes ? 4 : 0) + in % 4;
    }
}

/// n elements of S (n a multiple of 2 x lanes) widened by widen_pair into dst, each pair stored as
/// it comes: dst holds pair_element's order (the natural one where !pair_reorders<S>).
template <class S>
[[gnu::always_inline]] inline void widen_pairs(const S* src, float* dst, std::size_t n) {
    for (std::size_t i = 0; i < n; i += 2 * lanes) {
        batch lo, hi;
        widen_pair(src + i, lo, hi);
        lo.store_unaligned(dst + i);
        hi.store_unaligned(dst + i + lanes);
    }
}

template <class S>
[[gnu::always_inline]] inline void to_pair_order([[maybe_unused]] batch& lo, [[maybe_unused]] batch& hi) {
#if XSIMD_WITH_AVX2 && !XSIMD_WITH_AVX512F
    if constexpr (lanes == 8 && std::is_same_v<S, bf16>) {
        const __m256 a = lo, b = hi;
        lo = batch(_mm256_permute2f128_ps(a, b, 0x20)); // elements 0-3 (of a), 8-11 (of b)
        hi = batch(_mm256_permute2f128_ps(a, b, 0x31)); // 4-7, 12-15
    }
#endif
#if XSIMD_WITH_AVX512BW
    if constexpr (lanes == 16 && std::is_same_v<S, bf16>) {
        const __m512 a = lo, b = hi;                  // 128-bit quarters a0 a1 a2 a3, b0 b1 b2 b3
        lo = batch(_mm512_shuffle_f32x4(a, b, 0x88)); // a0 a2 b0 b2: elements 0-3, 8-11, 16-19, 24-27
        hi = batch(_mm512_shuffle_f32x4(a, b, 0xdd)); // a1 a3 b1 b3
    }
#endif
}

template <class S>
[[gnu::always_inline]] inline void from_pair_order(batch& lo, batch& hi) {
#if XSIMD_WITH_AVX512BW
    if constexpr (lanes == 16 && std::is_same_v<S, bf16>) {
        // lo = a0 a2 b0 b2, hi = a1 a3 b1 b3 -> a = a0 a1 a2 a3, b = b0 b1 b2 b3
        const __m512 t = _mm512_shuffle_f32x4(lo, hi, 0x44); // lo0 lo1 hi0 hi1 = a0 a2 a1 a3
        const __m512 u = _mm512_shuffle_f32x4(lo, hi, 0xee); // lo2 lo3 hi2 hi3 = b0 b2 b1 b3
        lo = batch(_mm512_shuffle_f32x4(t, t, 0xd8));        // quarters 0 2 1 3 of t
        hi = batch(_mm512_shuffle_f32x4(u, u, 0xd8));
        return;
    }
#endif
    to_pair_order<S>(lo, hi); // AVX2: the swap of the middle 128-bit halves is its own inverse
}

// ---- bf16 and f16 <-> fp32 arrays ---------------------------------------------------------------
// Widening is exact: bf16 is the top half of a float (a 16-bit shift), f16 goes through
// vcvtph2ps. Narrowing rounds to nearest even: f16 by vcvtps2ph (immediate 0: round to nearest,
// whatever MXCSR says); bf16 by integer arithmetic, x + 0x7fff + (bit 16 of x), then the top
// half, with a NaN kept a NaN by setting its quiet bit (the rounding carry would turn a NaN
// with a low payload into infinity). Tails go through the scalar conversions of attn.core.

inline void widen(const bf16* src, float* dst, std::size_t n) {
    std::size_t i = 0;
#if XSIMD_WITH_AVX2
    for (; i + 8 <= n; i += 8) {
        const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
        _mm256_storeu_ps(dst + i, _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16)));
    }
#endif
    for (; i < n; ++i) dst[i] = float(src[i]);
}

inline void widen(const f16* src, float* dst, std::size_t n) {
    std::size_t i = 0;
#if defined(__F16C__)
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i))));
#endif
    for (; i < n; ++i) dst[i] = float(src[i]);
}

inline void widen(const float* src, float* dst, std::size_t n) { std::memcpy(dst, src, n * sizeof(float)); }

/// int8 cache rows (the row's scale not applied): a batch at a time by the section's widen, the
/// tail element by element.
inline void widen(const std::int8_t* src, float* dst, std::size_t n) {
    std::size_t i = 0;
    for (; i + lanes <= n; i += lanes) widen(src + i).store_unaligned(dst + i);
    for (; i < n; ++i) dst[i] = float(src[i]);
}

inline void narrow(const float* src, bf16* dst, std::size_t n) {
    std::size_t i = 0;
#if XSIMD_WITH_AVX2
    const __m256i one = _mm256_set1_epi32(1), half = _mm256_set1_epi32(0x7fff);
    const __m256i abs_mask = _mm256_set1_epi32(0x7fffffff), inf = _mm256_set1_epi32(0x7f800000);
    const __m256i quiet = _mm256_set1_epi32(0x00400000);
    for (; i + 8 <= n; i += 8) {
        const __m256i x = _mm256_castps_si256(_mm256_loadu_ps(src + i));
        const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(x, 16), one);
        __m256i r = _mm256_add_epi32(x, _mm256_add_epi32(half, lsb));
        const __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(x, abs_mask), inf);
        r = _mm256_srli_epi32(_mm256_blendv_epi8(r, _mm256_or_si256(x, quiet), nan), 16);
        // 32 -> 16 bits: packus works within 128-bit lanes; the permute joins the two halves
        const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(r, r), 0xd8);
        _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), _mm256_castsi256_si128(packed));
    }
#endif
    for (; i < n; ++i) dst[i] = bf16(src[i]);
}

inline void narrow(const float* src, f16* dst, std::size_t n) {
    std::size_t i = 0;
#if defined(__F16C__)
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), _mm256_cvtps_ph(_mm256_loadu_ps(src + i), 0));
#endif
    for (; i < n; ++i) dst[i] = f16(src[i]);
}

inline void narrow(const float* src, float* dst, std::size_t n) { std::memcpy(dst, src, n * sizeof(float)); }

/// Whether this CPU has AVX512_BF16 (vdpbf16ps), asked at run time -- and AVX512DQ, whose vreduceps
/// the bf16 core's exp2 uses (exp2_nonpos_zmm; every CPU with AVX512_BF16 so far has it).
inline bool cpu_has_avx512_bf16() { return __builtin_cpu_supports("avx512bf16") && __builtin_cpu_supports("avx512dq"); }

/// Whether this CPU has AMX's bf16 tiles (tdpbf16ps), asked at run time.
inline bool cpu_has_amx_bf16() { return __builtin_cpu_supports("amx-tile") && __builtin_cpu_supports("amx-bf16"); }

/// Whether this process may use AMX's tile data: Linux hands it out on request, once a process
/// (arch_prctl ARCH_REQ_XCOMP_PERM for XFEATURE_XTILEDATA, 18), and an AMX instruction without
/// it is a fault.
inline bool amx_granted() {
    static const bool granted = cpu_has_amx_bf16() && syscall(SYS_arch_prctl, 0x1023, 18) == 0;
    return granted;
}

/// AMX's tiles on this thread configured as the bf16 core and attn.peak's probe use them: palette
/// 1, tiles 0-7 each 16 rows of 64 bytes (16 fp32, or 32 bf16 as 16 pairs); amx_end releases them.
/// The process must hold the tile data (amx_granted).
[[gnu::target("amx-tile,amx-bf16")]] inline void amx_begin() {
    struct alignas(64) tile_config {
        std::uint8_t palette = 1, start_row = 0, reserved[14] = {};
        std::uint16_t colsb[16] = {64, 64, 64, 64, 64, 64, 64, 64};
        std::uint8_t rows[16] = {16, 16, 16, 16, 16, 16, 16, 16};
    };
    static const tile_config config;
    _tile_loadconfig(&config);
}

[[gnu::target("amx-tile,amx-bf16")]] inline void amx_end() { _tile_release(); }

/// `iters` rounds of `Chains` independent FMA chains acc = acc a + b on the FMA batch (attn.peak's
/// FMA probe, and bf16_dot_over_fma). acc converges towards b / (1 - a) = 1, so values stay normal
/// (no denormal slow path) and finite. Returns a sum of the chains, which the caller keeps, so the
/// loop cannot be deleted. Hiding the FMA latency needs (FMA ports) x (latency) chains in flight:
/// 2 x 4 = 8 on Zen cores, 2 x 4-5 on Intel's; attn.peak tries 8, 12 and 16.
template <int Chains>
float fma_chains(std::size_t iters, float seed) {
    fma_batch acc[Chains];
    for (int i = 0; i < Chains; ++i) acc[i] = fma_batch(seed + 0.001f * float(i));
    const fma_batch a(0.9999f), b(0.0001f);
    for (std::size_t it = 0; it < iters; ++it) {
#pragma unroll
        for (int i = 0; i < Chains; ++i) acc[i] = fma(acc[i], a, b);
    }
    fma_batch s = acc[0];
    for (int i = 1; i < Chains; ++i) s += acc[i];
    return xsimd::hadd(s);
}

/// The FLOPs of one step of one fma_chains chain: an FMA on the FMA batch, 2 a lane.
inline constexpr double fma_step_flop = 2.0 * double(fma_batch::size);

/// Chains of bf16_dot_chains, and the FLOPs of one of its steps (vdpbf16ps zmm: two products and
/// their two additions in each of 16 fp32 lanes).
inline constexpr int bf16_dot_chain_count = 16;
inline constexpr double bf16_dot_step_flop = 64.0;

/// `iters` rounds of 16 independent vdpbf16ps chains, acc += a0 b0 + a1 b1 per fp32 lane, with every
/// bf16 operand 2^-30: each product, 2^-60, is a normal fp32 number far below the half ulp of acc
/// (about 1), so acc stays put and no denormal or infinity can slow the loop. Compiled for
/// AVX512_BF16 whatever -march is; call it only where the CPU has it (cpu_has_avx512_bf16).
#if defined(__x86_64__)
[[gnu::target("avx512f,avx512bf16")]] inline float bf16_dot_chains(std::size_t iters, float seed) {
    __m512 acc[bf16_dot_chain_count];
    for (int i = 0; i < bf16_dot_chain_count; ++i) acc[i] = _mm512_set1_ps(seed + 0.001f * float(i));
    const __m512bh a = (__m512bh)_mm512_set1_epi16(0x3080); // 2^-30 in bf16
    for (std::size_t it = 0; it < iters; ++it) {
#pragma unroll
        for (int i = 0; i < bf16_dot_chain_count; ++i) acc[i] = _mm512_dpbf16_ps(acc[i], a, a);
    }
    __m512 s = acc[0];
    for (int i = 1; i < bf16_dot_chain_count; ++i) s = _mm512_add_ps(s, acc[i]);
    return _mm512_reduce_add_ps(s);
}
#endif

/// vdpbf16ps's FLOP rate over the fp32 FMA's on one core of this CPU, 0 where it has no AVX512_BF16:
/// bf16_dot_chains against fma_chains<16>, 4096 rounds each (tens of microseconds), seven alternating
/// runs, the fastest of each. Measured once, at first use. attn.peak's probes time the same loops
/// on every thread count: the Zen 5 of results/reference/zen5-2vcpu-2026-11-29 gives about 2 (525
/// against 260 GFLOP/s), the H200 machine's Xeon about 0.47 (81 against 172).
inline double bf16_dot_over_fma() {
#if defined(__x86_64__)
    static const double ratio = [] {
        if (!cpu_has_avx512_bf16()) return 0.0;
        constexpr std::size_t iters = 4096;
        constexpr int fma_chain_count = 16;
        using clock = std::chrono::steady_clock;
        double fma_s = 1e30, dot_s = 1e30;
        float sink = 0;
        for (int r = 0; r < 7; ++r) {
            auto t0 = clock::now();
            sink += fma_chains<fma_chain_count>(iters, 1.0f + 0.01f * float(r));
            fma_s = std::min(fma_s, std::chrono::duration<double>(clock::now() - t0).count());
            t0 = clock::now();
            sink += bf16_dot_chains(iters, 1.0f + 0.01f * float(r));
            dot_s = std::min(dot_s, std::chrono::duration<double>(clock::now() - t0).count());
        }
        asm volatile("" : : "r"(&sink) : "memory");
        const double fma_flop = fma_step_flop * double(fma_chain_count) * double(iters);
        const double dot_flop = bf16_dot_step_flop * double(bf16_dot_chain_count) * double(iters);
        return (dot_flop / std::max(dot_s, 1e-9)) / (fma_flop / std::max(fma_s, 1e-9));
    }();
    return ratio;
#else
    return 0.0;
#endif
}

/// How the bf16 core forms Q K^T and P V (attn.kernels:bf16dot): widened to fp32 on the fp32
/// FMAs, on AVX512_BF16's vdpbf16ps, or on AMX tiles (tdpbf16ps).
enum class bf16_engine { convert, dot, amx };

/// What this CPU offers the bf16 kernels, and the environment's ATTNBENCH_BF16 (empty: unset).
struct bf16_means {
    bool avx512_bf16 = false; ///< vdpbf16ps (cpu_has_avx512_bf16)
    bool amx = false;         ///< AMX-BF16 with the tile data granted (amx_granted)
    bool amx_on_cpu = false;  ///< AMX-BF16 in the CPU's flags (cpu_has_amx_bf16)
    double dot_over_fma = 0;  ///< bf16_dot_over_fma
    std::string env;
};

/// vdpbf16ps pays where it gives at least the fp32 FMA's FLOPs a core: then a bf16 kernel on it
/// does the same products in fewer instructions than widening to fp32 (no conversions either).
/// The Zen 5's 2x is well above, the Xeon's 0.47x well below: there the fp32 path took 1.03-1.52x
/// less time for a bf16 cache's decode step (results/reference/xeon-h200-host-2026-11-29, ab_*).
inline bool bf16_dots_pay(const bf16_means& m) { return m.avx512_bf16 && m.dot_over_fma >= 1.0; }

/// The bf16 core's engine for `m`: ATTNBENCH_BF16 (convert, dot or amx) where set -- to compare them
/// on one machine; one the CPU lacks is an error -- else AMX where the CPU has it and Linux grants
/// it, vdpbf16ps where it pays (bf16_dots_pay), else convert.
inline bf16_engine bf16_engine_for(const bf16_means& m) {
    if (m.env.empty()) return m.amx ? bf16_engine::amx : bf16_dots_pay(m) ? bf16_engine::dot : bf16_engine::convert;
    if (m.env == "convert") return bf16_engine::convert;
    if (m.env == "dot") {
        require(m.avx512_bf16, "ATTNBENCH_BF16=dot: this CPU has no AVX512_BF16 (vdpbf16ps)");
        return bf16_engine::dot;
    }
    if (m.env == "amx") {
        require(m.amx_on_cpu, "ATTNBENCH_BF16=amx: this CPU has no AMX-BF16");
        require(m.amx, "ATTNBENCH_BF16=amx: Linux refused this process AMX's tile data (arch_prctl)");
        return bf16_engine::amx;
    }
    throw error("ATTNBENCH_BF16='" + m.env + "' is not one of convert, dot, amx");
}

/// Whether a bf16 cache's decode steps may take vdpbf16ps for `m` (attn.kernels:decode asks, with
/// its shapes): where the core's engine is dot, never where it is convert, and beside AMX (which
/// decode's one query row cannot fill) where vdpbf16ps pays.
inline bool decode_bf16_dots_for(const bf16_means& m) {
    switch (bf16_engine_for(m)) {
    case bf16_engine::dot:
        return true;
    case bf16_engine::amx:
        return bf16_dots_pay(m);
    case bf16_engine::convert:
        break;
    }
    return false;
}

/// This process's bf16_means: the CPU's flags, the measured ratio (where there is a vdpbf16ps to
/// time), and ATTNBENCH_BF16.
inline const bf16_means& bf16_means_here() {
    static const bf16_means m = [] {
        bf16_means r;
        r.avx512_bf16 = cpu_has_avx512_bf16();
        r.amx_on_cpu = cpu_has_amx_bf16();
        r.amx = amx_granted();
        r.dot_over_fma = bf16_dot_over_fma();
        const char* env = std::getenv("ATTNBENCH_BF16");
        r.env = env ? env : "";
        return r;
    }();
    return m;
}

/// The bf16 core's engine in this process (bf16_engine_for on bf16_means_here).
inline bf16_engine bf16_engine_here() {
    static const bf16_engine e = bf16_engine_for(bf16_means_here());
    return e;
}

/// Whether this process's bf16 decode steps may take vdpbf16ps (decode_bf16_dots_for).
inline bool decode_bf16_dots_here() {
    static const bool d = decode_bf16_dots_for(bf16_means_here());
    return d;
}

/// How the kernels compute in bf16 on this CPU, one line for the results' metadata.
inline std::string bf16_path() {
    // the words only (the same in every run that chose the same); the measured ratio is the
    // metadata's bf16_dot_over_fma (bf16_dot_over_fma_text)
    const bf16_means& m = bf16_means_here();
    // decode's dot products need this build's AVX-512 decode core (bf16_dots<bf16>) as well
    const std::string decode =
        decode_bf16_dots_here() && bf16_dots<bf16>::available
            ? "decode steps: the scores on vdpbf16ps where 2 to 16 query heads share a key/value head (the queries "
              "rounded to bf16), and P V there where d_v is a multiple of 64 (the weights rounded to bf16), fp32 FMA "
              "on the widened cache otherwise"
            : "decode steps: fp32 FMA on the widened cache";
    const std::string rest =
        ", P rounded to bf16, fp32 softmax and accumulation); projections widen bf16 to fp32, fp32 FMA; " + decode;
    switch (bf16_engine_here()) {
    case bf16_engine::amx:
        return "amx: the tiled core's Q K^T and P V on AMX tiles (tdpbf16ps" + rest;
    case bf16_engine::dot:
        return "vdpbf16ps: the tiled core's Q K^T and P V as bf16 dot products (AVX512_BF16" + rest;
    case bf16_engine::convert:
        break;
    }
    const char* why = !m.avx512_bf16   ? "no avx512_bf16 on this CPU"
                      : !m.env.empty() ? "ATTNBENCH_BF16=convert"
                                       : "vdpbf16ps gives fewer FLOPs than the fp32 FMA here: bf16_dot_over_fma";
    return std::string("convert: bf16 widened to fp32 while packing, fp32 FMA (") + why + ")";
}

/// The measured bf16_dot_over_fma, one line for the results' metadata (a measurement: it moves a
/// little from run to run, where bf16_path's words do not).
inline std::string bf16_dot_over_fma_text() {
    const bf16_means& m = bf16_means_here();
    if (!m.avx512_bf16) return "none: no avx512_bf16 on this CPU";
    char text[128];
    std::snprintf(text, sizeof text,
                  "%.2f (vdpbf16ps FLOPs over fp32 FMA FLOPs on one core, measured at start; >= 1: vdpbf16ps pays)",
                  m.dot_over_fma);
    return text;
}

/// How the kernels compute in f16, one line for the results' metadata.
inline const char* f16_path() {
#if defined(__F16C__)
    return "convert: f16 widened to fp32 while packing (F16C vcvtph2ps), fp32 FMA";
#else
    return "convert: f16 widened to fp32 while packing (scalar, no F16C in this build), fp32 FMA";
#endif
}

} // namespace isa
} // namespace attn::kernels
