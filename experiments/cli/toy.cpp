// attnbench toy: seed 000's "Cat sleeps" example (d_model = 4, H = 2, identity weights) run
// through the reference, every step printed, every number the document prints compared.
#include <cstdio>
#include <memory>
#include <string>
#include "commands.hpp"
#include "output.hpp"
import attn.sources;
import attn.results;

namespace attn::cli {
namespace {

struct toy_args {
    bool json = false;
    std::string out;
};

void print_matrix(const sources::matrix& m) {
    std::printf("%s  (%zu x %zu)\n", m.name.c_str(), m.rows, m.cols);
    for (std::size_t i = 0; i < m.rows; ++i) {
        std::printf("  [");
        for (std::size_t j = 0; j < m.cols; ++j) std::printf("%s%8.4f", j ? " " : "", m.at(i, j));
        std::printf(" ]%s\n", m.rows == 2 && !(m.name.rfind("K_", 0) == 0 && m.name.ends_with("^T"))
                                  ? (i == 0 ? "  <- Cat" : "  <- sleeps")
                                  : "");
    }
}

void toy(const toy_args& a) {
    const auto r = sources::cat_sleeps();
    nlohmann::json steps = nlohmann::json::array(), cmp = nlohmann::json::array();
    for (const auto& m : r.steps)
        steps.push_back({{"name", m.name}, {"rows", m.rows}, {"cols", m.cols}, {"values", m.v}});
    text_table t({"printed number", "document", "ours (document's rounding)", "ours (full)", "verdict"});
    for (const auto& c : r.compared) {
        cmp.push_back({{"what", c.what},
                       {"document", c.document},
                       {"decimals", c.decimals},
                       {"ours", c.ours},
                       {"ours_rounded", c.ours_rounded},
                       {"agree", c.agree}});
        t.add_row({c.what, c.document, c.ours_rounded, sources::rounded(c.ours, 6), c.agree ? "agree" : "DISAGREE"});
    }
    const std::size_t n = r.compared.size(), ok = r.agree();
    nlohmann::json j = {{"metadata", metadata("toy")},
                        {"source", "seed 000 (engineering blog), 'Cat sleeps' worked example"},
                        {"problem", r.p.describe()},
                        {"weights", "W_q = W_k = W_v = W_o = I (4 x 4), no bias"},
                        {"unit", "dimensionless (the example's numbers)"},
                        {"steps", steps},
                        {"compared", cmp},
                        {"agree", ok},
                        {"disagree", n - ok},
                        {"layer_max_abs_diff", r.layer_max_abs_diff}};
    if (!a.out.empty()) std::fprintf(stderr, "wrote %s\n", write_atomic(a.out, "toy.json", j.dump(2) + "\n").c_str());
    if (a.json) {
        std::printf("%s\n", j.dump(2).c_str());
        return;
    }
    std::printf("Seed 000's worked example, \"Cat sleeps\": %s, W_q = W_k = W_v = W_o = I, no bias.\n"
                "Computed by attn.reference (linear, core with trace); all values dimensionless.\n\n",
                r.p.describe().c_str());
    for (const auto& m : r.steps) {
        print_matrix(m);
        std::printf("\n");
    }
    std::printf(
        "the reference layer on the same input agrees with the step-by-step run to %.3g (max abs difference).\n\n",
        r.layer_max_abs_diff);
    std::printf("Every number the document prints, compared at the document's own rounding:\n");
    t.print();
    std::printf("\n%zu of %zu printed numbers agree; %zu disagree.\n", ok, n, n - ok);
    if (ok != n)
        std::printf("Where they disagree: head 2's query for \"Cat\" is (0, 0), so both its scores are 0, its softmax\n"
                    "is [0.5, 0.5] and its output is the mean of V_2's rows, (0.5, 1.0) -- not the (0.00, 0.00) the\n"
                    "document prints for Head_2 and in Z. Head_2 is Head_1 with its rows swapped, as the document\n"
                    "says in words (\"inverted\"), but its printed matrix does not follow that.\n");
}

} // namespace

void add_toy(CLI::App& app) {
    auto a = std::make_shared<toy_args>();
    auto* cmd = app.add_subcommand("toy", "seed 000's 'Cat sleeps' example, step by step, against the document");
    cmd->add_flag("--json", a->json, "print JSON (every intermediate, every compared number)");
    cmd->add_option("--out", a->out, "also write toy.json into this directory")->check(output_dir());
    cmd->callback([a] { toy(*a); });
}

} // namespace attn::cli
