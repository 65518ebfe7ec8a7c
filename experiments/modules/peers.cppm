// attn.peers -- other libraries' attention, timed beside our variants: the providers (each run
// by experiments/peers/harness.py, which writes attnbench-bench's JSON schema) and the peer
// cases of a sweep. A peer case is an attn::sweep_case whose variant is the provider's name; it
// runs on the same grids at the same thread counts as the variants' cases of the modes the
// provider serves, so the report, its plots and `attnbench compare` read it like a variant.
module;
#include <algorithm>
#include <map>
#include <string>
#include <vector>
export module attn.peers;
export import attn.cases;

export namespace attn {

struct peer_provider {
    std::string name;
    std::vector<attn::mode> modes; ///< the case modes it runs
    /// The devices it runs on: a case on another device gets no peer case of it (a CUDA peer
    /// beside the CPU's variants, or the CPU's torch-sdpa beside a CUDA kernel, times nothing the
    /// case asks for), and no "not served" line either.
    std::vector<attn::device> devices{attn::device::cpu};
    /// The families it runs; empty: any family of the one computation (MHA, GQA, MQA, ...) with
    /// heads of d_model / H. nn.MultiheadAttention has no grouped heads; MLA has its own runner.
    std::vector<attn::family> families{};
    std::string library{}, install{}; ///< the Python module it needs; the command that installs it
    /// The precisions it runs in (its output judged against the reference under that precision's
    /// bound before it is timed); a case in another precision gets no peer case, and
    /// `not_served` says why, per precision, for the report.
    std::vector<dtype> precisions{dtype::f32};
    std::map<dtype, std::string> not_served{};
    /// Whether its runner takes a sliding window; a windowed case gets no peer that does not.
    bool windows = false;
    /// Whether it skips the tiles outside a sliding window (FlexAttention's block mask: its work
    /// is the window's), or scores every pair and masks them (SDPA and ONNX Attention given the
    /// window as a boolean mask: a window costs it what full attention costs). What the report
    /// says beside a windowed peer's time; each result's "peer" object says it again for its case.
    bool skips_tiles = false;

    bool runs_on(attn::device d) const { return std::find(devices.begin(), devices.end(), d) != devices.end(); }

    /// Why it does not run `precision` (a precision it does run has no entry).
    std::string why_not(dtype precision) const {
        const auto it = not_served.find(precision);
        return it != not_served.end() ? it->second
                                      : name + " runs " + std::string(enum_name(precision)) + " in no runner of ours";
    }
};

/// The PyTorch and ONNX Runtime peers (experiments/peers/harness.py runs each; its PROVIDERS
/// table names the same providers with the same modes and devices, tests/peers/check_providers.py
/// holds the two to each other). On CUDA, torch's SDPA is one provider per backend, each forced
/// alone with torch.nn.attention.sdpa_kernel, so a result is the backend it names and a backend
/// that cannot run a case fails it in one line rather than falling back to another.
inline const std::vector<peer_provider>& peer_providers() {
    const std::string quantized = "int8 is a cache type of ours; torch's SDPA takes no quantized cache";
    static const std::vector<peer_provider> p{
        // a window: a boolean attn_mask on the core (all pairs scored), the last W rows in decode
        {.name = "torch-sdpa",
         .modes = {mode::core, mode::decode},
         .devices = {device::cpu},
         .library = "torch",
         .install = "bash scripts/peers.sh",
         .precisions = {dtype::f32, dtype::bf16, dtype::f16},
         .not_served = {{dtype::int8, quantized}},
         .windows = true},
        {.name = "torch-mha",
         .modes = {mode::layer},
         .devices = {device::cpu},
         .families = {family::single_head, family::mha},
         .library = "torch",
         .install = "bash scripts/peers.sh",
         .precisions = {dtype::f32},
         .not_served = {{dtype::bf16, "its runner builds an fp32 nn.MultiheadAttention only"},
                        {dtype::f16, "its runner builds an fp32 nn.MultiheadAttention only"}}},
        // the one MLA layer runner on either device (its tensors are put on the case's device);
        // attnbench peer-io judges a layer in f32 only: bf16 waits for a bf16 layer judgement
        {.name = "torch-mla",
         .modes = {mode::layer},
         .devices = {device::cpu, device::cuda},
         .families = {family::mla},
         .library = "torch",
         .install = "bash scripts/peers.sh",
         .precisions = {dtype::f32},
         .not_served = {{dtype::bf16, "attnbench peer-io judges a layer peer in f32 only (its runner computes bf16)"},
                        {dtype::f16, "attnbench peer-io judges a layer peer in f32 only"}}},
        {.name = "ort-attention",
         .modes = {mode::core, mode::decode},
         .devices = {device::cpu},
         .library = "onnxruntime",
         .install = "bash scripts/peers.sh --ort",
         .precisions = {dtype::f32},
         .not_served = {{dtype::bf16, "onnxruntime's CPU provider has no bfloat16 Attention kernel"},
                        {dtype::f16, "onnxruntime's CPU float16 Attention kernel fails the suite's f16 judgement (3-5x "
                                     "the bound on queries and keys in [-4, 4])"},
                        {dtype::int8, "int8 is a cache type of ours; the Attention operator takes no quantized cache"}},
         .windows = true}, // as torch-sdpa's: a boolean attn_mask on the core, the last W rows in decode
        // CUDA (experiments/peers/torch_cuda.py). FlashAttention-2 takes no attn_mask: no window
        // on the core, and a windowed decode step is the unwindowed step over W rows, timed as such.
        {.name = "torch-sdpa-flash",
         .modes = {mode::core, mode::decode},
         .devices = {device::cuda},
         .library = "torch",
         .install = "bash scripts/peers.sh",
         .precisions = {dtype::bf16, dtype::f16},
         .not_served = {{dtype::f32, "torch's flash backend (FlashAttention-2) runs fp16 and bf16 only"},
                        {dtype::int8, quantized}}},
        // memory-efficient (CUTLASS): fp32 too; a window as a boolean attn_mask (all pairs scored)
        {.name = "torch-sdpa-efficient",
         .modes = {mode::core, mode::decode},
         .devices = {device::cuda},
         .library = "torch",
         .install = "bash scripts/peers.sh",
         .precisions = {dtype::f32, dtype::bf16, dtype::f16},
         .not_served = {{dtype::int8, quantized}},
         .windows = true},
        {.name = "torch-sdpa-cudnn",
         .modes = {mode::core, mode::decode},
         .devices = {device::cuda},
         .library = "torch",
         .install = "bash scripts/peers.sh",
         .precisions = {dtype::bf16, dtype::f16},
         .not_served = {{dtype::f32, "torch's cuDNN attention backend runs fp16 and bf16 only"},
                        {dtype::int8, quantized}},
         .windows = true},
        // the unfused reference: the B H N_q N_kv scores in memory, so cases past a fraction of
        // the device's memory are refused in one line by the runner
        {.name = "torch-sdpa-math",
         .modes = {mode::core, mode::decode},
         .devices = {device::cuda},
         .library = "torch",
         .install = "bash scripts/peers.sh",
         .precisions = {dtype::f32, dtype::bf16, dtype::f16},
         .not_served = {{dtype::int8, quantized}},
         .windows = true},
        // FlexAttention under torch.compile: causal and sliding windows as block masks, the tiles
        // outside them never visited
        {.name = "torch-flex",
         .modes = {mode::core},
         .devices = {device::cuda},
         .library = "torch",
         .install = "bash scripts/peers.sh",
         .precisions = {dtype::bf16, dtype::f16},
         .not_served = {{dtype::f32,
                         "torch-flex is timed in the tensor-core formats, bf16 and f16; fp32 on CUDA is timed "
                         "by torch-sdpa-efficient and torch-sdpa-math"}},
         .windows = true,
         .skips_tiles = true},
    };
    return p;
}

inline const peer_provider* find_peer(const std::string& name) {
    for (const auto& p : peer_providers())
        if (p.name == name) return &p;
    return nullptr;
}

inline bool is_peer(const std::string& name) { return find_peer(name) != nullptr; }

/// A (provider, precision) pair the cases ask for that the provider does not serve, with why.
struct unserved {
    std::string provider;
    dtype precision;
    std::string why;
};

/// The precisions of `cases` (in modes and on devices a provider runs) that `providers` do not serve.
inline std::vector<unserved> unserved_precisions(const std::vector<sweep_case>& cases,
                                                 const std::vector<std::string>& providers) {
    std::vector<unserved> out;
    for (const auto& name : providers) {
        const peer_provider* p = find_peer(name);
        require(p != nullptr, "unknown peer '" + name + "'");
        for (const auto& k : cases) {
            if (is_peer(k.variant) || std::find(p->modes.begin(), p->modes.end(), k.mode) == p->modes.end()) continue;
            if (!p->runs_on(k.device)) continue; // another device's peer: nothing to say
            if (std::find(p->precisions.begin(), p->precisions.end(), k.precision) != p->precisions.end()) continue;
            if (std::none_of(out.begin(), out.end(),
                             [&](const unserved& u) { return u.provider == name && u.precision == k.precision; }))
                out.push_back({name, k.precision, p->why_not(k.precision)});
        }
    }
    return out;
}

/// The cases `providers` run beside `cases`: one per distinct (mode, shape, device, threads) of
/// the cases whose mode and device a provider serves, its variant the provider's name, in the
/// cases' order, listing every grid that asked for the shape. A CPU provider gets only the CPU's
/// cases and a CUDA provider only the CUDA ones, each on the device of the case it stands beside.
inline std::vector<sweep_case> peer_cases(const std::vector<sweep_case>& cases,
                                          const std::vector<std::string>& providers) {
    std::vector<sweep_case> out;
    std::map<std::string, std::size_t> index;
    for (const auto& name : providers) {
        const peer_provider* p = find_peer(name);
        require(p != nullptr, "unknown peer '" + name + "'");
        for (const auto& k : cases) {
            if (is_peer(k.variant) || std::find(p->modes.begin(), p->modes.end(), k.mode) == p->modes.end()) continue;
            if (!p->runs_on(k.device)) continue;
            const auto& fs = p->families;
            if (fs.empty() ? !derived_family(k.family) : std::find(fs.begin(), fs.end(), k.family) == fs.end())
                continue;
            // the runners: no biases; heads of d_model / H (a named family's own widths aside)
            if (k.bias || (k.explicit_d_head() && derived_family(k.family))) continue;
            if (k.window && !p->windows) continue;
            if (std::find(p->precisions.begin(), p->precisions.end(), k.precision) == p->precisions.end()) continue;
            sweep_case c = k;
            c.variant = p->name;
            const auto id = c.id();
            if (auto it = index.find(id); it != index.end()) {
                for (const auto& g : k.grids)
                    if (std::find(out[it->second].grids.begin(), out[it->second].grids.end(), g) ==
                        out[it->second].grids.end())
                        out[it->second].grids.push_back(g);
                continue;
            }
            index[id] = out.size();
            out.push_back(std::move(c));
        }
    }
    return out;
}

} // namespace attn
