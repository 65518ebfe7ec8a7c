// attn::cuda::prefill -- which keys each query row sees, which key tiles each query tile visits and
// which of them need a mask, and the order in which query tiles are taken: shared by cuda-tiled,
// cuda-flash and cuda-hopper (host and device, plain C++17 outside nvcc), tested on the host
// against brute force over every (row, key).
//  - The mask: bottom-right causal (row i sees keys j <= i + n_kv - n_q) and, under a sliding window
//    W (causal only), keys j >= i + n_kv - n_q - W + 1: the CPU suite's convention (problem.cppm,
//    keys_begin / keys_end). Both ends grow with i, so a query tile's rows see one contiguous range
//    of keys: from the first row's first key to the last row's last.
//  - A key tile needs no mask when every real row of the query tile sees every key of it: it starts
//    at or after the last row's first key and ends at or before the first row's end (which is at
//    most n_kv, so tiles past the end are masked). Only the tiles at the diagonal and at the
//    window's lower edge are masked.
//  - The order: (batch, head) pairs in groups whose K/V fit a share of the L2, and inside a group
//    the query tiles from the last (the longest causal rows) to the first, every pair of the group
//    at each tile. Consecutive blocks read the same keys (L2 reuse) and the heaviest tiles start
//    first, so the last wave is short.
#pragma once

#include "hd.hpp"

namespace attn::cuda::prefill {

/// One core's mask. window 0: none (a window of n_kv or more hides nothing and is passed as 0).
struct mask {
    int n_q = 1, n_kv = 1;
    bool causal = false;
    int window = 0;
};

ATTN_HD constexpr long long min_ll(long long a, long long b) { return a < b ? a : b; }

/// One past the last key row i sees; 0 when it sees none (causal with n_q > n_kv).
ATTN_HD constexpr long long key_end(const mask& m, long long i) {
    if (!m.causal) return m.n_kv;
    const long long last = i + m.n_kv - m.n_q;
    return last < 0 ? 0 : min_ll(last + 1, m.n_kv);
}
/// The first key row i sees.
ATTN_HD constexpr long long key_begin(const mask& m, long long i) {
    const long long e = key_end(m, i);
    return m.window > 0 && e > m.window ? e - m.window : 0;
}
ATTN_HD constexpr bool visible(const mask& m, long long i, long long j) {
    return j >= key_begin(m, i) && j < key_end(m, i);
}

/// Key tiles [begin, end) of block_kv keys that rows [q0, q0 + rows) (clipped to n_q) visit;
/// begin == end when none of them sees a key.
struct tile_range {
    int begin = 0, end = 0;
    ATTN_HD constexpr int count() const { return end > begin ? end - begin : 0; }
};
ATTN_HD constexpr tile_range kv_tiles(const mask& m, int q0, int rows, int block_kv) {
    const long long last = min_ll((long long)q0 + rows, m.n_q) - 1;
    const long long b = key_begin(m, q0), e = key_end(m, last);
    if (e <= b) return {0, 0};
    return {int(b / block_kv), int((e + block_kv - 1) / block_kv)};
}

/// Whether some real row of [q0, q0 + rows) must not see some key of [j0, j0 + block_kv).
ATTN_HD constexpr bool tile_needs_mask(const mask& m, int q0, int rows, int j0, int block_kv) {
    const long long last = min_ll((long long)q0 + rows, m.n_q) - 1;
    return !(j0 >= key_begin(m, last) && (long long)j0 + block_kv <= key_end(m, q0));
}

/// The order of the work tiles (query tile, batch x head): item w of size() for w = 0, 1, ...
/// hb = b * heads + h, so the query heads of one kv head (GQA) are neighbours in a group.
struct schedule {
    long long q_tiles = 1, pairs = 1; ///< query tiles per (batch, head); batch x heads
    long long group = 1;              ///< (batch, head) pairs per L2 group

    ATTN_HD constexpr long long size() const { return q_tiles * pairs; }
    struct item {
        int q_tile;
        long long hb;
    };
    ATTN_HD constexpr item at(long long w) const {
        const long long per_group = group * q_tiles; // every group before the last is full
        const long long hb0 = w / per_group * group;
        const long long n = min_ll(group, pairs - hb0), r = w - hb0 * q_tiles;
        return {int(q_tiles - 1 - r / n), hb0 + r % n};
    }
};

/// The schedule whose groups' keys and values (kv_bytes_per_pair each, per query head) fit in
/// `budget` bytes; at least one pair a group.
constexpr schedule make_schedule(long long q_tiles, long long pairs, long long kv_bytes_per_pair, long long budget) {
    schedule s;
    s.q_tiles = q_tiles < 1 ? 1 : q_tiles;
    s.pairs = pairs < 1 ? 1 : pairs;
    long long g = kv_bytes_per_pair > 0 ? budget / kv_bytes_per_pair : s.pairs;
    s.group = g < 1 ? 1 : g > s.pairs ? s.pairs : g;
    return s;
}

} // namespace attn::cuda::prefill
