// attn.decode:step -- one decode step over a key/value cache (attn.decode:cache), prefill, and
// the fixture the harness times.
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

export namespace attn {

/// The buffers of a decode step, allocated once: q [B, H*d], the new k and v [B, G*d], the
/// context [B, H*d]. O(batch x d_model).
template <class T>
struct decode_workspace {
    std::vector<T> q, k, v, ctx;
    decode_workspace() = default;
    explicit decode_workspace(const problem& p) { prepare(p); }
    /// Sizes the buffers for p (allocates only when they are too small).
    void prepare(const problem& p) {
        auto fit = [](std::vector<T>& x, std::size_t n) {
            if (x.size() < n) x.resize(n);
        };
        fit(q, p.batch * p.q_width());
        fit(k, p.batch * p.kv_width());
        fit(v, p.batch * p.kv_width());
        fit(ctx, p.batch * p.q_width());
    }
    std::size_t bytes() const { return sizeof(T) * (q.capacity() + k.capacity() + v.capacity() + ctx.capacity()); }
};

/// Throws unless `var` can decode with compute type T over a cache stored as S (a narrow cache
/// needs fp32 compute and the variant's kv core).
template <class T, class S>
void require_kv_core(const variant& var) {
    if constexpr (!std::is_same_v<T, S>) {
        static_assert(std::is_same_v<T, float>, "a bf16, f16 or int8 cache is read by fp32 decode cores");
        require(bool(var.kv.get<S>()), "variant '" + var.name + "' cannot read a key/value cache of type " +
                                           kv_dtype_name(kv_dtype_of<S>) + " (it has no kv core)");
    }
}

/// The attention core of a decode step: q [B, H*d] over the cache into ctx [B, H*d]; the
/// variant's core for a cache of the compute type, its kv core for a narrower one.
template <class T, class S>
void attend(const variant& var, const problem& step, const T* q, const kv_cache<S>& cache, T* ctx,
            const run_options& opt) {
    const std::size_t B = step.batch, H = step.heads, d = step.head_dim();
    if constexpr (std::is_same_v<T, S>)
        var.get<T>().core(step,
                          {interleaved_heads<const T>(q, B, 1, H, d), cache.keys(), cache.values(),
                           interleaved_heads<T>(ctx, B, 1, H, d)},
                          opt);
    else
        var.kv.get<S>()(step,
                        {interleaved_heads<const float>(q, B, 1, H, d), cache.key_rows(), cache.value_rows(),
                         interleaved_heads<float>(ctx, B, 1, H, d)},
                        opt);
}

/// One decode step. x_new [B, d_model]: the new token of each sequence; y [B, d_model]: its
/// output. `layer` gives d_model, heads, kv_heads, d_head, bias and the scale; its n_q, n_kv and
/// causal are ignored (the cache says how long the context is). Appends to `cache`.
template <class T, class S>
void decode_step(const variant& var, const problem& layer, const weights<T>& w, const T* x_new, kv_cache<S>& cache,
                 T* y, const run_options& opt, decode_workspace<T>& ws) {
    const auto& k = var.get<T>();
    require(k.core && k.linear, "variant '" + var.name + "' has no kernels at this precision");
    require_kv_core<T, S>(var);
    require(cache.batch() == layer.batch && cache.kv_heads() == layer.kv_heads && cache.d_head() == layer.head_dim(),
            "kv cache [batch " + std::to_string(cache.batch()) + ", G " + std::to_string(cache.kv_heads()) +
                ", d_head " + std::to_string(cache.d_head()) + "] does not fit " + layer.describe());
    ws.prepare(layer);
    const std::size_t B = layer.batch;
    auto bias = [](const std::vector<T>& b) { return b.empty() ? nullptr : b.data(); };
    k.linear({x_new, w.wq.data(), bias(w.bq), ws.q.data(), B, layer.d_model, layer.q_width()}, opt);
    k.linear({x_new, w.wk.data(), bias(w.bk), ws.k.data(), B, layer.d_model, layer.kv_width()}, opt);
    k.linear({x_new, w.wv.data(), bias(w.bv), ws.v.data(), B, layer.d_model, layer.kv_width()}, opt);
    cache.append(ws.k.data(), ws.v.data());
    const problem step = decode_problem(layer, cache.size() - 1);
    attend(var, step, ws.q.data(), cache, ws.ctx.data(), opt);
    k.linear({ws.ctx.data(), w.wo.data(), bias(w.bo), y, B, layer.q_width(), layer.d_model}, opt);
}

/// Fills the cache with the keys and values of `n` tokens per sequence, x [B, n, d_model],
/// projected with the variant's linear kernel (what a prompt's forward pass leaves behind).
/// Allocates O(B n G d_head) for the projections: not for timed loops.
template <class T, class S>
void prefill(const variant& var, const problem& layer, const weights<T>& w, const T* x, std::size_t n,
             kv_cache<S>& cache, const run_options& opt) {
    const auto& k = var.get<T>();
    require(bool(k.linear), "variant '" + var.name + "' has no kernels at this precision");
    const std::size_t B = layer.batch, kw = layer.kv_width();
    std::vector<T> kp(B * n * kw), vp(B * n * kw), kt(B * kw), vt(B * kw);
    auto bias = [](const std::vector<T>& b) { return b.empty() ? nullptr : b.data(); };
    k.linear({x, w.wk.data(), bias(w.bk), kp.data(), B * n, layer.d_model, kw}, opt);
    k.linear({x, w.wv.data(), bias(w.bv), vp.data(), B * n, layer.d_model, kw}, opt);
    for (std::size_t t = 0; t < n; ++t) {
        for (std::size_t b = 0; b < B; ++b) {
            std::copy_n(kp.data() + (b * n + t) * kw, kw, kt.data() + b * kw);
            std::copy_n(vp.data() + (b * n + t) * kw, kw, vt.data() + b * kw);
        }
        cache.append(kt.data(), vt.data());
    }
}

/// Extra memory of a decode step beyond the cache and the weights: the workspace plus the
/// variant's core scratch at this context length.
inline std::size_t decode_extra_bytes(const variant& var, const problem& layer, std::size_t context,
                                      const run_options& opt, std::size_t bytes_per_element) {
    const std::size_t ws = bytes_per_element * layer.batch * 2 * (layer.q_width() + layer.kv_width());
    return ws + var.scratch_bytes(decode_problem(layer, context), opt);
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
/// S holding `context` tokens, one new token per sequence, the output and the workspace. The
/// cache holds one random block repeated (a cache read is a cache read; the values only need to
/// be finite and varied). step() cuts the cache back to `context` tokens and decodes one token,
/// so every step attends over exactly context + 1 keys; core() runs the attention core alone
/// over those context + 1 keys with the last step's queries: the part of a step that reads the
/// cache.
template <class T, class S = T>
class decode_fixture : public decode_timer {
  public:
    decode_fixture(const variant& var, const problem& layer, std::size_t context, const run_options& opt,
                   std::uint64_t seed)
        : var_(var), layer_(layer), context_(context), opt_(opt), w_(random_weights<T>(layer, seed)),
          cache_(layer, context + 1), ws_(layer), x_(random_values<T>(layer.batch * layer.d_model, seed * 31 + 7)),
          y_(layer.batch * layer.d_model) {
        require_kv_core<T, S>(var);
        const std::size_t rows = std::max<std::size_t>(1, (std::size_t(1) << 16) / layer.head_dim());
        const auto r = random_values<float>(rows * layer.head_dim(), seed * 977 + 13);
        cache_.fill_repeating(r.data(), rows);
        step(); // writes row `context`, which core() reads, and sizes every buffer
    }

    void step() override {
        cache_.resize(context_);
        decode_step<T>(var_, layer_, w_, x_.data(), cache_, y_.data(), opt_, ws_);
    }

    void core() override {
        cache_.resize(context_ + 1);
        attend(var_, decode_problem(layer_, context_), ws_.q.data(), cache_, ws_.ctx.data(), opt_);
    }

    const void* output() const override { return y_.data(); }
    const void* context_output() const override { return ws_.ctx.data(); }
    std::size_t bytes() const override { return cache_.bytes() + sizeof(T) * analytic_params(layer_).total(); }

  private:
    const variant& var_;
    problem layer_;
    std::size_t context_;
    run_options opt_;
    weights<T> w_;
    kv_cache<S> cache_;
    decode_workspace<T> ws_;
    std::vector<T> x_, y_;
};

} // namespace attn
