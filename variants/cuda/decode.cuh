// cuda-decode's host side below the case (decode_case.cu): the compiled kernels (decode_mma.cu,
// decode_mla.cu, decode_simt.cu each list theirs), the plan for one case on this device and the
// launch (decode.cu). Never included by the C++ tree.
#pragma once

#include <cstddef>
#include <string>

#include "decode_device.cuh"
#include "plan.hpp"

namespace attn::cuda::detail {

/// One compiled decode kernel and what the planner needs of it. fn is null when none fits.
struct decode_kernel {
    const void* fn = nullptr;
    void (*launch)(const decode_params&, unsigned blocks, std::size_t smem, cudaStream_t) = nullptr;
    std::string name;
    bool tensor_cores = false;
    int threads = 0, tile = 0, row_cap = 0;
    std::size_t fixed = 0, stage = 0, merge = 0; ///< shared memory: fixed + max(stages x stage, merge)
};

/// Tensor cores, d_k = d_v in {64, 128}, bf16/f16/int8 (decode_mma.cu).
decode_kernel find_mma(storage st, int d, int m_tiles);
/// Tensor cores, MLA's absorbed form, (d_k, d_v) in {(576, 512), (160, 128)} (decode_mla.cu).
decode_kernel find_mla(storage st, int d_k, int d_v, int m_tiles);
/// CUDA cores, any cache type, d a multiple of 8 up to 256 (decode_simt.cu).
decode_kernel find_simt(storage st, int d);

/// A case's plan: the kernel, what was chosen, and the parts of the arguments that follow.
struct decode_setup {
    decode_kernel kernel;
    decode_plan_info info;
    unsigned blocks = 0;
    std::size_t units = 0;
};

/// Plans (s, st, spec) on device 0 (spec.options: 0 means planned). Throws error when a given
/// option cannot run (shared memory, rows).
decode_setup plan_decode(const shape& resolved_shape, storage st, const decode_spec& spec);

/// Launches the planned kernel; p's splits, rows, groups, stages must be the setup's.
void launch_decode(const decode_setup& setup, const decode_params& p, cudaStream_t stream);

} // namespace attn::cuda::detail
