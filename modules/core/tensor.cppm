// attn.core:tensor -- strided views over per-head data, the layer's weights, and the
// deterministic random numbers every run draws its inputs and weights from.
module;
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <new>
#include <vector>
#include <sys/mman.h>
export module attn.core:tensor;
import :problem;

export namespace attn {

/// An allocator for big streamed buffers (the key/value cache, the triad's arrays): blocks of
/// 2 MiB or more are 2 MiB-aligned and marked for transparent huge pages (madvise; Debian's
/// default THP mode is "madvise", so without the call they get 4 KiB pages). Streaming a
/// 512 MiB cache through 4 KiB pages touches a new page every 4 KiB; with huge pages the TLB
/// covers it. Advice only: where THP is off the memory is ordinary and the result the same.
template <class T>
struct big_allocator {
    using value_type = T;
    static constexpr std::size_t huge = std::size_t(2) << 20;
    big_allocator() = default;
    template <class U>
    big_allocator(const big_allocator<U>&) noexcept {}
    T* allocate(std::size_t n) {
        const std::size_t bytes = n * sizeof(T);
        if (bytes < huge) return static_cast<T*>(::operator new(bytes, std::align_val_t(64)));
        const std::size_t rounded = (bytes + huge - 1) / huge * huge;
        void* p = ::operator new(rounded, std::align_val_t(huge));
        ::madvise(p, rounded, MADV_HUGEPAGE);
        return static_cast<T*>(p);
    }
    void deallocate(T* p, std::size_t n) noexcept {
        const std::size_t bytes = n * sizeof(T);
        if (bytes < huge)
            ::operator delete(p, std::align_val_t(64));
        else
            ::operator delete(p, std::align_val_t(huge));
    }
    template <class U>
    bool operator==(const big_allocator<U>&) const noexcept {
        return true;
    }
};

/// A vector on big_allocator.
template <class T>
using big_vector = std::vector<T, big_allocator<T>>;

/// A 4-D view [batch, heads, rows, dim] with `dim` contiguous; other strides are free, so one
/// view type serves packed per-head buffers and the interleaved [batch, rows, heads*dim]
/// layout that a projection writes.
template <class T>
struct heads_view {
    T* data = nullptr;
    std::size_t batch = 0, heads = 0, rows = 0, dim = 0;
    std::size_t batch_stride = 0, head_stride = 0, row_stride = 0;

    T* row(std::size_t b, std::size_t h, std::size_t i) const {
        return data + b * batch_stride + h * head_stride + i * row_stride;
    }
    operator heads_view<const T>() const {
        return {data, batch, heads, rows, dim, batch_stride, head_stride, row_stride};
    }
    /// Rows [first, first + count) of every (batch, head): a window of keys, without a copy.
    heads_view rows_from(std::size_t first, std::size_t count) const {
        return {data + first * row_stride, batch, heads, count, dim, batch_stride, head_stride, row_stride};
    }
};

/// [batch, heads, rows, dim], each head's rows contiguous (a key/value cache's layout).
template <class T>
heads_view<T> packed_heads(T* data, std::size_t batch, std::size_t heads, std::size_t rows, std::size_t dim) {
    return {data, batch, heads, rows, dim, heads * rows * dim, rows * dim, dim};
}

/// [batch, rows, heads*dim]: what x W^T produces, viewed per head without a copy.
template <class T>
heads_view<T> interleaved_heads(T* data, std::size_t batch, std::size_t rows, std::size_t heads, std::size_t dim) {
    return {data, batch, heads, rows, dim, rows * heads * dim, dim, heads * dim};
}

/// A layer's parameters: the tensors of its family's weight set (attn.families names them and
/// their shapes), in the family's order, row-major as in PyTorch's Linear (W is [out, in],
/// y = x W^T + b). A tensor the problem does not have (biases without bias) is empty. Each family
/// indexes its set by constants of its own (attn::qkv::wq, ...).
template <class T>
struct weights {
    std::vector<std::vector<T>> t;

    std::vector<T>& operator[](std::size_t i) { return t[i]; }
    const std::vector<T>& operator[](std::size_t i) const { return t[i]; }
    /// The tensor's data, or null when it is absent (an empty bias).
    const T* data_or_null(std::size_t i) const { return t[i].empty() ? nullptr : t[i].data(); }

    /// Elements actually held: the measured parameter count.
    std::size_t count() const {
        std::size_t n = 0;
        for (const auto& x : t) n += x.size();
        return n;
    }
    template <class U>
    weights<U> cast() const {
        weights<U> w;
        for (const auto& x : t) w.t.emplace_back(x.begin(), x.end());
        return w;
    }
};

/// splitmix64: small, fast, and the same sequence on every platform (unlike std::*_distribution).
class rng {
  public:
    explicit rng(std::uint64_t seed) : state_(seed) {}
    std::uint64_t next() {
        std::uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
        return z ^ (z >> 31);
    }
    /// Uniform in [lo, hi).
    double uniform(double lo, double hi) { return lo + (hi - lo) * double(next() >> 11) * 0x1.0p-53; }

  private:
    std::uint64_t state_;
};

/// n values uniform in [-bound, bound), drawn in double and rounded once to T, so that a float
/// run and its fp64 reference (built from the same seed, then widened) see the same numbers.
template <class T>
std::vector<T> random_values(std::size_t n, std::uint64_t seed, double bound = 1.0) {
    rng r(seed);
    std::vector<T> v(n);
    for (auto& x : v) x = T(float(r.uniform(-bound, bound)));
    return v;
}

/// Throws attn::error naming `what` and the first index holding NaN or Inf.
template <class T>
void require_finite(const std::vector<T>& v, const std::string& what) {
    for (std::size_t i = 0; i < v.size(); ++i)
        require(std::isfinite(double(v[i])), what + " holds a non-finite value (" + std::to_string(double(v[i])) +
                                                 ") at flat index " + std::to_string(i));
}

} // namespace attn
