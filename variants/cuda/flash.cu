// cuda-flash: cuda-tiled's online softmax on the tensor cores, FlashAttention-2's work split,
// written from the PTX ISA's fragment layouts. What it changes from cuda-tiled:
//  - Matrix products through mma.sync.aligned.m16n8k16.row.col.f32.{bf16,f16} (fp32 accumulate):
//    S = Q K^T and O += P V per warp, 16 query rows a warp, 4 warps a block (block_q = 64 rows,
//    flash_layout.hpp). Q's fragments are loaded once into registers; S stays in registers, and its
//    C fragments are exactly the A fragments of P V (FA2's register reuse), so P never touches
//    shared memory. P is rounded to the storage type for the second MMA (the CPU tiled kernel
//    keeps P in fp32: a known difference, inside bf16's tolerance); sums and the output are fp32.
//  - Operands from shared memory with ldmatrix.x4 (K as stored, V with .trans: V is row-major
//    [key][d] and the MMA's B operand wants it column-major); rows XOR-swizzled in 16-byte chunks
//    (flash_layout.hpp) so each ldmatrix phase is conflict-free.
//  - K/V tiles of 64 keys double-buffered with cp.async (16 bytes a thread, zero-filled past
//    n_kv): tile t+1 loads while tile t is used.
//  - Softmax in registers, fp32: scores scaled by scale x log2 e so every exponential is one
//    ex2.approx; row max and sum over the 4 lanes that share a row (shuffles); the row sum is
//    kept per lane and added once at the end.
//  - Causal (bottom-right): key tiles past the block's last visible key are never loaded; only
//    tiles that cross the diagonal or n_kv are masked (flash_layout::tile_needs_mask).
//  - GQA/MQA: block (query tile, h, b) reads kv head h*G/H; heavier causal tiles launch first.
// Serves bf16 and f16, d_head 64 and 128 (template), d_qk == d_v, any n_q and n_kv.
// Resources (nvcc 13.0 -O3 -Xptxas -v; 128 threads; 40 KiB (d 64) / 80 KiB (d 128) dynamic
// shared memory), the same for bf16 and f16:
//   d 64:  128 registers on sm_80 and sm_90a; d 128: 235 on sm_80, 238 on sm_90a; 0 bytes stack,
//   0 bytes spilled in all eight. SASS (cuobjdump 13.2), per kernel, the loop body once:
//   HMMA.16816.F32(.BF16) 64 (d 64) / 128 (d 128), LDSM.16.M88.4 36 / 72 of which .MT88 (V) 16 / 32,
//   LDGSTS 20 / 40, MUFU.EX2 34, no LDL/STL.
// Measured: not yet run on a GPU (compiled and disassembled only). Expected, not measured:
// FA2-class at best, well under the H100's dense bf16 peak (no wgmma, no TMA).
#include <cmath>
#include <cstdint>
#include <cstring>

#include "common.cuh"
#include "flash_layout.hpp"

namespace attn::cuda::detail {
namespace {

namespace fl = flash_layout;

__device__ __forceinline__ std::uint32_t smem_addr(const void* p) {
    return static_cast<std::uint32_t>(__cvta_generic_to_shared(p));
}

/// 16 bytes global -> shared, asynchronous; with valid false the 16 bytes are zero-filled (src-size 0).
__device__ __forceinline__ void cp_async16(std::uint32_t dst, const void* src, bool valid) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

/// Four 8x8 b16 matrices; lane l gives the row address of matrix l / 8, row l % 8.
__device__ __forceinline__ void ldmatrix_x4(std::uint32_t (&r)[4], std::uint32_t addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr)
                 : "memory");
}
__device__ __forceinline__ void ldmatrix_x4_trans(std::uint32_t (&r)[4], std::uint32_t addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr)
                 : "memory");
}

/// d += a b: a 16x16 (row), b 16x8 (col), d 16x8 fp32.
template <class T>
__device__ __forceinline__ void mma(float (&d)[4], const std::uint32_t (&a)[4], std::uint32_t b0, std::uint32_t b1);
template <>
__device__ __forceinline__ void mma<__nv_bfloat16>(float (&d)[4], const std::uint32_t (&a)[4], std::uint32_t b0,
                                                   std::uint32_t b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
                 "{%8, %9}, {%0, %1, %2, %3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
template <>
__device__ __forceinline__ void mma<__half>(float (&d)[4], const std::uint32_t (&a)[4], std::uint32_t b0,
                                            std::uint32_t b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
                 "{%8, %9}, {%0, %1, %2, %3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

/// Two floats rounded to nearest even into one 32-bit register, the first in the low half (the
/// lower column index, as the MMA fragments and memory order want).
template <class T>
__device__ __forceinline__ std::uint32_t pack2(float lo, float hi);
template <>
__device__ __forceinline__ std::uint32_t pack2<__nv_bfloat16>(float lo, float hi) {
    const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    std::uint32_t u;
    memcpy(&u, &v, sizeof u);
    return u;
}
template <>
__device__ __forceinline__ std::uint32_t pack2<__half>(float lo, float hi) {
    const __half2 v = __floats2half2_rn(lo, hi);
    std::uint32_t u;
    memcpy(&u, &v, sizeof u);
    return u;
}

/// 2^x, one MUFU instruction; 2^-inf = +0, which masked scores rely on.
__device__ __forceinline__ float exp2_approx(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
    return y;
}

/// rows x D elements from global (row r at src + r * stride) into a swizzled tile; rows at or
/// past `limit` are zero-filled (their source address is clamped to row 0, never read).
template <int D, int ROWS, class T>
__device__ __forceinline__ void load_tile(T* dst, const T* src, long long stride, int row0, int limit) {
    constexpr int chunks = D / fl::chunk;
    static_assert(ROWS * chunks % fl::threads == 0, "every thread copies the same number of chunks");
#pragma unroll
    for (int it = 0; it < ROWS * chunks / fl::threads; ++it) {
        const int c = threadIdx.x + it * fl::threads, r = c / chunks, col = (c % chunks) * fl::chunk;
        const bool valid = row0 + r < limit;
        const T* s = src + (valid ? (long long)(row0 + r) * stride : 0) + col;
        cp_async16(smem_addr(dst + fl::swizzle(r, col, D)), s, valid);
    }
}

struct dims {
    int heads, kv_heads, n_q, n_kv;
    bool causal;
    float scale_log2;
};

template <class T, int D>
__global__ void __launch_bounds__(fl::threads) flash_kernel(const T* __restrict__ q, const T* __restrict__ k,
                                                            const T* __restrict__ v, T* __restrict__ out, dims d) {
    extern __shared__ __align__(128) unsigned char smem[];
    T* sq = reinterpret_cast<T*>(smem);         // [block_q][D]
    T* sk = sq + fl::block_q * D;               // [stages][block_kv][D]
    T* sv = sk + fl::stages * fl::block_kv * D; // [stages][block_kv][D]
    constexpr int NT = fl::block_kv / 8;        // S n-tiles of 8 keys per warp
    constexpr int DT = D / 8;                   // O n-tiles of 8 columns
    constexpr int KS = D / 16;                  // k-steps of Q K^T
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const int q0 = (gridDim.x - 1 - blockIdx.x) * fl::block_q; // the heaviest (causal) tiles first
    const int h = blockIdx.y, b = blockIdx.z, g = int((long long)h * d.kv_heads / d.heads);
    const long long q_stride = (long long)d.heads * D, kv_stride = (long long)d.kv_heads * D;
    const T* qb = q + (long long)b * d.n_q * q_stride + (long long)h * D;
    const T* kb = k + (long long)b * d.n_kv * kv_stride + (long long)g * D;
    const T* vb = v + (long long)b * d.n_kv * kv_stride + (long long)g * D;
    const int tiles = fl::kv_tiles(q0, d.n_q, d.n_kv, d.causal);
    const int off = d.n_kv - d.n_q; // row i sees keys j <= i + off (causal)

    float o[DT][4];
#pragma unroll
    for (int t = 0; t < DT; ++t) o[t][0] = o[t][1] = o[t][2] = o[t][3] = 0.0f;
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};

    if (tiles > 0) {
        load_tile<D, fl::block_q>(sq, qb, q_stride, q0, d.n_q);
        cp_async_commit();
        load_tile<D, fl::block_kv>(sk, kb, kv_stride, 0, d.n_kv);
        load_tile<D, fl::block_kv>(sv, vb, kv_stride, 0, d.n_kv);
        cp_async_commit();
        cp_async_wait<1>(); // Q has landed (K/V tile 0 may still be in flight)
        __syncthreads();
        // Q's A fragments, once
        std::uint32_t qf[KS][4];
#pragma unroll
        for (int ks = 0; ks < KS; ++ks) {
            const fl::rc a = fl::q_frag_addr(warp, ks, lane);
            ldmatrix_x4(qf[ks], smem_addr(sq + fl::swizzle(a.row, a.col, D)));
        }

        for (int t = 0; t < tiles; ++t) {
            const int stage = t % fl::stages, j0 = t * fl::block_kv;
            if (t + 1 < tiles) { // the next tile loads into the other stage while this one is used
                const int next = (t + 1) % fl::stages;
                load_tile<D, fl::block_kv>(sk + next * fl::block_kv * D, kb, kv_stride, j0 + fl::block_kv, d.n_kv);
                load_tile<D, fl::block_kv>(sv + next * fl::block_kv * D, vb, kv_stride, j0 + fl::block_kv, d.n_kv);
                cp_async_commit();
                cp_async_wait<1>();
            } else {
                cp_async_wait<0>();
            }
            __syncthreads();
            const T* ks_tile = sk + stage * fl::block_kv * D;
            const T* vs_tile = sv + stage * fl::block_kv * D;

            // S = Q K^T, 16 rows x 64 keys per warp
            float s[NT][4];
#pragma unroll
            for (int nt = 0; nt < NT; ++nt) s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.0f;
#pragma unroll
            for (int ks = 0; ks < KS; ++ks) {
#pragma unroll
                for (int np = 0; np < NT / 2; ++np) {
                    std::uint32_t bk[4];
                    const fl::rc a = fl::k_frag_addr(np, ks, lane);
                    ldmatrix_x4(bk, smem_addr(ks_tile + fl::swizzle(a.row, a.col, D)));
                    mma<T>(s[2 * np], qf[ks], bk[0], bk[1]);
                    mma<T>(s[2 * np + 1], qf[ks], bk[2], bk[3]);
                }
            }

            // scale into log2 units; mask keys past n_kv and (causal) past each row's diagonal
            const bool masked = fl::tile_needs_mask(j0, q0, d.n_q, d.n_kv, d.causal);
#pragma unroll
            for (int nt = 0; nt < NT; ++nt)
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                    float x = s[nt][e] * d.scale_log2;
                    if (masked) {
                        const fl::rc c = fl::c_frag_elem(lane, e);
                        const int row = q0 + warp * 16 + c.row, key = j0 + nt * 8 + c.col;
                        if (key >= d.n_kv || (d.causal && key > row + off)) x = -INFINITY;
                    }
                    s[nt][e] = x;
                }

            // online softmax, per row (r = 0: c_frag_elem rows lane / 4, r = 1: + 8), over the 4
            // lanes that hold a row
#pragma unroll
            for (int r = 0; r < 2; ++r) {
                float mx = m[r];
#pragma unroll
                for (int nt = 0; nt < NT; ++nt) mx = fmaxf(mx, fmaxf(s[nt][2 * r], s[nt][2 * r + 1]));
                mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
                mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
                const float m_use = mx == -INFINITY ? 0.0f : mx; // no key seen yet: weights 0, no NaN
                const float corr = exp2_approx(m[r] - m_use);
                m[r] = mx;
                float sum = 0.0f;
#pragma unroll
                for (int nt = 0; nt < NT; ++nt) {
                    s[nt][2 * r] = exp2_approx(s[nt][2 * r] - m_use);
                    s[nt][2 * r + 1] = exp2_approx(s[nt][2 * r + 1] - m_use);
                    sum += s[nt][2 * r] + s[nt][2 * r + 1];
                }
                l[r] = l[r] * corr + sum;
#pragma unroll
                for (int dt = 0; dt < DT; ++dt) {
                    o[dt][2 * r] *= corr;
                    o[dt][2 * r + 1] *= corr;
                }
            }

            // O += P V, P's A fragments straight from S's registers
#pragma unroll
            for (int kk = 0; kk < NT / 2; ++kk) {
                std::uint32_t pa[4];
#pragma unroll
                for (int i = 0; i < 4; ++i) {
                    const float* pair = s[fl::p_ntile(kk, i)] + fl::p_elem(i);
                    pa[i] = pack2<T>(pair[0], pair[1]);
                }
#pragma unroll
                for (int dp = 0; dp < DT / 2; ++dp) {
                    std::uint32_t bv[4];
                    const fl::rc a = fl::v_frag_addr(kk, dp, lane);
                    ldmatrix_x4_trans(bv, smem_addr(vs_tile + fl::swizzle(a.row, a.col, D)));
                    mma<T>(o[2 * dp], pa, bv[0], bv[1]);
                    mma<T>(o[2 * dp + 1], pa, bv[2], bv[3]);
                }
            }
            __syncthreads(); // this stage is read by all warps before the next load overwrites it
        }
    }

    // normalise and store: the lane holds C elements (2r, 2r + 1) of every column tile dt
    T* ob = out + (long long)b * d.n_q * q_stride + (long long)h * D;
#pragma unroll
    for (int r = 0; r < 2; ++r) {
        float sum = l[r];
        sum += __shfl_xor_sync(0xffffffffu, sum, 1);
        sum += __shfl_xor_sync(0xffffffffu, sum, 2);
        const float inv = sum > 0.0f ? 1.0f / sum : 0.0f; // a row that sees no key: zeros
        const fl::rc c = fl::c_frag_elem(lane, 2 * r);
        const int row = q0 + warp * 16 + c.row;
        if (row >= d.n_q) continue;
        T* orow = ob + (long long)row * q_stride + c.col;
#pragma unroll
        for (int dt = 0; dt < DT; ++dt) {
            const std::uint32_t pair = pack2<T>(o[dt][2 * r] * inv, o[dt][2 * r + 1] * inv);
            memcpy(orow + dt * 8, &pair, sizeof pair);
        }
    }
}

template <class T, int D>
void launch(const core_args& a, cudaStream_t stream) {
    constexpr int smem = fl::smem_bytes(D);
    // over 48 KiB (d 128) a block must opt in to its dynamic shared memory; once per process
    static const cudaError_t raised =
        cudaFuncSetAttribute(flash_kernel<T, D>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    ATTN_CUDA(raised, "raising cuda-flash's shared memory limit to " + std::to_string(smem) + " bytes");
    const dims d{a.heads, a.kv_heads, a.n_q, a.n_kv, a.causal, a.scale * log2e};
    const dim3 grid(unsigned((a.n_q + fl::block_q - 1) / fl::block_q), unsigned(a.heads), unsigned(a.batch));
    flash_kernel<T, D><<<grid, fl::threads, smem, stream>>>(static_cast<const T*>(a.q), static_cast<const T*>(a.k),
                                                            static_cast<const T*>(a.v), static_cast<T*>(a.out), d);
    ATTN_LAUNCHED("cuda-flash d " + std::to_string(D));
}

template <class T>
void launch_type(const core_args& a, cudaStream_t stream) {
    if (a.d_qk == 64) return launch<T, 64>(a, stream);
    return launch<T, 128>(a, stream);
}

} // namespace

void launch_flash(const core_args& a, cudaStream_t stream) {
    if (a.st == storage::f16) return launch_type<__half>(a, stream);
    return launch_type<__nv_bfloat16>(a, stream);
}

} // namespace attn::cuda::detail
