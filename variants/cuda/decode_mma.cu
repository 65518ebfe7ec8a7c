// cuda-decode's tensor-core kernels for d_k = d_v in {64, 128} (decode_mma.cuh): bf16, f16 and
// int8 caches, 1 or 2 m-tiles (16 or 32 rows a block), 4 warps, tiles of 64 keys, every warp's
// scores over the whole row (one k group). Launch bounds: 4 blocks an SM at one m-tile (128
// registers), 3 at two (170).
#include "decode.cuh"
#include "decode_configs.cuh"

namespace attn::cuda::detail {
namespace {

template <class C>
void launch_mma(const decode_params& p, unsigned blocks, std::size_t smem, cudaStream_t s) {
    decode_mma<C><<<blocks, C::NTH, smem, s>>>(p);
}

template <class C>
decode_kernel describe(const char* what) {
    decode_kernel k;
    k.fn = reinterpret_cast<const void*>(&decode_mma<C>);
    k.launch = &launch_mma<C>;
    k.name = std::string("mma ") + what + " d " + std::to_string(C::DK) + "/" + std::to_string(C::DV) + " m-tiles " +
             std::to_string(C::MT);
    k.tensor_cores = true;
    k.threads = C::NTH;
    k.tile = C::T;
    k.row_cap = C::M;
    k.fixed = C::FIXED;
    k.stage = C::STAGE;
    return k;
}

template <storage ST>
decode_kernel pick(int d, int mt) {
    const char* n = name(ST);
    if (d == 64) return mt == 1 ? describe<gqa_cfg<ST, 64, 1>>(n) : describe<gqa_cfg<ST, 64, 2>>(n);
    return mt == 1 ? describe<gqa_cfg<ST, 128, 1>>(n) : describe<gqa_cfg<ST, 128, 2>>(n);
}

} // namespace

decode_kernel find_mma(storage st, int d, int mt) {
    if ((d != 64 && d != 128) || (mt != 1 && mt != 2)) return {};
    switch (st) {
    case storage::bf16:
        return pick<storage::bf16>(d, mt);
    case storage::f16:
        return pick<storage::f16>(d, mt);
    case storage::int8:
        return pick<storage::int8>(d, mt);
    default:
        return {};
    }
}

} // namespace attn::cuda::detail
