// attn.claims: seed 000's worked example ("Cat sleeps", attn.sources' toy), C1-C11 of the ledger:
// every number the document prints is a figure at the document's rounding.
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

namespace attn::claims::detail {

void adder::operator()(std::string source, std::string text, std::string command, std::string measured,
                       std::vector<figure> figures, std::string note) const {
    const verdict v = judge(figures);
    c.push_back({"C" + std::to_string(c.size() + 1), std::move(source), std::move(text), std::move(command),
                 std::move(measured), std::move(note), std::move(figures), v});
}

namespace {

std::string f(double v, int d) { return sources::rounded(v, d); }

/// "k of n printed entries agree", counted by the criterion.
std::string agreeing(const std::vector<figure>& figs) {
    std::size_t ok = 0;
    for (const auto& x : figs) ok += holds(x);
    return std::to_string(ok) + " of " + std::to_string(figs.size()) + " printed entries agree";
}

std::vector<figure> operator+(std::vector<figure> a, const std::vector<figure>& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
}

} // namespace

void toy_claims(std::vector<claim>& c) {
    const detail::adder add{c};
    const auto toy = sources::cat_sleeps();
    auto cmp = [&](const std::string& what) -> const sources::printed_number& {
        for (const auto& n : toy.compared)
            if (n.what == what) return n;
        throw error("claims: toy has no printed number " + what);
    };
    auto doc = [&](const std::string& what, part role = part::core) {
        const auto& n = cmp(what);
        return printed(n.what, n.document, n.ours, role);
    };
    auto step = [&](const std::string& name) -> const sources::matrix& {
        for (const auto& m : toy.steps)
            if (m.name == name) return m;
        throw error("claims: toy has no step " + name);
    };
    // every printed entry of one matrix ("Head_2[" -> Head_2[0,0] .. Head_2[1,1]; row 0 is Cat)
    auto entries = [&](const std::string& prefix, part role = part::core) {
        std::vector<figure> out;
        for (const auto& n : toy.compared)
            if (n.what.rfind(prefix, 0) == 0) out.push_back(printed(n.what, n.document, n.ours, role));
        return out;
    };

    add(s000, "In the toy, each of the 2 heads has width d_k = d_v = 4/2 = 2.", "attnbench toy",
        "d_head = " + f(cmp("d_k = d_model / h").ours, 0), {doc("d_k = d_model / h")});
    {
        const auto e = entries("Q_1 K_1^T[");
        add(s000, "Head 1's scores Q1 K1^T are [[5, 0], [0, 0]]: 'Cat' scores itself 5 and 'sleeps' 0.",
            "attnbench toy", agreeing(e), e);
    }
    add(s000, "sqrt(d_k) = sqrt(2) is about 1.41 and Cat's scaled self-score is about 3.5.", "attnbench toy",
        "sqrt(2) = " + f(std::sqrt(2.0), 4) + "; 5/sqrt(2) = " + f(5 / std::sqrt(2.0), 4) +
            " (the document's 5/1.41 = " + f(5 / 1.41, 4) + "); both 3.5 at one decimal",
        {doc("sqrt(d_k)"), doc("Q_1 K_1^T / sqrt(d_k)[0,0]"), doc("5 / 1.41 (the document's own division)")});
    {
        const auto& p = step("softmax_1");
        const auto e = entries("softmax_1[");
        add(s000, "Head 1's softmax rows are about [0.97, 0.03] (Cat) and exactly [0.5, 0.5] (sleeps).",
            "attnbench toy",
            "[" + f(p.at(0, 0), 6) + ", " + f(p.at(0, 1), 6) + "], [" + f(p.at(1, 0), 6) + ", " + f(p.at(1, 1), 6) +
                "]; " + agreeing(e),
            e);
        // "no attention" is a weight of 0, read at the document's own rounding of that weight (0.03)
        add(s000, "In head 1, 'Cat' pays no attention to 'sleeps'.", "attnbench toy",
            "score " + f(step("Q_1 K_1^T").at(0, 1), 0) + ", attention weight " + f(p.at(0, 1), 4),
            {doc("Q_1 K_1^T[0,1]"), at_decimals("attention weight softmax_1[Cat, sleeps] = 0", 0, p.at(0, 1),
                                                cmp("softmax_1[0,1]").decimals, part::scope)},
            "The raw score is 0, but the softmax weight is " + f(100 * p.at(0, 1), 1) + "%, not 0.");
    }
    {
        const auto e = entries("Head_1[");
        add(s000, "Head 1's output is [[0.97, 1.94], [0.50, 1.00]].", "attnbench toy", agreeing(e), e);
    }
    {
        const auto e = entries("Head_2[");
        add(s000, "Head 2's output is [[0.00, 0.00], [0.97, 1.94]]: 'Cat' extracts nothing in head 2.", "attnbench toy",
            "Cat row [" + f(step("Head_2").at(0, 0), 2) + ", " + f(step("Head_2").at(0, 1), 2) + "]; " + agreeing(e), e,
            "Cat's head-2 query is (0, 0): both scores are 0, the softmax is [0.5, 0.5] and the output is the mean "
            "of V2's rows, (0.5, 1.0).");
    }
    {
        // What concatenation does (the shape; the document's Z is its own heads side by side) is the
        // claim; Z's values as computed here hold only where the heads it concatenates are right.
        const auto& z = step("Z = Concat(Head_1, Head_2)");
        std::vector<figure> fig = {exact("rows of Z", 2, double(z.rows)), exact("columns of Z", 4, double(z.cols))};
        for (std::size_t i = 0; i < 2; ++i)
            for (std::size_t j = 0; j < 4; ++j) {
                const std::string at = std::to_string(i) + "," + std::to_string(j);
                const std::string head =
                    "Head_" + std::to_string(j / 2 + 1) + "[" + std::to_string(i) + "," + std::to_string(j % 2) + "]";
                fig.push_back(exact("document's Z[" + at + "] = its " + head, std::stod(cmp("Z[" + at + "]").document),
                                    std::stod(cmp(head).document)));
            }
        const auto e = entries("Z[", part::scope);
        add(s000, "Concatenating the heads gives the 2 x 4 matrix Z printed in the document.", "attnbench toy",
            "Z is " + std::to_string(z.rows) + " x " + std::to_string(z.cols) + "; " + agreeing(e), fig + e,
            "The shape is right; Z[Cat, 2:4] is (0.50, 1.00), not (0.00, 0.00), carried over from head 2.");
    }
    {
        const auto& h1 = step("Head_1");
        const auto& h2 = step("Head_2");
        double diff = 0;
        for (std::size_t j = 0; j < 2; ++j)
            diff = std::max({diff, std::abs(h1.at(0, j) - h2.at(1, j)), std::abs(h1.at(1, j) - h2.at(0, j))});
        add(s000, "Head 2's result is head 1's with the roles of the two words swapped ('inverted').", "attnbench toy",
            "max |Head_2 - Head_1 with rows swapped| = " + f(diff, 12),
            {identity("max |Head_2 - Head_1 with rows swapped|", 0, diff)},
            "True as stated in words; the document's own printed Head_2 does not follow it.");
    }
    {
        double worst = 0;
        for (const char* name : {"softmax_1", "softmax_2"}) {
            const auto& m = step(name);
            for (std::size_t i = 0; i < m.rows; ++i) worst = std::max(worst, std::abs(m.at(i, 0) + m.at(i, 1) - 1.0));
        }
        add(s003, "Each softmax row turns scores into percentages that add up to 100%.", "attnbench toy",
            "max |row sum - 1| over both heads = " + f(worst, 16), {identity("max |row sum - 1|", 0, worst)});
        const auto& y = step("Z W^O (W^O = I)");
        const auto wo = analytic_params(toy.p).wo;
        add(s000, "The final projection W^O is 4 x 4 and maps Z (2 x 4) back to 2 x 4.", "attnbench toy",
            "W_o = " + grouped(wo) + " parameters = 4 x 4; output " + std::to_string(y.rows) + " x " +
                std::to_string(y.cols),
            {exact("W_o parameters", 16, double(wo)), exact("output rows", 2, double(y.rows)),
             exact("output columns", 4, double(y.cols))});
    }
}

} // namespace attn::claims::detail
