// cuda-decode's planning on the host (plan.hpp, decode_layout.hpp's key ranges), no GPU: the
// split rule against hand-computed cases, wave efficiency, every key tile in exactly one chunk,
// each row's keys against a brute-force mask written from the CPU suite's convention, the rolling
// buffer's slots against a simulated ring, row blocking (MLA's 64 rows, 128 heads as two blocks),
// the pipeline depth, and the refusal lines.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "api.hpp"
#include "decode_layout.hpp"
#include "plan.hpp"

namespace pl = attn::cuda::plan;
namespace dl = attn::cuda::decode_layout;
namespace cu = attn::cuda;

TEST_CASE("decode split: FlashAttention's rule on hand-computed cases", "[cuda][decode][plan]") {
    // H100: 132 SMs, 2 blocks an SM -> 264 slots. Tiles of 64 keys.
    // B 1 G 8 L 131072: 8 units, 2048 tiles. waves = 8s/264 = s/33: the best is 1 (s = 33); the
    // smallest s with s/33 >= 0.85 is 29 (28/33 = 0.848); ceil(2048/29) = 71 != ceil(2048/28) = 74.
    CHECK(pl::split_count(8, 264, 2048) == 29);
    // B 8 G 8 L 32768: 64 units, 512 tiles. s = 1, 2, 3: 0.242, 0.485, 0.727; s = 4: 256/264 = 0.970
    // (the best eligible: s = 37, 2368/264 = 8.97 -> 0.997; s = 33 would be 1.0 but ceil(512/33) =
    // ceil(512/32) = 16 makes it ineligible).
    CHECK(pl::split_count(64, 264, 512) == 4);
    // B 32 G 8: 256 units >= 0.8 x 264 = 211.2: no split. B 64 G 32: 2048 units.
    CHECK(pl::split_count(256, 264, 128) == 1);
    CHECK(pl::split_count(2048, 264, 64) == 1);
    // B 8 G 1 (MQA, one block of 32 heads a kv head): 8 units, as the first row.
    CHECK(pl::split_count(8, 264, 2048) == 29);
    // 211 units (< 211.2): s = 1..4 leave 0.799 of the last wave; s = 5: 1055/264 = 3.996 -> 0.999.
    CHECK(pl::split_count(211, 264, 1000) == 5);
    // few tiles: 8 units, 3 tiles: at most 3 splits, efficiencies 0.030, 0.061, 0.091 -> 3.
    CHECK(pl::split_count(8, 264, 3) == 3);
    // a count that leaves the tiles per chunk unchanged is skipped: 1 unit, 100 slots, 10 tiles:
    // eff = s / 100, best 0.1 at s = 10, threshold 0.085: s = 9 gives ceil(10/9) = 2 = ceil(10/8) -> 10.
    CHECK(pl::split_count(1, 100, 10) == 10);
    // and never counts as the best: 8 units, 528 slots, 100 tiles: s = 51..99 share ceil = 2 with
    // s = 50; eligible s = 50 and 100 both give 0.758 (50/66, 100/132): the answer is 50.
    CHECK(pl::split_count(8, 528, 100) == 50);
    // A100: 108 SMs x 2 = 216 slots, 8 units: waves s/27, the smallest s with s/27 >= 0.85 is 23.
    CHECK(pl::split_count(8, 216, 2048) == 23);
    CHECK(pl::split_count(8, 264, 1) == 1);
    CHECK(pl::split_count(8, 264, 0) == 1);
    CHECK(pl::split_count(1, 264, 100000) <= pl::max_splits);
}

TEST_CASE("decode split: brute-force properties", "[cuda][decode][plan]") {
    for (long long slots : {108, 132, 216, 264, 396, 528})
        for (long long units : {1, 2, 3, 7, 8, 16, 31, 64, 100, 200, 211, 212, 500})
            for (long long tiles : {1, 2, 5, 17, 64, 100, 1000, 4096}) {
                INFO("slots " << slots << " units " << units << " tiles " << tiles);
                const int s = pl::split_count(units, slots, tiles);
                REQUIRE(s >= 1);
                CHECK(s <= std::max<long long>(1, std::min<long long>({pl::max_splits, slots, tiles})));
                if (double(units) >= 0.8 * double(slots)) {
                    CHECK(s == 1);
                    continue;
                }
                double best = 0;
                const long long top = std::min<long long>({pl::max_splits, slots, tiles});
                for (long long c = 1; c <= top; ++c) {
                    if (c > 1 && (tiles + c - 1) / c == (tiles + c - 2) / (c - 1)) continue; // not eligible
                    const double w = double(units * c) / double(slots);
                    best = std::max(best, w / std::ceil(w));
                }
                if (tiles > 1) {
                    const double w = double(units * s) / double(slots);
                    CHECK(w / std::ceil(w) >= 0.85 * best - 1e-12);
                }
            }
}

TEST_CASE("decode wave efficiency", "[cuda][decode][plan]") {
    CHECK(pl::wave_efficiency(264, 264) == 1.0);
    CHECK(pl::wave_efficiency(528, 264) == 1.0);
    CHECK(pl::wave_efficiency(132, 264) == 0.5);
    CHECK(pl::wave_efficiency(265, 264) == Approx(265.0 / 528.0));
    CHECK(pl::wave_efficiency(0, 264) == 0.0);
    CHECK(pl::wave_efficiency(10, 0) == 0.0);
}

TEST_CASE("decode chunks: every tile in exactly one chunk", "[cuda][decode][plan]") {
    for (long long tiles : {0, 1, 2, 3, 7, 64, 65, 2048, 2049})
        for (int splits : {1, 2, 3, 4, 7, 29, 33, 128}) {
            std::vector<int> seen(std::size_t(tiles), 0);
            long long most = 0, least = tiles;
            for (int c = 0; c < splits; ++c) {
                const long long a = pl::chunk_first(tiles, splits, c), b = pl::chunk_first(tiles, splits, c + 1);
                REQUIRE(a <= b);
                most = std::max(most, b - a);
                least = std::min(least, b - a);
                for (long long t = a; t < b; ++t) ++seen[std::size_t(t)];
            }
            CHECK(pl::chunk_first(tiles, splits, 0) == 0);
            CHECK(pl::chunk_first(tiles, splits, splits) == tiles);
            CHECK(most - least <= 1);
            for (int n : seen) CHECK(n == 1);
        }
    CHECK(pl::tiles_of(0, 64) == 0);
    CHECK(pl::tiles_of(1, 64) == 1);
    CHECK(pl::tiles_of(64, 64) == 1);
    CHECK(pl::tiles_of(65, 64) == 2);
}

namespace {

// The CPU suite's convention (modules/core/problem.cppm, keys_end / keys_begin), restated: row i
// of n_q over n_kv keys ends at min(n_kv, i + n_kv - n_q + 1) when causal (0 when negative), and
// under a window W begins at end - W when end > W.
bool sees(long long n, int n_q, int i, long long w, bool causal, long long j) {
    if (j < 0 || j >= n) return false;
    if (causal && j > i + n - n_q) return false;
    if (w > 0 && j < i + n - n_q - w + 1) return false;
    return true;
}

} // namespace

TEST_CASE("decode key ranges: each row's keys and the step's union, brute force", "[cuda][decode][plan]") {
    for (long long n = 1; n <= 40; ++n)
        for (int n_q = 1; n_q <= 8 && n_q <= n; ++n_q)
            for (long long w : {0, 1, 2, 3, 7, 39, 40, 100})
                for (bool causal : {true, false}) {
                    if (w > 0 && !causal) continue; // a window needs the causal mask
                    INFO("n " << n << " n_q " << n_q << " window " << w << " causal " << causal);
                    const pl::key_range u = pl::step_keys(n, n_q, w, causal);
                    long long first = n, last = -1;
                    for (int i = 0; i < n_q; ++i) {
                        const pl::key_range r = pl::row_keys(n, n_q, i, w, causal);
                        for (long long j = -2; j < n + 2; ++j) {
                            const bool in = j >= r.begin && j < r.end;
                            REQUIRE(in == sees(n, n_q, i, w, causal, j));
                            if (in) first = std::min(first, j), last = std::max(last, j);
                        }
                        CHECK(r.size() >= 1); // n >= n_q: every row sees a key
                        if (w > 0) CHECK(r.size() <= w);
                    }
                    CHECK(u.begin == first);
                    CHECK(u.end == last + 1);
                    if (w > 0) CHECK(u.size() <= pl::ring_needed(w, n_q));
                }
}

TEST_CASE("decode rolling buffer: the slots of the keys a step reads hold them", "[cuda][decode][plan]") {
    for (long long w : {1, 7, 129, 4096})
        for (int n_q : {1, 2, 5, 8})
            for (long long extra : {0, 3})
                for (long long n : {(long long)n_q, w - 1, w, w + 1, w + n_q, 3 * w + 5, 16 * w + 7}) {
                    if (n < n_q) continue;
                    const long long ring = pl::ring_needed(w, n_q) + extra;
                    INFO("W " << w << " n_q " << n_q << " ring " << ring << " L " << n);
                    // a ring filled by appending positions 0 .. n - 1 (slot t mod ring, overwriting)
                    std::vector<long long> held(std::size_t(ring), -1);
                    for (long long t = 0; t < n; ++t) held[std::size_t(t % ring)] = t;
                    const pl::key_range u = pl::step_keys(n, n_q, w, true);
                    CHECK(u.size() <= ring);
                    bool ok = true;
                    for (long long t = u.begin; t < u.end; ++t) {
                        const long long slot = pl::ring_slot(t, ring);
                        ok &= held[std::size_t(slot)] == t;
                        // the loader steps from the tile's first slot: tiles start at u.begin + k T
                        for (int tile : {16, 32, 64}) {
                            const long long t0 = u.begin + (t - u.begin) / tile * tile;
                            ok &= dl::tile_slot(pl::ring_slot(t0, ring), int(t - t0), ring) == slot;
                        }
                    }
                    CHECK(ok);
                }
}

TEST_CASE("decode row blocking: rows per block and groups", "[cuda][decode][plan]") {
    auto rb = [](int r, int n_q, int hb, int cap) {
        const pl::row_blocking b = pl::block_rows(r, n_q, hb, cap);
        return std::make_pair(b.rows, b.groups);
    };
    CHECK(rb(4, 1, 0, 32) == std::make_pair(4, 1));   // GQA 32/8
    CHECK(rb(32, 1, 0, 32) == std::make_pair(32, 1)); // MQA 32 heads: two m-tiles
    CHECK(rb(32, 1, 0, 16) == std::make_pair(16, 2));
    CHECK(rb(32, 8, 0, 32) == std::make_pair(32, 8)); // 4 heads x 8 tokens a block
    CHECK(rb(32, 3, 0, 32) == std::make_pair(24, 4)); // at most 10 heads: 4 groups of 8 heads
    CHECK(rb(4, 8, 0, 32) == std::make_pair(32, 1));
    CHECK(rb(1, 8, 0, 4) == std::make_pair(4, 2));   // one head's tokens over two blocks
    CHECK(rb(32, 1, 8, 32) == std::make_pair(8, 4)); // heads_per_block asked
    CHECK(rb(4, 2, 16, 32) == std::make_pair(8, 1)); // capped by the heads there are
    // MLA: at most 64 rows; 128 heads as two blocks, 16 (V2-Lite) as one, n_q 2 halves the heads
    CHECK(rb(128, 1, 0, 64) == std::make_pair(64, 2));
    CHECK(rb(16, 1, 0, 64) == std::make_pair(16, 1));
    CHECK(rb(16, 2, 0, 64) == std::make_pair(32, 1));
    CHECK(rb(128, 2, 0, 64) == std::make_pair(64, 4));
    for (int r : {1, 2, 3, 4, 8, 16, 32, 128})
        for (int n_q = 1; n_q <= 8; ++n_q)
            for (int hb : {0, 1, 3, 64})
                for (int cap : {4, 8, 16, 32, 64}) {
                    const pl::row_blocking b = pl::block_rows(r, n_q, hb, cap);
                    INFO("R " << r << " n_q " << n_q << " hb " << hb << " cap " << cap);
                    CHECK(b.rows >= 1);
                    CHECK(b.rows <= cap);
                    CHECK(b.groups * b.rows >= r * n_q);
                    CHECK((b.groups - 1) * b.rows < r * n_q);
                    if (hb == 0 && r * n_q <= cap) CHECK(b.groups == 1);
                }
}

TEST_CASE("decode pipeline depth", "[cuda][decode][plan]") {
    const std::size_t sm = 233472, block = 232448, reserved = 1024; // H100
    // mma bf16 d 128: 32 KiB stages, 2944 fixed, 4 blocks by registers. 2 stages: 68480 bytes, 3
    // blocks, 96 KiB in flight (counted 64); 3 stages: 2 blocks (counted 64, fewer blocks); -> 2.
    pl::stage_choice c = pl::choose_stages(32768, 2944, 0, sm, block, reserved, 4);
    CHECK(c.stages == 2);
    CHECK(c.blocks_per_sm == 3);
    CHECK(c.smem == 68480);
    // one block by registers: 3 stages reach the 64 KiB counted (4 would add nothing counted) -> 3
    c = pl::choose_stages(32768, 0, 0, sm, block, reserved, 1);
    CHECK(c.stages == 3);
    // tiny stages: the deepest pipeline
    CHECK(pl::choose_stages(1024, 0, 0, sm, block, reserved, 4).stages == pl::max_stages);
    // a merge area larger than the stages sets the floor of the shared memory
    CHECK(pl::choose_stages(1024, 100, 16384, sm, block, reserved, 4).smem >= 16384 + 100);
    // two stages do not fit
    CHECK(pl::choose_stages(200000, 0, 0, sm, block, reserved, 4).stages == 0);
    CHECK(pl::choose_stages(1024, 0, 0, sm, block, reserved, 0).stages == 0);
}

namespace {

cu::shape dshape(std::size_t n_q, std::size_t n_kv, std::size_t d, std::size_t h = 32, std::size_t g = 8) {
    cu::shape s;
    s.batch = 2;
    s.heads = h;
    s.kv_heads = g;
    s.n_q = n_q;
    s.n_kv = n_kv;
    s.d_qk = d;
    s.causal = true;
    return s;
}

} // namespace

TEST_CASE("decode refusal: what cuda-decode serves, in one line", "[cuda][decode][refusal]") {
    using st = cu::storage;
    const cu::decode_spec plain;
    for (std::size_t n_q = 1; n_q <= 8; ++n_q)
        for (std::size_t d : {8, 24, 64, 80, 128, 256})
            for (st t : {st::f32, st::bf16, st::f16, st::int8})
                CHECK(cu::decode_refusal(dshape(n_q, 9, d), t, plain).empty());
    CHECK(cu::refusal(cu::kernel::decode, dshape(9, 64, 64), st::bf16) ==
          "cuda-decode serves n_q 1 to 8 new tokens a step, not 9");
    CHECK(cu::refusal(cu::kernel::decode, dshape(5, 3, 64), st::bf16) ==
          "cuda-decode needs the n_q new tokens in the cache: n_kv 3 < n_q 5");
    cu::shape w = dshape(2, 100, 64);
    w.window = 7;
    CHECK(cu::refusal(cu::kernel::decode, w, st::bf16).empty());
    w.causal = false;
    CHECK(cu::refusal(cu::kernel::decode, w, st::bf16) ==
          "cuda-decode serves a window only with the causal mask (it looks back from each query)");
    cu::shape mla = dshape(1, 100, 576, 16, 1);
    mla.d_v = 512;
    CHECK(cu::refusal(cu::kernel::decode, mla, st::bf16) ==
          "cuda-decode serves d_qk != d_v only as MLA's absorbed form (decode_spec.v_from_k), not 576/512");
    cu::decode_spec latent;
    latent.v_from_k = true;
    for (st t : {st::bf16, st::f16, st::int8}) CHECK(cu::decode_refusal(mla, t, latent).empty());
    CHECK(cu::decode_refusal(mla, st::f32, latent) ==
          "cuda-decode serves MLA's absorbed form in bf16, f16 or int8 (tensor cores), not f32");
    mla.d_qk = 96;
    mla.d_v = 64;
    CHECK(cu::decode_refusal(mla, st::bf16, latent) ==
          "cuda-decode serves MLA's absorbed form (v_from_k) at d_k/d_v 576/512 and 160/128, not 96/64");
    CHECK(cu::refusal(cu::kernel::decode, dshape(1, 64, 260), st::bf16) ==
          "cuda-decode serves d_head a multiple of 8 up to 256, not 260");
    cu::decode_spec tc;
    tc.options.tensor_cores = 1;
    CHECK(cu::decode_refusal(dshape(1, 64, 80), st::bf16, tc) ==
          "cuda-decode on tensor cores serves bf16, f16 and int8 caches at d_head 64 and 128, not bf16 at 80");
    CHECK(cu::decode_refusal(dshape(1, 64, 128), st::f32, tc) ==
          "cuda-decode on tensor cores serves bf16, f16 and int8 caches at d_head 64 and 128, not f32 at 128");
    // rolling buffers
    cu::decode_spec ring;
    ring.ring = 10;
    cu::shape r = dshape(3, 1000, 64);
    CHECK(cu::decode_refusal(r, st::bf16, ring) == "cuda-decode: a rolling buffer (ring 10) needs a window");
    r.window = 8;
    CHECK(cu::decode_refusal(r, st::bf16, ring).empty()); // 8 + 3 - 1 = 10 slots
    r.window = 9;
    CHECK(cu::decode_refusal(r, st::bf16, ring) ==
          "cuda-decode: a rolling buffer needs window + n_q - 1 = 11 slots, not 10");
    // pages
    std::vector<std::int32_t> table(2 * 8, 0);
    cu::decode_spec paged;
    paged.page_size = 16;
    paged.pages = 16;
    paged.max_pages = 8;
    paged.block_table = table.data();
    CHECK(cu::decode_refusal(dshape(1, 128, 64), st::bf16, paged).empty());
    CHECK(cu::decode_refusal(dshape(1, 129, 64), st::bf16, paged) ==
          "cuda-decode: the block table's 8 pages of 16 do not hold 129 slots");
    paged.page_size = 24;
    CHECK(cu::decode_refusal(dshape(1, 128, 64), st::bf16, paged) ==
          "cuda-decode serves pages of a power of two tokens up to 65536, not 24");
    paged.page_size = 16;
    paged.block_table = nullptr;
    CHECK(cu::decode_refusal(dshape(1, 128, 64), st::bf16, paged) == "cuda-decode: a paged cache needs a block table");
    cu::decode_spec small;
    small.capacity = 100;
    CHECK(cu::decode_refusal(dshape(1, 128, 64), st::bf16, small) ==
          "cuda-decode: capacity 100 does not hold 128 slots");
    // options
    cu::decode_spec o;
    o.options.splits = 129;
    CHECK(cu::decode_refusal(dshape(1, 128, 64), st::bf16, o) ==
          "cuda-decode takes splits 0 (planned) to 128, not 129");
    o.options.splits = 0;
    o.options.stages = 1;
    CHECK(cu::decode_refusal(dshape(1, 128, 64), st::bf16, o) ==
          "cuda-decode takes stages 0 (planned) or 2 to 8, not 1");
    CHECK(cu::decode_refusal(dshape(1, 128, 64), st::f64, plain) ==
          "cuda-decode does not store f64 (the GPU kernels store f32, bf16, f16 and int8 caches)");
}
