// attn.core:problem -- the description of one attention computation, its validation,
// and the named families. Single-head, MHA, MQA and GQA are one computation with
// different (heads, kv_heads): query head h reads key/value head floor(h*G/H). The query/key
// width and the value width are separate (equal for those families; a family may differ).
module;
#include <algorithm>
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

/// The stages of one attention layer, in the order the reference computes them.
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
    count_
};

inline constexpr std::string_view stage_name(stage s) {
    constexpr std::string_view names[] = {"proj_q",      "proj_k",      "proj_v",      "qk",
                                          "scale",       "mask",        "softmax_max", "softmax_exp",
                                          "softmax_sum", "softmax_div", "pv",          "proj_o"};
    return names[static_cast<int>(s)];
}

/// The family a shape of the one computation belongs to: wide when each of several heads is as
/// wide as the model, else single-head, MHA (G = H), MQA (G = 1) or GQA.
inline family family_of(std::size_t d_model, std::size_t heads, std::size_t kv_heads, std::size_t d_head) {
    if (heads > 1 && d_head == d_model) return family::wide;
    if (heads == 1) return family::single_head;
    if (kv_heads == heads) return family::mha;
    if (kv_heads == 1) return family::mqa;
    return family::gqa;
}

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
    bool bias = false;
    std::optional<double> scale;              ///< default 1/sqrt(qk_dim())
    std::optional<attn::family> named_family; ///< a named family; unset: derived from the shape (family_of)

    std::size_t qk_dim() const { return d_head ? d_head : d_model / heads; }
    std::size_t v_dim() const { return d_v ? d_v : qk_dim(); }
    double softmax_scale() const { return scale ? *scale : 1.0 / std::sqrt(double(qk_dim())); }
    std::size_t q_width() const { return heads * qk_dim(); }    ///< all query heads
    std::size_t k_width() const { return kv_heads * qk_dim(); } ///< all key heads
    std::size_t v_width() const { return kv_heads * v_dim(); }  ///< all value heads
    std::size_t o_width() const { return heads * v_dim(); }     ///< the concatenated context of every head
    std::size_t kv_head_of(std::size_t h) const { return h * kv_heads / heads; }
    attn::family family() const { return named_family ? *named_family : family_of(d_model, heads, kv_heads, qk_dim()); }

    /// How many keys query row i sees (bottom-right causal alignment); 0 is possible when n_q > n_kv.
    std::size_t visible(std::size_t i) const {
        if (!causal) return n_kv;
        const long long last = (long long)i + (long long)n_kv - (long long)n_q; // last visible key
        if (last < 0) return 0;
        return std::min<std::size_t>(n_kv, std::size_t(last) + 1);
    }

    /// Number of query rows (per head, per sequence) that see at least one key: under the causal
    /// mask row i sees keys once i >= n_q - n_kv.
    std::size_t rows_with_keys() const { return causal ? std::min(n_q, n_kv) : n_q; }

    /// Number of (query, key) pairs that are scored in one head of one sequence, in closed form
    /// (sum over rows of visible(i)): causal rows see 1, 2, ... keys from the first row that sees
    /// any, so the sum is n_kv(n_kv+1)/2 when n_q >= n_kv and n_q(n_kv - n_q) + n_q(n_q+1)/2 when not.
    std::size_t visible_pairs() const {
        if (!causal) return n_q * n_kv;
        if (n_q >= n_kv) return n_kv * (n_kv + 1) / 2;
        return n_q * (n_kv - n_q) + n_q * (n_q + 1) / 2;
    }

    std::string describe() const {
        std::string s = std::string(enum_label(family())) + " B=" + std::to_string(batch) +
                        " Nq=" + std::to_string(n_q) + " Nkv=" + std::to_string(n_kv) +
                        " d_model=" + std::to_string(d_model) + " H=" + std::to_string(heads) +
                        " G=" + std::to_string(kv_heads) + " d_head=" + std::to_string(qk_dim());
        if (v_dim() != qk_dim()) s += " d_v=" + std::to_string(v_dim());
        if (causal) s += " causal";
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
        const long double attention = 8.0L * b * heads * nq * nkv * d;
        const long double projection = 8.0L * b * (nq + nkv) * d_model * (heads + kv_heads) * d;
        const long double limit = 9.2e18L; // just under 2^63
        require(attention < limit && projection < limit,
                "problem too large to count in 64 bits: batch=" + std::to_string(batch) + " heads=" +
                    std::to_string(heads) + " N_q=" + std::to_string(n_q) + " N_kv=" + std::to_string(n_kv) +
                    " d_model=" + std::to_string(d_model) + " d_head=" + std::to_string(qk_dim()) + ": about 2^" +
                    std::to_string(int(std::log2(double(std::max(attention, projection))))) + " FLOPs, over 2^63");
        require(!scale || std::isfinite(*scale),
                "softmax scale must be finite (got " + std::to_string(scale.value_or(0.0)) + ")");
    }
};

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
