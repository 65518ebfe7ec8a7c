// attn.kernels:gemm -- C (+)= A * B with B packed into panels of `nr` columns (two SIMD
// registers wide) and a register-blocked micro-kernel: `mr` rows x nr columns of C stay in
// registers while the inner dimension streams through, one broadcast of A and two loads of B
// per `2*mr` FMAs. The same kernel serves the projections (B = W^T), the scores (B = K^T)
// and the weighted sum (B = V). Loads are blocked so an A strip sits in L1 and a group of
// panels in L2. For a given element the order of operations does not depend on how rows are
// split between threads, so any thread count gives the same bytes.
// Operands stored in bf16 or f16 are widened to fp32 as they are packed (and A in row bands,
// in linear()), so the micro-kernel is the fp32 one and accumulates in fp32; results are rounded
// to the storage format as they are stored.
module;
#include <algorithm>
#include <cstddef>
#include <memory>
#include <new>
#include <utility>
#include <vector>
#include <xsimd/xsimd.hpp>
export module attn.kernels:gemm;
import :isa;
import :gemv;
import attn.core;

export namespace attn::kernels {

inline constexpr std::size_t nr = 2 * lanes; ///< panel width (columns of C per micro-tile)
/// rows of C per micro-tile: 2 x mr accumulators, two B batches and a broadcast in registers
inline constexpr std::size_t mr = isa::vector_registers >= 32 ? 8 : 6;
inline constexpr std::size_t kc = 256;      ///< inner-dimension block (A strip and panel slice in L1)
inline constexpr std::size_t nc_panels = 8; ///< panels per L2 group

template <class T>
using aligned_vector = std::vector<T, xsimd::aligned_allocator<T, 64>>;

/// An allocator whose value-less construct() default-initialises: a vector's resize() leaves the
/// floats as they are, for scratch that is written before it is read (the tiled core's:
/// value-initialised, its 450 KiB of tiles at d_head 64 were zeroed at every call). Base says
/// where the memory comes from: 64-byte aligned blocks, or big_allocator's huge pages.
template <class Base>
struct uninit_allocator : Base {
    template <class U>
    struct rebind {
        using other = uninit_allocator<typename std::allocator_traits<Base>::template rebind_alloc<U>>;
    };
    uninit_allocator() noexcept = default;
    template <class B>
    uninit_allocator(const uninit_allocator<B>&) noexcept {}
    template <class U>
    void construct(U* q) noexcept {
        ::new (static_cast<void*>(q)) U;
    }
    template <class U, class... A>
    void construct(U* q, A&&... a) {
        ::new (static_cast<void*>(q)) U(std::forward<A>(a)...);
    }
};

/// A vector on uninit_allocator: scratch whose every element is written before it is read.
template <class T>
using scratch_vector = std::vector<T, uninit_allocator<xsimd::aligned_allocator<T, 64>>>;

/// Scratch of a megabyte and more that is streamed (a whole head's packed keys and values): on
/// huge pages, as the key/value cache (big_allocator).
template <class T>
using big_scratch_vector = std::vector<T, uninit_allocator<big_allocator<T>>>;

/// Grows v to at least n elements, never shrinks it: the per-thread buffers that the cores keep
/// from call to call (tiled_scratch, decode's) allocate nothing once they are large enough.
template <class V>
void grow(V& v, std::size_t n) {
    if (v.size() < n) v.resize(n);
}

inline std::size_t round_up(std::size_t n, std::size_t m) { return (n + m - 1) / m * m; }

/// Floats needed to pack a K x N matrix.
inline std::size_t packed_size(std::size_t k, std::size_t n) { return k * round_up(n, nr); }

/// Packs B (element (k, n) at b[k*ld_k + n*ld_n]) into panels of nr columns, zero-padded:
/// panel p, row k, column c lands at dst[p*panel_ld + k*nr + c] (panel_ld >= K*nr: a key/value
/// tile packed into its rows of a whole head's panels). S: float, bf16 or f16 (widened).
template <class S>
void pack_b(const S* b, std::size_t ld_k, std::size_t ld_n, std::size_t K, std::size_t N, float* dst,
            std::size_t panel_ld) {
    for (std::size_t p = 0; p * nr < N; ++p) {
        const std::size_t n0 = p * nr, cols = std::min(nr, N - n0);
        float* panel = dst + p * panel_ld;
        if (ld_n == 1 && cols == nr) { // rows of B contiguous, a whole panel: two batches a row
            // (in fp32 the array copy below is a memcpy call per 16 floats: 4 % of perf's samples
            // of the core at d_head 64)
            for (std::size_t k = 0; k < K; ++k) {
                const S* src = b + k * ld_k + n0;
                isa::widen(src).store_aligned(panel + k * nr);
                isa::widen(src + lanes).store_aligned(panel + k * nr + lanes);
            }
        } else if (ld_n == 1) { // rows of B contiguous: copy runs
            for (std::size_t k = 0; k < K; ++k) {
                isa::widen(b + k * ld_k + n0, panel + k * nr, cols);
                std::fill(panel + k * nr + cols, panel + (k + 1) * nr, 0.0f);
            }
        } else { // columns of B contiguous (B = W^T or K^T): a transpose
            // in registers where the ISA section has a transpose (AVX/AVX2: 8 x 8 blocks)
            std::size_t k = ld_k == 1 && cols == nr ? isa::transpose_panel(b + n0 * ld_n, ld_n, K, nr, panel, nr) : 0;
            // the rest one element at a time: k outer, c inner, so each store is contiguous, and the
            // compiler is kept from turning the strided side into scatters (vscatterqps made this
            // the kernel's hottest line)
            for (; k < K; ++k) {
                float* dst_row = panel + k * nr;
#pragma clang loop vectorize(disable)
                for (std::size_t c = 0; c < cols; ++c) dst_row[c] = float(b[(n0 + c) * ld_n + k * ld_k]);
                for (std::size_t c = cols; c < nr; ++c) dst_row[c] = 0.0f;
            }
        }
    }
}

/// pack_b with the panels one after another: panel p at dst + p*K*nr.
template <class S>
void pack_b(const S* b, std::size_t ld_k, std::size_t ld_n, std::size_t K, std::size_t N, float* dst) {
    pack_b(b, ld_k, ld_n, K, N, dst, K * nr);
}

/// pack_b of W^T for y = x W^T (W row-major [out, in]) with its panels shared by `threads`: every
/// call of linear() packs W^T, and done on one thread it was a part of a layer that more threads
/// did not shorten. (pack_b itself stays serial: the tiled core calls it inside its own threads.)
template <class S>
void pack_wt(const S* w, std::size_t in, std::size_t out, float* dst, int threads) {
    const std::size_t panels = (out + nr - 1) / nr;
#pragma omp parallel for num_threads(threads) if (threads > 1 && panels > 1) schedule(static)
    for (std::size_t p = 0; p < panels; ++p)
        pack_b(w + p * nr * in, 1, in, in, std::min(nr, out - p * nr), dst + p * in * nr);
}

namespace detail {

/// C[MR x ncols] (+)= A[MR x K] * panel[K x nr]; the micro-kernel.
template <std::size_t MR>
inline void micro(std::size_t K, const float* a, std::size_t lda, const float* panel, float* c, std::size_t ldc,
                  std::size_t ncols, bool accumulate) {
    batch c0[MR], c1[MR];
    for (std::size_t r = 0; r < MR; ++r) c0[r] = c1[r] = batch(0.0f);
    for (std::size_t k = 0; k < K; ++k) {
        const batch b0 = batch::load_aligned(panel + k * nr);
        const batch b1 = batch::load_aligned(panel + k * nr + lanes);
        for (std::size_t r = 0; r < MR; ++r) {
            const batch ar(a[r * lda + k]);
            c0[r] = isa::fused(ar, b0, c0[r]);
            c1[r] = isa::fused(ar, b1, c1[r]);
        }
    }
    if (ncols == nr) {
        for (std::size_t r = 0; r < MR; ++r) {
            float* cr = c + r * ldc;
            if (accumulate) {
                c0[r] += batch::load_unaligned(cr);
                c1[r] += batch::load_unaligned(cr + lanes);
            }
            c0[r].store_unaligned(cr);
            c1[r].store_unaligned(cr + lanes);
        }
    } else {
        alignas(64) float tmp[nr];
        for (std::size_t r = 0; r < MR; ++r) {
            c0[r].store_aligned(tmp);
            c1[r].store_aligned(tmp + lanes);
            float* cr = c + r * ldc;
            for (std::size_t j = 0; j < ncols; ++j) cr[j] = accumulate ? cr[j] + tmp[j] : tmp[j];
        }
    }
}

template <std::size_t MR = mr>
inline void micro_rows(std::size_t rows, std::size_t K, const float* a, std::size_t lda, const float* panel, float* c,
                       std::size_t ldc, std::size_t ncols, bool accumulate) {
    if constexpr (MR == 0) {
        (void)rows, (void)K, (void)a, (void)lda, (void)panel, (void)c, (void)ldc, (void)ncols, (void)accumulate;
    } else if (rows == MR) {
        micro<MR>(K, a, lda, panel, c, ldc, ncols, accumulate);
    } else {
        micro_rows<MR - 1>(rows, K, a, lda, panel, c, ldc, ncols, accumulate);
    }
}

} // namespace detail

/// C[m0:m1, 0:N] (+)= A[m0:m1, 0:K] * B, with B packed by pack_b (panel p at b_packed +
/// p*panel_ld); A and C row-major.
inline void gemm_rows(std::size_t m0, std::size_t m1, std::size_t N, std::size_t K, const float* a, std::size_t lda,
                      const float* b_packed, std::size_t panel_ld, float* c, std::size_t ldc, bool accumulate) {
    const std::size_t panels = (N + nr - 1) / nr;
    for (std::size_t k0 = 0; k0 < K; k0 += kc) {
        const std::size_t kl = std::min(kc, K - k0);
        const bool acc = accumulate || k0 > 0;
        for (std::size_t p0 = 0; p0 < panels; p0 += nc_panels) {
            const std::size_t p1 = std::min(panels, p0 + nc_panels);
            for (std::size_t i = m0; i < m1; i += mr) {
                const std::size_t rows = std::min(mr, m1 - i);
                for (std::size_t p = p0; p < p1; ++p) {
                    detail::micro_rows(rows, kl, a + i * lda + k0, lda, b_packed + p * panel_ld + k0 * nr,
                                       c + i * ldc + p * nr, ldc, std::min(nr, N - p * nr), acc);
                }
            }
        }
    }
}

/// gemm_rows with B's panels one after another (pack_b's K*nr apart).
inline void gemm_rows(std::size_t m0, std::size_t m1, std::size_t N, std::size_t K, const float* a, std::size_t lda,
                      const float* b_packed, float* c, std::size_t ldc, bool accumulate) {
    gemm_rows(m0, m1, N, K, a, lda, b_packed, K * nr, c, ldc, accumulate);
}

/// C[M x N] (+)= A[M x K] * B, rows of C split over `threads` OpenMP threads.
inline void gemm(std::size_t M, std::size_t N, std::size_t K, const float* a, std::size_t lda, const float* b_packed,
                 float* c, std::size_t ldc, bool accumulate, int threads = 1) {
    if (threads <= 1 || M <= mr) {
        gemm_rows(0, M, N, K, a, lda, b_packed, c, ldc, accumulate);
        return;
    }
    // One contiguous band of row blocks per thread, so each band keeps the panel-group reuse.
    const std::size_t blocks = (M + mr - 1) / mr;
#pragma omp parallel for num_threads(threads) schedule(static, 1)
    for (int t = 0; t < threads; ++t) {
        const std::size_t b0 = blocks * std::size_t(t) / std::size_t(threads);
        const std::size_t b1 = blocks * std::size_t(t + 1) / std::size_t(threads);
        if (b0 < b1) gemm_rows(b0 * mr, std::min(M, b1 * mr), N, K, a, lda, b_packed, c, ldc, accumulate);
    }
}

/// y = x W^T + b for a row-major x [rows, in] and W [out, in]: pack W^T once, then gemm.
inline void linear(const float* x, const float* w, const float* bias, float* y, std::size_t rows, std::size_t in,
                   std::size_t out, int threads = 1) {
    // A few rows (a decode step): dot products over W in place, no packed copy of W^T.
    if (rows <= gemv_max_rows) return gemv(x, w, bias, y, rows, in, out, threads);
    aligned_vector<float> wp(packed_size(in, out));
    pack_wt(w, in, out, wp.data(), threads);
    if (bias) {
        for (std::size_t r = 0; r < rows; ++r) std::copy(bias, bias + out, y + r * out);
    }
    gemm(rows, out, in, x, in, wp.data(), y, out, bias != nullptr, threads);
}

/// Rows of x widened (and of y narrowed) at a time by linear() in bf16 and f16: a multiple of
/// mr, small enough that a band of x and of y stays in L2 beside the packed W^T's panel group.
inline constexpr std::size_t half_band = 96;

/// y = x W^T + b with x, W, b and y stored in bf16 or f16 and fp32 arithmetic: W^T is widened
/// while it is packed, x in bands of half_band rows, each band's fp32 result narrowed as it is
/// stored. Bands go to the threads whole, and a band is computed the same way on any thread.
template <class T>
void linear(const T* x, const T* w, const T* bias, T* y, std::size_t rows, std::size_t in, std::size_t out,
            int threads = 1) {
    aligned_vector<float> wp(packed_size(in, out)), b(bias ? out : 0);
    pack_wt(w, in, out, wp.data(), threads);
    if (bias) isa::widen(bias, b.data(), out);
    const std::size_t bands = (rows + half_band - 1) / half_band;
#pragma omp parallel num_threads(threads) if (threads > 1 && bands > 1)
    {
        aligned_vector<float> xb(half_band * in), yb(half_band * out);
#pragma omp for schedule(static)
        for (std::size_t band = 0; band < bands; ++band) {
            const std::size_t r0 = band * half_band, n = std::min(half_band, rows - r0);
            isa::widen(x + r0 * in, xb.data(), n * in);
            if (bias)
                for (std::size_t r = 0; r < n; ++r) std::copy(b.begin(), b.end(), yb.begin() + long(r * out));
            gemm_rows(0, n, out, in, xb.data(), in, wp.data(), yb.data(), out, bias != nullptr);
            isa::narrow(yb.data(), y + r0 * out, n * out);
        }
    }
}

} // namespace attn::kernels
