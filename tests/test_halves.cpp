// Every variant in bf16 and f16 (storage formats, fp32 arithmetic) against the fp64 reference on
// the same rounded inputs; the checker still rejects wrong kernels at these looser bounds; the
// family identities hold bit for bit; a small bf16 case computed by hand; the kernels' vector
// conversions agree with the scalar ones (held to their definitions in test_precision.cpp).
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <limits>
#include <string>
#include <vector>
#include <catch2/catch.hpp>
import attn.grids;
import attn.variants;
import attn.check;
import attn.reference;
import attn.kernels;

using attn::mode;
using attn::problem;

namespace {

template <class T>
const char* name_of() {
    return attn::enum_name(attn::precision_of<T>).data();
}

template <class T>
void grid_passes() {
    attn::run_options opt;
    opt.threads = 2;
    for (const auto& gc : attn::check::default_grid()) {
        for (mode m : {mode::core, mode::layer}) {
            const auto in = attn::check::rounded<T>(attn::check::make_inputs(gc.p, m, 42, gc.magnitude));
            const auto e = attn::check::expect(gc.p, m, in, attn::precision_of<T>);
            for (const auto& v : attn::registry()) {
                INFO(v.name << " " << name_of<T>() << " " << attn::enum_name(m) << " on " << gc.p.describe());
                REQUIRE(v.supports<T>());
                // the one path of a half check: the roundings v declares charged (P stored in bf16
                // by the bf16 core on AMX or vdpbf16ps)
                const auto r = attn::check::check_rounded<T>(v, gc.p, m, in, e, opt).first;
                INFO("max_abs " << r.max_abs << ", err/bound " << r.ratio);
                CHECK(r.pass);
            }
        }
    }
}

} // namespace

TEST_CASE("every variant matches the fp64 reference in bf16 and f16", "[halves][check]") {
    grid_passes<attn::bf16>();
    grid_passes<attn::f16>();
}

TEST_CASE("bf16: the error against unrounded inputs is reported and exceeds the kernel's own", "[halves][check]") {
    problem p = attn::gqa(128, 4, 2, 64);
    // blocked computes bf16 in fp32 on every CPU (simd's core rounds P to bf16 where the CPU has
    // bf16 products, an error of the inputs' own order)
    const auto r = attn::check::check_case<attn::bf16>(attn::find_variant("blocked"), p, mode::layer, {}, 7);
    CHECK(r.pass);
    // storing x and W in bf16 perturbs them by up to 2^-8 relative: far more than fp32 arithmetic
    INFO("vs rounded inputs " << r.max_abs << ", vs unrounded " << r.unrounded_max_abs);
    CHECK(r.unrounded_max_abs > r.max_abs);
    CHECK(r.unrounded_max_rel < 0x1.0p-8 * 64); // and still of the format's order, not garbage
}

/// The wrong kernels of test_variants.cpp (fp32), served here in bf16 and f16 by conversion.
std::vector<attn::variant> wrong_kernels();

TEST_CASE("the checker rejects wrong kernels in bf16 and f16", "[halves][check][mutants]") {
    std::vector<attn::variant> mutants = wrong_kernels();
    for (auto& v : mutants) attn::add_half_by_conversion(v);
    problem p = attn::gqa(64, 4, 2, 33);
    p.causal = true;
    // "scale 1% off" in core mode only: in a layer, rounding the projected Q and K to bf16 moves
    // the scores about as much as a 1% scale error does (on this problem the mutant's layer error
    // is 0.12 of the bf16 bound and 0.21 of the f16 one, and a correct bf16 layer's own error,
    // 1.9e-3, is of the same size), so no sound bound can tell them apart. Even in f32 it is
    // rejected in a layer only at small d_model (err/bound 1.7 here, 0.12 at d_model 256).
    for (const auto& v : mutants) {
        for (mode m : {mode::core, mode::layer}) {
            if (m == mode::layer && v.name == "scale 1% off") continue;
            INFO(v.name << " " << attn::enum_name(m));
            const auto b = attn::check::check_case<attn::bf16>(v, p, m, {}, 3);
            const auto h = attn::check::check_case<attn::f16>(v, p, m, {}, 3);
            INFO("bf16 err/bound " << b.ratio << ", f16 err/bound " << h.ratio);
            CHECK_FALSE(b.pass);
            CHECK_FALSE(h.pass);
        }
    }
}

namespace {

/// The core of `v` in precision T on q [n, H*d] and k, v [n, G*d] (bits of the output), on `threads`.
template <class T>
std::vector<std::uint16_t> core_bits(const attn::variant& var, const problem& p, const std::vector<T>& q,
                                     const std::vector<T>& k, const std::vector<T>& v, int threads = 2) {
    const std::size_t d = p.qk_dim();
    std::vector<T> out(p.n_q * p.q_width());
    attn::run_options opt;
    opt.threads = threads;
    var.get<T>().core(p,
                      {attn::interleaved_heads<const T>(q.data(), 1, p.n_q, p.heads, d),
                       attn::interleaved_heads<const T>(k.data(), 1, p.n_kv, p.kv_heads, d),
                       attn::interleaved_heads<const T>(v.data(), 1, p.n_kv, p.kv_heads, d),
                       attn::interleaved_heads<T>(out.data(), 1, p.n_q, p.heads, d)},
                      opt);
    std::vector<std::uint16_t> bits(out.size());
    std::memcpy(bits.data(), out.data(), out.size() * 2);
    return bits;
}

template <class T>
std::vector<T> random_t(std::size_t n, std::uint64_t seed) {
    const auto f = attn::random_values<float>(n, seed);
    std::vector<T> t(n);
    for (std::size_t i = 0; i < n; ++i) t[i] = T(f[i]);
    return t;
}

template <class T>
void identities_bitwise() {
    for (const std::size_t G : {std::size_t(1), std::size_t(2), std::size_t(8)}) {
        problem g = attn::gqa(8 * 16, 8, G, 150);
        g.causal = true;
        problem mha = g;
        mha.kv_heads = g.heads;
        const std::size_t d = g.qk_dim(), n = g.n_kv;
        const auto q = random_t<T>(n * g.q_width(), 1), k = random_t<T>(n * g.k_width(), 2),
                   v = random_t<T>(n * g.v_width(), 3);
        std::vector<T> km(n * mha.k_width()), vm(n * mha.v_width()); // each head given its group's K, V
        for (std::size_t j = 0; j < n; ++j)
            for (std::size_t h = 0; h < g.heads; ++h)
                for (std::size_t t = 0; t < d; ++t) {
                    km[(j * g.heads + h) * d + t] = k[(j * G + g.kv_head_of(h)) * d + t];
                    vm[(j * g.heads + h) * d + t] = v[(j * G + g.kv_head_of(h)) * d + t];
                }
        for (const auto& var : attn::registry()) {
            INFO(var.name << " " << name_of<T>() << " G=" << G);
            CHECK(core_bits<T>(var, g, q, k, v) == core_bits<T>(var, mha, q, km, vm));
        }
    }
}

} // namespace

TEST_CASE("GQA = MHA with shared K/V, G=1 = MQA, G=H = MHA: bit for bit in bf16 and f16", "[halves][identities]") {
    identities_bitwise<attn::bf16>();
    identities_bitwise<attn::f16>();
}

TEST_CASE("a bf16 case by hand: one head, d_head 2, two keys", "[halves]") {
    // q = k = I, scale 1/sqrt 2: row 0 scores (0.70711, 0) -> weights 1/(1+e^-0.70711) = 0.66976
    // and 0.33024; v = [[1, 2], [3, 4]] (exact in bf16): row 0 = (1.66048, 2.66048), row 1 =
    // (2.33952, 3.33952). bf16 spacing is 2^-7 on [1, 2) and 2^-6 on [2, 4): 1.66048 = 212.54 x
    // 2^-7 -> 213 x 2^-7 = 1.6640625; 2.66048 = 170.27 x 2^-6 -> 2.65625; 2.33952 = 149.73 x
    // 2^-6 -> 2.34375; 3.33952 = 213.73 x 2^-6 -> 3.34375.
    // A variant that stores P in bf16 before P V (variant::roundings; the bf16 core on vdpbf16ps):
    // in base 2 the score is 0.70711 log2 e = 1.0201395 (fp32), the weights 1 and 2^-1.0201395 =
    // 0.49306870 (252.45 x 2^-9 -> 0.4921875 stored), the row sum from the unrounded ones 1.4930687:
    // row 0 = (1 + 3 x 0.4921875, 2 + 4 x 0.4921875) / 1.4930687 = (1.65871, 2.65812) -> 212.31 x
    // 2^-7 -> 1.65625 and 170.12 x 2^-6 -> 2.65625; row 1 = (0.4921875 + 3, 0.984375 + 4) /
    // 1.4930687 = (2.33893, 3.33834) -> 2.34375 and 3.34375.
    problem p = attn::single_head(2, 2);
    const std::vector<attn::bf16> q{attn::bf16(1.0f), attn::bf16(0.0f), attn::bf16(0.0f), attn::bf16(1.0f)};
    const std::vector<attn::bf16> v{attn::bf16(1.0f), attn::bf16(2.0f), attn::bf16(3.0f), attn::bf16(4.0f)};
    const std::vector<float> want{1.6640625f, 2.65625f, 2.34375f, 3.34375f};
    const std::vector<float> want_p_rounded{1.65625f, 2.65625f, 2.34375f, 3.34375f};
    for (const auto& var : attn::registry()) {
        const bool p_rounded = var.roundings(p, mode::core, attn::dtype::bf16).weights;
        std::vector<attn::bf16> out(4);
        var.bf16.core(p,
                      {attn::interleaved_heads<const attn::bf16>(q.data(), 1, 2, 1, 2),
                       attn::interleaved_heads<const attn::bf16>(q.data(), 1, 2, 1, 2),
                       attn::interleaved_heads<const attn::bf16>(v.data(), 1, 2, 1, 2),
                       attn::interleaved_heads<attn::bf16>(out.data(), 1, 2, 1, 2)},
                      {});
        for (std::size_t i = 0; i < 4; ++i) {
            INFO(var.name << " element " << i << (p_rounded ? " (P stored in bf16)" : ""));
            CHECK(float(out[i]) == (p_rounded ? want_p_rounded : want)[i]);
        }
    }
}

TEST_CASE("the kernels' vector conversions equal the scalar ones", "[halves][precision]") {
    std::vector<float> xs;
    attn::rng r(5);
    for (int i = 0; i < 100003; ++i) xs.push_back(std::bit_cast<float>(std::uint32_t(r.next())));
    for (const std::uint32_t b : {0x7f800000u, 0xff800000u, 0x7f800001u, 0x7fc00000u, 0x7f7fffffu, 0x3f808000u,
                                  0x3f818000u, 0x00000001u, 0x807fffffu, 0x477ff000u, 0x477fefffu})
        xs.push_back(std::bit_cast<float>(b));
    std::vector<attn::bf16> b(xs.size());
    std::vector<attn::f16> h(xs.size());
    attn::kernels::isa::narrow(xs.data(), b.data(), xs.size());
    attn::kernels::isa::narrow(xs.data(), h.data(), xs.size());
    std::vector<float> bw(xs.size()), hw(xs.size());
    attn::kernels::isa::widen(b.data(), bw.data(), b.size());
    attn::kernels::isa::widen(h.data(), hw.data(), h.size());
    for (std::size_t i = 0; i < xs.size(); ++i) {
        INFO("x = " << xs[i] << " (0x" << std::hex << std::bit_cast<std::uint32_t>(xs[i]) << ")");
        if (std::isnan(xs[i])) {
            CHECK(std::isnan(bw[i]));
            CHECK(std::isnan(hw[i]));
            continue;
        }
        CHECK(std::bit_cast<std::uint16_t>(b[i]) == std::bit_cast<std::uint16_t>(attn::bf16(xs[i])));
        CHECK(std::bit_cast<std::uint16_t>(h[i]) == std::bit_cast<std::uint16_t>(attn::f16(xs[i])));
        CHECK(std::bit_cast<std::uint32_t>(bw[i]) == std::bit_cast<std::uint32_t>(float(b[i])));
        CHECK(std::bit_cast<std::uint32_t>(hw[i]) == std::bit_cast<std::uint32_t>(float(h[i])));
    }
}

TEST_CASE("the vdpbf16ps core's key panels: key j's dimensions 2k and 2k + 1 in one word at (k, j)",
          "[halves][bf16dot]") {
    // 3 keys of d_head 5 (odd: the last word's high half is zero), key j's dimension t = 10 j + t
    // (integers, exact in bf16); a panel is 32 keys wide, so columns 3..31 are zero
    const std::size_t n = 3, d = 5, d2 = 3, nr = attn::kernels::bf16dot::nr;
    std::vector<attn::bf16> k(n * d);
    for (std::size_t j = 0; j < n; ++j)
        for (std::size_t t = 0; t < d; ++t) k[j * d + t] = attn::bf16(float(10 * j + t));
    std::vector<std::uint32_t> kp(d2 * nr, 0xdeadbeef);
    attn::kernels::bf16dot::detail::pack_keys(attn::interleaved_heads<const attn::bf16>(k.data(), 1, n, 1, d), 0, 0, 0,
                                              n, d, d2, kp.data());
    const auto bits = [](float x) { return std::uint32_t(std::bit_cast<std::uint16_t>(attn::bf16(x))); };
    for (std::size_t w = 0; w < d2; ++w)
        for (std::size_t c = 0; c < nr; ++c) {
            std::uint32_t want = 0;
            if (c < n)
                want = bits(float(10 * c + 2 * w)) | (2 * w + 1 < d ? bits(float(10 * c + 2 * w + 1)) << 16 : 0u);
            INFO("pair " << w << ", key " << c);
            CHECK(kp[w * nr + c] == want);
        }
}

namespace {

/// `parallel` with its bf16 core on one engine of attn.kernels:bf16dot, its P rounding declared.
attn::variant on_engine(attn::kernels::isa::bf16_engine e) {
    attn::variant v = attn::find_variant("parallel");
    const bool amx = e == attn::kernels::isa::bf16_engine::amx;
    v.name = amx ? "parallel on AMX" : "parallel on vdpbf16ps";
    v.bf16.core = [amx](const problem& given, const attn::core_io<attn::bf16>& io, const attn::run_options& o) {
        const problem p = given.effective();
        const auto t = attn::kernels::bf16dot_tiles(p, o);
        if (amx)
            attn::kernels::bf16dot::core_amx(p, io, t, o.threads);
        else
            attn::kernels::bf16dot::core_dot(p, io, t, o.threads);
    };
    v.roundings = [](const problem&, mode m, attn::dtype t) {
        return attn::half_roundings{.weights = m != mode::decode && t == attn::dtype::bf16};
    };
    return v;
}

/// The engines this CPU has.
std::vector<attn::kernels::isa::bf16_engine> engines_here() {
    std::vector<attn::kernels::isa::bf16_engine> e;
    if (attn::kernels::isa::cpu_has_avx512_bf16()) e.push_back(attn::kernels::isa::bf16_engine::dot);
    if (attn::kernels::isa::amx_granted()) e.push_back(attn::kernels::isa::bf16_engine::amx);
    return e;
}

/// Whether /proc/cpuinfo's first flags line names `flag` (false where there is no such file).
bool cpuinfo_has(const std::string& flag) {
    std::ifstream in("/proc/cpuinfo");
    for (std::string line; std::getline(in, line);)
        if (line.rfind("flags", 0) == 0) return (line + " ").find(" " + flag + " ") != std::string::npos;
    return false;
}

} // namespace

TEST_CASE("the bf16 engines: AMX, else vdpbf16ps where it outruns the fp32 FMA, else widening; decode beside",
          "[halves][bf16dot]") {
    // what a CPU offers (vdpbf16ps, AMX granted, AMX in its flags, vdpbf16ps FLOPs / FMA FLOPs) and
    // ATTNBENCH_BF16 -> the core's engine and whether a bf16 cache's decode takes vdpbf16ps, by the
    // rule's statement: the Zen 5 (2.0x, no AMX) and the H200 machine's Xeon (0.47x, AMX) among them
    namespace isa = attn::kernels::isa;
    using E = isa::bf16_engine;
    struct row {
        isa::bf16_means m;
        E engine;
        bool decode;
    };
    const row rows[] = {
        {{false, false, false, 0.0, ""}, E::convert, false}, // no bf16 products
        {{true, false, false, 2.0, ""}, E::dot, true},       // the Zen 5
        {{true, false, false, 1.0, ""}, E::dot, true},       // level with the FMA: fewer instructions
        {{true, false, false, 0.99, ""}, E::convert, false}, // below it
        {{true, true, true, 0.47, ""}, E::amx, false},       // the H200 machine's Xeon
        {{true, true, true, 2.0, ""}, E::amx, true},         // AMX and a fast vdpbf16ps
        {{true, false, true, 0.47, ""}, E::convert, false},  // AMX refused by Linux, slow vdpbf16ps
        {{true, true, true, 0.47, "dot"}, E::dot, true},     // forced, to compare
        {{true, false, false, 2.0, "convert"}, E::convert, false},
        {{true, true, true, 2.0, "convert"}, E::convert, false},
        {{true, true, true, 0.47, "amx"}, E::amx, false},
        {{true, true, true, 2.0, "amx"}, E::amx, true},
    };
    for (const row& r : rows) {
        INFO("avx512_bf16 " << r.m.avx512_bf16 << " amx " << r.m.amx << " ratio " << r.m.dot_over_fma << " env '"
                            << r.m.env << "'");
        CHECK(isa::bf16_engine_for(r.m) == r.engine);
        CHECK(isa::decode_bf16_dots_for(r.m) == r.decode);
    }
    auto refused = [](isa::bf16_means m, const std::string& what) {
        INFO(what);
        CHECK_THROWS_WITH(isa::bf16_engine_for(m), Catch::Contains(what));
        CHECK_THROWS_WITH(isa::decode_bf16_dots_for(m), Catch::Contains(what));
    };
    refused({false, false, false, 0.0, "dot"}, "ATTNBENCH_BF16=dot: this CPU has no AVX512_BF16 (vdpbf16ps)");
    refused({true, false, false, 2.0, "amx"}, "ATTNBENCH_BF16=amx: this CPU has no AMX-BF16");
    refused({true, false, true, 2.0, "amx"}, "ATTNBENCH_BF16=amx: Linux refused this process AMX's tile data");
    refused({true, true, true, 2.0, "fast"}, "ATTNBENCH_BF16='fast' is not one of convert, dot, amx");
    // this process: the same rule on what it measured
    CHECK(isa::bf16_engine_here() == isa::bf16_engine_for(isa::bf16_means_here()));
    CHECK(isa::decode_bf16_dots_here() == isa::decode_bf16_dots_for(isa::bf16_means_here()));
}

TEST_CASE("the bf16 core on vdpbf16ps and on AMX matches the fp64 reference (tails, windows, GQA, threads)",
          "[halves][bf16dot]") {
    // the suite's choice, from the kernel's own flags (Linux's, in /proc/cpuinfo): AMX, else
    // vdpbf16ps where it gives at least the fp32 FMA's FLOPs (the ratio measured in this process),
    // else widening to fp32 (ATTNBENCH_BF16 aside); declared where P is rounded
    namespace isa = attn::kernels::isa;
    const double ratio = isa::bf16_means_here().dot_over_fma;
    CHECK((ratio > 0) == cpuinfo_has("avx512_bf16"));
    CHECK(std::isfinite(ratio));
    const bool amx = cpuinfo_has("amx_bf16") && cpuinfo_has("amx_tile"),
               dot = cpuinfo_has("avx512_bf16") && ratio >= 1.0;
    const auto want = amx ? isa::bf16_engine::amx : dot ? isa::bf16_engine::dot : isa::bf16_engine::convert;
    if (!std::getenv("ATTNBENCH_BF16")) CHECK(isa::bf16_engine_here() == want);
    const problem small = attn::gqa(64, 2, 2, 16);
    CHECK(attn::find_variant("simd").roundings(small, mode::core, attn::dtype::bf16).weights ==
          (isa::bf16_engine_here() != isa::bf16_engine::convert));
    CHECK_FALSE(attn::find_variant("simd").roundings(small, mode::decode, attn::dtype::bf16).weights);
    CHECK_FALSE(attn::find_variant("simd").roundings(small, mode::core, attn::dtype::f16).weights);
    const auto engines = engines_here();
    if (engines.empty()) {
        WARN("this CPU has neither AVX512_BF16 nor AMX-BF16: the bf16 core widens to fp32, no engine to check");
        return;
    }
    // d_head 33 (odd: a half-empty word, padded to 32 words), 64 and 128; sequences that fill no
    // whole panel of 32 keys; key tiles of 48 (not a multiple of 32) and query tiles of 40 (not a
    // multiple of 12 or 32 rows); a window narrower than a key tile; one query row
    struct shape {
        problem p;
        attn::run_options opt;
    };
    std::vector<shape> shapes;
    auto add = [&](problem p, std::size_t tq, std::size_t tkv, int threads) {
        attn::run_options o;
        o.tile_q = tq;
        o.tile_kv = tkv;
        o.threads = threads;
        shapes.push_back({p, o});
    };
    add(attn::gqa(66, 2, 1, 45), 0, 0, 1);
    add(attn::gqa(512, 8, 2, 300), 40, 48, 2);
    problem c = attn::gqa(256, 2, 2, 257);
    c.causal = true;
    add(c, 0, 0, 2);
    problem w = c;
    w.window = 37;
    add(w, 40, 48, 1);
    add(w, 0, 0, 2);
    add(attn::gqa(1024, 8, 8, 1), 0, 0, 1);
    for (const auto e : engines) {
        const attn::variant var = on_engine(e);
        for (const auto& s : shapes) {
            INFO(var.name << " on " << s.p.describe() << ", tiles " << s.opt.tile_q << " x " << s.opt.tile_kv << ", "
                          << s.opt.threads << " threads");
            const auto r = attn::check::check_case<attn::bf16>(var, s.p, mode::core, s.opt, 11);
            INFO("max_abs " << r.max_abs << ", err/bound " << r.ratio);
            CHECK(r.pass);
        }
        // the same bytes on 1 and 2 threads (a work item is computed the same way on any thread)
        problem t = attn::gqa(256, 4, 2, 200);
        t.causal = true;
        attn::rng g(3);
        std::vector<attn::bf16> q(t.n_q * t.q_width()), k(t.n_kv * t.k_width()), v(k.size());
        for (auto* x : {&q, &k, &v})
            for (auto& y : *x) y = attn::bf16(float(g.uniform(-1.0, 1.0)));
        CHECK(core_bits<attn::bf16>(var, t, q, k, v) == core_bits<attn::bf16>(var, t, q, k, v, 1));
    }
}

TEST_CASE("the bf16 core's softmax step by hand: masked maximum, weights as bf16 words, running sum and output",
          "[halves][bf16dot]") {
    if (!attn::kernels::isa::cpu_has_avx512_bf16()) {
        WARN("this CPU has no AVX512_BF16: the bf16 core's softmax step (bf16dot::detail::weights_row) not run");
        return;
    }
    // raw scores of 96 columns, keys [3, 40) visible: even integers from 0 to 8 there (scale 1/2:
    // arguments s/2 - m_new are integers, so every weight is a power of two, exact in fp32 and
    // bf16), 100 elsewhere (which the maximum must pass over); the third group of 32 columns holds
    // no visible key. Running state before: m 1, l 2, an output row of 8s.
    const std::size_t lo = 3, hi = 40, tk_pad = 96, acc_ld = 16;
    // acc as the kernel's own rows are: 64-byte aligned (fold_tile rescales it in aligned vectors)
    std::vector<float> s(tk_pad, 100.0f);
    attn::kernels::aligned_vector<float> acc(acc_ld, 8.0f);
    for (std::size_t j = lo; j < hi; ++j) s[j] = float(2 * (j % 5));
    float m = 1.0f, l = 2.0f;
    attn::kernels::bf16dot::detail::weights_row(s.data(), lo, hi, tk_pad, 0.5f, m, l, acc.data(), acc_ld);
    // by hand: the visible maximum 8 scales to 4 = m_new; weight j = 2^(j % 5 - 4); the old sum and
    // output carry 2^(1 - 4) = 1/8; the new sum is 2/8 plus the weights' sum
    double sum = 0.25;
    for (std::size_t j = 0; j < tk_pad; ++j) {
        const double want = j >= lo && j < hi ? std::exp2(double(j % 5) - 4.0) : 0.0;
        sum += want;
        std::uint16_t half;
        std::memcpy(&half, reinterpret_cast<const char*>(s.data()) + 2 * j, sizeof half);
        INFO("column " << j);
        CHECK(double(std::bit_cast<float>(std::uint32_t(half) << 16)) == want);
    }
    CHECK(m == 4.0f);
    CHECK(double(l) == sum);
    for (const float a : acc) CHECK(a == 1.0f);
}
