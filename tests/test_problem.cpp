// Problem validation and families: every bad value gets its own one-line error.
#include <cmath>
#include <limits>
#include <string>
#include <catch2/catch.hpp>
import attn.families;
import attn.core;

using attn::problem;

namespace {
std::string error_of(const problem& p) {
    try {
        p.validate();
    } catch (const attn::error& e) {
        return e.what();
    }
    return "";
}
} // namespace

TEST_CASE("families are one computation with different (heads, kv_heads)", "[problem]") {
    CHECK(attn::enum_label(attn::single_head(64, 8).family()) == "single-head");
    CHECK(attn::enum_label(attn::mha(64, 8, 8).family()) == "MHA");
    CHECK(attn::enum_label(attn::mqa(64, 8, 8).family()) == "MQA");
    CHECK(attn::enum_label(attn::gqa(64, 8, 2, 8).family()) == "GQA");
    CHECK(attn::enum_label(attn::wide(64, 8, 8).family()) == "wide");
    CHECK(attn::wide(64, 8, 8).qk_dim() == 64);
    CHECK(attn::mha(64, 8, 8).qk_dim() == 8);
}

TEST_CASE("query head h reads key/value head floor(h*G/H)", "[problem]") {
    const problem p = attn::gqa(64, 8, 2, 4);
    for (std::size_t h = 0; h < 4; ++h) CHECK(p.kv_head_of(h) == 0);
    for (std::size_t h = 4; h < 8; ++h) CHECK(p.kv_head_of(h) == 1);
    CHECK(attn::mqa(64, 8, 4).kv_head_of(7) == 0);
    CHECK(attn::mha(64, 8, 4).kv_head_of(5) == 5);
}

TEST_CASE("causal mask is bottom-right aligned", "[problem]") {
    problem p = attn::mha(8, 1, 4);
    p.causal = true;
    p.n_q = 2; // decoding-like: the 2 queries are the last 2 of 4 positions
    CHECK(p.visible(0) == 3);
    CHECK(p.visible(1) == 4);
    p.n_q = 6; // more queries than keys: the first two see nothing
    CHECK(p.visible(0) == 0);
    CHECK(p.visible(1) == 0);
    CHECK(p.visible(2) == 1);
    CHECK(p.visible(5) == 4);
    CHECK(p.visible_pairs() == 0 + 0 + 1 + 2 + 3 + 4);
}

TEST_CASE("the closed forms of visible pairs and rows with keys equal the sums over rows", "[problem]") {
    for (bool causal : {false, true})
        for (std::size_t n_q = 1; n_q <= 40; ++n_q)
            for (std::size_t n_kv = 1; n_kv <= 40; ++n_kv) {
                problem p = attn::mha(8, 1, n_q);
                p.n_kv = n_kv;
                p.causal = causal;
                std::size_t pairs = 0, rows = 0;
                for (std::size_t i = 0; i < n_q; ++i) {
                    pairs += p.visible(i);
                    rows += p.visible(i) > 0;
                }
                CHECK(p.visible_pairs() == pairs);
                CHECK(p.rows_with_keys() == rows);
            }
}

TEST_CASE("a problem whose counts would not fit in 64 bits is refused before anything is counted",
          "[problem][errors]") {
    problem p = attn::mha(512, 8, (std::size_t(1) << 32) + 1); // N^2 alone is 2^64 + 2^33 + 1
    CHECK(error_of(p).rfind("problem too large to count in 64 bits: batch=1 heads=8 N_q=4294967297", 0) == 0);
    p = attn::mha(512, 8, std::size_t(1) << 62);
    CHECK(error_of(p).rfind("problem too large to count in 64 bits", 0) == 0);
    p = attn::mha(512, 8, 1 << 20); // 8 x 8 x 2^40 x 64 = 2^52 FLOPs: countable
    CHECK(error_of(p).empty());
    p.batch = 1 << 12; // 2^64: not
    CHECK(error_of(p).rfind("problem too large to count in 64 bits", 0) == 0);
}

TEST_CASE("validation names the bad value", "[problem][errors]") {
    problem p = attn::mha(512, 8, 16);
    CHECK(error_of(p).empty());
    p.heads = 3;
    p.kv_heads = 3;
    CHECK(error_of(p) == "d_model=512 is not divisible by heads=3 (give d_head explicitly)");
    p.d_head = 64; // explicit head width makes it valid
    CHECK(error_of(p).empty());
    p = attn::gqa(512, 8, 3, 16);
    CHECK(error_of(p) == "heads=8 is not divisible by kv_heads=3");
    p = attn::gqa(512, 8, 16, 16);
    CHECK(error_of(p) == "kv_heads=16 exceeds heads=8");
    p = attn::mha(512, 8, 16);
    p.batch = 0;
    CHECK(error_of(p) == "batch must be >= 1 (got 0)");
    p = attn::mha(0, 8, 16);
    CHECK(error_of(p) == "d_model must be >= 1 (got 0)");
    p = attn::mha(512, 8, 0);
    CHECK(error_of(p) == "query length must be >= 1 (got 0)");
    p = attn::mha(512, 0, 16);
    CHECK(error_of(p) == "heads must be >= 1 (got 0)");
    p = attn::mha(512, 8, 16);
    p.scale = std::numeric_limits<double>::infinity();
    CHECK(error_of(p) == "softmax scale must be finite (got inf)");
}

TEST_CASE("random weights are deterministic and shaped as PyTorch's Linear", "[problem]") {
    problem p = attn::gqa(16, 4, 2, 3);
    p.bias = true;
    const auto a = attn::random_weights<float>(p, 7), b = attn::random_weights<float>(p, 7),
               c = attn::random_weights<float>(p, 8);
    CHECK(a[attn::qkv::wq] == b[attn::qkv::wq]);
    CHECK(a[attn::qkv::wq] != c[attn::qkv::wq]);
    CHECK(a[attn::qkv::wq].size() == 16 * 16);
    CHECK(a[attn::qkv::wk].size() == 8 * 16);
    CHECK(a[attn::qkv::wo].size() == 16 * 16);
    CHECK(a[attn::qkv::bk].size() == 8);
    CHECK(a.count() == 16 * 16 * 2 + 8 * 16 * 2 + 16 + 8 + 8 + 16);
}

TEST_CASE("a window needs the causal mask, and an absurd one is refused, naming the value", "[window][errors]") {
    problem p = attn::mha(32, 4, 8);
    p.window = 4; // without the causal mask
    CHECK(error_of(p) == "window=4 needs the causal mask (a sliding window looks back from each query)");
    p.causal = true;
    p.window = attn::max_window + 1;
    CHECK(error_of(p) == "window=4294967297 is absurd: at most 4294967296 keys (2^32)");
    p.window = attn::max_window;
    CHECK(error_of(p).empty());
}
