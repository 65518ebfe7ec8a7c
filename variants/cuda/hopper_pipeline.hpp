// attn::cuda::hopper -- cuda-hopper's synchronisation, written once as two programs over an `Ops`
// type: the kernel (hopper.cu) runs them with the PTX operations (mbarriers, TMA, wgmma, named
// barriers); the host tests run the same programs with a model of those operations, in threads,
// over many shapes, to show that no slot is overwritten before both consumers released it, that
// every tile is consumed in order, and that nothing deadlocks (host and device, plain C++17).
//
// Ring: `stages` slots of K and of V, each with a full and an empty mbarrier; Q has one slot
// (q_full, q_empty). A slot's uses alternate the parity of its barriers' phases: use u of a slot
// waits for full-phase parity (u % 2), and the producer, before refilling it for use u, waits for
// the empty barrier's phase of parity (u % 2) ^ 1, which a fresh barrier reports complete, so
// the first `stages` fills do not wait. Full barriers: one arrival (the producer's, with the
// transaction bytes of the copies); empty barriers: consumer_warps arrivals (lane 0 of each
// consumer warp, after its warpgroup's wgmma that read the slot has completed).
//
// Consumer iteration t (FA3's intra-warpgroup overlap): issue S_t = Q K_t^T and O += P_{t-1}
// V_{t-1}; wait for S_t alone (wgmma.wait_group 1) and release K_t; softmax of S_t while P V runs;
// wait for P V, release V_{t-1}, rescale O, P_t = S_t. Inter-warpgroup ping-pong: each consumer
// issues its products only in its turn (named barrier turn(wg) synced, turn(other) arrived after
// the issue), so one warpgroup's softmax runs under the other's products; consumer 1 starts by
// arriving on consumer 0's turn, and consumer 0 ends by syncing its turn once more, so every named
// barrier completes as often as it is used.
//
// Work: the persistent schedule (prefill::schedule), tiles w = cta, cta + ctas, ...; a tile
// whose rows see no key (causal with n_q > n_kv) is skipped by the producer and stored as zeros by
// the consumers.
#pragma once

#include "hopper_layout.hpp"
#include "prefill_tiles.hpp"

namespace attn::cuda::hopper {

/// A position in the ring: the slot and the parity of its current use.
struct ring {
    int slot = 0, phase = 0;
    ATTN_HD constexpr void advance(int stages) {
        if (++slot == stages) slot = 0, phase ^= 1;
    }
};

/// What both roles iterate over.
struct work {
    prefill::schedule sched;
    prefill::mask mask;
    int block_kv = 128, stages = 2;
    long long cta = 0, ctas = 1;
};

/// The kernel's arguments besides the three tensor maps (plain data, passed by value).
struct kernel_params {
    work plan; ///< schedule, mask, tile; cta and ctas set in the kernel
    int heads = 1, kv_heads = 1, n_q = 1, d_qk = 0, d_v = 0;
    float scale_log2 = 0; ///< scale x log2 e, > 0
    void* out = nullptr;  ///< [B, n_q, heads x d_v]
};

/// The tiles (key tiles [begin, end)) of work tile w.
ATTN_HD constexpr prefill::tile_range tiles_of(const work& p, long long w) {
    return prefill::kv_tiles(p.mask, p.sched.at(w).q_tile * block_q, block_q, p.block_kv);
}

#ifdef __CUDACC__
#pragma nv_exec_check_disable
#endif
/// The producer (one thread): Q once per tile, then K and V of every key tile through the ring.
template <class Ops>
ATTN_HD void producer_program(Ops& ops, const work& p) {
    ring kv;
    int q_phase = 0;
    for (long long w = p.cta; w < p.sched.size(); w += p.ctas) {
        const prefill::tile_range r = tiles_of(p, w);
        if (r.count() == 0) continue;
        ops.wait_q_empty(q_phase ^ 1);
        ops.load_q(w);
        for (int t = r.begin; t < r.end; ++t) {
            ops.wait_k_empty(kv.slot, kv.phase ^ 1);
            ops.load_k(w, t, kv.slot);
            ops.wait_v_empty(kv.slot, kv.phase ^ 1);
            ops.load_v(w, t, kv.slot);
            kv.advance(p.stages);
        }
        q_phase ^= 1;
    }
}

#ifdef __CUDACC__
#pragma nv_exec_check_disable
#endif
/// One consumer warpgroup (ops knows which): the products, the softmax and the stores of its rows.
template <class Ops>
ATTN_HD void consumer_program(Ops& ops, const work& p) {
    ring kv;
    int q_phase = 0;
    ops.turn_start(); // consumer 1: arrive on consumer 0's turn, so consumer 0 issues first
    for (long long w = p.cta; w < p.sched.size(); w += p.ctas) {
        const prefill::tile_range r = tiles_of(p, w);
        if (r.count() == 0) {
            ops.store_zeros(w);
            continue;
        }
        ops.wait_q_full(q_phase);
        ops.begin_tile(w);
        // key tile r.begin: S only
        ops.wait_k_full(kv.slot, kv.phase);
        ops.turn_sync();
        ops.issue_qk(kv.slot);
        ops.turn_arrive();
        ops.wait_products(0);
        ops.release_k(kv.slot);
        if (r.count() == 1) ops.release_q();
        ops.softmax(w, r.begin);
        ops.rescale_and_keep_p();
        ring prev = kv;
        kv.advance(p.stages);
        for (int t = r.begin + 1; t < r.end; ++t) {
            ops.wait_k_full(kv.slot, kv.phase);
            ops.turn_sync();
            ops.issue_qk(kv.slot);
            ops.wait_v_full(prev.slot, prev.phase);
            ops.issue_pv(prev.slot);
            ops.turn_arrive();
            ops.wait_products(1); // S_t done, P V may still run
            ops.release_k(kv.slot);
            if (t == r.end - 1) ops.release_q();
            ops.softmax(w, t);
            ops.wait_products(0);
            ops.release_v(prev.slot);
            ops.rescale_and_keep_p();
            prev = kv;
            kv.advance(p.stages);
        }
        ops.wait_v_full(prev.slot, prev.phase);
        ops.issue_pv(prev.slot);
        ops.wait_products(0);
        ops.release_v(prev.slot);
        ops.store(w);
        q_phase ^= 1;
    }
    ops.turn_finish(); // consumer 0: absorb consumer 1's last arrival
}

} // namespace attn::cuda::hopper
