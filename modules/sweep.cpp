// attn.sweep's parser: toml++ reads sweep files, this file holds them to the schema and says
// where they are wrong, one line each: "sweep.toml:12: key 'heads' value 3 does not divide ...".
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
import attn.variants;

namespace attn {
namespace {

const char* type_name(const toml::node& n) {
    switch (n.type()) {
    case toml::node_type::table:
        return "a table";
    case toml::node_type::array:
        return "an array";
    case toml::node_type::string:
        return "a string";
    case toml::node_type::integer:
        return "an integer";
    case toml::node_type::floating_point:
        return "a float";
    case toml::node_type::boolean:
        return "a boolean";
    default:
        return "a date or time";
    }
}

std::string join(const std::vector<std::string>& v) {
    std::string s;
    for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
    return s;
}

/// Reads one sweep file; every error names the file, the line and the key.
class reader {
  public:
    explicit reader(std::string source) : source_(std::move(source)) {}

    /// Line 0 is a key the file does not give: its built-in default is named as such, not as a line.
    [[noreturn]] void fail(std::size_t line, const std::string& key, const std::string& what) const {
        if (!line) throw error(source_ + ": key '" + key + "' (not in the file: its built-in default) " + what);
        throw error(source_ + ":" + std::to_string(line) + ": key '" + key + "' " + what);
    }
    [[noreturn]] void fail(const toml::node& n, const std::string& key, const std::string& what) const {
        fail(n.source().begin.line, key, what);
    }

    /// Refuses keys of `t` not in `known`; `where` names the table ("[perf]").
    void only(const toml::table& t, const std::set<std::string>& known, const std::string& where) const {
        for (auto&& [k, v] : t)
            if (!known.count(std::string(k.str()))) {
                std::vector<std::string> names(known.begin(), known.end());
                fail(k.source().begin.line ? k.source().begin.line : v.source().begin.line, std::string(k.str()),
                     "is unknown in " + where + " (known: " + join(names) + ")");
            }
    }

    std::int64_t integer(const toml::node& n, const std::string& key, std::int64_t min,
                         std::int64_t max = std::numeric_limits<std::int64_t>::max()) const {
        if (!n.is_integer()) fail(n, key, std::string("must be an integer, not ") + type_name(n));
        const std::int64_t v = n.as_integer()->get();
        if (v < min) fail(n, key, "must be >= " + std::to_string(min) + " (got " + std::to_string(v) + ")");
        if (v > max) fail(n, key, "must be <= " + std::to_string(max) + " (got " + std::to_string(v) + ")");
        return v;
    }
    /// An integer stored as int: refused, not narrowed, above INT_MAX.
    int count(const toml::node& n, const std::string& key) const {
        return int(integer(n, key, 1, std::numeric_limits<int>::max()));
    }

    double number(const toml::node& n, const std::string& key) const {
        double v = 0;
        if (n.is_integer())
            v = double(n.as_integer()->get());
        else if (n.is_floating_point())
            v = n.as_floating_point()->get();
        else
            fail(n, key, std::string("must be a number, not ") + type_name(n));
        if (!(v > 0 && v < 1e6)) fail(n, key, "must be a positive number of seconds (got " + std::to_string(v) + ")");
        return v;
    }

    std::string string(const toml::node& n, const std::string& key) const {
        if (!n.is_string()) fail(n, key, std::string("must be a string, not ") + type_name(n));
        return n.as_string()->get();
    }

    /// An integer or a non-empty array of integers, each >= min.
    std::vector<std::size_t> sizes(const toml::node& n, const std::string& key, std::int64_t min) const {
        std::vector<std::size_t> out;
        if (n.is_integer())
            out.push_back(std::size_t(integer(n, key, min)));
        else if (const auto* a = n.as_array()) {
            if (a->empty()) fail(n, key, "must not be an empty array");
            std::set<std::size_t> seen;
            for (const auto& e : *a) {
                if (!e.is_integer())
                    fail(e, key, std::string("must be an array of integers, but holds ") + type_name(e));
                const auto v = std::size_t(integer(e, key, min));
                if (!seen.insert(v).second) fail(e, key, "holds " + std::to_string(v) + " twice");
                out.push_back(v);
            }
        } else
            fail(n, key, std::string("must be an integer or an array of integers, not ") + type_name(n));
        return out;
    }

    /// A string or a non-empty array of strings, each one of `allowed`.
    std::vector<std::string> names(const toml::node& n, const std::string& key, const std::vector<std::string>& allowed,
                                   const std::string& what) const {
        std::vector<const toml::node*> items;
        if (n.is_string())
            items.push_back(&n);
        else if (const auto* a = n.as_array()) {
            if (a->empty()) fail(n, key, "must not be an empty array");
            for (const auto& e : *a) items.push_back(&e);
        } else
            fail(n, key, std::string("must be a string or an array of strings, not ") + type_name(n));
        std::vector<std::string> out;
        for (const auto* e : items) {
            if (!e->is_string()) fail(*e, key, std::string("must be an array of strings, but holds ") + type_name(*e));
            const std::string s = e->as_string()->get();
            if (std::find(allowed.begin(), allowed.end(), s) == allowed.end())
                fail(*e, key, "names unknown " + what + " '" + s + "' (known: " + join(allowed) + ")");
            if (std::find(out.begin(), out.end(), s) != out.end()) fail(*e, key, "names '" + s + "' twice");
            out.push_back(s);
        }
        return out;
    }

    /// A number or a non-empty array of numbers, each in (0, max].
    std::vector<double> positives(const toml::node& n, const std::string& key, double max) const {
        std::vector<const toml::node*> items;
        if (const auto* a = n.as_array()) {
            if (a->empty()) fail(n, key, "must not be an empty array");
            for (const auto& e : *a) items.push_back(&e);
        } else
            items.push_back(&n);
        std::vector<double> out;
        for (const auto* e : items) {
            if (!e->is_integer() && !e->is_floating_point())
                fail(*e, key, std::string("must be a number or an array of numbers, not ") + type_name(*e));
            const double v = e->is_integer() ? double(e->as_integer()->get()) : e->as_floating_point()->get();
            if (!(v > 0 && v <= max))
                fail(*e, key, "must be in (0, " + std::to_string(int(max)) + "] (got " + std::to_string(v) + ")");
            out.push_back(v);
        }
        return out;
    }

    std::vector<bool> booleans(const toml::node& n, const std::string& key) const {
        std::vector<bool> out;
        if (n.is_boolean())
            out.push_back(n.as_boolean()->get());
        else if (const auto* a = n.as_array()) {
            if (a->empty()) fail(n, key, "must not be an empty array");
            for (const auto& e : *a) {
                if (!e.is_boolean())
                    fail(e, key, std::string("must be an array of booleans, but holds ") + type_name(e));
                out.push_back(e.as_boolean()->get());
            }
        } else
            fail(n, key, std::string("must be a boolean or an array of booleans, not ") + type_name(n));
        return out;
    }

    const toml::table& table(const toml::node& n, const std::string& key) const {
        if (!n.is_table()) fail(n, key, std::string("must be a table, not ") + type_name(n));
        return *n.as_table();
    }

  private:
    std::string source_;
};

const std::vector<std::string> grid_keys{"variants", "modes",  "precisions", "d_model", "heads",
                                         "kv_heads", "d_head", "seq",        "kv_seq",  "batch",
                                         "threads",  "causal", "bias",       "context", "magnitude"};
const std::vector<std::string> known_modes{"core", "layer", "decode"};
const std::vector<std::string> known_precisions{"f32", "bf16", "f16", "int8"};

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

void read_grid_keys(const reader& r, const toml::table& t, located_grid& lg) {
    auto& g = lg.g;
    for (auto&& [k, v] : t) {
        const std::string key(k.str());
        if (std::find(grid_keys.begin(), grid_keys.end(), key) == grid_keys.end()) continue;
        lg.line[key] = v.source().begin.line;
        if (key == "variants")
            g.variants = r.names(v, key, known_variants(), "variant");
        else if (key == "modes")
            g.modes = r.names(v, key, known_modes, "mode");
        else if (key == "precisions")
            g.precisions = r.names(v, key, known_precisions, "precision");
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
        else if (key == "magnitude")
            g.magnitude = r.positives(v, key, 1e6);
    }
}

/// heads divides d_model (unless d_head is given), kv_heads divides heads: checked for every
/// pair the grid forms.
void check_combinations(const reader& r, const located_grid& lg, const std::string& where) {
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
    const bool decode = std::find(g.modes.begin(), g.modes.end(), "decode") != g.modes.end();
    const bool other_modes = std::any_of(g.modes.begin(), g.modes.end(), [](const auto& m) { return m != "decode"; });
    if (other_modes && std::find(g.precisions.begin(), g.precisions.end(), "int8") != g.precisions.end())
        r.fail(line("precisions"), "precisions",
               "value 'int8' is a key/value cache type: it applies to mode 'decode' only" + where);
    if (!decode && line("context") && !(g.context.size() == 1 && g.context[0] == 0))
        r.fail(line("context"), "context", "applies to mode 'decode' only, and modes does not include it" + where);
    if (decode && std::any_of(g.magnitude.begin(), g.magnitude.end(), [](double m) { return m != 1.0; }))
        r.fail(line("magnitude"), "magnitude",
               "applies to modes 'core' and 'layer' only (a decode step's inputs are drawn in [-1, 1])" + where);
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
    const reader r(source);
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
                if (s.check.mode != "core" && s.check.mode != "layer" && s.check.mode != "decode" &&
                    s.check.mode != "both" && s.check.mode != "all")
                    r.fail(v, key,
                           "must be \"core\", \"layer\", \"decode\", \"both\" or \"all\" (got \"" + s.check.mode +
                               "\")");
            }
        }
        // check's own defaults where the file leaves a size out (d_model 64, heads 4)
        lg.g.d_model = s.check.d_model.empty() ? std::vector<std::size_t>{64} : s.check.d_model;
        lg.g.heads = s.check.heads.empty() ? std::vector<std::size_t>{4} : s.check.heads;
        lg.g.kv_heads = s.check.kv_heads;
        lg.g.modes = {"core"};
        check_combinations(r, lg, " in [check]");
    }

    // [peers] providers: other libraries timed on the same grids (attn.peers)
    if (const auto* n = root.get("peers")) {
        const auto& t = r.table(*n, "peers");
        r.only(t, {"providers"}, "[peers]");
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
