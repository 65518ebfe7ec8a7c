// cuda-flash's layout without a GPU (flash_layout.hpp, prefill_plan.hpp): the swizzle, the shared
// memory of every instantiated tile, and one warp of the kernel simulated for each tile shape: the
// kernel's own lane addresses and fragment maps fed to a model of ldmatrix.x4 (and .trans) and
// mma.m16n8k16 written from the PTX ISA's fragment layouts give Q K^T and P V exactly.
#include <catch2/catch.hpp>

#include <array>
#include <random>
#include <set>
#include <vector>

#include "flash_layout.hpp"
#include "prefill_plan.hpp"

namespace fl = attn::cuda::flash_layout;
namespace pf = attn::cuda::prefill;

TEST_CASE("flash swizzle: a bijection on each tile; ldmatrix's 8 rows in 8 bank groups", "[prefill][flash]") {
    for (int d : {64, 128, 192}) {
        INFO("d " << d);
        const int rows = 64;
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
}

TEST_CASE("flash tiles: every candidate fits the shared memory of an sm_80 / sm_90 block", "[prefill][flash]") {
    // by hand: (block_q d_qk + 2 stages x block_kv (d_qk + d_v)) x 2 bytes
    CHECK(fl::config<64, 64, 4, 2, 64>::smem_bytes == (128 * 64 + 2 * 64 * 128) * 2);    // 48 KiB
    CHECK(fl::config<128, 128, 4, 2, 32>::smem_bytes == (128 * 128 + 2 * 32 * 256) * 2); // 64 KiB
    CHECK(fl::config<128, 128, 4, 1, 64>::smem_bytes == 80 * 1024);                      // the kernel before
    CHECK(fl::config<192, 128, 8, 1, 64>::smem_bytes == (128 * 192 + 2 * 64 * 320) * 2); // 128 KiB
    for (const pf::widths& w : pf::width_list) {
        const int n = pf::for_each_flash_tile(w, [&](int, const pf::flash_tile& t) {
            const int bytes = (t.block_q() * w.dqk + 2 * t.block_kv * (w.dqk + w.dv)) * 2;
            INFO(w.dqk << "/" << w.dv << " " << t.name());
            CHECK(bytes <= 163 * 1024); // sm_80's opt-in limit (sm_90: 227 KiB)
            CHECK(t.block_q() % 16 == 0);
            CHECK(t.warps * 32 <= 256);
        });
        CHECK(n >= 2);
    }
}

namespace {

// One warp's ldmatrix.x4 and mma.sync.m16n8k16 as the PTX ISA defines them. groupID g = lane / 4,
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
                r[std::size_t(l)][std::size_t(i)][std::size_t(h)] =
                    trans ? smem[std::size_t(addr[std::size_t(8 * i + col + h)] + row)]
                          : smem[std::size_t(addr[std::size_t(8 * i + row)] + col + h)];
        }
    return r;
}

/// d += a b, a 16x16 from a0..a3, b 16x8 from registers b0, b0 + 1 of each lane, d 16x8 (c0..c3).
void mma(acc4& d, const frag4& a, const frag4& b, int b0) {
    float A[16][16] = {}, B[16][8] = {};
    for (int l = 0; l < 32; ++l) {
        const int g = l / 4, t = l % 4;
        const auto& al = a[std::size_t(l)];
        const auto& bl = b[std::size_t(l)];
        for (int h = 0; h < 2; ++h) {
            A[g][2 * t + h] = al[0][std::size_t(h)];
            A[g + 8][2 * t + h] = al[1][std::size_t(h)];
            A[g][2 * t + 8 + h] = al[2][std::size_t(h)];
            A[g + 8][2 * t + 8 + h] = al[3][std::size_t(h)];
            B[2 * t + h][g] = bl[std::size_t(b0)][std::size_t(h)];
            B[2 * t + 8 + h][g] = bl[std::size_t(b0 + 1)][std::size_t(h)];
        }
    }
    for (int l = 0; l < 32; ++l) {
        const int g = l / 4, t = l % 4;
        for (int e = 0; e < 4; ++e) {
            const int row = g + (e / 2) * 8, col = 2 * t + e % 2;
            for (int k = 0; k < 16; ++k) d[std::size_t(l)][std::size_t(e)] += A[row][k] * B[k][col];
        }
    }
}

/// One warp (warp `warp` of the block) of cuda-flash with tile C, S = Q K^T and O = P V (P = S),
/// checked against plain loops; inputs small integers so that every sum is exact.
template <class C>
void simulate_warp(int warp, std::mt19937& rng) {
    constexpr int DQ = C::dqk, DV = C::dv, BKV = C::block_kv, NT = BKV / 8, DT = DV / 8, KS = DQ / 16;
    std::uniform_int_distribution<int> small(-2, 2);
    std::vector<float> Q(std::size_t(C::block_q * DQ)), K(std::size_t(BKV * DQ)), V(std::size_t(BKV * DV));
    std::vector<float> sq(Q.size()), sk(K.size()), sv(V.size());
    for (float& x : Q) x = float(small(rng));
    for (float& x : K) x = float(small(rng));
    for (float& x : V) x = float(small(rng));
    // the tiles as cp.async leaves them: swizzled
    for (int r = 0; r < C::block_q; ++r)
        for (int c = 0; c < DQ; ++c) sq[std::size_t(fl::swizzle(r, c, DQ))] = Q[std::size_t(r * DQ + c)];
    for (int r = 0; r < BKV; ++r) {
        for (int c = 0; c < DQ; ++c) sk[std::size_t(fl::swizzle(r, c, DQ))] = K[std::size_t(r * DQ + c)];
        for (int c = 0; c < DV; ++c) sv[std::size_t(fl::swizzle(r, c, DV))] = V[std::size_t(r * DV + c)];
    }
    auto addresses = [&](auto frag_addr, int d) {
        std::array<int, 32> a{};
        for (int l = 0; l < 32; ++l) {
            const fl::rc p = frag_addr(l);
            a[std::size_t(l)] = fl::swizzle(p.row, p.col, d);
            CHECK(a[std::size_t(l)] % fl::chunk == 0); // 16-byte aligned rows for ldmatrix
        }
        for (int m = 0; m < 4; ++m) { // each 8-address phase: 8 distinct bank groups
            std::set<int> groups;
            for (int l = 8 * m; l < 8 * m + 8; ++l) groups.insert((a[std::size_t(l)] * 2 / 16) % 8);
            CHECK(groups.size() == 8);
        }
        return a;
    };
    const int wrow0 = warp * C::rows_per_warp;
    bool s_ok = true, o_ok = true;
    for (int mt = 0; mt < C::mt; ++mt) {
        const int row0 = wrow0 + 16 * mt;
        std::vector<acc4> s(std::size_t(NT), acc4{});
        for (int ks = 0; ks < KS; ++ks) {
            const frag4 qa = ldmatrix(sq, addresses([&](int l) { return fl::q_frag_addr(row0, ks, l); }, DQ), false);
            for (int np = 0; np < NT / 2; ++np) {
                const frag4 bk = ldmatrix(sk, addresses([&](int l) { return fl::k_frag_addr(np, ks, l); }, DQ), false);
                mma(s[std::size_t(2 * np)], qa, bk, 0);
                mma(s[std::size_t(2 * np + 1)], qa, bk, 2);
            }
        }
        // S[row][key] = sum_x Q[row][x] K[key][x], at the places c_frag_elem says
        std::vector<double> Sm(std::size_t(16 * BKV));
        for (int r = 0; r < 16; ++r)
            for (int j = 0; j < BKV; ++j) {
                double x = 0;
                for (int c = 0; c < DQ; ++c) x += Q[std::size_t((row0 + r) * DQ + c)] * K[std::size_t(j * DQ + c)];
                Sm[std::size_t(r * BKV + j)] = x;
            }
        auto S = [&](int r, int j) { return Sm[std::size_t(r * BKV + j)]; };
        for (int nt = 0; nt < NT; ++nt)
            for (int l = 0; l < 32; ++l)
                for (int e = 0; e < 4; ++e) {
                    const fl::rc c = fl::c_frag_elem(l, e);
                    s_ok &= s[std::size_t(nt)][std::size_t(l)][std::size_t(e)] == S(c.row, nt * 8 + c.col);
                }
        // P = S, its A fragments from S's registers as the kernel packs them
        std::vector<acc4> o(std::size_t(DT), acc4{});
        for (int kk = 0; kk < NT / 2; ++kk) {
            frag4 pa{};
            for (int l = 0; l < 32; ++l)
                for (int i = 0; i < 4; ++i)
                    for (int h = 0; h < 2; ++h)
                        pa[std::size_t(l)][std::size_t(i)][std::size_t(h)] =
                            s[std::size_t(fl::p_ntile(kk, i))][std::size_t(l)][std::size_t(fl::p_elem(i) + h)];
            for (int dp = 0; dp < DT / 2; ++dp) {
                const frag4 bv = ldmatrix(sv, addresses([&](int l) { return fl::v_frag_addr(kk, dp, l); }, DV), true);
                mma(o[std::size_t(2 * dp)], pa, bv, 0);
                mma(o[std::size_t(2 * dp + 1)], pa, bv, 2);
            }
        }
        for (int dt = 0; dt < DT; ++dt)
            for (int l = 0; l < 32; ++l)
                for (int e = 0; e < 4; ++e) {
                    const fl::rc c = fl::c_frag_elem(l, e);
                    double x = 0;
                    for (int j = 0; j < BKV; ++j) x += S(c.row, j) * V[std::size_t(j * DV + dt * 8 + c.col)];
                    o_ok &= o[std::size_t(dt)][std::size_t(l)][std::size_t(e)] == x;
                }
    }
    CHECK(s_ok);
    CHECK(o_ok);
}

template <class C>
void simulate_all_warps() {
    std::mt19937 rng(11);
    for (int warp = 0; warp < C::warps; ++warp) {
        INFO("d " << C::dqk << "/" << C::dv << " warps " << C::warps << " mt " << C::mt << " kv " << C::block_kv
                  << " warp " << warp);
        simulate_warp<C>(warp, rng);
    }
}

} // namespace

TEST_CASE("flash fragments: the kernel's lane addresses and maps give Q K^T and P V", "[prefill][flash]") {
    // every tile shape instantiated (prefill_plan.hpp), each warp of the block
    simulate_all_warps<fl::config<64, 64, 4, 2, 64>>();
    simulate_all_warps<fl::config<64, 64, 8, 1, 64>>();
    simulate_all_warps<fl::config<64, 64, 4, 1, 64>>();
    simulate_all_warps<fl::config<128, 128, 4, 2, 32>>();
    simulate_all_warps<fl::config<128, 128, 8, 1, 64>>();
    simulate_all_warps<fl::config<128, 128, 4, 1, 64>>();
    simulate_all_warps<fl::config<192, 128, 8, 1, 64>>();
    simulate_all_warps<fl::config<192, 128, 4, 1, 64>>();
    // the list the kernel dispatches on is the list simulated here
    int n = 0;
    for (const pf::widths& w : pf::width_list) n += pf::for_each_flash_tile(w, [](int, const pf::flash_tile&) {});
    CHECK(n == 8);
}
