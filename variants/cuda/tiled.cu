// cuda-tiled: naive's arithmetic in shared-memory tiles with the online (streaming) softmax: the
// CPU `blocked` variant's algorithm on the GPU. No n^2 buffer: a block keeps one tile of scores.
//  - Work: a block of 128 threads takes 32 query rows of one (batch, head), 4 threads a row; Q is
//    staged once (times scale x log2 e, so the softmax is exp2), then each tile of 32 keys and
//    values is staged, scored (each thread 8 keys of its row), folded into the row's running max
//    m and sum l (rescaling the running output by exp2(m_old - m_new) when the max grows), and
//    accumulated: each thread owns d_v / 4 output columns of its row in registers.
//  - Shared memory: Q and K rows padded to d_qk + 1 floats and the P tile to 33, so the 8 rows a
//    warp reads at once fall in distinct banks; V is read along its rows (consecutive columns).
//  - Causal and sliding windows: only the key tiles the block's rows see are visited (from the first
//    row's first key to the last row's last, prefill_tiles.hpp); masked scores are -inf.
//  - fp32 arithmetic for f32, bf16 and f16 storage; the output rounded once as stored.
// The register array is sized by a template bucket of d_v (32, 64, 128, 256); d_qk and d_v up to
// 256 (refusal.cpp). __launch_bounds__(128, 1): with the thread count alone ptxas held the 32- and
// 64-column kernels to 64-72 registers and spilled 8-28 bytes; shared memory (29-103 KiB a
// block) limits residency before registers do. ptxas: 75-121 registers, no spill (sm_80).
// Status: not yet run on a GPU.
#include <cmath>
#include <cstdint>

#include "common.cuh"
#include "prefill_tiles.hpp"

namespace attn::cuda::detail {
namespace {

constexpr int tile_q = 32, tile_kv = 32, threads = 128, per_row = threads / tile_q; // 4 threads a row
constexpr int keys_per_thread = tile_kv / per_row;                                  // 8

struct dims {
    int heads, kv_heads, n_q, n_kv, d_qk, d_v;
    prefill::mask mask;
    float scale_log2;
};

std::size_t smem_bytes(int d_qk, int d_v) {
    return sizeof(float) * (std::size_t(tile_q) * (d_qk + 1) + std::size_t(tile_kv) * (d_qk + 1) +
                            std::size_t(tile_kv) * d_v + std::size_t(tile_q) * (tile_kv + 1));
}

/// COLS: output columns per thread (d_v / 4 rounded up to the bucket).
template <class T, int COLS>
__global__ void __launch_bounds__(threads, 1) tiled_kernel(const T* __restrict__ q, const T* __restrict__ k,
                                                           const T* __restrict__ v, T* __restrict__ out, dims d) {
    extern __shared__ float smem[];
    const int dq1 = d.d_qk + 1;
    float* qs = smem;                 // [tile_q][d_qk + 1]
    float* ks = qs + tile_q * dq1;    // [tile_kv][d_qk + 1]
    float* vs = ks + tile_kv * dq1;   // [tile_kv][d_v]
    float* ps = vs + tile_kv * d.d_v; // [tile_q][tile_kv + 1]
    const int tid = threadIdx.x, r = tid / per_row, u = tid % per_row;
    const int h = blockIdx.y, b = blockIdx.z, g = h * d.kv_heads / d.heads;
    const int q0 = blockIdx.x * tile_q, i = q0 + r;
    const long long q_stride = (long long)d.heads * d.d_qk, kv_stride = (long long)d.kv_heads * d.d_qk;
    const long long v_stride = (long long)d.kv_heads * d.d_v, o_stride = (long long)d.heads * d.d_v;
    const T* qb = q + (long long)b * d.n_q * q_stride + (long long)h * d.d_qk;
    const T* kb = k + (long long)b * d.n_kv * kv_stride + (long long)g * d.d_qk;
    const T* vb = v + (long long)b * d.n_kv * v_stride + (long long)g * d.d_v;
    const prefill::tile_range range = prefill::kv_tiles(d.mask, q0, tile_q, tile_kv);
    const int row_begin = int(prefill::key_begin(d.mask, i)), row_end = int(prefill::key_end(d.mask, i)); // row i's keys
    const int kv_end = int(prefill::key_end(d.mask, min(q0 + tile_q, d.n_q) - 1)); // the last row's end

    for (int e = tid; e < tile_q * d.d_qk; e += threads) {
        const int rr = e / d.d_qk, c = e % d.d_qk;
        qs[rr * dq1 + c] = q0 + rr < d.n_q ? to_f32(qb[(q0 + rr) * q_stride + c]) * d.scale_log2 : 0.0f;
    }
    float acc[COLS];
#pragma unroll
    for (int c = 0; c < COLS; ++c) acc[c] = 0.0f;
    float m = -INFINITY, l = 0.0f; // l: this thread's share of the row sum (the 4 are added at the end)

    for (int j0 = range.begin * tile_kv; j0 < range.end * tile_kv; j0 += tile_kv) {
        __syncthreads(); // the previous tile's K, V and P are no longer read
        for (int e = tid; e < tile_kv * d.d_qk; e += threads) {
            const int jj = e / d.d_qk, c = e % d.d_qk;
            ks[jj * dq1 + c] = j0 + jj < d.n_kv ? to_f32(kb[(j0 + jj) * kv_stride + c]) : 0.0f;
        }
        for (int e = tid; e < tile_kv * d.d_v; e += threads) {
            const int jj = e / d.d_v, c = e % d.d_v;
            vs[jj * d.d_v + c] = j0 + jj < d.n_kv ? to_f32(vb[(j0 + jj) * v_stride + c]) : 0.0f;
        }
        __syncthreads();
        float s[keys_per_thread];
        float mx = -INFINITY;
#pragma unroll
        for (int kk = 0; kk < keys_per_thread; ++kk) {
            const int c = u + per_row * kk, j = j0 + c;
            float dot = 0.0f;
            for (int x = 0; x < d.d_qk; ++x) dot += qs[r * dq1 + x] * ks[c * dq1 + x];
            const bool seen = j >= row_begin && j < row_end;
            s[kk] = seen ? dot : -INFINITY;
            mx = fmaxf(mx, s[kk]);
        }
        // the row's 4 threads are adjacent lanes of one warp
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
        const float m_new = fmaxf(m, mx);
        const float m_use = m_new == -INFINITY ? 0.0f : m_new; // nothing seen yet: weights stay 0, no NaN
        const float corr = exp2f(m - m_use);
        float sum = 0.0f;
#pragma unroll
        for (int kk = 0; kk < keys_per_thread; ++kk) {
            const float p = exp2f(s[kk] - m_use);
            ps[r * (tile_kv + 1) + u + per_row * kk] = p;
            sum += p;
        }
        l = l * corr + sum;
        m = m_new;
        __syncwarp(); // the row's P is written and read by the same 4 lanes
#pragma unroll
        for (int c = 0; c < COLS; ++c) acc[c] *= corr;
        const int n = min(tile_kv, kv_end - j0);
        for (int jj = 0; jj < n; ++jj) {
            const float p = ps[r * (tile_kv + 1) + jj];
            const float* vr = vs + jj * d.d_v;
#pragma unroll
            for (int c = 0; c < COLS; ++c) {
                const int x = u + per_row * c;
                if (x < d.d_v) acc[c] += p * vr[x];
            }
        }
    }
    l += __shfl_xor_sync(0xffffffffu, l, 1);
    l += __shfl_xor_sync(0xffffffffu, l, 2);
    if (i >= d.n_q) return;
    const float inv = l > 0.0f ? 1.0f / l : 0.0f; // a row that sees no key: zeros
    T* o = out + ((long long)b * d.n_q + i) * o_stride + (long long)h * d.d_v;
#pragma unroll
    for (int c = 0; c < COLS; ++c) {
        const int x = u + per_row * c;
        if (x < d.d_v) o[x] = from_f32<T>(acc[c] * inv);
    }
}

template <class T, int COLS>
void launch_cols(const core_args& a, cudaStream_t stream) {
    const std::size_t smem = smem_bytes(a.d_qk, a.d_v);
    ATTN_CUDA(cudaFuncSetAttribute(tiled_kernel<T, COLS>, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)),
              "raising cuda-tiled's shared memory limit to " + std::to_string(smem) + " bytes");
    const dims d{a.heads,        a.kv_heads, a.n_q, a.n_kv, a.d_qk, a.d_v, {a.n_q, a.n_kv, a.causal, a.window},
                 a.scale * log2e};
    const dim3 grid(unsigned((a.n_q + tile_q - 1) / tile_q), unsigned(a.heads), unsigned(a.batch));
    tiled_kernel<T, COLS><<<grid, threads, smem, stream>>>(static_cast<const T*>(a.q), static_cast<const T*>(a.k),
                                                           static_cast<const T*>(a.v), static_cast<T*>(a.out), d);
    ATTN_LAUNCHED("cuda-tiled");
}

template <class T>
void launch(const core_args& a, cudaStream_t stream) {
    if (a.d_v <= 32) return launch_cols<T, 8>(a, stream);
    if (a.d_v <= 64) return launch_cols<T, 16>(a, stream);
    if (a.d_v <= 128) return launch_cols<T, 32>(a, stream);
    return launch_cols<T, 64>(a, stream);
}

} // namespace

void launch_tiled(const core_args& a, cudaStream_t stream) {
    switch (a.st) {
    case storage::bf16:
        return launch<__nv_bfloat16>(a, stream);
    case storage::f16:
        return launch<__half>(a, stream);
    default:
        return launch<float>(a, stream);
    }
}

} // namespace attn::cuda::detail
