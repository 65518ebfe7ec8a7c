// attn.sweep's parser: toml++ reads sweep files, this file holds them to the schema (which keys,
// which combinations) and says where they are wrong, one line each: "sweep.toml:12: key 'heads'
// value 3 does not divide ...". The typed reads of one value are attn.sweep:reader's.
module;
#include <algorithm>
#include <cctype>
#include <cstdint>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>
#include <nlohmann/json.hpp>
#include <toml++/toml.h>
module attn.sweep;
import :reader;
import attn.variants;

namespace attn {
namespace {

using detail::toml_reader;
using detail::type_name;

/// The keys a [[perf.grid]] (or [perf]) may give: every field's sweep key (attn.cases:schema), and
/// the figures it is drawn as.
std::vector<std::string> grid_keys() {
    std::vector<std::string> keys{"figures"};
    for (const auto& f : case_schema())
        if (!f.axis.empty()) keys.push_back(f.axis);
    return keys;
}

/// A list of a kind's names, read against its table, as values.
template <class E>
std::vector<E> kinds(const toml_reader& r, const toml::node& v, const std::string& key, const std::string& what) {
    std::vector<E> out;
    for (const auto& n : r.names(v, key, enum_names<E>(), what)) out.push_back(parse_enum<E>(n));
    return out;
}

/// A grid and the line each of its keys was given on (0: a built-in default).
struct located_grid {
    grid g;
    std::map<std::string, std::size_t> line;
};

/// One field's list, read by the field's kind and held to its range.
std::vector<nlohmann::json> field_values(const toml_reader& r, const toml::node& v, const case_field& f) {
    const std::string& key = f.axis;
    std::vector<nlohmann::json> out;
    switch (f.kind) {
    case value_kind::size:
        for (auto x : r.sizes(v, key, f.min)) {
            if (f.max > 0 && double(x) > f.max)
                r.fail(v, key,
                       "must be <= " + std::to_string(std::uint64_t(f.max)) + " (got " + std::to_string(x) + "; " +
                           f.help + ")");
            out.emplace_back(x);
        }
        break;
    case value_kind::flag:
        for (bool b : r.booleans(v, key)) out.emplace_back(b);
        break;
    case value_kind::real:
        for (double x : r.positives(v, key, f.max > 0 ? f.max : 1e300)) out.emplace_back(x);
        break;
    case value_kind::name:
        for (const auto& n : r.names(v, key, f.names(), f.name)) out.emplace_back(n);
        break;
    }
    return out;
}

void read_grid_keys(const toml_reader& r, const toml::table& t, located_grid& lg) {
    auto& g = lg.g;
    for (auto&& [k, v] : t) {
        const std::string key(k.str());
        if (key == "figures") {
            lg.line[key] = v.source().begin.line;
            g.figures = kinds<figure>(r, v, key, "figure");
            continue;
        }
        for (const auto& f : case_schema())
            if (f.axis == key) {
                lg.line[key] = v.source().begin.line;
                f.put_list(g, field_values(r, v, f));
            }
    }
    // MLA without forms named runs both
    if (!g.families.empty() && !lg.line.count("forms")) g.forms = {form::naive, form::absorb};
}

/// heads divides d_model (unless d_head is given), kv_heads divides heads: checked for every
/// pair the grid forms.
void check_combinations(const toml_reader& r, const located_grid& lg, const std::string& where) {
    const auto& g = lg.g;
    auto line = [&](const std::string& k) { return lg.line.count(k) ? lg.line.at(k) : std::size_t(0); };
    const bool implicit_d_head = std::find(g.d_head.begin(), g.d_head.end(), 0) != g.d_head.end();
    for (auto d : g.d_model)
        for (auto h : g.heads)
            if (implicit_d_head && d % h)
                r.fail(line("heads"), "heads",
                       "value " + std::to_string(h) + " does not divide d_model " + std::to_string(d) + where +
                           " (give d_head, or drop its 0)");
    for (auto h : g.heads)
        for (auto kv : g.kv_heads)
            if (kv && (kv > h || h % kv))
                r.fail(line("kv_heads"), "kv_heads",
                       "value " + std::to_string(kv) + " does not divide heads " + std::to_string(h) + where +
                           " (0 means kv_heads = heads)");
    const bool decode = std::find(g.modes.begin(), g.modes.end(), mode::decode) != g.modes.end();
    const bool other_modes = std::any_of(g.modes.begin(), g.modes.end(), [](mode m) { return m != mode::decode; });
    if (other_modes && std::find(g.precisions.begin(), g.precisions.end(), dtype::int8) != g.precisions.end())
        r.fail(line("precisions"), "precisions",
               "value 'int8' is a key/value cache type: it applies to mode 'decode' only" + where);
    if (!decode && line("context") && !(g.context.size() == 1 && g.context[0] == 0))
        r.fail(line("context"), "context", "applies to mode 'decode' only, and modes does not include it" + where);
    if (decode && std::any_of(g.magnitude.begin(), g.magnitude.end(), [](double m) { return m != 1.0; }))
        r.fail(line("magnitude"), "magnitude",
               "applies to modes 'core' and 'layer' only (a decode step's inputs are drawn in [-1, 1])" + where);
    // a window looks back from each query: it needs the causal mask (decode has it always)
    if (g.windowed() && !g.causal_only())
        r.fail(line("window"), "window",
               "a window > 0 needs the causal mask, and causal includes false (give causal = [true])" + where);
    // MLA's keys need the family, and the family needs them
    const bool latent = std::find(g.families.begin(), g.families.end(), family::mla) != g.families.end();
    for (const char* k : {"forms", "kv_lora_rank", "q_lora_rank", "qk_rope_head_dim"})
        if (!latent && line(k)) r.fail(line(k), k, "is MLA's: give families = [\"mla\"]" + where);
    if (latent) {
        for (const char* k : {"kv_lora_rank", "qk_rope_head_dim", "d_head"})
            if (!line(k)) r.fail(line("families"), "families", std::string("mla needs ") + k + where);
        for (auto rope : g.qk_rope_head_dim)
            if (rope % 2)
                r.fail(line("qk_rope_head_dim"), "qk_rope_head_dim",
                       "value " + std::to_string(rope) + " is odd: the rotary part is rotated in pairs" + where);
        for (auto dh : g.d_head)
            for (auto rope : g.qk_rope_head_dim)
                if (dh <= rope)
                    r.fail(line("d_head"), "d_head",
                           "value " + std::to_string(dh) + " must exceed qk_rope_head_dim " + std::to_string(rope) +
                               " (d_head = qk_nope_head_dim + qk_rope_head_dim)" + where);
        for (auto kv : g.kv_heads)
            if (kv)
                r.fail(line("kv_heads"), "kv_heads",
                       "MLA has keys and values per query head: kv_heads must be 0 (got " + std::to_string(kv) + ")" +
                           where);
        for (auto b : g.bias)
            if (b) r.fail(line("bias"), "bias", "MLA's projections have no biases" + where);
    }
    if (!other_modes && line("kv_seq") && !(g.kv_seq.size() == 1 && g.kv_seq[0] == 0))
        r.fail(line("kv_seq"), "kv_seq",
               "applies to modes 'core' and 'layer' only (decode's keys are its context)" + where);
}

} // namespace

sweep_spec parse_sweep(const std::string& text, const std::string& source,
                       const std::vector<std::string>& known_stages) {
    toml::table root;
    try {
        root = toml::parse(text, source);
    } catch (const toml::parse_error& e) {
        throw error(source + ":" + std::to_string(e.source().begin.line) +
                    ": not valid TOML: " + std::string(e.description()));
    }
    const toml_reader r(source);
    sweep_spec s;
    s.source = source;
    s.text = text;
    s.stages = known_stages;
    r.only(root, {"name", "description", "seed", "stages", "peak", "check", "perf", "peers"}, "the top level");
    if (const auto* n = root.get("name")) s.name = r.string(*n, "name");
    if (const auto* n = root.get("description")) s.description = r.string(*n, "description");
    if (const auto* n = root.get("seed")) s.seed = std::uint64_t(r.integer(*n, "seed", 0));
    if (const auto* n = root.get("stages")) s.stages = r.names(*n, "stages", known_stages, "stage");
    if (s.name.empty()) s.name = "sweep";
    for (char c : s.name)
        if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_'))
            r.fail(*root.get("name"), "name", "must be letters, digits, '-' or '_' (it names the run directory)");

    if (const auto* n = root.get("peak")) {
        const auto& t = r.table(*n, "peak");
        r.only(t, {"repetitions"}, "[peak]");
        if (const auto* v = t.get("repetitions")) s.peak_repetitions = r.count(*v, "repetitions");
    }
    if (const auto* n = root.get("check")) {
        const auto& t = r.table(*n, "check");
        r.only(t, {"d_model", "heads", "kv_heads", "seq", "batch", "mode", "precisions"}, "[check]");
        located_grid lg;
        for (auto&& [k, v] : t) {
            const std::string key(k.str());
            lg.line[key] = v.source().begin.line;
            if (key == "d_model")
                s.check.d_model = r.sizes(v, key, 1);
            else if (key == "heads")
                s.check.heads = r.sizes(v, key, 1);
            else if (key == "kv_heads")
                s.check.kv_heads = r.sizes(v, key, 1);
            else if (key == "seq")
                s.check.seq = r.sizes(v, key, 1);
            else if (key == "batch")
                s.check.batch = r.sizes(v, key, 1);
            else if (key == "precisions") { // check's --precision names: the storage types, or all
                auto known = enum_names<dtype>();
                known.push_back("all");
                s.check.precisions = r.names(v, key, known, "precision");
            } else if (key == "mode") {
                const std::string m = r.string(v, key);
                try {
                    s.check.mode = parse_enum<check_modes>(m);
                } catch (const error&) {
                    r.fail(v, key, "must be one of " + enum_known<check_modes>() + " (got \"" + m + "\")");
                }
            }
        }
        // check's own defaults where the file leaves a size out (d_model 64, heads 4)
        lg.g.d_model = s.check.d_model.empty() ? std::vector<std::size_t>{64} : s.check.d_model;
        lg.g.heads = s.check.heads.empty() ? std::vector<std::size_t>{4} : s.check.heads;
        lg.g.kv_heads = s.check.kv_heads;
        lg.g.modes = {mode::core};
        check_combinations(r, lg, " in [check]");
    }

    // [peers] providers: other libraries timed on the same grids (attn.peers)
    if (const auto* n = root.get("peers")) {
        const auto& t = r.table(*n, "peers");
        r.only(t, {"providers", "rounds"}, "[peers]");
        if (const auto* v = t.get("rounds")) s.peer_rounds = r.count(*v, "rounds");
        std::vector<std::string> known;
        for (const auto& p : peer_providers()) known.push_back(p.name);
        if (const auto* v = t.get("providers")) s.peers = r.names(*v, "providers", known, "peer");
    }

    // [perf]: defaults for every [[perf.grid]], and the grid itself when there is none.
    located_grid defaults; // attn::grid's defaults: every variant, core, d_model 512, H 8, N 1024, ...
    std::vector<located_grid> grids;
    if (const auto* n = root.get("perf")) {
        const auto& t = r.table(*n, "perf");
        std::set<std::string> known{"repetitions", "min_time", "grid"};
        for (const auto& k : grid_keys()) known.insert(k);
        r.only(t, known, "[perf]");
        if (const auto* v = t.get("repetitions")) s.repetitions = r.count(*v, "repetitions");
        if (const auto* v = t.get("min_time")) s.min_time = r.number(*v, "min_time");
        read_grid_keys(r, t, defaults);
        if (const auto* v = t.get("grid")) {
            const auto* a = v->as_array();
            if (!a || !a->is_array_of_tables())
                r.fail(*v, "grid", std::string("must be an array of tables ([[perf.grid]]), not ") + type_name(*v));
            std::set<std::string> gknown{"name"};
            for (const auto& k : grid_keys()) gknown.insert(k);
            std::set<std::string> names;
            for (const auto& e : *a) {
                const auto& gt = *e.as_table();
                located_grid lg = defaults;
                lg.g.name = "grid" + std::to_string(grids.size() + 1);
                r.only(gt, gknown, "[[perf.grid]]");
                if (const auto* nm = gt.get("name")) {
                    lg.g.name = r.string(*nm, "name");
                    if (!names.insert(lg.g.name).second) r.fail(*nm, "name", "'" + lg.g.name + "' names two grids");
                }
                read_grid_keys(r, gt, lg);
                grids.push_back(lg);
            }
        }
    }
    if (grids.empty()) {
        defaults.g.name = "perf";
        grids.push_back(defaults);
    }
    for (const auto& lg : grids) {
        // before the pairwise checks below, which loop over the grid's lists
        if (const std::size_t n = case_bound({lg.g}); n > max_cases)
            throw error(
                source + ": grid '" + lg.g.name + "' asks for " +
                (n == std::numeric_limits<std::size_t>::max() ? std::string("more than 2^64") : std::to_string(n)) +
                " cases (the product of its lists' lengths), more than the " + std::to_string(max_cases) +
                " one run may hold: split it");
        check_combinations(r, lg, " (grid '" + lg.g.name + "')");
        s.grids.push_back(lg.g);
    }
    return s;
}

} // namespace attn
