// layer_case (api.hpp): a layer on the device. The projections are cuBLAS GEMMs (storage-type
// operands, fp32 accumulation into an fp32 scratch), each followed by one pass that adds the
// bias and rounds to the storage type, so every stored projection is rounded once, as the CPU
// suite stores them; the core between them is naive, tiled or flash.
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "formats.hpp"
#include "host.cuh"

namespace attn::cuda {
namespace detail {
namespace {

/// GEMM scratch -> stored result: out[r, c] = round(c32[r, c] + bias[c]) in the storage type.
template <class T>
__global__ void bias_round(const float* __restrict__ c32, const float* __restrict__ bias, T* __restrict__ out,
                           long long n, int cols) {
    for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < n; e += (long long)gridDim.x * blockDim.x)
        out[e] = from_f32<T>(c32[e] + (bias ? bias[e % cols] : 0.0f));
}

} // namespace
} // namespace detail

using namespace detail;

struct layer_case::impl {
    shape s;
    std::size_t d_model = 0;
    storage st;
    kernel k;
    runner run;
    std::unique_ptr<cublas_owner> blas;
    device_memory x_q, x_kv, wq, wk, wv, wo, bq, bk, bv, bo; // inputs; biases fp32 (rounded values)
    device_memory q, kk, v, attn, y, c32, scratch;           // stored intermediates and the result
    core_args args;

    /// out [rows, n] = round(x [rows, k] w [n, k]^T + bias), through c32 in fp32.
    void linear(const device_memory& x, std::size_t rows, std::size_t kdim, const device_memory& w, std::size_t n,
                const device_memory& bias, const device_memory& out, const char* which) {
        const cudaDataType_t t = st == storage::f32 ? CUDA_R_32F : st == storage::bf16 ? CUDA_R_16BF : CUDA_R_16F;
        const float one = 1.0f, zero = 0.0f;
        // row-major C = X W^T is column-major C^T (n x rows) = W^T (n x k) X^T (k x rows)
        ATTN_CUBLAS(detail::cublas().gemm_ex(blas->get(), CUBLAS_OP_T, CUBLAS_OP_N, int(n), int(rows), int(kdim), &one,
                                             w.get(), t, int(kdim), x.get(), t, int(kdim), &zero, c32.get(), CUDA_R_32F,
                                             int(n), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                    std::string("the ") + which + " projection of " + run.what);
        const long long total = (long long)(rows * n);
        const float* b = bias.as<float>();
        const unsigned blocks = grid_for(total, 256);
        cudaStream_t s = run.stream.get();
        switch (st) {
        case storage::bf16:
            bias_round<__nv_bfloat16>
                <<<blocks, 256, 0, s>>>(c32.as<float>(), b, out.as<__nv_bfloat16>(), total, int(n));
            break;
        case storage::f16:
            bias_round<__half><<<blocks, 256, 0, s>>>(c32.as<float>(), b, out.as<__half>(), total, int(n));
            break;
        default:
            bias_round<float><<<blocks, 256, 0, s>>>(c32.as<float>(), b, out.as<float>(), total, int(n));
        }
        ATTN_LAUNCHED(std::string("the ") + which + " projection's bias and rounding");
    }

    void enqueue() {
        const std::size_t rq = s.batch * s.n_q, rkv = s.batch * s.n_kv, H = s.heads, G = s.kv_heads;
        linear(x_q, rq, d_model, wq, H * s.d_qk, bq, q, "Q");
        linear(x_kv, rkv, d_model, wk, G * s.d_qk, bk, kk, "K");
        linear(x_kv, rkv, d_model, wv, G * s.d_v, bv, v, "V");
        enqueue_core(k, args, run.stream.get());
        linear(attn, rq, H * s.d_v, wo, d_model, bo, y, "output");
    }
};

layer_case::layer_case(const shape& in, std::size_t d_model, storage st, kernel k, const layer_inputs& x) {
    const shape s = resolved(in);
    const std::string what = std::string(name(k)) + " " + name(st) + " layer";
    if (const std::string why = refusal(k, s, st); !why.empty()) throw error(what + " refused: " + why);
    if (k == kernel::decode)
        throw error(what + " refused: cuda-decode reads a cache; a layer uses naive, tiled or flash");
    if (d_model == 0 || d_model >= (std::size_t(1) << 31)) throw error(what + ": d_model must be in [1, 2^31)");
    try {
        props();
    } catch (const error& e) {
        throw error(what + ": " + e.what());
    }
    auto p = std::make_unique<impl>();
    p->s = s;
    p->d_model = d_model;
    p->st = st;
    p->k = k;
    p->run.what = what;
    const std::size_t B = s.batch, H = s.heads, G = s.kv_heads, dq = s.d_qk, dv = s.d_v, dm = d_model;
    p->x_q = upload(st, x.x_q, B * s.n_q * dm, "x_q of the " + what);
    p->x_kv = upload(st, x.x_kv, B * s.n_kv * dm, "x_kv of the " + what);
    p->wq = upload(st, x.wq, H * dq * dm, "Wq of the " + what);
    p->wk = upload(st, x.wk, G * dq * dm, "Wk of the " + what);
    p->wv = upload(st, x.wv, G * dv * dm, "Wv of the " + what);
    p->wo = upload(st, x.wo, dm * H * dv, "Wo of the " + what);
    // biases: rounded to the storage type like every input, kept as fp32 values for the epilogue
    auto bias = [&](const float* b, std::size_t n, const char* which) {
        if (!b) return device_memory();
        std::vector<float> r(b, b + n);
        for (float& e : r)
            e = st == storage::bf16 ? formats::round_bf16(e) : st == storage::f16 ? formats::round_f16(e) : e;
        return upload(storage::f32, r.data(), n, std::string(which) + " of the " + what);
    };
    p->bq = bias(x.bq, H * dq, "bq");
    p->bk = bias(x.bk, G * dq, "bk");
    p->bv = bias(x.bv, G * dv, "bv");
    p->bo = bias(x.bo, dm, "bo");
    const std::size_t e = element_bytes(st);
    p->q = device_memory(B * s.n_q * H * dq * e, "the projected Q of the " + what);
    p->kk = device_memory(B * s.n_kv * G * dq * e, "the projected K of the " + what);
    p->v = device_memory(B * s.n_kv * G * dv * e, "the projected V of the " + what);
    p->attn = device_memory(B * s.n_q * H * dv * e, "the attention output of the " + what);
    p->y = device_memory(B * s.n_q * dm * e, "the output of the " + what);
    const std::size_t widest = std::max({B * s.n_q * H * dq, B * s.n_kv * G * std::max(dq, dv), B * s.n_q * dm});
    p->c32 = device_memory(widest * sizeof(float), "the fp32 GEMM results of the " + what);
    if (k == kernel::naive) p->scratch = device_memory(naive_scratch_bytes(s), "the score matrix of the " + what);
    p->blas = std::make_unique<cublas_owner>(p->run.stream.get());
    p->args = make_core_args(s, st);
    p->args.q = p->q.get();
    p->args.k = p->kk.get();
    p->args.v = p->v.get();
    p->args.out = p->attn.get();
    p->args.scratch = p->scratch.as<float>();
    p->run.poison = {&p->q, &p->kk, &p->v, &p->attn, &p->y};
    impl* raw = p.get();
    p->run.enqueue = [raw] { raw->enqueue(); };
    impl_ = std::move(p);
}
layer_case::~layer_case() = default;
layer_case::layer_case(layer_case&&) noexcept = default;
layer_case& layer_case::operator=(layer_case&&) noexcept = default;
void layer_case::run() { impl_->run.run(); }
std::vector<float> layer_case::output() {
    const shape& s = impl_->s;
    return download(impl_->st, impl_->y, s.batch * s.n_q * impl_->d_model, "the output of " + impl_->run.what);
}
std::vector<double> layer_case::time_ms(int repetitions, int warmup, bool flush_l2) {
    return impl_->run.time_ms(repetitions, warmup, flush_l2);
}

} // namespace attn::cuda
