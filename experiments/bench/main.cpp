// attnbench-bench: the one timing harness. It runs attn::sweep_case values (attn.cases) under
// Google Benchmark: given as JSON (--case, --cases FILE; what `attnbench report` passes), or as
// a grid of flags (--variant, --mode, --d-model, ...) that attn::expand turns into cases, the
// same way a sweep file's grids are. Every case checks its output against the fp64 reference
// once (the last query rows of every sequence, attn::check::tail_problem; decode: the last row
// of the full causal forward) before anything is timed; a wrong kernel is reported with
// SkipWithError, never timed. Each benchmark is named by the case's id and labelled with the
// case itself as JSON, so whoever reads the output reads structured fields. Counters are named
// by attn.figures' one table: each case's quantities (FLOPs, bytes, intensity, the ceilings at
// its thread count) and what only the harness measures, and after the run the figures derived
// from each benchmark's time (GFLOP/s, bandwidths, % of the ceilings; bench.reporters). A decode
// case is two benchmarks, the whole step (ID) and the attention core alone (ID/core). Probes run
// beside the cases at each of their thread counts (bench.probes): the FMA probe (fma-tT) beside
// every case on the host, whose ratio to peak.json's FMA peak gives each call its ceiling as
// measured in the same run (pct_peak_alongside; a decode core's roofline alongside), and the
// triad and read probes (triad-tT, read-tT) beside decode cases, paired with every core. All
// --benchmark_* flags work (--benchmark_enable_random_interleaving shuffles the repetitions of
// every benchmark of the run together); the JSON is written atomically.
#include <cmath>
#include <cstdint>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <new>
#include <string>
#include <utility>
#include <vector>
#include <omp.h>
#include <benchmark/benchmark.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include "../cli/numbers.hpp"
#include "../cli/process.hpp"
#include "../cli/case_flags.hpp"
import attn.count;
import attn.peak;
import attn.results;
import attn.variants;
import attn.kernels;
import bench.decode;
import bench.probes;
import bench.harness;
import bench.reporters;

namespace {

using attn::operator""_counter;
using attn::problem;
using bench::mib;
using bench::timed_case;
using benchmark::Counter;
using json = nlohmann::json;

/// A core or layer case in storage type T (float, double, bf16, f16).
template <class T>
void run_case(benchmark::State& state, timed_case& c) {
    const std::size_t elem = sizeof(T);
    const bool layer = c.k.mode == attn::mode::layer;
    const auto m = c.k.mode;
    // memory guard: what the variant would allocate, on top of the inputs, must fit
    const double scratch = double(c.var->scratch_bytes(c.p, c.opt));
    const double resident = double(attn::resident_bytes(c.p, layer, elem));
    if (scratch + resident > c.max_memory_bytes)
        return state.SkipWithError((c.var->name + " would need " + mib(scratch + resident) + " (" + mib(scratch) +
                                    " of it scratch) > --max-memory " + mib(c.max_memory_bytes))
                                       .c_str());
    if (!c.in) { // bf16/f16: the inputs rounded to the format, as the reference sees them
        auto in = attn::check::make_inputs(c.p, m, c.seed, c.k.magnitude);
        if constexpr (attn::is_half<T>) in = attn::check::rounded<T>(in);
        c.in = std::make_unique<attn::check::inputs>(std::move(in));
    }
    const auto& in = *c.in;
    if (c.var->device && !c.device) // a device variant's case: one upload, checked and then timed
        c.device = c.var->device.prepare(attn::check::device_inputs_of(c.p, m, attn::precision_of<T>, in), c.opt);
    if (!c.checked) { // once per case, before any timing
        c.checked = true;
        std::vector<T> out;
        if (c.device) {
            c.device->run();
            const std::vector<float> back = c.device->output();
            out.assign(back.begin(), back.end());
        } else {
            out = attn::check::run<T>(*c.var, c.p, m, in, c.opt);
        }
        if (const std::size_t bad = attn::check::non_finite_count(out); bad > 0) // never a silent NaN
            c.check_error = attn::check::non_finite_message(bad, out.size(), attn::check::largest_magnitude(in),
                                                            attn::precision_of<T>);
        const std::size_t width = layer ? c.p.d_model : c.p.o_width(), rows = 16;
        const problem tp = attn::check::tail_problem(c.p, rows);
        const auto tin = attn::check::tail_inputs(c.p, m, in, rows);
        auto e = attn::check::expect(tp, m, tin, attn::precision_of<T>);
        attn::check::charge_roundings(e, *c.var, tp, m, attn::precision_of<T>, tin);
        const auto met = attn::check::compare(attn::check::tail_rows(out, c.p, width, rows), e.ref, e.bound,
                                              attn::check::unit_roundoff<T>(), e.store);
        if (!met.pass && c.check_error.empty()) {
            char msg[200];
            std::snprintf(msg, sizeof msg,
                          "output differs from the fp64 reference: max abs error %.3g, %.3g x the bound", met.max_abs,
                          met.ratio);
            c.check_error = msg;
        }
    }
    if (!c.check_error.empty()) return state.SkipWithError(c.check_error.c_str());
    if (c.device) return bench::time_on_device(state, c, attn::part::run); // the device's clock
    auto cast = [](const std::vector<float>& v) {
        std::vector<T> t(v.size());
        for (std::size_t i = 0; i < v.size(); ++i) t[i] = T(v[i]);
        return t;
    };
    if (!layer) {
        const auto q = cast(in.q), k = cast(in.k), v = cast(in.v);
        const attn::problem& p = c.p;
        std::vector<T> out(p.batch * p.n_q * p.o_width());
        const attn::core_io<T> io{attn::interleaved_heads<const T>(q.data(), p.batch, p.n_q, p.heads, p.qk_dim()),
                                  attn::interleaved_heads<const T>(k.data(), p.batch, p.n_kv, p.kv_heads, p.qk_dim()),
                                  attn::interleaved_heads<const T>(v.data(), p.batch, p.n_kv, p.kv_heads, p.v_dim()),
                                  attn::interleaved_heads<T>(out.data(), p.batch, p.n_q, p.heads, p.v_dim())};
        const auto& core = c.var->get<T>().core;
        time_calls(state, c, [&] {
            core(c.p, io, c.opt);
            benchmark::DoNotOptimize(out.data());
            benchmark::ClobberMemory();
        });
    } else {
        attn::weights<T> w;
        for (const auto& t : in.w.t) w.t.push_back(cast(t));
        const auto xq = cast(in.x_q), xkv = cast(in.x_kv);
        std::vector<T> y(c.p.batch * c.p.n_q * c.p.d_model);
        attn::layer_buffers<T> ws; // fresh: its Q, K, V and context buffers count as extra memory
        time_calls(state, c, [&] {
            attn::run_layer<T>(*c.var, c.p, w, xq.data(), xkv.data(), y.data(), c.opt, ws);
            benchmark::DoNotOptimize(y.data());
            benchmark::ClobberMemory();
        });
    }
    bench::put(state, "scratch_mib"_counter, scratch / 1048576.0);
}

/// The cases to run: --case and --cases when given, the flags' grid otherwise.
std::vector<attn::sweep_case> cases_from(const std::vector<std::string>& given, const std::string& file,
                                         const attn::grid& g, int all_threads) {
    std::vector<attn::sweep_case> out;
    auto add = [&](const nlohmann::ordered_json& j, const std::string& where) {
        try {
            if (j.is_array())
                for (const auto& x : j) out.push_back(x.get<attn::sweep_case>());
            else
                out.push_back(j.get<attn::sweep_case>());
        } catch (const attn::error& e) {
            throw attn::error(where + ": " + e.what());
        }
    };
    for (const auto& s : given) add(attn::parse_json(s, "--case"), "--case");
    if (!file.empty()) add(attn::read_json(file), file);
    if (given.empty() && file.empty()) out = attn::expand({g}, all_threads);
    attn::require(!out.empty(), "no case to run: the grid is empty");
    return out;
}

/// A device variant's ceilings, measured on first use (each device's variants share them).
const attn::device_peak& device_peak_of(const attn::variant& v) {
    static std::map<attn::device, attn::device_peak> measured;
    const auto it = measured.find(v.serves.device);
    if (it != measured.end()) return it->second;
    attn::require(bool(v.device.peak), "variant '" + v.name + "' computes on a device but has no ceilings to measure");
    return measured[v.serves.device] = v.device.peak();
}

timed_case prepare(const attn::sweep_case& k, const attn::peak::ceilings& peak, double max_memory, std::uint64_t seed,
                   std::size_t tile_q, std::size_t tile_kv) {
    timed_case c;
    c.k = k;
    c.var = &attn::find_variant(k.variant);
    // what the variant serves (its device, the family, the precision; decode: the cache's type,
    // the step computing in fp32), refused in one line naming the case
    // (a device decodes the step's core alone, so that is the problem it is asked about)
    const problem asked = k.decode() && c.var->device ? attn::decode_problem(k.shape(), k.context) : k.shape();
    if (const std::string why = attn::refusal(*c.var, asked, k.mode, k.precision, k.device); !why.empty())
        throw attn::error("case " + k.id() + ": " + why);
    if (k.decode()) {
        attn::require(k.magnitude == 1.0, "case " + k.id() +
                                              ": magnitude applies to core and layer cases (a decode step's inputs "
                                              "are drawn in [-1, 1])");
        c.kv = attn::to_kv_dtype(k.precision);
    }
    attn::require(c.var->threaded || k.threads == 1,
                  "case " + k.id() + ": variant '" + k.variant + "' is single-threaded; threads must be 1");
    // core mode runs the family's attention core alone, on the problem the family hands it
    c.p = k.mode == attn::mode::core ? attn::attention_problem(k.shape()) : k.shape();
    c.opt.threads = int(k.threads);
    c.opt.tile_q = tile_q;
    c.opt.tile_kv = tile_kv;
    c.seed = seed;
    c.max_memory_bytes = max_memory;
    // what one call does and its ceilings (% of peak against the peak of the case's precision:
    // attn::quantities' put_ceilings says which)
    // a device variant's case is held to the device's ceilings (measured once a process)
    c.q = attn::quantities(k, c.var->device ? bench::device_ceilings(device_peak_of(*c.var), k) : peak);
    return c;
}

} // namespace

int main(int argc, char** argv) {
    if (!attn::cli::start_process("attnbench-bench", attn::check_omp_env)) return 2;
    // Google Benchmark takes its --benchmark_* flags; ours are parsed from what remains. The JSON
    // goes to a temporary file beside the target (attn::temporary_for, the writers' rule in
    // attn.results:files), renamed over it at the end (atomic).
    std::string out_path, tmp_path, format = "console";
    bool out_given = false;
    std::vector<char*> args(argv, argv + argc);
    static std::string tmp_arg;
    for (auto& a : args) {
        const std::string s = a;
        if (s.rfind("--benchmark_format=", 0) == 0) format = s.substr(19);
        if (s.rfind("--benchmark_out=", 0) == 0) {
            out_given = true;
            out_path = s.substr(16);
            tmp_path = attn::temporary_for(out_path);
            tmp_arg = "--benchmark_out=" + tmp_path;
            a = tmp_arg.data();
        }
    }
    int n = int(args.size());
    benchmark::Initialize(&n, args.data());
    CLI::App app{"attnbench-bench: the attention timing harness (Google Benchmark); --benchmark_* flags also work"};
    std::vector<std::string> case_json;
    std::string cases_file, peak_file;
    attn::grid g;
    g.variants = {"all"};
    g.modes = {attn::mode::core, attn::mode::layer};
    g.seq = {512, 1024};
    g.context = {1024};
    std::size_t tile_q = 0, tile_kv = 0;
    double max_memory_mib = 0;
    std::uint64_t seed = 1;
    app.add_option("--case", case_json, "a case as JSON (attn.cases; repeatable); replaces the grid flags");
    app.add_option("--cases", cases_file, "a file holding a JSON case or an array of cases")->option_text("FILE");
    attn::cli::case_flags grid_flags; // --variant, --mode, --precision, --d-model, ... : the field table's flags
    attn::cli::add_case_flags(app, grid_flags, g);
    app.add_option("--tile-q", tile_q, "query tile of the tiled variants (0: default)")
        ->check(CLI::Range(std::size_t(0), std::size_t(1) << 20));
    app.add_option("--tile-kv", tile_kv, "key/value tile of the tiled variants (0: default)")
        ->check(CLI::Range(std::size_t(0), std::size_t(1) << 20));
    app.add_option("--max-memory", max_memory_mib, "MiB a case may allocate (default: half the RAM)");
    app.add_option("--peak", peak_file, "peak.json from `attnbench peak --out` (default: measure now, ~2 s)");
    app.add_option("--seed", seed, "input seed")->capture_default_str();
    attn::cli::strict_values(app);
    try {
        app.parse(n, args.data());
    } catch (const CLI::ParseError& e) {
        return app.exit(e) == 0 ? 0 : 2;
    }
    try {
        attn::cli::apply_case_flags(grid_flags, g);
        attn::check_threads(std::size_t(omp_get_max_threads()), "OMP_NUM_THREADS");
        if (out_given) { // the output is checked, and its temporary made, before any work
            attn::check_output_file(out_path);
            std::error_code ec;
            if (const auto parent = std::filesystem::path(out_path).parent_path(); !parent.empty())
                std::filesystem::create_directories(parent, ec);
            const bool writable = bool(std::ofstream(tmp_path, std::ios::binary | std::ios::trunc));
            attn::require(writable, out_path + ": cannot write the output (" + std::strerror(errno) + ")");
        }
        for (auto t : g.threads) attn::check_threads(t, "--threads", true);
        // given, it is a positive finite size: 0, NaN or a negative never silently means the default
        attn::require(!app.count("--max-memory") ||
                          (std::isfinite(max_memory_mib) && max_memory_mib > 0 && max_memory_mib <= 1e12),
                      "--max-memory " + app.get_option("--max-memory")->as<std::string>() +
                          " is not a size: give MiB, a finite number in (0, 1e12]");
        attn::peak::ceilings peak;
        if (!peak_file.empty()) {
            peak = attn::peak::read_ceilings(peak_file);
        } else {
            attn::peak::options po;
            po.repetitions = 5;
            po.fma_seconds = 0.05;
            po.triad_bytes = 64u << 20;
            peak = attn::peak::measure(po);
        }
        const double max_memory =
            max_memory_mib > 0 ? max_memory_mib * 1048576.0 : 0.5 * double(attn::machine().memory_bytes);
        static std::vector<timed_case> cases;
        for (const auto& k : cases_from(case_json, cases_file, g, peak.threads))
            cases.push_back(prepare(k, peak, max_memory, seed, tile_q, tile_kv));
        // the probes (bench.probes), once per thread count: the FMA probe beside every case on the
        // host, the bandwidth probes beside its decode cases too
        for (auto& c : cases) {
            const bool decode = c.k.decode();
            // a device variant's time is its own clock's (CUDA events, an L2 flush before each call)
            const bool device_timed = bool(c.var->device);
            if (decode && device_timed) { // a device decodes over its cache: the core alone (no step: the
                                          // projections around it are the host's), against the device's read
                bench::registered()[c.k.id() + "/core"] = {&c.k, attn::part::core, c.opt.threads};
                benchmark::RegisterBenchmark((c.k.id() + "/core").c_str(),
                                             [p = &c](benchmark::State& s) {
                                                 bench::guard_memory(s, *p, [&] { bench::run_decode_core(s, *p); });
                                             })
                    ->UseManualTime()
                    ->Unit(benchmark::kMillisecond);
                continue;
            }
            bench::registered()[c.k.id()] = {&c.k, attn::part::run, c.opt.threads};
            auto* b = benchmark::RegisterBenchmark(c.k.id().c_str(), [p = &c, decode](benchmark::State& s) {
                bench::guard_memory(s, *p, [&] {
                    if (decode) return bench::run_decode_step(s, *p);
                    const auto prec = attn::to_precision(p->k.precision);
                    if (prec == attn::precision::bf16) return run_case<attn::bf16>(s, *p);
                    if (prec == attn::precision::f16) return run_case<attn::f16>(s, *p);
                    if (prec == attn::precision::f64) return run_case<double>(s, *p);
                    run_case<float>(s, *p);
                });
            });
            b->Unit(benchmark::kMillisecond);
            if (device_timed)
                b->UseManualTime();
            else
                b->UseRealTime();
            if (!device_timed) bench::register_probe(bench::probe::fma, c.opt.threads, peak);
            if (!decode) continue;
            bench::registered()[c.k.id() + "/core"] = {&c.k, attn::part::core, c.opt.threads};
            benchmark::RegisterBenchmark(
                (c.k.id() + "/core").c_str(),
                [p = &c](benchmark::State& s) { bench::guard_memory(s, *p, [&] { bench::run_decode_core(s, *p); }); })
                ->UseRealTime()
                ->Unit(benchmark::kMillisecond);
            for (const auto which : {bench::probe::triad, bench::probe::read})
                bench::register_probe(which, c.opt.threads, peak);
        }

        attn::run_info info;
        info.seed = seed;
        info.threads = peak.threads;
        for (const auto& [k, v] : attn::collect_metadata(info)) benchmark::AddCustomContext("attnbench_" + k, v);
        benchmark::AddCustomContext("attnbench_peak_fma_gflops_1_thread", std::to_string(peak.fma_1t_gflops.median));
        benchmark::AddCustomContext("attnbench_peak_fma_gflops_all_threads",
                                    std::to_string(peak.fma_all_gflops.median));
        benchmark::AddCustomContext("attnbench_peak_triad_gbs_all_threads", std::to_string(peak.triad_all_gbs.median));
        benchmark::AddCustomContext("attnbench_peak_kind",
                                    "peak_gflops of an f32 or f16 case: the measured fp32 FMA peak; bf16 (decode steps "
                                    "aside): the measured AMX-BF16 tile peak where the CPU has it, else the vdpbf16ps "
                                    "peak where it has AVX512_BF16, else the fp32 FMA peak; f64: half of the fp32 FMA "
                                    "peak");
        benchmark::AddCustomContext("attnbench_f16_path", attn::kernels::isa::f16_path());
        for (const auto& c : cases) // the device's ceilings, where a case computes on one (measured once)
            if (c.var->device) {
                const attn::device_peak& d = device_peak_of(*c.var);
                const std::string dev(attn::enum_name(c.var->serves.device));
                benchmark::AddCustomContext("attnbench_peak_" + dev + "_matmul_16bit_gflops",
                                            std::to_string(d.matmul_16bit_gflops));
                benchmark::AddCustomContext("attnbench_peak_" + dev + "_read_gbs", std::to_string(d.read_gbs));
                benchmark::AddCustomContext("attnbench_peak_" + dev + "_copy_gbs", std::to_string(d.copy_gbs));
                benchmark::AddCustomContext("attnbench_peak_" + dev + "_how", d.what);
                break;
            }
        std::string schema = "label: the case (attn.cases) as JSON; the counters, from attn.figures' one table "
                             "(name [unit]: meaning):";
        for (const auto& sp : attn::counter_table)
            schema += " " + std::string(sp.name) + " [" + std::string(sp.unit) + "]: " + std::string(sp.meaning) + ";";
        benchmark::AddCustomContext("attnbench_counters", schema);
        bench::with_derived<benchmark::ConsoleReporter> console;
        bench::with_derived<benchmark::JSONReporter> file(true), json_display(true);
        benchmark::BenchmarkReporter* display = &console;
        if (format == "json") display = &json_display;
        if (format == "csv") display = nullptr; // Google Benchmark's own CSV (without the derived columns)
        if (!out_given)
            benchmark::RunSpecifiedBenchmarks(display);
        else
            benchmark::RunSpecifiedBenchmarks(display, &file);
        benchmark::Shutdown();
        if (out_given) {
            attn::check_output_file(out_path); // still a regular file or nothing: never replace anything else
            std::error_code ec;
            std::filesystem::rename(tmp_path, out_path, ec);
            attn::require(!ec, out_path + ": cannot move the output into place (" + ec.message() + ")");
        }
    } catch (const attn::error& e) {
        std::fprintf(stderr, "attnbench-bench: error: %s\n", e.what());
        std::error_code ignored; // a refused run leaves no temporary behind
        if (out_given) std::filesystem::remove(tmp_path, ignored);
        return 2;
    } catch (const std::bad_alloc& e) { // attn::out_of_memory says what it was for
        std::fprintf(stderr, "attnbench-bench: out of memory: %s\n",
                     dynamic_cast<const attn::out_of_memory*>(&e) ? e.what() : "an allocation failed (std::bad_alloc)");
        return 3;
    }
    return 0;
}
