// attn.kernels:variant -- a variant on these kernels (`simd`, `parallel`): a problem with one
// query row (a decode step) goes to decode_core, which streams K and V once; any other to
// tiled_core. In bf16 and f16 the tiled core and the projections widen operands while packing
// (fp32 arithmetic, storage traffic halved), except the bf16 core on a CPU with AMX or AVX512_BF16,
// which forms Q K^T and P V on its bf16 products (:bf16dot; its P rounded to bf16 is declared in
// variant::roundings so the checker charges it); a decode step in bf16/f16 runs the fp32 decode core on
// fp32 copies (by_conversion). Over a key/value cache narrower than fp32 (bf16, f16, int8) the
// decode core reads it in its own type (variant::kv).
module;
#include <algorithm>
#include <cstddef>
#include <string>
#include <type_traits>
#include <utility>
export module attn.kernels:variant;
import :isa;
import :gemm;
import :tiled;
import :bf16dot;
import :decode;
import attn.core;

export namespace attn::kernels {

/// A one-row problem's operands over only the keys its row sees (p.seen_keys()'s): the last
/// visible(0) rows of K and V under a sliding window, every row otherwise. IO: core_io or kv_core_io.
template <class IO>
IO seen_rows(const problem& p, const IO& io) {
    const std::size_t first = p.keys_begin(0), n = p.visible(0);
    return {io.q, io.k.rows_from(first, n), io.v.rows_from(first, n), io.out};
}

/// The attention core: decode_core for n_q == 1 (over the keys the row sees: under a sliding
/// window the last visible(0) of them), tiled_core otherwise.
inline void attention_core(const problem& p, const core_io<float>& io, tiles t, int threads) {
    if (p.n_q == 1) return decode_core(p.seen_keys(), seen_rows(p, io), threads);
    tiled_core(p, io, t, threads);
}

/// Extra memory of attention_core.
inline std::size_t attention_scratch_bytes(const problem& p, tiles t, int threads) {
    if (p.n_q == 1) return decode_scratch_bytes(p.seen_keys(), threads);
    return tiled_scratch_bytes(p, t, threads);
}

/// The engine of the bf16 core for problem p: the CPU's bf16 products (isa::bf16_engine_here) for a
/// tiled problem, convert for a one-row problem (a decode step: the fp32 decode core on copies).
/// The one place the kernel, its declared roundings and its scratch agree on.
inline isa::bf16_engine bf16_core_engine(const problem& p) {
    return p.n_q == 1 ? isa::bf16_engine::convert : isa::bf16_engine_here();
}

/// The bf16 products' core's tiles: tiles::q x 256 unless asked (twice as tall under a window). Key
/// tiles of 256 halve the per-row work of a tile (weights_row's maximum, sums and fold) against 128:
/// on vdpbf16ps (Zen 5, d_head 64 and 128, N 1024 and 2048, 1 and 2 threads) 0.94-0.99x the time of
/// 128, with 512 level with 256; on the Xeon's AMX 384 x 256 was 6-9 % ahead of 128 at d_head 64
/// and mixed at 128.
inline tiles bf16dot_tiles(const problem& p, const run_options& o) { return resolve_tiles(p, o, tiles{.kv = 256}); }

/// The bf16 or f16 kernels of a variant on these kernels; `f32` serves the decode step.
template <class T, class Threads>
kernel_set<T> half_kernels(const kernel_set<float>& f32, Threads threads) {
    kernel_set<T> k;
    k.core = [threads, by_conv = by_conversion<T>(f32)](const problem& given, const core_io<T>& io,
                                                        const run_options& o) {
        const problem p = given.effective();
        if (p.n_q == 1) return by_conv.core(p, io, o);
        if constexpr (std::is_same_v<T, bf16>) {
            switch (bf16_core_engine(p)) {
            case isa::bf16_engine::amx:
                return bf16dot::core_amx(p, io, bf16dot_tiles(p, o), threads(o));
            case isa::bf16_engine::dot:
                return bf16dot::core_dot(p, io, bf16dot_tiles(p, o), threads(o));
            case isa::bf16_engine::convert:
                break;
            }
        }
        tiled_core(p, io, resolve_tiles(p, o), threads(o));
    };
    k.linear = [threads](const linear_io<T>& io, const run_options& o) {
        linear(io.x, io.w, io.b, io.y, io.rows, io.in, io.out, threads(o));
    };
    return k;
}

/// A variant on these kernels: threaded ones use run_options::threads, the others one thread.
/// Defined in variant.cpp, an implementation unit: its lambdas instantiate every kernel in every
/// precision (about 90 s of -O3), compiled there once and off the path of every importer's build.
variant tiled_variant(std::string name, std::string description, bool threaded);

} // namespace attn::kernels
