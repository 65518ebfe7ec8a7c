// Shards of a sweep (attn.shard): "I/N" parsed and refused, the longest-first partition traced
// by hand, every case in exactly one shard, decode runs kept whole, the partition independent
// of the list's order, and FNV-1a against its published test vectors.
#include <algorithm>
#include <set>
#include <string>
#include <vector>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
import attn.shard;

namespace {

std::vector<attn::grid> mixed_grids() {
    attn::grid core;
    core.name = "core";
    core.variants = {"naive", "simd", "parallel"};
    core.modes = {attn::mode::core, attn::mode::layer};
    core.d_model = {64, 128};
    core.heads = {2, 4};
    core.seq = {16, 64, 256};
    core.threads = {1, 2};
    attn::grid decode;
    decode.name = "decode";
    decode.variants = {"parallel"};
    decode.modes = {attn::mode::decode};
    decode.d_model = {64};
    decode.heads = {4};
    decode.kv_heads = {1, 2, 4};
    decode.context = {7, 300};
    decode.batch = {1, 2};
    return {core, decode};
}

std::set<std::string> ids(const std::vector<attn::sweep_case>& cs) {
    std::set<std::string> s;
    for (const auto& c : cs) s.insert(c.id());
    return s;
}

} // namespace

TEST_CASE("shard: I/N is parsed, and bad values are refused naming them", "[shard]") {
    CHECK(attn::parse_shard("0/1").index == 0);
    CHECK(attn::parse_shard("2/3").index == 2);
    CHECK(attn::parse_shard("2/3").count == 3);
    CHECK_THROWS_WITH(attn::parse_shard("3/3"), Catch::Contains("the index I must be below N = 3"));
    CHECK_THROWS_WITH(attn::parse_shard("0/0"), Catch::Contains("the count N must be at least 1"));
    CHECK_THROWS_WITH(attn::parse_shard("1-3"), Catch::Contains("'1-3' is not of the form I/N"));
    CHECK_THROWS_WITH(attn::parse_shard("a/3"), Catch::Contains("the index 'a' is not a whole number"));
    CHECK_THROWS_WITH(attn::parse_shard("-1/3"), Catch::Contains("the index '-1' is not a whole number"));
    CHECK_THROWS_WITH(attn::parse_shard("1/"), Catch::Contains("the count '' is not a whole number"));
    CHECK_THROWS_WITH(attn::parse_shard("1/99999999999"), Catch::Contains("is not a whole number"));
}

TEST_CASE("shard: longest first onto the least-loaded shard, traced by hand", "[shard]") {
    // costs 5 4 3 3 3 onto 2 shards: 5->0 (5,0), 4->1 (5,4), 3->1 (5,7), 3->0 (8,7), 3->1 (8,10)
    CHECK(attn::assign_shards({5, 4, 3, 3, 3}, {"a", "b", "c", "d", "e"}, 2) ==
          std::vector<std::size_t>{0, 1, 1, 0, 1});
    // equal costs go by key: a, b, c, d -> 0, 1, 0, 1, whatever the order they are listed in
    CHECK(attn::assign_shards({1, 1, 1, 1}, {"d", "c", "b", "a"}, 2) == std::vector<std::size_t>{1, 0, 1, 0});
    // one shard takes everything; more shards than items leave some empty
    CHECK(attn::assign_shards({2, 1}, {"x", "y"}, 1) == std::vector<std::size_t>{0, 0});
    CHECK(attn::assign_shards({2, 1}, {"x", "y"}, 4) == std::vector<std::size_t>{0, 1});
}

TEST_CASE("shard: a case's cost is attn.count's FLOPs per thread", "[shard]") {
    // core, d_model 8, H 2 (d_head 4), N 4, not causal: per head a2 P - a1 Z with a2 = 4 d_head + 5
    // = 21, a1 = d_head + 2 = 6, P = 16 visible pairs, Z = 4 rows: 336 - 24 = 312; two heads 624;
    // at two threads 312 per thread
    attn::sweep_case c =
        nlohmann::json{{"variant", "parallel"}, {"mode", "core"}, {"d_model", 8}, {"heads", 2}, {"n_q", 4},
                       {"threads", 2}}
            .get<attn::sweep_case>();
    CHECK(attn::case_cost(c) == 312.0);
    c.threads = 1;
    CHECK(attn::case_cost(c) == 624.0);
    c.mode = attn::mode::layer; // adds the four projections
    CHECK(attn::case_cost(c) > 624.0);
}

TEST_CASE("shard: every case in exactly one shard, decode runs whole, order-independent", "[shard]") {
    const auto all = attn::expand(mixed_grids(), 2);
    // naive and simd run at 1 thread whatever the grid asks: 24 each; parallel 48; decode 12
    REQUIRE(all.size() == 2 * (2 * 2 * 2 * 3) + 2 * 2 * 2 * 3 * 2 + 3 * 2 * 2);
    auto reversed = all;
    std::reverse(reversed.begin(), reversed.end());
    for (std::size_t n : {1, 2, 3, 7}) {
        std::set<std::string> seen;
        std::size_t total = 0;
        double max_load = 0, sum = 0, biggest = 0;
        for (std::size_t i = 0; i < n; ++i) {
            const auto mine = attn::shard_cases(all, {i, n});
            CHECK(ids(mine) == ids(attn::shard_cases(reversed, {i, n})));
            total += mine.size();
            for (const auto& c : mine) seen.insert(c.id());
            // the G of one decode (batch, L) stay together
            for (const auto& c : mine)
                if (c.mode == attn::mode::decode)
                    for (const auto& o : all)
                        if (o.mode == attn::mode::decode && o.batch == c.batch && o.context == c.context)
                            CHECK(ids(mine).count(o.id()) == 1);
            double load = 0;
            for (const auto& c : mine) load += attn::case_cost(c);
            max_load = std::max(max_load, load);
            sum += load;
        }
        CHECK(total == all.size());
        CHECK(seen == ids(all));
        for (const auto& c : all) biggest = std::max(biggest, attn::case_cost(c));
        // greedy onto the least loaded: no shard exceeds the mean by more than one run's cost
        CHECK(max_load <= sum / double(n) + 3 * biggest);
    }
}

TEST_CASE("shard: FNV-1a 64 against its published test vectors", "[shard]") {
    CHECK(attn::fnv1a64("") == "cbf29ce484222325");
    CHECK(attn::fnv1a64("a") == "af63dc4c8601ec8c");
    CHECK(attn::fnv1a64("foobar") == "85944171f73967e8");
}
