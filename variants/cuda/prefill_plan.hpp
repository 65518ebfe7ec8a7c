// attn::cuda::prefill -- the tile candidates of cuda-flash and cuda-hopper: which instantiation
// serves which head widths, and the run-time tile choice (core_options::tile: 0 the default, i + 1
// candidate i). Pure host logic (plain C++17), shared by refusal.cpp, the launchers and the tests.
#pragma once

#include <cstddef>
#include <string>

#include "api.hpp"

namespace attn::cuda::prefill {

/// Head widths of an instantiation; a narrower head (d_qk <= dqk, d_v <= dv, multiples of 8) runs
/// zero-padded in it.
struct widths {
    int dqk = 0, dv = 0;
    bool ok() const { return dqk > 0; }
};

/// The instantiated widths, in order of preference: the first that covers (d_qk, d_v) serves it.
inline constexpr widths width_list[] = {{64, 64}, {128, 128}, {192, 128}};

inline widths widths_for(std::size_t d_qk, std::size_t d_v) {
    if (d_qk % 8 != 0 || d_v % 8 != 0) return {};
    for (const widths& w : width_list)
        if (d_qk <= std::size_t(w.dqk) && d_v <= std::size_t(w.dv)) return w;
    return {};
}

/// cuda-flash's tile: `warps` warps of `mt` m16 row tiles (block_q = 16 warps mt), block_kv keys.
struct flash_tile {
    int warps, mt, block_kv;
    int block_q() const { return 16 * warps * mt; }
    std::string name() const {
        return "q" + std::to_string(block_q()) + " kv" + std::to_string(block_kv) + " w" + std::to_string(warps);
    }
};

/// cuda-flash's candidates for widths w; candidate 0 is the default. 128-row tiles of 4 warps (2 m16
/// tiles a warp, FA2's shape) at d 64, and at d 128 with 32-key tiles: 64 keys need 32 more fp32
/// scores a thread beside the 128 of O and spilled (ptxas: 255 registers, 124-140 bytes); at
/// 192/128 even 32 keys spilled (16 bytes), so there 8 warps of 16 rows. The others: 8 warps of 16
/// rows, and the 64-row tile of 4 warps (the kernel before).
inline constexpr flash_tile flash_tiles_64[] = {{4, 2, 64}, {8, 1, 64}, {4, 1, 64}};
inline constexpr flash_tile flash_tiles_128[] = {{4, 2, 32}, {8, 1, 64}, {4, 1, 64}};
inline constexpr flash_tile flash_tiles_192[] = {{8, 1, 64}, {4, 1, 64}};

template <class F>
int for_each_flash_tile(widths w, F&& f) {
    int n = 0;
    auto each = [&](const auto& list) {
        for (const flash_tile& t : list) f(n++, t);
    };
    if (w.dqk == 64) each(flash_tiles_64);
    if (w.dqk == 128) each(flash_tiles_128);
    if (w.dqk == 192) each(flash_tiles_192);
    return n;
}

/// cuda-hopper's tile: two consumer warpgroups of 64 query rows each (block_q 128), block_kv keys
/// a stage, `stages` K and V stages in the ring.
struct hopper_tile {
    int block_kv, stages;
    std::string name() const { return "q128 kv" + std::to_string(block_kv) + " s" + std::to_string(stages); }
};

/// cuda-hopper's candidates for widths w (candidate 0 the default: FA3's 128 x 176 at d 128
/// non-causal would be the next to add; 128 keys a tile serve every case here).
inline constexpr hopper_tile hopper_tiles_64[] = {{128, 2}, {192, 2}};
inline constexpr hopper_tile hopper_tiles_128[] = {{128, 2}, {176, 2}};
inline constexpr hopper_tile hopper_tiles_192[] = {{128, 2}};

template <class F>
int for_each_hopper_tile(widths w, F&& f) {
    int n = 0;
    auto each = [&](const auto& list) {
        for (const hopper_tile& t : list) f(n++, t);
    };
    if (w.dqk == 64) each(hopper_tiles_64);
    if (w.dqk == 128) each(hopper_tiles_128);
    if (w.dqk == 192) each(hopper_tiles_192);
    return n;
}

/// "" when kernel k has the options' tile for the shape's widths (and the counts are not negative),
/// else one line.
inline std::string option_refusal(kernel k, const shape& s, const core_options& o) {
    if (o.tile < 0) return "core_options::tile must be >= 0 (got " + std::to_string(o.tile) + ")";
    if (o.ctas < 0) return "core_options::ctas must be >= 0 (got " + std::to_string(o.ctas) + ")";
    const widths w = widths_for(s.d_qk, s.d_v == 0 ? s.d_qk : s.d_v);
    int n = -1;
    if (k == kernel::flash) n = for_each_flash_tile(w, [](int, const flash_tile&) {});
    if (k == kernel::hopper) n = for_each_hopper_tile(w, [](int, const hopper_tile&) {});
    if (n >= 0 && o.tile > n)
        return std::string(name(k)) + " has " + std::to_string(n) + " tile candidates at d_qk " +
               std::to_string(s.d_qk) + ", not tile " + std::to_string(o.tile);
    return "";
}

} // namespace attn::cuda::prefill
