// attn.decode -- incremental decoding with a key/value cache. A decode step takes one new token
// per sequence, projects it, appends its key and value to the cache, attends over all L+1
// cached keys with the variant's own core (n_q = 1, over strided views of the cache), and
// projects the context out. It is built on kernel_set, so every registered variant decodes
// through its own kernels with no per-variant code.
//
// The cache (:cache) is stored as f32, or narrower as bf16, f16 or int8 (attn.core:kv), which a
// variant's kv cores read; queries, weights, projections and accumulations stay fp32. Partitions:
// :cache the cache, :step the step, prefill and the timed fixture, :check the equivalence checks.
//
// Memory: a step allocates nothing once its decode_workspace exists (q, the new k and v, the
// context: O(batch x d_model)); the rest is the cache itself and whatever the variant's core
// keeps (variant::scratch_bytes of the step's problem).
export module attn.decode;
export import attn.core;
export import attn.count; // decode_problem, decode_cost
export import attn.families;
export import :cache;
export import :step;
export import :check;
