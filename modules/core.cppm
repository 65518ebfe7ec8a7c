// attn.core: what every part of attnbench speaks. A problem (sizes and family),
// the storage precisions, tensors and weights, and the variant interface that every implementation fills in.
export module attn.core;

export import :problem;
export import :precision;
export import :tensor;
export import :variant;
export import :kv;
