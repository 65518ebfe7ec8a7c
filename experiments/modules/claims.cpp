module;
#include <cmath>
#include <string>
#include <utility>
#include <vector>
module attn.claims;
import attn.core;

namespace attn::claims {

bool holds(const figure& f) {
    if (f.role == part::unmeasured) return false;
    switch (f.rel) {
    case relation::within:
        return std::abs(f.computed - f.claimed) <= f.tolerance;
    case relation::at_most:
        return f.computed <= f.claimed + f.tolerance;
    case relation::at_least:
        return f.computed >= f.claimed - f.tolerance;
    }
    return false;
}

verdict judge(const std::vector<figure>& figures) {
    bool any_core = false, core_fails = false, scope_fails = false;
    for (const auto& f : figures) {
        const bool ok = holds(f);
        if (f.role == part::core) {
            any_core = true;
            core_fails = core_fails || !ok;
        } else {
            scope_fails = scope_fails || !ok;
        }
    }
    require(any_core, "claims: a claim needs at least one core figure");
    if (core_fails) return verdict::refuted;
    return scope_fails ? verdict::qualified : verdict::confirmed;
}

const char* key(verdict v) {
    switch (v) {
    case verdict::confirmed:
        return "confirmed";
    case verdict::qualified:
        return "qualified";
    case verdict::refuted:
        return "refuted";
    }
    return "?";
}

const char* name(part p) {
    switch (p) {
    case part::core:
        return "core";
    case part::scope:
        return "scope";
    case part::unmeasured:
        return "unmeasured";
    }
    return "?";
}

const char* name(relation r) {
    switch (r) {
    case relation::within:
        return "within";
    case relation::at_most:
        return "at_most";
    case relation::at_least:
        return "at_least";
    }
    return "?";
}

std::string criterion() {
    return "Each claim is checked by figures: the document's number (as printed, or as its words fix it: "
           "\"no attention\" is 0, \"the same cost\" a ratio of 1) beside the number computed here. A figure "
           "holds when |computed - document| <= tolerance, or, for a threshold the words imply, when the "
           "computed number is on its side. Tolerances: a printed decimal, half a unit in its last printed "
           "digit (the document's rounding); counts and sizes, exact; identities evaluated in floating point, "
           "1e-12; seeded Monte Carlo estimates, 5%; \"the same cost\" and multiples of it, 1%. Verdict: "
           "**confirmed** when every figure holds; **refuted** when a core figure (what the claim says) fails; "
           "**holds with qualification** when every core figure holds but a scope figure (a reading or "
           "condition its words extend to) fails or is not measured by these commands. claims.json lists "
           "each claim's figures.";
}

namespace {
figure make(std::string what, double claimed, double computed, relation rel, double tolerance, part role) {
    return {std::move(what), claimed, computed, rel, tolerance, role};
}
double half_unit(int decimals) { return 0.5 * std::pow(10.0, -decimals); }
} // namespace

figure printed(std::string what, const std::string& document, double computed, part role) {
    const auto dot = document.find('.');
    const int decimals = dot == std::string::npos ? 0 : int(document.size() - dot - 1);
    return at_decimals(std::move(what), std::stod(document), computed, decimals, role);
}

figure at_decimals(std::string what, double claimed, double computed, int decimals, part role) {
    return make(std::move(what), claimed, computed, relation::within, half_unit(decimals), role);
}

figure exact(std::string what, double claimed, double computed, part role) {
    return make(std::move(what), claimed, computed, relation::within, 0.0, role);
}

figure identity(std::string what, double claimed, double computed, part role) {
    return make(std::move(what), claimed, computed, relation::within, 1e-12, role);
}

figure estimate(std::string what, double claimed, double computed, part role) {
    return make(std::move(what), claimed, computed, relation::within, 0.05 * std::abs(claimed), role);
}

figure cost(std::string what, double claimed, double computed, part role) {
    return make(std::move(what), claimed, computed, relation::within, 0.01 * std::abs(claimed), role);
}

figure bound(std::string what, relation rel, double threshold, double computed, part role) {
    return make(std::move(what), threshold, computed, rel, 0.0, role);
}

figure unmeasured(std::string what) {
    return make(std::move(what), std::nan(""), std::nan(""), relation::within, 0.0, part::unmeasured);
}

const claim& find(const std::vector<claim>& claims, const std::string& text) {
    const claim* hit = nullptr;
    for (const auto& c : claims)
        if (c.text.find(text) != std::string::npos) {
            require(!hit, "claims: more than one claim says '" + text + "'");
            hit = &c;
        }
    require(hit != nullptr, "claims: no claim says '" + text + "'");
    return *hit;
}

figure& find(claim& c, const std::string& what) {
    figure* hit = nullptr;
    for (auto& f : c.figures)
        if (f.what.find(what) != std::string::npos) {
            require(!hit, "claims: " + c.id + " has more than one figure '" + what + "'");
            hit = &f;
        }
    require(hit != nullptr, "claims: " + c.id + " has no figure '" + what + "'");
    return *hit;
}

} // namespace attn::claims
