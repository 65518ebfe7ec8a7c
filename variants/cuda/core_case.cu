// core_case (api.hpp): one attention core on the device. The inputs are copied once, rounded to
// the storage type on the host; run() poisons the output and launches the kernel; output() widens
// it back; time_ms() goes through the runner (runtime.cu).
#include <memory>
#include <string>
#include <vector>

#include "host.cuh"
#include "prefill_plan.hpp"

namespace attn::cuda {

using namespace detail;

struct core_case::impl {
    kernel k;
    shape s;
    storage st;
    runner run;
    device_memory q, kk, v, out, scratch;
    core_args args;
};

core_case::core_case(kernel k, const shape& in, storage st, const float* q, const float* k_in, const float* v)
    : core_case(k, in, st, q, k_in, v, core_options{}) {}

core_case::core_case(kernel k, const shape& in, storage st, const float* q, const float* k_in, const float* v,
                     const core_options& options) {
    const shape s = resolved(in);
    const std::string what = std::string(name(k)) + " " + name(st) + " core";
    if (const std::string why = refusal(k, s, st); !why.empty()) throw error(what + " refused: " + why);
    if (k == kernel::decode) throw error(what + " refused: cuda-decode runs through decode_case");
    if (const std::string why = prefill::option_refusal(k, s, options); !why.empty()) throw error(what + ": " + why);
    try {
        const device_props& dev = props();
        if (k == kernel::hopper && (dev.cc_major != 9 || dev.cc_minor != 0))
            throw error("cuda-hopper runs on sm_90 (H100, H200) only, not on compute capability " +
                        std::to_string(dev.cc_major) + "." + std::to_string(dev.cc_minor));
    } catch (const error& e) {
        throw error(what + ": " + e.what());
    }
    auto p = std::make_unique<impl>();
    p->k = k;
    p->s = s;
    p->st = st;
    p->q = upload(st, q, s.batch * s.n_q * s.heads * s.d_qk, "q of the " + what);
    p->kk = upload(st, k_in, s.batch * s.n_kv * s.kv_heads * s.d_qk, "k of the " + what);
    p->v = upload(st, v, s.batch * s.n_kv * s.kv_heads * s.d_v, "v of the " + what);
    p->out = device_memory(s.batch * s.n_q * s.heads * s.d_v * element_bytes(st), "the output of the " + what);
    if (k == kernel::naive) p->scratch = device_memory(naive_scratch_bytes(s), "the score matrix of the " + what);
    p->args = make_core_args(s, st);
    p->args.options = options;
    p->args.q = p->q.get();
    p->args.k = p->kk.get();
    p->args.v = p->v.get();
    p->args.out = p->out.get();
    p->args.scratch = p->scratch.as<float>();
    p->run.poison = {&p->out};
    p->run.what = what;
    impl* raw = p.get();
    p->run.enqueue = [raw] { enqueue_core(raw->k, raw->args, raw->run.stream.get()); };
    impl_ = std::move(p);
}
core_case::~core_case() = default;
core_case::core_case(core_case&&) noexcept = default;
core_case& core_case::operator=(core_case&&) noexcept = default;
void core_case::run() { impl_->run.run(); }
std::vector<float> core_case::output() {
    const shape& s = impl_->s;
    return download(impl_->st, impl_->out, s.batch * s.n_q * s.heads * s.d_v, "the output of " + impl_->run.what);
}
std::vector<double> core_case::time_ms(int repetitions, int warmup, bool flush_l2) {
    return impl_->run.time_ms(repetitions, warmup, flush_l2);
}

} // namespace attn::cuda
