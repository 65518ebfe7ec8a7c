// attn.kernels' tiled_variant (declared in variant.cppm, :variant): every kernel in every
// precision is instantiated here, once, in an implementation unit that no other unit waits for
// (an interface's object and its BMI are one compile: a 90 s instantiation there would hold up
// every importer of attn.kernels).
module;
#include <algorithm>
#include <cstddef>
#include <string>
#include <utility>
module attn.kernels;
import attn.core;

namespace attn::kernels {

variant tiled_variant(std::string name, std::string description, bool threaded) {
    variant v;
    v.name = std::move(name);
    v.description = std::move(description);
    v.threaded = threaded;
    v.serves.windows = true;
    auto threads = [threaded](const run_options& o) { return threaded ? o.threads : 1; };
    // the f32 core's tiles: the asked ones, else the defaults balanced over the threads (the core
    // and its scratch_bytes read the same)
    auto core_tiles = [threads](const problem& p, const run_options& o) {
        return o.tile_q ? resolve_tiles(p, o) : balanced_tiles(p, resolve_tiles(p, o), threads(o));
    };
    v.f32.core = [threads, core_tiles](const problem& given, const core_io<float>& io, const run_options& o) {
        const problem p = given.effective();
        attention_core(p, io, core_tiles(p, o), threads(o));
    };
    v.f32.linear = [threads](const linear_io<float>& io, const run_options& o) {
        linear(io.x, io.w, io.b, io.y, io.rows, io.in, io.out, threads(o));
    };
    v.bf16 = half_kernels<bf16>(v.f32, threads);
    v.f16 = half_kernels<f16>(v.f32, threads);
    v.bf16_path = isa::bf16_path();
    // the bf16 core on vdpbf16ps or AMX stores P in bf16 (a decode step and a layer's bound are as before)
    v.roundings = [](const problem& p, attn::mode m, dtype t) {
        const bool products =
            m != attn::mode::decode && t == dtype::bf16 && bf16_core_engine(p) != isa::bf16_engine::convert;
        // a decode step over an int8 cache on AVX512-VNNI: queries and weights in fixed point
        half_roundings r =
            m == attn::mode::decode && t == dtype::int8 ? decode_int8_fixed_point(p.seen_keys()) : half_roundings{};
        r.weights = products;
        // a decode step over a bf16 cache on AVX512_BF16 (1 < C < lanes): the scaled queries in
        // bf16, and the weights where P V takes bf16 products too (d_v a multiple of 64)
        if (m == attn::mode::decode && t == dtype::bf16 && decode_bf16_dot_scores(p.seen_keys())) {
            r.queries = true;
            r.weights = decode_bf16_dot_values(p.seen_keys());
            r.format = dtype::bf16;
        }
        return r;
    };
    v.f16_path = isa::f16_path();
    auto kv = [threads]<class S>(attn::kv_kernels::core_fn<S>& slot) {
        slot = [threads](const problem& p, const kv_core_io<S>& io, const run_options& o) {
            decode_core_kv<S>(p.seen_keys(), seen_rows(p, io), threads(o));
        };
    };
    kv(v.kv.bf16);
    kv(v.kv.f16);
    kv(v.kv.int8);
    v.scratch_bytes = [threads, core_tiles](const problem& given, const run_options& o) {
        const problem p = given.effective();
        const std::size_t f32 = attention_scratch_bytes(p, core_tiles(p, o), threads(o));
        // (the precision is not asked: where the bf16 core runs on AMX or vdpbf16ps, the larger of the two)
        if (bf16_core_engine(p) == isa::bf16_engine::convert) return f32;
        return std::max(f32, bf16dot::scratch_bytes(p, bf16dot_tiles(p, o), threads(o)));
    };
    return v;
}

} // namespace attn::kernels
