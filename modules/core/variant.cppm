// attn.core:variant -- the interface every implementation fills in. A variant supplies two
// kernels: the attention core (Q, K, V per head -> context) and a linear map (y = x W^T + b).
// A family's layer is its own composition of those two (attn.families), the same for every
// variant, so a variant that is faster at either kernel is faster at every family's layer. A
// variant declares what it serves beyond its kernels (families, devices, windows, its own shape
// limits); a case outside that is refused in one line (attn.variants' refusal).
// Every variant also serves every precision: a kernel set per storage type (f64, f32, bf16,
// f16). In bf16 and f16 the operands and results are stored in the 16-bit format and the
// arithmetic is fp32; by_conversion() makes such a set from a variant's fp32 kernels.
module;
#include <algorithm>
#include <cctype>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>
export module attn.core:variant;
import :problem;
import :precision;
import :tensor;
import :kv;

export namespace attn {

/// y[rows, out] = x[rows, in] * w[out, in]^T + b[out]; b may be null. All row-major, contiguous.
template <class T>
struct linear_io {
    const T* x;
    const T* w;
    const T* b;
    T* y;
    std::size_t rows, in, out;
};

/// The attention core for one problem: q [B, H, n_q, d_qk], k [B, G, n_kv, d_qk], v [B, G, n_kv, d_v],
/// out [B, H, n_q, d_v] (problem::qk_dim, v_dim). Views, so v may alias the leading columns of k.
template <class T>
struct core_io {
    heads_view<const T> q, k, v;
    heads_view<T> out;
};

/// The most threads a run may ask for: max(1024, 4 x the logical CPUs). Past the machine's CPUs
/// a benchmark only measures oversubscription; far past them OpenMP cannot start its team and
/// aborts the process (libomp: "OMP: System error #11", seen at 100,000 threads on a 2-CPU
/// machine that ran 20,000). The floor keeps a sweep file written for a large machine valid on a
/// small one (a Slurm login node expands it).
inline std::size_t thread_limit() {
    return std::max<std::size_t>(1024, 4 * std::size_t(std::thread::hardware_concurrency()));
}

/// Refuses a thread count outside [1, thread_limit()] (0 too, when `zero_ok`: "every CPU"),
/// naming `what` ("--threads") and the value.
inline void check_threads(std::size_t threads, const std::string& what, bool zero_ok = false) {
    require((threads >= 1 || zero_ok) && threads <= thread_limit(),
            what + " " + std::to_string(threads) + " is out of range: threads must be in [" + (zero_ok ? "0" : "1") +
                ", " + std::to_string(thread_limit()) + "] (" + (zero_ok ? "0: every CPU; " : "") +
                "at most max(1024, 4 x the " + std::to_string(std::thread::hardware_concurrency()) + " logical CPUs))");
}

/// The largest stack an OpenMP worker may ask for through OMP_STACKSIZE (or libomp's KMP_ and
/// GOMP_ spellings): 1 GiB. libomp aborts the process when it cannot map a worker's stack ("OMP:
/// Error #34", seen at 100G on a 24 GiB machine, 2G ran); the kernels need a few KiB of stack.
inline constexpr std::uint64_t max_stack_bytes = std::uint64_t(1) << 30;

/// Refuses an OMP_STACKSIZE, KMP_STACKSIZE or GOMP_STACKSIZE that is not a size in [1 byte,
/// 1 GiB]: a whole number with an optional unit B, K, M or G (K when none, as OpenMP says).
/// libomp would otherwise warn and take its default for a malformed one, or abort on a huge one.
inline void check_stack_env() {
    for (const char* name : {"OMP_STACKSIZE", "KMP_STACKSIZE", "GOMP_STACKSIZE"}) {
        const char* env = std::getenv(name);
        if (!env) continue;
        const std::string s = env;
        const std::size_t b = s.find_first_not_of(' '), e = s.find_last_not_of(' ');
        std::string v = b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
        std::uint64_t unit = 1024;
        if (!v.empty() && std::string("bBkKmMgG").find(v.back()) != std::string::npos) {
            const char u = char(std::tolower(static_cast<unsigned char>(v.back())));
            unit = u == 'b' ? 1 : u == 'k' ? 1024 : u == 'm' ? 1024 * 1024 : 1024 * 1024 * 1024;
            v.pop_back();
            while (!v.empty() && v.back() == ' ') v.pop_back();
        }
        const bool digits = !v.empty() && v.size() <= 12 && v.find_first_not_of("0123456789") == std::string::npos;
        const std::uint64_t count = digits ? std::stoull(v) : 0; // at most 12 digits: no overflow here
        require(count >= 1 && count <= max_stack_bytes / unit,
                std::string(name) + " '" + s + "' is not a stack size in [1B, 1G] (a whole number, unit B, K, M or G)");
    }
}

/// Refuses an OMP_NUM_THREADS that is not a comma-separated list of counts in [1,
/// thread_limit()]. Both mains call it first, before any OpenMP call: LLVM's libomp reads the
/// variable lazily, at its first call, and on "", "1.5", "-1" or "nan" it asserts, aborts or hangs.
inline void check_omp_env() {
    check_stack_env();
    const char* env = std::getenv("OMP_NUM_THREADS");
    if (!env) return;
    const std::string s = env;
    std::size_t start = 0;
    do {
        const std::size_t end = std::min(s.find(',', start), s.size());
        const std::string item = s.substr(start, end - start);
        const bool digits =
            !item.empty() && item.size() <= 9 && item.find_first_not_of("0123456789") == std::string::npos;
        require(digits && std::stoul(item) >= 1 && std::stoul(item) <= thread_limit(),
                "OMP_NUM_THREADS '" + s + "' is not a list of thread counts in [1, " + std::to_string(thread_limit()) +
                    "]");
        start = end + 1;
    } while (start <= s.size());
}

/// Knobs a run may set; a variant ignores those it has no use for.
struct run_options {
    int threads = 1;         ///< honoured by threaded variants
    std::size_t tile_q = 0;  ///< 0: the variant's measured default
    std::size_t tile_kv = 0; ///< 0: the variant's measured default
};

template <class T>
struct kernel_set {
    std::function<void(const problem&, const core_io<T>&, const run_options&)> core;
    std::function<void(const linear_io<T>&, const run_options&)> linear;
};

/// Decode cores over a key/value cache stored narrower than fp32 (attn.core:kv), one per cache
/// type; empty: the variant cannot read a cache of that type.
struct kv_kernels {
    template <class S>
    using core_fn = std::function<void(const problem&, const kv_core_io<S>&, const run_options&)>;
    core_fn<attn::bf16> bf16;
    core_fn<attn::f16> f16;
    core_fn<std::int8_t> int8;

    template <class S>
    const core_fn<S>& get() const {
        if constexpr (std::is_same_v<S, attn::bf16>)
            return bf16;
        else if constexpr (std::is_same_v<S, attn::f16>)
            return f16;
        else
            return int8;
    }
};

/// A case prepared on a device: its inputs were copied there once, in the case's storage type.
/// run() runs one call and waits for it; output() reads the last run's output back, widened to
/// fp32, in the host's layout (device_inputs says which); time_ms() times calls with the device's
/// own clock, each alone, after `warmup` untimed ones, the device's caches left clean before each
/// (outside the timing) when `cold`. What a device needs of the one harness, the checker and the
/// report; a CPU-backed test device (tests/device/) takes the same path.
struct device_run {
    virtual ~device_run() = default;
    virtual void run() = 0;
    virtual std::vector<float> output() = 0;
    virtual std::vector<double> time_ms(int repetitions, int warmup, bool cold) = 0;
};

/// What a device variant prepares a case from: host arrays, fp32 (decode's caches in their own
/// type), row-major, heads interleaved ([rows, heads * width]):
///  - core: q [B, n_q, H d_qk], k [B, n_kv, G d_qk], v [B, n_kv, G d_v]; output [B, n_q, H d_v];
///  - layer: x_q [B, n_q, d_model], x_kv [B, n_kv, d_model] and the family's weight set in its
///    order (the q/k/v family: wq, wk, wv, wo, then bq, bk, bv, bo with biases); output
///    [B, n_q, d_model];
///  - decode: q [B, H d] (one query per sequence) over the cache k, v [B, G, capacity, d] in the
///    cache's type (bf16/f16 as their 16-bit patterns, int8 with one fp32 scale per row in
///    k_scales, v_scales [B, G, capacity]), the first n_kv = L + 1 rows used; output [B, H d].
struct device_inputs {
    attn::mode mode = attn::mode::core;
    dtype type = dtype::f32;
    problem p;
    std::span<const float> q, k, v;
    std::span<const float> x_q, x_kv;
    std::vector<std::span<const float>> weights;
    const void* k_cache = nullptr;
    const void* v_cache = nullptr;
    const float* k_scales = nullptr;
    const float* v_scales = nullptr;
    std::size_t capacity = 0;
    bool values_in_keys = false; ///< decode: the values are the first d_v columns of the key rows (MLA's latent)
};

/// A device's measured ceilings, what its cases' % of peak and roofline are taken against (the
/// CPU's come from attn.peak): the 16-bit matrix rate (bf16 and f16 cases; the device's f32 and
/// f64 rates are not measured, so those cases carry no % of peak), the read-only bandwidth, the
/// copy bandwidth (read + written, the triad's counterpart) and the last-level cache's bytes.
struct device_peak {
    double matmul_16bit_gflops = 0;
    double read_gbs = 0, copy_gbs = 0;
    std::size_t cache_bytes = 0;
    std::string what; ///< one line: how each figure was measured
};

/// A variant that computes on a device: it prepares a case (throwing attn::error in one line when
/// it cannot), says in one line what it does not serve (a problem in a mode and storage type:
/// "" when it serves it; the device's absence is said here too), and measures the device's
/// ceilings (once a process; throws attn::error without the device).
struct device_kernels {
    std::function<std::unique_ptr<device_run>(const device_inputs&, const run_options&)> prepare;
    std::function<std::string(const problem&, attn::mode, dtype)> refuses;
    std::function<device_peak()> peak;
    explicit operator bool() const { return bool(prepare); }
};

/// What a variant serves beyond its precisions (its kernel sets say those): the families (empty:
/// every family), the device it computes on, whether it serves a sliding window, and limits of
/// its own (`limits`: "" for a problem it runs, else one line saying what it lacks).
struct serves {
    std::vector<attn::family> families;
    attn::device device = attn::device::cpu;
    bool windows = false;
    std::function<std::string(const problem&)> limits;
};

/// Roundings to a 16-bit format that a variant adds beyond fp32 arithmetic on its stored inputs
/// (tensor-core kernels feed the matrix units 16-bit operands); the checker charges each at the
/// format's unit roundoff (attn.check:expect), so the bound stays a bound of what it computes.
struct half_roundings {
    bool weights = false;       ///< the softmax weights P stored in the format before P V
    bool queries = false;       ///< decode: the fp32 queries (times the scale) rounded to it before Q K^T
    dtype format = dtype::bf16; ///< the format of both (an int8 cache's tensor cores: bf16)
    /// Decode over an int8 cache in integer products (the CPU core on AVX512-VNNI): each query
    /// row in fixed point, its largest |q_t| mapped to the integer `query_top`, so each element
    /// off by at most 0.51 max_t |q_t| / query_top (half a step, and fp32's roundings of the
    /// factors); each weight times its value row's scale in fixed point against the largest of
    /// its tile of keys, mapped to `weight_top` (off by at most 0.51 of that / weight_top).
    /// 0: exact fp32.
    std::int32_t query_top = 0, weight_top = 0;
};

/// One registered implementation. Empty kernels mean "not supported at this precision".
struct variant {
    std::string name;
    std::string description; ///< one line: what it changes from the simpler variant
    bool threaded = false;   ///< honours run_options::threads
    attn::serves serves;     ///< families, device, windows and limits (attn.variants' refusal reads it)
    /// Selector tags (attn.cases): "loops" marks the plain-loop variants, too slow for large sweeps;
    /// a sweep's "fast" selector is every variant without it, so a new variant joins by default.
    std::vector<std::string> tags;
    kernel_set<float> f32;
    kernel_set<double> f64;
    kernel_set<attn::bf16> bf16;
    kernel_set<attn::f16> f16;
    /// How the variant computes in bf16 and f16, one line each (recorded in results' metadata).
    std::string bf16_path, f16_path;
    kv_kernels kv; ///< decode over a bf16, f16 or int8 key/value cache
    /// Set for a variant that computes on a device (the CUDA kernels, the CPU-backed test device):
    /// its cases are prepared, run, read back and timed through it, not through the kernel sets.
    device_kernels device;
    /// What the variant rounds to a 16-bit format for a problem in a mode and storage type (decode:
    /// the cache's); none by default (the CPU variants compute bf16 and f16 in fp32).
    std::function<half_roundings(const problem&, attn::mode, dtype)> roundings = [](const problem&, attn::mode, dtype) {
        return half_roundings{};
    };
    /// Extra memory the core allocates beyond its inputs and outputs, in bytes.
    std::function<std::size_t(const problem&, const run_options&)> scratch_bytes =
        [](const problem&, const run_options&) { return std::size_t(0); };

    template <class T>
    const kernel_set<T>& get() const {
        if constexpr (std::is_same_v<T, float>)
            return f32;
        else if constexpr (std::is_same_v<T, double>)
            return f64;
        else if constexpr (std::is_same_v<T, attn::bf16>)
            return bf16;
        else
            return f16;
    }
    bool has_tag(const std::string& t) const {
        for (const auto& x : tags)
            if (x == t) return true;
        return false;
    }
    template <class T>
    bool supports() const {
        return bool(get<T>().core) && bool(get<T>().linear);
    }
    bool supports(precision p) const {
        switch (p) {
        case precision::f64:
            return supports<double>();
        case precision::f32:
            return supports<float>();
        case precision::bf16:
            return supports<attn::bf16>();
        case precision::f16:
            return supports<attn::f16>();
        case precision::int8: // a cache type: kv_kernels say which caches a variant reads
            return false;
        }
        return false;
    }
};

/// The precision-T kernels of a variant's fp32 ones by conversion: every operand is widened to
/// an fp32 scratch copy, the fp32 kernel runs, and the result is rounded (to nearest even) to T.
/// The arithmetic is exactly the fp32 kernel's; the price is the copies (extra memory: the
/// operands and result in fp32).
template <class T>
kernel_set<T> by_conversion(const kernel_set<float>& k) {
    kernel_set<T> out;
    out.core = [core = k.core](const problem& p, const core_io<T>& io, const run_options& o) {
        auto widen = [](const heads_view<const T>& v) {
            std::vector<float> w(v.batch * v.heads * v.rows * v.dim);
            for (std::size_t b = 0, at = 0; b < v.batch; ++b)
                for (std::size_t h = 0; h < v.heads; ++h)
                    for (std::size_t i = 0; i < v.rows; ++i, at += v.dim)
                        for (std::size_t c = 0; c < v.dim; ++c) w[at + c] = float(v.row(b, h, i)[c]);
            return w;
        };
        const auto q = widen(io.q), k = widen(io.k), v = widen(io.v);
        std::vector<float> ctx(io.out.batch * io.out.heads * io.out.rows * io.out.dim);
        const auto view = [](auto* data, const auto& like) {
            return packed_heads(data, like.batch, like.heads, like.rows, like.dim);
        };
        core(p, {view(q.data(), io.q), view(k.data(), io.k), view(v.data(), io.v), view(ctx.data(), io.out)}, o);
        for (std::size_t b = 0, at = 0; b < io.out.batch; ++b)
            for (std::size_t h = 0; h < io.out.heads; ++h)
                for (std::size_t i = 0; i < io.out.rows; ++i, at += io.out.dim)
                    for (std::size_t c = 0; c < io.out.dim; ++c) io.out.row(b, h, i)[c] = T(ctx[at + c]);
    };
    out.linear = [linear = k.linear](const linear_io<T>& io, const run_options& o) {
        auto widen = [](const T* x, std::size_t n) {
            std::vector<float> w(n);
            for (std::size_t i = 0; i < n; ++i) w[i] = float(x[i]);
            return w;
        };
        const auto x = widen(io.x, io.rows * io.in), w = widen(io.w, io.out * io.in);
        const auto b = io.b ? widen(io.b, io.out) : std::vector<float>();
        std::vector<float> y(io.rows * io.out);
        linear({x.data(), w.data(), io.b ? b.data() : nullptr, y.data(), io.rows, io.in, io.out}, o);
        for (std::size_t i = 0; i < y.size(); ++i) io.y[i] = T(y[i]);
    };
    return out;
}

/// Fills a variant's bf16 and f16 sets by conversion from its fp32 kernels.
inline void add_half_by_conversion(variant& v, const std::string& how = "fp32 kernels on fp32 copies of the operands") {
    v.bf16 = by_conversion<bf16>(v.f32);
    v.f16 = by_conversion<f16>(v.f32);
    v.bf16_path = v.f16_path = "by conversion: " + how;
}

} // namespace attn
