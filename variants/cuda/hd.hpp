// ATTN_HD: a function the host tests and the kernels both call (__host__ __device__ under nvcc,
// nothing for the host compiler). The layout, tile and schedule headers share it from here.
#pragma once

#if defined(__CUDACC__)
#define ATTN_HD __host__ __device__
#else
#define ATTN_HD
#endif
