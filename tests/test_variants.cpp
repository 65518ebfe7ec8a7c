// Every registered variant computes the same function as the fp64 reference, under the one
// tolerance policy of attn.check; the checker itself catches plausible wrong kernels.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <vector>
#include <xsimd/xsimd.hpp>
#include <catch2/catch.hpp>
import attn.grids;
import attn.variants;
import attn.check;
import attn.identities;
import attn.reference;
import attn.kernels;

using attn::mode;
using attn::problem;

namespace {

std::string describe(const attn::variant& v, const problem& p, mode m, const char* prec) {
    return v.name + " " + prec + " " + std::string(attn::enum_name(m)) + " on " + p.describe();
}

} // namespace

TEST_CASE("every variant matches the fp64 reference on the default grid", "[variants][check]") {
    const auto grid = attn::check::default_grid();
    attn::run_options opt;
    opt.threads = 2;
    for (const auto& gc : grid) {
        for (mode m : {mode::core, mode::layer}) {
            const auto in = attn::check::make_inputs(gc.p, m, 42, gc.magnitude);
            const auto e = attn::check::expect(gc.p, m, in);
            for (const auto& v : attn::registry()) {
                if (v.supports<float>()) {
                    INFO(describe(v, gc.p, m, "f32"));
                    const auto r = attn::check::check_prepared<float>(v, gc.p, m, in, e, opt);
                    INFO("max_abs " << r.max_abs << ", err/bound " << r.ratio);
                    CHECK(r.pass);
                }
                if (v.supports<double>()) {
                    INFO(describe(v, gc.p, m, "f64"));
                    CHECK(attn::check::check_prepared<double>(v, gc.p, m, in, e, opt).pass);
                }
            }
        }
    }
}

TEST_CASE("tile tails: tile sizes that do not divide N, one-key rows", "[variants][tiles]") {
    const std::size_t n = GENERATE(1, 7, 129);
    const bool causal = GENERATE(false, true);
    problem p = attn::gqa(3 * 4, 4, 2, n); // d_head 3: narrower than any vector
    p.n_kv = n + 2;
    p.causal = causal;
    problem rows_one_key = attn::mha(34, 2, 9); // causal, n_q > n_kv: some rows see exactly one key
    rows_one_key.n_kv = 4;
    rows_one_key.causal = true;
    // the same with d_head 64, a whole number of panels (no padding columns in the output rows)
    problem rows_no_key = attn::mha(128, 2, 9);
    rows_no_key.n_kv = 4;
    rows_no_key.causal = true;
    for (const problem& q : {p, rows_one_key, rows_no_key}) {
        for (const char* name : {"blocked", "simd", "parallel"}) {
            for (std::size_t tq : {std::size_t(0), std::size_t(24)}) {
                attn::run_options opt;
                opt.threads = 2;
                opt.tile_q = tq;           // 24: a multiple of every micro-tile height used here
                opt.tile_kv = tq ? 32 : 0; // 32: a multiple of the panel width
                INFO(name << " tile_q " << tq << " on " << q.describe());
                CHECK(attn::check::check_case<float>(attn::find_variant(name), q, mode::core, opt, 5).pass);
            }
        }
    }
}

TEST_CASE("parallel gives identical bytes on 1 and 2 threads", "[variants][parallel]") {
    problem p = attn::gqa(256, 8, 2, 300);
    p.batch = 2;
    p.causal = GENERATE(false, true);
    p.bias = true;
    const auto& par = attn::find_variant("parallel");
    for (mode m : {mode::core, mode::layer}) {
        const auto in = attn::check::make_inputs(p, m, 9);
        attn::run_options one, two;
        one.threads = 1;
        two.threads = 2;
        const auto a = attn::check::run<float>(par, p, m, in, one);
        const auto b = attn::check::run<float>(par, p, m, in, two);
        REQUIRE(a.size() == b.size());
        CHECK(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
    }
}

TEST_CASE("parallel splits one head into query tiles and keeps the same bytes", "[variants][parallel]") {
    // B H = 1: on 2 threads the query tile shrinks from 384 rows to 126 (kernels::balanced_tiles;
    // 128 where mr is 8, AVX-512), on 1 thread it stays 384; the rows must come out the same and
    // match the fp64 reference.
    problem p = attn::gqa(64, 1, 1, 1000);
    p.causal = GENERATE(false, true);
    const auto& par = attn::find_variant("parallel");
    const auto in = attn::check::make_inputs(p, mode::core, 11);
    attn::run_options one, two;
    one.threads = 1;
    two.threads = 2;
    const auto a = attn::check::run<float>(par, p, mode::core, in, one);
    const auto b = attn::check::run<float>(par, p, mode::core, in, two);
    REQUIRE(a.size() == b.size());
    CHECK(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
    CHECK(attn::check::check_case<float>(par, p, mode::core, two, 11).pass);
}

TEST_CASE("keys and values packed once per kv head, in rounds: the bytes of per-tile packing", "[variants][tiles]") {
    // kernels::tiled_core packs each (sequence, kv head)'s K^T and V once, in rounds of pairs that
    // the threads share, where more than one query tile reads them; each query tile packing its
    // own key tiles (round 0) is the other path. The arithmetic is the same, so the bytes must be:
    // rounds of 1, 2, 3, 4 (the last round short: 6 = 4 + 2) and all 6 pairs, on 1 and 2 threads
    // (a team that does not divide a round takes uneven runs of it), with a last key tile shorter
    // than a panel (n_kv 300), causal or not, in fp32 and bf16 (packed while widened).
    namespace k = attn::kernels;
    problem p = attn::gqa(240, 6, 3, 260); // d_head 40 (more than a panel), 2 query heads per kv head
    p.batch = 2;
    p.n_kv = 300;
    p.causal = GENERATE(false, true);
    const k::tiles t{.q = 48, .kv = 2 * k::nr}; // 6 query tiles, 5 key tiles of 2 panels
    const std::size_t d = p.qk_dim(), q_elems = p.batch * p.n_q * p.heads * d,
                      kv_elems = p.batch * p.n_kv * p.kv_heads * d;
    auto run = [&]<class T>(T, int threads, std::size_t round) {
        const auto q = attn::random_values<T>(q_elems, 5), kk = attn::random_values<T>(kv_elems, 6),
                   v = attn::random_values<T>(kv_elems, 7);
        std::vector<T> out(q_elems);
        const attn::core_io<T> io{attn::interleaved_heads<const T>(q.data(), p.batch, p.n_q, p.heads, d),
                                  attn::interleaved_heads<const T>(kk.data(), p.batch, p.n_kv, p.kv_heads, d),
                                  attn::interleaved_heads<const T>(v.data(), p.batch, p.n_kv, p.kv_heads, d),
                                  attn::interleaved_heads(out.data(), p.batch, p.n_q, p.heads, d)};
        k::tiled_core(p, io, t, threads, round);
        return out;
    };
    auto same_bytes = [](const auto& a, const auto& b) {
        return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(a[0])) == 0;
    };
    const auto per_tile = run(float{}, 1, 0);
    const auto per_tile_bf16 = run(attn::bf16{}, 1, 0);
    for (int threads : {1, 2})
        for (std::size_t round : {1, 2, 3, 4, 6}) {
            INFO(threads << " threads, rounds of " << round << " pairs, causal " << p.causal);
            CHECK(same_bytes(run(float{}, threads, round), per_tile));
            CHECK(same_bytes(run(attn::bf16{}, threads, round), per_tile_bf16));
        }
    // and the path the variants take for this problem (2 query heads a kv head: packed once)
    // against the fp64 reference
    attn::run_options opt;
    opt.threads = 2;
    CHECK(k::packs_kv_once(p, k::resolve_tiles(p, opt), 2));
    CHECK(attn::check::check_case<float>(attn::find_variant("parallel"), p, mode::core, opt, 31).pass);
}

TEST_CASE("a row that sees no key is zeros, whatever the kept scratch held", "[variants][tiles]") {
    // the rows that see no key (causal, n_q > n_kv) are never accumulated: their zeros come from
    // tile_core's fill of the output rows; 0 x NaN is NaN, so a scratch left holding NaN (a call on
    // a NaN query, made here on the calling thread, whose scratch the next call reuses) shows a
    // row it missed
    namespace k = attn::kernels;
    auto core = [](const problem& p, float q_value) {
        const std::size_t d = p.qk_dim();
        std::vector<float> q(p.n_q * p.heads * d, q_value), kv(p.n_kv * p.heads * d, 0.5f), out(q.size(), -1.0f);
        const attn::core_io<float> io{attn::interleaved_heads<const float>(q.data(), 1, p.n_q, p.heads, d),
                                      attn::interleaved_heads<const float>(kv.data(), 1, p.n_kv, p.heads, d),
                                      attn::interleaved_heads<const float>(kv.data(), 1, p.n_kv, p.heads, d),
                                      attn::interleaved_heads(out.data(), 1, p.n_q, p.heads, d)};
        k::tiled_core(p, io, k::tiles{}, 1);
        return out;
    };
    (void)core(attn::mha(128, 2, 64), std::numeric_limits<float>::quiet_NaN()); // d_head 64
    problem p = attn::mha(128, 2, 9);
    p.n_kv = 4;
    p.causal = true; // rows 0-4 see no key (row i sees keys up to i + n_kv - n_q), rows 5-8 1-4 keys
    const auto out = core(p, 1.0f);
    for (std::size_t i = 0; i < p.n_q; ++i) {
        INFO("row " << i);
        for (std::size_t c = 0; c < p.heads * p.qk_dim(); ++c)
            // no key: zeros by definition; every key's value is 0.5, so any softmax gives 0.5
            REQUIRE(out[i * p.heads * p.qk_dim() + c] == (i < 5 ? 0.0f : 0.5f));
    }
}

TEST_CASE("the softmax's one pass: its reference maximum held, moved past the slack, the scores computed again",
          "[variants][tiles]") {
    // tile_core takes a key tile's weights against a reference maximum (softmax_row_one_pass): the
    // row's running one, on its first key tile the maximum of the tile's first panel; held while
    // the tile's scores rise at most 8 above it (weights up to 2^8), moved and the weights rescaled
    // where they rise further, the scores computed again where they rise past 100. Three rows, one
    // per way, their scores set panel by panel through one component of q and k each (q carries 1
    // / (scale log2 e), so q k scale log2 e is the base-2 score): on the first key tile, its first
    // panel 2, 90 or 150 below the tile's maximum; on the later tiles, maxima that rise by at most
    // 8, by 20-30 or by 100-200; values of magnitude up to 2^60. Expected: the softmax in double
    // over the same float inputs, over the keys the mask gives each row.
    namespace k = attn::kernels;
    const bool windowed = GENERATE(false, true);
    constexpr std::size_t tiles_n = 6, d = 16;
    const std::size_t kv = 4 * k::nr, n = tiles_n * kv;
    problem p = attn::mha(d, 1, n);
    if (windowed) {
        p.causal = true;
        p.window = n - 5; // the last rows see all but their first keys, through band_scores
    }
    const float rises[3][tiles_n] = {{0, 2, 3, 1, 2, 3}, {0, 20, 40, 30, 60, 50}, {0, 150, 100, 300, 250, 410}};
    const float first_drop[3] = {2, 90, 150};
    const float v_scale = 0x1p60f; // weights of 2^90 held (not moved) would overflow the output row
    const float to_score = float(1.0 / (p.softmax_scale() * 1.4426950408889634));
    std::vector<float> q(n * d, 0.0f), key(n * d, 0.0f), val(n * d), out(n * d, -1.0f);
    std::uint32_t seed = 7;
    auto uniform = [&seed] { // [0, 1), a fixed sequence
        seed = seed * 1664525u + 1013904223u;
        return float(seed >> 8) / 16777216.0f;
    };
    for (std::size_t j = 0; j < n; ++j) {
        const std::size_t tile = j / kv, at = j % kv;
        for (std::size_t way = 0; way < 3; ++way) { // a tile's maximum, the rest up to 12 below it
            const float top = rises[way][tile] - (tile == 0 && at < k::nr ? first_drop[way] : 0.0f);
            key[j * d + way] = at == (tile == 0 ? kv - 2 : 3) ? top : top - 12.0f * uniform();
        }
        for (std::size_t c = 0; c < d; ++c) val[j * d + c] = (2.0f * uniform() - 1.0f) * v_scale;
    }
    for (std::size_t way = 0; way < 3; ++way) q[(n - 3 + way) * d + way] = to_score; // rows n-3, n-2, n-1
    const attn::core_io<float> io{attn::interleaved_heads<const float>(q.data(), 1, n, 1, d),
                                  attn::interleaved_heads<const float>(key.data(), 1, n, 1, d),
                                  attn::interleaved_heads<const float>(val.data(), 1, n, 1, d),
                                  attn::interleaved_heads(out.data(), 1, n, 1, d)};
    k::tiled_core(p, io, k::tiles{64, kv}, 1);
    for (std::size_t way = 0; way < 3; ++way) {
        const std::size_t i = n - 3 + way, first = windowed ? i + 1 - p.window : 0; // keys [first, i]
        std::vector<double> s(n, 0.0);
        double mx = -1e300, sum = 0.0;
        for (std::size_t j = first; j <= (windowed ? i : n - 1); ++j) {
            for (std::size_t c = 0; c < d; ++c) s[j] += double(q[i * d + c]) * double(key[j * d + c]);
            s[j] *= p.softmax_scale();
            mx = std::max(mx, s[j]);
        }
        std::vector<double> want(d, 0.0);
        for (std::size_t j = first; j <= (windowed ? i : n - 1); ++j) {
            const double w = std::exp(s[j] - mx);
            sum += w;
            for (std::size_t c = 0; c < d; ++c) want[c] += w * double(val[j * d + c]);
        }
        for (std::size_t c = 0; c < d; ++c) {
            INFO("way " << way << (windowed ? " windowed" : "") << " column " << c);
            // scores up to 410 in base 2: their fp32 rounding, ~410 x 2^-24, moves a weight by ~2e-5
            CHECK(double(out[i * d + c]) == Approx(want[c] / sum).margin(2e-4 * v_scale));
        }
    }
}

TEST_CASE("a thread's kept tile scratch: a large case, a small one of other widths, the large again",
          "[variants][tiles]") {
    // each thread keeps its scratch between calls (kernels::tiled_scratch, grown only): a small
    // case after a large one reads buffers the large one filled, and a large one after a small
    // one grows them; every result must still match fp64, and the large case its own first bytes
    problem big = attn::gqa(256, 8, 2, 300); // d_head 32, 300 x 300
    big.causal = true;
    problem small = attn::mha(3 * 5, 5, 7); // d_head 3 (padded panels), 7 rows and keys
    small.n_kv = 9;
    for (const char* name : {"simd", "parallel"}) {
        attn::run_options opt;
        opt.threads = 2;
        const auto& v = attn::find_variant(name);
        INFO(name);
        CHECK(attn::check::check_case<float>(v, small, mode::core, opt, 20).pass); // then grown by big
        const auto in = attn::check::make_inputs(big, mode::core, 21);
        const auto first = attn::check::run<float>(v, big, mode::core, in, opt);
        CHECK(attn::check::check_case<float>(v, small, mode::core, opt, 22).pass);
        const auto again = attn::check::run<float>(v, big, mode::core, in, opt);
        REQUIRE(first.size() == again.size());
        CHECK(std::memcmp(first.data(), again.data(), first.size() * sizeof(float)) == 0);
        CHECK(attn::check::check_case<float>(v, big, mode::core, opt, 21).pass);
        CHECK(attn::check::check_case<float>(v, small, mode::core, opt, 23).pass);
    }
}

TEMPLATE_TEST_CASE("pack_b: B's element (k, n) at panel n / nr, row k, column n % nr; zeros past N",
                   "[variants][tiles]", float, attn::bf16, attn::f16) {
    // Both layouts of B (rows contiguous: V, W; columns contiguous: K^T, W^T, the in-register
    // transposes of AVX2 and AVX-512), whole panels and tails, K below, at and past one transpose
    // block. The values are small integers, exact in every storage type, and differ under a swap
    // of k and n; the expected panel comes from the layout's definition, element by element.
    namespace k = attn::kernels;
    const std::size_t nr = k::nr;
    for (const std::size_t K : {std::size_t(5), std::size_t(16), std::size_t(37), std::size_t(64)})
        for (const std::size_t N : {std::size_t(3), nr, nr + 5, 2 * nr})
            for (const bool transposed : {false, true}) {
                const std::size_t ld_k = transposed ? 1 : N + 2, ld_n = transposed ? K + 3 : 1;
                std::vector<TestType> b(K * ld_k + N * ld_n + 1);
                auto value = [](std::size_t kk, std::size_t n) { return float(int((kk * 17 + n * 5) % 251) - 125); };
                for (std::size_t kk = 0; kk < K; ++kk)
                    for (std::size_t n = 0; n < N; ++n) b[kk * ld_k + n * ld_n] = TestType(value(kk, n));
                k::aligned_vector<float> dst(k::packed_size(K, N), -1.0f);
                k::pack_b(b.data(), ld_k, ld_n, K, N, dst.data());
                std::size_t wrong = 0;
                for (std::size_t n = 0; n < (N + nr - 1) / nr * nr; ++n)
                    for (std::size_t kk = 0; kk < K; ++kk)
                        wrong += dst[(n / nr * K + kk) * nr + n % nr] != (n < N ? value(kk, n) : 0.0f);
                INFO("K " << K << ", N " << N << (transposed ? ", columns contiguous" : ", rows contiguous"));
                CHECK(wrong == 0);
            }
}

TEST_CASE("the vector exp is within 2 ulp of exp on [-104, 0]", "[variants][simd]") {
    // The tolerance policy budgets 4 ulp per exp; measured here: xsimd's float exp stays under
    // 1.5 ulp over every 7th float in the range (1.49 ulp near x = -5.89), sampled more coarsely here.
    using batch = xsimd::batch<float>;
    double worst = 0;
    float x = -0.0f;
    std::uint32_t bits, last;
    std::memcpy(&bits, &x, 4);
    const float lo = -104.0f;
    std::memcpy(&last, &lo, 4);
    alignas(64) float in[batch::size], out[batch::size];
    for (std::uint32_t u = bits; u <= last; u += 997 * batch::size) {
        for (std::size_t k = 0; k < batch::size; ++k) {
            const std::uint32_t v = u + std::uint32_t(k) * 997;
            std::memcpy(&in[k], &v, 4);
        }
        xsimd::exp(batch::load_aligned(in)).store_aligned(out);
        for (std::size_t k = 0; k < batch::size; ++k) {
            const double ref = std::exp(double(in[k]));
            if (ref < 1.17549435e-38) continue; // subnormal results: absolute error below 1e-38
            const float rf = float(ref);
            const double ulp = double(std::nextafter(rf, INFINITY)) - double(rf);
            worst = std::max(worst, std::abs(double(out[k]) - ref) / ulp);
        }
    }
    INFO("worst error " << worst << " ulp");
    CHECK(worst <= 2.0);
}

namespace {

// Plausible wrong kernels, built on the reference: the checker must reject each.
attn::variant mutant(const std::string& name, std::function<void(const problem&, const attn::core_io<float>&)> core) {
    attn::variant v;
    v.name = name;
    v.f32.core = [core](const problem& p, const attn::core_io<float>& io, const attn::run_options&) { core(p, io); };
    v.f32.linear = [](const attn::linear_io<float>& io, const attn::run_options&) {
        attn::reference::linear<float>(io);
    };
    return v;
}

} // namespace

/// The wrong kernels (fp32; test_halves.cpp serves them in bf16 and f16 by conversion).
std::vector<attn::variant> wrong_kernels() {
    return {
        mutant("scale 1% off",
               [](const problem& p, const attn::core_io<float>& io) {
                   problem q = p;
                   q.scale = 0.99 * p.softmax_scale();
                   attn::reference::core<float>(q, io);
               }),
        mutant("scale by 1/sqrt(d_model)",
               [](const problem& p, const attn::core_io<float>& io) {
                   problem q = p;
                   q.scale = 1.0 / std::sqrt(double(p.d_model));
                   attn::reference::core<float>(q, io);
               }),
        mutant("kv head h % G instead of h*G/H",
               [](const problem& p, const attn::core_io<float>& io) {
                   for (std::size_t h = 0; h < p.heads; ++h) {
                       problem one = p;
                       one.heads = one.kv_heads = 1;
                       one.d_head = p.qk_dim();
                       auto sub = [](auto view, std::size_t head) {
                           view.data = view.data + head * view.head_stride;
                           view.heads = 1;
                           return view;
                       };
                       attn::reference::core<float>(
                           one, {sub(io.q, h), sub(io.k, h % p.kv_heads), sub(io.v, h % p.kv_heads), sub(io.out, h)});
                   }
               }),
        mutant("mask one key short",
               [](const problem& p, const attn::core_io<float>& io) {
                   problem q = p;
                   q.n_kv = p.n_kv - 1; // every row loses its last visible key
                   attn::reference::core<float>(q, io);
               }),
        mutant("causal mask ignored",
               [](const problem& p, const attn::core_io<float>& io) {
                   problem q = p;
                   q.causal = false;
                   attn::reference::core<float>(q, io);
               }),
    };
}

TEST_CASE("the checker rejects wrong kernels", "[check][mutants]") {
    const std::vector<attn::variant> mutants = wrong_kernels();
    problem p = attn::gqa(64, 4, 2, 33);
    p.causal = true;
    for (const auto& v : mutants) {
        INFO(v.name);
        CHECK_FALSE(attn::check::check_case<float>(v, p, mode::core, {}, 3).pass);
        const auto layer = attn::check::check_case<float>(v, p, mode::layer, {}, 3);
        INFO("layer: max_abs " << layer.max_abs << " err/bound " << layer.ratio);
        CHECK_FALSE(layer.pass);
    }
}

TEST_CASE("identities the seeds rely on hold on the reference", "[check][identities]") {
    for (const auto& r : attn::check_identities(1)) {
        INFO(r.name << ": max |diff| " << r.max_abs_diff << " tolerance " << r.tolerance);
        CHECK(r.pass);
    }
}

TEST_CASE("non-finite inputs are an error naming the input", "[errors]") {
    std::vector<float> x{1.0f, NAN, 2.0f};
    try {
        attn::require_finite(x, "x.npy");
        FAIL("expected an error");
    } catch (const attn::error& e) {
        CHECK(std::string(e.what()) == "x.npy holds a non-finite value (nan) at flat index 1");
    }
}

TEST_CASE("a precision a variant cannot run is one error naming both", "[variants][precision][errors]") {
    attn::variant fp32_only;
    fp32_only.name = "fp32-only";
    fp32_only.f32 = attn::find_variant("naive").f32; // no bf16, f16 or f64 kernels
    std::string message;
    try {
        attn::require_precision(fp32_only, attn::precision::bf16);
    } catch (const attn::error& e) {
        message = e.what();
    }
    CHECK(message.rfind("variant 'fp32-only' does not run in bf16 on this CPU (", 0) == 0);
    CHECK_NOTHROW(attn::require_precision(fp32_only, attn::precision::f32));
    // every variant that serves every family serves the storage types; a family's own variant
    // may serve less (tests/test_throwaway_family.cpp registers an fp32/fp64-only one when it runs
    // first in one process)
    for (const auto& v : attn::registry())
        if (v.serves.families.empty())
            for (const auto p : {attn::precision::f32, attn::precision::bf16, attn::precision::f16})
                CHECK_NOTHROW(attn::require_precision(v, p));
}
