// attnbench params: the parameter-equivalence argument in numbers. For each d_model, H and
// family, the closed-form count by tensor next to the elements the weights actually allocate.
#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <vector>
#include "commands.hpp"
#include "output.hpp"
#include "family_flags.hpp"
import attn.families;
import attn.grids;
import attn.count;
import attn.results;

namespace attn::cli {
namespace {

struct params_args {
    std::vector<std::size_t> d_models{64, 128, 256, 512};
    std::vector<std::size_t> heads{1, 2, 4, 8, 16};
    std::vector<std::size_t> gqa_groups; ///< given: each must form a row; none: G = 2 where it fits
    std::uint64_t seed = 1;
    bool json = false, csv = false;
    std::string out;
    family_flags family;
    std::size_t seq = 4096, context = 4096; ///< MLA: the prefill length and decode context of its FLOP rows
    bool d_model_given = false, heads_given = false;
};

struct row {
    problem p;
    param_counts closed;
    std::uint64_t measured = 0;
    std::uint64_t mha_total = 0; ///< MHA (or single-head) at the same d_model and bias
};

std::string family_label(const problem& p) {
    return p.family() == family::gqa ? "GQA:" + std::to_string(p.kv_heads) : std::string(enum_label(p.family()));
}

std::vector<problem> sweep(const params_args& a) {
    std::vector<problem> ps;
    for (std::size_t d : a.d_models)
        for (int bias = 0; bias < 2; ++bias)
            for (std::size_t h : a.heads) {
                require(h > 0 && d % h == 0,
                        "d_model=" + std::to_string(d) + " is not divisible by heads=" + std::to_string(h));
                std::vector<problem> fam;
                if (h == 1)
                    fam.push_back(single_head(d, 1));
                else {
                    fam.push_back(mha(d, h, 1));
                    fam.push_back(mqa(d, h, 1));
                    for (std::size_t g : a.gqa_groups.empty() ? std::vector<std::size_t>{2} : a.gqa_groups)
                        if (g > 1 && g < h && h % g == 0) fam.push_back(gqa(d, h, g, 1));
                    fam.push_back(wide(d, h, 1));
                }
                for (auto p : fam) {
                    p.bias = bias;
                    ps.push_back(p);
                }
            }
    return ps;
}

/// What `params` gives, both forms of it: params.json and params.csv into --out, then stdout as
/// --json, --csv or the human tables `print` writes.
void emit(const params_args& a, const nlohmann::json& j, const text_table& t, const std::function<void()>& print) {
    if (!a.out.empty()) {
        std::fprintf(stderr, "wrote %s\n", write_atomic(a.out, "params.json", j.dump(2) + "\n").c_str());
        std::fprintf(stderr, "wrote %s\n", write_atomic(a.out, "params.csv", t.csv()).c_str());
    }
    if (a.json)
        std::printf("%s\n", j.dump(2).c_str());
    else if (a.csv)
        std::printf("%s", t.csv().c_str());
    else
        print();
}

/// MLA's layers: named configurations (every one when the flags name none) or the widths given.
std::vector<std::pair<std::string, problem>> latent_layers(const params_args& a) {
    std::vector<std::pair<std::string, problem>> out;
    const bool widths = a.family.kv_rank || a.family.nope || a.family.rope || a.family.v_head || a.family.q_rank_given;
    if (a.family.config.empty() && !widths) {
        for (const auto& c : latent_configs()) out.emplace_back(std::string(c.label), c.layer(form::absorb));
        return out;
    }
    problem p;
    p.d_model = a.d_models.size() == 1 ? a.d_models[0] : 0;
    p.heads = a.heads.size() == 1 ? a.heads[0] : 0;
    require(!a.family.config.empty() || (a.d_model_given && a.heads_given && p.d_model && p.heads),
            "--family mla with widths needs one --d-model and one --heads (or --config)");
    apply_family_flags(a.family, p, a.d_model_given, a.heads_given);
    out.emplace_back(
        a.family.config.empty() ? std::string("MLA") : std::string(find_latent_config(a.family.config).label), p);
    return out;
}

/// One stage table as JSON: every stage with work, its full count and matmul FLOPs.
nlohmann::json stage_json(const flop_counts& c) {
    nlohmann::json j = nlohmann::json::object();
    for (std::size_t s = 0; s < n_stages; ++s)
        if (c.full.stage_total(stage(s)) || c.macs[s])
            j[std::string(stage_name(stage(s)))] = {{"full", c.full.stage_total(stage(s))},
                                                    {"matmul_only", 2 * c.macs[s]}};
    return j;
}

/// `attnbench params --family mla`: MLA's weights by tensor (closed form and allocated, the norms
/// apart), its cache per token in every type and form against MHA's, FLOPs per stage of a prefill
/// and a decode step in both forms, and the decode core's intensity per cached byte; the analytic
/// count held to the counting scalar on the MLA problems of the FLOP-check grid.
void latent_params(const params_args& a) {
    const auto layers = latent_layers(a);
    std::size_t grid_cases = 0, grid_equal = 0;
    for (const auto& g : flop_check_grid())
        if (g.latent_family()) {
            ++grid_cases;
            grid_equal += analytic_flops(g).full == measured_flops(g, a.seed);
        }
    text_table wt({"configuration", "tensor", "shape", "closed form [params]", "allocated [params]", "agree"});
    text_table ct({"configuration", "form / family", "cached elements/token/layer", "f32 [bytes]", "bf16/f16 [bytes]",
                   "int8 [bytes]", "vs MHA [x]", "GQA groups of d_h [groups]", "decode intensity f32 [FLOP/byte]"});
    text_table ft({"configuration", "form", "prefill N [tokens]", "prefill matmul [FLOPs]", "decode L [tokens]",
                   "decode step matmul [FLOPs]", "decode attention core [FLOPs]", "cache read [bytes, f32]"});
    nlohmann::json jrows = nlohmann::json::array();
    bool all_agree = true;
    for (const auto& [label, p] : layers) {
        const param_counts c = analytic_params(p);
        const auto specs = weight_specs(p);
        const auto w = random_weights<float>(p, a.seed);
        const std::uint64_t allocated = parameter_elements(p, w);
        all_agree = all_agree && allocated == c.total();
        nlohmann::json jt = nlohmann::json::array();
        for (std::size_t i = 0; i < specs.size(); ++i) {
            const auto& t = specs[i];
            if (!t.present || t.derived) continue;
            const std::string shape = t.cols ? "[" + std::to_string(t.rows) + ", " + std::to_string(t.cols) + "]"
                                             : "[" + std::to_string(t.rows) + "]";
            const bool ok = w[i].size() == t.parameters();
            all_agree = all_agree && ok;
            wt.add_row({label, t.name, shape, grouped(t.parameters()), grouped(w[i].size()), ok ? "yes" : "NO"});
            jt.push_back({{"tensor", t.name},
                          {"shape", t.cols ? nlohmann::json{t.rows, t.cols} : nlohmann::json{t.rows}},
                          {"norm", t.cols == 0},
                          {"closed_form", t.parameters()},
                          {"allocated", w[i].size()}});
        }
        const std::uint64_t mha4 = 4 * std::uint64_t(p.d_model) * p.d_model;
        wt.add_row({label, "matrices", "", grouped(c.weights()), "", ""});
        wt.add_row({label, "norm vectors (apart)", "", grouped(c.norms()), "", ""});
        wt.add_row({label, "total",
                    "matrices " + format_number(double(c.weights()) / double(mha4), 4) + " x 4 d_model^2 (" +
                        grouped(mha4) + ")",
                    grouped(c.total()), grouped(allocated), allocated == c.total() ? "yes" : "NO"});
        // the cache, per form, beside MHA, GQA and MQA whose heads are MLA's d_h
        problem mha_shape = mha(p.d_model, p.heads, 1);
        mha_shape.d_head = p.nope_dim();
        const double mha_e = double(kv_cache_elements_per_token(mha_shape)), per_group = 2.0 * double(p.nope_dim());
        nlohmann::json jc = nlohmann::json::array();
        auto cache_row = [&](const std::string& what, const problem& q) {
            const std::uint64_t e = kv_cache_elements_per_token(q);
            ct.add_row({label, what, grouped(e), grouped(kv_cache_bytes_per_token(q, kv_dtype::f32)),
                        grouped(kv_cache_bytes_per_token(q, kv_dtype::bf16)),
                        grouped(kv_cache_bytes_per_token(q, kv_dtype::int8)), format_number(double(e) / mha_e, 4),
                        format_number(double(e) / per_group, 4), format_number(decode_intensity(q, kv_dtype::f32), 4)});
            jc.push_back({{"what", what},
                          {"elements_per_token", e},
                          {"bytes_per_token",
                           {{"f32", kv_cache_bytes_per_token(q, kv_dtype::f32)},
                            {"bf16", kv_cache_bytes_per_token(q, kv_dtype::bf16)},
                            {"f16", kv_cache_bytes_per_token(q, kv_dtype::f16)},
                            {"int8", kv_cache_bytes_per_token(q, kv_dtype::int8)}}},
                          {"vs_mha", double(e) / mha_e},
                          {"gqa_groups_equivalent", double(e) / per_group},
                          {"decode_intensity_flop_per_byte",
                           {{"f32", decode_intensity(q, kv_dtype::f32)},
                            {"bf16", decode_intensity(q, kv_dtype::bf16)},
                            {"f16", decode_intensity(q, kv_dtype::f16)},
                            {"int8", decode_intensity(q, kv_dtype::int8)}}}});
        };
        nlohmann::json jf = nlohmann::json::array();
        for (form f : {form::absorb, form::naive}) {
            problem q = p;
            q.form = f;
            cache_row("MLA " + std::string(enum_name(f)), q);
            problem pre = q;
            pre.n_q = pre.n_kv = a.seq;
            pre.causal = true;
            const flop_counts fp = analytic_flops(pre);
            const decode_costs dc = decode_cost(q, a.context, kv_dtype::f32);
            problem step = decode_problem(q, a.context);
            problem one = step;
            one.n_kv = 1;
            ft.add_row({label, std::string(enum_name(f)), grouped(a.seq), grouped(fp.matmul_flops()),
                        grouped(a.context), grouped(dc.matmul_flops), grouped(dc.attention_flops),
                        grouped(dc.kv_read_bytes)});
            jf.push_back({{"form", enum_name(f)},
                          {"prefill",
                           {{"n", a.seq},
                            {"causal", true},
                            {"stages", stage_json(fp)},
                            {"matmul_only", fp.matmul_flops()},
                            {"full", fp.full_flops()}}},
                          {"decode",
                           {{"context", a.context},
                            {"attention_stages", stage_json(analytic_flops(step))},
                            {"new_token_stages", stage_json(analytic_flops(one))},
                            {"matmul_only", dc.matmul_flops},
                            {"attention_matmul", dc.attention_flops},
                            {"full", dc.full_flops},
                            {"cache_read_bytes_f32", dc.kv_read_bytes}}}});
        }
        for (std::size_t g : {p.heads, std::size_t(2), std::size_t(1)}) {
            if (g > p.heads || p.heads % g || (g == 2 && p.heads <= 2)) continue;
            problem q = gqa(p.d_model, p.heads, g, 1);
            q.d_head = p.nope_dim();
            cache_row(g == p.heads ? "MHA" : g == 1 ? "MQA" : "GQA:" + std::to_string(g), q);
        }
        jrows.push_back({{"configuration", label},
                         {"problem", p.describe()},
                         {"d_model", p.d_model},
                         {"heads", p.heads},
                         {"q_lora_rank", p.latent.q_rank},
                         {"kv_lora_rank", p.latent.kv_rank},
                         {"qk_nope_head_dim", p.nope_dim()},
                         {"qk_rope_head_dim", p.latent.rope},
                         {"v_head_dim", p.v_dim()},
                         {"tensors", jt},
                         {"closed_form", {{"matrices", c.weights()}, {"norms", c.norms()}, {"total", c.total()}}},
                         {"allocated", allocated},
                         {"vs_4_d_model_squared", double(c.weights()) / double(mha4)},
                         {"cache", jc},
                         {"flops", jf}});
    }
    nlohmann::json j = {{"metadata", metadata("params")},
                        {"family", "mla"},
                        {"unit", "parameters (scalar elements); cache in elements and bytes per token per layer; "
                                 "FLOPs 2 per multiply-add (matmul_only) or every operation (full)"},
                        {"allocated_means", "elements random_weights<float>(problem, seed) allocates, the derived "
                                            "W^UK transposed left out (attn::parameter_elements)"},
                        {"rows", jrows},
                        {"counted_equals_analytic",
                         {{"grid_cases", grid_cases},
                          {"equal", grid_equal},
                          {"what", "the MLA problems of the FLOP-check grid (attn::flop_check_grid): both forms, "
                                   "d_c' 0 and 3, causal or not, N_q =, <, > N_kv, batch 1 and 2"}}},
                        {"all_agree", all_agree}};
    emit(a, j, wt, [&] {
        std::printf("MLA's weights of one layer, closed form by tensor vs elements allocated (unit: parameters).\n\n");
        wt.print();
        std::printf("\nCache per token per layer (absorbed: the latent row [kv_norm(c) | k_pe], d_c + d_h^R; naive: K "
                    "and V of every head). 'GQA groups' = cached elements / (2 d_h): DeepSeek-V2 Table 1's "
                    "equivalent number of groups. Decode intensity: the attention core's FLOPs per cached f32 "
                    "byte.\n\n");
        ct.print();
        std::printf("\nFLOPs (matmul-only, 2 per multiply-add): a causal prefill of N tokens and one decode step "
                    "over L cached tokens.\n\n");
        ft.print();
        std::printf("\nCounted (the reference on a counting scalar) == analytic, operation by operation, on %zu of "
                    "%zu MLA problems of the FLOP-check grid.\n",
                    grid_equal, grid_cases);
    });
    require(all_agree, "closed form and allocated parameters DISAGREE for MLA: a bug");
    require(grid_equal == grid_cases, "analytic and counted FLOPs differ on " +
                                          std::to_string(grid_cases - grid_equal) + " MLA grid problems: a bug");
}

void params(const params_args& a) {
    if (names_latent(a.family)) return latent_params(a);
    problem unused;
    apply_family_flags(a.family, unused, true, true); // refuses MLA widths without --family mla
    for (std::size_t g : a.gqa_groups) {
        require(g >= 1, "GQA groups must be >= 1 (got 0)");
        // a G that fits none of the heads would add no row, silently
        bool fits = false;
        for (std::size_t h : a.heads) fits = fits || (g > 1 && g < h && h % g == 0);
        require(fits, "--gqa-groups " + std::to_string(g) +
                          " forms no GQA row: G must divide some --heads H with 1 < G < H (G = 1 is MQA, G = H MHA)");
    }
    std::vector<row> rows;
    bool all_agree = true;
    for (const problem& p : sweep(a)) {
        row r;
        r.p = p;
        r.closed = analytic_params(p);
        r.measured = parameter_elements(p, random_weights<float>(p, a.seed)); // elements actually allocated
        problem ref = p.heads == 1 ? single_head(p.d_model, 1) : mha(p.d_model, p.heads, 1);
        ref.bias = p.bias;
        r.mha_total = analytic_params(ref).total();
        all_agree = all_agree && r.measured == r.closed.total();
        rows.push_back(r);
    }

    text_table t({"family", "d_model", "H", "G", "d_head", "bias", "W_q [params]", "W_k [params]", "W_v [params]",
                  "W_o [params]", "biases [params]", "closed form [params]", "measured [params]", "agree", "vs MHA [x]",
                  "f32 [MiB]", "bf16/f16 [MiB]"});
    nlohmann::json jrows = nlohmann::json::array();
    for (const auto& r : rows) {
        const auto& c = r.closed;
        const bool agree = r.measured == c.total();
        t.add_row({family_label(r.p), std::to_string(r.p.d_model), std::to_string(r.p.heads),
                   std::to_string(r.p.kv_heads), std::to_string(r.p.qk_dim()), r.p.bias ? "yes" : "no", grouped(c.wq),
                   grouped(c.wk), grouped(c.wv), grouped(c.wo), grouped(c.biases()), grouped(c.total()),
                   grouped(r.measured), agree ? "yes" : "NO", format_number(double(c.total()) / double(r.mha_total), 3),
                   format_number(double(c.total() * bytes_per_element(precision::f32)) / 1048576.0, 3),
                   format_number(double(c.total() * bytes_per_element(precision::bf16)) / 1048576.0, 3)});
        jrows.push_back({{"family", enum_label(r.p.family())},
                         {"label", family_label(r.p)},
                         {"d_model", r.p.d_model},
                         {"heads", r.p.heads},
                         {"kv_heads", r.p.kv_heads},
                         {"d_head", r.p.qk_dim()},
                         {"bias", r.p.bias},
                         {"closed_form",
                          {{"W_q", c.wq},
                           {"W_k", c.wk},
                           {"W_v", c.wv},
                           {"W_o", c.wo},
                           {"b_q", c.bq},
                           {"b_k", c.bk},
                           {"b_v", c.bv},
                           {"b_o", c.bo},
                           {"total", c.total()}}},
                         {"measured", r.measured},
                         {"agree", agree},
                         {"ratio_to_mha", double(c.total()) / double(r.mha_total)},
                         {"bytes", // the closed-form count at each precision's bytes per element
                          {{"f64", c.total() * bytes_per_element(precision::f64)},
                           {"f32", c.total() * bytes_per_element(precision::f32)},
                           {"bf16", c.total() * bytes_per_element(precision::bf16)},
                           {"f16", c.total() * bytes_per_element(precision::f16)}}}});
    }
    nlohmann::json j = {{"metadata", metadata("params")},
                        {"unit", "parameters (scalar elements)"},
                        {"measured_means", "elements allocated by random_weights<float>(problem, seed).count()"},
                        {"closed_form", "W_q = H*d_head*d_model, W_k = W_v = G*d_head*d_model, W_o = d_model*H*d_head; "
                                        "biases H*d_head + 2*G*d_head + d_model"},
                        {"rows", jrows},
                        {"all_agree", all_agree}};
    const std::string summary = all_agree
                                    ? "closed form and measured agree on all " + std::to_string(rows.size()) + " rows"
                                    : "closed form and measured DISAGREE on some rows (marked NO): a bug";
    emit(a, j, t, [&] {
        std::printf("Parameters of one attention layer, closed form by tensor vs elements allocated.\n"
                    "Unit: parameters (scalar elements). 'vs MHA' = this total / MHA total at the same d_model, H "
                    "and bias.\n\n");
        t.print();
        std::printf("\n%s.\n", summary.c_str());
        std::printf("MHA and single-head: 4*d_model^2 weights (+ 4*d_model biases) for every H; "
                    "wide counterfactual: H times that.\n");
    });
    require(all_agree, summary);
}

} // namespace

void add_params(CLI::App& app) {
    auto a = std::make_shared<params_args>();
    auto* cmd = app.add_subcommand("params", "parameter counts by tensor: closed form vs allocated, per family");
    cmd->add_option("--d-model", a->d_models, "model widths to sweep")
        ->capture_default_str()
        ->each([a](const std::string&) { a->d_model_given = true; });
    cmd->add_option("--heads", a->heads, "head counts H to sweep")
        ->capture_default_str()
        ->each([a](const std::string&) { a->heads_given = true; });
    add_family_flags(cmd, a->family);
    cmd->add_option("--seq", a->seq, "MLA: the causal prefill length of its FLOP rows")->capture_default_str();
    cmd->add_option("--context", a->context, "MLA: the decode context L of its FLOP rows")->capture_default_str();
    cmd->add_option("--gqa-groups", a->gqa_groups,
                    "key/value head counts G for the GQA rows (default: 2 where it fits)")
        ->check(CLI::NonNegativeNumber);
    cmd->add_option("--seed", a->seed, "seed of the allocated weights")->capture_default_str();
    cmd->add_flag("--json", a->json, "print JSON instead of a table");
    cmd->add_flag("--csv", a->csv, "print CSV instead of a table");
    cmd->add_option("--out", a->out, "also write params.json and params.csv into this directory")->check(output_dir());
    cmd->callback([a] { params(*a); });
}

} // namespace attn::cli
