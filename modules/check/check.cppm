// attn.check -- is a variant computing the same function as the fp64 reference? One tolerance
// policy, used by `attnbench check` and the tests alike:
//  - :inputs  the inputs of a check (drawn from a seed, rounded to a storage format, tails);
//  - :expect  the fp64 reference output and each element's bound (the policy's derivation);
//  - attn.bounds, the bound's building blocks (context and output bounds), which the families
//    use for their layers' bounds; the grids `attnbench check` runs are attn.cases';
// and here: running a variant, comparing its output with the expectation, the verdict.
module;
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <string>
#include <utility>
#include <vector>
export module attn.check;
export import :inputs;
export import :expect;
export import attn.bounds;
import attn.core;
import attn.families;
import attn.reference;

export namespace attn::check {

/// How far a variant's output is from the fp64 reference (rounded to the variant's precision).
struct metrics {
    double max_abs = 0;    ///< max |out - ref|
    double max_rel = 0;    ///< max |out - ref| / |ref| over elements with |ref| > 0
    double nmse = 0;       ///< sum (out - ref)^2 / sum ref^2
    double max_ulp = 0;    ///< max distance in units in the last place of the variant's type
    double ratio = 0;      ///< max |out - ref| / bound: <= 1 passes
    std::size_t worst = 0; ///< flat index of the element with the largest ratio
    bool pass = true;
    double unrounded_max_abs = 0; ///< bf16/f16: max |out - fp64 on the unrounded inputs| (else = max_abs)
    double unrounded_max_rel = 0; ///< the same relative to that reference's max |element|
};

/// Distance in ulps between two values of type T (via their ordered bit patterns).
template <class T>
double ulp_distance(T a, T b) {
    using U = std::conditional_t<sizeof(T) == 2, std::int16_t,
                                 std::conditional_t<sizeof(T) == 4, std::int32_t, std::int64_t>>;
    if (std::isnan(double(a)) || std::isnan(double(b))) return std::numeric_limits<double>::infinity();
    auto ordered = [](T x) {
        const U i = std::bit_cast<U>(x);
        return i < 0 ? std::numeric_limits<U>::min() - i : i;
    };
    const double d = double(ordered(a)) - double(ordered(b));
    return std::abs(d);
}

/// `bound` is per unit roundoff; `u` is the variant's plus the reference's; `store` (absolute,
/// may be empty) is what rounding to a storage format adds.
template <class T>
metrics compare(const std::vector<T>& out, const std::vector<double>& ref, const std::vector<double>& bound_per_u,
                double u, const std::vector<double>& store = {}) {
    metrics m;
    double num = 0, den = 0;
    for (std::size_t i = 0; i < out.size(); ++i) {
        const double o = double(out[i]), r = ref[i], e = std::abs(o - r);
        const double err = std::isnan(o) ? std::numeric_limits<double>::infinity() : e;
        m.max_abs = std::max(m.max_abs, err);
        if (r != 0) m.max_rel = std::max(m.max_rel, err / std::abs(r));
        num += err * err;
        den += r * r;
        m.max_ulp = std::max(m.max_ulp, ulp_distance<T>(out[i], T(r)));
        const double bound = u * bound_per_u[i] + (store.empty() ? 0.0 : store[i]);
        const double ratio = bound > 0 ? err / bound : (err > 0 ? std::numeric_limits<double>::infinity() : 0.0);
        if (ratio > m.ratio || i == 0) {
            m.ratio = ratio;
            m.worst = i;
        }
    }
    m.nmse = den > 0 ? num / den : num;
    m.pass = m.ratio <= 1.0;
    m.unrounded_max_abs = m.max_abs;
    m.unrounded_max_rel = m.max_rel;
    return m;
}

/// What a device variant prepares a core or layer case from: `in`'s arrays (already rounded to
/// the storage type by rounded<T> for bf16 and f16, so the device's rounding changes nothing).
inline device_inputs device_inputs_of(const problem& p, mode m, dtype t, const inputs& in) {
    device_inputs d;
    d.mode = m;
    d.type = t;
    d.p = p;
    if (m == mode::core) {
        d.q = in.q;
        d.k = in.k;
        d.v = in.v;
    } else {
        d.x_q = in.x_q;
        d.x_kv = in.x_kv;
        for (const auto& w : in.w.t) d.weights.emplace_back(w);
    }
    return d;
}

/// Runs `var` on `in` at precision T and returns its output: through its kernel sets, or on its
/// device (prepared, run once, read back) for a device variant.
template <class T>
std::vector<T> run(const variant& var, const problem& p, mode m, const inputs& in, const run_options& opt) {
    auto cast = [](const std::vector<float>& v) {
        std::vector<T> t(v.size());
        for (std::size_t i = 0; i < v.size(); ++i) t[i] = T(v[i]);
        return t;
    };
    if (var.device) {
        const auto r = var.device.prepare(device_inputs_of(p, m, precision_of<T>, in), opt);
        r->run();
        return cast(r->output());
    }
    if (m == mode::core) {
        const auto q = cast(in.q), k = cast(in.k), v = cast(in.v);
        std::vector<T> out(p.batch * p.n_q * p.o_width(), T(-777)); // garbage a kernel must overwrite
        var.get<T>().core(p,
                          {interleaved_heads<const T>(q.data(), p.batch, p.n_q, p.heads, p.qk_dim()),
                           interleaved_heads<const T>(k.data(), p.batch, p.n_kv, p.kv_heads, p.qk_dim()),
                           interleaved_heads<const T>(v.data(), p.batch, p.n_kv, p.kv_heads, p.v_dim()),
                           interleaved_heads<T>(out.data(), p.batch, p.n_q, p.heads, p.v_dim())},
                          opt);
        return out;
    }
    weights<T> w;
    for (const auto& t : in.w.t) w.t.push_back(cast(t));
    const auto xq = cast(in.x_q), xkv = cast(in.x_kv);
    std::vector<T> y(p.batch * p.n_q * p.d_model, T(-777));
    layer_buffers<T> ws;
    run_layer<T>(var, p, w, xq.data(), xkv.data(), y.data(), opt, ws);
    return y;
}

/// Unit roundoff of T's arithmetic (fp32 for bf16 and f16) plus the fp64 reference's own.
template <class T>
constexpr double unit_roundoff() {
    return attn::unit_roundoff(precision_of<compute_t<T>>) + 0x1.0p-53;
}

/// `var` at precision T on prepared inputs (rounded<T> for bf16/f16) and expectation.
template <class T>
metrics check_prepared(const variant& var, const problem& p, mode m, const inputs& in, const expectation& e,
                       const run_options& opt) {
    return compare(run<T>(var, p, m, in, opt), e.ref, e.bound, unit_roundoff<T>(), e.store);
}

/// `var` at bf16 or f16 T on inputs r (rounded<T> already) against e = expect(p, m, r, T), with
/// the roundings var declares beyond fp32 arithmetic charged (charge_roundings): the one path of
/// a half check, `attnbench check`'s and check_case's. Returns the output too, for add_unrounded.
template <class T>
std::pair<metrics, std::vector<T>> check_rounded(const variant& var, const problem& p, mode m, const inputs& r,
                                                 expectation e, const run_options& opt) {
    charge_roundings(e, var, p, m, precision_of<T>, r);
    auto out = run<T>(var, p, m, r, opt);
    return {compare(out, e.ref, e.bound, unit_roundoff<T>(), e.store), std::move(out)};
}

/// The error of `out` against the fp64 reference on the unrounded inputs (informational).
template <class T>
void add_unrounded(metrics& r, const std::vector<T>& out, const std::vector<double>& ref_unrounded) {
    double mag = 0, err = 0;
    for (std::size_t i = 0; i < out.size(); ++i) {
        mag = std::max(mag, std::abs(ref_unrounded[i]));
        err = std::max(err, std::abs(double(out[i]) - ref_unrounded[i]));
    }
    r.unrounded_max_abs = err;
    r.unrounded_max_rel = mag > 0 ? err / mag : err;
}

/// One variant on one problem at precision T, against the fp64 reference: for bf16 and f16 on
/// the inputs rounded to T, with the error against the unrounded inputs' reference beside it.
/// `p` is a layer problem: core mode checks its family's core problem (attn.families'
/// attention_problem; the layer problem itself for the q/k/v family).
template <class T>
metrics check_case(const variant& var, const problem& layer, mode m, const run_options& opt, std::uint64_t seed,
                   double magnitude = 1.0) {
    const problem p = m == mode::core ? attention_problem(layer) : layer;
    const inputs in = make_inputs(p, m, seed, magnitude);
    if constexpr (!is_half<T>) {
        return check_prepared<T>(var, p, m, in, expect(p, m, in), opt);
    } else {
        const inputs r = rounded<T>(in);
        auto [res, out] = check_rounded<T>(var, p, m, r, expect(p, m, r, precision_of<T>), opt);
        add_unrounded(res, out, reference_output(p, m, in));
        return res;
    }
}

/// How many of `out`'s values are not finite (NaN or Inf).
template <class T>
std::size_t non_finite_count(const std::vector<T>& out) {
    return std::size_t(std::count_if(out.begin(), out.end(), [](T x) { return !std::isfinite(double(x)); }));
}

/// The one line for non-finite results from finite inputs (every variant's, every peer's): how
/// many, the inputs' largest magnitude, the likely cause -- the scores, products of two inputs
/// summed over d_qk, overflow the arithmetic's range (fp32's 3.4e38 for f32, bf16 and f16; f16
/// storage's 65504 for what is stored) -- and the way out.
inline std::string non_finite_message(std::size_t count, std::size_t total, double largest_input, dtype t) {
    char b[400];
    std::snprintf(b, sizeof b,
                  "%zu of %zu output values are not finite (NaN or Inf) from finite inputs (largest |input| %.3g): "
                  "the scores likely overflow %s's range; run with --precision f64, or scale the inputs down",
                  count, total, largest_input, t == dtype::f16 ? "f16 storage or fp32 arithmetic" : "fp32 arithmetic");
    return b;
}

/// The largest magnitude among a check's inputs (queries, keys, values, or a layer's inputs and weights).
inline double largest_magnitude(const inputs& in) {
    double m = 0;
    auto scan = [&](const std::vector<float>& v) {
        for (const float e : v) m = std::max(m, double(std::abs(e)));
    };
    for (const auto* v : {&in.q, &in.k, &in.v, &in.x_q, &in.x_kv}) scan(*v);
    for (const auto& t : in.w.t) scan(t);
    return m;
}

/// The last `rows` rows of every sequence of an output [B, n_q, width].
template <class T>
std::vector<T> tail_rows(const std::vector<T>& out, const problem& p, std::size_t width, std::size_t rows) {
    const std::size_t n = std::min(rows, p.n_q);
    std::vector<T> r;
    r.reserve(p.batch * n * width);
    for (std::size_t b = 0; b < p.batch; ++b) {
        const auto first = out.begin() + long((b * p.n_q + p.n_q - n) * width);
        r.insert(r.end(), first, first + long(n * width));
    }
    return r;
}

} // namespace attn::check
