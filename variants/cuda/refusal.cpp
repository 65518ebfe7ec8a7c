// The host logic of the CUDA backend that needs neither CUDA nor a GPU, compiled in both builds
// (with CUDA, and absent.cpp's): names, default shapes, which kernel serves which case, and the
// tile candidates of the tensor-core prefill kernels. One exception: cuda-hopper's line asks
// query() (once) whether a present device is an sm_90 one; without a device it answers as if it were.
#include <cmath>
#include <string>
#include <vector>
#include "api.hpp"
#include "prefill_plan.hpp"

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
    case kernel::hopper:
        return "cuda-hopper";
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
    if (s.window > 0 && !s.causal)
        return "window=" + str(s.window) + " needs the causal mask (a sliding window looks back from each query)";
    // the kernels index rows and grid dimensions in 32 bits: B and H go to grid.z and grid.y
    const std::size_t grid_limit = 65535, row_limit = std::size_t(1) << 31;
    if (s.batch > grid_limit) return "batch " + str(s.batch) + " exceeds the grid's 65535";
    if (s.heads > grid_limit) return "heads " + str(s.heads) + " exceeds the grid's 65535";
    if (s.n_q >= row_limit || s.n_kv >= row_limit) return "n_q and n_kv must be below 2^31";
    return "";
}

/// cuda-hopper on a present device that is not sm_90: one line; "" without a device (the case's
/// constructor then says there is none) or on an H100 / H200.
std::string hopper_device_refusal() {
    static const std::string why = [] {
        const device_info d = query();
        if (!d.present || (d.cc_major == 9 && d.cc_minor == 0)) return std::string();
        return "cuda-hopper runs on sm_90 (H100, H200; wgmma, TMA), not on " + d.name + " (compute capability " +
               std::to_string(d.cc_major) + "." + std::to_string(d.cc_minor) + ")";
    }();
    return why;
}

// cuda-flash (sm_80 mma.sync) and cuda-hopper (sm_90a wgmma): bf16/f16, the instantiated widths
// (prefill_plan.hpp), a positive scale (the row max is taken over the raw scores).
std::string tensor_core_refusal(kernel k, const shape& s, storage st) {
    const std::string kn = name(k);
    if (st != storage::bf16 && st != storage::f16) return kn + " stores bf16 or f16, not " + name(st);
    if (!prefill::widths_for(s.d_qk, s.d_v).ok())
        return kn + " serves d_qk and d_v multiples of 8 up to 64/64, 128/128 or 192/128 (zero-padded), not d_qk " +
               str(s.d_qk) + ", d_v " + str(s.d_v);
    if (!(s.scale > 0)) return kn + " serves a positive scale, not " + std::to_string(s.scale);
    if (k == kernel::hopper) return hopper_device_refusal();
    return "";
}

} // namespace

std::vector<std::string> tile_candidates(kernel k, const shape& in) {
    const shape s = resolved(in);
    std::vector<std::string> names;
    const prefill::widths w = prefill::widths_for(s.d_qk, s.d_v);
    if (k == kernel::flash)
        prefill::for_each_flash_tile(w, [&](int, const prefill::flash_tile& t) { names.push_back(t.name()); });
    if (k == kernel::hopper)
        prefill::for_each_hopper_tile(w, [&](int, const prefill::hopper_tile& t) { names.push_back(t.name()); });
    return names;
}

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
    case kernel::hopper:
        return tensor_core_refusal(k, s, st);
    case kernel::decode:
        if (s.window > 0) return "window > 0 is not served by cuda-decode yet";
        if (s.n_q != 1) return kn + " serves one query row (n_q = 1), not " + str(s.n_q);
        if (s.d_qk != s.d_v) return "d_qk != d_v (MLA) is not served on the GPU yet";
        if (s.d_qk % 8 != 0 || s.d_qk > 256) return kn + " serves d_head a multiple of 8 up to 256, not " + str(s.d_qk);
        return "";
    }
    return "unknown kernel";
}

} // namespace attn::cuda
