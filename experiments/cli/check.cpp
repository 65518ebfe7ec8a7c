// attnbench check: every variant (or --variant) against the fp64 reference over a grid, plus
// the identities the seed documents rely on. Exit status 1 when anything fails. Mode `decode`:
// decode steps over a key/value cache against the rows of the full causal forward (attn.decode).
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>
#include <nlohmann/json.hpp>
#include "commands.hpp"
#include "numbers.hpp"
#include "output.hpp"
import attn.grids;
import attn.variants;
import attn.check;
import attn.identities;
import attn.decode;
import attn.cases;

namespace attn::cli {
namespace {

struct check_args {
    std::vector<std::string> variants;
    std::vector<std::size_t> d_model, heads, kv_heads, seq, batch, window;
    std::string causal = "both", mode = "all";
    std::vector<std::string> precisions{"f32", "f64"}; ///< "all": f32, f64, bf16, f16
    int threads = 2;
    std::uint64_t seed = 1;
    std::string device; ///< whose variants run (all of that device's; none given: the named variants' own, else cpu)
    bool json = false;
    std::string out; ///< a directory: check.json (with metadata), check.csv, check_identities.csv
};

struct row {
    std::string variant, precision, mode, problem;
    check::metrics m;
    std::size_t order = 0;
    attn::family family{}; ///< the problem's, set once its rows are in (check.json's family and form)
    attn::form form{};
};

/// Sets the family and form of rows[first..] from the problem they checked.
void tag_rows(std::vector<row>& rows, std::size_t first, const problem& p) {
    for (std::size_t i = first; i < rows.size(); ++i) {
        rows[i].family = p.family();
        rows[i].form = p.form;
    }
}

bool custom_grid(const check_args& a) {
    return !(a.d_model.empty() && a.heads.empty() && a.kv_heads.empty() && a.seq.empty() && a.batch.empty() &&
             a.window.empty());
}

/// The shapes to check: the embedded grid, or the flags' grid expanded by attn::expand (the one
/// grid expansion; a flag left out takes d_model 64, H 4, G = H, N 128, batch 1). The grid has
/// no variants (shapes alone): each shape is checked for every variant, mode and precision;
/// combinations the problem refuses are skipped with a note.
std::vector<check::grid_case> grid_from(const check_args& a) {
    if (!custom_grid(a)) return check::default_grid();
    auto or_default = [](const std::vector<std::size_t>& v, std::size_t d) { return v.empty() ? std::vector{d} : v; };
    grid g;
    g.name = "check";
    g.variants = {};
    g.d_model = or_default(a.d_model, 64);
    g.heads = or_default(a.heads, 4);
    g.kv_heads = or_default(a.kv_heads, 0);
    g.seq = or_default(a.seq, 128);
    g.batch = or_default(a.batch, 1);
    g.threads = {1};
    g.causal = a.causal == "on" ? std::vector{true} : a.causal == "off" ? std::vector{false} : std::vector{false, true};
    g.window = or_default(a.window, 0);
    // a window needs the causal mask: --window alone checks the causal cases
    const bool windowed = g.windowed();
    require(!windowed || a.causal != "off", "--window " +
                                                std::to_string(*std::max_element(g.window.begin(), g.window.end())) +
                                                " needs the causal mask (--causal on), not --causal off");
    if (windowed) g.causal = {true};
    std::string skipped;
    std::vector<check::grid_case> out;
    for (const auto& c : expand({g}, 1, &skipped)) out.push_back({c.shape(), c.magnitude});
    require(!out.empty(), "no valid problem in the grid (" + skipped + ")");
    if (!skipped.empty()) std::fprintf(stderr, "check: skipped impossible combinations, e.g.: %s\n", skipped.c_str());
    return out;
}

/// A narrow cache's row: the check against fp64 over the same cache, the unrounded cache's error beside it.
check::metrics row_metrics(const kv_check& r) {
    check::metrics m = r.same;
    m.unrounded_max_abs = r.unrounded.max_abs;
    m.unrounded_max_rel = r.unrounded.max_rel;
    return m;
}

void check_all(const check_args& a) {
    const bool dev_given = !a.device.empty();
    const device dev = dev_given ? parse_enum<device>(a.device) : device::cpu;
    std::vector<const variant*> vars;
    if (a.variants.empty())
        for (const auto& v : registry(dev)) vars.push_back(&v);
    else
        for (const auto& n : a.variants) vars.push_back(&find_variant(n));
    for (const variant* v : vars) // with --device, a variant of another device is a usage error naming both
        require(!dev_given || v->serves.device == dev, "variant '" + v->name + "' computes on the " +
                                                           std::string(enum_name(v->serves.device)) + " device, not " +
                                                           a.device + " (--device)");
    // a device variant (attn::device_kernels) runs what it does not refuse; its refusals are
    // counted and the first is said, and a check where it refused everything is an error
    std::size_t refused = 0;
    std::string first_refusal;
    auto device_serves = [&](const variant& v, const problem& p, mode m, dtype t) {
        const std::string why = refusal(v, p, m, t, v.serves.device);
        if (why.empty()) return true;
        ++refused;
        if (first_refusal.empty()) first_refusal = why;
        return false;
    };
    const auto grid = grid_from(a);
    std::vector<mode> modes = modes_of(parse_enum<check_modes>(a.mode));
    const bool decode = std::erase(modes, mode::decode) > 0; // decode rows are their own pass below
    run_options opt;
    opt.threads = a.threads;
    auto wants_name = [&](const std::string& name) {
        const auto& w = a.precisions;
        return std::find(w.begin(), w.end(), "all") != w.end() || std::find(w.begin(), w.end(), name) != w.end();
    };
    auto wants = [&](precision p) { return wants_name(std::string(enum_name(p))); };
    // decode rows in a narrow cache type: bf16, f16 (also --precision bf16/f16) and int8 (decode only)
    std::vector<kv_dtype> caches;
    for (const kv_dtype t : {kv_dtype::bf16, kv_dtype::f16, kv_dtype::int8})
        if (t == kv_dtype::int8 ? wants_name("int8") : wants(t == kv_dtype::bf16 ? precision::bf16 : precision::f16))
            caches.push_back(t);
    const bool named_int8 = std::find(a.precisions.begin(), a.precisions.end(), "int8") != a.precisions.end();
    require(decode || !named_int8,
            "--precision int8 is a key/value cache type: it applies to --mode decode or all only "
            "(--mode " +
                a.mode + ")");
    for (const variant* v : vars) { // a precision a variant cannot run is an error naming both
        if (v->device) continue;    // a device variant's refusals are per case (device_serves)
        for (const precision p : all_precisions)
            if (wants(p) && p != precision::f64) require_precision(*v, p);
        if (decode && !a.variants.empty()) // named: each must read every cache type asked for
            for (const kv_dtype t : caches) with_kv_storage(t, [&]<class S>(S) { require_kv_core<float, S>(*v); });
    }
    // every variant by default: those without a kv core skip the narrow caches
    auto reads = [](const variant& v, kv_dtype t) {
        return t == kv_dtype::bf16 ? bool(v.kv.bf16) : t == kv_dtype::f16 ? bool(v.kv.f16) : bool(v.kv.int8);
    };

    std::vector<row> rows;
    for (const auto& gc : grid) {
        for (auto m : modes) {
            const std::size_t first = rows.size();
            // inputs, weights and the fp64 reference's projections, in fp64
            const double bytes = 8.0 * (3 * double(gc.p.batch) * double(gc.p.n_q + gc.p.n_kv) * double(gc.p.d_model) +
                                        4 * double(gc.p.d_model) * double(gc.p.d_model));
            auto prepared = allocating("the inputs and fp64 reference of check case " + gc.p.describe(), bytes, [&] {
                auto in = check::make_inputs(gc.p, m, a.seed, gc.magnitude);
                auto e = check::expect(gc.p, m, in);
                return std::pair{std::move(in), std::move(e)};
            });
            const auto& in = prepared.first;
            const auto& e = prepared.second;
            std::string label = gc.p.describe();
            if (gc.magnitude != 1.0) label += " |input|<=" + std::to_string(int(gc.magnitude));
            for (const variant* v : vars) {
                if (v->device) {
                    if (wants(precision::f32) && device_serves(*v, gc.p, m, dtype::f32))
                        rows.push_back({v->name, "f32", std::string(enum_name(m)), label,
                                        check::check_prepared<float>(*v, gc.p, m, in, e, opt), 0});
                    continue;
                }
                if (wants(precision::f32) && v->supports<float>())
                    rows.push_back({v->name, "f32", std::string(enum_name(m)), label,
                                    check::check_prepared<float>(*v, gc.p, m, in, e, opt), 0});
                if (wants(precision::f64) && v->supports<double>())
                    rows.push_back({v->name, "f64", std::string(enum_name(m)), label,
                                    check::check_prepared<double>(*v, gc.p, m, in, e, opt), 0});
            }
            // bf16 and f16: the reference on the inputs rounded to the format, and beside it the
            // error against the unrounded inputs' reference (informational)
            const bool halves = wants(precision::bf16) || wants(precision::f16);
            const auto ref_unrounded = halves ? check::reference_output(gc.p, m, in) : std::vector<double>();
            auto half = [&]<class T>(const char* name) {
                const auto r = check::rounded<T>(in);
                const auto eh = check::expect(gc.p, m, r, precision_of<T>);
                for (const variant* v : vars) {
                    if (v->device && !device_serves(*v, gc.p, m, precision_of<T>)) continue;
                    auto [met, out] = check::check_rounded<T>(*v, gc.p, m, r, eh, opt);
                    check::add_unrounded(met, out, ref_unrounded);
                    rows.push_back({v->name, name, std::string(enum_name(m)), label, met, 0});
                }
            };
            if (wants(precision::bf16)) half.template operator()<bf16>("bf16");
            if (wants(precision::f16)) half.template operator()<f16>("f16");
            tag_rows(rows, first, gc.p);
        }
    }
    if (decode) {
        // Decode steps: after a prefill of L tokens, the step's output against the last row of the
        // full causal forward; for short contexts also L+1 steps from an empty cache, every row.
        std::vector<decode_case> cases;
        const bool custom = custom_grid(a);
        if (custom)
            for (const auto& gc : grid)
                if (gc.p.n_q == gc.p.n_kv && gc.p.causal) cases.push_back({gc.p, gc.p.n_kv - 1, gc.magnitude});
        if (!custom) cases = decode_grid();
        for (const auto& c : cases) {
            for (decode_fill fill : {decode_fill::prefill, decode_fill::steps}) {
                if (fill == decode_fill::steps && c.context > 300) continue; // the full forward is O(L^2)
                const std::size_t first = rows.size();
                const std::string label = c.layer.describe() + " L=" + std::to_string(c.context) + " " +
                                          decode_fill_name(fill) +
                                          (c.magnitude != 1.0 ? " |input|<=" + std::to_string(int(c.magnitude)) : "");
                for (const variant* v : vars) {
                    if (v->device) { // a device decodes over its cache: the step's core (the projections
                                     // around it are the host's), once a case, in every cache type it reads
                        if (fill != decode_fill::prefill) continue;
                        // asked about as the layer's step; checked on that step's core (MLA absorbed:
                        // one latent head whose values are the first d_c elements of its key rows)
                        const problem step = decode_problem(c.layer, c.context);
                        const decode_core core = decode_core_of(c.layer, c.context);
                        const std::string core_label = label + " (the step's core)";
                        for (const kv_dtype t : {kv_dtype::f32, kv_dtype::bf16, kv_dtype::f16, kv_dtype::int8}) {
                            const bool asked = t == kv_dtype::f32
                                                   ? wants(precision::f32)
                                                   : std::find(caches.begin(), caches.end(), t) != caches.end();
                            if (!asked || !device_serves(*v, step, mode::decode, t)) continue;
                            with_kv_storage(t, [&]<class S>(S) {
                                rows.push_back({v->name, std::string(enum_name(t)), "decode", core_label,
                                                row_metrics(check_decode_core<S>(*v, core, opt, a.seed, c.magnitude)),
                                                0});
                            });
                        }
                        continue;
                    }
                    if (wants(precision::f32) && v->supports<float>())
                        rows.push_back({v->name, "f32", "decode", label,
                                        check_decode<float>(*v, c.layer, c.context, fill, opt, a.seed, c.magnitude),
                                        0});
                    if (wants(precision::f64) && v->supports<double>())
                        rows.push_back({v->name, "f64", "decode", label,
                                        check_decode<double>(*v, c.layer, c.context, fill, opt, a.seed, c.magnitude),
                                        0});
                    // a narrow cache: against fp64 over the same rounded or dequantized cache (fp32's
                    // bound: the kernels compute in fp32), the error against the unrounded cache beside it
                    // a narrow rolling buffer's overwritten rows are gone: checked after a prefill only
                    const bool rolled = c.layer.window && c.context >= c.layer.window;
                    for (const kv_dtype t : caches) {
                        if (!reads(*v, t) || (rolled && fill == decode_fill::steps)) continue;
                        with_kv_storage(t, [&]<class S>(S) {
                            rows.push_back({v->name, std::string(enum_name(t)), "decode", label,
                                            row_metrics(check_decode_kv<S>(*v, c.layer, c.context, fill, opt, a.seed,
                                                                           c.magnitude)),
                                            0});
                        });
                    }
                }
                tag_rows(rows, first, c.layer);
            }
        }
    }
    if (refused) {
        require(!rows.empty(), "check --device " +
                                   std::string(enum_name(dev_given ? dev : vars.front()->serves.device)) +
                                   ": every case refused, e.g. " + first_refusal);
        std::fprintf(stderr, "check: %zu variant cases refused, e.g. %s\n", refused, first_refusal.c_str());
    }
    for (std::size_t i = 0; i < rows.size(); ++i) rows[i].order = i; // failures first, otherwise grid order
    std::sort(rows.begin(), rows.end(),
              [](const row& x, const row& y) { return x.m.pass != y.m.pass ? !x.m.pass : x.order < y.order; });
    const auto ids = check_identities(a.seed);
    const std::size_t failed =
        std::size_t(std::count_if(rows.begin(), rows.end(), [](const row& r) { return !r.m.pass; }));
    const std::size_t id_failed =
        std::size_t(std::count_if(ids.begin(), ids.end(), [](const auto& r) { return !r.pass; }));

    {
        nlohmann::ordered_json j;
        j["tolerance_policy"] =
            "per element |out-ref| <= u * bound(first-order forward error analysis; see modules/check/check.cppm)";
        j["threads"] = a.threads;
        j["seed"] = a.seed;
        for (const auto& r : rows)
            j["cases"].push_back({{"variant", r.variant},
                                  {"precision", r.precision},
                                  {"mode", r.mode},
                                  {"family", enum_name(r.family)},
                                  {"form", enum_name(r.form)},
                                  {"problem", r.problem},
                                  {"max_abs_error", r.m.max_abs},
                                  {"max_rel_error", r.m.max_rel},
                                  {"nmse", r.m.nmse},
                                  {"max_ulp", r.m.max_ulp},
                                  {"error_over_bound", r.m.ratio},
                                  {"max_abs_error_vs_unrounded", r.m.unrounded_max_abs},
                                  {"max_rel_error_vs_unrounded", r.m.unrounded_max_rel},
                                  {"pass", r.m.pass}});
        for (const auto& r : ids)
            j["identities"].push_back({{"identity", r.name},
                                       {"problem", r.problem},
                                       {"max_abs_diff", r.max_abs_diff},
                                       {"tolerance", r.tolerance},
                                       {"pass", r.pass}});
        j["failed"] = failed + id_failed;
        if (!a.out.empty()) {
            j["metadata"] = metadata("check", a.seed, a.threads);
            write_atomic(a.out, "check.json", j.dump(2) + "\n");
            write_atomic(a.out, "check.csv", rows_csv(j.value("cases", nlohmann::ordered_json::array())));
            write_atomic(a.out, "check_identities.csv",
                         rows_csv(j.value("identities", nlohmann::ordered_json::array())));
        }
        if (a.json) std::printf("%s\n", j.dump(2).c_str());
    }
    if (!a.json) {
        std::printf("%-8s %-4s %-6s %10s %10s %10s %9s %9s %10s %-4s  %s\n", "variant", "prec", "mode", "max_abs",
                    "max_rel", "NMSE", "max_ulp", "err/bound", "abs_unrnd", "ok", "problem");
        for (const auto& r : rows)
            std::printf("%-8s %-4s %-6s %10.2e %10.2e %10.2e %9.0f %9.3f %10.2e %-4s  %s\n", r.variant.c_str(),
                        r.precision.c_str(), r.mode.c_str(), r.m.max_abs, r.m.max_rel, r.m.nmse, r.m.max_ulp, r.m.ratio,
                        r.m.unrounded_max_abs, r.m.pass ? "pass" : "FAIL", r.problem.c_str());
        std::printf("\nidentities (fp64 reference):\n");
        for (const auto& r : ids)
            std::printf("  %-4s %-44s max |diff| %.2e (tolerance %.1e) on %s\n", r.pass ? "pass" : "FAIL",
                        r.name.c_str(), r.max_abs_diff, r.tolerance, r.problem.c_str());
        std::printf(
            "\n%zu cases, %zu failed; %zu identities, %zu failed. Errors: max_abs and max_rel against the fp64 "
            "reference (bf16/f16: on the inputs rounded to the format); NMSE = sum (out-ref)^2 / sum ref^2; ulp in the "
            "variant's precision; err/bound <= 1 passes; abs_unrnd: max |out - ref| against the reference on the "
            "unrounded inputs (informational: what storing in the format costs). Decode rows in bf16/f16/int8: the "
            "key/value cache's type (queries, weights and arithmetic fp32; on AVX512-VNNI an int8 cache's scores, "
            "and P V at up to 16 query heads a key/value head, take integer products, queries and weights in 16-bit "
            "fixed point; where AVX512_BF16's vdpbf16ps outruns the fp32 FMA (bf16_path) a bf16 cache's scores at "
            "2 to 16 query heads a key/value head take "
            "vdpbf16ps, the queries rounded to bf16, and P V where d_v is a multiple of 64, the weights rounded to "
            "bf16; both charged in the bound), checked against fp64 over the same "
            "rounded or dequantized cache, by the variants with a kv core; abs_unrnd against fp64 over the "
            "unrounded keys and values.\n",
            rows.size(), failed, ids.size(), id_failed);
    }
    if (failed + id_failed) throw exit_status{1};
}

} // namespace

void add_check(CLI::App& app) {
    auto a = std::make_shared<check_args>();
    auto* cmd = app.add_subcommand("check", "check every variant against the fp64 reference");
    cmd->add_option("--variant", a->variants, "variants to check (default: all)")->delimiter(',');
    cmd->add_option("--d-model", a->d_model, "grid of d_model values (default: the embedded grid)")->delimiter(',');
    cmd->add_option("--heads", a->heads, "grid of query heads H")->delimiter(',')->check(CLI::Range(1, 1 << 16));
    cmd->add_option("--kv-heads", a->kv_heads, "grid of key/value heads G (default H)")
        ->delimiter(',')
        ->check(CLI::Range(1, 1 << 16));
    cmd->add_option("--seq", a->seq, "grid of sequence lengths N")->delimiter(',')->check(CLI::Range(1, 1 << 24));
    cmd->add_option("--batch", a->batch, "grid of batch sizes")->delimiter(',')->check(CLI::Range(1, 1 << 16));
    cmd->add_option("--window", a->window, "grid of sliding windows W (0: none); a window checks the causal cases only")
        ->delimiter(',')
        ->check(window_in(max_window));
    cmd->add_option("--causal", a->causal, "on, off or both")
        ->check(CLI::IsMember({"on", "off", "both"}))
        ->capture_default_str();
    cmd->add_option("--mode", a->mode, "core, layer, decode (steps over a kv cache), both (core and layer) or all")
        ->check(CLI::IsMember(enum_names<check_modes>()))
        ->capture_default_str();
    cmd->add_option("--precision", a->precisions,
                    "f32, bf16, f16, f64, int8 or all, comma-separated (decode: bf16, f16 and int8 are the key/value "
                    "cache's type; int8 is decode only)")
        ->delimiter(',')
        ->check(CLI::IsMember([] {
            auto names = enum_names<dtype>(); // the one list of storage types, and "all"
            names.push_back("all");
            return names;
        }()))
        ->capture_default_str();
    cmd->add_option("--threads", a->threads, "threads for threaded variants")
        ->check(threads_in())
        ->capture_default_str();
    cmd->add_option("--seed", a->seed, "random seed")->capture_default_str();
    cmd->add_option("--device", a->device,
                    "the device whose variants run: cpu or cuda (the CUDA kernels); default: the named variants' "
                    "own, or cpu")
        ->check(CLI::IsMember(enum_names<attn::device>()));
    cmd->add_flag("--json", a->json, "print JSON instead of a table");
    cmd->add_option("--out", a->out, "also write check.json (with metadata), check.csv and check_identities.csv here")
        ->option_text("DIR")
        ->check(output_dir());
    cmd->callback([a] { check_all(*a); });
}

} // namespace attn::cli
