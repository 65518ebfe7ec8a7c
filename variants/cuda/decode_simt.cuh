// cuda-decode on CUDA cores: every cache type (f32 above all: the fp32 tolerance forbids TF32),
// d a multiple of 8 up to 256, and the small row counts where tensor cores would idle.
//  - Memory: the same tile stream as the tensor-core kernel (decode_device.cuh: a cp.async
//    pipeline of `stages` tiles of T = 32 keys, 16-byte copies, 8-byte where a row is not a
//    multiple of 16 bytes), rows unswizzled: every lane of a warp reads the same key row at once.
//  - Threads: BDX lanes (a power of two, 8 x BDX >= d) each hold 8 elements of a row's query and
//    output; the 32 / BDX lane groups of a warp take different rows, each thread up to RPT = 4 of
//    them; the 4 warps take different keys of the tile (8 each), each with its own running max,
//    sum and output, merged through shared memory once at the end of the chunk.
//  - A score is an 8-wide dot product per lane and log2(BDX) shuffles; the 8 keys' scores are
//    taken before one rescale of the output; int8 rows are widened by byte permutes, the K scale
//    applied to each score and the V scale to each weight.
#pragma once

#include "decode_device.cuh"

namespace attn::cuda::detail {

template <storage ST, int BDX_>
struct simt_cfg {
    static constexpr storage st = ST;
    static constexpr int BDX = BDX_, NTH = 128, NW = 4, T = 32, KW = T / NW, KB = 4, RW = 32 / BDX, RPT = 4,
                         ROWS = RW * RPT;
    static constexpr int DMAX = BDX * 8;
    static constexpr int EB = ST == storage::f32 ? 4 : ST == storage::int8 ? 1 : 2;
    static constexpr bool I8 = ST == storage::int8;
    static constexpr int MINB = ST == storage::f32 ? 2 : 3;             // f32's 8-element pieces take two 16-byte loads
    static constexpr int MERGE = NW * ROWS * DMAX * 4;                  // the warps' outputs at the end of a chunk
    static constexpr int FIXED = 2 * NW * ROWS * 4 + 2 * ROWS * 4 + 16; // their maxima and sums; the combine's
    static_assert(KW == 8 && 32 % BDX == 0, "tiling");
};

/// 16-byte (or 8-byte) aligned row stride of a tile row of `bytes`.
__host__ __device__ constexpr int simt_stride(int bytes) { return (bytes + 15) / 16 * 16; }

/// Elements [8x, 8x + 8) of a tile row, widened to fp32.
template <storage ST>
__device__ __forceinline__ void load8(const std::uint8_t* row, int x, float (&v)[8]) {
    if constexpr (ST == storage::f32) {
        const float4 a = reinterpret_cast<const float4*>(row)[2 * x],
                     b = reinterpret_cast<const float4*>(row)[2 * x + 1];
        v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w, v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
    } else if constexpr (ST == storage::int8) {
        const uint2 a = reinterpret_cast<const uint2*>(row)[x];
        const std::uint32_t w0 = dl::bias_bytes(a.x), w1 = dl::bias_bytes(a.y);
#pragma unroll
        for (int j = 0; j < 4; ++j) v[j] = dl::widen_byte(w0, j), v[4 + j] = dl::widen_byte(w1, j);
    } else {
        const uint4 a = reinterpret_cast<const uint4*>(row)[x];
        const std::uint32_t u[4] = {a.x, a.y, a.z, a.w};
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            if constexpr (ST == storage::bf16) {
                v[2 * j] = __uint_as_float(u[j] << 16);
                v[2 * j + 1] = __uint_as_float(u[j] & 0xffff0000u);
            } else {
                __half2 h;
                memcpy(&h, &u[j], 4);
                const float2 f = __half22float2(h);
                v[2 * j] = f.x, v[2 * j + 1] = f.y;
            }
        }
    }
}

template <class C>
__global__ void __launch_bounds__(C::NTH, C::MINB) decode_simt(const decode_params p) {
    ATTN_DECODE_SMEM(smem);
    float* mm = reinterpret_cast<float*>(smem); // [NW][ROWS] maxima
    float* ml = mm + C::NW * C::ROWS;           // [NW][ROWS] sums
    float* scratch = ml + C::NW * C::ROWS;      // [ROWS][2] + a flag
    std::uint8_t* area = smem + C::FIXED;       // the stages, then the merge
    const block_work w = locate(p, C::T);
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, x = lane % C::BDX, y = lane / C::BDX;
    const int R = p.heads / p.kv_heads, d = p.d_k;
    const bool active = x * 8 < d;
    const int k_stride = simt_stride(d * C::EB), chunk = (d * C::EB) % 16 == 0 ? 16 : 8;
    const int stage = C::T * 2 * k_stride + (C::I8 ? 2 * C::T * 4 : 0);

    float qv[C::RPT][8], o[C::RPT][8], m_run[C::RPT], l_run[C::RPT];
    int hi[C::RPT]; // one past each row's last key (its first: hi - window); positions are below 2^31
#pragma unroll
    for (int i = 0; i < C::RPT; ++i) {
        const int r = y + C::RW * i;
        const bool valid = r < w.nrows && active;
        const int gr = w.row0 + r, head = w.g * R + gr / p.n_q, qi = gr % p.n_q;
        const float* qrow = p.q + ((long long)(w.b * p.n_q + qi) * p.heads + head) * d;
#pragma unroll
        for (int e = 0; e < 8; ++e) {
            qv[i][e] = valid ? qrow[x * 8 + e] * p.scale_log2 : 0.0f;
            o[i][e] = 0.0f;
        }
        m_run[i] = -INFINITY;
        l_run[i] = 0.0f;
        const dl::key_range k = dl::row_keys(w.n, p.n_q, qi, p.window, p.causal);
        hi[i] = r < w.nrows ? int(k.end) : 0;
    }

    auto dst = [&](int buf) {
        std::uint8_t* s = area + buf * stage;
        tile_dst t;
        t.k = s;
        t.v = s + C::T * k_stride;
        t.ks = C::I8 ? reinterpret_cast<float*>(s + 2 * C::T * k_stride) : nullptr;
        t.vs = C::I8 ? t.ks + C::T : nullptr;
        t.k_stride = t.v_stride = k_stride;
        t.k_bytes = t.v_bytes = d * C::EB;
        t.chunk = chunk, t.elem = C::EB, t.swizzle = false;
        return t;
    };
    const int S = p.stages;
    for (int s = 0; s < S - 1; ++s) {
        if (w.tf + s < w.te) load_tile<C::NTH>(p, dst(s), w.b, w.g, w.kb + (w.tf + s) * C::T, w.ke, C::T);
        cp_async_commit();
    }
    // tile it sits in buffer buf, tile it + S - 1 goes to buffer next (no division in the loop)
    for (int it = w.tf, buf = 0, next = S - 1; it < w.te;
         ++it, buf = buf + 1 == S ? 0 : buf + 1, next = next + 1 == S ? 0 : next + 1) {
        cp_async_wait(S - 2);
        __syncthreads();
        if (it + S - 1 < w.te) load_tile<C::NTH>(p, dst(next), w.b, w.g, w.kb + (it + S - 1) * C::T, w.ke, C::T);
        cp_async_commit();
        const int t0 = w.kb + it * C::T;
        const std::uint8_t* kt = area + buf * stage;
        const std::uint8_t* vt = kt + C::T * k_stride;
        const float* kst = reinterpret_cast<const float*>(kt + 2 * C::T * k_stride);
        const float* vst = kst + C::T;
        const bool full = tile_full(w, t0, C::T);

#pragma unroll 1
        for (int half = 0; half < C::KW / C::KB; ++half) { // keys in batches of KB: one rescale each
            float sc[C::KB][C::RPT];
#pragma unroll
            for (int j = 0; j < C::KB; ++j) {
                const int key = warp * C::KW + half * C::KB + j;
                float kv[8] = {};
                if (active) load8<C::st>(kt + key * k_stride, x, kv);
#pragma unroll
                for (int i = 0; i < C::RPT; ++i) {
                    if (C::RW * i >= w.nrows) { // no lane of the warp has row i: skip it (warp-uniform)
                        sc[j][i] = -INFINITY;
                        continue;
                    }
                    float part = 0.0f;
#pragma unroll
                    for (int e = 0; e < 8; ++e) part += qv[i][e] * kv[e];
#pragma unroll
                    for (int off = C::BDX / 2; off > 0; off /= 2) part += __shfl_xor_sync(0xffffffffu, part, off);
                    if constexpr (C::I8) part *= kst[key];
                    if (!full && (t0 + key >= hi[i] || (p.window > 0 && t0 + key < hi[i] - p.window))) part = -INFINITY;
                    sc[j][i] = part;
                }
            }
            float mu[C::RPT];
#pragma unroll
            for (int i = 0; i < C::RPT; ++i) {
                float mx = m_run[i];
#pragma unroll
                for (int j = 0; j < C::KB; ++j) mx = fmaxf(mx, sc[j][i]);
                mu[i] = mx == -INFINITY ? 0.0f : mx;
                const float corr = exp2_fast(m_run[i] - mu[i]);
                m_run[i] = mx;
                l_run[i] *= corr;
#pragma unroll
                for (int e = 0; e < 8; ++e) o[i][e] *= corr;
            }
#pragma unroll
            for (int j = 0; j < C::KB; ++j) {
                const int key = warp * C::KW + half * C::KB + j;
                float vv[8] = {};
                if (active) load8<C::st>(vt + key * k_stride, x, vv);
#pragma unroll
                for (int i = 0; i < C::RPT; ++i) {
                    if (C::RW * i >= w.nrows) continue;
                    float pw = exp2_fast(sc[j][i] - mu[i]);
                    l_run[i] += pw;
                    if constexpr (C::I8) pw *= vst[key];
#pragma unroll
                    for (int e = 0; e < 8; ++e) o[i][e] += pw * vv[e];
                }
            }
        }
    }
    cp_async_wait(0);
    __syncthreads(); // every warp is done with the tiles: their area takes the merge

    float* mo = reinterpret_cast<float*>(area); // [NW][ROWS][DMAX]
#pragma unroll
    for (int i = 0; i < C::RPT; ++i) {
        const int r = y + C::RW * i;
        if (r >= w.nrows) continue;
        if (active)
#pragma unroll
            for (int e = 0; e < 8; ++e) mo[(warp * C::ROWS + r) * C::DMAX + x * 8 + e] = o[i][e];
        if (x == 0) {
            mm[warp * C::ROWS + r] = m_run[i];
            ml[warp * C::ROWS + r] = l_run[i];
        }
    }
    __syncthreads();
    const bool split = p.splits > 1;
    for (int idx = threadIdx.x; idx < w.nrows * d; idx += C::NTH) {
        const int r = idx / d, col = idx % d;
        float mx = -INFINITY;
#pragma unroll
        for (int u = 0; u < C::NW; ++u) mx = fmaxf(mx, mm[u * C::ROWS + r]);
        const float mz = mx == -INFINITY ? 0.0f : mx;
        float l = 0.0f, acc = 0.0f;
#pragma unroll
        for (int u = 0; u < C::NW; ++u) {
            const float f = exp2_fast(mm[u * C::ROWS + r] - mz);
            l += f * ml[u * C::ROWS + r];
            acc += f * mo[(u * C::ROWS + r) * C::DMAX + col];
        }
        if (split) {
            part_row(p, w, r)[col] = acc;
            if (col == 0) {
                float* pml = part_ml_row(p, w, r);
                pml[0] = mx;
                pml[1] = l;
            }
        } else {
            out_row(p, w, r)[col] = l > 0.0f ? acc / l : 0.0f;
        }
    }
    if (split) combine_if_last<C::NTH>(p, w, scratch, reinterpret_cast<float*>(area));
}

} // namespace attn::cuda::detail
