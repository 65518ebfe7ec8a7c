// cuda-flash: cuda-tiled's online softmax on the tensor cores, FlashAttention-2's work split,
// written from the PTX ISA's fragment layouts (flash_ptx.cuh). What it changes from cuda-tiled:
//  - Matrix products through mma.sync.aligned.m16n8k16.row.col.f32.{bf16,f16} (fp32 accumulate):
//    S = Q K^T and O += P V per warp, mt m16 row tiles a warp (flash_layout.hpp: by default 4 warps
//    of 32 rows, a 128-row query tile, FA2's d 128 shape on the H100; each K or V fragment read from
//    shared memory feeds two MMAs). S stays in registers, and its C fragments are exactly the A
//    fragments of P V (FA2's register reuse), so P never touches shared memory. P is rounded to the
//    storage type for the second MMA (the CPU tiled kernel keeps P in fp32: a known difference,
//    inside bf16's tolerance); sums and the output are fp32.
//  - Operands from shared memory with ldmatrix.x4 (K as stored, V with .trans), rows XOR-swizzled in
//    16-byte chunks (flash_layout.hpp) so each ldmatrix phase is conflict-free. Q's fragments are
//    held in registers where that costs at most 32 of them (d 64), else re-read per k-step.
//  - K and V tiles double-buffered with cp.async (16 bytes a thread, zero-filled past n_kv and past
//    a narrow head's width), K and V in separate groups: tile t+1's K loads while S_t is computed,
//    its V while P_t V_t is, and each product waits only for its own operand (FA2's overlap).
//  - Softmax in registers, fp32: the row max over the raw scores, then p = 2^(s c - m c) with
//    c = scale x log2 e as one FFMA and one ex2.approx per score; max over the 4 lanes of a row by
//    two shuffles per row per tile; the row sum kept per lane and reduced once at the end.
//  - Masks (prefill_tiles.hpp): causal (bottom-right) and sliding windows visit only the key tiles
//    the block's rows see; only a warp whose rows cross the diagonal, the window's lower edge or
//    n_kv masks a tile.
//  - Order: a 1-D grid over prefill::schedule: (batch, head) pairs in L2-sized groups, the longest
//    causal query tiles first inside a group. GQA/MQA: block (query tile, h, b) reads kv head h*G/H.
//  - Widths: 64/64, 128/128 and 192/128 (MLA's naive form) instantiated; narrower heads (multiples
//    of 8) zero-padded into the first that covers them. A positive scale only (refusal.cpp).
// Serves bf16 and f16. Resources: README.md (nvcc 13.0 -Xptxas -v; no spill).
#include <cmath>
#include <cstdint>
#include <cstring>

#include "common.cuh"
#include "flash_layout.hpp"
#include "flash_ptx.cuh"
#include "prefill_plan.hpp"
#include "prefill_tiles.hpp"

namespace attn::cuda::detail {
namespace {

namespace fl = flash_layout;

/// rows x D elements (the first `width` of each row real) from global (row r at src + r * stride)
/// into a swizzled tile; rows at or past `limit` and columns past `width` are zero-filled (their
/// source address clamped to the tile's first element, never read).
template <int D, int ROWS, int THREADS, class T>
__device__ __forceinline__ void load_tile(T* dst, const T* src, long long stride, int row0, int limit, int width) {
    constexpr int chunks = D / fl::chunk;
    static_assert(ROWS * chunks % THREADS == 0, "every thread copies the same number of chunks");
#pragma unroll
    for (int it = 0; it < ROWS * chunks / THREADS; ++it) {
        const int c = threadIdx.x + it * THREADS, r = c / chunks, col = (c % chunks) * fl::chunk;
        const bool valid = row0 + r < limit && col < width;
        const T* s = src + (valid ? (long long)(row0 + r) * stride + col : 0);
        cp_async16(smem_addr(dst + fl::swizzle(r, col, D)), s, valid);
    }
}

struct dims {
    int heads, kv_heads, n_q, n_kv, d_qk, d_v;
    prefill::mask mask;
    float scale_log2; // scale x log2 e, > 0
    prefill::schedule sched;
};

template <class T, class C>
__global__ void __launch_bounds__(C::threads, 1) flash_kernel(const T* __restrict__ q, const T* __restrict__ k,
                                                              const T* __restrict__ v, T* __restrict__ out, dims d) {
    extern __shared__ __align__(128) unsigned char smem[];
    constexpr int DQ = C::dqk, DV = C::dv, MT = C::mt, BKV = C::block_kv, TH = C::threads;
    constexpr int NT = BKV / 8;         // S n-tiles of 8 keys
    constexpr int DT = DV / 8;          // O n-tiles of 8 columns
    constexpr int KS = DQ / 16;         // k-steps of Q K^T
    T* sq = reinterpret_cast<T*>(smem); // [block_q][DQ]
    T* sk = sq + C::block_q * DQ;       // [stages][BKV][DQ]
    T* sv = sk + fl::stages * BKV * DQ; // [stages][BKV][DV]
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const prefill::schedule::item work = d.sched.at(blockIdx.x);
    const int q0 = work.q_tile * C::block_q, wrow0 = warp * C::rows_per_warp; // wrow0: in the tile
    const int h = int(work.hb % d.heads), b = int(work.hb / d.heads), g = int((long long)h * d.kv_heads / d.heads);
    const long long q_stride = (long long)d.heads * d.d_qk, k_stride = (long long)d.kv_heads * d.d_qk;
    const long long v_stride = (long long)d.kv_heads * d.d_v, o_stride = (long long)d.heads * d.d_v;
    const T* qb = q + (long long)b * d.n_q * q_stride + (long long)h * d.d_qk;
    const T* kb = k + (long long)b * d.n_kv * k_stride + (long long)g * d.d_qk;
    const T* vb = v + (long long)b * d.n_kv * v_stride + (long long)g * d.d_v;
    const prefill::tile_range range = prefill::kv_tiles(d.mask, q0, C::block_q, BKV);

    float o[MT][DT][4];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int t = 0; t < DT; ++t) o[mt][t][0] = o[mt][t][1] = o[mt][t][2] = o[mt][t][3] = 0.0f;
    float m[MT][2], l[MT][2]; // per row (c_frag_elem rows lane / 4 and + 8): max of the raw scores, sum
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) m[mt][0] = m[mt][1] = -INFINITY, l[mt][0] = l[mt][1] = 0.0f;

    if (range.count() > 0) {
        // groups in flight, oldest first: Q, K_b, V_b; then per iteration K_{t+1} and V_{t+1}
        load_tile<DQ, C::block_q, TH>(sq, qb, q_stride, q0, d.n_q, d.d_qk);
        cp_async_commit();
        load_tile<DQ, BKV, TH>(sk, kb, k_stride, range.begin * BKV, d.n_kv, d.d_qk);
        cp_async_commit();
        load_tile<DV, BKV, TH>(sv, vb, v_stride, range.begin * BKV, d.n_kv, d.d_v);
        cp_async_commit();
        cp_async_wait<2>(); // Q has landed
        __syncthreads();
        std::uint32_t qf[C::q_in_registers ? MT : 1][C::q_in_registers ? KS : 1][4];
        if constexpr (C::q_in_registers) {
#pragma unroll
            for (int mt = 0; mt < MT; ++mt)
#pragma unroll
                for (int ks = 0; ks < KS; ++ks) {
                    const fl::rc a = fl::q_frag_addr(wrow0 + 16 * mt, ks, lane);
                    ldmatrix_x4(qf[mt][ks], smem_addr(sq + fl::swizzle(a.row, a.col, DQ)));
                }
        }

        for (int t = range.begin; t < range.end; ++t) {
            const int stage = (t - range.begin) % fl::stages, next = stage ^ 1, j0 = t * BKV;
            // K_{t+1} into the other stage (last read by S_{t-1}, before the previous V barrier)
            if (t + 1 < range.end) load_tile<DQ, BKV, TH>(sk + next * BKV * DQ, kb, k_stride, j0 + BKV, d.n_kv, d.d_qk);
            cp_async_commit();  // empty on the last tile: the wait counts stay the same
            cp_async_wait<2>(); // K_t has landed (V_t and K_{t+1} may be in flight)
            __syncthreads();
            const T* ks_tile = sk + stage * BKV * DQ;
            const T* vs_tile = sv + stage * BKV * DV;

            // S = Q K^T: MT x 16 rows x BKV keys per warp
            float s[MT][NT][4];
#pragma unroll
            for (int mt = 0; mt < MT; ++mt)
#pragma unroll
                for (int nt = 0; nt < NT; ++nt) s[mt][nt][0] = s[mt][nt][1] = s[mt][nt][2] = s[mt][nt][3] = 0.0f;
#pragma unroll
            for (int ks = 0; ks < KS; ++ks) {
                std::uint32_t qa[MT][4];
#pragma unroll
                for (int mt = 0; mt < MT; ++mt) {
                    if constexpr (C::q_in_registers) {
#pragma unroll
                        for (int i = 0; i < 4; ++i) qa[mt][i] = qf[mt][ks][i];
                    } else {
                        const fl::rc a = fl::q_frag_addr(wrow0 + 16 * mt, ks, lane);
                        ldmatrix_x4(qa[mt], smem_addr(sq + fl::swizzle(a.row, a.col, DQ)));
                    }
                }
#pragma unroll
                for (int np = 0; np < NT / 2; ++np) {
                    std::uint32_t bk[4];
                    const fl::rc a = fl::k_frag_addr(np, ks, lane);
                    ldmatrix_x4(bk, smem_addr(ks_tile + fl::swizzle(a.row, a.col, DQ)));
#pragma unroll
                    for (int mt = 0; mt < MT; ++mt) {
                        mma<T>(s[mt][2 * np], qa[mt], bk[0], bk[1]);
                        mma<T>(s[mt][2 * np + 1], qa[mt], bk[2], bk[3]);
                    }
                }
            }

            // mask (only a warp whose rows cross an edge of the mask): -inf on the raw scores
            if (prefill::tile_needs_mask(d.mask, q0 + wrow0, C::rows_per_warp, j0, BKV)) {
#pragma unroll
                for (int mt = 0; mt < MT; ++mt)
#pragma unroll
                    for (int r = 0; r < 2; ++r) { // the lane's rows: c_frag_elem rows lane / 4 and + 8
                        const int row = q0 + wrow0 + 16 * mt + fl::c_frag_elem(lane, 2 * r).row;
                        const int kb = int(prefill::key_begin(d.mask, row)) - j0, ke = int(prefill::key_end(d.mask, row)) - j0;
#pragma unroll
                        for (int nt = 0; nt < NT; ++nt)
#pragma unroll
                            for (int e = 2 * r; e < 2 * r + 2; ++e) {
                                const int key = nt * 8 + fl::c_frag_elem(lane, e).col; // in the tile
                                if (key < kb || key >= ke) s[mt][nt][e] = -INFINITY;
                            }
                    }
            }

            // online softmax per row r of each m-tile, over the 4 lanes that hold a row
#pragma unroll
            for (int mt = 0; mt < MT; ++mt)
#pragma unroll
                for (int r = 0; r < 2; ++r) {
                    float mx = m[mt][r];
#pragma unroll
                    for (int nt = 0; nt < NT; ++nt) mx = fmaxf(mx, fmaxf(s[mt][nt][2 * r], s[mt][nt][2 * r + 1]));
                    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
                    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
                    const float m_use = mx == -INFINITY ? 0.0f : mx; // no key seen yet: weights 0, no NaN
                    const float corr = exp2_approx((m[mt][r] - m_use) * d.scale_log2);
                    const float shift = -m_use * d.scale_log2;
                    m[mt][r] = mx;
                    float sum = 0.0f;
#pragma unroll
                    for (int nt = 0; nt < NT; ++nt) {
                        s[mt][nt][2 * r] = exp2_approx(fmaf(s[mt][nt][2 * r], d.scale_log2, shift));
                        s[mt][nt][2 * r + 1] = exp2_approx(fmaf(s[mt][nt][2 * r + 1], d.scale_log2, shift));
                        sum += s[mt][nt][2 * r] + s[mt][nt][2 * r + 1];
                    }
                    l[mt][r] = l[mt][r] * corr + sum;
#pragma unroll
                    for (int dt = 0; dt < DT; ++dt) {
                        o[mt][dt][2 * r] *= corr;
                        o[mt][dt][2 * r + 1] *= corr;
                    }
                }

            // V_{t+1} into the other stage (last read by P_{t-1} V_{t-1}, before this K barrier)
            if (t + 1 < range.end) load_tile<DV, BKV, TH>(sv + next * BKV * DV, vb, v_stride, j0 + BKV, d.n_kv, d.d_v);
            cp_async_commit();
            cp_async_wait<2>(); // V_t has landed (K_{t+1} and V_{t+1} may be in flight)
            __syncthreads();

            // O += P V, P's A fragments straight from S's registers
#pragma unroll
            for (int kk = 0; kk < NT / 2; ++kk) {
                std::uint32_t pa[MT][4];
#pragma unroll
                for (int mt = 0; mt < MT; ++mt)
#pragma unroll
                    for (int i = 0; i < 4; ++i) {
                        const float* pair = s[mt][fl::p_ntile(kk, i)] + fl::p_elem(i);
                        pa[mt][i] = pack2<T>(pair[0], pair[1]);
                    }
#pragma unroll
                for (int dp = 0; dp < DT / 2; ++dp) {
                    std::uint32_t bv[4];
                    const fl::rc a = fl::v_frag_addr(kk, dp, lane);
                    ldmatrix_x4_trans(bv, smem_addr(vs_tile + fl::swizzle(a.row, a.col, DV)));
#pragma unroll
                    for (int mt = 0; mt < MT; ++mt) {
                        mma<T>(o[mt][2 * dp], pa[mt], bv[0], bv[1]);
                        mma<T>(o[mt][2 * dp + 1], pa[mt], bv[2], bv[3]);
                    }
                }
            }
        }
        cp_async_wait<0>(); // nothing left in flight when the block exits
    }

    // normalise and store: the lane holds C elements (2r, 2r + 1) of every column tile dt
    T* ob = out + (long long)b * d.n_q * o_stride + (long long)h * d.d_v;
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            float sum = l[mt][r];
            sum += __shfl_xor_sync(0xffffffffu, sum, 1);
            sum += __shfl_xor_sync(0xffffffffu, sum, 2);
            const float inv = sum > 0.0f ? 1.0f / sum : 0.0f; // a row that sees no key: zeros
            const fl::rc c = fl::c_frag_elem(lane, 2 * r);
            const int row = q0 + wrow0 + 16 * mt + c.row;
            if (row >= d.n_q) continue;
            T* orow = ob + (long long)row * o_stride + c.col;
#pragma unroll
            for (int dt = 0; dt < DT; ++dt) {
                if (dt * 8 + c.col >= d.d_v) continue; // a narrow head's padding (d_v a multiple of 8)
                const std::uint32_t pair = pack2<T>(o[mt][dt][2 * r] * inv, o[mt][dt][2 * r + 1] * inv);
                std::memcpy(orow + dt * 8, &pair, sizeof pair);
            }
        }
}

template <class T, class C>
void launch(const core_args& a, cudaStream_t stream) {
    constexpr int smem = C::smem_bytes;
    // over 48 KiB a block must opt in to its dynamic shared memory; once per process and instantiation
    static const cudaError_t raised =
        cudaFuncSetAttribute(flash_kernel<T, C>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    ATTN_CUDA(raised, "raising cuda-flash's shared memory limit to " + std::to_string(smem) + " bytes");
    dims d{a.heads, a.kv_heads, a.n_q, a.n_kv, a.d_qk, a.d_v, {a.n_q, a.n_kv, a.causal, a.window}, a.scale * log2e, {}};
    const long long q_tiles = (a.n_q + C::block_q - 1) / C::block_q;
    // groups whose K and V take at most half the L2
    const long long kv_bytes = (long long)a.n_kv * (a.d_qk + a.d_v) * 2 * a.kv_heads / a.heads;
    d.sched = prefill::make_schedule(q_tiles, (long long)a.batch * a.heads, kv_bytes, (long long)props().l2_bytes / 2);
    if (d.sched.size() >= (1LL << 31)) throw error("cuda-flash: more than 2^31 - 1 blocks");
    flash_kernel<T, C><<<unsigned(d.sched.size()), C::threads, smem, stream>>>(
        static_cast<const T*>(a.q), static_cast<const T*>(a.k), static_cast<const T*>(a.v), static_cast<T*>(a.out), d);
    ATTN_LAUNCHED("cuda-flash " + std::to_string(C::dqk) + "/" + std::to_string(C::dv) + " q" +
                  std::to_string(C::block_q) + " kv" + std::to_string(C::block_kv));
}

/// The instantiation of widths W and tile (warps, mt, block_kv) that the run-time choice names.
template <class T, int DQK, int DV, const auto& TILES, int I = 0>
void launch_tile(const core_args& a, int tile, cudaStream_t stream) {
    constexpr int n = int(sizeof(TILES) / sizeof(TILES[0]));
    if constexpr (I < n) {
        if (tile != I) return launch_tile<T, DQK, DV, TILES, I + 1>(a, tile, stream);
        constexpr prefill::flash_tile t = TILES[I];
        return launch<T, fl::config<DQK, DV, t.warps, t.mt, t.block_kv>>(a, stream);
    } else {
        throw error("cuda-flash has " + std::to_string(n) + " tile candidates at d " + std::to_string(DQK) +
                    ", not tile " + std::to_string(tile + 1));
    }
}

template <class T>
void launch_type(const core_args& a, int tile, cudaStream_t stream) {
    const prefill::widths w = prefill::widths_for(std::size_t(a.d_qk), std::size_t(a.d_v));
    if (w.dqk == 64) return launch_tile<T, 64, 64, prefill::flash_tiles_64>(a, tile, stream);
    if (w.dqk == 128) return launch_tile<T, 128, 128, prefill::flash_tiles_128>(a, tile, stream);
    if (w.dqk == 192) return launch_tile<T, 192, 128, prefill::flash_tiles_192>(a, tile, stream);
    throw error("cuda-flash has no instantiation for d_qk " + std::to_string(a.d_qk) + ", d_v " +
                std::to_string(a.d_v));
}

} // namespace

void launch_flash(const core_args& a, cudaStream_t stream) {
    const int tile = a.options.tile > 0 ? a.options.tile - 1 : 0;
    if (a.st == storage::f16) return launch_type<__half>(a, tile, stream);
    return launch_type<__nv_bfloat16>(a, tile, stream);
}

} // namespace attn::cuda::detail
