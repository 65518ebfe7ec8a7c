// attn_cuda's host side, without a GPU: which kernel refuses which case and how it says so, query()
// and the case constructors on a machine with no usable device (one line, attn::cuda::error, no
// crash), cuda-flash's tile counts, shared-memory swizzle and fragment
// maps (one warp's ldmatrix and mma.sync simulated from the PTX ISA's layouts), and the host's
// rounding to bf16 and f16. What needs a GPU is attn_cuda_gpu_tests.
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>

#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <set>
#include <string>
#include <vector>
#include "api.hpp"
#include "flash_layout.hpp"
#include "formats.hpp"

namespace cu = attn::cuda;

namespace {

cu::shape make(std::size_t n_q, std::size_t n_kv, std::size_t d, std::size_t h = 4, std::size_t g = 2) {
    cu::shape s;
    s.batch = 2;
    s.heads = h;
    s.kv_heads = g;
    s.n_q = n_q;
    s.n_kv = n_kv;
    s.d_qk = d;
    return s;
}

bool one_line(const std::string& s) { return !s.empty() && s.find('\n') == std::string::npos; }

constexpr cu::kernel all_kernels[] = {cu::kernel::naive, cu::kernel::tiled, cu::kernel::flash, cu::kernel::decode};

} // namespace

TEST_CASE("names", "[cuda][host]") {
    CHECK(std::string(cu::name(cu::kernel::naive)) == "cuda-naive");
    CHECK(std::string(cu::name(cu::kernel::tiled)) == "cuda-tiled");
    CHECK(std::string(cu::name(cu::kernel::flash)) == "cuda-flash");
    CHECK(std::string(cu::name(cu::kernel::decode)) == "cuda-decode");
    CHECK(std::string(cu::name(cu::storage::int8)) == "int8");
}

TEST_CASE("resolved fills d_v and the scale", "[cuda][host]") {
    const cu::shape s = cu::resolved(make(3, 5, 64));
    CHECK(s.d_v == 64);
    CHECK(s.scale == Approx(0.125));
    cu::shape t = make(3, 5, 64);
    t.d_v = 32;
    t.scale = 0.5;
    CHECK(cu::resolved(t).d_v == 32);
    CHECK(cu::resolved(t).scale == 0.5);
}

TEST_CASE("refusal: the cases each kernel serves", "[cuda][host][refusal]") {
    for (cu::storage st : {cu::storage::f32, cu::storage::bf16, cu::storage::f16}) {
        CHECK(cu::refusal(cu::kernel::naive, make(7, 129, 80), st).empty());
        CHECK(cu::refusal(cu::kernel::tiled, make(7, 129, 256), st).empty());
    }
    for (std::size_t d : {64, 128})
        for (cu::storage st : {cu::storage::bf16, cu::storage::f16}) {
            cu::shape s = make(1000, 7, d, 8, 1);
            s.causal = true;
            CHECK(cu::refusal(cu::kernel::flash, s, st).empty());
        }
    for (std::size_t d : {8, 64, 80, 128, 256})
        for (cu::storage st : {cu::storage::f32, cu::storage::bf16, cu::storage::f16, cu::storage::int8})
            CHECK(cu::refusal(cu::kernel::decode, make(1, 4097, d, 32, 8), st).empty());
    cu::shape mla = make(7, 9, 96);
    mla.d_v = 64; // naive and tiled take d_qk != d_v
    CHECK(cu::refusal(cu::kernel::naive, mla, cu::storage::f32).empty());
    CHECK(cu::refusal(cu::kernel::tiled, mla, cu::storage::bf16).empty());
}

TEST_CASE("refusal: one line naming what the kernel lacks", "[cuda][host][refusal]") {
    CHECK(cu::refusal(cu::kernel::flash, make(64, 64, 80), cu::storage::bf16) ==
          "cuda-flash serves d_head 64 and 128, not 80");
    CHECK(cu::refusal(cu::kernel::flash, make(64, 64, 64), cu::storage::f32) ==
          "cuda-flash stores bf16 or f16, not f32");
    CHECK(cu::refusal(cu::kernel::flash, make(64, 64, 64), cu::storage::int8) ==
          "cuda-flash stores bf16 or f16, not int8");
    CHECK(cu::refusal(cu::kernel::decode, make(9, 64, 64), cu::storage::bf16) ==
          "cuda-decode serves n_q 1 to 8 new tokens a step, not 9"); // more: test_decode_plan.cpp
    CHECK(cu::refusal(cu::kernel::decode, make(1, 64, 260), cu::storage::bf16) ==
          "cuda-decode serves d_head a multiple of 8 up to 256, not 260");
    CHECK(cu::refusal(cu::kernel::decode, make(1, 64, 20), cu::storage::f32) ==
          "cuda-decode serves d_head a multiple of 8 up to 256, not 20");
    CHECK(cu::refusal(cu::kernel::tiled, make(7, 7, 512), cu::storage::f32) ==
          "cuda-tiled serves d_qk and d_v up to 256, not 512");
    for (cu::kernel k : {cu::kernel::naive, cu::kernel::tiled, cu::kernel::flash}) {
        const std::string why = cu::refusal(k, make(7, 7, 64), cu::storage::int8);
        CHECK(one_line(why));
        CHECK(why.find("int8") != std::string::npos);
    }
    for (cu::kernel k : {cu::kernel::flash}) { // cuda-decode serves MLA's absorbed form: test_decode_plan.cpp
        cu::shape s = make(1, 7, 128);
        s.d_v = 64;
        CHECK(cu::refusal(k, s, cu::storage::bf16) == "d_qk != d_v (MLA) is not served on the GPU yet");
    }
    for (cu::kernel k : all_kernels) {
        INFO(cu::name(k));
        cu::shape w = make(1, 64, 64);
        w.window = 16;
        if (k != cu::kernel::decode) // cuda-decode serves windows: test_decode_plan.cpp
            CHECK(cu::refusal(k, w, cu::storage::bf16) == "window > 0 is not served on the GPU yet");
        CHECK(cu::refusal(k, make(1, 64, 64, 6, 4), cu::storage::bf16) == "heads 6 is not divisible by kv_heads 4");
        CHECK(cu::refusal(k, make(1, 64, 0), cu::storage::bf16) == "d_qk must be >= 1 (got 0)");
        cu::shape nan_scale = make(1, 64, 64);
        nan_scale.scale = std::numeric_limits<double>::quiet_NaN();
        CHECK(one_line(cu::refusal(k, nan_scale, cu::storage::bf16)));
        cu::shape wide = make(1, 64, 64);
        wide.batch = 70000;
        CHECK(cu::refusal(k, wide, cu::storage::bf16) == "batch 70000 exceeds the grid's 65535");
    }
}

TEST_CASE("query() without a usable GPU: present is false, one line says why", "[cuda][host]") {
    const cu::device_info d = cu::query();
    INFO(d.reason);
    // this suite runs where there is no GPU (CI, the developers' machines); on a GPU machine it
    // checks the opposite: a device described, no reason
    if (d.present) {
        CHECK(d.reason.empty());
        CHECK(d.sms > 0);
        CHECK(d.l2_bytes > 0);
        return;
    }
    CHECK(one_line(d.reason));
    if (cu::built_with_cuda())
        CHECK(d.reason.rfind("no CUDA device", 0) == 0);
    else
        CHECK(d.reason.rfind("built without CUDA", 0) == 0);
}

TEST_CASE("cases without a usable GPU throw attn::cuda::error with one line", "[cuda][host]") {
    if (cu::query().present) return; // a GPU machine: attn_cuda_gpu_tests covers the cases
    const cu::shape s = make(7, 9, 64);
    std::vector<float> q(s.batch * s.n_q * s.heads * 64, 0.5f), kv(s.batch * s.n_kv * s.kv_heads * 64, 0.25f);
    auto message = [](auto&& make_case) {
        try {
            make_case();
        } catch (const cu::error& e) {
            return std::string(e.what());
        }
        return std::string();
    };
    for (cu::kernel k : {cu::kernel::naive, cu::kernel::tiled}) {
        const std::string m = message([&] { cu::core_case c(k, s, cu::storage::f32, q.data(), kv.data(), kv.data()); });
        INFO(m);
        CHECK(one_line(m));
    }
    // a refused case says the refusal, GPU or not
    const std::string refused =
        message([&] { cu::core_case c(cu::kernel::flash, s, cu::storage::f32, q.data(), kv.data(), kv.data()); });
    if (cu::built_with_cuda()) CHECK(refused.find("cuda-flash stores bf16 or f16, not f32") != std::string::npos);
    CHECK(one_line(refused));

    cu::shape d = make(1, 9, 64);
    std::vector<std::uint16_t> cache(d.batch * d.kv_heads * 16 * 64, 0x3f80);
    const std::string dm = message(
        [&] { cu::decode_case c(d, cu::storage::bf16, q.data(), cache.data(), cache.data(), nullptr, nullptr, 16); });
    INFO(dm);
    CHECK(one_line(dm));

    std::vector<float> x(2 * 9 * 256, 0.1f), w(256 * 256, 0.01f);
    cu::layer_inputs in;
    in.x_q = in.x_kv = x.data();
    in.wq = in.wk = in.wv = in.wo = w.data();
    const std::string lm = message([&] { cu::layer_case c(s, 256, cu::storage::bf16, cu::kernel::naive, in); });
    INFO(lm);
    CHECK(one_line(lm));
    const std::string pm = message([] { cu::measure_peak(3); });
    INFO(pm);
    CHECK(one_line(pm));
}

TEST_CASE("flash swizzle: a bijection on each tile; ldmatrix's 8 rows in 8 bank groups", "[cuda][host][flash]") {
    namespace fl = attn::cuda::flash_layout;
    for (int d : {64, 128}) {
        INFO("d " << d);
        const int rows = fl::block_kv;
        std::vector<int> seen(std::size_t(rows * d), 0);
        for (int r = 0; r < rows; ++r)
            for (int c = 0; c < d; ++c) {
                const int o = fl::swizzle(r, c, d);
                REQUIRE(o >= r * d);
                REQUIRE(o < (r + 1) * d); // stays in its row
                ++seen[std::size_t(o)];
                if (c % fl::chunk) CHECK(o == fl::swizzle(r, c - 1, d) + 1); // a chunk stays contiguous
            }
        for (int n : seen) CHECK(n == 1);
        // ldmatrix: 8 rows (any 8 consecutive rows), the same logical 16-byte chunk of each
        for (int r0 = 0; r0 + 8 <= rows; ++r0)
            for (int ch = 0; ch < d / fl::chunk; ++ch) {
                std::set<int> groups;
                for (int r = r0; r < r0 + 8; ++r) {
                    const int byte = fl::swizzle(r, ch * fl::chunk, d) * 2;
                    CHECK(byte % 16 == 0);
                    groups.insert((byte / 16) % 8); // 8 groups of 4 banks span 128 bytes
                }
                CHECK(groups.size() == 8);
            }
    }
    CHECK(fl::smem_bytes(64) == 40 * 1024);
    CHECK(fl::smem_bytes(128) == 80 * 1024);
}

TEST_CASE("flash tiles: every visible key visited, no tile past the last, masks where needed", "[cuda][host][flash]") {
    namespace fl = attn::cuda::flash_layout;
    for (bool causal : {false, true})
        for (int n_q : {1, 7, 63, 64, 65, 129, 1000})
            for (int n_kv : {1, 7, 64, 65, 129, 1000}) {
                auto visible = [&](int i) { // bottom-right: keys j <= i + n_kv - n_q
                    if (!causal) return n_kv;
                    const int last = i + n_kv - n_q;
                    return last < 0 ? 0 : std::min(n_kv, last + 1);
                };
                for (int q0 = 0; q0 < n_q; q0 += fl::block_q) {
                    INFO("causal " << causal << " n_q " << n_q << " n_kv " << n_kv << " q0 " << q0);
                    int most = 0;
                    for (int i = q0; i < std::min(n_q, q0 + fl::block_q); ++i) most = std::max(most, visible(i));
                    const int tiles = fl::kv_tiles(q0, n_q, n_kv, causal);
                    CHECK(tiles * fl::block_kv >= most);
                    CHECK((tiles == 0 ? 0 : (tiles - 1) * fl::block_kv) < std::max(most, 1));
                    for (int t = 0; t < tiles; ++t) {
                        const int j0 = t * fl::block_kv;
                        bool all_visible = true;
                        for (int i = q0; i < std::min(n_q, q0 + fl::block_q); ++i)
                            for (int j = j0; j < j0 + fl::block_kv; ++j) all_visible &= j < visible(i);
                        // an unmasked tile must be wholly visible to every real row of the block
                        if (!fl::tile_needs_mask(j0, q0, n_q, n_kv, causal)) CHECK(all_visible);
                    }
                }
            }
}

namespace {

// One warp's ldmatrix.x4 and mma.sync.m16n8k16 as the PTX ISA defines them, for checking the
// kernel's lane addresses and fragment maps (flash_layout.hpp) on the host. groupID g = lane / 4,
// threadID_in_group t = lane % 4. Registers hold two 16-bit elements: (low, high).
using pair = std::array<float, 2>;
using frag4 = std::array<std::array<pair, 4>, 32>; // per lane, 4 registers
using acc4 = std::array<std::array<float, 4>, 32>; // per lane, 4 fp32 C elements

/// ldmatrix.sync.aligned.m8n8.x4(.trans).b16: lane l gives the address (element offset of 8
/// consecutive elements) of row l % 8 of matrix l / 8; register i of lane l receives elements
/// (l / 4, 2 (l % 4) + {0, 1}) of matrix i, or of its transpose with .trans.
frag4 ldmatrix(const std::vector<float>& smem, const std::array<int, 32>& addr, bool trans) {
    frag4 r{};
    for (int i = 0; i < 4; ++i)
        for (int l = 0; l < 32; ++l) {
            const int row = l / 4, col = 2 * (l % 4);
            for (int h = 0; h < 2; ++h)
                r[l][i][h] = trans ? smem[addr[8 * i + col + h] + row] : smem[addr[8 * i + row] + col + h];
        }
    return r;
}

/// d += a b, a 16x16 from a0..a3, b 16x8 from two registers per lane, d 16x8 (c0..c3).
void mma(acc4& d, const frag4& a, const frag4& b, int b0) {
    float A[16][16] = {}, B[16][8] = {};
    for (int l = 0; l < 32; ++l) {
        const int g = l / 4, t = l % 4;
        for (int h = 0; h < 2; ++h) {
            A[g][2 * t + h] = a[l][0][h];
            A[g + 8][2 * t + h] = a[l][1][h];
            A[g][2 * t + 8 + h] = a[l][2][h];
            A[g + 8][2 * t + 8 + h] = a[l][3][h];
            B[2 * t + h][g] = b[l][b0][h];
            B[2 * t + 8 + h][g] = b[l][b0 + 1][h];
        }
    }
    for (int l = 0; l < 32; ++l) {
        const int g = l / 4, t = l % 4;
        for (int e = 0; e < 4; ++e) {
            const int row = g + (e / 2) * 8, col = 2 * t + e % 2;
            for (int k = 0; k < 16; ++k) d[l][e] += A[row][k] * B[k][col];
        }
    }
}

} // namespace

TEST_CASE("flash fragments: the kernel's lane addresses and maps give Q K^T and P V", "[cuda][host][flash]") {
    namespace fl = attn::cuda::flash_layout;
    std::mt19937 rng(11);
    std::uniform_int_distribution<int> small(-2, 2); // integers: every sum below is exact in fp32
    for (int D : {64, 128}) {
        const int rows = fl::block_kv;
        std::vector<float> Q(std::size_t(rows * D)), K(Q.size()), V(Q.size()), sq(Q.size()), sk(Q.size()), sv(Q.size());
        for (std::size_t i = 0; i < Q.size(); ++i)
            Q[i] = float(small(rng)), K[i] = float(small(rng)), V[i] = float(small(rng));
        for (int r = 0; r < rows; ++r) // the tiles as cp.async leaves them: swizzled
            for (int c = 0; c < D; ++c) {
                const std::size_t o = std::size_t(fl::swizzle(r, c, D)), x = std::size_t(r * D + c);
                sq[o] = Q[x], sk[o] = K[x], sv[o] = V[x];
            }
        auto addresses = [&](auto frag_addr) {
            std::array<int, 32> a{};
            for (int l = 0; l < 32; ++l) {
                const fl::rc p = frag_addr(l);
                a[std::size_t(l)] = fl::swizzle(p.row, p.col, D);
                CHECK(a[std::size_t(l)] % fl::chunk == 0); // 16-byte aligned rows for ldmatrix
            }
            for (int m = 0; m < 4; ++m) { // each 8-address phase: 8 distinct bank groups
                std::set<int> groups;
                for (int l = 8 * m; l < 8 * m + 8; ++l) groups.insert((a[std::size_t(l)] * 2 / 16) % 8);
                CHECK(groups.size() == 8);
            }
            return a;
        };
        for (int warp = 0; warp < fl::warps; ++warp) {
            INFO("d " << D << " warp " << warp);
            const int NT = fl::block_kv / 8, KS = D / 16, DT = D / 8;
            std::vector<frag4> qf;
            for (int ks = 0; ks < KS; ++ks)
                qf.push_back(ldmatrix(sq, addresses([&](int l) { return fl::q_frag_addr(warp, ks, l); }), false));
            std::vector<acc4> s(std::size_t(NT), acc4{});
            for (int ks = 0; ks < KS; ++ks)
                for (int np = 0; np < NT / 2; ++np) {
                    const frag4 bk = ldmatrix(sk, addresses([&](int l) { return fl::k_frag_addr(np, ks, l); }), false);
                    mma(s[std::size_t(2 * np)], qf[std::size_t(ks)], bk, 0);
                    mma(s[std::size_t(2 * np + 1)], qf[std::size_t(ks)], bk, 2);
                }
            // S[row][key] = sum_x Q[row][x] K[key][x], at the places c_frag_elem says
            std::vector<double> S(std::size_t(16 * rows));
            for (int r = 0; r < 16; ++r)
                for (int j = 0; j < rows; ++j) {
                    double x = 0;
                    for (int c = 0; c < D; ++c)
                        x += Q[std::size_t((warp * 16 + r) * D + c)] * K[std::size_t(j * D + c)];
                    S[std::size_t(r * rows + j)] = x;
                }
            bool s_ok = true;
            for (int nt = 0; nt < NT; ++nt)
                for (int l = 0; l < 32; ++l)
                    for (int e = 0; e < 4; ++e) {
                        const fl::rc c = fl::c_frag_elem(l, e);
                        s_ok &= s[std::size_t(nt)][std::size_t(l)][std::size_t(e)] ==
                                S[std::size_t(c.row * rows + nt * 8 + c.col)];
                    }
            CHECK(s_ok);
            // P = S (any values do), its A fragments from S's registers as the kernel packs them
            std::vector<acc4> o(std::size_t(DT), acc4{});
            for (int kk = 0; kk < NT / 2; ++kk) {
                frag4 pa{};
                for (int l = 0; l < 32; ++l)
                    for (int i = 0; i < 4; ++i)
                        for (int h = 0; h < 2; ++h)
                            pa[std::size_t(l)][std::size_t(i)][std::size_t(h)] =
                                s[std::size_t(fl::p_ntile(kk, i))][std::size_t(l)][std::size_t(fl::p_elem(i) + h)];
                for (int dp = 0; dp < DT / 2; ++dp) {
                    const frag4 bv = ldmatrix(sv, addresses([&](int l) { return fl::v_frag_addr(kk, dp, l); }), true);
                    mma(o[std::size_t(2 * dp)], pa, bv, 0);
                    mma(o[std::size_t(2 * dp + 1)], pa, bv, 2);
                }
            }
            bool o_ok = true;
            for (int dt = 0; dt < DT; ++dt)
                for (int l = 0; l < 32; ++l)
                    for (int e = 0; e < 4; ++e) {
                        const fl::rc c = fl::c_frag_elem(l, e);
                        double x = 0;
                        for (int j = 0; j < rows; ++j)
                            x += S[std::size_t(c.row * rows + j)] * V[std::size_t(j * D + dt * 8 + c.col)];
                        o_ok &= o[std::size_t(dt)][std::size_t(l)][std::size_t(e)] == x;
                    }
            CHECK(o_ok);
        }
    }
}

TEST_CASE("formats: bf16 and f16 round to nearest even, widen exactly", "[cuda][host][formats]") {
    namespace f = attn::cuda::formats;
    // every finite pattern survives the round trip
    for (std::uint32_t h = 0; h < 65536; ++h) {
        const auto b = std::uint16_t(h);
        if ((b & 0x7f80) != 0x7f80) REQUIRE(f::to_bf16(f::from_bf16(b)) == b);
        if ((b & 0x7c00) != 0x7c00) REQUIRE(f::to_f16(f::from_f16(b)) == b);
    }
    CHECK(f::to_bf16(1.0f) == 0x3f80);
    CHECK(f::to_f16(1.0f) == 0x3c00);
    CHECK(f::to_f16(65504.0f) == 0x7bff);
    CHECK(f::to_f16(65519.0f) == 0x7bff);
    CHECK(f::to_f16(65520.0f) == 0x7c00);
    CHECK(f::to_f16(-1e10f) == 0xfc00);
    CHECK(f::to_f16(5.9604644775390625e-8f) == 0x0001);  // 2^-24
    CHECK(f::to_f16(2.98023223876953125e-8f) == 0x0000); // 2^-25: a tie, to even (zero)
    CHECK(f::to_f16(8.940696716308594e-8f) == 0x0002);   // 1.5 x 2^-24: a tie, to even
    CHECK(f::to_bf16(1.0f + 0x1.0p-8f) == 0x3f80);       // tie, to even
    CHECK(f::to_bf16(1.0f + 0x1.8p-8f) == 0x3f81);
    CHECK(std::isnan(f::from_bf16(f::to_bf16(std::numeric_limits<float>::quiet_NaN()))));
    CHECK(std::isnan(f::from_f16(f::to_f16(std::numeric_limits<float>::quiet_NaN()))));
    CHECK(std::isinf(f::from_bf16(f::to_bf16(std::numeric_limits<float>::max()))));
    // random floats: the result is a nearest representable value
    std::mt19937 rng(7);
    std::uniform_real_distribution<float> mant(1.0f, 2.0f);
    std::uniform_int_distribution<int> ex(-30, 17);
    for (int i = 0; i < 200000; ++i) {
        const float x = std::ldexp(mant(rng), ex(rng)) * (i % 2 ? -1.0f : 1.0f);
        const std::uint16_t h = f::to_f16(x), b = f::to_bf16(x);
        const double e_h = std::abs(double(f::from_f16(h)) - x), e_b = std::abs(double(f::from_bf16(b)) - x);
        if (std::abs(x) < 65504.0f) {
            REQUIRE(e_h <= std::abs(double(f::from_f16(std::uint16_t(h + 1))) - x));
            if ((h & 0x7fff) != 0) REQUIRE(e_h <= std::abs(double(f::from_f16(std::uint16_t(h - 1))) - x));
        }
        REQUIRE(e_b <= std::abs(double(f::from_bf16(std::uint16_t(b + 1))) - x));
        REQUIRE(e_b <= std::abs(double(f::from_bf16(std::uint16_t(b - 1))) - x));
    }
}

TEST_CASE("formats: int8 rows as attn.core:kv quantizes them", "[cuda][host][formats]") {
    namespace f = attn::cuda::formats;
    const float x[5] = {1.0f, -2.54f, 0.0f, 0.01f, 2.0f};
    std::int8_t q[5];
    const float s = f::quantize_row(x, 5, q);
    CHECK(s == Approx(2.54f / 127.0f));
    CHECK(q[1] == -127);
    CHECK(q[2] == 0);
    for (int i = 0; i < 5; ++i) CHECK(std::abs(q[i] * s - x[i]) <= s / 2 + 1e-6f);
    const float z[3] = {0, 0, 0};
    CHECK(f::quantize_row(z, 3, q) == 0.0f);
}
