// The --family mla flags (family_flags.hpp).
#include <cstddef>
#include <string>
#include <vector>
#include <CLI/CLI.hpp>
#include "family_flags.hpp"

namespace attn::cli {

namespace {
/// The names of the families a flag may name (the named ones: the others follow from the shape).
std::vector<std::string> named_families() {
    std::vector<std::string> out;
    for (const auto f : enum_values<family>())
        if (!derived_family(f)) out.emplace_back(enum_name(f));
    return out;
}
} // namespace

void add_family_flags(CLI::App* cmd, family_flags& f) {
    cmd->add_option_function<std::string>(
           "--family", [&f](const std::string& s) { f.family = parse_enum<family>(s); },
           "mla for Multi-head Latent Attention (default: the q/k/v family)")
        ->check(CLI::IsMember(named_families()));
    cmd->add_option_function<std::string>(
           "--form", [&f](const std::string& s) { f.form = parse_enum<form>(s); },
           "MLA's form: naive (K and V decompressed per head) or absorb (the latent); default naive")
        ->check(CLI::IsMember(
            std::vector<std::string>{std::string(enum_name(form::naive)), std::string(enum_name(form::absorb))}));
    std::string known;
    for (const auto& c : latent_configs()) known += (known.empty() ? "" : ", ") + std::string(c.name);
    cmd->add_option("--config", f.config, "MLA widths of a paper's model: " + known);
    cmd->add_option("--kv-lora-rank", f.kv_rank, "MLA: key/value latent width d_c");
    cmd->add_option("--q-lora-rank", f.q_rank, "MLA: query latent width d_c' (0: wq straight from x)")
        ->each([&f](const std::string&) { f.q_rank_given = true; });
    cmd->add_option("--qk-nope-head-dim", f.nope, "MLA: query/key head width without the rotary part d_h");
    cmd->add_option("--qk-rope-head-dim", f.rope, "MLA: rotary part of each query/key head d_h^R (even)");
    cmd->add_option("--v-head-dim", f.v_head, "MLA: value head width");
}

bool names_latent(const family_flags& f) { return f.family == family::mla || !f.config.empty(); }

void apply_family_flags(const family_flags& f, problem& p, bool d_model_given, bool heads_given) {
    const bool widths = f.kv_rank || f.q_rank_given || f.nope || f.rope || f.v_head;
    if (!names_latent(f)) {
        require(!widths, "--kv-lora-rank, --q-lora-rank, --qk-nope-head-dim, --qk-rope-head-dim and --v-head-dim "
                         "are MLA's: give --family mla");
        return;
    }
    require(f.family == family::mla, "--config " + f.config + " is an MLA configuration: give --family mla");
    std::size_t d = p.d_model, h = p.heads, q = f.q_rank, c = f.kv_rank, n = f.nope, r = f.rope, v = f.v_head;
    if (!f.config.empty()) {
        require(!widths, "give either --config " + f.config + " or the MLA widths, not both");
        const latent_config& k = find_latent_config(f.config);
        require(!d_model_given || p.d_model == k.d_model, "--d-model " + std::to_string(p.d_model) + " is not " +
                                                              f.config + "'s d_model " + std::to_string(k.d_model));
        require(!heads_given || p.heads == k.heads,
                "--heads " + std::to_string(p.heads) + " is not " + f.config + "'s " + std::to_string(k.heads));
        d = k.d_model, h = k.heads, q = k.q_rank, c = k.kv_rank, n = k.nope, r = k.rope, v = k.v_head;
    } else {
        auto need = [](std::size_t x, const char* flag, const char* what) {
            require(x >= 1, std::string(flag) + " " + std::to_string(x) + ": " + what + " must be >= 1");
        };
        need(c, "--kv-lora-rank", "the key/value latent width");
        need(n, "--qk-nope-head-dim", "the non-rotary query/key head width");
        need(v, "--v-head-dim", "the value head width");
    }
    require(r >= 2 && r % 2 == 0, "--qk-rope-head-dim " + std::to_string(r) +
                                      ": the rotary part is rotated in pairs, so it must be even and >= 2");
    const problem keep = p;
    p = mla(d, h, q, c, n, r, v, f.form, keep.n_q);
    p.n_kv = keep.n_kv;
    p.batch = keep.batch;
    p.causal = keep.causal;
}

} // namespace attn::cli
