// What api.hpp declares, for a build without CUDA (ATTNBENCH_CUDA=OFF, or no nvcc at configure
// time): query() says why in one line, refusal() is the real one (refusal.cpp, shared with the CUDA
// build), and every case's constructor throws attn::cuda::error, so callers need no #ifdef.
#include <string>
#include "api.hpp"

#ifndef ATTNBENCH_CUDA_ABSENT_REASON
#define ATTNBENCH_CUDA_ABSENT_REASON "built without CUDA"
#endif

namespace attn::cuda {

namespace {
[[noreturn]] void absent(const std::string& what) {
    throw error(std::string(ATTNBENCH_CUDA_ABSENT_REASON) + ": " + what);
}
} // namespace

bool built_with_cuda() { return false; }

device_info query() {
    device_info d;
    d.reason = ATTNBENCH_CUDA_ABSENT_REASON;
    return d;
}

struct core_case::impl {};
core_case::core_case(kernel k, const shape&, storage st, const float*, const float*, const float*) {
    absent(std::string("cannot run the ") + name(k) + " core in " + name(st));
}
core_case::core_case(kernel k, const shape&, storage st, const float*, const float*, const float*,
                     const core_options&) {
    absent(std::string("cannot run the ") + name(k) + " core in " + name(st));
}
core_case::~core_case() = default;
core_case::core_case(core_case&&) noexcept = default;
core_case& core_case::operator=(core_case&&) noexcept = default;
void core_case::run() { absent("core_case::run"); }
std::vector<float> core_case::output() { absent("core_case::output"); }
std::vector<double> core_case::time_ms(int, int, bool) { absent("core_case::time_ms"); }

struct decode_case::impl {};
decode_case::decode_case(const shape&, storage st, const float*, const void*, const void*, const float*, const float*,
                         std::size_t) {
    absent(std::string("cannot run cuda-decode over a ") + name(st) + " cache");
}
decode_case::decode_case(const shape&, storage st, const float*, const void*, const void*, const float*, const float*,
                         const decode_spec&) {
    absent(std::string("cannot run cuda-decode over a ") + name(st) + " cache");
}
decode_case::~decode_case() = default;
decode_case::decode_case(decode_case&&) noexcept = default;
decode_case& decode_case::operator=(decode_case&&) noexcept = default;
void decode_case::run() { absent("decode_case::run"); }
std::vector<float> decode_case::output() { absent("decode_case::output"); }
std::vector<double> decode_case::time_ms(int, int, bool) { absent("decode_case::time_ms"); }
std::size_t decode_case::chunks() const { absent("decode_case::chunks"); }
void decode_case::set_options(const decode_options&) { absent("decode_case::set_options"); }
decode_plan_info decode_case::plan() const { absent("decode_case::plan"); }

struct layer_case::impl {};
layer_case::layer_case(const shape&, std::size_t, storage st, kernel k, const layer_inputs&) {
    absent(std::string("cannot run the ") + name(k) + " layer in " + name(st));
}
layer_case::~layer_case() = default;
layer_case::layer_case(layer_case&&) noexcept = default;
layer_case& layer_case::operator=(layer_case&&) noexcept = default;
void layer_case::run() { absent("layer_case::run"); }
std::vector<float> layer_case::output() { absent("layer_case::output"); }
std::vector<double> layer_case::time_ms(int, int, bool) { absent("layer_case::time_ms"); }

peak measure_peak(int) { absent("measure_peak"); }

} // namespace attn::cuda
