// A CUDA thread block emulated on host threads, for running cuda-decode's kernels' own source on a
// machine without a GPU (C++20, included by decode_device.cuh when ATTN_DECODE_EMULATE is defined;
// test_decode_emu.cpp). Each CUDA thread is a std::thread; __syncthreads is a barrier of the block,
// warp collectives (shuffles, ldmatrix, mma.sync) a barrier of the warp's 32 threads around a
// shared exchange. cp.async copies are queued per thread and done when that thread waits for
// their group (the latest moment the PTX ISA allows), so reading a stage too early reads the stale
// bytes. ldmatrix and mma follow the PTX ISA's fragment layouts (as tests/cuda/test_decode_warp.cpp
// models them); ex2.approx is std::exp2. Blocks of a grid run one after another, so the fused
// combine's last block is the grid's last. Dynamic shared memory starts as 0xff bytes (NaN) and is
// sized exactly, as are the test's caches: built with -fsanitize=address (checked: clean), a kernel
// reading past either fails, which makes it a memcheck of the emulated cases too.
#pragma once

#include <array>
#include <atomic>
#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <deque>
#include <memory>
#include <thread>
#include <vector>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

namespace attn_emu {

struct warp_ctx {
    std::barrier<> bar{32};
    std::array<const void*, 32> ptr{};
    std::array<std::array<std::uint32_t, 4>, 32> a{};
    std::array<std::uint32_t, 32> b0{}, b1{}, word{};
};

struct block_ctx {
    std::vector<std::uint8_t> smem;
    std::barrier<> bar;
    std::vector<std::unique_ptr<warp_ctx>> warps;
    block_ctx(int threads, std::size_t smem_bytes) : smem(smem_bytes, 0xff), bar(threads) {
        for (int w = 0; w < threads / 32; ++w) warps.push_back(std::make_unique<warp_ctx>());
    }
};

struct copy {
    void* dst;
    const void* src;
    int bytes;
    bool valid;
};

struct thread_ctx {
    block_ctx* blk = nullptr;
    uint3 tid{}, bid{};
    std::vector<copy> open;
    std::deque<std::vector<copy>> groups;
};

inline thread_local thread_ctx tls;

inline block_ctx& block() { return *tls.blk; }
inline int lane() { return int(tls.tid.x % 32); }
inline warp_ctx& warp() { return *tls.blk->warps[tls.tid.x / 32]; }

/// Runs `blocks` blocks of `threads` threads of kernel(p), one block after another.
template <class K, class P>
void launch(K kernel, unsigned blocks, int threads, std::size_t smem, const P& p) {
    for (unsigned b = 0; b < blocks; ++b) {
        block_ctx ctx(threads, smem);
        std::vector<std::thread> pool;
        for (int t = 0; t < threads; ++t)
            pool.emplace_back([&, t] {
                tls = thread_ctx{};
                tls.blk = &ctx;
                tls.tid = uint3{unsigned(t), 0, 0};
                tls.bid = uint3{b, 0, 0};
                kernel(p);
            });
        for (auto& th : pool) th.join();
    }
}

inline void sync_block() { block().bar.arrive_and_wait(); }

inline std::uint32_t bits(float f) {
    std::uint32_t u;
    std::memcpy(&u, &f, 4);
    return u;
}
inline float from_bits(std::uint32_t u) {
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}

inline float shfl_xor(float v, int o) {
    warp_ctx& w = warp();
    w.word[std::size_t(lane())] = bits(v);
    w.bar.arrive_and_wait();
    const float r = from_bits(w.word[std::size_t(lane() ^ o)]);
    w.bar.arrive_and_wait();
    return r;
}

inline unsigned atomic_add(unsigned* p, unsigned v) { return std::atomic_ref<unsigned>(*p).fetch_add(v); }

inline std::uint16_t ld16(const void* p) {
    std::uint16_t x;
    std::memcpy(&x, p, 2);
    return x;
}

/// ldmatrix.x4 (.trans): lane l addresses row l % 8 of matrix l / 8; register i of lane (g, t) holds
/// (row g, cols 2t, 2t + 1) of matrix i, or with .trans (rows 2t, 2t + 1, col g).
inline void ldmatrix(std::uint32_t (&r)[4], const void* p, bool trans) {
    warp_ctx& w = warp();
    w.ptr[std::size_t(lane())] = p;
    w.bar.arrive_and_wait();
    const int g = lane() / 4, t = lane() % 4;
    for (int i = 0; i < 4; ++i) {
        const auto* row_g = static_cast<const std::uint8_t*>(w.ptr[std::size_t(8 * i + g)]);
        const auto* row_a = static_cast<const std::uint8_t*>(w.ptr[std::size_t(8 * i + 2 * t)]);
        const auto* row_b = static_cast<const std::uint8_t*>(w.ptr[std::size_t(8 * i + 2 * t + 1)]);
        const std::uint16_t lo = trans ? ld16(row_a + 2 * g) : ld16(row_g + 4 * t);
        const std::uint16_t hi = trans ? ld16(row_b + 2 * g) : ld16(row_g + 4 * t + 2);
        r[i] = lo | (std::uint32_t(hi) << 16);
    }
    w.bar.arrive_and_wait();
}

inline float half_of(std::uint32_t r, int h, bool f16) {
    const std::uint16_t x = std::uint16_t(h ? r >> 16 : r & 0xffff);
    if (f16) {
        __half v;
        std::memcpy(&v, &x, 2);
        return __half2float(v);
    }
    return from_bits(std::uint32_t(x) << 16);
}

/// mma.m16n8k16.row.col, fp32 accumulate: a0 = A(g, 2t..), a1 = A(g + 8, 2t..), a2 = A(g, 2t + 8..),
/// a3 = A(g + 8, 2t + 8..); b0 = B(2t.., g), b1 = B(2t + 8.., g); c0, c1 = C(g, 2t..), c2, c3 = C(g + 8, 2t..).
inline void mma(float (&d)[4], const std::uint32_t (&a)[4], std::uint32_t b0, std::uint32_t b1, bool f16) {
    warp_ctx& w = warp();
    const int l = lane();
    for (int i = 0; i < 4; ++i) w.a[std::size_t(l)][std::size_t(i)] = a[i];
    w.b0[std::size_t(l)] = b0;
    w.b1[std::size_t(l)] = b1;
    w.bar.arrive_and_wait();
    float A[16][16], B[16][8];
    for (int x = 0; x < 32; ++x) {
        const int g = x / 4, t = x % 4;
        const auto& r = w.a[std::size_t(x)];
        for (int h = 0; h < 2; ++h) {
            A[g][2 * t + h] = half_of(r[0], h, f16);
            A[g + 8][2 * t + h] = half_of(r[1], h, f16);
            A[g][2 * t + 8 + h] = half_of(r[2], h, f16);
            A[g + 8][2 * t + 8 + h] = half_of(r[3], h, f16);
            B[2 * t + h][g] = half_of(w.b0[std::size_t(x)], h, f16);
            B[2 * t + 8 + h][g] = half_of(w.b1[std::size_t(x)], h, f16);
        }
    }
    const int g = l / 4, t = l % 4;
    for (int e = 0; e < 4; ++e) {
        const int row = g + (e / 2) * 8, col = 2 * t + e % 2;
        float acc = d[e];
        for (int k = 0; k < 16; ++k) acc += A[row][k] * B[k][col];
        d[e] = acc;
    }
    w.bar.arrive_and_wait();
}

inline void cp_async(void* dst, const void* src, int bytes, bool valid) {
    tls.open.push_back({dst, src, bytes, valid});
}
inline void commit() {
    tls.groups.push_back(std::move(tls.open));
    tls.open.clear();
}
inline void wait(int n) {
    while (int(tls.groups.size()) > n) {
        for (const copy& c : tls.groups.front()) {
            if (c.valid)
                std::memcpy(c.dst, c.src, std::size_t(c.bytes));
            else
                std::memset(c.dst, 0, std::size_t(c.bytes));
        }
        tls.groups.pop_front();
    }
}

} // namespace attn_emu

#define __launch_bounds__(...)
#define threadIdx (::attn_emu::tls.tid)
#define blockIdx (::attn_emu::tls.bid)
#define __syncthreads() ::attn_emu::sync_block()
#define __shfl_xor_sync(mask, v, o) ::attn_emu::shfl_xor((v), (o))
#define __ldcg(p) (*(p))
#define atomicAdd(p, v) ::attn_emu::atomic_add((p), (v))
#define __threadfence() std::atomic_thread_fence(std::memory_order_seq_cst)
#define __uint_as_float(u) ::attn_emu::from_bits(u)
#define ATTN_DECODE_SMEM(name) std::uint8_t* name = ::attn_emu::block().smem.data()

namespace attn::cuda::detail {

inline void cp_async16(void* dst, const void* src, bool valid) { attn_emu::cp_async(dst, src, 16, valid); }
inline void cp_async8(void* dst, const void* src, bool valid) { attn_emu::cp_async(dst, src, 8, valid); }
inline void cp_async4(void* dst, const void* src, bool valid) { attn_emu::cp_async(dst, src, 4, valid); }
inline void cp_async_commit() { attn_emu::commit(); }
inline void cp_async_wait(int n) { attn_emu::wait(n); }
inline void ldmatrix_x4(std::uint32_t (&r)[4], const void* p) { attn_emu::ldmatrix(r, p, false); }
inline void ldmatrix_x4_trans(std::uint32_t (&r)[4], const void* p) { attn_emu::ldmatrix(r, p, true); }
template <bool F16>
inline void mma16816(float (&d)[4], const std::uint32_t (&a)[4], std::uint32_t b0, std::uint32_t b1) {
    attn_emu::mma(d, a, b0, b1, F16);
}
inline float exp2_fast(float x) { return std::exp2(x); }

} // namespace attn::cuda::detail
