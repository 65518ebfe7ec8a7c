// attn.kernels -- the explicitly vectorised building blocks shared by the `simd` and
// `parallel` variants: a packed, register-blocked SIMD GEMM (and a GEMV for a few rows), the
// tiled streaming-softmax attention core built on it, and its one-query-row path for decoding.
export module attn.kernels;

export import attn.kernels.gemv;
export import attn.kernels.gemm;
export import attn.kernels.decode;
export import attn.kernels.tiled;
