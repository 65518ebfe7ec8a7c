"""An independent NumPy implementation of Multi-head Latent Attention, to check `attnbench run
--family mla` (both forms) on DeepSeek-named .npy weights.

usage: numpy_mla.py WEIGHTS_DIR X.npy Y.npy --heads H --kv-lora-rank C --qk-nope-head-dim DN
                    --qk-rope-head-dim DR --v-head-dim DV [--causal] [--tol T]

Follows DeepSeek-V3's reference code's semantics (inference/model.py, class MLA) with NumPy's own
operations: the rotary embedding as a complex multiplication of consecutive pairs, RMSNorm with eps
1e-6, softmax scale 1/sqrt(DN + DR), no YaRN. It computes the naive form (keys and values
decompressed per head) and the absorbed form (W^UK folded into the query, the latent as keys and
values) in float64, checks that the two agree, and compares attnbench's output with them.
"""
import argparse
import os
import sys

import numpy as np


def rms_norm(x, w, eps=1e-6):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def rotate(x, pos):
    """x [..., N, ..., DR] with the token axis at position 1; pairs (2i, 2i+1) as complex numbers."""
    dr = x.shape[-1]
    freqs = 10000.0 ** (-np.arange(0, dr, 2, dtype=np.float64) / dr)
    angle = np.outer(pos, freqs)  # [N, DR/2]
    z = x[..., 0::2] + 1j * x[..., 1::2]
    shape = [1] * z.ndim
    shape[1], shape[-1] = angle.shape
    z = z * np.exp(1j * angle).reshape(shape)
    out = np.empty_like(x)
    out[..., 0::2], out[..., 1::2] = z.real, z.imag
    return out


def mla(x, wd, heads, c, dn, dr, dv, causal):
    ld = lambda n: np.load(os.path.join(wd, n + ".npy")).astype(np.float64)
    B, N, _ = x.shape
    if os.path.exists(os.path.join(wd, "wq.weight.npy")):
        q = x @ ld("wq.weight").T
    else:
        q = rms_norm(x @ ld("wq_a.weight").T, ld("q_norm.weight")) @ ld("wq_b.weight").T
    q = q.reshape(B, N, heads, dn + dr)
    q_nope, q_pe = q[..., :dn], rotate(q[..., dn:], np.arange(N))
    kv = x @ ld("wkv_a.weight").T
    latent, k_pe = rms_norm(kv[..., :c], ld("kv_norm.weight")), rotate(kv[..., c:], np.arange(N))
    wkv_b = ld("wkv_b.weight").reshape(heads, dn + dv, c)
    mask = np.ones((N, N), dtype=bool)
    if causal:
        mask = np.tril(mask)
    scale = 1.0 / np.sqrt(dn + dr)

    def softmax(s):
        s = np.where(mask, s, -np.inf)
        e = np.exp(s - s.max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True)

    # naive: decompress per head
    kvb = np.einsum("btc,hdc->bthd", latent, wkv_b)
    k = np.concatenate([kvb[..., :dn], np.broadcast_to(k_pe[:, :, None, :], (B, N, heads, dr))], axis=-1)
    v = kvb[..., dn:]
    p = softmax(np.einsum("bshd,bthd->bsht", np.concatenate([q_nope, q_pe], -1), k).transpose(0, 2, 1, 3) * scale)
    naive = np.einsum("bhst,bthd->bshd", p, v).reshape(B, N, heads * dv)
    # absorbed: the query in the latent, the latent as keys and values
    qa = np.einsum("bshd,hdc->bshc", q_nope, wkv_b[:, :dn])
    s = np.einsum("bshc,btc->bhst", qa, latent) + np.einsum("bshr,btr->bhst", q_pe, k_pe)
    ctx = np.einsum("bhst,btc->bshc", softmax(s * scale), latent)
    absorbed = np.einsum("bshc,hdc->bshd", ctx, wkv_b[:, dn:]).reshape(B, N, heads * dv)
    wo = ld("wo.weight")
    return naive @ wo.T, absorbed @ wo.T


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("weights")
    ap.add_argument("x")
    ap.add_argument("y")
    ap.add_argument("--heads", type=int, required=True)
    ap.add_argument("--kv-lora-rank", type=int, required=True)
    ap.add_argument("--qk-nope-head-dim", type=int, required=True)
    ap.add_argument("--qk-rope-head-dim", type=int, required=True)
    ap.add_argument("--v-head-dim", type=int, required=True)
    ap.add_argument("--causal", action="store_true")
    ap.add_argument("--tol", type=float, default=1e-12)
    a = ap.parse_args()
    x = np.load(a.x).astype(np.float64)
    y = np.load(a.y).astype(np.float64)
    if x.ndim == 2:
        x, y = x[None], y[None]
    naive, absorbed = mla(x, a.weights, a.heads, a.kv_lora_rank, a.qk_nope_head_dim, a.qk_rope_head_dim,
                          a.v_head_dim, a.causal)
    scale = float(np.max(np.abs(naive)))
    forms = float(np.max(np.abs(naive - absorbed)))
    err = float(np.max(np.abs(y - naive)))
    print(f"max |attnbench - NumPy MLA (naive)| = {err:.3e}; NumPy's naive vs absorbed forms {forms:.3e} "
          f"(max |y| = {scale:.3e}, tolerance {a.tol:.1e})")
    ok = err <= a.tol * max(scale, 1.0) and forms <= 1e-12 * max(scale, 1.0)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
