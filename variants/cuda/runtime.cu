// The CUDA backend's host side that every case shares: errors, device buffers, the host's
// rounding on upload and widening on download, the device's properties, the runner (poisoned
// outputs, the L2 left clean, CUDA-event timing) and the core kernels' dispatch. The three case
// classes of api.hpp live in core_case.cu, decode_case.cu and layer_case.cu; the ceilings in peak.cu.
// Every CUDA and cuBLAS call's status is checked, and the last error after every launch; a failure
// throws attn::cuda::error in one line.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "formats.hpp"
#include "host.cuh"

namespace attn::cuda::detail {

[[noreturn]] void fail(cudaError_t e, const char* call, const std::string& what) {
    (void)cudaGetLastError(); // a non-sticky error would otherwise be reported again by the next check
    std::string fn(call);     // "detail::cublas().gemm_ex(...)": "cuBLAS gemm_ex"
    if (const auto member = fn.find(")."); member != std::string::npos) fn = "cuBLAS " + fn.substr(member + 2);
    fn = fn.substr(0, fn.find('('));
    throw error(fn + " failed: " + cudaGetErrorString(e) + " (" + what + ")");
}

void check_cublas(cublasStatus_t s, const char* call, const std::string& what) {
    if (s == CUBLAS_STATUS_SUCCESS) return;
    std::string fn(call); // "detail::cublas().gemm_ex(...)": "cuBLAS gemm_ex"
    if (const auto member = fn.find(")."); member != std::string::npos) fn = "cuBLAS " + fn.substr(member + 2);
    fn = fn.substr(0, fn.find('('));
    throw error(fn + " failed: " + cublas().status_string(s) + " (" + what + ")");
}

std::string gigabytes(std::size_t bytes) {
    char b[32];
    std::snprintf(b, sizeof b, "%.3g GB", double(bytes) * 1e-9);
    return b;
}

unsigned grid_for(long long n, int block) {
    const long long want = (n + block - 1) / block, most = 8LL * props().sms * 2048 / block;
    return unsigned(std::max<long long>(1, std::min(want, most)));
}

namespace {

/// Reads a buffer of 16-byte vectors (the flush's second pass); the sum goes nowhere the
/// compiler can prove unused: a thread whose sum is a sentinel no input makes writes it.
__global__ void read_through(const uint4* __restrict__ x, long long n, unsigned* never) {
    unsigned acc = 0;
    for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < n;
         e += (long long)gridDim.x * blockDim.x) {
        const uint4 a = x[e];
        acc ^= a.x ^ a.y ^ a.z ^ a.w;
    }
    if (acc == 0x9e3779b9u && never) *never = acc;
}

} // namespace

void flush_l2(const device_memory& buffer, int pass, cudaStream_t s) {
    ATTN_CUDA(cudaMemsetAsync(buffer.get(), pass & 0xff, buffer.bytes(), s), "flushing the L2 (writing)");
    const long long vectors = (long long)(buffer.bytes() / 16);
    read_through<<<grid_for(vectors, 256), 256, 0, s>>>(buffer.as<uint4>(), vectors, nullptr);
    ATTN_LAUNCHED("flushing the L2 (reading)");
}

void runner::run() {
    for (const device_memory* m : poison)
        ATTN_CUDA(cudaMemsetAsync(m->get(), 0xff, m->bytes(), stream.get()), "poisoning the buffers of " + what);
    enqueue();
    ATTN_CUDA(cudaStreamSynchronize(stream.get()), "running " + what);
}

std::vector<double> runner::time_ms(int repetitions, int warmup, bool flush_l2_first) {
    if (repetitions < 1) throw error("time_ms needs repetitions >= 1 (got " + std::to_string(repetitions) + ")");
    if (flush_l2_first && !flush.get())
        flush = device_memory(std::max<std::size_t>(2 * props().l2_bytes, 1 << 20) / 16 * 16, "the L2 flush buffer");
    for (int w = 0; w < warmup; ++w) enqueue();
    ATTN_CUDA(cudaStreamSynchronize(stream.get()), "warming up " + what);
    event_owner start, stop;
    std::vector<double> ms;
    for (int r = 0; r < repetitions; ++r) {
        if (flush_l2_first) flush_l2(flush, r, stream.get());
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
        r.cc_minor = d.cc_minor;
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
    a.window = s.window >= s.n_kv ? 0 : int(s.window);
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
    case kernel::hopper:
        return launch_hopper(a, s);
    case kernel::decode:
        break;
    }
    throw error("cuda-decode runs through decode_case (it reads a [B, G, capacity, d] cache)");
}

} // namespace attn::cuda::detail
