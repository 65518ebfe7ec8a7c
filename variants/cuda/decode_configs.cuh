// cuda-decode's compiled configurations (decode_mma.cuh's mma_cfg, decode_simt.cuh's simt_cfg), named
// once for the instantiation files (decode_mma.cu, decode_mla.cu, decode_simt.cu) and the host
// emulation test (tests/cuda/test_decode_emu.cpp).
#pragma once

#include "decode_mma.cuh"
#include "decode_simt.cuh"

namespace attn::cuda::detail {

// <cache, d_k, d_v, m-tiles, warps, keys a tile, k groups, V in K, min blocks an SM>
/// d_k = d_v in {64, 128}: 4 warps, tiles of 64 keys, one k group; 4 blocks an SM at one m-tile
/// (128 registers), 3 at two (170).
template <storage ST, int D, int MT>
using gqa_cfg = mma_cfg<ST, D, D, MT, 4, 64, 1, false, MT == 1 ? 4 : 3>;
/// MLA 576/512: tiles of 32 keys (36 KiB in bf16), 4 k groups; 16 rows on 4 warps of 128 columns,
/// 32 and 64 rows on 8 warps of 64 columns.
template <storage ST, int MT>
using mla_wide_cfg = mma_cfg<ST, 576, 512, MT, MT == 1 ? 4 : 8, 32, 4, true, MT == 1 ? 2 : 1>;
/// MLA 160/128 (a small odd pair for the tests): tiles of 64 keys, 2 k groups.
template <storage ST, int MT>
using mla_narrow_cfg = mma_cfg<ST, 160, 128, MT, MT == 1 ? 4 : 8, 64, 2, true, MT == 1 ? 2 : 1>;

} // namespace attn::cuda::detail
