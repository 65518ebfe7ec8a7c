// cuda-naive: the formulas as they read, one thread per output element. Three kernels: the scaled
// scores Q K^T of every (batch, head, query, key) into a scratch buffer [B, H, n_q, n_kv] in global
// memory (masked keys -inf: past the bottom-right diagonal, and under a sliding window W before
// the row's last visible key - W + 1), a softmax per row (one thread a row: max, exp and sum, divide), and
// P V (one thread per output element). fp32 arithmetic for f32, bf16 and f16 storage (inputs
// widened as loaded, the output rounded as stored). The baseline the GPU kernels are checked and
// timed against: every score goes through global memory twice, and the scratch grows as n^2.
// Status: not yet run on a GPU.
#include <cmath>
#include <cstdint>
#include <limits>

#include "common.cuh"

namespace attn::cuda::detail {
namespace {

constexpr int block = 256;

struct dims {
    long long batch, heads, kv_heads, n_q, n_kv, d_qk, d_v;
    bool causal;
    long long window; // 0: none
    float scale;
};

dims dims_of(const core_args& a) {
    return {a.batch, a.heads, a.kv_heads, a.n_q, a.n_kv, a.d_qk, a.d_v, a.causal, a.window, a.scale};
}

/// Blocks for a grid-stride loop over n elements: enough to fill any device, no more than needed.
unsigned blocks_for(long long n) {
    const long long want = (n + block - 1) / block;
    return unsigned(want < (1 << 20) ? want : (1 << 20));
}

template <class T>
__global__ void naive_scores(const T* __restrict__ q, const T* __restrict__ k, float* __restrict__ s, dims d) {
    const long long total = d.batch * d.heads * d.n_q * d.n_kv;
    for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < total;
         e += (long long)gridDim.x * blockDim.x) {
        const long long j = e % d.n_kv, r = e / d.n_kv, i = r % d.n_q, bh = r / d.n_q;
        const long long h = bh % d.heads, b = bh / d.heads, g = h * d.kv_heads / d.heads;
        const long long last = i + d.n_kv - d.n_q; // bottom-right: row i sees keys j <= last
        if (d.causal && (j > last || (d.window > 0 && j < last - d.window + 1))) {
            s[e] = -INFINITY;
            continue;
        }
        const T* qi = q + ((b * d.n_q + i) * d.heads + h) * d.d_qk;
        const T* kj = k + ((b * d.n_kv + j) * d.kv_heads + g) * d.d_qk;
        float dot = 0.0f;
        for (long long c = 0; c < d.d_qk; ++c) dot += to_f32(qi[c]) * to_f32(kj[c]);
        s[e] = dot * d.scale;
    }
}

__global__ void naive_softmax(float* __restrict__ s, long long rows, long long n) {
    for (long long r = blockIdx.x * (long long)blockDim.x + threadIdx.x; r < rows;
         r += (long long)gridDim.x * blockDim.x) {
        float* row = s + r * n;
        float mx = -INFINITY;
        for (long long j = 0; j < n; ++j) mx = fmaxf(mx, row[j]);
        if (mx == -INFINITY) { // the row sees no key: zero weights, so a zero output
            for (long long j = 0; j < n; ++j) row[j] = 0.0f;
            continue;
        }
        float sum = 0.0f;
        for (long long j = 0; j < n; ++j) sum += (row[j] = expf(row[j] - mx));
        const float inv = 1.0f / sum;
        for (long long j = 0; j < n; ++j) row[j] *= inv;
    }
}

template <class T>
__global__ void naive_pv(const float* __restrict__ p, const T* __restrict__ v, T* __restrict__ out, dims d) {
    const long long total = d.batch * d.n_q * d.heads * d.d_v; // out's own order: [B, n_q, H, d_v]
    for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < total;
         e += (long long)gridDim.x * blockDim.x) {
        const long long c = e % d.d_v, r = e / d.d_v, h = r % d.heads, bi = r / d.heads;
        const long long i = bi % d.n_q, b = bi / d.n_q, g = h * d.kv_heads / d.heads;
        const float* pr = p + ((b * d.heads + h) * d.n_q + i) * d.n_kv;
        const T* vb = v + (b * d.n_kv * d.kv_heads + g) * d.d_v + c;
        float acc = 0.0f;
        for (long long j = 0; j < d.n_kv; ++j) acc += pr[j] * to_f32(vb[j * d.kv_heads * d.d_v]);
        out[e] = from_f32<T>(acc);
    }
}

template <class T>
void launch(const core_args& a, cudaStream_t stream) {
    const dims d = dims_of(a);
    const long long scores = d.batch * d.heads * d.n_q * d.n_kv, rows = d.batch * d.heads * d.n_q;
    naive_scores<T><<<blocks_for(scores), block, 0, stream>>>(static_cast<const T*>(a.q), static_cast<const T*>(a.k),
                                                              a.scratch, d);
    ATTN_LAUNCHED("cuda-naive scores");
    naive_softmax<<<blocks_for(rows), block, 0, stream>>>(a.scratch, rows, d.n_kv);
    ATTN_LAUNCHED("cuda-naive softmax");
    naive_pv<T><<<blocks_for(rows * d.d_v), block, 0, stream>>>(a.scratch, static_cast<const T*>(a.v),
                                                                static_cast<T*>(a.out), d);
    ATTN_LAUNCHED("cuda-naive P V");
}

} // namespace

std::size_t naive_scratch_bytes(const shape& s) { return sizeof(float) * s.batch * s.heads * s.n_q * s.n_kv; }

void launch_naive(const core_args& a, cudaStream_t stream) {
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
