// attn.identities -- the identities the seed documents rely on, checked on the fp64 reference:
//  - the per-head loop equals the batched computation on (batch, heads, seq, d_head) tensors
//    (reshape + transpose, as frameworks do it; computed here with xtensor);
//  - MHA equals H independent single-head attentions, concatenated, then projected by W_o;
//  - GQA with G groups equals MHA whose heads share their group's key/value weights
//    (G = H is MHA itself, G = 1 is MQA).
module;
#include <cstdint>
#include <string>
#include <vector>
export module attn.identities;
import attn.core;

export namespace attn {

struct identity_result {
    std::string name;
    std::string problem; ///< what it was checked on
    double max_abs_diff = 0;
    double tolerance = 0; ///< absolute, at the worst element: twice attn.check's fp64 bound there
    ///< (differences come only from summation order)
    bool pass = false;
};

std::vector<identity_result> check_identities(std::uint64_t seed);

} // namespace attn
