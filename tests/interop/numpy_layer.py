"""An independent NumPy implementation of the attention layer, to check `attnbench run`.

usage: numpy_layer.py WEIGHTS_DIR X.npy Y.npy --heads H [--kv-heads G] [--kv-input XKV.npy]
                      [--causal] [--tol T] [--torch]

Reads the same PyTorch-named .npy weights, computes y in float64 with einsum, and compares.
With --torch it also runs PyTorch's nn.MultiheadAttention on the same weights (MHA only) and
exits 77 (skipped) when torch is not installed.
"""
import argparse
import os
import sys

import numpy as np


def load_weights(d, heads, kv_heads, d_model):
    f = lambda n: os.path.join(d, n)
    if os.path.exists(f("in_proj_weight.npy")):
        wq, wk, wv = np.split(np.load(f("in_proj_weight.npy")).astype(np.float64), 3)
    else:
        wq, wk, wv = (np.load(f(n)).astype(np.float64) for n in ("q_proj_weight.npy", "k_proj_weight.npy", "v_proj_weight.npy"))
    wo = np.load(f("out_proj.weight.npy")).astype(np.float64)
    if os.path.exists(f("in_proj_bias.npy")):
        b = np.load(f("in_proj_bias.npy")).astype(np.float64)
        bq, bk, bv = b[: wq.shape[0]], b[wq.shape[0] : wq.shape[0] + wk.shape[0]], b[wq.shape[0] + wk.shape[0] :]
        bo = np.load(f("out_proj.bias.npy")).astype(np.float64)
    else:
        bq, bk, bv, bo = np.zeros(wq.shape[0]), np.zeros(wk.shape[0]), np.zeros(wv.shape[0]), np.zeros(d_model)
    return wq, wk, wv, wo, bq, bk, bv, bo


def layer(x, xkv, w, heads, kv_heads, causal):
    wq, wk, wv, wo, bq, bk, bv, bo = w
    B, nq, _ = x.shape
    nkv = xkv.shape[1]
    dh = wq.shape[0] // heads
    q = (x @ wq.T + bq).reshape(B, nq, heads, dh).transpose(0, 2, 1, 3)
    k = (xkv @ wk.T + bk).reshape(B, nkv, kv_heads, dh).transpose(0, 2, 1, 3)
    v = (xkv @ wv.T + bv).reshape(B, nkv, kv_heads, dh).transpose(0, 2, 1, 3)
    k = np.repeat(k, heads // kv_heads, axis=1)  # query head h reads kv head h // (H/G)
    v = np.repeat(v, heads // kv_heads, axis=1)
    s = np.einsum("bhid,bhjd->bhij", q, k) / np.sqrt(dh)
    visible = np.ones((nq, nkv), dtype=bool)
    if causal:  # bottom-right aligned
        visible = np.arange(nkv)[None, :] <= np.arange(nq)[:, None] + (nkv - nq)
    s = np.where(visible, s, -np.inf)
    m = s.max(axis=-1, keepdims=True)
    e = np.where(visible, np.exp(s - np.where(np.isfinite(m), m, 0.0)), 0.0)
    z = e.sum(axis=-1, keepdims=True)
    p = np.divide(e, z, out=np.zeros_like(e), where=z > 0)
    ctx = np.einsum("bhij,bhjd->bhid", p, v).transpose(0, 2, 1, 3).reshape(B, nq, heads * dh)
    return ctx @ wo.T + bo


def torch_layer(x, xkv, wdir, heads, causal):
    import torch

    x_t, kv_t = torch.from_numpy(x), torch.from_numpy(xkv)
    d_model = x.shape[-1]
    w = load_weights(wdir, heads, heads, d_model)
    has_bias = os.path.exists(os.path.join(wdir, "in_proj_bias.npy"))
    mha = torch.nn.MultiheadAttention(d_model, heads, bias=has_bias, batch_first=True).double().eval()
    with torch.no_grad():
        mha.in_proj_weight.copy_(torch.from_numpy(np.concatenate(w[:3])))
        mha.out_proj.weight.copy_(torch.from_numpy(w[3]))
        if has_bias:
            mha.in_proj_bias.copy_(torch.from_numpy(np.concatenate(w[4:7])))
            mha.out_proj.bias.copy_(torch.from_numpy(w[7]))
        mask = None
        if causal:
            nq, nkv = x.shape[1], xkv.shape[1]
            mask = torch.from_numpy(~(np.arange(nkv)[None, :] <= np.arange(nq)[:, None] + (nkv - nq)))
        y, _ = mha(x_t, kv_t, kv_t, need_weights=False, attn_mask=mask)
    return y.numpy()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("weights")
    ap.add_argument("x")
    ap.add_argument("y")
    ap.add_argument("--heads", type=int, required=True)
    ap.add_argument("--kv-heads", type=int)
    ap.add_argument("--kv-input")
    ap.add_argument("--causal", action="store_true")
    ap.add_argument("--tol", type=float, default=1e-12)
    ap.add_argument("--torch", action="store_true")
    a = ap.parse_args()
    x = np.load(a.x).astype(np.float64)
    xkv = np.load(a.kv_input).astype(np.float64) if a.kv_input else x
    y = np.load(a.y).astype(np.float64)
    if x.ndim == 2:
        x, xkv, y = x[None], xkv[None], y[None]
    g = a.kv_heads or a.heads
    if a.torch:
        try:
            import torch  # noqa: F401
        except ImportError:
            print("torch is not installed: skipped")
            return 77
        expected = torch_layer(x, xkv, a.weights, a.heads, a.causal)
        who = "PyTorch nn.MultiheadAttention"
    else:
        expected = layer(x, xkv, load_weights(a.weights, a.heads, g, x.shape[-1]), a.heads, g, a.causal)
        who = "NumPy einsum reference"
    err = float(np.max(np.abs(y - expected)))
    scale = float(np.max(np.abs(expected)))
    print(f"max |attnbench - {who}| = {err:.3e} (max |y| = {scale:.3e}, tolerance {a.tol:.1e})")
    return 0 if err <= a.tol * max(scale, 1.0) else 1


if __name__ == "__main__":
    sys.exit(main())
