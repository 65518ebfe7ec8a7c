// attn.kernels -- the explicitly vectorised building blocks shared by the `simd` and
// `parallel` variants: a packed, register-blocked SIMD GEMM and the tiled streaming-softmax
// attention core built on it.
export module attn.kernels;

export import attn.kernels.gemm;
export import attn.kernels.tiled;
