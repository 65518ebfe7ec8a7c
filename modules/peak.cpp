module;
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <memory>
#include <new>
#include <string>
#include <vector>
#include <immintrin.h>
#include <omp.h>
#include <unistd.h>
#include <nlohmann/json.hpp>
#include <xsimd/xsimd.hpp>
module attn.peak;
import attn.results;

namespace attn::peak {

namespace {

using steady = std::chrono::steady_clock;
// The FMA ceiling must be measured with fused multiply-add instructions. xsimd 8.1 has FMA
// kernels only for its fma3<sse4_2|avx|avx2> and fma4 architectures: xsimd::fma on the
// default batch of an -march=native AVX-512 build (avx512bw), and on plain batch<float, avx2>,
// falls back to x*y + z, which clang (-ffp-contract=on) emits as a separate vmulps and vaddps.
// On these Zen 4 cores that pair has the same throughput as an FMA but 6 cycles of latency
// instead of 4, so a loop with too few chains is latency-bound (8 chains of batch<float, avx2>
// measured ~78 GFLOP/s on one core, near the ~83 the independent probe reported; real
// FMAs with 8+ chains measure ~117). Here the instruction is chosen explicitly.
#if defined(__AVX512F__)
using batch = xsimd::batch<float>; // 16 lanes, held in a __m512
inline batch fused(const batch& x, const batch& y, const batch& z) { return batch(_mm512_fmadd_ps(x, y, z)); }
constexpr const char* fma_instruction = "vfmadd231ps zmm (AVX-512F)";
#elif defined(__AVX2__) && defined(__FMA__)
using batch = xsimd::batch<float, xsimd::fma3<xsimd::avx2>>;
inline batch fused(const batch& x, const batch& y, const batch& z) { return xsimd::fma(x, y, z); }
constexpr const char* fma_instruction = "vfmadd231ps ymm (FMA3)";
#else
using batch = xsimd::batch<float>;
inline batch fused(const batch& x, const batch& y, const batch& z) { return xsimd::fma(x, y, z); }
constexpr const char* fma_instruction = "xsimd::fma (no FMA instructions in this build)";
#endif

/// Keeps the compiler from proving a value or the memory behind a pointer unused.
template <class T>
inline void escape(T* p) {
    asm volatile("" : : "r"(p) : "memory");
}

double seconds_since(steady::time_point t0) {
    return std::chrono::duration<double>(steady::now() - t0).count();
}

/// `iters` rounds of `Chains` independent FMA chains acc = acc*a + b. acc converges towards
/// b/(1-a) = 1, so values stay normal (no denormal slow path) and finite. Returns a sum of the
/// chains, which the caller keeps, so the loop cannot be deleted.
///
/// Hiding the FMA latency needs (FMA ports) x (latency in cycles) chains in flight: 2 x 4 = 8
/// for 256-bit FMAs on these Zen 4 cores (and 2 x 4-5 on Intel cores), fewer for 512-bit ones,
/// which Zen 4 issues at one per cycle. measure() tries 8, 12 and 16 and keeps the fastest,
/// so the ceiling does not rest on a guess of the latency.
template <int Chains>
float fma_chains(std::size_t iters, float seed) {
    batch acc[Chains];
    for (int i = 0; i < Chains; ++i) acc[i] = batch(seed + 0.001f * float(i));
    const batch a(0.9999f), b(0.0001f);
    for (std::size_t it = 0; it < iters; ++it) {
#pragma unroll
        for (int i = 0; i < Chains; ++i) acc[i] = fused(acc[i], a, b);
    }
    batch s = acc[0];
    for (int i = 1; i < Chains; ++i) s += acc[i];
    return xsimd::hadd(s);
}

struct fma_kernel {
    int chains;
    float (*run)(std::size_t, float);
};
constexpr fma_kernel fma_kernels[] = {{8, &fma_chains<8>}, {12, &fma_chains<12>}, {16, &fma_chains<16>}};

fma_kernel kernel_with(int chains) {
    for (const auto& k : fma_kernels)
        if (k.chains == chains) return k;
    throw error("peak: FMA accumulators must be 0 (choose), 8, 12 or 16 (got " + std::to_string(chains) + ")");
}

/// GFLOP/s of a `threads`-wide team each running `iters` rounds of `k`; sets `granted`.
double time_fma(const fma_kernel& k, int threads, std::size_t iters, int& granted, double* seconds = nullptr) {
    std::vector<float> sink(std::size_t(std::max(threads, 1)), 0.0f);
    int team = 1;
    auto t0 = steady::now();
#pragma omp parallel num_threads(threads)
    {
#pragma omp single nowait
        team = omp_get_num_threads();
        sink[std::size_t(omp_get_thread_num())] = k.run(iters, 1.0f + 0.01f * float(omp_get_thread_num()));
    }
    const double s = std::max(seconds_since(t0), 1e-9);
    escape(sink.data());
    for (float v : sink) require(std::isfinite(v), "peak: FMA kernel produced a non-finite value");
    granted = team;
    if (seconds) *seconds = s;
    return 2.0 * double(team) * double(iters) * double(k.chains) * double(batch::size) / s * 1e-9;
}

/// Rounds of `k` that take about `target` seconds on one thread (the runs warm the core up).
std::size_t calibrate(const fma_kernel& k, double target) {
    std::size_t iters = 256;
    int granted = 0;
    double s = 0;
    time_fma(k, 1, iters, granted, &s);
    while (s < std::min(0.01, target) && iters < (std::size_t(1) << 40)) {
        iters *= 4;
        time_fma(k, 1, iters, granted, &s);
    }
    return std::max<std::size_t>(1, std::size_t(double(iters) * target / s));
}

/// The chain count that runs fastest here: best of three short runs each.
fma_kernel choose_kernel(const options& opt) {
    if (opt.accumulators) return kernel_with(opt.accumulators);
    fma_kernel best = fma_kernels[0];
    double best_rate = 0;
    for (const auto& k : fma_kernels) {
        const std::size_t iters = calibrate(k, opt.fma_seconds / 4);
        int granted = 0;
        double rate = 0;
        for (int r = 0; r < 3; ++r) rate = std::max(rate, time_fma(k, 1, iters, granted));
        if (rate > best_rate) {
            best_rate = rate;
            best = k;
        }
    }
    return best;
}

/// CPU time, in clock ticks, that all processes and that this process have used so far.
struct cpu_ticks {
    double all = -1, self = -1;
    static cpu_ticks now() {
        cpu_ticks t;
        std::ifstream proc_stat("/proc/stat");
        std::string cpu;
        double user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0;
        if (proc_stat >> cpu >> user >> nice >> system >> idle >> iowait >> irq >> softirq >> steal && cpu == "cpu")
            t.all = user + nice + system + irq + softirq + steal;
        std::ifstream self_stat("/proc/self/stat");
        std::string line;
        std::getline(self_stat, line);
        const auto paren = line.rfind(')'); // the command name may hold spaces
        if (paren != std::string::npos) {
            std::istringstream rest(line.substr(paren + 2));
            std::string field;
            double utime = 0, stime = 0;
            for (int i = 3; i <= 13 && rest >> field; ++i) {} // state .. cmajflt
            if (rest >> utime >> stime) t.self = utime + stime;
        }
        return t;
    }
};

/// Average CPUs busy with other processes between `before` and now, over `seconds`.
double others_busy(const cpu_ticks& before, double seconds) {
    const cpu_ticks after = cpu_ticks::now();
    const double hz = double(sysconf(_SC_CLK_TCK));
    if (before.all < 0 || before.self < 0 || after.all < 0 || after.self < 0 || hz <= 0 || seconds <= 0) return -1;
    const double others = (after.all - before.all) - (after.self - before.self);
    return std::max(0.0, others / hz / seconds);
}

stats summarise(std::vector<double> samples) {
    stats st;
    st.samples = samples;
    std::sort(samples.begin(), samples.end());
    const std::size_t n = samples.size();
    st.worst = samples.front();
    st.best = samples.back();
    st.median = n % 2 ? samples[n / 2] : 0.5 * (samples[n / 2 - 1] + samples[n / 2]);
    return st;
}

int resolve_threads(int threads) {
    return threads > 0 ? threads : omp_get_max_threads();
}

void check_options(const options& opt) {
    require(opt.repetitions >= 1, "peak: repetitions must be >= 1 (got " + std::to_string(opt.repetitions) + ")");
    require(opt.fma_seconds > 0 && std::isfinite(opt.fma_seconds),
            "peak: FMA seconds per repetition must be > 0 (got " + std::to_string(opt.fma_seconds) + ")");
    if (opt.accumulators) kernel_with(opt.accumulators);
    require(opt.threads >= 0, "peak: threads must be >= 0 (got " + std::to_string(opt.threads) + ")");
}

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

stats fma_impl(const fma_kernel& k, int threads, const options& opt, int& granted) {
    const std::size_t iters = calibrate(k, opt.fma_seconds);
    return repeated(opt.repetitions, [&] { return time_fma(k, threads, iters, granted); });
}

/// 64-byte aligned float arrays, freed with the matching deallocation.
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

struct triad_arrays {
    std::size_t n;
    aligned_floats a, b, c;
    explicit triad_arrays(std::size_t elements) : n(elements), a(n), b(n), c(n) {
        float *pa = a.get(), *pb = b.get(), *pc = c.get();
        // First touch by all threads with the same static schedule the triad uses.
#pragma omp parallel for schedule(static)
        for (std::size_t i = 0; i < n; ++i) {
            pa[i] = 0.0f;
            pb[i] = 1.0f + float(i % 7);
            pc[i] = 2.0f + float(i % 5);
        }
    }
};

stats triad_impl(triad_arrays& arr, int threads, int repetitions) {
    float *a = arr.a.get(), *b = arr.b.get(), *c = arr.c.get();
    const std::size_t n = arr.n;
    const float scalar = 3.0f;
    const stats st = repeated(repetitions, [&] {
        escape(a);
        escape(b);
        escape(c);
        const auto t0 = steady::now();
#pragma omp parallel for schedule(static) num_threads(threads)
        for (std::size_t i = 0; i < n; ++i) a[i] = b[i] + scalar * c[i];
        const double t = seconds_since(t0);
        escape(a);
        return 12.0 * double(n) / t * 1e-9;
    });
    for (std::size_t i : {std::size_t(0), n / 3, n / 2, n - 1})
        require(a[i] == b[i] + scalar * c[i], "peak: triad produced a wrong value at index " + std::to_string(i));
    return st;
}

/// Reads x[0, n) once (n a multiple of the batch size), each batch feeding Fmas FMAs into as
/// many accumulators. The accumulators start apart and the multiplier is not 1, so no two chains
/// are the same computation and none folds into an add; values grow by at most 8 per batch read.
template <int Fmas>
float stream_chains(const float* x, std::size_t n) {
    batch acc[Fmas];
    for (int i = 0; i < Fmas; ++i) acc[i] = batch(float(i));
    const batch a(0.5f);
    for (std::size_t i = 0; i < n; i += batch::size) {
        const batch v = batch::load_aligned(x + i);
#pragma unroll
        for (int k = 0; k < Fmas; ++k) acc[k] = fused(v, a, acc[k]);
    }
    batch s = acc[0];
    for (int i = 1; i < Fmas; ++i) s += acc[i];
    return xsimd::hadd(s);
}

using stream_kernel = float (*)(const float*, std::size_t);

stream_kernel stream_kernel_for(int fmas) {
    switch (fmas) {
    case 1: return &stream_chains<1>;
    case 2: return &stream_chains<2>;
    case 4: return &stream_chains<4>;
    case 8: return &stream_chains<8>;
    case 12: return &stream_chains<12>;
    case 16: return &stream_chains<16>;
    case 24: return &stream_chains<24>;
    default: throw error("peak: streaming FMAs per batch must be 1, 2, 4, 8, 12, 16 or 24 (got " + std::to_string(fmas) + ")");
    }
}

/// Each thread reads its static share of b, then of c (the triad's arrays, read only).
stats stream_impl(triad_arrays& arr, int threads, int fmas, int repetitions) {
    const stream_kernel k = stream_kernel_for(fmas);
    const std::size_t n = arr.n / batch::size * batch::size;
    const float *b = arr.b.get(), *c = arr.c.get();
    return repeated(repetitions, [&] {
        std::vector<float> sink(std::size_t(std::max(threads, 1)), 0.0f);
        const auto t0 = steady::now();
#pragma omp parallel num_threads(threads)
        {
            const std::size_t t = std::size_t(omp_get_thread_num()), nt = std::size_t(omp_get_num_threads());
            const std::size_t per = (n / batch::size + nt - 1) / nt * batch::size;
            const std::size_t i0 = std::min(n, t * per), i1 = std::min(n, i0 + per);
            float s = 0.0f;
            for (const float* x : {b, c}) s += k(x + i0, i1 - i0);
            sink[t] = s;
        }
        const double sec = std::max(seconds_since(t0), 1e-9);
        escape(sink.data());
        for (float v : sink) require(std::isfinite(v), "peak: streaming probe produced a non-finite value");
        return 2.0 * double(n) * sizeof(float) / sec * 1e-9;
    });
}

} // namespace

double roof_gbs(double triad, double fma, double flop_per_byte) {
    return flop_per_byte > 0 ? std::min(triad, fma / flop_per_byte) : triad;
}

stats stream_gbs(int threads, int fmas, const options& opt) {
    check_options(opt);
    stream_kernel_for(fmas);
    const std::size_t n = std::max<std::size_t>(triad_array_bytes(opt) / sizeof(float), 16);
    triad_arrays arr(n);
    return stream_impl(arr, resolve_threads(threads), fmas, opt.repetitions);
}

std::size_t triad_array_bytes(const options& opt) {
    if (opt.triad_bytes) return opt.triad_bytes;
    const std::size_t l3 = machine().l3_bytes ? machine().l3_bytes : std::size_t(32) << 20;
    return std::max<std::size_t>(4 * l3, std::size_t(64) << 20);
}

stats fma_gflops(int threads, const options& opt) {
    check_options(opt);
    int granted = 0;
    return fma_impl(choose_kernel(opt), resolve_threads(threads), opt, granted);
}

struct triad_probe::arrays : triad_arrays {
    using triad_arrays::triad_arrays;
};

triad_probe::triad_probe(const options& opt) {
    check_options(opt);
    arrays_ = std::make_unique<arrays>(std::max<std::size_t>(triad_array_bytes(opt) / sizeof(float), 16));
}

triad_probe::~triad_probe() = default;

stats triad_probe::measure(int threads, int repetitions) {
    require(repetitions >= 1, "peak: triad repetitions must be >= 1 (got " + std::to_string(repetitions) + ")");
    return triad_impl(*arrays_, resolve_threads(threads), repetitions);
}

stats triad_gbs(int threads, const options& opt) { return triad_probe(opt).measure(threads, opt.repetitions); }

ceilings measure(const options& opt) {
    check_options(opt);
    ceilings c;
    const int all = resolve_threads(opt.threads);
    int granted = 1;
    const fma_kernel k = choose_kernel(opt);
    c.fma_1t_gflops = fma_impl(k, 1, opt, granted);
    c.fma_all_gflops = fma_impl(k, all, opt, granted);
    c.threads = granted;
    c.accumulators = k.chains;
    c.simd_lanes = int(batch::size);
    c.simd_arch = batch::arch_type::name();
    c.fma_instruction = fma_instruction;
    c.triad_array_bytes = triad_array_bytes(opt);
    c.triad_elements = std::max<std::size_t>(c.triad_array_bytes / sizeof(float), 16);
    triad_arrays arr(c.triad_elements);
    c.triad_1t_gbs = triad_impl(arr, 1, opt.repetitions);
    c.triad_all_gbs = triad_impl(arr, granted, opt.repetitions);
    constexpr int vector_registers = batch::size >= 16 ? 32 : 16; // AVX-512 has 32, AVX2 16
    for (int f : stream_fmas) // the accumulators, the multiplier and the batch read must fit in registers
        if (f + 2 <= vector_registers) c.stream.push_back({f, f / 2.0, stream_impl(arr, granted, f, opt.repetitions)});
    return c;
}

namespace {

nlohmann::ordered_json stats_json(const stats& s) {
    nlohmann::ordered_json j;
    j["median"] = s.median;
    j["best"] = s.best;
    j["worst"] = s.worst;
    j["repetitions"] = s.samples.size();
    j["samples"] = s.samples;
    j["others_busy_cpus"] = s.others_busy_cpus;
    return j;
}

stats stats_from(const nlohmann::json& j, const char* key) {
    require(j.contains(key) && j[key].is_object(), std::string("peak JSON: missing object \"") + key + "\"");
    const auto& o = j[key];
    stats s;
    try {
        s.median = o.at("median").get<double>();
        s.best = o.at("best").get<double>();
        s.worst = o.at("worst").get<double>();
        if (o.contains("samples")) s.samples = o["samples"].get<std::vector<double>>();
        if (o.contains("others_busy_cpus")) s.others_busy_cpus = o["others_busy_cpus"].get<double>();
    } catch (const nlohmann::json::exception& e) {
        throw error(std::string("peak JSON: \"") + key + "\": " + e.what());
    }
    return s;
}

} // namespace

std::string to_json(const ceilings& c, int indent) {
    nlohmann::ordered_json j;
    j["fma_f32_gflops_1_thread"] = stats_json(c.fma_1t_gflops);
    j["fma_f32_gflops_all_threads"] = stats_json(c.fma_all_gflops);
    j["triad_gbs_1_thread"] = stats_json(c.triad_1t_gbs);
    j["triad_gbs_all_threads"] = stats_json(c.triad_all_gbs);
    j["threads"] = c.threads;
    j["fma_accumulators_per_thread"] = c.accumulators;
    j["simd_arch"] = c.simd_arch;
    j["fma_instruction"] = c.fma_instruction;
    j["simd_f32_lanes"] = c.simd_lanes;
    j["triad_array_bytes"] = c.triad_array_bytes;
    j["triad_elements"] = c.triad_elements;
    j["triad_bytes_per_element"] = 12;
    nlohmann::ordered_json probe = nlohmann::ordered_json::array();
    for (const auto& p : c.stream) {
        nlohmann::ordered_json x;
        x["fmas_per_batch"] = p.fmas;
        x["flop_per_byte"] = p.flop_per_byte;
        x["gbs"] = stats_json(p.gbs);
        x["roof_gbs"] = roof_gbs(c.triad_all_gbs.median, c.fma_all_gflops.median, p.flop_per_byte);
        probe.push_back(x);
    }
    j["stream_fma"] = probe;
    j["units"] = {{"fma", "GFLOP/s, 10^9 FLOP/s, one FMA = 2 FLOP"},
                  {"triad", "GB/s, 10^9 byte/s, 12 byte per element (read b, c; write a; write-allocate not counted); arrays "
                            "2 MiB-aligned with MADV_HUGEPAGE, like the key/value cache (attn::big_allocator)"},
                  {"stream_fma", "GB/s read (10^9 byte/s) on all threads by a loop that feeds every batch read from the triad's "
                                 "arrays b and c to fmas_per_batch FMAs (flop_per_byte = fmas_per_batch / 2); roof_gbs = "
                                 "min(triad, FMA / flop_per_byte) from the medians"}};
    return j.dump(indent > 0 ? indent : -1);
}

ceilings from_json(const std::string& text) {
    nlohmann::json j;
    try {
        j = nlohmann::json::parse(text);
    } catch (const nlohmann::json::exception& e) {
        throw error(std::string("peak JSON: cannot parse (") + e.what() + ")");
    }
    if (j.contains("peak")) j = j["peak"];
    require(j.is_object(), "peak JSON: expected an object");
    ceilings c;
    c.fma_1t_gflops = stats_from(j, "fma_f32_gflops_1_thread");
    c.fma_all_gflops = stats_from(j, "fma_f32_gflops_all_threads");
    c.triad_1t_gbs = stats_from(j, "triad_gbs_1_thread");
    c.triad_all_gbs = stats_from(j, "triad_gbs_all_threads");
    c.threads = j.value("threads", 1);
    c.accumulators = j.value("fma_accumulators_per_thread", 0);
    c.simd_arch = j.value("simd_arch", std::string());
    c.fma_instruction = j.value("fma_instruction", std::string());
    c.simd_lanes = j.value("simd_f32_lanes", 0);
    c.triad_array_bytes = j.value("triad_array_bytes", std::size_t(0));
    c.triad_elements = j.value("triad_elements", std::size_t(0));
    if (j.contains("stream_fma") && j["stream_fma"].is_array())
        for (const auto& x : j["stream_fma"]) {
            require(x.is_object() && x.contains("gbs"), "peak JSON: \"stream_fma\" entries need \"gbs\"");
            stream_point p;
            p.fmas = x.value("fmas_per_batch", 0);
            p.flop_per_byte = x.value("flop_per_byte", 0.0);
            p.gbs = stats_from(x, "gbs");
            c.stream.push_back(p);
        }
    return c;
}

} // namespace attn::peak
