// The list of variants. Adding one: a file in variants/ defining `variant make_NAME()`,
// and NAME appended to ATTN_VARIANTS below.
module;
#include <string>
#include <string_view>
#include <utility>
#include <vector>
module attn.variants;
import attn.results;

#define ATTN_VARIANTS(X) X(naive) X(blocked) X(simd) X(blas) X(parallel)

namespace attn::variants {
#define ATTN_DECLARE(name) variant make_##name();
ATTN_VARIANTS(ATTN_DECLARE)
#undef ATTN_DECLARE
} // namespace attn::variants

namespace attn {

namespace {
std::vector<variant>& storage() {
#define ATTN_MAKE(name) variants::make_##name(),
    static std::vector<variant> all{ATTN_VARIANTS(ATTN_MAKE)};
#undef ATTN_MAKE
    return all;
}
} // namespace

const std::vector<variant>& registry() { return storage(); }

void register_variant(variant v) {
    for (const auto& x : storage()) require(x.name != v.name, "variant '" + v.name + "' is registered already");
    storage().push_back(std::move(v));
}

const variant& find_variant(std::string_view name) {
    std::string known;
    for (const auto& v : registry()) {
        if (v.name == name) return v;
        known += (known.empty() ? "" : ", ") + v.name;
    }
    throw error("unknown variant '" + std::string(name) + "' (known: " + known + ")");
}

void require_precision(const variant& v, precision p) {
    require(v.supports(p), "variant '" + v.name + "' does not run in " + std::string(precision_name(p)) +
                               " on this CPU (" + machine().cpu_model + ")");
}

} // namespace attn
