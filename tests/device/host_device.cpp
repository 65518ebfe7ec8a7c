// A CPU-backed test device: a variant whose kernels are attn::device_kernels, as a GPU variant's
// are, but whose "device memory" is host memory and whose kernel is the naive variant's fp32 core.
// CI has no GPU; this takes the device path end to end (prepare once: inputs copied in the storage
// type; run; read back; time with the device's own clock) through the fp64 checker
// (tests/test_device.cpp) and, registered, through attnbench-bench (tests/device/bench_device.cpp,
// the ctest harness.device). Core cases only; layer, decode, f64 and int8 are refused in one line.
// Its copies are made at prepare time, as a GPU's upload is; time_ms times run() alone with the
// steady clock (nothing to flush: `cold` has no effect here).
#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>
import attn.core;
import attn.variants;

namespace attn_test {

namespace {

struct host_run final : attn::device_run {
    attn::problem p;
    attn::run_options opt;
    std::vector<float> q, k, v, out; // "device memory": the copies prepare made
    const attn::variant* kernel = &attn::find_variant("naive");

    void run() override {
        const attn::core_io<float> io{
            attn::interleaved_heads<const float>(q.data(), p.batch, p.n_q, p.heads, p.qk_dim()),
            attn::interleaved_heads<const float>(k.data(), p.batch, p.n_kv, p.kv_heads, p.qk_dim()),
            attn::interleaved_heads<const float>(v.data(), p.batch, p.n_kv, p.kv_heads, p.v_dim()),
            attn::interleaved_heads<float>(out.data(), p.batch, p.n_q, p.heads, p.v_dim())};
        kernel->get<float>().core(p, io, opt);
    }
    std::vector<float> output() override { return out; }
    std::vector<double> time_ms(int repetitions, int warmup, bool) override {
        for (int i = 0; i < warmup; ++i) run();
        std::vector<double> ms;
        for (int i = 0; i < repetitions; ++i) {
            const auto t0 = std::chrono::steady_clock::now();
            run();
            ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
        }
        return ms;
    }
};

std::string refuses(const attn::problem&, attn::mode m, attn::dtype t) {
    if (m != attn::mode::core) return "test-device runs core cases only, not " + std::string(attn::enum_name(m));
    if (t == attn::dtype::f64 || t == attn::dtype::int8)
        return "test-device stores f32, bf16 or f16, not " + std::string(attn::enum_name(t));
    return "";
}

} // namespace

attn::variant host_device_variant() {
    attn::variant v;
    v.name = "test-device";
    v.description = "the device path on the host (tests only): prepare, run, read back, time";
    v.serves.windows = true;
    v.tags = {"test"};
    v.device.refuses = refuses;
    v.device.prepare = [](const attn::device_inputs& in, const attn::run_options& opt) {
        if (const std::string why = refuses(in.p, in.mode, in.type); !why.empty()) throw attn::error(why);
        auto r = std::make_unique<host_run>();
        r->p = in.p;
        r->opt = opt;
        r->q.assign(in.q.begin(), in.q.end());
        r->k.assign(in.k.begin(), in.k.end());
        r->v.assign(in.v.begin(), in.v.end());
        r->out.assign(in.p.batch * in.p.n_q * in.p.o_width(), -777.0f); // what run() must overwrite
        return std::unique_ptr<attn::device_run>(std::move(r));
    };
    return v;
}

} // namespace attn_test
