// attn.decode:cache -- the key/value cache of one layer, laid out as its family says
// (attn.families' cache_layout): per (sequence, cached head) rows of d_k key elements and d_v value
// elements, K [batch, heads, capacity, d_k] and V [batch, heads, capacity, d_v], each head's rows
// contiguous -- what packed_heads describes, with a capacity that can exceed the length. The q/k/v
// family caches G = H (MHA), G < H (GQA) or one (MQA) heads, so the bytes a step reads scale with
// G; a family whose values are the leading d_v elements of its key rows (v_in_k: MLA's latent)
// stores them once, and the value view reads the key rows. The element type S is the cache's
// storage type (attn.core:kv): float or double as computed, or bf16, f16 (rounded to nearest even on
// append) or int8 (quantized on append, one fp32 scale per (token, head) row, kept beside the rows
// as [batch, heads, capacity]; values in the key rows share the key row's scale).
// Under a sliding window W the cache is a rolling buffer (Mistral 7B's): W slots, the token at
// position t in slot t mod W, so it stops growing at W tokens. A decode step's row sees exactly
// the last W tokens, which are the buffer's rows in some order, and softmax and the weighted sum
// do not depend on the order of the keys.
module;
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>
export module attn.decode:cache;
import attn.core;
import attn.families;

export namespace attn {

/// The key/value cache of one layer for `batch` sequences of equal length, stored as S.
template <class S>
class kv_cache {
  public:
    static constexpr bool quantized = std::is_same_v<S, std::int8_t>;

    /// `window` > 0: a rolling buffer of min(capacity, window) slots (slot = position mod window).
    kv_cache(std::size_t batch, cache_layout layout, std::size_t capacity, std::size_t window = 0)
        : batch_(batch), heads_(layout.heads), dk_(layout.d_k), dv_(layout.d_v), v_in_k_(layout.v_in_k),
          capacity_(window ? std::min(capacity, window) : capacity), window_(window) {
        require(batch > 0 && heads_ > 0 && dk_ > 0 && dv_ > 0 && (!v_in_k_ || dv_ <= dk_),
                "kv cache needs batch, heads, d_k and d_v >= 1 (and d_v <= d_k when the values are in the key "
                "rows) (got " +
                    std::to_string(batch) + ", " + std::to_string(heads_) + ", " + std::to_string(dk_) + ", " +
                    std::to_string(dv_) + ")");
        k_.resize(batch * heads_ * capacity_ * dk_);
        if (!v_in_k_) v_.resize(batch * heads_ * capacity_ * dv_);
        if constexpr (quantized) {
            ks_.resize(batch * heads_ * capacity_);
            if (!v_in_k_) vs_.resize(ks_.size());
        }
    }
    /// A cache for layer problem p's batch and its family's layout (a rolling buffer under p's window).
    kv_cache(const problem& p, std::size_t capacity)
        : kv_cache(p.batch, family_ops_of(p).cache(p), capacity, p.window) {}

    std::size_t batch() const { return batch_; }
    std::size_t heads() const { return heads_; }
    std::size_t d_k() const { return dk_; }
    std::size_t d_v() const { return dv_; }
    bool values_in_keys() const { return v_in_k_; }
    cache_layout layout() const { return {heads_, dk_, dv_, v_in_k_}; }
    std::size_t capacity() const { return capacity_; }
    std::size_t size() const { return length_; }   ///< tokens appended per sequence (L: the next token's position)
    std::size_t window() const { return window_; } ///< 0: a plain cache; else a rolling buffer
    /// Rows held per (sequence, head): L, or min(L, window) for a rolling buffer.
    std::size_t rows() const { return std::min(length_, capacity_); }
    /// The slot of the token at `position`, when it is still held.
    std::size_t slot(std::size_t position) const { return window_ ? position % capacity_ : position; }

    /// Bytes one token takes per sequence: its key rows and (unless in them) its value rows, with
    /// int8's scales.
    std::size_t bytes_per_token() const {
        const std::size_t s = quantized ? sizeof(float) : 0;
        return heads_ * (dk_ * sizeof(S) + s + (v_in_k_ ? 0 : dv_ * sizeof(S) + s));
    }
    /// Bytes the cache holds (at capacity).
    std::size_t bytes() const { return batch_ * capacity_ * bytes_per_token(); }
    /// Bytes of the cached tokens (at the current length).
    std::size_t used_bytes() const { return batch_ * rows() * bytes_per_token(); }

    /// Appends one token per sequence: k_new [batch, heads*d_k] and v_new [batch, heads*d_v] (a
    /// projection's rows; v_new unused when the values are in the key rows), rounded or quantized
    /// to S here.
    template <class T>
    void append(const T* k_new, const T* v_new) {
        append(interleaved_heads<const T>(k_new, batch_, 1, heads_, dk_),
               interleaved_heads<const T>(v_in_k_ ? k_new : v_new, batch_, 1, heads_, v_in_k_ ? dk_ : dv_), 0);
    }

    /// Appends token i of views k [batch, heads, n, d_k] and v [batch, heads, n, d_v] (what a
    /// family's input stage produced; v ignored when the values are in the key rows).
    template <class T>
    void append(const heads_view<const T>& k, const heads_view<const T>& v, std::size_t i) {
        require(window_ || length_ < capacity_, "kv cache is full (capacity " + std::to_string(capacity_) + " tokens)");
        const std::size_t at = slot(length_);
        for (std::size_t b = 0; b < batch_; ++b)
            for (std::size_t g = 0; g < heads_; ++g) {
                store(k.row(b, g, i), dk_, b, g, at, k_, ks_);
                if (!v_in_k_) store(v.row(b, g, i), dv_, b, g, at, v_, vs_);
            }
        ++length_;
    }

    /// Fills rows [0, capacity) of every (sequence, head) with rows[i % n] (n rows of
    /// max(d_k, d_v) values: a key row takes the first d_k of them, a value row the first d_v),
    /// stored as S: a cache for timing, whose values only need to be finite and varied.
    void fill_repeating(const float* rows, std::size_t n) {
        const std::size_t w = std::max(dk_, dv_);
        kv_cache one(1, {1, dk_, dv_, v_in_k_}, n);
        for (std::size_t i = 0; i < n; ++i)
            one.append(interleaved_heads<const float>(rows + i * w, 1, 1, 1, dk_),
                       interleaved_heads<const float>(rows + i * w, 1, 1, 1, dv_), 0);
        for (std::size_t b = 0; b < batch_; ++b)
            for (std::size_t g = 0; g < heads_; ++g)
                for (std::size_t i = 0; i < capacity_; i += n) {
                    const std::size_t m = std::min(n, capacity_ - i);
                    std::copy_n(one.k_.data(), m * dk_, k_.data() + offset(b, g, i, dk_));
                    if (!v_in_k_) std::copy_n(one.v_.data(), m * dv_, v_.data() + offset(b, g, i, dv_));
                    if constexpr (quantized) {
                        std::copy_n(one.ks_.data(), m, ks_.data() + offset(b, g, i, 1));
                        if (!v_in_k_) std::copy_n(one.vs_.data(), m, vs_.data() + offset(b, g, i, 1));
                    }
                }
    }

    /// Sets the length without writing (the rows held hold whatever was put there).
    void resize(std::size_t n) {
        require(window_ || n <= capacity_,
                "kv cache length " + std::to_string(n) + " exceeds its capacity " + std::to_string(capacity_));
        length_ = n;
    }
    void clear() { length_ = 0; }

    /// The cached keys [batch, heads, rows(), d_k] and values [batch, heads, rows(), d_v] as views of
    /// S (the values a view of the key rows when they are in them), in slot order.
    heads_view<const S> keys() const { return view(k_.data(), dk_, dk_); }
    heads_view<const S> values() const { return v_in_k_ ? view(k_.data(), dv_, dk_) : view(v_.data(), dv_, dv_); }
    /// The same with int8's row scales: what a decode core over a narrow cache reads.
    kv_rows<S> key_rows() const { return {keys(), quantized ? view(ks_.data(), 1, 1) : heads_view<const float>{}}; }
    kv_rows<S> value_rows() const {
        return {values(), quantized ? view((v_in_k_ ? ks_ : vs_).data(), 1, 1) : heads_view<const float>{}};
    }

    /// Element t of row (b, g, i) as a decode core reads it (int8: times its scale), in fp32.
    float key_at(std::size_t b, std::size_t g, std::size_t i, std::size_t t) const { return key_rows().at(b, g, i, t); }
    float value_at(std::size_t b, std::size_t g, std::size_t i, std::size_t t) const {
        return value_rows().at(b, g, i, t);
    }

  private:
    std::size_t offset(std::size_t b, std::size_t g, std::size_t i, std::size_t dim) const {
        return ((b * heads_ + g) * capacity_ + i) * dim;
    }
    template <class T>
    void store(const T* x, std::size_t dim, std::size_t b, std::size_t g, std::size_t i, big_vector<S>& to,
               big_vector<float>& scales) {
        S* dst = to.data() + offset(b, g, i, dim);
        if constexpr (quantized) {
            static_assert(std::is_same_v<T, float>, "an int8 cache quantizes fp32 rows");
            scales[offset(b, g, i, 1)] = quantize_row(x, dim, dst);
        } else {
            for (std::size_t t = 0; t < dim; ++t) dst[t] = S(x[t]);
        }
    }
    /// [batch, heads, L, dim] over rows of `stride` elements.
    template <class E>
    heads_view<const E> view(const E* data, std::size_t dim, std::size_t stride) const {
        return {data, batch_, heads_, rows(), dim, heads_ * capacity_ * stride, capacity_ * stride, stride};
    }
    std::size_t batch_, heads_, dk_, dv_;
    bool v_in_k_;
    std::size_t capacity_, window_, length_ = 0;
    big_vector<S> k_, v_;
    big_vector<float> ks_, vs_; ///< int8: the scale of every row of k_ and v_
};

} // namespace attn
