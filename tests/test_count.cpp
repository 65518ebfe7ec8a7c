// attn.count: the analytic counts against the counting scalar, and against values worked out
// by hand (in the comments) -- never against the code's own output.
#include <cmath>
#include <cstdint>
#include <string>
#include <catch2/catch.hpp>
import attn.families;
import attn.grids;
import attn.count;

using attn::op;
using attn::stage;

namespace {
attn::problem tiny(bool causal) {
    attn::problem p = attn::single_head(2, 2); // d_model = 2, N = 2, one head, no bias
    p.causal = causal;
    return p;
}
} // namespace

TEST_CASE("analytic FLOPs equal the counting scalar on every case of the default grid", "[count]") {
    const auto grid = attn::flop_check_grid();
    REQUIRE(grid.size() == 224); // MLA's 64 included
    for (const auto& p : grid) {
        INFO(p.describe());
        const auto analytic = attn::analytic_flops(p).full;
        const auto measured = attn::measured_flops(p, 3);
        for (std::size_t s = 0; s < attn::n_stages; ++s)
            for (std::size_t o = 0; o < attn::n_ops; ++o) {
                INFO(std::string(attn::stage_name(stage(s))) + " " + std::string(attn::op_name(op(o))));
                CHECK(analytic.n[s][o] == measured.n[s][o]);
            }
    }
}

TEST_CASE("a tiny problem's FLOPs, counted by hand", "[count]") {
    // d_model = 2, N = 2, H = 1, no bias, not causal.
    // Each projection: 2 rows x 2 outputs, each output 2 mul + 1 add -> 8 mul + 4 add = 12; four of them: 48.
    // QK^T: 4 pairs x (2 mul + 1 add) = 8 mul + 4 add.  scale: 4 mul.  max: 1 cmp per row = 2.
    // exp: 4 subtracts + 4 exps.  sum: 1 add per row = 2.  div: 4.  PV: 4 outputs x (2 mul + 1 add) = 12.
    // attention: 12 + 4 + 2 + 8 + 2 + 4 + 12 = 44;  total 92.
    const auto c = attn::analytic_flops(tiny(false));
    CHECK(c.full.stage_total(stage::proj_q) == 12);
    CHECK(c.full.at(stage::qk, op::mul) == 8);
    CHECK(c.full.at(stage::qk, op::add) == 4);
    CHECK(c.full.at(stage::scale, op::mul) == 4);
    CHECK(c.full.at(stage::softmax_max, op::cmp) == 2);
    CHECK(c.full.at(stage::softmax_exp, op::exp) == 4);
    CHECK(c.full.at(stage::softmax_exp, op::add) == 4);
    CHECK(c.full.at(stage::softmax_sum, op::add) == 2);
    CHECK(c.full.at(stage::softmax_div, op::div) == 4);
    CHECK(c.full.stage_total(stage::pv) == 12);
    CHECK(c.projection_full() == 48);
    CHECK(c.attention_full() == 44);
    CHECK(c.full_flops() == 92);
    // matmul-only: multiply-adds 4 x 8 (projections) + 8 (QK^T) + 8 (PV) = 48 -> 96 FLOPs.
    CHECK(c.total_macs() == 48);
    CHECK(c.matmul_flops() == 96);

    // causal: row 0 sees 1 key, row 1 sees 2 -> 3 pairs.  QK^T 3 x 3 = 9, scale 3, max 1 (row 1 only),
    // exp 6, sum 1, div 3, PV: row 0 2 x 1 mul, row 1 2 x (2 mul + 1 add) = 8.  Attention 31.
    const auto k = attn::analytic_flops(tiny(true));
    CHECK(k.attention_full() == 31);
    CHECK(k.projection_full() == 48);
    CHECK(attn::measured_flops(tiny(true)) == k.full);
}

TEST_CASE("a query row that sees no key costs nothing", "[count]") {
    attn::problem p = attn::single_head(2, 3);
    p.n_kv = 1;
    p.causal = true; // rows 0 and 1 see nothing, row 2 sees key 0
    const auto c = attn::analytic_flops(p);
    // one pair: QK^T 2 mul + 1 add, scale 1, no compare, 1 subtract + 1 exp, no sum, 1 div, PV 2 mul.
    CHECK(c.attention_full() == 3 + 1 + 2 + 1 + 2);
    CHECK(c.full.at(stage::softmax_max, op::cmp) == 0);
    CHECK(attn::measured_flops(p) == c.full);
}

TEST_CASE("parameter counts, worked by hand", "[count]") {
    // d_model = 512, H = 8: four 512 x 512 matrices = 4 * 262,144 = 1,048,576.
    const auto mha = attn::analytic_params(attn::mha(512, 8, 1));
    CHECK(mha.wo == 262144);
    CHECK(mha.total() == 1048576);
    // ... and the same with one head: the split costs nothing.
    CHECK(attn::analytic_params(attn::single_head(512, 1)).total() == 1048576);
    // with biases: + 4 * 512 = 2048 either way.
    attn::problem b = attn::mha(512, 8, 1);
    b.bias = true;
    CHECK(attn::analytic_params(b).total() == 1048576 + 2048);
    // MQA: W_k and W_v shrink to 512 x 64 = 32,768 each: 2 * 262,144 + 2 * 32,768 = 589,824.
    CHECK(attn::analytic_params(attn::mqa(512, 8, 1)).total() == 589824);
    // wide counterfactual: 8 heads of width 512: 4 * 8 * 262,144 = 8,388,608 (8x).
    CHECK(attn::analytic_params(attn::wide(512, 8, 1)).total() == 8388608);
}

TEST_CASE("parameters in closed form equal the elements the weights allocate", "[count]") {
    for (const auto& p : attn::flop_check_grid()) {
        INFO(p.describe());
        CHECK(attn::analytic_params(p).total() == attn::parameter_elements(p, attn::random_weights<float>(p, 1)));
    }
}

TEST_CASE("key/value cache per token per layer", "[count]") {
    // MHA d_model = 512: K and V, 512 each, fp16 -> 2 * 512 * 2 = 2048 bytes; MQA keeps one 64-wide head: 256.
    CHECK(attn::kv_cache_bytes_per_token(attn::mha(512, 8, 1), 2) == 2048);
    CHECK(attn::kv_cache_bytes_per_token(attn::mqa(512, 8, 1), 2) == 256);
    CHECK(attn::kv_cache_bytes_per_token(attn::gqa(512, 8, 2, 1), 2) == 512);
}

TEST_CASE("attention overtakes the projections where the closed form says", "[count]") {
    // MHA, no bias, matmul-only: attention 4 N^2 d, projections 8 N d^2 -> equal at N = 2 d = 1024.
    const auto m = attn::attention_crossover(attn::mha(512, 8, 1), attn::convention::matmul);
    CHECK(m.closed_form == Approx(1024.0));
    CHECK(m.first_n == 1025); // equal at 1024, ahead from 1025
    // full count: N (4 d + 5 H) - (2 H + d) > 8 d^2 - 4 d  ->  N* = (8 d^2 - 3 d + 2 H) / (4 d + 5 H)
    //           = (2,097,152 - 1,536 + 16) / (2,048 + 40) = 2,095,632 / 2,088 = 1003.655...
    const auto f = attn::attention_crossover(attn::mha(512, 8, 1), attn::convention::full);
    CHECK(f.closed_form == Approx(2095632.0 / 2088.0));
    CHECK(f.first_n == 1004);
    // the closed form and the search agree across families, causal, bias
    for (const auto& base : {attn::mha(64, 4, 1), attn::mqa(96, 8, 1), attn::gqa(128, 8, 2, 1),
                             attn::single_head(32, 1), attn::wide(16, 4, 1)})
        for (int causal = 0; causal < 2; ++causal)
            for (int bias = 0; bias < 2; ++bias)
                for (auto conv : {attn::convention::matmul, attn::convention::full}) {
                    attn::problem p = base;
                    p.causal = causal;
                    p.bias = bias;
                    INFO(p.describe());
                    const auto x = attn::attention_crossover(p, conv);
                    CHECK(double(x.first_n) > x.closed_form);
                    CHECK(double(x.first_n) <= std::floor(x.closed_form) + 1.0);
                }
}

TEST_CASE("a % of peak is in doubt above 100 % or against a ceiling measured under load", "[count]") {
    CHECK(attn::peak_in_doubt(100.5, 0.0));   // beats the measured ceiling: the ceiling was low
    CHECK(attn::peak_in_doubt(50.0, 0.5));    // half a CPU busy elsewhere during the probe
    CHECK(!attn::peak_in_doubt(99.0, 0.49));  // a quiet probe, a share below the ceiling
    CHECK(!attn::peak_in_doubt(100.0, -1.0)); // load unknown (-1) and exactly at the ceiling
    // the probe alongside: 64 GFLOP/s against a 100 GFLOP/s peak whose probe read 0.51 of it
    // alongside is 64 / 51 = 125 % of that probe -- the probe, not the case, was slowed
    CHECK(attn::peak_in_doubt(64.0, 0.0, 100.0 * 64.0 / 51.0));
    CHECK(!attn::peak_in_doubt(64.0, 0.0, 100.0 * 64.0 / 97.0)); // a probe alongside at 0.97: 66 %
    // the load that goes with a ceiling: the 1-thread probe's at 1 thread, the all-thread one's above
    CHECK(attn::fma_ceiling_load_at(0.1, 0.9, 2, 1) == 0.1);
    CHECK(attn::fma_ceiling_load_at(0.1, 0.9, 2, 2) == 0.9);
    CHECK(attn::fma_ceiling_load_at(0.1, 0.9, 1, 4) == 0.1);
}
