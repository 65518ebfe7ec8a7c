// attn.cases' field table: the built-in rows, one per member of sweep_case, in the one order (the
// id's: every case id written before this table keeps its spelling), then the registered ones;
// lookup and registration (a value's checks and what the rows compose: values.cpp).
module;
#include <algorithm>
#include <cstddef>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>
#include <nlohmann/json.hpp>
module attn.cases;
import attn.variants;

namespace attn {

namespace {

using json = nlohmann::json;
using std::to_string;

std::string num(std::size_t v) { return to_string(v); }

/// The part of a row that is shown only away from the default: "-<tag><value>" and " <label>=<value>".
case_field shown_when_set(case_field f, std::string id_tag, std::string text_tag) {
    f.id = [name = f.name, id_tag](const sweep_case& c) {
        const case_field& r = find_case_field(name);
        const json v = r.get(c);
        if (v == r.fallback) return std::string();
        return "-" + id_tag + (v.is_boolean() ? std::string() : detail::value_text(v));
    };
    f.text = [name = f.name, text_tag](const sweep_case& c) {
        const case_field& r = find_case_field(name);
        const json v = r.get(c);
        if (v == r.fallback) return std::string();
        return " " + text_tag + (v.is_boolean() ? std::string() : detail::value_text(v));
    };
    return f;
}

/// Names a kind's table gives, restricted to `allowed` where that is not empty.
template <class E>
std::function<std::vector<std::string>()> names_of_kind(std::vector<E> allowed = {}) {
    return [allowed] {
        std::vector<std::string> out;
        for (const E e : allowed.empty() ? enum_values<E>() : allowed) out.emplace_back(enum_name(e));
        return out;
    };
}

std::vector<case_field> builtin_rows() {
    std::vector<case_field> r;
    auto row = [](std::string name, std::string label, std::string axis, std::string flag, std::string help) {
        case_field f;
        f.name = std::move(name);
        f.label = std::move(label);
        f.axis = std::move(axis);
        f.flag = std::move(flag);
        f.help = std::move(help);
        return f;
    };
    // the mode and the provider: expand's own loops
    {
        auto f = bind<&sweep_case::mode, &grid::modes>(row("mode", "mode", "modes", "--mode", "core, layer, decode"));
        f.outer = true;
        f.required = for_all;
        f.names = names_of_kind<mode>();
        f.id = [](const sweep_case& c) { return std::string(enum_name(c.mode)); };
        f.text = [](const sweep_case& c) { return " " + std::string(enum_name(c.mode)); };
        r.push_back(f);
    }
    {
        auto f = bind<&sweep_case::variant, &grid::variants>(
            row("variant", "variant", "variants", "--variant",
                "variants or selectors (all, fast, loops, threaded), comma-separated"));
        f.outer = true;
        f.required = for_all;
        f.names = [] {
            std::vector<std::string> v = variant_selectors();
            for (const variant* x : all_variants()) v.push_back(x->name);
            return v;
        };
        f.id = [](const sweep_case& c) { return "-" + c.variant; };
        f.text = [](const sweep_case& c) { return c.variant; }; // the line's first word (text())
        r.push_back(f);
    }
    auto always = [](case_field f, std::string id_tag, std::string text_tag) {
        f.id = [name = f.name, id_tag](const sweep_case& c) {
            return "-" + id_tag + detail::value_text(find_case_field(name).get(c));
        };
        f.text = [name = f.name, text_tag](const sweep_case& c) {
            return " " + text_tag + detail::value_text(find_case_field(name).get(c));
        };
        return f;
    };
    {
        auto f = always(
            bind<&sweep_case::d_model, &grid::d_model>(row("d_model", "d_model", "d_model", "--d-model", "d_model")),
            "d", "d_model=");
        f.min = 1;
        f.required = for_all;
        r.push_back(f);
    }
    {
        auto f = always(bind<&sweep_case::heads, &grid::heads>(row("heads", "H", "heads", "--heads", "query heads H")),
                        "h", "H=");
        f.min = 1;
        f.required = for_all;
        r.push_back(f);
    }
    {
        auto f = bind<&sweep_case::kv_heads, &grid::kv_heads>(
            row("kv_heads", "G", "kv_heads", "--kv-heads", "key/value heads G (0: G = H)"));
        f.id = [](const sweep_case& c) { return "-g" + num(c.kv_heads); };
        f.text = [](const sweep_case& c) { return c.kv_heads != c.heads ? " G=" + num(c.kv_heads) : std::string(); };
        r.push_back(f);
    }
    {
        auto f = bind<&sweep_case::d_head, &grid::d_head>(
            row("d_head", "d_head", "d_head", "", "the head width (0: d_model / H)"));
        f.id = [](const sweep_case& c) { return c.explicit_d_head() ? "-dh" + num(c.d_head) : std::string(); };
        f.text = [](const sweep_case& c) { return c.explicit_d_head() ? " d_head=" + num(c.d_head) : std::string(); };
        r.push_back(f);
    }
    r.push_back(shown_when_set(
        bind<&sweep_case::d_v, &grid::d_v>(row("d_v", "d_v", "d_v", "", "the value head width (0: d_head)")), "dv",
        "d_v="));
    // MLA's latent widths: shown together, where the family has a latent
    auto latent = [](case_field f, std::string id_tag, std::string text_tag) {
        f.id = [name = f.name, id_tag](const sweep_case& c) {
            return c.kv_lora_rank ? "-" + id_tag + detail::value_text(find_case_field(name).get(c)) : std::string();
        };
        f.text = [name = f.name, text_tag](const sweep_case& c) {
            return c.kv_lora_rank ? " " + text_tag + detail::value_text(find_case_field(name).get(c)) : std::string();
        };
        return f;
    };
    {
        auto f = latent(bind<&sweep_case::kv_lora_rank, &grid::kv_lora_rank>(
                            row("kv_lora_rank", "d_c", "kv_lora_rank", "", "MLA's latent width d_c")),
                        "c", "d_c=");
        f.min = 1;
        r.push_back(f);
    }
    r.push_back(latent(bind<&sweep_case::q_lora_rank, &grid::q_lora_rank>(
                           row("q_lora_rank", "d_c'", "q_lora_rank", "", "MLA's query latent width d_c' (0: none)")),
                       "cq", "d_c'="));
    {
        auto f = latent(bind<&sweep_case::qk_rope_head_dim, &grid::qk_rope_head_dim>(
                            row("qk_rope_head_dim", "d_h^R", "qk_rope_head_dim", "", "MLA's rotary part d_h^R (even)")),
                        "r", "d_R=");
        f.min = 2;
        r.push_back(f);
    }
    // the lengths: N (and N_kv) for core and layer, L for decode
    {
        auto f = bind<&sweep_case::n_q, &grid::seq>(
            row("n_q", "N", "seq", "--seq", "sequence length N (N_q = N_kv unless kv_seq says)"));
        f.min = 1;
        f.modes = f.required = for_core | for_layer;
        f.id = [](const sweep_case& c) { return c.decode() ? std::string() : "-n" + num(c.n_q); };
        f.text = [](const sweep_case& c) { return c.decode() ? std::string() : " N=" + num(c.n_q); };
        r.push_back(f);
    }
    {
        auto f = bind<&sweep_case::context, &grid::context>(
            row("context", "L", "context", "--context", "decode: tokens already in the cache, L"));
        f.modes = f.required = for_decode;
        f.id = [](const sweep_case& c) { return c.decode() ? "-ctx" + num(c.context) : std::string(); };
        f.text = [](const sweep_case& c) { return c.decode() ? " L=" + num(c.context) : std::string(); };
        r.push_back(f);
    }
    {
        auto f = bind<&sweep_case::n_kv, &grid::kv_seq>(
            row("n_kv", "N_kv", "kv_seq", "", "keys and values N_kv (0: N_kv = N)"));
        f.modes = for_core | for_layer;
        f.id = [](const sweep_case& c) {
            return !c.decode() && c.n_kv != c.n_q ? "-nkv" + num(c.n_kv) : std::string();
        };
        f.text = [](const sweep_case& c) {
            return !c.decode() && c.n_kv != c.n_q ? " N_kv=" + num(c.n_kv) : std::string();
        };
        r.push_back(f);
    }
    {
        auto f = always(bind<&sweep_case::batch, &grid::batch>(row("batch", "batch", "batch", "--batch", "batch")), "b",
                        "B=");
        f.min = 1;
        r.push_back(f);
    }
    {
        auto f = always(bind<&sweep_case::threads, &grid::threads>(
                            row("threads", "threads", "threads", "--threads",
                                "thread counts (0: all cores); single-threaded variants run at 1")),
                        "t", "t=");
        f.max = double(thread_limit());
        r.push_back(f);
    }
    {
        auto f = bind<&sweep_case::causal, &grid::causal>(row("causal", "causal", "causal", "--causal", "0, 1 or 0,1"));
        f.modes = for_core | for_layer;
        f.id = [](const sweep_case& c) { return c.causal && !c.decode() ? "-causal" : ""; };
        f.text = [](const sweep_case& c) { return c.causal && !c.decode() ? " causal" : ""; };
        r.push_back(f);
    }
    {
        auto f = shown_when_set(bind<&sweep_case::window, &grid::window>(
                                    row("window", "W", "window", "--window",
                                        "sliding windows W, comma-separated (each query sees the W keys ending at its "
                                        "own; 0: none); needs causal but in decode")),
                                "w", "W=");
        f.max = double(max_window);
        r.push_back(f);
    }
    r.push_back(
        shown_when_set(bind<&sweep_case::bias, &grid::bias>(row("bias", "bias", "bias", "", "projections with biases")),
                       "bias", "bias"));
    {
        auto f = bind<&sweep_case::magnitude, &grid::magnitude>(
            row("magnitude", "|x| max", "magnitude", "", "inputs drawn uniformly in [-magnitude, magnitude]"));
        f.max = 1e6;
        f.id = [](const sweep_case& c) { return c.magnitude != 1.0 ? "-mag" + c.magnitude_text() : std::string(); };
        f.text = [](const sweep_case& c) { return c.magnitude != 1.0 ? " |x|<=" + c.magnitude_text() : std::string(); };
        r.push_back(f);
    }
    {
        auto f = bind<&sweep_case::precision, &grid::precisions>(
            row("precision", "precision", "precisions", "--precision",
                "f32, bf16, f16 (f64 for the variants that have it); decode: the cache's type, f32, bf16, f16 or "
                "int8"));
        f.names = names_of_kind<dtype>(); // the one list of storage types; a variant without one refuses it
        f.id = [](const sweep_case& c) {
            return c.precision != dtype::f32 ? "-" + std::string(enum_name(c.precision)) : std::string();
        };
        f.text = [](const sweep_case& c) {
            return c.precision != dtype::f32 ? " " + std::string(enum_name(c.precision)) : std::string();
        };
        r.push_back(f);
    }
    {
        // the named families only: the others are told apart by their shape (family_of)
        auto f = bind<&sweep_case::family, &grid::families>(
            row("family", "family", "families", "", "a named family (mla); the others follow from the shape"));
        f.names = names_of_kind<family>({family::mla});
        f.count = [](const grid& g) { return std::max<std::size_t>(g.families.size(), 1); };
        f.take = [](sweep_case& c, const grid& g, std::size_t i) {
            if (!g.families.empty()) c.family = g.families[i];
        };
        f.id = [](const sweep_case& c) {
            return derived_family(c.family) ? std::string() : "-" + std::string(enum_name(c.family));
        };
        f.text = [](const sweep_case& c) {
            return derived_family(c.family) ? std::string() : " " + std::string(enum_label(c.family));
        };
        r.push_back(f);
    }
    {
        auto f = bind<&sweep_case::form, &grid::forms>(row("form", "form", "forms", "", "MLA's forms: naive, absorb"));
        f.names = names_of_kind<form>({form::naive, form::absorb});
        f.id = [](const sweep_case& c) {
            return c.form != form::none ? "-" + std::string(enum_name(c.form)) : std::string();
        };
        f.text = [](const sweep_case& c) {
            return c.form != form::none ? " " + std::string(enum_name(c.form)) : std::string();
        };
        r.push_back(f);
    }
    {
        auto f = bind<&sweep_case::device, &grid::devices>(
            row("device", "device", "devices", "--device", "where the cases run: cpu, cuda"));
        f.names = names_of_kind<device>();
        f.id = [](const sweep_case& c) {
            return c.device != device::cpu ? "-" + std::string(enum_name(c.device)) : std::string();
        };
        f.text = [](const sweep_case& c) {
            return c.device != device::cpu ? " " + std::string(enum_name(c.device)) : std::string();
        };
        r.push_back(f);
    }
    return r;
}

struct schema_table {
    std::vector<case_field> rows = builtin_rows();
    std::size_t builtin = rows.size();
};

schema_table& table() {
    static schema_table t;
    return t;
}

} // namespace

const std::vector<case_field>& case_schema() { return table().rows; }

std::size_t builtin_case_fields() { return table().builtin; }

const case_field& find_case_field(std::string_view name) {
    std::string known;
    for (const auto& f : case_schema()) {
        if (f.name == name) return f;
        known += (known.empty() ? "" : ", ") + f.name;
    }
    throw error("unknown case field '" + std::string(name) + "' (known: " + known + ")");
}

void register_case_field(case_field f) {
    require(!f.name.empty() && f.name != "grids", "a registered case field needs a name (not 'grids')");
    for (const auto& r : case_schema()) {
        require(r.name != f.name, "case field '" + f.name + "' is registered already");
        require(f.axis.empty() || r.axis != f.axis, "sweep key '" + f.axis + "' is case field '" + r.name + "''s");
        require(f.flag.empty() || r.flag != f.flag, "flag '" + f.flag + "' is case field '" + r.name + "''s");
    }
    require(f.kind != value_kind::name || f.names, "case field '" + f.name + "' is a name: give its names");
    if (f.label.empty()) f.label = f.name;
    if (f.tag.empty()) f.tag = f.name;
    f.fallback = checked_value(f, f.fallback);
    const std::string name = f.name;
    f.get = [name](const sweep_case& c) {
        const auto it = c.extra.find(name);
        return it != c.extra.end() ? it->second : find_case_field(name).fallback;
    };
    f.put = [name](sweep_case& c, const json& v) { c.extra[name] = v; };
    f.list = [name](const grid& g) {
        const auto it = g.extra.find(name);
        return it != g.extra.end() ? it->second : std::vector<json>{find_case_field(name).fallback};
    };
    f.put_list = [name](grid& g, const std::vector<json>& vs) { g.extra[name] = vs; };
    f.count = [name](const grid& g) {
        const auto it = g.extra.find(name);
        return it != g.extra.end() ? it->second.size() : std::size_t(1);
    };
    f.take = [name](sweep_case& c, const grid& g, std::size_t i) {
        const auto it = g.extra.find(name);
        c.extra[name] = it != g.extra.end() ? it->second[i] : find_case_field(name).fallback;
    };
    const std::string tag = f.tag, text_tag = f.label + "=";
    f = shown_when_set(std::move(f), tag, text_tag);
    table().rows.push_back(std::move(f));
}

} // namespace attn
