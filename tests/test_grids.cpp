// The case type's fields beyond the shape of a perf case (d_head, N_kv, bias, magnitude) and the
// embedded grids of check, decode and the FLOP count, which are grids of that type expanded by
// attn::expand: counts and members stated by hand, ids of default cases unchanged, sweep keys.
#include <algorithm>
#include <string>
#include <vector>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
import attn.grids;
import attn.sweep;
import attn.check;
import attn.decode;
import attn.count;

using json = nlohmann::json;

TEST_CASE("new case fields: ids of default cases unchanged, others named, JSON round trip", "[cases][grids]") {
    const auto plain = json::parse(R"({"variant": "simd", "mode": "layer", "d_model": 512, "heads": 8, "n_q": 64})")
                           .get<attn::sweep_case>();
    CHECK(plain.id() == "layer-simd-d512-h8-g8-n64-b1-t1"); // as before the fields existed
    CHECK(!plain.bias);
    CHECK(plain.magnitude == 1.0);
    CHECK(!plain.explicit_d_head());
    const auto c = json::parse(R"({"variant": "naive", "mode": "layer", "d_model": 32, "heads": 4, "d_head": 32,
                                   "n_q": 7, "n_kv": 129, "bias": true, "magnitude": 100})")
                       .get<attn::sweep_case>();
    CHECK(c.id() == "layer-naive-d32-h4-g4-dh32-n7-nkv129-b1-t1-bias-mag100");
    CHECK(c.text() == "naive layer d_model=32 H=4 d_head=32 N=7 N_kv=129 B=1 t=1 bias |x|<=100");
    const auto p = c.shape();
    CHECK(p.qk_dim() == 32);
    CHECK(p.family() == attn::family::wide);
    CHECK(p.bias);
    CHECK(p.n_kv == 129);
    const json back = c;
    CHECK(back.at("bias") == true);
    CHECK(back.at("magnitude") == 100.0);
    CHECK(back.get<attn::sweep_case>().id() == c.id());
    // d_head given as d_model / H is the default: same id as leaving it out
    CHECK(json::parse(R"({"variant": "simd", "mode": "layer", "d_model": 512, "heads": 8, "n_q": 64, "d_head": 64})")
              .get<attn::sweep_case>()
              .id() == plain.id());
    // heads need not divide d_model when d_head is given
    CHECK(json::parse(R"({"variant": "naive", "mode": "core", "d_model": 3, "heads": 2, "d_head": 3, "n_q": 5})")
              .get<attn::sweep_case>()
              .id() == "core-naive-d3-h2-g2-dh3-n5-b1-t1");
    CHECK_THROWS_WITH(
        json::parse(R"({"variant": "simd", "mode": "core", "d_model": 8, "heads": 2, "n_q": 4, "magnitude": 0})")
            .get<attn::sweep_case>(),
        Catch::Contains("magnitude 0.000000 is not in (0, 1e6]"));
}

TEST_CASE("check's embedded grid: 32 problems, members by hand", "[grids][check]") {
    const auto g = attn::check::default_grid();
    REQUIRE(g.size() == 32); // 12 shapes and 2 MLA shapes in 2 forms, each without and with the causal mask
    for (std::size_t i = 0; i < g.size(); ++i) CHECK(g[i].p.causal == (i % 2 == 1));
    CHECK(g[0].p.describe() == "single-head B=1 Nq=7 Nkv=7 d_model=17 H=1 G=1 d_head=17");
    CHECK(g[9].p.describe() == "GQA B=1 Nq=129 Nkv=129 d_model=512 H=8 G=2 d_head=64 causal bias");
    CHECK(g[12].p.describe() == "wide B=1 Nq=7 Nkv=7 d_model=32 H=4 G=4 d_head=32");
    CHECK(g[17].p.describe() == "MHA B=1 Nq=7 Nkv=129 d_model=64 H=4 G=4 d_head=16 causal bias");
    CHECK(g[19].p.describe() == "GQA B=3 Nq=129 Nkv=7 d_model=48 H=4 G=2 d_head=12 causal");
    CHECK(g[20].p.describe() == "MHA B=1 Nq=7 Nkv=7 d_model=4 H=4 G=4 d_head=1");
    CHECK(g[20].magnitude == 100.0);
    CHECK(g[23].magnitude == 12.0);
    CHECK(std::count_if(g.begin(), g.end(), [](const auto& c) { return c.magnitude != 1.0; }) == 4);
    CHECK(std::count_if(g.begin(), g.end(), [](const auto& c) { return c.p.bias; }) == 4);
    CHECK(g[24].p.describe() == "MLA B=1 Nq=9 Nkv=9 d_model=32 H=4 G=4 d_head=12 d_v=6 C=16 Cq=0 Dr=4 naive");
    CHECK(g[27].p.describe() == "MLA B=1 Nq=9 Nkv=9 d_model=32 H=4 G=4 d_head=12 d_v=6 C=16 Cq=0 Dr=4 absorb causal");
    CHECK(g[31].p.describe() ==
          "MLA B=2 Nq=33 Nkv=33 d_model=48 H=2 G=2 d_head=24 d_v=16 C=24 Cq=8 Dr=8 absorb causal");
}

TEST_CASE("the decode grid: 21 steps, members by hand", "[grids][decode]") {
    const auto g = attn::decode_grid();
    REQUIRE(g.size() == 21);
    CHECK(g[0].context == 0);
    CHECK(g[1].context == 7);
    CHECK(g[0].layer.describe() == "single-head B=1 Nq=1 Nkv=1 d_model=17 H=1 G=1 d_head=17");
    CHECK(g[4].layer.describe() == "GQA B=3 Nq=1 Nkv=1 d_model=512 H=8 G=2 d_head=64 bias");
    CHECK(g[4].context == 300);
    CHECK(g[6].layer.describe() == "wide B=1 Nq=1 Nkv=1 d_model=32 H=4 G=4 d_head=32");
    CHECK(g[8].context == 4999);
    CHECK(g[9].magnitude == 12.0);
    CHECK(g[12].layer.describe() == "MQA B=1 Nq=1 Nkv=1 d_model=640 H=32 G=1 d_head=20 bias");
    CHECK(g[12].context == 77);
    CHECK(g[13].layer.describe() == "MLA B=1 Nq=1 Nkv=1 d_model=64 H=4 G=4 d_head=20 d_v=16 C=32 Cq=0 Dr=4 naive");
    CHECK(g[14].context == 300);
    CHECK(g[16].layer.form == attn::form::absorb);
    CHECK(g[18].layer.describe() == "MLA B=2 Nq=1 Nkv=1 d_model=48 H=8 G=8 d_head=24 d_v=8 C=64 Cq=16 Dr=8 absorb");
    CHECK(g[20].layer.describe() == "MQA B=1 Nq=1 Nkv=1 d_model=192 H=48 G=1 d_head=4");
    CHECK(g[20].context == 65);
}

TEST_CASE("the FLOP-count grid: 224 problems, counted by hand", "[grids][count]") {
    const auto g = attn::flop_check_grid();
    // 5 families x 4 (N_q, N_kv) x batch {1, 2} x causal x bias, then MLA: 4 (N_q, N_kv) x d_c' {0, 3}
    // x forms x batch x causal (no bias)
    REQUIRE(g.size() == 224);
    auto count = [&](auto pred) { return std::count_if(g.begin(), g.end(), pred); };
    CHECK(count([](const auto& p) { return p.bias; }) == 80);
    CHECK(count([](const auto& p) { return p.causal; }) == 112);
    CHECK(count([](const auto& p) { return p.batch == 2; }) == 112);
    CHECK(count([](const auto& p) { return p.n_q > p.n_kv; }) == 56);
    CHECK(count([](const auto& p) { return p.n_q < p.n_kv; }) == 56);
    CHECK(count([](const auto& p) { return p.family() == attn::family::wide; }) == 32);
    CHECK(count([](const auto& p) { return p.family() == attn::family::mla && p.form == attn::form::absorb; }) == 32);
    CHECK(g[0].describe() == "single-head B=1 Nq=1 Nkv=1 d_model=5 H=1 G=1 d_head=5");
    CHECK(g[7].describe() == "single-head B=2 Nq=1 Nkv=1 d_model=5 H=1 G=1 d_head=5 causal bias");
    CHECK(g[159].describe() == "wide B=2 Nq=7 Nkv=3 d_model=3 H=2 G=2 d_head=3 causal bias");
}

TEST_CASE("sweep keys d_head, kv_seq, bias and magnitude", "[grids][sweep]") {
    const auto s = attn::parse_sweep(R"([perf]
[[perf.grid]]
variants = ["naive"]
modes = ["layer"]
d_model = 3
heads = 2
d_head = 3
seq = 5
kv_seq = [0, 7]
bias = [false, true]
magnitude = [1, 0.5]
)",
                                     "t.toml", {"perf"});
    const auto cs = attn::expand(s.grids, 2);
    REQUIRE(cs.size() == 8); // 2 N_kv x 2 bias x 2 magnitudes
    CHECK(cs[0].id() == "layer-naive-d3-h2-g2-dh3-n5-b1-t1");
    CHECK(cs[7].id() == "layer-naive-d3-h2-g2-dh3-n5-nkv7-b1-t1-bias-mag0.5");
    auto fails = [](const std::string& text) {
        try {
            attn::parse_sweep(text, "bad.toml", {"perf"});
        } catch (const attn::error& e) {
            return std::string(e.what());
        }
        return std::string("no error");
    };
    CHECK(fails("[perf]\nmagnitude = 0\n") == "bad.toml:2: key 'magnitude' must be in (0, 1000000] (got 0.000000)");
    CHECK(fails("[perf]\nbias = 1\n") == "bad.toml:2: key 'bias' must be a boolean or an array of booleans, not an "
                                         "integer");
    CHECK(fails("[perf]\nd_model = 6\nheads = 4\n") ==
          "bad.toml:3: key 'heads' value 4 does not divide d_model 6 (grid 'perf') (give d_head, or drop its 0)");
    CHECK(fails("[perf]\nmodes = \"decode\"\nkv_seq = 9\n") ==
          "bad.toml:3: key 'kv_seq' applies to modes 'core' and 'layer' only (decode's keys are its context) (grid "
          "'perf')");
}
