// attn::cuda::decode_layout -- where cuda-decode's data lives, as functions of plain integers that
// the kernels call and the host tests check (host and device; plain C++17 outside nvcc):
//  - cache rows: a key position's slot (rolling buffer), its row in a contiguous cache
//    [B, G, capacity, d] or a paged one [pages, page_size, G, d] through the block table;
//  - shared-memory tiles: rows padded to a multiple of 128 bytes, the 16-byte chunk index XORed
//    with row % 8 (8 consecutive rows' same chunk land in 8 distinct bank groups; a bijection on
//    each row, chunks kept whole for cp.async and ldmatrix);
//  - mma.m16n8k16 fragments (PTX ISA, "Matrix fragments for mma.m16n8k16"): which element each
//    lane holds, which tile row and column each lane hands to ldmatrix, and the int8 cache's own
//    fragment loads (no ldmatrix for bytes): the k dimension of Q K^T is permuted so that a lane's
//    4-byte load of a key row is its B fragment (Q's A fragment takes the same permutation), and
//    V's columns are permuted so that a lane's NV-byte load of a key row serves NV column tiles;
//  - int8 widening by byte permutes: byte x (two's complement) XOR 0x80 is x + 128; prmt places it
//    under the exponent of 2^23 (0x4B0000uu = 2^23 + u), one fp32 subtraction of 2^23 + 128
//    leaves x exactly, and a second prmt packs two such floats' upper halves into a bf16 pair
//    (exact: |x| <= 128 needs 8 significant bits). The row's scale is applied once per row.
#pragma once

#include <cstdint>
#include <cstring>

#include "hd.hpp"

namespace attn::cuda::decode_layout {

// ---- key ranges ------------------------------------------------------------------------------

/// Key positions [begin, end) of a sequence.
struct key_range {
    long long begin = 0, end = 0;
    ATTN_HD long long size() const { return end - begin; }
};

/// Keys query row i (0 <= i < n_q) of a step over n keys sees (the n_q new tokens are the last n_q):
/// bottom-right causal, keys <= i + n - n_q; under a window W, the W keys ending there (the CPU
/// suite's keys_begin / keys_end).
ATTN_HD inline key_range row_keys(long long n, int n_q, int i, long long window, bool causal) {
    key_range r;
    r.end = causal ? (i + n - n_q + 1 < n ? i + n - n_q + 1 : n) : n;
    if (r.end < 0) r.end = 0;
    r.begin = window > 0 && r.end > window ? r.end - window : 0;
    return r;
}

/// The union over the step's rows: from row 0's first key to row n_q - 1's last.
ATTN_HD inline key_range step_keys(long long n, int n_q, long long window, bool causal) {
    return {row_keys(n, n_q, 0, window, causal).begin, row_keys(n, n_q, n_q - 1, window, causal).end};
}

/// Tiles of `tile` keys covering `keys` keys.
ATTN_HD inline long long tiles_of(long long keys, int tile) { return keys <= 0 ? 0 : (keys + tile - 1) / tile; }

/// Tiles [chunk_first(c), chunk_first(c + 1)) form chunk c of `splits`: every tile in exactly one
/// chunk, sizes within one; a chunk is empty when a sequence has fewer tiles than splits.
ATTN_HD inline long long chunk_first(long long tiles, int splits, int c) { return tiles * c / splits; }

// ---- cache rows ------------------------------------------------------------------------------

/// How a sequence's key positions map to cache rows. page == 0: contiguous, rows of (b, g) at
/// ((b G + g) capacity + slot); else row (table[b][slot / page] page + slot % page) G + g. The row
/// times the row's elements is the element offset; int8 scales are indexed by the row itself.
struct cache_map {
    int kv_heads = 1;
    long long capacity = 0; ///< contiguous: rows per (b, g)
    int page = 0;           ///< 0: contiguous; else a power of two
    int page_shift = 0;     ///< log2(page)
    int max_pages = 0;      ///< block table row length
    long long ring = 0;     ///< 0: none; else slot = position mod ring
    const std::int32_t* table = nullptr;
};

/// Positions and rings are below 2^31 (decode_refusal), so the modulo is a 32-bit one.
ATTN_HD inline long long slot_of(const cache_map& m, long long pos) {
    return m.ring > 0 ? (long long)((unsigned)pos % (unsigned)m.ring) : pos;
}

ATTN_HD inline long long row_of_slot(const cache_map& m, int b, int g, long long slot) {
    if (m.page == 0) return ((long long)b * m.kv_heads + g) * m.capacity + slot;
    const long long page = m.table[(long long)b * m.max_pages + (slot >> m.page_shift)];
    return ((page << m.page_shift) + (slot & (m.page - 1))) * m.kv_heads + g;
}

ATTN_HD inline long long row_of(const cache_map& m, int b, int g, long long pos) {
    return row_of_slot(m, b, g, slot_of(m, pos));
}

/// The slot of row r of a tile whose first key is in slot slot0, as the tile loader steps it: one
/// subtraction of the ring, enough because the keys a step reads span at most ring slots.
ATTN_HD inline long long tile_slot(long long slot0, int r, long long ring) {
    const long long s = slot0 + r;
    return ring > 0 && s >= ring ? s - ring : s;
}

// ---- shared-memory tiles ---------------------------------------------------------------------

/// Bytes between tile rows: the row's bytes rounded up to 128 (so every row has whole groups of
/// 8 chunks for the XOR below).
ATTN_HD constexpr int row_stride(int row_bytes) { return (row_bytes + 127) / 128 * 128; }

/// Byte offset of 16-byte chunk `chunk` of tile row `row`.
ATTN_HD constexpr int chunk_offset(int row, int chunk, int stride) { return row * stride + ((chunk ^ (row & 7)) << 4); }

/// Byte offset of byte `col` of tile row `row`.
ATTN_HD constexpr int byte_offset(int row, int col, int stride) {
    return chunk_offset(row, col >> 4, stride) + (col & 15);
}

// ---- mma.m16n8k16 fragments ------------------------------------------------------------------

struct rc {
    int row, col;
};

/// A (16 x 16, row-major): register r (0-3), half h (0 low, 1 high) of lane l.
ATTN_HD constexpr rc a_elem(int lane, int r, int h) {
    return {lane / 4 + (r % 2) * 8, 2 * (lane % 4) + h + (r / 2) * 8};
}
/// B (16 x 8, k x n): register r (0-1), half h: {k, n}.
ATTN_HD constexpr rc b_elem(int lane, int r, int h) { return {2 * (lane % 4) + h + r * 8, lane / 4}; }
/// C (16 x 8 fp32): element e (0-3).
ATTN_HD constexpr rc c_elem(int lane, int e) { return {lane / 4 + (e / 2) * 8, 2 * (lane % 4) + e % 2}; }

/// The d column of Q (and K) that k index k (0-15) of k-step ks stands for. 16-bit caches: 16 ks + k.
/// int8: the B fragment's registers are bytes {0,1} and {2,3} of the word at byte 16 ks + 4 (lane % 4)
/// of the key row, so k = 2t + h (t = (k % 8) / 2, h = k % 2) is byte 16 ks + 4t + h and k + 8 is
/// byte 16 ks + 4t + 2 + h.
ATTN_HD constexpr int q_col(int ks, int k, bool int8) {
    return int8 ? 16 * ks + 4 * ((k % 8) / 2) + 2 * (k / 8) + k % 2 : 16 * ks + k;
}

/// ldmatrix.x4 of K (tile rows = keys, columns = d): B fragments of n-tiles (n0 / 8) and (n0 / 8 + 1)
/// at k-step ks: matrices (keys +0 | +8) x (cols +0 | +8) -> b0, b1 of the first n-tile, then the second.
ATTN_HD constexpr rc k_ldsm(int lane, int n0, int ks) {
    return {n0 + lane % 8 + (lane / 16) * 8, ks * 16 + ((lane / 8) % 2) * 8};
}
/// ldmatrix.x4.trans of V (rows = keys, columns = d) for keys [k0, k0 + 16) and columns [c0, c0 + 16):
/// matrices (keys +0 | +8) x (cols +0 | +8) -> b0, b1 of column tile c0 / 8, then of c0 / 8 + 1.
ATTN_HD constexpr rc v_ldsm(int lane, int k0, int c0) {
    return {k0 + lane % 8 + ((lane / 8) % 2) * 8, c0 + (lane / 16) * 8};
}
/// ldmatrix.x4 of P (rows = query rows, columns = keys): A fragment of m-tile m0 / 16, keys [k0, k0 + 16).
ATTN_HD constexpr rc p_ldsm(int lane, int m0, int k0) {
    return {m0 + lane % 8 + ((lane / 8) % 2) * 8, k0 + (lane / 16) * 8};
}
/// 16-bit V: the d column of n index n of the warp's column tile j (from column cb).
ATTN_HD constexpr int v16_col(int cb, int j, int n) { return cb + 8 * j + n; }

/// int8 K at k-step ks: the key row (of the n-tile starting at n0) and the byte where lane's 4-byte
/// word starts.
ATTN_HD constexpr rc k8_word(int lane, int n0, int ks) { return {n0 + lane / 4, 16 * ks + 4 * (lane % 4)}; }
/// int8 V for keys [k0, k0 + 16): load i (0-3) reads key row k0 + 2t + i % 2 + 8 (i / 2); with NV
/// column tiles per warp, a lane reads NV bytes from column cb + NV (lane / 4) of each such row;
/// byte j of load i is (k = 2t + i % 2 + 8 (i / 2), n = lane / 4) of column tile j, whose d column
/// is v8_col(cb, NV, j, n).
ATTN_HD constexpr int v8_key(int lane, int k0, int i) { return k0 + 2 * (lane % 4) + i % 2 + (i / 2) * 8; }
ATTN_HD constexpr int v8_col(int cb, int nv, int j, int n) { return cb + nv * n + j; }

// ---- warp roles in a block of the tensor-core kernel (decode_mma.cuh) ---------------------------

/// S = Q K^T: warp w of NW = KS x CS takes k group w % CS and key group w / CS.
ATTN_HD constexpr int warp_k_group(int warp, int cs) { return warp % cs; }
ATTN_HD constexpr int warp_key_group(int warp, int cs) { return warp / cs; }
/// The first key of the S n-tile pair np of key group kg (SNT n-tiles a key group).
ATTN_HD constexpr int s_key0(int kg, int snt, int np) { return (kg * snt + 2 * np) * 8; }
/// The softmax: warp w owns n-tiles [w own, (w + 1) own) of the tile; the first key of its j-th.
ATTN_HD constexpr int own_key0(int warp, int own, int j) { return (warp * own + j) * 8; }
/// O = P V: warp w's first output column.
ATTN_HD constexpr int pv_col0(int warp, int dv, int nw) { return warp * (dv / nw); }

// ---- int8 widening ---------------------------------------------------------------------------

/// PTX prmt (CUDA __byte_perm): byte i of the result is byte (s >> 4i) & 7 of {b:a} (a = bytes 0-3).
ATTN_HD inline std::uint32_t byte_perm(std::uint32_t a, std::uint32_t b, std::uint32_t s) {
#if defined(__CUDA_ARCH__)
    return __byte_perm(a, b, s);
#else
    const std::uint64_t x = (std::uint64_t(b) << 32) | a;
    std::uint32_t r = 0;
    for (int i = 0; i < 4; ++i) r |= std::uint32_t((x >> (8 * ((s >> (4 * i)) & 7))) & 0xff) << (8 * i);
    return r;
#endif
}

ATTN_HD inline float float_of_bits(std::uint32_t u) {
#if defined(__CUDA_ARCH__)
    return __uint_as_float(u);
#else
    float f;
    std::memcpy(&f, &u, sizeof f);
    return f;
#endif
}
ATTN_HD inline std::uint32_t bits_of_float(float f) {
#if defined(__CUDA_ARCH__)
    return __float_as_uint(f);
#else
    std::uint32_t u;
    std::memcpy(&u, &f, sizeof u);
    return u;
#endif
}

/// A word of 4 int8 values made ready for widen_byte (each byte + 128, as unsigned).
ATTN_HD inline std::uint32_t bias_bytes(std::uint32_t w) { return w ^ 0x80808080u; }
/// Byte j (0-3) of a biased word as the exact fp32 value of the int8 it came from.
ATTN_HD inline float widen_byte(std::uint32_t biased, int j) {
    return float_of_bits(byte_perm(biased, 0x4B000000u, 0x7540u | std::uint32_t(j))) - 8388736.0f; // 2^23 + 128
}
/// Two fp32 values exact in bf16 (as widen_byte's) packed as a bf16 pair: lo in bits 0-15.
ATTN_HD inline std::uint32_t pack_exact_bf16(float lo, float hi) {
    return byte_perm(bits_of_float(lo), bits_of_float(hi), 0x7632u);
}
/// bf16 pair of byte ja of biased word a (low) and byte jb of biased word b (high).
ATTN_HD inline std::uint32_t widen_pair(std::uint32_t a, int ja, std::uint32_t b, int jb) {
    return pack_exact_bf16(widen_byte(a, ja), widen_byte(b, jb));
}

} // namespace attn::cuda::decode_layout
