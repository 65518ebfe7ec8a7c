// attn.stats -- the statistics a claimed speed-up needs: medians and the Mann-Whitney U test
// over repetitions (rank-based, so one noisy repetition on a shared machine cannot carry it).
module;
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>
export module attn.stats;

export namespace attn::stats {

inline double median(std::vector<double> v) {
    if (v.empty()) return NAN;
    std::sort(v.begin(), v.end());
    const std::size_t n = v.size();
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

struct mann_whitney {
    double u = 0;      ///< U of the first sample: pairs (a, b) with a > b, ties counting 1/2
    double p = 1;      ///< two-sided p-value
    bool exact = false; ///< exact distribution (no ties, small samples) or the normal approximation
};

/// Two-sided Mann-Whitney U test of a against b. Exact when there are no ties and both
/// samples have at most 30 values (counting the arrangements of ranks), otherwise the normal
/// approximation with the tie correction and a continuity correction.
inline mann_whitney mann_whitney_u(const std::vector<double>& a, const std::vector<double>& b) {
    mann_whitney r;
    const std::size_t n1 = a.size(), n2 = b.size();
    if (n1 == 0 || n2 == 0) return r;
    bool ties = false;
    for (double x : a)
        for (double y : b) {
            if (x > y) r.u += 1;
            else if (x == y) {
                r.u += 0.5;
                ties = true;
            }
        }
    std::vector<double> all(a);
    all.insert(all.end(), b.begin(), b.end());
    std::sort(all.begin(), all.end());
    if (std::adjacent_find(all.begin(), all.end()) != all.end()) ties = true;
    const double mean = double(n1 * n2) / 2;
    if (!ties && n1 <= 30 && n2 <= 30) {
        // count[m][n][u]: arrangements of m a's and n b's with U = u; built up by the last value
        // being an a (it beats all n b's: U grows by n) or a b.
        const std::size_t umax = n1 * n2;
        std::vector<std::vector<std::vector<double>>> f(n1 + 1, std::vector<std::vector<double>>(n2 + 1));
        for (std::size_t m = 0; m <= n1; ++m)
            for (std::size_t n = 0; n <= n2; ++n) {
                f[m][n].assign(m * n + 1, 0.0);
                if (m == 0 || n == 0) {
                    f[m][n][0] = 1;
                    continue;
                }
                for (std::size_t u = 0; u <= m * n; ++u) {
                    double c = 0;
                    if (u >= n && u - n <= (m - 1) * n) c += f[m - 1][n][u - n];
                    if (u <= m * (n - 1)) c += f[m][n - 1][u];
                    f[m][n][u] = c;
                }
            }
        double total = 0, below = 0, above = 0;
        const std::size_t u = std::size_t(r.u);
        for (std::size_t k = 0; k <= umax; ++k) {
            total += f[n1][n2][k];
            if (k <= u) below += f[n1][n2][k];
            if (k >= u) above += f[n1][n2][k];
        }
        r.p = std::min(1.0, 2 * std::min(below, above) / total);
        r.exact = true;
        return r;
    }
    // normal approximation with tie correction
    const double n = double(n1 + n2);
    double tie_term = 0;
    for (std::size_t i = 0; i < all.size();) {
        std::size_t j = i;
        while (j < all.size() && all[j] == all[i]) ++j;
        const double t = double(j - i);
        tie_term += t * t * t - t;
        i = j;
    }
    const double var = double(n1 * n2) / 12 * ((n + 1) - tie_term / (n * (n - 1)));
    if (var <= 0) return r;
    const double z = (std::abs(r.u - mean) - 0.5) / std::sqrt(var);
    r.p = std::min(1.0, std::erfc(std::max(z, 0.0) / std::sqrt(2.0)));
    return r;
}

} // namespace attn::stats
