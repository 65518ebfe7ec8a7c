// attn_cuda's host side, without a GPU: which kernel refuses which case and how it says so, query()
// and the case constructors on a machine with no usable device (one line, attn::cuda::error, no
// crash), and the host's rounding to bf16 and f16. The prefill kernels' tiles, layouts and
// synchronisation: attn_prefill_tests (test_prefill_*.cpp, test_hopper_*.cpp); cuda-decode's
// planning, layout and one block's tile: attn_cuda_decode_tests (test_decode_*.cpp). What needs a
// GPU is attn_cuda_gpu_tests.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>
#include "api.hpp"
#include "formats.hpp"

namespace cu = attn::cuda;

namespace {

cu::shape make(std::size_t n_q, std::size_t n_kv, std::size_t d, std::size_t h = 4, std::size_t g = 2) {
    cu::shape s;
    s.batch = 2;
    s.heads = h;
    s.kv_heads = g;
    s.n_q = n_q;
    s.n_kv = n_kv;
    s.d_qk = d;
    return s;
}

bool one_line(const std::string& s) { return !s.empty() && s.find('\n') == std::string::npos; }

constexpr cu::kernel all_kernels[] = {cu::kernel::naive, cu::kernel::tiled, cu::kernel::flash, cu::kernel::decode,
                                      cu::kernel::hopper};

} // namespace

TEST_CASE("names", "[cuda][host]") {
    CHECK(std::string(cu::name(cu::kernel::naive)) == "cuda-naive");
    CHECK(std::string(cu::name(cu::kernel::tiled)) == "cuda-tiled");
    CHECK(std::string(cu::name(cu::kernel::flash)) == "cuda-flash");
    CHECK(std::string(cu::name(cu::kernel::decode)) == "cuda-decode");
    CHECK(std::string(cu::name(cu::kernel::hopper)) == "cuda-hopper");
    CHECK(std::string(cu::name(cu::storage::int8)) == "int8");
}

TEST_CASE("resolved fills d_v and the scale", "[cuda][host]") {
    const cu::shape s = cu::resolved(make(3, 5, 64));
    CHECK(s.d_v == 64);
    CHECK(s.scale == Approx(0.125));
    cu::shape t = make(3, 5, 64);
    t.d_v = 32;
    t.scale = 0.5;
    CHECK(cu::resolved(t).d_v == 32);
    CHECK(cu::resolved(t).scale == 0.5);
}

TEST_CASE("refusal: the cases each kernel serves", "[cuda][host][refusal]") {
    for (cu::storage st : {cu::storage::f32, cu::storage::bf16, cu::storage::f16}) {
        CHECK(cu::refusal(cu::kernel::naive, make(7, 129, 80), st).empty());
        CHECK(cu::refusal(cu::kernel::tiled, make(7, 129, 256), st).empty());
    }
    for (std::size_t d : {64, 128})
        for (cu::storage st : {cu::storage::bf16, cu::storage::f16}) {
            cu::shape s = make(1000, 7, d, 8, 1);
            s.causal = true;
            CHECK(cu::refusal(cu::kernel::flash, s, st).empty());
        }
    for (std::size_t d : {8, 64, 80, 128, 256})
        for (cu::storage st : {cu::storage::f32, cu::storage::bf16, cu::storage::f16, cu::storage::int8})
            CHECK(cu::refusal(cu::kernel::decode, make(1, 4097, d, 32, 8), st).empty());
    cu::shape mla = make(7, 9, 96);
    mla.d_v = 64; // naive and tiled take d_qk != d_v
    CHECK(cu::refusal(cu::kernel::naive, mla, cu::storage::f32).empty());
    CHECK(cu::refusal(cu::kernel::tiled, mla, cu::storage::bf16).empty());
}

TEST_CASE("refusal: one line naming what the kernel lacks", "[cuda][host][refusal]") {
    CHECK(cu::refusal(cu::kernel::flash, make(64, 64, 200), cu::storage::bf16) ==
          "cuda-flash serves d_qk and d_v multiples of 8 up to 64/64, 128/128 or 192/128 (zero-padded), not d_qk 200, "
          "d_v 200");
    CHECK(cu::refusal(cu::kernel::flash, make(64, 64, 64), cu::storage::f32) ==
          "cuda-flash stores bf16 or f16, not f32");
    CHECK(cu::refusal(cu::kernel::flash, make(64, 64, 64), cu::storage::int8) ==
          "cuda-flash stores bf16 or f16, not int8");
    CHECK(cu::refusal(cu::kernel::decode, make(9, 64, 64), cu::storage::bf16) ==
          "cuda-decode serves n_q 1 to 8 new tokens a step, not 9"); // more: test_decode_plan.cpp
    CHECK(cu::refusal(cu::kernel::decode, make(1, 64, 260), cu::storage::bf16) ==
          "cuda-decode serves d_head a multiple of 8 up to 256, not 260");
    CHECK(cu::refusal(cu::kernel::decode, make(1, 64, 20), cu::storage::f32) ==
          "cuda-decode serves d_head a multiple of 8 up to 256, not 20");
    CHECK(cu::refusal(cu::kernel::tiled, make(7, 7, 512), cu::storage::f32) ==
          "cuda-tiled serves d_qk and d_v up to 256, not 512");
    for (cu::kernel k : {cu::kernel::naive, cu::kernel::tiled, cu::kernel::flash}) {
        const std::string why = cu::refusal(k, make(7, 7, 64), cu::storage::int8);
        CHECK(one_line(why));
        CHECK(why.find("int8") != std::string::npos);
    }
    {
        cu::shape s = make(1, 7, 128);
        s.d_v = 64; // cuda-decode serves MLA's absorbed form through decode_spec only: test_decode_plan.cpp
        CHECK(cu::refusal(cu::kernel::decode, s, cu::storage::bf16) ==
              "cuda-decode serves d_qk != d_v only as MLA's absorbed form (decode_spec.v_from_k), not 128/64");
    }
    for (cu::kernel k : all_kernels) {
        INFO(cu::name(k));
        cu::shape w = make(1, 64, 64);
        w.window = 16;
        CHECK(cu::refusal(k, w, cu::storage::bf16) ==
              (k == cu::kernel::decode
                   ? "cuda-decode serves a window only with the causal mask (it looks back from each query)"
                   : "window=16 needs the causal mask (a sliding window looks back from each query)"));
        CHECK(cu::refusal(k, make(1, 64, 64, 6, 4), cu::storage::bf16) == "heads 6 is not divisible by kv_heads 4");
        CHECK(cu::refusal(k, make(1, 64, 0), cu::storage::bf16) == "d_qk must be >= 1 (got 0)");
        cu::shape nan_scale = make(1, 64, 64);
        nan_scale.scale = std::numeric_limits<double>::quiet_NaN();
        CHECK(one_line(cu::refusal(k, nan_scale, cu::storage::bf16)));
        cu::shape wide = make(1, 64, 64);
        wide.batch = 70000;
        CHECK(cu::refusal(k, wide, cu::storage::bf16) == "batch 70000 exceeds the grid's 65535");
    }
}

TEST_CASE("query() without a usable GPU: present is false, one line says why", "[cuda][host]") {
    const cu::device_info d = cu::query();
    INFO(d.reason);
    // this suite runs where there is no GPU (CI, the developers' machines); on a GPU machine it
    // checks the opposite: a device described, no reason
    if (d.present) {
        CHECK(d.reason.empty());
        CHECK(d.sms > 0);
        CHECK(d.l2_bytes > 0);
        return;
    }
    CHECK(one_line(d.reason));
    if (cu::built_with_cuda())
        CHECK(d.reason.rfind("no CUDA device", 0) == 0);
    else
        CHECK(d.reason.rfind("built without CUDA", 0) == 0);
}

TEST_CASE("cases without a usable GPU throw attn::cuda::error with one line", "[cuda][host]") {
    if (cu::query().present) return; // a GPU machine: attn_cuda_gpu_tests covers the cases
    const cu::shape s = make(7, 9, 64);
    std::vector<float> q(s.batch * s.n_q * s.heads * 64, 0.5f), kv(s.batch * s.n_kv * s.kv_heads * 64, 0.25f);
    auto message = [](auto&& make_case) {
        try {
            make_case();
        } catch (const cu::error& e) {
            return std::string(e.what());
        }
        return std::string();
    };
    for (cu::kernel k : {cu::kernel::naive, cu::kernel::tiled}) {
        const std::string m = message([&] { cu::core_case c(k, s, cu::storage::f32, q.data(), kv.data(), kv.data()); });
        INFO(m);
        CHECK(one_line(m));
    }
    // a refused case says the refusal, GPU or not
    const std::string refused =
        message([&] { cu::core_case c(cu::kernel::flash, s, cu::storage::f32, q.data(), kv.data(), kv.data()); });
    if (cu::built_with_cuda()) CHECK(refused.find("cuda-flash stores bf16 or f16, not f32") != std::string::npos);
    CHECK(one_line(refused));

    cu::shape d = make(1, 9, 64);
    std::vector<std::uint16_t> cache(d.batch * d.kv_heads * 16 * 64, 0x3f80);
    const std::string dm = message(
        [&] { cu::decode_case c(d, cu::storage::bf16, q.data(), cache.data(), cache.data(), nullptr, nullptr, 16); });
    INFO(dm);
    CHECK(one_line(dm));

    std::vector<float> x(2 * 9 * 256, 0.1f), w(256 * 256, 0.01f);
    cu::layer_inputs in;
    in.x_q = in.x_kv = x.data();
    in.wq = in.wk = in.wv = in.wo = w.data();
    const std::string lm = message([&] { cu::layer_case c(s, 256, cu::storage::bf16, cu::kernel::naive, in); });
    INFO(lm);
    CHECK(one_line(lm));
    const std::string pm = message([] { cu::measure_peak(3); });
    INFO(pm);
    CHECK(one_line(pm));
}

TEST_CASE("formats: bf16 and f16 round to nearest even, widen exactly", "[cuda][host][formats]") {
    namespace f = attn::cuda::formats;
    // every finite pattern survives the round trip
    for (std::uint32_t h = 0; h < 65536; ++h) {
        const auto b = std::uint16_t(h);
        if ((b & 0x7f80) != 0x7f80) REQUIRE(f::to_bf16(f::from_bf16(b)) == b);
        if ((b & 0x7c00) != 0x7c00) REQUIRE(f::to_f16(f::from_f16(b)) == b);
    }
    CHECK(f::to_bf16(1.0f) == 0x3f80);
    CHECK(f::to_f16(1.0f) == 0x3c00);
    CHECK(f::to_f16(65504.0f) == 0x7bff);
    CHECK(f::to_f16(65519.0f) == 0x7bff);
    CHECK(f::to_f16(65520.0f) == 0x7c00);
    CHECK(f::to_f16(-1e10f) == 0xfc00);
    CHECK(f::to_f16(5.9604644775390625e-8f) == 0x0001);  // 2^-24
    CHECK(f::to_f16(2.98023223876953125e-8f) == 0x0000); // 2^-25: a tie, to even (zero)
    CHECK(f::to_f16(8.940696716308594e-8f) == 0x0002);   // 1.5 x 2^-24: a tie, to even
    CHECK(f::to_bf16(1.0f + 0x1.0p-8f) == 0x3f80);       // tie, to even
    CHECK(f::to_bf16(1.0f + 0x1.8p-8f) == 0x3f81);
    CHECK(std::isnan(f::from_bf16(f::to_bf16(std::numeric_limits<float>::quiet_NaN()))));
    CHECK(std::isnan(f::from_f16(f::to_f16(std::numeric_limits<float>::quiet_NaN()))));
    CHECK(std::isinf(f::from_bf16(f::to_bf16(std::numeric_limits<float>::max()))));
    // random floats: the result is a nearest representable value
    std::mt19937 rng(7);
    std::uniform_real_distribution<float> mant(1.0f, 2.0f);
    std::uniform_int_distribution<int> ex(-30, 17);
    for (int i = 0; i < 200000; ++i) {
        const float x = std::ldexp(mant(rng), ex(rng)) * (i % 2 ? -1.0f : 1.0f);
        const std::uint16_t h = f::to_f16(x), b = f::to_bf16(x);
        const double e_h = std::abs(double(f::from_f16(h)) - x), e_b = std::abs(double(f::from_bf16(b)) - x);
        if (std::abs(x) < 65504.0f) {
            REQUIRE(e_h <= std::abs(double(f::from_f16(std::uint16_t(h + 1))) - x));
            if ((h & 0x7fff) != 0) REQUIRE(e_h <= std::abs(double(f::from_f16(std::uint16_t(h - 1))) - x));
        }
        REQUIRE(e_b <= std::abs(double(f::from_bf16(std::uint16_t(b + 1))) - x));
        REQUIRE(e_b <= std::abs(double(f::from_bf16(std::uint16_t(b - 1))) - x));
    }
}

TEST_CASE("formats: int8 rows as attn.core:kv quantizes them", "[cuda][host][formats]") {
    namespace f = attn::cuda::formats;
    const float x[5] = {1.0f, -2.54f, 0.0f, 0.01f, 2.0f};
    std::int8_t q[5];
    const float s = f::quantize_row(x, 5, q);
    CHECK(s == Approx(2.54f / 127.0f));
    CHECK(q[1] == -127);
    CHECK(q[2] == 0);
    for (int i = 0; i < 5; ++i) CHECK(std::abs(q[i] * s - x[i]) <= s / 2 + 1e-6f);
    const float z[3] = {0, 0, 0};
    CHECK(f::quantize_row(z, 3, q) == 0.0f);
}
