// attn.kernels:gemv -- y = x W^T + b for a handful of rows (a decode step projects one token
// per sequence). With so few rows the packed GEMM of attn.kernels:gemm spends more time
// packing W^T (a transposed copy of the whole matrix, allocated per call) than multiplying; here
// each output is a dot product of x's row with W's row, read in place: W streams through once,
// with no copy and no allocation, and every row of x (<= gemv_max_rows) reuses each W load.
// Outputs are split into one contiguous band per thread and each is computed the same way on
// any thread, so the result does not depend on the thread count.
module;
#include <algorithm>
#include <cstddef>
#include <xsimd/xsimd.hpp>
export module attn.kernels:gemv;
import :isa;

export namespace attn::kernels {

/// linear() takes this path for at most this many rows.
inline constexpr std::size_t gemv_max_rows = 8;

namespace detail {

/// y[r, o] for R rows and the outputs [o0, o1), two outputs at a time (2R independent chains).
template <std::size_t R>
void gemv_band(const float* x, const float* w, const float* bias, float* y, std::size_t in, std::size_t out,
               std::size_t o0, std::size_t o1) {
    constexpr std::size_t L = batch::size;
    const std::size_t full = in / L * L;
    std::size_t o = o0;
    for (; o + 2 <= o1; o += 2) {
        const float* w0 = w + o * in;
        const float* w1 = w0 + in;
        batch a0[R], a1[R];
        for (std::size_t r = 0; r < R; ++r) a0[r] = a1[r] = batch(0.0f);
        for (std::size_t k = 0; k < full; k += L) {
            const batch b0 = batch::load_unaligned(w0 + k), b1 = batch::load_unaligned(w1 + k);
            for (std::size_t r = 0; r < R; ++r) {
                const batch xr = batch::load_unaligned(x + r * in + k);
                a0[r] = isa::fused(xr, b0, a0[r]);
                a1[r] = isa::fused(xr, b1, a1[r]);
            }
        }
        for (std::size_t r = 0; r < R; ++r) {
            float s0 = xsimd::hadd(a0[r]), s1 = xsimd::hadd(a1[r]);
            for (std::size_t k = full; k < in; ++k) {
                s0 += x[r * in + k] * w0[k];
                s1 += x[r * in + k] * w1[k];
            }
            y[r * out + o] = bias ? s0 + bias[o] : s0;
            y[r * out + o + 1] = bias ? s1 + bias[o + 1] : s1;
        }
    }
    for (; o < o1; ++o) { // an odd last output
        const float* w0 = w + o * in;
        batch a0[R];
        for (std::size_t r = 0; r < R; ++r) a0[r] = batch(0.0f);
        for (std::size_t k = 0; k < full; k += L) {
            const batch b0 = batch::load_unaligned(w0 + k);
            for (std::size_t r = 0; r < R; ++r) a0[r] = isa::fused(batch::load_unaligned(x + r * in + k), b0, a0[r]);
        }
        for (std::size_t r = 0; r < R; ++r) {
            float s0 = xsimd::hadd(a0[r]);
            for (std::size_t k = full; k < in; ++k) s0 += x[r * in + k] * w0[k];
            y[r * out + o] = bias ? s0 + bias[o] : s0;
        }
    }
}

template <std::size_t R = gemv_max_rows>
void gemv_dispatch(std::size_t rows, const float* x, const float* w, const float* bias, float* y, std::size_t in,
                   std::size_t out, std::size_t o0, std::size_t o1) {
    if constexpr (R == 0) {
        (void)rows, (void)x, (void)w, (void)bias, (void)y, (void)in, (void)out, (void)o0, (void)o1;
    } else if (rows == R) {
        gemv_band<R>(x, w, bias, y, in, out, o0, o1);
    } else {
        gemv_dispatch<R - 1>(rows, x, w, bias, y, in, out, o0, o1);
    }
}

} // namespace detail

/// y[rows, out] = x[rows, in] W[out, in]^T + b for rows <= gemv_max_rows, all row-major;
/// b may be null. Outputs split into `threads` bands (in pairs, so the split never changes
/// how an output is computed).
inline void gemv(const float* x, const float* w, const float* bias, float* y, std::size_t rows, std::size_t in,
                 std::size_t out, int threads = 1) {
    const std::size_t pairs = (out + 1) / 2;
    if (threads <= 1 || pairs < 2) {
        detail::gemv_dispatch(rows, x, w, bias, y, in, out, 0, out);
        return;
    }
#pragma omp parallel for num_threads(threads) schedule(static, 1)
    for (int t = 0; t < threads; ++t) {
        const std::size_t p0 = pairs * std::size_t(t) / std::size_t(threads);
        const std::size_t p1 = pairs * std::size_t(t + 1) / std::size_t(threads);
        if (p0 < p1) detail::gemv_dispatch(rows, x, w, bias, y, in, out, 2 * p0, std::min(out, 2 * p1));
    }
}

} // namespace attn::kernels
