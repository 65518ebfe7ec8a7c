// attnbench decode: what a decode step costs per token as the key/value cache grows, for MHA,
// GQA and MQA (issue 7). d_model 1024, H 16, d_head 64, G in {1, 2, 4, 8, 16}, L from 256 to
// 65536, batch 1 and 8 by default. For every case: the decode step's latency (median over
// repetitions), the attention core's alone, the cache's size, the bandwidth achieved against
// the measured triad ceiling and against the roofline min(triad, FMA peak / (H/2G) FLOP per
// byte), FLOP/s and the extra memory. Every (batch, G, variant) is checked
// against the fp64 reference (attn.check's tolerance policy) before anything is timed.
//
// Timing: steady_clock around `inner` back-to-back calls (inner chosen so one repetition lasts
// >= 5 ms), after warm-up for at least 50 ms (steps) or 20 ms (core); the figure is the median
// over --repetitions (default 11) of the mean call time per repetition. The G of one (batch, L)
// are timed round-robin, repetition by repetition, so the ratios between families are measured
// over the same minutes of this VM's drifting bandwidth; a cache that fits in the last-level cache
// gets one untimed call before each repetition to bring it back after the others'. Before each
// step the cache is cut back to L tokens, so every timed step attends over exactly L+1 keys. The
// caches hold random values (filled per batch and L); timing does not depend on them.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>
#include <omp.h>
#include <nlohmann/json.hpp>
#include "commands.hpp"
#include "output.hpp"
import attn.variants;
import attn.decode;
import attn.peak;
import attn.results;
import attn.stats;

namespace attn::cli {
namespace {

struct decode_args {
    std::vector<std::string> variants{"parallel"};
    std::size_t d_model = 1024, heads = 16, d_head = 64;
    std::vector<std::size_t> kv_heads{1, 2, 4, 8, 16}, context, batch{1, 8};
    int threads = 0, repetitions = 11;
    double min_rep_ms = 5.0, max_memory_gib = 0;
    bool quick = false, markdown = false;
    std::string out = "results/decode", peak_file;
    std::uint64_t seed = 1;
};

struct row {
    std::string variant, family, skipped;
    std::size_t batch = 0, G = 0, L = 0, inner = 0, reps = 0;
    double cache_mib = 0, step_us = 0, step_us_min = 0, step_us_max = 0, core_us = 0;
    double kv_gbs = 0, kv_pct = 0, step_gbs = 0, step_pct = 0, gflops = 0;
    double triad_adj = 0, kv_pct_adj = 0; ///< triad measured just before the core's timing (DRAM-sized caches only)
    double flop_per_byte = 0;             ///< the core's FLOPs per cache byte read: H / (2G)
    double roof_gbs = 0, kv_pct_roof = 0; ///< min(triad, FMA peak / flop_per_byte), the triad measured alongside if any
    std::uint64_t kv_bytes = 0, weight_bytes = 0, flops = 0;
    std::size_t extra_bytes = 0;
    long long extra_rss_kib = -1;
    double check_ratio = 0;
};

/// One (batch, G) of the grid: its layer, decode check, weights, inputs and outputs, and the cache
/// of the L being timed.
struct family_case {
    std::size_t G = 0;
    problem layer;
    bool pass = false;
    double check_ratio = 0;
    weights<float> w;
    decode_workspace<float> ws;
    std::vector<float> x, q, y, ctx;
    std::unique_ptr<kv_cache<float>> cache;
};

using clock_type = std::chrono::steady_clock;

/// Calls needed for one repetition to last at least min_ms.
template <class F>
std::size_t calibrate(F&& f, double min_ms) {
    const auto t0 = clock_type::now();
    f();
    const double ms = std::max(1e-6, std::chrono::duration<double, std::milli>(clock_type::now() - t0).count());
    return std::max<std::size_t>(1, std::size_t(std::ceil(min_ms / ms)));
}

/// One call to time: a decode step or the core of one G, and whether its cache fits in the
/// last-level cache (then each repetition starts with one untimed call that brings it back).
struct timed_call {
    std::function<void()> f;
    bool rewarm = false;
};

/// Median, fastest and slowest repetition in µs per call, and calls per repetition.
struct timing {
    double median = 0, lo = 0, hi = 0;
    std::size_t inner = 1;
};

/// Times the calls of one (batch, L), one per G, round-robin. Each first warms up (at least two
/// calls and warm_ms) and gets `inner` calls per repetition (>= min_rep_ms); then repetition r of
/// every G runs before repetition r + 1 of any. This VM's bandwidth drifts within minutes, so
/// timing G after G would let each family meet a different bandwidth and bend the ratios
/// between them; interleaved, every G's median spans the same minutes.
std::vector<timing> time_round_robin(const std::vector<timed_call>& calls, int reps, double min_rep_ms, double warm_ms) {
    std::vector<timing> t(calls.size());
    std::vector<std::vector<double>> us(calls.size());
    for (std::size_t i = 0; i < calls.size(); ++i) {
        for (const auto w0 = clock_type::now();;) {
            calls[i].f();
            calls[i].f();
            if (std::chrono::duration<double, std::milli>(clock_type::now() - w0).count() >= warm_ms) break;
        }
        t[i].inner = calibrate(calls[i].f, min_rep_ms);
    }
    for (int r = 0; r < reps; ++r)
        for (std::size_t i = 0; i < calls.size(); ++i) {
            if (calls[i].rewarm) calls[i].f();
            const auto t0 = clock_type::now();
            for (std::size_t k = 0; k < t[i].inner; ++k) calls[i].f();
            us[i].push_back(std::chrono::duration<double, std::micro>(clock_type::now() - t0).count() / double(t[i].inner));
        }
    for (std::size_t i = 0; i < calls.size(); ++i) {
        t[i].median = stats::median(us[i]);
        t[i].lo = *std::min_element(us[i].begin(), us[i].end());
        t[i].hi = *std::max_element(us[i].begin(), us[i].end());
    }
    return t;
}

/// Fills rows [0, n) of every (sequence, head) of the cache with values in [-1, 1): one random
/// block, repeated (a cache read is a cache read; the values only need to be finite and varied).
void fill_cache(kv_cache<float>& c, std::size_t n, std::uint64_t seed) {
    const std::size_t block = 1 << 16, per_head = n * c.d_head();
    const auto r = random_values<float>(block, seed * 977 + 13);
    for (float* base : {c.key_data(), c.value_data()})
        for (std::size_t b = 0; b < c.batch(); ++b)
            for (std::size_t g = 0; g < c.kv_heads(); ++g) {
                float* dst = base + c.offset(b, g, 0);
                for (std::size_t i = 0; i < per_head; i += block)
                    std::memcpy(dst + i, r.data(), sizeof(float) * std::min(block, per_head - i));
            }
    c.resize(n);
}

std::string family_of(std::size_t H, std::size_t G) { return G == H ? "MHA" : G == 1 ? "MQA" : "GQA"; }

std::string fmt(double v, int d) { return format_number(v, d); }

/// Appends `item` to a `sep`-separated list.
void append(std::string& list, const std::string& item, const char* sep = ", ") {
    list += (list.empty() ? "" : sep) + item;
}

/// "a-b" with d decimals, or just "a" when both print the same.
std::string range(double a, double b, int d) { return fmt(a, d) == fmt(b, d) ? fmt(a, d) : fmt(a, d) + "-" + fmt(b, d); }

/// The Markdown paragraph for the report: MQA/GQA speed-up over MHA at each L, with the figures.
/// The ceilings the experiment compares with: triad, FMA peak and, from a peak.json, the streaming probe.
struct ceiling_figures {
    double triad = 0, fma = 0;
    std::string source;
    std::vector<peak::stream_point> probe;
};

std::string markdown(const std::vector<row>& rows, const decode_args& a, const ceiling_figures& ceil, std::size_t l3) {
    const double triad = ceil.triad, fma = ceil.fma;
    auto find = [&](const std::string& v, std::size_t B, std::size_t G, std::size_t L) -> const row* {
        for (const auto& r : rows)
            if (r.variant == v && r.batch == B && r.G == G && r.L == L && r.skipped.empty()) return &r;
        return nullptr;
    };
    const std::string& v = a.variants.front();
    const std::size_t H = a.heads;
    std::string s = "## Decoding with a key/value cache: where MQA and GQA pay off\n\n";
    s += "Measured by `attnbench decode` (variant `" + v + "`, " + std::to_string(rows.empty() ? 0 : rows.front().reps) +
         " repetitions, medians; d_model " + std::to_string(a.d_model) + ", H " + std::to_string(H) + ", d_head " +
         std::to_string(a.d_head) + ", fp32). Speed-up of a decode step over MHA (G = " + std::to_string(H) +
         "): MHA's median time per token divided by the family's.\n\n";
    std::vector<std::size_t> Ls, Gs;
    for (const auto& r : rows) {
        if (r.variant != v) continue;
        if (std::find(Ls.begin(), Ls.end(), r.L) == Ls.end()) Ls.push_back(r.L);
        if (std::find(Gs.begin(), Gs.end(), r.G) == Gs.end()) Gs.push_back(r.G);
    }
    std::sort(Ls.begin(), Ls.end());
    std::sort(Gs.begin(), Gs.end());
    for (std::size_t B : a.batch) {
        s += "| batch " + std::to_string(B) + ": L |";
        for (auto G : Gs) s += " " + family_of(H, G) + " G=" + std::to_string(G) + " |";
        s += " MHA µs/token | MHA cache MiB |\n|---|";
        for (std::size_t i = 0; i < Gs.size() + 2; ++i) s += "---|";
        s += "\n";
        for (auto L : Ls) {
            const row* mha = find(v, B, H, L);
            if (!mha) continue;
            s += "| " + std::to_string(L) + " |";
            for (auto G : Gs) {
                const row* r = find(v, B, G, L);
                s += r ? " " + fmt(mha->step_us / r->step_us, 2) + "× |" : " – |";
            }
            s += " " + fmt(mha->step_us, 0) + " | " + fmt(mha->cache_mib, 0) + " |\n";
        }
        s += "\n";
    }
    // The prose, with the figures at the smallest and largest L and where MHA's cache leaves L3.
    const std::size_t B0 = a.batch.front(), Gmin = Gs.empty() ? 1 : Gs.front();
    const std::size_t Lmin = Ls.empty() ? 0 : Ls.front(), Lmax = Ls.empty() ? 0 : Ls.back();
    const row *lo_m = find(v, B0, H, Lmin), *lo_q = find(v, B0, Gmin, Lmin), *hi_m = find(v, B0, H, Lmax),
              *hi_q = find(v, B0, Gmin, Lmax);
    const double w_mib = rows.empty() ? 0 : double(rows.front().weight_bytes) / 1048576.0;
    const double per_token_mha = 2.0 * double(H * a.d_head) * 4.0; // bytes per cached token per sequence, MHA
    const double l3_mib = double(l3) / 1048576.0;
    const std::size_t L_leave = l3 ? std::size_t(double(l3) / (per_token_mha * double(B0))) : 0;
    if (lo_m && lo_q && hi_m && hi_q) {
        s += "At batch " + std::to_string(B0) + ", " + family_of(H, Gmin) + " (G = " + std::to_string(Gmin) +
             ") decodes a token " + fmt(lo_m->step_us / lo_q->step_us, 2) + "× as fast as MHA at L = " +
             std::to_string(Lmin) + " (" + fmt(lo_q->step_us, 0) + " vs " + fmt(lo_m->step_us, 0) + " µs) and " +
             fmt(hi_m->step_us / hi_q->step_us, 2) + "× at L = " + std::to_string(Lmax) + " (" +
             fmt(hi_q->step_us, 0) + " vs " + fmt(hi_m->step_us, 0) + " µs). ";
    }
    s += "A step reads the layer's weights once (about " + fmt(w_mib, 1) +
         " MiB, nearly the same for every G) and the whole cache once: 2·B·G·d_head·(L+1)·4 bytes, " +
         "so G/H of MHA's. At short contexts the weights dominate and every family costs about the same; " +
         "the ratio grows with L towards the byte ratio H/G as the cache takes over. ";
    // Where each family's speed-up peaks and where it ends, against the byte ratio H/G.
    std::string overshoot, below_w, below_c, below_k, listing;
    bool settles = true;
    for (auto G : Gs) {
        if (G >= H) continue;
        double best = 0, last = 0;
        std::size_t L_best = 0;
        for (auto L : Ls) {
            const row *m = find(v, B0, H, L), *q = find(v, B0, G, L);
            if (!m || !q) continue;
            const double x = m->step_us / q->step_us;
            if (x > best) best = x, L_best = L;
            last = x;
        }
        if (best == 0) continue;
        const double bytes = double(H) / double(G);
        const std::string name = family_of(H, G) + " G=" + std::to_string(G);
        append(listing,
               name + ": " +
                   (L_best == Lmax ? fmt(last, 2) + "× at L = " + std::to_string(Lmax) + " (its largest)"
                                   : "up to " + fmt(best, 2) + "× (L = " + std::to_string(L_best) + "), " + fmt(last, 2) +
                                         "× at L = " + std::to_string(Lmax)) +
                   ", byte ratio " + fmt(bytes, 0),
               "; ");
        if (best > 1.05 * bytes) {
            append(overshoot, name);
            settles = settles && last < 0.95 * best;
        }
        if (last < 0.9 * bytes) {
            const row* q = find(v, B0, G, Lmax);
            const row* m = find(v, B0, H, Lmax);
            const double intensity = double(H) / (2.0 * double(G));
            if (q && q->cache_mib < 2 * w_mib) append(below_w, name);
            else if (fma > 0 && fma / intensity < triad) append(below_c, name); // the roofline's arithmetic side binds
            else if (q && m && q->kv_gbs < m->kv_gbs) // memory-bound by the roofline, yet slower per byte than MHA
                append(below_k, name + " (" + fmt(q->kv_gbs, 1) + " GB/s against MHA's " + fmt(m->kv_gbs, 1) + ")");
        }
    }
    if (!listing.empty()) s += "At batch " + std::to_string(B0) + ", per family: " + listing + ". ";
    if (l3 && !overshoot.empty())
        s += "The ratio does not grow smoothly: MHA's cache leaves the " + fmt(l3_mib, 0) +
             " MiB last-level cache at L ≈ " + std::to_string(L_leave) + " (batch " + std::to_string(B0) +
             "), while a G times smaller cache stays cached up to an H/G times longer context, so in between MHA " +
             "streams from DRAM (the triad measured " + fmt(triad, 1) + " GB/s) while the smaller cache is read from the " +
             "last-level cache: the speed-up overshoots the byte ratio (" + overshoot + ")" +
             (settles ? ", then comes back towards it once both caches are in DRAM. " : ". ");
    if (!below_w.empty())
        s += "It ends below the byte ratio for " + below_w + ": at the longest context measured the cache is still " +
             "smaller than twice the weights every step reads (" + fmt(w_mib, 1) + " MiB). ";
    if (!below_k.empty())
        s += "It ends below the byte ratio for " + below_k + " at L = " + std::to_string(Lmax) +
             ": their roofline is the triad, as MHA's is, but the decode core reads their caches more slowly than MHA's " +
             "(cache GB/s at that L in brackets). ";
    if (!below_c.empty())
        s += "It ends below the byte ratio for " + below_c + ": with H/G query heads per key/value head every cache " +
             "byte carries H/(2G) FLOPs (" + fmt(double(H) / 2.0, 0) + " for G = 1), and at the measured FMA peak " +
             "that arithmetic caps the read rate below the triad (the roofline, below). ";
    // The bandwidth target: caches larger than 64 MiB, against the triad and against the roofline.
    std::string bw, bound;
    for (auto G : Gs) {
        double lo = 1e300, hi = 0, plo = 1e300, phi = 0, alo = 1e300, ahi = 0, rlo = 1e300, rhi = 0;
        std::size_t cases = 0, capped = 0; // cases, and those whose roofline is below 70% of their triad
        for (const auto& r : rows) {
            if (r.variant != v || r.G != G || !r.skipped.empty() || r.kv_bytes <= (std::uint64_t(64) << 20)) continue;
            ++cases;
            capped += r.roof_gbs < 0.7 * (r.triad_adj > 0 ? r.triad_adj : triad);
            lo = std::min(lo, r.kv_gbs), hi = std::max(hi, r.kv_gbs);
            plo = std::min(plo, r.kv_pct), phi = std::max(phi, r.kv_pct);
            rlo = std::min(rlo, r.kv_pct_roof), rhi = std::max(rhi, r.kv_pct_roof);
            if (r.triad_adj > 0) alo = std::min(alo, r.kv_pct_adj), ahi = std::max(ahi, r.kv_pct_adj);
        }
        if (hi == 0) continue;
        const std::string name = family_of(H, G) + " G=" + std::to_string(G);
        append(bw, name + " " + range(lo, hi, 1) + " GB/s, " + range(plo, phi, 0) + "% of the run's triad" +
                       (ahi > 0 ? " (" + range(alo, ahi, 0) + "% of the triad measured alongside)" : "") + ", " +
                       range(rlo, rhi, 0) + "% of its roofline",
               "; ");
        const double intensity = double(H) / (2.0 * double(G));
        if (capped)
            append(bound, name + " in " + std::to_string(capped) + " of its " + std::to_string(cases) + " cases (" +
                              fmt(intensity, 0) + " FLOP/B caps its read rate at " + fmt(fma / intensity, 1) + " GB/s)");
    }
    std::string probe;
    for (auto G : Gs)
        for (const auto& p : ceil.probe)
            if (std::abs(p.flop_per_byte - double(H) / (2.0 * double(G))) < 1e-9 && fma / p.flop_per_byte < triad)
                append(probe, family_of(H, G) + " G=" + std::to_string(G) + "'s " + fmt(p.flop_per_byte, 1) + " FLOP/B: " +
                                  fmt(p.gbs.median, 1) + " GB/s = " +
                                  fmt(100 * p.gbs.median / peak::roof_gbs(triad, fma, p.flop_per_byte), 0) + "%",
                       "; ");
    if (!bw.empty())
        s += "\n\nBandwidth for caches larger than 64 MiB (KV bytes over the attention core's time, every batch and L): " +
             bw + ". The roofline is min(triad, FMA peak / I) with I = H/(2G) FLOPs per cache byte and the measured " +
             fmt(fma, 0) + " GFLOP/s FMA peak" +
             (probe.empty() ? std::string(".")
                            : ". Where the arithmetic side binds, a loop that only streams and does FMAs (`attnbench peak`, its "
                                  "stream rows) reaches it (GB/s and % of the roofline): " + probe + ".");
    if (!bound.empty())
        s += " No kernel can read at 70% of the triad for " + bound +
             ": the step is bound by arithmetic there, not by memory, even at the FMA peak.";
    if (!bw.empty()) s += "\n\n";
    s += "The tables above have every G and L; decode.csv, written next to decode.md, has the rest (bandwidth, % of "
         "triad, FLOP/s).\n";
    return s;
}

void run_decode(decode_args a) {
    if (a.context.empty()) {
        if (a.quick) a.context = {256, 1024, 4096};
        else
            for (std::size_t L = 256; L <= 65536; L *= 2) a.context.push_back(L);
    }
    if (a.quick) {
        a.kv_heads = {1, 4, 16};
        a.batch = {1, 2};
        a.repetitions = std::max(a.repetitions, 7);
        a.min_rep_ms = std::min(a.min_rep_ms, 2.0);
    }
    require(a.repetitions >= 1, "--repetitions must be >= 1 (got " + std::to_string(a.repetitions) + ")");
    const int threads = a.threads > 0 ? a.threads : omp_get_max_threads();
    std::vector<const variant*> vars;
    for (const auto& n : a.variants) {
        vars.push_back(&find_variant(n));
        require(vars.back()->supports<float>(), "variant '" + n + "' has no fp32 kernels");
    }
    for (auto G : a.kv_heads) {
        problem p = gqa(a.d_model, a.heads, G, 1);
        p.d_head = a.d_head;
        p.validate();
    }
    std::sort(a.context.begin(), a.context.end());
    const std::size_t max_memory =
        a.max_memory_gib > 0 ? std::size_t(a.max_memory_gib * 1073741824.0) : machine().memory_bytes / 2;

    // The ceilings: a stored peak.json, or a triad and FMA peak measured now on the same thread count.
    ceiling_figures ceil;
    double& triad = ceil.triad;
    double& fma = ceil.fma;
    std::string& triad_source = ceil.source;
    if (!a.peak_file.empty()) {
        std::ifstream f(a.peak_file);
        require(bool(f), a.peak_file + ": cannot read");
        std::stringstream ss;
        ss << f.rdbuf();
        const auto c = peak::from_json(ss.str());
        triad = threads == 1 ? c.triad_1t_gbs.median : c.triad_all_gbs.median;
        fma = threads == 1 ? c.fma_1t_gflops.median : c.fma_all_gflops.median * threads / std::max(c.threads, 1);
        if (threads == c.threads) ceil.probe = c.stream;
        triad_source = a.peak_file + (threads == 1 ? " (1-thread triad)" : " (all-thread triad, " + std::to_string(c.threads) + " threads)");
    } else {
        peak::options po;
        po.repetitions = 5;
        triad = peak::triad_gbs(threads, po).median;
        po.fma_seconds = 0.05;
        fma = peak::fma_gflops(threads, po).median;
        triad_source = "measured now: triad a=b+s*c, " + std::to_string(threads) + " threads, median of 5, arrays of " +
                       format_bytes(peak::triad_array_bytes(po));
    }
    std::fprintf(stderr, "decode: triad ceiling %.1f GB/s, FMA peak %.1f GFLOP/s (%s)\n", triad, fma, triad_source.c_str());

    const std::size_t l3 = machine().l3_bytes;
    std::vector<row> rows;
    run_options opt;
    opt.threads = threads;
    const bool rss_ok = reset_peak_rss();
    std::unique_ptr<peak::triad_probe> triad_now; // allocated at the first DRAM-sized (batch, L), then reused
    for (const variant* var : vars)
        for (std::size_t B : a.batch) {
            // Per G: the layer, its check against the fp64 reference at a short context (correct
            // first: nothing that fails is timed), weights, inputs and, per L, its cache.
            std::vector<family_case> fam;
            for (std::size_t G : a.kv_heads) {
                problem layer = gqa(a.d_model, a.heads, G, 1);
                layer.d_head = a.d_head;
                layer.batch = B;
                const auto chk = check_decode<float>(*var, layer, 15, decode_fill::prefill, opt, a.seed);
                fam.push_back({G, layer, chk.pass, chk.ratio, random_weights<float>(layer, a.seed), decode_workspace<float>(layer),
                               random_values<float>(B * a.d_model, a.seed * 31 + 7),
                               random_values<float>(B * layer.q_width(), a.seed * 31 + 8), std::vector<float>(B * a.d_model),
                               std::vector<float>(B * layer.q_width()), nullptr});
            }
            for (auto L : a.context) {
                // The G of one (batch, L) are timed together, so their caches are held together.
                std::vector<std::pair<family_case*, row>> live;
                std::size_t held = 0;
                for (auto& f : fam) f.cache.reset();
                for (auto& f : fam) {
                    row r;
                    r.variant = var->name;
                    r.family = family_of(a.heads, f.G);
                    r.batch = B;
                    r.G = f.G;
                    r.L = L;
                    r.check_ratio = f.check_ratio;
                    const auto cost = decode_cost(f.layer, L, sizeof(float));
                    const std::size_t bytes = cost.kv_read_bytes;
                    r.cache_mib = double(bytes) / 1048576.0;
                    if (!f.pass) r.skipped = "failed the decode check (err/bound " + fmt(f.check_ratio, 2) + "): not timed";
                    else if (bytes > max_memory)
                        r.skipped = "cache of " + format_bytes(bytes) + " exceeds --max-memory " + format_bytes(max_memory);
                    else if (held + bytes > max_memory)
                        r.skipped = "with the smaller G's caches of this batch and L (timed together) it exceeds --max-memory " +
                                    format_bytes(max_memory);
                    if (!r.skipped.empty()) {
                        std::fprintf(stderr, "decode: %s B=%zu G=%zu L=%zu skipped: %s\n", var->name.c_str(), B, f.G, L,
                                     r.skipped.c_str());
                        rows.push_back(r);
                        continue;
                    }
                    held += bytes;
                    f.cache = std::make_unique<kv_cache<float>>(f.layer, L + 1);
                    fill_cache(*f.cache, L, a.seed);
                    r.kv_bytes = cost.kv_read_bytes;
                    r.weight_bytes = cost.weight_bytes;
                    r.flops = cost.matmul_flops;
                    r.flop_per_byte = double(cost.attention_flops) / double(cost.kv_read_bytes);
                    r.extra_bytes = decode_extra_bytes(*var, f.layer, L, opt, sizeof(float));
                    live.emplace_back(&f, r);
                }
                if (live.empty()) continue;
                // The decode step. First, per G, the peak resident set's rise over two steps (a step
                // that allocates shows it at once: every buffer is sized on first use).
                auto fits_llc = [l3](const row& r) { return r.kv_bytes <= l3; }; // l3 = 0 (unknown): nothing fits
                std::vector<timed_call> steps, cores;
                for (auto& [f, r] : live) {
                    auto step = [f, L, var, &opt] {
                        f->cache->resize(L);
                        decode_step<float>(*var, f->layer, f->w, f->x.data(), *f->cache, f->y.data(), opt, f->ws);
                    };
                    const long long rss0 = proc_status_kib("VmRSS");
                    if (rss_ok) reset_peak_rss();
                    step();
                    step();
                    if (rss_ok && rss0 >= 0) r.extra_rss_kib = std::max(0LL, proc_status_kib("VmHWM") - rss0);
                    steps.push_back({step, fits_llc(r)});
                }
                // warm-up of at least 50 ms (a first case of a grid measured up to 5x slow after only
                // two steps, e.g. MQA L=256: 439 us in the grid, 82 us alone)
                const auto st = time_round_robin(steps, a.repetitions, a.min_rep_ms, 50);
                // The attention core alone over the cache's L+1 keys: the cache-reading part.
                bool dram = false;
                for (auto& [f, r] : live) {
                    f->cache->resize(L + 1);
                    const problem sp = decode_problem(f->layer, L);
                    const core_io<float> io{interleaved_heads<const float>(f->q.data(), B, 1, f->layer.heads, f->layer.head_dim()),
                                            f->cache->keys(), f->cache->values(),
                                            interleaved_heads<float>(f->ctx.data(), B, 1, f->layer.heads, f->layer.head_dim())};
                    cores.push_back({[var, sp, io, &opt] { var->f32.core(sp, io, opt); }, fits_llc(r)});
                    dram = dram || (l3 && !fits_llc(r));
                }
                // This VM's memory bandwidth drifts (31-53 GB/s triad within minutes), so caches streamed
                // from DRAM are also compared with a triad measured right before their timing.
                double triad_adj = 0;
                if (dram) {
                    if (!triad_now) triad_now = std::make_unique<peak::triad_probe>();
                    triad_adj = triad_now->measure(threads, 5).median;
                }
                const auto ct = time_round_robin(cores, a.repetitions, a.min_rep_ms, 20);
                for (std::size_t i = 0; i < live.size(); ++i) {
                    row& r = live[i].second;
                    r.inner = st[i].inner;
                    r.reps = std::size_t(a.repetitions);
                    r.step_us = st[i].median;
                    r.step_us_min = st[i].lo;
                    r.step_us_max = st[i].hi;
                    r.core_us = ct[i].median;
                    if (l3 && !fits_llc(r)) r.triad_adj = triad_adj;
                    r.kv_gbs = double(r.kv_bytes) / (r.core_us * 1e3);
                    r.kv_pct = 100.0 * r.kv_gbs / triad;
                    r.kv_pct_adj = r.triad_adj > 0 ? 100.0 * r.kv_gbs / r.triad_adj : 0;
                    r.roof_gbs = peak::roof_gbs(r.triad_adj > 0 ? r.triad_adj : triad, fma, r.flop_per_byte);
                    r.kv_pct_roof = 100.0 * r.kv_gbs / r.roof_gbs;
                    r.step_gbs = double(r.kv_bytes + r.weight_bytes) / (r.step_us * 1e3);
                    r.step_pct = 100.0 * r.step_gbs / triad;
                    r.gflops = double(r.flops) / (r.step_us * 1e3);
                    std::fprintf(stderr, "decode: %-8s B=%zu G=%2zu L=%6zu  %9.1f us/step  cache %8.1f MiB  core %6.1f GB/s (%5.1f%% triad)\n",
                                 var->name.c_str(), B, r.G, L, r.step_us, r.cache_mib, r.kv_gbs, r.kv_pct);
                    rows.push_back(r);
                }
            }
        }
    // In the order of the options: variant, batch, G, L (unique keys: a plain sort is deterministic).
    auto order = [&](const row& r) {
        auto at = [](const auto& v, const auto& x) { return std::size_t(std::find(v.begin(), v.end(), x) - v.begin()); };
        return std::tuple(at(a.variants, r.variant), at(a.batch, r.batch), at(a.kv_heads, r.G), r.L);
    };
    std::sort(rows.begin(), rows.end(), [&](const row& x, const row& y) { return order(x) < order(y); });

    // Output: a table, then JSON + CSV (+ the Markdown paragraph) under --out.
    const std::vector<std::string> t_header{"variant", "B", "family", "G", "L", "cache MiB", "µs/token", "min", "max",
                                            "reps x inner", "core µs", "core GB/s", "% triad", "triad now", "% now", "roof GB/s", "% roof",
                                            "step GB/s", "% triad", "GFLOP/s", "extra KiB", "peak RSS +KiB"};
    const std::size_t t_columns = t_header.size();
    text_table t(t_header);
    for (const auto& r : rows) {
        if (!r.skipped.empty()) {
            std::vector<std::string> cells{r.variant, std::to_string(r.batch), r.family, std::to_string(r.G),
                                           std::to_string(r.L), fmt(r.cache_mib, 1), "skipped: " + r.skipped};
            cells.resize(t_columns);
            t.add_row(cells);
            continue;
        }
        t.add_row({r.variant, std::to_string(r.batch), r.family, std::to_string(r.G), std::to_string(r.L),
                          fmt(r.cache_mib, 1), fmt(r.step_us, 1), fmt(r.step_us_min, 1), fmt(r.step_us_max, 1),
                          std::to_string(r.reps) + " x " + std::to_string(r.inner), fmt(r.core_us, 1), fmt(r.kv_gbs, 1),
                          fmt(r.kv_pct, 1), r.triad_adj > 0 ? fmt(r.triad_adj, 1) : "-",
                          r.triad_adj > 0 ? fmt(r.kv_pct_adj, 1) : "-", fmt(r.roof_gbs, 1), fmt(r.kv_pct_roof, 1), fmt(r.step_gbs, 1), fmt(r.step_pct, 1), fmt(r.gflops, 1),
                          fmt(double(r.extra_bytes) / 1024.0, 1),
                          r.extra_rss_kib < 0 ? "?" : std::to_string(r.extra_rss_kib)});
    }
    t.print();
    std::printf("\nµs/token: median decode step (every sequence of the batch gets one token), %d repetitions, each the "
                "mean of `inner` steps; core: the attention core alone over the L+1 cached keys.\n"
                "core GB/s: KV bytes read per token, 2·B·G·d_head·(L+1)·4, over the core's time; step GB/s: KV bytes plus "
                "the weights (read once per step) over the step's time; %% triad of %.1f GB/s (%s).\n"
                "triad now: the same triad measured just before the cores of the row's batch and L are timed, for caches "
                "larger than the last-level cache (this machine's bandwidth drifts between runs); %% now: core GB/s against it.\n"
                "roof GB/s: the roofline min(triad, FMA peak / I), I = H/(2G) FLOPs of QK^T and PV per cache byte, FMA peak "
                "%.1f GFLOP/s, triad: the one measured alongside if any, else the run's; %% roof: core GB/s against it.\n"
                "GFLOP/s: matmul FLOPs (2 per multiply-add: projections of the B new tokens, QK^T, PV) over the step's time.\n"
                "extra KiB: analytic memory beyond the cache and weights (workspace + core scratch); peak RSS +KiB: "
                "measured rise of the peak resident set over the resident set during the case's first two steps.\n",
                a.repetitions, triad, triad_source.c_str(), fma);

    nlohmann::json j;
    j["metadata"] = metadata("decode", a.seed, threads);
    j["config"] = {{"d_model", a.d_model}, {"heads", a.heads}, {"d_head", a.d_head}, {"kv_heads", a.kv_heads},
                   {"context", a.context}, {"batch", a.batch}, {"variants", a.variants}, {"threads", threads},
                   {"repetitions", a.repetitions}, {"min_repetition_ms", a.min_rep_ms}, {"quick", a.quick},
                   {"precision", "f32"}};
    j["timing"] = "self-timed (steady_clock): warm-up for >= 50 ms (steps) or 20 ms (core), then the median over "
                  "`repetitions` of the mean of `inner` back-to-back calls; the kv_heads of one (batch, context) are timed "
                  "round-robin, repetition by repetition, with one untimed call before each repetition of a cache that fits "
                  "in the last-level cache; the cache is cut back to L tokens before every step.";
    j["conventions"] = {{"kv_bytes", "2*B*G*d_head*(L+1)*4: every cached key and value read once per step"},
                        {"weight_bytes", "every parameter once per step"},
                        {"flops", "matmul FLOPs, 2 per multiply-add: the four projections of B tokens, QK^T and PV"},
                        {"GB/s", "10^9 byte/s"},
                        {"extra_bytes", "decode workspace + the variant's core scratch (variant::scratch_bytes)"}};
    j["triad_gbs"] = triad;
    j["triad_source"] = triad_source;
    j["fma_gflops"] = fma;
    j["l3_bytes"] = machine().l3_bytes;
    for (const auto& r : rows) {
        nlohmann::json x = {{"variant", r.variant}, {"batch", r.batch}, {"family", r.family}, {"kv_heads", r.G},
                            {"context", r.L}, {"cache_mib", r.cache_mib}};
        if (!r.skipped.empty()) {
            x["skipped"] = r.skipped;
        } else {
            x.update({{"step_us_median", r.step_us}, {"step_us_min", r.step_us_min}, {"step_us_max", r.step_us_max},
                      {"repetitions", r.reps}, {"inner", r.inner}, {"tokens_per_s", double(r.batch) * 1e6 / r.step_us},
                      {"core_us_median", r.core_us}, {"kv_read_bytes", r.kv_bytes}, {"weight_bytes", r.weight_bytes},
                      {"core_kv_gbs", r.kv_gbs}, {"core_pct_triad", r.kv_pct}, {"step_gbs", r.step_gbs},
                      {"triad_now_gbs", r.triad_adj}, {"core_pct_triad_now", r.kv_pct_adj},
                      {"flop_per_byte", r.flop_per_byte}, {"roof_gbs", r.roof_gbs}, {"core_pct_roof", r.kv_pct_roof},
                      {"step_pct_triad", r.step_pct}, {"matmul_flops", r.flops}, {"gflops", r.gflops},
                      {"extra_bytes", r.extra_bytes}, {"extra_peak_rss_kib", r.extra_rss_kib},
                      {"check_err_over_bound", r.check_ratio}});
        }
        j["rows"].push_back(x);
    }
    const std::string md = markdown(rows, a, ceil, l3);
    if (a.markdown) std::printf("\n%s", md.c_str());
    if (!a.out.empty()) {
        text_table csv({"variant", "batch", "family", "kv_heads", "context", "cache_mib", "step_us_median", "step_us_min",
                      "step_us_max", "repetitions", "inner", "core_us_median", "core_kv_gbs", "core_pct_triad",
                      "triad_now_gbs", "core_pct_triad_now", "flop_per_byte", "roof_gbs", "core_pct_roof", "step_gbs", "step_pct_triad", "gflops", "extra_bytes",
                      "extra_peak_rss_kib", "skipped"});
        for (const auto& r : rows)
            csv.add_row({r.variant, std::to_string(r.batch), r.family, std::to_string(r.G), std::to_string(r.L),
                                fmt(r.cache_mib, 3), fmt(r.step_us, 3), fmt(r.step_us_min, 3), fmt(r.step_us_max, 3),
                                std::to_string(r.reps), std::to_string(r.inner), fmt(r.core_us, 3), fmt(r.kv_gbs, 3),
                                fmt(r.kv_pct, 2), fmt(r.triad_adj, 3), fmt(r.kv_pct_adj, 2), fmt(r.flop_per_byte, 3), fmt(r.roof_gbs, 3), fmt(r.kv_pct_roof, 2), fmt(r.step_gbs, 3),
                                fmt(r.step_pct, 2), fmt(r.gflops, 3),
                                std::to_string(r.extra_bytes), std::to_string(r.extra_rss_kib), r.skipped});
        std::fprintf(stderr, "wrote %s\n", write_atomic(a.out, "decode.json", j.dump(2) + "\n").c_str());
        std::fprintf(stderr, "wrote %s\n", write_atomic(a.out, "decode.csv", csv.csv()).c_str());
        std::fprintf(stderr, "wrote %s\n", write_atomic(a.out, "decode.md", md).c_str());
    }
}

} // namespace

void add_decode(CLI::App& app) {
    auto a = std::make_shared<decode_args>();
    auto* cmd = app.add_subcommand("decode", "time per token of a decode step over a key/value cache (MHA, GQA, MQA)");
    cmd->add_option("--variant", a->variants, "variants to time")->capture_default_str();
    cmd->add_option("--d-model", a->d_model, "model width")->check(CLI::Range(1, 1 << 16))->capture_default_str();
    cmd->add_option("--heads", a->heads, "query heads H")->check(CLI::Range(1, 1 << 12))->capture_default_str();
    cmd->add_option("--d-head", a->d_head, "head width")->check(CLI::Range(1, 1 << 12))->capture_default_str();
    cmd->add_option("--kv-heads", a->kv_heads, "key/value heads G (one line each)")->check(CLI::Range(1, 1 << 12))->capture_default_str();
    cmd->add_option("--context", a->context, "cached tokens L (default 256, 512, ..., 65536)")->check(CLI::Range(0, 1 << 24));
    cmd->add_option("--batch", a->batch, "sequences decoded together")->check(CLI::Range(1, 1 << 12))->capture_default_str();
    cmd->add_option("--threads", a->threads, "threads (0: OpenMP's maximum)")->check(CLI::Range(0, 1024))->capture_default_str();
    cmd->add_option("--repetitions", a->repetitions, "timed repetitions per case (the median is reported)")
        ->check(CLI::Range(1, 10000))->capture_default_str();
    cmd->add_option("--min-rep-ms", a->min_rep_ms, "shortest repetition; short steps are repeated back to back")
        ->check(CLI::Range(0.0, 1e4))->capture_default_str();
    cmd->add_option("--max-memory", a->max_memory_gib, "caches of one batch and L, held together while timed, stay within this many GiB; larger ones are skipped (default: half the RAM)")
        ->check(CLI::Range(0.0, 1e6));
    cmd->add_option("--peak", a->peak_file, "peak.json from `attnbench peak --out` (default: measure the triad now)");
    cmd->add_option("--out", a->out, "directory for decode.json, decode.csv, decode.md ('' to skip)")->capture_default_str();
    cmd->add_option("--seed", a->seed, "random seed")->capture_default_str();
    cmd->add_flag("--quick", a->quick, "a grid of seconds for CI: G 1, 4, 16; L 256, 1024, 4096; batch 1, 2");
    cmd->add_flag("--markdown", a->markdown, "also print the report paragraph (always written to decode.md)");
    cmd->callback([a] { run_decode(*a); });
}

} // namespace attn::cli
