// The CPU-backed test device (tests/device/host_device.cpp) registered, linked into attnbench-bench
// (bench_device: the harness's device path, prepared once, checked against fp64, timed by the
// device's clock) and into attnbench (attnbench_device: `check` through the device path), so CI
// runs both. Nothing else differs from the real binaries.
#include <cstdlib>
import attn.core;
import attn.variants;

namespace attn_test {
attn::variant host_device_variant();
attn::variant stores_bf16_weights();
} // namespace attn_test

namespace {
const bool registered = [] {
    attn::register_variant(attn_test::host_device_variant());
    attn::register_variant(attn_test::stores_bf16_weights());
    return true;
}();
} // namespace
