// The host logic of the CUDA backend that needs neither CUDA nor a GPU, compiled in both builds
// (with CUDA, and absent.cpp's): names, default shapes, and which kernel serves which case.
#include <cmath>
#include <string>
#include "api.hpp"

namespace attn::cuda {

const char* name(kernel k) {
    switch (k) {
    case kernel::naive:
        return "cuda-naive";
    case kernel::tiled:
        return "cuda-tiled";
    case kernel::flash:
        return "cuda-flash";
    case kernel::decode:
        return "cuda-decode";
    }
    return "cuda-?";
}

const char* name(storage s) { return attn::types::traits(s).name.data(); } // names are literals

shape resolved(shape s) {
    if (s.d_v == 0) s.d_v = s.d_qk;
    if (s.scale == 0 && s.d_qk > 0) s.scale = 1.0 / std::sqrt(double(s.d_qk));
    return s;
}

namespace {

std::string str(std::size_t n) { return std::to_string(n); }

// What no kernel serves: an invalid shape, or a feature no GPU kernel has yet.
std::string common_refusal(const shape& s) {
    if (s.batch == 0) return "batch must be >= 1 (got 0)";
    if (s.heads == 0) return "heads must be >= 1 (got 0)";
    if (s.kv_heads == 0) return "kv_heads must be >= 1 (got 0)";
    if (s.n_q == 0) return "n_q must be >= 1 (got 0)";
    if (s.n_kv == 0) return "n_kv must be >= 1 (got 0)";
    if (s.d_qk == 0) return "d_qk must be >= 1 (got 0)";
    if (s.heads % s.kv_heads != 0) return "heads " + str(s.heads) + " is not divisible by kv_heads " + str(s.kv_heads);
    if (!std::isfinite(s.scale)) return "scale must be finite";
    if (s.window > 0) return "window > 0 is not served on the GPU yet";
    // the kernels index rows and grid dimensions in 32 bits: B and H go to grid.z and grid.y
    const std::size_t grid_limit = 65535, row_limit = std::size_t(1) << 31;
    if (s.batch > grid_limit) return "batch " + str(s.batch) + " exceeds the grid's 65535";
    if (s.heads > grid_limit) return "heads " + str(s.heads) + " exceeds the grid's 65535";
    if (s.n_q >= row_limit || s.n_kv >= row_limit) return "n_q and n_kv must be below 2^31";
    return "";
}

} // namespace

std::string refusal(kernel k, const shape& in, storage st) {
    const shape s = resolved(in);
    if (std::string why = common_refusal(s); !why.empty()) return why;
    const std::string kn = name(k);
    if (st == storage::f64) return kn + " does not store f64 (the GPU kernels store f32, bf16, f16 and int8 caches)";
    switch (k) {
    case kernel::naive:
    case kernel::tiled:
        if (st == storage::int8) return kn + " stores f32, bf16 or f16, not int8 (int8 is a decode cache type)";
        if (k == kernel::tiled && (s.d_qk > 256 || s.d_v > 256))
            return kn + " serves d_qk and d_v up to 256, not " + str(s.d_qk > 256 ? s.d_qk : s.d_v);
        return "";
    case kernel::flash:
        if (st != storage::bf16 && st != storage::f16) return kn + " stores bf16 or f16, not " + name(st);
        if (s.d_qk != s.d_v) return "d_qk != d_v (MLA) is not served on the GPU yet";
        if (s.d_qk != 64 && s.d_qk != 128) return kn + " serves d_head 64 and 128, not " + str(s.d_qk);
        return "";
    case kernel::decode:
        if (s.n_q != 1) return kn + " serves one query row (n_q = 1), not " + str(s.n_q);
        if (s.d_qk != s.d_v) return "d_qk != d_v (MLA) is not served on the GPU yet";
        if (s.d_qk % 8 != 0 || s.d_qk > 256) return kn + " serves d_head a multiple of 8 up to 256, not " + str(s.d_qk);
        return "";
    }
    return "unknown kernel";
}

} // namespace attn::cuda
