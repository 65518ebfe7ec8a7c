// cuda-decode's GPU checks (test_cuda_gpu_decode.cpp builds a case and checks it against a
// float64 reference; test_cuda_gpu_decode_cases.cpp lists the cases).
#pragma once

#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "gpu_check.hpp"

namespace attn_gpu_check {

/// One decode case: the shape (n_kv the longest sequence), the cache type and layout.
struct decode_input {
    cu::shape s;
    cu::storage st = cu::storage::bf16;
    std::size_t page = 0;              ///< 0: contiguous [B, G, capacity, d]; else pages [P, page, G, d]
    std::size_t ring = 0;              ///< rolling buffer slots (needs s.window)
    bool v_from_k = false;             ///< MLA absorbed: V = K's first d_v columns
    std::vector<std::int32_t> lengths; ///< per sequence; empty: n_kv each
    cu::decode_options options;
    float q_sigma = 1.0f;
};

/// What a case plants so that a mutant shows: keys made to matter (their key row is a multiple of
/// a query of the group) at the positions a mutant would add or drop.
enum class decode_mutant { none, scale, kv_map, mask_short, window_short, window_long };
const char* decode_mutant_name(decode_mutant m);

/// What runs a built case: cuda-decode through decode_case (the default), or another executor of
/// the same kernels (test_decode_emu.cpp: their source on host threads). `how` names the plan.
struct decode_result {
    std::vector<float> out;
    std::string how;
};
using decode_runner =
    std::function<decode_result(const cu::shape&, cu::storage, const float* q, const void* k, const void* v,
                                const float* k_scales, const float* v_scales, const cu::decode_spec&)>;

/// Builds the case (the cache as the kernel reads it: rounded or quantized rows, rows nobody may
/// read poisoned with NaN, pages in shuffled order), runs cuda-decode, checks the output against
/// the float64 reference over the logical cache; each mutant's reference must then be missed.
/// reference_only: no GPU; each mutant's distance from the reference must exceed twice the tolerance.
void check_decode_case(tally& t, std::mt19937_64& rng, const decode_input& in,
                       const std::vector<decode_mutant>& mutants, bool reference_only, const decode_runner& run = {});

/// One line naming the case.
std::string describe_decode(const decode_input& in);

} // namespace attn_gpu_check
