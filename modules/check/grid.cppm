// attn.check:grid -- the embedded grid `attnbench check` and the tests run every variant on.
module;
#include <cstddef>
#include <vector>
export module attn.check:grid;
import attn.core;

export namespace attn::check {

/// A case of the grid: a problem and the magnitude of its inputs (large ones make scores of 1e4).
struct grid_case {
    problem p;
    double magnitude = 1.0;
};

/// The embedded default grid: every family, odd sizes (N = 1, 7, 129; d_head = 1, 3, 17, 64, 80),
/// causal and not, cross-attention both ways, batch > 1, biases, and scores of about +-1e4.
inline std::vector<grid_case> default_grid() {
    std::vector<grid_case> g;
    auto add = [&](problem p, double mag = 1.0) {
        for (bool causal : {false, true}) {
            p.causal = causal;
            g.push_back({p, mag});
        }
    };
    add(single_head(17, 7));          // d_head 17
    add(mha(64, 4, 129));             // d_head 16, N 129
    add(mha(4, 4, 7));                // d_head 1
    add(mqa(48, 16, 7));              // d_head 3, MQA
    problem gq = gqa(512, 8, 2, 129); // d_head 64, GQA
    gq.bias = true;
    add(gq);
    problem g80 = gqa(320, 4, 2, 33); // d_head 80, batch 2
    g80.batch = 2;
    add(g80);
    add(wide(32, 4, 7));           // the wide-head counterfactual
    add(mha(64, 8, 1));            // N 1
    problem cross = mha(64, 4, 7); // cross-attention, fewer queries than keys
    cross.n_kv = 129;
    cross.bias = true;
    add(cross);
    problem rev = gqa(48, 4, 2, 129); // more queries than keys: causal rows that see nothing
    rev.n_kv = 7;
    rev.batch = 3;
    add(rev);
    add(mha(4, 4, 7), 100.0);  // d_head 1, inputs of 100: scores up to +-1e4
    add(mqa(64, 4, 33), 12.0); // d_head 16: scores of a few thousand
    return g;
}

} // namespace attn::check
