// attn.check:grid -- the embedded grid `attnbench check` and the tests run every variant on,
// written as grids of the one case type (attn::grid, variants left out: shapes alone) and
// expanded by attn::expand, like a sweep file's [[perf.grid]].
module;
#include <cstddef>
#include <string>
#include <utility>
#include <vector>
export module attn.check:grid;
import attn.core;
import attn.cases;

export namespace attn::check {

/// A one-shape grid: no variants (check crosses shapes with its own), one thread, causal and not.
inline grid shape_grid(std::string name, std::size_t d_model, std::size_t heads, std::size_t kv_heads, std::size_t n) {
    grid g;
    g.name = std::move(name);
    g.variants = {};
    g.threads = {1};
    g.d_model = {d_model};
    g.heads = {heads};
    g.kv_heads = {kv_heads};
    g.seq = {n};
    g.causal = {false, true};
    return g;
}

/// The embedded default grid: every family, odd sizes (N = 1, 7, 129; d_head = 1, 3, 16, 17, 64,
/// 80), causal and not, cross-attention both ways, batch > 1, biases, and scores of about +-1e4.
inline std::vector<grid> default_grids() {
    std::vector<grid> g{shape_grid("d_head 17", 17, 1, 1, 7),   shape_grid("N 129", 64, 4, 4, 129),
                        shape_grid("d_head 1", 4, 4, 4, 7),     shape_grid("MQA d_head 3", 48, 16, 1, 7),
                        shape_grid("GQA bias", 512, 8, 2, 129), shape_grid("d_head 80 batch 2", 320, 4, 2, 33),
                        shape_grid("wide", 32, 4, 4, 7),        shape_grid("N 1", 64, 8, 8, 1),
                        shape_grid("cross", 64, 4, 4, 7),       shape_grid("more queries than keys", 48, 4, 2, 129),
                        shape_grid("inputs 100", 4, 4, 4, 7),   shape_grid("inputs 12", 64, 4, 1, 33)};
    g[4].bias = {true};
    g[5].batch = {2};
    g[6].d_head = {32};  // the wide-head counterfactual: each head as wide as the model
    g[8].kv_seq = {129}; // fewer queries than keys
    g[8].bias = {true};
    g[9].kv_seq = {7}; // more queries than keys: causal rows that see nothing
    g[9].batch = {3};
    g[10].magnitude = {100.0}; // d_head 1, inputs of 100: scores up to +-1e4
    g[11].magnitude = {12.0};  // d_head 16: scores of a few thousand
    return g;
}

/// A case of the grid: a problem and the magnitude of its inputs (large ones make scores of 1e4).
struct grid_case {
    problem p;
    double magnitude = 1.0;
};

/// default_grids() expanded: 24 problems, each grid's shape without and with the causal mask.
inline std::vector<grid_case> default_grid() {
    std::vector<grid_case> out;
    for (const auto& c : expand(default_grids(), 1)) out.push_back({c.shape(), c.magnitude});
    return out;
}

} // namespace attn::check
