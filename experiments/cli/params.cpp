// attnbench params: the parameter-equivalence argument in numbers. For each d_model, H and
// family, the closed-form count by tensor next to the elements the weights actually allocate.
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>
#include "commands.hpp"
#include "output.hpp"
import attn.families;
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

void params(const params_args& a) {
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
        r.measured = random_weights<float>(p, a.seed).count(); // elements actually allocated
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
    if (!a.out.empty()) {
        std::fprintf(stderr, "wrote %s\n", write_atomic(a.out, "params.json", j.dump(2) + "\n").c_str());
        std::fprintf(stderr, "wrote %s\n", write_atomic(a.out, "params.csv", t.csv()).c_str());
    }
    if (a.json)
        std::printf("%s\n", j.dump(2).c_str());
    else if (a.csv)
        std::printf("%s", t.csv().c_str());
    else {
        std::printf("Parameters of one attention layer, closed form by tensor vs elements allocated.\n"
                    "Unit: parameters (scalar elements). 'vs MHA' = this total / MHA total at the same d_model, H "
                    "and bias.\n\n");
        t.print();
        std::printf("\n%s.\n", summary.c_str());
        std::printf("MHA and single-head: 4*d_model^2 weights (+ 4*d_model biases) for every H; "
                    "wide counterfactual: H times that.\n");
    }
    require(all_agree, summary);
}

} // namespace

void add_params(CLI::App& app) {
    auto a = std::make_shared<params_args>();
    auto* cmd = app.add_subcommand("params", "parameter counts by tensor: closed form vs allocated, per family");
    cmd->add_option("--d-model", a->d_models, "model widths to sweep")->capture_default_str();
    cmd->add_option("--heads", a->heads, "head counts H to sweep")->capture_default_str();
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
