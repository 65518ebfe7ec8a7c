// cuda-hopper: cuda-flash's algorithm on sm_90a's asynchronous machinery, FlashAttention-3's design
// written from the PTX ISA (hopper_layout.hpp says where every byte and register goes,
// hopper_pipeline.hpp how the warpgroups synchronise; both are checked on the host). What it
// changes from cuda-flash:
//  - Products through wgmma (m64nNk16, fp32 accumulate), a warpgroup (4 warps) at a time: S = Q K^T
//    with both operands in shared memory (N = BKV keys), O += P V with P from registers (the S
//    accumulators rounded to T: the accumulator layout is the A-from-registers layout).
//  - Operands copied by TMA (cp.async.bulk.tensor, 128-byte swizzle, zero-filled out of bounds)
//    into a ring of `stages` K and V slots, each with a full and an empty mbarrier.
//  - Warp specialisation: warpgroup 0 produces (one thread issues every copy; setmaxnreg drops it to
//    24 registers), warpgroups 1 and 2 consume (240 registers), 64 query rows each of a 128-row
//    tile. Intra-warpgroup overlap: S_t is issued with P_{t-1} V_{t-1}, and S_t's softmax runs while
//    P V does. Ping-pong: each consumer issues its products in its turn (named barriers), so one
//    warpgroup's softmax runs under the other's products.
//  - Persistent: one block per SM (or core_options::ctas) walks prefill::schedule's tiles (L2
//    groups, the longest causal rows first), Q of the next tile loading while this tile's last P V
//    and stores run.
//  - Masks, windows, GQA/MQA, n_q != n_kv and narrow heads as cuda-flash (prefill_tiles.hpp); the
//    output stored from registers (4 bytes a thread and row).
//  - A wait on an mbarrier that lasts over 2^34 cycles traps (hopper_ptx.cuh): a hang becomes a
//    failed launch.
// Serves bf16 and f16, the widths of prefill_plan.hpp, on sm_90 (the sm_80 pass compiles an empty
// kernel; refusal.cpp and core_case refuse other devices). Resources: README.md.
#include <cudaTypedefs.h> // PFN_cuTensorMapEncodeTiled (driver entry point: no -lcuda)

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "common.cuh"
#include "hopper_layout.hpp"
#include "hopper_pipeline.hpp"
#include "prefill_plan.hpp"
#include "prefill_tiles.hpp"

#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define ATTN_HOPPER_DEVICE 1
#include "hopper_ops.cuh"
#else
#define ATTN_HOPPER_DEVICE 0
#endif

namespace attn::cuda::detail {
namespace {

using hopper_params = hopper::kernel_params;

#if ATTN_HOPPER_DEVICE
/// Zeros the box regions no copy writes (a head narrower than the instantiation: the reduction
/// over d must see zeros there); generic stores, then the fence that shows them to wgmma.
template <class C>
__device__ void zero_unloaded(unsigned char* smem, const hopper_params& p) {
    const int nq = hopper::boxes_for(p.d_qk), nv = hopper::boxes_for(p.d_v);
    auto zero = [&](int off, int bytes) {
        for (int i = threadIdx.x * 16; i < bytes; i += hopper::threads * 16)
            *reinterpret_cast<uint4*>(smem + off + i) = make_uint4(0, 0, 0, 0);
    };
    for (int c = nq; c < C::q_boxes; ++c) zero(C::q_off + c * C::q_box_bytes, C::q_box_bytes);
    for (int s = 0; s < C::stages; ++s) {
        for (int c = nq; c < C::k_boxes; ++c)
            zero(C::k_off + s * C::k_stage_bytes + c * C::kv_box_bytes, C::kv_box_bytes);
        for (int c = nv; c < C::v_boxes; ++c)
            zero(C::v_off + s * C::v_stage_bytes + c * C::kv_box_bytes, C::kv_box_bytes);
    }
    sm90::fence_proxy_async();
}
#endif

template <class T, class C>
__global__ void __launch_bounds__(hopper::threads, 1)
    hopper_kernel(const __grid_constant__ CUtensorMap tq, const __grid_constant__ CUtensorMap tk,
                  const __grid_constant__ CUtensorMap tv, const __grid_constant__ hopper_params p) {
#if ATTN_HOPPER_DEVICE
    extern __shared__ __align__(1024) unsigned char smem_raw[];
    const std::uint32_t raw = sm90::smem_u32(smem_raw), base = (raw + 1023u) & ~1023u;
    unsigned char* smem = smem_raw + (base - raw);
    const int wg = int(threadIdx.x / 128);
    zero_unloaded<C>(smem, p);
    if (threadIdx.x == 0) {
        const auto bar = [&](int i) { return base + C::bar_off + 8 * i; };
        sm90::mbar_init(bar(hopper::q_full), 1);
        sm90::mbar_init(bar(hopper::q_empty), hopper::consumer_warps);
        for (int s = 0; s < C::stages; ++s) {
            sm90::mbar_init(bar(hopper::k_full(s)), 1);
            sm90::mbar_init(bar(hopper::k_empty<C::stages>(s)), hopper::consumer_warps);
            sm90::mbar_init(bar(hopper::v_full<C::stages>(s)), 1);
            sm90::mbar_init(bar(hopper::v_empty<C::stages>(s)), hopper::consumer_warps);
        }
        sm90::mbar_init_fence();
        sm90::tma_prefetch(&tq);
        sm90::tma_prefetch(&tk);
        sm90::tma_prefetch(&tv);
    }
    __syncthreads();
    hopper::work w = p.plan;
    w.cta = blockIdx.x;
    w.ctas = gridDim.x;
    if (wg == 0) {
        sm90::setmaxnreg_dec<hopper::producer_regs>();
        if (threadIdx.x == 0) {
            sm90::producer_ops<C> ops{base, &tq, &tk, &tv, &p};
            hopper::producer_program(ops, w);
        }
    } else {
        sm90::setmaxnreg_inc<hopper::consumer_regs>();
        sm90::consumer_ops<T, C> ops;
        ops.base = base;
        ops.p = &p;
        ops.wg = wg - 1;
        ops.warp = int(threadIdx.x / 32) % 4;
        ops.lane = int(threadIdx.x % 32);
        hopper::consumer_program(ops, w);
    }
#endif
}

using encode_fn = PFN_cuTensorMapEncodeTiled_v12000;

encode_fn tensor_map_encoder() {
    static const encode_fn fn = [] {
        void* f = nullptr;
        cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
        ATTN_CUDA(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault, &found),
                  "looking up cuTensorMapEncodeTiled in the driver");
        if (found != cudaDriverEntryPointSuccess || !f)
            throw error("cuda-hopper: the driver has no cuTensorMapEncodeTiled (CUDA 12.0 or newer needed)");
        return reinterpret_cast<encode_fn>(f);
    }();
    return fn;
}

/// The tensor map of a [batch, rows, heads x d] tensor at ptr (16-bit), boxes of box_rows rows;
/// the last few are kept, so timed calls do not encode again.
const CUtensorMap& tensor_map(const void* ptr, storage st, long long batch, long long rows, long long heads,
                              long long d, int box_rows, const char* what) {
    struct entry {
        const void* ptr;
        storage st;
        long long key[5];
        CUtensorMap map;
    };
    static std::vector<entry> cache;
    const long long key[5] = {batch, rows, heads, d, box_rows};
    for (const entry& e : cache)
        if (e.ptr == ptr && e.st == st && std::equal(key, key + 5, e.key)) return e.map;
    if (cache.size() >= 32) cache.clear();
    const hopper::tma_geometry g = hopper::tma_for(batch, rows, heads, d, box_rows);
    const cuuint32_t element_strides[4] = {1, 1, 1, 1};
    entry e{ptr, st, {batch, rows, heads, d, box_rows}, {}};
    const CUresult r = tensor_map_encoder()(
        &e.map, st == storage::f16 ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16 : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 4,
        const_cast<void*>(ptr), g.dims, g.strides, g.box, element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE,
        CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    if (r != CUDA_SUCCESS)
        throw error("cuTensorMapEncodeTiled failed (CUresult " + std::to_string(int(r)) + ") for " + what +
                    " of cuda-hopper: d " + std::to_string(d) + ", heads " + std::to_string(heads) + ", rows " +
                    std::to_string(rows) + ", batch " + std::to_string(batch) + ", box rows " +
                    std::to_string(box_rows));
    cache.push_back(e);
    return cache.back().map;
}

template <class T, class C>
void launch(const core_args& a, cudaStream_t stream) {
    constexpr int smem = C::smem_bytes;
    static const cudaError_t raised =
        cudaFuncSetAttribute(hopper_kernel<T, C>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    ATTN_CUDA(raised, "raising cuda-hopper's shared memory limit to " + std::to_string(smem) + " bytes");
    const CUtensorMap tq = tensor_map(a.q, a.st, a.batch, a.n_q, a.heads, a.d_qk, hopper::block_q, "q");
    const CUtensorMap tk = tensor_map(a.k, a.st, a.batch, a.n_kv, a.kv_heads, a.d_qk, C::block_kv, "k");
    const CUtensorMap tv = tensor_map(a.v, a.st, a.batch, a.n_kv, a.kv_heads, a.d_v, C::block_kv, "v");
    hopper_params p{};
    p.plan.mask = {a.n_q, a.n_kv, a.causal, a.window};
    p.plan.block_kv = C::block_kv;
    p.plan.stages = C::stages;
    const long long q_tiles = (a.n_q + hopper::block_q - 1) / hopper::block_q;
    const long long kv_bytes = (long long)a.n_kv * (a.d_qk + a.d_v) * 2 * a.kv_heads / a.heads;
    p.plan.sched =
        prefill::make_schedule(q_tiles, (long long)a.batch * a.heads, kv_bytes, (long long)props().l2_bytes / 2);
    p.heads = a.heads;
    p.kv_heads = a.kv_heads;
    p.n_q = a.n_q;
    p.d_qk = a.d_qk;
    p.d_v = a.d_v;
    p.scale_log2 = a.scale * log2e;
    p.out = a.out;
    const long long want = a.options.ctas > 0 ? a.options.ctas : props().sms;
    const unsigned grid = unsigned(std::max(1LL, std::min(want, p.plan.sched.size())));
    hopper_kernel<T, C><<<grid, hopper::threads, smem, stream>>>(tq, tk, tv, p);
    ATTN_LAUNCHED("cuda-hopper " + std::to_string(C::dqk) + "/" + std::to_string(C::dv) + " kv" +
                  std::to_string(C::block_kv) + " s" + std::to_string(C::stages));
}

template <class T, int DQK, int DV, const auto& TILES, int I = 0>
void launch_tile(const core_args& a, int tile, cudaStream_t stream) {
    constexpr int n = int(sizeof(TILES) / sizeof(TILES[0]));
    if constexpr (I < n) {
        if (tile != I) return launch_tile<T, DQK, DV, TILES, I + 1>(a, tile, stream);
        constexpr prefill::hopper_tile t = TILES[I];
        return launch<T, hopper::config<DQK, DV, t.block_kv, t.stages>>(a, stream);
    } else {
        throw error("cuda-hopper has " + std::to_string(n) + " tile candidates at d " + std::to_string(DQK) +
                    ", not tile " + std::to_string(tile + 1));
    }
}

template <class T>
void launch_type(const core_args& a, int tile, cudaStream_t stream) {
    const prefill::widths w = prefill::widths_for(std::size_t(a.d_qk), std::size_t(a.d_v));
    if (w.dqk == 64) return launch_tile<T, 64, 64, prefill::hopper_tiles_64>(a, tile, stream);
    if (w.dqk == 128) return launch_tile<T, 128, 128, prefill::hopper_tiles_128>(a, tile, stream);
    if (w.dqk == 192) return launch_tile<T, 192, 128, prefill::hopper_tiles_192>(a, tile, stream);
    throw error("cuda-hopper has no instantiation for d_qk " + std::to_string(a.d_qk) + ", d_v " +
                std::to_string(a.d_v));
}

} // namespace

void launch_hopper(const core_args& a, cudaStream_t stream) {
    const int tile = a.options.tile > 0 ? a.options.tile - 1 : 0;
    if (a.st == storage::f16) return launch_type<__half>(a, tile, stream);
    return launch_type<__nv_bfloat16>(a, tile, stream);
}

} // namespace attn::cuda::detail
