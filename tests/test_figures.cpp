// attn.figures: the one counter table, results/README.md's list held to it, and the derivation
// checked against figures worked by hand.
#include <cmath>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <catch2/catch.hpp>
import attn.figures;
import attn.peak;

using attn::operator""_counter;

namespace {

/// The rows of results/README.md's counter table: name -> (unit, modes, source).
std::map<std::string, std::vector<std::string>> readme_counters() {
    std::ifstream f(std::string(ATTNBENCH_SOURCE_DIR) + "/results/README.md");
    REQUIRE(f);
    std::map<std::string, std::vector<std::string>> rows;
    bool in = false;
    for (std::string line; std::getline(f, line);) {
        if (line.rfind("| counter | unit | modes | source |", 0) == 0) {
            in = true;
            continue;
        }
        if (!in || line.rfind("|---", 0) == 0) continue;
        if (line.empty() || line[0] != '|') {
            if (!rows.empty()) break;
            continue;
        }
        std::vector<std::string> cells;
        std::stringstream ss(line.substr(1));
        for (std::string cell; std::getline(ss, cell, '|');) {
            const auto b = cell.find_first_not_of(' '), e = cell.find_last_not_of(' ');
            cells.push_back(b == std::string::npos ? "" : cell.substr(b, e - b + 1));
        }
        REQUIRE(cells.size() >= 4);
        rows[cells[0]] = {cells[1], cells[2], cells[3]};
    }
    return rows;
}

std::string modes_text(std::uint8_t m) {
    std::string s;
    for (auto [bit, name] : {std::pair{attn::in_core, "core"}, {attn::in_layer, "layer"}, {attn::in_decode, "decode"}})
        if (m & bit) s += (s.empty() ? "" : ", ") + std::string(name);
    return s;
}

} // namespace

TEST_CASE("results/README.md lists every counter of the table, with its unit, modes and source", "[figures]") {
    const auto rows = readme_counters();
    std::set<std::string> table;
    for (const auto& sp : attn::counter_table) {
        if (sp.part == attn::part::probe) continue; // the probes' own counters: named in the text below it
        table.insert(std::string(sp.name));
        INFO(sp.name);
        REQUIRE(rows.count(std::string(sp.name)) == 1);
        const auto& r = rows.at(std::string(sp.name));
        CHECK(r[0] == sp.unit);
        CHECK(r[1] == modes_text(sp.modes));
        CHECK(r[2] == attn::enum_name(sp.source));
    }
    for (const auto& [name, _] : rows) {
        INFO(name << " is in results/README.md but not in attn.figures' table");
        CHECK(table.count(name) == 1);
    }
}

TEST_CASE("derive: a core case's rates and shares, and a decode core's, by hand", "[figures]") {
    attn::sweep_case k;
    k.variant = "simd";
    k.d_model = 512;
    k.heads = 8;
    k.kv_heads = 8;
    k.d_head = 64;
    k.n_q = k.n_kv = 1024;
    k.threads = 1;
    attn::peak::ceilings c;
    c.fma_1t_gflops.median = 100;
    c.fma_all_gflops.median = 200;
    c.threads = 2;
    const auto f0 = attn::quantities(k, c);
    // QK^T and PV: 2 x 8 heads x 1024^2 pairs x 64 x 2 FLOP = 2^31
    REQUIRE(f0.at("flop_matmul"_counter) == 2147483648.0);
    attn::figures f = f0;
    attn::derive(f, k, attn::part::run, 0.05); // 50 ms
    CHECK(f.at("gflops_matmul"_counter) == Approx(2147483648.0 * 1e-9 / 0.05));
    CHECK(f.at("pct_peak"_counter) == Approx(100 * 42.94967296 / 100.0));
    CHECK(f.at("ceiling_speedup"_counter) == Approx(100.0 / 42.94967296));
    CHECK(f.at("peak_in_doubt"_counter) == 0.0);
    CHECK_FALSE(f.contains("pct_peak_alongside"_counter)); // no FMA probe ran beside it
    // the FMA probe beside it at 0.8 of peak.json's rate: the ceiling of the same minutes is
    // 100 x 0.8 = 80 GFLOP/s, and 42.95 GFLOP/s is 53.7 % of it
    attn::figures fa = f0;
    attn::derive(fa, k, attn::part::run, 0.05, {0, 0, 0.8});
    CHECK(fa.at("pct_peak"_counter) == Approx(42.94967296));
    CHECK(fa.at("fma_drift"_counter) == Approx(0.8));
    CHECK(fa.at("peak_alongside_gflops"_counter) == Approx(80.0));
    CHECK(fa.at("pct_peak_alongside"_counter) == Approx(100 * 42.94967296 / 80.0));
    // at 2 threads the ceiling is peak.json's all-thread figure, drifted alike
    attn::sweep_case k2 = k;
    k2.threads = 2;
    attn::figures f2 = attn::quantities(k2, c);
    attn::derive(f2, k2, attn::part::run, 0.025, {0, 0, 0.5});
    CHECK(f2.at("peak_alongside_gflops"_counter) == Approx(100.0));
    CHECK(f2.at("pct_peak_alongside"_counter) == Approx(100 * 85.89934592 / 100.0));

    // a decode core: MHA, d_model 1024, H 16, f32 cache, L 4095: K and V, 16 heads x 64 x 4 B, 4096
    // tokens: 2 x 16 x 64 x 4 x 4096 B = 32 MiB
    attn::sweep_case d = k;
    d.mode = attn::mode::decode;
    d.d_model = 1024;
    d.heads = d.kv_heads = 16;
    d.context = 4095;
    d.n_q = 1;
    d.n_kv = 4096;
    c.read_1t_gbs.median = 20;
    c.triad_1t_gbs.median = 16;
    attn::figures g = attn::quantities(d, c);
    REQUIRE(g.at("kv_read_bytes"_counter) == 32.0 * 1048576);
    attn::derive(g, d, attn::part::core, 32.0 * 1048576 / 10e9, {0, 25, 0}); // read at exactly 10 GB/s
    CHECK(g.at("kv_gbs"_counter) == Approx(10.0));
    CHECK(g.at("pct_read"_counter) == Approx(50.0));
    CHECK(g.at("pct_triad"_counter) == Approx(62.5));
    // intensity 0.5 FLOP/B: FMA peak / I = 200 GB/s, so the read ceiling binds the roofline
    CHECK(g.at("roof_gbs"_counter) == Approx(20.0));
    CHECK(g.at("pct_roof_alongside"_counter) == Approx(40.0));
    CHECK(g.at("share_mark"_counter) == 0.0);
    // the FMA probe beside it at half of peak.json's rate: the roofline alongside is min(read
    // alongside 300, 100 GFLOP/s x 0.5 / 0.5 FLOP/B = 100) = 100 GB/s, not min(300, 200)
    attn::figures h = attn::quantities(d, c);
    attn::derive(h, d, attn::part::core, 32.0 * 1048576 / 10e9, {0, 300, 0.5});
    CHECK(h.at("fma_drift"_counter) == 0.5);
    CHECK(h.at("roof_alongside_gbs"_counter) == Approx(100.0));
    CHECK(h.at("pct_roof_alongside"_counter) == Approx(10.0));
    // above 100 %: marked by where the cache lives (below the footprint from which a read-only
    // stream runs at DRAM speed: read from the caches) or not
    CHECK(attn::share_mark(120, 16.0 * 1048576, 64.0 * 1048576) == 1.0);
    CHECK(attn::share_mark(120, 64.0 * 1048576, 64.0 * 1048576) == 2.0);
    CHECK(attn::share_mark(99, 64.0 * 1048576, 64.0 * 1048576) == 0.0);
}

TEST_CASE("the footprint from which a read-only stream runs at DRAM speed", "[figures][peak]") {
    // the scan of this session's 2-vCPU VM (GB/s medians): 2 threads 94 (32 MiB), 79 (64 MiB),
    // 33.1 (128 MiB) against 33.0 over the main 256 MiB; 1 thread 52, 28.9, 29.8 against 30.4
    attn::peak::ceilings c;
    c.threads = 2;
    c.triad_array_bytes = std::size_t(128) << 20;
    c.read_1t_gbs.median = 30.4;
    c.read_all_gbs.median = 33.0;
    c.read_1t_gbs.samples = c.read_all_gbs.samples = {1.0};
    const std::size_t MiB = std::size_t(1) << 20;
    auto point = [](std::size_t bytes, int t, double gbs) {
        attn::peak::footprint_point f;
        f.bytes = bytes;
        f.threads = t;
        f.gbs.median = gbs;
        return f;
    };
    CHECK(attn::peak::dram_footprint(c, 2) == 0); // no scan
    c.read_footprints = {point(32 * MiB, 1, 52), point(32 * MiB, 2, 94),    point(64 * MiB, 1, 28.9),
                         point(64 * MiB, 2, 79), point(128 * MiB, 1, 29.8), point(128 * MiB, 2, 33.1)};
    // by hand: 2 threads, from the largest down: 128 MiB within 15 % of 33.0 (33.1), 64 MiB not (79)
    CHECK(attn::peak::dram_footprint(c, 2) == 128 * MiB);
    // 1 thread: 128 and 64 MiB within 15 % of 30.4, 32 MiB not (52)
    CHECK(attn::peak::dram_footprint(c, 1) == 64 * MiB);
    // a stream at DRAM speed at every scanned size: from the smallest
    c.read_footprints[1].gbs.median = 34;
    c.read_footprints[3].gbs.median = 33;
    CHECK(attn::peak::dram_footprint(c, 2) == 32 * MiB);
}
