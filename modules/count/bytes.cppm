// attn.count:bytes -- bytes: the key/value cache per token and type, a decode step's costs, the
// minimum traffic and resident bytes of a run, the ceilings at t threads and the roofline.
module;
#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>
export module attn.count:bytes;
import attn.core;
import :flops;

export namespace attn {

/// Key/value cache per token per layer: one key and one value vector per key/value head; MLA's
/// absorbed form caches one row, [kv_norm(c) | k_pe], d_c + d_h^R elements (its values are the
/// row's leading d_c), its naive form the decompressed keys and values of every head.
inline bool cache_values_in_keys(const problem& p) { return p.latent_family() && p.form == form::absorb; }
inline std::uint64_t kv_cache_elements_per_token(const problem& p) {
    if (cache_values_in_keys(p)) return std::uint64_t(p.latent.kv_rank + p.latent.rope);
    return std::uint64_t(p.k_width() + p.v_width());
}
inline std::uint64_t kv_cache_bytes_per_token(const problem& p, std::uint64_t bytes_per_element) {
    return kv_cache_elements_per_token(p) * bytes_per_element;
}
/// The same in a cache of type t (attn.core:kv): G ((d_qk + d_v) e_t + 2 s_t) bytes, e_t the
/// element's bytes (4 f32, 2 bf16 and f16, 1 int8) and s_t what each row stores beside it (int8:
/// its 4-byte scale). MHA d_model 1024, H 16: 8192 bytes per token in f32, 2176 in int8.
/// MLA absorbed: (d_c + d_h^R) e_t + s_t, one row (and one int8 scale) per token.
inline std::uint64_t kv_cache_bytes_per_token(const problem& p, kv_dtype t) {
    if (cache_values_in_keys(p)) return kv_cache_elements_per_token(p) * kv_element_bytes(t) + kv_row_extra_bytes(t);
    return std::uint64_t(p.kv_heads) * ((p.qk_dim() + p.v_dim()) * kv_element_bytes(t) + 2 * kv_row_extra_bytes(t));
}

/// Bytes one sequence's cache holds in one layer after `tokens` tokens: every token's rows, or
/// under the layer's sliding window W a rolling buffer's min(tokens, W) (Mistral 7B's).
inline std::uint64_t kv_cache_bytes(const problem& layer, std::uint64_t tokens, kv_dtype t) {
    const std::uint64_t held = layer.window ? std::min<std::uint64_t>(tokens, layer.window) : tokens;
    return kv_cache_bytes_per_token(layer, t) * held;
}

/// The attention problem of one decode step with `context` tokens already cached: one query row
/// per sequence, context + 1 keys, causal (bottom-right: the new token sees every key, or the
/// last W under the layer's window).
inline problem decode_problem(const problem& layer, std::size_t context) {
    problem p = layer;
    p.n_q = 1;
    p.n_kv = context + 1;
    p.causal = true;
    return p;
}

/// What one decode step costs, analytically, with `context` tokens cached before it.
/// Byte convention: the cache rows the core must read -- every key and value of the L+1 tokens
/// once per key/value head, B G (d_qk + d_v) (L+1) bytes_per_element -- as if the H/G query heads
/// sharing a head read it once (our decode core does); the weights are counted separately.
struct decode_costs {
    std::uint64_t kv_read_bytes = 0;   ///< B G (d_qk + d_v) (L+1) x element bytes
    std::uint64_t kv_write_bytes = 0;  ///< the appended token: B G (d_qk + d_v) x element bytes
    std::uint64_t weight_bytes = 0;    ///< every parameter once (W_q, W_k, W_v, W_o, biases)
    std::uint64_t matmul_flops = 0;    ///< 2 per multiply-add: the four projections of B tokens, QK^T and PV
    std::uint64_t attention_flops = 0; ///< of which QK^T and PV: 2 B H (d_qk + d_v) (L+1)
    std::uint64_t full_flops = 0;      ///< every add, multiply, divide, exp and compare (attn.count's full count)
};

/// decode_cost with the cache's bytes per token (per sequence) and the weights' bytes per element.
inline decode_costs decode_cost_from(const problem& layer, std::size_t context, std::uint64_t kv_per_token,
                                     std::uint64_t weight_element_bytes) {
    const problem step = decode_problem(layer, context);
    problem one = step; // projections of the new token only: K and V of one row, not of L+1
    one.n_kv = 1;
    const flop_counts att = analytic_flops(step), proj = analytic_flops(one);
    decode_costs c;
    const std::uint64_t B = layer.batch;
    c.kv_read_bytes = B * kv_per_token * step.visible(0); // context + 1, or the window's W
    c.kv_write_bytes = B * kv_per_token;
    c.weight_bytes = analytic_params(layer).total() * weight_element_bytes;
    c.attention_flops = att.attention_matmul();
    c.matmul_flops = c.attention_flops + proj.projection_matmul();
    c.full_flops = att.attention_full() + proj.projection_full();
    return c;
}

/// A step whose cache, weights and compute share one element type of `bytes_per_element`.
inline decode_costs decode_cost(const problem& layer, std::size_t context, std::size_t bytes_per_element) {
    return decode_cost_from(layer, context, kv_cache_bytes_per_token(layer, bytes_per_element), bytes_per_element);
}

/// A step over a cache of type t with fp32 weights and compute (the cache's type is a storage
/// type only): the cache bytes are kv_cache_bytes_per_token(layer, t) per token, scales included.
inline decode_costs decode_cost(const problem& layer, std::size_t context, kv_dtype t) {
    return decode_cost_from(layer, context, kv_cache_bytes_per_token(layer, t), sizeof(float));
}

/// Bytes a kernel must at least move: every input read once and every output written once
/// (core: Q, K, V in, O out, of the core's problem; layer: x_q and x_kv in, the weight set's
/// matrices and norms, y out).
inline std::uint64_t min_bytes(const problem& p, bool layer, std::uint64_t bytes_per_element) {
    const std::uint64_t B = p.batch;
    if (!layer) {
        const problem a = core_problem(p);
        const std::uint64_t q = B * a.n_q * a.q_width(), k = B * a.n_kv * a.k_width(), v = B * a.n_kv * a.v_width(),
                            o = B * a.n_q * a.o_width();
        return bytes_per_element * (q + k + v + o);
    }
    const param_counts w = analytic_params(p);
    const std::uint64_t io = B * (p.n_q + p.n_kv) * p.d_model + B * p.n_q * p.d_model;
    return bytes_per_element * (io + w.weights() + w.norms());
}

/// The layer workspace's elements: the projected Q, K, V and the concatenated heads; MLA's
/// buffers (attn.families:mla): its latents, the queries, the core's operands and the context.
inline std::uint64_t layer_workspace_elements(const problem& p) {
    const std::uint64_t B = p.batch, rq = B * p.n_q, rkv = B * p.n_kv;
    if (!p.latent_family()) return rq * (p.q_width() + p.o_width()) + rkv * (p.k_width() + p.v_width());
    const problem a = core_problem(p);
    const std::uint64_t H = p.heads, C = p.latent.kv_rank, Dr = p.latent.rope;
    const std::uint64_t head_q = H * p.qk_dim(), values = H * p.v_dim();
    std::uint64_t n = rq * (p.latent.q_rank + head_q) + rkv * (C + Dr) + rq * (a.q_width() + a.o_width());
    if (p.form == form::absorb)
        n += rkv * (C + Dr) + rq * (C + values) + rq * values; // the core's key rows, a head's staging, W^UV's output
    else
        n += rkv * (H * (p.nope_dim() + p.v_dim()) + a.k_width()); // decompressed k_nope|v, the keys
    return n;
}

/// Bytes a layer run holds beside the kernel's scratch: the minimum traffic plus the layer
/// workspace; the core holds its inputs only.
inline std::uint64_t resident_bytes(const problem& p, bool layer, std::uint64_t bytes_per_element) {
    return min_bytes(p, layer, bytes_per_element) + (layer ? bytes_per_element * layer_workspace_elements(p) : 0);
}

/// The compute ceiling at `threads` threads from the two measured (1 thread, all `all` threads):
/// compute scales with the cores a run uses, so the all-thread figure is taken pro rata.
inline double fma_ceiling_at(double one_thread, double all_threads, int all, int threads) {
    if (threads <= 1 || all <= 1) return one_thread;
    return all_threads * double(std::min(threads, all)) / double(all);
}

/// The other processes' load (CPUs kept busy, from the peak probe's sampler) while the compute
/// ceiling used at `threads` threads was measured: the 1-thread probe's, or the all-thread one's
/// that fma_ceiling_at scales. Negative: not recorded.
inline double fma_ceiling_load_at(double one_thread_load, double all_threads_load, int all, int threads) {
    return threads <= 1 || all <= 1 ? one_thread_load : all_threads_load;
}

/// Whether a row's % of peak cannot be taken at its word: above 100 % (no run beats the measured
/// ceiling; the ceiling was low) or a ceiling measured while other processes kept half a CPU or
/// more busy (a shared machine's ceiling is low, and every % against it high) -- or, where the
/// FMA probe also ran alongside the case (pct_alongside >= 0), a share of that probe's rate above
/// 100 %: the probe was slowed where the case was not (a quick run on a 2-vCPU VM: a bf16 case at
/// 64 % of peak.json's peak against a probe alongside at 0.51 of it, "125 %").
inline bool peak_in_doubt(double pct_peak, double peak_load_cpus, double pct_alongside = -1.0) {
    return pct_peak > 100.0 || peak_load_cpus >= 0.5 || pct_alongside > 100.0;
}

/// The largest speed-up over a run that achieved `achieved_gflops` on a case's counted FLOPs that
/// any implementation doing those FLOPs could reach: the measured FMA ceiling over the achieved
/// rate (time at the ceiling is counted FLOPs / ceiling). Below 1.3, no kernel can be 1.3x faster
/// on this machine. 0 when either figure is missing.
inline double ceiling_speedup(double achieved_gflops, double fma_gflops) {
    return achieved_gflops > 0 && fma_gflops > 0 ? fma_gflops / achieved_gflops : 0.0;
}

/// A bandwidth ceiling (triad, read) at `threads` threads: one thread's when it runs alone, the
/// all-thread figure otherwise (a few cores already saturate the memory channels).
inline double bandwidth_ceiling_at(double one_thread, double all_threads, int threads) {
    return threads <= 1 ? one_thread : all_threads;
}

/// The roofline's arithmetic side as a bandwidth: the bytes per second that `fma_gflops`
/// FLOP/s can consume at `intensity` FLOP per byte (unbounded for 0).
inline double arithmetic_roof_gbs(double fma_gflops, double intensity) {
    return intensity > 0 ? fma_gflops / intensity : HUGE_VAL;
}

/// The roofline as a bandwidth: the GB/s a kernel of `intensity` FLOP per byte can reach,
/// min(bandwidth ceiling, FMA ceiling / I).
inline double roofline_gbs(double bandwidth_gbs, double fma_gflops, double intensity) {
    return std::min(bandwidth_gbs, arithmetic_roof_gbs(fma_gflops, intensity));
}

/// The context length at which a decode cache of `layer` (its batch and key/value heads)
/// grows past `bytes` -- e.g. the last-level cache: the smallest L whose B G (d_qk + d_v) (L+1)
/// elements exceed it, floor(bytes / (B G (d_qk + d_v) e)) (0 when even one token does).
inline std::size_t decode_context_exceeding(const problem& layer, std::uint64_t bytes, std::size_t bytes_per_element) {
    return std::size_t(bytes / (layer.batch * kv_cache_bytes_per_token(layer, bytes_per_element)));
}
inline std::size_t decode_context_exceeding(const problem& layer, std::uint64_t bytes, kv_dtype t) {
    return std::size_t(bytes / (layer.batch * kv_cache_bytes_per_token(layer, t)));
}

/// How many times fewer cache bytes a decode step of `layer` reads than MHA's of the same
/// d_model and heads (G = H): H / G; MLA's against MHA with its query/key and value heads.
inline double decode_cache_ratio_to_mha(const problem& layer) {
    problem mha_layer = layer;
    mha_layer.kv_heads = layer.heads;
    mha_layer.named_family.reset();
    mha_layer.form = form::none;
    mha_layer.latent = {};
    return double(decode_cost(mha_layer, 0, 1).kv_read_bytes) / double(decode_cost(layer, 0, 1).kv_read_bytes);
}

/// A decode step's attention-core FLOPs per cache byte: per key, QK^T and PV cost 2 (d_qk + d_v)
/// FLOPs for each of the H query heads, and the key and value of the G key/value heads are
/// G (d_qk + d_v) elements: I = 2 H (d_qk + d_v) / (G (d_qk + d_v) e) = 2H / (G e), H/(2G) in fp32.
inline double decode_intensity(const problem& p, std::uint64_t bytes_per_element) {
    const problem a = core_problem(p); // MLA absorbed: 2 H (d_c + d_h^R + d_c) over d_c + d_h^R elements
    return 2.0 * double(a.heads) * double(a.qk_dim() + a.v_dim()) /
           double(kv_cache_elements_per_token(p) * bytes_per_element);
}
/// The same over a cache of type t: 2 H (d_qk + d_v) FLOPs per token over kv_cache_bytes_per_token --
/// H/G in bf16 and f16, 2H/G x d_head/(d_head + 4) in int8 (its scales are read too). With the
/// FMA peak it gives the type's roofline, min(triad, peak / I): a narrower cache carries more
/// arithmetic per byte, so its arithmetic roof is lower.
inline double decode_intensity(const problem& p, kv_dtype t) {
    const problem a = core_problem(p);
    return 2.0 * double(a.heads) * double(a.qk_dim() + a.v_dim()) / double(kv_cache_bytes_per_token(p, t));
}

} // namespace attn
