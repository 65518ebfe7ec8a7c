// attn::cuda::plan -- how cuda-decode splits the keys of one (batch, kv head) into chunks, one
// thread block each. Pure host arithmetic (plain C++17), tested without a GPU.
//  - Enough blocks: a block keeps about 16 KiB of cache loads in flight (decode.cu), and an SM needs
//    about twice that to cover the memory latency at its share of the bandwidth (Little's law:
//    ~25 GB/s per SM x ~1 us), so the plan asks for decode_blocks_per_sm blocks per SM in all.
//  - Not too small: a chunk's fixed costs (its queries, its partial result, the combine) are
//    worth paying only over decode_min_chunk keys or more, unless the cache is shorter.
//  - Deterministic: the split is a function of (B x G, L, SMs) alone, identical for every (batch,
//    kv head), and the combine adds the chunks in chunk order, so a result never depends on
//    scheduling. Boundaries are floor(c L / chunks): every key in exactly one chunk, sizes within 1.
#pragma once

#include <algorithm>
#include <cstddef>

namespace attn::cuda::plan {

inline constexpr std::size_t decode_min_chunk = 128;   ///< keys; shorter only when the cache is
inline constexpr std::size_t decode_blocks_per_sm = 2; ///< blocks wanted per SM over the whole grid
inline constexpr std::size_t decode_max_chunks = 1024; ///< bounds the partials at 1024 x B x H x (d + 2) floats

/// Keys [begin(c), end(c)) of a (batch, kv head) form chunk c, for c < chunks.
struct key_split {
    std::size_t n_kv = 0, chunks = 1;
    std::size_t begin(std::size_t c) const { return c * n_kv / chunks; }
    std::size_t end(std::size_t c) const { return (c + 1) * n_kv / chunks; }
};

/// The split for `batch` x `kv_heads` groups (each with its own blocks) of n_kv keys on `sms` SMs.
inline key_split split_keys(std::size_t batch, std::size_t kv_heads, std::size_t n_kv, int sms) {
    const std::size_t groups = std::max<std::size_t>(1, batch * kv_heads);
    const std::size_t want = decode_blocks_per_sm * std::size_t(std::max(sms, 1));
    const std::size_t fill = (want + groups - 1) / groups;                      // chunks that fill the grid
    const std::size_t most = std::max<std::size_t>(1, n_kv / decode_min_chunk); // no chunk under the minimum
    key_split s;
    s.n_kv = n_kv;
    s.chunks = std::clamp<std::size_t>(fill, 1, std::min(most, decode_max_chunks));
    return s;
}

} // namespace attn::cuda::plan
