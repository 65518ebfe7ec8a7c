// attn.decode:check -- is decoding the same function as the full causal forward? For a cache
// of the compute type against the fp64 reference's rows; for a narrower cache (bf16, f16, int8)
// against fp64 computed on the same rounded or dequantized cache, with the loss against the
// unrounded cache reported beside it.
module;
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <type_traits>
#include <vector>
export module attn.decode:check;
import :step;
import attn.core;
import attn.count;
import attn.check;
import attn.families;

export namespace attn {

/// How the equivalence check builds the cache.
enum class decode_fill {
    steps,   ///< L+1 decode steps from an empty cache; every step's output is checked (row t of the forward)
    prefill, ///< prefill() with the first L tokens, then one step; its output is checked (the last row)
};
inline const char* decode_fill_name(decode_fill f) { return f == decode_fill::steps ? "steps" : "prefill"; }

namespace detail {

/// The inputs of a decode check and what it expects: L+1 tokens per sequence, drawn as attn.check
/// draws a layer's (self-attention: queries, keys and values from the same tokens), and the
/// problem whose rows are checked -- every row of the full causal forward (steps) or the last
/// one (prefill: under bottom-right causal alignment the one-query problem over the L+1 keys is
/// exactly that row).
struct decode_inputs {
    problem checked;
    check::inputs in;
};

inline decode_inputs decode_check_inputs(const problem& layer, std::size_t context, decode_fill fill,
                                         std::uint64_t seed, double magnitude) {
    const std::size_t n = context + 1, B = layer.batch, dm = layer.d_model;
    problem full = layer;
    full.n_q = full.n_kv = n;
    full.causal = true;
    decode_inputs r{fill == decode_fill::steps ? full : decode_problem(layer, context), {}};
    r.in = check::make_inputs(r.checked, mode::layer, seed, magnitude);
    r.in.x_q.resize(B * r.checked.n_q * dm); // queries are the same tokens as the keys
    for (std::size_t b = 0; b < B; ++b)
        std::copy_n(r.in.x_kv.data() + (b * n + n - r.checked.n_q) * dm, r.checked.n_q * dm,
                    r.in.x_q.data() + b * r.checked.n_q * dm);
    return r;
}

/// Decodes the tokens of `d` into `cache` (steps from empty, or prefill and one step) and returns
/// the checked rows' outputs [B, n_q, d_model].
template <class T, class S>
std::vector<T> run_decode(const variant& var, const problem& layer, std::size_t context, decode_fill fill,
                          const run_options& opt, const decode_inputs& d, kv_cache<S>& cache) {
    const std::size_t n = context + 1, B = layer.batch, dm = layer.d_model, rows = d.checked.n_q;
    const weights<T> w = d.in.w.template cast<T>();
    const std::vector<T> x(d.in.x_kv.begin(), d.in.x_kv.end());
    layer_buffers<T> ws;
    std::vector<T> x_t(B * dm), y_t(B * dm, T(-777));
    std::vector<T> out(B * rows * dm, T(-777));
    auto step = [&](std::size_t t, std::size_t row) {
        for (std::size_t b = 0; b < B; ++b) std::copy_n(x.data() + (b * n + t) * dm, dm, x_t.data() + b * dm);
        decode_step<T>(var, layer, w, x_t.data(), cache, y_t.data(), opt, ws);
        for (std::size_t b = 0; b < B; ++b) std::copy_n(y_t.data() + b * dm, dm, out.data() + (b * rows + row) * dm);
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
    return out;
}

/// The keys (or values) a cache holds as a decode core reads them, fp32, in a projection's
/// layout [B, L, G*d] in position order; positions a rolling buffer no longer holds (before the
/// last W) are zeros: no row the prefill check looks at sees them.
template <class S>
std::vector<float> cached(const kv_cache<S>& c, bool values) {
    const std::size_t B = c.batch(), G = c.heads(), d = values ? c.d_v() : c.d_k(), L = c.size();
    std::vector<float> out(B * L * G * d, 0.0f);
    for (std::size_t b = 0; b < B; ++b)
        for (std::size_t i = L - c.rows(); i < L; ++i)
            for (std::size_t g = 0; g < G; ++g)
                for (std::size_t t = 0; t < d; ++t)
                    out[((b * L + i) * G + g) * d + t] =
                        values ? c.value_at(b, g, c.slot(i), t) : c.key_at(b, g, c.slot(i), t);
    return out;
}

} // namespace detail

/// Is decoding with `var` the same function as the full causal forward? For `layer` (batch,
/// sizes, bias) and `context` = L, the decoded outputs are compared with the fp64 reference's
/// rows (detail::decode_check_inputs) under attn.check's tolerance policy (its per-element
/// bounds, unchanged). With decode_fill::prefill only the last row is checked, so long contexts
/// stay cheap.
template <class T>
check::metrics check_decode(const variant& var, const problem& layer, std::size_t context, decode_fill fill,
                            const run_options& opt, std::uint64_t seed, double magnitude = 1.0) {
    const auto d = detail::decode_check_inputs(layer, context, fill, seed, magnitude);
    const check::expectation e = check::expect(d.checked, mode::layer, d.in);
    kv_cache<T> cache(layer, context + 1);
    return check::compare(detail::run_decode<T>(var, layer, context, fill, opt, d, cache), e.ref, e.bound,
                          check::unit_roundoff<T>());
}

/// A decode check over a cache narrower than the compute type: `same` against fp64 computed on
/// the cache's own values (the rounded or dequantized keys and values are exact inputs there,
/// so the bound is fp32's: what the kernels round beyond the cache is their fp32 arithmetic);
/// `unrounded` against fp64 on the keys and values before rounding, with fp32's bound: the
/// accuracy a user gives up for the narrower cache (its ratio is how many fp32 budgets that is).
struct kv_check {
    check::metrics same, unrounded;
};

/// check_decode for a cache stored as S (bf16, f16, int8): the decode step with fp32 compute.
template <class S>
kv_check check_decode_kv(const variant& var, const problem& layer, std::size_t context, decode_fill fill,
                         const run_options& opt, std::uint64_t seed, double magnitude = 1.0) {
    require(fill == decode_fill::prefill || !layer.window || context < layer.window,
            "a " + std::string(enum_name(kv_dtype_of<S>)) +
                " rolling-buffer cache (window=" + std::to_string(layer.window) + " < " + std::to_string(context + 1) +
                " tokens) is checked after a prefill: the rows it overwrote cannot be read back for every step's row");
    const auto d = detail::decode_check_inputs(layer, context, fill, seed, magnitude);
    kv_cache<S> cache(layer, context + 1);
    const auto out = detail::run_decode<float>(var, layer, context, fill, opt, d, cache);
    const auto same = check::expect_over_cache(d.checked, d.in.w, d.in.x_q, detail::cached(cache, false),
                                               detail::cached(cache, true));
    const auto plain = check::expect(d.checked, mode::layer, d.in);
    const double u = check::unit_roundoff<float>();
    return {check::compare(out, same.ref, same.bound, u), check::compare(out, plain.ref, plain.bound, u)};
}

/// The attention core of one decode step of `layer` over `context` cached tokens: the family's core
/// problem (MLA absorbed: one latent head of d_c + d_R keys, scale 1/sqrt(nope + rope)) and whether
/// its cache keeps the values in the key rows (the latent's first d_c elements, stored once).
struct decode_core {
    problem p;
    bool values_in_keys = false;
};

inline decode_core decode_core_of(const problem& layer, std::size_t context) {
    return {attention_problem(decode_problem(layer, context)), family_ops_of(layer).cache(layer).v_in_k};
}

/// A decode core's random inputs (attn.check's core inputs), the values the key rows' leading d_v
/// elements where the cache keeps them there.
inline check::inputs decode_core_inputs(const decode_core& c, std::uint64_t seed, double magnitude = 1.0) {
    check::inputs in = check::make_inputs(c.p, mode::core, seed, magnitude);
    if (c.values_in_keys) {
        const std::size_t rows = c.p.batch * c.p.n_kv * c.p.kv_heads, dk = c.p.qk_dim(), dv = c.p.v_dim();
        require(dv <= dk, "values in the key rows need d_v <= d_qk (got " + std::to_string(dv) + " > " +
                              std::to_string(dk) + ")");
        for (std::size_t r = 0; r < rows; ++r) std::copy_n(in.k.data() + r * dk, dv, in.v.data() + r * dv);
    }
    return in;
}

/// One decode core of `step` (n_q = 1, n_kv = the cache's rows) prepared on var's device: the
/// queries q [B, H d_qk] and the cache's own rows, copied there as they are stored.
template <class S>
std::unique_ptr<device_run> prepare_decode_on_device(const variant& var, const problem& step, std::span<const float> q,
                                                     const kv_cache<S>& cache, const run_options& opt) {
    device_inputs d;
    d.mode = mode::decode;
    d.type = kv_dtype_of<S>;
    d.p = step;
    d.q = q;
    d.k_cache = cache.keys().row(0, 0, 0);
    d.v_cache = cache.values().row(0, 0, 0);
    if constexpr (std::is_same_v<S, std::int8_t>) {
        d.k_scales = cache.key_rows().scale.row(0, 0, 0);
        d.v_scales = cache.value_rows().scale.row(0, 0, 0);
    }
    d.capacity = cache.capacity();
    d.values_in_keys = cache.values_in_keys();
    return var.device.prepare(d, opt);
}

/// A cache stored as S of the core's n_kv rows of `in`'s keys and values (decode_core_inputs; values
/// in the key rows stored once).
template <class S>
kv_cache<S> filled_cache(const decode_core& c, const check::inputs& in) {
    const problem& step = c.p;
    const std::size_t B = step.batch, n = step.n_kv;
    kv_cache<S> cache(B, {step.kv_heads, step.qk_dim(), step.v_dim(), c.values_in_keys}, n);
    const auto k = interleaved_heads<const float>(in.k.data(), B, n, step.kv_heads, step.qk_dim()),
               v = interleaved_heads<const float>(in.v.data(), B, n, step.kv_heads, step.v_dim());
    for (std::size_t i = 0; i < n; ++i) cache.append(k, v, i);
    return cache;
}

/// The attention core of one decode step, `step` (n_q = 1), over a cache stored as S holding
/// random keys and values (attn.check's core inputs): `same` and `unrounded` as above, in core
/// mode. S = float checks the variant's fp32 core (both metrics then agree).
template <class S>
kv_check check_decode_core(const variant& var, const decode_core& c, const run_options& opt, std::uint64_t seed,
                           double magnitude = 1.0) {
    const problem& step = c.p;
    require(step.n_q == 1, "a decode core check has one query row (got n_q " + std::to_string(step.n_q) + ")");
    const std::size_t B = step.batch;
    const check::inputs in = decode_core_inputs(c, seed, magnitude);
    const kv_cache<S> cache = filled_cache<S>(c, in);
    std::vector<float> out(B * step.o_width(), -777.0f);
    if (var.device) { // the cache's own rows, copied to the device as they are stored
        const auto r = prepare_decode_on_device<S>(var, step, in.q, cache, opt);
        r->run();
        out = r->output();
    } else {
        require_kv_core<float, S>(var);
        attend(var, step, interleaved_heads<const float>(in.q.data(), B, 1, step.heads, step.qk_dim()), cache,
               out.data(), opt);
    }
    check::inputs same_in = in;
    same_in.k = detail::cached(cache, false);
    same_in.v = detail::cached(cache, true);
    check::expectation same = check::expect(step, mode::core, same_in);
    std::vector<float> v_scales; // an int8 cache's value row scales, [B, n_kv, G]
    if constexpr (std::is_same_v<S, std::int8_t>)
        for (std::size_t b = 0; b < B; ++b)
            for (std::size_t j = 0; j < step.n_kv; ++j)
                for (std::size_t g = 0; g < step.kv_heads; ++g)
                    v_scales.push_back(*cache.value_rows().scale.row(b, g, j));
    check::charge_roundings(same, var, step, mode::decode, kv_dtype_of<S>, same_in, v_scales);
    const auto plain = check::expect(step, mode::core, in);
    const double u = check::unit_roundoff<float>();
    return {check::compare(out, same.ref, same.bound, u, same.store), check::compare(out, plain.ref, plain.bound, u)};
}

/// check_decode_core over a plain core problem `step` (separate key and value rows).
template <class S>
kv_check check_decode_core(const variant& var, const problem& step, const run_options& opt, std::uint64_t seed,
                           double magnitude = 1.0) {
    return check_decode_core<S>(var, decode_core{step, false}, opt, seed, magnitude);
}

} // namespace attn
