// attn.sources -- the computations: the toy run through attn.reference with its trace and
// compared with the document's printed numbers, the hull search and bound, the two-head
// readout, and the Monte Carlo of the scaling claim.
module;
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <numbers>
#include <string>
#include <vector>
module attn.sources;
import attn.reference;
import attn.families;

namespace attn::sources {

std::string rounded(double v, int decimals) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
    std::string s = buf;
    if (s.size() > 1 && s[0] == '-' && s.find_first_not_of("-0.") == std::string::npos) s.erase(0, 1);
    return s;
}

namespace {

matrix take(const std::string& name, const std::vector<double>& src, std::size_t rows, std::size_t stride,
            std::size_t col0, std::size_t cols) {
    matrix m;
    m.name = name;
    m.rows = rows;
    m.cols = cols;
    for (std::size_t i = 0; i < rows; ++i)
        for (std::size_t j = 0; j < cols; ++j) m.v.push_back(src[i * stride + col0 + j]);
    return m;
}

matrix transpose(const std::string& name, const matrix& a) {
    matrix t;
    t.name = name;
    t.rows = a.cols;
    t.cols = a.rows;
    for (std::size_t i = 0; i < t.rows; ++i)
        for (std::size_t j = 0; j < t.cols; ++j) t.v.push_back(a.at(j, i));
    return t;
}

void compare(toy_result& r, const std::string& what, const matrix& m, const std::vector<std::string>& doc) {
    for (std::size_t i = 0; i < doc.size(); ++i) {
        printed_number n;
        n.what = what + "[" + std::to_string(i / m.cols) + "," + std::to_string(i % m.cols) + "]";
        n.document = doc[i];
        const auto dot = doc[i].find('.');
        n.decimals = dot == std::string::npos ? 0 : int(doc[i].size() - dot - 1);
        n.ours = m.v[i];
        n.ours_rounded = rounded(n.ours, n.decimals);
        n.agree = n.ours_rounded == rounded(std::stod(doc[i]), n.decimals);
        r.compared.push_back(n);
    }
}

void compare_one(toy_result& r, const std::string& what, double ours, const std::string& doc) {
    matrix m;
    m.rows = m.cols = 1;
    m.v = {ours};
    compare(r, what, m, {doc});
    r.compared.back().what = what;
}

} // namespace

toy_result cat_sleeps() {
    toy_result r;
    problem& p = r.p;
    p.n_q = p.n_kv = 2;
    p.d_model = 4;
    p.heads = p.kv_heads = 2;
    p.validate();
    const std::size_t n = 2, d = 4, dh = p.qk_dim();
    const std::vector<double> x = {1, 2, 0, 0, 0, 0, 1, 2};
    weights<double> w;
    w.t.resize(qkv::count); // no biases
    std::vector<double> eye(d * d, 0.0);
    for (std::size_t i = 0; i < d; ++i) eye[i * d + i] = 1.0;
    w[qkv::wq] = w[qkv::wk] = w[qkv::wv] = w[qkv::wo] = eye;

    std::vector<double> q(n * d), k(n * d), v(n * d), z(n * d), y(n * d);
    reference::linear<double>({x.data(), w[qkv::wq].data(), nullptr, q.data(), n, d, d});
    reference::linear<double>({x.data(), w[qkv::wk].data(), nullptr, k.data(), n, d, d});
    reference::linear<double>({x.data(), w[qkv::wv].data(), nullptr, v.data(), n, d, d});
    reference::trace<double> tr;
    reference::core<double>(p,
                            {interleaved_heads<const double>(q.data(), 1, n, p.heads, dh),
                             interleaved_heads<const double>(k.data(), 1, n, p.kv_heads, dh),
                             interleaved_heads<const double>(v.data(), 1, n, p.kv_heads, dh),
                             interleaved_heads<double>(z.data(), 1, n, p.heads, dh)},
                            &tr);
    reference::linear<double>({z.data(), w[qkv::wo].data(), nullptr, y.data(), n, d, d});
    std::vector<double> y_layer(n * d);
    reference_layer<double>(p, w, x.data(), x.data(), y_layer.data());
    for (std::size_t i = 0; i < n * d; ++i)
        r.layer_max_abs_diff = std::max(r.layer_max_abs_diff, std::abs(y[i] - y_layer[i]));

    r.steps.push_back(take("X (rows: Cat, sleeps)", x, n, d, 0, d));
    std::vector<matrix> heads_out;
    for (std::size_t h = 0; h < p.heads; ++h) {
        const std::string H = std::to_string(h + 1);
        const matrix Q = take("Q_" + H, q, n, d, h * dh, dh), K = take("K_" + H, k, n, d, h * dh, dh),
                     V = take("V_" + H, v, n, d, h * dh, dh);
        const matrix KT = transpose("K_" + H + "^T", K);
        const matrix S = take("Q_" + H + " K_" + H + "^T", tr.scores[h], n, n, 0, n);
        const matrix C = take("Q_" + H + " K_" + H + "^T / sqrt(d_k)", tr.scaled[h], n, n, 0, n);
        const matrix P = take("softmax_" + H, tr.probs[h], n, n, 0, n);
        const matrix O = take("Head_" + H, z, n, d, h * dh, dh);
        for (const auto* m : {&Q, &K, &V, &KT, &S, &C, &P, &O}) r.steps.push_back(*m);
        heads_out.push_back(O);
    }
    r.steps.push_back(take("Z = Concat(Head_1, Head_2)", z, n, d, 0, d));
    r.steps.push_back(take("Z W^O (W^O = I)", y, n, d, 0, d));

    // Every number seed 000 prints, as printed.
    auto step = [&](const std::string& name) -> const matrix& {
        for (const auto& m : r.steps)
            if (m.name == name) return m;
        throw error("toy: no step named " + name);
    };
    compare_one(r, "d_k = d_model / h", double(dh), "2");
    for (const char* m : {"Q_1", "K_1", "V_1"}) compare(r, m, step(m), {"1", "2", "0", "0"});
    for (const char* m : {"Q_2", "K_2", "V_2"}) compare(r, m, step(m), {"0", "0", "1", "2"});
    compare(r, "K_1^T", step("K_1^T"), {"1", "0", "2", "0"});
    compare(r, "Q_1 K_1^T", step("Q_1 K_1^T"), {"5", "0", "0", "0"});
    compare_one(r, "sqrt(d_k)", std::sqrt(double(dh)), "1.41");
    compare_one(r, "5 / 1.41 (the document's own division)", 5.0 / 1.41, "3.5");
    compare(r, "Q_1 K_1^T / sqrt(d_k)", step("Q_1 K_1^T / sqrt(d_k)"), {"3.5", "0", "0", "0"});
    compare(r, "softmax_1", step("softmax_1"), {"0.97", "0.03", "0.5", "0.5"});
    compare(r, "Head_1", step("Head_1"), {"0.97", "1.94", "0.50", "1.00"});
    compare(r, "Head_2", step("Head_2"), {"0.00", "0.00", "0.97", "1.94"});
    compare(r, "Z", step("Z = Concat(Head_1, Head_2)"),
            {"0.97", "1.94", "0.00", "0.00", "0.50", "1.00", "0.97", "1.94"});
    return r;
}

std::vector<double> hull_weights(double qx, double qy) {
    double s[4], m = -1e300, sum = 0;
    for (int i = 0; i < 4; ++i) {
        s[i] = qx * hull_keys[i][0] + qy * hull_keys[i][1];
        m = std::max(m, s[i]);
    }
    std::vector<double> w(4);
    for (int i = 0; i < 4; ++i) sum += (w[i] = std::exp(s[i] - m));
    for (auto& x : w) x /= sum;
    return w;
}

hull_result hull_search(std::size_t n_theta, std::size_t n_r, double r_min, double r_max) {
    require(n_theta >= 8 && n_r >= 2, "hull search needs >= 8 directions and >= 2 magnitudes (got " +
                                          std::to_string(n_theta) + ", " + std::to_string(n_r) + ")");
    require(r_min > 0 && r_max > r_min,
            "hull search needs 0 < r_min < r_max (got " + std::to_string(r_min) + ", " + std::to_string(r_max) + ")");
    hull_result h;
    h.n_theta = n_theta;
    h.n_r = n_r;
    h.r_min = r_min;
    h.r_max = r_max;
    for (std::size_t t = 0; t < n_theta; ++t) h.thetas.push_back(2 * std::numbers::pi * double(t) / double(n_theta));
    for (std::size_t i = 0; i < n_r; ++i)
        h.radii.push_back(r_min * std::pow(r_max / r_min, double(i) / double(n_r - 1)));
    h.w3_by_theta.assign(n_theta, 0);
    h.winner_by_theta.assign(n_theta, -1);
    for (std::size_t i = 0; i < n_r; ++i) {
        const double r = h.radii[i];
        double best_here = 0;
        for (std::size_t t = 0; t < n_theta; ++t) {
            const double qx = r * std::cos(h.thetas[t]), qy = r * std::sin(h.thetas[t]);
            const double s1 = 10 * qx, s2 = 10 * qy, s3 = 5 * qx + 5 * qy;
            h.max_margin = std::max(h.max_margin, s3 - std::max(s1, s2));
            h.max_mean_residual = std::max(h.max_mean_residual, std::abs(s3 - 0.5 * (s1 + s2)));
            const auto w = hull_weights(qx, qy);
            h.k3_strictly_first += w[2] > w[0] && w[2] > w[1];
            best_here = std::max(best_here, w[2]);
            if (w[2] > h.best_w3) {
                h.best_w3 = w[2];
                h.best_theta = h.thetas[t];
                h.best_r = r;
            }
            if (i + 1 == n_r) {
                h.w3_by_theta[t] = w[2];
                h.winner_by_theta[t] = int(std::max_element(w.begin(), w.end()) - w.begin());
            }
        }
        h.max_w3_by_r.push_back(best_here);
        h.bound_by_r.push_back(hull_bound(r));
        h.max_abs_search_minus_bound = std::max(h.max_abs_search_minus_bound, std::abs(best_here - hull_bound(r)));
    }
    return h;
}

two_head_result two_heads(double eps, std::vector<double> betas) {
    two_head_result t;
    t.q1[0] = 1;
    t.q1[1] = eps;
    t.q2[0] = eps;
    t.q2[1] = 1;
    t.w1 = hull_weights(t.q1[0], t.q1[1]);
    t.w2 = hull_weights(t.q2[0], t.q2[1]);
    double best = -1e300;
    for (int i = 0; i < 4; ++i) {
        t.s1.push_back(t.q1[0] * hull_keys[i][0] + t.q1[1] * hull_keys[i][1]);
        t.s2.push_back(t.q2[0] * hull_keys[i][0] + t.q2[1] * hull_keys[i][1]);
        t.readout.push_back(std::min(t.s1.back(), t.s2.back()));
        if (t.readout.back() > best) {
            best = t.readout.back();
            t.winner = i;
        }
    }
    t.betas = betas;
    for (double b : betas) {
        std::vector<double> w(4);
        double sum = 0;
        for (int i = 0; i < 4; ++i) sum += (w[i] = std::exp(b * (t.readout[i] - best)));
        for (auto& x : w) x /= sum;
        t.selection.push_back(w);
    }
    return t;
}

std::vector<variance_row> scaling_variance(const std::vector<std::size_t>& d_ks, std::size_t samples,
                                           std::size_t n_keys, std::uint64_t seed) {
    require(samples >= 2, "Monte Carlo needs >= 2 samples (got " + std::to_string(samples) + ")");
    require(n_keys >= 2, "saturation check needs >= 2 keys (got " + std::to_string(n_keys) + ")");
    std::vector<variance_row> out;
    const double a = std::sqrt(3.0);
    for (std::size_t dk : d_ks) {
        require(dk >= 1, "d_k must be >= 1 (got 0)");
        rng r(seed * 1000003 + dk);
        variance_row row;
        row.d_k = dk;
        row.samples = samples;
        row.n_keys = n_keys;
        // Welford's running variance for the product, the score and the scaled score.
        double mp = 0, m2p = 0, ms = 0, m2s = 0;
        std::size_t np = 0;
        for (std::size_t s = 0; s < samples; ++s) {
            double score = 0;
            for (std::size_t l = 0; l < dk; ++l) {
                const double prod = r.uniform(-a, a) * r.uniform(-a, a);
                score += prod;
                ++np;
                const double dp = prod - mp;
                mp += dp / double(np);
                m2p += dp * (prod - mp);
            }
            const double ds = score - ms;
            ms += ds / double(s + 1);
            m2s += ds * (score - ms);
        }
        row.var_product = m2p / double(np - 1);
        row.var_score = m2s / double(samples - 1);
        row.var_scaled = row.var_score / double(dk);
        // saturation: one query against n_keys keys, largest softmax weight, averaged over trials
        const std::size_t trials = std::max<std::size_t>(1, samples / n_keys);
        std::vector<double> sc(n_keys);
        for (std::size_t t = 0; t < trials; ++t) {
            std::vector<double> qv(dk);
            for (auto& e : qv) e = r.uniform(-a, a);
            for (auto& s : sc) {
                s = 0;
                for (std::size_t l = 0; l < dk; ++l) s += qv[l] * r.uniform(-a, a);
            }
            for (int scaled = 0; scaled < 2; ++scaled) {
                const double f = scaled ? 1.0 / std::sqrt(double(dk)) : 1.0;
                const double m = *std::max_element(sc.begin(), sc.end()) * f;
                double sum = 0;
                for (double s : sc) sum += std::exp(s * f - m);
                (scaled ? row.max_weight_scaled : row.max_weight_unscaled) += 1.0 / sum / double(trials);
            }
        }
        out.push_back(row);
    }
    return out;
}

} // namespace attn::sources
