// cuda-decode: one query row per sequence (n_q = 1) over a key/value cache, split-KV
// flash-decoding: the step is memory-bound (each cache byte is used once per query head), so the
// kernel is shaped for bandwidth.
//  - Work: a block takes one chunk of keys of one (batch, kv head) and serves every query head
//    that reads that kv head (R = H/G, all of them where shared memory allows, else in groups),
//    so the chunk's cache bytes cross the memory bus once. Chunk count from plan.hpp: enough
//    blocks to fill the SMs (read from the device), none shorter than 128 keys.
//  - Memory: the rows of a (batch, kv head) are contiguous in the cache, so a tile of T keys is
//    T x d contiguous elements; each thread streams 8-element units of it (16 bytes for bf16/f16,
//    32 for f32, 8 for int8) with evict-first loads, the next tile's units in flight while the
//    current tile is computed (register prefetch: up to 4 units of K and 4 of V per thread).
//    T = 4096 / d keys (16 at d 256, 32 at d 128, 64 at d 64; at most 128).
//  - Arithmetic in fp32 from shared memory: the tile is widened (int8: times its row's scale)
//    into K [T][d + 1] (padded: lanes reading different rows hit different banks) and V [T][d];
//    each score is a dot product of a group of lanes (a power of two, so that every warp is busy
//    when there are few heads) reduced with shuffles; then the running max, sum and
//    unnormalised output per head, all in shared memory.
//  - Deterministic: each chunk leaves (max m_c, sum l_c, unnormalised acc_c) per head and a second
//    kernel combines them in chunk order: out = sum_c 2^(m_c - M) acc_c / sum_c 2^(m_c - M) l_c.
// f32, bf16, f16 and int8 caches; d_head a multiple of 8 up to 256; q and out fp32.
// __launch_bounds__(128, 4): four blocks of ~41 KiB resident per SM (the plan asks for 2 per SM;
// more hide latency); ptxas then fits every cache type in 104-128 registers with no spill (with
// the thread count alone the int8 kernel spilled 20 bytes on sm_80).
// Known limits: with many heads per kv head (MQA, R = 32) the per-head score work grows and the
// kernel may leave the memory bound; when R heads do not fit in shared memory the groups re-read
// the chunk (from L2 where it fits). Status: not yet run on a GPU.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "common.cuh"
#include "plan.hpp"

namespace attn::cuda::detail {
namespace {

constexpr int threads = 128, warps = threads / 32;
constexpr int tile_elems = 4096;                    // T x d per tile
constexpr int units_max = tile_elems / 8 / threads; // 8-element units of one tile per thread: 4

int tile_keys(int d) { return std::clamp(tile_elems / d, 16, 128); }

std::size_t smem_fixed(int d, int t) { return sizeof(float) * (std::size_t(t) * d + std::size_t(t) * (d + 1)); }
std::size_t smem_per_head(int d, int t) { return sizeof(float) * (2 * std::size_t(d) + t + 3); }

/// The cache's element type on the device, how 8 of them are loaded (one or two vectors, evict
/// first: each byte is used once) and widened.
template <storage ST>
struct cache_unit;
template <>
struct cache_unit<storage::f32> {
    struct raw {
        float4 a, b;
    };
    using elem = float;
    static __device__ __forceinline__ raw load(const elem* p) {
        return {__ldcs(reinterpret_cast<const float4*>(p)), __ldcs(reinterpret_cast<const float4*>(p) + 1)};
    }
    static __device__ __forceinline__ void widen(const raw& r, float (&x)[8]) {
        x[0] = r.a.x, x[1] = r.a.y, x[2] = r.a.z, x[3] = r.a.w, x[4] = r.b.x, x[5] = r.b.y, x[6] = r.b.z, x[7] = r.b.w;
    }
};
template <>
struct cache_unit<storage::bf16> {
    using raw = uint4;
    using elem = std::uint16_t;
    static __device__ __forceinline__ raw load(const elem* p) { return __ldcs(reinterpret_cast<const uint4*>(p)); }
    static __device__ __forceinline__ void widen(const raw& r, float (&x)[8]) {
        const unsigned w[4] = {r.x, r.y, r.z, r.w};
#pragma unroll
        for (int i = 0; i < 4; ++i) { // bf16 is fp32's upper half
            x[2 * i] = __uint_as_float(w[i] << 16);
            x[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
        }
    }
};
template <>
struct cache_unit<storage::f16> {
    using raw = uint4;
    using elem = std::uint16_t;
    static __device__ __forceinline__ raw load(const elem* p) { return __ldcs(reinterpret_cast<const uint4*>(p)); }
    static __device__ __forceinline__ void widen(const raw& r, float (&x)[8]) {
        const unsigned w[4] = {r.x, r.y, r.z, r.w};
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            __half2 h;
            memcpy(&h, &w[i], sizeof h);
            const float2 f = __half22float2(h);
            x[2 * i] = f.x;
            x[2 * i + 1] = f.y;
        }
    }
};
template <>
struct cache_unit<storage::int8> {
    using raw = uint2;
    using elem = std::int8_t;
    static __device__ __forceinline__ raw load(const elem* p) { return __ldcs(reinterpret_cast<const uint2*>(p)); }
    static __device__ __forceinline__ void widen(const raw& r, float (&x)[8]) {
        const unsigned w[2] = {r.x, r.y};
#pragma unroll
        for (int i = 0; i < 8; ++i) // byte i % 4 of word i / 4, sign-extended by the arithmetic shift
            x[i] = float(int(w[i / 4] << (24 - 8 * (i % 4))) >> 24);
    }
};

struct chunk_args {
    const float* q;
    const void* k;
    const void* v;
    const float* k_scales;
    const float* v_scales;
    float* part_acc;
    float* part_ml;
    int heads, kv_heads, n_kv, d, capacity, tile, heads_per_block, groups, chunks;
    float scale_log2;
};

template <storage ST>
__global__ void __launch_bounds__(threads, 4) decode_chunk(chunk_args a) {
    using U = cache_unit<ST>;
    using elem = typename U::elem;
    extern __shared__ __align__(16) float sm[];
    const int d = a.d, T = a.tile, RB = a.heads_per_block;
    float* vf = sm;               // [T][d]      (16-byte aligned rows: d is a multiple of 8)
    float* kf = vf + T * d;       // [T][d + 1]
    float* qs = kf + T * (d + 1); // [RB][d]     queries times scale x log2 e
    float* acc = qs + RB * d;     // [RB][d]     unnormalised output
    float* ps = acc + RB * d;     // [RB][T]     scores, then weights
    float* ml = ps + RB * T;      // [RB][3]     running max, sum, this tile's correction
    const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
    const int c = blockIdx.x, grp = blockIdx.y % a.groups, g = blockIdx.y / a.groups, b = blockIdx.z;
    const int R = a.heads / a.kv_heads, h0 = g * R + grp * RB, nh = min(RB, R - grp * RB);
    const long long j0 = (long long)c * a.n_kv / a.chunks, j1 = (long long)(c + 1) * a.n_kv / a.chunks;
    const long long row0 = ((long long)b * a.kv_heads + g) * a.capacity; // the (b, g) rows start here
    const elem* kc = static_cast<const elem*>(a.k) + row0 * d;
    const elem* vc = static_cast<const elem*>(a.v) + row0 * d;
    const float* ksc = a.k_scales ? a.k_scales + row0 : nullptr;
    const float* vsc = a.v_scales ? a.v_scales + row0 : nullptr;

    for (int e = tid; e < nh * d; e += threads) {
        qs[e] = a.q[((long long)b * a.heads + h0) * d + e] * a.scale_log2; // heads h0.. are adjacent
        acc[e] = 0.0f;
    }
    for (int r = tid; r < nh; r += threads) {
        ml[3 * r] = -INFINITY;
        ml[3 * r + 1] = 0.0f;
    }

    typename U::raw kr[units_max], vr[units_max];
    float ks[units_max], vs[units_max];
    auto fetch = [&](long long t0, int n) { // units of keys [t0, t0 + n)
#pragma unroll
        for (int u = 0; u < units_max; ++u) {
            const int unit = tid + u * threads;
            if (unit * 8 < n * d) {
                kr[u] = U::load(kc + t0 * d + unit * 8);
                vr[u] = U::load(vc + t0 * d + unit * 8);
                if (ST == storage::int8) {
                    ks[u] = ksc[t0 + unit * 8 / d];
                    vs[u] = vsc[t0 + unit * 8 / d];
                }
            }
        }
    };
    fetch(j0, int(min((long long)T, j1 - j0)));

    for (long long t0 = j0; t0 < j1; t0 += T) {
        const int n = int(min((long long)T, j1 - t0));
        __syncthreads(); // the last tile's K, V and weights are read (and qs, ml are set)
#pragma unroll
        for (int u = 0; u < units_max; ++u) {
            const int unit = tid + u * threads;
            if (unit * 8 < n * d) {
                const int j = unit * 8 / d, x0 = unit * 8 % d;
                float x[8];
                U::widen(kr[u], x);
                const float fk = ST == storage::int8 ? ks[u] : 1.0f;
#pragma unroll
                for (int i = 0; i < 8; ++i) kf[j * (d + 1) + x0 + i] = x[i] * fk;
                U::widen(vr[u], x);
                const float fv = ST == storage::int8 ? vs[u] : 1.0f;
                float4* vrow = reinterpret_cast<float4*>(vf + j * d + x0);
                vrow[0] = make_float4(x[0] * fv, x[1] * fv, x[2] * fv, x[3] * fv);
                vrow[1] = make_float4(x[4] * fv, x[5] * fv, x[6] * fv, x[7] * fv);
            }
        }
        __syncthreads();
        if (t0 + T < j1) fetch(t0 + T, int(min((long long)T, j1 - t0 - T))); // in flight during the math

        // scores: lp lanes per (head, key) pair, lp a power of two up to 32 with pairs x lp <= threads
        const int pairs = nh * n;
        int lp = 32;
        while (lp > 1 && pairs * lp > threads) lp /= 2;
        for (int base = 0; base < pairs; base += threads / lp) { // warp-uniform trip count: shuffles below
            const int p = base + tid / lp, r = p / n, j = p % n;
            const bool valid = p < pairs;
            float part = 0.0f;
            if (valid)
                for (int x = tid % lp; x < d; x += lp) part += qs[r * d + x] * kf[j * (d + 1) + x];
            for (int o = lp / 2; o > 0; o /= 2) part += __shfl_xor_sync(0xffffffffu, part, o);
            if (valid && tid % lp == 0) ps[r * T + j] = part;
        }
        __syncthreads();

        // running max and sum per head, a warp a head
        for (int r = warp; r < nh; r += warps) {
            float mx = -INFINITY;
            for (int j = lane; j < n; j += 32) mx = fmaxf(mx, ps[r * T + j]);
            for (int o = 16; o > 0; o /= 2) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
            const float m_old = ml[3 * r], m_new = fmaxf(m_old, mx); // finite: every key here is visible
            float sum = 0.0f;
            for (int j = lane; j < n; j += 32) {
                const float p = exp2f(ps[r * T + j] - m_new);
                ps[r * T + j] = p;
                sum += p;
            }
            for (int o = 16; o > 0; o /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, o);
            __syncwarp();
            if (lane == 0) {
                const float corr = exp2f(m_old - m_new); // 0 on the first tile
                ml[3 * r] = m_new;
                ml[3 * r + 1] = ml[3 * r + 1] * corr + sum;
                ml[3 * r + 2] = corr;
            }
        }
        __syncthreads();

        // acc = acc x corr + P V; each thread keeps the same elements across tiles
        for (int e = tid; e < nh * d; e += threads) {
            const int r = e / d, x = e % d;
            float o = acc[e] * ml[3 * r + 2];
            const float* pr = ps + r * T;
            for (int j = 0; j < n; ++j) o += pr[j] * vf[j * d + x];
            acc[e] = o;
        }
    }
    // this chunk's partial result: [B, H, chunks, d] and [B, H, chunks, 2]
    for (int e = tid; e < nh * d; e += threads) {
        const int r = e / d, x = e % d;
        a.part_acc[(((long long)b * a.heads + h0 + r) * a.chunks + c) * d + x] = acc[e];
    }
    for (int r = tid; r < nh; r += threads) {
        float* mlo = a.part_ml + (((long long)b * a.heads + h0 + r) * a.chunks + c) * 2;
        mlo[0] = ml[3 * r];
        mlo[1] = ml[3 * r + 1];
    }
}

/// Block (b, h): its chunks in chunk order, out = sum_c 2^(m_c - M) acc_c / sum_c 2^(m_c - M) l_c.
__global__ void decode_combine(const float* __restrict__ part_acc, const float* __restrict__ part_ml,
                               float* __restrict__ out, int chunks, int d) {
    const long long bh = blockIdx.x;
    const float* ml = part_ml + bh * chunks * 2;
    float mx = -INFINITY;
    for (int c = 0; c < chunks; ++c) mx = fmaxf(mx, ml[2 * c]);
    for (int x = threadIdx.x; x < d; x += blockDim.x) {
        float l = 0.0f, o = 0.0f;
        for (int c = 0; c < chunks; ++c) {
            const float w = exp2f(ml[2 * c] - mx);
            l += w * ml[2 * c + 1];
            o += w * part_acc[(bh * chunks + c) * d + x];
        }
        out[bh * d + x] = l > 0.0f ? o / l : 0.0f; // l >= 1: the largest score's own weight
    }
}

template <storage ST>
void launch(const decode_args& a, cudaStream_t stream) {
    const decode_plan& p = a.plan;
    static const cudaError_t raised =
        cudaFuncSetAttribute(decode_chunk<ST>, cudaFuncAttributeMaxDynamicSharedMemorySize, props().smem_optin);
    ATTN_CUDA(raised, "raising cuda-decode's shared memory limit to the device's " +
                          std::to_string(props().smem_optin) + " bytes");
    const chunk_args c{
        a.q,    a.k, a.v,        a.k_scales, a.v_scales,        a.part_acc, a.part_ml, a.heads,        a.kv_heads,
        a.n_kv, a.d, a.capacity, p.tile,     p.heads_per_block, p.groups,   p.chunks,  a.scale * log2e};
    const dim3 grid(unsigned(p.chunks), unsigned(a.kv_heads * p.groups), unsigned(a.batch));
    decode_chunk<ST><<<grid, threads, p.smem, stream>>>(c);
    ATTN_LAUNCHED(std::string("cuda-decode chunks over a ") + name(ST) + " cache");
    decode_combine<<<unsigned(a.batch * a.heads), unsigned(std::min(a.d, 256)), 0, stream>>>(a.part_acc, a.part_ml,
                                                                                             a.out, p.chunks, a.d);
    ATTN_LAUNCHED("cuda-decode combine");
}

} // namespace

decode_plan plan_decode(const shape& s, storage cache_type) {
    (void)cache_type; // the tile is sized in elements, the same for every cache type
    const device_props& dev = props();
    decode_plan p;
    const int d = int(s.d_qk), r = int(s.heads / s.kv_heads);
    p.tile = tile_keys(d);
    const std::size_t limit = std::max<std::size_t>(48 * 1024, std::size_t(dev.smem_optin));
    const std::size_t fixed = smem_fixed(d, p.tile), per_head = smem_per_head(d, p.tile);
    const int most = int(std::max<std::size_t>(1, (limit - fixed) / per_head));
    p.groups = (r + most - 1) / most;
    p.heads_per_block = (r + p.groups - 1) / p.groups;
    p.chunks = int(plan::split_keys(s.batch, s.kv_heads * std::size_t(p.groups), s.n_kv, dev.sms).chunks);
    p.smem = fixed + per_head * std::size_t(p.heads_per_block);
    return p;
}

void launch_decode(const decode_args& a, cudaStream_t stream) {
    switch (a.st) {
    case storage::bf16:
        return launch<storage::bf16>(a, stream);
    case storage::f16:
        return launch<storage::f16>(a, stream);
    case storage::int8:
        return launch<storage::int8>(a, stream);
    default:
        return launch<storage::f32>(a, stream);
    }
}

} // namespace attn::cuda::detail
