// cuda-decode's plan and launch (the kernels: decode_mma.cuh on tensor cores, decode_simt.cuh on
// CUDA cores; their instantiations in decode_mma.cu, decode_mla.cu, decode_simt.cu).
//  - Path: tensor cores for MLA's absorbed form always, and for bf16, f16 and int8 caches at d 64
//    and 128 when a kv head has at least 8 rows (H/G x n_q); CUDA cores otherwise (f32 always).
//    decode_options.tensor_cores overrides where both serve.
//  - Rows: plan::block_rows (all of a kv head's rows in one block where they fit: 32 on tensor
//    cores, 64 for MLA, 32 / lanes x 4 on CUDA cores).
//  - Stages: plan::choose_stages from the kernel's shared memory and register use on this device
//    (the most cache bytes in flight per SM); blocks per SM from the CUDA occupancy calculator.
//  - Splits: plan::split_count over units = B x G x row groups and slots = SMs x blocks per SM.
// Every option given is used as given, checked against the device (shared memory).
#include <algorithm>
#include <string>

#include "decode.cuh"
#include "plan.hpp"

namespace attn::cuda::detail {
namespace {

struct smem_limits {
    std::size_t per_sm = 0, per_block = 0, reserved = 0;
};

const smem_limits& limits() {
    static const smem_limits l = [] {
        props(); // throws without a device
        int sm = 0, block = 0, reserved = 0;
        ATTN_CUDA(cudaDeviceGetAttribute(&sm, cudaDevAttrMaxSharedMemoryPerMultiprocessor, 0),
                  "reading the shared memory per SM of device 0");
        ATTN_CUDA(cudaDeviceGetAttribute(&block, cudaDevAttrMaxSharedMemoryPerBlockOptin, 0),
                  "reading the shared memory limit of device 0");
        ATTN_CUDA(cudaDeviceGetAttribute(&reserved, cudaDevAttrReservedSharedMemoryPerBlock, 0),
                  "reading the shared memory reserved per block on device 0");
        return smem_limits{std::size_t(sm), std::size_t(block), std::size_t(reserved)};
    }();
    return l;
}

} // namespace

decode_setup plan_decode(const shape& s, storage st, const decode_spec& spec) {
    const decode_options& o = spec.options;
    const int R = int(s.heads / s.kv_heads), n_q = int(s.n_q);
    const bool mla = spec.v_from_k;
    const plan::path_choice path =
        plan::choose_path(R, n_q, int(s.d_qk), st == storage::f32, mla, o.tensor_cores, o.heads_per_block);
    const bool tensor = path.tensor;
    const plan::row_blocking rb = path.rows;

    decode_setup out;
    decode_kernel& k = out.kernel;
    if (tensor)
        k = mla ? find_mla(st, int(s.d_qk), int(s.d_v), plan::m_tiles(rb.rows))
                : find_mma(st, int(s.d_qk), plan::m_tiles(rb.rows));
    else
        k = find_simt(st, int(s.d_qk));
    if (!k.fn)
        throw error("cuda-decode: no kernel compiled for this case (" + std::string(name(st)) + ", d " +
                    std::to_string(s.d_qk) + "/" + std::to_string(s.d_v) + ")");

    const smem_limits& lim = limits();
    cudaFuncAttributes attr{};
    ATTN_CUDA(cudaFuncGetAttributes(&attr, k.fn), "reading the attributes of cuda-decode's " + k.name);
    const std::size_t dyn_limit = lim.per_block - attr.sharedSizeBytes;
    ATTN_CUDA(cudaFuncSetAttribute(k.fn, cudaFuncAttributeMaxDynamicSharedMemorySize, int(dyn_limit)),
              "raising the shared memory limit of cuda-decode's " + k.name);
    int reg_blocks = 0;
    ATTN_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&reg_blocks, k.fn, k.threads, 0),
              "the occupancy of cuda-decode's " + k.name);
    decode_plan_info& info = out.info;
    if (o.stages > 0) {
        info.stages = o.stages;
        info.smem = plan::stage_smem(k.fixed, k.stage, k.merge, o.stages);
        if (info.smem > dyn_limit)
            throw error("cuda-decode: " + std::to_string(o.stages) + " stages need " + std::to_string(info.smem) +
                        " bytes of shared memory, over the device's " + std::to_string(dyn_limit) + " (" + k.name +
                        ")");
    } else {
        const plan::stage_choice c = plan::choose_stages(k.stage, k.fixed, k.merge, lim.per_sm - attr.sharedSizeBytes,
                                                         dyn_limit, lim.reserved + attr.sharedSizeBytes, reg_blocks);
        if (c.stages == 0)
            throw error("cuda-decode: two stages of " + std::to_string(k.stage) +
                        " bytes do not fit in shared memory (" + k.name + ")");
        info.stages = c.stages;
        info.smem = c.smem;
    }
    ATTN_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&info.blocks_per_sm, k.fn, k.threads, info.smem),
              "the occupancy of cuda-decode's " + k.name);
    info.blocks_per_sm = std::max(info.blocks_per_sm, 1);

    const long long keys = plan::step_keys((long long)s.n_kv, n_q, (long long)s.window, s.causal).size();
    const long long tiles = plan::tiles_of(keys, k.tile);
    out.units = s.batch * s.kv_heads * std::size_t(rb.groups);
    info.splits = o.splits > 0
                      ? o.splits
                      : plan::split_count((long long)out.units, (long long)props().sms * info.blocks_per_sm, tiles);
    const unsigned long long blocks = (unsigned long long)out.units * unsigned(info.splits);
    if (blocks >= (1ull << 31))
        throw error("cuda-decode: " + std::to_string(blocks) + " blocks exceed the grid's 2^31 - 1");
    out.blocks = unsigned(blocks);
    info.kernel = k.name;
    info.tensor_cores = k.tensor_cores;
    info.rows_per_block = rb.rows;
    info.heads_per_block = std::max(1, rb.rows / n_q);
    info.groups = rb.groups;
    info.tile = k.tile;
    info.threads = k.threads;
    return out;
}

void launch_decode(const decode_setup& setup, const decode_params& p, cudaStream_t stream) {
    setup.kernel.launch(p, setup.blocks, setup.info.smem, stream);
    ATTN_LAUNCHED("cuda-decode (" + setup.kernel.name + ")");
}

} // namespace attn::cuda::detail
