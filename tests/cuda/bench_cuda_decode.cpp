// attn_cuda_bench decode [reps] [read GB/s]: cuda-decode's timings, CSV on stdout, each a median of
// CUDA-event timings with a cold L2 (decode_case::time_ms with flush_l2), after 3 warm-ups. GB/s
// counts the bytes a step must read once (the keys it reads x G x (d_k + d_v) in the cache type,
// int8's scales, q) and the output written; pct_read is that over the read ceiling (the argument,
// else measure_peak's read probe). Caches are uniform in [-1, 1), never zeros.
//  - issue 45's table (bf16, d 128, H 32): B,G,L = 1,8,131072; 8,8,32768; 32,8,8192; 8,1,131072;
//    64,32,4096: the plan, then candidates (the path, splits, stages, heads per block) set on the
//    same uploaded cache; on the second row also n_q 2, 4, 8, pages of 16 and 64, f16, int8, f32;
//  - a rolling buffer of 4096 slots (W 4096) at L 4096, 16384, 65536 beside a plain cache at L 4096;
//  - MLA's absorbed decode at 576/512, B 64, H 16 and 128, L 4096 and 8192, contiguous and 64-token pages.
#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <vector>
#include "api.hpp"
#include "bench_inputs.hpp"
#include "formats.hpp"

namespace cu = attn::cuda;

namespace {

/// f(i) for i < n in contiguous slices on every hardware thread (gigabytes of cache to make).
template <class F>
void parallel(std::size_t n, F f) {
    const std::size_t t = std::max(1u, std::thread::hardware_concurrency()), per = (n + t - 1) / t;
    std::vector<std::thread> pool;
    for (std::size_t w = 0; w < t && w * per < n; ++w)
        pool.emplace_back([&, w] {
            for (std::size_t i = w * per; i < std::min(n, (w + 1) * per); ++i) f(i);
        });
    for (auto& th : pool) th.join();
}

void fill(std::vector<float>& x, std::uint64_t seed) {
    parallel(x.size(), [&](std::size_t i) { x[i] = attn_bench::uniform_at(i, seed); });
}

using attn_bench::median;

/// A cache of `rows` rows of d elements in a storage type (int8 with scales), from uniform values.
struct host_cache {
    cu::storage st;
    std::vector<float> f;
    std::vector<std::uint16_t> h;
    std::vector<std::int8_t> i8;
    std::vector<float> sc;
    host_cache(cu::storage t, std::size_t rows, std::size_t d, std::uint64_t seed) : st(t) {
        std::vector<float> x(rows * d);
        fill(x, seed);
        if (st == cu::storage::f32) {
            f = std::move(x);
        } else if (st == cu::storage::int8) {
            i8.resize(rows * d);
            sc.resize(rows);
            parallel(rows, [&](std::size_t r) { sc[r] = cu::formats::quantize_row(&x[r * d], d, &i8[r * d]); });
        } else {
            h.resize(rows * d);
            parallel(h.size(), [&](std::size_t i) {
                h[i] = st == cu::storage::bf16 ? cu::formats::to_bf16(x[i]) : cu::formats::to_f16(x[i]);
            });
        }
    }
    const void* data() const {
        return st == cu::storage::f32    ? (const void*)f.data()
               : st == cu::storage::int8 ? (const void*)i8.data()
                                         : (const void*)h.data();
    }
    const float* scales() const { return sc.empty() ? nullptr : sc.data(); }
};

double read_gbs = 0; // the ceiling pct_read divides by

struct row {
    std::size_t batch, heads, kv_heads, n_q, L, dk, dv;
    cu::storage st;
    std::size_t window = 0;
    bool mla = false;
};

/// Bytes a step must move: the keys it reads of every (sequence, kv head), q, and the output.
double step_bytes(const row& r) {
    const double eb = double(attn::types::traits(r.st).bytes);
    const double keys = double(r.window ? std::min(r.L, r.window + r.n_q - 1) : r.L);
    const double per_row = double(r.mla ? r.dk : r.dk + r.dv) * eb + (r.st == cu::storage::int8 ? (r.mla ? 4 : 8) : 0);
    return double(r.batch * r.kv_heads) * keys * per_row + double(r.batch * r.n_q * r.heads) * double(r.dk + r.dv) * 4;
}

void print(const row& r, const std::string& layout, const std::string& opts, cu::decode_case& dc, int reps) {
    const double ms = median(dc.time_ms(reps, 3, true));
    const double gbs = step_bytes(r) / ms * 1e-6;
    const cu::decode_plan_info p = dc.plan();
    std::printf("cuda-decode,%s,%zu,%zu,%zu,%zu,%zu,%zu,%s,%s,%s,%d,%d,%d,%.4f,%.1f,%.1f\n", cu::name(r.st), r.batch,
                r.heads, r.kv_heads, r.n_q, r.L, r.dk, layout.c_str(), opts.c_str(), p.kernel.c_str(), p.splits,
                p.stages, p.rows_per_block, ms, gbs, read_gbs > 0 ? 100.0 * gbs / read_gbs : 0.0);
    std::fflush(stdout);
}

cu::shape shape_of(const row& r) {
    cu::shape s;
    s.batch = r.batch;
    s.heads = r.heads;
    s.kv_heads = r.kv_heads;
    s.n_q = r.n_q;
    s.n_kv = r.L;
    s.d_qk = r.dk;
    s.d_v = r.dv;
    s.causal = true;
    s.window = r.window;
    return s;
}

/// The plan and each candidate option set, on one uploaded cache.
void run_candidates(const row& r, const host_cache& k, const host_cache* v, const cu::decode_spec& spec,
                    const std::string& layout, const std::vector<cu::decode_options>& cands, int reps) {
    std::vector<float> q(r.batch * r.n_q * r.heads * r.dk);
    fill(q, 4);
    try {
        cu::decode_case dc(shape_of(r), r.st, q.data(), k.data(), v ? v->data() : nullptr, k.scales(),
                           v ? v->scales() : nullptr, spec);
        print(r, layout, "planned", dc, reps);
        for (const cu::decode_options& o : cands) {
            const std::string name = "s" + std::to_string(o.splits) + " st" + std::to_string(o.stages) + " hb" +
                                     std::to_string(o.heads_per_block) + " tc" + std::to_string(o.tensor_cores);
            try {
                dc.set_options(o);
                print(r, layout, name, dc, reps);
            } catch (const std::exception& e) {
                std::printf("# %s %s: %s\n", layout.c_str(), name.c_str(), e.what());
            }
        }
    } catch (const std::exception& e) {
        std::printf("# cuda-decode B %zu G %zu L %zu %s: %s\n", r.batch, r.kv_heads, r.L, layout.c_str(), e.what());
    }
}

cu::decode_options opt(int splits, int stages, int hb, int tc) {
    cu::decode_options o;
    o.splits = splits, o.stages = stages, o.heads_per_block = hb, o.tensor_cores = tc;
    return o;
}

/// The same cache rows rearranged into a pool of pages [pages, P, G, d] in shuffled order.
template <class T>
std::vector<T> to_pages(const std::vector<T>& c, std::size_t B, std::size_t G, std::size_t L, std::size_t d,
                        std::size_t P, const std::vector<std::int32_t>& table, std::size_t max_pages,
                        std::size_t pages) {
    std::vector<T> out(pages * P * G * d);
    for (std::size_t b = 0; b < B; ++b)
        for (std::size_t g = 0; g < G; ++g)
            for (std::size_t t = 0; t < L; ++t) {
                const std::size_t dst = ((std::size_t(table[b * max_pages + t / P]) * P + t % P) * G + g) * d;
                std::copy_n(&c[((b * G + g) * L + t) * d], d, &out[dst]);
            }
    return out;
}

void paged_run(const row& r, const host_cache& k, const host_cache& v, std::size_t P, int reps) {
    const std::size_t max_pages = (r.L + P - 1) / P, pages = r.batch * max_pages;
    std::vector<std::int32_t> table(pages);
    std::iota(table.begin(), table.end(), 0);
    std::shuffle(table.begin(), table.end(), std::mt19937(7));
    host_cache kp = k, vp = v; // same values, paged order
    if (!k.h.empty()) {
        kp.h = to_pages(k.h, r.batch, r.kv_heads, r.L, r.dk, P, table, max_pages, pages);
        vp.h = to_pages(v.h, r.batch, r.kv_heads, r.L, r.dv, P, table, max_pages, pages);
    }
    cu::decode_spec spec;
    spec.page_size = P;
    spec.pages = pages;
    spec.max_pages = max_pages;
    spec.block_table = table.data();
    run_candidates(r, kp, &vp, spec, "paged " + std::to_string(P), {}, reps);
}

} // namespace

void bench_decode(int reps, double read_ceiling) {
    if (read_ceiling > 0) {
        read_gbs = read_ceiling;
    } else {
        read_gbs = cu::measure_peak(3).read_gbs;
    }
    std::printf("# read ceiling %.1f GB/s\n", read_gbs);
    std::printf("kernel,storage,batch,heads,kv_heads,n_q,L,d,layout,options,plan,chunks,stages,rows,ms,gbs,pct_read\n");
    const std::vector<std::array<std::size_t, 3>> table = {
        {1, 8, 131072}, {8, 8, 32768}, {32, 8, 8192}, {8, 1, 131072}, {64, 32, 4096}};
    for (std::size_t i = 0; i < table.size(); ++i) {
        const row r{table[i][0], 32, table[i][1], 1, table[i][2], 128, 128, cu::storage::bf16};
        const std::size_t rows = r.batch * r.kv_heads * r.L;
        const host_cache k(r.st, rows, 128, 5), v(r.st, rows, 128, 6);
        cu::decode_spec spec;
        std::vector<cu::decode_options> cands = {opt(0, 0, 0, 0), opt(0, 0, 0, 1), opt(0, 2, 0, -1), opt(0, 3, 0, -1),
                                                 opt(0, 4, 0, -1)};
        for (int s : {8, 16, 33, 66, 132}) cands.push_back(opt(s, 0, 0, -1));
        if (r.kv_heads == 1)
            for (int hb : {8, 16}) cands.push_back(opt(0, 0, hb, 1));
        run_candidates(r, k, &v, spec, "contiguous", cands, reps);
        if (i != 1) continue;
        for (std::size_t n_q : {2, 4, 8}) {
            row m = r;
            m.n_q = n_q;
            run_candidates(m, k, &v, spec, "contiguous", {opt(0, 0, 0, 0), opt(0, 0, 0, 1)}, reps);
        }
        for (std::size_t P : {16, 64}) paged_run(r, k, v, P, reps);
        for (cu::storage t : {cu::storage::f16, cu::storage::int8, cu::storage::f32}) {
            row m = r;
            m.st = t;
            const host_cache kt(t, rows, 128, 5), vt(t, rows, 128, 6);
            run_candidates(m, kt, &vt, spec, "contiguous", {opt(0, 0, 0, 0), opt(0, 0, 0, 1)}, reps);
        }
    }
    { // the rolling buffer: 4096 slots whatever L; beside it a plain cache of L = 4096
        const row plain{8, 32, 8, 1, 4096, 128, 128, cu::storage::bf16};
        const host_cache k(plain.st, 8 * 8 * 4096, 128, 5), v(plain.st, 8 * 8 * 4096, 128, 6);
        run_candidates(plain, k, &v, cu::decode_spec{}, "contiguous", {}, reps);
        for (std::size_t L : {4096, 16384, 65536}) {
            row r = plain;
            r.L = L;
            r.window = 4096;
            cu::decode_spec spec;
            spec.ring = 4096;
            spec.capacity = 4096;
            run_candidates(r, k, &v, spec, "ring 4096", {}, reps);
        }
    }
    for (std::size_t h : {16, 128}) // MLA absorbed, DeepSeek's widths
        for (std::size_t L : {4096, 8192}) {
            const row r{64, h, 1, 1, L, 576, 512, cu::storage::bf16, 0, true};
            const host_cache k(r.st, 64 * L, 576, 9);
            cu::decode_spec spec;
            spec.v_from_k = true;
            run_candidates(r, k, nullptr, spec, "contiguous", {opt(0, 2, 0, -1), opt(0, 3, 0, -1)}, reps);
        }
}
