// attn.cases -- the one case type. A case is everything one timed run varies: the provider (a
// registered variant, or a peer), the mode (core, layer, decode), the precision, the shape and
// the thread count. Sweep files and the harness's flags both describe grids (cross products of
// such fields); expand() turns grids into cases, once, and every consumer -- the report's store,
// the harness, the plots -- reads the same fields through to_json/from_json and names a case
// by id(). Variants are chosen by selector: a name, "all", or a tag ("fast", "loops",
// "threaded"), so a new registered variant joins every grid that selects by tag.
module;
#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>
#include <nlohmann/json.hpp>
export module attn.cases;
export import attn.core;
import attn.variants;

export namespace attn {

/// One timed run. For decode, n_q = 1 and n_kv = context + 1 (the new token attends over the
/// cache and itself); otherwise context = 0.
struct sweep_case {
    std::string variant; ///< the provider: a registered variant or a peer's name
    attn::mode mode = attn::mode::core;
    attn::dtype precision = attn::dtype::f32; ///< storage type; decode: the cache's type
    attn::device device = attn::device::cpu;
    attn::family family = attn::family::mha; ///< derived from the shape for the families of the one computation
    attn::form form = attn::form::none;      ///< a family's form, where it has more than one
    std::size_t d_model = 0, heads = 0, kv_heads = 0;
    std::size_t d_head = 0; ///< d_model / heads unless given (the wide counterfactual: d_head = d_model; MLA:
                            ///< nope + rope, DeepSeek's qk_head_dim)
    std::size_t d_v = 0;    ///< the value head when it differs from d_head (MLA's v_head_dim), else 0
    std::size_t kv_lora_rank = 0, q_lora_rank = 0, qk_rope_head_dim = 0; ///< MLA's latent widths (attn.core:latent)
    std::size_t n_q = 0, n_kv = 0, context = 0, batch = 1, threads = 1;
    bool causal = false;
    std::size_t window = 0; ///< sliding window W (attn::problem::window; 0: none); needs causal (decode: always)
    bool bias = false;      ///< projections with biases (layer and decode)
    double magnitude = 1.0; ///< inputs drawn uniformly in [-magnitude, magnitude]
    std::vector<std::string> grids; ///< the sweep grids that asked for it (a case runs once)

    bool decode() const { return mode == attn::mode::decode; }

    /// Whether d_head was given rather than d_model / heads.
    bool explicit_d_head() const { return heads && (d_model % heads || d_head != d_model / heads); }

    /// Stable and file-name safe: "core-simd-d512-h8-g8-n1024-b1-t2" (+ "-causal"; decode:
    /// "decode-parallel-d1024-h16-g4-ctx4096-b1-t2"). A field away from its default is appended
    /// ("-dh32", "-nkv129", "-bias", "-mag100", a precision other than f32, a named family, a form,
    /// a device other than the CPU), so a case that leaves them at their defaults keeps the id it
    /// always had.
    std::string id() const {
        std::string s = std::string(enum_name(mode)) + "-" + variant + "-d" + std::to_string(d_model) + "-h" +
                        std::to_string(heads) + "-g" + std::to_string(kv_heads);
        if (explicit_d_head()) s += "-dh" + std::to_string(d_head);
        if (d_v) s += "-dv" + std::to_string(d_v);
        if (kv_lora_rank)
            s += "-c" + std::to_string(kv_lora_rank) + "-cq" + std::to_string(q_lora_rank) + "-r" +
                 std::to_string(qk_rope_head_dim);
        s += decode() ? "-ctx" + std::to_string(context) : "-n" + std::to_string(n_q);
        if (n_kv != n_q && !decode()) s += "-nkv" + std::to_string(n_kv);
        s += "-b" + std::to_string(batch) + "-t" + std::to_string(threads);
        if (causal && !decode()) s += "-causal";
        if (window) s += "-w" + std::to_string(window);
        if (bias) s += "-bias";
        if (magnitude != 1.0) s += "-mag" + magnitude_text();
        if (precision != dtype::f32) s += "-" + std::string(enum_name(precision));
        if (!derived_family(family)) s += "-" + std::string(enum_name(family));
        if (form != attn::form::none) s += "-" + std::string(enum_name(form));
        if (device != attn::device::cpu) s += "-" + std::string(enum_name(device));
        return s;
    }

    /// The magnitude, shortest round-trip ("100", "0.5").
    std::string magnitude_text() const {
        char buf[32];
        const auto r = std::to_chars(buf, buf + sizeof buf, magnitude);
        return std::string(buf, r.ptr);
    }

    /// One line for people: "simd core d_model=512 H=8 N=1024 B=1 t=2".
    std::string text() const {
        std::string s = variant + " " + std::string(enum_name(mode)) + " d_model=" + std::to_string(d_model) +
                        " H=" + std::to_string(heads);
        if (kv_heads != heads) s += " G=" + std::to_string(kv_heads);
        if (explicit_d_head()) s += " d_head=" + std::to_string(d_head);
        if (d_v) s += " d_v=" + std::to_string(d_v);
        if (kv_lora_rank)
            s += " d_c=" + std::to_string(kv_lora_rank) + " d_c'=" + std::to_string(q_lora_rank) +
                 " d_R=" + std::to_string(qk_rope_head_dim);
        s += decode() ? " L=" + std::to_string(context) : " N=" + std::to_string(n_q);
        if (n_kv != n_q && !decode()) s += " N_kv=" + std::to_string(n_kv);
        s += " B=" + std::to_string(batch) + " t=" + std::to_string(threads);
        if (causal && !decode()) s += " causal";
        if (window) s += " W=" + std::to_string(window);
        if (bias) s += " bias";
        if (magnitude != 1.0) s += " |x|<=" + magnitude_text();
        if (precision != dtype::f32) s += " " + std::string(enum_name(precision));
        if (!derived_family(family)) s += " " + std::string(enum_label(family));
        if (form != attn::form::none) s += " " + std::string(enum_name(form));
        if (device != attn::device::cpu) s += " " + std::string(enum_name(device));
        return s;
    }

    /// The decode cases that share a harness run (their repetitions interleaved, a triad beside
    /// them) have the same key: every field but the family's (kv_heads, the family, form, head
    /// widths and latents: MHA, GQA, MQA and MLA's two forms at one d_model and H decode side by
    /// side) and the grids; under a sliding window also but the context, so the steps over one
    /// rolling buffer (at most W tokens, whatever L) are timed against each other in one run.
    /// Other cases run alone: their id.
    std::string run_group() const;

    /// The problem this case runs (decode: one query row over context + 1 keys, causal).
    problem shape() const {
        problem p = gqa(d_model, heads, kv_heads, n_q);
        p.n_kv = n_kv;
        p.batch = batch;
        p.d_head = explicit_d_head() ? d_head : 0;
        p.causal = causal || decode();
        p.window = window;
        p.bias = bias;
        if (!derived_family(family)) p.named_family = family;
        p.d_v = d_v;
        p.form = form;
        p.latent = {q_lora_rank, kv_lora_rank, qk_rope_head_dim};
        return p;
    }
};

/// The case's fields as its JSON names them, in their one order (what a sweep's grid crosses, the
/// order perf.json is sorted by and perf.csv's columns), the provider first.
inline const std::vector<std::string_view>& case_fields() {
    static const std::vector<std::string_view> f{"mode",         "precision",   "device",           "family", "form",
                                                 "d_model",      "heads",       "kv_heads",         "d_head", "d_v",
                                                 "kv_lora_rank", "q_lora_rank", "qk_rope_head_dim", "n_q",    "n_kv",
                                                 "context",      "batch",       "threads",          "causal", "window",
                                                 "bias",         "magnitude"};
    return f;
}

/// nlohmann's ADL hooks, for json and ordered_json alike.
template <class Json>
void to_json(Json& j, const sweep_case& c) {
    j = Json{{"variant", c.variant},
             {"mode", enum_name(c.mode)},
             {"precision", enum_name(c.precision)},
             {"device", enum_name(c.device)},
             {"family", enum_name(c.family)},
             {"form", enum_name(c.form)},
             {"d_model", c.d_model},
             {"heads", c.heads},
             {"kv_heads", c.kv_heads},
             {"d_head", c.d_head},
             {"d_v", c.d_v},
             {"kv_lora_rank", c.kv_lora_rank},
             {"q_lora_rank", c.q_lora_rank},
             {"qk_rope_head_dim", c.qk_rope_head_dim},
             {"n_q", c.n_q},
             {"n_kv", c.n_kv},
             {"context", c.context},
             {"batch", c.batch},
             {"threads", c.threads},
             {"causal", c.causal},
             {"window", c.window},
             {"bias", c.bias},
             {"magnitude", c.magnitude},
             {"grids", c.grids}};
}

/// Reads a case; every field but the provider, mode and shape has a default. Throws
/// attn::error naming the field that is missing or of the wrong type. A case written before the
/// family, form and device existed reads as the family its shape gives, no form, on the CPU.
template <class Json>
void from_json(const Json& j, sweep_case& c) {
    require(j.is_object(), "a case must be a JSON object, not " + std::string(j.type_name()));
    auto get = [&](const char* key, auto& into, bool required) {
        const auto it = j.find(key);
        if (it == j.end()) {
            require(!required, std::string("the case has no field '") + key + "'");
            return;
        }
        // nlohmann converts any number to an integer field with a plain cast: -1 would wrap and
        // 1e300 is undefined behaviour. A size must be a non-negative JSON integer.
        if constexpr (std::is_same_v<std::remove_cvref_t<decltype(into)>, std::size_t>)
            require(it->is_number_integer() && (it->is_number_unsigned() || it->template get<std::int64_t>() >= 0),
                    std::string("the case's field '") + key + "' must be a non-negative integer, not " + it->dump());
        try {
            it->get_to(into);
        } catch (const typename Json::exception&) {
            throw error(std::string("the case's field '") + key + "' has the wrong type (" + it->type_name() + ")");
        }
    };
    // a kind: its name as a string, read through the kind's one name table
    auto kind = [&]<class E>(const char* key, E& into, bool required) {
        std::string s;
        get(key, s, required);
        if (s.empty() && !required) return;
        try {
            into = parse_enum<E>(s);
        } catch (const error& e) {
            throw error(std::string("the case's field '") + key + "': " + e.what());
        }
    };
    get("variant", c.variant, true);
    kind("mode", c.mode, true);
    kind("precision", c.precision, false);
    kind("device", c.device, false);
    std::optional<attn::family> named;
    if (j.contains("family")) {
        attn::family f{};
        kind("family", f, false);
        named = f;
    }
    kind("form", c.form, false);
    get("d_model", c.d_model, true);
    get("heads", c.heads, true);
    get("kv_heads", c.kv_heads, false);
    if (!c.kv_heads) c.kv_heads = c.heads;
    get("n_q", c.n_q, !c.decode());
    get("context", c.context, c.decode());
    get("batch", c.batch, false);
    get("threads", c.threads, false);
    check_threads(c.threads, "the case's threads");
    get("causal", c.causal, false);
    get("window", c.window, false);
    get("bias", c.bias, false);
    get("magnitude", c.magnitude, false);
    get("grids", c.grids, false);
    get("d_head", c.d_head, false);
    get("d_v", c.d_v, false);
    get("kv_lora_rank", c.kv_lora_rank, false);
    get("q_lora_rank", c.q_lora_rank, false);
    get("qk_rope_head_dim", c.qk_rope_head_dim, false);
    require(!named || *named != family::mla || c.d_head,
            "the case's family mla needs d_head (qk_nope_head_dim + qk_rope_head_dim)");
    require(std::isfinite(c.magnitude) && c.magnitude > 0 && c.magnitude <= 1e6,
            "the case's magnitude " + std::to_string(c.magnitude) + " is not in (0, 1e6]");
    require(c.heads > 0 && (c.d_head || c.d_model % c.heads == 0), "the case's heads " + std::to_string(c.heads) +
                                                                       " does not divide d_model " +
                                                                       std::to_string(c.d_model) + " (give d_head)");
    if (!c.d_head) c.d_head = c.d_model / c.heads;
    const attn::family shaped = family_of(c.d_model, c.heads, c.kv_heads, c.d_head);
    c.family = named && !derived_family(*named) ? *named : shaped;
    require(!named || *named == c.family, "the case's family '" + std::string(enum_name(*named)) +
                                              "' does not match its shape (d_model " + std::to_string(c.d_model) +
                                              ", heads " + std::to_string(c.heads) + ", kv_heads " +
                                              std::to_string(c.kv_heads) + ", d_head " + std::to_string(c.d_head) +
                                              ": " + std::string(enum_name(shaped)) + ")");
    if (c.d_v == c.d_head) c.d_v = 0; // one spelling: 0 when the value head is the query/key head
    if (c.decode()) {
        require(c.context < std::numeric_limits<std::size_t>::max(),
                "the case's context " + std::to_string(c.context) + " is too large");
        c.n_q = 1;
        c.n_kv = c.context + 1;
        to_kv_dtype(c.precision); // the cache's type: f32, bf16, f16 or int8
    } else {
        c.n_kv = c.n_q;
        get("n_kv", c.n_kv, false);
        c.context = 0;
        to_precision(c.precision); // the storage type: f64, f32, bf16 or f16
    }
    c.shape().validate();
}

inline std::string sweep_case::run_group() const {
    if (!decode()) return id();
    sweep_case key = *this;
    key.kv_heads = 0;
    key.family = attn::family::mha;
    key.form = attn::form::none;
    key.d_head = key.d_v = key.kv_lora_rank = key.q_lora_rank = key.qk_rope_head_dim = 0;
    if (window) key.context = key.n_kv = 0; // a rolling buffer's steps: one run over every L
    key.grids.clear();
    return "decode:" + nlohmann::json(key).dump();
}

/// What a grid's cases are drawn as in a report: time, GFLOP/s and % of peak against N; time
/// against H at fixed d_model (the free lunch); speed-up and efficiency against threads; the decode
/// figures; the latent-attention section (MLA beside the families of its shape); the
/// local-attention section (sliding windows beside the full causal mask); or the medians table
/// alone (every case is in it).
enum class figure : std::uint8_t { vs_n, vs_heads, threads, decode, latent, local, table };

template <>
struct names_of<figure> {
    static constexpr std::string_view kind = "figure";
    static constexpr std::array<name_entry<figure>, 7> table{{{figure::vs_n, "vs_n", "time against N"},
                                                              {figure::vs_heads, "vs_heads", "time against H"},
                                                              {figure::threads, "threads", "threads sweep"},
                                                              {figure::decode, "decode", "decoding"},
                                                              {figure::latent, "latent", "latent attention"},
                                                              {figure::local, "local", "local attention"},
                                                              {figure::table, "table", "medians table"}}};
    static std::span<const name_entry<figure>> entries() { return table; }
};

/// A cross product of case fields: one [[perf.grid]] of a sweep file, the harness's flags, or
/// one of check's embedded grids. kv_heads 0 means G = H; d_head 0 means d_model / H; threads 0
/// means every logical CPU; seq is N for core and layer (kv_seq N_kv, 0: N_kv = N), context is L
/// for decode. No variants: the grid's shapes alone (variant ""), for a consumer that crosses
/// them with its own providers (check).
struct grid {
    std::string name = "grid";
    std::vector<std::string> variants{"all"};
    std::vector<attn::mode> modes{attn::mode::core};
    std::vector<attn::dtype> precisions{attn::dtype::f32};
    std::vector<std::size_t> d_model{512}, heads{8}, kv_heads{0}, d_head{0}, seq{1024}, kv_seq{0}, batch{1}, threads{0},
        context{0};
    std::vector<bool> causal{false}, bias{false};
    std::vector<std::size_t> window{0}; ///< sliding windows (0: none); a window needs causal (decode: always)
    std::vector<double> magnitude{1.0};
    std::vector<attn::figure> figures; ///< what the report draws of it; empty: drawn_as() derives it
    /// A named family's axes: the family (empty: derived from the shape), its forms, value head
    /// (0: d_head) and latent widths (MLA; 0 where the family has none).
    std::vector<attn::family> families;
    std::vector<attn::form> forms{attn::form::none};
    std::vector<std::size_t> d_v{0}, kv_lora_rank{0}, q_lora_rank{0}, qk_rope_head_dim{0};

    /// Whether every case it makes is causal (a decode step always is): what a window needs.
    bool causal_only() const {
        const bool other = std::any_of(modes.begin(), modes.end(), [](attn::mode m) { return m != mode::decode; });
        return !other || std::find(causal.begin(), causal.end(), false) == causal.end();
    }
    /// Whether any of its windows is a sliding window (> 0); such a grid needs causal_only().
    bool windowed() const {
        return std::any_of(window.begin(), window.end(), [](std::size_t w) { return w > 0; });
    }

    /// The figures a report draws of this grid: those it names, or those its axes call for (decode
    /// for a decode mode; against N, H or threads where the grid has two or more of them), or the
    /// medians table when it varies none of those.
    std::vector<attn::figure> drawn_as() const {
        if (!figures.empty()) return figures;
        std::vector<attn::figure> f;
        const bool decode = std::find(modes.begin(), modes.end(), mode::decode) != modes.end();
        const bool other = std::any_of(modes.begin(), modes.end(), [](attn::mode m) { return m != mode::decode; });
        // MLA's cases go to the latent-attention section (the decode figures key on G, and MLA's
        // naive form has MHA's G)
        if (std::find(families.begin(), families.end(), family::mla) != families.end()) return {figure::latent};
        // a grid with a sliding window goes to the local-attention section (windows as line styles,
        // beside the grid's own cases without one)
        if (windowed()) return {figure::local};
        if (decode) f.push_back(figure::decode);
        if (other && seq.size() >= 2) f.push_back(figure::vs_n);
        if (other && heads.size() >= 2) f.push_back(figure::vs_heads);
        if (threads.size() >= 2) f.push_back(figure::threads);
        if (f.empty()) f.push_back(figure::table);
        return f;
    }
};

/// The modes a mode selector names: a mode, "both" (core and layer) or "all" (every mode); throws
/// attn::error naming the selector otherwise. `attnbench check --mode` and a sweep's [check] take it.
inline std::vector<attn::mode> select_modes(std::string_view selector) {
    if (selector == "both") return {mode::core, mode::layer};
    if (selector == "all") return enum_values<attn::mode>();
    try {
        return {parse_enum<attn::mode>(selector)};
    } catch (const error&) {
        throw error("unknown mode '" + std::string(selector) + "' (known: " + enum_known<attn::mode>() +
                    ", and the selectors both (core and layer) and all)");
    }
}

/// The variant selectors: "all", a tag ("fast": not plain loops; "loops"; "threaded"), or a name.
inline const std::vector<std::string>& variant_selectors() {
    static const std::vector<std::string> s{"all", "fast", "loops", "threaded"};
    return s;
}

/// The registered variants a selector names, in registry order; throws on an unknown one.
inline std::vector<std::string> select_variants(const std::string& selector) {
    std::vector<std::string> out;
    for (const auto& v : registry()) {
        const bool loops = v.has_tag("loops");
        if (selector == "all" || (selector == "fast" && !loops) || (selector == "loops" && loops) ||
            (selector == "threaded" && v.threaded) || selector == v.name)
            out.push_back(v.name);
    }
    if (out.empty() &&
        std::find(variant_selectors().begin(), variant_selectors().end(), selector) == variant_selectors().end()) {
        std::string known;
        for (const auto& v : registry()) known += ", " + v.name;
        throw error("unknown variant '" + selector + "' (known: all, fast, loops, threaded" + known + ")");
    }
    return out;
}

/// The most cases one expand() builds: a sweep is a list held in memory, and past this it is a
/// list nobody can run (100,000 cases at the minimum of 3 repetitions x 0.1 s is over 8 hours of
/// timing alone).
inline constexpr std::size_t max_cases = 100000;

/// An upper bound on the cases of `grids`: the product of each grid's list lengths, summed over
/// the grids (duplicates and refused combinations are not removed), in saturating arithmetic
/// (SIZE_MAX when it overflows), computed before anything is built.
inline std::size_t case_bound(const std::vector<grid>& grids) {
    constexpr std::size_t top = std::numeric_limits<std::size_t>::max();
    auto mul = [](std::size_t a, std::size_t b) { return b && a > top / b ? top : a * b; };
    std::size_t total = 0;
    for (const auto& g : grids) {
        std::vector<std::string> names;
        for (const auto& s : g.variants)
            for (const auto& n : select_variants(s))
                if (std::find(names.begin(), names.end(), n) == names.end()) names.push_back(n);
        std::size_t per_mode = 0;
        for (const auto& m : g.modes) {
            const std::size_t lengths =
                m == mode::decode ? g.context.size() : mul(mul(g.seq.size(), g.kv_seq.size()), g.causal.size());
            per_mode = per_mode > top - lengths ? top : per_mode + lengths;
        }
        std::size_t n = mul(std::max<std::size_t>(names.size(), 1), per_mode); // no variants: the shapes alone
        for (std::size_t k : {g.precisions.size(), g.d_model.size(), g.heads.size(), g.kv_heads.size(), g.d_head.size(),
                              g.batch.size(), g.threads.size(), g.window.size(), g.bias.size(), g.magnitude.size(),
                              std::max<std::size_t>(g.families.size(), 1), g.forms.size(), g.d_v.size(),
                              g.kv_lora_rank.size(), g.q_lora_rank.size(), g.qk_rope_head_dim.size()})
            n = mul(n, k);
        total = total > top - n ? top : total + n;
    }
    return total;
}

/// Every case of the grids, grid by grid, without duplicates (a case asked for by two grids is
/// run once and lists both). Within a grid: variant, mode, precision, family, form, d_model,
/// heads, kv_heads, d_head, d_v, the latent widths, N or L, N_kv, batch, threads, causal, window,
/// bias, magnitude, the last fastest. Variants that
/// are not threaded run at 1 thread whatever a grid asks; combinations the problem refuses
/// (heads not dividing d_model, ...) throw, or, given `skipped`, are left out with the first
/// refusal's reason stored there.
inline std::vector<sweep_case> expand(const std::vector<grid>& grids, int all_threads, std::string* skipped = nullptr) {
    const std::size_t bound = case_bound(grids);
    require(bound <= max_cases, "the grids ask for " +
                                    (bound == std::numeric_limits<std::size_t>::max() ? std::string("more than 2^64")
                                                                                      : std::to_string(bound)) +
                                    " cases (the product of their lists' lengths), more than the " +
                                    std::to_string(max_cases) + " one run may hold: split the sweep into smaller ones");
    using json = nlohmann::json;
    std::vector<sweep_case> out;
    std::map<std::string, std::size_t> index;
    for (const auto& g : grids) {
        std::vector<std::string> names;
        if (g.variants.empty()) names.push_back(""); // the shapes alone
        for (const auto& s : g.variants)
            for (const auto& n : select_variants(s))
                if (std::find(names.begin(), names.end(), n) == names.end()) names.push_back(n);
        for (const auto& v : names) {
            const bool single = !v.empty() && !find_variant(v).threaded;
            for (const auto m : g.modes) {
                const bool decode = m == mode::decode;
                // the axes, outermost first: a JSON key of the case and its values
                json precisions = json::array(), families = json::array(), forms = json::array();
                for (const auto t : g.precisions) precisions.push_back(enum_name(t));
                for (const auto f : g.families) families.push_back(enum_name(f));
                if (g.families.empty()) families.push_back(nullptr); // derived from the shape
                for (const auto f : g.forms) forms.push_back(enum_name(f));
                const std::vector<std::pair<const char*, json>> axes{
                    {"precision", precisions},
                    {"family", families},
                    {"form", forms},
                    {"d_model", g.d_model},
                    {"heads", g.heads},
                    {"kv_heads", g.kv_heads},
                    {"d_head", g.d_head},
                    {"d_v", g.d_v},
                    {"kv_lora_rank", g.kv_lora_rank},
                    {"q_lora_rank", g.q_lora_rank},
                    {"qk_rope_head_dim", g.qk_rope_head_dim},
                    {decode ? "context" : "n_q", decode ? g.context : g.seq},
                    {"n_kv", decode ? json::array({0}) : json(g.kv_seq)},
                    {"batch", g.batch},
                    {"threads", g.threads},
                    {"causal", decode ? json::array({false}) : json(g.causal)},
                    {"window", g.window},
                    {"bias", g.bias},
                    {"magnitude", g.magnitude}};
                if (std::any_of(axes.begin(), axes.end(), [](const auto& a) { return a.second.empty(); })) continue;
                std::vector<std::size_t> at(axes.size(), 0);
                for (bool more = true; more;) {
                    json j{{"variant", v}, {"mode", enum_name(m)}};
                    for (std::size_t i = 0; i < axes.size(); ++i) j[axes[i].first] = axes[i].second[at[i]];
                    if (j["family"].is_null()) j.erase("family");
                    if (decode)
                        j.erase("n_kv");
                    else if (j["n_kv"] == 0)
                        j["n_kv"] = j["n_q"];
                    const std::size_t t = j["threads"];
                    j["threads"] = single ? 1 : t ? t : std::size_t(std::max(1, all_threads));
                    std::size_t i = axes.size(); // the next combination, the last axis fastest
                    for (; i > 0; --i) {
                        if (++at[i - 1] < axes[i - 1].second.size()) break;
                        at[i - 1] = 0;
                    }
                    more = i > 0;
                    sweep_case c;
                    try {
                        c = j.get<sweep_case>();
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
    return out;
}

} // namespace attn
