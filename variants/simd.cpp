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
    variant v;
    v.name = "simd";
    v.description = "blocked + xsimd packed-GEMM micro-kernels and vector exp";
    v.f32.core = [](const problem& p, const core_io<float>& io, const run_options& o) {
        kernels::tiled_core(p, io, kernels::resolve_tiles(o), 1);
    };
    v.f32.linear = [](const linear_io<float>& io, const run_options&) {
        kernels::linear(io.x, io.w, io.b, io.y, io.rows, io.in, io.out, 1);
    };
    v.scratch_bytes = [](const problem& p, const run_options& o) {
        return kernels::tiled_scratch_bytes(p, kernels::resolve_tiles(o), 1);
    };
    return v;
}

} // namespace attn::variants
