// decode_case (api.hpp): one decode step of cuda-decode over a cache copied to the device once in
// its storage type (int8 with its row scales), contiguous or paged, planned by plan_decode
// (decode.cu); set_options re-plans over the same device copies.
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "decode.cuh"
#include "host.cuh"

namespace attn::cuda {

using namespace detail;

struct decode_case::impl {
    shape s;
    storage st;
    decode_spec spec; ///< pointers into the caller's arrays not kept past the constructor
    runner run;
    device_memory q, k, v, ks, vs, table, lengths, out, part_o, part_ml, counters;
    decode_params params;
    decode_setup setup;

    void plan(const decode_options& o) {
        decode_spec sp = spec;
        sp.options = o;
        // the caller's block table is on the device now: the refusal asks only that a paged case has one
        if (sp.page_size > 0) sp.block_table = table.as<std::int32_t>();
        if (const std::string why = decode_refusal(s, st, sp); !why.empty()) throw error(run.what + " refused: " + why);
        setup = plan_decode(s, st, sp);
        spec.options = o;
        const decode_plan_info& i = setup.info;
        const std::size_t parts = setup.units * std::size_t(i.splits) * std::size_t(i.rows_per_block);
        if (i.splits > 1 && part_o.bytes() < parts * s.d_v * sizeof(float)) {
            part_o = device_memory(parts * s.d_v * sizeof(float), "the partial outputs of the " + run.what);
            part_ml = device_memory(parts * 2 * sizeof(float), "the partial maxima and sums of the " + run.what);
        }
        if (counters.bytes() < setup.units * sizeof(unsigned)) {
            counters = device_memory(setup.units * sizeof(unsigned), "the chunk counters of the " + run.what);
            ATTN_CUDA(cudaMemset(counters.get(), 0, counters.bytes()), "zeroing the chunk counters of the " + run.what);
        }
        decode_params& p = params;
        p.part_o = part_o.as<float>();
        p.part_ml = part_ml.as<float>();
        p.counters = counters.as<unsigned>();
        p.splits = i.splits;
        p.rows = i.rows_per_block;
        p.groups = i.groups;
        p.stages = i.stages;
        run.poison = {&out};
        if (i.splits > 1) run.poison = {&out, &part_o, &part_ml};
    }
};

decode_case::decode_case(const shape& s, storage st, const float* q, const void* k_cache, const void* v_cache,
                         const float* k_scales, const float* v_scales, std::size_t capacity)
    : decode_case(s, st, q, k_cache, v_cache, k_scales, v_scales, [&] {
          decode_spec sp;
          sp.capacity = capacity;
          return sp;
      }()) {}

decode_case::decode_case(const shape& in, storage st, const float* q, const void* k_cache, const void* v_cache,
                         const float* k_scales, const float* v_scales, const decode_spec& spec) {
    const shape s = resolved(in);
    const std::string what = std::string("cuda-decode step over a ") + name(st) + (spec.page_size ? " paged" : "") +
                             (spec.v_from_k ? " latent" : "") + " cache";
    if (const std::string why = decode_refusal(s, st, spec); !why.empty()) throw error(what + " refused: " + why);
    if (st == storage::int8 && (!k_scales || (!spec.v_from_k && !v_scales)))
        throw error(what + ": an int8 cache needs k_scales" + (spec.v_from_k ? "" : " and v_scales"));
    if (!q || !k_cache || (!spec.v_from_k && !v_cache)) throw error(what + ": q and the caches must not be null");
    const bool paged = spec.page_size > 0;
    const std::size_t slots = spec.ring ? spec.ring : s.n_kv;
    if (spec.lengths)
        for (std::size_t b = 0; b < s.batch; ++b)
            if (spec.lengths[b] < std::int32_t(s.n_q) || std::size_t(spec.lengths[b]) > s.n_kv)
                throw error(what + ": lengths[" + std::to_string(b) + "] = " + std::to_string(spec.lengths[b]) +
                            " is outside [n_q, n_kv] = [" + std::to_string(s.n_q) + ", " + std::to_string(s.n_kv) +
                            "]");
    if (paged)
        for (std::size_t b = 0; b < s.batch; ++b) {
            const std::size_t held = spec.ring ? slots : spec.lengths ? std::size_t(spec.lengths[b]) : s.n_kv;
            for (std::size_t i = 0; i < (held + spec.page_size - 1) / spec.page_size; ++i) {
                const std::int32_t pg = spec.block_table[b * spec.max_pages + i];
                if (pg < 0 || std::size_t(pg) >= spec.pages)
                    throw error(what + ": block_table[" + std::to_string(b) + "][" + std::to_string(i) + "] = " +
                                std::to_string(pg) + " is not a page of the pool's " + std::to_string(spec.pages));
            }
        }
    try {
        props();
    } catch (const error& e) {
        throw error(what + ": " + e.what());
    }
    auto p = std::make_unique<impl>();
    p->s = s;
    p->st = st;
    p->spec = spec;
    p->spec.block_table = nullptr;
    p->spec.lengths = nullptr;
    p->run.what = what;
    const std::size_t cap = spec.capacity ? spec.capacity : s.n_kv;
    const std::size_t rows = paged ? spec.pages * spec.page_size * s.kv_heads : s.batch * s.kv_heads * cap;
    const std::size_t eb = element_bytes(st);
    p->q = upload(storage::f32, q, s.batch * s.n_q * s.heads * s.d_qk, "q of the " + what);
    p->k = upload_bytes(k_cache, rows * s.d_qk * eb, "the K cache of the " + what);
    if (!spec.v_from_k) p->v = upload_bytes(v_cache, rows * s.d_v * eb, "the V cache of the " + what);
    if (st == storage::int8) {
        p->ks = upload_bytes(k_scales, rows * sizeof(float), "the K scales of the " + what);
        if (!spec.v_from_k) p->vs = upload_bytes(v_scales, rows * sizeof(float), "the V scales of the " + what);
    }
    if (paged)
        p->table = upload_bytes(spec.block_table, s.batch * spec.max_pages * sizeof(std::int32_t),
                                "the block table of the " + what);
    if (spec.lengths)
        p->lengths = upload_bytes(spec.lengths, s.batch * sizeof(std::int32_t), "the sequence lengths of the " + what);
    p->out = device_memory(s.batch * s.n_q * s.heads * s.d_v * sizeof(float), "the output of the " + what);

    decode_params& a = p->params;
    a.q = p->q.as<float>();
    a.k = p->k.get();
    a.v = spec.v_from_k ? p->k.get() : p->v.get();
    a.k_scales = p->ks.as<float>();
    a.v_scales = spec.v_from_k ? p->ks.as<float>() : p->vs.as<float>();
    a.lengths = p->lengths.as<std::int32_t>();
    a.out = p->out.as<float>();
    a.map.table = p->table.as<std::int32_t>();
    set_geometry(a, s, spec);
    p->plan(spec.options);
    impl* raw = p.get();
    p->run.enqueue = [raw] { launch_decode(raw->setup, raw->params, raw->run.stream.get()); };
    impl_ = std::move(p);
}
decode_case::~decode_case() = default;
decode_case::decode_case(decode_case&&) noexcept = default;
decode_case& decode_case::operator=(decode_case&&) noexcept = default;
void decode_case::run() { impl_->run.run(); }
std::vector<float> decode_case::output() {
    const shape& s = impl_->s;
    return download(storage::f32, impl_->out, s.batch * s.n_q * s.heads * s.d_v, "the output of " + impl_->run.what);
}
std::vector<double> decode_case::time_ms(int repetitions, int warmup, bool flush_l2) {
    return impl_->run.time_ms(repetitions, warmup, flush_l2);
}
std::size_t decode_case::chunks() const { return std::size_t(impl_->setup.info.splits); }
void decode_case::set_options(const decode_options& o) { impl_->plan(o); }
decode_plan_info decode_case::plan() const { return impl_->setup.info; }

} // namespace attn::cuda
