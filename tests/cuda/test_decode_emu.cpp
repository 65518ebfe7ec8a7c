// attn_cuda_decode_emu: cuda-decode's kernels, their own source (decode_mma.cuh, decode_simt.cuh,
// decode_device.cuh), run on host threads (decode_emulate.hpp stands in for cp.async, ldmatrix,
// mma.sync, shuffles and barriers) on cases built and checked exactly as attn_cuda_gpu_tests
// builds and checks them (test_cuda_gpu_decode.cpp: the float64 reference over the logical cache,
// NaN in every row nobody may read, pages in shuffled order, the mutants). The plan is the same
// pure host code (plan.hpp) with a made-up device of 4 SMs and 2 blocks each, so small caches
// split. What it cannot see: timing, the real memory model, register limits, the hardware's
// behaviour where the emulation is stricter or looser than the PTX ISA (see decode_emulate.hpp).
// Exit status 0 when every check passes. C++20 (std::barrier).
#define ATTN_DECODE_EMULATE
#include "decode_configs.cuh"

#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "gpu_decode.hpp"
#include "plan.hpp"

namespace dt = attn::cuda::detail;
namespace pl = attn::cuda::plan;
using namespace attn_gpu_check;

namespace {

struct entry {
    void (*run)(const dt::decode_params&, unsigned, std::size_t) = nullptr;
    int threads = 0, tile = 0;
    std::size_t fixed = 0, stage = 0, merge = 0;
    std::string name;
};

template <class C>
entry mma_entry(const std::string& name) {
    entry e;
    e.run = [](const dt::decode_params& p, unsigned blocks, std::size_t smem) {
        attn_emu::launch(dt::decode_mma<C>, blocks, C::NTH, smem, p);
    };
    e.threads = C::NTH, e.tile = C::T, e.fixed = C::FIXED, e.stage = C::STAGE;
    e.name = name + " m-tiles " + std::to_string(C::MT);
    return e;
}

template <class C>
entry simt_entry(int d) {
    entry e;
    e.run = [](const dt::decode_params& p, unsigned blocks, std::size_t smem) {
        attn_emu::launch(dt::decode_simt<C>, blocks, C::NTH, smem, p);
    };
    e.threads = C::NTH, e.tile = C::T, e.fixed = C::FIXED, e.merge = C::MERGE;
    e.stage = std::size_t(C::T) * 2 * dt::simt_stride(d * C::EB) + (C::I8 ? 2 * C::T * 4 : 0);
    e.name = "cuda-cores lanes " + std::to_string(C::BDX);
    return e;
}

template <cu::storage ST>
entry pick_typed(bool tensor, bool mla, int dk, int mt) {
    if (tensor && mla) {
        if (dk == 576)
            return mt == 1   ? mma_entry<dt::mla_wide_cfg<ST, 1>>("mla 576")
                   : mt == 2 ? mma_entry<dt::mla_wide_cfg<ST, 2>>("mla 576")
                             : mma_entry<dt::mla_wide_cfg<ST, 4>>("mla 576");
        return mt == 1   ? mma_entry<dt::mla_narrow_cfg<ST, 1>>("mla 160")
               : mt == 2 ? mma_entry<dt::mla_narrow_cfg<ST, 2>>("mla 160")
                         : mma_entry<dt::mla_narrow_cfg<ST, 4>>("mla 160");
    }
    if (tensor) {
        if (dk == 64)
            return mt == 1 ? mma_entry<dt::gqa_cfg<ST, 64, 1>>("mma 64") : mma_entry<dt::gqa_cfg<ST, 64, 2>>("mma 64");
        return mt == 1 ? mma_entry<dt::gqa_cfg<ST, 128, 1>>("mma 128") : mma_entry<dt::gqa_cfg<ST, 128, 2>>("mma 128");
    }
    return {};
}

template <cu::storage ST>
entry pick_simt(int d) {
    switch (pl::simt_lanes(d)) {
    case 4:
        return simt_entry<dt::simt_cfg<ST, 4>>(d);
    case 8:
        return simt_entry<dt::simt_cfg<ST, 8>>(d);
    case 16:
        return simt_entry<dt::simt_cfg<ST, 16>>(d);
    default:
        return simt_entry<dt::simt_cfg<ST, 32>>(d);
    }
}

entry pick(bool tensor, bool mla, cu::storage st, int dk, int rows) {
    const int mt = pl::m_tiles(rows);
    if (tensor) {
        if (st == cu::storage::bf16) return pick_typed<cu::storage::bf16>(true, mla, dk, mt);
        if (st == cu::storage::f16) return pick_typed<cu::storage::f16>(true, mla, dk, mt);
        return pick_typed<cu::storage::int8>(true, mla, dk, mt);
    }
    switch (st) {
    case cu::storage::f32:
        return pick_simt<cu::storage::f32>(dk);
    case cu::storage::bf16:
        return pick_simt<cu::storage::bf16>(dk);
    case cu::storage::f16:
        return pick_simt<cu::storage::f16>(dk);
    default:
        return pick_simt<cu::storage::int8>(dk);
    }
}

/// decode_case's plan and launch, on host threads (a device of 4 SMs, 2 blocks each, H100's shared memory).
decode_result emulate(const cu::shape& s, cu::storage st, const float* q, const void* k, const void* v, const float* ks,
                      const float* vs, const cu::decode_spec& spec) {
    if (const std::string why = cu::decode_refusal(s, st, spec); !why.empty()) throw cu::error("refused: " + why);
    const cu::decode_options& o = spec.options;
    const int R = int(s.heads / s.kv_heads), n_q = int(s.n_q);
    const pl::path_choice path =
        pl::choose_path(R, n_q, int(s.d_qk), st == cu::storage::f32, spec.v_from_k, o.tensor_cores, o.heads_per_block);
    const entry e = pick(path.tensor, spec.v_from_k, st, int(s.d_qk), path.rows.rows);
    if (!e.run) throw cu::error("no emulated kernel");
    const int stages =
        o.stages ? o.stages : pl::choose_stages(e.stage, e.fixed, e.merge, 233472, 232448, 1024, 2).stages;
    const std::size_t smem = pl::stage_smem(e.fixed, e.stage, e.merge, stages);
    const long long tiles =
        pl::tiles_of(pl::step_keys((long long)s.n_kv, n_q, (long long)s.window, s.causal).size(), e.tile);
    const std::size_t units = s.batch * s.kv_heads * std::size_t(path.rows.groups);
    const int splits = o.splits ? o.splits : pl::split_count((long long)units, 8, tiles);
    dt::decode_params p;
    dt::set_geometry(p, s, spec);
    p.q = q;
    p.k = k;
    p.v = spec.v_from_k ? k : v;
    p.k_scales = ks;
    p.v_scales = spec.v_from_k ? ks : vs;
    p.lengths = spec.lengths;
    p.map.table = spec.block_table;
    p.splits = splits;
    p.rows = path.rows.rows;
    p.groups = path.rows.groups;
    p.stages = stages;
    std::vector<float> out(s.batch * s.n_q * s.heads * s.d_v, NAN);
    std::vector<float> part_o(units * std::size_t(splits) * std::size_t(p.rows) * s.d_v, NAN);
    std::vector<float> part_ml(units * std::size_t(splits) * std::size_t(p.rows) * 2, NAN);
    std::vector<unsigned> counters(units, 0u);
    p.out = out.data();
    p.part_o = part_o.data();
    p.part_ml = part_ml.data();
    p.counters = counters.data();
    e.run(p, unsigned(units * std::size_t(splits)), smem);
    for (unsigned c : counters)
        if (c != 0) throw cu::error("a unit's chunk counter was not reset by its last block");
    return {out, e.name + ", " + std::to_string(splits) + " splits, " + std::to_string(stages) + " stages, " +
                     std::to_string(p.rows) + " rows"};
}

decode_input make(std::size_t b, std::size_t h, std::size_t g, std::size_t n_q, std::size_t L, std::size_t d,
                  cu::storage t) {
    decode_input in;
    in.s.batch = b, in.s.heads = h, in.s.kv_heads = g, in.s.n_q = n_q, in.s.n_kv = L, in.s.d_qk = d;
    in.s.causal = true;
    in.st = t;
    return in;
}

decode_input mla(std::size_t h, std::size_t n_q, std::size_t L, std::size_t dk, std::size_t dv, cu::storage t) {
    decode_input in = make(1, h, 1, n_q, L, dk, t);
    in.s.d_v = dv;
    in.v_from_k = true;
    return in;
}

} // namespace

int main() {
    using st = cu::storage;
    using dm = decode_mutant;
    std::mt19937_64 rng(20261127);
    tally t;
    const decode_runner run = emulate;
    auto check = [&](const decode_input& in, std::vector<dm> ms = {}) {
        const int before = t.failed;
        check_decode_case(t, rng, in, ms, false, run);
        std::printf("%s %s\n", t.failed == before ? "ok  " : "FAIL", describe_decode(in).c_str());
        std::fflush(stdout);
    };
    // CUDA cores: every cache type, d 80 and 256, rows past a block's capacity, n_q 1-8
    check(make(2, 8, 2, 3, 70, 128, st::f32), {dm::kv_map, dm::mask_short, dm::scale});
    check(make(1, 4, 4, 1, 33, 80, st::int8));
    check(make(1, 2, 1, 8, 40, 256, st::bf16));
    check(make(2, 4, 2, 1, 1, 128, st::f16)); // L = 1
    check(make(1, 6, 2, 5, 97, 24, st::f16));
    // tensor cores: 16 and 32 rows, d 64 and 128, bf16, f16, int8
    {
        decode_input in = make(1, 16, 2, 2, 150, 128, st::bf16);
        in.options.splits = 3;
        in.options.stages = 3;
        check(in, {dm::kv_map, dm::mask_short});
    }
    check(make(1, 32, 1, 1, 100, 64, st::f16));
    {
        decode_input in = make(1, 4, 1, 8, 200, 128, st::int8);
        in.options.tensor_cores = 1;
        check(in, {dm::mask_short});
    }
    check(make(2, 8, 1, 1, 77, 64, st::int8));
    {
        decode_input in = make(1, 8, 1, 1, 300, 64, st::bf16);
        in.options.splits = 16; // more chunks than tiles: empty chunks in the combine
        check(in);
    }
    { // deep pipelines over many tiles: buffers reused several times
        decode_input in = make(1, 16, 2, 1, 600, 128, st::bf16);
        in.options.splits = 1;
        in.options.stages = 4;
        check(in);
        decode_input c = make(1, 4, 2, 2, 400, 64, st::f32);
        c.options.splits = 1;
        c.options.stages = 5;
        check(c);
    }
    { // row groups: MQA's 32 heads as 4 blocks of 8
        decode_input in = make(1, 32, 1, 1, 130, 128, st::f16);
        in.options.heads_per_block = 8;
        check(in);
    }
    // pages, per-sequence lengths, windows, rolling buffers
    {
        decode_input in = make(3, 8, 1, 2, 140, 128, st::bf16);
        in.page = 16;
        in.lengths = {2, 77, 140};
        check(in);
    }
    {
        decode_input in = make(2, 8, 2, 3, 150, 128, st::int8);
        in.s.window = 7;
        check(in, {dm::window_short, dm::window_long});
        in.ring = 9;
        in.page = 16;
        check(in, {dm::window_short, dm::window_long});
    }
    {
        decode_input in = make(2, 4, 1, 1, 90, 64, st::f16);
        in.s.window = 7;
        in.ring = 7;
        check(in, {dm::window_short, dm::window_long});
    }
    {
        decode_input in = make(1, 4, 2, 1, 200, 128, st::f32);
        in.s.window = 129;
        in.ring = 129;
        check(in, {dm::window_short, dm::window_long});
    }
    // MLA's absorbed form
    check(mla(16, 1, 40, 576, 512, st::bf16), {dm::mask_short});
    check(mla(3, 2, 70, 160, 128, st::f16));
    {
        decode_input in = mla(16, 2, 35, 576, 512, st::int8);
        in.page = 64;
        check(in);
    }
    check(mla(64, 1, 33, 576, 512, st::bf16));
    check(mla(24, 2, 66, 160, 128, st::int8));
    std::printf("%d passed, %d failed\n", t.passed, t.failed);
    return t.failed ? 1 : 0;
}
