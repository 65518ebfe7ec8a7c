// attnbench hull: seed 003's "tyranny of a single perspective". A dense search over one head's
// query shows the interior key k3 = (k1 + k2)/2 is never ranked above both k1 and k2, and finds
// the largest weight one head can give it; the closed-form bound is checked against the search.
// Then two heads and a fixed nonlinear readout (min over heads of the scores) select k3.
#include <cmath>
#include <cstdio>
#include <memory>
#include <numbers>
#include <string>
#include <vector>
#include "commands.hpp"
#include "output.hpp"
import attn.sources;
import attn.results;

namespace attn::cli {
namespace {

struct hull_args {
    std::size_t n_theta = 7200, n_r = 400;
    double r_min = 1e-3, r_max = 3.0, eps = 0.0;
    bool json = false;
    std::string out;
};

void hull(const hull_args& a) {
    const auto h = sources::hull_search(a.n_theta, a.n_r, a.r_min, a.r_max);
    const auto t = sources::two_heads(a.eps, {0.25, 0.5, 1.0, 2.0, 4.0});
    const double deg = 180.0 / std::numbers::pi;
    const bool never_first = h.max_margin <= 1e-12 && h.k3_strictly_first == 0;
    const bool bound_ok = h.max_abs_search_minus_bound <= 1e-12;

    nlohmann::json j = {{"metadata", metadata("hull")},
                        {"source", "seed 003, 'The Tyranny of the Single Perspective' and 'A Committee of Experts'"},
                        {"keys", {{10, 0}, {0, 10}, {5, 5}, {2, 2}}},
                        {"model", "one head: weights = softmax(q . k_i); |q| plays the inverse temperature"},
                        {"search",
                         {{"n_theta", h.n_theta},
                          {"n_r", h.n_r},
                          {"r_min", h.r_min},
                          {"r_max", h.r_max},
                          {"thetas_rad", h.thetas},
                          {"radii", h.radii},
                          {"max_w3_by_r", h.max_w3_by_r},
                          {"bound_by_r", h.bound_by_r},
                          {"w3_by_theta_at_r_max", h.w3_by_theta},
                          {"winner_by_theta_at_r_max", h.winner_by_theta}}},
                        {"best", {{"w3", h.best_w3}, {"theta_deg", h.best_theta * deg}, {"r", h.best_r}}},
                        {"bound",
                         {{"formula", "w3 <= 1/(3 + exp(-3*sqrt(2)*|q|)) < 1/3, equality at q parallel to (1,1)"},
                          {"at_r_max", sources::hull_bound(h.r_max)},
                          {"supremum", 1.0 / 3.0}}},
                        {"max_abs_search_minus_bound", h.max_abs_search_minus_bound},
                        {"max_margin_s3_minus_max_s1_s2", h.max_margin},
                        {"max_abs_s3_minus_mean_s1_s2", h.max_mean_residual},
                        {"k3_strictly_first_count", h.k3_strictly_first},
                        {"two_heads",
                         {{"q1", {t.q1[0], t.q1[1]}},
                          {"q2", {t.q2[0], t.q2[1]}},
                          {"scores_head1", t.s1},
                          {"scores_head2", t.s2},
                          {"weights_head1", t.w1},
                          {"weights_head2", t.w2},
                          {"readout", "min over heads of the scores"},
                          {"readout_scores", t.readout},
                          {"betas", t.betas},
                          {"selection", t.selection},
                          {"winner", t.winner + 1}}}};
    if (!a.out.empty()) std::fprintf(stderr, "wrote %s\n", write_atomic(a.out, "hull.json", j.dump(2) + "\n").c_str());
    if (a.json) {
        std::printf("%s\n", j.dump(2).c_str());
        return;
    }
    std::printf("Seed 003's keys: k1 = (10, 0), k2 = (0, 10), k3 = (5, 5), k4 = (2, 2). One head with query q\n"
                "weights them softmax(q . k_i) (|q| acts as inverse temperature; weights are probabilities).\n\n");
    std::printf("Dense search: %zu directions x %zu magnitudes |q| in [%g, %g] (geometric).\n", h.n_theta, h.n_r,
                h.r_min, h.r_max);
    text_table s({"quantity", "value"});
    for (auto& r : std::vector<std::vector<std::string>>{
             {"max |s3 - (s1 + s2)/2| over the grid [score units]", sources::rounded(h.max_mean_residual, 15)},
             {"max of s3 - max(s1, s2) over the grid [score units]", sources::rounded(h.max_margin, 15)},
             {"grid points where w3 > w1 and w3 > w2 [count]", std::to_string(h.k3_strictly_first)},
             {"largest w3 found [probability]", sources::rounded(h.best_w3, 12)},
             {"  at direction [degrees]", sources::rounded(h.best_theta * deg, 3)},
             {"  at |q| [dimensionless]", sources::rounded(h.best_r, 4)},
             {"closed-form bound at |q| = r_max [probability]", sources::rounded(sources::hull_bound(h.r_max), 12)},
             {"max over |q| of |search - bound| [probability]", sources::rounded(h.max_abs_search_minus_bound, 15)},
             {"supremum over all q (never attained) [probability]", sources::rounded(1.0 / 3.0, 12)}})
        s.add_row(r);
    s.print();
    std::printf("\nBound: s3 = (s1 + s2)/2, so e^s1 + e^s2 >= 2 e^s3 and w3 <= 1/(3 + e^(s4 - s3)); s4 - s3 =\n"
                "-3 (q_x + q_y) >= -3 sqrt(2) |q|. Hence w3 <= 1/(3 + exp(-3 sqrt(2) |q|)) < 1/3, equal only for q\n"
                "along (1, 1), where k1, k2 and k3 tie. %s; %s.\n\n",
                never_first ? "No single head ranks k3 strictly above both k1 and k2"
                            : "A single head RANKED k3 FIRST somewhere (unexpected)",
                bound_ok ? "search and bound agree to 1e-12 at every magnitude" : "search and bound DISAGREE");
    std::printf("Which key a single head ranks first, by direction (at |q| = %g):\n", h.r_max);
    int last = -2;
    for (std::size_t i = 0; i < h.thetas.size(); ++i)
        if (h.winner_by_theta[i] != last) {
            last = h.winner_by_theta[i];
            std::printf("  from %7.2f deg: k%d\n", h.thetas[i] * deg, last + 1);
        }
    std::printf("\nTwo heads, q1 = (1, %g), q2 = (%g, 1), read out by min over heads of the scores:\n", a.eps, a.eps);
    text_table two(
        {"key", "head 1 score", "head 2 score", "head 1 weight [prob]", "head 2 weight [prob]", "min score"});
    for (int i = 0; i < 4; ++i)
        two.add_row({"k" + std::to_string(i + 1), sources::rounded(t.s1[i], 3), sources::rounded(t.s2[i], 3),
                     sources::rounded(t.w1[i], 6), sources::rounded(t.w2[i], 6), sources::rounded(t.readout[i], 3)});
    two.print();
    std::printf("\nThe readout selects k%d. Its softmax(beta * min score) weight on k3 [probability]:\n", t.winner + 1);
    text_table sel({"beta", "w(k1)", "w(k2)", "w(k3)", "w(k4)"});
    for (std::size_t b = 0; b < t.betas.size(); ++b)
        sel.add_row({sources::rounded(t.betas[b], 2), sources::rounded(t.selection[b][0], 6),
                     sources::rounded(t.selection[b][1], 6), sources::rounded(t.selection[b][2], 6),
                     sources::rounded(t.selection[b][3], 6)});
    sel.print();
    std::printf("\nOne head: at most 1/3 on k3. Two heads plus a fixed nonlinear readout: k3 first, weight -> 1.\n");
}

} // namespace

void add_hull(CLI::App& app) {
    auto a = std::make_shared<hull_args>();
    auto* cmd =
        app.add_subcommand("hull", "seed 003's convex-hull argument: one head vs two heads, searched and bounded");
    cmd->add_option("--directions", a->n_theta, "query directions searched")
        ->capture_default_str()
        ->check(CLI::Range(8, 1 << 22));
    cmd->add_option("--magnitudes", a->n_r, "query magnitudes searched")
        ->capture_default_str()
        ->check(CLI::Range(2, 1 << 20));
    cmd->add_option("--r-min", a->r_min, "smallest |q|")->capture_default_str()->check(finite_in(1e-9, 1e6));
    cmd->add_option("--r-max", a->r_max, "largest |q|")->capture_default_str()->check(finite_in(1e-9, 1e6));
    cmd->add_option("--eps", a->eps, "off-axis component of the two heads' queries")
        ->capture_default_str()
        ->check(finite_in(-1e3, 1e3));
    cmd->add_flag("--json", a->json, "print JSON");
    cmd->add_option("--out", a->out, "also write hull.json into this directory")->check(output_dir());
    cmd->callback([a] { hull(*a); });
}

} // namespace attn::cli
