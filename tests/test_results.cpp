// attn.results and attn.peak: atomic writes, metadata, tables, and the ceilings' plumbing.
// Nothing here asserts a speed: these machines are shared and noisy.
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <unistd.h>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
import attn.results;
import attn.peak;
import attn.count;
import attn.kernels; // isa::amx_granted

namespace fs = std::filesystem;

namespace {

/// A fresh directory under the system's temporary directory, removed afterwards.
struct scratch_dir {
    fs::path path;
    scratch_dir() {
        static int counter = 0;
        path = fs::temp_directory_path() /
               ("attn_test_results_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
        fs::remove_all(path);
        fs::create_directories(path);
    }
    ~scratch_dir() {
        std::error_code ec;
        fs::remove_all(path, ec);
    }
};

std::string slurp(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::size_t entries(const fs::path& dir) {
    return std::size_t(std::distance(fs::directory_iterator(dir), fs::directory_iterator()));
}

void require_positive_finite(const attn::peak::stats& s) {
    CHECK(std::isfinite(s.median));
    CHECK(std::isfinite(s.best));
    CHECK(std::isfinite(s.worst));
    CHECK(s.median > 0);
    CHECK(s.worst > 0);
    CHECK(s.worst <= s.median);
    CHECK(s.median <= s.best);
}

} // namespace

TEST_CASE("write_atomic round-trips text and creates parent directories", "[results]") {
    scratch_dir dir;
    const fs::path dest = dir.path / "a" / "b" / "out.json";
    const std::string text = "{\"x\": 1}\n" + std::string(100000, 'z') + std::string("\0tail", 5);
    attn::write_atomic(dest.string(), text);
    CHECK(slurp(dest) == text);
    attn::write_atomic(dest.string(), "second");
    CHECK(slurp(dest) == "second");
    CHECK(entries(dest.parent_path()) == 1); // no temporaries left beside it
}

TEST_CASE("a failed write_atomic leaves nothing partial at the destination", "[results]") {
    scratch_dir dir;
    SECTION("destination is a non-empty directory: the rename fails") {
        const fs::path dest = dir.path / "taken";
        fs::create_directories(dest / "inside");
        try {
            attn::write_atomic(dest.string(), "data");
            FAIL("write_atomic should have thrown");
        } catch (const attn::error& e) {
            const std::string what = e.what();
            CHECK(what.find(dest.string()) != std::string::npos);
            CHECK(what.find('\n') == std::string::npos);
        }
        CHECK(fs::is_directory(dest));
        CHECK(entries(dir.path) == 1); // the temporary was removed
    }
    SECTION("a parent is a regular file: nothing can be created") {
        std::ofstream(dir.path / "file") << "keep";
        const fs::path dest = dir.path / "file" / "out.json";
        CHECK_THROWS_AS(attn::write_atomic(dest.string(), "data"), attn::error);
        CHECK(slurp(dir.path / "file") == "keep");
        CHECK(entries(dir.path) == 1);
    }
    SECTION("an existing file keeps its old content when the new write fails") {
        const fs::path dest = dir.path / "old.json";
        attn::write_atomic(dest.string(), "old");
        CHECK_THROWS_AS(attn::write_atomic((dest / "sub").string(), "new"), attn::error);
        CHECK(slurp(dest) == "old");
        CHECK(entries(dir.path) == 1);
    }
}

TEST_CASE("metadata has every required key, non-empty, and renders as JSON", "[results]") {
    attn::run_info run;
    run.seed = 1234;
    run.threads = 2;
    run.preset = "quick";
    const attn::metadata m = attn::collect_metadata(run);
    for (const auto& key : attn::metadata_keys()) {
        INFO("key " << key);
        CHECK(!attn::lookup(m, key).empty());
    }
    CHECK(attn::lookup(m, "seed") == "1234");
    CHECK(attn::lookup(m, "threads") == "2");
    CHECK(attn::lookup(m, "preset") == "quick");
    CHECK(attn::lookup(m, "no_such_key").empty());
    CHECK(attn::machine().logical_cores >= 1);

    const auto j = nlohmann::json::parse(attn::to_json(m));
    REQUIRE(j.is_object());
    for (const auto& key : attn::metadata_keys()) CHECK(j.at(key).get<std::string>() == attn::lookup(m, key));
    CHECK(nlohmann::json::parse(attn::to_json(m, 0)) == j);

    attn::metadata odd = {{"quote\"back\\slash", "line\nbreak\ttab\x01"}};
    const auto k = nlohmann::json::parse(attn::to_json(odd));
    CHECK(k.at("quote\"back\\slash").get<std::string>() == "line\nbreak\ttab\x01");
}

TEST_CASE("text_table aligns numbers right, text left, and shows units", "[results]") {
    attn::text_table t({{"name", "", false}, {"rate", "GFLOP/s", true}});
    t.add_row({"a", "1.5"});
    t.add_row({"longer", "123.25"});
    const std::string out = t.render();
    std::istringstream lines(out);
    std::string header, rule, r1, r2;
    std::getline(lines, header);
    std::getline(lines, rule);
    std::getline(lines, r1);
    std::getline(lines, r2);
    CHECK(header.find("rate [GFLOP/s]") != std::string::npos);
    CHECK(r1.rfind("a ", 0) == 0);
    CHECK(r1.size() == r2.size()); // right-aligned last column ends at the same place
    CHECK(r1.substr(r1.size() - 3) == "1.5");
    CHECK_THROWS_AS(t.add_row({"only one"}), attn::error);
    // the same rows as CSV: units in the header, grouped integers plain, quoting as RFC 4180
    attn::text_table c({"name", "count"});
    c.add_row({"plain", "1,048,576"});
    c.add_row({"a, b", "say \"hi\""});
    CHECK(c.csv() == "name,count\nplain,1048576\n\"a, b\",\"say \"\"hi\"\"\"\n");
    CHECK(t.csv() == "name,rate [GFLOP/s]\na,1.5\nlonger,123.25\n");
    CHECK(attn::format_bytes(32 * 1024) == "32 KiB");
    CHECK(attn::format_bytes(1536) == "1.50 KiB");
    CHECK(attn::format_number(2.0 / 3.0, 3) == "0.667");
    CHECK(attn::grouped(0) == "0");
    CHECK(attn::grouped(999) == "999");
    CHECK(attn::grouped(1000) == "1,000");
    CHECK(attn::grouped(1048576) == "1,048,576");
}

TEST_CASE("peak measures positive finite ceilings on a tiny run", "[peak]") {
    attn::peak::options opt;
    opt.repetitions = 3;
    opt.fma_seconds = 0.002;
    opt.triad_bytes = std::size_t(1) << 20;
    opt.threads = 2;
    const attn::peak::ceilings c = attn::peak::measure(opt);
    require_positive_finite(c.fma_1t_gflops);
    require_positive_finite(c.fma_all_gflops);
    require_positive_finite(c.triad_1t_gbs);
    require_positive_finite(c.triad_all_gbs);
    CHECK(c.fma_1t_gflops.samples.size() == 3);
    CHECK(c.threads >= 1);
    CHECK((c.accumulators == 8 || c.accumulators == 12 || c.accumulators == 16));
    CHECK(c.simd_lanes >= 4);
    CHECK(!c.simd_arch.empty());
    CHECK(c.triad_array_bytes == (std::size_t(1) << 20));
    REQUIRE(c.stream.size() >= 5); // 0.5 .. 6 FLOP/B fit any ISA's registers
    for (const auto& p : c.stream) {
        require_positive_finite(p.gbs);
        CHECK(p.flop_per_byte == p.fmas / 2.0); // 2 FLOP per FMA lane over 4 bytes per lane
    }

    // the bf16 dot-product ceiling exists exactly where the CPU reports AVX512_BF16
    const bool bf16_dot = __builtin_cpu_supports("avx512bf16");
    CHECK(c.bf16_dot_1t_gflops.samples.empty() == !bf16_dot);
    CHECK(c.bf16_dot_all_gflops.samples.empty() == !bf16_dot);
    if (bf16_dot) {
        require_positive_finite(c.bf16_dot_1t_gflops);
        require_positive_finite(c.bf16_dot_all_gflops);
    }
    // the AMX tile ceiling exactly where the CPU has AMX-BF16 and Linux grants the tiles
    const bool amx = attn::kernels::isa::amx_granted();
    CHECK(c.amx_bf16_1t_gflops.samples.empty() == !amx);
    if (amx) {
        require_positive_finite(c.amx_bf16_1t_gflops);
        require_positive_finite(c.amx_bf16_all_gflops);
    }

    const attn::peak::ceilings back = attn::peak::from_json(attn::peak::to_json(c));
    CHECK(back.fma_1t_gflops.median == c.fma_1t_gflops.median);
    CHECK(back.bf16_dot_all_gflops.samples == c.bf16_dot_all_gflops.samples);
    CHECK(back.amx_bf16_all_gflops.samples == c.amx_bf16_all_gflops.samples);
    CHECK(back.triad_all_gbs.samples == c.triad_all_gbs.samples);
    CHECK(back.threads == c.threads);
    CHECK(back.simd_arch == c.simd_arch);
    REQUIRE(back.stream.size() == c.stream.size());
    CHECK(back.stream.back().gbs.samples == c.stream.back().gbs.samples);
    CHECK(back.stream.back().fmas == c.stream.back().fmas);
    const attn::peak::ceilings wrapped =
        attn::peak::from_json("{\"metadata\": {}, \"peak\": " + attn::peak::to_json(c) + "}");
    CHECK(wrapped.fma_all_gflops.best == c.fma_all_gflops.best);
    CHECK_THROWS_AS(attn::peak::from_json("{\"peak\": {}}"), attn::error);
    CHECK_THROWS_AS(attn::peak::from_json("not json"), attn::error);
}

TEST_CASE("a triad probe measures again and again on the arrays it allocated once", "[peak]") {
    attn::peak::options opt;
    opt.triad_bytes = std::size_t(1) << 20;
    attn::peak::triad_probe probe(opt);
    for (int threads : {1, 2}) { // the probe checks its output values itself (a wrong triad throws)
        const attn::peak::stats s = probe.measure(threads, 3);
        require_positive_finite(s);
        CHECK(s.samples.size() == 3);
    }
    CHECK_THROWS_AS(probe.measure(1, 0), attn::error);
}

TEST_CASE("the roofline: min(triad, FMA / intensity)", "[peak]") {
    CHECK(attn::roofline_gbs(50.0, 232.0, 8.0) == 29.0);                  // arithmetic-bound: 232 / 8
    CHECK(attn::roofline_gbs(35.0, 232.0, 4.0) == 35.0);                  // 58 GB/s of arithmetic: the triad binds
    CHECK(attn::roofline_gbs(35.0, 232.0, 0.0) == 35.0);                  // no arithmetic: the triad
    CHECK(attn::roofline_gbs(35.0, 232.0, 232.0 / 35.0) == Approx(35.0)); // the ridge point
    CHECK_THROWS_AS(attn::peak::stream_gbs(1, 3), attn::error);           // 3 FMAs per batch: not a probe
}

TEST_CASE("peak rejects bad options with one-line errors", "[peak]") {
    attn::peak::options opt;
    opt.repetitions = 0;
    CHECK_THROWS_AS(attn::peak::fma_gflops(1, opt), attn::error);
    opt.repetitions = 1;
    opt.accumulators = 7;
    CHECK_THROWS_AS(attn::peak::fma_gflops(1, opt), attn::error);
}
