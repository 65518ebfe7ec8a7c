// Multi-head Latent Attention (attn.families:mla, attn.core:latent): a layer worked by hand, the two
// forms against each other, the counts against the papers' configurations and the counting
// scalar, every variant against the fp64 reference in both forms, and the mutants the issue names.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>
#include <catch2/catch.hpp>
import attn.variants;
import attn.families;
import attn.check;
import attn.count;
import attn.decode;
import attn.reference;

using attn::form;
using attn::problem;
namespace lw = attn::latent_w;

namespace {

/// A small MLA layer problem: d_model 32, H heads, the given latents, nope 8, rope 4, values 6.
problem small(std::size_t heads, std::size_t q_rank, form f, std::size_t n, bool causal) {
    problem p = attn::mla(32, heads, q_rank, 16, 8, 4, 6, f, n);
    p.causal = causal;
    return p;
}

double max_abs_diff(const std::vector<double>& a, const std::vector<double>& b) {
    double m = 0;
    for (std::size_t i = 0; i < a.size(); ++i) m = std::max(m, std::abs(a[i] - b[i]));
    return m;
}

} // namespace

TEST_CASE("MLA on a layer worked by hand: two tokens, one head, d_c 2, rope 2", "[mla]") {
    // d_model 2, H 1, no query latent, d_c 2, nope 1, rope 2, v 1; tokens x0 = (1, 0), x1 = (0, 1).
    // W_kv^a = I stacked twice: [c | k_pe] = (x, x). RMSNorm (w = 1) of c = e_t: r = 1/sqrt(1/2 + 1e-6)
    // times e_t. W_kv^b = I: k_nope = cn[0], v = cn[1], so token 0 has k_nope r, v 0; token 1 has
    // k_nope 0, v r. RoPE, one pair at angle = position: k_pe0 = (1, 0), k_pe1 = (0, 1) -> (-sin 1,
    // cos 1). W_q rows (1, 1), (1, 0), (0, 1): q0 = (1 | 1, 0), q1 = (1 | 0, 1) -> (1 | -sin 1, cos 1).
    // Scores (scale 1/sqrt 3): s00 = r + 1, s01 = -sin 1, s10 = r - sin 1, s11 = sin^2 1 + cos^2 1 = 1.
    // Context t = P_t1 r (only token 1 has a value); W_o = (1, 2)^T: y_t = (P_t1 r, 2 P_t1 r).
    const double r = 1.0 / std::sqrt(0.5 + 1e-6), s1 = std::sin(1.0), k3 = std::sqrt(3.0);
    const double p01 = 1.0 / (1.0 + std::exp(((r + 1) - (-s1)) / k3));
    const double p11 = 1.0 / (1.0 + std::exp(((r - s1) - 1.0) / k3));
    const std::vector<double> want{p01 * r, 2 * p01 * r, p11 * r, 2 * p11 * r};
    for (form f : {form::naive, form::absorb}) {
        INFO(attn::enum_name(f));
        problem p = attn::mla(2, 1, 0, 2, 1, 2, 1, f, 2);
        attn::weights<double> w;
        w.t.resize(lw::count);
        w[lw::wq] = {1, 1, 1, 0, 0, 1};
        w[lw::wkv_a] = {1, 0, 0, 1, 1, 0, 0, 1};
        w[lw::kv_norm] = {1, 1};
        w[lw::wkv_b] = {1, 0, 0, 1};
        w[lw::wo] = {1, 2};
        attn::mla_family::derive<double>(p, w);
        const std::vector<double> x{1, 0, 0, 1};
        std::vector<double> y(4);
        attn::reference_layer<double>(p, w, x.data(), x.data(), y.data());
        for (std::size_t i = 0; i < 4; ++i) CHECK(y[i] == Approx(want[i]).epsilon(1e-14));
        // every variant in fp32 on the same layer
        const attn::weights<float> wf = w.cast<float>();
        const std::vector<float> xf(x.begin(), x.end());
        for (const auto& v : attn::registry()) {
            INFO(v.name);
            std::vector<float> yf(4);
            attn::layer_buffers<float> ws;
            attn::run_layer<float>(v, p, wf, xf.data(), xf.data(), yf.data(), {}, ws);
            for (std::size_t i = 0; i < 4; ++i) CHECK(yf[i] == Approx(want[i]).epsilon(1e-6));
        }
    }
}

TEST_CASE("MLA: the absorbed form equals the naive form in fp64", "[mla]") {
    for (std::size_t q_rank : {std::size_t(0), std::size_t(8)})
        for (bool causal : {false, true}) {
            problem naive = small(4, q_rank, form::naive, 7, causal), absorb = naive;
            absorb.form = form::absorb;
            naive.batch = absorb.batch = 2;
            const auto w = attn::random_weights<double>(naive, 3);
            const auto x = attn::random_values<double>(2 * 7 * 32, 11);
            std::vector<double> yn(x.size()), ya(x.size());
            attn::reference_layer<double>(naive, w, x.data(), x.data(), yn.data());
            attn::reference_layer<double>(absorb, w, x.data(), x.data(), ya.data());
            double mag = 0;
            for (double v : yn) mag = std::max(mag, std::abs(v));
            INFO("q_rank " << q_rank << " causal " << causal << " |y| " << mag);
            CHECK(mag > 0.01);
            CHECK(max_abs_diff(yn, ya) <= 1e-13 * mag);
        }
}

TEST_CASE("MLA: parameters and cache at the papers' configurations", "[mla][count]") {
    // DeepSeek-V2: d 5120, H 128, d_c' 1536, d_c 512, nope 128, rope 64, v 128. By hand:
    // wq_a 1536*5120 = 7,864,320; wq_b 128*192*1536 = 37,748,736; wkv_a 576*5120 = 2,949,120;
    // wkv_b 128*256*512 = 16,777,216; wo 5120*16384 = 83,886,080; sum 149,225,472; norms 1536 + 512.
    // DeepSeek-V3 (d 7168): 11,010,048 + 37,748,736 + 4,128,768 + 16,777,216 + 117,440,512 = 187,105,280.
    // DeepSeek-V2-Lite (d 2048, H 16, wq 3072 x 2048 = 6,291,456): + 1,179,648 + 2,097,152 +
    // 4,194,304 = 13,762,560; norm 512.
    struct want_t {
        const char* name;
        std::uint64_t weights, norms;
    };
    for (const want_t& want : {want_t{"deepseek-v2", 149225472, 2048}, want_t{"deepseek-v3", 187105280, 2048},
                               want_t{"deepseek-v2-lite", 13762560, 512}}) {
        INFO(want.name);
        const auto& c = attn::find_latent_config(want.name);
        for (form f : {form::naive, form::absorb}) {
            const problem p = c.layer(f);
            const auto n = attn::analytic_params(p);
            CHECK(n.weights() == want.weights);
            CHECK(n.norms() == want.norms);
            std::uint64_t specs = 0;
            for (const auto& t : attn::weight_specs(p)) specs += t.parameters();
            CHECK(specs == n.total());
            // cache per token: absorbed d_c + d_h^R = 576 elements; naive H (192 + 128)
            CHECK(attn::kv_cache_elements_per_token(p) == (f == form::absorb ? 576u : c.heads * 320u));
        }
        const problem a = c.layer(form::absorb);
        CHECK(attn::kv_cache_bytes_per_token(a, attn::kv_dtype::f32) == 2304u);
        CHECK(attn::kv_cache_bytes_per_token(a, attn::kv_dtype::bf16) == 1152u);
        CHECK(attn::kv_cache_bytes_per_token(a, attn::kv_dtype::int8) == 580u); // 576 + one fp32 scale
    }
    // the weights a small layer allocates, drawn: the closed form
    for (std::size_t q_rank : {std::size_t(0), std::size_t(8)}) {
        const problem p = small(4, q_rank, form::absorb, 3, false);
        const auto w = attn::random_weights<float>(p, 1);
        CHECK(attn::parameter_elements(p, w) == attn::analytic_params(p).total());
        CHECK(w[lw::uk_t].size() == 4u * 16 * 8); // the derived W^UK transposed, held apart
    }
    // V2-Lite's decode intensity per cached f32 byte: absorbed 2*16*(576+512)/2304, naive 2*16*320/20480
    const auto& lite = attn::find_latent_config("deepseek-v2-lite");
    CHECK(attn::decode_intensity(lite.layer(form::absorb), attn::kv_dtype::f32) == Approx(34816.0 / 2304));
    CHECK(attn::decode_intensity(lite.layer(form::naive), attn::kv_dtype::f32) == Approx(10240.0 / 20480));
}

TEST_CASE("MLA: the analytic FLOP count equals the counting scalar's", "[mla][count]") {
    for (form f : {form::naive, form::absorb})
        for (std::size_t q_rank : {std::size_t(0), std::size_t(8)})
            for (bool causal : {false, true}) {
                problem p = small(2, q_rank, f, 5, causal);
                p.batch = 2;
                INFO(p.describe());
                const auto a = attn::analytic_flops(p);
                CHECK(a.full == attn::measured_flops(p));
                problem step = attn::decode_problem(p, 6); // one query over seven keys
                CHECK(attn::analytic_flops(step).full == attn::measured_flops(step));
            }
    // one stage by hand: RMSNorm of d_c = 16 per row: 48 mul, 16 add, 2 div, 1 sqrt; 5 rows
    const auto c = attn::analytic_flops(small(2, 0, form::naive, 5, false));
    CHECK(c.full.at(attn::stage::kv_norm, attn::op::mul) == 5u * 48);
    CHECK(c.full.at(attn::stage::kv_norm, attn::op::sqrt) == 5u);
    // rope: (5 query rows x 2 heads + 5 key rows) x 2 pairs x (4 mul, 2 add)
    CHECK(c.full.stage_total(attn::stage::rope) == 15u * 2 * 6);
}

TEST_CASE("MLA: every variant passes both forms, core and layer, against fp64", "[mla][variants]") {
    attn::run_options opt;
    opt.threads = 2;
    for (form f : {form::naive, form::absorb})
        for (const problem& p : {small(4, 0, f, 37, true), small(2, 8, f, 19, false)}) {
            for (const auto& v : attn::registry()) {
                if (!attn::refusal(v, p, attn::mode::layer, attn::dtype::f32, attn::device::cpu).empty()) continue;
                INFO(v.name << " on " << p.describe());
                for (attn::mode m : {attn::mode::core, attn::mode::layer}) {
                    INFO(attn::enum_name(m));
                    const auto r = attn::check::check_case<float>(v, p, m, opt, 3);
                    INFO("err/bound " << r.ratio);
                    CHECK(r.pass);
                }
                if (attn::refusal(v, p, attn::mode::layer, attn::dtype::bf16, attn::device::cpu).empty()) {
                    const auto b = attn::check::check_case<attn::bf16>(v, p, attn::mode::layer, opt, 3);
                    INFO("bf16 err/bound " << b.ratio);
                    CHECK(b.pass);
                }
                if (p.causal) {
                    const auto d = attn::check_decode<float>(v, p, 20, attn::decode_fill::prefill, opt, 4);
                    INFO("decode err/bound " << d.ratio);
                    CHECK(d.pass);
                }
            }
        }
}

namespace {

// The mutants, each a change of the family's semantics (attn::latent_semantics) or of the
// core's scale, run through the fp32 reference kernels and compared with the real family's
// expectation.
struct halves : attn::latent_semantics { // RoPE on (i, i + d_h^R/2) instead of (2i, 2i+1)
    static std::pair<std::size_t, std::size_t> pair(std::size_t i, std::size_t rope) { return {i, i + rope / 2}; }
};
struct no_norm : attn::latent_semantics {
    static constexpr bool normalise = false;
};
struct key_at_query : attn::latent_semantics { // every key rotated at the (last) query's position
    static long long key_position(long long, long long last_query) { return last_query; }
};

template <class S>
std::vector<float> mutant_layer(const problem& p, const attn::check::inputs& in, double scale) {
    static const attn::kernel_set<float> k = attn::reference::kernels<float>();
    const attn::weights<float> w = in.w;
    attn::layer_buffers<float> ws;
    const attn::layer_call<float> call{k, p, w, {}, ws};
    const auto ops = attn::mla_family::project<float, S>(call, in.x_q.data(), in.x_kv.data(), 0);
    problem a = attn::core_problem(p);
    a.scale = scale;
    std::vector<float> ctx(a.batch * a.n_q * a.o_width());
    k.core(a, {ops.q, ops.k, ops.v, attn::interleaved_heads<float>(ctx.data(), a.batch, a.n_q, a.heads, a.v_dim())},
           {});
    std::vector<float> y(p.batch * p.n_q * p.d_model);
    attn::mla_family::output<float>(call, ctx.data(), y.data());
    return y;
}

} // namespace

TEST_CASE("MLA: the checker rejects the mutants and passes the real semantics", "[mla][mutants]") {
    for (form f : {form::naive, form::absorb}) {
        problem p = small(2, 8, f, 9, true);
        INFO(p.describe());
        const auto in = attn::check::make_inputs(p, attn::mode::layer, 7);
        const auto e = attn::check::expect(p, attn::mode::layer, in);
        const double u = attn::check::unit_roundoff<float>();
        const double right = p.softmax_scale(), nope_only = 1.0 / std::sqrt(double(p.nope_dim()));
        auto ratio = [&](const std::vector<float>& y) { return attn::check::compare(y, e.ref, e.bound, u).ratio; };
        CHECK(ratio(mutant_layer<attn::latent_semantics>(p, in, right)) <= 1.0);
        CHECK(ratio(mutant_layer<halves>(p, in, right)) > 1.0);
        CHECK(ratio(mutant_layer<no_norm>(p, in, right)) > 1.0);
        CHECK(ratio(mutant_layer<key_at_query>(p, in, right)) > 1.0);
        CHECK(ratio(mutant_layer<attn::latent_semantics>(p, in, nope_only)) > 1.0);
    }
}

TEST_CASE("MLA: bad widths are refused in one line", "[mla]") {
    auto message = [](const problem& p) {
        try {
            p.validate();
        } catch (const attn::error& e) {
            return std::string(e.what());
        }
        return std::string();
    };
    CHECK(message(attn::mla(32, 2, 0, 16, 8, 3, 6, form::naive, 4)) ==
          "MLA's qk_rope_head_dim must be even and >= 2 (got 3)");
    CHECK(message(attn::mla(32, 2, 0, 0, 8, 4, 6, form::naive, 4)) == "MLA's kv_lora_rank must be >= 1 (got 0)");
    CHECK(message(attn::mla(32, 2, 0, 16, 8, 4, 6, form::none, 4)) == "MLA needs a form, naive or absorb (got none)");
    CHECK(message(attn::mla(32, 2, 0, 16, 0, 4, 6, form::naive, 4)) ==
          "MLA's query/key head d_head=4 must exceed qk_rope_head_dim=4 (qk_nope_head_dim = d_head - "
          "qk_rope_head_dim >= 1)");
}

TEST_CASE("MLA: absorbed decode with a value wider than the registers, fewer heads than lanes", "[mla][decode]") {
    // d_c 168 + d_h^R 4, 4 heads: the absorbed core is MQA with R = 4 < lanes heads per key/value
    // head (C > 1), a value of 168 dims = 10 whole batches of 16 (AVX-512) past the 8 kept in
    // registers for the scores, and 8 dims left over: P V's DB blocks, its batches one at a time
    // and its scalar tail all run; every cache type through the variants with a kv core.
    attn::run_options opt;
    opt.threads = 2;
    const problem p = attn::mla(32, 4, 0, 168, 8, 4, 6, form::absorb, 1);
    for (const auto& v : attn::registry()) {
        if (!v.kv.bf16) continue;
        INFO(v.name);
        const auto f = attn::check_decode<float>(v, p, 70, attn::decode_fill::prefill, opt, 5);
        INFO("f32 err/bound " << f.ratio);
        CHECK(f.pass);
        attn::with_kv_storage(attn::kv_dtype::bf16, [&]<class S>(S) {
            CHECK(attn::check_decode_kv<S>(v, p, 70, attn::decode_fill::prefill, opt, 5, 1.0).same.pass);
        });
        attn::with_kv_storage(attn::kv_dtype::int8, [&]<class S>(S) {
            CHECK(attn::check_decode_kv<S>(v, p, 70, attn::decode_fill::prefill, opt, 5, 1.0).same.pass);
        });
    }
}
