// What cuda-decode's two kernel families share on the device: the arguments, the block's place in
// the grid, cp.async / ldmatrix / mma.sync, the tile loader (a tile of T key positions of one
// (sequence, kv head): K rows, V rows unless they are K's, int8 scales; each row found through
// decode_layout's cache_map, 16-byte cp.async with zero fill past the keys the step reads, one
// commit group per tile) and the end of a chunk (the output, or the chunk's partial result and,
// in the last block of the unit to finish, the combine: no second kernel).
#pragma once

#include <cstdint>
#include <cstring>

#include "common.cuh"
#include "decode_layout.hpp"
#if defined(ATTN_DECODE_EMULATE)
#include "decode_emulate.hpp" // tests/cuda: the instructions below on host threads
#endif

namespace attn::cuda::detail {

namespace dl = attn::cuda::decode_layout;

/// One decode step's device arguments (decode.cu fills them from the plan).
struct decode_params {
    const float* q = nullptr; ///< [B, n_q, H, d_k]
    const void* k = nullptr;
    const void* v = nullptr; ///< == k when V is K's first d_v columns
    const float* k_scales = nullptr;
    const float* v_scales = nullptr; ///< == k_scales when V is in K's rows
    const std::int32_t* lengths = nullptr;
    float* out = nullptr;         ///< [B, n_q, H, d_v]
    float* part_o = nullptr;      ///< [units, splits, rows, d_v] unnormalised
    float* part_ml = nullptr;     ///< [units, splits, rows, 2]: max (log2 units), sum
    unsigned* counters = nullptr; ///< [units]: chunks finished; the last block resets it
    dl::cache_map map;
    int batch = 0, heads = 0, kv_heads = 0, n_q = 1, n_kv = 0, d_k = 0, d_v = 0;
    long long k_row = 0, v_row = 0; ///< elements per cache row of K and of V
    long long window = 0;
    bool causal = true;
    int splits = 1, rows = 1, groups = 1, stages = 2;
    float scale_log2 = 0;
};

/// The case's geometry in the arguments (all but the buffers and the plan's splits, rows, groups,
/// stages), from the resolved shape and the spec; decode_case and the host emulation fill them alike.
inline void set_geometry(decode_params& a, const shape& s, const decode_spec& spec) {
    a.map.kv_heads = int(s.kv_heads);
    a.map.capacity = (long long)(spec.capacity ? spec.capacity : s.n_kv);
    a.map.page = int(spec.page_size);
    a.map.page_shift = 0;
    while (spec.page_size && (std::size_t(1) << a.map.page_shift) < spec.page_size) ++a.map.page_shift;
    a.map.max_pages = int(spec.max_pages);
    a.map.ring = (long long)spec.ring;
    a.batch = int(s.batch);
    a.heads = int(s.heads);
    a.kv_heads = int(s.kv_heads);
    a.n_q = int(s.n_q);
    a.n_kv = int(s.n_kv);
    a.d_k = int(s.d_qk);
    a.d_v = int(s.d_v);
    a.k_row = (long long)s.d_qk;
    a.v_row = spec.v_from_k ? (long long)s.d_qk : (long long)s.d_v;
    a.window = (long long)s.window;
    a.causal = s.causal;
    a.scale_log2 = float(s.scale) * log2e;
}

/// Where a block is: blockIdx.x runs over (row group fastest, chunk, kv head, sequence), so the
/// groups that read the same tiles run side by side and share them through L2.
struct block_work {
    int b, g, grp, chunk, unit, row0, nrows;
    int n, kb, ke, tf, te; ///< keys held, the step's keys [kb, ke), this chunk's tiles [tf, te) (< 2^31)
    int full_lo, full_hi;  ///< keys every row of the step sees: [latest first key, earliest end)
};

__device__ __forceinline__ block_work locate(const decode_params& p, int tile) {
    block_work w;
    long long i = blockIdx.x;
    w.grp = int(i % p.groups);
    i /= p.groups;
    w.chunk = int(i % p.splits);
    i /= p.splits;
    w.g = int(i % p.kv_heads);
    w.b = int(i / p.kv_heads);
    w.unit = (w.b * p.kv_heads + w.g) * p.groups + w.grp;
    w.n = p.lengths ? p.lengths[w.b] : p.n_kv;
    const dl::key_range kr = dl::step_keys(w.n, p.n_q, p.window, p.causal);
    w.kb = int(kr.begin);
    w.ke = int(kr.end);
    const long long tiles = dl::tiles_of(kr.size(), tile);
    w.tf = int(dl::chunk_first(tiles, p.splits, w.chunk));
    w.te = int(dl::chunk_first(tiles, p.splits, w.chunk + 1));
    w.full_lo = int(dl::row_keys(w.n, p.n_q, p.n_q - 1, p.window, p.causal).begin);
    w.full_hi = int(dl::row_keys(w.n, p.n_q, 0, p.window, p.causal).end);
    const int total = p.heads / p.kv_heads * p.n_q;
    w.row0 = w.grp * p.rows;
    w.nrows = p.rows < total - w.row0 ? p.rows : total - w.row0;
    return w;
}

/// Whether every valid row of the step sees every key of [t0, t0 + T): no mask needed.
__device__ __forceinline__ bool tile_full(const block_work& w, int t0, int T) {
    return t0 >= w.full_lo && t0 + T <= w.full_hi;
}

// ---- instructions: cp.async, ldmatrix, mma.sync, ex2 (decode_emulate.hpp stands in for them on
// the host: tests/cuda/test_decode_emu.cpp runs these kernels' own source on CPU threads) --------

#if !defined(ATTN_DECODE_EMULATE)
__device__ __forceinline__ std::uint32_t smem_u32(const void* p) {
    return static_cast<std::uint32_t>(__cvta_generic_to_shared(p));
}
/// 16 (or 8) bytes global -> shared, zero-filled when !valid (no global read then).
__device__ __forceinline__ void cp_async16(void* dst, const void* src, bool valid) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_u32(dst)), "l"(src), "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void cp_async8(void* dst, const void* src, bool valid) {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 8, %2;\n" ::"r"(smem_u32(dst)), "l"(src), "r"(valid ? 8 : 0));
}
__device__ __forceinline__ void cp_async4(void* dst, const void* src, bool valid) {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(smem_u32(dst)), "l"(src), "r"(valid ? 4 : 0));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
/// Waits until at most n (0-7, run time) groups are pending.
__device__ __forceinline__ void cp_async_wait(int n) {
    switch (n) {
    case 0:
        asm volatile("cp.async.wait_group 0;\n" ::: "memory");
        break;
    case 1:
        asm volatile("cp.async.wait_group 1;\n" ::: "memory");
        break;
    case 2:
        asm volatile("cp.async.wait_group 2;\n" ::: "memory");
        break;
    case 3:
        asm volatile("cp.async.wait_group 3;\n" ::: "memory");
        break;
    case 4:
        asm volatile("cp.async.wait_group 4;\n" ::: "memory");
        break;
    case 5:
        asm volatile("cp.async.wait_group 5;\n" ::: "memory");
        break;
    case 6:
        asm volatile("cp.async.wait_group 6;\n" ::: "memory");
        break;
    default:
        asm volatile("cp.async.wait_group 7;\n" ::: "memory");
        break;
    }
}

__device__ __forceinline__ void ldmatrix_x4(std::uint32_t (&r)[4], const void* p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(smem_u32(p))
                 : "memory");
}
__device__ __forceinline__ void ldmatrix_x4_trans(std::uint32_t (&r)[4], const void* p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(smem_u32(p))
                 : "memory");
}

/// d += a b (m16n8k16, fp32 accumulation) in bf16 (F16 false) or f16.
template <bool F16>
__device__ __forceinline__ void mma16816(float (&d)[4], const std::uint32_t (&a)[4], std::uint32_t b0,
                                         std::uint32_t b1) {
    if constexpr (F16)
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
                     "{%8, %9}, {%0, %1, %2, %3};\n"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
    else
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
                     "{%8, %9}, {%0, %1, %2, %3};\n"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ float exp2_fast(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
    return y;
}

#define ATTN_DECODE_SMEM(name) extern __shared__ __align__(128) std::uint8_t name[]
#endif

/// Two floats as a pair of the 16-bit type (lo in bits 0-15), rounded to nearest even.
template <bool F16>
__device__ __forceinline__ std::uint32_t pack2(float lo, float hi) {
    std::uint32_t u;
    if constexpr (F16) {
        const __half2 h = __floats2half2_rn(lo, hi);
        memcpy(&u, &h, 4);
    } else {
        const __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
        memcpy(&u, &h, 4);
    }
    return u;
}

// ---- the tile loader -------------------------------------------------------------------------

/// Where a tile's parts go in shared memory, and how its rows are laid out.
struct tile_dst {
    std::uint8_t* k;
    std::uint8_t* v;        ///< null when V is K's rows
    float* ks;              ///< null unless int8
    float* vs;              ///< null unless int8 with V rows of its own
    int k_stride, v_stride; ///< bytes between rows
    int k_bytes, v_bytes;   ///< bytes of a cache row to copy (whole 16- or 8-byte chunks)
    int chunk;              ///< 16 or 8
    int elem;               ///< bytes per cache element
    bool swizzle;           ///< decode_layout::chunk_offset, else row * stride + chunk * c
};

/// The cache row of key position t0 + r (r < T) of (b, g), by the warp that copies it.
__device__ __forceinline__ long long tile_row(const decode_params& p, int b, int g, long long slot0, int r) {
    return dl::row_of_slot(p.map, b, g, dl::tile_slot(slot0, r, p.map.ring));
}

/// Copies the tile of keys [t0, t0 + T) (rows at or past ke zero-filled) with NTH threads: rows
/// spread over the warps, a row's chunks over the lanes (lanes_per_row of them, a divisor of 32
/// where the chunk count allows, so that one instruction covers several short rows).
template <int NTH>
__device__ __forceinline__ void load_tile(const decode_params& p, const tile_dst& d, int b, int g, int t0, int ke,
                                          int T) {
    constexpr int NW = NTH / 32;
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const long long slot0 = dl::slot_of(p.map, t0);
    const auto* kc = static_cast<const std::uint8_t*>(p.k);
    const auto* vc = static_cast<const std::uint8_t*>(p.v);
    const int k_chunks = d.k_bytes / d.chunk, v_chunks = d.v ? d.v_bytes / d.chunk : 0;
    const int chunks = k_chunks > v_chunks ? k_chunks : v_chunks;
    const int lpr = chunks < 32 && 32 % chunks == 0 ? chunks : 32; // lanes per row
    const int rpp = 32 / lpr;                                      // rows per pass of a warp
    const int eb = d.elem;
    for (int r0 = warp * rpp; r0 < T; r0 += NW * rpp) {
        const int r = r0 + lane / lpr;
        const bool in = r < T;
        const bool valid = in && t0 + r < ke;
        const long long row = valid ? tile_row(p, b, g, slot0, r) : 0;
        if (!in) continue;
        for (int c = lane % lpr; c < chunks; c += lpr) {
            if (c < k_chunks) {
                std::uint8_t* dst =
                    d.k + (d.swizzle ? dl::chunk_offset(r, c, d.k_stride) : r * d.k_stride + c * d.chunk);
                const std::uint8_t* src = kc + row * p.k_row * eb + c * d.chunk;
                if (d.chunk == 16)
                    cp_async16(dst, src, valid);
                else
                    cp_async8(dst, src, valid);
            }
            if (c < v_chunks) {
                std::uint8_t* dst =
                    d.v + (d.swizzle ? dl::chunk_offset(r, c, d.v_stride) : r * d.v_stride + c * d.chunk);
                const std::uint8_t* src = vc + row * p.v_row * eb + c * d.chunk;
                if (d.chunk == 16)
                    cp_async16(dst, src, valid);
                else
                    cp_async8(dst, src, valid);
            }
        }
    }
    if (d.ks) {
        for (int r = threadIdx.x; r < T; r += NTH) {
            const bool valid = t0 + r < ke;
            const long long row = valid ? tile_row(p, b, g, slot0, r) : 0;
            cp_async4(d.ks + r, p.k_scales + row, valid);
            if (d.vs) cp_async4(d.vs + r, p.v_scales + row, valid);
        }
    }
}

// ---- the end of a chunk ----------------------------------------------------------------------

/// out[b, qi, h, :] for block row r.
__device__ __forceinline__ float* out_row(const decode_params& p, const block_work& w, int r) {
    const int gr = w.row0 + r, hl = gr / p.n_q, qi = gr % p.n_q;
    const int h = w.g * (p.heads / p.kv_heads) + hl;
    return p.out + ((long long)(w.b * p.n_q + qi) * p.heads + h) * p.d_v;
}
__device__ __forceinline__ float* part_row(const decode_params& p, const block_work& w, int r) {
    return p.part_o + (((long long)w.unit * p.splits + w.chunk) * p.rows + r) * p.d_v;
}
__device__ __forceinline__ float* part_ml_row(const decode_params& p, const block_work& w, int r) {
    return p.part_ml + (((long long)w.unit * p.splits + w.chunk) * p.rows + r) * 2;
}

/// After every thread wrote its part of this chunk's partial result: the block that finishes a
/// unit's last chunk combines them in chunk order, out = sum_c 2^(m_c - M) o_c / sum_c 2^(m_c - M) l_c
/// (M the largest m_c; an empty chunk has m_c = -inf, l_c = 0), and resets the unit's counter.
/// Deterministic: the same sums whichever block is last. `scratch`: 2 x rows + 1 words of shared
/// memory; `weights`: splits x rows floats (the stage buffers, free by then: at most 128 x 64).
/// Each thread takes 4 adjacent columns of a row, the chunks' loads unrolled 8 deep (L2 latency).
template <int NTH>
__device__ void combine_if_last(const decode_params& p, const block_work& w, float* scratch, float* weights) {
    int* last = reinterpret_cast<int*>(scratch + 2 * p.rows);
    __threadfence(); // this block's partials visible device-wide before it is counted
    __syncthreads();
    if (threadIdx.x == 0) *last = atomicAdd(p.counters + w.unit, 1u) == unsigned(p.splits - 1);
    __syncthreads();
    if (!*last) return;
    __threadfence();
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, S = p.splits;
    const long long base = (long long)w.unit * S;
    for (int r = warp; r < w.nrows; r += NTH / 32) { // a warp a row: M and 1 / sum
        float mx = -INFINITY;
        for (int c = lane; c < S; c += 32) mx = fmaxf(mx, __ldcg(p.part_ml + ((base + c) * p.rows + r) * 2));
        for (int o = 16; o > 0; o /= 2) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
        const float mu = mx == -INFINITY ? 0.0f : mx;
        float den = 0;
        for (int c = lane; c < S; c += 32) {
            const float* ml = p.part_ml + ((base + c) * p.rows + r) * 2;
            den += exp2f(__ldcg(ml) - mu) * __ldcg(ml + 1);
        }
        for (int o = 16; o > 0; o /= 2) den += __shfl_xor_sync(0xffffffffu, den, o);
        if (lane == 0) {
            scratch[2 * r] = mu;
            scratch[2 * r + 1] = den > 0.0f ? 1.0f / den : 0.0f;
        }
    }
    __syncthreads();
    for (int i = threadIdx.x; i < S * w.nrows; i += NTH) { // each chunk's weight, 1 / sum folded in
        const int c = i / w.nrows, r = i % w.nrows;
        weights[i] = exp2f(__ldcg(p.part_ml + ((base + c) * p.rows + r) * 2) - scratch[2 * r]) * scratch[2 * r + 1];
    }
    __syncthreads();
    const int quads = p.d_v / 4;
    for (int i = threadIdx.x; i < w.nrows * quads; i += NTH) {
        const int r = i / quads, x = 4 * (i % quads);
        float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll 8
        for (int c = 0; c < S; ++c) {
            const float wc = weights[c * w.nrows + r];
            const float4 o = __ldcg(reinterpret_cast<const float4*>(p.part_o + ((base + c) * p.rows + r) * p.d_v + x));
            acc.x += wc * o.x, acc.y += wc * o.y, acc.z += wc * o.z, acc.w += wc * o.w;
        }
        *reinterpret_cast<float4*>(out_row(p, w, r) + x) = acc;
    }
    if (threadIdx.x == 0) p.counters[w.unit] = 0; // ready for the next step
}

} // namespace attn::cuda::detail
