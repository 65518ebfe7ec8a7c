// attn.decode -- incremental decoding with a key/value cache. A decode step takes one new token
// per sequence, projects it, appends its key and value to the cache, attends over all L+1
// cached keys with the variant's own core (n_q = 1, over strided views of the cache), and
// projects the context out. It is built on kernel_set, so every registered variant decodes
// through its own kernels with no per-variant code.
//
// Cache layout, per family: K and V each [batch, G, capacity, d_head], every (sequence, head)'s
// rows contiguous -- what packed_heads describes, with a capacity that can exceed the length.
// MHA keeps G = H heads, GQA G < H, MQA one: the bytes a step must read scale with G.
//
// Memory: a step allocates nothing once its decode_workspace exists (q, the new k and v, the
// context: O(batch x d_model)); the rest is the cache itself and whatever the variant's core
// keeps (variant::scratch_bytes of the step's problem).
module;
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>
export module attn.decode;
export import attn.core;
export import attn.count; // decode_problem, decode_cost
import attn.check;

export namespace attn {

/// The key/value cache of one layer for `batch` sequences of equal length.
template <class T>
class kv_cache {
  public:
    kv_cache(std::size_t batch, std::size_t kv_heads, std::size_t d_head, std::size_t capacity)
        : batch_(batch), heads_(kv_heads), dim_(d_head), capacity_(capacity) {
        require(batch > 0 && kv_heads > 0 && d_head > 0, "kv cache needs batch, kv_heads and d_head >= 1 (got " +
                                                             std::to_string(batch) + ", " + std::to_string(kv_heads) +
                                                             ", " + std::to_string(d_head) + ")");
        k_.resize(batch * kv_heads * capacity * d_head);
        v_.resize(k_.size());
    }
    /// A cache for problem p's batch, key/value heads and head width.
    kv_cache(const problem& p, std::size_t capacity) : kv_cache(p.batch, p.kv_heads, p.head_dim(), capacity) {}

    std::size_t batch() const { return batch_; }
    std::size_t kv_heads() const { return heads_; }
    std::size_t d_head() const { return dim_; }
    std::size_t capacity() const { return capacity_; }
    std::size_t size() const { return length_; } ///< tokens cached per sequence (L)

    /// Bytes the cache holds (K and V, at capacity).
    std::size_t bytes() const { return 2 * k_.size() * sizeof(T); }
    /// Bytes of the cached tokens (K and V, at the current length).
    std::size_t used_bytes() const { return 2 * batch_ * heads_ * length_ * dim_ * sizeof(T); }

    /// Appends one token per sequence: k_new and v_new are [batch, G*d_head] (a projection's rows).
    void append(const T* k_new, const T* v_new) {
        require(length_ < capacity_, "kv cache is full (capacity " + std::to_string(capacity_) + " tokens)");
        for (std::size_t b = 0; b < batch_; ++b)
            for (std::size_t g = 0; g < heads_; ++g) {
                const std::size_t src = (b * heads_ + g) * dim_, dst = offset(b, g, length_);
                std::copy(k_new + src, k_new + src + dim_, k_.data() + dst);
                std::copy(v_new + src, v_new + src + dim_, v_.data() + dst);
            }
        ++length_;
    }

    /// Sets the length without writing (the rows [0, n) hold whatever was put there, e.g. by fill()).
    void resize(std::size_t n) {
        require(n <= capacity_,
                "kv cache length " + std::to_string(n) + " exceeds its capacity " + std::to_string(capacity_));
        length_ = n;
    }
    void clear() { length_ = 0; }

    /// The cached keys and values as [batch, G, L, d_head] views.
    heads_view<const T> keys() const { return view(k_.data()); }
    heads_view<const T> values() const { return view(v_.data()); }

    /// Whole buffers, [batch, G, capacity, d_head]: for filling a cache without projecting.
    T* key_data() { return k_.data(); }
    T* value_data() { return v_.data(); }
    std::size_t offset(std::size_t b, std::size_t g, std::size_t i) const {
        return ((b * heads_ + g) * capacity_ + i) * dim_;
    }

  private:
    heads_view<const T> view(const T* data) const {
        return {data, batch_, heads_, length_, dim_, heads_ * capacity_ * dim_, capacity_ * dim_, dim_};
    }
    std::size_t batch_, heads_, dim_, capacity_, length_ = 0;
    big_vector<T> k_, v_;
};

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

/// One decode step. x_new [B, d_model]: the new token of each sequence; y [B, d_model]: its
/// output. `layer` gives d_model, heads, kv_heads, d_head, bias and the scale; its n_q, n_kv and
/// causal are ignored (the cache says how long the context is). Appends to `cache`.
template <class T>
void decode_step(const variant& var, const problem& layer, const weights<T>& w, const T* x_new, kv_cache<T>& cache,
                 T* y, const run_options& opt, decode_workspace<T>& ws) {
    const auto& k = var.get<T>();
    require(k.core && k.linear, "variant '" + var.name + "' has no kernels at this precision");
    require(cache.batch() == layer.batch && cache.kv_heads() == layer.kv_heads && cache.d_head() == layer.head_dim(),
            "kv cache [batch " + std::to_string(cache.batch()) + ", G " + std::to_string(cache.kv_heads()) +
                ", d_head " + std::to_string(cache.d_head()) + "] does not fit " + layer.describe());
    ws.prepare(layer);
    const std::size_t B = layer.batch, d = layer.head_dim();
    auto bias = [](const std::vector<T>& b) { return b.empty() ? nullptr : b.data(); };
    k.linear({x_new, w.wq.data(), bias(w.bq), ws.q.data(), B, layer.d_model, layer.q_width()}, opt);
    k.linear({x_new, w.wk.data(), bias(w.bk), ws.k.data(), B, layer.d_model, layer.kv_width()}, opt);
    k.linear({x_new, w.wv.data(), bias(w.bv), ws.v.data(), B, layer.d_model, layer.kv_width()}, opt);
    cache.append(ws.k.data(), ws.v.data());
    const problem step = decode_problem(layer, cache.size() - 1);
    k.core(step,
           {interleaved_heads<const T>(ws.q.data(), B, 1, layer.heads, d), cache.keys(), cache.values(),
            interleaved_heads<T>(ws.ctx.data(), B, 1, layer.heads, d)},
           opt);
    k.linear({ws.ctx.data(), w.wo.data(), bias(w.bo), y, B, layer.q_width(), layer.d_model}, opt);
}

/// Fills the cache with the keys and values of `n` tokens per sequence, x [B, n, d_model],
/// projected with the variant's linear kernel (what a prompt's forward pass leaves behind).
/// Allocates O(B n G d_head) for the projections: not for timed loops.
template <class T>
void prefill(const variant& var, const problem& layer, const weights<T>& w, const T* x, std::size_t n,
             kv_cache<T>& cache, const run_options& opt) {
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

/// A decode step set up to be timed again and again: the layer's weights, a cache holding
/// `context` tokens, one new token per sequence, the output and the workspace. The cache holds
/// one random block repeated (a cache read is a cache read; the values only need to be finite
/// and varied). step() cuts the cache back to `context` tokens and decodes one token, so every
/// step attends over exactly context + 1 keys; core() runs the attention core alone over those
/// context + 1 keys with the last step's queries: the part of a step that reads the cache.
template <class T>
class decode_fixture {
  public:
    decode_fixture(const variant& var, const problem& layer, std::size_t context, const run_options& opt,
                   std::uint64_t seed)
        : var_(var), layer_(layer), context_(context), opt_(opt), w_(random_weights<T>(layer, seed)),
          cache_(layer, context + 1), ws_(layer), x_(random_values<T>(layer.batch * layer.d_model, seed * 31 + 7)),
          y_(layer.batch * layer.d_model) {
        const std::size_t block = std::size_t(1) << 16, per_head = context * layer.head_dim();
        const auto r = random_values<T>(block, seed * 977 + 13);
        for (T* base : {cache_.key_data(), cache_.value_data()})
            for (std::size_t b = 0; b < layer.batch; ++b)
                for (std::size_t g = 0; g < layer.kv_heads; ++g)
                    for (std::size_t i = 0; i < per_head; i += block)
                        std::copy_n(r.data(), std::min(block, per_head - i), base + cache_.offset(b, g, 0) + i);
        step(); // writes row `context`, which core() reads, and sizes every buffer
    }

    void step() {
        cache_.resize(context_);
        decode_step<T>(var_, layer_, w_, x_.data(), cache_, y_.data(), opt_, ws_);
    }

    void core() {
        cache_.resize(context_ + 1);
        const std::size_t B = layer_.batch, d = layer_.head_dim();
        var_.get<T>().core(decode_problem(layer_, context_),
                           {interleaved_heads<const T>(ws_.q.data(), B, 1, layer_.heads, d), cache_.keys(),
                            cache_.values(), interleaved_heads<T>(ws_.ctx.data(), B, 1, layer_.heads, d)},
                           opt_);
    }

    const T* output() const { return y_.data(); }
    const T* context_output() const { return ws_.ctx.data(); }
    /// Bytes held: the cache at capacity and the weights.
    std::size_t bytes() const { return cache_.bytes() + sizeof(T) * analytic_params(layer_).total(); }

  private:
    const variant& var_;
    problem layer_;
    std::size_t context_;
    run_options opt_;
    weights<T> w_;
    kv_cache<T> cache_;
    decode_workspace<T> ws_;
    std::vector<T> x_, y_;
};

/// How the equivalence check builds the cache.
enum class decode_fill {
    steps,   ///< L+1 decode steps from an empty cache; every step's output is checked (row t of the forward)
    prefill, ///< prefill() with the first L tokens, then one step; its output is checked (the last row)
};
inline const char* decode_fill_name(decode_fill f) { return f == decode_fill::steps ? "steps" : "prefill"; }

/// Is decoding with `var` the same function as the full causal forward? For `layer` (batch,
/// sizes, bias) and `context` = L: the inputs are L+1 tokens per sequence, drawn as attn.check
/// draws a layer's (self-attention: queries, keys and values from the same tokens), and the
/// decoded outputs are compared with the fp64 reference's rows under attn.check's tolerance
/// policy (its per-element bounds, unchanged). With decode_fill::prefill the expectation is
/// computed for the last row alone -- under bottom-right causal alignment the one-query problem
/// over the L+1 keys is exactly that row of the full forward -- so long contexts stay cheap.
template <class T>
check::metrics check_decode(const variant& var, const problem& layer, std::size_t context, decode_fill fill,
                            const run_options& opt, std::uint64_t seed, double magnitude = 1.0) {
    const std::size_t n = context + 1, B = layer.batch, dm = layer.d_model;
    problem full = layer;
    full.n_q = full.n_kv = n;
    full.causal = true;
    const problem tail = decode_problem(layer, context);
    const problem& expected_for = fill == decode_fill::steps ? full : tail;
    check::inputs in = check::make_inputs(expected_for, check::mode::layer, seed, magnitude);
    in.x_q.resize(B * expected_for.n_q * dm); // queries are the same tokens as the keys
    for (std::size_t b = 0; b < B; ++b)
        std::copy_n(in.x_kv.data() + (b * n + n - expected_for.n_q) * dm, expected_for.n_q * dm,
                    in.x_q.data() + b * expected_for.n_q * dm);
    const check::expectation e = check::expect(expected_for, check::mode::layer, in);

    auto cast = [](const std::vector<float>& v) { return std::vector<T>(v.begin(), v.end()); };
    const weights<T> w = in.w.template cast<T>();
    const std::vector<T> x = cast(in.x_kv);
    kv_cache<T> cache(layer, n);
    decode_workspace<T> ws(layer);
    std::vector<T> x_t(B * dm), y_t(B * dm, T(-777));
    std::vector<T> out(B * expected_for.n_q * dm, T(-777));
    auto step = [&](std::size_t t, std::size_t row) {
        for (std::size_t b = 0; b < B; ++b) std::copy_n(x.data() + (b * n + t) * dm, dm, x_t.data() + b * dm);
        decode_step<T>(var, layer, w, x_t.data(), cache, y_t.data(), opt, ws);
        for (std::size_t b = 0; b < B; ++b)
            std::copy_n(y_t.data() + b * dm, dm, out.data() + (b * expected_for.n_q + row) * dm);
    };
    if (fill == decode_fill::steps) {
        for (std::size_t t = 0; t < n; ++t) step(t, t);
    } else {
        std::vector<T> prompt(B * context * dm);
        for (std::size_t b = 0; b < B; ++b)
            std::copy_n(x.data() + b * n * dm, context * dm, prompt.data() + b * context * dm);
        prefill<T>(var, layer, w, prompt.data(), context, cache, opt);
        step(context, 0);
    }
    return check::compare(out, e.ref, e.bound, check::unit_roundoff<T>());
}

/// A case of the decode grid: the layer (batch, sizes), the context length L and the input magnitude.
struct decode_case {
    problem layer;
    std::size_t context = 0;
    double magnitude = 1.0;
};

/// The embedded decode grid: every family (single-head, MHA, MQA, GQA, wide), L = 0, odd L,
/// L long enough for the key split (> 256 keys: 2 chunks; > 4096: 16), batch > 1, biases,
/// d_head 3, 16, 17, 64 and 80, and scores of a few thousand.
inline std::vector<decode_case> decode_grid() {
    std::vector<decode_case> g;
    problem p;
    g.push_back({single_head(17, 1), 0, 1.0}); // d_head 17, L 0: one key
    g.push_back({single_head(17, 1), 7, 1.0});
    p = mha(64, 4, 1); // d_head 16, batch 2
    p.batch = 2;
    g.push_back({p, 129, 1.0});
    g.push_back({mqa(48, 16, 1), 7, 1.0}); // d_head 3, MQA
    p = gqa(512, 8, 2, 1);                 // d_head 64, GQA, bias, batch 3, two key chunks
    p.bias = true;
    p.batch = 3;
    g.push_back({p, 300, 1.0});
    p = gqa(320, 4, 2, 1); // d_head 80, batch 2
    p.batch = 2;
    g.push_back({p, 33, 1.0});
    g.push_back({wide(32, 4, 1), 7, 1.0}); // the wide-head counterfactual
    g.push_back({mha(64, 8, 1), 0, 1.0});  // MHA, L 0
    p = mqa(128, 4, 1);                    // MQA, 16 key chunks, batch 2
    p.batch = 2;
    g.push_back({p, 4999, 1.0});
    g.push_back({mqa(64, 4, 1), 33, 12.0}); // scores of a few thousand
    p = mqa(256, 16, 1);                    // 16 query heads per kv head: heads in the lanes
    p.batch = 2;
    g.push_back({p, 700, 1.0});
    g.push_back({mqa(512, 8, 1), 300, 1.0}); // 8 per kv head, d_head 64
    p = gqa(640, 32, 1, 1);                  // 32 per kv head (two groups of lanes), d_head 20
    p.bias = true;
    g.push_back({p, 77, 1.0});
    return g;
}

} // namespace attn
