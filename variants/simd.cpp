// simd: the blocked algorithm with explicit xsimd micro-kernels (attn.kernels). Q K^T and P V
// are one register-blocked GEMM on packed panels (mr x 2 registers of accumulators), the
// softmax uses xsimd's vector exp, and the projections use the same GEMM. Tails (d_head or
// tile sizes that are not a multiple of the vector width) are zero-padded in the packed
// panels, so no scalar loop is left on the hot path. Single-threaded; `parallel` spreads it.
// Measured (core, H=8, d_head=64, 1 thread): 26.5 / 105.6 / 425.9 ms at N = 1024 / 2048 / 4096,
// 69% of the 117 GFLOP/s FMA peak; 2.4x blas at N=2048. Tiles 384x128: 96x128 reached ~60-65%
// (packing and softmax are amortised over more query rows).
// bf16 and f16: Q, K, V, W and x widened to fp32 while packing (bf16 by a 16-bit shift, f16 by
// F16C), the fp32 micro-kernel and softmax unchanged, P kept in fp32, outputs rounded to nearest
// even as stored; no vdpbf16ps path (attn::kernels::isa::bf16_path says which runs).
module;
#include <cstddef>
module attn.variants;
import attn.kernels;

namespace attn::variants {

variant make_simd() {
    return kernels::tiled_variant("simd", "blocked + xsimd packed-GEMM micro-kernels and vector exp", false);
}

} // namespace attn::variants
