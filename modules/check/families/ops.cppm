// attn.families:ops -- what a family owns, as one record (family_ops): the tensors of its weight
// set and their shapes, the attention problem its layer hands the core, the layout of its
// key/value cache, its layer's two stages around the core (the input stage that turns x into the
// core's Q, K and V, and the output stage that turns the context into y), its state-dict files,
// and the error bound of its layer (it owns the composition, so it derives the bound). The stages
// are written once as templates and held per storage type, so every variant's kernels, the fp64
// reference and the counting scalar run the same composition.
module;
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <type_traits>
#include <vector>
export module attn.families:ops;
import attn.core;
import attn.bounds;

export namespace attn {

/// One tensor of a family's weight set: its state-dict name, shape, and the interval
/// random_weights draws it from (uniform). Absent tensors (a bias the problem has none of) keep
/// their slot, empty.
struct tensor_spec {
    std::string name;               ///< file name in a state-dict folder, without ".npy"
    std::size_t rows = 0, cols = 0; ///< [rows, cols] (PyTorch's [out, in]); cols 0: a vector of rows
    double lo = -1, hi = 1;         ///< drawn uniformly in [lo, hi)
    bool present = true;
    /// Computed from the others by the family (family_stages::derive) when the weights are drawn
    /// or loaded: held beside them, never drawn, saved or counted as a parameter (MLA's W^UK
    /// transposed).
    bool derived = false;
    std::size_t elements() const { return present ? rows * std::max<std::size_t>(cols, 1) : 0; }
    std::size_t parameters() const { return derived ? 0 : elements(); }
};

/// The buffers a layer's stages write (the projections, the context), reused across calls: a
/// stage asks for slot i of at least n elements.
template <class T>
struct layer_buffers {
    std::vector<std::vector<T>> slots;
    T* at(std::size_t i, std::size_t n) {
        if (slots.size() <= i) slots.resize(i + 1);
        if (slots[i].size() < n) slots[i].resize(n);
        return slots[i].data();
    }
    std::size_t bytes() const {
        std::size_t n = 0;
        for (const auto& s : slots) n += s.capacity() * sizeof(T);
        return n;
    }
};

/// The slot of layer_buffers that holds the context between the core and the output stage; a
/// family's stages use the slots below it.
inline constexpr std::size_t context_slot = 15;

/// What a stage works with: the variant's kernels at T, the layer problem, the weights, the run's
/// options and the buffers.
template <class T>
struct layer_call {
    const kernel_set<T>& k;
    const problem& p;
    const weights<T>& w;
    const run_options& opt;
    layer_buffers<T>& ws;
};

/// The core's operands an input stage produces: views into the call's buffers (v may alias the
/// leading columns of k's rows).
template <class T>
struct core_operands {
    heads_view<const T> q, k, v;
};

/// A family's layer around the core, at storage type T.
template <class T>
struct family_stages {
    /// x_q [B, n_q, d_model] and x_kv [B, n_kv, d_model] -> the core's Q, K and V. Key token j sits
    /// at position kv_pos0 + j, query token i at kv_pos0 + n_kv - n_q + i (bottom-right, as the
    /// causal mask): a family with positions (RoPE) reads them from here.
    std::function<core_operands<T>(const layer_call<T>&, const T* x_q, const T* x_kv, std::size_t kv_pos0)> project;
    /// ctx [B, n_q, H_core d_v_core] -> y [B, n_q, d_model].
    std::function<void(const layer_call<T>&, const T* ctx, T* y)> output;
    /// Fills the derived tensors of a weight set from its parameters (empty: the family has none).
    std::function<void(const problem&, weights<T>&)> derive;
};

/// How a family caches keys and values per token: `heads` rows of d_k key elements and d_v value
/// elements each, the values either rows of their own or (v_in_k) the leading d_v elements of the
/// key rows, which then store them once.
struct cache_layout {
    std::size_t heads = 1, d_k = 0, d_v = 0;
    bool v_in_k = false;
};

/// A family's stages with derived tensors define F::derive<T>(problem, weights<T>&).
template <class F, class T>
concept has_derive = requires(const problem& p, weights<T>& w) { F::template derive<T>(p, w); };

template <class F, class T>
void derive_of(const problem& p, weights<T>& w) {
    F::template derive<T>(p, w);
}

/// Everything a family owns. Registered once (attn.families' registry); looked up by the problem's
/// family.
struct family_ops {
    attn::family id = attn::family::mha;
    std::string description; ///< one line for `attnbench list` and the report
    /// The weight set's tensors for a layer problem, in the family's order.
    std::function<std::vector<tensor_spec>(const problem&)> tensors;
    /// The problem the core runs for a layer problem (batch, lengths and mask carried over).
    std::function<problem(const problem&)> attention;
    /// The cache of one decode step's layer problem.
    std::function<cache_layout(const problem&)> cache;
    family_stages<double> f64;
    family_stages<float> f32;
    family_stages<attn::bf16> bf16;
    family_stages<attn::f16> f16;
    family_stages<counted> count; ///< the measured count (the reference kernels on counting scalars)
    /// The fp64 reference of the layer on `x_q`, `x_kv` (the same numbers as a run's, widened) with
    /// the per-element bound of the tolerance policy; `prec` bf16/f16: the inputs and weights are
    /// rounded to it already, and the storage roundings a kernel adds are charged in `store`.
    std::function<check::expectation(const problem&, const weights<double>&, const std::vector<double>& x_q,
                                     const std::vector<double>& x_kv, precision prec)>
        expect;
    /// The same for a decode check over a cache: the layer's output for x_q whose core reads the
    /// keys k and values v exactly as a cache holds them (rounded or dequantized: exact inputs), in
    /// the core's layout [B, n_kv, G d_qk] and [B, n_kv, G d_v]; the queries' errors charged as in
    /// layer mode, the keys and values carry none. fp32 arithmetic.
    std::function<check::expectation(const problem&, const weights<double>&, const std::vector<double>& x_q,
                                     const std::vector<double>& k, const std::vector<double>& v)>
        expect_over_cache;
    /// Writes / reads a state-dict folder (one .npy per tensor, named by the family's convention);
    /// read fills in what the files say of the problem (e.g. d_model) and refuses a wrong shape.
    std::function<void(const std::string& dir, const problem&, const weights<double>&)> save;
    std::function<weights<double>(const std::string& dir, problem&)> load;

    template <class T>
    const family_stages<T>& stages() const {
        if constexpr (std::is_same_v<T, double>)
            return f64;
        else if constexpr (std::is_same_v<T, float>)
            return f32;
        else if constexpr (std::is_same_v<T, attn::bf16>)
            return bf16;
        else if constexpr (std::is_same_v<T, attn::f16>)
            return f16;
        else
            return count;
    }
    /// Fills the stages at every storage type from a family's templates: F::project<T> and F::output<T>.
    template <class F>
    void set_stages() {
        auto one = [](auto& s, auto tag) {
            using T = typename decltype(tag)::type;
            s.project = [](const layer_call<T>& c, const T* xq, const T* xkv, std::size_t pos) {
                return F::template project<T>(c, xq, xkv, pos);
            };
            s.output = [](const layer_call<T>& c, const T* ctx, T* y) { F::template output<T>(c, ctx, y); };
            if constexpr (has_derive<F, T>) s.derive = derive_of<F, T>;
        };
        one(f64, std::type_identity<double>{});
        one(f32, std::type_identity<float>{});
        one(bf16, std::type_identity<attn::bf16>{});
        one(f16, std::type_identity<attn::f16>{});
        one(count, std::type_identity<counted>{});
    }
};

} // namespace attn
