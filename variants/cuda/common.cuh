// What the CUDA sources of attn_cuda share (never included by the C++ tree): the error checks,
// the owner of a device allocation, the storage types' device side, and each kernel's launcher.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "api.hpp"

namespace attn::cuda::detail {

/// Throws attn::cuda::error "<call> failed: <CUDA's message> (<what>)".
[[noreturn]] void fail(cudaError_t e, const char* call, const std::string& what);

inline void check(cudaError_t e, const char* call, const std::string& what) {
    if (e != cudaSuccess) fail(e, call, what);
}

/// Every CUDA call: ATTN_CUDA(cudaMemcpy(...), "copying q to the device").
#define ATTN_CUDA(call, what) ::attn::cuda::detail::check((call), #call, (what))
/// After every launch: the launch's own error (bad configuration, no kernel image).
#define ATTN_LAUNCHED(what) ::attn::cuda::detail::check(cudaGetLastError(), "kernel launch", (what))

/// Owns one cudaMalloc allocation; move-only. A failed allocation throws out_of_memory naming the
/// bytes and `what`.
class device_memory {
  public:
    device_memory() = default;
    device_memory(std::size_t bytes, const std::string& what);
    ~device_memory() {
        if (p_) cudaFree(p_); // no throw from a destructor; a failure here has nowhere to go
    }
    device_memory(device_memory&& o) noexcept : p_(std::exchange(o.p_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}
    device_memory& operator=(device_memory&& o) noexcept {
        std::swap(p_, o.p_);
        std::swap(bytes_, o.bytes_);
        return *this;
    }
    device_memory(const device_memory&) = delete;
    device_memory& operator=(const device_memory&) = delete;

    void* get() const { return p_; }
    template <class T>
    T* as() const {
        return static_cast<T*>(p_);
    }
    std::size_t bytes() const { return bytes_; }

  private:
    void* p_ = nullptr;
    std::size_t bytes_ = 0;
};

/// The device's properties this library plans with; throws error (the query's reason) without one.
struct device_props {
    int sms = 0, cc_major = 0, cc_minor = 0, smem_optin = 0;
    std::size_t l2_bytes = 0;
};
const device_props& props();

/// Bytes of one element stored as `st` (the storage type's traits).
inline std::size_t element_bytes(storage st) { return attn::types::traits(st).bytes; }

/// Copies n host floats to a new device buffer, rounded to `st` (f32, bf16 or f16) on the host.
device_memory upload(storage st, const float* host, std::size_t n, const std::string& what);
/// Copies n raw bytes to a new device buffer.
device_memory upload_bytes(const void* host, std::size_t bytes, const std::string& what);
/// n elements of a device buffer stored as `st`, widened to fp32 on the host.
std::vector<float> download(storage st, const device_memory& d, std::size_t n, const std::string& what);

// The storage types' device side: loads widen to fp32, stores round to nearest even.
__device__ __forceinline__ float to_f32(float x) { return x; }
__device__ __forceinline__ float to_f32(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ __forceinline__ float to_f32(__half x) { return __half2float(x); }
template <class T>
__device__ __forceinline__ T from_f32(float x);
template <>
__device__ __forceinline__ float from_f32<float>(float x) {
    return x;
}
template <>
__device__ __forceinline__ __nv_bfloat16 from_f32<__nv_bfloat16>(float x) {
    return __float2bfloat16_rn(x);
}
template <>
__device__ __forceinline__ __half from_f32<__half>(float x) {
    return __float2half_rn(x);
}

/// log2(e): the kernels take exp(x) as exp2(x log2 e), folding log2 e into the softmax scale.
inline constexpr float log2e = 1.4426950408889634f;

/// One attention core's device arguments (layouts as api.hpp says; "interleaved heads").
struct core_args {
    const void* q = nullptr;
    const void* k = nullptr;
    const void* v = nullptr;
    void* out = nullptr;
    float* scratch = nullptr; ///< cuda-naive's scores [B, H, n_q, n_kv]
    int batch = 0, heads = 0, kv_heads = 0, n_q = 0, n_kv = 0, d_qk = 0, d_v = 0;
    bool causal = false;
    int window = 0; ///< sliding window (causal only); 0: none, also when the window hides no key (>= n_kv)
    float scale = 0;
    storage st = storage::f32;
    core_options options; ///< cuda-flash / cuda-hopper: the tile candidate, hopper's grid
};

core_args make_core_args(const shape& resolved_shape, storage st);

std::size_t naive_scratch_bytes(const shape& s);
void launch_naive(const core_args& a, cudaStream_t stream);
void launch_tiled(const core_args& a, cudaStream_t stream);
void launch_flash(const core_args& a, cudaStream_t stream);
void launch_hopper(const core_args& a, cudaStream_t stream);

// cuda-decode's plan, arguments and launch: decode.cuh.

} // namespace attn::cuda::detail
