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
    /// The families it runs; empty: any family of the one computation (MHA, GQA, MQA, ...) with
    /// heads of d_model / H. nn.MultiheadAttention has no grouped heads; MLA has its own runner.
    std::vector<attn::family> families;
    std::string library, install; ///< the Python module it needs; the command that installs it
    /// The precisions it runs in (its output judged against the reference under that precision's
    /// bound before it is timed); a case in another precision gets no peer case, and
    /// `not_served` says why, per precision, for the report.
    std::vector<dtype> precisions{dtype::f32};
    std::map<dtype, std::string> not_served;
    /// Whether its runner takes a sliding window (torch-sdpa and ort-attention do, both as a
    /// boolean mask that still scores every pair); a windowed case gets no peer that does not.
    bool windows = false;

    /// Why it does not run `precision` (a precision it does run has no entry).
    std::string why_not(dtype precision) const {
        const auto it = not_served.find(precision);
        return it != not_served.end() ? it->second
                                      : name + " runs " + std::string(enum_name(precision)) + " in no runner of ours";
    }
};

inline const std::vector<peer_provider>& peer_providers() {
    static const std::vector<peer_provider> p{
        {"torch-sdpa",
         {mode::core, mode::decode},
         {},
         "torch",
         "bash scripts/peers.sh",
         {dtype::f32, dtype::bf16, dtype::f16},
         {{dtype::int8, "int8 is a cache type of ours; torch's SDPA takes no quantized cache"}},
         true}, // a window: a boolean attn_mask on the core (all pairs scored), the last W rows in decode
        {"torch-mha",
         {mode::layer},
         {family::single_head, family::mha},
         "torch",
         "bash scripts/peers.sh",
         {dtype::f32},
         {{dtype::bf16, "its runner builds an fp32 nn.MultiheadAttention only"},
          {dtype::f16, "its runner builds an fp32 nn.MultiheadAttention only"}}},
        {"torch-mla",
         {mode::layer},
         {family::mla},
         "torch",
         "bash scripts/peers.sh",
         {dtype::f32},
         {{dtype::bf16, "its runner is judged in fp32 only"}, {dtype::f16, "its runner is judged in fp32 only"}}},
        {"ort-attention",
         {mode::core, mode::decode},
         {},
         "onnxruntime",
         "bash scripts/peers.sh --ort",
         {dtype::f32},
         {{dtype::bf16, "onnxruntime's CPU provider has no bfloat16 Attention kernel"},
          {dtype::f16, "onnxruntime's CPU float16 Attention kernel fails the suite's f16 judgement (3-5x the bound "
                       "on queries and keys in [-4, 4])"},
          {dtype::int8, "int8 is a cache type of ours; the Attention operator takes no quantized cache"}},
         true}, // a window: a boolean attn_mask on the core (all pairs scored), the last W rows in decode
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

/// The precisions of `cases` (in modes a provider runs) that `providers` do not serve.
inline std::vector<unserved> unserved_precisions(const std::vector<sweep_case>& cases,
                                                 const std::vector<std::string>& providers) {
    std::vector<unserved> out;
    for (const auto& name : providers) {
        const peer_provider* p = find_peer(name);
        require(p != nullptr, "unknown peer '" + name + "'");
        for (const auto& k : cases) {
            if (is_peer(k.variant) || std::find(p->modes.begin(), p->modes.end(), k.mode) == p->modes.end()) continue;
            if (std::find(p->precisions.begin(), p->precisions.end(), k.precision) != p->precisions.end()) continue;
            if (std::none_of(out.begin(), out.end(),
                             [&](const unserved& u) { return u.provider == name && u.precision == k.precision; }))
                out.push_back({name, k.precision, p->why_not(k.precision)});
        }
    }
    return out;
}

/// The cases `providers` run beside `cases`: one per distinct (mode, shape, threads) of the
/// cases whose mode a provider serves, its variant the provider's name, in the cases' order,
/// listing every grid that asked for the shape.
inline std::vector<sweep_case> peer_cases(const std::vector<sweep_case>& cases,
                                          const std::vector<std::string>& providers) {
    std::vector<sweep_case> out;
    std::map<std::string, std::size_t> index;
    for (const auto& name : providers) {
        const peer_provider* p = find_peer(name);
        require(p != nullptr, "unknown peer '" + name + "'");
        for (const auto& k : cases) {
            if (is_peer(k.variant) || std::find(p->modes.begin(), p->modes.end(), k.mode) == p->modes.end()) continue;
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
