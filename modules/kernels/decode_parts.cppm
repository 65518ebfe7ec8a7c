// attn.kernels:decode_parts -- the pieces the decode core (attn.kernels:decode) is built from:
// reductions within groups of C lanes (one group per query head sharing a batch), the transpose
// that turns C keys' partial dot products into one batch of scores, L2 prefetch of the rows after
// a tile, the row scales of an int8 cache, and the P V update of a block of heads.
module;
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <xsimd/xsimd.hpp>
export module attn.kernels:decode_parts;
import :isa;
import attn.core;

export namespace attn::kernels::detail {

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

/// Where the rows after a tile lie in the cache, for prefetching: row j at at + j * stride, each
/// `bytes` long.
struct next_rows {
    const char* at = nullptr;
    std::size_t stride = 0, bytes = 0, n = 0;
};

/// The lines next_rows covers: from the first row's line to the last row's end. Rows with a gap
/// between them (MLA's values, a view of the latent rows' first d_c dims) get the gap's lines
/// too: there they are the key rows' own lines, asked for anyway.
struct line_span {
    const char* first = nullptr; ///< the first row's line
    std::size_t lines = 0;
    inline explicit line_span(const next_rows& r) {
        if (r.n) {
            first = r.at - reinterpret_cast<std::uintptr_t>(r.at) % 64;
            lines = std::size_t(r.at + (r.n - 1) * r.stride + r.bytes - first + 63) / 64;
        }
    }
};

/// The lines of next_rows requested evenly over `steps` calls of step(), by two pointers: a
/// cursor that moves delta = ceil(64 lines / steps) bytes a step (a fraction of a line where
/// the lines are fewer than the steps) and the next line to ask for, asked for while it lies
/// below the cursor. Each line is asked for once, in address order, ceil(k delta / 64) of them
/// after k steps, and at most (steps - 1) / 64 + 1 lines past the rows' end (rows that come
/// next in the cache, or nothing: a prefetch never faults). Three registers and 3-6
/// instructions a step: the Bresenham cursor it replaces (whole and fractional lines a step,
/// a carry, the bound of the lines) kept six, which the score loop's eight key pointers pushed
/// to the stack, ~12 instructions a step (in cache, 1 thread, with no pacing at all: MQA fp32
/// 0.85x, GQA 2 fp32 0.74x, GQA 4 bf16 0.85x the time). A cursor asking for the lines from
/// itself every step (no branch) asked for each line twice where a step is half a line (MQA
/// bf16: 1.025x the time of the Bresenham cursor, in cache). Ask is the request
/// (isa::prefetch_l2; the tests record).
template <class Ask>
struct paced_lines_by {
    // addresses, not pointers: the cursor may run past the rows' allocation (a prefetch there is
    // harmless; pointer arithmetic there would not be)
    std::uintptr_t p = 0;     ///< the cursor: lines below it have been asked for
    std::uintptr_t a = 0;     ///< the next line to ask for
    std::uintptr_t delta = 0; ///< bytes the cursor moves a step
    inline paced_lines_by(const next_rows& r, std::size_t steps) {
        const line_span s(r);
        const std::size_t t = steps ? steps : 1;
        if (!s.lines) return;
        p = a = reinterpret_cast<std::uintptr_t>(s.first);
        delta = (64 * s.lines + t - 1) / t;
    }
    // always inlined: called once per key or chunk step inside loops that keep their
    // accumulators in vector registers, where a call makes the caller spill every one (a
    // member function defined in its class is not implicitly inline in a named module:
    // `inline` is spelled out, or importers get a call)
    [[gnu::always_inline]] inline void step() {
        p += delta;
        for (; a < p; a += 64) Ask{}(reinterpret_cast<const char*>(a));
    }
};

struct prefetch_l2_request {
    [[gnu::always_inline]] inline void operator()(const char* line) const { isa::prefetch_l2(line); }
};
using paced_lines = paced_lines_by<prefetch_l2_request>;

/// The row scales of C keys from j0 repeated across the batch (lane r*C + c: key j0 + c), the
/// last of the n repeated for keys past it.
template <std::size_t C>
batch chunk_scales(const float* sc, std::size_t j0, std::size_t n) {
    if (j0 + C <= n) return isa::broadcast_chunk<C>(sc + j0);
    alignas(64) float t[lanes];
    for (std::size_t c = 0; c < lanes; ++c) t[c] = sc[std::min(j0 + c % C, n - 1)];
    return batch::load_aligned(t);
}

/// The P V update's register blocking: RV heads x DB output batches per pass, each V batch loaded
/// (and widened) once per pass and shared by the RV heads. fp32 rows: all DC batches and up to
/// 2-8 heads (measured best; the accumulators of RV x DC may exceed the register file, and the
/// compiler then reloads V batches rather than spilling them). A narrow cache's rows: passes
/// that fit the registers (one per head's weight, one for the widened batch; DB divides DC), so
/// each widened batch is not widened again for every head.
template <std::size_t RB, std::size_t DC, class E>
struct pv_blocking {
    static constexpr bool wide = std::is_same_v<E, float>;
    static constexpr std::size_t regs = std::size_t(isa::vector_registers) - 1;
    /// the widest batch block, dividing DC, whose accumulators and weights for rv heads fit
    static constexpr std::size_t db_for(std::size_t rv) {
        for (std::size_t b = DC; b > 1; --b)
            if (DC % b == 0 && rv * b + rv <= regs) return b;
        return 1;
    }
    // narrow rows: 8 heads a pass where two or more batches still fit (AVX-512: 8 x 2), so each
    // batch is widened once for 8 heads, not twice for 2 passes of 4
    static constexpr std::size_t RV_narrow = std::min<std::size_t>(RB, db_for(8) >= 2 ? 8 : 4);
    static constexpr std::size_t RV = wide ? std::min<std::size_t>(RB, DC <= 2 ? 8 : DC <= 4 ? 4 : 2) : RV_narrow;
    static constexpr std::size_t DB = DC == 0 ? 1 : wide ? DC : db_for(RV);
};

/// The passes over a tile's keys decode_pv makes for value width d (its register blocks of RV
/// heads x DB batches, then the whole batches left one at a time).
template <std::size_t C, std::size_t DC, class E>
constexpr std::size_t pv_passes(std::size_t d) {
    constexpr std::size_t RB = lanes / C, RV = pv_blocking<RB, DC, E>::RV, DB = pv_blocking<RB, DC, E>::DB;
    const std::size_t nb = d / lanes, blocked = DB ? nb / DB : 0;
    return RB / RV * (blocked + (nb - blocked * DB));
}

/// out rows [0, RB) (each dp apart) = out * corr[r*C] + sum_{j<n} P[r, j] v_j, where P[r, j] is
/// lane r*C + j%C of score group j/C. A pass holds RV heads x DB batches of the output
/// (pv_blocking), so each V batch loaded and widened serves RV heads with one
/// broadcast weight per head; a narrow row's batches are widened in pairs (isa::widen_pair: one
/// load and two unpacks for bf16), each lane's sum taken in the same order as one at a time.
/// The rows v are of the cache's type E, read in place; an int8 row's scale is already in its
/// weights (the caller multiplies them once per tile).
template <std::size_t C, std::size_t DC, class E>
void decode_pv(float* out, std::size_t dp, std::size_t d, const float* corr, const float* s, const E* v, std::size_t vs,
               std::size_t n, paced_lines& v_paced) {
    constexpr std::size_t RB = lanes / C, RV = pv_blocking<RB, DC, E>::RV, DB = pv_blocking<RB, DC, E>::DB;
    // batches widened two at a time (isa::widen_pair; its order is undone at the store)
    constexpr bool paired = !std::is_same_v<E, float> && DB % 2 == 0;
    // every whole batch of the value width: blocks of DB batches (DC, the batches the scores keep
    // in registers, is a multiple of DB, so a value as wide as the key runs as before), then the
    // batches left one at a time; only d % lanes dims are left to the scalar tail (MLA's absorbed
    // form with fewer heads than lanes has d = d_c = 512 against DC = 8 batches)
    const std::size_t nb = d / lanes, blocked = DB ? nb / DB * DB : 0;
    // a local copy, which the compiler can keep in registers across the passes
    paced_lines v_next = v_paced;
    for (std::size_t r0 = 0; r0 < RB; r0 += RV)
        for (std::size_t c0 = 0; c0 < blocked; c0 += DB) {
            batch a[RV][DB];
            for (std::size_t r = 0; r < RV; ++r) {
                const batch cb(corr[(r0 + r) * C]);
                for (std::size_t c = 0; c < DB; ++c)
                    a[r][c] = batch::load_aligned(out + (r0 + r) * dp + (c0 + c) * lanes) * cb;
                if constexpr (paired)
                    for (std::size_t c = 0; c < DB; c += 2) isa::to_pair_order<E>(a[r][c], a[r][c + 1]);
            }
            for (std::size_t j = 0; j < n; ++j) {
                const E* vj = v + j * vs + c0 * lanes;
                v_next.step();
                const float* pj = s + j / C * lanes + j % C + r0 * C;
                batch pr[RV];
                for (std::size_t r = 0; r < RV; ++r) pr[r] = batch(pj[r * C]);
                if constexpr (paired) {
                    for (std::size_t c = 0; c < DB; c += 2) {
                        batch lo, hi;
                        isa::widen_pair(vj + c * lanes, lo, hi);
                        for (std::size_t r = 0; r < RV; ++r) a[r][c] = isa::fused(pr[r], lo, a[r][c]);
                        for (std::size_t r = 0; r < RV; ++r) a[r][c + 1] = isa::fused(pr[r], hi, a[r][c + 1]);
                    }
                } else {
                    for (std::size_t c = 0; c < DB; ++c) {
                        const batch vb = isa::widen(vj + c * lanes);
                        for (std::size_t r = 0; r < RV; ++r) a[r][c] = isa::fused(pr[r], vb, a[r][c]);
                    }
                }
            }
            for (std::size_t r = 0; r < RV; ++r) {
                if constexpr (paired)
                    for (std::size_t c = 0; c < DB; c += 2) isa::from_pair_order<E>(a[r][c], a[r][c + 1]);
                for (std::size_t c = 0; c < DB; ++c) a[r][c].store_aligned(out + (r0 + r) * dp + (c0 + c) * lanes);
            }
        }
    for (std::size_t r0 = 0; r0 < RB; r0 += RV)
        for (std::size_t c0 = blocked; c0 < nb; ++c0) { // whole batches past the DB blocks
            batch a[RV];
            for (std::size_t r = 0; r < RV; ++r)
                a[r] = batch::load_aligned(out + (r0 + r) * dp + c0 * lanes) * batch(corr[(r0 + r) * C]);
            for (std::size_t j = 0; j < n; ++j) {
                v_next.step();
                const float* pj = s + j / C * lanes + j % C + r0 * C;
                const batch vb = isa::widen(v + j * vs + c0 * lanes);
                for (std::size_t r = 0; r < RV; ++r) a[r] = isa::fused(batch(pj[r * C]), vb, a[r]);
            }
            for (std::size_t r = 0; r < RV; ++r) a[r].store_aligned(out + (r0 + r) * dp + c0 * lanes);
        }
    v_paced = v_next;
    for (std::size_t r = 0; r < RB; ++r) { // the d % lanes tail, in scalar
        float* o = out + r * dp;
        for (std::size_t t = nb * lanes; t < d; ++t) {
            float x = o[t] * corr[r * C];
            for (std::size_t j = 0; j < n; ++j) {
                x += s[j / C * lanes + j % C + r * C] * float(v[j * vs + t]);
            }
            o[t] = x;
        }
    }
}

/// a / b lane by lane. Not a template: a division written only inside templates instantiated from
/// another unit finds no _mm512_div_ps there (this unit's global module fragment drops what its
/// own code does not reach).
inline batch quotient(batch a, batch b) { return a / b; }

/// The fixed point of a tile's weights for integer P V (decode_pv_i8, decode_pv_i16): over the
/// score groups at s (lane r*C + c: head r), each head's largest weight w_r maps to `top`.
/// Returns the factor that scales a weight to its integer (lane by lane; 0 for a head whose
/// weights are all 0) and leaves in scale[lane] the value of one unit, w_r / top.
template <std::size_t C>
batch weight_fixed_point(const float* s, std::size_t groups, float top, float* scale) {
    batch m(0.0f);
    for (std::size_t gi = 0; gi < groups; ++gi) m = xsimd::max(m, batch::load_aligned(s + gi * lanes));
    m = group_max<C>(m); // lane r*C + c: head r's largest weight
    // in whole batches: a scalar loop of 16 lanes, two divisions each, once a tile and block
    // measured about 3 % of int8 GQA 4's step (perf, in cache, 1 thread)
    const batch t(top);
    quotient(m, t).store_aligned(scale);
    return xsimd::select(m > batch(0.0f), quotient(t, m), batch(0.0f));
}

/// decode_pv over an int8 cache on D = isa::int8_dots<std::int8_t>, C >= 4 (RB = lanes / C
/// heads): each head's weights (score groups at s, lane r*C + c of group j / C = head r, key j;
/// whole groups, keys past n weighing 0; the value rows' scales in them) in 16-bit fixed point
/// against the head's largest in the tile, w_r, as two byte planes (each weight off by at most
/// w_r / 131070), so that four keys' bytes of a head are one dword; each value element
/// multiplied as a byte four keys at a time (D::interleave, once a pass, serving the pass's
/// heads), in passes of up to two heads (8 int32 accumulators a head) over 64-dim groups; d a
/// multiple of 64; out rows dp apart, corr[r*C] head r's rescale. One step of v_next a quad of
/// keys in each pass and group (pv_i8_steps; paced_lines, or the tests' recording cursor).
template <class D, std::size_t C, class Lines>
void decode_pv_i8(float* out, std::size_t dp, std::size_t d, const float* corr, const float* s, const std::int8_t* v,
                  std::size_t vs, std::size_t n, Lines& v_next) {
    static_assert(C >= 4 && C <= lanes, "four keys of a head make one dword of its weight bytes");
    constexpr std::size_t RB = lanes / C, NH = RB < 2 ? RB : 2;
    const std::size_t groups = (n + C - 1) / C;
    alignas(64) float scale[lanes];
    const batch f = weight_fixed_point<C>(s, groups, float(D::weight_top), scale);
    // (n <= 64 keys: 64 / C groups of `lanes` weights, one more for the last quad's reach)
    alignas(64) std::uint8_t hb[64 / C * lanes + lanes] = {}, lb[64 / C * lanes + lanes] = {};
    if (n > 64) [[unlikely]]
        require(false, "decode_pv_i8 takes a tile of at most 64 keys (got " + std::to_string(n) + ")");
    for (std::size_t gi = 0; gi < groups; ++gi) D::planes(s + gi * lanes, f, hb + gi * lanes, lb + gi * lanes);
    Lines next = v_next;
    for (std::size_t r0 = 0; r0 < RB; r0 += NH)
        for (std::size_t t0 = 0; t0 < d; t0 += 64) {
            typename D::pv_acc a[NH];
            for (std::size_t h = 0; h < NH; ++h) D::clear(a[h]);
            auto quad = [&](std::size_t j, const std::int8_t* const* r) {
                next.step();
                const auto x = D::interleave(r);
                for (std::size_t h = 0; h < NH; ++h) {
                    const std::size_t at = j / C * lanes + (r0 + h) * C + j % C; // keys j..j+3 of head r0 + h
                    std::uint32_t wh, wl;
                    std::memcpy(&wh, hb + at, 4);
                    std::memcpy(&wl, lb + at, 4);
                    D::pv_add(a[h], x, wh, wl);
                }
            };
            std::size_t j = 0;
            for (const std::int8_t* vj = v + t0; j + 4 <= n; j += 4, vj += 4 * vs) {
                const std::int8_t* r[4] = {vj, vj + vs, vj + 2 * vs, vj + 3 * vs};
                quad(j, r);
            }
            if (j < n) { // the last keys; rows past n repeat key n - 1 (their weights are 0)
                const std::int8_t* r[4];
                for (std::size_t q = 0; q < 4; ++q) r[q] = v + (std::min(j + q, n - 1) * vs + t0);
                quad(j, r);
            }
            for (std::size_t h = 0; h < NH; ++h) {
                const std::size_t r = r0 + h;
                D::finish(out + r * dp + t0, corr[r * C], scale[r * C], a[h]);
            }
        }
    v_next = next;
}

/// decode_pv over an int8 cache on D = isa::int8_dots<std::int8_t>, C even (RB = lanes / C <= 8
/// heads; decode_item takes it at C = 2: GQA 2, MQA at 16 heads in two blocks, where
/// decode_pv_i8's four keys of a head span two score groups, and decode_pv_i8 where C >= 4): each
/// head's weights (the value rows' scales in them) in 16-bit fixed point against its largest in
/// the tile (top D::weight_top16: each off by at most w_r / 65534), two keys of a head to a dword
/// (adjacent lanes of a group); two value rows' bytes interleaved a dim at a time and sign-
/// extended to 16 bits, so one vpdpwssd adds two keys' products to 16 dims of a head, where the
/// fp32 path took two FMAs and each row's widening. Passes of every head x 32 dims (16 int32
/// accumulators); d a multiple of 32; out rows dp apart, corr[r*C] head r's rescale. One step of
/// v_next a pair of keys in each pass (pv_i16_steps).
template <class D, std::size_t C, class Lines>
void decode_pv_i16(float* out, std::size_t dp, std::size_t d, const float* corr, const float* s, const std::int8_t* v,
                   std::size_t vs, std::size_t n, Lines& v_next) {
    static_assert(C >= 2 && C % 2 == 0 && lanes / C <= 8, "two keys of a head make one dword of its weights");
    constexpr std::size_t RB = lanes / C, half = lanes / 2;
    if (n > 64) [[unlikely]]
        require(false, "decode_pv_i16 takes a tile of at most 64 keys (got " + std::to_string(n) + ")");
    const std::size_t groups = (n + C - 1) / C;
    alignas(64) float scale[lanes];
    const batch f = weight_fixed_point<C>(s, groups, float(D::weight_top16), scale);
    // word (j / C) * half + (r*C + j % C) / 2: keys j, j + 1 (j even) of head r
    alignas(64) std::uint32_t w[64 / C * half + half];
    for (std::size_t gi = 0; gi < groups; ++gi) D::pack_weights16(s + gi * lanes, f, w + gi * half);
    Lines next = v_next;
    for (std::size_t t0 = 0; t0 < d; t0 += 32) {
        typename D::i32 a[RB][2];
        for (std::size_t r = 0; r < RB; ++r) a[r][0] = a[r][1] = D::zero();
        for (std::size_t j = 0; j < n; j += 2) {
            next.step();
            // an odd n's last pair: row n - 1 twice (key n weighs 0)
            typename D::i32 lo, hi;
            D::interleave16(v + j * vs + t0, v + std::min(j + 1, n - 1) * vs + t0, lo, hi);
            const std::uint32_t* wj = w + j / C * half + j % C / 2;
            for (std::size_t r = 0; r < RB; ++r) {
                a[r][0] = D::dot_word(a[r][0], lo, wj + r * C / 2);
                a[r][1] = D::dot_word(a[r][1], hi, wj + r * C / 2);
            }
        }
        for (std::size_t r = 0; r < RB; ++r)
            D::finish16(out + r * dp + t0, corr[r * C], scale[r * C], a[r][0], a[r][1]);
    }
    v_next = next;
}

/// The steps of v_next decode_pv_i16<D, C> takes over n keys at value width d.
constexpr std::size_t pv_i16_steps(std::size_t d, std::size_t n) { return (n + 1) / 2 * (d / 32); }

/// The steps of v_next decode_pv_i8<D, C> takes over n keys at value width d.
template <std::size_t C>
constexpr std::size_t pv_i8_steps(std::size_t d, std::size_t n) {
    constexpr std::size_t RB = lanes / C, NH = RB < 2 ? RB : 2;
    return (n + 3) / 4 * (d / 64) * (RB / NH);
}

/// decode_pv over a bf16 cache on D = isa::bf16_dots<bf16> (AVX512_BF16), 2 <= C <= lanes (RB =
/// lanes / C heads): each group of weights (score groups at s, lane r*C + c = head r, key j; keys
/// past n weighing 0) rounded to bf16 in pairs of keys (C even: a pair never spans two heads),
/// and two value rows interleaved a dim at a time, so one vdpbf16ps adds two keys' products to 16
/// dims of a head: half the instructions of the fp32 FMAs on widened rows, the weights' pair a
/// broadcast memory operand. Passes of every head x 32 or 64 dims (at most 16 accumulators, in
/// widen_pair's order: to_pair_order / from_pair_order at the load and store), so each pair of
/// rows is interleaved once; d a multiple of 64; out rows dp apart, corr[r*C] head r's rescale.
/// The weights are rounded, the sum l is not: the checker charges the stored weights
/// (half_roundings::weights). One step of v_next a pair of keys in each pass (pv_bf16_steps).
template <class D, std::size_t C, class Lines>
void decode_pv_bf16(float* out, std::size_t dp, std::size_t d, const float* corr, const float* s, const bf16* v,
                    std::size_t vs, std::size_t n, Lines& v_next) {
    static_assert(C >= 2 && C <= lanes && C % 2 == 0, "a pair of keys of a head is one word of its weights");
    // a pass: all RB heads x NQ batches of dims (at most 16 accumulators), so that each pair of
    // rows is interleaved once
    constexpr std::size_t RB = lanes / C, NQ = RB >= 8 ? 2 : 4, half = lanes / 2;
    static_assert(RB <= 8, "8 heads x 2 batches fill the accumulators a pass holds");
    if (n > 64) [[unlikely]]
        require(false, "decode_pv_bf16 takes a tile of at most 64 keys (got " + std::to_string(n) + ")");
    const std::size_t groups = (n + C - 1) / C;
    // word (j / C) * half + (r*C + j % C) / 2: keys j, j + 1 (j even) of head r
    alignas(64) std::uint32_t w[64 / C * half + half];
    for (std::size_t gi = 0; gi < groups; ++gi) D::pack_weights(s + gi * lanes, w + gi * half);
    Lines next = v_next;
    for (std::size_t t0 = 0; t0 < d; t0 += NQ * lanes) {
        decltype(D::zero()) a[RB][NQ];
        for (std::size_t r = 0; r < RB; ++r) {
            const batch cb(corr[r * C]);
            batch x[NQ];
            for (std::size_t q = 0; q < NQ; ++q) x[q] = batch::load_aligned(out + r * dp + t0 + q * lanes) * cb;
            for (std::size_t q = 0; q < NQ; q += 2) isa::to_pair_order<bf16>(x[q], x[q + 1]);
            for (std::size_t q = 0; q < NQ; ++q) a[r][q].v = x[q];
        }
        for (std::size_t j = 0; j < n; j += 2) {
            next.step();
            // an odd n's last pair: row n - 1 twice (key n weighs 0)
            const bf16* va = v + j * vs + t0;
            const bf16* vb = v + std::min(j + 1, n - 1) * vs + t0;
            typename D::words x[NQ];
            for (std::size_t q = 0; q < NQ; q += 2) D::interleave(va + q * lanes, vb + q * lanes, x[q], x[q + 1]);
            const std::uint32_t* wj = w + j / C * half + j % C / 2;
            for (std::size_t r = 0; r < RB; ++r)
                for (std::size_t q = 0; q < NQ; ++q) a[r][q] = D::dot_word(a[r][q], x[q], wj + r * C / 2);
        }
        for (std::size_t r = 0; r < RB; ++r) {
            batch x[NQ];
            for (std::size_t q = 0; q < NQ; ++q) x[q] = D::to_float(a[r][q]);
            for (std::size_t q = 0; q < NQ; q += 2) isa::from_pair_order<bf16>(x[q], x[q + 1]);
            for (std::size_t q = 0; q < NQ; ++q) x[q].store_aligned(out + r * dp + t0 + q * lanes);
        }
    }
    v_next = next;
}

/// The steps of v_next decode_pv_bf16<D, C> takes over n keys at value width d.
template <std::size_t C>
constexpr std::size_t pv_bf16_steps(std::size_t d, std::size_t n) {
    constexpr std::size_t NQ = lanes / C >= 8 ? 2 : 4;
    return (n + 1) / 2 * (d / (NQ * lanes));
}

/// The register blocks of the heads-in-the-lanes pieces (C = 1), sized to the register file so
/// that no accumulator is spilled: NB blocks of `lanes` heads share each broadcast key or value
/// element (NB = 2 halves the broadcasts per FMA), K keys (scores) or TB value dims (P V) per
/// pass. AVX2's 16 registers: 2 x 4 score and 2 x 6 P V accumulators (a 2 x 16 P V block, 8 of
/// them spilled to the stack and reloaded every key, ran MQA's P V at a fifth of the FMA peak);
/// one block, 8 and 8 (for a 12-dim pass clang hoisted the 12 broadcasts and spilled 9
/// accumulators).
template <std::size_t NB>
struct heads_blocking {
    static constexpr bool wide = isa::vector_registers >= 32;
    static constexpr std::size_t K = NB == 2 ? (wide ? 8 : 4) : 8;
    static constexpr std::size_t TB = NB == 2 ? (wide ? 12 : 6) : (wide ? 16 : 8);
};

/// Scores of NB blocks of heads and K keys, C dims a lane: lane r*C + c of acc[b][i] sums q_r[t]
/// k_i[t] over the dims t = c (mod C) of block b's head r (block b's queries chunk-major at qa + b *
/// q_stride: lane r*C + c of chunk ch is head r's dim ch*C + c; fp32 key rows kf[i]: the cache's own
/// rows, or a narrow cache's keys widened once into an L1 block), over nch chunks. Each key chunk
/// is broadcast once for the NB blocks. C = 1 puts the heads in the lanes (a lane is a head's whole
/// score); with C > 1 decode_item adds each head's C lanes (transpose_sum).
template <std::size_t NB, std::size_t K, std::size_t C = 1>
[[gnu::always_inline]] inline void score_heads(const float* qa, std::size_t q_stride, const float* const* kf,
                                               std::size_t nch, batch (&acc)[NB][K], paced_lines* lines = nullptr) {
    for (std::size_t b = 0; b < NB; ++b)
        for (std::size_t i = 0; i < K; ++i) acc[b][i] = batch(0.0f);
    for (std::size_t t = 0; t < nch; ++t) {
        if (lines) lines->step();
        batch q[NB];
        for (std::size_t b = 0; b < NB; ++b) q[b] = batch::load_aligned(qa + b * q_stride + t * lanes);
        for (std::size_t i = 0; i < K; ++i) {
            const batch x = isa::broadcast_chunk<C>(kf[i] + t * C);
            for (std::size_t b = 0; b < NB; ++b) acc[b][i] = isa::fused(x, q[b], acc[b][i]);
        }
    }
}

/// score_heads on pairs of dims (1 < C < lanes), D an engine of them: isa::int8_dots<std::int8_t>
/// (AVX512-VNNI; E = int16: the int8 keys sign-extended into 16-bit rows kw[i], the queries in
/// 16-bit fixed point, exact in int32, rounded once to fp32 in units of each head's query scale)
/// or isa::bf16_dots<bf16> (AVX512_BF16; E = bf16: the cache's own rows, the queries rounded to
/// bf16, fp32 sums). The queries' pairs at qa + b * q_stride (rearrange_queries: lane r*C + c of
/// pair chunk t is head r's dims 2(tC + c) and 2(tC + c) + 1), over nch2 = d / 2C pair chunks: one
/// product per pair chunk, key and block, half score_heads' FMAs and no widening to fp32.
template <class D, std::size_t NB, std::size_t K, std::size_t C, class E>
[[gnu::always_inline]] inline void score_heads_pairs(const std::int32_t* qa, std::size_t q_stride, const E* const* kw,
                                                     std::size_t nch2, batch (&acc)[NB][K],
                                                     paced_lines* lines = nullptr) {
    decltype(D::zero()) a[NB][K];
    for (std::size_t b = 0; b < NB; ++b)
        for (std::size_t i = 0; i < K; ++i) a[b][i] = D::zero();
    for (std::size_t t = 0; t < nch2; ++t) {
        if (lines) lines->step();
        decltype(D::load_pairs(qa)) q[NB];
        for (std::size_t b = 0; b < NB; ++b) q[b] = D::load_pairs(qa + b * q_stride + t * lanes);
        for (std::size_t i = 0; i < K; ++i) {
            const auto x = D::template pairs<C>(kw[i] + t * 2 * C);
            for (std::size_t b = 0; b < NB; ++b) a[b][i] = D::dot(a[b][i], x, q[b]);
        }
    }
    for (std::size_t b = 0; b < NB; ++b)
        for (std::size_t i = 0; i < K; ++i) acc[b][i] = D::to_float(a[b][i]);
}

/// score_heads_pairs' int8 form on byte quads (1 < C < lanes, one block; D = isa::int8_dots<std::int8_t>):
/// the key rows kr[i] as stored, C dwords of four dims broadcast (D::quads), against the
/// queries' two byte planes (rearrange_queries: plane chunk t at qa + t * lanes, the low plane's
/// nch4 chunks after the high one's), two accumulators a key; each lane's integer sum of q k
/// less the planes' offsets (bias, a lane each) rounded once to fp32, in units of the head's
/// query scale, as score_heads_pairs leaves it. nch4 = d / 4C chunks.
template <class D, std::size_t K, std::size_t C>
[[gnu::always_inline]] inline void score_heads_quads(const std::int32_t* qa, const std::int32_t* bias,
                                                     const std::int8_t* const* kr, std::size_t nch4, batch (&acc)[1][K],
                                                     paced_lines* lines = nullptr) {
    decltype(D::zero()) hi[K], lo[K];
    for (std::size_t i = 0; i < K; ++i) hi[i] = lo[i] = D::zero();
    for (std::size_t t = 0; t < nch4; ++t) {
        if (lines) lines->step();
        const auto qh = D::load_pairs(qa + t * lanes), ql = D::load_pairs(qa + (nch4 + t) * lanes);
        for (std::size_t i = 0; i < K; ++i) {
            const auto x = D::template quads<C>(kr[i] + t * 4 * C);
            hi[i] = D::dot_bytes(hi[i], x, qh);
            lo[i] = D::dot_bytes(lo[i], x, ql);
        }
    }
    const auto b = D::load_pairs(bias);
    for (std::size_t i = 0; i < K; ++i) acc[0][i] = D::quads_to_float(hi[i], lo[i], b);
}

/// score_heads for one block with two accumulators a key: the even chunks into one, the odd
/// into the other, summed at the end. One block of K = 8 keys gives 8 FMA chains, exactly the
/// 2 ports x 4 cycles of latency with no slack for a load or a prefetch; 16 chains leave some
/// (GQA 2 and 4 at H 16 on AVX-512: R < lanes, one block). Needs 2 K + 4 registers.
template <std::size_t K, std::size_t C>
[[gnu::always_inline]] inline void score_block_split(const float* qa, const float* const* kf, std::size_t nch,
                                                     batch (&acc)[1][K], paced_lines* lines = nullptr) {
    batch e[K], o[K];
    for (std::size_t i = 0; i < K; ++i) e[i] = o[i] = batch(0.0f);
    std::size_t t = 0;
    for (; t + 2 <= nch; t += 2) {
        if (lines) {
            lines->step();
            lines->step();
        }
        const batch q0 = batch::load_aligned(qa + t * lanes), q1 = batch::load_aligned(qa + (t + 1) * lanes);
        for (std::size_t i = 0; i < K; ++i) {
            e[i] = isa::fused(isa::broadcast_chunk<C>(kf[i] + t * C), q0, e[i]);
            o[i] = isa::fused(isa::broadcast_chunk<C>(kf[i] + (t + 1) * C), q1, o[i]);
        }
    }
    if (t < nch) {
        if (lines) lines->step();
        const batch q0 = batch::load_aligned(qa + t * lanes);
        for (std::size_t i = 0; i < K; ++i) e[i] = isa::fused(isa::broadcast_chunk<C>(kf[i] + t * C), q0, e[i]);
    }
    for (std::size_t i = 0; i < K; ++i) acc[0][i] = e[i] + o[i];
}

/// One pass of the heads-in-the-lanes P V update over value dims [t0, t0 + TB) of NB blocks:
/// block b's outputs are dim-major at out + b * out_stride ([d][lanes]: one accumulator is one
/// output dim of the block's heads), its weights of key j one vector at s + b * s_stride + j *
/// lanes, its running-max rescale cr[b]. Each value element is broadcast once for the NB blocks.
template <std::size_t NB, std::size_t TB, class Lines>
[[gnu::always_inline]] inline void pv_heads_pass(float* out, std::size_t out_stride, std::size_t t0, const batch* cr,
                                                 const float* s, std::size_t s_stride, const float* v, std::size_t vs,
                                                 std::size_t n, Lines& v_next) {
    batch a[NB][TB];
    for (std::size_t b = 0; b < NB; ++b)
        for (std::size_t i = 0; i < TB; ++i)
            a[b][i] = batch::load_aligned(out + b * out_stride + (t0 + i) * lanes) * cr[b];
    auto key = [&](std::size_t j) {
        batch pj[NB];
        for (std::size_t b = 0; b < NB; ++b) pj[b] = batch::load_aligned(s + b * s_stride + j * lanes);
        const float* vj = v + j * vs + t0;
        for (std::size_t i = 0; i < TB; ++i) {
            const auto x = batch(vj[i]); // not batch{...}: that is the initializer_list load
            for (std::size_t b = 0; b < NB; ++b) a[b][i] = isa::fused(pj[b], x, a[b][i]);
        }
    };
    // two keys an iteration, one step of the next tile's value lines per pair (pv_heads_steps
    // counts them: the lines go evenly over all the passes, however many the width makes)
    std::size_t j = 0;
    for (; j + 2 <= n; j += 2) {
        v_next.step();
        key(j);
        key(j + 1);
    }
    if (j < n) key(j);
    for (std::size_t b = 0; b < NB; ++b)
        for (std::size_t i = 0; i < TB; ++i) a[b][i].store_aligned(out + b * out_stride + (t0 + i) * lanes);
}

/// The last d % TB dims: one pass of exactly `rest` (< TB) dims, so every pass keeps its
/// accumulators in registers for the whole tile.
template <std::size_t NB, std::size_t R, class Lines>
void pv_heads_rest(std::size_t rest, float* out, std::size_t out_stride, std::size_t t0, const batch* cr,
                   const float* s, std::size_t s_stride, const float* v, std::size_t vs, std::size_t n, Lines& v_next) {
    if constexpr (R > 0) {
        if (rest == R)
            pv_heads_pass<NB, R>(out, out_stride, t0, cr, s, s_stride, v, vs, n, v_next);
        else
            pv_heads_rest<NB, R - 1>(rest, out, out_stride, t0, cr, s, s_stride, v, vs, n, v_next);
    }
}

template <std::size_t NB, class Lines>
void pv_heads_blocks(float* out, std::size_t out_stride, std::size_t d, const float* corr, const float* s,
                     std::size_t s_stride, const float* v, std::size_t vs, std::size_t n, Lines& v_next) {
    constexpr std::size_t TB = heads_blocking<NB>::TB;
    batch cr[NB];
    for (std::size_t b = 0; b < NB; ++b) cr[b] = batch::load_aligned(corr + b * lanes);
    std::size_t t0 = 0;
    for (; t0 + TB <= d; t0 += TB) pv_heads_pass<NB, TB>(out, out_stride, t0, cr, s, s_stride, v, vs, n, v_next);
    if (t0 < d) pv_heads_rest<NB, TB - 1>(d - t0, out, out_stride, t0, cr, s, s_stride, v, vs, n, v_next);
}

/// The steps of the next tile's value lines decode_pv_heads takes over n keys of `blocks`
/// blocks at value width d: one a pair of keys in each pass, ceil(d / TB) passes a pair of
/// blocks (TB of heads_blocking<2>), and of a block left alone (heads_blocking<1>).
inline std::size_t pv_heads_steps(std::size_t blocks, std::size_t d, std::size_t n) {
    const std::size_t t2 = heads_blocking<2>::TB, t1 = heads_blocking<1>::TB;
    return (blocks / 2 * ((d + t2 - 1) / t2) + blocks % 2 * ((d + t1 - 1) / t1)) * (n / 2);
}

/// The P V update with the heads in the lanes (C = 1: R >= lanes query heads share the key/value
/// head, MQA and MLA's absorbed form), for `blocks` blocks of `lanes` heads: block b's outputs
/// dim-major at out + b * out_stride, its weights (score group j = key j, one lane per head) at
/// s + b * s_stride, its rescale per head at corr + b * lanes. Per key, each value element is
/// broadcast once and multiplies the weights of two blocks (heads_blocking): one FMA per element
/// of v_j and head block, whatever d is (MLA's d_c = 512: a runtime loop of register passes).
/// v is the value tile in fp32 (decode_item copies, or widens, the cache's tile into it); v_next
/// the next tile's value lines (paced_lines over pv_heads_steps; the tests count with another).
template <class Lines>
void decode_pv_heads(float* out, std::size_t out_stride, std::size_t blocks, std::size_t d, const float* corr,
                     const float* s, std::size_t s_stride, const float* v, std::size_t vs, std::size_t n,
                     Lines& v_next) {
    for (std::size_t blk = 0; blk < blocks; blk += 2) {
        float* o = out + blk * out_stride;
        if (blk + 2 <= blocks)
            pv_heads_blocks<2>(o, out_stride, d, corr + blk * lanes, s + blk * s_stride, s_stride, v, vs, n, v_next);
        else
            pv_heads_blocks<1>(o, out_stride, d, corr + blk * lanes, s + blk * s_stride, s_stride, v, vs, n, v_next);
    }
}

} // namespace attn::kernels::detail
