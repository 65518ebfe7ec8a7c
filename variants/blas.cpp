// blas: what a user would write with a BLAS. OpenBLAS sgemm for the projections and for both
// attention products; each head's full n_q x n_kv score matrix is materialised (masked entries
// are computed and then zeroed, as with a dense mask; under a sliding window, per block of 256
// query rows, only the keys those rows see), and the softmax is a scalar loop over its
// rows, split over the same threads as OpenBLAS (run_options::threads). The in-suite baseline the
// hand-written kernels must beat. Measured (core, H=8, d_head=64, N=2048, Zen 3): 285-291 ms on
// 1 thread, 189-195 ms on 2 (229 ms before the softmax took the threads): H thin sgemms per
// layer and a scalar softmax (about two thirds of the time) over the materialised scores.
// bf16 and f16: convert + sgemm (attn::by_conversion: operands widened to fp32 copies, the fp32
// kernels, results rounded to nearest even). Debian 12's OpenBLAS 0.3.21 does not export
// cblas_sbgemm (`nm -D libopenblas.so.0`), so there is no bf16 GEMM to call.
module;
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>
#include <cblas.h>
module attn.variants;

namespace attn::variants {
namespace {

/// Query rows per block under a sliding window: each block scores only the keys its rows see
/// (about window + rows of them), so the work grows as N W, not N^2. Without a window the block
/// is every row (one sgemm per product, as before).
constexpr std::size_t window_rows = 256;

std::size_t block_rows(const problem& p) { return p.window ? std::min(window_rows, p.n_q) : p.n_q; }

/// Scores one block holds: its rows times the widest key range a block of them sees.
std::size_t block_scores(const problem& given) {
    const problem p = given.effective();
    const std::size_t rows = block_rows(p);
    return rows * (p.window ? std::min(p.n_kv, p.window + rows - 1) : p.n_kv);
}

void blas_core(const problem& given, const core_io<float>& io, const run_options& o) {
    const problem p = given.effective();
    openblas_set_num_threads(o.threads);
    const std::size_t nq = p.n_q, dqk = p.qk_dim(), dv = p.v_dim(), bq = block_rows(p);
    std::vector<float> s(block_scores(p));
    for (std::size_t b = 0; b < p.batch; ++b) {
        for (std::size_t h = 0; h < p.heads; ++h) {
            const std::size_t g = p.kv_head_of(h);
            for (std::size_t i0 = 0; i0 < nq; i0 += bq) {
                const std::size_t rows = std::min(bq, nq - i0);
                const std::size_t kb = p.keys_begin(i0), ke = p.keys_end(i0 + rows - 1), w = ke > kb ? ke - kb : 0;
                if (w == 0) { // no row of the block sees a key (causal, n_q > n_kv): zeros
                    for (std::size_t i = i0; i < i0 + rows; ++i) std::fill_n(io.out.row(b, h, i), dv, 0.0f);
                    continue;
                }
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, int(rows), int(w), int(dqk),
                            float(p.softmax_scale()), io.q.row(b, h, i0), int(io.q.row_stride), io.k.row(b, g, kb),
                            int(io.k.row_stride), 0.0f, s.data(), int(w));
                // rows are independent: spread over the same threads (a serial softmax over the
                // materialised scores held the variant at one core's speed however many it was given)
#pragma omp parallel for num_threads(o.threads) if (o.threads > 1) schedule(static)
                for (std::size_t r = 0; r < rows; ++r) {
                    float* sr = s.data() + r * w;
                    const std::size_t lo = p.keys_begin(i0 + r) - kb, hi = std::max(p.keys_end(i0 + r), kb) - kb;
                    std::fill(sr, sr + lo, 0.0f);
                    std::fill(sr + std::max(lo, hi), sr + w, 0.0f);
                    if (hi <= lo) continue;
                    const float mx = *std::max_element(sr + lo, sr + hi);
                    float sum = 0;
                    for (std::size_t j = lo; j < hi; ++j) sum += (sr[j] = std::exp(sr[j] - mx));
                    for (std::size_t j = lo; j < hi; ++j) sr[j] /= sum;
                }
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, int(rows), int(dv), int(w), 1.0f, s.data(),
                            int(w), io.v.row(b, g, kb), int(io.v.row_stride), 0.0f, io.out.row(b, h, i0),
                            int(io.out.row_stride));
            }
        }
    }
}

void blas_linear(const linear_io<float>& io, const run_options& o) {
    openblas_set_num_threads(o.threads);
    if (io.b)
        for (std::size_t r = 0; r < io.rows; ++r) std::copy(io.b, io.b + io.out, io.y + r * io.out);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, int(io.rows), int(io.out), int(io.in), 1.0f, io.x, int(io.in),
                io.w, int(io.in), io.b ? 1.0f : 0.0f, io.y, int(io.out));
}

} // namespace

variant make_blas() {
    variant v;
    v.name = "blas";
    v.description = "OpenBLAS sgemm for projections and both attention products; scores materialised";
    v.threaded = true;
    v.serves.windows = true;
    v.f32 = {blas_core, blas_linear};
    add_half_by_conversion(v, "OpenBLAS sgemm on fp32 copies (this OpenBLAS exports no cblas_sbgemm)");
    v.scratch_bytes = [](const problem& p, const run_options&) { return sizeof(float) * block_scores(p); };
    return v;
}

} // namespace attn::variants
