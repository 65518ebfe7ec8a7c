// Decoding with a key/value cache: every step's output is the matching row of the full causal
// forward (fp64 reference), for every family and every variant, under attn.check's tolerance
// policy; the cache's layout and errors; the decode core's thread-count independence; the
// analytic per-token costs (caches narrower than fp32: test_decode_kv.cpp). Timings are measured
// by attnbench-bench's decode mode, never asserted here.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <initializer_list>
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

namespace attn_test { // shared with test_decode_kv.cpp

std::string label(const attn::variant& v, const problem& p, std::size_t L, attn::decode_fill f, const char* prec) {
    return v.name + " " + prec + " " + attn::decode_fill_name(f) + " L=" + std::to_string(L) + " on " + p.describe();
}

problem family(const std::string& name) {
    if (name == "single-head") return attn::single_head(24, 1);
    if (name == "MHA") return attn::mha(48, 4, 1);
    if (name == "MQA") return attn::mqa(48, 4, 1);
    if (name == "GQA") return attn::gqa(64, 8, 2, 1);  // d_head 8
    if (name == "MQA16") return attn::mqa(272, 16, 1); // d_head 17, 16 query heads per kv head
    if (name == "GQA-lanes") // as many query heads per kv head as lanes (two blocks of lanes / 2), d_head 13
        return attn::gqa(26 * attn::kernels::lanes, 2 * attn::kernels::lanes, 2, 1);
    return attn::wide(16, 2, 1);
}

} // namespace attn_test

using attn_test::family;
using attn_test::label;

TEST_CASE("decode steps equal the rows of the full causal forward", "[decode]") {
    const std::string fam = GENERATE("single-head", "MHA", "MQA", "MQA16", "GQA", "GQA-lanes", "wide");
    const std::size_t L = GENERATE(0, 1, 17, 130);
    const std::size_t batch = GENERATE(1, 3);
    problem p = family(fam);
    p.batch = batch;
    p.bias = L % 2 == 1;
    attn::run_options opt;
    opt.threads = 2;
    for (const auto& v : attn::registry()) {
        if (v.supports<float>()) {
            INFO(label(v, p, L, attn::decode_fill::steps, "f32"));
            const auto r = attn::check_decode<float>(v, p, L, attn::decode_fill::steps, opt, 7);
            INFO("max_abs " << r.max_abs << ", err/bound " << r.ratio);
            CHECK(r.pass);
        }
        if (v.supports<double>()) {
            INFO(label(v, p, L, attn::decode_fill::steps, "f64"));
            CHECK(attn::check_decode<double>(v, p, L, attn::decode_fill::steps, opt, 7).pass);
        }
    }
}

TEST_CASE("a step after prefill equals the last row, across the key split", "[decode]") {
    // 257 keys: two chunks in the decode core; 4099: the maximum of 16.
    const std::size_t L = GENERATE(256, 1023, 4098);
    problem p = attn::gqa(64, 4, 2, 1);
    p.batch = 2;
    attn::run_options opt;
    opt.threads = 2;
    for (const auto& v : attn::registry()) {
        if (!v.supports<float>()) continue;
        INFO(label(v, p, L, attn::decode_fill::prefill, "f32"));
        const auto r = attn::check_decode<float>(v, p, L, attn::decode_fill::prefill, opt, 11);
        INFO("max_abs " << r.max_abs << ", err/bound " << r.ratio);
        CHECK(r.pass);
    }
}

TEST_CASE("the decode grid of attnbench check passes", "[decode][check]") {
    attn::run_options opt;
    opt.threads = 2;
    for (const auto& c : attn::decode_grid()) {
        for (const char* name : {"simd", "parallel"}) {
            const auto& v = attn::find_variant(name);
            INFO(label(v, c.layer, c.context, attn::decode_fill::prefill, "f32"));
            CHECK(
                attn::check_decode<float>(v, c.layer, c.context, attn::decode_fill::prefill, opt, 3, c.magnitude).pass);
        }
    }
}

TEST_CASE("the checker rejects a decode step that drops the new token's key", "[decode][mutants]") {
    // A step whose core sees only the L cached keys (the appended one ignored) must fail.
    attn::variant cut = attn::find_variant("simd");
    const auto core = cut.f32.core;
    cut.f32.core = [core](const problem& p, const attn::core_io<float>& io, const attn::run_options& o) {
        problem q = p;
        q.n_kv = p.n_kv > 1 ? p.n_kv - 1 : 1;
        core(q, io, o);
    };
    problem p = attn::gqa(64, 4, 2, 1);
    CHECK_FALSE(attn::check_decode<float>(cut, p, 40, attn::decode_fill::prefill, {}, 5).pass);
    CHECK(attn::check_decode<float>(attn::find_variant("simd"), p, 40, attn::decode_fill::prefill, {}, 5).pass);
}

TEST_CASE("the decode core gives identical bytes on 1 and 2 threads", "[decode][parallel]") {
    const std::size_t L = GENERATE(5, 700, 5000);
    problem p = attn::gqa(256, 8, 2, 1);
    p.batch = 2;
    const auto& par = attn::find_variant("parallel");
    std::vector<std::vector<float>> outs;
    for (int threads : {1, 2}) {
        attn::run_options opt;
        opt.threads = threads;
        const auto in = attn::check::make_inputs(p, attn::mode::layer, 2);
        std::vector<float> prompt(p.batch * L * p.d_model);
        for (std::size_t i = 0; i < prompt.size(); ++i) prompt[i] = float((i * 2654435761u) % 1000) / 1000.0f - 0.5f;
        attn::kv_cache<float> cache(p, L + 1);
        attn::layer_buffers<float> ws;
        attn::prefill<float>(par, p, in.w, prompt.data(), L, cache, opt);
        std::vector<float> y(p.batch * p.d_model);
        attn::decode_step<float>(par, p, in.w, in.x_q.data(), cache, y.data(), opt, ws);
        outs.push_back(y);
    }
    CHECK(std::memcmp(outs[0].data(), outs[1].data(), outs[0].size() * sizeof(float)) == 0);
}

TEST_CASE("kv cache layout, growth and errors", "[decode][cache]") {
    attn::kv_cache<float> c(2, {3, 4, 4}, 5); // B 2, G 3, d 4, capacity 5
    CHECK(c.bytes() == 2 * 2 * 3 * 5 * 4 * sizeof(float));
    std::vector<float> k(2 * 3 * 4), v(k.size());
    for (int t = 0; t < 5; ++t) {
        for (std::size_t i = 0; i < k.size(); ++i) {
            k[i] = float(100 * t + int(i));
            v[i] = -k[i];
        }
        c.append(k.data(), v.data());
    }
    CHECK(c.size() == 5);
    CHECK(c.used_bytes() == c.bytes());
    // token t of sequence b, head g, element e sits in row t of (b, g), rows contiguous per head
    const auto keys = c.keys();
    CHECK(keys.rows == 5);
    CHECK(keys.row_stride == 4);
    CHECK(keys.row(1, 2, 3)[1] == float(300 + (1 * 3 + 2) * 4 + 1));
    CHECK(c.values().row(0, 1, 4)[0] == -float(400 + 4));
    CHECK(keys.row(1, 0, 0) - keys.row(0, 0, 0) == 3 * 5 * 4);
    try {
        c.append(k.data(), v.data());
        FAIL("expected an error");
    } catch (const attn::error& e) {
        CHECK(std::string(e.what()) == "kv cache is full (capacity 5 tokens)");
    }
    problem p = attn::gqa(64, 4, 2, 1);
    attn::kv_cache<float> wrong(p.batch, {4, p.qk_dim(), p.qk_dim()}, 8); // G 4 where the layer has 2
    const auto w = attn::random_weights<float>(p, 1);
    attn::layer_buffers<float> ws;
    std::vector<float> x(p.d_model), y(p.d_model);
    CHECK_THROWS_WITH(attn::decode_step<float>(attn::find_variant("simd"), p, w, x.data(), wrong, y.data(), {}, ws),
                      Catch::Contains("does not fit GQA"));
}

TEST_CASE("decode costs: KV bytes and FLOPs per token", "[decode][count]") {
    problem p = attn::gqa(1024, 16, 4, 1); // d_head 64
    p.batch = 8;
    const std::size_t L = 1000;
    const auto c = attn::decode_cost(p, L, 4);
    CHECK(c.kv_read_bytes == 2ull * 8 * 4 * 64 * 1001 * 4);
    CHECK(c.kv_write_bytes == 2ull * 8 * 4 * 64 * 4);
    CHECK(c.weight_bytes == (2ull * 1024 * 1024 + 2ull * 256 * 1024) * 4);
    CHECK(c.attention_flops == 4ull * 8 * 16 * 64 * 1001); // QK^T and PV, 2 per MAC
    CHECK(c.matmul_flops == c.attention_flops + 2ull * 8 * (2 * 1024 * 1024 + 2 * 256 * 1024));
    CHECK(c.full_flops > c.matmul_flops);
    // O(d_model) extra: the fastest variant's step needs the same extra at L = 65536 as at 2^20
    attn::run_options opt;
    opt.threads = 2;
    problem mha = attn::mha(1024, 16, 1);
    const auto& par = attn::find_variant("parallel");
    CHECK(attn::decode_extra_bytes(par, mha, 65536, opt, 4) == attn::decode_extra_bytes(par, mha, 1 << 20, opt, 4));
    CHECK(attn::decode_extra_bytes(par, mha, 65536, opt, 4) < 256 * 1024);
}

TEST_CASE("key split: a function of the key count alone, at most 16 chunks", "[decode][split]") {
    for (std::size_t n : {1, 63, 64, 256, 257, 4096, 4097, 65537, 1000000}) {
        const auto s = attn::kernels::split_keys(n);
        INFO("n_kv " << n);
        CHECK(s.chunks >= 1);
        CHECK(s.chunks <= attn::kernels::decode_max_chunks);
        CHECK(s.chunk * s.chunks >= n);
        CHECK(s.chunk * (s.chunks - 1) < n); // no empty chunk
    }
}

namespace {
std::vector<const char*> asked; // the lines paced_lines_by<record_request> asked for
struct record_request {
    void operator()(const char* line) const { asked.push_back(line); }
};
} // namespace

TEST_CASE("paced prefetch: every line asked for once, in order, k / S of them after k of S steps", "[decode][split]") {
    // Rows of 3 lines (192 bytes) packed (T = 3 x rows lines) or 256 bytes apart (T = 4 rows - 1:
    // the gaps' lines too), from a line's start or 32 bytes into one (one line more: the last
    // row ends mid-line). Hand bounds: after k steps at least floor(k T / S) lines asked for and
    // fewer than k T / S + k / 64 + 1 (the cursor's rounding up, at most a byte a step); each
    // line once, from the first row's; at the end every line, and at most (S - 1) / 64 + 1 past
    // the last
    alignas(64) static char buf[64 * 512 + 64];
    for (std::size_t offset : {0, 32})
        for (std::size_t stride : {192, 256})
            for (std::size_t rows : {0, 1, 7, 64})
                for (std::size_t steps : {1, 5, 64, 128, 200, 256, 1000}) {
                    const attn::kernels::detail::next_rows r{buf + offset, stride, 192, rows};
                    asked.clear();
                    attn::kernels::detail::paced_lines_by<record_request> p(r, steps);
                    const std::size_t total =
                        rows == 0 ? 0 : (stride == 192 ? 3 * rows : 4 * rows - 1) + (offset ? 1 : 0);
                    INFO("offset " << offset << ", stride " << stride << ", rows " << rows << ", steps " << steps);
                    for (std::size_t k = 1; k <= steps; ++k) {
                        p.step();
                        const std::size_t n = asked.size();
                        REQUIRE(n >= k * total / steps);
                        REQUIRE(double(n) < double(k * total) / double(steps) + double(k) / 64 + 1);
                    }
                    for (std::size_t i = 0; i < asked.size(); ++i) // line i is the i-th asked for
                        REQUIRE(asked[i] == buf + 64 * i);
                    CHECK(asked.size() >= total);
                    CHECK(asked.size() <= total + (steps - 1) / 64 + 1);
                    if (!total) CHECK(asked.empty());
                }
}

TEST_CASE("heads in the lanes: P V steps the value lines' cursor pv_heads_steps times", "[decode][split]") {
    using attn::kernels::lanes;
    using attn::kernels::detail::heads_blocking;
    using attn::kernels::detail::pv_heads_steps;
    // hand count: one step a pair of keys a pass, ceil(d / TB) passes a pair of blocks or a lone one
    constexpr std::size_t t2 = heads_blocking<2>::TB, t1 = heads_blocking<1>::TB;
    CHECK(pv_heads_steps(2, 64, 64) == (64 + t2 - 1) / t2 * 32);
    CHECK(pv_heads_steps(3, 512, 63) == ((512 + t2 - 1) / t2 + (512 + t1 - 1) / t1) * 31);
    // decode_pv_heads itself, with a cursor that records: over L >= T lines (a line or more a
    // step), T steps ask for exactly ceil(T delta / 64) lines, delta = ceil(64 L / T); one step
    // more or fewer asks for at least one line more or fewer
    alignas(64) static char rows[64 * 4096];
    for (std::size_t blocks : {1, 2, 3})
        for (std::size_t d : {16, 64, 100, 512})
            for (std::size_t n : {1, 63, 64}) {
                const std::size_t t = pv_heads_steps(blocks, d, n), dp = (d + lanes - 1) / lanes * lanes;
                const std::size_t l = t + 5, delta = (64 * l + t - 1) / std::max<std::size_t>(t, 1);
                INFO("blocks " << blocks << ", d " << d << ", n " << n);
                // (aligned: the accumulators, weights and rescales are loaded as whole batches)
                attn::kernels::aligned_vector<float> out(blocks * lanes * dp, 0.0f), corr(blocks * lanes, 1.0f);
                attn::kernels::aligned_vector<float> sc(blocks * n * lanes, 0.5f), v(n * d, 1.0f);
                asked.clear();
                attn::kernels::detail::paced_lines_by<record_request> cursor({rows, 64, 64, l}, t);
                attn::kernels::detail::decode_pv_heads(out.data(), lanes * dp, blocks, d, corr.data(), sc.data(),
                                                       n * lanes, v.data(), d, n, cursor);
                CHECK(asked.size() == (t ? (t * delta + 63) / 64 : 0));
                CHECK(out[0] == Approx(0.5 * double(n))); // head 0, dim 0: n weights of 0.5 times 1
            }
}

TEST_CASE("decode_pv's passes over a tile: register blocks of heads and batches", "[decode][split]") {
    using attn::kernels::lanes;
    using attn::kernels::detail::pv_blocking;
    using attn::kernels::detail::pv_passes;
    // hand count from pv_blocking: RB / RV head blocks times (whole DB blocks + batches left)
    constexpr std::size_t RB2 = lanes / 2, RV2 = pv_blocking<RB2, 4, float>::RV;
    CHECK(pv_passes<2, 4, float>(4 * lanes) == RB2 / RV2);
    CHECK(pv_passes<2, 4, float>(6 * lanes) == RB2 / RV2 * 3); // one block of 4, then 2 single batches
    CHECK(pv_passes<lanes, 4, float>(4 * lanes) == 1);         // one head (MHA): one pass
    CHECK(pv_passes<lanes, 4, float>(lanes - 1) == 0);         // no whole batch: the scalar tail only
}

namespace {

/// A softmax row's exponential, row(x, n, m) (exp_row, exp2_row), against ref (std::exp or
/// std::exp2 in double, rounded once to float) at each row maximum m over the arguments x - m in
/// x. The softmax's contract: normal results within 2 ulp; a result below the normal range within
/// FLT_MIN absolute, which is below any rounding of a row sum >= 1; exactly 0 at arguments <=
/// zero_at (and -inf: a masked column weighs nothing); exactly 1 at 0 (the row's maximum).
template <class Row, class Ref>
void check_exp_row(Row row, Ref ref_fn, const std::vector<float>& x, std::initializer_list<float> maxima,
                   float zero_at) {
    const float tiny = std::numeric_limits<float>::min();
    for (float m : maxima) {
        std::vector<float> y(x.size() + 16);
        for (std::size_t i = 0; i < x.size(); ++i) y[i] = x[i] + m;
        const std::vector<float> in = y;
        const float sum = row(y.data(), x.size(), m);
        double expected_sum = 0.0;
        int worst_ulp = 0;
        for (std::size_t i = 0; i < x.size(); ++i) {
            const float arg = in[i] - m; // the argument the kernel exponentiates
            const float ref = float(ref_fn(double(arg)));
            expected_sum += double(ref);
            INFO("x - m " << arg << " got " << y[i] << " want " << ref);
            if (ref >= tiny) {
                const float ulp = std::nextafter(ref, std::numeric_limits<float>::infinity()) - ref;
                const int u = int(std::lround(std::fabs(double(y[i]) - double(ref)) / double(ulp)));
                worst_ulp = std::max(worst_ulp, u);
                CHECK(u <= 2);
            } else {
                CHECK(std::fabs(double(y[i]) - double(ref)) <= double(tiny)); // below normal: absolute
                CHECK(y[i] >= 0.0f);
            }
            if (arg <= zero_at) CHECK(y[i] == 0.0f);
            if (arg == 0.0f) CHECK(y[i] == 1.0f);
        }
        CHECK(double(sum) == Approx(expected_sum).epsilon(1e-6));
        INFO("worst ulp " << worst_ulp);
        CHECK(worst_ulp <= 2);
    }
}

/// a sweep of [lo, 0] in steps of `step`, the given points, -inf, -FLT_MAX and one more point,
/// so that the count is odd and the last batch goes through the padded tail
std::vector<float> exp_arguments(double lo, double step, std::initializer_list<float> points) {
    std::vector<float> x;
    for (double t = lo; t <= 0.0; t += step) x.push_back(float(t));
    x.insert(x.end(), points);
    x.push_back(-std::numeric_limits<float>::infinity());
    x.push_back(-std::numeric_limits<float>::max());
    if (x.size() % 2 == 0) x.push_back(-1.0f);
    return x;
}

} // namespace

TEST_CASE("the softmax's vector exp: within 2 ulp of std::exp, exactly 0 for -inf and deep underflow, 1 at 0",
          "[decode][exp]") {
    // exp_row (the decode core's) on x - m <= 0 over the whole fp32 range that matters: normal
    // results, the subnormal ones (x in (-103.3, -87.3): the AVX-512 path keeps them to 2
    // subnormal steps, the AVX2 path flushes them to 0), and arguments whose exp is below half the
    // smallest subnormal.
    const auto x = exp_arguments(-110.0, 0.0137,
                                 {0.0f, -0.0f, -1e-30f, -1e-7f, -0.34657359f, -0.34657360f, -87.33654f, -87.33655f,
                                  -103.27893f, -103.97208f, -104.0f, -120.0f, -200.0f, -1e30f});
    check_exp_row(attn::kernels::detail::exp_row, [](double a) { return std::exp(a); }, x, {0.0f, 3.5f}, -104.0f);
}

TEST_CASE("the tiled core's base-2 exp: within 2 ulp of exp2, exactly 0 from -150 and for -inf, 1 at 0, NaN kept",
          "[tiled][exp]") {
    // exp2_row (the tiled core's: its scores carry log2 e) over [-160, 0], the reduction's edges
    // (f = +-1/2) and the normal range's (-126, -127); a NaN score stays NaN, so an overflowed score
    // reaches the non-finite check. Below the normal range (x < -126) the AVX-512 section gives the
    // subnormal 2^x and the others 0 from -126.5 -- both within FLT_MIN; from -150 (2^-150 is half
    // the smallest subnormal) both give exactly 0.
    const auto x = exp_arguments(-160.0, 0.0113,
                                 {0.0f, -0.0f, -1e-30f, -1e-7f, -0.5f, -0.49999997f, -0.50000006f, -1.5f, -125.5f,
                                  -126.0f, -126.49f, -126.51f, -127.0f, -149.0f, -149.49f, -149.51f, -150.0f, -1e30f});
    check_exp_row(
        attn::kernels::detail::exp2_row, [](double a) { return std::exp2(a); }, x, {0.0f, 3.5f, -20.25f}, -150.0f);
    std::vector<float> nan_row(24, -1.0f);
    nan_row[5] = std::numeric_limits<float>::quiet_NaN();
    attn::kernels::detail::exp2_row(nan_row.data(), 9, 0.0f);
    CHECK(std::isnan(nan_row[5]));
    CHECK(nan_row[4] == 0.5f);
}
