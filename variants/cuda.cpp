// cuda-naive, cuda-tiled, cuda-flash, cuda-hopper and cuda-decode: the CUDA kernels as variants of
// the one registry, on device cuda. Their kernels live in variants/cuda/ (its README has the
// design), behind api.hpp, a plain C++17 interface, since nvcc cannot read a module; this file maps
// a problem to that interface's shape and a case's inputs to its case classes, so the harness,
// `attnbench check`, `run` and the report reach them through attn::device_kernels: prepared once
// (inputs copied to the device in the case's storage type), run, read back, timed with CUDA events
// and a clean L2 before each call. Without a usable GPU, or in a build without CUDA, every case is
// refused in one line naming why.
module;
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>
#include "api.hpp"
module attn.variants;

namespace attn::variants {

namespace {

namespace cu = attn::cuda;

/// The kernel's shape for problem p (a core problem: its widths are the attention's).
cu::shape shape_of(const problem& p) {
    cu::shape s;
    s.batch = p.batch;
    s.heads = p.heads;
    s.kv_heads = p.kv_heads;
    s.n_q = p.n_q;
    s.n_kv = p.n_kv;
    s.d_qk = p.qk_dim();
    s.d_v = p.v_dim();
    s.causal = p.causal;
    s.window = p.window;
    s.scale = p.scale.value_or(0.0); // MLA's absorbed core keeps its layer's 1/sqrt(nope + rope)
    return s;
}

/// "" with a usable GPU, else the one line query() gives (asked once).
const std::string& no_device() {
    static const std::string why = [] {
        const cu::device_info d = cu::query();
        return d.present ? std::string() : d.reason;
    }();
    return why;
}

/// One prepared case of any of api.hpp's case classes (all three run, read back and time alike).
template <class Case>
struct prepared final : device_run {
    Case c;
    explicit prepared(Case&& x) : c(std::move(x)) {}
    void run() override { c.run(); }
    std::vector<float> output() override { return c.output(); }
    std::vector<double> time_ms(int repetitions, int warmup, bool cold) override {
        return c.time_ms(repetitions, warmup, cold);
    }
};

/// The kernel that runs a device_inputs' case, and its refusal (problem p as the case gives it:
/// the core's for core and decode, the layer's for a layer).
std::string refuses(cu::kernel k, const problem& p, mode m, dtype t) {
    const std::string who = cu::name(k);
    if ((m == mode::decode) != (k == cu::kernel::decode))
        return who + (k == cu::kernel::decode ? " runs decode steps; core and layer run on cuda-naive, -tiled, "
                                                "-flash or -hopper"
                                              : " runs core and layer cases; decode steps run on cuda-decode");
    if (m == mode::layer && !derived_family(p.family()))
        return who + ": the layer of family " + std::string(enum_label(p.family())) +
               " is not served on the GPU (the q/k/v family's projections only; its core is)";
    // a decode case is asked about as its layer's step (decode_problem): the kernel runs that
    // step's core (MLA absorbed: one latent head of d_c + d_R keys, its values the first d_c)
    const cu::shape s = shape_of(m == mode::decode ? core_problem(p) : p);
    std::string why;
    if (k == cu::kernel::decode) {
        cu::decode_spec spec;
        spec.v_from_k = p.form == form::absorb; // MLA's absorbed form: the latent rows hold V
        why = cu::decode_refusal(s, t, spec);
    } else {
        why = cu::refusal(k, s, t);
    }
    if (!why.empty()) return why;
    return no_device();
}

std::unique_ptr<device_run> prepare(cu::kernel k, const device_inputs& in) {
    const cu::shape s = shape_of(in.p);
    if (in.mode == mode::core)
        return std::make_unique<prepared<cu::core_case>>(
            cu::core_case(k, s, in.type, in.q.data(), in.k.data(), in.v.data()));
    if (in.mode == mode::decode) {
        cu::decode_spec spec;
        spec.capacity = in.capacity;
        spec.v_from_k = in.values_in_keys;
        return std::make_unique<prepared<cu::decode_case>>(
            cu::decode_case(s, in.type, in.q.data(), in.k_cache, in.v_cache, in.k_scales, in.v_scales, spec));
    }
    // the q/k/v family's layer: wq, wk, wv, wo, then the biases where the problem has them
    require(in.weights.size() >= 4, "a GPU layer needs the q/k/v family's weights (wq, wk, wv, wo)");
    auto at = [&](std::size_t i) {
        return i < in.weights.size() && !in.weights[i].empty() ? in.weights[i].data() : nullptr;
    };
    cu::layer_inputs x;
    x.x_q = in.x_q.data();
    x.x_kv = in.x_kv.data();
    x.wq = at(0), x.wk = at(1), x.wv = at(2), x.wo = at(3);
    if (in.p.bias) x.bq = at(4), x.bk = at(5), x.bv = at(6), x.bo = at(7);
    return std::make_unique<prepared<cu::layer_case>>(cu::layer_case(s, in.p.d_model, in.type, k, x));
}

/// The GPU's ceilings, measured once a process (cuBLAS bf16 GEMM, the best read kernel, a
/// device-to-device copy; medians of 5): the same figures `attn_cuda_bench peak` prints.
device_peak gpu_peak() {
    static const device_peak measured = [] {
        if (!no_device().empty()) throw attn::error(no_device());
        try {
            const cu::peak m = cu::measure_peak(5);
            device_peak d;
            d.matmul_16bit_gflops = m.tensor_tflops * 1e3;
            d.read_gbs = m.read_gbs;
            d.copy_gbs = m.copy_gbs;
            d.cache_bytes = cu::query().l2_bytes;
            d.what = "16-bit matrix rate: cuBLAS bf16 GEMM n=" + std::to_string(m.gemm_n) +
                     ", fp32 accumulation; read: the fastest read kernel (" + m.read_kernel + ") over " +
                     std::to_string(m.read_bytes >> 20) + " MiB; copy: cudaMemcpy device to device, read + written";
            return d;
        } catch (const cu::error& e) {
            throw attn::error(std::string("measuring the GPU's ceilings: ") + e.what());
        }
    }();
    return measured;
}

/// What a kernel rounds to a 16-bit format beyond its stored inputs: cuda-flash and cuda-hopper
/// store P in the case's format for P V (mma.sync, wgmma); cuda-decode over a 16-bit or int8 cache
/// feeds its tensor cores the scaled queries and P in the cache's 16-bit type (int8: bf16),
/// declared for every such cache (the CUDA-core path, left for widths other than 64 and 128,
/// rounds neither: its bound is then looser than it needs to be); naive and tiled round nothing.
half_roundings roundings(cu::kernel k, mode m, dtype t) {
    half_roundings r;
    const bool sixteen = t == dtype::bf16 || t == dtype::f16;
    r.format = t == dtype::f16 ? dtype::f16 : dtype::bf16;
    if ((k == cu::kernel::flash || k == cu::kernel::hopper) && m != mode::decode) r.weights = sixteen;
    if (k == cu::kernel::decode && m == mode::decode) r.weights = r.queries = sixteen || t == dtype::int8;
    return r;
}

variant make(cu::kernel k, std::string description) {
    variant v;
    v.name = cu::name(k);
    v.description = std::move(description);
    v.threaded = false;
    v.serves.device = device::cuda;
    v.serves.windows = true;
    v.tags = {"cuda"};
    v.device.refuses = [k](const problem& p, mode m, dtype t) { return refuses(k, p, m, t); };
    v.device.peak = gpu_peak;
    v.roundings = [k](const problem&, mode m, dtype t) { return roundings(k, m, t); };
    v.device.prepare = [k](const device_inputs& in, const run_options&) {
        try {
            return prepare(k, in);
        } catch (const cu::out_of_memory& e) {
            throw attn::out_of_memory(e.what());
        } catch (const cu::error& e) {
            throw attn::error(e.what());
        }
    };
    return v;
}

} // namespace

std::vector<variant> make_cuda_variants() {
    return {make(cu::kernel::naive, "scores in GPU memory, a thread per output element: the GPU's plain loops"),
            make(cu::kernel::tiled, "shared-memory tiles and an online softmax in fp32 (blocked, on a GPU)"),
            make(cu::kernel::flash, "mma.sync tensor cores, ldmatrix, cp.async double buffers (sm_80; bf16, f16)"),
            make(cu::kernel::hopper, "wgmma fed by TMA, a producer and two consumer warpgroups (sm_90a; bf16, f16)"),
            make(cu::kernel::decode,
                 "split-KV decode: tensor cores for the group's heads, cp.async pipeline, pages, rings, MLA")};
}

} // namespace attn::variants
