// attn_cuda_bench's shared pieces: its inputs (uniform in [-1, 1), never zeros, from a counter
// hash, so gigabytes are made in seconds and every run draws the same) and the median it reports.
#pragma once
#include <algorithm>
#include <cstdint>
#include <vector>

namespace attn_bench {

/// Element i of the inputs drawn with `seed`: uniform in [-1, 1) (splitmix64 of the counter).
inline float uniform_at(std::size_t i, std::uint64_t seed) {
    std::uint64_t z = (i + 1) * 0x9e3779b97f4a7c15ull + seed;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return float(z >> 40) * (2.0f / 16777216.0f) - 1.0f;
}

inline double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0.0 : v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

} // namespace attn_bench
