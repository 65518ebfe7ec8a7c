// attnbench-bench with the CPU-backed test device registered (tests/device/host_device.cpp): the
// harness's device path (prepared once, checked against fp64, timed by the device's clock) runs in
// CI. Nothing else differs from attnbench-bench.
#include <cstdlib>
import attn.core;
import attn.variants;

namespace attn_test {
attn::variant host_device_variant();
}

namespace {
const bool registered = [] {
    attn::register_variant(attn_test::host_device_variant());
    return true;
}();
} // namespace
