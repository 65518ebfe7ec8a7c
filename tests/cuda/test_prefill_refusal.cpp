// What the prefill kernels serve since windows, MLA's naive form and cuda-hopper (refusal.cpp,
// prefill_plan.hpp): one line for each case refused, the tile candidates and the options' checks.
// Pure host logic; cuda-hopper's device line only where a GPU other than sm_90 is present.
#include <catch2/catch.hpp>

#include <string>

#include "api.hpp"
#include "prefill_plan.hpp"

namespace cu = attn::cuda;
namespace pf = attn::cuda::prefill;

namespace {

cu::shape make(std::size_t n_q, std::size_t n_kv, std::size_t d_qk, std::size_t d_v = 0, bool causal = false,
               std::size_t window = 0) {
    cu::shape s;
    s.batch = 2;
    s.heads = 4;
    s.kv_heads = 2;
    s.n_q = n_q;
    s.n_kv = n_kv;
    s.d_qk = d_qk;
    s.d_v = d_v;
    s.causal = causal;
    s.window = window;
    return s;
}

/// cuda-hopper's line where this machine's GPU (if any) is not an sm_90: the tests below expect ""
/// for the served cases only where that is not so.
bool hopper_device_ok() {
    const cu::device_info d = cu::query();
    return !d.present || (d.cc_major == 9 && d.cc_minor == 0);
}

constexpr cu::kernel prefill_kernels[] = {cu::kernel::naive, cu::kernel::tiled, cu::kernel::flash, cu::kernel::hopper};

} // namespace

TEST_CASE("refusal: windows served by every prefill kernel, with causal; refused without", "[prefill][refusal]") {
    for (cu::kernel k : prefill_kernels) {
        if (k == cu::kernel::hopper && !hopper_device_ok()) continue;
        INFO(cu::name(k));
        for (std::size_t w : {1, 7, 129, 4096})
            for (auto [n_q, n_kv] : {std::pair<std::size_t, std::size_t>{7, 129}, {129, 129}, {1000, 7}}) {
                CHECK(cu::refusal(k, make(n_q, n_kv, 64, 0, true, w), cu::storage::bf16) == "");
                CHECK(cu::refusal(k, make(n_q, n_kv, 64, 0, false, w), cu::storage::bf16) ==
                      "window=" + std::to_string(w) +
                          " needs the causal mask (a sliding window looks back from each query)");
            }
    }
    // cuda-decode serves windows too (a causal step over the last W keys; a rolling buffer), and
    // refuses one without the causal mask as the prefill kernels do (its own tests: test_decode_plan.cpp)
    CHECK(cu::refusal(cu::kernel::decode, make(1, 129, 64, 0, true, 16), cu::storage::bf16) == "");
}

TEST_CASE("refusal: MLA's naive form (d_qk != d_v) in tiled, flash and hopper", "[prefill][refusal][mla]") {
    for (cu::kernel k : {cu::kernel::tiled, cu::kernel::flash, cu::kernel::hopper}) {
        if (k == cu::kernel::hopper && !hopper_device_ok()) continue;
        INFO(cu::name(k));
        for (auto [dq, dv] : {std::pair<std::size_t, std::size_t>{192, 128},
                              {96, 64},
                              {72, 40},
                              {128, 64},
                              {64, 128},
                              {136, 8},
                              {8, 8}})
            CHECK(cu::refusal(k, make(7, 129, dq, dv, true), cu::storage::bf16) == "");
    }
    for (cu::kernel k : {cu::kernel::flash, cu::kernel::hopper}) {
        const std::string kn = cu::name(k);
        CHECK(cu::refusal(k, make(7, 7, 200, 128), cu::storage::f16) ==
              kn + " serves d_qk and d_v multiples of 8 up to 64/64, 128/128 or 192/128 (zero-padded), not d_qk 200, "
                   "d_v 128");
        CHECK(cu::refusal(k, make(7, 7, 192, 192), cu::storage::f16).find("not d_qk 192, d_v 192") !=
              std::string::npos);
        CHECK(cu::refusal(k, make(7, 7, 100, 64), cu::storage::f16).find("multiples of 8") != std::string::npos);
        CHECK(cu::refusal(k, make(7, 7, 64), cu::storage::f32) == kn + " stores bf16 or f16, not f32");
        cu::shape neg = make(7, 7, 64);
        neg.scale = -0.125;
        CHECK(cu::refusal(k, neg, cu::storage::bf16) == kn + " serves a positive scale, not -0.125000");
    }
}

TEST_CASE("refusal: cuda-hopper's device line", "[prefill][refusal][hopper]") {
    const std::string why = cu::refusal(cu::kernel::hopper, make(129, 129, 128), cu::storage::bf16);
    if (hopper_device_ok()) {
        CHECK(why == "");
    } else {
        CHECK(why.rfind("cuda-hopper runs on sm_90 (H100, H200; wgmma, TMA), not on ", 0) == 0);
        CHECK(why.find('\n') == std::string::npos);
    }
}

TEST_CASE("widths: the first instantiation that covers a head serves it", "[prefill][plan]") {
    CHECK(pf::widths_for(64, 64).dqk == 64);
    CHECK(pf::widths_for(8, 64).dqk == 64);
    CHECK(pf::widths_for(64, 128).dqk == 128); // d_v decides
    CHECK(pf::widths_for(128, 128).dqk == 128);
    CHECK(pf::widths_for(96, 64).dqk == 128);
    CHECK(pf::widths_for(192, 128).dqk == 192);
    CHECK(pf::widths_for(136, 8).dqk == 192);
    CHECK(!pf::widths_for(192, 136).ok());
    CHECK(!pf::widths_for(256, 256).ok());
    CHECK(!pf::widths_for(68, 64).ok()); // rows of 16-byte chunks (cp.async, TMA strides)
}

TEST_CASE("tile candidates and options", "[prefill][plan]") {
    const auto f128 = cu::tile_candidates(cu::kernel::flash, make(7, 7, 128));
    REQUIRE(f128.size() == 3);
    CHECK(f128[0] == "q128 kv32 w4");
    CHECK(f128[1] == "q128 kv64 w8");
    CHECK(f128[2] == "q64 kv64 w4");
    CHECK(cu::tile_candidates(cu::kernel::flash, make(7, 7, 64)).front() == "q128 kv64 w4");
    CHECK(cu::tile_candidates(cu::kernel::flash, make(7, 7, 192, 128)).size() == 2);
    const auto h128 = cu::tile_candidates(cu::kernel::hopper, make(7, 7, 128));
    REQUIRE(h128.size() == 2);
    CHECK(h128[0] == "q128 kv128 s2");
    CHECK(h128[1] == "q128 kv176 s2");
    CHECK(cu::tile_candidates(cu::kernel::tiled, make(7, 7, 128)).empty());
    CHECK(cu::tile_candidates(cu::kernel::flash, make(7, 7, 256)).empty());

    cu::core_options o;
    CHECK(pf::option_refusal(cu::kernel::flash, make(7, 7, 128), o) == "");
    o.tile = 3;
    CHECK(pf::option_refusal(cu::kernel::flash, make(7, 7, 128), o) == "");
    o.tile = 4;
    CHECK(pf::option_refusal(cu::kernel::flash, make(7, 7, 128), o) ==
          "cuda-flash has 3 tile candidates at d_qk 128, not tile 4");
    CHECK(pf::option_refusal(cu::kernel::tiled, make(7, 7, 128), o) == ""); // ignored by the others
    o.tile = -1;
    CHECK(pf::option_refusal(cu::kernel::hopper, make(7, 7, 128), o) == "core_options::tile must be >= 0 (got -1)");
    o = {};
    o.ctas = -2;
    CHECK(pf::option_refusal(cu::kernel::hopper, make(7, 7, 128), o) == "core_options::ctas must be >= 0 (got -2)");
}

TEST_CASE("a case with options that do not exist throws one line, GPU or not", "[prefill][refusal]") {
    const cu::shape s = make(7, 9, 64);
    std::vector<float> q(s.batch * s.n_q * s.heads * 64, 0.5f), kv(s.batch * s.n_kv * s.kv_heads * 64, 0.25f);
    cu::core_options o;
    o.tile = 9;
    std::string m;
    try {
        cu::core_case c(cu::kernel::flash, s, cu::storage::bf16, q.data(), kv.data(), kv.data(), o);
    } catch (const cu::error& e) {
        m = e.what();
    }
    CHECK(m.find('\n') == std::string::npos);
    if (cu::built_with_cuda())
        CHECK(m.find("cuda-flash has 3 tile candidates at d_qk 64, not tile 9") != std::string::npos);
    else
        CHECK(m.rfind("built without CUDA", 0) == 0);
}
