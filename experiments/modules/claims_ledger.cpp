// attn.claims: the ledger from C12 on (C1-C11, seed 000's worked example, are claims_toy.cpp).
// Each claim's figures come from attn.count and attn.sources beside the document's numbers.
module;
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>
module attn.claims;
import attn.core;
import attn.count;
import attn.results;
import attn.sources;
import attn.families;

namespace attn::claims {
using detail::s000, detail::s001, detail::s003, detail::s004;
namespace {

std::string g(std::uint64_t v) { return grouped(v); }
std::string f(double v, int d) { return sources::rounded(v, d); }
double ratio(std::uint64_t a, std::uint64_t b) { return double(a) / double(b); }

} // namespace

std::vector<claim> ledger() {
    std::vector<claim> c;
    detail::toy_claims(c);
    const detail::adder add{c};

    const std::size_t N = 1024, d = 512;
    auto flops_at = [&](problem p) {
        p.n_q = p.n_kv = N;
        return analytic_flops(p);
    };
    const auto f1 = flops_at(single_head(d, N)), f8 = flops_at(mha(d, 8, N)), f64 = flops_at(mha(d, 64, N));
    const auto fw = flops_at(wide(d, 8, N));
    const auto x_full = attention_crossover(mha(d, 8, 1), convention::full);
    const auto x_mm = attention_crossover(mha(d, 8, 1), convention::matmul);
    const double grow8 = 100.0 * (ratio(f8.full_flops(), f1.full_flops()) - 1.0);
    const double grow64 = 100.0 * (ratio(f64.full_flops(), f1.full_flops()) - 1.0);
    const std::string cost_measured = "d_model=512, N=1024: matmul-only " + g(f1.matmul_flops()) +
                                      " FLOPs for H=1, 8 and 64 alike; full count " + g(f1.full_flops()) + " (H=1), " +
                                      g(f8.full_flops()) + " (H=8, +" + f(grow8, 2) + "%), " + g(f64.full_flops()) +
                                      " (H=64, +" + f(grow64, 2) + "%)";
    const std::string cost_note =
        "The matmuls do not depend on H; scale and softmax cost ~6 FLOPs per (head, query, key), so they grow "
        "with H*N^2. Separately, attention overtakes the projections at N = " +
        f(x_mm.closed_form, 0) + " (matmul-only) / " + f(x_full.closed_form, 1) +
        " (full) tokens for d_model=512, H=8.";
    // "the same cost": the matmuls are what the claim says; the full count (scale, softmax) is the
    // reading "all the arithmetic" that its words extend to.
    const std::vector<figure> cost_figures = {
        cost("matmul-only FLOPs, H=8 / H=1", 1, ratio(f8.matmul_flops(), f1.matmul_flops())),
        cost("matmul-only FLOPs, H=64 / H=1", 1, ratio(f64.matmul_flops(), f1.matmul_flops())),
        cost("full FLOPs, H=8 / H=1", 1, ratio(f8.full_flops(), f1.full_flops()), part::scope),
        cost("full FLOPs, H=64 / H=1", 1, ratio(f64.full_flops(), f1.full_flops()), part::scope)};

    // ---- seed 000 ----
    add(s000,
        "Splitting d_model into heads adds no significant hardware cost, as each head's matrices shrink in "
        "proportion.",
        "attnbench flops", cost_measured, cost_figures, cost_note);

    // ---- seed 001 ----
    add(s001, "With d_k = d_v = d_model/h the total cost stays close to one full-width head.", "attnbench flops",
        cost_measured, cost_figures, cost_note);
    {
        std::vector<figure> fig;
        for (std::size_t h : {1, 2, 4, 8, 16, 32, 64})
            fig.push_back(exact("H * d_head, H=" + std::to_string(h), double(d), double(mha(d, h, 1).q_width())));
        add(s001, "Concatenating h head outputs of width d_model/h restores width d_model.", "attnbench params",
            std::string("H * d_head = 512 for H in {1, 2, 4, ..., 64}: ") +
                (judge(fig) == verdict::confirmed ? "yes" : "NO"),
            fig);
    }
    {
        const problem p = mha(d, 8, N);
        const std::uint64_t before = p.batch * p.n_q * p.d_model, after = p.batch * p.heads * p.n_q * p.qk_dim();
        add(s001,
            "Each head's output is N x d_model/h; reshaping (batch, N, d_model) to (batch, h, N, d_model/h) "
            "loses nothing.",
            "attnbench toy",
            "toy heads are 2 x 2; d_model=512, H=8, N=1024: " + g(before) + " elements before, " + g(after) + " after",
            {exact("elements after the reshape = elements before", double(before), double(after))});
    }

    // ---- seed 003 ----
    const auto var = sources::scaling_variance({1, 4, 16, 64, 256}, 20000, 16, 1);
    {
        std::string m, ms;
        std::vector<figure> fig, figs;
        for (const auto& r : var) {
            const std::string at = "d_k=" + std::to_string(r.d_k);
            m += (m.empty() ? "" : ", ") + at + ": " + f(r.var_score, 2);
            ms += (ms.empty() ? "" : ", ") + at + ": " + f(r.var_scaled, 3);
            fig.push_back(estimate("Var(q.k), " + at, double(r.d_k), r.var_score));
            fig.push_back(estimate("Var(q_l k_l), " + at, 1, r.var_product));
            figs.push_back(estimate("Var(q.k/sqrt(d_k)), " + at, 1, r.var_scaled));
        }
        add(s003, "For components of mean 0 and variance 1, Var(q.k) = d_k Var(q_l k_l) = d_k.",
            "attnbench claims (seeded Monte Carlo, 20,000 samples per d_k)", "Var(q.k): " + m, fig,
            "Within 5% (the Monte Carlo error) at every d_k.");
        add(s003, "Dividing by sqrt(d_k) makes the score variance about 1 whatever d_k is.",
            "attnbench claims (seeded Monte Carlo)", "Var(q.k/sqrt(d_k)): " + ms, figs);
        const auto& big = var.back();
        add(s003, "Unscaled scores at large d_k saturate the softmax onto one key.",
            "attnbench claims (seeded Monte Carlo, 16 keys)",
            "mean largest weight at d_k=256: " + f(big.max_weight_unscaled, 3) + " unscaled vs " +
                f(big.max_weight_scaled, 3) + " scaled; at d_k=1: " + f(var.front().max_weight_unscaled, 3),
            {bound("mean largest weight, unscaled, d_k=256: 'nearly 100%', at least 0.8", relation::at_least, 0.8,
                   big.max_weight_unscaled),
             bound("mean largest weight, scaled, d_k=256: unsaturated, at most 0.5", relation::at_most, 0.5,
                   big.max_weight_scaled, part::scope)});
    }
    const auto hull = sources::hull_search(7200, 400, 1e-3, 3.0);
    add(s003, "k3 = (5,5) is the average of k1 and k2, so its score is always the mean of theirs.", "attnbench hull",
        "max |s3 - (s1+s2)/2| over " + g(hull.n_theta * hull.n_r) + " queries = " + f(hull.max_mean_residual, 15),
        {identity("max |s3 - (s1+s2)/2| over the queries", 0, hull.max_mean_residual)},
        "Rounding only (exact in real arithmetic).");
    {
        const auto& k = sources::hull_keys;
        std::vector<figure> fig;
        std::string mins;
        int best = 0;
        const double doc_min[4] = {0, 0, 5, 2};
        for (int i = 0; i < 4; ++i) {
            const double m = std::min(k[i][0], k[i][1]);
            if (m > std::min(k[best][0], k[best][1])) best = i;
            mins += (i ? ", " : "") + f(m, 0);
            fig.push_back(exact("min of k" + std::to_string(i + 1) + "'s coordinates", doc_min[i], m));
        }
        fig.push_back(exact("best key by min (1-based)", 3, best + 1));
        add(s003, "By min(first, second coordinate), k3 is the best key: 5 against 0, 0 and 2.", "attnbench hull",
            "min per key: " + mins, fig);
    }
    const figure never_first = exact("queries where k3 is strictly first", 0, double(hull.k3_strictly_first));
    {
        figure margin = identity("max of s3 - max(s1, s2) over the queries", 0, hull.max_margin);
        margin.rel = relation::at_most;
        add(s003, "No single head can score k3 strictly above both k1 and k2.", "attnbench hull",
            std::to_string(hull.k3_strictly_first) + " of " + g(hull.n_theta * hull.n_r) +
                " searched queries; max of s3 - max(s1,s2) = " + f(hull.max_margin, 15),
            {never_first, margin});
    }
    {
        // k3 = a k1 + b k2 + c k4 with a + b + c = 1 (Cramer's rule); it is interior to the hull
        // (the triangle k1, k2, k4) when all three are > 0, on its edge when one is 0.
        const auto& k = sources::hull_keys;
        const double ux = k[0][0] - k[3][0], uy = k[0][1] - k[3][1], vx = k[1][0] - k[3][0], vy = k[1][1] - k[3][1],
                     wx = k[2][0] - k[3][0], wy = k[2][1] - k[3][1];
        const double det = ux * vy - vx * uy, a = (wx * vy - vx * wy) / det, b = (ux * wy - wx * uy) / det;
        const bool interior = std::min({a, b, 1 - a - b}) > 0;
        add(s003, "A single query only ever highlights vertices of the keys' convex hull, never an interior point.",
            "attnbench hull",
            "largest weight on k3 found " + f(hull.best_w3, 9) + " at " +
                f(hull.best_theta * 180 / 3.141592653589793, 1) + " deg, |q|=" + f(hull.best_r, 2) +
                "; bound 1/(3+exp(-3 sqrt2 |q|)) < 1/3; |search - bound| <= " + f(hull.max_abs_search_minus_bound, 15),
            {never_first, exact("k3 interior to the hull (1 yes, 0 no; smallest barycentric coordinate > 0)", 1,
                                interior ? 1 : 0, part::scope)},
            "k3 is never strictly first, but it is not interior either: it lies on the hull's edge k1-k2 (the hull "
            "is the triangle k1, k2, k4), so along q ~ (1,1) it ties k1 and k2 for first; and softmax still gives it "
            "weight, up to a supremum of 1/3, never attained.");
    }
    {
        const auto t = sources::two_heads(0.0, {1.0});
        auto list = [](const std::vector<double>& v) {
            std::string s;
            for (double x : v) s += (s.empty() ? "" : ", ") + f(x, 0);
            return "(" + s + ")";
        };
        auto argmax = [](const std::vector<double>& v) {
            return double(std::max_element(v.begin(), v.end()) - v.begin() + 1);
        };
        add(s003,
            "Two heads q1 ~ (1,0) and q2 ~ (0,1) prefer k1 and k2 respectively; k3 scores 5 in both, k1 scores "
            "10 and 0; downstream nonlinear logic can then pick k3.",
            "attnbench hull",
            "head 1 scores " + list(t.s1) + ", head 2 " + list(t.s2) + "; min readout " + list(t.readout) + " picks k" +
                std::to_string(t.winner + 1) + "; softmax of the readout puts " + f(t.selection[0][2], 3) + " on k3",
            {exact("head 1's preferred key", 1, argmax(t.w1)), exact("head 2's preferred key", 2, argmax(t.w2)),
             exact("k3's score, head 1", 5, t.s1[2]), exact("k3's score, head 2", 5, t.s2[2]),
             exact("k1's score, head 1", 10, t.s1[0]), exact("k1's score, head 2", 0, t.s2[0]),
             exact("key the min readout picks", 3, t.winner + 1)},
            "We show a fixed readout that works; that one is learned is not tested.");
    }
    {
        double off = 0, off_bias = 0;
        for (std::size_t dm : {64, 128, 256, 512, 1024})
            for (std::size_t h : {1, 2, 4, 8, 16}) {
                off += analytic_params(mha(dm, h, 1)).total() != 4 * dm * dm ||
                       random_weights<float>(mha(dm, h, 1), 1).count() != 4 * dm * dm;
                problem b = mha(dm, h, 1);
                b.bias = true;
                off_bias += analytic_params(b).total() != 4 * dm * dm + 4 * dm;
            }
        const auto p512 = analytic_params(mha(d, 8, 1));
        add(s003,
            "Per head, W_Q, W_K, W_V are d_model x d_model/H: 3 d_model^2 over all heads, plus d_model^2 for "
            "W_O, so 4 d_model^2 in total, as for one head.",
            "attnbench params",
            "d_model=512, H=8: W_q+W_k+W_v = " + g(p512.wq + p512.wk + p512.wv) + ", W_o = " + g(p512.wo) + ", total " +
                g(p512.total()) +
                "; equal to 4 d_model^2 for all d_model in {64..1024}, H in {1..16}: " + (off == 0 ? "yes" : "NO"),
            {exact("W_q+W_k+W_v, d_model=512, H=8", 3.0 * d * d, double(p512.wq + p512.wk + p512.wv)),
             exact("W_o, d_model=512, H=8", double(d * d), double(p512.wo)),
             exact("(d_model, H) of 25 where parameters != 4 d_model^2", 0, off)});
        add(s003, "Multiple heads do not multiply the parameter count.", "attnbench params",
            std::string("MHA/single-head ratio 1.000 at every d_model and H; with biases 4 d_model^2 + 4 d_model "
                        "either way: ") +
                (off_bias == 0 ? "yes" : "NO"),
            {exact("(d_model, H) of 25 where parameters != 4 d_model^2", 0, off),
             exact("(d_model, H) of 25 where parameters with biases != 4 d_model^2 + 4 d_model", 0, off_bias)},
            "Exactly, with or without biases.");
    }
    add(s003, "Multiple heads do not multiply the computation.", "attnbench flops", cost_measured, cost_figures,
        cost_note);
    {
        const auto kv_mha = kv_cache_bytes_per_token(mha(d, 8, 1), 2),
                   kv_mqa = kv_cache_bytes_per_token(mqa(d, 8, 1), 2);
        const auto p_mha = analytic_params(mha(d, 8, 1)).total(), p_mqa = analytic_params(mqa(d, 8, 1)).total();
        add(s003,
            "Multi-Query Attention gives up a little expressivity for large memory and speed gains at "
            "inference.",
            "attnbench flops; attnbench params",
            "d_model=512, H=8, fp16: K/V cache " + g(kv_mha) + " -> " + g(kv_mqa) + " bytes/token/layer (" +
                f(ratio(kv_mha, kv_mqa), 0) + "x smaller); parameters " + g(p_mha) + " -> " + g(p_mqa),
            {exact("K/V cache MHA / MQA, H=8 (one K/V head instead of H)", 8, ratio(kv_mha, kv_mqa)),
             unmeasured("expressivity given up"), unmeasured("speed gained at inference")},
            "The memory saving is exactly a factor H on the K/V cache; expressivity and speed are not measured "
            "by these commands.");
    }
    add(s003,
        "Multi-head design swaps one large matrix multiplication for several smaller parallel ones of the "
        "same total size.",
        "attnbench flops",
        "multiply-adds at d_model=512, N=1024: " + g(f1.total_macs()) + " (H=1) = " + g(f8.total_macs()) +
            " (H=8) = " + g(f64.total_macs()) + " (H=64)",
        {exact("multiply-adds, H=8 / H=1", 1, ratio(f8.total_macs(), f1.total_macs())),
         exact("multiply-adds, H=64 / H=1", 1, ratio(f64.total_macs(), f1.total_macs()))});

    // ---- seed 004 ----
    add(s004, "With d_model = 512 and h = 8, each head has d_k = 64.", "attnbench params",
        "d_head = " + std::to_string(mha(d, 8, 1).qk_dim()), {exact("d_k", 64, double(mha(d, 8, 1).qk_dim()))});
    {
        const auto p = analytic_params(mha(d, 8, 1));
        add(s004, "Each head's projection is 512 x 64 and reads the whole 512-wide input.", "attnbench params",
            "W_q per head = " + g(p.wq / 8) +
                " = 512 x 64 parameters; each projected value sums over all 512 "
                "inputs",
            {exact("W_q parameters per head", 512 * 64, double(p.wq / 8))});
        add(s004, "The 8 head outputs of width 64 concatenate to a 512-wide vector.", "attnbench params",
            "8 x 64 = " + std::to_string(mha(d, 8, 1).q_width()),
            {exact("width of the concatenation", 512, double(mha(d, 8, 1).q_width()))});
        add(s004, "W^O is 512 x 512 = 262,144 learnable parameters.", "attnbench params", "W_o = " + g(p.wo),
            {exact("W_o parameters", 262144, double(p.wo))});
    }
    {
        std::vector<double> buf(1);
        const auto v = interleaved_heads<double>(buf.data(), 1, 1, 8, 64);
        const std::size_t start2 = std::size_t(v.head_stride); // head 2's first column (0-based)
        const auto width = mha(d, 8, 1).q_width();
        add(s004,
            "In the concatenated vector, entries 1-64 come from head 1, 65-128 from head 2, and each output of "
            "W^O sums over all of them.",
            "attnbench claims (attn.core's head layout)",
            "head 2 starts at column " + std::to_string(start2 + 1) + " (1-based); W_o row length " +
                std::to_string(width),
            {exact("head 2's first column (1-based)", 65, double(start2 + 1)),
             exact("W_o row length", 512, double(width))});
    }
    {
        const double rf = ratio(fw.full_flops(), f1.full_flops()), rm = ratio(fw.total_macs(), f1.total_macs());
        const double rp = ratio(analytic_params(wide(d, 8, 1)).total(), analytic_params(single_head(d, 1)).total());
        add(s004, "Eight full-size (512-wide) heads would cost 8 times a single head.", "attnbench flops --wide",
            "d_model=512, N=1024: multiply-adds " + f(rm, 4) + "x, full FLOPs " + f(rf, 4) + "x, parameters " +
                f(rp, 4) + "x",
            {cost("multiply-adds, 8 wide heads / 1", 8, rm), cost("parameters, 8 wide heads / 1", 8, rp),
             cost("full FLOPs, 8 wide heads / 1", 8, rf, part::scope)},
            "Exactly 8x in multiply-adds and parameters; the full count differs from 8x only by the per-dot-product "
            "-1 terms.");
    }
    add(s004,
        "One 512-long dot product per token vs 8 of length 64: the projections and the output fusion cost "
        "about the same as for one giant head.",
        "attnbench flops",
        "projection FLOPs at N=1024: " + g(f1.projection_full()) + " (H=1) vs " + g(f8.projection_full()) +
            " (H=8), full count",
        {cost("projection FLOPs (full count), H=8 / H=1", 1, ratio(f8.projection_full(), f1.projection_full())),
         cost("projection FLOPs (matmul-only), H=8 / H=1", 1, ratio(f8.projection_matmul(), f1.projection_matmul()))},
        "Exactly equal, not just roughly; the attention stages are the part that moves with H (see C12).");

    // ---- DeepSeek-V2, Table 1: the cache per token of each family, at V2's widths ----
    {
        const auto& v2 = find_latent_config("deepseek-v2");
        const std::size_t layers = 60, dh = v2.nope; // V2: 60 layers, d_h = 128 (section 3.1.2)
        auto per_token = [&](std::size_t kv_heads) { // MHA, GQA, MQA with V2's n_h heads of d_h
            problem p = gqa(v2.d_model, v2.heads, kv_heads, 1);
            p.d_head = dh;
            return double(kv_cache_elements_per_token(p) * layers);
        };
        const double mla_l = double(kv_cache_elements_per_token(v2.layer(form::absorb)) * layers);
        const double n_h = double(v2.heads), d_h = double(dh), l = double(layers);
        const std::string at = "n_h 128, d_h 128, d_c 512, d_h^R 64, l 60";
        add(detail::ds2,
            "Cached elements per token: MHA 2 n_h d_h l, GQA 2 n_g d_h l, MQA 2 d_h l, MLA (d_c + d_h^R) l.",
            "attnbench params --family mla --config deepseek-v2",
            at + ": MHA " + g(std::uint64_t(per_token(v2.heads))) + ", GQA n_g=8 " + g(std::uint64_t(per_token(8))) +
                ", MQA " + g(std::uint64_t(per_token(1))) + ", MLA " + g(std::uint64_t(mla_l)) +
                " elements per token (what the caches allocate)",
            {exact("MHA, 2 n_h d_h l", 2 * n_h * d_h * l, per_token(v2.heads)),
             exact("GQA n_g = 8, 2 n_g d_h l", 2 * 8 * d_h * l, per_token(8)),
             exact("MQA, 2 d_h l", 2 * d_h * l, per_token(1)),
             exact("MLA, (d_c + d_h^R) l", double(v2.kv_rank + v2.rope) * l, mla_l)},
            "Elements, whatever the storage type; attnbench params gives the bytes per cache type.");
        add(detail::ds2, "MLA's cache is about 9/2 d_h l elements per token.",
            "attnbench params --family mla --config deepseek-v2",
            at + ": " + g(std::uint64_t(mla_l)) + " = " + f(mla_l / (d_h * l), 2) + " d_h l",
            {at_decimals("MLA's elements per token / (d_h l)", 4.5, mla_l / (d_h * l), 2)},
            "Exactly 9/2 at V2's widths (d_c = 4 d_h, d_h^R = d_h / 2), not only about.");
        add(detail::ds2, "MLA's cache equals that of GQA with only 2.25 groups.",
            "attnbench params --family mla --config deepseek-v2",
            "MLA / (GQA per group, 2 d_h l) = " + f(mla_l / (2 * d_h * l), 4) + "; against MHA's " +
                g(std::uint64_t(per_token(v2.heads))) + ": " + f(per_token(v2.heads) / mla_l, 1) + "x smaller",
            {at_decimals("GQA groups with MLA's cache", 2.25, mla_l / (2 * d_h * l), 2)});
    }

    // ---- local attention: Mistral 7B's rolling buffer, Shazeer 2019's local rows ----
    {
        // Mistral 7B (Table 1): d 4096, 32 heads of 128, 8 key/value heads, 32 layers, W 4096
        problem m = gqa(4096, 32, 8, 1);
        m.causal = true;
        problem mw = m;
        mw.window = 4096;
        const std::uint64_t L = 32768, layers = 32;
        const std::uint64_t full = kv_cache_bytes(m, L, kv_dtype::f16) * layers,
                            rolled = kv_cache_bytes(mw, L, kv_dtype::f16) * layers;
        add(detail::mistral,
            "On a sequence of 32k tokens the rolling buffer (W = 4096) cuts the cache's memory 8x, without hurting "
            "the model's quality.",
            "attnbench flops --causal --window 4096",
            "d 4096, 8 key/value heads of 128, 32 layers, fp16: " + g(full) + " bytes per sequence at L 32,768 vs " +
                g(rolled) + " in a " + g(mw.window) + "-slot rolling buffer",
            {cost("cache bytes at L 32768, no window / W 4096", 8, ratio(full, rolled)),
             unmeasured("the model's quality with the window (no trained model here)")},
            "The memory stops growing at W tokens, so the factor is L / W: 8 at 32k, 16 at 64k. The quality half "
            "of the claim needs a trained model.");
        add(detail::mistral, "With W = 4096 and 32 layers, information reaches about 131K tokens back (W x layers).",
            "attnbench flops --causal --window 4096",
            g(mw.window) + " x " + g(layers) + " = " + g(mw.window * layers) + " tokens",
            {exact("W x layers", 131072, double(mw.window * layers))},
            "Each layer moves information at most W - 1 positions; 131,072 = 131K with K = 1000, 128 Ki.");
    }
    {
        // Shazeer 2019 Table 2, decoder µs per token on TPUv2: MHA 46, MHA local 23; MQA 3.8, MQA local
        // 3.3 (h 8, d_k = d_v = 128). If a step's time were its cache reads, local attention would save
        // MQA 1/h of what it saves MHA (its cache is h times smaller at any window).
        problem mha_s = mha(1024, 8, 1), mqa_s = mqa(1024, 8, 1);
        mha_s.d_head = mqa_s.d_head = 128;
        const double cache_ratio = double(kv_cache_bytes_per_token(mha_s, kv_dtype::f32)) /
                                   double(kv_cache_bytes_per_token(mqa_s, kv_dtype::f32));
        const double save_mha = 46 - 23, save_mqa = 3.8 - 3.3;
        add(detail::shazeer,
            "Local attention halves multi-head decoding's time per token (46 to 23 µs) and trims multi-query's "
            "(3.8 to 3.3 µs): the saving follows the key/value cache each step reads.",
            "attnbench flops",
            "MHA / MQA cache bytes per token at h 8, d_k = d_v = 128: " + f(cache_ratio, 2) + "; printed savings " +
                f(save_mha, 1) + " µs (MHA) vs " + f(save_mqa, 1) + " µs (MQA), ratio " + f(save_mha / save_mqa, 1) +
                "; by the cache ratio MQA would save " + f(save_mha / cache_ratio, 3) + " µs",
            {printed("MHA local / MHA decoder time", "0.5", 23.0 / 46.0),
             bound("MHA saves more than MQA (its cache is h times larger)", relation::at_least, 1, save_mha / save_mqa),
             estimate("MQA's saving predicted from MHA's by the cache ratio [µs]", save_mqa, save_mha / cache_ratio,
                      part::scope)},
            "Ratios only: TPU microseconds do not transfer. The direction holds: the larger cache gains more from a "
            "window. The size does not: MHA saves 46x what MQA saves while its cache is 8x larger, so the cache "
            "reads explain MQA's row only if most of MQA's decoder time is not cache reads (weights, the "
            "projections), and MHA's only if TPUv2 read its per-head caches far below bandwidth.");
    }
    return c;
}

} // namespace attn::claims
