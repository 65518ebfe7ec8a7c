// parallel: the `simd` kernels spread over OpenMP threads. The core hands out
// (batch, head, query tile) work items dynamically, heaviest first (a causal mask makes late
// tiles heavier); projections split rows of the output into one band per thread. Every item
// is computed exactly as on one thread, so the result is the same bytes for any thread count.
module;
#include <cstddef>
module attn.variants;
import attn.kernels;

namespace attn::variants {

variant make_parallel() {
    return kernels::tiled_variant("parallel", "simd kernels over OpenMP threads (batch x heads x query tiles)", true);
}

} // namespace attn::variants
