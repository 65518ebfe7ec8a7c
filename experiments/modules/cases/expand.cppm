// attn.cases:expand -- grids into cases, once. Variants are chosen by selector: a name, "all", or a
// tag ("fast", "loops", "threaded"), so a new registered variant joins every grid that selects by
// tag. Every other list of a grid is a row of the field table (attn.cases:schema), crossed in the
// table's order (the last fastest), each row applying to the modes it says: a decode case crosses
// the contexts and not the lengths, a core case the lengths and not the contexts. The cases are
// built field by field from the grid's typed lists and finished once (finish_case).
module;
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>
export module attn.cases:expand;
import :types;
import :schema;
import attn.variants;

export namespace attn {

/// What `attnbench check --mode` and a sweep's [check] mode select: one mode, core and layer
/// (both), or every mode (all).
enum class check_modes : std::uint8_t { core, layer, decode, both, all };

template <>
struct names_of<check_modes> {
    static constexpr std::string_view kind = "mode";
    static constexpr std::array<name_entry<check_modes>, 5> table{{{check_modes::core, "core", "core"},
                                                                   {check_modes::layer, "layer", "layer"},
                                                                   {check_modes::decode, "decode", "decode"},
                                                                   {check_modes::both, "both", "core and layer"},
                                                                   {check_modes::all, "all", "every mode"}}};
    static std::span<const name_entry<check_modes>> entries() { return table; }
};

/// The modes a selection names.
inline std::vector<attn::mode> modes_of(check_modes s) {
    switch (s) {
    case check_modes::core:
        return {mode::core};
    case check_modes::layer:
        return {mode::layer};
    case check_modes::decode:
        return {mode::decode};
    case check_modes::both:
        return {mode::core, mode::layer};
    case check_modes::all:
        break;
    }
    return enum_values<attn::mode>();
}

/// The variant selectors: "all", a tag ("fast": not plain loops; "loops"; "threaded"), or a name.
inline const std::vector<std::string>& variant_selectors() {
    static const std::vector<std::string> s{"all", "fast", "loops", "threaded"};
    return s;
}

/// The registered variants a selector names, in registry order; throws on an unknown one.
inline std::vector<std::string> select_variants(const std::string& selector) {
    std::vector<std::string> out;
    for (const variant* v : all_variants()) {
        const bool loops = v->has_tag("loops");
        if (selector == "all" || (selector == "fast" && !loops) || (selector == "loops" && loops) ||
            (selector == "threaded" && v->threaded) || selector == v->name)
            out.push_back(v->name);
    }
    if (out.empty() &&
        std::find(variant_selectors().begin(), variant_selectors().end(), selector) == variant_selectors().end()) {
        std::string known;
        for (const variant* v : all_variants()) known += ", " + v->name;
        throw error("unknown variant '" + selector + "' (known: all, fast, loops, threaded" + known + ")");
    }
    return out;
}

/// The most cases one expand() builds: a sweep is a list held in memory, and past this it is a
/// list nobody can run (100,000 cases at the minimum of 3 repetitions x 0.1 s is over 8 hours of
/// timing alone).
inline constexpr std::size_t max_cases = 100000;

namespace detail {
/// The variants a grid names, each once, in order ("" alone: a grid of shapes without variants).
inline std::vector<std::string> grid_variants(const grid& g) {
    std::vector<std::string> names;
    if (g.variants.empty()) names.push_back("");
    for (const auto& s : g.variants)
        for (const auto& n : select_variants(s))
            if (std::find(names.begin(), names.end(), n) == names.end()) names.push_back(n);
    return names;
}
/// The rows a case of mode m crosses, in crossing order: those that name a kind (the storage
/// type, the family, the form, the device) first, then the sizes and flags, each in table order.
inline std::vector<const case_field*> crossed(mode m) {
    std::vector<const case_field*> out;
    for (const bool names : {true, false})
        for (const auto& f : case_schema())
            if (!f.outer && f.count && (f.modes & mode_bit_of(m)) && (f.kind == value_kind::name) == names)
                out.push_back(&f);
    return out;
}
} // namespace detail

/// An upper bound on the cases of `grids`: the product of each grid's list lengths over the rows
/// each mode crosses, summed over the modes and grids (duplicates and refused combinations are not
/// removed), in saturating arithmetic (SIZE_MAX when it overflows), computed before anything is built.
inline std::size_t case_bound(const std::vector<grid>& grids) {
    constexpr std::size_t top = std::numeric_limits<std::size_t>::max();
    auto mul = [](std::size_t a, std::size_t b) { return b && a > top / b ? top : a * b; };
    std::size_t total = 0;
    for (const auto& g : grids) {
        // (variant, device) pairs: a variant pairs only with the devices it computes on
        std::size_t pairs = 0;
        for (const auto& v : detail::grid_variants(g)) {
            const variant* var = v.empty() ? nullptr : &find_variant(v);
            pairs += std::size_t(std::count_if(g.devices.begin(), g.devices.end(),
                                               [&](device d) { return !var || var->serves.device == d; }));
        }
        for (const auto m : g.modes) {
            std::size_t n = std::max<std::size_t>(pairs, 1);
            for (const case_field* f : detail::crossed(m))
                if (f->name != "device") n = mul(n, f->count(g));
            total = total > top - n ? top : total + n;
        }
    }
    return total;
}

/// Every case of the grids, grid by grid, without duplicates (a case asked for by two grids is
/// run once and lists both), each variant on the devices it computes on. Within a grid: variant, mode, then the crossed
/// rows (crossed(): the kinds, then the sizes), the last fastest. Variants that are not threaded run at 1 thread
/// whatever a grid asks, and threads 0 is every CPU (`all_threads`); combinations the case refuses (heads not dividing
/// d_model, ...) throw, or, given `skipped`, are left out with the first refusal's reason stored there.
inline std::vector<sweep_case> expand(const std::vector<grid>& grids, int all_threads, std::string* skipped = nullptr) {
    const std::size_t bound = case_bound(grids);
    require(bound <= max_cases, "the grids ask for " +
                                    (bound == std::numeric_limits<std::size_t>::max() ? std::string("more than 2^64")
                                                                                      : std::to_string(bound)) +
                                    " cases (the product of their lists' lengths), more than the " +
                                    std::to_string(max_cases) + " one run may hold: split the sweep into smaller ones");
    std::vector<sweep_case> out;
    std::map<std::string, std::size_t> index;
    std::string elsewhere_why; // the first variant/device pair left out: said if nothing else is left
    for (const auto& g : grids) {
        for (const auto& v : detail::grid_variants(g)) {
            const variant* var = v.empty() ? nullptr : &find_variant(v); // looked up once a variant
            const bool single = var && !var->threaded;
            for (const auto m : g.modes) {
                const auto rows = detail::crossed(m);
                std::vector<std::size_t> at(rows.size(), 0), size(rows.size());
                for (std::size_t i = 0; i < rows.size(); ++i) size[i] = rows[i]->count(g);
                if (std::find(size.begin(), size.end(), std::size_t(0)) != size.end()) continue;
                for (bool more = true; more;) {
                    sweep_case c;
                    c.variant = v;
                    c.mode = m;
                    for (const auto& f : case_schema()) // the rows this mode does not cross keep their default
                        if (!f.outer && !(f.modes & mode_bit_of(m))) f.put(c, f.fallback);
                    for (std::size_t i = 0; i < rows.size(); ++i) rows[i]->take(c, g, at[i]);
                    c.threads = single ? 1 : c.threads ? c.threads : std::size_t(std::max(1, all_threads));
                    // a variant pairs with the devices it computes on (the CPU's with devices = ["cpu"],
                    // the CUDA kernels' with ["cuda"]): the other pairs are no case
                    const bool elsewhere = var && var->serves.device != c.device;
                    std::size_t i = rows.size(); // the next combination, the last row fastest
                    for (; i > 0; --i) {
                        if (++at[i - 1] < size[i - 1]) break;
                        at[i - 1] = 0;
                    }
                    more = i > 0;
                    if (elsewhere) {
                        if (elsewhere_why.empty())
                            elsewhere_why = "variant '" + v + "' computes on the " +
                                            std::string(enum_name(var->serves.device)) + " device, not " +
                                            std::string(enum_name(c.device)) + " (--device, a grid's devices)";
                        continue;
                    }
                    try {
                        finish_case(c);
                    } catch (const error& e) {
                        if (!skipped) throw;
                        if (skipped->empty()) *skipped = e.what();
                        continue;
                    }
                    const auto id = c.id();
                    if (auto it = index.find(id); it != index.end()) {
                        auto& gs = out[it->second].grids;
                        if (std::find(gs.begin(), gs.end(), g.name) == gs.end()) gs.push_back(g.name);
                        continue;
                    }
                    c.grids = {g.name};
                    index[id] = out.size();
                    out.push_back(std::move(c));
                }
            }
        }
    }
    if (out.empty() && !elsewhere_why.empty()) throw error("no case: " + elsewhere_why);
    return out;
}

} // namespace attn
