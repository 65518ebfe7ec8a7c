// cuda-decode's CUDA-core kernels (decode_simt.cuh): f32, bf16, f16 and int8 caches, 4, 8, 16 or
// 32 lanes a row (d up to 32, 64, 128, 256), tiles of 32 keys, 128 threads, 4 blocks an SM at most.
#include "decode.cuh"
#include "decode_simt.cuh"

namespace attn::cuda::detail {
namespace {

template <class C>
void launch_simt(const decode_params& p, unsigned blocks, std::size_t smem, cudaStream_t s) {
    decode_simt<C><<<blocks, C::NTH, smem, s>>>(p);
}

template <storage ST, int BDX>
decode_kernel describe(int d) {
    using C = simt_cfg<ST, BDX>;
    decode_kernel k;
    k.fn = reinterpret_cast<const void*>(&decode_simt<C>);
    k.launch = &launch_simt<C>;
    k.name = std::string("cuda-cores ") + name(ST) + " lanes " + std::to_string(BDX);
    k.threads = C::NTH;
    k.tile = C::T;
    k.row_cap = C::ROWS;
    k.fixed = C::FIXED;
    k.stage = std::size_t(C::T) * 2 * simt_stride(d * C::EB) + (C::I8 ? 2 * C::T * 4 : 0);
    k.merge = C::MERGE;
    return k;
}

template <storage ST>
decode_kernel pick(int d) {
    switch (plan::simt_lanes(d)) {
    case 4:
        return describe<ST, 4>(d);
    case 8:
        return describe<ST, 8>(d);
    case 16:
        return describe<ST, 16>(d);
    default:
        return describe<ST, 32>(d);
    }
}

} // namespace

decode_kernel find_simt(storage st, int d) {
    if (d <= 0 || d % 8 != 0 || d > 256) return {};
    switch (st) {
    case storage::f32:
        return pick<storage::f32>(d);
    case storage::bf16:
        return pick<storage::bf16>(d);
    case storage::f16:
        return pick<storage::f16>(d);
    case storage::int8:
        return pick<storage::int8>(d);
    default:
        return {};
    }
}

} // namespace attn::cuda::detail
