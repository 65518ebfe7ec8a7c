// naive: the reference loops of attn.reference, in float (and double). Materialises each
// head's full n_q x n_kv score matrix, exactly as the formulas read; the baseline every
// other variant improves on, and in double the oracle they are all checked against.
// bf16 and f16 by conversion (attn::by_conversion): operands widened to fp32 copies, the float
// loops, the result rounded to nearest even; the projected Q/K/V of a layer are stored rounded.
// Measured (core, H=8, d_head=64, N=1024, 1 thread): 1752 ms, 1.2 GFLOP/s.
module;
#include <cstddef>
module attn.variants;
import attn.reference;

namespace attn::variants {

variant make_naive() {
    variant v;
    v.name = "naive";
    v.description = "plain loops from the formulas; full score matrix per head";
    v.tags = {"loops"};
    v.serves.windows = true;
    v.f32 = reference::kernels<float>();
    v.f64 = reference::kernels<double>();
    add_half_by_conversion(v);
    v.scratch_bytes = [](const problem& p, const run_options&) {
        return reference::core_scratch_bytes(p, sizeof(float));
    };
    return v;
}

} // namespace attn::variants
