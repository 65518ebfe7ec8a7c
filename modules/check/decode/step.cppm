// attn.decode:step -- one decode step over a key/value cache (attn.decode:cache), prefill, and
// the fixture the harness times. A step is the layer's own composition (its family's input stage
// for the new token at position L, the append, the core over the cache, the output stage), so
// every family decodes through every variant's kernels with no per-family code here.
module;
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>
export module attn.decode:step;
export import :cache;
import attn.core;
import attn.count;
import attn.families;

export namespace attn {

/// Throws unless `var` can decode with compute type T over a cache stored as S (a narrow cache
/// needs fp32 compute and the variant's kv core).
template <class T, class S>
void require_kv_core(const variant& var) {
    if constexpr (!std::is_same_v<T, S>) {
        static_assert(std::is_same_v<T, float>, "a bf16, f16 or int8 cache is read by fp32 decode cores");
        require(bool(var.kv.get<S>()), "variant '" + var.name + "' cannot read a key/value cache of type " +
                                           std::string(enum_name(kv_dtype_of<S>)) + " (it has no kv core)");
    }
}

/// The attention core of a decode step: queries q [B, H, 1, d_qk] over the cache into ctx
/// [B, H*d_v]; the variant's core for a cache of the compute type, its kv core for a narrower one.
/// `step` is the core's problem (n_q = 1 over the cache's keys).
template <class T, class S>
void attend(const variant& var, const problem& step, const heads_view<const T>& q, const kv_cache<S>& cache, T* ctx,
            const run_options& opt) {
    const auto out = interleaved_heads<T>(ctx, step.batch, 1, step.heads, step.v_dim());
    if constexpr (std::is_same_v<T, S>)
        var.get<T>().core(step, {q, cache.keys(), cache.values(), out}, opt);
    else
        var.kv.get<S>()(step, {q, cache.key_rows(), cache.value_rows(), out}, opt);
}

/// The layer problem of one token per sequence (what a step's stages run on).
inline problem one_token(const problem& layer) {
    problem one = layer;
    one.n_q = one.n_kv = 1;
    one.causal = false;
    one.window = 0;
    return one;
}

/// One decode step. x_new [B, d_model]: the new token of each sequence, at position L = the
/// cache's length; y [B, d_model]: its output. `layer` gives the family, sizes, bias and scale;
/// its n_q, n_kv and causal are ignored (the cache says how long the context is). Appends to
/// `cache`. Returns the step's queries (a view into `ws`, valid until its next use).
template <class T, class S>
heads_view<const T> decode_step(const variant& var, const problem& layer, const weights<T>& w, const T* x_new,
                                kv_cache<S>& cache, T* y, const run_options& opt, layer_buffers<T>& ws) {
    const auto& k = var.get<T>();
    require(k.core && k.linear, "variant '" + var.name + "' has no kernels at this precision");
    require_kv_core<T, S>(var);
    const family_ops& f = family_ops_of(layer);
    const problem one = one_token(layer);
    const cache_layout want = f.cache(one);
    require(cache.batch() == layer.batch && cache.heads() == want.heads && cache.d_k() == want.d_k &&
                cache.d_v() == want.d_v && cache.values_in_keys() == want.v_in_k,
            "kv cache [batch " + std::to_string(cache.batch()) + ", heads " + std::to_string(cache.heads()) + ", d_k " +
                std::to_string(cache.d_k()) + ", d_v " + std::to_string(cache.d_v()) + "] does not fit " +
                layer.describe());
    const layer_call<T> call{k, one, w, opt, ws};
    const core_operands<T> in = f.stages<T>().project(call, x_new, x_new, cache.size());
    cache.append(in.k, in.v, 0);
    const problem step = f.attention(decode_problem(layer, cache.size() - 1)).seen_keys(); // the cache's rows
    T* ctx = ws.at(context_slot, layer.batch * step.o_width());
    attend(var, step, in.q, cache, ctx, opt);
    f.stages<T>().output(call, ctx, y);
    return in.q;
}

/// Fills the cache with the keys and values of `n` tokens per sequence at positions 0..n-1,
/// x [B, n, d_model], through the family's input stage with the variant's kernels (what a
/// prompt's forward pass leaves behind). Allocates O(B n (H + G) d_head) for the projections:
/// not for timed loops.
template <class T, class S>
void prefill(const variant& var, const problem& layer, const weights<T>& w, const T* x, std::size_t n,
             kv_cache<S>& cache, const run_options& opt) {
    const auto& k = var.get<T>();
    require(bool(k.linear), "variant '" + var.name + "' has no kernels at this precision");
    if (n == 0) return;
    problem all = layer;
    all.n_q = all.n_kv = n;
    all.causal = true;
    layer_buffers<T> ws;
    const core_operands<T> in = family_ops_of(layer).stages<T>().project({k, all, w, opt, ws}, x, x, 0);
    for (std::size_t t = 0; t < n; ++t) cache.append(in.k, in.v, t);
}

/// Extra memory of a decode step beyond the cache and the weights: the step's buffers (its
/// input stage's projections and the context of one token, `bytes_per_element` each) plus the
/// variant's core scratch at this context length.
inline std::size_t decode_extra_bytes(const variant& var, const problem& layer, std::size_t context,
                                      const run_options& opt, std::size_t bytes_per_element) {
    const problem one = one_token(layer), a = attention_problem(one);
    const std::size_t ws = bytes_per_element * layer.batch * (a.q_width() + a.k_width() + a.v_width() + a.o_width());
    return ws + var.scratch_bytes(attention_problem(decode_problem(layer, context)).seen_keys(), opt);
}

/// What the harness times, whatever the cache's type: a whole step, and the attention core alone.
class decode_timer {
  public:
    virtual ~decode_timer() = default;
    virtual void step() = 0;
    virtual void core() = 0;
    virtual const void* output() const = 0;
    virtual const void* context_output() const = 0;
    virtual std::size_t bytes() const = 0; ///< the cache at capacity and the weights
};

/// A decode step set up to be timed again and again: the layer's weights (T), a cache stored as
/// S holding `context` tokens, one new token per sequence, the output and the buffers. The
/// cache holds one random block repeated (a cache read is a cache read; the values only need to
/// be finite and varied). step() cuts the cache back to `context` tokens and decodes one token,
/// so every step attends over exactly context + 1 keys (min(context + 1, W) under a window: the
/// cache is then a rolling buffer of W rows); core() runs the attention core alone over those
/// keys with the last step's queries: the part of a step that reads the cache.
template <class T, class S = T>
class decode_fixture : public decode_timer {
  public:
    decode_fixture(const variant& var, const problem& layer, std::size_t context, const run_options& opt,
                   std::uint64_t seed)
        : var_(var), layer_(layer), step_(attention_problem(decode_problem(layer, context)).seen_keys()),
          context_(context), opt_(opt), w_(random_weights<T>(layer, seed)), cache_(layer, context + 1),
          x_(random_values<T>(layer.batch * layer.d_model, seed * 31 + 7)), y_(layer.batch * layer.d_model) {
        require_kv_core<T, S>(var);
        const std::size_t width = std::max(cache_.d_k(), cache_.d_v());
        const std::size_t rows = std::max<std::size_t>(1, (std::size_t(1) << 16) / width);
        const auto r = random_values<float>(rows * width, seed * 977 + 13);
        cache_.fill_repeating(r.data(), rows);
        step(); // writes row `context`, which core() reads, and sizes every buffer
    }

    void step() override {
        cache_.resize(context_);
        q_ = decode_step<T>(var_, layer_, w_, x_.data(), cache_, y_.data(), opt_, ws_);
    }

    void core() override {
        cache_.resize(context_ + 1);
        attend(var_, step_, q_, cache_, ws_.at(context_slot, 0), opt_);
    }

    const void* output() const override { return y_.data(); }
    const void* context_output() const override { return ws_.slots[context_slot].data(); }
    std::size_t bytes() const override { return cache_.bytes() + sizeof(T) * w_.count(); }

  private:
    const variant& var_;
    problem layer_, step_; ///< the layer, and the core's problem over the keys the step sees
    std::size_t context_;
    run_options opt_;
    weights<T> w_;
    kv_cache<S> cache_;
    layer_buffers<T> ws_;
    heads_view<const T> q_;
    std::vector<T> x_, y_;
};

} // namespace attn
