// The host logic of the CUDA backend that needs neither CUDA nor a GPU, compiled in both builds
// (with CUDA, and absent.cpp's): names, default shapes, which kernel serves which case, and the
// tile candidates of the tensor-core prefill kernels. One exception: cuda-hopper's line asks
// query() (once) whether a present device is an sm_90 one; without a device it answers as if it were.
#include <cmath>
#include <string>
#include <vector>
#include "api.hpp"
#include "plan.hpp"
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
    if (k == kernel::decode) return decode_refusal(in, st, decode_spec{});
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
        break; // decode_refusal, above
    }
    return "unknown kernel";
}

namespace {

bool power_of_two(std::size_t x) { return x && !(x & (x - 1)); }

/// The (d_k, d_v) pairs of MLA's absorbed form cuda-decode is compiled for: DeepSeek's 512 + 64
/// and a small odd pair (128 + 32) the tests use.
bool mla_widths(std::size_t dk, std::size_t dv) { return (dk == 576 && dv == 512) || (dk == 160 && dv == 128); }

} // namespace

std::string decode_refusal(const shape& in, storage st, const decode_spec& spec) {
    const shape s = resolved(in);
    shape plain = s;
    plain.window = 0; // cuda-decode serves windows: its own checks below
    if (std::string why = common_refusal(plain); !why.empty()) return why;
    const std::string kn = "cuda-decode";
    const auto& o = spec.options;
    if (st == storage::f64) return kn + " does not store f64 (the GPU kernels store f32, bf16, f16 and int8 caches)";
    if (s.n_q > std::size_t(plan::max_new_tokens))
        return kn + " serves n_q 1 to 8 new tokens a step, not " + str(s.n_q);
    if (s.n_kv < s.n_q)
        return kn + " needs the n_q new tokens in the cache: n_kv " + str(s.n_kv) + " < n_q " + str(s.n_q);
    if (s.window > 0 && !s.causal)
        return kn + " serves a window only with the causal mask (it looks back from each query)";
    if (spec.v_from_k) {
        if (!mla_widths(s.d_qk, s.d_v))
            return kn + " serves MLA's absorbed form (v_from_k) at d_k/d_v 576/512 and 160/128, not " + str(s.d_qk) +
                   "/" + str(s.d_v);
        if (st == storage::f32) return kn + " serves MLA's absorbed form in bf16, f16 or int8 (tensor cores), not f32";
        if (o.tensor_cores == 0)
            return kn + " serves MLA's absorbed form on tensor cores only (tensor_cores = 0 asked)";
    } else {
        if (s.d_qk != s.d_v)
            return kn + " serves d_qk != d_v only as MLA's absorbed form (decode_spec.v_from_k), not " + str(s.d_qk) +
                   "/" + str(s.d_v);
        if (s.d_qk % 8 != 0 || s.d_qk > 256) return kn + " serves d_head a multiple of 8 up to 256, not " + str(s.d_qk);
        if (o.tensor_cores == 1 && (st == storage::f32 || (s.d_qk != 64 && s.d_qk != 128)))
            return kn + " on tensor cores serves bf16, f16 and int8 caches at d_head 64 and 128, not " + name(st) +
                   " at " + str(s.d_qk);
    }
    if (spec.ring > 0) {
        if (s.window == 0) return kn + ": a rolling buffer (ring " + str(spec.ring) + ") needs a window";
        if (spec.ring < s.window + s.n_q - 1)
            return kn + ": a rolling buffer needs window + n_q - 1 = " + str(s.window + s.n_q - 1) + " slots, not " +
                   str(spec.ring);
    }
    const std::size_t slots = spec.ring > 0 ? spec.ring : s.n_kv, limit = std::size_t(1) << 31;
    if (spec.page_size > 0) {
        if (!power_of_two(spec.page_size) || spec.page_size > 65536)
            return kn + " serves pages of a power of two tokens up to 65536, not " + str(spec.page_size);
        if (!spec.block_table) return kn + ": a paged cache needs a block table";
        if (spec.pages == 0) return kn + ": a paged cache needs pages >= 1";
        if (spec.max_pages * spec.page_size < slots)
            return kn + ": the block table's " + str(spec.max_pages) + " pages of " + str(spec.page_size) +
                   " do not hold " + str(slots) + " slots";
        if (spec.pages * spec.page_size * s.kv_heads >= limit || s.batch * spec.max_pages >= limit)
            return kn + ": the page pool's rows (pages x page_size x G) and the block table's entries must number "
                        "below 2^31";
    } else {
        const std::size_t cap = spec.capacity ? spec.capacity : s.n_kv;
        if (cap < slots) return kn + ": capacity " + str(cap) + " does not hold " + str(slots) + " slots";
        if (s.batch * s.kv_heads * cap >= limit)
            return kn + ": the cache's rows (B x G x capacity) must number below 2^31";
    }
    if (o.splits < 0 || o.splits > plan::max_splits)
        return kn + " takes splits 0 (planned) to 128, not " + std::to_string(o.splits);
    if (o.stages != 0 && (o.stages < 2 || o.stages > plan::max_stages))
        return kn + " takes stages 0 (planned) or 2 to 8, not " + std::to_string(o.stages);
    if (o.heads_per_block < 0) return kn + " takes heads_per_block >= 0, not " + std::to_string(o.heads_per_block);
    if (o.tensor_cores < -1 || o.tensor_cores > 1)
        return kn + " takes tensor_cores -1 (planned), 0 or 1, not " + std::to_string(o.tensor_cores);
    return "";
}

} // namespace attn::cuda
