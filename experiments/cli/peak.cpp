// attnbench peak: this machine's measured ceilings (fp32 FMA throughput and triad bandwidth,
// 1 thread and all threads), the roofline that every "% of peak" refers to, and a streaming
// probe at 0.5-12 FLOP per byte read that shows where this machine reaches it.
#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <tuple>
#include <vector>
#include <nlohmann/json.hpp>
#include "commands.hpp"
#include "output.hpp"
import attn.count;
import attn.peak;
import attn.results;

namespace attn::cli {
namespace {

struct peak_args {
    bool json = false;
    std::string out;
    peak::options opt;
    double triad_mib = 0;
};

std::string render_ceilings(const peak::ceilings& c, int repetitions) {
    text_table t({{"ceiling", "", false},
                  {"threads", "", true},
                  {"median", "", true},
                  {"best", "", true},
                  {"worst", "", true},
                  {"unit", "", false},
                  {"other load", "CPUs", true}});
    auto row = [&](const char* name, int threads, const peak::stats& s, const char* unit) {
        t.add_row({name, std::to_string(threads), format_number(s.median, 1), format_number(s.best, 1),
                   format_number(s.worst, 1), unit,
                   s.others_busy_cpus < 0 ? "?" : format_number(s.others_busy_cpus, 2)});
    };
    row("fp32 FMA", 1, c.fma_1t_gflops, "GFLOP/s");
    row("fp32 FMA", c.threads, c.fma_all_gflops, "GFLOP/s");
    if (!c.bf16_dot_1t_gflops.samples.empty()) {
        row("bf16 dot (vdpbf16ps)", 1, c.bf16_dot_1t_gflops, "GFLOP/s");
        row("bf16 dot (vdpbf16ps)", c.threads, c.bf16_dot_all_gflops, "GFLOP/s");
    }
    if (!c.amx_bf16_1t_gflops.samples.empty()) {
        row("bf16 AMX tiles (tdpbf16ps)", 1, c.amx_bf16_1t_gflops, "GFLOP/s");
        row("bf16 AMX tiles (tdpbf16ps)", c.threads, c.amx_bf16_all_gflops, "GFLOP/s");
    }
    row("read (sum of b, c)", 1, c.read_1t_gbs, "GB/s");
    row("read (sum of b, c)", c.threads, c.read_all_gbs, "GB/s");
    for (const auto& f : c.read_footprints)
        row(("read over " + format_bytes(f.bytes)).c_str(), f.threads, f.gbs, "GB/s");
    row("triad a=b+s*c", 1, c.triad_1t_gbs, "GB/s");
    row("triad a=b+s*c", c.threads, c.triad_all_gbs, "GB/s");
    for (const auto& p : c.stream)
        row(("stream " + format_number(p.flop_per_byte, 1) + " FLOP/B").c_str(), c.threads, p.gbs, "GB/s");
    std::string s = "attnbench peak: this machine's ceilings, " + std::to_string(repetitions) +
                    " timed repetitions each (after a warm-up); median, best and worst\n\n" + t.render() + "\n";
    s += "FMA: " + c.fma_instruction + ", xsimd " + c.simd_arch + " batches of " + std::to_string(c.simd_lanes) +
         " f32, " + std::to_string(c.accumulators) +
         " independent chains per thread; 1 FMA = 2 FLOP; GFLOP/s = 10^9 FLOP/s\n";
    s += "triad: 3 arrays of " + format_bytes(c.triad_array_bytes) + " (" + std::to_string(c.triad_elements) +
         " f32 each, 2 MiB-aligned, huge pages requested), 12 byte per element counted (write-allocate not counted); "
         "GB/s = 10^9 byte/s\n";
    s += "read: arrays b and c of the triad summed, each thread its share, four independent sums: bytes read; the "
         "memory ceiling of a decode step (it reads its cache and writes almost nothing)\n";
    if (!c.read_footprints.empty())
        s += "read over F: the same over the first F/2 of b and of c; a read-only stream runs at DRAM speed (within "
             "15% of the read rows) from " +
             format_bytes(peak::dram_footprint(c, 1)) + " on 1 thread and " +
             format_bytes(peak::dram_footprint(c, c.threads)) + " on " + std::to_string(c.threads) +
             ": a decode cache below that is read partly from the caches (the last-level cache sysfs reports: " +
             format_bytes(machine().l3_bytes) + ")\n";
    if (c.fma_1t_gflops.median > 0)
        s += "scaling 1 -> " + std::to_string(c.threads) + " threads: FMA " +
             format_number(c.fma_all_gflops.median / c.fma_1t_gflops.median, 2) + "x, read " +
             format_number(c.read_all_gbs.median / c.read_1t_gbs.median, 2) + "x, triad " +
             format_number(c.triad_all_gbs.median / c.triad_1t_gbs.median, 2) + "x\n";
    if (!c.stream.empty()) {
        s += "stream I FLOP/B: arrays b and c of the triad read once as the read rows read them (four streams "
             "prefetched ahead), each batch feeding 2I FMAs (I FLOP per byte read); "
             "against the roofline min(read, FMA / I) of the medians above:";
        for (const auto& p : c.stream) {
            const double roof = roofline_gbs(c.read_all_gbs.median, c.fma_all_gflops.median, p.flop_per_byte);
            s += " " + format_number(p.flop_per_byte, 1) + ": " + format_number(100 * p.gbs.median / roof, 0) +
                 "% of " + format_number(roof, 1) + ";";
        }
        s.back() = '\n';
    }
    s += "other load: CPUs that other processes kept busy during the repetitions (0 on a quiet machine)\n";
    double busy = 0, spread = 1;
    std::vector<const peak::stats*> all{&c.fma_1t_gflops, &c.fma_all_gflops, &c.read_1t_gbs,
                                        &c.read_all_gbs,  &c.triad_1t_gbs,   &c.triad_all_gbs};
    for (const auto& p : c.stream) all.push_back(&p.gbs);
    for (const auto* st : all) {
        busy = std::max(busy, st->others_busy_cpus);
        if (st->best > 0) spread = std::min(spread, st->worst / st->best);
    }
    if (busy > 0.1)
        s += "warning: other processes kept up to " + format_number(busy, 2) +
             " CPUs busy: these ceilings are low; rerun when the machine is quiet\n";
    else if (spread < 0.75)
        s += "note: some repetitions were " + format_number(100 * (1 - spread), 0) +
             "% below the best; the medians are the figures to use\n";
    return s;
}

void run_peak(const peak_args& a) {
    peak::options opt = a.opt;
    if (a.triad_mib > 0) opt.triad_bytes = std::size_t(a.triad_mib * 1024 * 1024);
    const peak::ceilings c = peak::measure(opt);
    run_info info;
    info.threads = c.threads;
    const attn::metadata meta = collect_metadata(info);
    nlohmann::ordered_json j;
    j["metadata"] = metadata_json(meta);
    j["peak"] = nlohmann::ordered_json::parse(peak::to_json(c));
    const std::string json = j.dump(2) + "\n";
    // Print first: a bad --out path then costs the file, not the measurement.
    if (a.json) {
        std::fputs(json.c_str(), stdout);
    } else {
        std::fputs(render_ceilings(c, opt.repetitions).c_str(), stdout);
        std::fputs(("\n" + render_metadata(meta)).c_str(), stdout);
    }
    std::fflush(stdout);
    if (!a.out.empty()) {
        // one row per ceiling and thread count, the columns of peak.csv
        nlohmann::ordered_json rows = nlohmann::ordered_json::array();
        const auto& p = j["peak"];
        const int all = p["threads"].get<int>();
        for (const auto& [ceiling, key, threads, unit] :
             {std::tuple{"fma_f32", "fma_f32_gflops_1_thread", 1, "GFLOP/s"},
              std::tuple{"fma_f32", "fma_f32_gflops_all_threads", all, "GFLOP/s"},
              std::tuple{"read", "read_gbs_1_thread", 1, "GB/s"},
              std::tuple{"read", "read_gbs_all_threads", all, "GB/s"},
              std::tuple{"triad", "triad_gbs_1_thread", 1, "GB/s"},
              std::tuple{"triad", "triad_gbs_all_threads", all, "GB/s"},
              std::tuple{"bf16_dot", "bf16_dot_gflops_1_thread", 1, "GFLOP/s"},
              std::tuple{"bf16_dot", "bf16_dot_gflops_all_threads", all, "GFLOP/s"},
              std::tuple{"amx_bf16", "amx_bf16_gflops_1_thread", 1, "GFLOP/s"},
              std::tuple{"amx_bf16", "amx_bf16_gflops_all_threads", all, "GFLOP/s"}}) {
            if (!p.contains(key)) continue; // bf16_dot, amx_bf16: only where the CPU has them
            const auto& s = p[key];
            rows.push_back({{"ceiling", ceiling},
                            {"threads", threads},
                            {"median", s["median"]},
                            {"best", s["best"]},
                            {"worst", s["worst"]},
                            {"unit", unit},
                            {"repetitions", s["repetitions"]},
                            {"others_busy_cpus", s["others_busy_cpus"]}});
        }
        std::fprintf(a.json ? stderr : stdout, "wrote %s\n", cli::write_atomic(a.out, "peak.json", json).c_str());
        cli::write_atomic(a.out, "peak.csv", rows_csv(rows));
    }
}

} // namespace

void add_peak(CLI::App& app) {
    auto a = std::make_shared<peak_args>();
    auto* cmd = app.add_subcommand("peak", "measure this machine's fp32 FMA throughput and triad bandwidth");
    cmd->add_flag("--json", a->json, "print JSON (metadata and ceilings) instead of tables");
    cmd->add_option("--out", a->out, "also write peak.json (metadata and ceilings) and peak.csv here")
        ->option_text("DIR")
        ->check(output_dir());
    cmd->add_option("--repetitions", a->opt.repetitions, "timed repetitions per figure")
        ->check(CLI::Range(1, 1000))
        ->capture_default_str();
    cmd->add_option("--threads", a->opt.threads, "threads of the all-thread figures (0: OpenMP's maximum)")
        ->check(threads_in(true))
        ->capture_default_str();
    cmd->add_option("--fma-seconds", a->opt.fma_seconds, "length of one FMA repetition in seconds")
        ->check(finite_in(1e-4, 60.0))
        ->capture_default_str();
    cmd->add_option("--accumulators", a->opt.accumulators, "FMA chains per thread: 8, 12, 16 (0: the fastest)")
        ->check(CLI::IsMember({0, 8, 12, 16}))
        ->capture_default_str();
    cmd->add_option("--triad-mib", a->triad_mib, "MiB per triad array (default: max(4 x L3, 64 MiB))")
        ->check(finite_in(0.001, 1e6));
    cmd->callback([a] { run_peak(*a); });
}

} // namespace attn::cli
