// cuda-decode's data layout on the host (decode_layout.hpp), no GPU: cache rows through the block
// table and the rolling buffer against a brute-force gather from nested arrays built in the
// documented order; the shared-memory swizzle (a bijection on each row, 16-byte chunks whole,
// ldmatrix's 8 rows in 8 bank groups); the int8 widening by byte permutes on all 256 byte values.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <set>
#include <vector>

#include "decode_layout.hpp"
#include "formats.hpp"
#include "plan.hpp"

namespace dl = attn::cuda::decode_layout;
namespace pl = attn::cuda::plan;
namespace fm = attn::cuda::formats;

namespace {

/// A value naming (b, g, position, x) uniquely.
long long tag(int b, int g, long long t, int x) { return ((b * 16 + g) * 100000 + t) * 1000 + x; }

} // namespace

TEST_CASE("decode cache rows: paged and contiguous, brute-force gather", "[cuda][decode][layout]") {
    std::mt19937 rng(5);
    const int B = 3, G = 2, d = 3;
    for (int page : {1, 16, 64})
        for (long long ring : {0LL, 37LL}) {
            const std::vector<long long> lengths = {1, 150, 97};
            const long long slots_max = ring ? ring : 150;
            const int max_pages = int((slots_max + page - 1) / page) + 1;
            const int pages = B * max_pages + 5; // spare pages nobody uses
            // a shuffled pool: sequence b's i-th page is perm[b * max_pages + i]
            std::vector<int> perm(static_cast<std::size_t>(pages));
            std::iota(perm.begin(), perm.end(), 0);
            std::shuffle(perm.begin(), perm.end(), rng);
            std::vector<std::int32_t> table(std::size_t(B * max_pages));
            for (int i = 0; i < B * max_pages; ++i) table[std::size_t(i)] = perm[std::size_t(i)];
            // the pool as nested arrays [page][offset][g][x], filled by appending each sequence's
            // positions in order (a ring overwrites its oldest slots)
            std::vector<std::vector<std::vector<std::vector<long long>>>> pool(
                std::size_t(pages),
                std::vector<std::vector<std::vector<long long>>>(
                    std::size_t(page),
                    std::vector<std::vector<long long>>(std::size_t(G), std::vector<long long>(std::size_t(d), -1))));
            std::vector<std::vector<std::vector<std::vector<long long>>>> cont(
                std::size_t(B),
                std::vector<std::vector<std::vector<long long>>>(
                    std::size_t(G), std::vector<std::vector<long long>>(std::size_t(slots_max),
                                                                        std::vector<long long>(std::size_t(d), -1))));
            for (int b = 0; b < B; ++b)
                for (long long t = 0; t < lengths[std::size_t(b)]; ++t) {
                    const long long slot = ring ? t % ring : t;
                    const int pg = table[std::size_t(b * max_pages + slot / page)];
                    for (int g = 0; g < G; ++g)
                        for (int x = 0; x < d; ++x) {
                            pool[std::size_t(pg)][std::size_t(slot % page)][std::size_t(g)][std::size_t(x)] =
                                tag(b, g, t, x);
                            cont[std::size_t(b)][std::size_t(g)][std::size_t(slot)][std::size_t(x)] = tag(b, g, t, x);
                        }
                }
            std::vector<long long> flat_pool, flat_cont; // flattened in the nested order
            for (auto& a : pool)
                for (auto& c : a)
                    for (auto& e : c) flat_pool.insert(flat_pool.end(), e.begin(), e.end());
            for (auto& a : cont)
                for (auto& c : a)
                    for (auto& e : c) flat_cont.insert(flat_cont.end(), e.begin(), e.end());
            dl::cache_map paged;
            paged.kv_heads = G;
            paged.page = page;
            while ((1 << paged.page_shift) < page) ++paged.page_shift;
            paged.max_pages = max_pages;
            paged.ring = ring;
            paged.table = table.data();
            dl::cache_map plain;
            plain.kv_heads = G;
            plain.capacity = slots_max;
            plain.ring = ring;
            bool ok = true;
            for (int b = 0; b < B; ++b) {
                const long long n = lengths[std::size_t(b)];
                const long long first = ring ? std::max(0LL, n - ring) : 0; // positions still held
                for (long long t = first; t < n; ++t)
                    for (int g = 0; g < G; ++g)
                        for (int x = 0; x < d; ++x) {
                            ok &= flat_pool[std::size_t(dl::row_of(paged, b, g, t) * d + x)] == tag(b, g, t, x);
                            ok &= flat_cont[std::size_t(dl::row_of(plain, b, g, t) * d + x)] == tag(b, g, t, x);
                        }
            }
            INFO("page " << page << " ring " << ring);
            CHECK(ok);
        }
}

TEST_CASE("decode swizzle: bijective rows, whole chunks, conflict-free ldmatrix phases", "[cuda][decode][layout]") {
    for (int row_bytes : {64, 128, 256, 320, 576, 640, 1152}) {
        const int stride = dl::row_stride(row_bytes);
        INFO("row bytes " << row_bytes << " stride " << stride);
        CHECK(stride % 128 == 0);
        CHECK(stride >= row_bytes);
        for (int r = 0; r < 16; ++r) {
            std::set<int> seen;
            for (int c = 0; c < stride / 16; ++c) {
                const int o = dl::chunk_offset(r, c, stride);
                CHECK(o % 16 == 0);
                CHECK(o >= r * stride);
                CHECK(o < (r + 1) * stride);
                seen.insert(o);
                for (int b = 0; b < 16; ++b) CHECK(dl::byte_offset(r, 16 * c + b, stride) == o + b);
            }
            CHECK(int(seen.size()) == stride / 16);
        }
        // 8 consecutive rows, the same chunk: 8 distinct 16-byte bank groups
        for (int r0 = 0; r0 < 16; ++r0)
            for (int c = 0; c < stride / 16; ++c) {
                std::set<int> groups;
                for (int r = r0; r < r0 + 8; ++r) groups.insert((dl::chunk_offset(r, c, stride) / 16) % 8);
                CHECK(groups.size() == 8);
            }
    }
}

TEST_CASE("decode int8 widening: byte permutes give every int8 value exactly", "[cuda][decode][layout]") {
    // prmt as the PTX ISA defines it (default mode): a few hand-checked selectors
    CHECK(dl::byte_perm(0x33221100u, 0x77665544u, 0x7531u) == 0x77553311u);
    CHECK(dl::byte_perm(0x33221100u, 0x77665544u, 0x0123u) == 0x00112233u);
    CHECK(dl::byte_perm(0x33221100u, 0x77665544u, 0x6420u) == 0x66442200u);
    const float scales[] = {1.0f, 0.0157480314f, 1e-3f, 3.25f, 1e-30f};
    for (int v = 0; v < 256; ++v)
        for (int j = 0; j < 4; ++j) {
            const std::int8_t x = std::int8_t(v);
            // the byte at position j of a word whose other bytes vary
            const std::uint32_t word =
                (0xA5C31E7Fu & ~(0xffu << (8 * j))) | (std::uint32_t(std::uint8_t(x)) << (8 * j));
            const float w = dl::widen_byte(dl::bias_bytes(word), j);
            REQUIRE(w == float(x));
            // two of them as a bf16 pair: exact, lo in the low half
            const std::uint32_t pair = dl::widen_pair(dl::bias_bytes(word), j, dl::bias_bytes(~word), j);
            REQUIRE(fm::from_bf16(std::uint16_t(pair & 0xffff)) == float(x));
            REQUIRE(fm::from_bf16(std::uint16_t(pair >> 16)) == float(std::int8_t(~std::uint8_t(x))));
            for (float s : scales) REQUIRE(w * s == float(x) * s); // the row's scale, applied once
        }
}
