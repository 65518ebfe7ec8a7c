// attn.count -- what one attention layer costs, in closed form and measured.
//  - parameters by tensor (W_q, W_k, W_v, W_o, biases), checked against the elements the
//    weights actually allocate;
//  - operations by stage and kind, counted exactly as attn.reference performs them (its header
//    comment is the contract), under three conventions: multiply-adds of the matmuls (fvcore's
//    unit), matmul-only FLOPs at 2 per multiply-add (FlashAttention's and ggml's), and the full
//    count of every add, multiply, divide, exp and compare (each one FLOP);
//  - a counting scalar, `counted`, that runs the reference and tallies every operation by stage,
//    so the full analytic count is held to a measurement;
//  - key/value cache bytes per token and the sequence length at which the attention stages'
//    FLOPs overtake the projections'.
// The partitions: :flops (operations by stage and convention, parameters, the crossover, the
// counting scalar) and :bytes (bytes moved and held, the key/value cache, decode costs, the
// ceilings at t threads and the roofline).
export module attn.count;
export import attn.core;
export import :flops;
export import :bytes;
