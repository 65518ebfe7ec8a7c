// attn.grids -- the embedded grids, written as grids of the one case type (attn::grid, variants
// left out: shapes alone) and expanded by attn::expand like a sweep file's [[perf.grid]]: the
// problems `attnbench check` and the tests run every variant on, the decode steps they check,
// and the problems the analytic FLOP count is held to the measured one on.
module;
#include <cstddef>
#include <string>
#include <utility>
#include <vector>
export module attn.grids;
export import attn.cases;

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

/// g as MLA's, both forms: d_c kv_rank, d_c' q_rank, rope d_h^R, d_head nope + rope, values d_v.
inline grid latent(grid g, std::size_t kv_rank, std::size_t q_rank, std::size_t rope, std::size_t d_head,
                   std::size_t d_v) {
    g.families = {family::mla};
    g.forms = {form::naive, form::absorb};
    g.kv_heads = {0};
    g.kv_lora_rank = {kv_rank};
    g.q_lora_rank = {q_rank};
    g.qk_rope_head_dim = {rope};
    g.d_head = {d_head};
    g.d_v = {d_v};
    return g;
}

/// The embedded default grid: every family, odd sizes (N = 1, 7, 129; d_head = 1, 3, 16, 17, 64,
/// 80), causal and not, cross-attention both ways, batch > 1, biases, and scores of about +-1e4.
inline std::vector<grid> default_grids() {
    std::vector<grid> g{shape_grid("d_head 17", 17, 1, 1, 7),
                        shape_grid("N 129", 64, 4, 4, 129),
                        shape_grid("d_head 1", 4, 4, 4, 7),
                        shape_grid("MQA d_head 3", 48, 16, 1, 7),
                        shape_grid("GQA bias", 512, 8, 2, 129),
                        shape_grid("d_head 80 batch 2", 320, 4, 2, 33),
                        shape_grid("wide", 32, 4, 4, 7),
                        shape_grid("N 1", 64, 8, 8, 1),
                        shape_grid("cross", 64, 4, 4, 7),
                        shape_grid("more queries than keys", 48, 4, 2, 129),
                        shape_grid("inputs 100", 4, 4, 4, 7),
                        shape_grid("inputs 12", 64, 4, 1, 33),
                        latent(shape_grid("MLA", 32, 4, 0, 9), 16, 0, 4, 12, 6),
                        latent(shape_grid("MLA query latent batch 2", 48, 2, 0, 33), 24, 8, 8, 24, 16)};
    g[4].bias = {true};
    g[5].batch = {2};
    g[6].d_head = {32};  // the wide-head counterfactual: each head as wide as the model
    g[8].kv_seq = {129}; // fewer queries than keys
    g[8].bias = {true};
    g[9].kv_seq = {7}; // more queries than keys: causal rows that see nothing
    g[9].batch = {3};
    g[10].magnitude = {100.0}; // d_head 1, inputs of 100: scores up to +-1e4
    g[11].magnitude = {12.0};  // d_head 16: scores of a few thousand
    g[13].batch = {2};
    return g;
}

/// A case of the grid: a problem and the magnitude of its inputs (large ones make scores of 1e4).
struct grid_case {
    problem p;
    double magnitude = 1.0;
};

/// default_grids() expanded: 32 problems, each grid's shape without and with the causal mask (MLA's
/// in both forms).
inline std::vector<grid_case> default_grid() {
    std::vector<grid_case> out;
    for (const auto& c : expand(default_grids(), 1)) out.push_back({c.shape(), c.magnitude});
    return out;
}

} // namespace attn::check

export namespace attn {

/// One decode shape of the grid: no variants (check crosses it with its own), one thread.
inline grid decode_shape(std::string name, std::size_t d_model, std::size_t heads, std::size_t kv_heads,
                         std::vector<std::size_t> context, std::size_t batch = 1) {
    grid g;
    g.name = std::move(name);
    g.variants = {};
    g.modes = {mode::decode};
    g.threads = {1};
    g.d_model = {d_model};
    g.heads = {heads};
    g.kv_heads = {kv_heads};
    g.context = std::move(context);
    g.batch = {batch};
    return g;
}

/// The embedded decode grid, as grids of the one case type: every family (single-head, MHA, MQA,
/// GQA, wide), L = 0, odd L, L long enough for the key split (> 256 keys: 2 chunks; > 4096: 16),
/// batch > 1, biases, d_head 3, 4, 16, 17, 20, 64 and 80, scores of a few thousand, and the heads
/// in the lanes (R >= lanes) in an odd number of register blocks, d_head 4 narrower than a pass.
inline std::vector<grid> decode_grids() {
    std::vector<grid> g{decode_shape("d_head 17", 17, 1, 1, {0, 7}), // L 0: one key
                        decode_shape("MHA batch 2", 64, 4, 4, {129}, 2),
                        decode_shape("MQA d_head 3", 48, 16, 1, {7}),
                        decode_shape("GQA bias, two key chunks", 512, 8, 2, {300}, 3),
                        decode_shape("d_head 80", 320, 4, 2, {33}, 2),
                        decode_shape("wide", 32, 4, 4, {7}),
                        decode_shape("MHA L 0", 64, 8, 8, {0}),
                        decode_shape("MQA 16 key chunks", 128, 4, 1, {4999}, 2),
                        decode_shape("inputs 12", 64, 4, 1, {33}),
                        decode_shape("16 heads per kv head", 256, 16, 1, {700}, 2), // heads in the lanes
                        decode_shape("8 heads per kv head", 512, 8, 1, {300}),
                        decode_shape("32 heads per kv head", 640, 32, 1, {77}), // two groups of lanes
                        check::latent(decode_shape("MLA", 64, 4, 0, {0, 300}), 32, 0, 4, 20, 16),
                        check::latent(decode_shape("MLA query latent batch 2", 48, 8, 0, {33}, 2), 64, 16, 8, 24, 8),
                        decode_shape("24 heads per kv head", 96, 24, 1, {65}),   // blocks: 2 + 1 on AVX2
                        decode_shape("48 heads per kv head", 192, 48, 1, {65})}; // 2 + 1 on AVX-512
    g[3].bias = {true};
    g[5].d_head = {32}; // the wide-head counterfactual
    g[8].magnitude = {12.0};
    g[11].bias = {true};
    return g;
}

/// A case of the decode grid: the layer (batch, sizes), the context length L and the input magnitude.
struct decode_case {
    problem layer;
    std::size_t context = 0;
    double magnitude = 1.0;
};

/// decode_grids() expanded: 21 decode steps (MLA's in both forms); the layer is the case's shape
/// with one query.
inline std::vector<decode_case> decode_grid() {
    std::vector<decode_case> out;
    for (const auto& c : expand(decode_grids(), 1)) {
        problem layer = c.shape();
        layer.n_q = layer.n_kv = 1;
        layer.causal = false;
        out.push_back({layer, c.context, c.magnitude});
    }
    return out;
}

/// The default grid the analytic count is held to, as grids of the one case type (layer mode,
/// shapes alone): every family, causal and not, N_q = N_kv, N_q < N_kv and N_q > N_kv, with and
/// without bias, batch 1 and 2, odd sizes.
inline std::vector<grid> flop_check_grids() {
    struct family {
        const char* name;
        std::size_t d_model, heads, kv_heads, d_head;
    };
    const family families[] = {{"single head, odd width", 5, 1, 1, 0},
                               {"MHA, d_head 2", 6, 3, 3, 0},
                               {"MQA, odd d_head 3", 9, 3, 1, 0},
                               {"GQA:2", 8, 4, 2, 0},
                               {"wide: each head as wide as the model", 3, 2, 2, 3}};
    const std::size_t lengths[][2] = {{1, 1}, {5, 5}, {3, 7}, {7, 3}}; // (N_q, N_kv)
    std::vector<grid> grids;
    for (const auto& f : families)
        for (const auto& n : lengths) {
            grid g;
            g.name = std::string(f.name) + ", N_q " + std::to_string(n[0]) + " N_kv " + std::to_string(n[1]);
            g.variants = {};
            g.modes = {mode::layer};
            g.threads = {1};
            g.d_model = {f.d_model};
            g.heads = {f.heads};
            g.kv_heads = {f.kv_heads};
            g.d_head = {f.d_head};
            g.seq = {n[0]};
            g.kv_seq = {n[1]};
            g.batch = {1, 2};
            g.causal = {false, true};
            g.bias = {false, true};
            grids.push_back(std::move(g));
        }
    for (const auto& n : lengths)
        for (std::size_t q_rank : {0, 3}) {
            grid g;
            g.name = "MLA, d_c' " + std::to_string(q_rank) + ", N_q " + std::to_string(n[0]) + " N_kv " +
                     std::to_string(n[1]);
            g.variants = {};
            g.modes = {mode::layer};
            g.threads = {1};
            g.d_model = {6};
            g.heads = {2};
            g.seq = {n[0]};
            g.kv_seq = {n[1]};
            g.batch = {1, 2};
            g.causal = {false, true};
            grids.push_back(check::latent(std::move(g), 5, q_rank, 2, 5, 3)); // nope 3, rope 2, d_v 3
        }
    return grids;
}

/// flop_check_grids() expanded: 224 problems (64 of them MLA's).
inline std::vector<problem> flop_check_grid() {
    std::vector<problem> out;
    for (const auto& c : expand(flop_check_grids(), 1)) out.push_back(c.shape());
    return out;
}

} // namespace attn
