// attn.families' registry: the built-in families (the q/k/v family serves single-head, MHA, GQA,
// MQA and wide; MLA has its own), then whatever a program registers.
module;
#include <cstdint>
#include <string>
#include <utility>
#include <vector>
module attn.families;

namespace attn {
namespace {

std::vector<family_ops>& storage() {
    static std::vector<family_ops> all{make_qkv_family(), make_mla_family()};
    return all;
}

} // namespace

const std::vector<family_ops>& family_registry() { return storage(); }

attn::family register_family(family_ops ops, const std::string& name, const std::string& label) {
    ops.id = add_family_name(name, label);
    storage().push_back(std::move(ops));
    return storage().back().id;
}

const family_ops& find_family(attn::family f) {
    const attn::family key = derived_family(f) ? family::mha : f; // one record for the one computation
    for (const auto& x : storage())
        if (x.id == key) return x;
    throw error("family " + std::string(enum_label(f)) + " has no implementation registered");
}

flop_table measured_flops(const problem& p, std::uint64_t seed) {
    p.validate();
    const auto w = random_weights<counted>(p, seed);
    const auto xq = random_values<counted>(p.batch * p.n_q * p.d_model, seed * 8 + 100);
    const auto xkv = random_values<counted>(p.batch * p.n_kv * p.d_model, seed * 8 + 101);
    std::vector<counted> y(p.batch * p.n_q * p.d_model);
    flop_table t;
    {
        counting_scope scope(t);
        reference_layer<counted>(p, w, xq.data(), xkv.data(), y.data());
    }
    return t;
}

} // namespace attn
