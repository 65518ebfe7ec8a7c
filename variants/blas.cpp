// blas: what a user would write with a BLAS. OpenBLAS sgemm for the projections and for both
// attention products; each head's full n_q x n_kv score matrix is materialised (masked entries
// are computed and then zeroed, as with a dense mask), and the softmax is a scalar loop over its
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

void blas_core(const problem& p, const core_io<float>& io, const run_options& o) {
    openblas_set_num_threads(o.threads);
    const std::size_t nq = p.n_q, nkv = p.n_kv, dqk = p.qk_dim(), dv = p.v_dim();
    std::vector<float> s(nq * nkv);
    for (std::size_t b = 0; b < p.batch; ++b) {
        for (std::size_t h = 0; h < p.heads; ++h) {
            const std::size_t g = p.kv_head_of(h);
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, int(nq), int(nkv), int(dqk), float(p.softmax_scale()),
                        io.q.row(b, h, 0), int(io.q.row_stride), io.k.row(b, g, 0), int(io.k.row_stride), 0.0f,
                        s.data(), int(nkv));
            // rows are independent: spread over the same threads (a serial softmax over the
            // materialised scores held the variant at one core's speed however many it was given)
#pragma omp parallel for num_threads(o.threads) if (o.threads > 1) schedule(static)
            for (std::size_t i = 0; i < nq; ++i) {
                float* sr = s.data() + i * nkv;
                const std::size_t n = p.visible(i);
                std::fill(sr + n, sr + nkv, 0.0f);
                if (n == 0) continue;
                const float mx = *std::max_element(sr, sr + n);
                float sum = 0;
                for (std::size_t j = 0; j < n; ++j) sum += (sr[j] = std::exp(sr[j] - mx));
                for (std::size_t j = 0; j < n; ++j) sr[j] /= sum;
            }
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, int(nq), int(dv), int(nkv), 1.0f, s.data(), int(nkv),
                        io.v.row(b, g, 0), int(io.v.row_stride), 0.0f, io.out.row(b, h, 0), int(io.out.row_stride));
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
    v.f32 = {blas_core, blas_linear};
    add_half_by_conversion(v, "OpenBLAS sgemm on fp32 copies (this OpenBLAS exports no cblas_sbgemm)");
    v.scratch_bytes = [](const problem& p, const run_options&) { return sizeof(float) * p.n_q * p.n_kv; };
    return v;
}

} // namespace attn::variants
