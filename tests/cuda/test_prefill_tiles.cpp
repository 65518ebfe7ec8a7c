// The prefill kernels' key-tile ranges, masks and work order (prefill_tiles.hpp), without a GPU,
// against brute force over every (row, key): the mask written here from the CPU suite's convention
// (problem.cppm: keys_end, keys_begin), not from the header under test.
#include <catch2/catch.hpp>

#include <algorithm>
#include <set>
#include <vector>

#include "prefill_tiles.hpp"

namespace pf = attn::cuda::prefill;

namespace {

/// Brute force: does row i of an n_q x n_kv core see key j? Bottom-right causal: the last key is
/// i + n_kv - n_q; a window W: W keys ending there.
bool sees(long long i, long long j, long long n_q, long long n_kv, bool causal, long long window) {
    if (j < 0 || j >= n_kv) return false;
    if (!causal) return true;
    const long long last = i + n_kv - n_q;
    return j <= last && (window == 0 || j >= last - window + 1);
}

struct combo {
    int n_q, n_kv;
    bool causal;
    int window;
};

std::vector<combo> combos() {
    std::vector<combo> out;
    for (int n_q : {1, 7, 63, 64, 65, 127, 128, 129, 300})
        for (int n_kv : {1, 7, 64, 129, 300, 1000})
            for (int w : {0, 1, 2, 7, 64, 129, 4096}) {
                out.push_back({n_q, n_kv, true, w});
                if (w == 0) out.push_back({n_q, n_kv, false, 0});
            }
    return out;
}

} // namespace

TEST_CASE("visible(): the CPU suite's convention, row by row", "[prefill][tiles]") {
    for (const combo& c : combos()) {
        const pf::mask m{c.n_q, c.n_kv, c.causal, c.window};
        for (int i = 0; i < c.n_q; ++i) {
            long long first = -1, count = 0;
            bool same = true;
            for (int j = 0; j < c.n_kv; ++j) {
                const bool want = sees(i, j, c.n_q, c.n_kv, c.causal, c.window);
                same &= pf::visible(m, i, j) == want;
                if (want && first < 0) first = j;
                count += want;
            }
            REQUIRE(same);
            CHECK(pf::key_end(m, i) - pf::key_begin(m, i) == count);
            if (count) CHECK(pf::key_begin(m, i) == first);
            if (c.window) CHECK(count <= c.window);
        }
    }
}

TEST_CASE("key-tile ranges: every visible key inside, no tile without one, masks only where needed",
          "[prefill][tiles][window]") {
    long long checked = 0;
    bool ok = true;
    for (const combo& c : combos()) {
        // brute force, row by row: the first and last key seen (every row's keys are contiguous)
        std::vector<long long> first(std::size_t(c.n_q), -1), last(std::size_t(c.n_q), -2);
        for (int i = 0; i < c.n_q; ++i) {
            long long count = 0;
            for (int j = 0; j < c.n_kv; ++j)
                if (sees(i, j, c.n_q, c.n_kv, c.causal, c.window)) {
                    if (first[std::size_t(i)] < 0) first[std::size_t(i)] = j;
                    last[std::size_t(i)] = j;
                    ++count;
                }
            REQUIRE((count == 0 || count == last[std::size_t(i)] - first[std::size_t(i)] + 1));
        }
        const pf::mask m{c.n_q, c.n_kv, c.causal, c.window};
        for (int block_q : {16, 64, 128})
            for (int block_kv : {32, 64, 128, 176})
                for (int q0 = 0; q0 < c.n_q; q0 += block_q) {
                    const int q1 = std::min(c.n_q, q0 + block_q);
                    // the key tiles holding a key some row sees
                    std::set<long long> touched; // a row's keys are contiguous: so are its tiles
                    for (int i = q0; i < q1; ++i)
                        for (long long t = first[std::size_t(i)] / block_kv;
                             first[std::size_t(i)] >= 0 && t <= last[std::size_t(i)] / block_kv; ++t)
                            touched.insert(t);
                    const pf::tile_range r = pf::kv_tiles(m, q0, block_q, block_kv);
                    bool here = true;
                    if (touched.empty()) {
                        here = r.count() == 0;
                    } else { // exactly the touched tiles: contiguous, since both ends grow with the row
                        here = r.begin == *touched.begin() && r.end == *touched.rbegin() + 1 &&
                               int(touched.size()) == r.count();
                        for (int t = r.begin; t < r.end; ++t) {
                            const long long j0 = (long long)t * block_kv, j1 = j0 + block_kv - 1;
                            bool all = true; // every real row sees every key of the tile
                            for (int i = q0; i < q1; ++i)
                                all &= first[std::size_t(i)] >= 0 && first[std::size_t(i)] <= j0 &&
                                       last[std::size_t(i)] >= j1;
                            here &= pf::tile_needs_mask(m, q0, block_q, int(j0), block_kv) == !all;
                            ++checked;
                        }
                    }
                    if (!here) {
                        ok = false;
                        FAIL_CHECK("n_q " << c.n_q << " n_kv " << c.n_kv << " causal " << c.causal << " W " << c.window
                                          << " block " << block_q << "x" << block_kv << " q0 " << q0);
                    }
                }
    }
    CHECK(ok);
    CHECK(checked > 30000);
}

TEST_CASE("tile counts at N 16384, 128 x 128 tiles: the window of 1024 against full causal",
          "[prefill][tiles][window]") {
    const int n = 16384, tile = 128;
    auto count = [&](int window) {
        const pf::mask m{n, n, true, window};
        long long tiles = 0, masked = 0;
        for (int q0 = 0; q0 < n; q0 += tile) {
            const pf::tile_range r = pf::kv_tiles(m, q0, tile, tile);
            tiles += r.count();
            for (int t = r.begin; t < r.end; ++t) masked += pf::tile_needs_mask(m, q0, tile, t * tile, tile);
        }
        return std::pair<long long, long long>{tiles, masked};
    };
    // by hand: causal, query tile t sees key tiles 0..t: 128 x 129 / 2 = 8256; window 1024: tile t
    // sees t - 8 .. t (its first row's window starts at 128 t - 1023, inside tile t - 8), t + 1 of
    // them for t < 8: 36 + 120 x 9 = 1116; the figures (#48) agree
    const auto causal = count(0), w1k = count(1024), w4k = count(4096);
    CHECK(causal.first == 8256);
    CHECK(w1k.first == 1116);
    CHECK(causal.second == 128);    // the diagonal tiles only
    CHECK(w1k.second == 128 + 120); // the diagonal, and the window's lower edge from tile 8 on
    // window 4096: tile t sees t - 32 .. t: sum_{t<32} (t + 1) + 96 x 33 = 528 + 3168
    CHECK(w4k.first == 3696);
    // the visible pairs (FLOP ratio 8.26 in the issue), by brute force over rows
    long long causal_pairs = 0, w1k_pairs = 0;
    for (long long i = 0; i < n; ++i) {
        causal_pairs += i + 1;
        w1k_pairs += std::min<long long>(i + 1, 1024);
    }
    CHECK(causal_pairs == 134225920LL);
    CHECK(w1k_pairs == 16253440LL);
    CHECK(double(causal_pairs) / double(w1k_pairs) == Approx(8.258).epsilon(1e-3));
    CHECK(double(causal.first) / double(w1k.first) == Approx(7.398).epsilon(1e-3));
}

TEST_CASE("schedule: every work tile once, L2 groups, the longest causal tiles first", "[prefill][schedule]") {
    for (long long q_tiles : {1, 2, 7, 64})
        for (long long pairs : {1, 3, 16, 132, 200})
            for (long long group_budget : {1LL, 3LL, 64LL, 1000000LL}) {
                const long long kv_bytes = 1;
                const pf::schedule s = pf::make_schedule(q_tiles, pairs, kv_bytes, group_budget);
                INFO("q_tiles " << q_tiles << " pairs " << pairs << " group " << s.group);
                REQUIRE(s.size() == q_tiles * pairs);
                CHECK(s.group >= 1);
                CHECK(s.group <= pairs);
                CHECK(s.group * kv_bytes <= std::max(group_budget, kv_bytes));
                std::vector<int> seen(std::size_t(q_tiles * pairs), 0);
                long long prev_group = 0;
                int prev_tile = int(q_tiles);
                for (long long w = 0; w < s.size(); ++w) {
                    const pf::schedule::item it = s.at(w);
                    REQUIRE(it.q_tile >= 0);
                    REQUIRE(it.q_tile < q_tiles);
                    REQUIRE(it.hb >= 0);
                    REQUIRE(it.hb < pairs);
                    ++seen[std::size_t(it.hb * q_tiles + it.q_tile)];
                    // groups in order; inside a group the query tiles never grow (the last, the
                    // longest causal rows, first), every pair of the group at each tile
                    const long long g = it.hb / s.group;
                    CHECK(g >= prev_group);
                    if (g == prev_group) CHECK(it.q_tile <= prev_tile);
                    if (g != prev_group) CHECK(it.q_tile == q_tiles - 1);
                    prev_group = g;
                    prev_tile = it.q_tile;
                }
                for (int n : seen) CHECK(n == 1);
            }
    // the budget: K and V of a group's pairs fit (at least one pair a group)
    CHECK(pf::make_schedule(32, 132, 4 << 20, 25 << 20).group == 6);
    CHECK(pf::make_schedule(32, 132, 64 << 20, 25 << 20).group == 1);
    CHECK(pf::make_schedule(32, 4, 1 << 20, 25 << 20).group == 4);
}

TEST_CASE("schedule with the causal cost: non-increasing inside each group", "[prefill][schedule]") {
    const int n = 1000, block_q = 128, block_kv = 64;
    const pf::mask m{n, n, true, 0};
    const pf::schedule s = pf::make_schedule((n + block_q - 1) / block_q, 12, 1, 5);
    long long prev_cost = 1 << 30, prev_group = 0;
    for (long long w = 0; w < s.size(); ++w) {
        const pf::schedule::item it = s.at(w);
        const int cost = pf::kv_tiles(m, it.q_tile * block_q, block_q, block_kv).count();
        if (it.hb / s.group == prev_group) CHECK(cost <= prev_cost);
        prev_group = it.hb / s.group;
        prev_cost = cost;
    }
}
