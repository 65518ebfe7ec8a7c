// attn.core:problem -- the description of one attention computation, its validation,
// and the named families. Single-head, MHA, MQA and GQA are one computation with
// different (heads, kv_heads): query head h reads key/value head floor(h*G/H). The query/key
// width and the value width are separate (equal for those families; a family may differ).
module;
#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <new>
#include <optional>
#include <source_location>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
export module attn.core:problem;
export import :error;
export import :names;

export namespace attn {

/// The stages of one attention layer, in the order the reference computes them: the q/k/v
/// family's projections, the attention core, the output projection, then the stages only MLA's
/// layer has (its down- and up-projections, norms, rotary embedding and absorbed maps).
enum class stage : int {
    proj_q,
    proj_k,
    proj_v,
    qk,
    scale,
    mask,
    softmax_max,
    softmax_exp,
    softmax_sum,
    softmax_div,
    pv,
    proj_o,
    q_down,   ///< MLA: x W_q^a (the query latent)
    q_norm,   ///< MLA: RMSNorm of the query latent
    kv_down,  ///< MLA: x W_kv^a (the key/value latent and the shared rope key)
    kv_norm,  ///< MLA: RMSNorm of the key/value latent
    rope,     ///< MLA: the rotary embedding of the rope parts of queries and keys
    kv_up,    ///< MLA naive: the latent decompressed into per-head keys and values (W_kv^b)
    absorb_q, ///< MLA absorbed: each head's query mapped into the latent (W^UK folded in)
    absorb_o, ///< MLA absorbed: each head's latent context mapped to its values (W^UV)
    count_
};

inline constexpr std::string_view stage_name(stage s) {
    constexpr std::string_view names[] = {"proj_q",  "proj_k",      "proj_v",      "qk",          "scale",
                                          "mask",    "softmax_max", "softmax_exp", "softmax_sum", "softmax_div",
                                          "pv",      "proj_o",      "q_down",      "q_norm",      "kv_down",
                                          "kv_norm", "rope",        "kv_up",       "absorb_q",    "absorb_o"};
    return names[static_cast<int>(s)];
}

/// The stages of the attention core (QK^T to P V); every other stage is per token (a projection).
inline constexpr bool is_attention_stage(stage s) { return s >= stage::qk && s <= stage::pv; }

/// MLA's widths beyond the problem's own (DeepSeek-V2 section 2.1): the query latent d_c'
/// (q_lora_rank; 0: queries straight from x through W_q), the key/value latent d_c
/// (kv_lora_rank) and the rotary part of each query/key head d_h^R (qk_rope_head_dim). The
/// problem's d_head is the whole query/key head, qk_nope_head_dim + qk_rope_head_dim, and its
/// d_v the value head (v_head_dim). All zero for the other families.
struct latent_widths {
    std::size_t q_rank = 0;  ///< q_lora_rank d_c'
    std::size_t kv_rank = 0; ///< kv_lora_rank d_c
    std::size_t rope = 0;    ///< qk_rope_head_dim d_h^R
    bool operator==(const latent_widths&) const = default;
};

/// The family a shape of the one computation belongs to: wide when each of several heads is as
/// wide as the model, else single-head, MHA (G = H), MQA (G = 1) or GQA.
inline family family_of(std::size_t d_model, std::size_t heads, std::size_t kv_heads, std::size_t d_head) {
    if (heads > 1 && d_head == d_model) return family::wide;
    if (heads == 1) return family::single_head;
    if (kv_heads == heads) return family::mha;
    if (kv_heads == 1) return family::mqa;
    return family::gqa;
}

/// The largest sliding window a problem may name (2^32 keys): past any sequence the suite can
/// hold, so a larger one is a typo (a window at least n_kv equals the plain causal mask).
inline constexpr std::size_t max_window = std::size_t(1) << 32;

/// One attention computation. y = Attention(x_q W_q^T + b_q, x_kv W_k^T + b_k, x_kv W_v^T + b_v) W_o^T + b_o
/// for the families of the one computation; a named family (attn.families) owns its own layer
/// around the same attention core. The core sees queries and keys of width qk_dim() and values
/// (and its output) of width v_dim().
struct problem {
    std::size_t batch = 1;
    std::size_t n_q = 1;  ///< query length
    std::size_t n_kv = 1; ///< key/value length
    std::size_t d_model = 1;
    std::size_t heads = 1;    ///< query heads H
    std::size_t kv_heads = 1; ///< key/value heads G; H % G == 0
    std::size_t d_head = 0;   ///< query/key width per head; 0 means d_model / H
    std::size_t d_v = 0;      ///< value (and context) width per head; 0 means the query/key width
    bool causal = false;      ///< bottom-right aligned: query i sees keys j <= i + n_kv - n_q
    /// Sliding window (local attention): the number of keys a query sees, itself included -- the
    /// query whose last visible key is e sees keys e-W+1 .. e (Mistral's and Hugging Face's
    /// convention). 0: none. Needs the causal mask, whose alignment it shares.
    std::size_t window = 0;
    bool bias = false;
    std::optional<double> scale;              ///< default 1/sqrt(qk_dim())
    std::optional<attn::family> named_family; ///< a named family; unset: derived from the shape (family_of)
    attn::form form = attn::form::none;       ///< MLA: naive or absorb; none for the other families
    latent_widths latent;                     ///< MLA's latent and rope widths

    std::size_t qk_dim() const { return d_head ? d_head : d_model / heads; }
    std::size_t v_dim() const { return d_v ? d_v : qk_dim(); }
    double softmax_scale() const { return scale ? *scale : 1.0 / std::sqrt(double(qk_dim())); }
    std::size_t q_width() const { return heads * qk_dim(); }    ///< all query heads
    std::size_t k_width() const { return kv_heads * qk_dim(); } ///< all key heads
    std::size_t v_width() const { return kv_heads * v_dim(); }  ///< all value heads
    std::size_t o_width() const { return heads * v_dim(); }     ///< the concatenated context of every head
    std::size_t kv_head_of(std::size_t h) const { return h * kv_heads / heads; }
    /// The first query head of kv head g: the heads h with kv_head_of(h) = g are [first_head_of(g),
    /// first_head_of(g + 1)).
    std::size_t first_head_of(std::size_t g) const { return (g * heads + kv_heads - 1) / kv_heads; }
    attn::family family() const { return named_family ? *named_family : family_of(d_model, heads, kv_heads, qk_dim()); }
    bool latent_family() const { return named_family == attn::family::mla; }
    /// MLA: the query/key head's part without the rotary embedding (qk_nope_head_dim).
    std::size_t nope_dim() const { return qk_dim() - latent.rope; }

    /// One past the last key query row i sees (bottom-right causal alignment); 0 when it sees
    /// none (possible when n_q > n_kv).
    std::size_t keys_end(std::size_t i) const {
        if (!causal) return n_kv;
        const long long last = (long long)i + (long long)n_kv - (long long)n_q; // last visible key
        if (last < 0) return 0;
        return std::min<std::size_t>(n_kv, std::size_t(last) + 1);
    }
    /// The first key query row i sees: keys_end(i) - window under a window, else 0. Both ends
    /// grow with i, so the rows that see any key of a key range are one contiguous range.
    std::size_t keys_begin(std::size_t i) const {
        const std::size_t e = keys_end(i);
        return window && e > window ? e - window : 0;
    }
    /// How many keys query row i sees: keys_begin(i) .. keys_end(i) - 1.
    std::size_t visible(std::size_t i) const { return keys_end(i) - keys_begin(i); }

    /// This problem with a window that hides no key (window >= n_kv) dropped: the plain causal
    /// mask, which the kernels then compute exactly as they compute it (the same bytes).
    problem effective() const {
        problem p = *this;
        if (p.window >= p.n_kv) p.window = 0;
        return p;
    }

    /// This one-row problem (n_q = 1) over only the keys its row sees, n_kv = visible(0): what a
    /// decode core streams, and what a rolling-buffer cache holds under a sliding window.
    problem seen_keys() const {
        problem p = *this;
        p.n_kv = visible(0);
        return p;
    }

    /// Number of query rows (per head, per sequence) that see at least one key: under the causal
    /// mask row i sees keys once i >= n_q - n_kv.
    std::size_t rows_with_keys() const { return causal ? std::min(n_q, n_kv) : n_q; }

    /// Number of (query, key) pairs that are scored in one head of one sequence, in closed form
    /// (sum over rows of visible(i)). Causal rows that see keys end at a = max(1, n_kv - n_q + 1),
    /// a + 1, ..., n_kv keys, and a row ending at e sees min(e, W) of them (W: the window, or
    /// unbounded), so the sum is S(n_kv) - S(a - 1) with S(m) = sum_{e=1..m} min(e, W), which is
    /// m(m+1)/2 for m <= W and W(W+1)/2 + (m - W) W past it. Without a window: n_kv(n_kv+1)/2
    /// when n_q >= n_kv, n_q(n_kv - n_q) + n_q(n_q+1)/2 when not.
    std::size_t visible_pairs() const {
        if (!causal) return n_q * n_kv;
        const auto S = [w = window](std::size_t m) {
            if (w == 0 || m <= w) return m * (m + 1) / 2;
            return w * (w + 1) / 2 + (m - w) * w;
        };
        const std::size_t a = n_q >= n_kv ? 1 : n_kv - n_q + 1;
        return S(n_kv) - S(a - 1);
    }

    std::string describe() const {
        std::string s = std::string(enum_label(family())) + " B=" + std::to_string(batch) +
                        " Nq=" + std::to_string(n_q) + " Nkv=" + std::to_string(n_kv) +
                        " d_model=" + std::to_string(d_model) + " H=" + std::to_string(heads) +
                        " G=" + std::to_string(kv_heads) + " d_head=" + std::to_string(qk_dim());
        if (v_dim() != qk_dim()) s += " d_v=" + std::to_string(v_dim());
        if (latent_family())
            s += " C=" + std::to_string(latent.kv_rank) + " Cq=" + std::to_string(latent.q_rank) +
                 " Dr=" + std::to_string(latent.rope) + " " + std::string(enum_name(form));
        if (causal) s += " causal";
        if (window) s += " window=" + std::to_string(window);
        if (bias) s += " bias";
        return s;
    }

    /// Throws attn::error naming the first bad value.
    void validate() const {
        require(batch > 0, "batch must be >= 1 (got 0)");
        require(n_q > 0, "query length must be >= 1 (got 0)");
        require(n_kv > 0, "key/value length must be >= 1 (got 0)");
        require(d_model > 0, "d_model must be >= 1 (got 0)");
        require(heads > 0, "heads must be >= 1 (got 0)");
        require(kv_heads > 0, "kv_heads must be >= 1 (got 0)");
        require(d_head > 0 || d_model % heads == 0, "d_model=" + std::to_string(d_model) +
                                                        " is not divisible by heads=" + std::to_string(heads) +
                                                        " (give d_head explicitly)");
        require(kv_heads <= heads, "kv_heads=" + std::to_string(kv_heads) + " exceeds heads=" + std::to_string(heads));
        require(heads % kv_heads == 0,
                "heads=" + std::to_string(heads) + " is not divisible by kv_heads=" + std::to_string(kv_heads));
        require(!named_family || !derived_family(*named_family) ||
                    *named_family == family_of(d_model, heads, kv_heads, qk_dim()),
                "family " + std::string(enum_label(named_family.value_or(family::mha))) + " does not match " +
                    "d_model=" + std::to_string(d_model) + " H=" + std::to_string(heads) +
                    " G=" + std::to_string(kv_heads) + " d_head=" + std::to_string(qk_dim()) + " (a " +
                    std::string(enum_label(family_of(d_model, heads, kv_heads, qk_dim()))) + " shape)");
        // Every count the suite derives (elements, bytes, FLOPs of each convention) is a 64-bit
        // integer; the largest are about 4 x B x H x N_q x N_kv x (d_qk + d_v) (the attention's
        // FLOPs with softmax) and 8 x B x (N_q + N_kv) x d_model x (H + G) x max(d_qk, d_v) (the
        // projections'). They are estimated in long double, so no product wraps before it is compared.
        const long double b = batch, nq = n_q, nkv = n_kv, d = std::max(qk_dim(), v_dim());
        const long double seen = window ? std::min<long double>(nkv, window) : nkv; // keys per query at most
        const long double attention = 8.0L * b * heads * nq * seen * d;
        const long double projection = 8.0L * b * (nq + nkv) * d_model * (heads + kv_heads) * d;
        const long double limit = 9.2e18L; // just under 2^63
        require(attention < limit && projection < limit,
                "problem too large to count in 64 bits: batch=" + std::to_string(batch) + " heads=" +
                    std::to_string(heads) + " N_q=" + std::to_string(n_q) + " N_kv=" + std::to_string(n_kv) +
                    " d_model=" + std::to_string(d_model) + " d_head=" + std::to_string(qk_dim()) + ": about 2^" +
                    std::to_string(int(std::log2(double(std::max(attention, projection))))) + " FLOPs, over 2^63");
        require(window == 0 || causal, "window=" + std::to_string(window) +
                                           " needs the causal mask (a sliding window looks back from each query)");
        require(window <= max_window, "window=" + std::to_string(window) + " is absurd: at most " +
                                          std::to_string(max_window) + " keys (2^32)");
        require(!scale || std::isfinite(*scale),
                "softmax scale must be finite (got " + std::to_string(scale.value_or(0.0)) + ")");
        if (latent_family()) {
            const auto n = [](std::size_t x) { return std::to_string(x); };
            require(form == attn::form::naive || form == attn::form::absorb,
                    "MLA needs a form, naive or absorb (got " + std::string(enum_name(form)) + ")");
            require(latent.kv_rank > 0, "MLA's kv_lora_rank must be >= 1 (got 0)");
            require(latent.rope > 0 && latent.rope % 2 == 0,
                    "MLA's qk_rope_head_dim must be even and >= 2 (got " + n(latent.rope) + ")");
            require(qk_dim() > latent.rope, "MLA's query/key head d_head=" + n(qk_dim()) +
                                                " must exceed qk_rope_head_dim=" + n(latent.rope) +
                                                " (qk_nope_head_dim = d_head - qk_rope_head_dim >= 1)");
            require(kv_heads == heads, "MLA decompresses a key and value per query head: kv_heads=" + n(kv_heads) +
                                           " must equal heads=" + n(heads));
            require(!bias, "MLA's projections have no biases (DeepSeek's reference code has none)");
            const long double latent_work =
                8.0L * batch * heads * n_q * n_kv * (latent.kv_rank + latent.rope) +
                8.0L * batch * (n_q + n_kv) * heads * std::max(latent.kv_rank, latent.q_rank) * (qk_dim() + v_dim()) +
                8.0L * batch * (n_q + n_kv) * d_model * (latent.q_rank + latent.kv_rank + latent.rope);
            require(latent_work < limit, "problem too large to count in 64 bits: " + describe() + " (about 2^" +
                                             std::to_string(int(std::log2(double(latent_work)))) +
                                             " FLOPs, over 2^63)");
        } else {
            require(form == attn::form::none, "form " + std::string(enum_name(form)) + " is MLA's; family " +
                                                  std::string(enum_name(family())) + " has one form");
            require(latent == latent_widths{},
                    "latent widths (kv_lora_rank, q_lora_rank, qk_rope_head_dim) are MLA's; family " +
                        std::string(enum_name(family())) + " has none");
        }
    }
};

/// A block [r0, r1) of at most Block rows, row r the query row r % n_q (of some query head), visited
/// key by key: for every key j that a row of the block sees, in increasing j, f(j, rows, n) with
/// rows[0, n) the block's rows that see j. How the fp64 reference and its bound read each key and
/// value row once for a block of rows (the query heads of one key/value head among them).
template <std::size_t Block, class F>
void for_each_key_of_rows(const problem& p, std::size_t r0, std::size_t r1, F&& f) {
    std::array<std::size_t, Block> rows{};
    std::size_t j_lo = p.n_kv, j_hi = 0;
    for (std::size_t r = r0; r < r1; ++r)
        if (p.visible(r % p.n_q) > 0) {
            j_lo = std::min(j_lo, p.keys_begin(r % p.n_q));
            j_hi = std::max(j_hi, p.keys_end(r % p.n_q));
        }
    for (std::size_t j = j_lo; j < j_hi; ++j) {
        std::size_t n = 0;
        for (std::size_t r = r0; r < r1; ++r)
            if (p.keys_begin(r % p.n_q) <= j && j < p.keys_end(r % p.n_q)) rows[n++] = r;
        f(j, rows, n);
    }
}

/// Named families. Each is the same computation with different (heads, kv_heads, d_head).
inline problem gqa(std::size_t d_model, std::size_t heads, std::size_t kv_heads, std::size_t n) {
    problem p;
    p.n_q = p.n_kv = n;
    p.d_model = d_model;
    p.heads = heads;
    p.kv_heads = kv_heads;
    return p;
}
inline problem single_head(std::size_t d_model, std::size_t n) { return gqa(d_model, 1, 1, n); }
inline problem mha(std::size_t d_model, std::size_t heads, std::size_t n) { return gqa(d_model, heads, heads, n); }
inline problem mqa(std::size_t d_model, std::size_t heads, std::size_t n) { return gqa(d_model, heads, 1, n); }
/// The counterfactual of seed 004 section 10.3: H heads, each as wide as the model.
inline problem wide(std::size_t d_model, std::size_t heads, std::size_t n) {
    problem p = gqa(d_model, heads, heads, n);
    p.d_head = d_model;
    return p;
}

} // namespace attn
