// decode_case (api.hpp): one decode step of cuda-decode over a cache copied to the device once
// in its storage type (int8 with its row scales), planned by plan_decode (decode.cu).
#include <memory>
#include <string>
#include <vector>

#include "host.cuh"

namespace attn::cuda {

using namespace detail;

struct decode_case::impl {
    shape s;
    storage st;
    runner run;
    device_memory q, k, v, ks, vs, out, part_acc, part_ml;
    decode_args args;
};

decode_case::decode_case(const shape& in, storage st, const float* q, const void* k_cache, const void* v_cache,
                         const float* k_scales, const float* v_scales, std::size_t capacity) {
    const shape s = resolved(in);
    const std::string what = std::string("cuda-decode step over a ") + name(st) + " cache";
    if (const std::string why = refusal(kernel::decode, s, st); !why.empty()) throw error(what + " refused: " + why);
    if (capacity < s.n_kv || capacity >= (std::size_t(1) << 31))
        throw error(what + ": capacity " + std::to_string(capacity) + " must hold n_kv = " + std::to_string(s.n_kv) +
                    " rows and be below 2^31");
    if (st == storage::int8 && (!k_scales || !v_scales))
        throw error(what + ": an int8 cache needs k_scales and v_scales");
    try {
        props();
    } catch (const error& e) {
        throw error(what + ": " + e.what());
    }
    auto p = std::make_unique<impl>();
    p->s = s;
    p->st = st;
    const std::size_t d = s.d_qk, rows = s.batch * s.kv_heads * capacity;
    p->q = upload(storage::f32, q, s.batch * s.heads * d, "q of the " + what);
    p->k = upload_bytes(k_cache, rows * d * element_bytes(st), "the K cache of the " + what);
    p->v = upload_bytes(v_cache, rows * d * element_bytes(st), "the V cache of the " + what);
    if (st == storage::int8) {
        p->ks = upload_bytes(k_scales, rows * sizeof(float), "the K scales of the " + what);
        p->vs = upload_bytes(v_scales, rows * sizeof(float), "the V scales of the " + what);
    }
    decode_args& a = p->args;
    a.plan = plan_decode(s, st);
    p->out = device_memory(s.batch * s.heads * d * sizeof(float), "the output of the " + what);
    p->part_acc = device_memory(s.batch * s.heads * std::size_t(a.plan.chunks) * d * sizeof(float),
                                "the partial outputs of the " + what);
    p->part_ml = device_memory(s.batch * s.heads * std::size_t(a.plan.chunks) * 2 * sizeof(float),
                               "the partial maxima and sums of the " + what);
    a.q = p->q.as<float>();
    a.k = p->k.get();
    a.v = p->v.get();
    a.k_scales = p->ks.as<float>();
    a.v_scales = p->vs.as<float>();
    a.out = p->out.as<float>();
    a.part_acc = p->part_acc.as<float>();
    a.part_ml = p->part_ml.as<float>();
    a.batch = int(s.batch);
    a.heads = int(s.heads);
    a.kv_heads = int(s.kv_heads);
    a.n_kv = int(s.n_kv);
    a.d = int(d);
    a.capacity = int(capacity);
    a.scale = float(s.scale);
    a.st = st;
    p->run.poison = {&p->out, &p->part_acc, &p->part_ml};
    p->run.what = what;
    impl* raw = p.get();
    p->run.enqueue = [raw] { launch_decode(raw->args, raw->run.stream.get()); };
    impl_ = std::move(p);
}
decode_case::~decode_case() = default;
decode_case::decode_case(decode_case&&) noexcept = default;
decode_case& decode_case::operator=(decode_case&&) noexcept = default;
void decode_case::run() { impl_->run.run(); }
std::vector<float> decode_case::output() {
    const shape& s = impl_->s;
    return download(storage::f32, impl_->out, s.batch * s.heads * s.d_qk, "the output of " + impl_->run.what);
}
std::vector<double> decode_case::time_ms(int repetitions, int warmup, bool flush_l2) {
    return impl_->run.time_ms(repetitions, warmup, flush_l2);
}
std::size_t decode_case::chunks() const { return std::size_t(impl_->args.plan.chunks); }

} // namespace attn::cuda
