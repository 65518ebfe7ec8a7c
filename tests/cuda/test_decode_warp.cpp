// One tile of cuda-decode's tensor-core kernel simulated on the host, every warp of the block: the
// kernel's own maps (decode_layout.hpp: warp roles, swizzled tile offsets, ldmatrix lane
// addresses, the int8 fragment loads and their permutations, Q's A fragments, C-fragment
// positions, P's and O's placement) fed to models of ldmatrix.x4 (.trans) and mma.m16n8k16
// written from the PTX ISA's fragment layouts. S = Q K^T and O = P V must equal plain matmuls on
// small integers (exact), every score and output element produced exactly once, and every
// shared-memory access of a warp free of bank conflicts. Covers d 64/128 in bf16 and int8, and
// MLA's 576/512 and 160/128 (k groups summed, V read from K's rows).
#include <catch2/catch.hpp>

#include <array>
#include <cstdint>
#include <cstring>
#include <map>
#include <random>
#include <set>
#include <vector>

#include "decode_layout.hpp"
#include "formats.hpp"

namespace dl = attn::cuda::decode_layout;
namespace fm = attn::cuda::formats;

namespace {

using regs4 = std::array<std::array<std::uint32_t, 4>, 32>;
using acc4 = std::array<std::array<float, 4>, 32>;
using bytes = std::vector<std::uint8_t>;

std::uint16_t ld16(const bytes& m, int off) {
    return std::uint16_t(m[std::size_t(off)] | (m[std::size_t(off) + 1] << 8));
}
std::uint32_t ld32(const bytes& m, int off) {
    return std::uint32_t(ld16(m, off)) | (std::uint32_t(ld16(m, off + 2)) << 16);
}
void st16(bytes& m, int off, std::uint16_t v) {
    m[std::size_t(off)] = std::uint8_t(v & 0xff);
    m[std::size_t(off) + 1] = std::uint8_t(v >> 8);
}

/// ldmatrix.sync.aligned.m8n8.x4(.trans).b16: lane l gives the byte address of row l % 8 of matrix
/// l / 8 (8 consecutive 16-bit elements). Register i of the lane with groupID g = l / 4 and
/// threadID t = l % 4 receives elements (row g, cols 2t, 2t + 1) of matrix i; with .trans,
/// (rows 2t and 2t + 1, col g).
regs4 ldmatrix(const bytes& m, const std::array<int, 32>& addr, bool trans) {
    regs4 r{};
    for (int i = 0; i < 4; ++i)
        for (int l = 0; l < 32; ++l) {
            const int g = l / 4, t = l % 4;
            const std::uint16_t lo = trans ? ld16(m, addr[std::size_t(8 * i + 2 * t)] + 2 * g)
                                           : ld16(m, addr[std::size_t(8 * i + g)] + 4 * t);
            const std::uint16_t hi = trans ? ld16(m, addr[std::size_t(8 * i + 2 * t + 1)] + 2 * g)
                                           : ld16(m, addr[std::size_t(8 * i + g)] + 4 * t + 2);
            r[std::size_t(l)][std::size_t(i)] = lo | (std::uint32_t(hi) << 16);
        }
    return r;
}

float lo_of(std::uint32_t r) { return fm::from_bf16(std::uint16_t(r & 0xffff)); }
float hi_of(std::uint32_t r) { return fm::from_bf16(std::uint16_t(r >> 16)); }

/// mma.m16n8k16.row.col, bf16 in, fp32 accumulate (PTX ISA fragment layouts): a0 = A(g, 2t..2t+1),
/// a1 = A(g + 8, 2t..), a2 = A(g, 2t + 8..), a3 = A(g + 8, 2t + 8..); b0 = B(2t..2t+1, g),
/// b1 = B(2t + 8.., g); c0, c1 = C(g, 2t..2t+1), c2, c3 = C(g + 8, 2t..).
void mma(acc4& d, const regs4& a, const std::array<std::uint32_t, 32>& b0, const std::array<std::uint32_t, 32>& b1) {
    float A[16][16] = {}, B[16][8] = {};
    for (int l = 0; l < 32; ++l) {
        const int g = l / 4, t = l % 4;
        const auto& r = a[std::size_t(l)];
        A[g][2 * t] = lo_of(r[0]), A[g][2 * t + 1] = hi_of(r[0]);
        A[g + 8][2 * t] = lo_of(r[1]), A[g + 8][2 * t + 1] = hi_of(r[1]);
        A[g][2 * t + 8] = lo_of(r[2]), A[g][2 * t + 9] = hi_of(r[2]);
        A[g + 8][2 * t + 8] = lo_of(r[3]), A[g + 8][2 * t + 9] = hi_of(r[3]);
        B[2 * t][g] = lo_of(b0[std::size_t(l)]), B[2 * t + 1][g] = hi_of(b0[std::size_t(l)]);
        B[2 * t + 8][g] = lo_of(b1[std::size_t(l)]), B[2 * t + 9][g] = hi_of(b1[std::size_t(l)]);
    }
    for (int l = 0; l < 32; ++l) {
        const int g = l / 4, t = l % 4;
        for (int e = 0; e < 4; ++e) {
            const int row = g + (e / 2) * 8, col = 2 * t + e % 2;
            for (int k = 0; k < 16; ++k) d[std::size_t(l)][std::size_t(e)] += A[row][k] * B[k][col];
        }
    }
}

/// The most distinct 4-byte words any bank serves in one phase of a warp's access of `width` bytes a
/// lane (1: conflict-free). A 16-byte access runs in 4 phases of 8 lanes, 8 bytes in 2 of 16.
int conflict_ways(const std::array<int, 32>& addr, int width) {
    const int lanes = width >= 16 ? 8 : width == 8 ? 16 : 32;
    int worst = 1;
    for (int p0 = 0; p0 < 32; p0 += lanes) {
        std::map<int, std::set<int>> bank;
        for (int l = p0; l < p0 + lanes; ++l)
            for (int b = 0; b < std::max(width, 1); b += 4) {
                const int word = (addr[std::size_t(l)] + b) / 4;
                bank[word % 32].insert(word);
            }
        for (auto& [k, v] : bank) worst = std::max(worst, int(v.size()));
    }
    return worst;
}

struct sim {
    bool int8;
    int DK, DV, MT, NW, T, CS;
    bool VFK;
};

void simulate(const sim& c) {
    const int NT = c.T / 8, KSTEPS = c.DK / 16, KS = c.NW / c.CS, SNT = NT / KS, KSW = KSTEPS / c.CS;
    const int OWNERS = NT < c.NW ? NT : c.NW, OWN = NT / OWNERS, NV = c.DV / c.NW / 8, M = c.MT * 16;
    const int EB = c.int8 ? 1 : 2, RSK = dl::row_stride(c.DK * EB), RSV = c.VFK ? RSK : dl::row_stride(c.DV * EB);
    const int PSTRIDE = (c.T + 8) * 2;
    std::mt19937 rng(unsigned(c.DK * 131 + c.MT * 7 + c.NW + c.int8));
    std::uniform_int_distribution<int> small(-2, 2), byte(-128, 127);
    std::vector<std::vector<int>> Q(std::size_t(M), std::vector<int>(std::size_t(c.DK))),
        K(std::size_t(c.T), std::vector<int>(std::size_t(c.DK))),
        V(std::size_t(c.T), std::vector<int>(std::size_t(c.DV))), P(std::size_t(M), std::vector<int>(std::size_t(c.T)));
    for (auto& r : Q)
        for (int& x : r) x = small(rng);
    for (auto& r : K)
        for (int& x : r) x = c.int8 ? byte(rng) : small(rng);
    for (int j = 0; j < c.T; ++j)
        for (int x = 0; x < c.DV; ++x)
            V[std::size_t(j)][std::size_t(x)] = c.VFK    ? K[std::size_t(j)][std::size_t(x)]
                                                : c.int8 ? byte(rng)
                                                         : small(rng);
    for (auto& r : P)
        for (int& x : r) x = small(rng);
    // the tiles as the loader leaves them: swizzled rows, bf16 bit patterns or int8 bytes
    bytes kt(std::size_t(c.T * RSK), 0), vt(std::size_t(c.T * RSV), 0), sp(std::size_t(M * PSTRIDE), 0);
    auto put = [&](bytes& m, int stride, int row, int col, int v) {
        if (c.int8)
            m[std::size_t(dl::byte_offset(row, col, stride))] = std::uint8_t(std::int8_t(v));
        else
            st16(m, dl::byte_offset(row, 2 * col, stride), fm::to_bf16(float(v)));
    };
    for (int j = 0; j < c.T; ++j) {
        for (int x = 0; x < c.DK; ++x) put(kt, RSK, j, x, K[std::size_t(j)][std::size_t(x)]);
        if (!c.VFK)
            for (int x = 0; x < c.DV; ++x) put(vt, RSV, j, x, V[std::size_t(j)][std::size_t(x)]);
    }
    const bytes& vtile = c.VFK ? kt : vt;
    int worst = 1;

    // ---- S = Q K^T: every warp's partial scores, then the owners' sums
    std::vector<std::vector<std::vector<acc4>>> part(
        std::size_t(c.CS),
        std::vector<std::vector<acc4>>(std::size_t(NT), std::vector<acc4>(std::size_t(c.MT), acc4{})));
    for (int w = 0; w < c.NW; ++w) {
        const int cg = dl::warp_k_group(w, c.CS), kg = dl::warp_key_group(w, c.CS);
        std::vector<std::vector<acc4>> s(std::size_t(c.MT), std::vector<acc4>(std::size_t(SNT), acc4{}));
        for (int k = 0; k < KSW; ++k) {
            const int ks = cg * KSW + k;
            std::vector<regs4> a(std::size_t(c.MT));
            for (int mt = 0; mt < c.MT; ++mt)
                for (int l = 0; l < 32; ++l)
                    for (int reg = 0; reg < 4; ++reg) {
                        std::uint16_t h[2];
                        for (int hh = 0; hh < 2; ++hh) {
                            const dl::rc e = dl::a_elem(l, reg, hh);
                            h[hh] = fm::to_bf16(
                                float(Q[std::size_t(mt * 16 + e.row)][std::size_t(dl::q_col(ks, e.col, c.int8))]));
                        }
                        a[std::size_t(mt)][std::size_t(l)][std::size_t(reg)] = h[0] | (std::uint32_t(h[1]) << 16);
                    }
            for (int np = 0; np < SNT / 2; ++np) {
                const int n0 = dl::s_key0(kg, SNT, np);
                std::array<std::array<std::uint32_t, 32>, 4> b{};
                if (!c.int8) {
                    std::array<int, 32> addr{};
                    for (int l = 0; l < 32; ++l) {
                        const dl::rc x = dl::k_ldsm(l, n0, ks);
                        addr[std::size_t(l)] = dl::chunk_offset(x.row, x.col / 8, RSK);
                    }
                    for (int ph = 0; ph < 4; ++ph) { // each matrix's 8 rows: 8 distinct bank groups
                        std::set<int> groups;
                        for (int l = 8 * ph; l < 8 * ph + 8; ++l) groups.insert((addr[std::size_t(l)] / 16) % 8);
                        worst = std::max(worst, 9 - int(groups.size()));
                    }
                    const regs4 r = ldmatrix(kt, addr, false);
                    for (int l = 0; l < 32; ++l)
                        for (int i = 0; i < 4; ++i)
                            b[std::size_t(i)][std::size_t(l)] = r[std::size_t(l)][std::size_t(i)];
                } else {
                    for (int half = 0; half < 2; ++half) {
                        std::array<int, 32> addr{};
                        for (int l = 0; l < 32; ++l) {
                            const dl::rc x = dl::k8_word(l, n0 + 8 * half, ks);
                            addr[std::size_t(l)] = dl::byte_offset(x.row, x.col, RSK);
                            const std::uint32_t wd = dl::bias_bytes(ld32(kt, addr[std::size_t(l)]));
                            b[std::size_t(2 * half)][std::size_t(l)] = dl::widen_pair(wd, 0, wd, 1);
                            b[std::size_t(2 * half + 1)][std::size_t(l)] = dl::widen_pair(wd, 2, wd, 3);
                        }
                        worst = std::max(worst, conflict_ways(addr, 4));
                    }
                }
                for (int mt = 0; mt < c.MT; ++mt) {
                    mma(s[std::size_t(mt)][std::size_t(2 * np)], a[std::size_t(mt)], b[0], b[1]);
                    mma(s[std::size_t(mt)][std::size_t(2 * np + 1)], a[std::size_t(mt)], b[2], b[3]);
                }
            }
        }
        for (int mt = 0; mt < c.MT; ++mt)
            for (int j = 0; j < SNT; ++j)
                part[std::size_t(cg)][std::size_t(dl::s_key0(kg, SNT, 0) / 8 + j)][std::size_t(mt)] =
                    s[std::size_t(mt)][std::size_t(j)];
    }
    std::vector<std::vector<int>> s_seen(std::size_t(M), std::vector<int>(std::size_t(c.T), 0));
    std::vector<std::vector<int>> p_seen = s_seen;
    bool s_ok = true;
    for (int w = 0; w < OWNERS; ++w)
        for (int mt = 0; mt < c.MT; ++mt)
            for (int j = 0; j < OWN; ++j) {
                const int n0 = dl::own_key0(w, OWN, j);
                if (c.CS == 1) REQUIRE(n0 == dl::s_key0(dl::warp_key_group(w, 1), SNT, 0) + 8 * j); // scores stay put
                std::array<int, 32> addr{};
                for (int l = 0; l < 32; ++l) {
                    for (int e = 0; e < 4; ++e) {
                        float x = 0;
                        for (int cg = 0; cg < c.CS; ++cg)
                            x += part[std::size_t(cg)][std::size_t(n0 / 8)][std::size_t(mt)][std::size_t(l)]
                                     [std::size_t(e)];
                        const dl::rc ce = dl::c_elem(l, e);
                        const int row = mt * 16 + ce.row, key = n0 + ce.col;
                        long long want = 0;
                        for (int d = 0; d < c.DK; ++d)
                            want += Q[std::size_t(row)][std::size_t(d)] * K[std::size_t(key)][std::size_t(d)];
                        s_ok &= x == float(want);
                        ++s_seen[std::size_t(row)][std::size_t(key)];
                    }
                    // P as the owner stores it: elements (0, 1) and (2, 3), one row and two keys each
                    for (int hh = 0; hh < 2; ++hh) {
                        const dl::rc ce = dl::c_elem(l, 2 * hh);
                        REQUIRE(dl::c_elem(l, 2 * hh + 1).row == ce.row);
                        REQUIRE(dl::c_elem(l, 2 * hh + 1).col == ce.col + 1);
                        const int row = mt * 16 + ce.row, key = n0 + ce.col, off = row * PSTRIDE + key * 2;
                        st16(sp, off, fm::to_bf16(float(P[std::size_t(row)][std::size_t(key)])));
                        st16(sp, off + 2, fm::to_bf16(float(P[std::size_t(row)][std::size_t(key + 1)])));
                        ++p_seen[std::size_t(row)][std::size_t(key)];
                        ++p_seen[std::size_t(row)][std::size_t(key + 1)];
                        if (hh == 0) addr[std::size_t(l)] = off;
                    }
                }
                worst = std::max(worst, conflict_ways(addr, 4));
            }
    CHECK(s_ok);
    bool covered = true;
    for (int r = 0; r < M; ++r)
        for (int j = 0; j < c.T; ++j)
            covered &= s_seen[std::size_t(r)][std::size_t(j)] == 1 && p_seen[std::size_t(r)][std::size_t(j)] == 1;
    CHECK(covered);

    // ---- O = P V: each warp's columns
    std::vector<std::vector<int>> o_seen(std::size_t(M), std::vector<int>(std::size_t(c.DV), 0));
    bool o_ok = true;
    for (int w = 0; w < c.NW; ++w) {
        const int cb = dl::pv_col0(w, c.DV, c.NW);
        std::vector<std::vector<acc4>> o(std::size_t(c.MT), std::vector<acc4>(std::size_t(NV), acc4{}));
        for (int kk = 0; kk < c.T / 16; ++kk) {
            std::vector<regs4> a(std::size_t(c.MT));
            for (int mt = 0; mt < c.MT; ++mt) {
                std::array<int, 32> addr{};
                for (int l = 0; l < 32; ++l) {
                    const dl::rc x = dl::p_ldsm(l, mt * 16, kk * 16);
                    addr[std::size_t(l)] = x.row * PSTRIDE + x.col * 2;
                }
                for (int ph = 0; ph < 4; ++ph) {
                    std::set<int> groups;
                    for (int l = 8 * ph; l < 8 * ph + 8; ++l) groups.insert((addr[std::size_t(l)] / 16) % 8);
                    worst = std::max(worst, 9 - int(groups.size()));
                }
                a[std::size_t(mt)] = ldmatrix(sp, addr, false);
            }
            if (!c.int8) {
                for (int jp = 0; jp < NV / 2; ++jp) {
                    std::array<int, 32> addr{};
                    for (int l = 0; l < 32; ++l) {
                        const dl::rc x = dl::v_ldsm(l, kk * 16, cb + 16 * jp);
                        addr[std::size_t(l)] = dl::chunk_offset(x.row, x.col / 8, RSV);
                    }
                    for (int ph = 0; ph < 4; ++ph) {
                        std::set<int> groups;
                        for (int l = 8 * ph; l < 8 * ph + 8; ++l) groups.insert((addr[std::size_t(l)] / 16) % 8);
                        worst = std::max(worst, 9 - int(groups.size()));
                    }
                    const regs4 r = ldmatrix(vtile, addr, true);
                    std::array<std::array<std::uint32_t, 32>, 4> b{};
                    for (int l = 0; l < 32; ++l)
                        for (int i = 0; i < 4; ++i)
                            b[std::size_t(i)][std::size_t(l)] = r[std::size_t(l)][std::size_t(i)];
                    for (int mt = 0; mt < c.MT; ++mt) {
                        mma(o[std::size_t(mt)][std::size_t(2 * jp)], a[std::size_t(mt)], b[0], b[1]);
                        mma(o[std::size_t(mt)][std::size_t(2 * jp + 1)], a[std::size_t(mt)], b[2], b[3]);
                    }
                }
            } else {
                // load i of NV bytes per lane: key v8_key(lane, k0, i), column cb + NV (lane / 4)
                std::vector<std::array<std::vector<std::uint32_t>, 4>> wv(32);
                for (int i = 0; i < 4; ++i) {
                    std::array<int, 32> addr{};
                    for (int l = 0; l < 32; ++l) {
                        addr[std::size_t(l)] = dl::byte_offset(dl::v8_key(l, kk * 16, i), cb + NV * (l / 4), RSV);
                        std::vector<std::uint8_t> raw(std::size_t(std::max(NV, 4)), 0);
                        for (int j = 0; j < NV; ++j) raw[std::size_t(j)] = vtile[std::size_t(addr[std::size_t(l)] + j)];
                        for (int q = 0; q < std::max(NV, 4) / 4; ++q) {
                            std::uint32_t word;
                            std::memcpy(&word, &raw[std::size_t(4 * q)], 4);
                            wv[std::size_t(l)][std::size_t(i)].push_back(dl::bias_bytes(word));
                        }
                    }
                    worst = std::max(worst, conflict_ways(addr, NV));
                }
                for (int j = 0; j < NV; ++j) {
                    std::array<std::uint32_t, 32> b0{}, b1{};
                    for (int l = 0; l < 32; ++l) {
                        const auto& x = wv[std::size_t(l)];
                        b0[std::size_t(l)] =
                            dl::widen_pair(x[0][std::size_t(j / 4)], j % 4, x[1][std::size_t(j / 4)], j % 4);
                        b1[std::size_t(l)] =
                            dl::widen_pair(x[2][std::size_t(j / 4)], j % 4, x[3][std::size_t(j / 4)], j % 4);
                    }
                    for (int mt = 0; mt < c.MT; ++mt)
                        mma(o[std::size_t(mt)][std::size_t(j)], a[std::size_t(mt)], b0, b1);
                }
            }
        }
        for (int mt = 0; mt < c.MT; ++mt)
            for (int j = 0; j < NV; ++j)
                for (int l = 0; l < 32; ++l)
                    for (int e = 0; e < 4; ++e) {
                        const dl::rc ce = dl::c_elem(l, e);
                        const int row = mt * 16 + ce.row;
                        const int col = c.int8 ? dl::v8_col(cb, NV, j, ce.col) : dl::v16_col(cb, j, ce.col);
                        long long want = 0;
                        for (int k = 0; k < c.T; ++k)
                            want += P[std::size_t(row)][std::size_t(k)] * V[std::size_t(k)][std::size_t(col)];
                        o_ok &= o[std::size_t(mt)][std::size_t(j)][std::size_t(l)][std::size_t(e)] == float(want);
                        ++o_seen[std::size_t(row)][std::size_t(col)];
                    }
    }
    CHECK(o_ok);
    bool o_cov = true;
    for (auto& r : o_seen)
        for (int n : r) o_cov &= n == 1;
    CHECK(o_cov);
    CHECK(worst == 1); // no bank conflict anywhere
}

} // namespace

TEST_CASE("decode warp simulation: d 64 and 128, bf16 and int8 caches", "[cuda][decode][warp]") {
    for (bool i8 : {false, true})
        for (int d : {64, 128})
            for (int mt : {1, 2}) {
                INFO((i8 ? "int8" : "bf16") << " d " << d << " m-tiles " << mt);
                simulate({i8, d, d, mt, 4, 64, 1, false}); // decode_mma.cu's gqa<>
            }
}

TEST_CASE("decode warp simulation: MLA's absorbed form, V in K's rows", "[cuda][decode][warp]") {
    for (bool i8 : {false, true}) {
        INFO((i8 ? "int8" : "bf16"));
        simulate({i8, 576, 512, 1, 4, 32, 4, true}); // decode_mla.cu's wide<>
        simulate({i8, 576, 512, 2, 8, 32, 4, true});
        simulate({i8, 576, 512, 4, 8, 32, 4, true});
        simulate({i8, 160, 128, 1, 4, 64, 2, true}); // narrow<>
        simulate({i8, 160, 128, 2, 8, 64, 2, true});
    }
}
