// attnbench-bench: the performance sweep. Cases are registered at run time from the variant
// registry x a grid (d_model, heads, kv_heads, seq, batch, threads, causal, mode); every case
// checks its output against the fp64 reference once (the last query rows of every sequence,
// see attn::check::tail_problem) before anything is timed, and a wrong kernel is reported
// with SkipWithError, never timed. All --benchmark_* flags work. Results are Google
// Benchmark's JSON, written atomically, with our metadata in the context block.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>
#include <benchmark/benchmark.h>
#include <CLI/CLI.hpp>
import attn.variants;
import attn.check;
import attn.count;
import attn.peak;
import attn.results;

namespace {

using attn::problem;
using attn::check::mode;

/// The sweep, from the command line (lists are comma-separated).
struct sweep {
    std::vector<std::string> variants, modes{"core", "layer"};
    std::vector<std::size_t> d_model{512}, heads{8}, kv_heads{0}, seq{512, 1024}, batch{1};
    std::vector<int> threads{0}, causal{0};
    std::size_t tile_q = 0, tile_kv = 0, check_rows = 16;
    double max_memory_mib = 0; // 0: half the machine's memory
    std::string peak_file;
    std::uint64_t seed = 1;
};

/// What one registered case shares across Google Benchmark's calls: inputs, the check's verdict.
struct bench_case {
    const attn::variant* var = nullptr;
    problem p;
    mode m = mode::core;
    attn::run_options opt;
    double peak_gflops = 0;
    std::uint64_t seed = 1;
    double max_memory_bytes = 0;
    bool checked = false;
    double extra_bytes = -2; ///< measured peak extra memory of one call (-2: not yet measured)
    std::string check_error;
    std::unique_ptr<attn::check::inputs> in;
};

std::string label_of(const bench_case& c) {
    std::ostringstream s;
    s << "variant=" << c.var->name << " mode=" << attn::check::mode_name(c.m) << " d_model=" << c.p.d_model
      << " heads=" << c.p.heads << " kv_heads=" << c.p.kv_heads << " d_head=" << c.p.head_dim()
      << " n_q=" << c.p.n_q << " n_kv=" << c.p.n_kv << " batch=" << c.p.batch << " threads=" << c.opt.threads
      << " causal=" << (c.p.causal ? 1 : 0) << " family=" << c.p.family();
    return s.str();
}

std::string mib(double bytes) {
    char b[32];
    std::snprintf(b, sizeof b, "%.0f MiB", bytes / 1048576.0);
    return b;
}

/// Bytes the kernel must at least move: inputs read once, outputs written once (fp32).
double min_bytes(const problem& p, mode m) {
    const double q = double(p.batch * p.n_q * p.q_width()), kv = double(p.batch * p.n_kv * p.kv_width());
    double b = 4 * (2 * q + 2 * kv); // Q in, O out, K and V in
    if (m == mode::layer)
        b = 4 * (double(p.batch * (p.n_q + p.n_kv) * p.d_model) + double(p.batch * p.n_q * p.d_model) +
                 double(2 * p.q_width() * p.d_model + 2 * p.kv_width() * p.d_model));
    return b;
}

/// Peak resident memory a call adds, measured: the kernel's real extra memory (scratch, score
/// matrices, workspaces), as the kernel sees it on first use. Resets the process's high-water
/// mark (/proc/self/clear_refs, "5"), runs `fn`, and subtracts the resident size before it.
/// Returns -1 where the kernel does not offer the reset.
template <class F>
double measured_extra_bytes(F&& fn) {
    auto status = [](const char* key) {
        std::ifstream f("/proc/self/status");
        std::string line;
        while (std::getline(f, line))
            if (line.rfind(key, 0) == 0) return 1024.0 * std::stod(line.substr(std::string(key).size()));
        return -1.0;
    };
    {
        std::ofstream reset("/proc/self/clear_refs");
        if (!(reset << "5")) return -1;
    }
    const double before = status("VmRSS:");
    fn();
    const double high = status("VmHWM:");
    return before < 0 || high < 0 ? -1 : std::max(0.0, high - before);
}

void run_case(benchmark::State& state, bench_case& c) {
    const std::size_t d = c.p.head_dim();
    // Memory guard: what the variant would allocate, on top of the inputs, must fit.
    const double scratch = double(c.var->scratch_bytes(c.p, c.opt));
    const double inputs = min_bytes(c.p, c.m) + (c.m == mode::layer ? 4.0 * double(c.p.batch * (c.p.n_q * 2 * c.p.q_width() + 2 * c.p.n_kv * c.p.kv_width())) : 0.0);
    if (scratch + inputs > c.max_memory_bytes) {
        state.SkipWithError((c.var->name + " would need " + mib(scratch + inputs) + " (" + mib(scratch) +
                             " of it scratch) > --max-memory " + mib(c.max_memory_bytes))
                                .c_str());
        return;
    }
    if (!c.in) c.in = std::make_unique<attn::check::inputs>(attn::check::make_inputs(c.p, c.m, c.seed));
    const auto& in = *c.in;
    if (!c.checked) { // once per case, before any timing
        c.checked = true;
        const auto out = attn::check::run<float>(*c.var, c.p, c.m, in, c.opt);
        const std::size_t width = c.m == mode::core ? c.p.q_width() : c.p.d_model, rows = 16;
        const problem tp = attn::check::tail_problem(c.p, rows);
        const auto tin = attn::check::tail_inputs(c.p, c.m, in, rows);
        const auto e = attn::check::expect(tp, c.m, tin);
        const auto met = attn::check::compare(attn::check::tail_rows(out, c.p, width, rows), e.ref, e.bound,
                                              attn::check::unit_roundoff<float>());
        if (!met.pass) {
            char msg[200];
            std::snprintf(msg, sizeof msg, "output differs from the fp64 reference: max abs error %.3g, %.3g x the bound",
                          met.max_abs, met.ratio);
            c.check_error = msg;
        }
    }
    if (!c.check_error.empty()) {
        state.SkipWithError(c.check_error.c_str());
        return;
    }
    const auto flops = attn::analytic_flops(c.p);
    const double matmul = double(c.m == mode::core ? flops.attention_matmul() : flops.matmul_flops());
    const double full = double(c.m == mode::core ? flops.attention_full() : flops.full_flops());
    if (c.m == mode::core) {
        std::vector<float> out(c.p.batch * c.p.n_q * c.p.q_width());
        const attn::core_io<float> io{attn::interleaved_heads<const float>(in.q.data(), c.p.batch, c.p.n_q, c.p.heads, d),
                                      attn::interleaved_heads<const float>(in.k.data(), c.p.batch, c.p.n_kv, c.p.kv_heads, d),
                                      attn::interleaved_heads<const float>(in.v.data(), c.p.batch, c.p.n_kv, c.p.kv_heads, d),
                                      attn::interleaved_heads<float>(out.data(), c.p.batch, c.p.n_q, c.p.heads, d)};
        const auto& core = c.var->get<float>().core;
        if (c.extra_bytes < -1.5) c.extra_bytes = measured_extra_bytes([&] { core(c.p, io, c.opt); }); // once
        for (auto _ : state) {
            core(c.p, io, c.opt);
            benchmark::DoNotOptimize(out.data());
            benchmark::ClobberMemory();
        }
    } else {
        std::vector<float> y(c.p.batch * c.p.n_q * c.p.d_model);
        attn::layer_workspace<float> ws;
        if (c.extra_bytes < -1.5) // once, with a fresh workspace: its Q, K, V and context buffers count
            c.extra_bytes = measured_extra_bytes(
                [&] { attn::run_layer<float>(*c.var, c.p, in.w, in.x_q.data(), in.x_kv.data(), y.data(), c.opt, ws); });
        for (auto _ : state) {
            attn::run_layer<float>(*c.var, c.p, in.w, in.x_q.data(), in.x_kv.data(), y.data(), c.opt, ws);
            benchmark::DoNotOptimize(y.data());
            benchmark::ClobberMemory();
        }
    }
    using benchmark::Counter;
    const double bytes = min_bytes(c.p, c.m);
    state.counters["gflops_matmul"] = Counter(matmul * 1e-9, Counter::kIsIterationInvariantRate);
    state.counters["gflops_full"] = Counter(full * 1e-9, Counter::kIsIterationInvariantRate);
    state.counters["intensity"] = Counter(matmul / bytes); // matmul FLOP per byte
    state.counters["bytes"] = Counter(bytes, Counter::kDefaults, Counter::kIs1024);
    state.counters["scratch_mib"] = Counter(scratch / 1048576.0);
    state.counters["extra_mib"] = Counter(std::max(0.0, c.extra_bytes) / 1048576.0);
    state.counters["peak_gflops"] = Counter(c.peak_gflops);
    state.SetLabel(label_of(c));
}

/// % of peak is a derived column: Google Benchmark computes rates after the run, so the
/// reporter adds it where both the rate and the case's peak are known.
class reporter : public benchmark::JSONReporter {
public:
    void ReportRuns(const std::vector<Run>& runs) override {
        std::vector<Run> copy = runs;
        for (auto& r : copy) {
            add_pct(r);
            // a constant counter's coefficient of variation is 0/0: JSON has no NaN, drop it
            for (auto it = r.counters.begin(); it != r.counters.end();)
                it = std::isfinite(it->second.value) ? std::next(it) : r.counters.erase(it);
        }
        benchmark::JSONReporter::ReportRuns(copy);
    }
    static void add_pct(Run& r) {
        const auto g = r.counters.find("gflops_matmul"), p = r.counters.find("peak_gflops");
        if (g == r.counters.end() || p == r.counters.end() || p->second.value <= 0) return;
        // counters reach reporters finished: a rate is already per second
        r.counters["pct_peak"] = benchmark::Counter(100.0 * g->second.value / p->second.value);
    }
};

class console : public benchmark::ConsoleReporter {
public:
    void ReportRuns(const std::vector<Run>& runs) override {
        std::vector<Run> copy = runs;
        for (auto& r : copy) reporter::add_pct(r);
        benchmark::ConsoleReporter::ReportRuns(copy);
    }
};

template <class T>
std::vector<T> csv_list(const std::string& s) {
    std::vector<T> out;
    std::stringstream ss(s);
    std::string item;
    while (std::getline(ss, item, ',')) {
        if (item.empty()) continue;
        std::size_t used = 0;
        long long v = 0;
        try {
            v = std::stoll(item, &used);
        } catch (...) {
            used = 0;
        }
        attn::require(used == item.size() && v >= 0, "'" + item + "' in '" + s + "' is not a non-negative whole number");
        out.push_back(T(v));
    }
    return out;
}

std::vector<std::unique_ptr<bench_case>> build_cases(const sweep& sw, const attn::peak::ceilings& peak) {
    std::vector<const attn::variant*> vars;
    if (sw.variants.empty())
        for (const auto& v : attn::registry()) vars.push_back(&v);
    else
        for (const auto& n : sw.variants) vars.push_back(&attn::find_variant(n));
    const double max_mem = sw.max_memory_mib > 0 ? sw.max_memory_mib * 1048576.0 : 0.5 * double(attn::machine().memory_bytes);
    std::vector<std::unique_ptr<bench_case>> cases;
    std::string skipped;
    for (const auto& mname : sw.modes)
        for (auto dm : sw.d_model)
            for (auto h : sw.heads)
                for (auto g : sw.kv_heads)
                    for (auto n : sw.seq)
                        for (auto b : sw.batch)
                            for (int causal : sw.causal)
                                for (const auto* v : vars)
                                    for (int t : sw.threads) {
                                        problem p = attn::gqa(dm, h, g ? g : h, n);
                                        p.batch = b;
                                        p.causal = causal != 0;
                                        try {
                                            p.validate();
                                        } catch (const attn::error& e) {
                                            if (skipped.empty()) skipped = e.what();
                                            continue;
                                        }
                                        const int threads = t > 0 ? t : peak.threads;
                                        if (!v->threaded && threads != 1) continue; // single-threaded by design
                                        auto c = std::make_unique<bench_case>();
                                        c->var = v;
                                        c->p = p;
                                        c->m = mname == "core" ? mode::core : mode::layer;
                                        c->opt.threads = threads;
                                        c->opt.tile_q = sw.tile_q;
                                        c->opt.tile_kv = sw.tile_kv;
                                        c->seed = sw.seed;
                                        c->max_memory_bytes = max_mem;
                                        c->peak_gflops = threads == 1 ? peak.fma_1t_gflops.median
                                                                      : peak.fma_all_gflops.median * threads / peak.threads;
                                        cases.push_back(std::move(c));
                                    }
    attn::require(!cases.empty(), "the grid holds no valid case" + (skipped.empty() ? std::string() : " (" + skipped + ")"));
    if (!skipped.empty()) std::fprintf(stderr, "attnbench-bench: skipped impossible combinations, e.g. %s\n", skipped.c_str());
    return cases;
}

std::string name_of(const bench_case& c) {
    std::ostringstream s;
    s << c.var->name << "/" << attn::check::mode_name(c.m) << "/d" << c.p.d_model << "/H" << c.p.heads << "/G"
      << c.p.kv_heads << "/N" << c.p.n_q << "/B" << c.p.batch << "/T" << c.opt.threads << (c.p.causal ? "/causal" : "");
    return s.str();
}

} // namespace

int main(int argc, char** argv) {
    // Google Benchmark takes its --benchmark_* flags; ours are parsed from what remains.
    std::string out_path, format = "console";
    std::vector<char*> args(argv, argv + argc);
    for (auto& a : args) {
        if (std::string(a).rfind("--benchmark_format=", 0) == 0) format = std::string(a).substr(19); // write the JSON to a temporary and rename it at the end (atomic)
        const std::string s = a;
        if (s.rfind("--benchmark_out=", 0) == 0) {
            out_path = s.substr(16);
            static std::string tmp;
            tmp = "--benchmark_out=" + out_path + ".tmp";
            a = tmp.data();
        }
    }
    int n = int(args.size());
    benchmark::Initialize(&n, args.data());
    sweep sw;
    CLI::App app{"attnbench-bench: attention performance sweep (Google Benchmark); --benchmark_* flags also work"};
    std::string variants, modes = "core,layer", d_model = "512", heads = "8", kv_heads = "0", seq = "512,1024",
                batch = "1", threads = "0", causal = "0";
    app.add_option("--variant", variants, "variants, comma-separated (default: all)");
    app.add_option("--mode", modes, "core, layer (comma-separated)")->capture_default_str();
    app.add_option("--d-model", d_model, "d_model grid")->capture_default_str();
    app.add_option("--heads", heads, "query heads H grid")->capture_default_str();
    app.add_option("--kv-heads", kv_heads, "key/value heads G grid (0: G = H)")->capture_default_str();
    app.add_option("--seq", seq, "sequence length N grid (N_q = N_kv)")->capture_default_str();
    app.add_option("--batch", batch, "batch grid")->capture_default_str();
    app.add_option("--threads", threads, "thread counts (0: all cores); single-threaded variants run once at 1")->capture_default_str();
    app.add_option("--causal", causal, "0, 1 or 0,1")->capture_default_str();
    app.add_option("--tile-q", sw.tile_q, "query tile of the tiled variants (0: default)");
    app.add_option("--tile-kv", sw.tile_kv, "key/value tile of the tiled variants (0: default)");
    app.add_option("--max-memory", sw.max_memory_mib, "MiB a case may allocate (default: half the RAM)");
    app.add_option("--peak", sw.peak_file, "peak.json from `attnbench peak --out` (default: measure now, ~2 s)");
    app.add_option("--seed", sw.seed, "input seed")->capture_default_str();
    try {
        app.parse(n, args.data());
    } catch (const CLI::ParseError& e) {
        return app.exit(e) == 0 ? 0 : 2;
    }
    try {
        sw.variants.clear();
        std::stringstream vs(variants);
        for (std::string v; std::getline(vs, v, ',');)
            if (!v.empty()) sw.variants.push_back(v);
        sw.modes.clear();
        std::stringstream ms(modes);
        for (std::string m; std::getline(ms, m, ',');) {
            attn::require(m == "core" || m == "layer", "--mode: '" + m + "' is not core or layer");
            sw.modes.push_back(m);
        }
        sw.d_model = csv_list<std::size_t>(d_model);
        sw.heads = csv_list<std::size_t>(heads);
        sw.kv_heads = csv_list<std::size_t>(kv_heads);
        sw.seq = csv_list<std::size_t>(seq);
        sw.batch = csv_list<std::size_t>(batch);
        sw.threads = csv_list<int>(threads);
        sw.causal = csv_list<int>(causal);

        attn::peak::ceilings peak;
        if (!sw.peak_file.empty()) {
            std::ifstream f(sw.peak_file);
            attn::require(bool(f), sw.peak_file + ": cannot read");
            std::stringstream text;
            text << f.rdbuf();
            peak = attn::peak::from_json(text.str());
        } else {
            attn::peak::options po;
            po.repetitions = 5;
            po.fma_seconds = 0.05;
            po.triad_bytes = 64u << 20;
            peak = attn::peak::measure(po);
        }
        static auto cases = build_cases(sw, peak);
        for (auto& c : cases)
            benchmark::RegisterBenchmark(name_of(*c).c_str(), [p = c.get()](benchmark::State& s) { run_case(s, *p); })
                ->UseRealTime()
                ->Unit(benchmark::kMillisecond);

        attn::run_info info;
        info.seed = sw.seed;
        info.threads = peak.threads;
        for (const auto& [k, v] : attn::collect_metadata(info)) benchmark::AddCustomContext("attnbench_" + k, v);
        benchmark::AddCustomContext("attnbench_peak_fma_gflops_1_thread", std::to_string(peak.fma_1t_gflops.median));
        benchmark::AddCustomContext("attnbench_peak_fma_gflops_all_threads", std::to_string(peak.fma_all_gflops.median));
        benchmark::AddCustomContext("attnbench_peak_triad_gbs_all_threads", std::to_string(peak.triad_all_gbs.median));
        benchmark::AddCustomContext("attnbench_counters",
                                    "gflops_matmul: 2 FLOP per multiply-add of the matmuls (GFLOP/s); gflops_full: every "
                                    "operation incl. softmax (GFLOP/s); pct_peak: gflops_matmul / peak_gflops (%); "
                                    "peak_gflops: measured FMA peak for the case's thread count; bytes: minimum traffic "
                                    "(inputs once, outputs once); intensity: matmul FLOP per byte; scratch_mib: the "
                                    "variant's own account of its extra memory (MiB); extra_mib: measured peak resident "
                                    "memory one kernel call adds, inputs and output preallocated (MiB, VmHWM after a reset; "
                                    "layer mode includes the projection buffers)");
        console con;
        reporter file, json_display;
        benchmark::BenchmarkReporter* display = &con;
        if (format == "json") display = &json_display;
        if (format == "csv") display = nullptr; // Google Benchmark's own CSV (without pct_peak)
        if (out_path.empty()) benchmark::RunSpecifiedBenchmarks(display);
        else benchmark::RunSpecifiedBenchmarks(display, &file);
        benchmark::Shutdown();
        if (!out_path.empty()) std::filesystem::rename(out_path + ".tmp", out_path);
    } catch (const attn::error& e) {
        std::fprintf(stderr, "attnbench-bench: error: %s\n", e.what());
        return 2;
    }
    return 0;
}
