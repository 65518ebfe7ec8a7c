// Local attention (a sliding window W on the causal mask): the mask's rows, pairs and counts
// worked by hand or summed row by row; the reference against a dense mask written here from the
// convention (query p sees keys p-W+1 .. p); every variant and the rolling-buffer decode against
// the fp64 reference; wrong windows rejected; a window that hides nothing equal to causal.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <vector>
#include <catch2/catch.hpp>
import attn.families;
import attn.variants;
import attn.decode;
import attn.check;
import attn.count;
import attn.reference;
import attn.sweep;

using attn::mode;
using attn::problem;

namespace {

problem windowed(std::size_t n_q, std::size_t n_kv, std::size_t w) {
    problem p = attn::gqa(32, 4, 2, n_q);
    p.n_kv = n_kv;
    p.causal = true;
    p.window = w;
    return p;
}

} // namespace

TEST_CASE("a window's keys, by hand: the query at p sees p-W+1 .. p", "[window][problem]") {
    problem p = windowed(6, 6, 3);
    CHECK(p.keys_begin(0) == 0); // row 0 sees key 0
    CHECK(p.keys_end(0) == 1);
    CHECK(p.keys_begin(4) == 2); // row 4 sees keys 2, 3, 4
    CHECK(p.keys_end(4) == 5);
    CHECK(p.visible(4) == 3);
    CHECK(p.visible_pairs() == 1 + 2 + 3 + 3 + 3 + 3);
    p.n_q = 2; // the last 2 of 6 positions (bottom-right): rows at positions 4 and 5
    CHECK(p.keys_begin(0) == 2);
    CHECK(p.keys_begin(1) == 3);
    CHECK(p.visible_pairs() == 6);
    // N 4096, W 512: 512 * 513 / 2 + (4096 - 512) * 512 = 131,328 + 1,835,008
    CHECK(windowed(4096, 4096, 512).visible_pairs() == 1966336);
}

TEST_CASE("the closed form of a window's visible pairs equals the sum over rows", "[window][problem]") {
    for (std::size_t w = 1; w <= 12; ++w)
        for (std::size_t n_q = 1; n_q <= 30; ++n_q)
            for (std::size_t n_kv = 1; n_kv <= 30; ++n_kv) {
                const problem p = windowed(n_q, n_kv, w);
                std::size_t pairs = 0;
                for (std::size_t i = 0; i < n_q; ++i) {
                    // from the convention: the last visible key e = i + n_kv - n_q, and W keys ending there
                    const long long e = (long long)i + (long long)n_kv - (long long)n_q;
                    for (long long j = 0; j < (long long)n_kv; ++j) pairs += j <= e && j > e - (long long)w;
                }
                INFO("W " << w << " n_q " << n_q << " n_kv " << n_kv);
                CHECK(p.visible_pairs() == pairs);
            }
}

TEST_CASE("the reference's window equals a dense mask written from the convention", "[window][reference]") {
    for (std::size_t w : {1, 3, 8}) {
        for (std::size_t n_q : {5, 11}) {
            const problem p = windowed(n_q, 11, w);
            const auto in = attn::check::make_inputs(p, mode::core, 5);
            std::vector<double> q(in.q.begin(), in.q.end()), k(in.k.begin(), in.k.end()), v(in.v.begin(), in.v.end());
            std::vector<double> out(p.n_q * p.o_width());
            const std::size_t d = p.qk_dim(), H = p.heads, G = p.kv_heads;
            attn::reference::core<double>(p, {attn::interleaved_heads<const double>(q.data(), 1, p.n_q, H, d),
                                              attn::interleaved_heads<const double>(k.data(), 1, p.n_kv, G, d),
                                              attn::interleaved_heads<const double>(v.data(), 1, p.n_kv, G, d),
                                              attn::interleaved_heads<double>(out.data(), 1, p.n_q, H, d)});
            // dense: every score, -inf where the mask hides the key, softmax over the whole row
            for (std::size_t h = 0; h < H; ++h) {
                const std::size_t g = h * G / H;
                for (std::size_t i = 0; i < p.n_q; ++i) {
                    const long long e = (long long)i + (long long)p.n_kv - (long long)p.n_q;
                    std::vector<double> s(p.n_kv);
                    double mx = -std::numeric_limits<double>::infinity();
                    for (std::size_t j = 0; j < p.n_kv; ++j) {
                        const bool seen = (long long)j <= e && (long long)j > e - (long long)w;
                        double dot = 0;
                        for (std::size_t t = 0; t < d; ++t) dot += q[i * H * d + h * d + t] * k[j * G * d + g * d + t];
                        s[j] = seen ? dot / std::sqrt(double(d)) : -std::numeric_limits<double>::infinity();
                        mx = std::max(mx, s[j]);
                    }
                    double sum = 0;
                    for (auto& x : s) sum += (x = std::exp(x - mx));
                    for (std::size_t t = 0; t < d; ++t) {
                        double o = 0;
                        for (std::size_t j = 0; j < p.n_kv; ++j) o += s[j] / sum * v[j * G * d + g * d + t];
                        INFO("W " << w << " n_q " << n_q << " head " << h << " row " << i);
                        CHECK(out[i * H * d + h * d + t] == Approx(o).epsilon(1e-12).margin(1e-14));
                    }
                }
            }
        }
    }
}

TEST_CASE("every variant computes the window, core and layer, against the fp64 reference", "[window][variants]") {
    attn::run_options opt;
    opt.threads = 2;
    for (const problem& p :
         {windowed(300, 300, 64), windowed(300, 300, 1), windowed(130, 700, 129), windowed(777, 777, 500)})
        for (const auto& v : attn::registry()) {
            if (!attn::refusal(v, p, mode::core, attn::dtype::f32, attn::device::cpu).empty()) continue;
            for (mode m : {mode::core, mode::layer}) {
                INFO(v.name << " " << attn::enum_name(m) << " " << p.describe());
                const auto r = attn::check::check_case<float>(v, p, m, opt, 9);
                INFO("max_abs " << r.max_abs << " err/bound " << r.ratio);
                CHECK(r.pass);
                if (v.supports<attn::bf16>()) CHECK(attn::check::check_case<attn::bf16>(v, p, m, opt, 9).pass);
            }
        }
}

TEST_CASE("a window that hides no key gives the causal result bit for bit", "[window][variants]") {
    attn::run_options opt;
    opt.threads = 2;
    problem causal = windowed(200, 200, 0), wide_window = windowed(200, 200, 200), huge = windowed(200, 200, 1 << 20);
    const auto in = attn::check::make_inputs(causal, mode::core, 3);
    for (const auto& v : attn::registry()) {
        if (!v.serves.windows || v.serves.device != attn::device::cpu) continue;
        INFO(v.name);
        const auto base = attn::check::run<float>(v, causal, mode::core, in, opt);
        for (const problem& p : {wide_window, huge}) {
            const auto out = attn::check::run<float>(v, p, mode::core, in, opt);
            REQUIRE(out.size() == base.size());
            CHECK(std::memcmp(out.data(), base.data(), out.size() * sizeof(float)) == 0);
        }
    }
}

namespace {

// A wrong window, built on the reference: each row's keys given by `keys(p, i)` ([begin, end)).
attn::variant wrong_window(const std::string& name,
                           std::function<std::pair<std::size_t, std::size_t>(const problem&, std::size_t)> keys) {
    attn::variant v;
    v.name = name;
    v.f32.core = [keys](const problem& p, const attn::core_io<float>& io, const attn::run_options&) {
        for (std::size_t i = 0; i < p.n_q; ++i) { // one row at a time over its (wrong) keys
            const auto [b, e] = keys(p, i);
            problem one = p;
            one.n_q = 1;
            one.n_kv = e - b;
            one.causal = false;
            one.window = 0;
            attn::reference::core<float>(one, {io.q.rows_from(i, 1), io.k.rows_from(b, e - b), io.v.rows_from(b, e - b),
                                               io.out.rows_from(i, 1)});
        }
    };
    v.f32.linear = [](const attn::linear_io<float>& io, const attn::run_options&) {
        attn::reference::linear<float>(io);
    };
    return v;
}

} // namespace

TEST_CASE("the checker rejects a window one key short, one key long, or on the wrong side", "[window][mutants]") {
    const auto end = [](const problem& p, std::size_t i) { return p.keys_end(i); };
    const auto begin = [](const problem& p, std::size_t i) { return p.keys_begin(i); };
    const std::vector<attn::variant> mutants{
        wrong_window("window one key short",
                     [=](const problem& p, std::size_t i) {
                         return std::pair{std::min(begin(p, i) + (p.visible(i) == p.window), end(p, i) - 1), end(p, i)};
                     }),
        wrong_window("window one key long",
                     [=](const problem& p, std::size_t i) {
                         return std::pair{begin(p, i) > 0 ? begin(p, i) - 1 : 0, end(p, i)};
                     }),
        wrong_window("window's edge on the wrong side (keys p .. p+W-1)",
                     [=](const problem& p, std::size_t i) {
                         const std::size_t own = end(p, i) - 1;
                         return std::pair{own, std::min(p.n_kv, own + p.window)};
                     }),
    };
    const problem p = windowed(40, 40, 7);
    for (const auto& v : mutants) {
        INFO(v.name);
        CHECK_FALSE(attn::check::check_case<float>(v, p, mode::core, {}, 3).pass);
        CHECK_FALSE(attn::check::check_case<float>(v, p, mode::layer, {}, 3).pass);
    }
    // the mutants' harness itself is right: with the window's own keys it passes
    const auto right = wrong_window("the window's keys",
                                    [=](const problem& q, std::size_t i) { return std::pair{begin(q, i), end(q, i)}; });
    CHECK(attn::check::check_case<float>(right, p, mode::core, {}, 3).pass);
}

TEST_CASE("the rolling buffer: W slots, slot = position mod W, steps equal the full windowed forward",
          "[window][decode]") {
    problem layer = attn::gqa(32, 4, 2, 1);
    layer.causal = true; // a decode step is causal; the window needs it said
    layer.window = 5;
    attn::kv_cache<float> cache(layer, 100);
    CHECK(cache.capacity() == 5); // memory stops at W tokens
    CHECK(cache.slot(13) == 3);
    attn::run_options opt;
    opt.threads = 2;
    for (const auto& v : attn::registry()) {
        if (!v.supports<float>() || !v.serves.windows || v.serves.device != attn::device::cpu) continue;
        for (std::size_t L : {3, 4, 23}) { // history shorter than, equal to and past the window
            INFO(v.name << " L " << L);
            CHECK(attn::check_decode<float>(v, layer, L, attn::decode_fill::steps, opt, 7).pass);
            CHECK(attn::check_decode<float>(v, layer, L, attn::decode_fill::prefill, opt, 8).pass);
            if (v.supports<double>())
                CHECK(attn::check_decode<double>(v, layer, L, attn::decode_fill::steps, opt, 7).pass);
            if (v.kv.int8)
                CHECK(attn::check_decode_kv<std::int8_t>(v, layer, L, attn::decode_fill::prefill, opt, 8).same.pass);
        }
    }
    // cost: a step reads min(L + 1, W) tokens' rows
    const auto c = attn::decode_cost(layer, 1000, std::size_t(4));
    CHECK(c.kv_read_bytes == 5 * 2 * (8 + 8) * 4); // W 5 tokens x G 2 x (d_k 8 + d_v 8) x 4 B
}

TEST_CASE("a windowed prefill's FLOPs: analytic equals counted", "[window][count]") {
    for (std::size_t w : {1, 4, 9})
        for (std::size_t n_q : {3, 12})
            for (std::size_t n_kv : {5, 12}) {
                problem p = windowed(n_q, n_kv, w);
                p.bias = w == 4;
                INFO(p.describe());
                const auto analytic = attn::analytic_flops(p).full;
                const auto measured = attn::measured_flops(p, 3);
                for (std::size_t s = 0; s < attn::n_stages; ++s)
                    for (std::size_t o = 0; o < attn::n_ops; ++o) CHECK(analytic.n[s][o] == measured.n[s][o]);
            }
}

TEST_CASE("the crossover under a window: the closed form, the search, and none", "[window][count]") {
    // MHA d 512, no bias, matmul-only, causal: attention 2 H P (d_qk + d_v) = 4 d P (P pairs per
    // head x H heads of d/H), projections 8 N d^2. Without a window N* = 2 (2 d) - 1 = 2047.
    problem p = attn::mha(512, 8, 1);
    p.causal = true;
    CHECK(attn::attention_crossover(p, attn::convention::matmul).closed_form == Approx(2047.0));
    // W 4096 > 2047: the window is not reached before the crossover
    p.window = 4096;
    CHECK(attn::attention_crossover(p, attn::convention::matmul).closed_form == Approx(2047.0));
    // W 1024: past N = W each token adds 4 d W = 2,097,152 FLOPs of attention against 8 d^2 =
    // 2,097,152 of projections: equal, so attention never overtakes
    p.window = 1024;
    CHECK(attn::attention_crossover(p, attn::convention::matmul).never());
    // W 1536: N (a2 W - C/H) = a2 W (W - 1) / 2 with a2 = 2 (64 + 64) = 256, C/H = 8 d^2 / 8 =
    // 262,144: N* = 256 x 1536 x 1535 / 2 / (393,216 - 262,144) = 301,793,280 / 131,072 = 2302.5
    p.window = 1536;
    const auto x = attn::attention_crossover(p, attn::convention::matmul);
    CHECK(x.closed_form == Approx(301793280.0 / 131072.0));
    CHECK(x.first_n == 2303);
}

TEST_CASE("a sweep that crosses a window with causal = false is refused, naming the line", "[window][sweep]") {
    const std::string toml = "[[perf.grid]]\nmodes = [\"core\"]\ncausal = [false, true]\nwindow = [0, 256]\n";
    try {
        attn::parse_sweep(toml, "w.toml", {});
        FAIL("expected an error");
    } catch (const attn::error& e) {
        CHECK(std::string(e.what()).find("w.toml:4: key 'window'") == 0);
        CHECK(std::string(e.what()).find("a window > 0 needs the causal mask") != std::string::npos);
    }
    const auto ok =
        attn::parse_sweep("[[perf.grid]]\nmodes = [\"core\"]\ncausal = true\nwindow = [0, 256]\n", "w.toml", {});
    REQUIRE(ok.grids.size() == 1);
    CHECK(ok.grids[0].window == std::vector<std::size_t>{0, 256});
}
