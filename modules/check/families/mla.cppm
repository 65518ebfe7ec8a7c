// attn.families:mla -- Multi-head Latent Attention (DeepSeek-V2 section 2.1), as DeepSeek-V3's
// reference inference code computes it (inference/model.py, class MLA), for the two forms
// attn.core:latent describes. Per token x:
//   queries   q = x W_q^T, or q = RMSNorm(x W_q^a^T) W_q^b^T (a query latent of d_c'), per head
//             [q_nope (d_h) | q_pe (d_h^R)];
//   latent    [c | k_pe] = x W_kv^a^T: c (d_c) and ONE rope key k_pe (d_h^R) for every head;
//   rope      q_pe and k_pe rotated in consecutive pairs (2i, 2i+1) by pos * 10000^(-2i/d_h^R),
//             each token at its own position (no YaRN: DeepSeek's code also rescales the
//             frequencies and the softmax scale when its max_seq_len exceeds 4096; we never do);
//   naive     [k_nope_h | v_h] = RMSNorm(c) W_kv^b^T per head; the core attends with keys
//             [k_nope_h | k_pe] and values v_h, and y = ctx W_o^T;
//   absorb    W^UK_h (the k_nope rows of W_kv^b for head h, [d_h, d_c]) folded into the query,
//             q_h' = [q_nope_h W^UK_h | q_pe_h]; the core attends over the cached rows
//             [RMSNorm(c) | k_pe] (values: their leading d_c), and each head's latent context is
//             mapped to values by W^UV_h (the v rows, [d_v, d_c]) before W_o.
// RMSNorm: y = x w / sqrt(mean(x^2) + 1e-6) (it and the rotation: :latent_ops). Softmax scale 1/sqrt(d_h + d_h^R) in
// both forms. No biases. The state dict is DeepSeek's: wq.weight or wq_a.weight, q_norm.weight, wq_b.weight;
// wkv_a.weight, kv_norm.weight, wkv_b.weight; wo.weight. The absorbed query needs W^UK_h
// transposed ([d_c, d_h], a linear map's [out, in]); it is derived from W_kv^b once, when the
// weights are drawn or loaded, kept beside them and never saved or counted as a parameter.
module;
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <filesystem>
#include <functional>
#include <string>
#include <utility>
#include <vector>
export module attn.families:mla;
import :ops;
import :latent_ops;
import attn.core;
import attn.bounds;
import attn.reference;
import attn.npy;

export namespace attn {

struct mla_family {
    /// The layer's buffers (layer_buffers slots).
    enum slot : std::size_t { s_q, s_qlat, s_kv, s_norm, s_kvb, s_k, s_qa, s_stage_in, s_stage_out, s_o };

    /// x_q [B, n_q, d], x_kv [B, n_kv, d] -> the core's operands in p.form (attn.core:latent).
    template <class T, class S = latent_semantics>
    static core_operands<T> project(const layer_call<T>& c, const T* x_q, const T* x_kv, std::size_t pos0) {
        namespace lw = latent_w;
        const problem& p = c.p;
        const std::size_t B = p.batch, d = p.d_model, H = p.heads, C = p.latent.kv_rank, Cq = p.latent.q_rank,
                          Dr = p.latent.rope, Dn = p.nope_dim(), Dv = p.v_dim(), Dq = Dn + Dr;
        const std::size_t rq = B * p.n_q, rkv = B * p.n_kv;
        auto linear = [&](const T* x, std::size_t wi, T* y, std::size_t rows, std::size_t in, std::size_t out) {
            c.k.linear({x, c.w[wi].data(), nullptr, y, rows, in, out}, c.opt);
        };
        // queries [rq, H, Dn + Dr]
        T* q = c.ws.at(s_q, rq * H * Dq);
        if (Cq) {
            T* ql = c.ws.at(s_qlat, rq * Cq);
            reference::announce<T>(stage::q_down);
            linear(x_q, lw::wq_a, ql, rq, d, Cq);
            reference::announce<T>(stage::q_norm);
            if constexpr (S::normalise) detail::rmsnorm_rows<T>(ql, Cq, c.w[lw::q_norm].data(), ql, Cq, rq, Cq);
            reference::announce<T>(stage::proj_q);
            linear(ql, lw::wq_b, q, rq, Cq, H * Dq);
        } else {
            reference::announce<T>(stage::proj_q);
            linear(x_q, lw::wq, q, rq, d, H * Dq);
        }
        // the latent rows [rkv, C + Dr]: [c | k_pe]
        T* kv = c.ws.at(s_kv, rkv * (C + Dr));
        reference::announce<T>(stage::kv_down);
        linear(x_kv, lw::wkv_a, kv, rkv, d, C + Dr);
        reference::announce<T>(stage::kv_norm);
        const bool absorb = p.form == form::absorb;
        // absorbed: normalised in place, so kv becomes the cached row [kv_norm(c) | k_pe]; naive:
        // into a contiguous [rkv, C] for W_kv^b
        T* cn = absorb ? kv : c.ws.at(s_norm, rkv * C);
        const std::size_t ldn = absorb ? C + Dr : C;
        if constexpr (S::normalise)
            detail::rmsnorm_rows<T>(kv, C + Dr, c.w[lw::kv_norm].data(), cn, ldn, rkv, C);
        else if (!absorb)
            detail::copy_block<T>(kv, C + Dr, cn, ldn, rkv, C);
        reference::announce<T>(stage::rope);
        const long long first_q = (long long)pos0 + (long long)p.n_kv - (long long)p.n_q;
        const long long last_q = first_q + (long long)p.n_q - 1;
        detail::rope_rows<T, S>(q, H * Dq, rq, H, Dq, Dn, Dr,
                                [&](std::size_t r) { return first_q + (long long)(r % p.n_q); });
        detail::rope_rows<T, S>(kv, C + Dr, rkv, 1, 0, C, Dr, [&](std::size_t r) {
            return S::key_position((long long)pos0 + (long long)(r % p.n_kv), last_q);
        });
        if (!absorb) {
            // [k_nope_h | v_h] per head, then the keys [k_nope_h | k_pe]
            T* kvb = c.ws.at(s_kvb, rkv * H * (Dn + Dv));
            reference::announce<T>(stage::kv_up);
            linear(cn, lw::wkv_b, kvb, rkv, C, H * (Dn + Dv));
            T* k = c.ws.at(s_k, rkv * H * Dq);
            for (std::size_t r = 0; r < rkv; ++r)
                for (std::size_t h = 0; h < H; ++h) {
                    std::copy_n(kvb + (r * H + h) * (Dn + Dv), Dn, k + (r * H + h) * Dq);
                    std::copy_n(kv + r * (C + Dr) + C, Dr, k + (r * H + h) * Dq + Dn);
                }
            const heads_view<const T> v{kvb + Dn, B, H, p.n_kv, Dv, p.n_kv * H * (Dn + Dv), Dn + Dv, H * (Dn + Dv)};
            return {interleaved_heads<const T>(q, B, p.n_q, H, Dq), interleaved_heads<const T>(k, B, p.n_kv, H, Dq), v};
        }
        // absorbed queries [rq, H, C + Dr]: q_nope_h W^UK_h per head, then the rotated q_pe_h
        T* qa = c.ws.at(s_qa, rq * H * (C + Dr));
        T* in = c.ws.at(s_stage_in, rq * Dn);
        T* out = c.ws.at(s_stage_out, rq * C);
        reference::announce<T>(stage::absorb_q);
        for (std::size_t h = 0; h < H; ++h) {
            detail::copy_block<T>(q + h * Dq, H * Dq, in, Dn, rq, Dn);
            c.k.linear({in, c.w[lw::uk_t].data() + h * C * Dn, nullptr, out, rq, Dn, C}, c.opt);
            detail::copy_block<T>(out, C, qa + h * (C + Dr), H * (C + Dr), rq, C);
            detail::copy_block<T>(q + h * Dq + Dn, H * Dq, qa + h * (C + Dr) + C, H * (C + Dr), rq, Dr);
        }
        const heads_view<const T> v{kv, B, 1, p.n_kv, C, p.n_kv * (C + Dr), C + Dr, C + Dr};
        return {interleaved_heads<const T>(qa, B, p.n_q, H, C + Dr),
                interleaved_heads<const T>(kv, B, p.n_kv, 1, C + Dr), v};
    }

    /// The context [B n_q, H d_v] (naive) or [B n_q, H d_c] (absorbed) -> y [B n_q, d].
    template <class T>
    static void output(const layer_call<T>& c, const T* ctx, T* y) {
        namespace lw = latent_w;
        const problem& p = c.p;
        const std::size_t H = p.heads, C = p.latent.kv_rank, Dn = p.nope_dim(), Dv = p.v_dim();
        const std::size_t rq = p.batch * p.n_q;
        const T* o = ctx;
        if (p.form == form::absorb) {
            T* values = c.ws.at(s_o, rq * H * Dv);
            T* in = c.ws.at(s_stage_in, rq * C);
            T* out = c.ws.at(s_stage_out, rq * Dv);
            reference::announce<T>(stage::absorb_o);
            for (std::size_t h = 0; h < H; ++h) {
                detail::copy_block<T>(ctx + h * C, H * C, in, C, rq, C);
                c.k.linear({in, c.w[lw::wkv_b].data() + (h * (Dn + Dv) + Dn) * C, nullptr, out, rq, C, Dv}, c.opt);
                detail::copy_block<T>(out, Dv, values + h * Dv, H * Dv, rq, Dv);
            }
            o = values;
        }
        reference::announce<T>(stage::proj_o);
        c.k.linear({o, c.w[lw::wo].data(), nullptr, y, rq, H * Dv, p.d_model}, c.opt);
    }

    /// W^UK_h transposed per head, [H d_c, d_h], from W_kv^b (exact: a transposition).
    template <class T>
    static void derive(const problem& p, weights<T>& w) {
        namespace lw = latent_w;
        const std::size_t H = p.heads, C = p.latent.kv_rank, Dn = p.nope_dim(), Dv = p.v_dim();
        w.t.resize(lw::count);
        auto& u = w[lw::uk_t];
        u.resize(H * C * Dn);
        const auto& b = w[lw::wkv_b];
        for (std::size_t h = 0; h < H; ++h)
            for (std::size_t n = 0; n < Dn; ++n)
                for (std::size_t k = 0; k < C; ++k) u[(h * C + k) * Dn + n] = b[(h * (Dn + Dv) + n) * C + k];
    }

    /// U(-1/sqrt(fan_in), 1/sqrt(fan_in)) for each matrix, the norms' weights in [0.5, 1.5) (ones
    /// in a fresh model; drawn so that a kernel that skips them fails).
    static std::vector<tensor_spec> tensors(const problem& p) {
        const std::size_t d = p.d_model, H = p.heads, C = p.latent.kv_rank, Cq = p.latent.q_rank, Dr = p.latent.rope,
                          Dn = p.nope_dim(), Dv = p.v_dim();
        auto fan = [](std::size_t in) { return 1.0 / std::sqrt(double(std::max<std::size_t>(in, 1))); };
        const bool lat = Cq > 0;
        std::vector<tensor_spec> t{{"wq.weight", H * (Dn + Dr), d, -fan(d), fan(d), !lat},
                                   {"wq_a.weight", Cq, d, -fan(d), fan(d), lat},
                                   {"q_norm.weight", Cq, 0, 0.5, 1.5, lat},
                                   {"wq_b.weight", H * (Dn + Dr), Cq, -fan(Cq), fan(Cq), lat},
                                   {"wkv_a.weight", C + Dr, d, -fan(d), fan(d)},
                                   {"kv_norm.weight", C, 0, 0.5, 1.5},
                                   {"wkv_b.weight", H * (Dn + Dv), C, -fan(C), fan(C)},
                                   {"wo.weight", d, H * Dv, -fan(H * Dv), fan(H * Dv)},
                                   {"W^UK transposed (derived from wkv_b)", H * C, Dn, 0, 0}};
        t.back().derived = true;
        return t;
    }

    /// The fp64 reference of the layer (the naive form) and the bound of p.form's path, carried
    /// stage by stage (attn.bounds' tracked): the larger of the naive and absorbed paths' bounds,
    /// so the reference's own fp64 error (the naive path's) is covered whatever form is checked.
    /// k_given / v_given (a decode check over a cache): the core's keys and values as the cache
    /// holds them, exact, in p.form's layout ([B, n_kv, H d_qk] and [B, n_kv, H d_v] naive, the
    /// latent rows [B, n_kv, d_c + d_h^R] and [B, n_kv, d_c] absorbed).
    static check::expectation expect_given(const problem& p, const weights<double>& w, const std::vector<double>& xq,
                                           const std::vector<double>& xkv, precision prec,
                                           const std::vector<double>* k_given, const std::vector<double>* v_given) {
        const bool half = prec == precision::bf16 || prec == precision::f16;
        const double us = half ? unit_roundoff(prec) : 0.0, u32 = 0x1.0p-24;
        // the reference: the naive form from x, or over a cache the form whose rows it holds
        const form ref_form = k_given ? p.form : form::naive;
        const std::vector<form> forms =
            k_given ? std::vector<form>{p.form} : std::vector<form>{form::naive, form::absorb};
        check::expectation e;
        e.bound.assign(p.batch * p.n_q * p.d_model, 0.0);
        if (half) e.store.assign(e.bound.size(), 0.0);
        for (const form f : forms) {
            problem q = p;
            q.form = f;
            check::detail::tracked y = path(q, w, xq, xkv, us, half, k_given, v_given);
            for (std::size_t i = 0; i < e.bound.size(); ++i) {
                e.bound[i] = std::max(e.bound[i], y.e[i]);
                if (half) e.store[i] = std::max(e.store[i], y.s[i] + us * u32 * y.e[i]);
            }
            if (f == ref_form) e.ref = std::move(y.v);
        }
        return e;
    }

    static check::expectation expect(const problem& p, const weights<double>& w, const std::vector<double>& xq,
                                     const std::vector<double>& xkv, precision prec) {
        return expect_given(p, w, xq, xkv, prec, nullptr, nullptr);
    }

    /// DeepSeek's state dict (attn.core:latent's widths must be set in p: d_model, heads, the
    /// latents, d_head = nope + rope, d_v). Refuses a missing file or a wrong shape in one line.
    static weights<double> load(const std::string& dir, problem& p) {
        namespace lw = latent_w;
        require(std::filesystem::is_directory(dir), dir + ": not a directory");
        p.validate();
        const std::string f = dir + "/";
        const auto specs = tensors(p);
        weights<double> w;
        w.t.resize(lw::count);
        for (std::size_t i = 0; i < specs.size(); ++i) {
            const auto& s = specs[i];
            if (s.derived) continue;
            const std::string path = f + s.name + ".npy";
            if (!s.present) {
                require(!std::filesystem::exists(path),
                        path + ": present, but q_lora_rank=" + std::to_string(p.latent.q_rank) +
                            (p.latent.q_rank ? " means wq_a/q_norm/wq_b, not wq" : " means wq, not wq_a/q_norm/wq_b") +
                            " (give the matching --q-lora-rank)");
                continue;
            }
            require(std::filesystem::exists(path), path + ": missing (MLA's weight set with q_lora_rank=" +
                                                       std::to_string(p.latent.q_rank) + " needs it)");
            const std::vector<std::size_t> shape =
                s.cols ? std::vector<std::size_t>{s.rows, s.cols} : std::vector<std::size_t>{s.rows};
            w[i] = npy::load_shaped(path, shape, meaning(i));
        }
        derive<double>(p, w);
        return w;
    }

    static void save(const std::string& dir, const problem& p, const weights<double>& w) {
        std::filesystem::create_directories(dir);
        const auto specs = tensors(p);
        for (std::size_t i = 0; i < specs.size(); ++i) {
            const auto& s = specs[i];
            const std::string path = dir + "/" + s.name + ".npy";
            if (s.derived) continue;
            if (!s.present) {
                // a folder written before with the other query path must not keep it: load refuses both
                std::error_code ec;
                if (std::filesystem::is_regular_file(path)) std::filesystem::remove(path, ec);
                require(!ec, path + ": cannot remove the other query path's file (" + ec.message() + ")");
                continue;
            }
            const std::vector<std::size_t> shape =
                s.cols ? std::vector<std::size_t>{s.rows, s.cols} : std::vector<std::size_t>{s.rows};
            npy::save(path, shape, w[i].data());
        }
    }

  private:
    static std::string meaning(std::size_t i) {
        namespace lw = latent_w;
        switch (i) {
        case lw::wq:
            return "[heads*(qk_nope_head_dim+qk_rope_head_dim), d_model]";
        case lw::wq_a:
            return "[q_lora_rank, d_model]";
        case lw::q_norm:
            return "[q_lora_rank]";
        case lw::wq_b:
            return "[heads*(qk_nope_head_dim+qk_rope_head_dim), q_lora_rank]";
        case lw::wkv_a:
            return "[kv_lora_rank+qk_rope_head_dim, d_model]";
        case lw::kv_norm:
            return "[kv_lora_rank]";
        case lw::wkv_b:
            return "[heads*(qk_nope_head_dim+v_head_dim), kv_lora_rank]";
        default:
            return "[d_model, heads*v_head_dim]";
        }
    }

    /// One form's path in fp64 with its error carried (attn.bounds' tracked), from x to y
    /// [B n_q, d]; the core's keys and values given (a cache's rows) or computed from x_kv.
    static check::detail::tracked path(const problem& p, const weights<double>& w, const std::vector<double>& xq,
                                       const std::vector<double>& xkv, double us, bool half,
                                       const std::vector<double>* k_given, const std::vector<double>* v_given) {
        namespace lw = latent_w;
        namespace cd = check::detail;
        const std::size_t B = p.batch, d = p.d_model, H = p.heads, C = p.latent.kv_rank, Cq = p.latent.q_rank,
                          Dr = p.latent.rope, Dn = p.nope_dim(), Dv = p.v_dim(), Dq = Dn + Dr;
        const std::size_t rq = B * p.n_q, rkv = B * p.n_kv;
        const bool absorb = p.form == form::absorb;
        const long long first_q = (long long)p.n_kv - (long long)p.n_q;
        // queries, rope'd
        cd::tracked q = Cq ? cd::linear_tracked(cd::rmsnorm_tracked(cd::linear_tracked(cd::exact(xq, rq, d, half),
                                                                                       w[lw::wq_a].data(), Cq, us),
                                                                    0, Cq, w[lw::q_norm].data(), rms_eps, us),
                                                w[lw::wq_b].data(), H * Dq, us)
                           : cd::linear_tracked(cd::exact(xq, rq, d, half), w[lw::wq].data(), H * Dq, us);
        for (std::size_t h = 0; h < H; ++h) // the rope part of every head
            cd::rope_tracked(
                q, h * Dq + Dn, Dr / 2,
                [&](std::size_t r, std::size_t i) { return rope_angle(first_q + (long long)(r % p.n_q), i, Dr); }, us);
        const problem a = core_problem(p);
        cd::tracked qc(rq, a.q_width(), half), kc, vc;
        if (!absorb) {
            qc = q;
        } else { // q_nope_h W^UK_h, then q_pe_h
            std::vector<double> ukt(H * C * Dn);
            for (std::size_t h = 0; h < H; ++h)
                for (std::size_t n = 0; n < Dn; ++n)
                    for (std::size_t k = 0; k < C; ++k)
                        ukt[(h * C + k) * Dn + n] = w[lw::wkv_b][(h * (Dn + Dv) + n) * C + k];
            for (std::size_t h = 0; h < H; ++h) {
                const cd::tracked qn = columns(q, h * Dq, Dn);
                const cd::tracked qa = cd::linear_tracked(qn, ukt.data() + h * C * Dn, C, us);
                place(qc, qa, h * (C + Dr));
                place(qc, columns(q, h * Dq + Dn, Dr), h * (C + Dr) + C);
            }
        }
        if (k_given) {
            kc = cd::exact(*k_given, rkv, a.k_width(), half);
            vc = cd::exact(*v_given, rkv, a.v_width(), half);
            if (half) { // exact inputs: no storage error either
                std::fill(kc.s.begin(), kc.s.end(), 0.0);
                std::fill(vc.s.begin(), vc.s.end(), 0.0);
            }
        } else {
            cd::tracked lat = cd::linear_tracked(cd::exact(xkv, rkv, d, half), w[lw::wkv_a].data(), C + Dr, us);
            const cd::tracked cn = cd::rmsnorm_tracked(lat, 0, C, w[lw::kv_norm].data(), rms_eps, us);
            cd::tracked pe = columns(lat, C, Dr);
            cd::rope_tracked(
                pe, 0, Dr / 2, [&](std::size_t r, std::size_t i) { return rope_angle((long long)(r % p.n_kv), i, Dr); },
                us);
            if (absorb) {
                kc = cd::tracked(rkv, C + Dr, half);
                place(kc, cn, 0);
                place(kc, pe, C);
                vc = cn;
            } else {
                const cd::tracked kvb = cd::linear_tracked(cn, w[lw::wkv_b].data(), H * (Dn + Dv), us);
                kc = cd::tracked(rkv, H * Dq, half);
                vc = cd::tracked(rkv, H * Dv, half);
                for (std::size_t h = 0; h < H; ++h) {
                    place(kc, columns(kvb, h * (Dn + Dv), Dn), h * Dq);
                    place(kc, pe, h * Dq + Dn);
                    place(vc, columns(kvb, h * (Dn + Dv) + Dn, Dv), h * Dv);
                }
            }
        }
        const auto attend = [](const problem& pr, const std::vector<double>& qv, const std::vector<double>& kv,
                               const std::vector<double>& vv, std::vector<double>& out) {
            out.assign(pr.batch * pr.n_q * pr.o_width(), 0.0);
            reference::core<double>(
                pr, {interleaved_heads<const double>(qv.data(), pr.batch, pr.n_q, pr.heads, pr.qk_dim()),
                     interleaved_heads<const double>(kv.data(), pr.batch, pr.n_kv, pr.kv_heads, pr.qk_dim()),
                     interleaved_heads<const double>(vv.data(), pr.batch, pr.n_kv, pr.kv_heads, pr.v_dim()),
                     interleaved_heads<double>(out.data(), pr.batch, pr.n_q, pr.heads, pr.v_dim())});
        };
        cd::tracked ctx = cd::core_tracked(a, qc, kc, vc, us, attend);
        if (absorb) { // each head's latent context through W^UV_h
            cd::tracked values(rq, H * Dv, half);
            for (std::size_t h = 0; h < H; ++h)
                place(
                    values,
                    cd::linear_tracked(columns(ctx, h * C, C), w[lw::wkv_b].data() + (h * (Dn + Dv) + Dn) * C, Dv, us),
                    h * Dv);
            ctx = std::move(values);
        }
        return cd::linear_tracked(ctx, w[lw::wo].data(), d, us);
    }

    /// Columns [c0, c0 + n) of x, as a tensor of their own.
    static check::detail::tracked columns(const check::detail::tracked& x, std::size_t c0, std::size_t n) {
        check::detail::tracked y(x.rows, n, x.stored());
        for (std::size_t r = 0; r < x.rows; ++r)
            for (std::size_t i = 0; i < n; ++i) {
                y.v[r * n + i] = x.v[r * x.cols + c0 + i];
                y.e[r * n + i] = x.e[r * x.cols + c0 + i];
                if (x.stored()) y.s[r * n + i] = x.s[r * x.cols + c0 + i];
            }
        return y;
    }
    /// Writes x into columns [c0, c0 + x.cols) of y.
    static void place(check::detail::tracked& y, const check::detail::tracked& x, std::size_t c0) {
        for (std::size_t r = 0; r < x.rows; ++r)
            for (std::size_t i = 0; i < x.cols; ++i) {
                y.v[r * y.cols + c0 + i] = x.v[r * x.cols + i];
                y.e[r * y.cols + c0 + i] = x.e[r * x.cols + i];
                if (y.stored()) y.s[r * y.cols + c0 + i] = x.s[r * x.cols + i];
            }
    }
};

/// MLA's record.
inline family_ops make_mla_family() {
    family_ops f;
    f.id = family::mla;
    f.description = "MLA (DeepSeek-V2/V3): low-rank latent c and one shared rope key cached; naive form "
                    "decompresses K and V per head, absorbed form attends over the latent (MQA, d_qk = d_c + d_h^R)";
    f.tensors = mla_family::tensors;
    f.attention = core_problem;
    f.cache = [](const problem& p) {
        if (p.form == form::absorb) return cache_layout{1, p.latent.kv_rank + p.latent.rope, p.latent.kv_rank, true};
        return cache_layout{p.heads, p.qk_dim(), p.v_dim(), false};
    };
    f.set_stages<mla_family>();
    f.expect = mla_family::expect;
    f.expect_over_cache = [](const problem& p, const weights<double>& w, const std::vector<double>& xq,
                             const std::vector<double>& k, const std::vector<double>& v) {
        return mla_family::expect_given(p, w, xq, {}, precision::f32, &k, &v);
    };
    f.save = mla_family::save;
    f.load = mla_family::load;
    return f;
}

} // namespace attn
