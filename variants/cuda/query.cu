// built_with_cuda() and query(): the CUDA runtime alone (no cuBLAS, no kernel), so a tool that
// only asks whether there is a GPU (attnbench list) links attn_cuda_query and not the kernels.
#include <cuda_runtime.h>

#include <exception>
#include <string>

#include "api.hpp"

namespace attn::cuda {

bool built_with_cuda() { return true; }

device_info query() {
    device_info d;
    try {
        int n = 0;
        cudaError_t e = cudaGetDeviceCount(&n);
        if (e != cudaSuccess) {
            (void)cudaGetLastError();
            d.reason = std::string("no CUDA device: cudaGetDeviceCount: ") + cudaGetErrorString(e);
            return d;
        }
        if (n == 0) {
            d.reason = "no CUDA device: cudaGetDeviceCount found none";
            return d;
        }
        cudaDeviceProp p{};
        if ((e = cudaGetDeviceProperties(&p, 0)) != cudaSuccess) {
            (void)cudaGetLastError();
            d.reason = std::string("no usable CUDA device: cudaGetDeviceProperties: ") + cudaGetErrorString(e);
            return d;
        }
        d.name = p.name;
        d.sms = p.multiProcessorCount;
        d.cc_major = p.major;
        d.cc_minor = p.minor;
        d.l2_bytes = std::size_t(p.l2CacheSize);
        d.global_bytes = p.totalGlobalMem;
        cudaDeviceGetAttribute(&d.clock_khz, cudaDevAttrClockRate, 0);
        cudaDeviceGetAttribute(&d.memory_clock_khz, cudaDevAttrMemoryClockRate, 0);
        cudaDeviceGetAttribute(&d.memory_bus_bits, cudaDevAttrGlobalMemoryBusWidth, 0);
        (void)cudaGetLastError(); // an attribute this driver lacks leaves 0, not an error for later checks
        cudaDriverGetVersion(&d.driver_version);
        cudaRuntimeGetVersion(&d.runtime_version);
        std::size_t free_b = 0, total_b = 0;
        if ((e = cudaMemGetInfo(&free_b, &total_b)) != cudaSuccess) {
            (void)cudaGetLastError();
            d.reason = std::string("no usable CUDA device: cudaMemGetInfo: ") + cudaGetErrorString(e);
            return d;
        }
        d.free_bytes = free_b;
        // machine code for sm_80 (runs on any 8.x) and sm_90a (9.0 only), no PTX to compile for others
        if (!(p.major == 8 || (p.major == 9 && p.minor == 0))) {
            d.reason = "device " + d.name + " (compute capability " + std::to_string(p.major) + "." +
                       std::to_string(p.minor) + ") has no code in this build (sm_80, sm_90a)";
            return d;
        }
        d.present = true;
    } catch (const std::exception& ex) {
        d.present = false;
        d.reason = std::string("no usable CUDA device: ") + ex.what();
    }
    return d;
}

} // namespace attn::cuda
