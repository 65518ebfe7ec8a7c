// The sm_90a PTX of cuda-hopper apart from the wgmma products themselves (hopper_wgmma.cuh), each
// written from the PTX ISA: mbarriers (init, arrive, arrive with expected transaction bytes,
// try_wait on a phase parity), the TMA tensor copy that completes on an mbarrier, the fences
// between the generic and the async proxy, named barriers, wgmma's fence / commit / wait, and
// setmaxnreg. Only compiled into sm_90a code (hopper.cu guards every use).
#pragma once

#include <cstdint>

namespace attn::cuda::detail::sm90 {

__device__ __forceinline__ std::uint32_t smem_u32(const void* p) {
    return static_cast<std::uint32_t>(__cvta_generic_to_shared(p));
}

// ---- mbarriers (shared::cta, 64-bit) ----
__device__ __forceinline__ void mbar_init(std::uint32_t bar, std::uint32_t count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}
/// Makes the initialised barriers visible to the other threads and to the async proxy (TMA).
__device__ __forceinline__ void mbar_init_fence() {
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}
__device__ __forceinline__ void mbar_arrive(std::uint32_t bar) {
    asm volatile("{\n .reg .b64 st;\n mbarrier.arrive.shared::cta.b64 st, [%0];\n}\n" ::"r"(bar) : "memory");
}
/// This thread's arrival, announcing `bytes` of transactions (the TMA copies) to complete the phase.
__device__ __forceinline__ void mbar_arrive_expect_tx(std::uint32_t bar, std::uint32_t bytes) {
    asm volatile("{\n .reg .b64 st;\n mbarrier.arrive.expect_tx.shared::cta.b64 st, [%0], %1;\n}\n" ::"r"(bar),
                 "r"(bytes)
                 : "memory");
}
/// Cycles after which a wait is a hang, not a wait (2^34: about 9 s at 1.98 GHz; a whole kernel at
/// N 16k takes tens of ms): the kernel traps, so the launch fails with an error instead of hanging.
#define ATTN_HANG_CYCLES "17179869184"
/// Returns once the phase of parity `parity` has completed (a fresh barrier: parity 1 at once);
/// traps after ATTN_HANG_CYCLES. One asm block, so the loop costs the caller no live register.
__device__ __forceinline__ void mbar_wait(std::uint32_t bar, int parity) {
    asm volatile("{\n"
                 " .reg .pred p;\n"
                 " .reg .u64 t0, t1;\n"
                 " mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n"
                 " @p bra DONE;\n"
                 " mov.u64 t0, %%clock64;\n"
                 "WAIT:\n"
                 " mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n"
                 " @p bra DONE;\n"
                 " mov.u64 t1, %%clock64;\n"
                 " sub.u64 t1, t1, t0;\n"
                 " setp.lt.u64 p, t1, " ATTN_HANG_CYCLES ";\n"
                 " @p bra WAIT;\n"
                 " trap;\n"
                 "DONE:\n"
                 "}\n" ::"r"(bar),
                 "r"(parity)
                 : "memory");
}

// ---- TMA ----
__device__ __forceinline__ void tma_prefetch(const void* tmap) {
    asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<std::uint64_t>(tmap)) : "memory");
}
/// One box of a 4-D tensor map into shared memory at dst, completing `bar`'s transaction bytes.
__device__ __forceinline__ void tma_load_4d(std::uint32_t dst, const void* tmap, std::uint32_t bar, int c0, int c1,
                                            int c2, int c3) {
    asm volatile("cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%3, %4, %5, %6}], [%2];\n" ::"r"(dst),
                 "l"(reinterpret_cast<std::uint64_t>(tmap)), "r"(bar), "r"(c0), "r"(c1), "r"(c2), "r"(c3)
                 : "memory");
}
/// Generic-proxy writes to shared memory (zeros) made visible to the async proxy (wgmma, TMA).
__device__ __forceinline__ void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }

// ---- named barriers (id 0 is __syncthreads) ----
__device__ __forceinline__ void bar_sync(int id, int count) {
    asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(count) : "memory");
}
__device__ __forceinline__ void bar_arrive(int id, int count) {
    asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(count) : "memory");
}

// ---- wgmma bookkeeping ----
/// Orders this thread's earlier register accesses before the next wgmma that reads or writes them.
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wgmma_wait() {
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
/// Tells the compiler a register may have changed here: keeps reads of an accumulator after the
/// wgmma.wait that completes it (the asm that wrote it returned before the hardware did).
__device__ __forceinline__ void reg_fence(float& x) { asm volatile("" : "+f"(x)::"memory"); }
__device__ __forceinline__ void reg_fence(std::uint32_t& x) { asm volatile("" : "+r"(x)::"memory"); }

// ---- register reconfiguration (warpgroup-wide) ----
template <int N>
__device__ __forceinline__ void setmaxnreg_dec() {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(N));
}
template <int N>
__device__ __forceinline__ void setmaxnreg_inc() {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(N));
}

} // namespace attn::cuda::detail::sm90
