// attn.kernels:decode -- the attention core for one query row per sequence (n_q = 1: a decode
// step over a key/value cache). The cache is read in place and streamed once; no GEMM panels.
//  - Work item: (sequence b, key/value head g, key chunk c). Its R = H/G query heads share g, so
//    each K and V tile, read from memory once, serves all R heads from L1.
//  - Lanes: a batch holds RB heads x C dims (RB = R rounded up to a power of two, at most lanes;
//    RB * C = lanes), so a score costs d_head/C FMAs whether R is 1 (dot products), 4 (GQA) or
//    16 (MQA): no lane is idle and the step stays bandwidth-bound (decode_item). R = lanes (GQA 2
//    at H 16 on AVX2) goes as two blocks of lanes/2 heads, C = 2, not one block with the heads in
//    the lanes: the two blocks share each broadcast key element (one load per two FMAs, where one
//    block of 8 heads took one per FMA), and P V keeps the value rows in the lanes. An f16 cache
//    at R = lanes / 2 on AVX-512 goes likewise as two blocks of 4, C = 4 (decode_shape::of_type).
//  - P V: with R < lanes (C > 1) a pass holds a few heads' output batches in registers
//    (decode_pv); with the heads in the lanes (C = 1: MQA, MLA's absorbed form) one accumulator is
//    one output dim of every head, so any value width (MLA's d_c = 512) runs as a loop over passes
//    of a few dims in registers (decode_pv_heads), one broadcast FMA per cached value element and
//    block of heads; blocks go in pairs, scores and P V alike, so each broadcast key or value
//    element feeds two FMAs (heads_blocking sizes the passes to the register file). The value
//    tile is copied (a narrow one widened) once, in order, into an fp32 tile, so that each
//    broadcast is one load from L1 and the cache is streamed, not walked once per pass.
//  - Overlap: the rows decode_prefetch keys ahead are prefetched into L2 (not L1: the current and
//    next K and V tiles together exceed it), across chunk boundaries, their lines requested evenly
//    over the tile's work (paced_lines): a burst of requests fills the core's miss
//    buffers and leaves them idle for the rest. Value lines go over every key step of every P V
//    pass; key lines over every chunk step of the scores where 1 < C < lanes, one row's at each
//    key where C = lanes (MHA; an int8 cache's MK rows at a time), MK rows at a time with the
//    heads in the lanes (spread measured no better).
//    Items go to threads in contiguous runs (guided schedule), so a thread's next item
//    continues the keys it streams.
//  - Determinism: keys are split into chunks that depend on n_kv only; each chunk leaves
//    (max m, sum l, unnormalised acc) per head and a final pass combines them in chunk order,
//    out = sum_c 2^(m_c - M) acc_c / sum_c 2^(m_c - M) l_c (base 2, as the scores), so two
//    threads can share one head (MQA at batch 1) and every thread count gives the same bytes.
//  - Narrow caches (attn.core:kv: bf16, f16, int8 with a scale per row): memory carries the
//    narrow bytes and all arithmetic after the load is fp32, int8's scale multiplying the key's
//    score and the value's weight. The cache is read in place: MHA (C = lanes) widens K and V
//    rows in registers; with R > 1 (C < lanes) each key element feeds one FMA per C lanes, so
//    the keys are widened MK at a time into an L1-resident block (2 KiB at d_head 64), once for
//    every block of heads (the scores of all blocks are taken before the softmax), and
//    broadcast from there, and V rows are widened in registers once per pass of up to 8 heads
//    (decode_pv's blocking for narrow rows keeps its accumulators in the register file: MQA at
//    H 16, two blocks of 8, widens each value row twice, which measured faster than widening it
//    once into an fp32 tile: decode_shape::values_in_tile).
//    Widening whole 64-key tiles instead (two 16 KiB fp32 tiles) overflows a 32 KiB L1 together
//    with the cache's own lines.
//  - An int8 cache on AVX512-VNNI skips widening to fp32 (isa::int8_dots): scores with the
//    queries in 16-bit fixed point against key bytes sign-extended to 16 bits (vpdpwssd: MHA
//    reads the rows in place, 1 < C < lanes a block of 16-bit rows and pairs of dims broadcast,
//    score_heads_pairs: half the FMAs' count; with one block the rows read in place as byte
//    quads against the queries' two byte planes, vpdpbusd, no 16-bit rows: score_heads_quads;
//    against the 16-bit rows, Zen 5, d_model 1024, H 16, 3 alternating rounds: GQA 4 0.952x the
//    time in cache on 1 thread, 0.930x at L 1M on 2 threads, 0.966x at batch 8 (L 128k), 3 of 3
//    each; GQA 2 0.89x in cache, 0.89x at L 2M and 0.90x at batch 8 (L 256k), 3 of 3; GQA 8
//    0.91x in cache (3 of 3), 0.96x at L 512k (2 of 3), 0.98x at batch 8 (L 64k, 3 of 3)), and
//    where C >= 4 P V with the weights in 16-bit
//    fixed point per tile and head, two byte planes against the value bytes four keys at a time
//    (vpdpbusd, decode_pv_i8); where C = 2 (8 heads a block: GQA 2, MQA at H 16), whose four keys
//    of a head span two score groups, the weights in signed 16-bit fixed point, two keys to a
//    dword, against two value rows sign-extended to 16-bit pairs (vpdpwssd, decode_pv_i16).
//    Half a step of each is charged in the checker's bound (half_roundings' query_top and
//    weight_top; decode_int8_fixed_point says where). In cache, 1 thread, d_model 1024, H 16:
//    MHA 0.68x, GQA 8 0.82x, GQA 4 0.84x, GQA 2 0.88x, MQA 0.95x the time of fp32 arithmetic on
//    the widened values; decode_pv_i16 against fp32 P V then (Zen 5, 3 alternating rounds, 3 of 3
//    each): GQA 2 0.871x, MQA 0.847x in cache; at L 4M (GQA 2) and 8M (MQA) 0.860x on 1 thread,
//    0.879x / 0.845x on 2; batch 8 (L 512k / 1M, 2 threads) 0.897x / 0.857x.
//  - A bf16 cache on AVX512_BF16 with 1 < C < lanes (isa::bf16_dots, decode_bf16_dot_scores):
//    the scores take the key rows as stored, C pairs of dims broadcast, against each head's scaled
//    query rounded to bf16 (rearrange_queries packs the pairs; score_heads_pairs, as int8's): no
//    widened block, half the products' instructions. The rounded queries are declared
//    (half_roundings::queries) and charged. In cache, 1 thread, d_model 1024, H 16 (Zen 5): MQA
//    0.83x, GQA 2 0.77x, GQA 4 0.91x, GQA 8 0.89x the time of widening. Where d_v is whole 64-dim
//    groups P V takes them too (decode_pv_bf16, decode_bf16_dot_values): the weights rounded to
//    bf16 in pairs of keys (declared: half_roundings::weights), two value rows interleaved a dim
//    at a time, one vdpbf16ps per two keys and 16 dims of a head where the fp32 path took two
//    FMAs and the rows' widening. Against fp32 P V (Zen 5, 3 alternating rounds): in cache, 1
//    thread, MQA 0.785x, GQA 2 0.844x, GQA 4 0.943x (3 of 3 each), GQA 8 0.953x; MQA at L 4M, 1
//    thread 0.829x, 2 threads 0.807x, at batch 8 (L 512k) 0.896x (3 of 3 each); the GQA cells
//    at DRAM sizes level within the noise (memory-bound).
//    Only where vdpbf16ps gives at least the fp32 FMA's FLOPs (isa::decode_bf16_dots_here): on the
//    H200 machine's Xeon it gives 0.47x, and there the fp32 path took 1.03-1.52x less time a step
//    (16 threads, decode-roof-xl's bf16 cells; results/reference/xeon-h200-host-2026-11-29).
// Rounding: one extra rescale per chunk of >= 256 keys, well inside attn.check's 2u per key tile.
// Extra memory: per thread one tile of scores per block of heads, plus the rearranged queries
// (B x H x d_head floats, heads padded to whole blocks; once per step) and partials of
// B x G x chunks x R x (d_head + 2) floats, chunks <= 16: O(batch x d_model)
// for any context; the buffers are thread_local and grow only, so steady-state steps allocate
// nothing.
// Measured: MQA, batch 8, L = 64k, 21 ms a step without the L2 prefetch, 14 ms with it.
// Measured: MHA, d_head 64, L = 64k, 1 thread, core over an int8 cache 13.9 ms against fp32's
// 42.5 ms (3.06x; bf16 20.4 ms, 2.08x); with the prefetch an out-of-line call (and the P V
// accumulators spilled around it) int8 took 20.3 ms (2.37x).
// Measured: MQA, d_model 1024, H 16, batch 1, L = 16k, 2 threads, % of the FMA roof: f32 / bf16 /
// int8 32 / 34 / 29 % with 16 heads' P V accumulators on AVX2's 16 registers (8 spilled, stored and
// reloaded every key) and one block of heads at a time; 58 / 53 / 53 % with the pairs of blocks.
// Measured: d_model 1024, H 16, batch 8, L = 64k, 1 thread, core over bf16 / f16 / int8 caches:
// MQA 53 / 49 / 53 ms and GQA G=4 91 / 83 / 88 ms, against 72 / 57 / 76 and 93 / 118 / 95 ms
// with the widened tiles (medians of 3 on a noisy 2-core VM: +-10-30 % between runs).
module;
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <xsimd/xsimd.hpp>
export module attn.kernels:decode;
import :isa;
import :gemm;
import :softmax;
import :decode_parts;
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
/// batch, in blocks of RB (R rounded up to a power of two, at most lanes; R = lanes in two blocks
/// of lanes / 2, so that each broadcast key element feeds two FMAs), C = lanes / RB lanes each;
/// d the query/key width, dv the value width, dp dv padded to whole batches (the accumulators).
/// With `halves`, R = lanes / 2 goes as two blocks of lanes / 4 (C = 4) rather than one of
/// lanes / 2 (C = 2): each broadcast key chunk feeds two FMAs (of_type says for which caches).
struct decode_shape {
    std::size_t rb = 1, c = lanes, blocks = 1, rows = 1, d = 0, dv = 0, dp = 0;
    inline explicit decode_shape(const problem& p, bool halves = false) {
        const std::size_t r = p.heads / p.kv_heads;
        rb = r > lanes ? lanes : r == lanes ? lanes / 2 : std::bit_ceil(r);
        if (halves && r == lanes / 2 && lanes >= 16) rb = lanes / 4;
        c = lanes / rb;
        blocks = (r + rb - 1) / rb;
        rows = blocks * rb;
        d = p.qk_dim();
        dv = p.v_dim();
        dp = round_up(dv, lanes);
    }
    /// The shape decode_core_kv<S> runs p in: an f16 cache's keys, widened into an fp32 block,
    /// at R = lanes / 2 (GQA 2 at H 16 on AVX-512) in two blocks of 4 heads: against one block of
    /// 8 (Zen 5, d_model 1024, 3 alternating rounds, 3 of 3 each) 0.965x the time in cache on 1
    /// thread (L 16k), 0.973x at L 2M on 2 threads, 0.964x at batch 8 (L 256k). Not fp32, read
    /// in place (0.82x in cache, but 1.04x at batch 8, L 256k: 3 of 3), nor int8 or bf16 on
    /// their dot products, whose one block of 8 takes byte quads or vdpbf16ps pairs; R = 4 as
    /// two blocks of 2 measured slower (f16 1.06x in cache).
    template <class S>
    static decode_shape of_type(const problem& p) {
        return decode_shape(p, std::is_same_v<S, f16>);
    }
    /// rearranged queries: fp32, then (1 < C < lanes) an int8 cache's 16-bit pairs or byte planes
    /// (pairs_at), each block's lane scales (pair_scales_at) and the planes' offsets
    /// (quad_bias_at), which rearrange_queries fills where decode_int8_dot_scores
    inline std::size_t qs_floats() const {
        return std::max(blocks * (d / c) * lanes, lanes) +
               (c > 1 && c < lanes ? blocks * (d / (2 * c) + 2) * lanes : 0);
    }
    inline std::size_t pairs_at() const { return std::max(blocks * (d / c) * lanes, lanes); }
    inline std::size_t pairs_stride() const { return d / (2 * c) * lanes; } ///< a block's pairs (int32 slots)
    inline std::size_t pair_scales_at() const { return pairs_at() + blocks * pairs_stride(); }
    inline std::size_t quad_bias_at() const { return pair_scales_at() + blocks * lanes; } ///< int32 slots
    inline std::size_t s_floats() const { return decode_tile / c * lanes; } ///< one tile's scores, one block
    inline std::size_t ml_floats() const { return 2 * blocks * lanes; }     ///< running max and sum
    /// partial results of one item: `rows` outputs of dp, then `rows` maxima and sums (aligned)
    inline std::size_t partial_floats() const { return round_up(rows * (dp + 2), lanes); }
    /// Whether P V reads a tile's values from the thread's fp32 tile, copied (widened if narrow)
    /// once a tile: with the heads in the lanes (C = 1) only. With C > 1 decode_pv reads the rows
    /// in place, a narrow row widened in registers once a pass: MQA at H 16 on AVX-512 (two blocks
    /// of 8 heads, a pass each) took the tile over a narrow cache until the passes held 8 heads;
    /// reading in place then measured 0.88-0.91x its time in cache (f16, bf16, int8; 1 thread) and
    /// 0.87-0.96x at L 4M (batch 1) and 512k (batch 8) on 2 threads (Zen 5, 3 of 3 but bf16 at
    /// batch 1, 2 of 3).
    inline bool values_in_tile() const { return c == 1; }
    /// Whether a narrow cache's keys go into decode_item's widened block (C < lanes) in
    /// isa::widen_pair's order, as the pairs come (one load and two unpacks a pair for bf16,
    /// where one at a time is a load, an extend and a shift a batch), the queries permuted to
    /// match (rearrange_queries): where d is whole register pairs, as the unrolled widening
    /// takes it (d = DC x lanes, DC = decode_register_batches even).
    template <class S>
    bool keys_in_pair_order() const {
        return c < lanes && whole_pairs<S>(d);
    }
    /// Whether rows of `width` in S widen in isa::widen_pair's order and are whole pairs of the
    /// register blocks: DC = decode_register_batches even and width = DC x lanes, as the
    /// unrolled widening and decode_pv's blocks of DC batches take them.
    template <class S>
    bool whole_pairs(std::size_t width) const {
        const std::size_t dc = std::min<std::size_t>(std::min(d, dv) / lanes, 8);
        return isa::pair_reorders<S> && width == dc * lanes && dc % 2 == 0;
    }
};

/// Extra memory of decode_core on `threads` threads, in bytes: an upper bound over the cache types
/// (a narrow cache's widened key block of at most 16 keys included, an int8 cache's 16-bit one of
/// 8 (score_heads_pairs), and the fp32 value tile where decode_shape::values_in_tile), and over
/// the shapes decode_shape::of_type gives them.
inline std::size_t decode_scratch_bytes(const problem& p, int threads) {
    auto bytes = [&](const decode_shape& sh) {
        const std::size_t per_thread = sh.blocks * sh.s_floats() + sh.ml_floats() + sh.blocks * lanes + 16 * sh.d +
                                       lanes + 4 * sh.d + (sh.values_in_tile() ? decode_tile * sh.dv : 0);
        const std::size_t partials =
            p.batch * p.kv_heads * (split_keys(p.n_kv).chunks * sh.partial_floats() + sh.qs_floats());
        return sizeof(float) * (per_thread * std::size_t(std::max(threads, 1)) + partials);
    };
    return std::max(bytes(decode_shape(p)), bytes(decode_shape(p, true)));
}

/// Whether decode_core_kv<std::int8_t> scores p's int8 cache with integer products (isa::
/// int8_dots: AVX512-VNNI): one query head per key/value head (C = lanes) with d_qk a multiple of
/// 32 up to 128 kept in registers, or 2 to 8 heads' dims in the lanes (1 < C < lanes) with d_qk a
/// multiple of 32. Its queries are then in 16-bit fixed point (decode_int8_fixed_point).
inline bool decode_int8_dot_scores(const problem& p) {
    if constexpr (!isa::int8_dots<std::int8_t>::available) {
        (void)p;
        return false;
    } else {
        const decode_shape sh(p);
        const std::size_t dc = std::min<std::size_t>(std::min(sh.d, sh.dv) / lanes, 8);
        if (sh.c > 1 && sh.c < lanes) return sh.d % 32 == 0; // C 16-bit pairs a chunk, broadcast
        return sh.c == lanes && sh.d % 32 == 0 && sh.d == dc * lanes && sh.d <= isa::int8_dots<std::int8_t>::max_dim;
    }
}

/// Whether those integer scores take byte quads (isa::int8_dots::quads, score_heads_quads: the
/// key rows read in place, no 16-bit rows): 2 to 8 query heads a key/value head in one block
/// (1 < C < lanes: GQA 8, 4 and 2 at H 16 on AVX-512), d_qk a multiple of 32. Its queries' fixed
/// point then tops at int8_dots::quad_top (measured: the header). Two blocks (MQA at H 16) keep
/// the 16-bit rows: two blocks' two planes of accumulators would not fit the registers.
inline bool decode_int8_quad_scores(const problem& p) {
    const decode_shape sh(p);
    return decode_int8_dot_scores(p) && sh.c > 1 && sh.c < lanes && sh.blocks == 1;
}

/// Whether its P V takes integer products (decode_pv_i8): up to 4 query heads per key/value head
/// (C >= 4, four keys of a head to a dword of weight bytes), d_v a multiple of 64. Its weights are
/// then in 16-bit fixed point.
inline bool decode_int8_dot_values(const problem& p) {
    if constexpr (!isa::int8_dots<std::int8_t>::available) {
        (void)p;
        return false;
    } else {
        const decode_shape sh(p);
        return sh.c >= 4 && sh.dv % 64 == 0;
    }
}

/// Whether its P V takes 16-bit integer products on pairs of keys (decode_pv_i16): 8 query heads
/// a block (C = 2: GQA with R = 8, MQA at 16 heads), d_v a multiple of 32. Its weights are then
/// in 16-bit fixed point (top isa::int8_dots::weight_top16).
inline bool decode_int8_pair_values(const problem& p) {
    if constexpr (!isa::int8_dots<std::int8_t>::available) {
        (void)p;
        return false;
    } else {
        const decode_shape sh(p);
        return sh.c == 2 && sh.dv % 32 == 0;
    }
}

/// Whether decode_core_kv<bf16> scores p's bf16 cache with bf16 dot products (isa::bf16_dots,
/// where isa::decode_bf16_dots_here: AVX512_BF16 at least as fast as the fp32 FMA, or
/// ATTNBENCH_BF16=dot; never with ATTNBENCH_BF16=convert): blocks of 2
/// to 8 heads' dims in the lanes (1 < C < lanes: 2 to 16 query heads a key/value head at 16 lanes),
/// d_qk in whole pair chunks (2C dims). Its scaled queries are then rounded to bf16
/// (half_roundings::queries, which the checker charges).
inline bool decode_bf16_dot_scores(const problem& p) {
    if constexpr (!isa::bf16_dots<bf16>::available) {
        (void)p;
        return false;
    } else {
        const decode_shape sh(p);
        return sh.c > 1 && sh.c < lanes && sh.d % (2 * sh.c) == 0 && isa::decode_bf16_dots_here();
    }
}

/// Whether its P V takes bf16 dot products too (decode_pv_bf16): where the scores do
/// (decode_bf16_dot_scores) and d_v is a multiple of 64. Its weights are then rounded to bf16
/// (half_roundings::weights, which the checker charges).
inline bool decode_bf16_dot_values(const problem& p) { return decode_bf16_dot_scores(p) && p.v_dim() % 64 == 0; }

/// The fixed point of decode_core_kv<std::int8_t> on p where it takes integer products: the
/// integers a query row's largest |q_t| (decode_int8_dot_scores) and a tile's largest weight of
/// a head (decode_int8_dot_values: 65535, byte planes; decode_int8_pair_values: 32767) map to (attn::half_roundings'
/// query_top and weight_top, which the checker charges); zeros where it computes in fp32.
inline half_roundings decode_int8_fixed_point(const problem& p) {
    half_roundings r;
    if constexpr (isa::int8_dots<std::int8_t>::available) {
        if (decode_int8_dot_scores(p))
            r.query_top = decode_int8_quad_scores(p) ? isa::int8_dots<std::int8_t>::top_quads(p.qk_dim())
                                                     : isa::int8_dots<std::int8_t>::top(p.qk_dim());
        if (decode_int8_dot_values(p)) r.weight_top = isa::int8_dots<std::int8_t>::weight_top;
        if (decode_int8_pair_values(p)) r.weight_top = isa::int8_dots<std::int8_t>::weight_top16;
    }
    return r;
}

namespace detail {

/// Grow-only buffers, one set per thread, reused by every call.
struct decode_buffers {
    // cr: each block's rescale; kw: MK keys of a narrow cache, widened; vw: the value tile in
    // fp32 (decode_shape::values_in_tile)
    aligned_vector<float> qs, s, ml, cr, partials, kw, vw;
    aligned_vector<std::int16_t> kw16; ///< MK keys of an int8 cache, sign-extended (score_heads_pairs)
};

inline decode_buffers& decode_local() {
    static thread_local decode_buffers b;
    return b;
}

/// The queries of (sequence b, key/value head g) as decode_item reads them: qs[(blk*nch + ch)*lanes
/// + r*C + c] = scale * q_{blk*RB + r}[ch*C + c] (nch = d / C chunks of C dims, scale base2_scale:
/// the softmax in base 2, the chunks' maxima in the same units), zero for padding heads. Once
/// per (b, g) for all its key chunks (decode_core_dc): done per chunk, this scalar pass was ~6 %
/// of GQA 2's step at L 4k (16 chunks of 256 keys).
template <class S>
void rearrange_queries(const problem& p, const kv_core_io<S>& io, std::size_t b, std::size_t g, float* qs) {
    const decode_shape sh = decode_shape::of_type<S>(p);
    const std::size_t R = p.heads / p.kv_heads, C = sh.c, RB = sh.rb, nch = sh.d / C;
    const float scale = base2_scale(p);
    // the dim at position i of a key row in the widened block: pairs of batches as widen_pair
    // leaves them where the keys go in its order
    const bool paired = sh.keys_in_pair_order<S>();
    auto dim = [&](std::size_t i) {
        return paired ? i / (2 * lanes) * (2 * lanes) + isa::pair_element<S>(i % (2 * lanes)) : i;
    };
    for (std::size_t blk = 0; blk < sh.blocks; ++blk)
        for (std::size_t ch = 0; ch < nch; ++ch)
            for (std::size_t r = 0; r < RB; ++r) {
                const std::size_t h = blk * RB + r;
                float* dst = qs + (blk * nch + ch) * lanes + r * C;
                for (std::size_t c = 0; c < C; ++c)
                    dst[c] = h < R ? io.q.row(b, g * R + h, 0)[dim(ch * C + c)] * scale : 0.0f;
            }
    // the queries' pairs where the scores take products on pairs of dims (score_heads_pairs,
    // 1 < C < lanes): lane r*C + c of pair chunk t holds 16 bits of each of head r's dims 2(tC + c)
    // and 2(tC + c) + 1, the lower dim in the low half, as a key's 32-bit word holds them
    // (vpmovsxbw's int16 pairs of an int8 key, a bf16 key row as stored). An int8 cache's
    // (AVX512-VNNI): each head's scaled query in 16-bit fixed point, its largest |q| to
    // isa::int8_dots::top, each block's lane scales after the pairs; a bf16 cache's
    // (AVX512_BF16): each head's scaled query rounded to bf16 (nearest even).
    bool int8_pairs = false, bf16_pairs = false;
    if constexpr (isa::int8_dots<S>::available) int8_pairs = C > 1 && C < lanes && decode_int8_dot_scores(p);
    if constexpr (isa::bf16_dots<S>::available) bf16_pairs = decode_bf16_dot_scores(p);
    if (!int8_pairs && !bf16_pairs) return;
    const std::size_t d = sh.d, nch2 = d / (2 * C);
    // an int8 cache's scores on byte quads (decode_int8_quad_scores): the same 16-bit fixed point,
    // its top lower, laid out as two byte planes with the planes' offsets after the scales
    const bool quads = int8_pairs && decode_int8_quad_scores(p);
    const float top = float(quads ? isa::int8_dots<S>::top_quads(d) : isa::int8_dots<S>::top(d));
    for (std::size_t blk = 0; blk < sh.blocks; ++blk)
        for (std::size_t r = 0; r < RB; ++r) {
            const std::size_t h = blk * RB + r;
            const float* q = h < R ? io.q.row(b, g * R + h, 0) : nullptr;
            float qscale = 1.0f; // int8's fixed point: each unit of a pair this many of the scaled query
            if (int8_pairs) {
                float mx = 0.0f;
                for (std::size_t t = 0; q && t < d; ++t) mx = std::max(mx, std::abs(q[t] * scale));
                qscale = mx > 0.0f ? mx / top : 1.0f;
                for (std::size_t c = 0; c < C; ++c) qs[sh.pair_scales_at() + blk * lanes + r * C + c] = qscale;
            }
            const float inv = 1.0f / qscale;
            auto half = [&](std::size_t t) -> std::uint32_t {
                if (!q) return 0u;
                if (int8_pairs) return std::uint16_t(std::int16_t(std::lrint(q[t] * scale * inv)));
                return std::bit_cast<std::uint16_t>(bf16(q[t] * scale));
            };
            if (quads) {
                // lane r*C + c of quad chunk t: head r's dims 4(tC + c) .. 4(tC + c) + 3, q = 256 h + l,
                // the h bytes in plane chunk t, the l bytes in chunk nch4 + t; the lane's offset
                // 128 sum(q) over its dims
                const std::size_t nch4 = d / (4 * C);
                float* planes = qs + sh.pairs_at() + blk * sh.pairs_stride();
                for (std::size_t c = 0; c < C; ++c) {
                    std::int32_t bias = 0;
                    for (std::size_t t = 0; t < nch4; ++t) {
                        std::uint32_t hw = 0, lw = 0;
                        for (std::size_t e = 0; e < 4; ++e) {
                            const std::int32_t x = std::int16_t(half(4 * (t * C + c) + e));
                            const std::int32_t h = (x + 128) >> 8, l = x - 256 * h; // floor: l in [-128, 127]
                            hw |= std::uint32_t(std::uint8_t(std::int8_t(h))) << 8 * e;
                            lw |= std::uint32_t(std::uint8_t(std::int8_t(l))) << 8 * e;
                            bias += 128 * x;
                        }
                        std::memcpy(planes + t * lanes + r * C + c, &hw, sizeof hw);
                        std::memcpy(planes + (nch4 + t) * lanes + r * C + c, &lw, sizeof lw);
                    }
                    std::memcpy(qs + sh.quad_bias_at() + blk * lanes + r * C + c, &bias, sizeof bias);
                }
                continue;
            }
            for (std::size_t t = 0; t < nch2; ++t)
                for (std::size_t c = 0; c < C; ++c) {
                    const std::size_t i = t * C + c;
                    const std::uint32_t pair = half(2 * i) | half(2 * i + 1) << 16;
                    std::memcpy(qs + sh.pairs_at() + blk * sh.pairs_stride() + t * lanes + r * C + c, &pair,
                                sizeof pair);
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
/// product (C = lanes) and R >= lanes puts the heads in the lanes (C = 1). MK keys a score pass:
/// C, at least 8 (one accumulator chain a key: 8 chains cover 2 FMA ports x 4 cycles), 16 where
/// decode_item_for asks for more chains.
template <std::size_t C, std::size_t DC, class S, std::size_t MK = (C >= 8 ? C : 8)>
void decode_item(const problem& p, const kv_core_io<S>& io, std::size_t b, std::size_t g, std::size_t j0,
                 std::size_t j1, const float* qs, float* part) {
    constexpr std::size_t RB = lanes / C;
    const decode_shape sh = decode_shape::of_type<S>(p);
    const std::size_t R = p.heads / p.kv_heads, d = sh.d, dp = sh.dp, nch = d / C, tail = nch * C;
    // the d % C dims are scored below in scalar from the unscaled queries, scaled as
    // rearrange_queries scales the rest
    const float scale = base2_scale(p);
    auto& w = decode_local();
    grow(w.s, sh.blocks * sh.s_floats());
    grow(w.ml, sh.ml_floats());
    grow(w.cr, sh.blocks * lanes);
    alignas(64) float kk[lanes];
    for (std::size_t i = 0; i < lanes; ++i) kk[i] = float(i % C);
    const batch key_in_group = batch::load_aligned(kk), neg_inf(-std::numeric_limits<float>::infinity());
    std::fill(part, part + sh.rows * dp, 0.0f);
    for (std::size_t blk = 0; blk < sh.blocks; ++blk) {
        neg_inf.store_aligned(w.ml.data() + 2 * blk * lanes);
        batch(0.0f).store_aligned(w.ml.data() + (2 * blk + 1) * lanes);
    }
    // The cache is read in place in its own type (int8's row scales folded into the scores and
    // the weights).
    constexpr bool scaled = std::is_same_v<S, std::int8_t>;
    // C < lanes: each key element feeds one FMA per C lanes, so it is widened once, into the
    // L1-resident block kw (MK keys), rather than at every broadcast
    constexpr bool block = !std::is_same_v<S, float> && C < lanes;
    if constexpr (block) grow(w.kw, MK * tail + lanes);
    [[maybe_unused]] const bool keys_paired = sh.keys_in_pair_order<S>(); // as rearrange_queries
    const bool v_tile = sh.values_in_tile();
    if (v_tile) grow(w.vw, decode_tile * sh.dv);
    const std::size_t ks = io.k.data.row_stride, vs = io.v.data.row_stride;
    float* s = w.s.data();
    const std::size_t s_stride = sh.s_floats(); // one block's scores
    // an int8 cache on AVX512-VNNI (isa::int8_dots): with one query head (C = lanes) the scores
    // in integer products, the query quantized once per item (decode_int8_dot_scores); P V in
    // integer products where C >= 4 (decode_int8_dot_values)
    using dots = isa::int8_dots<S>;
    [[maybe_unused]] typename dots::query q16{};
    [[maybe_unused]] bool int8_scores = false, int8_values = false;
    if constexpr (dots::available && C == lanes) {
        int8_scores = decode_int8_dot_scores(p);
        if (int8_scores) q16 = dots::quantize(qs, d);
    }
    if constexpr (dots::available && C >= 4) int8_values = decode_int8_dot_values(p);
    [[maybe_unused]] bool int8_pair_values = false; // C = 2: P V on pairs of keys (decode_pv_i16)
    if constexpr (dots::available && C == 2) int8_pair_values = decode_int8_pair_values(p);
    // 1 < C < lanes: the keys sign-extended into 16-bit rows (kw16), scored against the queries'
    // 16-bit pairs (score_heads_pairs); each block's lane scales multiply its scores
    constexpr bool i16_keys = dots::available && C > 1 && C < lanes;
    [[maybe_unused]] bool int8_pairs = false;
    // ... or on byte quads, the key rows read in place (decode_int8_quad_scores)
    [[maybe_unused]] bool int8_quads = false;
    [[maybe_unused]] const std::int32_t* qp = nullptr;
    // either way, each block's query scale (a lane's head's) multiplies its integer scores
    [[maybe_unused]] batch query_scale[2] = {batch(q16.scale), batch(1.0f)};
    if constexpr (i16_keys) {
        int8_pairs = decode_int8_dot_scores(p);
        int8_quads = int8_pairs && decode_int8_quad_scores(p);
        if (int8_pairs) {
            if (!int8_quads) grow(w.kw16, MK * d);
            for (std::size_t blk = 0; blk < sh.blocks && blk < 2; ++blk)
                query_scale[blk] = batch::load_aligned(qs + sh.pair_scales_at() + blk * lanes);
        }
    }
    // a bf16 cache on AVX512_BF16 with 1 < C < lanes: the key rows in place against the queries'
    // bf16 pairs (score_heads_pairs on isa::bf16_dots), no widened block
    using bdots = isa::bf16_dots<S>;
    constexpr bool bf16_keys = bdots::available && C > 1 && C < lanes;
    [[maybe_unused]] bool bf16_pairs = false;
    [[maybe_unused]] bool bf16_values = false;
    if constexpr (bf16_keys) {
        bf16_pairs = decode_bf16_dot_scores(p);
        bf16_values = decode_bf16_dot_values(p);
    }
    // either engine's query pairs, as rearrange_queries packs them
    if (int8_pairs || bf16_pairs) qp = reinterpret_cast<const std::int32_t*>(qs + sh.pairs_at());
    for (std::size_t t0 = j0; t0 < j1; t0 += decode_tile) {
        const std::size_t n = std::min(decode_tile, j1 - t0), groups = (n + C - 1) / C;
        const S* k = io.k.data.row(b, g, t0);
        const S* v = io.v.data.row(b, g, t0);
        const float* ksc = nullptr;
        const float* vsc = nullptr;
        if constexpr (scaled) {
            ksc = io.k.scale.row(b, g, t0);
            vsc = io.v.scale.row(b, g, t0);
        }
        // the rows decode_prefetch keys ahead, up to the end of the head's keys, prefetched while
        // this tile is computed
        // (the same distance in bytes for a narrow cache: more keys ahead)
        constexpr std::size_t dist = decode_prefetch * sizeof(float) / sizeof(S);
        const std::size_t n_next = t0 + dist < p.n_kv ? std::min(n, p.n_kv - t0 - dist) : 0;
        auto ahead = [&](const kv_rows<S>& x) {
            if (!n_next) return next_rows{};
            return next_rows{reinterpret_cast<const char*>(x.data.row(b, g, t0 + dist)), x.data.row_stride * sizeof(S),
                             x.data.dim * sizeof(S), n_next};
        };
        const next_rows k_next = ahead(io.k), v_next = ahead(io.v);
        // 1 < C < lanes (GQA 2, 4 and 8, MQA at H 16 on AVX-512): the next tile's key lines
        // paced over every chunk step of the score passes (paced_lines), not asked for MK rows
        // at a time; their value lines likewise over every key step of every P V pass, not all
        // in the first. Pairs at 0.5-1 GiB caches, 2 threads: MQA f32 0.78-0.84x the time, bf16
        // 0.87x (batch 8), GQA 2 f32 0.87x, bf16 0.86x; GQA 8 (C = 8: 8 chunk steps for MK keys)
        // 1.02-1.03x with the Bresenham cursor, 0.92-0.97x with the two-pointer one (bf16, f16,
        // f32). MHA (C = lanes): one step a key, the rows read key by key, where MK rows' lines
        // at a time measured 0.977-0.985x out of cache (Zen 4) and, on Zen 5 at 1 thread over
        // 1 GiB, f32 0.871x (7 of 8 alternating runs) and 0.950x (5 of 8), f16 0.911x and bf16
        // 0.940x (6 of 8 each); at 32 MiB f32 0.954x, f16 0.930x. A stream test at 1 thread (two
        // 16 KiB bursts a tile, 8 FMAs a line) read 20-23 GB/s with a 64-line burst of prefetches
        // every 4 KiB against 30-33 with one a line. Not an int8 cache's (one line a key, scored
        // on integer products): 1.174x (0 of 8) paced a key.
        constexpr std::size_t HK = isa::vector_registers >= 32 ? std::min<std::size_t>(MK, 8) : MK / 2;
        constexpr bool pace_keys = C > 1 && C < lanes;
        constexpr bool pace_per_key = C == lanes && !std::is_same_v<S, std::int8_t>;
        // otherwise MK rows' lines at each group of MK keys (the same cursor, one step a group)
        paced_lines k_lines(k_next, pace_keys ? (n + MK - 1) / MK * (sh.blocks / 2 * (MK / HK) + sh.blocks % 2) *
                                                    (int8_quads                 ? d / (4 * C)
                                                     : int8_pairs || bf16_pairs ? d / (2 * C)
                                                                                : nch)
                                    : pace_per_key ? n
                                                   : (n + MK - 1) / MK);
        // scores of every block of heads first, MK keys at a time, so that a narrow cache's keys
        // are widened once per tile whatever the number of blocks (MQA at H=16 on AVX2: 2)
        for (std::size_t kb = 0; kb < n; kb += MK) {
            if constexpr (!pace_keys && !pace_per_key) k_lines.step();
            // block blk's MK accumulators -> its scores: C keys' partial sums into one batch per
            // group (lane r*C + c = head r, key c), int8's row scales, keys past n masked
            [[maybe_unused]] auto finish = [&](std::size_t blk, batch* acc) {
                float* sb = s + blk * s_stride;
                for (std::size_t gi = 0; gi < MK / C; ++gi) {
                    transpose_sum<C / 2>(acc + gi * C);
                    const std::size_t key0 = kb + gi * C;
                    batch sc = acc[gi * C];
                    if constexpr (scaled) // int8: lane r*C + c (key key0 + c) times that row's scale
                        sc *= int8_scores || int8_pairs ? chunk_scales<C>(ksc, key0, n) * query_scale[blk]
                                                        : chunk_scales<C>(ksc, key0, n);
                    if (key0 + C > n)
                        sc = xsimd::select(key_in_group < batch(float(n > key0 ? n - key0 : 0)), sc, neg_inf);
                    sc.store_aligned(sb + key0 / C * lanes);
                }
            };
            if constexpr (dots::available && C == lanes) {
                if (int8_scores) { // a key's 16 lanes of int32 partial sums (dots::score), rounded once
                    const std::size_t mk = std::min(MK, n - kb);
                    batch acc[MK];
                    const S* kp = k + kb * ks;
                    auto key = [&](std::size_t i) { acc[i] = dots::template score<DC / 2>(kp + i * ks, q16); };
                    if (mk == MK) {
                        for (std::size_t i = 0; i < MK; ++i) key(i);
                    } else {
                        for (std::size_t i = 0; i < mk; ++i) key(i);
                        for (std::size_t i = mk; i < MK; ++i) acc[i] = batch(0.0f);
                    }
                    finish(0, acc);
                    continue;
                }
            }
            const S* kr[MK] = {};
            if constexpr (i16_keys) {
                if (int8_pairs && !int8_quads) { // (no row pointers kept: their spills cost as much as the products)
                    // rows past n repeat key n - 1 (clamped apart in the two loops: one loop with
                    // one clamp, min(kb + i, n - 1), and the form chosen inside it measured 1.025x
                    // (GQA 4) and 1.094x (GQA 8) the time in cache, 1 thread, 1 and 0 of 4 faster)
                    const std::size_t last = std::min(MK, n - kb);
                    if (d == DC * lanes && DC % 2 == 0) // unrolled: whole 32-element pieces
                        for (std::size_t i = 0; i < MK; ++i)
                            dots::template widen16<DC / 2>(k + (kb + std::min(i, last - 1)) * ks,
                                                           w.kw16.data() + i * d);
                    else
                        for (std::size_t i = 0; i < MK; ++i)
                            dots::widen16(k + std::min(kb + i, n - 1) * ks, w.kw16.data() + i * d, d);
                }
            }
            if (!int8_pairs || int8_quads)
                for (std::size_t i = 0; i < MK; ++i)
                    kr[i] = k + std::min(kb + i, n - 1) * ks; // past n: a real key, masked below
            if constexpr (block) {
                float* kw = w.kw.data();
                for (std::size_t i = 0; i < MK && !int8_pairs && !bf16_pairs; ++i) {
                    if constexpr (isa::pair_reorders<S> && DC % 2 == 0) {
                        if (keys_paired) { // in widen_pair's order (the queries permuted to match)
                            isa::widen_pairs(kr[i], kw + i * tail, DC * lanes);
                            continue;
                        }
                    }
                    if (tail == DC * lanes) { // d_head a multiple of lanes, up to 8 batches: unrolled
                        for (std::size_t t = 0; t < DC * lanes; t += lanes)
                            isa::widen(kr[i] + t).store_unaligned(kw + i * tail + t);
                    } else {
                        isa::widen(kr[i], kw + i * tail, tail);
                    }
                }
            }
            // the key rows the scores broadcast from (C < lanes): the cache's own (fp32) or the
            // widened block
            const float* kf[MK] = {};
            if constexpr (C < lanes)
                for (std::size_t i = 0; i < MK; ++i) {
                    if constexpr (block)
                        kf[i] = w.kw.data() + i * tail;
                    else
                        kf[i] = kr[i];
                }
            if constexpr (C == 1) { // heads in the lanes: two blocks share each key broadcast
                auto scores = [&]<std::size_t NB>(std::size_t blk) {
                    constexpr std::size_t K = heads_blocking<NB>::K;
                    for (std::size_t i0 = 0; i0 < MK; i0 += K) {
                        batch acc[NB][K];
                        score_heads<NB, K>(qs + blk * d * lanes, d * lanes, kf + i0, d, acc);
                        for (std::size_t b = 0; b < NB; ++b)
                            for (std::size_t i = 0; i < K; ++i) {
                                const std::size_t key = kb + i0 + i;
                                batch sc = acc[b][i];
                                if constexpr (scaled) sc *= batch(ksc[std::min(key, n - 1)]);
                                (key < n ? sc : neg_inf).store_aligned(s + (blk + b) * s_stride + key * lanes);
                            }
                    }
                };
                std::size_t blk = 0;
                for (; blk + 2 <= sh.blocks; blk += 2) scores.template operator()<2>(blk);
                if (blk < sh.blocks) scores.template operator()<1>(blk);
            } else {
                std::size_t blk = 0;
                if constexpr (C < lanes) {
                    // blocks in pairs (R = lanes, which decode_shape splits in two): each broadcast
                    // chunk of a key feeds both blocks' FMAs, half the loads of one block at a time
                    // (GQA 2 at H 16 on AVX2: 8 heads, two blocks of 4); AVX2's 16 registers hold
                    // 2 x MK / 2 accumulators, both query batches and the broadcast, AVX-512's 32 all
                    // MK keys' (16 independent FMA chains, where 8 just cover 2 ports x 4 cycles)
                    for (; blk + 2 <= sh.blocks; blk += 2) {
                        batch acc[2][MK];
                        for (std::size_t h = 0; h < MK; h += HK) {
                            batch a[2][HK];
                            bool done = false;
                            if constexpr (i16_keys)
                                if (int8_pairs) {
                                    const std::int16_t* k16[HK];
                                    for (std::size_t i = 0; i < HK; ++i) k16[i] = w.kw16.data() + (h + i) * d;
                                    score_heads_pairs<dots, 2, HK, C>(qp + blk * sh.pairs_stride(), sh.pairs_stride(),
                                                                      k16, d / (2 * C), a, &k_lines);
                                    done = true;
                                }
                            if constexpr (bf16_keys)
                                if (bf16_pairs) {
                                    score_heads_pairs<bdots, 2, HK, C>(qp + blk * sh.pairs_stride(), sh.pairs_stride(),
                                                                       kr + h, d / (2 * C), a, &k_lines);
                                    done = true;
                                }
                            if (!done)
                                score_heads<2, HK, C>(qs + blk * nch * lanes, nch * lanes, kf + h, nch, a,
                                                      pace_keys ? &k_lines : nullptr);
                            for (std::size_t b = 0; b < 2; ++b)
                                for (std::size_t i = 0; i < HK; ++i) acc[b][h + i] = a[b][i];
                        }
                        finish(blk, acc[0]);
                        finish(blk + 1, acc[1]);
                    }
                }
                for (; blk < sh.blocks; ++blk) {
                    const float* qa = qs + blk * nch * lanes;
                    batch acc[1][MK];
                    if constexpr (C < lanes) {
                        // two chains a key where the chunks are many (C <= 4: 16 or more
                        // a key at d_head 64) and the registers hold them: GQA 2 fp32 and GQA 4
                        // bf16 in cache 0.98x (3 of 3); GQA 8 (8 chunks) 1.02x, not taken. Not
                        // for a narrow cache at C = 2: 16 accumulators, 16 broadcast pairs and two
                        // query batches exceed the 32 registers, and clang keeps an accumulator on
                        // the stack (stored and reloaded every chunk step; perf on f16 GQA 2). One
                        // chain a key there: int8 0.92x (and 1.37x at 2 threads once an unrelated
                        // change moved the spill's slot), f16 in cache 0.887x and at L 2M on 2
                        // threads 0.907x, bf16 widened 0.853x and 0.883x (3 of 3 each, Zen 5).
                        // fp32 keeps two chains: one measured 0.895x in cache but 1.24x at L 1M on
                        // 2 threads (3 of 3), its key rows read in place from memory
                        bool done = false;
                        if constexpr (i16_keys)
                            if (int8_quads) {
                                score_heads_quads<dots, MK, C>(
                                    qp, reinterpret_cast<const std::int32_t*>(qs + sh.quad_bias_at()), kr, d / (4 * C),
                                    acc, &k_lines);
                                done = true;
                            }
                        if constexpr (i16_keys)
                            if (int8_pairs && !done) {
                                const std::int16_t* k16[MK];
                                for (std::size_t i = 0; i < MK; ++i) k16[i] = w.kw16.data() + i * d;
                                score_heads_pairs<dots, 1, MK, C>(qp + blk * sh.pairs_stride(), 0, k16, d / (2 * C),
                                                                  acc, &k_lines);
                                done = true;
                            }
                        if constexpr (bf16_keys)
                            if (bf16_pairs) {
                                score_heads_pairs<bdots, 1, MK, C>(qp + blk * sh.pairs_stride(), 0, kr, d / (2 * C),
                                                                   acc, &k_lines);
                                done = true;
                            }
                        if (done) {
                        } else if constexpr (C <= 4 && isa::vector_registers >= 32 &&
                                             (C == 4 || std::is_same_v<S, float>))
                            score_block_split<MK, C>(qa, kf, nch, acc, pace_keys ? &k_lines : nullptr);
                        else
                            score_heads<1, MK, C>(qa, 0, kf, nch, acc, pace_keys ? &k_lines : nullptr);
                    } else {
                        // C = lanes: one head, its dims in the lanes
                        if (nch == DC) { // key by key, rows read in order, q in registers
                            batch qb[DC > 0 ? DC : 1];
                            for (std::size_t ch = 0; ch < DC; ++ch) qb[ch] = batch::load_aligned(qa + ch * lanes);
                            // a narrow row widened two batches at a time (isa::widen_pair), its
                            // dims then in pair order: the queries put in the same order, so each
                            // lane still multiplies a query and a key element of one dim
                            constexpr bool paired = !std::is_same_v<S, float> && DC % 2 == 0;
                            if constexpr (paired)
                                for (std::size_t ch = 0; ch < DC; ch += 2) isa::to_pair_order<S>(qb[ch], qb[ch + 1]);
                            const std::size_t mk = kb + MK <= n ? MK : n - kb; // full groups: MK, unrolled
                            // a key's sum is one register chain, stored once: accumulated in
                            // acc[i] (which the compiler keeps on the stack) each key's first FMA
                            // read back a zero fill written by narrower stores, a store-forwarding
                            // stall per key (a sixth of the MHA int8 core's samples on AVX-512)
                            auto key = [&](std::size_t i) {
                                if constexpr (pace_per_key) k_lines.step();
                                batch a(0.0f);
                                if constexpr (paired) {
                                    for (std::size_t ch = 0; ch < DC; ch += 2) {
                                        batch lo, hi;
                                        isa::widen_pair(kr[i] + ch * C, lo, hi);
                                        a = isa::fused(hi, qb[ch + 1], isa::fused(lo, qb[ch], a));
                                    }
                                } else {
                                    for (std::size_t ch = 0; ch < DC; ++ch)
                                        a = isa::fused(isa::widen(kr[i] + ch * C), qb[ch], a);
                                }
                                acc[0][i] = a;
                            };
                            if (mk == MK) {
                                for (std::size_t i = 0; i < MK; ++i) key(i);
                            } else {
                                for (std::size_t i = 0; i < mk; ++i) key(i);
                                for (std::size_t i = mk; i < MK; ++i) acc[0][i] = batch(0.0f);
                            }
                        } else {
                            for (std::size_t i = 0; i < MK; ++i) {
                                if constexpr (pace_per_key) k_lines.step();
                                acc[0][i] = batch(0.0f);
                            }
                            for (std::size_t ch = 0; ch < nch; ++ch) {
                                const batch qv = batch::load_aligned(qa + ch * lanes);
                                for (std::size_t i = 0; i < MK; ++i)
                                    acc[0][i] = isa::fused(isa::widen(kr[i] + ch * C), qv, acc[0][i]);
                            }
                        }
                    }
                    finish(blk, acc[0]);
                }
            }
        }
        // the value tile read once, in order, into the fp32 tile (widened if narrow) where P V
        // takes it from there (values_in_tile): with the heads in the lanes, so that every value
        // element is one load from L1 and the cache's rows are streamed once, not walked in
        // strided passes (fp32 read in place: GQA 2 at 256 MiB slower in some runs once P V's
        // passes stopped spilling)
        if (v_tile)
            for (std::size_t j = 0; j < n; ++j) isa::widen(v + j * vs, w.vw.data() + j * sh.dv, sh.dv);
        // C > 1: the next tile's value lines paced over every key step of every P V pass (one
        // pass for GQA 8 and MHA: a row's lines a key)
        constexpr std::size_t C_i8 = C < 4 ? 4 : C; // (decode_pv_i8 takes C >= 4)
        paced_lines v_paced(v_next, int8_values        ? pv_i8_steps<C_i8>(sh.dv, n)
                                    : int8_pair_values ? sh.blocks * pv_i16_steps(sh.dv, n)
                                    : bf16_values      ? sh.blocks * pv_bf16_steps<C>(sh.dv, n)
                                                       : sh.blocks * n * pv_passes<C, DC, S>(sh.dv));
        for (std::size_t blk = 0; blk < sh.blocks; ++blk) {
            float* const sb = s + blk * s_stride;
            if (tail < d) // the d % C dims, in scalar
                for (std::size_t j = 0; j < n; ++j)
                    for (std::size_t r = 0; r < RB && blk * RB + r < R; ++r) {
                        const float* q = io.q.row(b, g * R + blk * RB + r, 0);
                        const S* kj = k + j * ks;
                        float x = 0.0f;
                        for (std::size_t i = tail; i < d; ++i) x += q[i] * float(kj[i]);
                        sb[j / C * lanes + r * C + j % C] += ksc ? x * scale * ksc[j] : x * scale;
                    }
            float* mp = w.ml.data() + 2 * blk * lanes;
            const batch m = batch::load_aligned(mp), l = batch::load_aligned(mp + lanes);
            batch mx = m;
            for (std::size_t gi = 0; gi < groups; ++gi) mx = xsimd::max(mx, batch::load_aligned(sb + gi * lanes));
            mx = group_max<C>(mx);
            const batch corr = isa::exp2_nonpos(m - mx); // 0 on the first tile
            const batch sum = exp2_batches(sb, groups, mx);
            if constexpr (scaled) // int8: each weight times its value row's scale, once per tile
                for (std::size_t gi = 0; gi < groups; ++gi)
                    (batch::load_aligned(sb + gi * lanes) * chunk_scales<C>(vsc, gi * C, n))
                        .store_aligned(sb + gi * lanes);
            mx.store_aligned(mp);
            (l * corr + group_sum<C>(sum)).store_aligned(mp + lanes);
            float* cr = w.cr.data() + blk * lanes;
            corr.store_aligned(cr);
            if constexpr (C > 1) {
                if constexpr (dots::available && C >= 4)
                    if (int8_values) {
                        decode_pv_i8<dots, C>(part + blk * RB * dp, dp, sh.dv, cr, sb, v, vs, n, v_paced);
                        continue;
                    }
                if constexpr (dots::available && C == 2)
                    if (int8_pair_values) {
                        decode_pv_i16<dots, C>(part + blk * RB * dp, dp, sh.dv, cr, sb, v, vs, n, v_paced);
                        continue;
                    }
                if constexpr (bf16_keys)
                    if (bf16_values) {
                        decode_pv_bf16<bdots, C>(part + blk * RB * dp, dp, sh.dv, cr, sb, v, vs, n, v_paced);
                        continue;
                    }
                decode_pv<C, DC>(part + blk * RB * dp, dp, sh.dv, cr, sb, v, vs, n, v_paced);
            }
        }
        if constexpr (C == 1) { // heads in the lanes, every block's outputs dim-major, blocks in pairs
            // the next tile's value lines paced over every pair of keys of every P V pass
            // (pv_heads_steps), not a row's lines at once (MQA f32 at L = 512k, 2 threads: 30-33
            // -> 27-28 ms a step; the key lines spread over the scores' steps as well measured no
            // better than in bursts of MK rows, 31 ms). One line a pair of keys, as this asked
            // before, left lines unasked where the passes are fewer than a tile's lines need.
            paced_lines v_lines(v_next, pv_heads_steps(sh.blocks, sh.dv, n));
            decode_pv_heads(part, lanes * dp, sh.blocks, sh.dv, w.cr.data(), s, s_stride, w.vw.data(), sh.dv, n,
                            v_lines);
        }
    }
    float* m_out = part + sh.rows * dp;
    float* l_out = m_out + sh.rows;
    for (std::size_t h = 0; h < sh.rows; ++h) {
        m_out[h] = w.ml[2 * (h / RB) * lanes + h % RB * C];
        l_out[h] = w.ml[(2 * (h / RB) + 1) * lanes + h % RB * C];
    }
}

/// decode_item for the C that R needs. GQA 2 at H 16 over a bf16 cache on vdpbf16ps (one block,
/// C = 2) scores 16 keys a pass: 16 chains of bf16 dot products, where 8 left the dot product's
/// latency exposed (Zen 5, 3 alternating rounds x 3 repetitions: in cache, 1 thread, 0.958x the
/// time; L 2M on 2 threads 0.895x, L 256k at batch 8 0.957x). fp32 (read in place, two chains
/// already: score_block_split), f16 and int8 measured level or slower with 16 keys (f16 1.04x in
/// cache, int8 1.04x at L 2M).
template <std::size_t DC, class S, std::size_t C = lanes>
void decode_item_for(std::size_t c_needed, const problem& p, const kv_core_io<S>& io, std::size_t b, std::size_t g,
                     std::size_t j0, std::size_t j1, const float* qs, float* part) {
    if constexpr (C == 1) {
        (void)c_needed;
        decode_item<1, DC>(p, io, b, g, j0, j1, qs, part);
    } else if (c_needed == C) {
        if constexpr (C == 2 && isa::vector_registers >= 32 && isa::bf16_dots<S>::available)
            if (decode_shape::of_type<S>(p).blocks == 1 && decode_bf16_dot_scores(p)) {
                decode_item<C, DC, S, 16>(p, io, b, g, j0, j1, qs, part);
                return;
            }
        decode_item<C, DC>(p, io, b, g, j0, j1, qs, part);
    } else {
        decode_item_for<DC, S, C / 2>(c_needed, p, io, b, g, j0, j1, qs, part);
    }
}

/// Combines the chunks of (b, g) for query head g*R + r and writes its output row.
template <class S>
void decode_combine(const problem& p, const kv_core_io<S>& io, std::size_t b, std::size_t g, std::size_t r,
                    const float* parts, std::size_t chunks) {
    const decode_shape sh = decode_shape::of_type<S>(p);
    const std::size_t R = p.heads / p.kv_heads, d = sh.dv, dp = sh.dp, rows = sh.rows;
    const std::size_t stride = sh.partial_floats();
    auto m_of = [&](std::size_t c) { return parts[c * stride + rows * dp + r]; };
    auto l_of = [&](std::size_t c) { return parts[c * stride + rows * dp + rows + r]; };
    float mx = m_of(0);
    for (std::size_t c = 1; c < chunks; ++c) mx = std::max(mx, m_of(c));
    float* o = io.out.row(b, g * R + r, 0);
    std::fill(o, o + d, 0.0f);
    float l = 0.0f;
    // heads in the lanes (C = 1): a block's outputs are dim-major, [dp][lanes]
    const std::size_t first = sh.c == 1 ? r / lanes * lanes * dp + r % lanes : r * dp, step = sh.c == 1 ? lanes : 1;
    for (std::size_t c = 0; c < chunks; ++c) {
        const float f = std::exp2(m_of(c) - mx); // the maxima are in base 2 (decode_item)
        l += l_of(c) * f;
        const float* a = parts + c * stride + first;
        for (std::size_t t = 0; t < d; ++t) o[t] += a[t * step] * f;
    }
    const float inv = 1.0f / l; // l >= 1: the maximum's own term
    for (std::size_t t = 0; t < d; ++t) o[t] *= inv;
}

template <std::size_t DC, class S>
void decode_core_dc(const problem& p, const kv_core_io<S>& io, int threads) {
    const key_split ks = split_keys(p.n_kv);
    const decode_shape sh = decode_shape::of_type<S>(p);
    const std::size_t items = p.batch * p.kv_heads * ks.chunks, stride = sh.partial_floats();
    const std::size_t heads_kv = p.batch * p.kv_heads, q_stride = sh.qs_floats();
    auto& own = decode_local();
    grow(own.partials, items * stride);
    grow(own.qs, heads_kv * q_stride);
    float* parts = own.partials.data();
    float* qs = own.qs.data();
    const std::size_t R = p.heads / p.kv_heads, rows = p.batch * p.heads;
#pragma omp parallel num_threads(threads) if (threads > 1)
    {
#pragma omp for schedule(static)
        for (std::size_t bg = 0; bg < heads_kv; ++bg)
            rearrange_queries(p, io, bg / p.kv_heads, bg % p.kv_heads, qs + bg * q_stride);
#pragma omp for schedule(guided) // contiguous runs of items: see the prefetch above
        for (std::size_t it = 0; it < items; ++it) {
            const std::size_t c = it % ks.chunks, bg = it / ks.chunks;
            const std::size_t j0 = c * ks.chunk, j1 = std::min(p.n_kv, j0 + ks.chunk);
            decode_item_for<DC>(sh.c, p, io, bg / p.kv_heads, bg % p.kv_heads, j0, j1, qs + bg * q_stride,
                                parts + it * stride);
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

/// The batches of a head the core keeps in registers: min(d_qk, d_v) / lanes, at most 8.
inline std::size_t decode_register_batches(const problem& p) {
    return std::min<std::size_t>(std::min(p.qk_dim(), p.v_dim()) / lanes, 8);
}

/// The attention core for n_q == 1 (any causal flag: the one row sees every key), q [B, H, 1, d_qk],
/// k [B, G, n_kv, d_qk] and v [B, G, n_kv, d_v] with any strides (a cache's views), out [B, H, 1, d_v].
/// The scores of a head keep min(d_qk, d_v) rounded down to batches, at most 8, in registers when one
/// head fills the lanes (C = lanes), the other dims' broadcasts per batch; P V runs over every
/// whole batch of d_v in register blocks; only d % lanes dims are scalar.
inline void decode_core(const problem& p, const core_io<float>& io, int threads) {
    const kv_core_io<float> kv{io.q, {io.k, {}}, {io.v, {}}, io.out};
    detail::decode_core_dispatch(decode_register_batches(p), p, kv, threads);
}

/// decode_core over a cache of type S (bf16, f16, int8): k and v [B, G, n_kv, d] in S (int8 with
/// a scale per row), q and out in fp32; the same function of the cache's values as fp32 would be.
template <class S>
void decode_core_kv(const problem& p, const kv_core_io<S>& io, int threads) {
    detail::decode_core_dispatch(decode_register_batches(p), p, io, threads);
}

} // namespace attn::kernels
