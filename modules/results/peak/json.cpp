// attn.peak -- the ceilings as JSON (to_json, from_json, read_ceilings), the form `attnbench peak
// --json` prints.
module;
#include <cstddef>
#include <string>
#include <vector>
#include <nlohmann/json.hpp>
module attn.peak;
import attn.count;   // roofline_gbs
import attn.results; // parse_json, read_json

namespace attn::peak {

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

stats stats_from(const nlohmann::ordered_json& j, const char* key, const std::string& where) {
    require(j.contains(key) && j[key].is_object(), where + ": missing object \"" + key + "\"");
    const auto& o = j[key];
    stats s;
    try {
        s.median = o.at("median").get<double>();
        s.best = o.at("best").get<double>();
        s.worst = o.at("worst").get<double>();
        if (o.contains("samples")) s.samples = o["samples"].get<std::vector<double>>();
        if (o.contains("others_busy_cpus")) s.others_busy_cpus = o["others_busy_cpus"].get<double>();
    } catch (const nlohmann::ordered_json::exception& e) {
        throw error(where + ": \"" + key + "\": " + e.what());
    }
    return s;
}

} // namespace

std::string to_json(const ceilings& c, int indent) {
    nlohmann::ordered_json j;
    j["fma_f32_gflops_1_thread"] = stats_json(c.fma_1t_gflops);
    j["fma_f32_gflops_all_threads"] = stats_json(c.fma_all_gflops);
    if (!c.bf16_dot_1t_gflops.samples.empty()) {
        j["bf16_dot_gflops_1_thread"] = stats_json(c.bf16_dot_1t_gflops);
        j["bf16_dot_gflops_all_threads"] = stats_json(c.bf16_dot_all_gflops);
    }
    if (!c.amx_bf16_1t_gflops.samples.empty()) {
        j["amx_bf16_gflops_1_thread"] = stats_json(c.amx_bf16_1t_gflops);
        j["amx_bf16_gflops_all_threads"] = stats_json(c.amx_bf16_all_gflops);
    }
    j["triad_gbs_1_thread"] = stats_json(c.triad_1t_gbs);
    j["triad_gbs_all_threads"] = stats_json(c.triad_all_gbs);
    if (!c.read_1t_gbs.samples.empty()) {
        j["read_gbs_1_thread"] = stats_json(c.read_1t_gbs);
        j["read_gbs_all_threads"] = stats_json(c.read_all_gbs);
    }
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
        x["roof_gbs"] = roofline_gbs(c.read_all_gbs.samples.empty() ? c.triad_all_gbs.median : c.read_all_gbs.median,
                                     c.fma_all_gflops.median, p.flop_per_byte);
        probe.push_back(x);
    }
    j["stream_fma"] = probe;
    if (!c.read_footprints.empty()) {
        nlohmann::ordered_json scan = nlohmann::ordered_json::array();
        for (const auto& f : c.read_footprints) {
            nlohmann::ordered_json x;
            x["bytes"] = f.bytes;
            x["threads"] = f.threads;
            x["gbs"] = stats_json(f.gbs);
            scan.push_back(x);
        }
        j["read_footprints"] = scan;
        j["dram_footprint_bytes_1_thread"] = dram_footprint(c, 1);
        j["dram_footprint_bytes_all_threads"] = dram_footprint(c, c.threads);
    }
    j["units"] = {
        {"fma", "GFLOP/s, 10^9 FLOP/s, one FMA = 2 FLOP"},
        {"bf16_dot", "GFLOP/s of vdpbf16ps zmm (AVX512_BF16; present only where the CPU has it): 16 fp32 lanes, each "
                     "adding two bf16 products, 4 FLOP per lane"},
        {"amx_bf16", "GFLOP/s of tdpbf16ps (AMX-BF16; present only where the CPU has it and Linux grants the tiles): "
                     "16 x 16 fp32 accumulators each adding 32 bf16 products, 16,384 FLOP per instruction"},
        {"triad", "GB/s, 10^9 byte/s, 12 byte per element (read b, c; write a; write-allocate not counted); arrays "
                  "2 MiB-aligned with MADV_HUGEPAGE, like the key/value cache (attn::big_allocator)"},
        {"read", "GB/s read (10^9 byte/s) by a loop that only reads the triad's arrays b and c (each thread sums "
                 "its share into four independent accumulators): the ceiling of a kernel that reads and writes "
                 "almost nothing, as a decode step over its cache"},
        {"stream_fma", "GB/s read (10^9 byte/s) on all threads by a loop that feeds every batch read from the triad's "
                       "arrays b and c to fmas_per_batch FMAs (flop_per_byte = fmas_per_batch / 2); roof_gbs = "
                       "min(read, FMA / flop_per_byte) from the medians"},
        {"read_footprints", "GB/s read by the read probe over the first bytes / 2 of b and of c (bytes in all): 1, 2 "
                            "and 4 x the last-level cache sysfs reports, on 1 and all threads; "
                            "dram_footprint_bytes_*: from this many bytes on a read-only stream runs within 15% of "
                            "the main read figure (DRAM speed), so a decode cache smaller than it is read partly "
                            "from the caches"}};
    return j.dump(indent > 0 ? indent : -1);
}

namespace {

/// The ceilings from parsed JSON; `where` (a path, or "peak JSON") begins every error.
ceilings from_value(nlohmann::ordered_json j, const std::string& where) {
    if (j.contains("peak")) j = j["peak"];
    require(j.is_object(), where + ": expected an object");
    ceilings c;
    c.fma_1t_gflops = stats_from(j, "fma_f32_gflops_1_thread", where);
    c.fma_all_gflops = stats_from(j, "fma_f32_gflops_all_threads", where);
    if (j.contains("bf16_dot_gflops_1_thread")) {
        c.bf16_dot_1t_gflops = stats_from(j, "bf16_dot_gflops_1_thread", where);
        c.bf16_dot_all_gflops = stats_from(j, "bf16_dot_gflops_all_threads", where);
    }
    if (j.contains("amx_bf16_gflops_1_thread")) {
        c.amx_bf16_1t_gflops = stats_from(j, "amx_bf16_gflops_1_thread", where);
        c.amx_bf16_all_gflops = stats_from(j, "amx_bf16_gflops_all_threads", where);
    }
    c.triad_1t_gbs = stats_from(j, "triad_gbs_1_thread", where);
    c.triad_all_gbs = stats_from(j, "triad_gbs_all_threads", where);
    if (j.contains("read_gbs_1_thread")) {
        c.read_1t_gbs = stats_from(j, "read_gbs_1_thread", where);
        c.read_all_gbs = stats_from(j, "read_gbs_all_threads", where);
    }
    c.threads = j.value("threads", 1);
    c.accumulators = j.value("fma_accumulators_per_thread", 0);
    c.simd_arch = j.value("simd_arch", std::string());
    c.fma_instruction = j.value("fma_instruction", std::string());
    c.simd_lanes = j.value("simd_f32_lanes", 0);
    c.triad_array_bytes = j.value("triad_array_bytes", std::size_t(0));
    c.triad_elements = j.value("triad_elements", std::size_t(0));
    if (j.contains("stream_fma") && j["stream_fma"].is_array())
        for (const auto& x : j["stream_fma"]) {
            require(x.is_object() && x.contains("gbs"), where + ": \"stream_fma\" entries need \"gbs\"");
            stream_point p;
            p.fmas = x.value("fmas_per_batch", 0);
            p.flop_per_byte = x.value("flop_per_byte", 0.0);
            p.gbs = stats_from(x, "gbs", where);
            c.stream.push_back(p);
        }
    if (j.contains("read_footprints") && j["read_footprints"].is_array())
        for (const auto& x : j["read_footprints"]) {
            require(x.is_object() && x.contains("gbs") && x.contains("bytes"),
                    where + ": \"read_footprints\" entries need \"bytes\" and \"gbs\"");
            footprint_point f;
            f.bytes = x.value("bytes", std::size_t(0));
            f.threads = x.value("threads", 1);
            f.gbs = stats_from(x, "gbs", where);
            c.read_footprints.push_back(f);
        }
    return c;
}

} // namespace

ceilings from_json(const std::string& text) { return from_value(parse_json(text, "peak JSON"), "peak JSON"); }

ceilings read_ceilings(const std::string& path) { return from_value(read_json(path), path); }

} // namespace attn::peak
