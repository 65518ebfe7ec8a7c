// attn.families -- the attention families, each owning its widths, weights, layer and cache
// (family_ops, attn.families:ops), and what is written once for all of them on top: the registry
// (the families of the one computation share :qkv's record; a new family is a module of its own
// plus a register_family call), the layer run with a variant's kernels (run_layer), the fp64 and
// counting reference layers, random weights, and the measured operation count.
module;
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>
export module attn.families;
export import attn.core;
export import attn.bounds;
export import :ops;
export import :qkv;
export import :latent_ops;
export import :mla;
import attn.reference;

export namespace attn {

/// Every registered family's record, the built-in ones first.
const std::vector<family_ops>& family_registry();

/// Registers a family under a new name and label ("mla", "MLA") and returns its value (its row of
/// the name table); throws if the name is taken.
attn::family register_family(family_ops ops, const std::string& name, const std::string& label);

/// The record of family f (the families of the one computation share one); throws attn::error
/// naming f when it has none.
const family_ops& find_family(attn::family f);
inline const family_ops& family_ops_of(const problem& p) { return find_family(p.family()); }

/// The problem a layer's core runs: the family's (the layer problem itself for the q/k/v family).
inline problem attention_problem(const problem& layer) { return family_ops_of(layer).attention(layer); }

/// The weight set's tensors for `p`, and their total elements in closed form from the shapes.
inline std::vector<tensor_spec> weight_specs(const problem& p) { return family_ops_of(p).tensors(p); }

/// Every tensor of p's weight set drawn uniformly in its spec's interval, tensor i from its own
/// stream (seed * 8 + i + 1), each value drawn in double and rounded once to T (float and double
/// runs from one seed see the same numbers, as random_values does); then the family's derived
/// tensors.
template <class T>
weights<T> random_weights(const problem& p, std::uint64_t seed) {
    const auto specs = weight_specs(p);
    weights<T> w;
    w.t.resize(specs.size());
    for (std::size_t i = 0; i < specs.size(); ++i) {
        if (!specs[i].present || specs[i].derived) continue;
        rng r(seed * 8 + i + 1);
        auto& v = w.t[i];
        v.resize(specs[i].elements());
        for (auto& x : v) x = T(float(r.uniform(specs[i].lo, specs[i].hi)));
    }
    if (const auto& derive = family_ops_of(p).stages<T>().derive) derive(p, w);
    return w;
}

/// The parameters a weight set holds: the elements of its tensors that are not derived (the
/// measured count, held to attn.count's closed form).
template <class T>
std::size_t parameter_elements(const problem& p, const weights<T>& w) {
    const auto specs = weight_specs(p);
    std::size_t n = 0;
    for (std::size_t i = 0; i < specs.size() && i < w.t.size(); ++i)
        if (!specs[i].derived) n += w.t[i].size();
    return n;
}

/// The layer with a variant's kernels at T: the family's input stage, the core on the family's
/// attention problem, its output stage. x_q [B, n_q, d_model], x_kv [B, n_kv, d_model], y [B, n_q,
/// d_model]; the key tokens at positions 0.. (see family_stages::project).
template <class T>
void run_layer(const kernel_set<T>& k, const problem& p, const weights<T>& w, const T* x_q, const T* x_kv, T* y,
               const run_options& opt, layer_buffers<T>& ws) {
    const family_ops& f = family_ops_of(p);
    const problem a = f.attention(p);
    const layer_call<T> call{k, p, w, opt, ws};
    const core_operands<T> in = f.stages<T>().project(call, x_q, x_kv, 0);
    T* ctx = ws.at(context_slot, a.batch * a.n_q * a.o_width());
    k.core(a, {in.q, in.k, in.v, interleaved_heads<T>(ctx, a.batch, a.n_q, a.heads, a.v_dim())}, opt);
    f.stages<T>().output(call, ctx, y);
}

/// The same with a registered variant's kernels; throws when it has none at T.
template <class T>
void run_layer(const variant& var, const problem& p, const weights<T>& w, const T* x_q, const T* x_kv, T* y,
               const run_options& opt, layer_buffers<T>& ws) {
    const auto& k = var.get<T>();
    require(k.core && k.linear, "variant '" + var.name + "' has no kernels at this precision");
    run_layer<T>(k, p, w, x_q, x_kv, y, opt, ws);
}

/// The layer with the reference kernels (attn.reference): the oracle in double, the measured
/// count on attn::counted.
template <class T>
void reference_layer(const problem& p, const weights<T>& w, const T* x_q, const T* x_kv, T* y) {
    static const kernel_set<T> k = reference::kernels<T>();
    layer_buffers<T> ws;
    run_layer<T>(k, p, w, x_q, x_kv, y, {}, ws);
}

/// The measured count: the reference layer run on counted scalars (random inputs and weights).
flop_table measured_flops(const problem& p, std::uint64_t seed = 1);

} // namespace attn
