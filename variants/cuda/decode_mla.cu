// cuda-decode's tensor-core kernels for MLA's absorbed form (decode_mma.cuh with V in K's rows):
// one latent head, rows d_c + d_rope wide read once as K, their first d_c columns as V.
//  - 576/512 (DeepSeek): tiles of 32 keys (36 KiB in bf16); the 36 k-steps of Q K^T split over 4
//    k groups whose partial scores are summed in shared memory; 16 rows: 4 warps of 128 output
//    columns each; 32 and 64 rows: 8 warps of 64 columns (the 64-row block's 128 accumulators a
//    thread are what 128 x 512 fp32 outputs cost over 256 threads; 128 heads run as two blocks
//    side by side on the same tiles, which L2 serves once).
//  - 160/128 (a small odd pair for the tests): tiles of 64 keys, 2 k groups.
#include "decode.cuh"
#include "decode_configs.cuh"

namespace attn::cuda::detail {
namespace {

template <class C>
void launch_mla(const decode_params& p, unsigned blocks, std::size_t smem, cudaStream_t s) {
    decode_mma<C><<<blocks, C::NTH, smem, s>>>(p);
}

template <class C>
decode_kernel describe(const char* what) {
    decode_kernel k;
    k.fn = reinterpret_cast<const void*>(&decode_mma<C>);
    k.launch = &launch_mla<C>;
    k.name = std::string("mla ") + what + " d " + std::to_string(C::DK) + "/" + std::to_string(C::DV) + " m-tiles " +
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
decode_kernel pick(int d_k, int mt) {
    const char* n = name(ST);
    if (d_k == 576)
        return mt == 1   ? describe<mla_wide_cfg<ST, 1>>(n)
               : mt == 2 ? describe<mla_wide_cfg<ST, 2>>(n)
                         : describe<mla_wide_cfg<ST, 4>>(n);
    return mt == 1   ? describe<mla_narrow_cfg<ST, 1>>(n)
           : mt == 2 ? describe<mla_narrow_cfg<ST, 2>>(n)
                     : describe<mla_narrow_cfg<ST, 4>>(n);
}

} // namespace

decode_kernel find_mla(storage st, int d_k, int d_v, int mt) {
    const bool served = (d_k == 576 && d_v == 512) || (d_k == 160 && d_v == 128);
    if (!served || (mt != 1 && mt != 2 && mt != 4)) return {};
    switch (st) {
    case storage::bf16:
        return pick<storage::bf16>(d_k, mt);
    case storage::f16:
        return pick<storage::f16>(d_k, mt);
    case storage::int8:
        return pick<storage::int8>(d_k, mt);
    default:
        return {};
    }
}

} // namespace attn::cuda::detail
