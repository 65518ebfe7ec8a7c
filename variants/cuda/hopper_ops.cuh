// cuda-hopper's device operations: what hopper_pipeline.hpp's two programs call in the kernel.
//  - producer_ops: one thread; each load announces its transaction bytes on the slot's full
//    mbarrier (arrive.expect_tx) and issues one TMA copy per 64-column box.
//  - consumer_ops<T, C>: one warpgroup (64 query rows); S (BKV / 2 fp32), P (BKV / 4 bf16x2 or
//    f16x2) and O (DV / 2 fp32) in registers; the online softmax of flash.cu on wgmma's
//    accumulator map (two rows a thread, the row's other elements in the 3 neighbouring lanes).
// Only compiled into sm_90a code (hopper.cu includes it under __CUDA_ARCH_FEAT_SM90_ALL).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "flash_ptx.cuh"
#include "hopper_layout.hpp"
#include "hopper_pipeline.hpp"
#include "hopper_ptx.cuh"
#include "hopper_wgmma.cuh"

namespace attn::cuda::detail {

using hopper_params = hopper::kernel_params;

namespace sm90 {

inline constexpr int turn_barrier0 = 1; ///< named barriers 1, 2: consumer 0's and consumer 1's turn
inline constexpr int consumer_threads = hopper::consumers * 128;

template <class C>
struct producer_ops {
    std::uint32_t base;
    const void *tq, *tk, *tv;
    const hopper_params* p;

    long long w_ = -1; // the work tile whose indices follow (decoded once per tile)
    int q0_ = 0, h_ = 0, g_ = 0, b_ = 0;

    __device__ std::uint32_t bar(int i) const { return base + C::bar_off + 8 * i; }
    __device__ void decode(long long w) {
        if (w == w_) return;
        const prefill::schedule::item it = p->plan.sched.at(w);
        w_ = w;
        q0_ = it.q_tile * hopper::block_q;
        h_ = int(it.hb % p->heads);
        b_ = int(it.hb / p->heads);
        g_ = int((long long)h_ * p->kv_heads / p->heads);
    }

    __device__ void wait_q_empty(int parity) { mbar_wait(bar(hopper::q_empty), parity); }
    __device__ void wait_k_empty(int slot, int parity) { mbar_wait(bar(hopper::k_empty<C::stages>(slot)), parity); }
    __device__ void wait_v_empty(int slot, int parity) { mbar_wait(bar(hopper::v_empty<C::stages>(slot)), parity); }

    __device__ void load_q(long long w) {
        decode(w);
        const int n = hopper::boxes_for(p->d_qk);
        const std::uint32_t full = bar(hopper::q_full);
        mbar_arrive_expect_tx(full, std::uint32_t(n * C::q_box_bytes));
        for (int c = 0; c < n; ++c) {
            const hopper::coords x = hopper::box_coords(c, h_, q0_, b_);
            tma_load_4d(base + C::q_off + c * C::q_box_bytes, tq, full, x.c[0], x.c[1], x.c[2], x.c[3]);
        }
    }
    __device__ void load_k(long long w, int t, int slot) {
        decode(w);
        const int n = hopper::boxes_for(p->d_qk);
        const std::uint32_t full = bar(hopper::k_full(slot));
        mbar_arrive_expect_tx(full, std::uint32_t(n * C::kv_box_bytes));
        for (int c = 0; c < n; ++c) {
            const hopper::coords x = hopper::box_coords(c, g_, t * C::block_kv, b_);
            tma_load_4d(base + C::k_off + slot * C::k_stage_bytes + c * C::kv_box_bytes, tk, full, x.c[0], x.c[1],
                        x.c[2], x.c[3]);
        }
    }
    __device__ void load_v(long long w, int t, int slot) {
        decode(w);
        const int n = hopper::boxes_for(p->d_v);
        const std::uint32_t full = bar(hopper::v_full<C::stages>(slot));
        mbar_arrive_expect_tx(full, std::uint32_t(n * C::kv_box_bytes));
        for (int c = 0; c < n; ++c) {
            const hopper::coords x = hopper::box_coords(c, g_, t * C::block_kv, b_);
            tma_load_4d(base + C::v_off + slot * C::v_stage_bytes + c * C::kv_box_bytes, tv, full, x.c[0], x.c[1],
                        x.c[2], x.c[3]);
        }
    }
};

template <class T, class C>
struct consumer_ops {
    static constexpr int SR = C::s_regs, OR = C::o_regs, PR = C::p_regs;
    std::uint32_t base;
    const hopper_params* p;
    int wg, warp, lane; // consumer warpgroup (0, 1), warp in it (0-3), lane
    float s[SR], o[OR], m[2], l[2], corr[2];
    std::uint32_t pr[PR];
    int q0, h, b;

    __device__ std::uint32_t bar(int i) const { return base + C::bar_off + 8 * i; }
    __device__ int row_of(int i) const { return q0 + hopper::wg_rows * wg + hopper::acc_row(warp, lane, i); }

    // ping-pong between the two consumers (hopper_pipeline.hpp)
    __device__ void turn_start() {
        if (wg == 1) bar_arrive(turn_barrier0, consumer_threads);
    }
    __device__ void turn_sync() { bar_sync(turn_barrier0 + wg, consumer_threads); }
    __device__ void turn_arrive() { bar_arrive(turn_barrier0 + (wg ^ 1), consumer_threads); }
    __device__ void turn_finish() {
        if (wg == 0) bar_sync(turn_barrier0, consumer_threads);
    }

    __device__ void wait_q_full(int parity) { mbar_wait(bar(hopper::q_full), parity); }
    __device__ void wait_k_full(int slot, int parity) { mbar_wait(bar(hopper::k_full(slot)), parity); }
    __device__ void wait_v_full(int slot, int parity) { mbar_wait(bar(hopper::v_full<C::stages>(slot)), parity); }
    __device__ void arrive(int i) { // lane 0 of each consumer warp, after the warp's wgmma wait
        __syncwarp();
        if (lane == 0) mbar_arrive(bar(i));
    }
    __device__ void release_q() { arrive(hopper::q_empty); }
    __device__ void release_k(int slot) { arrive(hopper::k_empty<C::stages>(slot)); }
    __device__ void release_v(int slot) { arrive(hopper::v_empty<C::stages>(slot)); }

    __device__ void begin_tile(long long w) {
        const prefill::schedule::item it = p->plan.sched.at(w);
        q0 = it.q_tile * hopper::block_q;
        h = int(it.hb % p->heads);
        b = int(it.hb / p->heads);
#pragma unroll
        for (int i = 0; i < OR; ++i) o[i] = 0.0f;
        m[0] = m[1] = -INFINITY;
        l[0] = l[1] = 0.0f;
    }

    /// S = Q K^T over DQK / 16 k-steps, one asynchronous group.
    __device__ void issue_qk(int slot) {
        wgmma_fence(); // P, O and S registers were last touched by this thread's own code
#pragma unroll
        for (int ks = 0; ks < C::dqk / 16; ++ks)
            ss<T, C::block_kv>::run(s, hopper::encode(hopper::q_desc<C>(base, wg, ks)),
                                    hopper::encode(hopper::k_desc<C>(base, slot, ks)), ks > 0 ? 1 : 0);
        wgmma_commit();
    }
    /// O += P V over BKV / 16 k-steps (P from registers), one asynchronous group.
    __device__ void issue_pv(int slot) {
        wgmma_fence(); // P and O registers: written by rescale_and_keep_p
#pragma unroll
        for (int kk = 0; kk < C::block_kv / 16; ++kk) {
            const std::uint32_t a[4] = {pr[4 * kk], pr[4 * kk + 1], pr[4 * kk + 2], pr[4 * kk + 3]};
            rs<T, C::dv>::run(o, a, hopper::encode(hopper::v_desc<C>(base, slot, kk)), 1);
        }
        wgmma_commit();
    }
    template <int N>
    __device__ void wait_group() {
        wgmma_wait<N>();
#pragma unroll
        for (int i = 0; i < SR; ++i) reg_fence(s[i]);
        if constexpr (N == 0) {
#pragma unroll
            for (int i = 0; i < OR; ++i) reg_fence(o[i]);
#pragma unroll
            for (int i = 0; i < PR; ++i) reg_fence(pr[i]);
        }
    }
    __device__ void wait_products(int pending) {
        if (pending == 0)
            wait_group<0>();
        else
            wait_group<1>();
    }

    /// Masks S (key tile t of work w) where needed, then the online softmax: S becomes the weights
    /// 2^(s c - m c), corr the factor the running output and sum take.
    __device__ void softmax(long long, int t) {
        const int j0 = t * C::block_kv;
        const prefill::mask& mk = p->plan.mask;
        if (prefill::tile_needs_mask(mk, q0 + hopper::wg_rows * wg, hopper::wg_rows, j0, C::block_kv)) {
#pragma unroll
            for (int i = 0; i < SR; ++i)
                if (!prefill::visible(mk, row_of(i), j0 + hopper::acc_col(lane, i))) s[i] = -INFINITY;
        }
        const float c = p->scale_log2;
#pragma unroll
        for (int r = 0; r < 2; ++r) { // elements 4k + 2r + {0, 1} are row r's
            float mx = m[r];
#pragma unroll
            for (int k = 0; k < SR / 4; ++k) mx = fmaxf(mx, fmaxf(s[4 * k + 2 * r], s[4 * k + 2 * r + 1]));
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
            const float m_use = mx == -INFINITY ? 0.0f : mx; // no key seen yet: weights 0, no NaN
            corr[r] = exp2_approx((m[r] - m_use) * c);
            const float shift = -m_use * c;
            m[r] = mx;
            float sum = 0.0f;
#pragma unroll
            for (int k = 0; k < SR / 4; ++k) {
                s[4 * k + 2 * r] = exp2_approx(fmaf(s[4 * k + 2 * r], c, shift));
                s[4 * k + 2 * r + 1] = exp2_approx(fmaf(s[4 * k + 2 * r + 1], c, shift));
                sum += s[4 * k + 2 * r] + s[4 * k + 2 * r + 1];
            }
            l[r] = l[r] * corr[r] + sum;
        }
    }
    /// After P V completed: O *= corr per row, and P = S rounded to T (the next P V's A operand).
    __device__ void rescale_and_keep_p() {
#pragma unroll
        for (int i = 0; i < OR; ++i) o[i] *= corr[(i / 2) % 2];
#pragma unroll
        for (int j = 0; j < PR; ++j) pr[j] = pack2<T>(s[hopper::p_elem(j)], s[hopper::p_elem(j) + 1]);
    }

    __device__ T* out_row(int row) const {
        return static_cast<T*>(p->out) + (((long long)b * p->n_q + row) * p->heads + h) * p->d_v;
    }
    __device__ void store(long long) {
        float inv[2];
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            float sum = l[r];
            sum += __shfl_xor_sync(0xffffffffu, sum, 1);
            sum += __shfl_xor_sync(0xffffffffu, sum, 2);
            inv[r] = sum > 0.0f ? 1.0f / sum : 0.0f; // a row that sees no key: zeros
        }
#pragma unroll
        for (int i = 0; i < OR; i += 2) {
            const int row = row_of(i), col = hopper::acc_col(lane, i);
            if (row >= p->n_q || col >= p->d_v) continue; // d_v a multiple of 8: the pair is whole
            const std::uint32_t pair = pack2<T>(o[i] * inv[(i / 2) % 2], o[i + 1] * inv[(i / 2) % 2]);
            std::memcpy(out_row(row) + col, &pair, sizeof pair);
        }
    }
    __device__ void store_zeros(long long w) {
        begin_tile(w);
        store(w);
    }
};

} // namespace sm90
} // namespace attn::cuda::detail
