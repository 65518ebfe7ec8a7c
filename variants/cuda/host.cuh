// What the case classes (core_case.cu, decode_case.cu, layer_case.cu) and the peak probes
// (peak.cu) share on the host: owners of a stream, an event and a cuBLAS handle, the checks of
// cuBLAS calls, and the runner every case runs and is timed through. Never included by the C++ tree.
#pragma once

#include <cublas_v2.h>

#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include "common.cuh"

namespace attn::cuda::detail {

void check_cublas(cublasStatus_t s, const char* call, const std::string& what);
#define ATTN_CUBLAS(call, what) ::attn::cuda::detail::check_cublas((call), #call, (what))

inline void require(bool ok, const std::string& message) {
    if (!ok) throw error(message);
}

/// "1.07 GB": a byte count for messages.
std::string gigabytes(std::size_t bytes);

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

/// The cuBLAS functions the backend calls, resolved from libcublas on first use (cublas_lazy.cu:
/// linked, it cost every process of the suite 0.2 s at start); throws error if it cannot load.
struct cublas_api {
    decltype(&cublasCreate_v2) create = nullptr;
    decltype(&cublasDestroy_v2) destroy = nullptr;
    decltype(&cublasSetStream_v2) set_stream = nullptr;
    // the C entry point (the header adds a C++ overload taking the compute type as cudaDataType)
    cublasStatus_t (*gemm_ex)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const void*,
                              const void*, cudaDataType, int, const void*, cudaDataType, int, const void*, void*,
                              cudaDataType, int, cublasComputeType_t, cublasGemmAlgo_t) = nullptr;
    decltype(&cublasGetStatusString) status_string = nullptr;
};
const cublas_api& cublas();

class cublas_owner {
  public:
    explicit cublas_owner(cudaStream_t s) {
        ATTN_CUBLAS(cublas().create(&h_), "a cuBLAS handle");
        ATTN_CUBLAS(cublas().set_stream(h_, s), "binding cuBLAS to the case's stream");
    }
    ~cublas_owner() { cublas().destroy(h_); }
    cublas_owner(const cublas_owner&) = delete;
    cublas_owner& operator=(const cublas_owner&) = delete;
    cublasHandle_t get() const { return h_; }

  private:
    cublasHandle_t h_ = nullptr;
};

/// Launches the core kernel k (naive, tiled or flash) on `s`; throws for decode (decode_case runs it).
void enqueue_core(kernel k, const core_args& a, cudaStream_t s);

/// Blocks for a grid-stride loop over n items: enough to fill the device, no more.
unsigned grid_for(long long n, int block);

/// Leaves the L2 clean before a timed call, outside its events: `buffer` (twice the L2) is
/// written, then read, so every line the L2 holds afterwards is a clean line of the buffer.
/// Writing alone left about one L2 of dirty lines, written back to memory inside the next
/// timed call (at 50 MB and ~3 TB/s, some 17 us charged to the kernel).
void flush_l2(const device_memory& buffer, int pass, cudaStream_t s);

/// What every case shares: its stream, the poisoning of its outputs before a run, and the timing.
struct runner {
    stream_owner stream;
    device_memory flush;
    std::function<void()> enqueue;            ///< the case's launches, on `stream`
    std::vector<const device_memory*> poison; ///< the output, and a layer's intermediates
    std::string what;

    /// One call, synchronised; the outputs poisoned (NaN in every format: 0xff bytes) first, so an
    /// element no kernel writes fails a check.
    void run();
    /// Device time of each of `repetitions` calls (CUDA events around each call), after `warmup`
    /// untimed calls; with flush_l2, flush_l2() before each call, outside the events.
    std::vector<double> time_ms(int repetitions, int warmup, bool flush_l2);
};

} // namespace attn::cuda::detail
