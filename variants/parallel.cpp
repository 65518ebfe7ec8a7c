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
    variant v;
    v.name = "parallel";
    v.description = "simd kernels over OpenMP threads (batch x heads x query tiles)";
    v.threaded = true;
    v.f32.core = [](const problem& p, const core_io<float>& io, const run_options& o) {
        kernels::tiled_core(p, io, kernels::resolve_tiles(o), o.threads);
    };
    v.f32.linear = [](const linear_io<float>& io, const run_options& o) {
        kernels::linear(io.x, io.w, io.b, io.y, io.rows, io.in, io.out, o.threads);
    };
    v.scratch_bytes = [](const problem& p, const run_options& o) {
        return kernels::tiled_scratch_bytes(p, kernels::resolve_tiles(o), o.threads);
    };
    return v;
}

} // namespace attn::variants
