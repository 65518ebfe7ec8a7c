// Decoding over key/value caches narrower than fp32 (bf16, f16, int8): against fp64 on the same
// rounded or dequantized cache, the mutants over bf16 and int8 caches, rounding and quantization
// by hand, bytes per token in closed form (the fp32 cache's tests: test_decode.cpp).
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>
#include <catch2/catch.hpp>
import attn.families;
import attn.grids;
import attn.variants;
import attn.decode;
import attn.check;
import attn.kernels;

using attn::problem;

namespace attn_test { // test_decode.cpp's
std::string label(const attn::variant& v, const problem& p, std::size_t L, attn::decode_fill f, const char* prec);
problem family(const std::string& name);
} // namespace attn_test

using attn_test::family;
using attn_test::label;

// ---- key/value caches narrower than fp32 (bf16, f16, int8) ----------------------------------

TEMPLATE_TEST_CASE("a narrow cache: decode steps equal fp64 on the same cache", "[decode][kv]", attn::bf16, attn::f16,
                   std::int8_t) {
    const std::string fam = GENERATE("single-head", "MHA", "MQA", "MQA16", "GQA", "GQA-lanes", "wide");
    const std::size_t L = GENERATE(0, 17, 130);
    problem p = family(fam);
    p.batch = L == 17 ? 3 : 1;
    p.bias = L % 2 == 1;
    attn::run_options opt;
    opt.threads = 2;
    for (const auto& v : attn::registry()) {
        if (!v.kv.get<TestType>()) continue;
        INFO(label(v, p, L, attn::decode_fill::steps,
                   std::string(attn::enum_name(attn::kv_dtype_of<TestType>)).c_str()));
        const auto r = attn::check_decode_kv<TestType>(v, p, L, attn::decode_fill::steps, opt, 7);
        INFO("same cache: max_abs " << r.same.max_abs << ", err/bound " << r.same.ratio << "; unrounded: max_abs "
                                    << r.unrounded.max_abs);
        CHECK(r.same.pass);
        CHECK(r.unrounded.max_abs > 0); // the rounding is visible against the unrounded cache
    }
}

TEMPLATE_TEST_CASE("a narrow cache: the decode core across the key split", "[decode][kv]", attn::bf16, attn::f16,
                   std::int8_t) {
    const std::size_t L = GENERATE(256, 1023, 4098);
    // mqa(360, 24): heads in the lanes in an odd number of blocks on AVX2, d_head 15 (the widened
    // value tile's scalar tail and a register pass of fewer dims); d_head 32 and 64 with 2, 4
    // and 16 heads a key/value head: a bf16 cache's keys widened in pair order on AVX2 and
    // AVX-512 (decode_shape::keys_in_pair_order: d whole register pairs, C < lanes); 8 heads a
    // key/value head at d_head 64: an f16 cache's two blocks of 4 (decode_shape::of_type), int8's
    // byte quads, bf16's pairs on vdpbf16ps where this CPU takes them
    for (problem p : {attn::gqa(64, 4, 2, 1), attn::mha(256, 4, 1), attn::mqa(256, 16, 1), attn::mqa(360, 24, 1),
                      attn::gqa(256, 8, 4, 1), attn::gqa(512, 8, 2, 1), attn::mqa(1024, 16, 1), attn::mqa(512, 8, 1)}) {
        p.batch = 2;
        const problem step = attn::decode_problem(p, L);
        attn::run_options opt;
        opt.threads = 2;
        for (const char* name : {"simd", "parallel"}) {
            const auto& v = attn::find_variant(name);
            INFO(name << " L=" << L << " on " << p.describe());
            const auto r = attn::check_decode_core<TestType>(v, step, opt, 11);
            INFO("err/bound " << r.same.ratio << "; unrounded err/fp32 bound " << r.unrounded.ratio);
            CHECK(r.same.pass);
        }
    }
}

// ---- an int8 cache in integer products (AVX512-VNNI): the fixed point and its charge -----------

namespace {
using int8_dots = attn::kernels::isa::int8_dots<std::int8_t>;

/// Scores on byte quads, C dims a lane (16 / C heads): lane r*C + c of each chunk t holds 4 bytes
/// of head r's dims 4(tC + c)..+3; the queries' two planes (q = 256 h + l, l in [-128, 127]) and
/// each lane's offset 128 sum(q) are packed here by hand, and each lane's result must be its exact
/// integer sum of q k.
template <class D, std::size_t C>
void check_int8_quads() {
    using dots = D;
    constexpr std::size_t RB = 16 / C;
    for (const std::size_t d : {32, 64, 128}) {
        const std::size_t nch4 = d / (4 * C);
        std::int32_t q[RB][128]; // RB heads in 16-bit fixed point, the extremes among them
        std::int8_t k[128];
        for (std::size_t t = 0; t < d; ++t) {
            k[t] = std::int8_t(t % 3 == 0 ? -128 : int((t * 53) % 256) - 128);
            for (std::size_t r = 0; r < RB; ++r)
                q[r][t] = t == r ? (r % 2 ? -dots::quad_top : dots::quad_top)
                                 : std::int32_t((t * 977 + r * 131) % 65025) - 32512;
        }
        alignas(64) std::uint32_t planes[2 * 16 * 16] = {};
        alignas(64) std::int32_t bias[16] = {};
        std::int64_t want[16] = {};
        for (std::size_t r = 0; r < RB; ++r)
            for (std::size_t c = 0; c < C; ++c)
                for (std::size_t t = 0; t < nch4; ++t)
                    for (std::size_t e = 0; e < 4; ++e) {
                        const std::size_t dim = 4 * (t * C + c) + e;
                        const std::int32_t x = q[r][dim], h = x >= 0 ? (x + 128) / 256 : -((127 - x) / 256);
                        const std::int32_t l = x - 256 * h;
                        REQUIRE(h >= -127);
                        REQUIRE(h <= 127);
                        REQUIRE(l >= -128);
                        REQUIRE(l <= 127);
                        planes[t * 16 + r * C + c] |= std::uint32_t(std::uint8_t(std::int8_t(h))) << 8 * e;
                        planes[(nch4 + t) * 16 + r * C + c] |= std::uint32_t(std::uint8_t(std::int8_t(l))) << 8 * e;
                        bias[r * C + c] += 128 * x;
                        want[r * C + c] += std::int64_t(x) * k[dim];
                    }
        auto hi = dots::zero(), lo = dots::zero();
        for (std::size_t t = 0; t < nch4; ++t) {
            const auto x = dots::template quads<C>(k + t * 4 * C);
            hi = dots::dot_bytes(hi, x, dots::load_pairs(reinterpret_cast<const std::int32_t*>(planes) + t * 16));
            lo = dots::dot_bytes(lo, x,
                                 dots::load_pairs(reinterpret_cast<const std::int32_t*>(planes) + (nch4 + t) * 16));
        }
        alignas(64) float got[16];
        dots::quads_to_float(hi, lo, dots::load_pairs(bias)).store_aligned(got);
        for (std::size_t i = 0; i < 16; ++i) {
            INFO("C " << C << " d " << d << " lane " << i);
            CHECK(double(got[i]) == double(float(want[i]))); // the exact sum, rounded once
        }
    }
}

/// The checks below on D = int8_dots where the build has AVX512-VNNI (a template: elsewhere
/// D's pieces do not exist).
template <class D>
void check_int8_scores() {
    using dots = D;
    {
        for (const std::size_t d : {32, 64, 128}) {
            alignas(64) float q[128];
            std::int8_t k[128];
            for (std::size_t t = 0; t < d; ++t) {
                q[t] = float(std::sin(0.37 * double(t) + 1.0)) * (t == 5 ? 40.0f : 1.0f); // one large element
                k[t] = std::int8_t(int((t * 37) % 255) - 127);
            }
            const auto qq = dots::quantize(q, d);
            std::int16_t q16[128];
            std::memcpy(q16, &qq.q, sizeof q16);
            double qmax = 0;
            for (std::size_t t = 0; t < d; ++t) qmax = std::max(qmax, double(std::abs(q[t])));
            CHECK(double(qq.scale) * dots::top(d) == Approx(qmax).epsilon(1e-6));
            std::int64_t want = 0; // the exact integer dot product
            for (std::size_t t = 0; t < d; ++t) {
                INFO("d " << d << " dim " << t);
                CHECK(std::abs(double(q16[t]) * qq.scale - q[t]) <= 0.51 * qmax / dots::top(d));
                want += std::int64_t(q16[t]) * k[t];
            }
            alignas(64) float lanes_out[16];
            attn::kernels::batch sum = d == 32   ? dots::template score<1>(k, qq)
                                       : d == 64 ? dots::template score<2>(k, qq)
                                                 : dots::template score<4>(k, qq);
            sum.store_aligned(lanes_out);
            double got = 0;
            for (const float x : lanes_out) got += x; // each lane exact (|sum| < 2^24 here)
            CHECK(got == double(want));
        }
    }
    check_int8_quads<D, 2>();
    check_int8_quads<D, 4>();
    check_int8_quads<D, 8>();
    CHECK(dots::top_quads(64) == 32512);   // min(32512, 2^31 / (128 x 64))
    CHECK(dots::top_quads(1024) == 16383); // floor((2^31 - 1) / (128 x 1024))
}

/// Counts the lines a paced cursor asks for.
struct count_request {
    static inline std::size_t asked = 0;
    void operator()(const char*) const { ++asked; }
};

/// What the P V kernels' tests share, for RB = 16 / C heads over n keys of width d: the weights
/// (score group j / C, lane r*C + c holds head r's weight of key j, C keys of a head contiguous;
/// every fifth key 0, whole groups, keys past n 0), each head's rescale and output row (aligned,
/// as a partial's rows are), and a paced cursor over L = T + 5 lines for T steps: T steps ask for
/// exactly ceil(T delta / 64) lines, delta = ceil(64 L / T), one step more or fewer at least a
/// line more or fewer.
template <std::size_t C>
struct pv_fixture {
    static constexpr std::size_t RB = 16 / C;
    std::size_t d, n, steps;
    alignas(64) float s[64 / C * 16] = {};
    alignas(64) float corr[16];
    alignas(64) float out[8 * 128];
    std::vector<float> before;
    alignas(64) static inline char rows[64 * 256];
    attn::kernels::detail::paced_lines_by<count_request> cursor;
    static float weight(std::size_t r, std::size_t j) {
        return j % 5 == 3 ? 0.0f : float((0.1 + 0.9 * std::abs(std::cos(double(j + 7 * r)))) / double(r + 1));
    }
    pv_fixture(std::size_t d_, std::size_t n_, std::size_t steps_)
        : d(d_), n(n_), steps(steps_), cursor({rows, 64, 64, steps_ + 5}, steps_) {
        for (std::size_t r = 0; r < RB; ++r)
            for (std::size_t j = 0; j < n; ++j) s[j / C * 16 + r * C + j % C] = weight(r, j);
        for (std::size_t i = 0; i < 16; ++i) corr[i] = 0.75f - 0.125f * float(i / C);
        for (std::size_t i = 0; i < RB * d; ++i) out[i] = float(i % 7) - 3.0f;
        before.assign(out, out + RB * d);
        count_request::asked = 0;
    }
    /// The lines the kernel's steps should have asked for.
    std::size_t lines() const {
        const std::size_t delta = (64 * (steps + 5) + steps - 1) / steps;
        return (steps * delta + 63) / 64;
    }
};

/// decode_pv_i8<D, C> (Pairs: decode_pv_i16<D, C>, weights in 16-bit fixed point on pairs of
/// keys) for RB = 16 / C heads sharing the values: score group j / C, lane r*C + c holds head r's
/// weight of key j (C keys of a head contiguous), each head's output row and rescale its own.
template <class D, std::size_t C, bool Pairs = false>
void check_int8_pv() {
    constexpr std::size_t RB = 16 / C;
    for (const std::size_t d : {64, 128})
        for (const std::size_t n : {1, 3, 4, 17, 64}) {
            const std::size_t vs = d + 8; // rows with a gap, as a cache's heads interleave
            std::vector<std::int8_t> v(n * vs);
            for (std::size_t i = 0; i < v.size(); ++i) v[i] = std::int8_t(int((i * 53 + 7) % 255) - 127);
            pv_fixture<C> f(
                d, n, Pairs ? attn::kernels::detail::pv_i16_steps(d, n) : attn::kernels::detail::pv_i8_steps<C>(d, n));
            if constexpr (Pairs)
                attn::kernels::detail::decode_pv_i16<D, C>(f.out, d, d, f.corr, f.s, v.data(), vs, n, f.cursor);
            else
                attn::kernels::detail::decode_pv_i8<D, C>(f.out, d, d, f.corr, f.s, v.data(), vs, n, f.cursor);
            constexpr double top = Pairs ? D::weight_top16 : D::weight_top;
            CHECK(count_request::asked == f.lines());
            for (std::size_t r = 0; r < RB; ++r) {
                double w = 0;
                for (std::size_t j = 0; j < n; ++j) w = std::max(w, double(f.weight(r, j)));
                for (std::size_t t = 0; t < d; ++t) {
                    double want = double(f.before[r * d + t]) * f.corr[r * C], mag = std::abs(want), ints = 0;
                    for (std::size_t j = 0; j < n; ++j) {
                        want += double(f.weight(r, j)) * v[j * vs + t];
                        mag += double(f.weight(r, j)) * std::abs(v[j * vs + t]);
                        ints += std::abs(v[j * vs + t]);
                    }
                    INFO("C " << C << " head " << r << " d " << d << " n " << n << " dim " << t);
                    // the fixed point's half step a weight, and fp32's roundings of the sums
                    CHECK(std::abs(f.out[r * d + t] - want) <= 0.51 * w / top * ints + 1e-6 * mag);
                }
            }
        }
}

/// decode_pv_bf16<D, C> for RB = 16 / C heads sharing the values, laid out as check_int8_pv's. The
/// values are small integers (exact in bf16, their products with a bf16 weight exact in fp32), so
/// the output is fp64's sum of the weights rounded to bf16 by attn::bf16 (nearest even) up to
/// fp32's roundings of the sums, and fp64's sum of the unrounded weights up to bf16's unit
/// roundoff on each weight (the charge the variant declares: half_roundings::weights).
template <class D, std::size_t C>
void check_bf16_pv() {
    constexpr std::size_t RB = 16 / C;
    for (const std::size_t d : {64, 128})
        for (const std::size_t n : {1, 3, 4, 17, 64}) {
            const std::size_t vs = d + 8; // rows with a gap, as a cache's heads interleave
            std::vector<attn::bf16> v(n * vs);
            std::vector<double> vi(n * vs);
            for (std::size_t i = 0; i < v.size(); ++i) {
                vi[i] = double(int((i * 53 + 7) % 255) - 127);
                v[i] = attn::bf16(float(vi[i]));
            }
            pv_fixture<C> f(d, n, attn::kernels::detail::pv_bf16_steps<C>(d, n));
            attn::kernels::detail::decode_pv_bf16<D, C>(f.out, d, d, f.corr, f.s, v.data(), vs, n, f.cursor);
            CHECK(count_request::asked == f.lines());
            const double u = std::ldexp(1.0, -8); // bf16's unit roundoff
            for (std::size_t r = 0; r < RB; ++r)
                for (std::size_t t = 0; t < d; ++t) {
                    const double base = double(f.before[r * d + t]) * f.corr[r * C];
                    double rounded = base, exact = base, mag = std::abs(base);
                    for (std::size_t j = 0; j < n; ++j) {
                        const double x = vi[j * vs + t];
                        rounded += double(float(attn::bf16(f.weight(r, j)))) * x;
                        exact += double(f.weight(r, j)) * x;
                        mag += double(f.weight(r, j)) * std::abs(x);
                    }
                    INFO("C " << C << " head " << r << " d " << d << " n " << n << " dim " << t);
                    CHECK(std::abs(f.out[r * d + t] - rounded) <= 1e-6 * mag);
                    CHECK(std::abs(f.out[r * d + t] - exact) <= u * mag + 1e-6 * mag);
                }
        }
}

/// `parallel` on 2 threads over an S cache, each step checked against fp64 under the bound that
/// charges its declared roundings, at input magnitudes 1, 4 and 16 (scores up to ~magnitude^2
/// sqrt(d): a peaked softmax, queries with one large element).
template <class S>
void check_charged(const std::vector<problem>& steps) {
    for (const problem& step : steps)
        for (const double magnitude : {1.0, 4.0, 16.0}) {
            attn::run_options opt;
            opt.threads = 2;
            const auto r = attn::check_decode_core<S>(attn::find_variant("parallel"), {step, false}, opt, 5, magnitude);
            INFO(step.describe() << " magnitude " << magnitude << ": err/bound " << r.same.ratio);
            CHECK(r.same.pass);
        }
}

} // namespace

TEST_CASE("int8 dots: the query's fixed point, and a score exact in integers", "[decode][kv][int8dots]") {
    if constexpr (int8_dots::available)
        check_int8_scores<int8_dots>();
    else
        SUCCEED("this build has no AVX512-VNNI: the int8 core computes in fp32");
}

TEST_CASE("int8 dots: P V in byte planes against fp64, every dim in its place", "[decode][kv][int8dots]") {
    if constexpr (int8_dots::available) {
        check_int8_pv<int8_dots, 16>();
        check_int8_pv<int8_dots, 8>();
        check_int8_pv<int8_dots, 4>();
        check_int8_pv<int8_dots, 2, true>(); // 8 heads: two keys of a head to a dword (decode_pv_i16)
        check_int8_pv<int8_dots, 4, true>();
        check_int8_pv<int8_dots, 8, true>();
    } else {
        SUCCEED("this build has no AVX512-VNNI: the int8 core computes in fp32");
    }
}

TEST_CASE("the fixed point's charges, by hand", "[decode][kv][int8dots]") {
    // one head, two keys, d 2: the queries' charge scale 0.51 max|q| / top max_j sum|k_j| into
    // expm1(2 x that) (P|V|); the weights' 0.51 max_j P_j s_j / top (1 + 2^-10) sum_j |v_j| / s_j
    attn::problem p = attn::mha(2, 1, 2);
    p.n_q = 1;
    attn::check::inputs in;
    in.q = {1.0f, -4.0f};
    in.k = {1.0f, 2.0f, 3.0f, -1.0f};
    in.v = {2.0f, 0.5f, -3.0f, 1.0f};
    attn::check::expectation e;
    e.ref.assign(2, 0.0);
    const std::vector<double> pv = {1.0, 2.0};
    attn::check::charge_fixed_queries(e, p, in, pv, 100);
    const double delta = p.softmax_scale() * (1 + 0x1.0p-24) * 0.51 * 4.0 / 100 * 4.0; // max|q| 4, max sum|k| 4
    CHECK(e.store[0] == Approx(std::expm1(2 * delta) * 1.0).epsilon(1e-12));
    CHECK(e.store[1] == Approx(std::expm1(2 * delta) * 2.0).epsilon(1e-12));
    // weights: q . k_j = 1*1 - 4*2 = -7 and 1*3 + 4 = 7, scale 1/sqrt(2): P = (1, e^{14/sqrt 2}) / sum
    attn::check::expectation f;
    f.ref.assign(2, 0.0);
    const std::vector<float> scales = {0.5f, 0.25f};
    attn::check::charge_fixed_weights(f, p, in, scales, 100);
    const double x = 14.0 / std::sqrt(2.0), p1 = 1.0 / (1.0 + std::exp(-x)), p0 = 1.0 - p1;
    const double w = std::max(p0 * 0.5, p1 * 0.25);
    CHECK(f.store[0] == Approx(0.51 * w * (1 + 0x1.0p-10) / 100 * (2.0 / 0.5 + 3.0 / 0.25)).epsilon(1e-9));
    CHECK(f.store[1] == Approx(0.51 * w * (1 + 0x1.0p-10) / 100 * (0.5 / 0.5 + 1.0 / 0.25)).epsilon(1e-9));
    CHECK_THROWS_WITH(attn::check::charge_fixed_weights(f, p, in, std::vector<float>{0.5f}, 100),
                      Catch::Contains("1 given, 2 rows"));
}

TEST_CASE("an int8 cache in integer products: which shapes, and the charged check at large magnitudes",
          "[decode][kv][int8dots]") {
    using dots = int8_dots;
    const problem mha64 = attn::decode_problem(attn::mha(256, 4, 1), 1000),
                  gqa64 = attn::decode_problem(attn::gqa(512, 8, 2, 1), 1000),
                  mha16 = attn::decode_problem(attn::mha(64, 4, 1), 1000),
                  gqa8 = attn::decode_problem(attn::gqa(1024, 16, 2, 1), 1000);
    const auto fp = attn::kernels::decode_int8_fixed_point(mha64);
    if constexpr (dots::available) {
        CHECK(fp.query_top == 32767); // min(32767, 2^31 / (128 x 64))
        CHECK(fp.weight_top == 65535);
    } else {
        CHECK(fp.query_top == 0);
    }
    // 4 heads a key/value head: scores and P V in integers (byte planes); 8 (C = 2: GQA 2 and MQA
    // at 16 heads): scores, and P V on pairs of keys (16-bit weights); d_head 16: fp32
    // (one block of 2 to 8 heads: scores on byte quads, whose fixed point tops at 32512; MQA at
    // 16 heads, two blocks, and MHA on 16-bit products)
    CHECK(attn::kernels::decode_int8_fixed_point(gqa64).query_top == (dots::available ? 32512 : 0));
    CHECK(attn::kernels::decode_int8_quad_scores(gqa64) == dots::available);
    CHECK(attn::kernels::decode_int8_quad_scores(gqa8) == dots::available);
    CHECK_FALSE(attn::kernels::decode_int8_quad_scores(attn::decode_problem(attn::mqa(1024, 16, 1), 1000)));
    CHECK(attn::kernels::decode_int8_fixed_point(attn::decode_problem(attn::mqa(1024, 16, 1), 1000)).query_top ==
          (dots::available ? 32767 : 0));
    CHECK_FALSE(attn::kernels::decode_int8_quad_scores(mha64));
    CHECK(attn::kernels::decode_int8_fixed_point(gqa64).weight_top == (dots::available ? 65535 : 0));
    CHECK(attn::kernels::decode_int8_fixed_point(gqa8).query_top == (dots::available ? 32512 : 0));
    CHECK(attn::kernels::decode_int8_fixed_point(gqa8).weight_top == (dots::available ? 32767 : 0));
    CHECK(attn::kernels::decode_int8_fixed_point(attn::decode_problem(attn::mqa(1024, 16, 1), 1000)).weight_top ==
          (dots::available ? 32767 : 0));
    CHECK(attn::kernels::decode_int8_fixed_point(mha16).query_top == 0);
    CHECK(attn::kernels::decode_int8_fixed_point(mha16).weight_top == 0);
    // scores up to ~magnitude^2 sqrt(d): a peaked softmax and queries with one large element
    // (MHA, 2, 4, 8 and 16 heads a key/value head: scores and P V in integers)
    check_charged<std::int8_t>({mha64, gqa64, gqa8, attn::decode_problem(attn::gqa(1024, 16, 8, 1), 1000),
                                attn::decode_problem(attn::mqa(1024, 16, 1), 1000)});
}

TEST_CASE("bf16 dots: a score's lanes are the exact dot products of query and key pairs", "[decode][kv][bf16dots]") {
    using D = attn::kernels::isa::bf16_dots<attn::bf16>;
    if constexpr (!D::available) {
        SUCCEED("this build has no AVX-512: a bf16 cache's scores are fp32 FMAs on widened keys");
    } else if (!attn::kernels::isa::cpu_has_avx512_bf16()) {
        WARN("this CPU has no AVX512_BF16: bf16_dots not run");
    } else {
        // small integers: exact in bf16, their products and sums exact in fp32, so each lane must
        // equal the integer sum by hand; C pairs of each key broadcast, so lane r*C + c holds head
        // r's products of pair chunks t = c, c + C, ... against key k
        constexpr std::size_t C = 4, K = 3, d = 32, nch2 = d / (2 * C);
        alignas(64) std::int32_t qa[nch2 * attn::kernels::lanes];
        std::vector<attn::bf16> keys(K * d);
        std::vector<int> qi(attn::kernels::lanes / C * d), ki(K * d);
        for (std::size_t x = 0; x < qi.size(); ++x) qi[x] = int(x * 7 % 11) - 5;
        for (std::size_t x = 0; x < ki.size(); ++x) {
            ki[x] = int(x * 5 % 13) - 6;
            keys[x] = attn::bf16(float(ki[x]));
        }
        for (std::size_t t = 0; t < nch2; ++t)
            for (std::size_t r = 0; r < attn::kernels::lanes / C; ++r)
                for (std::size_t c = 0; c < C; ++c) {
                    const std::size_t i = t * C + c;
                    auto bits = [&](std::size_t dim) {
                        return std::uint32_t(std::bit_cast<std::uint16_t>(attn::bf16(float(qi[r * d + dim]))));
                    };
                    qa[t * attn::kernels::lanes + r * C + c] = std::int32_t(bits(2 * i) | bits(2 * i + 1) << 16);
                }
        const attn::bf16* kw[K] = {keys.data(), keys.data() + d, keys.data() + 2 * d};
        attn::kernels::batch acc[1][K];
        attn::kernels::detail::score_heads_pairs<D, 1, K, C>(qa, 0, kw, nch2, acc);
        for (std::size_t k = 0; k < K; ++k) {
            alignas(64) float lane[attn::kernels::lanes];
            acc[0][k].store_aligned(lane);
            for (std::size_t r = 0; r < attn::kernels::lanes / C; ++r)
                for (std::size_t c = 0; c < C; ++c) {
                    int want = 0;
                    for (std::size_t t = 0; t < nch2; ++t)
                        for (std::size_t e = 0; e < 2; ++e) {
                            const std::size_t dim = 2 * (t * C + c) + e;
                            want += qi[r * d + dim] * ki[k * d + dim];
                        }
                    INFO("key " << k << " head " << r << " lane " << c);
                    CHECK(lane[r * C + c] == float(want));
                }
        }
    }
}

TEST_CASE("bf16 dots: P V on pairs of keys equals fp64 on the weights rounded to bf16", "[decode][kv][bf16dots]") {
    using D = attn::kernels::isa::bf16_dots<attn::bf16>;
    if constexpr (!D::available) {
        SUCCEED("this build has no AVX-512: a bf16 cache's P V is fp32 FMAs on widened values");
    } else if (!attn::kernels::isa::cpu_has_avx512_bf16()) {
        WARN("this CPU has no AVX512_BF16: decode_pv_bf16 not run");
    } else {
        check_bf16_pv<D, 2>();  // 8 heads: passes of 32 dims
        check_bf16_pv<D, 4>();  // 4 heads: passes of 64 dims
        check_bf16_pv<D, 8>();  // 2 heads
        check_bf16_pv<D, 16>(); // 1 head (the kernel serves it; decode_item does not ask)
    }
}

TEST_CASE("a bf16 cache on bf16 dot products: which shapes, and the charged check at large magnitudes",
          "[decode][kv][bf16dots]") {
    // 2 to 8 query heads' dims in the lanes (GQA 8, 4, 2 and MQA at H 16 on AVX-512) with whole pair
    // chunks take vdpbf16ps where it outruns the FMA here (isa::decode_bf16_dots_here); MHA (one
    // head in the lanes) and a d_head of odd pair chunks stay fp32. The variant declares the
    // rounded queries exactly there.
    const bool here =
        attn::kernels::isa::bf16_dots<attn::bf16>::available && attn::kernels::isa::decode_bf16_dots_here();
    const attn::variant simd = attn::find_variant("simd");
    auto declared = [&](const problem& q) { return simd.roundings(q, attn::mode::decode, attn::dtype::bf16).queries; };
    auto weights = [&](const problem& q) { return simd.roundings(q, attn::mode::decode, attn::dtype::bf16).weights; };
    const std::vector<problem> dots = {
        attn::decode_problem(attn::gqa(1024, 16, 8, 1), 1000), attn::decode_problem(attn::gqa(1024, 16, 4, 1), 1000),
        attn::decode_problem(attn::gqa(1024, 16, 2, 1), 1000), attn::decode_problem(attn::mqa(1024, 16, 1), 1000)};
    for (const problem& q : dots) {
        INFO(q.describe());
        CHECK(attn::kernels::decode_bf16_dot_scores(q) == (here && attn::kernels::lanes == 16));
        CHECK(declared(q) == attn::kernels::decode_bf16_dot_scores(q));
        // P V too where the scores take them (d_v 64: whole 64-dim groups), the weights declared
        CHECK(attn::kernels::decode_bf16_dot_values(q) == attn::kernels::decode_bf16_dot_scores(q));
        CHECK(weights(q) == attn::kernels::decode_bf16_dot_values(q));
    }
    // d_head 32: the scores' pair chunks whole (C 2), the values not 64-dim groups: P V in fp32
    const problem narrow = attn::decode_problem(attn::gqa(512, 16, 2, 1), 1000);
    CHECK(attn::kernels::decode_bf16_dot_scores(narrow) == (here && attn::kernels::lanes == 16));
    CHECK_FALSE(attn::kernels::decode_bf16_dot_values(narrow));
    CHECK_FALSE(weights(narrow));
    const problem mha = attn::decode_problem(attn::mha(1024, 16, 1), 1000),
                  odd = attn::decode_problem(attn::gqa(80, 4, 1, 1), 1000); // d_head 20: C 4, chunks of 8
    CHECK_FALSE(attn::kernels::decode_bf16_dot_scores(mha));
    CHECK_FALSE(attn::kernels::decode_bf16_dot_scores(odd));
    CHECK_FALSE(declared(mha));
    check_charged<attn::bf16>(dots);
    check_charged<attn::bf16>({narrow});
}

namespace {

/// `simd` with its kv core for S replaced by `core` (the real one, given a changed problem or views).
template <class S>
attn::variant
kv_mutant(std::function<void(const attn::kv_kernels::core_fn<S>&, const problem&, const attn::kv_core_io<S>&)> core) {
    attn::variant v = attn::find_variant("simd");
    const auto real = v.kv.get<S>();
    auto wrapped = [real, core](const problem& p, const attn::kv_core_io<S>& io, const attn::run_options&) {
        core(real, p, io);
    };
    if constexpr (std::is_same_v<S, attn::bf16>)
        v.kv.bf16 = wrapped;
    else
        v.kv.int8 = wrapped;
    return v;
}

template <class View>
View head_of(View view, std::size_t head) {
    view.data = view.data + head * view.head_stride;
    view.heads = 1;
    return view;
}

} // namespace

TEMPLATE_TEST_CASE("the checker rejects wrong decode cores over a bf16 and an int8 cache", "[decode][kv][mutants]",
                   attn::bf16, std::int8_t) {
    using S = TestType;
    using core_fn = attn::kv_kernels::core_fn<S>;
    problem p = attn::gqa(64, 4, 2, 1);
    p.batch = 2;
    // A bf16 cache's scores on vdpbf16ps (a CPU with AVX512_BF16) take the queries rounded to bf16,
    // each element off by up to 2^-8 of itself, which the checker charges in the worst case: every
    // weight off by a factor within exp(2^-7 scale max_j sum_t |q_t||k_jt|). Here (d_head 16, inputs
    // up to 3) that reaches a few % of each weight, and a scale 1 % or 4 % off stays inside it in
    // core mode (err/bound 0.15 and 0.56 on Zen 5): the mutant is 12 % off there.
    const bool rounded_queries = attn::find_variant("simd")
                                     .roundings(attn::decode_problem(p, 40), attn::mode::decode, attn::kv_dtype_of<S>)
                                     .queries;
    const double off = rounded_queries ? 0.12 : 0.01;
    const std::vector<std::pair<std::string, attn::variant>> mutants{
        {rounded_queries ? "scale 12% off" : "scale 1% off",
         kv_mutant<S>([off](const core_fn& real, const problem& p, const attn::kv_core_io<S>& io) {
             problem q = p;
             q.scale = (1.0 - off) * p.softmax_scale();
             real(q, io, {});
         })},
        {"kv head h % G instead of h*G/H",
         kv_mutant<S>([](const core_fn& real, const problem& p, const attn::kv_core_io<S>& io) {
             for (std::size_t h = 0; h < p.heads; ++h) {
                 problem one = p;
                 one.heads = one.kv_heads = 1;
                 one.d_head = p.qk_dim();
                 const std::size_t g = h % p.kv_heads;
                 real(one,
                      {head_of(io.q, h),
                       {head_of(io.k.data, g), io.k.scale.data ? head_of(io.k.scale, g) : io.k.scale},
                       {head_of(io.v.data, g), io.v.scale.data ? head_of(io.v.scale, g) : io.v.scale},
                       head_of(io.out, h)},
                      {});
             }
         })},
        {"mask one key short", kv_mutant<S>([](const core_fn& real, const problem& p, const attn::kv_core_io<S>& io) {
             problem q = p;
             q.n_kv = p.n_kv > 1 ? p.n_kv - 1 : 1; // the row loses its last key: the new token's own
             real(q, io, {});
         })},
    };
    for (const auto& [name, v] : mutants) {
        INFO(name << " over a " << attn::enum_name(attn::kv_dtype_of<S>) << " cache");
        // every row of 41 steps, inputs up to 3: scores of order 1, where a 1% scale error moves the
        // weights visibly
        const auto step = attn::check_decode_kv<S>(v, p, 40, attn::decode_fill::steps, {}, 5, 3.0);
        INFO("step: err/bound " << step.same.ratio);
        CHECK_FALSE(step.same.pass);
        const auto core = attn::check_decode_core<S>(v, attn::decode_problem(p, 40), {}, 5);
        INFO("core: err/bound " << core.same.ratio);
        CHECK_FALSE(core.same.pass);
    }
    CHECK(attn::check_decode_kv<S>(attn::find_variant("simd"), p, 40, attn::decode_fill::steps, {}, 5, 3.0).same.pass);
    CHECK(attn::check_decode_core<S>(attn::find_variant("simd"), attn::decode_problem(p, 40), {}, 5).same.pass);
}

TEST_CASE("int8 cache rows: symmetric quantization by hand", "[decode][kv][cache]") {
    // one row of 4: max |x| = 1, scale 1/127; 0.5 * 127 = 63.5 rounds to the even 64,
    // 0.25 * 127 = 31.75 to 32, -1 to -127
    attn::kv_cache<std::int8_t> c(1, {1, 4, 4}, 2);
    const std::vector<float> k{0.5f, -1.0f, 0.25f, 0.0f}, v{0.0f, 0.0f, 0.0f, 0.0f};
    c.append(k.data(), v.data());
    const float s = float(1.0 / 127.0);
    CHECK(*c.key_rows().scale.row(0, 0, 0) == s);
    const std::int8_t want[] = {64, -127, 32, 0};
    for (std::size_t t = 0; t < 4; ++t) {
        CHECK(c.keys().row(0, 0, 0)[t] == want[t]);
        CHECK(c.key_at(0, 0, 0, t) == float(want[t]) * s);
        CHECK(c.value_at(0, 0, 0, t) == 0.0f); // a row of zeros: scale 0, values 0
    }
    CHECK(*c.value_rows().scale.row(0, 0, 0) == 0.0f);
    // any row: every element within half a step (scale / 2) of its value, the largest exact
    attn::rng r(5);
    std::vector<float> x(64), zero(64, 0.0f);
    for (int row = 0; row < 200; ++row) {
        const double mag = std::pow(10.0, r.uniform(-6, 6));
        for (auto& e : x) e = float(r.uniform(-mag, mag));
        attn::kv_cache<std::int8_t> one(1, {1, 64, 64}, 1);
        one.append(x.data(), zero.data());
        double amax = 0;
        for (float e : x) amax = std::max(amax, std::abs(double(e)));
        const double scale = amax / 127.0;
        for (std::size_t t = 0; t < 64; ++t) {
            INFO("row " << row << " x " << x[t] << " stored " << one.key_at(0, 0, 0, t));
            CHECK(std::abs(double(one.key_at(0, 0, 0, t)) - double(x[t])) <= 0.5 * scale * (1 + 1e-6));
        }
    }
}

TEST_CASE("bf16 and f16 cache rows: round to nearest even", "[decode][kv][cache]") {
    // bf16 keeps 8 significant bits: near 1 its step is 2^-7. 1 + 2^-8 is a tie -> 1 (even);
    // 1 + 3 * 2^-8 is a tie -> 1 + 2^-6 (even); 1 + 2^-8 + 2^-20 is above the tie -> 1 + 2^-7.
    const std::vector<float> in{
        1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f, 1.0f + 0x1p-8f + 0x1p-20f, -3.0f, 0x1p-133f, 65504.0f, 1e30f, 0.0f};
    const std::vector<float> want_bf16{1.0f, 1.0f + 0x1p-6f, 1.0f + 0x1p-7f, -3.0f, 0x1p-133f, 65536.0f, 0.0f, 0.0f};
    attn::kv_cache<attn::bf16> b(1, {1, in.size(), in.size()}, 1);
    b.append(in.data(), in.data());
    for (std::size_t t = 0; t < in.size(); ++t) {
        INFO("x " << in[t]);
        if (t == 6) // 1e30 = 0x7149f2ca: its bf16 neighbours are 0x7149 and 0x714a, 0xf2ca above the tie
            CHECK(b.key_at(0, 0, 0, t) == std::bit_cast<float>(std::uint32_t(0x714a0000)));
        else
            CHECK(b.key_at(0, 0, 0, t) == want_bf16[t]);
    }
    // f16: 11 significant bits, step 2^-10 near 1; 65504 is its largest finite value
    const std::vector<float> h_in{1.0f + 0x1p-11f, 1.0f + 3 * 0x1p-11f, 65504.0f, -0.5f};
    const std::vector<float> want_f16{1.0f, 1.0f + 0x1p-9f, 65504.0f, -0.5f};
    attn::kv_cache<attn::f16> h(1, {1, h_in.size(), h_in.size()}, 1);
    h.append(h_in.data(), h_in.data());
    for (std::size_t t = 0; t < h_in.size(); ++t) CHECK(h.key_at(0, 0, 0, t) == want_f16[t]);
}

TEST_CASE("narrow cache: bytes per token, per step, intensity (closed forms)", "[decode][kv][count]") {
    using attn::kv_dtype;
    problem mha = attn::mha(1024, 16, 1), mqa = attn::mqa(1024, 16, 1); // d_head 64
    // 2 G d_head e (+ 2 G x 4 bytes of int8 scales)
    CHECK(attn::kv_cache_bytes_per_token(mha, kv_dtype::f32) == 2 * 16 * 64 * 4);
    CHECK(attn::kv_cache_bytes_per_token(mha, kv_dtype::bf16) == 2 * 16 * 64 * 2);
    CHECK(attn::kv_cache_bytes_per_token(mha, kv_dtype::f16) == 2 * 16 * 64 * 2);
    CHECK(attn::kv_cache_bytes_per_token(mha, kv_dtype::int8) == 2 * 16 * (64 + 4));
    CHECK(attn::kv_cache_bytes_per_token(mqa, kv_dtype::f32) == 512);
    CHECK(attn::kv_cache_bytes_per_token(mqa, kv_dtype::int8) == 136);
    mha.batch = 8;
    const auto c = attn::decode_cost(mha, 16383, kv_dtype::int8);
    CHECK(c.kv_read_bytes == 8ull * 16384 * 2176);
    CHECK(c.kv_write_bytes == 8ull * 2176);
    CHECK(c.weight_bytes == 4ull * 1024 * 1024 * 4); // weights stay fp32
    CHECK(attn::decode_cost(mha, 16383, kv_dtype::f32).kv_read_bytes == attn::decode_cost(mha, 16383, 4).kv_read_bytes);
    // attention FLOPs per cache byte: 4 H d_head / bytes per token
    CHECK(attn::decode_intensity(mha, kv_dtype::f32) == Approx(0.5));
    CHECK(attn::decode_intensity(mha, kv_dtype::bf16) == Approx(1.0));
    CHECK(attn::decode_intensity(mha, kv_dtype::int8) == Approx(4096.0 / 2176.0));
    CHECK(attn::decode_intensity(mqa, kv_dtype::int8) == Approx(4096.0 / 136.0));
    // a cache object holds what the formula says: int8 rows and one fp32 scale per row
    attn::kv_cache<std::int8_t> q(2, {3, 4, 4}, 5);
    CHECK(q.bytes() == 2 * (2 * 3 * 5 * 4 * 1 + 2 * 3 * 5 * 4));
    attn::kv_cache<attn::bf16> b(2, {3, 4, 4}, 5);
    CHECK(b.bytes() == 2 * 2 * 3 * 5 * 4 * 2);
}

TEMPLATE_TEST_CASE("a narrow cache: identical bytes on 1 and 2 threads", "[decode][kv][parallel]", attn::bf16,
                   attn::f16, std::int8_t) {
    problem p = attn::gqa(256, 8, 2, 1);
    p.batch = 2;
    const problem step = attn::decode_problem(p, 700);
    const auto in = attn::check::make_inputs(step, attn::mode::core, 4);
    attn::kv_cache<TestType> cache(step, step.n_kv);
    const std::size_t kw = p.k_width();
    std::vector<float> kt(2 * kw), vt(2 * kw);
    for (std::size_t i = 0; i < step.n_kv; ++i) {
        for (std::size_t b = 0; b < 2; ++b) {
            std::copy_n(in.k.data() + (b * step.n_kv + i) * kw, kw, kt.data() + b * kw);
            std::copy_n(in.v.data() + (b * step.n_kv + i) * kw, kw, vt.data() + b * kw);
        }
        cache.append(kt.data(), vt.data());
    }
    std::vector<std::vector<float>> outs;
    for (int threads : {1, 2}) {
        attn::run_options opt;
        opt.threads = threads;
        std::vector<float> out(2 * p.q_width());
        attn::attend(attn::find_variant("parallel"), step,
                     attn::interleaved_heads<const float>(in.q.data(), step.batch, 1, step.heads, step.qk_dim()), cache,
                     out.data(), opt);
        outs.push_back(out);
    }
    CHECK(std::memcmp(outs[0].data(), outs[1].data(), outs[0].size() * sizeof(float)) == 0);
}

TEST_CASE("a cache type a variant cannot read is one clear error", "[decode][kv][errors]") {
    problem p = attn::gqa(64, 4, 2, 1);
    CHECK_THROWS_WITH(
        (attn::check_decode_kv<std::int8_t>(attn::find_variant("naive"), p, 3, attn::decode_fill::prefill, {}, 1)),
        "variant 'naive' cannot read a key/value cache of type int8 (it has no kv core)");
    CHECK_THROWS_WITH(attn::to_kv_dtype(attn::dtype::f64),
                      "'f64' is not a key/value cache type (f32, bf16, f16, int8)");
}
