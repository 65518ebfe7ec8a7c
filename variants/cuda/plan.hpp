// attn::cuda::plan -- cuda-decode's host arithmetic, plain C++17, tested without a GPU:
//  - the keys a step reads: every query row of the step sees a contiguous range of key positions
//    (bottom-right causal among the n_q new tokens, a sliding window looking back from each), and
//    the step reads their union [begin, end) once, in tiles of `tile` keys;
//  - the rows of a block: the R x n_q (query head, new token) rows of one kv head, head-major
//    (row r = head r / n_q, token r % n_q), cut into groups of at most `row_cap` rows;
//  - the split of the key tiles into chunks (FlashAttention's split-KV rule, below) and each
//    chunk's tiles: floor(c tiles / splits), so every tile is in exactly one chunk;
//  - the pipeline depth: the stage count that keeps the most cache bytes in flight per SM.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>

#include "decode_layout.hpp"

namespace attn::cuda::plan {

inline constexpr int max_splits = 128;   ///< FlashAttention's cap on the chunks of one unit
inline constexpr int max_stages = 8;     ///< deepest cp.async pipeline planned or accepted
inline constexpr int max_new_tokens = 8; ///< n_q per step

using decode_layout::chunk_first;
using decode_layout::key_range;
using decode_layout::row_keys;
using decode_layout::step_keys;
using decode_layout::tiles_of;

/// The slot of key position t in a rolling buffer of `ring` slots (0: no ring, the slot is t).
inline long long ring_slot(long long t, long long ring) { return ring > 0 ? t % ring : t; }

/// Slots a rolling buffer needs so that every key of a step is still held: W + n_q - 1.
inline long long ring_needed(long long window, int n_q) { return window + n_q - 1; }

/// Fraction of the last wave's slots that hold work when `blocks` blocks run on `slots` slots
/// (SMs x blocks resident per SM): n / ceil(n) with n = blocks / slots (1 for whole waves).
inline double wave_efficiency(long long blocks, long long slots) {
    if (blocks <= 0 || slots <= 0) return 0.0;
    const double waves = double(blocks) / double(slots);
    return waves / std::ceil(waves);
}

/// FlashAttention's split-KV rule (flash_api.cpp num_splits_heuristic), with slots = SMs x the
/// blocks an SM holds (FlashAttention passes 2 x SMs): no split when units >= 0.8 x slots; else,
/// among 1 .. min(max_splits, slots, tiles) splits, the smallest whose wave efficiency is within
/// 85 % of the best; counts that leave the tiles per chunk (rounded up) unchanged from the count
/// below are not eligible, neither as the best nor as the answer.
inline int split_count(long long units, long long slots, long long tiles, int most = max_splits) {
    if (units <= 0 || slots <= 0 || tiles <= 1) return 1;
    if (double(units) >= 0.8 * double(slots)) return 1;
    const long long top = std::min<long long>({(long long)most, slots, tiles});
    const auto eligible = [&](long long s) { // a count that leaves the tiles per chunk unchanged gains nothing
        return s == 1 || (tiles + s - 1) / s != (tiles + s - 2) / (s - 1);
    };
    double best = 0;
    for (long long s = 1; s <= top; ++s)
        if (eligible(s)) best = std::max(best, wave_efficiency(units * s, slots));
    for (long long s = 1; s <= top; ++s)
        if (eligible(s) && wave_efficiency(units * s, slots) >= 0.85 * best) return int(s);
    return 1;
}

/// How the R x n_q rows of one kv head are cut into blocks.
struct row_blocking {
    int rows = 1;   ///< rows per block (the last group may hold fewer)
    int groups = 1; ///< blocks per (sequence, kv head, chunk)
};

/// `heads_per_block` 0: all R heads of a kv head in one block where R x n_q fits row_cap, else
/// as few groups as fit, balanced; a positive value asks for that many heads (rows = heads x n_q,
/// capped). When even one head's n_q rows exceed the cap, a block takes row_cap rows (part of a
/// head's tokens): the rows are head-major, so any contiguous range is a valid block.
inline row_blocking block_rows(int heads_per_kv, int n_q, int heads_per_block, int row_cap) {
    const int total = std::max(1, heads_per_kv) * std::max(1, n_q);
    row_blocking b;
    if (heads_per_block > 0) {
        b.rows = std::min({std::min(heads_per_block, heads_per_kv) * n_q, row_cap, total});
    } else if (total <= row_cap) {
        b.rows = total;
    } else if (n_q > row_cap) {
        b.rows = row_cap;
    } else {
        const int most = row_cap / n_q;                      // heads a block can take
        const int groups = (heads_per_kv + most - 1) / most; // fewest groups
        b.rows = (heads_per_kv + groups - 1) / groups * n_q; // balanced
    }
    b.rows = std::max(1, b.rows);
    b.groups = (total + b.rows - 1) / b.rows;
    return b;
}

/// Rows a tensor-core block takes at most: 2 m-tiles (32 rows) for d_k = d_v, 4 (64) for MLA.
inline constexpr int mma_rows = 32, mla_rows = 64;
/// The m-tile count a tensor-core block of `rows` rows needs.
inline int m_tiles(int rows) { return rows <= 16 ? 1 : rows <= 32 ? 2 : 4; }
/// CUDA cores: lanes per row (a power of two, 8 x lanes >= d, at least 4) and the rows a block holds
/// (32 / lanes row groups a warp, 4 rows a thread).
inline int simt_lanes(int d) {
    int b = 4;
    while (8 * b < d) b *= 2;
    return b;
}
inline int simt_rows(int d) { return 32 / simt_lanes(d) * 4; }

/// The kernel family and the row blocking for a case: tensor cores wherever they serve (MLA's
/// absorbed form; 16-bit and int8 caches at d 64 and 128) unless told not to (tensor_cores 0);
/// CUDA cores otherwise (f32 always). Measured on an H100 (bf16, d 128, H 32, one query): the
/// tensor-core path read 2,452-2,852 GB/s where the CUDA-core path read 975-1,192, at H/G 4 and
/// at H/G 1 too (an m16 tile padded from 4 rows or 1 still streams the cache at full width).
struct path_choice {
    bool tensor = false;
    int row_cap = 1;
    row_blocking rows;
};
inline path_choice choose_path(int heads_per_kv, int n_q, int d_k, bool f32_cache, bool mla, int tensor_cores,
                               int heads_per_block) {
    path_choice c;
    const bool can = mla || (!f32_cache && (d_k == 64 || d_k == 128));
    c.tensor = can && (mla || tensor_cores != 0);
    c.row_cap = c.tensor ? (mla ? mla_rows : mma_rows) : simt_rows(d_k);
    c.rows = block_rows(heads_per_kv, n_q, heads_per_block, c.row_cap);
    return c;
}

/// Bytes of cache in flight per SM beyond which more stages are not worth their shared memory
/// (Little's law at ~23 GB/s per SM and ~1 us of loaded latency asks ~24 KB; twice that, and a
/// margin): past it the planner prefers more resident blocks, then fewer stages.
inline constexpr std::size_t enough_in_flight = 64 * 1024;

/// The pipeline depth for a block that needs fixed + stages x stage_bytes of shared memory
/// (merge_bytes: the area its end-of-chunk merge reuses, at least that much), on an SM with
/// smem_per_sm bytes (each block also costs reserved_per_block) and a per-block limit, where
/// registers and threads allow reg_blocks blocks per SM: the depth that keeps the most bytes in
/// flight, (blocks per SM) x (stages - 1) x stage_bytes, counted up to enough_in_flight; ties go
/// to more blocks per SM, then fewer stages. 0 when not even two stages fit.
struct stage_choice {
    int stages = 0, blocks_per_sm = 0;
    std::size_t smem = 0, in_flight = 0;
};
inline std::size_t stage_smem(std::size_t fixed, std::size_t stage_bytes, std::size_t merge_bytes, int stages) {
    return fixed + std::max(stage_bytes * std::size_t(stages), merge_bytes);
}
inline stage_choice choose_stages(std::size_t stage_bytes, std::size_t fixed, std::size_t merge_bytes,
                                  std::size_t smem_per_sm, std::size_t smem_per_block, std::size_t reserved_per_block,
                                  int reg_blocks) {
    stage_choice best;
    for (int s = 2; s <= max_stages; ++s) {
        const std::size_t smem = stage_smem(fixed, stage_bytes, merge_bytes, s);
        if (smem > smem_per_block) break;
        const int blocks =
            int(std::min<std::size_t>(std::size_t(std::max(reg_blocks, 0)), smem_per_sm / (smem + reserved_per_block)));
        if (blocks == 0) break;
        const std::size_t flight = std::size_t(blocks) * std::size_t(s - 1) * stage_bytes;
        const std::size_t counted = std::min(flight, enough_in_flight);
        const std::size_t best_counted = std::min(best.in_flight, enough_in_flight);
        if (best.stages == 0 || counted > best_counted || (counted == best_counted && blocks > best.blocks_per_sm))
            best = {s, blocks, smem, flight};
    }
    return best;
}

} // namespace attn::cuda::plan
