// attn::cuda::flash_layout -- cuda-flash's tiles and shared-memory layout, as functions the host
// tests check without a GPU (host and device, plain C++17 outside nvcc).
//  - Tiles: a block of 4 warps takes block_q = 64 query rows (16 per warp: one m16 MMA row tile,
//    so a warp's softmax needs no other warp) and streams key/value tiles of block_kv = 64.
//  - Shared memory: rows of d 16-bit elements, 128 (d 64) or 256 (d 128) bytes, a multiple of the
//    128 bytes the 32 banks span: unswizzled, the 8 rows one ldmatrix reads (the same 16-byte chunk
//    of 8 consecutive rows) would all hit one group of 4 banks, an 8-way conflict. The chunk index
//    is XORed with row % 8 instead: those 8 rows land in 8 distinct 16-byte bank groups (no
//    conflict), the map stays a bijection on every row (XOR with a constant below 8 permutes each
//    aligned group of 8 chunks), and cp.async's 16-byte writes keep whole chunks together.
#pragma once

#ifndef ATTN_HD
#if defined(__CUDACC__)
#define ATTN_HD __host__ __device__
#else
#define ATTN_HD
#endif
#endif

namespace attn::cuda::flash_layout {

inline constexpr int block_q = 64;  ///< query rows per block
inline constexpr int block_kv = 64; ///< keys per tile
inline constexpr int warps = 4;     ///< 16 query rows each
inline constexpr int threads = 128; ///< warps x 32
inline constexpr int chunk = 8;     ///< 16-bit elements per 16-byte chunk (one cp.async, one ldmatrix row)
inline constexpr int stages = 2;    ///< K/V tiles in flight: the next one loads while this one is used

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
/// Q's A fragment for k-step ks of warp `warp`: matrices (rows 0-7 | 8-15) x (cols +0 | +8) -> a0..a3.
ATTN_HD constexpr rc q_frag_addr(int warp, int ks, int lane) {
    return {warp * 16 + lane % 8 + ((lane / 8) % 2) * 8, ks * 16 + (lane / 16) * 8};
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

/// Shared memory of one block: the Q tile, then `stages` K tiles and `stages` V tiles.
ATTN_HD constexpr int smem_bytes(int d) { return (block_q + 2 * stages * block_kv) * d * 2; }

/// How many key tiles the block of query rows starting at q0 visits: up to the last key its last
/// row sees (bottom-right causal: row i sees keys j <= i + n_kv - n_q); 0 when no row sees one.
ATTN_HD constexpr int kv_tiles(int q0, int n_q, int n_kv, bool causal) {
    long long end = n_kv;
    if (causal) {
        const long long last_row = (q0 + block_q < n_q ? q0 + block_q : n_q) - 1;
        const long long e = last_row + 1 + (long long)n_kv - n_q; // keys the last row sees
        end = e < end ? e : end;
    }
    return end <= 0 ? 0 : int((end + block_kv - 1) / block_kv);
}

/// Whether the key tile starting at j0 holds a key that some row of the block (from q0) must not
/// see: past n_kv, or (causal) past what the block's first row sees.
ATTN_HD constexpr bool tile_needs_mask(int j0, int q0, int n_q, int n_kv, bool causal) {
    return j0 + block_kv > n_kv || (causal && (long long)j0 + block_kv - 1 > (long long)q0 + n_kv - n_q);
}

} // namespace attn::cuda::flash_layout
