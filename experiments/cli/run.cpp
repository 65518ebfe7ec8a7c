// attnbench run: one layer on NumPy inputs with PyTorch-named weights, written back as .npy.
// The inputs and weights (float16, float32 or float64 files, read exactly) are rounded once to the
// run's storage type, to nearest even (attn::round_to: double -> T directly, never through float).
// So a float16 file runs in f16 as it is, and in bf16 each value is rounded from its exact f16
// value (bf16 keeps 8 significant bits to f16's 11, and f16's range lies inside bf16's).
// Finite inputs whose output is not finite (scores past fp32's range) are an error, exit 1.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>
#include "commands.hpp"
#include "numbers.hpp"
#include "family_flags.hpp"
import attn.check;
import attn.families;
import attn.variants;
import attn.npy;

namespace attn::cli {
namespace {

struct run_args {
    std::string variant, device = "cpu", weights_dir, input, kv_input, out, precision = "f32";
    std::size_t heads = 0, kv_heads = 0;
    bool causal = false;
    std::size_t window = 0;
    int threads = 1;
    family_flags family;
};

/// The file's values (already exact doubles) rounded once to T, to nearest even.
template <class T>
std::vector<T> narrow(const std::vector<double>& v) {
    std::vector<T> out(v.size());
    for (std::size_t i = 0; i < v.size(); ++i) out[i] = round_to<T>(v[i]);
    return out;
}

/// The largest magnitude among the layer's inputs and weights.
double largest_input(const weights<double>& w, const npy::array& x, const npy::array& xkv) {
    double m = 0;
    auto scan = [&](const std::vector<double>& v) {
        for (const double e : v) m = std::max(m, std::abs(e));
    };
    scan(x.values);
    scan(xkv.values);
    for (const auto& t : w.t) scan(t);
    return m;
}

/// An output holding NaN or Inf from finite inputs (run() refused non-finite ones) is an error,
/// one line, exit 1, nothing written: never a silent NaN.
template <class T>
void refuse_non_finite(const std::vector<T>& y, double largest, dtype t) {
    if (const std::size_t n = check::non_finite_count(y); n > 0) {
        std::fprintf(stderr, "attnbench: error: %s\n", check::non_finite_message(n, y.size(), largest, t).c_str());
        throw exit_status{1};
    }
}

/// Runs the layer in storage type T. The output file is float64 for f64, float32 otherwise: a
/// bf16/f16 result is widened to float32 exactly, so its values are bf16/f16 numbers.
template <class T>
void run_as(const variant& var, const problem& p, const weights<double>& w, const npy::array& x, const npy::array& xkv,
            const run_args& a) {
    require_serves(var, p, mode::layer, precision_of<T>, var.serves.device);
    weights<T> wt;
    for (const auto& t : w.t) wt.t.push_back(narrow<T>(t));
    const auto xq = narrow<T>(x.values), xk = narrow<T>(xkv.values);
    if (var.device) { // on its device: the T values, as fp32, copied there once, run, read back (fp32)
        const auto wide = [](const std::vector<T>& v) { return std::vector<float>(v.begin(), v.end()); };
        std::vector<std::vector<float>> w32;
        for (const auto& t : wt.t) w32.push_back(wide(t));
        const std::vector<float> xq32 = wide(xq), xk32 = wide(xk);
        device_inputs d;
        d.mode = mode::layer;
        d.type = precision_of<T>;
        d.p = p;
        d.x_q = xq32;
        d.x_kv = xk32;
        for (const auto& t : w32) d.weights.emplace_back(t);
        run_options opt;
        const auto r = var.device.prepare(d, opt);
        r->run();
        const std::vector<float> y = r->output();
        refuse_non_finite(y, largest_input(w, x, xkv), precision_of<T>);
        npy::save(a.out, x.shape, y.data());
        return;
    }
    std::vector<T> y(p.batch * p.n_q * p.d_model);
    layer_buffers<T> ws;
    run_options opt;
    opt.threads = a.threads;
    run_layer<T>(var, p, wt, xq.data(), xk.data(), y.data(), opt, ws);
    refuse_non_finite(y, largest_input(w, x, xkv), precision_of<T>);
    if constexpr (std::is_same_v<T, double> || std::is_same_v<T, float>)
        npy::save(a.out, x.shape, y.data());
    else
        npy::save(a.out, x.shape, std::vector<float>(y.begin(), y.end()).data());
}

void run(const run_args& a) {
    const device dev = parse_enum<device>(a.device);
    // the device's plainest variant unless one is named; a named one must compute on --device
    const variant& var = find_variant(!a.variant.empty() ? a.variant : dev == device::cpu ? "naive" : "cuda-tiled");
    require(var.serves.device == dev, "variant '" + var.name + "' computes on the " +
                                          std::string(enum_name(var.serves.device)) + " device, not " + a.device +
                                          " (--device)");
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
    p.window = a.window;
    require(!a.window || a.causal, "--window " + std::to_string(a.window) +
                                       " needs --causal (a sliding window looks back "
                                       "from each query)");
    if (names_latent(a.family)) {
        require(!a.kv_heads, "--kv-heads is not MLA's: its keys and values are per query head");
        require(a.heads || !a.family.config.empty(), "--heads is required (or --config)");
        apply_family_flags(a.family, p, true, a.heads > 0);
    } else {
        apply_family_flags(a.family, p, true, true);
        require(a.heads > 0, "--heads is required");
    }
    require(p.heads % p.kv_heads == 0,
            "heads=" + std::to_string(p.heads) + " is not divisible by kv_heads=" + std::to_string(p.kv_heads));
    const weights<double> w = family_ops_of(p).load(a.weights_dir, p);
    p.validate();
    require_finite(x.values, a.input);
    require_finite(xkv.values, a.kv_input.empty() ? a.input : a.kv_input);
    switch (parse_enum<precision>(a.precision)) {
    case precision::f64:
        run_as<double>(var, p, w, x, xkv, a);
        break;
    case precision::f32:
        run_as<float>(var, p, w, x, xkv, a);
        break;
    case precision::bf16:
        run_as<bf16>(var, p, w, x, xkv, a);
        break;
    case precision::f16:
        run_as<f16>(var, p, w, x, xkv, a);
        break;
    case precision::int8:
        throw error("--precision int8 is a key/value cache type: a layer computes in f64, f32, bf16 or f16");
    }
    std::printf("wrote %s: %s output of %s, variant %s, %s\n", a.out.c_str(), npy::shape_string(x.shape).c_str(),
                p.describe().c_str(), var.name.c_str(), a.precision.c_str());
}

} // namespace

void add_run(CLI::App& app) {
    auto a = std::make_shared<run_args>();
    auto* cmd = app.add_subcommand("run", "run one attention layer on .npy inputs with PyTorch-named weights");
    cmd->add_option("--variant", a->variant,
                    "implementation (see `attnbench list`; default: naive, or cuda-tiled with --device cuda)");
    cmd->add_option("--device", a->device, "where it computes: cpu, or cuda (the CUDA kernels: inputs copied there)")
        ->check(CLI::IsMember({"cpu", "cuda"}))
        ->capture_default_str();
    cmd->add_option("--weights", a->weights_dir,
                    "directory of state_dict .npy files: nn.MultiheadAttention's, or DeepSeek's MLA names "
                    "(wq or wq_a/q_norm/wq_b, wkv_a, kv_norm, wkv_b, wo .weight) with --family mla")
        ->required();
    cmd->add_option("--input", a->input, "query input, [B, N, d_model] or [N, d_model], float16/float32/float64")
        ->required();
    cmd->add_option("--kv-input", a->kv_input, "key/value input for cross-attention (default: --input)");
    cmd->add_option("--heads", a->heads, "query heads H (required but with --config)")->check(CLI::Range(1, 1 << 20));
    cmd->add_option("--kv-heads", a->kv_heads, "key/value heads G (default H)")->check(CLI::Range(1, 1 << 20));
    cmd->add_flag("--causal", a->causal, "bottom-right aligned causal mask");
    cmd->add_option("--window", a->window,
                    "sliding window W: each query sees the W keys ending at its own (itself included; 0: none); "
                    "needs --causal")
        ->check(window_in(max_window));
    add_family_flags(cmd, a->family);
    cmd->add_option("--precision", a->precision,
                    "storage type: f64, f32, bf16 or f16 (inputs and weights rounded to it, to nearest even; "
                    "products and softmax in fp32 for bf16/f16; output .npy float64 for f64, else float32)")
        ->check(CLI::IsMember([] {
            std::vector<std::string> names; // the compute precisions of the one list of storage types
            for (const auto p : all_precisions) names.emplace_back(enum_name(p));
            return names;
        }()))
        ->capture_default_str();
    cmd->add_option("--threads", a->threads, "threads for threaded variants")->check(threads_in());
    cmd->add_option("--out", a->out, "output .npy")->required()->check(output_file());
    cmd->callback([a] { run(*a); });
}

} // namespace attn::cli
