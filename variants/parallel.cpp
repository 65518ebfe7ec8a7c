// parallel: the `simd` kernels spread over OpenMP threads. The core hands out
// (batch, head, query tile) work items dynamically, heaviest first (a causal mask makes late
// tiles heavier), with the query tiles shrunk until there are 4 items per thread, so B H = 1
// fills both cores; a decode step splits the keys instead (kernels:decode); projections split
// rows of the output into one band per thread. Every item is computed exactly as on one
// thread, so the result is the same bytes for any thread count.
// Measured (core, H=8, d_head=64, 2 threads): 13.4 / 52.9 / 211.1 ms at N = 1024 / 2048 / 4096,
// 69-70% of the 232 GFLOP/s 2-thread peak; layer d_model=512 N=2048: 75.1 ms, 74% of peak.
// One head (d_head 64, N=1024, B=1): 2 threads 1.79x its 1-thread time (384-row tiles: 1.66x);
// B H = 2: 1.77x (1.43x).
// bf16 and f16: simd's path (see variants/simd.cpp), on every thread.
module;
#include <cstddef>
module attn.variants;
import attn.kernels;

namespace attn::variants {

variant make_parallel() {
    return kernels::tiled_variant("parallel", "simd kernels over OpenMP threads (batch x heads x query tiles)", true);
}

} // namespace attn::variants
