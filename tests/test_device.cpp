// The device path (attn::device_kernels) without a GPU: the CPU-backed test device
// (tests/device/host_device.cpp) prepared once, run, read back and timed, its output held to the
// fp64 reference by the one checker; a device whose output is 0.1 % off is caught; what it does not
// serve is refused in one line.
#include <memory>
#include <string>
#include <vector>
#include <catch2/catch.hpp>
import attn.core;
import attn.grids;
import attn.families;
import attn.check;
import attn.variants;

namespace attn_test {
attn::variant host_device_variant();
attn::variant stores_bf16_weights();
} // namespace attn_test

using attn::mode;

TEST_CASE("a device variant: prepared, run, read back and timed, within the fp64 bound", "[device]") {
    const attn::variant dev = attn_test::host_device_variant();
    REQUIRE(dev.device);
    attn::problem p = attn::gqa(64, 4, 2, 37);
    p.batch = 2;
    p.causal = GENERATE(false, true);
    attn::run_options opt;
    const auto f32 = attn::check::check_case<float>(dev, p, mode::core, opt, 5);
    INFO("f32 ratio " << f32.ratio);
    CHECK(f32.pass);
    const auto b16 = attn::check::check_case<attn::bf16>(dev, p, mode::core, opt, 5);
    INFO("bf16 ratio " << b16.ratio);
    CHECK(b16.pass);

    // the same case through the interface by hand: one prepare, several runs, times from its clock
    const attn::problem core = attn::attention_problem(p);
    const auto in = attn::check::make_inputs(core, mode::core, 5);
    const auto r = dev.device.prepare(attn::check::device_inputs_of(core, mode::core, attn::dtype::f32, in), opt);
    r->run();
    const std::vector<float> first = r->output();
    CHECK(first.size() == core.batch * core.n_q * core.o_width());
    const std::vector<double> ms = r->time_ms(3, 1, true);
    REQUIRE(ms.size() == 3);
    for (double t : ms) CHECK(t > 0);
    CHECK(r->output() == first); // timing reruns the same case
}

TEST_CASE("the checker catches a device whose output is 0.1 % off", "[device]") {
    attn::variant bad = attn_test::host_device_variant();
    const auto good_prepare = bad.device.prepare;
    struct scaled final : attn::device_run {
        std::unique_ptr<attn::device_run> inner;
        void run() override { inner->run(); }
        std::vector<float> output() override {
            auto o = inner->output();
            for (float& x : o) x *= 1.001f;
            return o;
        }
        std::vector<double> time_ms(int r, int w, bool c) override { return inner->time_ms(r, w, c); }
    };
    bad.device.prepare = [good_prepare](const attn::device_inputs& in, const attn::run_options& o) {
        auto s = std::make_unique<scaled>();
        s->inner = good_prepare(in, o);
        return std::unique_ptr<attn::device_run>(std::move(s));
    };
    const attn::problem p = attn::gqa(64, 4, 2, 37);
    CHECK_FALSE(attn::check::check_case<float>(bad, p, mode::core, {}, 5).pass);
}

TEST_CASE("a device variant refuses what it does not serve in one line", "[device]") {
    const attn::variant dev = attn_test::host_device_variant();
    const attn::problem p = attn::gqa(64, 4, 2, 37);
    CHECK(attn::refusal(dev, p, mode::layer, attn::dtype::f32, attn::device::cpu).empty());
    CHECK(attn::refusal(dev, p, mode::decode, attn::dtype::int8, attn::device::cpu) ==
          "variant 'test-device': test-device stores f32, bf16 or f16, not int8");
    CHECK(attn::refusal(dev, p, mode::core, attn::dtype::f64, attn::device::cpu) ==
          "variant 'test-device': test-device stores f32, bf16 or f16, not f64");
    CHECK(attn::refusal(dev, p, mode::core, attn::dtype::f32, attn::device::cpu).empty());
}

TEST_CASE("the checker charges a declared rounding of the weights, and only a declared one", "[device][check]") {
    attn::variant v = attn_test::stores_bf16_weights(); // it declares the rounding
    const attn::problem p = attn::gqa(64, 4, 2, 129);   // the shape the H100's check failed on before
    attn::variant silent = v;
    silent.roundings = [](const attn::problem&, mode, attn::dtype) { return attn::half_roundings{}; };
    const auto undeclared = attn::check::check_case<attn::bf16>(silent, p, mode::core, {}, 5);
    INFO("undeclared ratio " << undeclared.ratio);
    CHECK_FALSE(undeclared.pass); // bf16's 2^-8 on every weight is far past fp32's bound
    const auto declared = attn::check::check_case<attn::bf16>(v, p, mode::core, {}, 5);
    INFO("declared ratio " << declared.ratio);
    CHECK(declared.pass);
    CHECK(declared.ratio > 0.01); // the charge covers the rounding, not everything
}
