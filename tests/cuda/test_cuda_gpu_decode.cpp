// cuda-decode against a float64 reference (attn_cuda_gpu_tests): one case built on the host as the
// kernel will read it, the reference computed over the logical cache (positions 0 .. L - 1 of each
// sequence, the values as stored: rounded to bf16/f16, or int8 codes times their row's scale).
//  - The cache the kernel reads: contiguous [B, G, capacity, d] with 3 spare rows, or a pool of
//    pages in shuffled order with 2 spare pages; a rolling buffer holds position t in slot t mod
//    ring (later positions overwrite). Every row no query may read is NaN (int8: NaN scales): the
//    spare rows and pages, and the held positions before the step's first key (a window's past).
//  - The reference: query row i of sequence b sees keys [end - W, end) with end = i + L_b - n_q + 1
//    (causal; L_b otherwise), the CPU suite's convention, written out again here.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <exception>
#include <numeric>
#include <string>

#include "gpu_decode.hpp"

namespace attn_gpu_check {

const char* decode_mutant_name(decode_mutant m) {
    switch (m) {
    case decode_mutant::scale:
        return "scale 1% off";
    case decode_mutant::kv_map:
        return "kv head h % G";
    case decode_mutant::mask_short:
        return "mask one key short";
    case decode_mutant::window_short:
        return "window one key short";
    case decode_mutant::window_long:
        return "window one key long";
    default:
        return "none";
    }
}

std::string describe_decode(const decode_input& in) {
    const cu::shape& s = in.s;
    char buf[320];
    std::snprintf(buf, sizeof buf, "cuda-decode %s B%zu H%zu G%zu n_q %zu L %zu d %zu/%zu%s%s", cu::name(in.st),
                  s.batch, s.heads, s.kv_heads, s.n_q, s.n_kv, s.d_qk, s.d_v ? s.d_v : s.d_qk,
                  s.causal ? "" : " non-causal", in.v_from_k ? " mla" : "");
    std::string r = buf;
    if (s.window) r += " W " + std::to_string(s.window);
    if (in.ring) r += " ring " + std::to_string(in.ring);
    if (in.page) r += " page " + std::to_string(in.page);
    if (!in.lengths.empty()) r += " varied L";
    const cu::decode_options& o = in.options;
    if (o.splits || o.stages || o.heads_per_block || o.tensor_cores >= 0)
        r += " opts " + std::to_string(o.splits) + "/" + std::to_string(o.stages) + "/" +
             std::to_string(o.heads_per_block) + "/" + std::to_string(o.tensor_cores);
    return r;
}

namespace {

/// Keys [begin, end) query row i of a sequence of n keys sees (written from the CPU convention).
std::pair<long long, long long> seen(long long n, long long n_q, long long i, long long w, bool causal) {
    long long end = causal ? std::min(n, i + n - n_q + 1) : n;
    if (end < 0) end = 0;
    return {w > 0 && end > w ? end - w : 0, end};
}

struct logical {
    std::size_t B, G, L, dk, dv;
    std::vector<float> k, v;           ///< [B][G][L][dk], [B][G][L][dv]: the values as stored
    std::vector<std::uint16_t> kb, vb; ///< 16-bit patterns
    std::vector<std::int8_t> kc, vc;   ///< int8 codes
    std::vector<float> ks, vs;         ///< int8 scales [B][G][L]
    std::size_t row(std::size_t b, std::size_t g, std::size_t t) const { return (b * G + g) * L + t; }
};

std::vector<double> reference(const decode_input& in, const std::vector<float>& q, const logical& c,
                              const std::vector<long long>& len, decode_mutant m) {
    const cu::shape s = cu::resolved(in.s);
    const std::size_t B = s.batch, H = s.heads, G = s.kv_heads, nq = s.n_q, dk = s.d_qk, dv = s.d_v;
    const double scale = m == decode_mutant::scale ? s.scale * 1.01 : s.scale;
    long long w = (long long)s.window;
    if (m == decode_mutant::window_short) w -= 1;
    if (m == decode_mutant::window_long) w += 1;
    std::vector<double> out(B * nq * H * dv, 0.0);
    parallel_for(B * H, [&](std::size_t bh) {
        const std::size_t b = bh / H, h = bh % H, g = m == decode_mutant::kv_map ? h % G : h * G / H;
        std::vector<double> p(c.L);
        for (std::size_t i = 0; i < nq; ++i) {
            auto [lo, hi] = seen(len[b], (long long)nq, (long long)i, w, s.causal);
            if (m == decode_mutant::mask_short) --hi;
            double* o = &out[((b * nq + i) * H + h) * dv];
            if (hi <= lo) continue;
            const float* qi = &q[((b * nq + i) * H + h) * dk];
            double mx = -INFINITY;
            for (long long j = lo; j < hi; ++j) {
                const float* kj = &c.k[c.row(b, g, std::size_t(j)) * dk];
                double dot = 0;
                for (std::size_t x = 0; x < dk; ++x) dot += double(qi[x]) * double(kj[x]);
                p[std::size_t(j)] = dot * scale;
                mx = std::max(mx, p[std::size_t(j)]);
            }
            double sum = 0;
            for (long long j = lo; j < hi; ++j) sum += (p[std::size_t(j)] = std::exp(p[std::size_t(j)] - mx));
            for (long long j = lo; j < hi; ++j) {
                const float* vj = &c.v[c.row(b, g, std::size_t(j)) * dv];
                const double wgt = p[std::size_t(j)] / sum;
                for (std::size_t x = 0; x < dv; ++x) o[x] += wgt * double(vj[x]);
            }
        }
    });
    return out;
}

/// Rounds or quantizes row x (n values) to the storage type; x becomes the stored values.
void store_row(cu::storage st, float* x, std::size_t n, std::uint16_t* bits, std::int8_t* codes, float* scale) {
    if (st == cu::storage::int8) {
        *scale = fm::quantize_row(x, n, codes);
        for (std::size_t i = 0; i < n; ++i) x[i] = float(codes[i]) * *scale;
    } else if (st != cu::storage::f32) {
        for (std::size_t i = 0; i < n; ++i) {
            bits[i] = st == cu::storage::bf16 ? fm::to_bf16(x[i]) : fm::to_f16(x[i]);
            x[i] = st == cu::storage::bf16 ? fm::from_bf16(bits[i]) : fm::from_f16(bits[i]);
        }
    }
}

/// One physical cache (K or V): elements of the storage type plus int8 scales, NaN everywhere first.
struct physical {
    cu::storage st;
    std::size_t d;
    std::vector<float> f;
    std::vector<std::uint16_t> h;
    std::vector<std::int8_t> i8;
    std::vector<float> sc;
    physical(cu::storage t, std::size_t rows, std::size_t width) : st(t), d(width) {
        if (st == cu::storage::f32) f.assign(rows * d, NAN);
        if (st == cu::storage::bf16 || st == cu::storage::f16) h.assign(rows * d, 0x7fff); // NaN in both
        if (st == cu::storage::int8) i8.assign(rows * d, 0x55), sc.assign(rows, NAN);
    }
    void put(std::size_t row, const float* x, const std::uint16_t* bits, const std::int8_t* codes, float scale) {
        if (st == cu::storage::f32) std::copy_n(x, d, &f[row * d]);
        if (!h.empty()) std::copy_n(bits, d, &h[row * d]);
        if (st == cu::storage::int8) std::copy_n(codes, d, &i8[row * d]), sc[row] = scale;
    }
    const void* data() const {
        return st == cu::storage::f32    ? (const void*)f.data()
               : st == cu::storage::int8 ? (const void*)i8.data()
                                         : (const void*)h.data();
    }
};

} // namespace

void check_decode_case(tally& t, std::mt19937_64& rng, const decode_input& in0,
                       const std::vector<decode_mutant>& mutants, bool reference_only, const decode_runner& run) {
    decode_input in = in0;
    in.s = cu::resolved(in0.s);
    const cu::shape& s = in.s;
    const std::size_t B = s.batch, H = s.heads, G = s.kv_heads, nq = s.n_q, dk = s.d_qk, dv = s.d_v, L = s.n_kv;
    const std::string what = describe_decode(in);
    gpu_test::watchdog::get().at(what); // a check begun: a hang names it (the watchdog runs with a GPU)
    std::vector<long long> len(B, (long long)L);
    for (std::size_t b = 0; b < in.lengths.size() && b < B; ++b) len[b] = in.lengths[b];
    const std::vector<float> q = random_vector(rng, B * nq * H * dk, in.q_sigma);
    logical c{B,  G,  L,  dk, dv, random_vector(rng, B * G * L * dk), random_vector(rng, B * G * L * dv), {},
              {}, {}, {}, {}, {}};
    // plant keys that make the mutants show: a multiple of the row's first query head of the group
    auto plant = [&](std::size_t b, std::size_t i, long long j) {
        if (j < 0 || j >= len[b]) return;
        for (std::size_t g = 0; g < G; ++g)
            for (std::size_t x = 0; x < dk; ++x)
                c.k[c.row(b, g, std::size_t(j)) * dk + x] = 0.5f * q[((b * nq + i) * H + g * H / G) * dk + x];
    };
    for (decode_mutant m : mutants)
        for (std::size_t b = 0; b < B; ++b)
            for (std::size_t i = 0; i < nq; ++i) {
                const auto [lo, hi] = seen(len[b], (long long)nq, (long long)i, (long long)s.window, s.causal);
                if (m == decode_mutant::mask_short) plant(b, i, hi - 1);
                if (m == decode_mutant::window_short) plant(b, i, lo);
                if (m == decode_mutant::window_long && s.window && lo > 0) plant(b, i, lo - 1);
            }
    const std::size_t rows = B * G * L;
    c.kb.assign(rows * dk, 0), c.vb.assign(rows * dv, 0), c.kc.assign(rows * dk, 0), c.vc.assign(rows * dv, 0);
    c.ks.assign(rows, 0.0f), c.vs.assign(rows, 0.0f);
    for (std::size_t r = 0; r < rows; ++r) {
        store_row(in.st, &c.k[r * dk], dk, &c.kb[r * dk], &c.kc[r * dk], &c.ks[r]);
        if (in.v_from_k) { // V is K's first d_v columns, with K's scale
            std::copy_n(&c.k[r * dk], dv, &c.v[r * dv]);
            std::copy_n(&c.kb[r * dk], dv, &c.vb[r * dv]);
            std::copy_n(&c.kc[r * dk], dv, &c.vc[r * dv]);
            c.vs[r] = c.ks[r];
        } else {
            store_row(in.st, &c.v[r * dv], dv, &c.vb[r * dv], &c.vc[r * dv], &c.vs[r]);
        }
    }
    const std::vector<double> ref = reference(in, q, c, len, decode_mutant::none);
    const double tol = tolerance(in.st);
    if (reference_only) {
        for (decode_mutant m : mutants) {
            const double gap = relative_error(ref, reference(in, q, c, len, m));
            std::printf("margin: %s vs mutant '%s' at %.3g x the tolerance\n", what.c_str(), decode_mutant_name(m),
                        gap / tol);
            t.check(gap > 2 * tol, what + ": mutant '" + decode_mutant_name(m) + "' within " + fmt_err(gap, 2 * tol));
        }
        return;
    }
    // the physical cache
    const std::size_t slots = in.ring ? in.ring : L, P = in.page;
    const std::size_t cap = slots + 3, max_pages = P ? (slots + P - 1) / P + 1 : 0, pages = P ? B * max_pages + 2 : 0;
    std::vector<std::int32_t> table(B * max_pages);
    if (P) {
        std::vector<std::int32_t> perm(pages);
        std::iota(perm.begin(), perm.end(), 0);
        std::shuffle(perm.begin(), perm.end(), rng);
        std::copy_n(perm.begin(), table.size(), table.begin());
    }
    const std::size_t prow = P ? pages * P * G : B * G * cap;
    physical kp(in.st, prow, dk), vp(in.st, in.v_from_k ? 0 : prow, dv);
    for (std::size_t b = 0; b < B; ++b) {
        const long long first_held = in.ring ? std::max(0LL, len[b] - (long long)in.ring) : 0;
        const long long first_read = seen(len[b], (long long)nq, 0, (long long)s.window, s.causal).first;
        for (long long t0 = std::max(first_held, first_read); t0 < len[b]; ++t0)
            for (std::size_t g = 0; g < G; ++g) {
                const std::size_t slot = in.ring ? std::size_t(t0) % in.ring : std::size_t(t0);
                const std::size_t row = P ? (std::size_t(table[b * max_pages + slot / P]) * P + slot % P) * G + g
                                          : (b * G + g) * cap + slot;
                const std::size_t r = c.row(b, g, std::size_t(t0));
                kp.put(row, &c.k[r * dk], &c.kb[r * dk], &c.kc[r * dk], c.ks[r]);
                if (!in.v_from_k) vp.put(row, &c.v[r * dv], &c.vb[r * dv], &c.vc[r * dv], c.vs[r]);
            }
    }
    cu::decode_spec spec;
    spec.capacity = P ? 0 : cap;
    spec.page_size = P;
    spec.pages = pages;
    spec.max_pages = max_pages;
    spec.block_table = P ? table.data() : nullptr;
    spec.lengths = in.lengths.empty() ? nullptr : in.lengths.data();
    spec.ring = in.ring;
    spec.v_from_k = in.v_from_k;
    spec.options = in.options;
    try {
        const float* ks = in.st == cu::storage::int8 ? kp.sc.data() : nullptr;
        const float* vs = in.st == cu::storage::int8 && !in.v_from_k ? vp.sc.data() : nullptr;
        decode_result res;
        if (run) {
            res = run(s, in.st, q.data(), kp.data(), in.v_from_k ? nullptr : vp.data(), ks, vs, spec);
        } else {
            const cu::decode_options& o = spec.options;
            const bool plain = !P && !in.ring && in.lengths.empty() && !in.v_from_k && !o.splits && !o.stages &&
                               !o.heads_per_block && o.tensor_cores < 0;
            cu::decode_case dc =
                plain ? cu::decode_case(s, in.st, q.data(), kp.data(), vp.data(), ks, vs, cap) // the first form
                      : cu::decode_case(s, in.st, q.data(), kp.data(), in.v_from_k ? nullptr : vp.data(), ks, vs, spec);
            dc.run();
            res.out = dc.output();
            const cu::decode_plan_info pi = dc.plan();
            res.how = pi.kernel + ", " + std::to_string(pi.splits) + " splits, " + std::to_string(pi.stages) +
                      " stages, " + std::to_string(pi.rows_per_block) + " rows";
        }
        const std::vector<float>& out = res.out;
        const std::string how = " [" + res.how + "]";
        const double e = relative_error(out, ref);
        t.check(e < tol, what + how + ": " + fmt_err(e, tol));
        for (decode_mutant m : mutants) {
            const double em = relative_error(out, reference(in, q, c, len, m));
            t.check(em >= tol,
                    what + how + ": mutant '" + decode_mutant_name(m) + "' not rejected, " + fmt_err(em, tol));
        }
    } catch (const std::exception& ex) {
        t.check(false, what + ": " + ex.what());
    }
}

} // namespace attn_gpu_check
