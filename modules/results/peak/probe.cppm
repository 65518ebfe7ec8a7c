// attn.peak:probe -- what the probes of attn.peak share (an internal partition): the clock, the
// repetition loop with its CPU sampler, the FMA batch, and the triad's arrays.
module;
#include <chrono>
#include <cstddef>
#include <vector>
module attn.peak:probe;
import attn.peak; // the exported API: options, stats
import attn.kernels;

namespace attn::peak {

using steady = std::chrono::steady_clock;

/// The batch the FMA and streaming probes run on, chosen with its FMA instruction in
/// attn.kernels:isa.
using batch = kernels::isa::fma_batch;
inline batch fused(const batch& x, const batch& y, const batch& z) { return kernels::isa::fma(x, y, z); }

/// Keeps the compiler from proving a value or the memory behind a pointer unused.
template <class T>
inline void escape(T* p) {
    asm volatile("" : : "r"(p) : "memory");
}

inline double seconds_since(steady::time_point t0) { return std::chrono::duration<double>(steady::now() - t0).count(); }

// ---- the CPU sampler (sampler.cpp) ---------------------------------------------------------

/// CPU time, in clock ticks, that all processes and that this process have used so far.
struct cpu_ticks {
    double all = -1, self = -1;
    static cpu_ticks now();
};

/// Average CPUs busy with other processes between `before` and now, over `seconds`.
double others_busy(const cpu_ticks& before, double seconds);

/// Median, best and worst of `samples` (kept in the order measured).
stats summarise(std::vector<double> samples);

/// One untimed warm-up call of `rate`, then `repetitions` timed ones (each returns its rate),
/// summarised with the CPUs other processes kept busy during the timed ones.
template <class F>
stats repeated(int repetitions, F&& rate) {
    rate(); // untimed warm-up
    std::vector<double> rates;
    const cpu_ticks before = cpu_ticks::now();
    const auto t0 = steady::now();
    for (int r = 0; r < repetitions; ++r) rates.push_back(rate());
    stats st = summarise(rates);
    st.others_busy_cpus = others_busy(before, seconds_since(t0));
    return st;
}

/// `threads`, or omp_get_max_threads() for 0.
int resolve_threads(int threads);

/// Throws attn::error for options no probe can run with.
void check_options(const options& opt);

// ---- FMA (fma.cpp) ---------------------------------------------------------------------------

/// A loop of `chains` independent FMA chains; one step of one chain is `flop` FLOPs (an fp32
/// FMA batch: 2 per lane; a vdpbf16ps: 4 per fp32 lane, two products and their two additions).
struct fma_kernel {
    int chains;
    float (*run)(std::size_t, float);
    double flop; ///< FLOPs of one step of one chain
};

/// The bf16 dot-product kernel (vdpbf16ps zmm, `chains` chains) where this CPU has AVX512_BF16;
/// chains 0 where it does not or the build is not for x86-64.
fma_kernel bf16_dot_kernel();

/// The AMX-BF16 tile kernel (tdpbf16ps, 4 chains of 16,384 FLOP a step) where this CPU has AMX-BF16
/// and Linux grants the process its tile data; chains 0 elsewhere.
fma_kernel amx_bf16_kernel();

/// The kernel with `chains` chains; throws attn::error for a count that has none.
fma_kernel kernel_with(int chains);

/// The chain count that runs fastest here (or opt.accumulators).
fma_kernel choose_kernel(const options& opt);

/// GFLOP/s of `k` on `threads` threads; sets `granted` to the threads OpenMP gave.
stats fma_impl(const fma_kernel& k, int threads, const options& opt, int& granted);

// ---- triad (triad.cpp) -----------------------------------------------------------------------

/// n floats on big_allocator: 2 MiB-aligned, huge pages where THP allows -- the same memory the
/// key/value cache gets, so the decode's "% of triad" compares like with like.
struct aligned_floats {
    std::size_t n;
    float* p;
    explicit aligned_floats(std::size_t count) : n(count), p(big_allocator<float>().allocate(count)) {}
    aligned_floats(const aligned_floats&) = delete;
    aligned_floats& operator=(const aligned_floats&) = delete;
    ~aligned_floats() { big_allocator<float>().deallocate(p, n); }
    float* get() const { return p; }
};

/// The triad's arrays a, b, c, first-touched by all threads as the triad will use them.
struct triad_arrays {
    std::size_t n;
    aligned_floats a, b, c;
    explicit triad_arrays(std::size_t elements);
};

/// The triad on `arr`, in GB/s (12 bytes per element).
stats triad_impl(triad_arrays& arr, int threads, int repetitions);

// ---- streaming probe (stream.cpp) ------------------------------------------------------------

/// The streaming probe on the triad's arrays b and c, in GB/s read.
stats stream_impl(triad_arrays& arr, int threads, int fmas, int repetitions);

/// The read probe on the triad's arrays b and c (their first `elements` each; 0: all), in GB/s read.
stats read_impl(triad_arrays& arr, int threads, int repetitions, std::size_t elements = 0);

} // namespace attn::peak
