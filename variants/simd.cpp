// simd: the blocked algorithm with explicit xsimd micro-kernels (attn.kernels). Q K^T and P V are
// one register-blocked GEMM on packed panels (mr x 2 registers of accumulators), the softmax works
// in base 2 with the kernels' own vector exp2 (isa::exp2_nonpos; vreduceps and vscalefps on
// AVX-512), one pass over each row of a key tile (kernels::detail::softmax_row_one_pass), and the
// projections use the same GEMM. Tails (d_head or tile sizes that are not a multiple of the vector
// width) are zero-padded in the packed panels, so no scalar loop is left on the hot path.
// Single-threaded; `parallel` spreads it. Tiles of 64 x mr query rows x 8 panels of keys: 384 x 128
// on AVX2, 512 x 256 on AVX-512; 384 rows under a causal mask (96 x 128 left packing and softmax
// amortised over fewer rows; kernels::resolve_tiles says why each). Measured on a 2-vCPU Zen 3 VM
// (core, H 8, 1 thread, best of 3 x 5 repetitions, % of the measured FMA peak): d_head 64 at N 256
// / 1024 74 / 75 %, d_head 128 78-80 % (xsimd's exp before: 51-67 / 60-69 %, noisy neighbours).
// bf16 and f16: Q, K, V, W and x widened to fp32 while packing (bf16 by a 16-bit shift, f16 by
// F16C), the fp32 micro-kernel and softmax unchanged, P kept in fp32, outputs rounded to nearest
// even as stored -- except the bf16 core where the CPU has AMX-BF16 or AVX512_BF16: its two
// products on those (attn.kernels:bf16dot, P rounded to bf16; attn::kernels::isa::bf16_path says
// which runs).
module;
#include <cstddef>
module attn.variants;
import attn.kernels;

namespace attn::variants {

variant make_simd() {
    return kernels::tiled_variant("simd", "blocked + xsimd packed-GEMM micro-kernels and vector exp", false);
}

} // namespace attn::variants
