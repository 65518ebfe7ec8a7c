// measure_peak (api.hpp): the device's ceilings, what every GPU % of peak is held to.
//  - Tensor rate: cuBLAS bf16 and f16 GEMMs of n^3 (fp32 accumulation, random operands), 2 n^3
//    FLOP per call.
//  - Read bandwidth: a read-only kernel over an array far beyond the L2 (at least 32 x L2, 2 GiB
//    or more where the memory allows: 400 MB read in ~130 us left the launch and the last wave's
//    tail inside ~3 % of the time), in a few shapes (loads in flight per thread, a grid-stride
//    walk or one contiguous slice a block); the ceiling is the best shape's median, every shape's
//    median recorded beside it. The issue that asked for it measured torch.sum over 4 GiB of
//    bf16 at 3,051 GB/s where the single grid-stride shape over 400 MB read 2,938.
//  - Copy: cudaMemcpy device to device of the same array, bytes read + written per second.
// Before each timed call the runner leaves the L2 clean (runtime.cu's flush_l2) except for the
// GEMMs, whose operands are meant to be resident.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "host.cuh"

namespace attn::cuda {
namespace detail {
namespace {

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

/// Uniform values in [-1, 1) from a counter hash: the probes never run on zeros.
__device__ __forceinline__ float hash_uniform(unsigned long long i, unsigned long long seed) {
    unsigned long long z = (i + 1) * 0x9e3779b97f4a7c15ull + seed;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return float(z >> 40) * (2.0f / 16777216.0f) - 1.0f;
}

template <class T>
__global__ void fill_random(T* x, long long n, unsigned long long seed) {
    for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < n; e += (long long)gridDim.x * blockDim.x)
        x[e] = T(hash_uniform(e, seed));
}

/// One 16-byte load that bypasses L1 (each byte is read once).
__device__ __forceinline__ uint4 load_stream(const uint4* p) {
    uint4 r;
    asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
                 : "l"(p));
    return r;
}

/// Folds the sums of a block into one atomic, so no load can be dropped.
__device__ __forceinline__ void block_sum(unsigned acc, unsigned* sink) {
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

/// Grid-stride: each thread keeps U 16-byte loads in flight a trip.
template <int U>
__global__ void read_strided(const uint4* __restrict__ x, long long n, unsigned* sink) {
    unsigned acc = 0;
    const long long stride = (long long)gridDim.x * blockDim.x;
    long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    for (; e + (U - 1) * stride < n; e += U * stride) {
        uint4 v[U];
#pragma unroll
        for (int u = 0; u < U; ++u) v[u] = load_stream(x + e + u * stride);
#pragma unroll
        for (int u = 0; u < U; ++u) acc += v[u].x + v[u].y + v[u].z + v[u].w;
    }
    for (; e < n; e += stride) {
        const uint4 a = load_stream(x + e);
        acc += a.x + a.y + a.z + a.w;
    }
    block_sum(acc, sink);
}

/// One contiguous slice a block, U loads in flight a thread (DRAM pages opened in order).
template <int U>
__global__ void read_sliced(const uint4* __restrict__ x, long long n, unsigned* sink) {
    const long long per = (n + gridDim.x - 1) / gridDim.x;
    const long long begin = blockIdx.x * per, end = begin + per < n ? begin + per : n;
    unsigned acc = 0;
    long long e = begin + threadIdx.x;
    const long long step = blockDim.x;
    for (; e + (U - 1) * step < end; e += U * step) {
        uint4 v[U];
#pragma unroll
        for (int u = 0; u < U; ++u) v[u] = load_stream(x + e + u * step);
#pragma unroll
        for (int u = 0; u < U; ++u) acc += v[u].x + v[u].y + v[u].z + v[u].w;
    }
    for (; e < end; e += step) {
        const uint4 a = load_stream(x + e);
        acc += a.x + a.y + a.z + a.w;
    }
    block_sum(acc, sink);
}

struct read_shape {
    const char* name;
    void (*kernel)(const uint4*, long long, unsigned*);
    int blocks_per_sm;
};

const read_shape read_shapes[] = {
    {"grid-stride, 4 loads in flight a thread, 8 blocks of 256 an SM", read_strided<4>, 8},
    {"grid-stride, 8 loads in flight a thread, 8 blocks of 256 an SM", read_strided<8>, 8},
    {"grid-stride, 8 loads in flight a thread, 4 blocks of 256 an SM", read_strided<8>, 4},
    {"a slice a block, 8 loads in flight a thread, 8 blocks of 256 an SM", read_sliced<8>, 8},
    {"a slice a block, 4 loads in flight a thread, 32 blocks of 256 per SM in waves", read_sliced<4>, 32},
};

/// n^3 GEMM of type t (bf16 or f16) on random operands: its TFLOP/s per repetition.
std::vector<double> gemm_rate(runner& r, std::size_t n, cudaDataType_t t, int repetitions) {
    device_memory a(n * n * 2, "the GEMM probe's A"), b(n * n * 2, "the GEMM probe's B"), c(n * n * 2, "its C");
    const long long elems = (long long)(n * n);
    if (t == CUDA_R_16BF) {
        fill_random<<<grid_for(elems, 256), 256, 0, r.stream.get()>>>(a.as<__nv_bfloat16>(), elems, 1);
        fill_random<<<grid_for(elems, 256), 256, 0, r.stream.get()>>>(b.as<__nv_bfloat16>(), elems, 2);
    } else {
        fill_random<<<grid_for(elems, 256), 256, 0, r.stream.get()>>>(a.as<__half>(), elems, 1);
        fill_random<<<grid_for(elems, 256), 256, 0, r.stream.get()>>>(b.as<__half>(), elems, 2);
    }
    ATTN_LAUNCHED("filling the GEMM probe's operands");
    cublas_owner h(r.stream.get());
    const float one = 1.0f, zero = 0.0f;
    r.what = t == CUDA_R_16BF ? "the bf16 GEMM probe" : "the f16 GEMM probe";
    r.enqueue = [&] {
        ATTN_CUBLAS(detail::cublas().gemm_ex(h.get(), CUBLAS_OP_N, CUBLAS_OP_N, int(n), int(n), int(n), &one, a.get(),
                                             t, int(n), b.get(), t, int(n), &zero, c.get(), t, int(n),
                                             CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                    r.what);
    };
    std::vector<double> out;
    for (double ms : r.time_ms(repetitions, 3, false)) out.push_back(2.0 * double(n) * n * n / (ms * 1e-3) * 1e-12);
    return out;
}

} // namespace
} // namespace detail

using namespace detail;

peak measure_peak(int repetitions) {
    try {
        props();
    } catch (const error& e) {
        throw error(std::string("measure_peak: ") + e.what());
    }
    require(repetitions >= 1, "measure_peak needs repetitions >= 1");
    peak out;
    runner r;

    const std::size_t n = 8192;
    out.gemm_n = n;
    out.tensor_samples = gemm_rate(r, n, CUDA_R_16BF, repetitions);
    out.tensor_tflops = median(out.tensor_samples);
    out.f16_samples = gemm_rate(r, n, CUDA_R_16F, repetitions);
    out.f16_tflops = median(out.f16_samples);

    // memory: an array of at least 32 x L2 and 2 GiB, at most a quarter of the free memory
    std::size_t free_b = 0, total_b = 0;
    ATTN_CUDA(cudaMemGetInfo(&free_b, &total_b), "reading the free device memory");
    const std::size_t want = std::max<std::size_t>(32 * props().l2_bytes, std::size_t(2) << 30);
    const std::size_t bytes = std::max<std::size_t>(std::min(want, free_b / 4), std::size_t(64) << 20) / 4096 * 4096;
    out.read_bytes = bytes;
    device_memory x(bytes, "the bandwidth probe's array"), y(bytes, "the copy probe's destination");
    device_memory sink(sizeof(unsigned), "the read probe's sum");
    fill_random<<<grid_for((long long)(bytes / 4), 256), 256, 0, r.stream.get()>>>(x.as<float>(),
                                                                                   (long long)(bytes / 4), 3);
    ATTN_LAUNCHED("filling the bandwidth probe's array");
    const long long vectors = (long long)(bytes / 16);
    for (const read_shape& rs : read_shapes) {
        r.what = std::string("the read probe (") + rs.name + ")";
        r.enqueue = [&] {
            rs.kernel<<<unsigned(props().sms * rs.blocks_per_sm), 256, 0, r.stream.get()>>>(x.as<uint4>(), vectors,
                                                                                            sink.as<unsigned>());
            ATTN_LAUNCHED(r.what);
        };
        std::vector<double> gbs;
        for (double ms : r.time_ms(repetitions, 3, true)) gbs.push_back(double(bytes) / (ms * 1e-3) * 1e-9);
        const double m = median(gbs);
        out.read_candidates.push_back({rs.name, m});
        if (m > out.read_gbs) {
            out.read_gbs = m;
            out.read_samples = gbs;
            out.read_kernel = rs.name;
        }
    }
    r.what = "the copy probe";
    r.enqueue = [&] {
        ATTN_CUDA(cudaMemcpyAsync(y.get(), x.get(), bytes, cudaMemcpyDeviceToDevice, r.stream.get()), "the copy probe");
    };
    for (double ms : r.time_ms(repetitions, 3, true))
        out.copy_samples.push_back(2.0 * double(bytes) / (ms * 1e-3) * 1e-9);
    out.copy_gbs = median(out.copy_samples);
    return out;
}

} // namespace attn::cuda
