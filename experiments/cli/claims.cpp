// attnbench claims: the ledger of every quantitative claim in the four seed documents (attn.claims:
// each recomputed, with the command that shows it, and judged by one criterion from its figures),
// as JSON on stdout; --out writes claims.json. Its Markdown (claims.md) is made by the render step
// (experiments/plots/claims.py), like every other Markdown of a report.
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>
#include "commands.hpp"
#include "output.hpp"
import attn.claims;

namespace attn::cli {
namespace {

struct claims_args {
    std::string out;
};

nlohmann::json number(double v) { return std::isnan(v) ? nlohmann::json(nullptr) : nlohmann::json(v); }

nlohmann::json figures(const std::vector<claims::figure>& fs) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& f : fs)
        out.push_back({{"what", f.what},
                       {"part", claims::name(f.role)},
                       {"claimed", number(f.claimed)},
                       {"computed", number(f.computed)},
                       {"relation", claims::name(f.rel)},
                       {"tolerance", f.tolerance},
                       {"holds", claims::holds(f)}});
    return out;
}

void run_claims(const claims_args& a) {
    const auto c = claims::ledger();
    std::size_t nc = 0, nr = 0, nq = 0;
    nlohmann::json rows = nlohmann::json::array();
    for (const auto& x : c) {
        nc += x.result == claims::verdict::confirmed;
        nr += x.result == claims::verdict::refuted;
        nq += x.result == claims::verdict::qualified;
        rows.push_back({{"id", x.id},
                        {"claim", x.text},
                        {"source", x.source},
                        {"command", x.command},
                        {"measured", x.measured},
                        {"verdict", claims::key(x.result)},
                        {"note", x.note},
                        {"figures", figures(x.figures)}});
    }
    nlohmann::json j = {{"metadata", metadata("claims")},
                        {"sources",
                         {{"000", "shared/seeds/000_dd47a8d6c5bb549d.txt"},
                          {"001", "shared/seeds/001_f3953c452c6f0e56.txt"},
                          {"003", "shared/seeds/003_440a5a02b9318117.txt"},
                          {"004", "shared/seeds/004_fbc419c4c15dc561.txt"}}},
                        {"criterion", claims::criterion()},
                        {"claims", rows},
                        {"summary", {{"total", c.size()}, {"confirmed", nc}, {"qualified", nq}, {"refuted", nr}}}};
    if (!a.out.empty())
        std::fprintf(stderr, "wrote %s\n", write_atomic(a.out, "claims.json", j.dump(2) + "\n").c_str());
    else
        std::printf("%s\n", j.dump(2).c_str());
}

} // namespace

void add_claims(CLI::App& app) {
    auto a = std::make_shared<claims_args>();
    auto* cmd = app.add_subcommand("claims", "ledger of the seed documents' quantitative claims, with verdicts");
    cmd->add_option("--out", a->out, "write claims.json into this directory (instead of printing it)")
        ->check(output_dir());
    cmd->callback([a] { run_claims(*a); });
}

} // namespace attn::cli
