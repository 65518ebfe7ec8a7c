// attn.sources -- the source documents' (shared/seeds/) worked examples and numerical claims,
// recomputed ("sources", not "seeds": the project's seeds are RNG seeds):
//  - seed 000's "Cat sleeps" toy (d_model = 4, H = 2, identity weights), run through the real
//    reference with its trace, next to every number the document prints;
//  - seed 003's convex-hull argument: a dense search over single-head queries, the closed-form
//    bound on the weight one head can give the interior key, and a two-head readout;
//  - seed 003's scaling claim Var(q.k) = d_k Var(q_l k_l), by seeded Monte Carlo.
// The computations are in experiments/modules/sources.cpp.
module;
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <numbers>
#include <string>
#include <vector>
export module attn.sources;
export import attn.core;

export namespace attn::sources {

/// A small row-major matrix with a label, for printing and JSON.
struct matrix {
    std::string name;
    std::size_t rows = 0, cols = 0;
    std::vector<double> v;
    double at(std::size_t i, std::size_t j) const { return v[i * cols + j]; }
};

/// One number the document prints, next to ours at the document's rounding.
struct printed_number {
    std::string what;     ///< e.g. "Head_2[Cat, 0]"
    std::string document; ///< as printed
    int decimals = 0;     ///< the document's rounding
    double ours = 0;
    std::string ours_rounded;
    bool agree = false;
};

struct toy_result {
    problem p;
    std::vector<matrix> steps;            ///< X, per-head Q/K/V, K^T, scores, scaled, softmax, outputs, Z, output
    std::vector<printed_number> compared; ///< every number the document prints
    double layer_max_abs_diff = 0;        ///< the reference layer vs the step-by-step run (should be 0)
    std::size_t agree() const {
        std::size_t n = 0;
        for (const auto& c : compared) n += c.agree;
        return n;
    }
};

/// Seed 000's example: X = [[1,2,0,0],[0,0,1,2]], d_model = 4, H = 2, W_q = W_k = W_v = W_o = I,
/// so head h's Q, K and V are columns 2h..2h+1 of X, as the document has them.
toy_result cat_sleeps();

/// Rounds like printf("%.*f") and turns "-0.00" into "0.00".
std::string rounded(double v, int decimals);

// ---- seed 003: the convex hull ----

/// The four keys of seed 003's thought experiment.
inline constexpr double hull_keys[4][2] = {{10, 0}, {0, 10}, {5, 5}, {2, 2}};

/// Softmax weights one head with query q gives the four keys (scores q.k, no further scaling:
/// the query's magnitude plays the temperature).
std::vector<double> hull_weights(double qx, double qy);

/// The largest weight a single head with |q| <= r can give k3, in closed form:
/// s3 = (s1 + s2)/2 so e^s1 + e^s2 >= 2 e^s3 (AM-GM), and s4 - s3 = -3(q_x + q_y) >= -3 sqrt(2) r;
/// hence w3 <= 1 / (3 + exp(-3 sqrt(2) r)), attained at q = r (1,1)/sqrt(2); the supremum over
/// all q is 1/3, never reached.
inline double hull_bound(double r) { return 1.0 / (3.0 + std::exp(-3.0 * std::numbers::sqrt2 * r)); }

struct hull_result {
    std::size_t n_theta = 0, n_r = 0;
    double r_min = 0, r_max = 0;
    std::vector<double> thetas, radii; ///< the search grid (radians; query magnitudes)
    std::vector<double> max_w3_by_r;   ///< max over directions of w3, per magnitude
    std::vector<double> bound_by_r;    ///< hull_bound(r)
    std::vector<double> w3_by_theta;   ///< at r = r_max, per direction
    std::vector<int> winner_by_theta;  ///< index of the largest score at each direction (0-based)
    double best_w3 = 0, best_theta = 0, best_r = 0;
    double max_margin = -1e300;            ///< max over the grid of s3 - max(s1, s2); <= 0 means never above both
    std::size_t k3_strictly_first = 0;     ///< grid points where w3 > w1 and w3 > w2
    double max_abs_search_minus_bound = 0; ///< over r: |max_theta w3 - hull_bound(r)|
    double max_mean_residual = 0;          ///< over the grid: |s3 - (s1+s2)/2|
};

/// Dense search over query directions (n_theta, uniformly in [0, 2 pi)) and magnitudes (n_r,
/// geometric in [r_min, r_max]).
hull_result hull_search(std::size_t n_theta, std::size_t n_r, double r_min, double r_max);

struct two_head_result {
    double q1[2], q2[2];
    std::vector<double> s1, s2;                 ///< each head's scores for k1..k4
    std::vector<double> w1, w2;                 ///< each head's own softmax weights
    std::vector<double> readout;                ///< min(s1, s2) per key: the fixed nonlinear readout
    std::vector<double> betas;                  ///< readout temperatures
    std::vector<std::vector<double>> selection; ///< softmax(beta * readout), per beta
    int winner = -1;                            ///< argmax of the readout (0-based)
};

/// Two heads, q1 = (1, eps), q2 = (eps, 1), read out by min over heads of the scores.
two_head_result two_heads(double eps, std::vector<double> betas);

// ---- seed 003: why scale by 1/sqrt(d_k) ----

struct variance_row {
    std::size_t d_k = 0, samples = 0;
    double var_product = 0;         ///< Var(q_l k_l) estimated
    double var_score = 0;           ///< Var(q.k) estimated
    double var_scaled = 0;          ///< Var(q.k / sqrt(d_k)) estimated
    double max_weight_unscaled = 0; ///< mean over trials of the largest softmax weight over n_keys keys
    double max_weight_scaled = 0;
    std::size_t n_keys = 0;
};

/// q and k with i.i.d. components U(-sqrt 3, sqrt 3) (mean 0, variance 1), seeded.
std::vector<variance_row> scaling_variance(const std::vector<std::size_t>& d_ks, std::size_t samples,
                                           std::size_t n_keys, std::uint64_t seed);

} // namespace attn::sources
