// attn.core:latent -- Multi-head Latent Attention's shapes (DeepSeek-V2 section 2.1): a layer
// problem of the mla family, the attention problem each form hands the core, and the named
// configurations of the papers. The layer problem's heads are H = kv_heads, its d_head the whole
// query/key head (nope + rope) and its d_v the value head, so counts written for the q/k/v shape
// read the naive form's decompressed keys and values from it; the absorbed form attends over the
// latent instead:
//   naive:  H heads of keys [k_nope_h | k_pe] (d_head) and values (d_v): MHA with d_qk != d_v;
//   absorb: every head's query mapped into the latent, [q_nope_h W^UK_h | q_pe_h] (d_c + d_h^R),
//           against ONE cached row per token, [kv_norm(c) | k_pe], whose leading d_c elements are
//           also the values: MQA with d_qk = d_c + d_h^R and d_v = d_c, the softmax scale still
//           1/sqrt(nope + rope) (the same scores as the naive form's, in exact arithmetic).
module;
#include <array>
#include <cmath>
#include <cstddef>
#include <span>
#include <string>
#include <string_view>
export module attn.core:latent;
import :error;
import :names;
import :problem;

export namespace attn {

/// An MLA layer problem: d_model, H heads, the query latent (0: W_q straight from x), the
/// key/value latent, the query/key head's non-rotary and rotary parts and the value head; N
/// tokens of self-attention.
inline problem mla(std::size_t d_model, std::size_t heads, std::size_t q_rank, std::size_t kv_rank, std::size_t nope,
                   std::size_t rope, std::size_t v_head, attn::form f, std::size_t n) {
    problem p;
    p.n_q = p.n_kv = n;
    p.d_model = d_model;
    p.heads = p.kv_heads = heads;
    p.d_head = nope + rope;
    p.d_v = v_head;
    p.named_family = family::mla;
    p.form = f;
    p.latent = {q_rank, kv_rank, rope};
    return p;
}

/// The problem MLA's core runs for a layer problem p in its form (batch, lengths, mask carried
/// over; no family of its own: the core sees an MHA or MQA shape). The q/k/v families' is p.
inline problem core_problem(const problem& p) {
    if (!p.latent_family()) return p;
    problem a = p;
    a.named_family.reset();
    a.form = form::none;
    a.latent = {};
    a.scale = p.softmax_scale(); // 1/sqrt(nope + rope) in both forms
    if (p.form == form::absorb) {
        a.kv_heads = 1;
        a.d_head = p.latent.kv_rank + p.latent.rope;
        a.d_v = p.latent.kv_rank;
    }
    return a;
}

/// A named configuration of the papers: the attention's widths of one layer.
struct latent_config {
    std::string_view name;  ///< what --config says
    std::string_view label; ///< what a table shows
    std::size_t d_model, heads, q_rank, kv_rank, nope, rope, v_head;
    std::string_view source; ///< where the numbers are printed
    problem layer(attn::form f, std::size_t n = 1) const {
        return mla(d_model, heads, q_rank, kv_rank, nope, rope, v_head, f, n);
    }
};

/// DeepSeek-V2 (arXiv 2405.04434, section 3.1.2), DeepSeek-V3 (arXiv 2412.19437, section 4.2) and
/// DeepSeek-V2-Lite (the same report, appendix B: no query compression).
inline std::span<const latent_config> latent_configs() {
    static constexpr std::array<latent_config, 3> all{
        {{"deepseek-v2", "DeepSeek-V2", 5120, 128, 1536, 512, 128, 64, 128, "arXiv 2405.04434 section 3.1.2"},
         {"deepseek-v3", "DeepSeek-V3", 7168, 128, 1536, 512, 128, 64, 128, "arXiv 2412.19437 section 4.2"},
         {"deepseek-v2-lite", "DeepSeek-V2-Lite", 2048, 16, 0, 512, 128, 64, 128, "arXiv 2405.04434 appendix B"}}};
    return all;
}

/// The configuration named `name`; throws attn::error listing the known ones.
inline const latent_config& find_latent_config(std::string_view name) {
    std::string known;
    for (const auto& c : latent_configs()) {
        if (c.name == name) return c;
        known += (known.empty() ? "" : ", ") + std::string(c.name);
    }
    throw error("unknown MLA configuration '" + std::string(name) + "' (known: " + known + ")");
}

} // namespace attn
