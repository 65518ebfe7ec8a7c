// The list of variants, one table per device. Adding a CPU variant: a file in variants/ defining
// `variant make_NAME()`, and NAME appended to ATTN_VARIANTS below; the CUDA kernels' variants are
// variants/cuda.cpp's make_cuda_variants().
module;
#include <algorithm>
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
std::vector<variant> make_cuda_variants();
} // namespace attn::variants

namespace attn {

namespace {
struct tables {
#define ATTN_MAKE(name) variants::make_##name(),
    std::vector<variant> cpu{ATTN_VARIANTS(ATTN_MAKE)};
#undef ATTN_MAKE
    std::vector<variant> cuda = variants::make_cuda_variants();
    std::vector<variant>& of(device d) { return d == device::cuda ? cuda : cpu; }
};
tables& storage() {
    static tables t;
    return t;
}
} // namespace

const std::vector<variant>& registry(device d) { return storage().of(d); }

std::vector<const variant*> all_variants() {
    std::vector<const variant*> out;
    for (const device d : enum_values<device>())
        for (const auto& v : registry(d)) out.push_back(&v);
    return out;
}

void register_variant(variant v) {
    for (const variant* x : all_variants())
        require(x->name != v.name, "variant '" + v.name + "' is registered already");
    storage().of(v.serves.device).push_back(std::move(v));
}

const variant& find_variant(std::string_view name) {
    std::string known;
    for (const variant* v : all_variants()) {
        if (v->name == name) return *v;
        known += (known.empty() ? "" : ", ") + v->name;
    }
    throw error("unknown variant '" + std::string(name) + "' (known: " + known + ")");
}

void require_precision(const variant& v, precision p) {
    require(v.supports(p), "variant '" + v.name + "' does not run in " + std::string(enum_name(p)) + " on this CPU (" +
                               machine().cpu_model + ")");
}

std::string refusal(const variant& v, const problem& p, mode m, dtype t, device d) {
    const std::string who = "variant '" + v.name + "'";
    if (v.serves.device != d)
        return who + " runs on the " + std::string(enum_name(v.serves.device)) + " device, not " +
               std::string(enum_name(d));
    const auto& fams = v.serves.families;
    if (!fams.empty() && std::find(fams.begin(), fams.end(), p.family()) == fams.end()) {
        std::string known;
        for (const auto f : fams) known += (known.empty() ? "" : ", ") + std::string(enum_label(f));
        return who + " does not serve family " + std::string(enum_label(p.family())) + " (it serves " + known + ")";
    }
    if (p.window && !v.serves.windows)
        return who + " does not serve a sliding window (window=" + std::to_string(p.window) + ")";
    if (v.device) { // a device variant says what it serves, the device's absence included
        if (std::string why = v.device.refuses(p, m, t); !why.empty()) return who + ": " + why;
        return {};
    }
    if (m == mode::decode) {
        const kv_dtype cache = to_kv_dtype(t);
        const bool reads = cache == kv_dtype::f32    ? v.supports<float>()
                           : cache == kv_dtype::bf16 ? bool(v.kv.bf16)
                           : cache == kv_dtype::f16  ? bool(v.kv.f16)
                                                     : bool(v.kv.int8);
        if (!reads)
            return who + " cannot read a key/value cache of type " + std::string(enum_name(cache)) +
                   " (it has no kv core)";
    } else if (!v.supports(to_precision(t))) {
        return who + " does not run in " + std::string(enum_name(t)) + " on this CPU (" + machine().cpu_model + ")";
    }
    if (v.serves.limits)
        if (std::string why = v.serves.limits(p); !why.empty()) return who + " " + why;
    return {};
}

} // namespace attn
