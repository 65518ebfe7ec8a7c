// attn::cuda::hopper -- cuda-hopper's shared-memory layout, wgmma descriptors, accumulator
// fragment map and TMA box parameters, as functions the host tests check without a GPU (host and
// device, plain C++17 outside nvcc). What the kernel (hopper.cu) computes from these:
//  - A block (CTA) of 3 warpgroups: warpgroup 0 the producer (one thread issues every TMA copy),
//    warpgroups 1 and 2 the consumers, 64 query rows each of a 128-row query tile.
//  - Shared memory, every region 1024-byte aligned: Q [DQK/64 boxes][128 rows][128 B]; K
//    [stages][DQK/64][BKV][128 B]; V [stages][DV/64][BKV][128 B]; then the mbarriers. Each box is
//    what one TMA copy with CU_TENSOR_MAP_SWIZZLE_128B writes: 64 16-bit columns a row, the
//    16-byte chunk c of row r at chunk c ^ (r % 8) (the swizzle acts on address bits 4-6 XOR 7-9,
//    so the 1024-byte alignment makes it the row's index).
//  - wgmma reads the same bytes through 64-bit matrix descriptors (PTX ISA "Matrix Descriptor
//    Format"): start address, leading and stride byte offsets (>> 4), swizzle mode 1 (128 B).
//    Q (A) and K (B) are K-major (d contiguous): 8-row groups 1024 B apart (SBO), the leading
//    offset unused; k-step ks reads box ks / 4 at byte (ks % 4) x 32 of each row. V (B of P V) is
//    MN-major (d contiguous, the reduction over keys): its 64-column boxes are BKV x 128 B apart
//    (LBO), 8-key groups 1024 B apart (SBO); k-step kk starts at key row 16 kk.
//  - Accumulators (m64nNk16, fp32): element i of thread (warp w of the warpgroup, lane) is row
//    16 w + lane / 4 + 8 ((i / 2) % 2), column 8 (i / 4) + 2 (lane % 4) + i % 2. The A operand
//    from registers (16-bit) has the same map per 32-bit register pair, so P's register j packs S
//    elements 2j and 2j + 1 (P stays in registers between the two products).
//  - TMA: Q, K and V as 4-D tensors (d, heads, rows, batch) over api.hpp's interleaved layout
//    [B, n, heads x d]; a box is 64 columns x 1 head x rows x 1 batch; out-of-bounds rows and
//    columns are zero-filled and still counted in the transaction bytes.
#pragma once

#include <cstdint>

#include "hd.hpp"

namespace attn::cuda::hopper {

inline constexpr int block_q = 128;       ///< query rows a work tile
inline constexpr int wg_rows = 64;        ///< query rows a consumer warpgroup
inline constexpr int consumers = 2;       ///< consumer warpgroups
inline constexpr int threads = 384;       ///< producer + consumer warpgroups
inline constexpr int consumer_warps = 8;  ///< arrivals that release a slot (lane 0 of each consumer warp)
inline constexpr int box_cols = 64;       ///< 16-bit columns of a box row (128 bytes, the swizzle span)
inline constexpr int producer_regs = 24;  ///< setmaxnreg: the producer gives its registers away ...
inline constexpr int consumer_regs = 240; ///< ... to the consumers (128 x 24 + 256 x 240 <= 65536)

/// One instantiation: widths DQK x DV (multiples of 64), BKV keys a stage, STAGES stages.
template <int DQK, int DV, int BKV, int STAGES>
struct config {
    static constexpr int dqk = DQK, dv = DV, block_kv = BKV, stages = STAGES;
    static constexpr int q_boxes = DQK / box_cols, k_boxes = DQK / box_cols, v_boxes = DV / box_cols;
    static constexpr int q_box_bytes = block_q * 128, kv_box_bytes = BKV * 128;
    static constexpr int q_off = 0;
    static constexpr int k_off = q_off + q_boxes * q_box_bytes, k_stage_bytes = k_boxes * kv_box_bytes;
    static constexpr int v_off = k_off + STAGES * k_stage_bytes, v_stage_bytes = v_boxes * kv_box_bytes;
    static constexpr int bar_off = v_off + STAGES * v_stage_bytes;
    static constexpr int barriers = 2 + 4 * STAGES; ///< q_full, q_empty, then k_full, k_empty, v_full, v_empty [STAGES]
    static constexpr int smem_bytes = bar_off + barriers * 8 + 1024;          ///< + 1024: the base rounded up to 1024
    static constexpr int s_regs = BKV / 2, o_regs = DV / 2, p_regs = BKV / 4; ///< per consumer thread
    static_assert(DQK % 64 == 0 && DV % 64 == 0 && DV <= 256, "whole 128-byte boxes; wgmma N <= 256");
    static_assert(BKV % 16 == 0 && BKV <= 256, "P V k-steps of 16 keys; wgmma N and a TMA box <= 256");
};

/// The mbarriers (8 bytes each from bar_off).
enum barrier : int { q_full = 0, q_empty = 1 };
ATTN_HD constexpr int k_full(int slot) { return 2 + slot; }
template <int STAGES>
ATTN_HD constexpr int k_empty(int slot) {
    return 2 + STAGES + slot;
}
template <int STAGES>
ATTN_HD constexpr int v_full(int slot) {
    return 2 + 2 * STAGES + slot;
}
template <int STAGES>
ATTN_HD constexpr int v_empty(int slot) {
    return 2 + 3 * STAGES + slot;
}

/// A shared-memory matrix descriptor's fields in bytes (the 64-bit encoding stores each >> 4).
struct desc_fields {
    std::uint32_t start = 0, lbo = 0, sbo = 0;
    int swizzle = 1; ///< 1: 128-byte swizzle
};
ATTN_HD constexpr std::uint64_t encode(const desc_fields& f) {
    return std::uint64_t((f.start >> 4) & 0x3fff) | std::uint64_t((f.lbo >> 4) & 0x3fff) << 16 |
           std::uint64_t((f.sbo >> 4) & 0x3fff) << 32 | std::uint64_t(f.swizzle & 3) << 62;
}

/// Q's descriptor (A, K-major) for consumer warpgroup wg (0, 1) at k-step ks; `base` is the
/// shared-memory address of the 1024-aligned layout.
template <class C>
ATTN_HD constexpr desc_fields q_desc(std::uint32_t base, int wg, int ks) {
    return {base + C::q_off + std::uint32_t((ks / 4) * C::q_box_bytes + wg * wg_rows * 128 + (ks % 4) * 32), 16, 1024};
}
/// K's descriptor (B = K^T, K-major: keys are N) in ring slot `slot` at k-step ks.
template <class C>
ATTN_HD constexpr desc_fields k_desc(std::uint32_t base, int slot, int ks) {
    return {base + C::k_off + std::uint32_t(slot * C::k_stage_bytes + (ks / 4) * C::kv_box_bytes + (ks % 4) * 32), 16,
            1024};
}
/// V's descriptor (B, MN-major: d is N, keys are K) in ring slot `slot` at k-step kk (keys 16 kk ...).
template <class C>
ATTN_HD constexpr desc_fields v_desc(std::uint32_t base, int slot, int kk) {
    return {base + C::v_off + std::uint32_t(slot * C::v_stage_bytes + kk * 16 * 128), std::uint32_t(C::kv_box_bytes),
            1024};
}

/// Row (within the warpgroup's 64) and column of accumulator element i of lane `lane` of warp w (0-3).
ATTN_HD constexpr int acc_row(int w, int lane, int i) { return 16 * w + lane / 4 + 8 * ((i / 2) % 2); }
ATTN_HD constexpr int acc_col(int lane, int i) { return 8 * (i / 4) + 2 * (lane % 4) + i % 2; }
/// P's register j (A of P V, k-step j / 4, register j % 4) holds S's elements p_elem(j) and + 1.
ATTN_HD constexpr int p_elem(int j) { return 2 * j; }

/// One TMA tensor map's geometry (cuTensorMapEncodeTiled's arguments, innermost first).
struct tma_geometry {
    std::uint64_t dims[4] = {};    ///< d, heads, rows, batch
    std::uint64_t strides[3] = {}; ///< bytes of one step in heads, rows, batch
    std::uint32_t box[4] = {};     ///< 64, 1, box_rows, 1
};
/// A [batch, rows, heads x d] 16-bit tensor read in boxes of box_rows rows.
ATTN_HD constexpr tma_geometry tma_for(long long batch, long long rows, long long heads, long long d, int box_rows) {
    tma_geometry g;
    g.dims[0] = std::uint64_t(d);
    g.dims[1] = std::uint64_t(heads);
    g.dims[2] = std::uint64_t(rows);
    g.dims[3] = std::uint64_t(batch);
    g.strides[0] = std::uint64_t(d) * 2;
    g.strides[1] = std::uint64_t(heads * d) * 2;
    g.strides[2] = std::uint64_t(rows * heads * d) * 2;
    g.box[0] = box_cols;
    g.box[1] = 1;
    g.box[2] = std::uint32_t(box_rows);
    g.box[3] = 1;
    return g;
}
/// Boxes of 64 columns a head of width d needs: the others of the instantiation lie wholly past d
/// (V only: never loaded, their columns feed output columns past d_v, never stored).
ATTN_HD constexpr int boxes_for(int d) { return (d + box_cols - 1) / box_cols; }
/// Coordinates (innermost first) of box c of a tile whose first row is row0.
struct coords {
    int c[4];
};
ATTN_HD constexpr coords box_coords(int c, int head, int row0, int b) { return {{c * box_cols, head, row0, b}}; }

} // namespace attn::cuda::hopper
