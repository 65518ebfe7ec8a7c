// attn.decode:cache -- the key/value cache of one layer. Layout, per family: K and V each
// [batch, G, capacity, d_head], every (sequence, head)'s rows contiguous -- what packed_heads
// describes, with a capacity that can exceed the length. MHA keeps G = H heads, GQA G < H, MQA
// one: the bytes a step must read scale with G. The element type S is the cache's storage type
// (attn.core:kv): float or double as computed, or bf16, f16 (rounded to nearest even on append)
// or int8 (quantized on append, one fp32 scale per (token, key/value head) row, kept beside the
// rows as [batch, G, capacity]).
module;
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>
export module attn.decode:cache;
import attn.core;

export namespace attn {

/// The key/value cache of one layer for `batch` sequences of equal length, stored as S.
template <class S>
class kv_cache {
  public:
    static constexpr bool quantized = std::is_same_v<S, std::int8_t>;

    kv_cache(std::size_t batch, std::size_t kv_heads, std::size_t d_head, std::size_t capacity)
        : batch_(batch), heads_(kv_heads), dim_(d_head), capacity_(capacity) {
        require(batch > 0 && kv_heads > 0 && d_head > 0, "kv cache needs batch, kv_heads and d_head >= 1 (got " +
                                                             std::to_string(batch) + ", " + std::to_string(kv_heads) +
                                                             ", " + std::to_string(d_head) + ")");
        k_.resize(batch * kv_heads * capacity * d_head);
        v_.resize(k_.size());
        if constexpr (quantized) {
            ks_.resize(batch * kv_heads * capacity);
            vs_.resize(ks_.size());
        }
    }
    /// A cache for problem p's batch, key/value heads and head width.
    kv_cache(const problem& p, std::size_t capacity) : kv_cache(p.batch, p.kv_heads, p.head_dim(), capacity) {}

    std::size_t batch() const { return batch_; }
    std::size_t kv_heads() const { return heads_; }
    std::size_t d_head() const { return dim_; }
    std::size_t capacity() const { return capacity_; }
    std::size_t size() const { return length_; } ///< tokens cached per sequence (L)

    /// Bytes the cache holds (K and V with int8's scales, at capacity).
    std::size_t bytes() const { return 2 * (k_.size() * sizeof(S) + ks_.size() * sizeof(float)); }
    /// Bytes of the cached tokens (K and V with int8's scales, at the current length).
    std::size_t used_bytes() const {
        return 2 * batch_ * heads_ * length_ * (dim_ * sizeof(S) + (quantized ? sizeof(float) : 0));
    }

    /// Appends one token per sequence: k_new and v_new are [batch, G*d_head] (a projection's
    /// rows), rounded or quantized to S here.
    template <class T>
    void append(const T* k_new, const T* v_new) {
        require(length_ < capacity_, "kv cache is full (capacity " + std::to_string(capacity_) + " tokens)");
        for (std::size_t b = 0; b < batch_; ++b)
            for (std::size_t g = 0; g < heads_; ++g) {
                const std::size_t src = (b * heads_ + g) * dim_;
                store(k_new + src, b, g, length_, k_, ks_);
                store(v_new + src, b, g, length_, v_, vs_);
            }
        ++length_;
    }

    /// Fills rows [0, capacity) of every (sequence, head) with rows[i % n] (n rows of d_head
    /// values, stored as S): a cache for timing, whose values only need to be finite and varied.
    void fill_repeating(const float* rows, std::size_t n) {
        kv_cache one(1, 1, dim_, n);
        for (std::size_t i = 0; i < n; ++i) one.append(rows + i * dim_, rows + i * dim_);
        for (std::size_t b = 0; b < batch_; ++b)
            for (std::size_t g = 0; g < heads_; ++g)
                for (std::size_t i = 0; i < capacity_; i += n) {
                    const std::size_t m = std::min(n, capacity_ - i);
                    for (auto [dst, src] : {std::pair{&k_, &one.k_}, std::pair{&v_, &one.v_}})
                        std::copy_n(src->data(), m * dim_, dst->data() + offset(b, g, i));
                    if constexpr (quantized)
                        for (auto [dst, src] : {std::pair{&ks_, &one.ks_}, std::pair{&vs_, &one.vs_}})
                            std::copy_n(src->data(), m, dst->data() + offset(b, g, i) / dim_);
                }
    }

    /// Sets the length without writing (the rows [0, n) hold whatever was put there).
    void resize(std::size_t n) {
        require(n <= capacity_,
                "kv cache length " + std::to_string(n) + " exceeds its capacity " + std::to_string(capacity_));
        length_ = n;
    }
    void clear() { length_ = 0; }

    /// The cached keys and values as [batch, G, L, d_head] views of S.
    heads_view<const S> keys() const { return view(k_.data(), dim_); }
    heads_view<const S> values() const { return view(v_.data(), dim_); }
    /// The same with int8's row scales: what a decode core over a narrow cache reads.
    kv_rows<S> key_rows() const { return {keys(), quantized ? view(ks_.data(), 1) : heads_view<const float>{}}; }
    kv_rows<S> value_rows() const { return {values(), quantized ? view(vs_.data(), 1) : heads_view<const float>{}}; }

    /// Element t of row (b, g, i) as a decode core reads it (int8: times its scale), in fp32.
    float key_at(std::size_t b, std::size_t g, std::size_t i, std::size_t t) const { return key_rows().at(b, g, i, t); }
    float value_at(std::size_t b, std::size_t g, std::size_t i, std::size_t t) const {
        return value_rows().at(b, g, i, t);
    }

    std::size_t offset(std::size_t b, std::size_t g, std::size_t i) const {
        return ((b * heads_ + g) * capacity_ + i) * dim_;
    }

  private:
    template <class T>
    void store(const T* x, std::size_t b, std::size_t g, std::size_t i, big_vector<S>& to, big_vector<float>& scales) {
        S* dst = to.data() + offset(b, g, i);
        if constexpr (quantized) {
            static_assert(std::is_same_v<T, float>, "an int8 cache quantizes fp32 rows");
            scales[offset(b, g, i) / dim_] = quantize_row(x, dim_, dst);
        } else {
            for (std::size_t t = 0; t < dim_; ++t) dst[t] = S(x[t]);
        }
    }
    template <class E>
    heads_view<const E> view(const E* data, std::size_t dim) const {
        return {data, batch_, heads_, length_, dim, heads_ * capacity_ * dim, capacity_ * dim, dim};
    }
    std::size_t batch_, heads_, dim_, capacity_, length_ = 0;
    big_vector<S> k_, v_;
    big_vector<float> ks_, vs_; ///< int8: the scale of every row of k_ and v_
};

} // namespace attn
