// What cuda-decode's GPU checks (test_cuda_gpu_decode*.cpp) take from the test program's shared
// helpers (gpu_reference.hpp: the tolerances, the host's rounding, random inputs, a parallel loop
// for the float64 references, the error measure and the tally), and their entry point.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "api.hpp"
#include "formats.hpp"
#include "gpu_reference.hpp"

namespace attn_gpu_check {

namespace cu = attn::cuda;
namespace fm = attn::cuda::formats;

// shared with the prefill checks (gpu_reference.hpp): one tolerance, one error measure, one tally
using gpu_test::fmt_err;
using gpu_test::parallel_for;
using gpu_test::random_vector;
using gpu_test::relative_error;
using gpu_test::round_to;
using gpu_test::tally;
using gpu_test::tolerance;

/// cuda-decode's cases (test_cuda_gpu_decode.cpp): paged, rolling, n_q 1-8, MLA, the options, the
/// mutants. reference_only: no GPU, the mutants' margins over the tolerance alone.
void run_decode_checks(tally& t, std::mt19937_64& rng, bool small, bool reference_only);

} // namespace attn_gpu_check
