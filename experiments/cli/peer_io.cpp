// attnbench peer-io: the C++ side of a peer (another library's attention, run by the Python
// runners in experiments/peers/). For one case it writes the inputs the harness would draw
// (same seed, same numbers) as .npy files; with --judge it checks the peer's output against the
// fp64 reference under the suite's one tolerance policy (attn.check), on the last query rows of
// every sequence as the harness does. So a peer computes no formula and judges nothing itself: a
// wrong scale or a key/value head mix-up in a peer is a failed judgement here, exit status 1; its
// times become figures in the report (attn.figures), by the C++ that makes ours.
//
// Files (core and decode: the attention core; decode is one query row over the L+1 cached keys):
//   q.npy [B, N_q, H, d], k.npy and v.npy [B, N_kv, G, d], float32; query head h reads
//   key/value head floor(h G / H).
//   layer: x.npy [B, N, d_model] (self-attention: the queries' and keys' input are the same
//   tensor, the path a library's fused layer takes) and weights/ as PyTorch's state_dict.
// --id-only prints the case, defaults filled, with its id (attn::sweep_case::id()).
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>
#include <nlohmann/json.hpp>
#include "commands.hpp"
import attn.families;
import attn.cases;
import attn.check;
import attn.npy;
import attn.results;

namespace attn::cli {
namespace {

struct peer_io_args {
    std::string case_json, dir, judge;
    std::uint64_t seed = 1;
    double magnitude = 1.0;
    bool id_only = false;
};

/// --case JSON, or --case @FILE.
sweep_case parse_case(const std::string& arg) {
    const auto k = (arg.rfind("@", 0) == 0 ? read_json(arg.substr(1)) : parse_json(arg, "--case")).get<sweep_case>();
    const bool half = k.precision == dtype::bf16 || k.precision == dtype::f16;
    require(k.precision == dtype::f32 || (half && k.mode != mode::layer),
            "case " + k.id() + ": precision '" + std::string(enum_name(k.precision)) +
                "' is not one peers run (f32; bf16 and f16 for core and decode)");
    return k;
}

/// The case's inputs, drawn as attnbench-bench draws them; a layer case's keys' input is its
/// queries' input (self-attention), so a library's self-attention path is what gets judged.
/// bf16 and f16 cases: the inputs rounded to the format (held as float32, exactly), so the peer
/// and the reference it is judged against see the same numbers.
check::inputs inputs_of(const sweep_case& k, const problem& p, mode m, std::uint64_t seed, double magnitude) {
    auto in = check::make_inputs(p, m, seed, magnitude);
    if (m == mode::layer) {
        require(p.n_q == p.n_kv, "case " + k.id() + ": a layer peer runs self-attention (n_kv = n_q)");
        in.x_kv = in.x_q;
    }
    if (k.precision == dtype::bf16) return check::rounded<bf16>(in);
    if (k.precision == dtype::f16) return check::rounded<f16>(in);
    return in;
}

void write_inputs(const problem& p, mode m, const check::inputs& in, const peer_io_args& a) {
    if (m == mode::core) {
        npy::save(a.dir + "/q.npy", {p.batch, p.n_q, p.heads, p.qk_dim()}, in.q.data());
        npy::save(a.dir + "/k.npy", {p.batch, p.n_kv, p.kv_heads, p.qk_dim()}, in.k.data());
        npy::save(a.dir + "/v.npy", {p.batch, p.n_kv, p.kv_heads, p.v_dim()}, in.v.data());
    } else {
        npy::save(a.dir + "/x.npy", {p.batch, p.n_q, p.d_model}, in.x_q.data());
        family_ops_of(p).save(a.dir + "/weights", p, in.w.cast<double>());
    }
}

/// The peer's output (float32: a bf16/f16 peer's output widened, exactly) against the reference
/// under the case's precision's bound (fp32 arithmetic plus, for bf16 and f16, the output's
/// rounding to the format); prints one line, returns whether it passed.
bool judge(const sweep_case& k, const problem& p, mode m, const check::inputs& in, const std::string& path) {
    const auto y = npy::load(path);
    const std::size_t width = m == mode::layer ? p.d_model : p.o_width();
    std::size_t n = 1;
    for (auto s : y.shape) n *= s;
    require(y.type == npy::dtype::f32, path + ": the peer's output must be float32");
    require(n == p.batch * p.n_q * width, path + ": holds " + std::to_string(n) + " values, the case's output has " +
                                              std::to_string(p.batch * p.n_q * width) + " ([B, N_q, " +
                                              std::to_string(width) + "])");
    const std::vector<float> out(y.values.begin(), y.values.end());
    if (const std::size_t bad = check::non_finite_count(out); bad > 0) { // never a silent NaN
        std::printf("%s: %s: %s\n", k.id().c_str(), k.variant.c_str(),
                    check::non_finite_message(bad, out.size(), check::largest_magnitude(in), k.precision).c_str());
        return false;
    }
    const std::size_t rows = 16;
    const auto prec = to_precision(k.precision);
    const auto tail = check::tail_inputs(p, m, in, rows);
    auto e = check::expect(check::tail_problem(p, rows), m, tail, prec);
    // a bf16/f16 peer may store its attention weights in the format before P V (PyTorch's flash
    // kernel does), a rounding our kernels do not make: charged on top of the format's bound
    if (prec == precision::bf16 || prec == precision::f16)
        check::charge_stored_weights(e, check::tail_problem(p, rows), tail, prec);
    const auto met =
        check::compare(check::tail_rows(out, p, width, rows), e.ref, e.bound, check::unit_roundoff<float>(), e.store);
    std::printf("%s: %s %s the fp64 reference: max abs error %.3g, %.3g x the %s bound\n", k.id().c_str(),
                k.variant.c_str(), met.pass ? "matches" : "DIFFERS FROM", met.max_abs, met.ratio,
                std::string(enum_name(k.precision)).c_str());
    return met.pass;
}

void peer_io(const peer_io_args& a) {
    require(std::isfinite(a.magnitude) && a.magnitude > 0 && a.magnitude <= 1e3,
            "peer-io: --magnitude " + std::to_string(a.magnitude) + " is not a finite number in (0, 1000]");
    const auto k = parse_case(a.case_json);
    if (a.id_only) { // the case with its defaults filled and its id, for the runners to file it by
        nlohmann::json j = k;
        j["id"] = k.id();
        std::printf("%s\n", j.dump().c_str());
        return;
    }
    require(!a.dir.empty(), "peer-io: --dir is required (where the inputs go, or the judged inputs are drawn for)");
    const problem p = k.shape();
    const auto m = k.mode == mode::layer ? mode::layer : mode::core;
    const auto in = inputs_of(k, p, m, a.seed, a.magnitude * k.magnitude);
    if (!a.judge.empty()) {
        if (!judge(k, p, m, in, a.judge)) throw exit_status{1};
        return;
    }
    write_inputs(p, m, in, a);
}

} // namespace

void add_peer_io(CLI::App& app) {
    auto a = std::make_shared<peer_io_args>();
    auto* cmd =
        app.add_subcommand("peer-io", "a peer's inputs for one case as .npy files, or --judge its output against fp64");
    cmd->add_option("--case", a->case_json, "the case as JSON (attn.cases), or @FILE")->required();
    cmd->add_option("--dir", a->dir, "where the inputs go");
    cmd->add_flag("--id-only", a->id_only, "print the case (defaults filled) and its id as JSON, write nothing");
    cmd->add_option("--judge", a->judge,
                    "the peer's output (.npy, float32, [B, N_q, width]): check it, exit 1 if wrong");
    cmd->add_option("--seed", a->seed, "input seed (as attnbench-bench's)")->capture_default_str();
    cmd->add_option("--magnitude", a->magnitude,
                    "a factor on the case's input magnitude (queries and keys, or a layer's inputs, drawn in [-M, M] "
                    "times it: scores M^2 times larger), for judging a peer at larger scores")
        ->capture_default_str(); // finite by strict_values; (0, 1000] checked by peer_io
    cmd->callback([a] { peer_io(*a); });
}

} // namespace attn::cli
