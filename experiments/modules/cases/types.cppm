// attn.cases:types -- the one case type and the grid of them, as data. A case is everything one
// timed run varies: the provider (a registered variant, or a peer), the mode, the storage type,
// the device, the shape and the thread count. What the suite does with each field -- its JSON
// key, its part of the id, its sweep key, its flag, its column -- is written once, in the field
// table (attn.cases:schema); this file holds the members that table binds, and the grid's lists.
// A field registered at run time (register_case_field) lives in `extra` of both.
module;
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>
#include <nlohmann/json.hpp>
export module attn.cases:types;
export import attn.core;

export namespace attn {

/// One timed run. For decode, n_q = 1 and n_kv = context + 1 (the new token attends over the
/// cache and itself); otherwise context = 0. Every member but `grids` and `extra` is a row of the
/// field table (attn.cases:schema, which says what each means and how it shows); a static_assert
/// there holds the member count to the table.
struct sweep_case {
    attn::mode mode = attn::mode::core;
    std::string variant; ///< the provider: a registered variant or a peer's name
    std::size_t d_model = 0, heads = 0, kv_heads = 0;
    std::size_t d_head = 0; ///< d_model / heads unless given (the wide counterfactual: d_head = d_model; MLA:
                            ///< nope + rope, DeepSeek's qk_head_dim)
    std::size_t d_v = 0;    ///< the value head when it differs from d_head (MLA's v_head_dim), else 0
    std::size_t kv_lora_rank = 0, q_lora_rank = 0, qk_rope_head_dim = 0; ///< MLA's latent widths (attn.core:latent)
    std::size_t n_q = 0, context = 0, n_kv = 0, batch = 1, threads = 1;
    bool causal = false;
    std::size_t window = 0; ///< sliding window W (attn::problem::window; 0: none); needs causal (decode: always)
    bool bias = false;      ///< projections with biases (layer and decode)
    double magnitude = 1.0; ///< inputs drawn uniformly in [-magnitude, magnitude]
    attn::dtype precision = attn::dtype::f32; ///< storage type; decode: the cache's type
    attn::family family = attn::family::mha;  ///< derived from the shape for the families of the one computation
    attn::form form = attn::form::none;       ///< a family's form, where it has more than one
    attn::device device = attn::device::cpu;
    std::map<std::string, nlohmann::json> extra; ///< fields registered at run time: name -> value
    std::vector<std::string> grids;              ///< the sweep grids that asked for it (a case runs once)

    bool decode() const { return mode == attn::mode::decode; }

    /// Whether d_head was given rather than d_model / heads.
    bool explicit_d_head() const { return heads && (d_model % heads || d_head != d_model / heads); }

    /// Stable and file-name safe: "core-simd-d512-h8-g8-n1024-b1-t2" (+ "-causal"; decode:
    /// "decode-parallel-d1024-h16-g4-ctx4096-b1-t2"); a field away from its default adds its part
    /// ("-w256", "-bf16", ...), so a case that leaves the later fields at their defaults keeps the
    /// id it always had. Each field's part is its row's (attn.cases:schema).
    std::string id() const;

    /// One line for people: "simd core d_model=512 H=8 N=1024 B=1 t=2" (each row's text).
    std::string text() const;

    /// The magnitude, shortest round-trip ("100", "0.5").
    std::string magnitude_text() const;

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
/// one of check's embedded grids. Each list is one field's values (its row in attn.cases:schema
/// names the list's sweep key and flag). kv_heads 0 means G = H; d_head 0 means d_model / H;
/// threads 0 means every logical CPU; seq is N for core and layer (kv_seq N_kv, 0: N_kv = N),
/// context is L for decode. No variants: the grid's shapes alone (variant ""), for a consumer
/// that crosses them with its own providers (check).
struct grid {
    std::string name = "grid";
    std::vector<std::string> variants{"all"};
    std::vector<attn::mode> modes{attn::mode::core};
    std::vector<attn::dtype> precisions{attn::dtype::f32};
    std::vector<attn::device> devices{attn::device::cpu};
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
    std::map<std::string, std::vector<nlohmann::json>> extra; ///< registered fields' lists (empty: the default)

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

} // namespace attn
