// attnbench init: random weights (PyTorch state_dict names; DeepSeek's for --family mla) and an
// input, as .npy files, so `attnbench run` and any NumPy or PyTorch script can start from the
// same numbers.
#include <cstdint>
#include <cstdio>
#include <string>
#include "commands.hpp"
#include "family_flags.hpp"
import attn.families;
import attn.core;
import attn.count;
import attn.npy;

namespace attn::cli {
namespace {

struct init_args {
    problem p = gqa(16, 2, 0, 8);
    std::uint64_t seed = 1;
    std::string out;
    family_flags family;
    bool d_model_given = false, heads_given = false;
};

void init(init_args a) {
    problem& p = a.p;
    if (names_latent(a.family)) {
        require(p.kv_heads == 0, "--kv-heads is not MLA's: its keys and values are per query head");
        apply_family_flags(a.family, p, a.d_model_given, a.heads_given);
    } else {
        apply_family_flags(a.family, p, true, true);
    }
    if (p.kv_heads == 0) p.kv_heads = p.heads;
    p.n_kv = p.n_q;
    p.validate();
    // fp32 weights and their fp64 copy, then the fp64 input
    const double weight_bytes = 12.0 * double(analytic_params(p).total());
    const double input_bytes = 8.0 * double(p.batch) * double(p.n_q) * double(p.d_model);
    allocating("the weights of " + p.describe(), weight_bytes, [&] {
        const auto w = random_weights<float>(p, a.seed).cast<double>();
        family_ops_of(p).save(a.out + "/weights", p, w);
    });
    allocating("the input of " + p.describe(), input_bytes, [&] {
        const auto x = random_values<double>(p.batch * p.n_q * p.d_model, a.seed * 8 + 100);
        npy::save(a.out + "/x.npy", {p.batch, p.n_q, p.d_model}, x.data());
    });
    std::printf("wrote %s/weights/*.npy and %s/x.npy for %s, seed %llu\n", a.out.c_str(), a.out.c_str(),
                p.describe().c_str(), (unsigned long long)a.seed);
}

} // namespace

void add_init(CLI::App& app) {
    auto a = std::make_shared<init_args>();
    auto* cmd = app.add_subcommand("init", "write random weights and an input as .npy files");
    cmd->add_option("--d-model", a->p.d_model, "model width")->capture_default_str()->each([a](const std::string&) {
        a->d_model_given = true;
    });
    cmd->add_option("--heads", a->p.heads, "query heads H")->capture_default_str()->each([a](const std::string&) {
        a->heads_given = true;
    });
    cmd->add_option("--kv-heads", a->p.kv_heads, "key/value heads G (default H)");
    cmd->add_option("--seq", a->p.n_q, "sequence length N")->capture_default_str();
    cmd->add_option("--batch", a->p.batch, "batch B")->capture_default_str();
    cmd->add_flag("--bias", a->p.bias, "include projection biases");
    cmd->add_option("--seed", a->seed, "random seed")->capture_default_str();
    add_family_flags(cmd, a->family);
    cmd->add_option("--out", a->out, "output directory")->required()->check(output_dir());
    cmd->callback([a] { init(*a); });
}

} // namespace attn::cli
