// cuda-hopper's layout without a GPU (hopper_layout.hpp): what TMA writes and what wgmma reads, each
// modelled here from its documentation, must meet.
//  - TMA with CU_TENSOR_MAP_SWIZZLE_128B (cuda.h: "swizzle 16B chunks within 128B span"): box row r
//    is 128 bytes at r x 128; its 16-byte chunk c lands at chunk c XOR (r mod 8).
//  - wgmma's shared-memory operands (PTX ISA, "Shared Memory Matrix Layout", and CUTLASS's canonical
//    GMMA layouts in units of 16-byte T): K-major SW128 ((8,m),(T,2)):((8T,SBO),(1,T)); MN-major
//    SW128 ((T,8,m),(8,k)):((1,T,LBO),(8T,SBO)); then the 128-byte swizzle on the address (bits
//    4-6 XOR bits 7-9), the fields read back from the kernel's own 64-bit descriptors.
//  - wgmma's register fragments (CUTLASS's CLayout_64xN / ALayout_64x16, CuTe layouts
//    ((4,8,4),(2,2,N/8)):((128,1,16),(64,8,512)) over m + 64 n): a warpgroup's S = Q K^T and
//    O = P V simulated from the bytes TMA wrote, with the kernel's P packing, against plain loops.
//  - TMA geometry: the element a box coordinate names is api.hpp's interleaved layout, within the
//    driver's limits; the transaction bytes the kernel expects are the boxes' bytes.
#include <catch2/catch.hpp>

#include <cstdint>
#include <random>
#include <set>
#include <vector>

#include "hopper_layout.hpp"
#include "prefill_plan.hpp"

namespace hp = attn::cuda::hopper;
namespace pf = attn::cuda::prefill;

namespace {

/// Where TMA puts element (r, c) (16-bit) of a box whose shared-memory start is 1024-aligned.
std::uint32_t tma_writes(std::uint32_t box_start, int r, int c) {
    const int chunk = (c * 2) / 16, within = (c * 2) % 16;
    return box_start + std::uint32_t(r * 128 + ((chunk ^ (r % 8)) * 16) + within);
}

struct decoded {
    std::uint32_t start, lbo, sbo;
    int mode;
};
decoded decode(std::uint64_t d) {
    return {std::uint32_t(d & 0x3fff) << 4, std::uint32_t((d >> 16) & 0x3fff) << 4,
            std::uint32_t((d >> 32) & 0x3fff) << 4, int(d >> 62)};
}
std::uint32_t sw128(std::uint32_t a) { return a ^ (((a >> 7) & 7u) << 4); }

/// The byte wgmma reads for element (mn, k), k < 16, of a K-major SW128 operand.
std::uint32_t wgmma_k_major(std::uint64_t desc, int mn, int k) {
    const decoded d = decode(desc);
    const int T = 8; // 16-bit elements in 16 bytes
    // ((8, m), (T, 2)) : ((8T, SBO), (1, T)) in elements, SBO in bytes
    const std::uint32_t elems = std::uint32_t((mn % 8) * 8 * T + (k % T) + (k / T) * T);
    return sw128(d.start + elems * 2 + std::uint32_t(mn / 8) * d.sbo);
}
/// The byte wgmma reads for element (mn, k), k < 16, of an MN-major SW128 operand.
std::uint32_t wgmma_mn_major(std::uint64_t desc, int mn, int k) {
    const decoded d = decode(desc);
    const int T = 8;
    // ((T, 8, m), (8, k)) : ((1, T, LBO), (8T, SBO))
    const std::uint32_t elems = std::uint32_t((mn % T) + ((mn / T) % 8) * T + (k % 8) * 8 * T);
    return sw128(d.start + elems * 2 + std::uint32_t(mn / 64) * d.lbo + std::uint32_t(k / 8) * d.sbo);
}

/// CuTe's CLayout_64xN: thread t (of 128), value v -> (m, n).
std::pair<int, int> acc_model(int t, int v) {
    const int off = 128 * (t % 4) + (t / 4) % 8 + 16 * (t / 32) + 64 * (v % 2) + 8 * ((v / 2) % 2) + 512 * (v / 4);
    return {off % 64, off / 64};
}

template <class C>
void check_operands() {
    INFO("config " << C::dqk << "/" << C::dv << " kv " << C::block_kv << " stages " << C::stages);
    const std::uint32_t base = 1024 * 3; // any 1024-aligned shared address
    // Q, A of consumer wg at k-step ks: element (m, k) is Q tile (64 wg + m, 16 ks + k)
    for (int wg = 0; wg < 2; ++wg)
        for (int ks = 0; ks < C::dqk / 16; ++ks) {
            const std::uint64_t d = hp::encode(hp::q_desc<C>(base, wg, ks));
            REQUIRE(decode(d).mode == 1);
            bool ok = true;
            for (int m = 0; m < 64; ++m)
                for (int k = 0; k < 16; ++k) {
                    const int row = 64 * wg + m, col = 16 * ks + k;
                    ok &= wgmma_k_major(d, m, k) ==
                          tma_writes(base + C::q_off + std::uint32_t((col / 64) * C::q_box_bytes), row, col % 64);
                }
            CHECK(ok);
        }
    for (int slot = 0; slot < C::stages; ++slot) {
        // K, B = K^T at k-step ks: element (n, k) is K tile (key n, 16 ks + k)
        for (int ks = 0; ks < C::dqk / 16; ++ks) {
            const std::uint64_t d = hp::encode(hp::k_desc<C>(base, slot, ks));
            bool ok = true;
            for (int n = 0; n < C::block_kv; ++n)
                for (int k = 0; k < 16; ++k) {
                    const int col = 16 * ks + k;
                    ok &= wgmma_k_major(d, n, k) ==
                          tma_writes(base + C::k_off +
                                         std::uint32_t(slot * C::k_stage_bytes + (col / 64) * C::kv_box_bytes),
                                     n, col % 64);
                }
            CHECK(ok);
        }
        // V, B of P V at k-step kk: element (n = column, k) is V tile (key 16 kk + k, column n)
        for (int kk = 0; kk < C::block_kv / 16; ++kk) {
            const std::uint64_t d = hp::encode(hp::v_desc<C>(base, slot, kk));
            bool ok = true;
            for (int n = 0; n < C::dv; ++n)
                for (int k = 0; k < 16; ++k)
                    ok &= wgmma_mn_major(d, n, k) ==
                          tma_writes(base + C::v_off +
                                         std::uint32_t(slot * C::v_stage_bytes + (n / 64) * C::kv_box_bytes),
                                     16 * kk + k, n % 64);
            CHECK(ok);
        }
    }
}

} // namespace

TEST_CASE("hopper swizzle: TMA's 128-byte swizzle is a bijection on each box", "[hopper][layout]") {
    for (int rows : {64, 128, 176, 192}) {
        std::set<std::uint32_t> seen;
        for (int r = 0; r < rows; ++r)
            for (int c = 0; c < 64; ++c) {
                const std::uint32_t a = tma_writes(0, r, c);
                CHECK(a / 128 == std::uint32_t(r)); // stays in its 128-byte row
                seen.insert(a / 2);
            }
        CHECK(seen.size() == std::size_t(rows * 64));
        CHECK(*seen.rbegin() == std::uint32_t(rows * 64 - 1));
    }
    // the two models of the swizzle agree (chunk XOR row, address bits 4-6 XOR 7-9) from a 1024-aligned start
    for (int r = 0; r < 64; ++r)
        for (int c = 0; c < 64; ++c) CHECK(tma_writes(2048, r, c) == sw128(2048u + std::uint32_t(r * 128 + c * 2)));
}

TEST_CASE("hopper descriptors: the address wgmma computes is where TMA put each element", "[hopper][layout]") {
    check_operands<hp::config<64, 64, 128, 2>>();
    check_operands<hp::config<64, 64, 192, 2>>();
    check_operands<hp::config<128, 128, 128, 2>>();
    check_operands<hp::config<128, 128, 176, 2>>();
    check_operands<hp::config<192, 128, 128, 2>>();
    int n = 0;
    for (const pf::widths& w : pf::width_list) n += pf::for_each_hopper_tile(w, [](int, const pf::hopper_tile&) {});
    CHECK(n == 5); // every instantiation above
}

TEST_CASE("hopper fragments: one warpgroup's S = Q K^T and O = P V through the kernel's maps", "[hopper][layout]") {
    using C = hp::config<128, 128, 176, 2>;
    constexpr int DQ = C::dqk, DV = C::dv, BKV = C::block_kv;
    std::mt19937 rng(5);
    std::uniform_int_distribution<int> small(-2, 2); // integers: exact sums
    const std::uint32_t base = 0;
    std::vector<float> smem(C::smem_bytes / 2, 0.0f); // by 16-bit element
    std::vector<float> Q(hp::block_q * DQ), K(BKV * DQ), V(BKV * DV);
    for (float& x : Q) x = float(small(rng));
    for (float& x : K) x = float(small(rng));
    for (float& x : V) x = float(small(rng));
    const int slot = 1;
    for (int r = 0; r < hp::block_q; ++r)
        for (int c = 0; c < DQ; ++c)
            smem[tma_writes(base + C::q_off + std::uint32_t((c / 64) * C::q_box_bytes), r, c % 64) / 2] =
                Q[std::size_t(r * DQ + c)];
    for (int r = 0; r < BKV; ++r) {
        for (int c = 0; c < DQ; ++c)
            smem[tma_writes(base + C::k_off + std::uint32_t(slot * C::k_stage_bytes + (c / 64) * C::kv_box_bytes), r,
                            c % 64) /
                 2] = K[std::size_t(r * DQ + c)];
        for (int c = 0; c < DV; ++c)
            smem[tma_writes(base + C::v_off + std::uint32_t(slot * C::v_stage_bytes + (c / 64) * C::kv_box_bytes), r,
                            c % 64) /
                 2] = V[std::size_t(r * DV + c)];
    }
    std::vector<double> plain(std::size_t(hp::block_q * BKV)); // Q K^T by plain loops
    for (int r = 0; r < hp::block_q; ++r)
        for (int j = 0; j < BKV; ++j) {
            double x = 0;
            for (int c = 0; c < DQ; ++c) x += Q[std::size_t(r * DQ + c)] * K[std::size_t(j * DQ + c)];
            plain[std::size_t(r * BKV + j)] = x;
        }
    for (int wg = 0; wg < 2; ++wg) {
        // S: per thread t, value v (the model's distribution), the sum over the k-steps
        std::vector<std::vector<float>> s(128, std::vector<float>(C::s_regs, 0.0f));
        for (int ks = 0; ks < DQ / 16; ++ks) {
            const std::uint64_t da = hp::encode(hp::q_desc<C>(base, wg, ks)),
                                db = hp::encode(hp::k_desc<C>(base, slot, ks));
            for (int t = 0; t < 128; ++t)
                for (int v = 0; v < C::s_regs; ++v) {
                    const auto [m, n] = acc_model(t, v);
                    float x = 0;
                    for (int k = 0; k < 16; ++k)
                        x += smem[wgmma_k_major(da, m, k) / 2] * smem[wgmma_k_major(db, n, k) / 2];
                    s[std::size_t(t)][std::size_t(v)] += x;
                }
        }
        // the kernel reads element i of thread (warp, lane) as (acc_row, acc_col): plain S there
        bool s_ok = true;
        for (int t = 0; t < 128; ++t)
            for (int i = 0; i < C::s_regs; ++i) {
                const int row = 64 * wg + hp::acc_row(t / 32, t % 32, i), key = hp::acc_col(t % 32, i);
                s_ok &= s[std::size_t(t)][std::size_t(i)] == plain[std::size_t(row * BKV + key)];
            }
        CHECK(s_ok);
        // O = P V with P = S packed as the kernel packs it: register j = elements (p_elem(j), + 1);
        // A from registers (ALayout_64x16 = CLayout_64x16): value v of k-step kk is register 4 kk + v / 2
        std::vector<std::vector<float>> o(128, std::vector<float>(C::o_regs, 0.0f));
        std::vector<std::vector<float>> A(64, std::vector<float>(16));
        for (int kk = 0; kk < BKV / 16; ++kk) {
            for (int t = 0; t < 128; ++t)
                for (int v = 0; v < 8; ++v) {
                    const auto [m, k] = acc_model(t, v); // 64 x 16: n of the model is k here
                    const int j = 4 * kk + v / 2;
                    A[std::size_t(m)][std::size_t(k)] = s[std::size_t(t)][std::size_t(hp::p_elem(j) + v % 2)];
                }
            const std::uint64_t db = hp::encode(hp::v_desc<C>(base, slot, kk));
            for (int t = 0; t < 128; ++t)
                for (int v = 0; v < C::o_regs; ++v) {
                    const auto [m, n] = acc_model(t, v);
                    float x = 0;
                    for (int k = 0; k < 16; ++k)
                        x += A[std::size_t(m)][std::size_t(k)] * smem[wgmma_mn_major(db, n, k) / 2];
                    o[std::size_t(t)][std::size_t(v)] += x;
                }
        }
        bool o_ok = true;
        for (int t = 0; t < 128; ++t)
            for (int i = 0; i < C::o_regs; ++i) {
                const int row = 64 * wg + hp::acc_row(t / 32, t % 32, i), col = hp::acc_col(t % 32, i);
                double x = 0;
                for (int j = 0; j < BKV; ++j) x += plain[std::size_t(row * BKV + j)] * V[std::size_t(j * DV + col)];
                o_ok &= o[std::size_t(t)][std::size_t(i)] == x;
            }
        CHECK(o_ok);
    }
}

TEST_CASE("hopper TMA boxes: the element each coordinate names, within the driver's limits", "[hopper][layout]") {
    for (long long batch : {1, 3})
        for (long long rows : {1, 7, 129, 16384})
            for (long long heads : {1, 4, 16})
                for (long long d : {8, 64, 72, 128, 192})
                    for (int box_rows : {128, 176}) {
                        const hp::tma_geometry g = hp::tma_for(batch, rows, heads, d, box_rows);
                        INFO("B " << batch << " rows " << rows << " heads " << heads << " d " << d);
                        for (int i = 0; i < 3; ++i) {
                            CHECK(g.strides[i] % 16 == 0);
                            CHECK(g.strides[i] < (1ull << 40));
                        }
                        for (int i = 0; i < 4; ++i) {
                            CHECK(g.dims[i] >= 1);
                            CHECK(g.dims[i] <= (1ull << 32));
                            CHECK(g.box[i] >= 1);
                            CHECK(g.box[i] <= 256);
                        }
                        CHECK(g.box[0] * 2 <= 128); // SWIZZLE_128B: the inner box at most 128 bytes
                        CHECK(g.box[0] * 2 % 16 == 0);
                        // element (c, h, n, b) at api.hpp's [B, rows, heads x d] offset
                        for (long long b = 0; b < batch; b += 2)
                            for (long long n : {0LL, rows - 1})
                                for (long long h : {0LL, heads - 1})
                                    for (long long c : {0LL, d - 1}) {
                                        const unsigned long long at =
                                            2 * c + h * g.strides[0] + n * g.strides[1] + b * g.strides[2];
                                        CHECK(at == 2ull * std::uint64_t(((b * rows + n) * heads + h) * d + c));
                                    }
                        // the transaction bytes a box lands (zero-filled out of bounds: still counted)
                        const std::uint64_t bytes = std::uint64_t(g.box[0]) * g.box[1] * g.box[2] * g.box[3] * 2;
                        CHECK(bytes == std::uint64_t(box_rows) * 128);
                    }
    CHECK(hp::config<128, 128, 176, 2>::kv_box_bytes == 176 * 128);
    CHECK(hp::config<128, 128, 176, 2>::q_box_bytes == 128 * 128);
    // box coordinates: box c of a tile from row0 starts at column 64 c of that head and row
    const hp::coords x = hp::box_coords(2, 5, 384, 1);
    CHECK(x.c[0] == 128);
    CHECK(x.c[1] == 5);
    CHECK(x.c[2] == 384);
    CHECK(x.c[3] == 1);
}

TEST_CASE("hopper shared memory and registers: every instantiation fits an H100", "[hopper][layout]") {
    auto check = [](auto c) {
        using C = decltype(c);
        INFO("config " << C::dqk << "/" << C::dv << " kv " << C::block_kv << " stages " << C::stages);
        CHECK(C::smem_bytes <= 227 * 1024);
        for (int off :
             {C::q_off, C::k_off, C::v_off, C::q_box_bytes, C::kv_box_bytes, C::k_stage_bytes, C::v_stage_bytes})
            CHECK(off % 1024 == 0); // the swizzle pattern starts on every box
        CHECK(C::bar_off % 8 == 0);
        // descriptor fields fit their 14 bits (>> 4): addresses under 256 KiB, LBO a box
        CHECK((C::bar_off >> 4) < (1 << 14));
        CHECK((C::kv_box_bytes >> 4) < (1 << 14));
    };
    check(hp::config<64, 64, 128, 2>{});
    check(hp::config<64, 64, 192, 2>{});
    check(hp::config<128, 128, 128, 2>{});
    check(hp::config<128, 128, 176, 2>{});
    check(hp::config<192, 128, 128, 2>{});
    CHECK(128 * hp::producer_regs + 256 * hp::consumer_regs <= 65536);
    CHECK(hp::producer_regs % 8 == 0);
    CHECK(hp::consumer_regs % 8 == 0);
}

TEST_CASE("hopper narrow heads: the boxes loaded cover the head, the others lie wholly past it", "[hopper][layout]") {
    for (int d_qk = 8; d_qk <= 256; d_qk += 8)
        for (int d_v = 8; d_v <= 256; d_v += 8) {
            const pf::widths w = pf::widths_for(std::size_t(d_qk), std::size_t(d_v));
            if (!w.ok()) continue;
            INFO("d_qk " << d_qk << " d_v " << d_v << " in " << w.dqk << "/" << w.dv);
            for (const auto& [d, width] : {std::pair<int, int>{d_qk, w.dqk}, {d_v, w.dv}}) {
                const int loaded = hp::boxes_for(d);
                CHECK(loaded * 64 >= d);      // every real column loaded
                CHECK((loaded - 1) * 64 < d); // every loaded box holds a real column
                CHECK(loaded * 64 <= width);  // inside the instantiation
            }
        }
}
