// attnbench flops: what one layer costs in operations, by stage, under three conventions; the
// analytic count held to a measured one (the reference on a counting scalar); how the cost moves
// with H and with sequence length; and the key/value cache each family keeps per token.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>
#include "commands.hpp"
#include "numbers.hpp"
#include "output.hpp"
#include "family_flags.hpp"
import attn.families;
import attn.grids;
import attn.count;
import attn.results;

namespace attn::cli {
namespace {

struct flops_args {
    problem p = mha(512, 8, 1024);
    std::size_t n = 1024, n_kv = 0, kv_heads = 0;
    bool wide_heads = false, measure = false, json = false, csv = false;
    std::uint64_t seed = 1;
    std::string out;
    family_flags family;
    bool d_model_given = false, heads_given = false;
};

/// Measuring runs the reference on counted scalars (tens of ns per operation): only when small.
constexpr std::uint64_t auto_measure_limit = 20'000'000;

const char* conventions_text =
    "Conventions (peers disagree; all three are given):\n"
    "  MACs         one per multiply-add of a matmul (fvcore's 'flop').\n"
    "  matmul-only  2 FLOPs per multiply-add, projections + QK^T + PV; no bias, scale or softmax\n"
    "               (the convention of FlashAttention's and ggml's reported FLOPs; FlashAttention's\n"
    "               benchmark also leaves out the projections).\n"
    "  full         every scalar operation the reference performs, 1 FLOP each: add (subtract\n"
    "               counted as add), mul, div, exp, compare. A dot product of length n is 2n-1.\n";

std::string family_label(const problem& p) {
    if (p.latent_family()) return "MLA " + std::string(enum_name(p.form));
    return p.family() == family::gqa ? "GQA:" + std::to_string(p.kv_heads) : std::string(enum_label(p.family()));
}

nlohmann::json table_json(const flop_counts& c) {
    nlohmann::json j = nlohmann::json::object();
    for (std::size_t s = 0; s < n_stages; ++s) {
        nlohmann::json st = nlohmann::json::object();
        for (std::size_t o = 0; o < n_ops; ++o) st[std::string(op_name(op(o)))] = c.full.n[s][o];
        st["full"] = c.full.stage_total(stage(s));
        st["macs"] = c.macs[s];
        st["matmul_only"] = 2 * c.macs[s];
        j[std::string(stage_name(stage(s)))] = st;
    }
    return j;
}

void flops(flops_args a) {
    problem& p = a.p;
    p.n_q = a.n;
    p.n_kv = a.n_kv ? a.n_kv : a.n;
    p.kv_heads = a.kv_heads ? a.kv_heads : p.heads;
    if (a.wide_heads) p.d_head = p.d_model;
    if (names_latent(a.family)) {
        require(!a.kv_heads && !a.wide_heads, "--kv-heads and --wide are not MLA's");
        apply_family_flags(a.family, p, a.d_model_given, a.heads_given);
    } else {
        apply_family_flags(a.family, p, true, true);
    }
    p.validate();
    const bool latent = p.latent_family();
    const flop_counts c = analytic_flops(p);
    const bool measure = a.measure || c.full_flops() <= auto_measure_limit;
    flop_table measured;
    if (measure) measured = measured_flops(p, a.seed);

    // 1. the stage table
    std::vector<std::string> header{"stage"};
    for (std::size_t o = 0; o < n_ops; ++o) header.emplace_back(op_name(op(o)));
    for (const char* h : {"full [FLOPs]", "MACs [mult-adds]", "matmul-only [FLOPs]", "measured [FLOPs]"})
        header.emplace_back(h);
    text_table st(header);
    for (std::size_t s = 0; s < n_stages; ++s) {
        // the q/k/v family's stages always; another family's where it has work
        if (stage(s) > stage::proj_o && c.full.stage_total(stage(s)) == 0) continue;
        std::vector<std::string> r{std::string(stage_name(stage(s)))};
        for (std::size_t o = 0; o < n_ops; ++o) r.push_back(grouped(c.full.n[s][o]));
        r.push_back(grouped(c.full.stage_total(stage(s))));
        r.push_back(grouped(c.macs[s]));
        r.push_back(grouped(2 * c.macs[s]));
        r.push_back(measure ? grouped(measured.stage_total(stage(s))) : "-");
        st.add_row(r);
    }
    std::vector<std::string> tot{"total"};
    for (std::size_t o = 0; o < n_ops; ++o) tot.push_back(grouped(c.full.op_total(op(o))));
    tot.push_back(grouped(c.full_flops()));
    tot.push_back(grouped(c.total_macs()));
    tot.push_back(grouped(c.matmul_flops()));
    tot.push_back(measure ? grouped(measured.total()) : "-");
    st.add_row(tot);
    const bool exact = measure && measured == c.full;

    // 2. the default grid: analytic == measured, operation kind by operation kind
    const auto grid = flop_check_grid();
    std::size_t grid_equal = 0;
    for (const auto& g : grid) grid_equal += analytic_flops(g).full == measured_flops(g, a.seed);

    // 3. how the count moves with H at this d_model and N (MHA, d_head = d_model/H)
    text_table ht({"H", "d_head", "matmul-only [FLOPs]", "full [FLOPs]", "scale+softmax [FLOPs]", "full/matmul [x]"});
    nlohmann::json jh = nlohmann::json::array();
    for (std::size_t h = 1; !latent && h <= p.d_model && h <= 256; h *= 2) {
        if (p.d_model % h) continue;
        problem q = mha(p.d_model, h, p.n_q);
        q.n_kv = p.n_kv;
        q.batch = p.batch;
        q.causal = p.causal;
        q.bias = p.bias;
        const auto f = analytic_flops(q);
        std::uint64_t soft = 0;
        for (stage s : {stage::scale, stage::softmax_max, stage::softmax_exp, stage::softmax_sum, stage::softmax_div})
            soft += f.full.stage_total(s);
        ht.add_row({std::to_string(h), std::to_string(q.qk_dim()), grouped(f.matmul_flops()), grouped(f.full_flops()),
                    grouped(soft), format_number(double(f.full_flops()) / double(f.matmul_flops()), 4)});
        jh.push_back({{"heads", h},
                      {"d_head", q.qk_dim()},
                      {"matmul_only", f.matmul_flops()},
                      {"macs", f.total_macs()},
                      {"full", f.full_flops()},
                      {"scale_softmax", soft},
                      {"attention_full", f.attention_full()},
                      {"projection_full", f.projection_full()}});
    }

    // 4. crossover: the self-attention length where the attention stages overtake the projections
    text_table xt({"family", "causal", "matmul-only closed form [tokens]", "first N [tokens]",
                   "full closed form [tokens]", "first N [tokens]"});
    nlohmann::json jx = nlohmann::json::array();
    // MLA: both forms beside MHA, GQA:2 and MQA whose heads are MLA's d_h (DeepSeek-V2's Table 1)
    std::vector<problem> fams;
    if (latent) {
        for (form f : {form::absorb, form::naive}) {
            problem m = p;
            m.form = f;
            m.batch = m.n_q = m.n_kv = 1;
            m.causal = false;
            fams.push_back(m);
        }
        for (std::size_t g : {p.heads, std::size_t(2), std::size_t(1)}) {
            if (g > p.heads || p.heads % g || (g == 2 && p.heads <= 2)) continue;
            problem q = gqa(p.d_model, p.heads, g, 1);
            q.d_head = p.nope_dim();
            fams.push_back(q);
        }
    } else {
        fams.push_back(single_head(p.d_model, 1));
    }
    if (!latent && p.heads > 1) {
        fams.push_back(mha(p.d_model, p.heads, 1));
        fams.push_back(mqa(p.d_model, p.heads, 1));
        if (p.kv_heads > 1 && p.kv_heads < p.heads) fams.push_back(gqa(p.d_model, p.heads, p.kv_heads, 1));
        fams.push_back(wide(p.d_model, p.heads, 1));
    }
    for (auto f : fams)
        for (int causal = 0; causal < 2; ++causal) {
            f.causal = causal;
            f.bias = p.bias;
            const auto m = attention_crossover(f, convention::matmul);
            const auto u = attention_crossover(f, convention::full);
            xt.add_row({family_label(f), causal ? "yes" : "no", format_number(m.closed_form, 2), grouped(m.first_n),
                        format_number(u.closed_form, 2), grouped(u.first_n)});
            jx.push_back({{"family", family_label(f)},
                          {"heads", f.heads},
                          {"kv_heads", f.kv_heads},
                          {"d_head", f.qk_dim()},
                          {"causal", f.causal},
                          {"bias", f.bias},
                          {"matmul_closed_form", m.closed_form},
                          {"matmul_first_n", m.first_n},
                          {"full_closed_form", u.closed_form},
                          {"full_first_n", u.first_n}});
        }

    // 5. FLOPs vs sequence length by stage (self-attention, this problem's family)
    text_table nt({"N [tokens]", "projections full [FLOPs]", "attention full [FLOPs]", "attention matmul-only [FLOPs]",
                   "attention/projections (full) [x]"});
    nlohmann::json jn = nlohmann::json::array();
    std::vector<std::string> ncsv_header{"n_tokens"};
    for (std::size_t s = 0; s < n_stages; ++s) ncsv_header.push_back(std::string(stage_name(stage(s))) + "_flops");
    text_table ncsv(ncsv_header);
    for (std::size_t n = 16; n <= 16384; n *= 2) {
        problem q = p;
        q.n_q = q.n_kv = n;
        const auto f = analytic_flops(q);
        nt.add_row({grouped(n), grouped(f.projection_full()), grouped(f.attention_full()),
                    grouped(f.attention_matmul()),
                    format_number(double(f.attention_full()) / double(f.projection_full()), 3)});
        std::vector<std::string> r{std::to_string(n)};
        for (std::size_t s = 0; s < n_stages; ++s) r.push_back(std::to_string(f.full.stage_total(stage(s))));
        ncsv.add_row(r);
        jn.push_back({{"n", n},
                      {"stages", table_json(f)},
                      {"projection_full", f.projection_full()},
                      {"attention_full", f.attention_full()},
                      {"projection_matmul", f.projection_matmul()},
                      {"attention_matmul", f.attention_matmul()}});
    }

    // 6. key/value cache per token per layer
    text_table kt({"family", "G", "d_head", "K+V elements/token/layer", "fp16 [bytes/token/layer]",
                   "fp32 [bytes/token/layer]", "vs MHA [x]"});
    nlohmann::json jk = nlohmann::json::array();
    problem mha_shape = mha(p.d_model, p.heads, 1);
    if (latent) mha_shape.d_head = p.nope_dim();
    const std::uint64_t mha_kv = kv_cache_elements_per_token(mha_shape);
    for (const auto& f : fams) {
        const auto e = kv_cache_elements_per_token(f);
        kt.add_row({family_label(f), std::to_string(f.kv_heads), std::to_string(f.qk_dim()), grouped(e),
                    grouped(kv_cache_bytes_per_token(f, 2)), grouped(kv_cache_bytes_per_token(f, 4)),
                    format_number(double(e) / double(mha_kv), 4)});
        jk.push_back({{"family", family_label(f)},
                      {"kv_heads", f.kv_heads},
                      {"d_head", f.qk_dim()},
                      {"elements_per_token", e},
                      {"fp16_bytes_per_token", kv_cache_bytes_per_token(f, 2)},
                      {"fp32_bytes_per_token", kv_cache_bytes_per_token(f, 4)}});
    }

    // 7. local attention: a sliding window W on the causal self-attention of N tokens (N at least
    // 4 x the largest window) -- the exact
    // scored pairs, the FLOP ratio to the full causal mask, the crossover per W, the cache held
    text_table wt({"window W [keys]", "scored pairs per head", "attention matmul-only [FLOPs]",
                   "causal / windowed attention [x]", "crossover matmul-only [tokens]", "first N [tokens]",
                   "crossover full [tokens]", "first N [tokens]", "cache at L = N, f32 [bytes/sequence/layer]"});
    nlohmann::json jw = nlohmann::json::array();
    std::vector<std::size_t> windows{0, 256, 1024, 4096};
    if (p.window && std::find(windows.begin(), windows.end(), p.window) == windows.end()) windows.push_back(p.window);
    // at N = 4 x the largest window at least, so each window's N W regime shows
    problem causal = p;
    const std::size_t n_local = std::max(p.n_q, 4 * *std::max_element(windows.begin(), windows.end()));
    causal.n_q = n_local;
    causal.n_kv = causal.n_q;
    causal.causal = true;
    causal.window = 0;
    const std::uint64_t causal_attention = analytic_flops(causal).attention_matmul();
    for (const std::size_t w : windows) {
        problem q = causal;
        q.window = w;
        problem one = q;
        one.batch = one.n_q = one.n_kv = 1;
        const auto att = analytic_flops(q).attention_matmul();
        const auto m = attention_crossover(one, convention::matmul), u = attention_crossover(one, convention::full);
        const auto none = [](const crossover& x) { return x.never() ? std::string("none") : grouped(x.first_n); };
        const auto or_null = [](const crossover& x, auto v) {
            return x.never() ? nlohmann::json(nullptr) : nlohmann::json(v);
        };
        const auto root = [](const crossover& x) {
            return x.never() ? std::string("none") : format_number(x.closed_form, 2);
        };
        const std::uint64_t cache = kv_cache_bytes(q, q.n_q, kv_dtype::f32);
        wt.add_row({w ? grouped(w) : "none", grouped(q.visible_pairs()), grouped(att),
                    format_number(double(causal_attention) / double(att), 4), root(m), none(m), root(u), none(u),
                    grouped(cache)});
        jw.push_back({{"window", w},
                      {"n", q.n_q},
                      {"visible_pairs", q.visible_pairs()},
                      {"attention_matmul", att},
                      {"causal_over_windowed", double(causal_attention) / double(att)},
                      {"matmul_closed_form", or_null(m, m.closed_form)},
                      {"matmul_first_n", or_null(m, m.first_n)},
                      {"full_closed_form", or_null(u, u.closed_form)},
                      {"full_first_n", or_null(u, u.first_n)},
                      {"cache_bytes_f32", cache}});
    }

    nlohmann::json j = {{"metadata", metadata("flops")},
                        {"problem",
                         {{"describe", p.describe()},
                          {"batch", p.batch},
                          {"n_q", p.n_q},
                          {"n_kv", p.n_kv},
                          {"d_model", p.d_model},
                          {"heads", p.heads},
                          {"kv_heads", p.kv_heads},
                          {"d_head", p.qk_dim()},
                          {"causal", p.causal},
                          {"window", p.window},
                          {"bias", p.bias}}},
                        {"unit", "FLOPs (scalar operations); MACs are multiply-adds"},
                        {"conventions",
                         {{"macs", "one per multiply-add of a matmul (fvcore)"},
                          {"matmul_only", "2 per multiply-add, projections + QK^T + PV (FlashAttention, ggml)"},
                          {"full", "every add/sub, mul, div, exp, compare the reference performs, 1 each"}}},
                        {"stages", table_json(c)},
                        {"totals",
                         {{"macs", c.total_macs()},
                          {"matmul_only", c.matmul_flops()},
                          {"full", c.full_flops()},
                          {"projection_full", c.projection_full()},
                          {"attention_full", c.attention_full()}}},
                        {"measured", measure ? nlohmann::json(measured.total()) : nlohmann::json(nullptr)},
                        {"measured_equals_analytic", measure ? nlohmann::json(exact) : nlohmann::json(nullptr)},
                        {"grid", {{"cases", grid.size()}, {"equal", grid_equal}}},
                        {"vs_heads", jh},
                        {"crossover", jx},
                        {"vs_n", jn},
                        {"kv_cache", jk},
                        {"local", jw}};

    if (!a.out.empty()) {
        std::fprintf(stderr, "wrote %s\n", write_atomic(a.out, "flops.json", j.dump(2) + "\n").c_str());
        std::fprintf(stderr, "wrote %s\n", write_atomic(a.out, "flops_stages.csv", st.csv()).c_str());
        std::fprintf(stderr, "wrote %s\n", write_atomic(a.out, "flops_vs_n.csv", ncsv.csv()).c_str());
        std::fprintf(stderr, "wrote %s\n", write_atomic(a.out, "flops_vs_heads.csv", ht.csv()).c_str());
    }
    if (a.json)
        std::printf("%s\n", j.dump(2).c_str());
    else if (a.csv)
        std::printf("%s", st.csv().c_str());
    else {
        std::printf("FLOPs of one attention layer: %s\n\n%s\n", p.describe().c_str(), conventions_text);
        std::printf("Operations by stage (add..cmp are counts of scalar operations of that kind):\n");
        st.print();
        if (measure)
            std::printf("\nMeasured (reference run on a counting scalar) %s the analytic full count%s.\n",
                        exact ? "EQUALS" : "DIFFERS FROM", exact ? ", operation by operation" : " (a bug)");
        else
            std::printf("\nNot measured here: %s FLOPs would take long on the counting scalar (--measure forces it).\n",
                        grouped(c.full_flops()).c_str());
        std::printf("Default grid (%zu small cases: every family, causal or not, N_q =, <, > N_kv, bias or not, "
                    "batch 1 and 2): analytic == measured on %zu of %zu.\n\n",
                    grid.size(), grid_equal, grid.size());
        if (!latent) {
            std::printf("Against H at d_model=%zu, N_q=%zu, N_kv=%zu (MHA, d_head = d_model/H): matmul FLOPs do not "
                        "move with H; scale+softmax work grows with H*N_q*N_kv.\n",
                        p.d_model, p.n_q, p.n_kv);
            ht.print();
        }
        std::printf("\nSequence length N (self-attention) at which the attention stages' FLOPs overtake the "
                    "projections'\n(closed form = real root; first N = smallest integer where attention > "
                    "projections, by search over the analytic counts):\n");
        xt.print();
        std::printf("\nFLOPs against sequence length (%s):\n", family_label(p).c_str());
        nt.print();
        std::printf(latent
                        ? "\nKey/value cache per token per layer (MLA absorbed: one latent row d_c + d_h^R; naive: K "
                          "and V per head; MHA, GQA, MQA with MLA's d_h as their head width):\n"
                        : "\nKey/value cache per token per layer (one K and one V vector per key/value head):\n");
        kt.print();
        std::printf("\nLocal attention: a sliding window W on the causal self-attention of N = %zu tokens (each query "
                    "sees the W keys ending at its own; a null crossover: attention never overtakes, each token's W "
                    "scored keys costing less than its projections; the cache a rolling buffer of min(N, W) "
                    "tokens):\n",
                    n_local);
        wt.print();
    }
    require(!measure || exact, "measured count differs from the analytic count for " + p.describe());
    require(grid_equal == grid.size(),
            "analytic and measured counts differ on " + std::to_string(grid.size() - grid_equal) + " grid cases");
}

} // namespace

void add_flops(CLI::App& app) {
    auto a = std::make_shared<flops_args>();
    auto* cmd = app.add_subcommand("flops", "FLOPs by stage and convention, measured vs analytic, crossover, KV cache");
    cmd->add_option("--d-model", a->p.d_model, "model width")->capture_default_str()->each([a](const std::string&) {
        a->d_model_given = true;
    });
    cmd->add_option("--heads", a->p.heads, "query heads H")->capture_default_str()->each([a](const std::string&) {
        a->heads_given = true;
    });
    cmd->add_option("--kv-heads", a->kv_heads, "key/value heads G (default H)");
    cmd->add_flag("--wide", a->wide_heads, "wide-head counterfactual: every head d_model wide");
    cmd->add_option("--seq", a->n, "query length N_q")->capture_default_str();
    cmd->add_option("--seq-kv", a->n_kv, "key/value length N_kv (default N_q)");
    cmd->add_option("--batch", a->p.batch, "batch B")->capture_default_str();
    cmd->add_flag("--causal", a->p.causal, "bottom-right aligned causal mask");
    cmd->add_option("--window", a->p.window,
                    "sliding window W of the problem (needs --causal); the local-attention table adds it to its Ws")
        ->check(window_in(max_window));
    cmd->add_flag("--bias", a->p.bias, "projection biases");
    cmd->add_flag("--measure", a->measure, "measure with the counting scalar even when large");
    add_family_flags(cmd, a->family);
    cmd->add_option("--seed", a->seed, "seed of the measured run's inputs")->capture_default_str();
    cmd->add_flag("--json", a->json, "print JSON instead of tables");
    cmd->add_flag("--csv", a->csv, "print the stage table as CSV");
    cmd->add_option("--out", a->out, "also write flops.json and CSVs into this directory")->check(output_dir());
    cmd->callback([a] { flops(*a); });
}

} // namespace attn::cli
