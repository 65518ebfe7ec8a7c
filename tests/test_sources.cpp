// attn.sources: the toy against hand calculation (not against the document), the hull bound
// against its derivation and the search, the variance claim against its identity.
#include <cmath>
#include <string>
#include <catch2/catch.hpp>
import attn.sources;

namespace {
const attn::sources::matrix& step(const attn::sources::toy_result& r, const std::string& name) {
    for (const auto& m : r.steps)
        if (m.name == name) return m;
    FAIL("no step " << name);
    return r.steps.front();
}
} // namespace

TEST_CASE("toy: the computed values match hand calculation", "[sources][toy]") {
    const auto r = attn::sources::cat_sleeps();
    // By hand: head 1 scores [[5, 0], [0, 0]]; scaled 5/sqrt(2); Cat's softmax p = 1/(1 + e^(-5/sqrt 2)).
    const double p = 1.0 / (1.0 + std::exp(-5.0 / std::sqrt(2.0)));
    CHECK(p == Approx(0.971682).margin(1e-6)); // the hand value, e^-3.5355 = 0.029143
    CHECK(step(r, "Q_1 K_1^T").v == std::vector<double>{5, 0, 0, 0});
    CHECK(step(r, "Q_1 K_1^T / sqrt(d_k)").at(0, 0) == Approx(5.0 / std::sqrt(2.0)));
    const auto& s1 = step(r, "softmax_1");
    CHECK(s1.at(0, 0) == Approx(p));
    CHECK(s1.at(0, 1) == Approx(1 - p));
    CHECK(s1.at(1, 0) == Approx(0.5));
    // Head 1, Cat: p * (1, 2) + (1 - p) * (0, 0) = (p, 2p); sleeps: mean of V_1's rows = (0.5, 1).
    const auto& h1 = step(r, "Head_1");
    CHECK(h1.at(0, 0) == Approx(p));
    CHECK(h1.at(0, 1) == Approx(2 * p));
    CHECK(h1.at(1, 0) == Approx(0.5));
    CHECK(h1.at(1, 1) == Approx(1.0));
    // Head 2, Cat: Q_2[Cat] = (0, 0), both scores 0, softmax (1/2, 1/2): output = mean of V_2's rows
    // = ((0 + 1)/2, (0 + 2)/2) = (0.5, 1.0). Sleeps: scores (0, 5), weights (1 - p, p): (p, 2p).
    const auto& h2 = step(r, "Head_2");
    CHECK(h2.at(0, 0) == Approx(0.5));
    CHECK(h2.at(0, 1) == Approx(1.0));
    CHECK(h2.at(1, 0) == Approx(p));
    CHECK(h2.at(1, 1) == Approx(2 * p));
    // With W_o = I the layer's output is Z, and the reference layer agrees with the staged run.
    CHECK(step(r, "Z W^O (W^O = I)").v == step(r, "Z = Concat(Head_1, Head_2)").v);
    CHECK(r.layer_max_abs_diff == 0.0);
}

TEST_CASE("toy: the comparison logic reads the document's rounding", "[sources][toy]") {
    const auto r = attn::sources::cat_sleeps();
    // By hand the only printed numbers that differ are Head_2's Cat row and Z's copy of it: 4 entries.
    std::size_t bad = 0;
    for (const auto& c : r.compared)
        if (!c.agree) {
            ++bad;
            CHECK((c.what.rfind("Head_2[0,", 0) == 0 || c.what == "Z[0,2]" || c.what == "Z[0,3]"));
        }
    CHECK(bad == 4);
    CHECK(attn::sources::rounded(-0.001, 2) == "0.00");
    CHECK(attn::sources::rounded(3.5355, 1) == "3.5");
}

TEST_CASE("hull: no single head ranks k3 above k1 and k2; the bound holds and is tight", "[sources][hull]") {
    // The bound at a few magnitudes, by hand: r = 0 -> 1/(3 + 1) = 0.25; r -> infinity -> 1/3.
    CHECK(attn::sources::hull_bound(0.0) == Approx(0.25));
    CHECK(attn::sources::hull_bound(50.0) == Approx(1.0 / 3.0));
    // On the diagonal q = a (1, 1): scores 10a, 10a, 10a, 4a, so w3 = 1 / (3 + e^(-6a)) with |q| = a sqrt 2.
    const double a = 0.4;
    const auto w = attn::sources::hull_weights(a, a);
    CHECK(w[2] == Approx(1.0 / (3.0 + std::exp(-6.0 * a))));
    CHECK(w[2] == Approx(attn::sources::hull_bound(a * std::sqrt(2.0))));
    const auto h = attn::sources::hull_search(720, 60, 1e-3, 3.0);
    CHECK(h.k3_strictly_first == 0);
    CHECK(h.max_margin <= 1e-12);
    CHECK(h.max_abs_search_minus_bound < 1e-12);
    for (std::size_t i = 0; i < h.radii.size(); ++i) CHECK(h.max_w3_by_r[i] <= h.bound_by_r[i] + 1e-15);
    CHECK(h.best_w3 < 1.0 / 3.0);
}

TEST_CASE("hull: two heads and a min readout select k3", "[sources][hull]") {
    const auto t = attn::sources::two_heads(0.0, {1.0});
    // Scores by hand: head 1 (10, 0, 5, 2), head 2 (0, 10, 5, 2); min (0, 0, 5, 2): k3 wins.
    CHECK(t.readout == std::vector<double>{0, 0, 5, 2});
    CHECK(t.winner == 2);
    // softmax of (0, 0, 5, 2): e^5 / (2 + e^5 + e^2)
    CHECK(t.selection[0][2] == Approx(std::exp(5.0) / (2 + std::exp(5.0) + std::exp(2.0))));
    CHECK(attn::sources::two_heads(0.1, {1.0}).winner == 2);
}

TEST_CASE("scaling: Var(q.k) = d_k for unit-variance components", "[sources][variance]") {
    const auto rows = attn::sources::scaling_variance({1, 16, 64}, 20000, 16, 7);
    for (const auto& r : rows) {
        INFO("d_k = " << r.d_k);
        // U(-sqrt3, sqrt3) has variance 1; the product of two independent ones has variance 1.
        CHECK(r.var_product == Approx(1.0).epsilon(0.05));
        CHECK(r.var_score == Approx(double(r.d_k)).epsilon(0.05));
        CHECK(r.var_scaled == Approx(1.0).epsilon(0.05));
    }
    CHECK(rows.back().max_weight_unscaled > rows.back().max_weight_scaled);
}
