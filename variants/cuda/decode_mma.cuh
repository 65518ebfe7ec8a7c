// cuda-decode on tensor cores (mma.sync.m16n8k16, sm_80 and up): the rows of a block (query heads
// x new tokens of one kv head, head-major) are the M dimension of both products, padded to 16 x MT.
//  - Memory: a block streams its chunk's key tiles (T keys of K, and of V unless V is K's first
//    d_v columns) through a `stages`-deep cp.async pipeline (run time), 16-byte copies into
//    swizzled rows (decode_layout), so every cache byte crosses the bus once, at full width.
//  - S = Q K^T: warp (key group kg, k group cg) of NW = KS x CS takes SNT n-tiles of the tile's
//    keys over KSTEPS / CS k-steps; CS > 1 (MLA's 576-wide rows) sums the k groups' partial
//    scores through shared memory. Q's fragments stay in registers when they fit (40 at most),
//    else in shared memory in fragment order (one 16-byte load per fragment).
//  - Softmax: the owner of each n-tile masks (only in tiles that some row does not wholly see),
//    takes its rows' partial maxima; the block agrees on each row's running max through shared
//    memory; P (bf16 or f16, int8's V scale folded in per key) goes to shared memory.
//  - O += P V: warp w owns d_v / NW columns (NV column tiles) for all rows; its accumulators,
//    MT x NV x 4 floats, are the block's only per-column state.
//  - int8: K fragments from 4-byte loads of key rows, V fragments from NV-byte loads, both widened
//    by byte permutes (decode_layout); K's scale multiplies each score, V's each weight.
// Template: cache type, d_k, d_v, m-tiles, warps, keys per tile, k groups, V in K's rows.
#pragma once

#include "decode_device.cuh"

namespace attn::cuda::detail {

template <storage ST, int DK_, int DV_, int MT_, int NW_, int T_, int CS_, bool VFK_, int MINB_>
struct mma_cfg {
    static constexpr storage st = ST;
    static constexpr int DK = DK_, DV = DV_, MT = MT_, NW = NW_, T = T_, CS = CS_, MINB = MINB_;
    static constexpr bool VFK = VFK_, I8 = ST == storage::int8, F16 = ST == storage::f16;
    static constexpr int NTH = NW * 32, NT = T / 8, KSTEPS = DK / 16, KS = NW / CS, SNT = NT / KS, KSW = KSTEPS / CS;
    static constexpr int OWNERS = NT < NW ? NT : NW, OWN = NT / OWNERS, NV = DV / NW / 8, M = MT * 16;
    static constexpr int EB = I8 ? 1 : 2;
    static constexpr int RSK = dl::row_stride(DK * EB), RSV = VFK ? RSK : dl::row_stride(DV * EB);
    static constexpr bool QREG = MT * KSW * 4 <= 40; // registers for Q, else shared memory
    static constexpr int PSTRIDE = (T + 8) * 2;      // bytes per row of P: 16-byte rows, ldmatrix conflict-free
    // a stage: K rows, V rows (unless VFK), K scales, V scales (int8 with V rows)
    static constexpr int K_BYTES = T * RSK, V_BYTES = VFK ? 0 : T * RSV, KS_BYTES = I8 ? T * 4 : 0;
    static constexpr int VS_BYTES = I8 && !VFK ? T * 4 : 0;
    static constexpr int STAGE = K_BYTES + V_BYTES + KS_BYTES + VS_BYTES;
    // fixed region: Q fragments (unless in registers), the k groups' partial scores, P, reductions
    static constexpr int Q_BYTES = QREG ? 0 : MT * KSTEPS * 32 * 16;
    static constexpr int SX_BYTES = CS > 1 ? CS* NT* MT * 32 * 16 : 0;
    static constexpr int P_BYTES = M * PSTRIDE;
    static constexpr int RED_BYTES = 2 * NW * M * 4 + 2 * M * 4 + 16; // maxima, sums; the combine's
    static constexpr int FIXED = Q_BYTES + SX_BYTES + P_BYTES + RED_BYTES;
    static_assert(DK % 16 == 0 && KSTEPS % CS == 0 && NW % CS == 0 && NT % KS == 0 && SNT % 2 == 0, "S tiling");
    static_assert(NT % OWNERS == 0 && (CS > 1 || OWN == SNT), "softmax ownership");
    static_assert(DV % (NW * 8) == 0 && (I8 ? (NV == 2 || NV == 4 || NV == 8 || NV == 16) : NV % 2 == 0), "PV tiling");
    static_assert(T % 16 == 0 && FIXED % 16 == 0 && STAGE % 16 == 0, "alignment");
};

/// NV bytes of a tile row at byte offset `off` as biased words (int8 V).
template <int NV>
__device__ __forceinline__ void load_v8(const std::uint8_t* base, int off, std::uint32_t (&w)[NV >= 4 ? NV / 4 : 1]) {
    if constexpr (NV == 2) {
        w[0] = dl::bias_bytes(*reinterpret_cast<const unsigned short*>(base + off));
    } else if constexpr (NV == 4) {
        w[0] = dl::bias_bytes(*reinterpret_cast<const std::uint32_t*>(base + off));
    } else if constexpr (NV == 8) {
        const uint2 x = *reinterpret_cast<const uint2*>(base + off);
        w[0] = dl::bias_bytes(x.x), w[1] = dl::bias_bytes(x.y);
    } else {
        const uint4 x = *reinterpret_cast<const uint4*>(base + off);
        w[0] = dl::bias_bytes(x.x), w[1] = dl::bias_bytes(x.y), w[2] = dl::bias_bytes(x.z), w[3] = dl::bias_bytes(x.w);
    }
}

template <class C>
__global__ void __launch_bounds__(C::NTH, C::MINB) decode_mma(const decode_params p) {
    ATTN_DECODE_SMEM(smem);
    std::uint8_t* sq = smem;
    float* sx = reinterpret_cast<float*>(smem + C::Q_BYTES);
    std::uint8_t* sp = smem + C::Q_BYTES + C::SX_BYTES;
    float* red_m = reinterpret_cast<float*>(sp + C::P_BYTES); // [NW][M]
    float* red_l = red_m + C::NW * C::M;                      // [NW][M]
    float* scratch = red_l + C::NW * C::M;                    // [M][2] + a flag, for the combine
    std::uint8_t* stages = smem + C::FIXED;

    const block_work w = locate(p, C::T);
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, gq = lane / 4, tq = lane % 4;
    const int cg = dl::warp_k_group(warp, C::CS), kg = dl::warp_key_group(warp, C::CS);
    const int R = p.heads / p.kv_heads;

    // each lane's rows (mt * 16 + gq + 8 hh): the keys each sees
    int hi[C::MT][2]; // one past each row's last key (its first: hi - window); positions are below 2^31
#pragma unroll
    for (int mt = 0; mt < C::MT; ++mt)
#pragma unroll
        for (int hh = 0; hh < 2; ++hh) {
            const int r = mt * 16 + gq + 8 * hh;
            hi[mt][hh] = 0;
            if (r < w.nrows) {
                const dl::key_range k = dl::row_keys(w.n, p.n_q, (w.row0 + r) % p.n_q, p.window, p.causal);
                hi[mt][hh] = int(k.end);
            }
        }
    // Q's A fragments, times scale x log2 e, in the cache's 16-bit type (int8: bf16), k permuted as K
    auto q_pair = [&](int ln, int mt, int ks, int reg) -> std::uint32_t {
        float v[2];
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const dl::rc e = dl::a_elem(ln, reg, h);
            const int r = mt * 16 + e.row;
            v[h] = 0.0f;
            if (r < w.nrows) {
                const int gr = w.row0 + r, head = w.g * R + gr / p.n_q, qi = gr % p.n_q;
                v[h] = p.q[((long long)(w.b * p.n_q + qi) * p.heads + head) * C::DK + dl::q_col(ks, e.col, C::I8)] *
                       p.scale_log2;
            }
        }
        return pack2<C::F16>(v[0], v[1]);
    };
    std::uint32_t qf[C::QREG ? C::MT : 1][C::QREG ? C::KSW : 1][4];
    if constexpr (C::QREG) {
#pragma unroll
        for (int mt = 0; mt < C::MT; ++mt)
#pragma unroll
            for (int k = 0; k < C::KSW; ++k)
#pragma unroll
                for (int reg = 0; reg < 4; ++reg) qf[mt][k][reg] = q_pair(lane, mt, cg * C::KSW + k, reg);
    } else {
        for (int i = threadIdx.x; i < C::MT * C::KSTEPS * 32 * 4; i += C::NTH) {
            const int reg = i % 4, ln = (i / 4) % 32, ks = (i / 128) % C::KSTEPS, mt = i / (128 * C::KSTEPS);
            reinterpret_cast<std::uint32_t*>(sq)[i] = q_pair(ln, mt, ks, reg);
        }
    }

    float m_run[C::MT][2], l_run[C::MT][2], o[C::MT][C::NV][4];
#pragma unroll
    for (int mt = 0; mt < C::MT; ++mt) {
        m_run[mt][0] = m_run[mt][1] = -INFINITY;
        l_run[mt][0] = l_run[mt][1] = 0.0f;
#pragma unroll
        for (int j = 0; j < C::NV; ++j) o[mt][j][0] = o[mt][j][1] = o[mt][j][2] = o[mt][j][3] = 0.0f;
    }

    auto dst = [&](int buf) {
        std::uint8_t* s = stages + buf * C::STAGE;
        tile_dst d;
        d.k = s;
        d.v = C::VFK ? nullptr : s + C::K_BYTES;
        d.ks = C::I8 ? reinterpret_cast<float*>(s + C::K_BYTES + C::V_BYTES) : nullptr;
        d.vs = C::VS_BYTES ? d.ks + C::T : nullptr;
        d.k_stride = C::RSK, d.v_stride = C::RSV, d.k_bytes = C::DK * C::EB, d.v_bytes = C::DV * C::EB;
        d.chunk = 16, d.elem = C::EB, d.swizzle = true;
        return d;
    };
    const int S = p.stages;
    for (int s = 0; s < S - 1; ++s) {
        if (w.tf + s < w.te) load_tile<C::NTH>(p, dst(s), w.b, w.g, w.kb + (w.tf + s) * C::T, w.ke, C::T);
        cp_async_commit();
    }
    const int cb = dl::pv_col0(warp, C::DV, C::NW); // this warp's first output column
    // tile it sits in buffer buf, tile it + S - 1 goes to buffer next (no division in the loop)
    for (int it = w.tf, buf = 0, next = S - 1; it < w.te;
         ++it, buf = buf + 1 == S ? 0 : buf + 1, next = next + 1 == S ? 0 : next + 1) {
        cp_async_wait(S - 2);
        __syncthreads(); // tile `it` landed; every warp is done with tile it - 1 (its buffer, P, red_m)
        if (it + S - 1 < w.te) load_tile<C::NTH>(p, dst(next), w.b, w.g, w.kb + (it + S - 1) * C::T, w.ke, C::T);
        cp_async_commit();
        const int t0 = w.kb + it * C::T;
        const std::uint8_t* kt = stages + buf * C::STAGE;
        const std::uint8_t* vt = C::VFK ? kt : kt + C::K_BYTES;
        const float* kst = reinterpret_cast<const float*>(kt + C::K_BYTES + C::V_BYTES);
        const float* vst = C::VFK ? kst : kst + C::T;

        // ---- S = Q K^T over this warp's keys and k-steps
        float s[C::MT][C::SNT][4];
#pragma unroll
        for (int mt = 0; mt < C::MT; ++mt)
#pragma unroll
            for (int j = 0; j < C::SNT; ++j) s[mt][j][0] = s[mt][j][1] = s[mt][j][2] = s[mt][j][3] = 0.0f;
#pragma unroll
        for (int k = 0; k < C::KSW; ++k) {
            const int ks = cg * C::KSW + k;
            std::uint32_t a[C::MT][4];
#pragma unroll
            for (int mt = 0; mt < C::MT; ++mt) {
                if constexpr (C::QREG) {
#pragma unroll
                    for (int reg = 0; reg < 4; ++reg) a[mt][reg] = qf[mt][k][reg];
                } else {
                    const uint4 x = *reinterpret_cast<const uint4*>(sq + ((mt * C::KSTEPS + ks) * 32 + lane) * 16);
                    a[mt][0] = x.x, a[mt][1] = x.y, a[mt][2] = x.z, a[mt][3] = x.w;
                }
            }
#pragma unroll
            for (int np = 0; np < C::SNT / 2; ++np) {
                const int n0 = dl::s_key0(kg, C::SNT, np);
                std::uint32_t b[4];
                if constexpr (!C::I8) {
                    const dl::rc x = dl::k_ldsm(lane, n0, ks);
                    ldmatrix_x4(b, kt + dl::chunk_offset(x.row, x.col / 8, C::RSK));
                } else {
#pragma unroll
                    for (int half = 0; half < 2; ++half) {
                        const dl::rc x = dl::k8_word(lane, n0 + 8 * half, ks);
                        const std::uint32_t wd = dl::bias_bytes(
                            *reinterpret_cast<const std::uint32_t*>(kt + dl::byte_offset(x.row, x.col, C::RSK)));
                        b[2 * half] = dl::widen_pair(wd, 0, wd, 1);
                        b[2 * half + 1] = dl::widen_pair(wd, 2, wd, 3);
                    }
                }
#pragma unroll
                for (int mt = 0; mt < C::MT; ++mt) {
                    mma16816<C::F16>(s[mt][2 * np], a[mt], b[0], b[1]);
                    mma16816<C::F16>(s[mt][2 * np + 1], a[mt], b[2], b[3]);
                }
            }
        }
        // ---- the owned n-tiles' scores (CS > 1: the k groups' partial sums added)
        float so[C::MT][C::OWN][4];
        if constexpr (C::CS == 1) {
#pragma unroll
            for (int mt = 0; mt < C::MT; ++mt)
#pragma unroll
                for (int j = 0; j < C::OWN; ++j)
#pragma unroll
                    for (int e = 0; e < 4; ++e) so[mt][j][e] = s[mt][j][e];
        } else {
#pragma unroll
            for (int mt = 0; mt < C::MT; ++mt)
#pragma unroll
                for (int j = 0; j < C::SNT; ++j)
                    *reinterpret_cast<float4*>(
                        sx + (((cg * C::NT + dl::s_key0(kg, C::SNT, 0) / 8 + j) * C::MT + mt) * 32 + lane) * 4) =
                        make_float4(s[mt][j][0], s[mt][j][1], s[mt][j][2], s[mt][j][3]);
            __syncthreads();
            if (warp < C::OWNERS) {
#pragma unroll
                for (int mt = 0; mt < C::MT; ++mt)
#pragma unroll
                    for (int j = 0; j < C::OWN; ++j) {
                        float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll
                        for (int c = 0; c < C::CS; ++c) {
                            const float4 x = *reinterpret_cast<const float4*>(
                                sx + (((c * C::NT + dl::own_key0(warp, C::OWN, j) / 8) * C::MT + mt) * 32 + lane) * 4);
                            acc.x += x.x, acc.y += x.y, acc.z += x.z, acc.w += x.w;
                        }
                        so[mt][j][0] = acc.x, so[mt][j][1] = acc.y, so[mt][j][2] = acc.z, so[mt][j][3] = acc.w;
                    }
            }
        }
        // ---- scale (int8), mask, this warp's row maxima
        const bool owner = warp < C::OWNERS, full = tile_full(w, t0, C::T);
        if (owner) {
#pragma unroll
            for (int mt = 0; mt < C::MT; ++mt) {
                float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
                for (int j = 0; j < C::OWN; ++j)
#pragma unroll
                    for (int e = 0; e < 4; ++e) {
                        const int key = dl::own_key0(warp, C::OWN, j) + dl::c_elem(lane, e).col;
                        float x = so[mt][j][e];
                        if constexpr (C::I8) x *= kst[key];
                        if (!full) {
                            const int pos = t0 + key;
                            const int h = hi[mt][e / 2];
                            if (pos >= h || (p.window > 0 && pos < h - p.window)) x = -INFINITY;
                        }
                        so[mt][j][e] = x;
                        mx[e / 2] = fmaxf(mx[e / 2], x);
                    }
#pragma unroll
                for (int hh = 0; hh < 2; ++hh) {
                    mx[hh] = fmaxf(mx[hh], __shfl_xor_sync(0xffffffffu, mx[hh], 1));
                    mx[hh] = fmaxf(mx[hh], __shfl_xor_sync(0xffffffffu, mx[hh], 2));
                    if (tq == 0) red_m[warp * C::M + mt * 16 + gq + 8 * hh] = mx[hh];
                }
            }
        }
        __syncthreads();
        // ---- the block's running max per row; weights; P to shared memory
        float corr[C::MT][2], mu[C::MT][2];
#pragma unroll
        for (int mt = 0; mt < C::MT; ++mt)
#pragma unroll
            for (int hh = 0; hh < 2; ++hh) {
                float mn = m_run[mt][hh];
                for (int u = 0; u < C::OWNERS; ++u) mn = fmaxf(mn, red_m[u * C::M + mt * 16 + gq + 8 * hh]);
                mu[mt][hh] = mn == -INFINITY ? 0.0f : mn; // a row that has seen nothing yet stays at zero weight
                corr[mt][hh] = exp2_fast(m_run[mt][hh] - mu[mt][hh]);
                m_run[mt][hh] = mn;
                l_run[mt][hh] *= corr[mt][hh];
            }
        if (owner) {
#pragma unroll
            for (int mt = 0; mt < C::MT; ++mt)
#pragma unroll
                for (int j = 0; j < C::OWN; ++j) {
                    const int n0 = dl::own_key0(warp, C::OWN, j);
                    float pw[4];
#pragma unroll
                    for (int e = 0; e < 4; ++e) {
                        pw[e] = exp2_fast(so[mt][j][e] - mu[mt][e / 2]);
                        l_run[mt][e / 2] += pw[e];
                        if constexpr (C::I8) pw[e] *= vst[n0 + dl::c_elem(lane, e).col];
                    }
#pragma unroll
                    for (int hh = 0; hh < 2; ++hh) { // elements 2hh, 2hh + 1: one row, two adjacent keys
                        const dl::rc ce = dl::c_elem(lane, 2 * hh);
                        *reinterpret_cast<std::uint32_t*>(sp + (mt * 16 + ce.row) * C::PSTRIDE + (n0 + ce.col) * 2) =
                            pack2<C::F16>(pw[2 * hh], pw[2 * hh + 1]);
                    }
                }
        }
        __syncthreads();
        // ---- O = O x corr + P V over this warp's columns
#pragma unroll
        for (int mt = 0; mt < C::MT; ++mt)
#pragma unroll
            for (int j = 0; j < C::NV; ++j)
#pragma unroll
                for (int e = 0; e < 4; ++e) o[mt][j][e] *= corr[mt][e / 2];
#pragma unroll
        for (int kk = 0; kk < C::T / 16; ++kk) {
            std::uint32_t a[C::MT][4];
#pragma unroll
            for (int mt = 0; mt < C::MT; ++mt) {
                const dl::rc x = dl::p_ldsm(lane, mt * 16, kk * 16);
                ldmatrix_x4(a[mt], sp + x.row * C::PSTRIDE + x.col * 2);
            }
            if constexpr (!C::I8) {
#pragma unroll
                for (int jp = 0; jp < C::NV / 2; ++jp) {
                    std::uint32_t b[4];
                    const dl::rc x = dl::v_ldsm(lane, kk * 16, cb + 16 * jp);
                    ldmatrix_x4_trans(b, vt + dl::chunk_offset(x.row, x.col / 8, C::RSV));
#pragma unroll
                    for (int mt = 0; mt < C::MT; ++mt) {
                        mma16816<C::F16>(o[mt][2 * jp], a[mt], b[0], b[1]);
                        mma16816<C::F16>(o[mt][2 * jp + 1], a[mt], b[2], b[3]);
                    }
                }
            } else {
                std::uint32_t wv[4][C::NV >= 4 ? C::NV / 4 : 1];
#pragma unroll
                for (int i = 0; i < 4; ++i)
                    load_v8<C::NV>(vt, dl::byte_offset(dl::v8_key(lane, kk * 16, i), cb + C::NV * gq, C::RSV), wv[i]);
#pragma unroll
                for (int j = 0; j < C::NV; ++j) {
                    const std::uint32_t b0 = dl::widen_pair(wv[0][j / 4], j % 4, wv[1][j / 4], j % 4);
                    const std::uint32_t b1 = dl::widen_pair(wv[2][j / 4], j % 4, wv[3][j / 4], j % 4);
#pragma unroll
                    for (int mt = 0; mt < C::MT; ++mt) mma16816<false>(o[mt][j], a[mt], b0, b1);
                }
            }
        }
    }
    cp_async_wait(0);

    // ---- the chunk's rows: l summed over lanes and warps, then the output or the partial
#pragma unroll
    for (int mt = 0; mt < C::MT; ++mt)
#pragma unroll
        for (int hh = 0; hh < 2; ++hh) {
            float l = l_run[mt][hh];
            l += __shfl_xor_sync(0xffffffffu, l, 1);
            l += __shfl_xor_sync(0xffffffffu, l, 2);
            if (tq == 0) red_l[warp * C::M + mt * 16 + gq + 8 * hh] = l;
        }
    __syncthreads();
    const bool split = p.splits > 1;
#pragma unroll
    for (int mt = 0; mt < C::MT; ++mt)
#pragma unroll
        for (int hh = 0; hh < 2; ++hh) {
            const int r = mt * 16 + gq + 8 * hh;
            if (r >= w.nrows) continue;
            float l = 0.0f;
            for (int u = 0; u < C::NW; ++u) l += red_l[u * C::M + r];
            const float f = split ? 1.0f : (l > 0.0f ? 1.0f / l : 0.0f);
            float* dst_row = split ? part_row(p, w, r) : out_row(p, w, r);
#pragma unroll
            for (int j = 0; j < C::NV; ++j)
#pragma unroll
                for (int e2 = 0; e2 < 2; ++e2) {
                    const int e = 2 * hh + e2, c = dl::c_elem(lane, e).col;
                    dst_row[C::I8 ? dl::v8_col(cb, C::NV, j, c) : dl::v16_col(cb, j, c)] = o[mt][j][e] * f;
                }
            if (split && warp == 0 && tq == 0) {
                float* ml = part_ml_row(p, w, r);
                ml[0] = m_run[mt][hh];
                ml[1] = l;
            }
        }
    if (split) combine_if_last<C::NTH>(p, w, scratch, reinterpret_cast<float*>(stages));
}

} // namespace attn::cuda::detail
