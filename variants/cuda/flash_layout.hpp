// attn::cuda::flash_layout -- cuda-flash's tiles, shared-memory layout and fragment maps, as
// functions the host tests check without a GPU (host and device, plain C++17 outside nvcc).
//  - Tiles (config): a block of `warps` warps takes block_q = warps x 16 x mt query rows (mt m16
//    row tiles a warp, so a warp's softmax needs no other warp, and each K or V fragment loaded
//    from shared memory feeds mt MMAs) and streams key/value tiles of block_kv keys. The widths
//    DQK and DV are the instantiation's; a narrower head (a multiple of 8) is zero-padded on load.
//  - Shared memory: rows of d 16-bit elements, d a multiple of 64 (128, 256 or 384 bytes), a
//    multiple of the 128 bytes the 32 banks span: unswizzled, the 8 rows one ldmatrix phase reads
//    (the same 16-byte chunk of 8 consecutive rows) would all hit one group of 4 banks, an 8-way
//    conflict. The chunk index is XORed with row % 8 instead: those 8 rows land in 8 distinct
//    16-byte bank groups (no conflict), the map stays a bijection on every row (XOR with a constant
//    below 8 permutes each aligned group of 8 chunks), and cp.async's 16-byte writes keep whole
//    chunks together.
#pragma once

#include "hd.hpp"

namespace attn::cuda::flash_layout {

inline constexpr int chunk = 8;  ///< 16-bit elements per 16-byte chunk (one cp.async, one ldmatrix row)
inline constexpr int stages = 2; ///< K and V tiles in flight: the next one loads while this one is used

/// One instantiation: widths DQK x DV (multiples of 64), WARPS warps of MT m16 row tiles, BKV keys a tile.
template <int DQK, int DV, int WARPS, int MT, int BKV>
struct config {
    static constexpr int dqk = DQK, dv = DV, warps = WARPS, mt = MT, block_kv = BKV;
    static constexpr int rows_per_warp = 16 * MT, block_q = WARPS * 16 * MT, threads = WARPS * 32;
    /// Q's A fragments held in registers for the whole block (mt x dqk / 16 x 4 registers) when
    /// that costs at most 32; otherwise re-read from shared memory at every k-step.
    static constexpr bool q_in_registers = MT * DQK <= 128;
    static constexpr int smem_bytes = (block_q * DQK + stages * BKV * (DQK + DV)) * 2;
    static_assert(DQK % 64 == 0 && DV % 64 == 0, "rows of whole 128-byte swizzle groups");
    static_assert(BKV % 16 == 0 && BKV * DQK / 8 % (WARPS * 32) == 0 && BKV * DV / 8 % (WARPS * 32) == 0,
                  "every thread copies the same number of chunks");
};

/// Element offset of (row, col) in a tile whose rows hold d 16-bit elements (d a multiple of 64).
ATTN_HD constexpr int swizzle(int row, int col, int d) {
    return row * d + ((((col / chunk) ^ (row % 8))) * chunk) + col % chunk;
}

/// A (row, column) position in a tile or a fragment.
struct rc {
    int row, col;
};

// Which tile row and column lane `lane` hands to ldmatrix.x4 (lane l addresses row l % 8 of
// matrix l / 8; each address is the start of 8 consecutive 16-bit elements). The matrix order
// puts each register where mma.m16n8k16's fragment wants it (PTX ISA, "Matrix fragments for
// mma.m16n8k16"):
/// Q's A fragment of the 16 rows from row0 at k-step ks: matrices (rows 0-7 | 8-15) x (cols +0 |
/// +8) -> a0..a3.
ATTN_HD constexpr rc q_frag_addr(int row0, int ks, int lane) {
    return {row0 + lane % 8 + ((lane / 8) % 2) * 8, ks * 16 + (lane / 16) * 8};
}
/// K's B fragments (K as stored, [key][d], is B = K^T column-major) for keys [16 np, 16 np + 16) at
/// k-step ks: matrices (keys +0 | +8) x (cols +0 | +8) -> b0, b1 of n-tile 2np, then of 2np + 1.
ATTN_HD constexpr rc k_frag_addr(int np, int ks, int lane) {
    return {np * 16 + lane % 8 + (lane / 16) * 8, ks * 16 + ((lane / 8) % 2) * 8};
}
/// V's B fragments through ldmatrix .trans (V is [key][d] row-major, B wants it column-major) for
/// keys [16 kk, 16 kk + 16) and columns [16 dp, 16 dp + 16): matrices (keys +0 | +8) x (cols +0 |
/// +8) -> b0, b1 of column tile 2dp, then of 2dp + 1.
ATTN_HD constexpr rc v_frag_addr(int kk, int dp, int lane) {
    return {kk * 16 + lane % 8 + ((lane / 8) % 2) * 8, dp * 16 + (lane / 16) * 8};
}
/// Element e (0-3) of a lane's 16x8 fp32 C fragment: rows lane / 4 (e 0, 1) and + 8 (e 2, 3),
/// columns 2 (lane % 4) + e % 2.
ATTN_HD constexpr rc c_frag_elem(int lane, int e) { return {lane / 4 + (e / 2) * 8, 2 * (lane % 4) + e % 2}; }
/// P's A fragment register i (0-3) for keys [16 kk, 16 kk + 16) is the pair of S elements
/// (p_elem(i), p_elem(i) + 1) of S's n-tile p_ntile(kk, i): the C layout of two n-tiles is the A
/// layout of one k-step, so P goes from the first MMA to the second without leaving registers.
ATTN_HD constexpr int p_ntile(int kk, int i) { return 2 * kk + i / 2; }
ATTN_HD constexpr int p_elem(int i) { return (i % 2) * 2; }

} // namespace attn::cuda::flash_layout
