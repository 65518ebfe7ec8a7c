// attnbench run: one layer on NumPy inputs with PyTorch-named weights, written back as .npy.
#include <cstdio>
#include <string>
#include <vector>
#include "commands.hpp"
import attn.variants;
import attn.npy;

namespace attn::cli {
namespace {

struct run_args {
    std::string variant = "naive", weights_dir, input, kv_input, out, precision = "f32";
    std::size_t heads = 0, kv_heads = 0;
    bool causal = false;
    int threads = 1;
};

template <class T>
std::vector<T> narrow(const std::vector<double>& v) {
    return {v.begin(), v.end()};
}

template <class T>
void run_as(const variant& var, const problem& p, const weights<double>& w, const npy::array& x, const npy::array& xkv,
            const run_args& a) {
    require(var.supports<T>(), "variant '" + var.name + "' does not run in " + a.precision);
    const auto wt = w.cast<T>();
    const auto xq = narrow<T>(x.values), xk = narrow<T>(xkv.values);
    std::vector<T> y(p.batch * p.n_q * p.d_model);
    layer_workspace<T> ws;
    run_options opt;
    opt.threads = a.threads;
    run_layer<T>(var, p, wt, xq.data(), xk.data(), y.data(), opt, ws);
    npy::save(a.out, x.shape, y.data());
}

void run(const run_args& a) {
    const variant& var = find_variant(a.variant);
    const npy::array x = npy::load(a.input);
    require(x.shape.size() == 2 || x.shape.size() == 3,
            a.input + ": shape " + npy::shape_string(x.shape) + ", expected [B, N, d_model] or [N, d_model]");
    const npy::array xkv = a.kv_input.empty() ? x : npy::load(a.kv_input);
    require(xkv.shape.size() == x.shape.size() && xkv.shape.front() == x.shape.front() &&
                xkv.shape.back() == x.shape.back(),
            a.kv_input + ": shape " + npy::shape_string(xkv.shape) + " does not match the input's batch and d_model " +
                npy::shape_string(x.shape));
    const bool batched = x.shape.size() == 3;
    problem p;
    p.batch = batched ? x.shape[0] : 1;
    p.n_q = x.shape[batched ? 1 : 0];
    p.n_kv = xkv.shape[batched ? 1 : 0];
    p.d_model = x.shape.back();
    p.heads = a.heads;
    p.kv_heads = a.kv_heads ? a.kv_heads : a.heads;
    p.causal = a.causal;
    require(p.heads % p.kv_heads == 0,
            "heads=" + std::to_string(p.heads) + " is not divisible by kv_heads=" + std::to_string(p.kv_heads));
    const weights<double> w = npy::load_state_dict(a.weights_dir, p);
    p.validate();
    require_finite(x.values, a.input);
    require_finite(xkv.values, a.kv_input.empty() ? a.input : a.kv_input);
    if (a.precision == "f64")
        run_as<double>(var, p, w, x, xkv, a);
    else
        run_as<float>(var, p, w, x, xkv, a);
    std::printf("wrote %s: %s output of %s, variant %s, %s\n", a.out.c_str(), npy::shape_string(x.shape).c_str(),
                p.describe().c_str(), var.name.c_str(), a.precision.c_str());
}

} // namespace

void add_run(CLI::App& app) {
    auto a = std::make_shared<run_args>();
    auto* cmd = app.add_subcommand("run", "run one attention layer on .npy inputs with PyTorch-named weights");
    cmd->add_option("--variant", a->variant, "implementation (see `attnbench list`)")->capture_default_str();
    cmd->add_option("--weights", a->weights_dir, "directory of nn.MultiheadAttention state_dict .npy files")
        ->required();
    cmd->add_option("--input", a->input, "query input, [B, N, d_model] or [N, d_model], float32/float64")->required();
    cmd->add_option("--kv-input", a->kv_input, "key/value input for cross-attention (default: --input)");
    cmd->add_option("--heads", a->heads, "query heads H")->required()->check(CLI::Range(1, 1 << 20));
    cmd->add_option("--kv-heads", a->kv_heads, "key/value heads G (default H)")->check(CLI::Range(1, 1 << 20));
    cmd->add_flag("--causal", a->causal, "bottom-right aligned causal mask");
    cmd->add_option("--precision", a->precision, "f32 or f64")
        ->check(CLI::IsMember({"f32", "f64"}))
        ->capture_default_str();
    cmd->add_option("--threads", a->threads, "threads for threaded variants")->check(threads_in());
    cmd->add_option("--out", a->out, "output .npy")->required()->check(output_file());
    cmd->callback([a] { run(*a); });
}

} // namespace attn::cli
