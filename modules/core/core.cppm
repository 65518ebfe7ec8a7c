// attn.core: what every part of attnbench speaks. The kinds a case is typed by (mode, device,
// storage type, family, form) and their name tables, a problem (sizes and family; MLA's latent
// widths and named configurations in :latent), the storage
// precisions, tensors and weight sets, the counting scalar, and the variant interface that every
// implementation fills in.
export module attn.core;

export import :error;
export import :names;
export import :problem;
export import :latent;
export import :precision;
export import :tensor;
export import :counted;
export import :variant;
export import :kv;
