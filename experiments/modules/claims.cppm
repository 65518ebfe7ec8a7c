// attn.claims -- the ledger of every quantitative claim in the seed documents, each judged by one
// criterion from figures recomputed here (attn.count, attn.sources).
//
// A figure is a number the document prints, or the number its words fix ("no attention" is 0,
// "the same cost" is a ratio of 1), beside the number computed here, compared by a relation and a
// tolerance. A figure is a core part of the claim (what it says), a scope part (a reading or a
// condition its words extend to), or a part no command here measures. The verdict:
//   confirmed  every figure holds;
//   refuted    some core figure fails;
//   qualified  every core figure holds, and some scope figure fails or is not measured.
// The tolerance follows the kind of number (the builders below): a printed decimal is read at the
// document's rounding, counts and sizes are exact, identities evaluated in floating point allow
// rounding, seeded Monte Carlo estimates allow their sampling error, "the same cost" allows 1%.
module;
#include <cstddef>
#include <string>
#include <vector>
export module attn.claims;

export namespace attn::claims {

enum class part { core, scope, unmeasured };
enum class relation { within, at_most, at_least };
enum class verdict { confirmed, qualified, refuted };

struct figure {
    std::string what;
    double claimed = 0;  ///< the document's number (printed, or fixed by its words)
    double computed = 0; ///< ours
    relation rel = relation::within;
    double tolerance = 0; ///< absolute
    part role = part::core;
};

/// within: |computed - claimed| <= tolerance; at_most: computed <= claimed + tolerance;
/// at_least: computed >= claimed - tolerance. An unmeasured part never holds.
bool holds(const figure& f);

/// The criterion above; a claim needs at least one core figure.
verdict judge(const std::vector<figure>& figures);

const char* key(verdict v);   ///< "confirmed", "qualified", "refuted" (JSON and CSV)
const char* name(part p);     ///< "core", "scope", "unmeasured"
const char* name(relation r); ///< "within", "at_most", "at_least"

/// The criterion and the tolerances by kind, in words, for the ledger's output.
std::string criterion();

// ---- builders: one per kind of number, each fixing its tolerance ----

/// A decimal as printed ("0.97", "2"): within half a unit of its last printed digit.
figure printed(std::string what, const std::string& document, double computed, part role = part::core);
/// A number the words fix, read at a stated number of decimals (the document's own rounding of
/// the same quantity elsewhere): within half a unit of the last.
figure at_decimals(std::string what, double claimed, double computed, int decimals, part role = part::core);
/// Counts, sizes, indices: exact.
figure exact(std::string what, double claimed, double computed, part role = part::core);
/// An identity evaluated in floating point: within 1e-12 (rounding only).
figure identity(std::string what, double claimed, double computed, part role = part::core);
/// A seeded Monte Carlo estimate: within 5% of the claimed value.
figure estimate(std::string what, double claimed, double computed, part role = part::core);
/// "The same cost", "about", "8 times": within 1% of the claimed value.
figure cost(std::string what, double claimed, double computed, part role = part::core);
/// A threshold the words imply ("nearly all the weight"), one-sided, stated in `what`.
figure bound(std::string what, relation rel, double threshold, double computed, part role = part::core);
/// A part of the claim no command here measures.
figure unmeasured(std::string what);

struct claim {
    std::string id, source, text, command, measured, note;
    std::vector<figure> figures;
    verdict result = verdict::refuted; ///< judge(figures)
};

/// Every claim of seeds 000, 001, 003 and 004, then DeepSeek-V2's Table 1, Mistral 7B's rolling
/// buffer and Shazeer 2019's local rows, in the ledger's order
/// (ids C1, C2, ...).
std::vector<claim> ledger();

/// The claim whose paraphrase contains `text` (throws attn::error if none or several).
const claim& find(const std::vector<claim>& claims, const std::string& text);
/// The figure of `c` whose description contains `what` (throws attn::error if none or several).
figure& find(claim& c, const std::string& what);

} // namespace attn::claims

// Shared by the ledger's implementation units; not exported.
namespace attn::claims::detail {

inline constexpr const char* s000 = "000 (blog, 'Cat sleeps')";
inline constexpr const char* s001 = "001 (course page)";
inline constexpr const char* s003 = "003 (first-principles essay)";
inline constexpr const char* s004 = "004 (textbook ch. 10)";
inline constexpr const char* ds2 = "DeepSeek-V2 (arXiv 2405.04434, Table 1)";
inline constexpr const char* mistral = "Mistral 7B (arXiv 2310.06825, section 2)";
inline constexpr const char* shazeer = "Shazeer 2019 (arXiv 1911.02150, Table 2)";

/// Appends claims to `c`, each with the next id (C1, C2, ...) and its verdict, judge(figures).
struct adder {
    std::vector<claim>& c;
    void operator()(std::string source, std::string text, std::string command, std::string measured,
                    std::vector<figure> figures, std::string note = "") const;
};

/// Seed 000's worked example, C1-C11 (claims_toy.cpp).
void toy_claims(std::vector<claim>& c);

} // namespace attn::claims::detail
