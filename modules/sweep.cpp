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
#include <toml++/toml.h>
module attn.sweep;
import :reader;
import attn.variants;

namespace attn {
namespace {

using detail::toml_reader;
using detail::type_name;

const std::vector<std::string> grid_keys{
    "variants", "modes", "precisions", "d_model",      "heads",       "kv_heads",         "d_head",    "seq",
    "kv_seq",   "batch", "threads",    "causal",       "bias",        "context",          "magnitude", "figures",
    "families", "forms", "d_v",        "kv_lora_rank", "q_lora_rank", "qk_rope_head_dim", "window"};
/// The storage types a grid may name (f64, the oracle's, is for attnbench check and the harness).
const std::vector<dtype> sweep_precisions{dtype::f32, dtype::bf16, dtype::f16, dtype::int8};

/// A list of a kind's names, read against its table (or the `allowed` values of it), as values.
template <class E>
std::vector<E> kinds(const toml_reader& r, const toml::node& v, const std::string& key, const std::string& what,
                     const std::vector<E>& allowed = enum_values<E>()) {
    std::vector<std::string> known;
    for (const E e : allowed) known.emplace_back(enum_name(e));
    std::vector<E> out;
    for (const auto& n : r.names(v, key, known, what)) out.push_back(parse_enum<E>(n));
    return out;
}

/// What a grid's `variants` may name: the selectors and every registered variant.
std::vector<std::string> known_variants() {
    std::vector<std::string> v = variant_selectors();
    for (const auto& x : registry()) v.push_back(x.name);
    return v;
}

/// A grid and the line each of its keys was given on (0: a built-in default).
struct located_grid {
    grid g;
    std::map<std::string, std::size_t> line;
};

void read_grid_keys(const toml_reader& r, const toml::table& t, located_grid& lg) {
    auto& g = lg.g;
    for (auto&& [k, v] : t) {
        const std::string key(k.str());
        if (std::find(grid_keys.begin(), grid_keys.end(), key) == grid_keys.end()) continue;
        lg.line[key] = v.source().begin.line;
        if (key == "variants")
            g.variants = r.names(v, key, known_variants(), "variant");
        else if (key == "modes")
            g.modes = kinds<mode>(r, v, key, "mode");
        else if (key == "precisions")
            g.precisions = kinds<dtype>(r, v, key, "precision", sweep_precisions);
        else if (key == "d_model")
            g.d_model = r.sizes(v, key, 1);
        else if (key == "heads")
            g.heads = r.sizes(v, key, 1);
        else if (key == "kv_heads")
            g.kv_heads = r.sizes(v, key, 0);
        else if (key == "d_head")
            g.d_head = r.sizes(v, key, 0);
        else if (key == "seq")
            g.seq = r.sizes(v, key, 1);
        else if (key == "kv_seq")
            g.kv_seq = r.sizes(v, key, 0);
        else if (key == "batch")
            g.batch = r.sizes(v, key, 1);
        else if (key == "threads") {
            g.threads = r.sizes(v, key, 0);
            for (auto t : g.threads)
                if (t > thread_limit())
                    r.fail(v, key,
                           "must be <= " + std::to_string(thread_limit()) + " (got " + std::to_string(t) +
                               "; 0 means every CPU, the cap is max(1024, 4 x the logical CPUs))");
        } else if (key == "context")
            g.context = r.sizes(v, key, 0);
        else if (key == "causal")
            g.causal = r.booleans(v, key);
        else if (key == "bias")
            g.bias = r.booleans(v, key);
        else if (key == "window") {
            g.window = r.sizes(v, key, 0);
            for (auto w : g.window)
                if (w > max_window)
                    r.fail(v, key,
                           "value " + std::to_string(w) + " is absurd: at most " + std::to_string(max_window) +
                               " keys (2^32; 0: no window)");
        } else if (key == "magnitude")
            g.magnitude = r.positives(v, key, 1e6);
        else if (key == "figures")
            g.figures = kinds<figure>(r, v, key, "figure");
        else if (key == "families") // the named families; the others are told apart by their shape
            g.families = kinds<family>(r, v, key, "family", {family::mla});
        else if (key == "forms")
            g.forms = kinds<form>(r, v, key, "form", {form::naive, form::absorb});
        else if (key == "d_v")
            g.d_v = r.sizes(v, key, 0);
        else if (key == "kv_lora_rank")
            g.kv_lora_rank = r.sizes(v, key, 1);
        else if (key == "q_lora_rank")
            g.q_lora_rank = r.sizes(v, key, 0);
        else if (key == "qk_rope_head_dim")
            g.qk_rope_head_dim = r.sizes(v, key, 2);
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
        r.only(t, {"d_model", "heads", "kv_heads", "seq", "batch", "mode"}, "[check]");
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
            else if (key == "mode") {
                s.check.mode = r.string(v, key);
                try {
                    select_modes(s.check.mode);
                } catch (const error&) {
                    r.fail(v, key,
                           "must be \"core\", \"layer\", \"decode\", \"both\" or \"all\" (got \"" + s.check.mode +
                               "\")");
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
        known.insert(grid_keys.begin(), grid_keys.end());
        r.only(t, known, "[perf]");
        if (const auto* v = t.get("repetitions")) s.repetitions = r.count(*v, "repetitions");
        if (const auto* v = t.get("min_time")) s.min_time = r.number(*v, "min_time");
        read_grid_keys(r, t, defaults);
        if (const auto* v = t.get("grid")) {
            const auto* a = v->as_array();
            if (!a || !a->is_array_of_tables())
                r.fail(*v, "grid", std::string("must be an array of tables ([[perf.grid]]), not ") + type_name(*v));
            std::set<std::string> gknown{"name"};
            gknown.insert(grid_keys.begin(), grid_keys.end());
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
