// simd: the blocked algorithm with explicit xsimd micro-kernels (attn.kernels). Q K^T and P V
// are one register-blocked GEMM on packed panels (mr x 2 registers of accumulators), the
// softmax uses xsimd's vector exp, and the projections use the same GEMM. Tails (d_head or
// tile sizes that are not a multiple of the vector width) are zero-padded in the packed
// panels, so no scalar loop is left on the hot path. Single-threaded; `parallel` spreads it.
module;
#include <cstddef>
module attn.variants;
import attn.kernels;

namespace attn::variants {

variant make_simd() {
    return kernels::tiled_variant("simd", "blocked + xsimd packed-GEMM micro-kernels and vector exp", false);
}

} // namespace attn::variants
