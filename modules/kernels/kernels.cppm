// attn.kernels -- the explicitly vectorised building blocks shared by the `simd` and
// `parallel` variants, one partition each in modules/kernels/:
//  - :isa      every instruction-set-specific piece (AVX-512, AVX/AVX2 with FMA, generic);
//  - :softmax  row maximum and exp-and-sum, shared by the two cores;
//  - :gemv     y = x W^T + b for a few rows;
//  - :gemm     the packed, register-blocked SIMD GEMM and linear();
//  - :tiled    the tiled streaming-softmax attention core on the GEMM;
//  - :bf16dot  the tiled core in bf16 on AVX512_BF16's vdpbf16ps, where the CPU has it;
//  - :decode   the one-query-row core (a decode step over a key/value cache), built from
//    :decode_parts (lane-group reductions, widening, prefetch, the P V update);
//  - :variant  tiled_variant: the core for a problem (decode or tiled) as an attn::variant.
export module attn.kernels;

export import :isa;
export import :softmax;
export import :gemv;
export import :gemm;
export import :tiled;
export import :bf16dot;
export import :decode_parts;
export import :decode;
export import :variant;
