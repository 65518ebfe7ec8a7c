// The CUDA backend's host side: the device query, errors, device buffers and the host's rounding
// on upload, the L2 flush and CUDA-event timing every case shares, the three case classes of
// api.hpp (core, decode, layer: cuBLAS projections around a core kernel) and the peak probes
// (cuBLAS bf16 GEMM, a read-only kernel, a device-to-device copy).
// Every CUDA and cuBLAS call's status is checked, and the last error after every launch; a failure
// throws attn::cuda::error in one line. Status: not yet run on a GPU.
#include <cublas_v2.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common.cuh"
#include "formats.hpp"

namespace attn::cuda {
namespace detail {

[[noreturn]] void fail(cudaError_t e, const char* call, const std::string& what) {
    (void)cudaGetLastError(); // a non-sticky error would otherwise be reported again by the next check
    std::string fn(call);
    fn = fn.substr(0, fn.find('('));
    throw error(fn + " failed: " + cudaGetErrorString(e) + " (" + what + ")");
}

namespace {

void check_cublas(cublasStatus_t s, const char* call, const std::string& what) {
    if (s == CUBLAS_STATUS_SUCCESS) return;
    std::string fn(call);
    fn = fn.substr(0, fn.find('('));
    throw error(fn + " failed: " + cublasGetStatusString(s) + " (" + what + ")");
}
#define ATTN_CUBLAS(call, what) check_cublas((call), #call, (what))

std::string gigabytes(std::size_t bytes) {
    char b[32];
    std::snprintf(b, sizeof b, "%.3g GB", double(bytes) * 1e-9);
    return b;
}

/// A stream of the case's own (non-blocking: no implicit order with the legacy default stream).
class stream_owner {
  public:
    stream_owner() { ATTN_CUDA(cudaStreamCreateWithFlags(&s_, cudaStreamNonBlocking), "a case's stream"); }
    ~stream_owner() { cudaStreamDestroy(s_); }
    stream_owner(const stream_owner&) = delete;
    stream_owner& operator=(const stream_owner&) = delete;
    cudaStream_t get() const { return s_; }

  private:
    cudaStream_t s_ = nullptr;
};

class event_owner {
  public:
    event_owner() { ATTN_CUDA(cudaEventCreate(&e_), "a timing event"); }
    ~event_owner() { cudaEventDestroy(e_); }
    event_owner(const event_owner&) = delete;
    event_owner& operator=(const event_owner&) = delete;
    cudaEvent_t get() const { return e_; }

  private:
    cudaEvent_t e_ = nullptr;
};

class cublas_owner {
  public:
    explicit cublas_owner(cudaStream_t s) {
        ATTN_CUBLAS(cublasCreate(&h_), "a cuBLAS handle");
        ATTN_CUBLAS(cublasSetStream(h_, s), "binding cuBLAS to the case's stream");
    }
    ~cublas_owner() { cublasDestroy(h_); }
    cublas_owner(const cublas_owner&) = delete;
    cublas_owner& operator=(const cublas_owner&) = delete;
    cublasHandle_t get() const { return h_; }

  private:
    cublasHandle_t h_ = nullptr;
};

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

/// What every case shares: its stream, the poisoning of its output before a run, and the timing.
struct runner {
    stream_owner stream;
    device_memory flush;
    std::function<void()> enqueue;            ///< the case's launches, on `stream`
    std::vector<const device_memory*> poison; ///< the output, and a layer's intermediates
    std::string what;

    void run() {
        // NaN in every format (0xffff, 0xffffffff): an element no kernel writes fails a check
        for (const device_memory* m : poison)
            ATTN_CUDA(cudaMemsetAsync(m->get(), 0xff, m->bytes(), stream.get()), "poisoning the buffers of " + what);
        enqueue();
        ATTN_CUDA(cudaStreamSynchronize(stream.get()), "running " + what);
    }

    /// Event-timed calls; with flush_l2, a buffer of twice the L2 is written before each, outside the events.
    std::vector<double> time_ms(int repetitions, int warmup, bool flush_l2) {
        if (repetitions < 1) throw error("time_ms needs repetitions >= 1 (got " + std::to_string(repetitions) + ")");
        if (flush_l2 && !flush.get())
            flush = device_memory(std::max<std::size_t>(2 * props().l2_bytes, 1 << 20), "the L2 flush buffer");
        for (int w = 0; w < warmup; ++w) enqueue();
        ATTN_CUDA(cudaStreamSynchronize(stream.get()), "warming up " + what);
        event_owner start, stop;
        std::vector<double> ms;
        for (int r = 0; r < repetitions; ++r) {
            if (flush_l2)
                ATTN_CUDA(cudaMemsetAsync(flush.get(), r & 0xff, flush.bytes(), stream.get()), "flushing the L2");
            ATTN_CUDA(cudaEventRecord(start.get(), stream.get()), "timing " + what);
            enqueue();
            ATTN_CUDA(cudaEventRecord(stop.get(), stream.get()), "timing " + what);
            ATTN_CUDA(cudaEventSynchronize(stop.get()), "running " + what);
            float t = 0;
            ATTN_CUDA(cudaEventElapsedTime(&t, start.get(), stop.get()), "timing " + what);
            ms.push_back(double(t));
        }
        return ms;
    }
};

void require(bool ok, const std::string& message) {
    if (!ok) throw error(message);
}

/// GEMM scratch -> stored result: out[r, c] = round(c32[r, c] + bias[c]) in the storage type.
template <class T>
__global__ void bias_round(const float* __restrict__ c32, const float* __restrict__ bias, T* __restrict__ out,
                           long long n, int cols) {
    for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < n; e += (long long)gridDim.x * blockDim.x)
        out[e] = from_f32<T>(c32[e] + (bias ? bias[e % cols] : 0.0f));
}

/// Uniform values in [-1, 1) from a counter hash: the peak probes never run on zeros.
__device__ __forceinline__ float hash_uniform(unsigned long long i, unsigned long long seed) {
    unsigned long long z = (i + 1) * 0x9e3779b97f4a7c15ull + seed;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return float(z >> 40) * (2.0f / 16777216.0f) - 1.0f;
}

__global__ void fill_bf16(__nv_bfloat16* x, long long n, unsigned long long seed) {
    for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < n; e += (long long)gridDim.x * blockDim.x)
        x[e] = __float2bfloat16_rn(hash_uniform(e, seed));
}

__global__ void fill_f32(float* x, long long n, unsigned long long seed) {
    for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < n; e += (long long)gridDim.x * blockDim.x)
        x[e] = hash_uniform(e, seed);
}

/// Reads n 16-byte vectors: each thread sums its grid-stride slice (4 loads in flight a trip), one
/// atomic per block, so no load can be dropped.
__global__ void read_probe(const uint4* __restrict__ x, long long n, unsigned* sink) {
    unsigned acc = 0;
    const long long stride = (long long)gridDim.x * blockDim.x;
    long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    for (; e + 3 * stride < n; e += 4 * stride) {
        const uint4 a = x[e], b = x[e + stride], c = x[e + 2 * stride], d = x[e + 3 * stride];
        acc += a.x + a.y + a.z + a.w + b.x + b.y + b.z + b.w + c.x + c.y + c.z + c.w + d.x + d.y + d.z + d.w;
    }
    for (; e < n; e += stride) {
        const uint4 a = x[e];
        acc += a.x + a.y + a.z + a.w;
    }
    for (int o = 16; o > 0; o /= 2) acc += __shfl_xor_sync(0xffffffffu, acc, o);
    __shared__ unsigned warp_sums[32];
    if (threadIdx.x % 32 == 0) warp_sums[threadIdx.x / 32] = acc;
    __syncthreads();
    if (threadIdx.x == 0) {
        unsigned s = 0;
        for (unsigned w = 0; w < blockDim.x / 32; ++w) s += warp_sums[w];
        atomicAdd(sink, s);
    }
}

unsigned grid_for(long long n, int block) {
    const long long want = (n + block - 1) / block, most = 8LL * props().sms * 2048 / block;
    return unsigned(std::max<long long>(1, std::min(want, most)));
}

} // namespace

device_memory::device_memory(std::size_t bytes, const std::string& what) : bytes_(bytes) {
    if (bytes == 0) return;
    const cudaError_t e = cudaMalloc(&p_, bytes);
    if (e == cudaSuccess) return;
    p_ = nullptr;
    if (e == cudaErrorMemoryAllocation) {
        (void)cudaGetLastError();
        throw out_of_memory("cannot allocate " + gigabytes(bytes) + " on the GPU for " + what +
                            " (cudaMalloc: out of memory)");
    }
    fail(e, "cudaMalloc", gigabytes(bytes) + " for " + what);
}

const device_props& props() {
    static const device_props p = [] {
        const device_info d = query();
        if (!d.present) throw error(d.reason);
        device_props r;
        r.sms = d.sms;
        r.cc_major = d.cc_major;
        r.l2_bytes = d.l2_bytes;
        ATTN_CUDA(cudaDeviceGetAttribute(&r.smem_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, 0),
                  "reading the shared memory limit of device 0");
        return r;
    }();
    return p;
}

device_memory upload_bytes(const void* host, std::size_t bytes, const std::string& what) {
    require(host != nullptr, "null host pointer for " + what);
    device_memory d(bytes, what);
    ATTN_CUDA(cudaMemcpy(d.get(), host, bytes, cudaMemcpyHostToDevice), "copying " + what + " to the device");
    return d;
}

device_memory upload(storage st, const float* host, std::size_t n, const std::string& what) {
    require(host != nullptr, "null host pointer for " + what);
    if (st == storage::f32) return upload_bytes(host, n * sizeof(float), what);
    std::vector<std::uint16_t> h(n);
    for (std::size_t i = 0; i < n; ++i)
        h[i] = st == storage::bf16 ? formats::to_bf16(host[i]) : formats::to_f16(host[i]);
    return upload_bytes(h.data(), n * 2, what);
}

std::vector<float> download(storage st, const device_memory& d, std::size_t n, const std::string& what) {
    std::vector<float> out(n);
    if (st == storage::f32) {
        ATTN_CUDA(cudaMemcpy(out.data(), d.get(), n * sizeof(float), cudaMemcpyDeviceToHost), "copying " + what);
        return out;
    }
    std::vector<std::uint16_t> h(n);
    ATTN_CUDA(cudaMemcpy(h.data(), d.get(), n * 2, cudaMemcpyDeviceToHost), "copying " + what);
    for (std::size_t i = 0; i < n; ++i)
        out[i] = st == storage::bf16 ? formats::from_bf16(h[i]) : formats::from_f16(h[i]);
    return out;
}

core_args make_core_args(const shape& s, storage st) {
    core_args a;
    a.batch = int(s.batch);
    a.heads = int(s.heads);
    a.kv_heads = int(s.kv_heads);
    a.n_q = int(s.n_q);
    a.n_kv = int(s.n_kv);
    a.d_qk = int(s.d_qk);
    a.d_v = int(s.d_v);
    a.causal = s.causal;
    a.scale = float(s.scale);
    a.st = st;
    return a;
}

void enqueue_core(kernel k, const core_args& a, cudaStream_t s) {
    switch (k) {
    case kernel::naive:
        return launch_naive(a, s);
    case kernel::tiled:
        return launch_tiled(a, s);
    case kernel::flash:
        return launch_flash(a, s);
    case kernel::decode:
        break;
    }
    throw error("cuda-decode runs through decode_case (it reads a [B, G, capacity, d] cache)");
}

} // namespace detail

using namespace detail;


// ---- core_case ----

struct core_case::impl {
    kernel k;
    shape s;
    storage st;
    runner run;
    device_memory q, kk, v, out, scratch;
    core_args args;
};

core_case::core_case(kernel k, const shape& in, storage st, const float* q, const float* k_in, const float* v) {
    const shape s = resolved(in);
    const std::string what = std::string(name(k)) + " " + name(st) + " core";
    if (const std::string why = refusal(k, s, st); !why.empty()) throw error(what + " refused: " + why);
    if (k == kernel::decode) throw error(what + " refused: cuda-decode runs through decode_case");
    try {
        props();
    } catch (const error& e) {
        throw error(what + ": " + e.what());
    }
    auto p = std::make_unique<impl>();
    p->k = k;
    p->s = s;
    p->st = st;
    p->q = upload(st, q, s.batch * s.n_q * s.heads * s.d_qk, "q of the " + what);
    p->kk = upload(st, k_in, s.batch * s.n_kv * s.kv_heads * s.d_qk, "k of the " + what);
    p->v = upload(st, v, s.batch * s.n_kv * s.kv_heads * s.d_v, "v of the " + what);
    p->out = device_memory(s.batch * s.n_q * s.heads * s.d_v * element_bytes(st), "the output of the " + what);
    if (k == kernel::naive) p->scratch = device_memory(naive_scratch_bytes(s), "the score matrix of the " + what);
    p->args = make_core_args(s, st);
    p->args.q = p->q.get();
    p->args.k = p->kk.get();
    p->args.v = p->v.get();
    p->args.out = p->out.get();
    p->args.scratch = p->scratch.as<float>();
    p->run.poison = {&p->out};
    p->run.what = what;
    impl* raw = p.get();
    p->run.enqueue = [raw] { enqueue_core(raw->k, raw->args, raw->run.stream.get()); };
    impl_ = std::move(p);
}
core_case::~core_case() = default;
core_case::core_case(core_case&&) noexcept = default;
core_case& core_case::operator=(core_case&&) noexcept = default;
void core_case::run() { impl_->run.run(); }
std::vector<float> core_case::output() {
    const shape& s = impl_->s;
    return download(impl_->st, impl_->out, s.batch * s.n_q * s.heads * s.d_v, "the output of " + impl_->run.what);
}
std::vector<double> core_case::time_ms(int repetitions, int warmup, bool flush_l2) {
    return impl_->run.time_ms(repetitions, warmup, flush_l2);
}

// ---- decode_case ----

struct decode_case::impl {
    shape s;
    storage st;
    runner run;
    device_memory q, k, v, ks, vs, out, part_acc, part_ml;
    decode_args args;
};

decode_case::decode_case(const shape& in, storage st, const float* q, const void* k_cache, const void* v_cache,
                         const float* k_scales, const float* v_scales, std::size_t capacity) {
    const shape s = resolved(in);
    const std::string what = std::string("cuda-decode step over a ") + name(st) + " cache";
    if (const std::string why = refusal(kernel::decode, s, st); !why.empty()) throw error(what + " refused: " + why);
    if (capacity < s.n_kv || capacity >= (std::size_t(1) << 31))
        throw error(what + ": capacity " + std::to_string(capacity) + " must hold n_kv = " + std::to_string(s.n_kv) +
                    " rows and be below 2^31");
    if (st == storage::int8 && (!k_scales || !v_scales))
        throw error(what + ": an int8 cache needs k_scales and v_scales");
    try {
        props();
    } catch (const error& e) {
        throw error(what + ": " + e.what());
    }
    auto p = std::make_unique<impl>();
    p->s = s;
    p->st = st;
    const std::size_t d = s.d_qk, rows = s.batch * s.kv_heads * capacity;
    p->q = upload(storage::f32, q, s.batch * s.heads * d, "q of the " + what);
    p->k = upload_bytes(k_cache, rows * d * element_bytes(st), "the K cache of the " + what);
    p->v = upload_bytes(v_cache, rows * d * element_bytes(st), "the V cache of the " + what);
    if (st == storage::int8) {
        p->ks = upload_bytes(k_scales, rows * sizeof(float), "the K scales of the " + what);
        p->vs = upload_bytes(v_scales, rows * sizeof(float), "the V scales of the " + what);
    }
    decode_args& a = p->args;
    a.plan = plan_decode(s, st);
    p->out = device_memory(s.batch * s.heads * d * sizeof(float), "the output of the " + what);
    p->part_acc = device_memory(s.batch * s.heads * std::size_t(a.plan.chunks) * d * sizeof(float),
                                "the partial outputs of the " + what);
    p->part_ml = device_memory(s.batch * s.heads * std::size_t(a.plan.chunks) * 2 * sizeof(float),
                               "the partial maxima and sums of the " + what);
    a.q = p->q.as<float>();
    a.k = p->k.get();
    a.v = p->v.get();
    a.k_scales = p->ks.as<float>();
    a.v_scales = p->vs.as<float>();
    a.out = p->out.as<float>();
    a.part_acc = p->part_acc.as<float>();
    a.part_ml = p->part_ml.as<float>();
    a.batch = int(s.batch);
    a.heads = int(s.heads);
    a.kv_heads = int(s.kv_heads);
    a.n_kv = int(s.n_kv);
    a.d = int(d);
    a.capacity = int(capacity);
    a.scale = float(s.scale);
    a.st = st;
    p->run.poison = {&p->out, &p->part_acc, &p->part_ml};
    p->run.what = what;
    impl* raw = p.get();
    p->run.enqueue = [raw] { launch_decode(raw->args, raw->run.stream.get()); };
    impl_ = std::move(p);
}
decode_case::~decode_case() = default;
decode_case::decode_case(decode_case&&) noexcept = default;
decode_case& decode_case::operator=(decode_case&&) noexcept = default;
void decode_case::run() { impl_->run.run(); }
std::vector<float> decode_case::output() {
    const shape& s = impl_->s;
    return download(storage::f32, impl_->out, s.batch * s.heads * s.d_qk, "the output of " + impl_->run.what);
}
std::vector<double> decode_case::time_ms(int repetitions, int warmup, bool flush_l2) {
    return impl_->run.time_ms(repetitions, warmup, flush_l2);
}
std::size_t decode_case::chunks() const { return std::size_t(impl_->args.plan.chunks); }

// ---- layer_case ----

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
        ATTN_CUBLAS(cublasGemmEx(blas->get(), CUBLAS_OP_T, CUBLAS_OP_N, int(n), int(rows), int(kdim), &one, w.get(), t,
                                 int(kdim), x.get(), t, int(kdim), &zero, c32.get(), CUDA_R_32F, int(n),
                                 CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
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

// ---- peak ----

peak measure_peak(int repetitions) {
    try {
        props();
    } catch (const error& e) {
        throw error(std::string("measure_peak: ") + e.what());
    }
    require(repetitions >= 1, "measure_peak needs repetitions >= 1");
    peak out;
    runner r;
    r.what = "the peak probes";

    // tensor cores: n^3 bf16 GEMM, fp32 accumulation, random operands
    const std::size_t n = 8192;
    out.gemm_n = n;
    {
        device_memory a(n * n * 2, "the GEMM probe's A"), b(n * n * 2, "the GEMM probe's B"), c(n * n * 2, "its C");
        fill_bf16<<<grid_for((long long)(n * n), 256), 256, 0, r.stream.get()>>>(a.as<__nv_bfloat16>(),
                                                                                 (long long)(n * n), 1);
        ATTN_LAUNCHED("filling the GEMM probe's A");
        fill_bf16<<<grid_for((long long)(n * n), 256), 256, 0, r.stream.get()>>>(b.as<__nv_bfloat16>(),
                                                                                 (long long)(n * n), 2);
        ATTN_LAUNCHED("filling the GEMM probe's B");
        cublas_owner h(r.stream.get());
        const float one = 1.0f, zero = 0.0f;
        r.what = "the bf16 GEMM probe";
        r.enqueue = [&] {
            ATTN_CUBLAS(cublasGemmEx(h.get(), CUBLAS_OP_N, CUBLAS_OP_N, int(n), int(n), int(n), &one, a.get(),
                                     CUDA_R_16BF, int(n), b.get(), CUDA_R_16BF, int(n), &zero, c.get(), CUDA_R_16BF,
                                     int(n), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                        "the bf16 GEMM probe");
        };
        for (double ms : r.time_ms(repetitions, 3, false))
            out.tensor_samples.push_back(2.0 * n * n * n / (ms * 1e-3) * 1e-12);
        out.tensor_tflops = median(out.tensor_samples);
    }

    // memory: an array of at least 8 x L2 (so no pass is served from the cache), read, then copied
    const std::size_t bytes = std::max<std::size_t>(8 * props().l2_bytes, std::size_t(256) << 20) / 16 * 16;
    out.read_bytes = bytes;
    {
        device_memory x(bytes, "the bandwidth probe's array"), y(bytes, "the copy probe's destination");
        device_memory sink(sizeof(unsigned), "the read probe's sum");
        fill_f32<<<grid_for((long long)(bytes / 4), 256), 256, 0, r.stream.get()>>>(x.as<float>(),
                                                                                    (long long)(bytes / 4), 3);
        ATTN_LAUNCHED("filling the bandwidth probe's array");
        const long long vectors = (long long)(bytes / 16);
        r.what = "the read probe";
        r.enqueue = [&] {
            read_probe<<<unsigned(props().sms * 8), 256, 0, r.stream.get()>>>(x.as<uint4>(), vectors,
                                                                              sink.as<unsigned>());
            ATTN_LAUNCHED("the read probe");
        };
        for (double ms : r.time_ms(repetitions, 3, false))
            out.read_samples.push_back(double(bytes) / (ms * 1e-3) * 1e-9);
        out.read_gbs = median(out.read_samples);
        r.what = "the copy probe";
        r.enqueue = [&] {
            ATTN_CUDA(cudaMemcpyAsync(y.get(), x.get(), bytes, cudaMemcpyDeviceToDevice, r.stream.get()),
                      "the copy probe");
        };
        for (double ms : r.time_ms(repetitions, 3, false))
            out.copy_samples.push_back(2.0 * double(bytes) / (ms * 1e-3) * 1e-9);
        out.copy_gbs = median(out.copy_samples);
    }
    return out;
}

} // namespace attn::cuda
