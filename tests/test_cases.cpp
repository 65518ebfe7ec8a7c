// The one case type (attn.cases) and the sweep files that expand into it (attn.sweep): ids and
// JSON written out by hand, grids counted by hand, selectors, and a variant registered here
// showing up in the quick preset with no other edit.
#include <algorithm>
#include <fstream>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
import attn.peers;
import attn.sweep;
import attn.variants;

using json = nlohmann::json;

namespace {

std::size_t count_variant(const std::vector<attn::sweep_case>& cs, const std::string& v) {
    return std::size_t(std::count_if(cs.begin(), cs.end(), [&](const auto& c) { return c.variant == v; }));
}

/// Converts to any member type: what counts an aggregate's members by how many it can be braced with.
struct any_member {
    template <class T>
    operator T() const;
};
template <class T, class... A>
constexpr std::size_t member_count() {
    if constexpr (requires { T{A{}..., any_member{}}; })
        return member_count<T, A..., any_member>();
    else
        return sizeof...(A);
}

std::string read_file(const std::string& path) {
    std::ifstream f(path);
    REQUIRE(bool(f));
    std::stringstream s;
    s << f.rdbuf();
    return s.str();
}

} // namespace

TEST_CASE("a case's id, text and JSON, written out by hand", "[cases]") {
    const auto c = json::parse(R"({"variant": "simd", "mode": "core", "d_model": 512, "heads": 8, "kv_heads": 2,
                                   "n_q": 1024, "threads": 2, "causal": true})")
                       .get<attn::sweep_case>();
    CHECK(c.id() == "core-simd-d512-h8-g2-n1024-b1-t2-causal");
    CHECK(c.text() == "simd core d_model=512 H=8 G=2 N=1024 B=1 t=2 causal");
    CHECK(c.d_head == 64);
    CHECK(c.n_kv == 1024);
    CHECK(c.precision == attn::dtype::f32);
    const json back = c;
    CHECK(back.at("kv_heads") == 2);
    CHECK(back.at("n_q") == 1024);
    CHECK(back.get<attn::sweep_case>().id() == c.id()); // round trip

    const auto d = json::parse(R"({"variant": "parallel", "mode": "decode", "d_model": 1024, "heads": 16,
                                   "kv_heads": 4, "context": 4096, "batch": 8})")
                       .get<attn::sweep_case>();
    CHECK(d.id() == "decode-parallel-d1024-h16-g4-ctx4096-b8-t1");
    CHECK(d.n_q == 1);
    CHECK(d.n_kv == 4097); // the new token attends over the cache and itself
    CHECK(d.shape().causal);
}

TEST_CASE("a case that is not one is refused, naming the field", "[cases]") {
    CHECK_THROWS_WITH(json::parse(R"({"mode": "core", "d_model": 8, "heads": 2, "n_q": 4})").get<attn::sweep_case>(),
                      Catch::Contains("'variant'"));
    CHECK_THROWS_WITH(json::parse(R"({"variant": "simd", "mode": "core", "d_model": "8", "heads": 2, "n_q": 4})")
                          .get<attn::sweep_case>(),
                      Catch::Contains("'d_model'"));
    CHECK_THROWS_WITH(json::parse(R"({"variant": "simd", "mode": "core", "d_model": 10, "heads": 4, "n_q": 4})")
                          .get<attn::sweep_case>(),
                      Catch::Contains("does not divide"));
    // sizes are non-negative integers: nlohmann would wrap -1 and cast 1e300 (undefined behaviour)
    CHECK_THROWS_WITH(json::parse(R"({"variant": "simd", "mode": "core", "d_model": 8, "heads": 2, "n_q": -1})")
                          .get<attn::sweep_case>(),
                      Catch::Contains("'n_q' must be a non-negative integer, not -1"));
    CHECK_THROWS_WITH(
        json::parse(R"({"variant": "simd", "mode": "decode", "d_model": 8, "heads": 2, "context": 1e300})")
            .get<attn::sweep_case>(),
        Catch::Contains("'context' must be a non-negative integer"));
    CHECK_THROWS_WITH(json::parse(R"({"variant": "simd", "mode": "decoder", "d_model": 8, "heads": 2, "n_q": 4})")
                          .get<attn::sweep_case>(),
                      Catch::Contains("decoder"));
}

TEST_CASE("selectors: tags choose variants, unknown names are refused", "[cases]") {
    using V = std::vector<std::string>;
    CHECK(attn::select_variants("loops") == V{"naive", "blocked"});
    // every device's variants (expand pairs each with the devices it computes on): the CUDA ones too
    CHECK(attn::select_variants("fast") ==
          V{"simd", "blas", "parallel", "cuda-naive", "cuda-tiled", "cuda-flash", "cuda-hopper", "cuda-decode"});
    CHECK(attn::select_variants("threaded") == V{"blas", "parallel"});
    CHECK(attn::select_variants("simd") == V{"simd"});
    CHECK(attn::select_variants("all").size() == attn::registry().size() + 5);
    CHECK_THROWS_WITH(attn::select_variants("simdd"), Catch::Contains("unknown variant 'simdd'"));
}

TEST_CASE("expand: the cross product, counted by hand, without duplicates", "[cases]") {
    attn::grid a;
    a.name = "a";
    a.variants = {"simd", "parallel"};
    a.modes = {attn::mode::core, attn::mode::layer};
    a.d_model = {64};
    a.heads = {4};
    a.kv_heads = {0, 1};
    a.seq = {16, 32};
    a.threads = {0};
    attn::grid b = a; // a second grid asking for a subset: no new case, both grid names recorded
    b.name = "b";
    b.variants = {"parallel"};
    b.modes = {attn::mode::core};
    const auto cs = attn::expand({a, b}, 2);
    // 2 variants x 2 modes x 2 G x 2 N
    REQUIRE(cs.size() == 16);
    for (const auto& c : cs) {
        CHECK(c.threads == (c.variant == "simd" ? 1u : 2u)); // simd is single-threaded; 0 means every CPU
        const bool in_b = c.variant == "parallel" && c.mode == attn::mode::core;
        CHECK(c.grids == (in_b ? std::vector<std::string>{"a", "b"} : std::vector<std::string>{"a"}));
    }
    CHECK(std::count_if(cs.begin(), cs.end(), [](const auto& c) { return c.kv_heads == 4; }) == 8); // 0 means G = H
    CHECK(std::count_if(cs.begin(), cs.end(), [](const auto& c) { return c.kv_heads == 1; }) == 8);
    attn::grid dec = a;
    dec.modes = {attn::mode::decode};
    dec.variants = {"simd"};
    dec.context = {100, 200};
    dec.seq = {7, 8, 9}; // ignored by decode
    dec.causal = {false, true};
    CHECK(attn::expand({dec}, 2).size() == 4); // 2 G x 2 L, always causal
}

TEST_CASE("a newly registered variant joins the quick preset with no other edit", "[cases][sweep]") {
    const auto spec = attn::parse_sweep(read_file(ATTNBENCH_SOURCE_DIR "/experiments/sweeps/quick.toml"), "quick.toml",
                                        {"peak", "check", "params", "flops", "claims", "perf", "decode"});
    const auto before = attn::expand(spec.grids, 2);
    CHECK(count_variant(before, "throwaway") == 0);
    attn::variant v = attn::find_variant("naive"); // its kernels, under a new name and no tags
    v.name = "throwaway";
    v.tags.clear();
    v.threaded = false;
    attn::register_variant(v);
    CHECK_THROWS_WITH(attn::register_variant(v), Catch::Contains("registered already"));
    const auto after = attn::expand(spec.grids, 2);
    // the quick preset's "fast" grids: scaling and bf16 (4 lengths each) and free_lunch (7 head counts)
    CHECK(count_variant(after, "throwaway") == 4 + 4 + 7);
    CHECK(after.size() == before.size() + 15);
    for (const auto& c : after)
        if (c.variant == "throwaway") CHECK(c.threads == 1);
}

TEST_CASE("peers: a case gets a peer only in a precision the peer runs, and the reason names that precision",
          "[cases][peers]") {
    const auto core = [](const std::string& prec) {
        return json{{"variant", "simd"}, {"mode", "core"}, {"d_model", 512},   {"heads", 8},
                    {"kv_heads", 8},     {"n_q", 1024},    {"precision", prec}}
            .get<attn::sweep_case>();
    };
    auto int8 = json::parse(R"({"variant": "parallel", "mode": "decode", "d_model": 1024, "heads": 16,
                                "kv_heads": 4, "context": 4096, "precision": "int8"})")
                    .get<attn::sweep_case>();
    const std::vector<attn::sweep_case> cases{core("f32"), core("bf16"), core("f16"), int8};
    // ort-attention runs f32 only: one peer case (the f32 core), three precisions refused
    const auto peers = attn::peer_cases(cases, {"ort-attention"});
    REQUIRE(peers.size() == 1);
    CHECK(peers[0].variant == "ort-attention");
    CHECK(peers[0].precision == attn::dtype::f32);
    const auto refused = attn::unserved_precisions(cases, {"ort-attention"});
    REQUIRE(refused.size() == 3);
    for (const auto& u : refused) {
        INFO(u.precision << ": " << u.why);
        CHECK(u.provider == "ort-attention");
        // each reason speaks of its own precision, not of another one's
        CHECK((u.why.find("bfloat16") != std::string::npos) == (u.precision == attn::dtype::bf16));
        CHECK((u.why.find("float16 Attention kernel fails") != std::string::npos) == (u.precision == attn::dtype::f16));
        CHECK((u.why.find("quantized") != std::string::npos) == (u.precision == attn::dtype::int8));
    }
    // torch-sdpa runs the three storage types; only the int8 cache is refused
    CHECK(attn::peer_cases(cases, {"torch-sdpa"}).size() == 3);
    const auto torch = attn::unserved_precisions(cases, {"torch-sdpa"});
    REQUIRE(torch.size() == 1);
    CHECK(torch[0].precision == attn::dtype::int8);
}

TEST_CASE("peers: a windowed case gets the core and decode peers, each with its window; the layer's none",
          "[cases][peers]") {
    const auto of = [](const std::string& text) { return json::parse(text).get<attn::sweep_case>(); };
    const std::vector<attn::sweep_case> cases{
        of(R"({"variant": "simd", "mode": "core", "d_model": 512, "heads": 8, "kv_heads": 8, "n_q": 1024,
               "causal": true, "window": 0})"),
        of(R"({"variant": "simd", "mode": "core", "d_model": 512, "heads": 8, "kv_heads": 8, "n_q": 1024,
               "causal": true, "window": 256})"),
        of(R"({"variant": "simd", "mode": "decode", "d_model": 512, "heads": 8, "kv_heads": 2, "context": 4096,
               "window": 1024})"),
        of(R"({"variant": "simd", "mode": "layer", "d_model": 512, "heads": 8, "kv_heads": 8, "n_q": 1024,
               "causal": true, "window": 256})")};
    for (const std::string provider : {"torch-sdpa", "ort-attention"}) {
        INFO(provider);
        const auto peers = attn::peer_cases(cases, {provider});
        REQUIRE(peers.size() == 3); // the two cores and the decode step; no layer
        CHECK(peers[0].window == 0);
        CHECK(peers[1].window == 256);
        CHECK(peers[2].window == 1024);
        CHECK(peers[2].mode == attn::mode::decode);
    }
    // torch-mha's runner takes no window: the windowed layer has no peer
    CHECK(attn::peer_cases(cases, {"torch-mha"}).empty());
}
TEST_CASE("peers: a provider gets the cases of the devices it runs on, and only those", "[cases][peers]") {
    const auto of = [](const std::string& text) { return json::parse(text).get<attn::sweep_case>(); };
    // the same core, decode step and windowed core on each device, in bf16; an f32 core on each;
    // an f16 core on CUDA alone
    std::vector<attn::sweep_case> cases;
    for (const std::string device : {"cpu", "cuda"}) {
        const std::string d = R"("device": ")" + device + R"(", )";
        cases.push_back(of(R"({"variant": "simd", "mode": "core", )" + d +
                           R"("d_model": 1024, "heads": 8, "kv_heads": 2, "n_q": 512, "precision": "bf16"})"));
        cases.push_back(of(R"({"variant": "simd", "mode": "decode", )" + d +
                           R"("d_model": 1024, "heads": 8, "kv_heads": 2, "context": 4096, "precision": "bf16"})"));
        cases.push_back(of(R"({"variant": "simd", "mode": "core", )" + d +
                           R"("d_model": 1024, "heads": 8, "kv_heads": 2, "n_q": 512, "precision": "bf16",
                              "causal": true, "window": 128})"));
        cases.push_back(of(R"({"variant": "simd", "mode": "core", )" + d +
                           R"("d_model": 1024, "heads": 8, "kv_heads": 2, "n_q": 512})"));
    }
    cases.push_back(of(R"({"variant": "simd", "mode": "core", "device": "cuda", "d_model": 1024, "heads": 8,
                           "kv_heads": 2, "n_q": 512, "precision": "f16"})"));
    const auto on = [](const std::vector<attn::sweep_case>& ps, attn::device d) {
        return std::size_t(std::count_if(ps.begin(), ps.end(), [&](const auto& c) { return c.device == d; }));
    };
    const std::vector<std::string> cuda_only{"torch-sdpa-flash", "torch-sdpa-efficient", "torch-sdpa-cudnn",
                                             "torch-sdpa-math", "torch-flex"};
    for (const auto& p : attn::peer_providers()) {
        INFO(p.name);
        const bool cpu = p.runs_on(attn::device::cpu), cuda = p.runs_on(attn::device::cuda);
        CHECK((std::find(cuda_only.begin(), cuda_only.end(), p.name) != cuda_only.end()) == (cuda && !cpu));
        for (const auto& c : attn::peer_cases(cases, {p.name})) {
            CHECK(c.variant == p.name);
            CHECK(p.runs_on(c.device)); // never a case on a device it does not run on
        }
    }
    // counted by hand from the cases and each provider's modes, precisions and windows
    const std::vector<std::tuple<std::string, std::size_t, std::size_t>> expected{
        {"torch-sdpa", 4, 0},           // cpu: core, decode, windowed core (bf16), f32 core
        {"ort-attention", 1, 0},        // cpu: the f32 core alone (bf16 not served)
        {"torch-sdpa-flash", 0, 3},     // cuda: bf16 core and decode, f16 core; no window on the core, no f32
        {"torch-sdpa-efficient", 0, 5}, // cuda: all five
        {"torch-sdpa-cudnn", 0, 4},     // cuda: bf16 core, decode, windowed core, f16 core; no f32
        {"torch-sdpa-math", 0, 5},      // cuda: all five
        {"torch-flex", 0, 3},           // cuda: the bf16 cores, plain and windowed, the f16 core; no decode, no f32
        {"torch-mha", 0, 0},            // a layer's
        {"torch-mla", 0, 0}};           // a layer's (MLA)
    for (const auto& [name, n_cpu, n_cuda] : expected) {
        INFO(name);
        const auto ps = attn::peer_cases(cases, {name});
        CHECK(on(ps, attn::device::cpu) == n_cpu);
        CHECK(on(ps, attn::device::cuda) == n_cuda);
    }
    // every CUDA peer case keeps the device of the case it stands beside: its id says cuda
    for (const auto& c : attn::peer_cases(cases, cuda_only)) CHECK(c.id().find("-cuda") != std::string::npos);
    // f32 on CUDA: flash and cuDNN say why; the CPU's f32 core is nobody's concern of theirs
    const auto refused = attn::unserved_precisions(cases, {"torch-sdpa-flash", "torch-sdpa-cudnn", "torch-flex"});
    REQUIRE(refused.size() == 3);
    for (const auto& u : refused) CHECK(u.precision == attn::dtype::f32);
    // a CPU provider says nothing of CUDA's precisions: ort-attention refuses the CPU's bf16, not
    // the f16 only CUDA has; torch-sdpa serves every precision of the CPU's cases
    const auto ort = attn::unserved_precisions(cases, {"ort-attention"});
    REQUIRE(ort.size() == 1);
    CHECK(ort[0].precision == attn::dtype::bf16);
    CHECK(attn::unserved_precisions(cases, {"torch-sdpa"}).empty());
    // only FlexAttention skips the tiles outside a window; every windowed CUDA provider but flash
    for (const auto& p : attn::peer_providers()) {
        INFO(p.name);
        CHECK(p.skips_tiles == (p.name == "torch-flex"));
        if (p.name == "torch-sdpa-flash") CHECK_FALSE(p.windows);
    }
}

TEST_CASE("peers: torch-mla stands beside MLA's layer on either device", "[cases][peers]") {
    std::vector<attn::sweep_case> cases;
    for (const std::string device : {"cpu", "cuda"})
        cases.push_back(json::parse(R"({"variant": "simd", "mode": "layer", "family": "mla", "form": "absorb",
                                        "d_model": 64, "heads": 4, "d_head": 12, "d_v": 8, "kv_lora_rank": 16,
                                        "qk_rope_head_dim": 4, "n_q": 20, "device": ")" +
                                    device + R"("})")
                            .get<attn::sweep_case>());
    const auto ps = attn::peer_cases(cases, {"torch-mla"});
    REQUIRE(ps.size() == 2);
    CHECK(ps[0].device == attn::device::cpu);
    CHECK(ps[1].device == attn::device::cuda);
    CHECK(ps[0].id() != ps[1].id());
}

TEST_CASE("the precision preset: every variant in three storage types, the cache in four", "[cases][sweep]") {
    const auto spec =
        attn::parse_sweep(read_file(ATTNBENCH_SOURCE_DIR "/experiments/sweeps/precision.toml"), "precision.toml",
                          {"peak", "check", "params", "flops", "claims", "perf", "decode"});
    auto cs = attn::expand(spec.grids, 2);
    // the five variants of the tree (a test above registers one more in this process)
    const std::vector<std::string> ours{"naive", "blocked", "simd", "blas", "parallel"};
    std::erase_if(cs, [&](const auto& c) { return std::find(ours.begin(), ours.end(), c.variant) == ours.end(); });
    auto count = [&](auto pred) { return std::size_t(std::count_if(cs.begin(), cs.end(), pred)); };
    // counted by hand, on 2 CPUs (threads [1, 0] = {1, 2}; simd runs on one thread only):
    // core: simd 3 types x 3 N + blas and parallel 3 x 3 x 2 threads = 45; naive and blocked at
    // N = 1024, 1 thread: 2 x 3 = 6; layer: simd 3 x 2 N + blas, parallel 3 x 2 x 2 = 30;
    // decode: parallel 4 cache types x 3 G x 2 threads = 24
    CHECK(count([](const auto& c) { return c.mode == attn::mode::core; }) == 45 + 6);
    CHECK(count([](const auto& c) { return c.mode == attn::mode::layer; }) == 30);
    CHECK(count([](const auto& c) { return c.mode == attn::mode::decode; }) == 24);
    for (const attn::dtype p : {attn::dtype::f32, attn::dtype::bf16, attn::dtype::f16})
        CHECK(count([&](const auto& c) { return c.mode != attn::mode::decode && c.precision == p; }) ==
              (45 + 6 + 30) / 3);
    CHECK(count([](const auto& c) { return c.precision == attn::dtype::int8; }) == 6);
    // MHA's cache is over 64 MiB in every type: 2 x 16 heads x 64 x 65536 tokens x 1 byte = 128 MiB
    CHECK(count([](const auto& c) { return c.mode == attn::mode::decode && c.context != 65536; }) == 0);
}

TEST_CASE("run groups: a rolling buffer's steps at every L share one run; a growing cache's do not", "[cases]") {
    const auto decode = [](std::size_t context, std::size_t window, std::size_t g) {
        return json{{"variant", "simd"}, {"mode", "decode"},   {"d_model", 512},  {"heads", 8},
                    {"kv_heads", g},     {"context", context}, {"window", window}}
            .get<attn::sweep_case>();
    };
    // under one window, L 4096 and 65536 (and MHA beside MQA) are one run
    CHECK(decode(4096, 4096, 8).run_group() == decode(65536, 4096, 8).run_group());
    CHECK(decode(4096, 4096, 8).run_group() == decode(65536, 4096, 1).run_group());
    // two windows, or no window, at two L: separate runs (a growing cache of 64k tokens is 128 MiB)
    CHECK(decode(4096, 4096, 8).run_group() != decode(4096, 1024, 8).run_group());
    CHECK(decode(4096, 0, 8).run_group() != decode(65536, 0, 8).run_group());
    CHECK(decode(4096, 0, 8).run_group() == decode(4096, 0, 1).run_group());
}

TEST_CASE("the field table: a row for every member of the case, each named once", "[cases][schema]") {
    // every member but `extra` (the registered fields' values) and `grids` (bookkeeping) is a row
    CHECK(member_count<attn::sweep_case>() == attn::builtin_case_fields() + 2);
    std::vector<std::string> names, axes, flags;
    for (const auto& f : attn::case_schema()) {
        INFO(f.name);
        CHECK(std::find(names.begin(), names.end(), f.name) == names.end());
        CHECK((f.get && f.put && f.id && f.text));
        if (!f.axis.empty()) {
            CHECK(std::find(axes.begin(), axes.end(), f.axis) == axes.end());
            CHECK((f.list && f.put_list && f.count && f.take));
            axes.push_back(f.axis);
        }
        if (!f.flag.empty()) CHECK(std::find(flags.begin(), flags.end(), f.flag) == flags.end());
        names.push_back(f.name);
        flags.push_back(f.flag);
    }
    CHECK_THROWS_WITH(attn::find_case_field("tile"), Catch::Contains("unknown case field 'tile'"));
    // the one order, the id's: the id written by hand for a case away from every default
    attn::sweep_case c =
        json{{"mode", "layer"}, {"variant", "naive"}, {"d_model", 48}, {"heads", 4},       {"kv_heads", 2},
             {"d_head", 16},    {"n_q", 7},           {"n_kv", 9},     {"batch", 2},       {"threads", 1},
             {"causal", true},  {"window", 3},        {"bias", true},  {"magnitude", 0.5}, {"precision", "bf16"},
             {"device", "cuda"}}
            .get<attn::sweep_case>();
    CHECK(c.id() == "layer-naive-d48-h4-g2-dh16-n7-nkv9-b2-t1-causal-w3-bias-mag0.5-bf16-cuda");
    CHECK(c.text() == "naive layer d_model=48 H=4 G=2 d_head=16 N=7 N_kv=9 B=2 t=1 causal W=3 bias |x|<=0.5 bf16 cuda");
    CHECK(json(c).get<attn::sweep_case>().id() == c.id());
}

TEST_CASE("the field table's kinds: a value from JSON or a flag is held to its field's kind and range",
          "[cases][schema][errors]") {
    const auto& window = attn::find_case_field("window");
    CHECK(attn::parse_value(window, "512", "--window") == json(512));
    CHECK_THROWS_WITH(attn::parse_value(window, "08", "--window"),
                      Catch::StartsWith("--window: '08' is not a whole number >= 0 (no leading zeros"));
    CHECK_THROWS_WITH(attn::parse_value(window, "-1", "--window"), "--window: '-1' is not a whole number >= 0");
    CHECK_THROWS_WITH(attn::parse_value(window, "99999999999999999999", "--window"),
                      "--window: '99999999999999999999' is not a whole number >= 0 that fits in 64 bits");
    CHECK_THROWS_WITH(attn::parse_value(window, "4294967297", "--window"),
                      Catch::StartsWith("--window 4294967297 is out of range: at most 4294967296"));
    CHECK_THROWS_WITH(attn::parse_value(attn::find_case_field("heads"), "0", "--heads"),
                      "--heads: '0' is not a whole number >= 1");
    CHECK(attn::parse_value(attn::find_case_field("causal"), "1", "--causal") == json(true));
    CHECK_THROWS_WITH(attn::parse_value(attn::find_case_field("precision"), "fp8", "--precision"),
                      "--precision: 'fp8' is not one of f64, f32, bf16, f16, int8");
    CHECK_THROWS_WITH(attn::parse_value(attn::find_case_field("magnitude"), "nan", "--magnitude"),
                      Catch::StartsWith("--magnitude: 'nan' is not a finite number in (0, 1e+06]"));
    CHECK_THROWS_WITH(json({{"mode", "core"}, {"variant", "simd"}, {"d_model", 8}, {"heads", 2}, {"n_q", 1.5}})
                          .get<attn::sweep_case>(),
                      "the case's field 'n_q' must be a non-negative integer, not 1.5");
    CHECK_THROWS_WITH(
        json({{"mode", "core"}, {"variant", "simd"}, {"d_model", 8}, {"heads", 2}, {"n_q", 4}, {"precision", "fp8"}})
            .get<attn::sweep_case>(),
        Catch::StartsWith("the case's field 'precision': unknown precision 'fp8'"));
}
