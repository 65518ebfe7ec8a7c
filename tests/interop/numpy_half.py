"""`attnbench run --precision bf16|f16` against an independent NumPy implementation.

usage: numpy_half.py ATTNBENCH WORKDIR --precision bf16|f16 --file-dtype float16|float32|float64
                     --d-model D --heads H [--kv-heads G] [--seq N] [--batch B] [--causal]
                     [--variant V] [--threads T]

`attnbench init` makes a layer (float64 weights and input); this script writes them as
--file-dtype .npy files, runs `attnbench run --precision P` and `--precision f32` on those files,
and checks:
  1. the output holds numbers of the format (a float32 file of widened bf16/f16 values);
  2. it matches a float64 NumPy layer computed on the inputs and weights rounded to the format by
     this script's own rounding (bf16: round to nearest even on the bit pattern; f16: NumPy's
     float16 cast), within a bound derived below from the format's unit roundoff;
  3. it differs from the f32 run by more than fp32 arithmetic could explain (rounding happened);
  4. on an identity layer, the output is this script's rounding of the input, bit for bit.
"""
import argparse
import os
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from numpy_layer import load_weights  # noqa: E402

U = {"bf16": 2.0**-8, "f16": 2.0**-11}  # unit roundoff: 8 and 11 significant bits
U32 = 2.0**-24


def round_bf16(a):
    """a rounded to bf16 (8 significant bits), to nearest with ties to even, as float64.

    On the IEEE bit pattern: add half an ulp of the kept part minus one, plus the kept part's
    lowest bit (so an exact tie rounds to even), then clear the dropped bits. float32 words drop 16
    bits; float64 words drop 45 (52 - 7) in one step, so a float64 value is rounded once, not via
    float32. Valid for finite values in bf16's normal range or zero (asserted)."""
    a = np.asarray(a)
    if a.dtype == np.float16:
        a = a.astype(np.float32)  # exact
    tiny = np.abs(a[a != 0])
    assert tiny.size == 0 or tiny.min() >= 2.0**-126, "a value below bf16's normal range"
    if a.dtype == np.float32:
        bits = a.view(np.uint32).astype(np.uint64)
        drop = 16
    else:
        bits = a.astype(np.float64).view(np.uint64)
        drop = 45
    one = np.uint64(1)
    half = (one << np.uint64(drop - 1)) - one
    lsb = (bits >> np.uint64(drop)) & one
    kept = (bits + half + lsb) & ~((one << np.uint64(drop)) - one)
    if a.dtype == np.float32:
        return kept.astype(np.uint32).view(np.float32).astype(np.float64)
    return kept.view(np.float64)


def round_to(a, precision):
    if precision == "bf16":
        return round_bf16(a)
    return np.asarray(a).astype(np.float16).astype(np.float64)  # NumPy's own round-to-nearest-even


def bounded_layer(x, w, heads, kv_heads, causal, u):
    """The layer in float64 on x and w (already rounded to the format), and a per-element bound on
    |attnbench - layer| for a kernel that stores the projected Q, K, V, the concatenated context and
    the output in the format (unit roundoff u) and accumulates in fp32 (unit roundoff U32).

    First-order forward error analysis, stage by stage; |.| element-wise, n the length of each sum:
      projection  q = x Wq^T + bq:  |dq| <= u|q| + n U32 (|x||Wq|^T + |bq|)   (fp32 sum, then rounded)
                  likewise k, v
      scores      s = q.k / sqrt(d):  |ds| <= (|dq|.|k| + |q|.|dk| + d U32 |q|.|k|) / sqrt(d)
      softmax     p = exp(s - m) / z: |dp_j| <= p_j (|ds_j| + sum_l p_l |ds_l|) + 4 U32 p_j
                  (dp_j = p_j (ds_j - sum_l p_l ds_l) to first order; fp32 exp, sum and divide)
      context     c = sum_j p_j v_j:  |dc| <= sum_j (|dp_j||v_j| + p_j |dv_j|) + n U32 sum_j p_j|v_j|,
                  then stored: + u|c|
      output      y = c Wo^T + bo:    |dy| <= |dc||Wo|^T + n U32 (|c||Wo|^T + |bo|), then stored: + u|y|
    The bound is twice the first-order sum: second-order terms are O(u^2) relative, under u/100 here."""
    wq, wk, wv, wo, bq, bk, bv, bo = w
    B, n, d_model = x.shape
    dh = wq.shape[0] // heads
    rep = heads // kv_heads

    def proj(a, W, b):
        y = a @ W.T + b
        e = u * np.abs(y) + d_model * U32 * (np.abs(a) @ np.abs(W).T + np.abs(b))
        return y, e

    def split(t, h):
        return t.reshape(B, n, h, dh).transpose(0, 2, 1, 3)

    q, eq = proj(x, wq, bq)
    k, ek = proj(x, wk, bk)
    v, ev = proj(x, wv, bv)
    q, eq = split(q, heads), split(eq, heads)
    k, ek, v, ev = (np.repeat(split(t, kv_heads), rep, axis=1) for t in (k, ek, v, ev))
    qk = lambda a, b: np.einsum("bhid,bhjd->bhij", a, b)
    s = qk(q, k) / np.sqrt(dh)
    ds = (qk(eq, np.abs(k)) + qk(np.abs(q), ek) + dh * U32 * qk(np.abs(q), np.abs(k))) / np.sqrt(dh)
    visible = np.ones((n, n), dtype=bool)
    if causal:
        visible = np.arange(n)[None, :] <= np.arange(n)[:, None]
    s = np.where(visible, s, -np.inf)
    e = np.where(visible, np.exp(s - s.max(axis=-1, keepdims=True)), 0.0)
    p = e / e.sum(axis=-1, keepdims=True)
    ds = np.where(visible, ds, 0.0)
    dp = p * (ds + (p * ds).sum(axis=-1, keepdims=True)) + 4 * U32 * p
    pv = lambda a, b: np.einsum("bhij,bhjd->bhid", a, b)
    c = pv(p, v)
    dc = pv(dp, np.abs(v)) + pv(p, ev) + n * U32 * pv(p, np.abs(v))
    dc += u * np.abs(c)
    merge = lambda t: t.transpose(0, 2, 1, 3).reshape(B, n, heads * dh)
    c, dc = merge(c), merge(dc)
    y = c @ wo.T + bo
    dy = dc @ np.abs(wo).T + heads * dh * U32 * (np.abs(c) @ np.abs(wo).T + np.abs(bo)) + u * np.abs(y)
    return y, 2.0 * dy


def identity_layer(a, run):
    """4. The input's rounding itself, exactly: with Wq = Wk = 0, Wv = Wo = I, no bias and one token
    per sequence, the softmax weight is exactly 1 and y is the stored x, so y must equal this
    script's rounding of x bit for bit. x holds random values and, at several scales and signs,
    exact ties (which go to even), values one file-ulp above and below a tie, and values that are
    already numbers of the format."""
    d, heads = 32, 4
    kept = 8 if a.precision == "bf16" else 11  # significant bits of the format
    file_bits = {"float16": 11, "float32": 24, "float64": 53}[a.file_dtype]
    special = []
    if file_bits > kept:
        tie, eps = 2.0 ** -kept, 2.0 ** -(file_bits - 1)
        for odd in (1, 3):  # 1 + tie rounds down to 1 (even), 1 + 3 tie up to 1 + 4 tie
            special += [1 + odd * tie, 1 + odd * tie + eps, 1 + odd * tie - eps]
    special += [1.0, 1 + 2 * 2.0 ** -kept, 0.0]
    scaled = [m * sign * v for v in special for m in (1.0, 0.5, 2.0 ** -10, 64.0) for sign in (1, -1)]
    rng = np.random.default_rng(7)
    values = np.concatenate([scaled, rng.uniform(-2, 2, 8 * d - len(scaled) % d)]).astype(a.file_dtype)
    assert np.all(values.astype(np.float64)[: len(scaled)] == np.array(scaled)), "a special value is not exact"
    x = values.reshape(-1, 1, d)
    folder = os.path.join(a.work, "identity")
    os.makedirs(folder, exist_ok=True)
    zero, eye = np.zeros((d, d), a.file_dtype), np.eye(d, dtype=a.file_dtype)
    for name, m in (("q_proj_weight", zero), ("k_proj_weight", zero), ("v_proj_weight", eye), ("out_proj.weight", eye)):
        np.save(os.path.join(folder, name + ".npy"), m)
    np.save(os.path.join(folder, "x.npy"), x)
    y_file = os.path.join(folder, "y.npy")
    run("run", "--variant", a.variant, "--threads", str(a.threads), "--weights", folder, "--input",
        os.path.join(folder, "x.npy"), "--precision", a.precision, "--heads", str(heads), "--out", y_file)
    return np.array_equal(np.load(y_file).astype(np.float64), round_to(x, a.precision))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("attnbench")
    ap.add_argument("work")
    ap.add_argument("--precision", choices=["bf16", "f16"], required=True)
    ap.add_argument("--file-dtype", choices=["float16", "float32", "float64"], required=True)
    ap.add_argument("--d-model", type=int, required=True)
    ap.add_argument("--heads", type=int, required=True)
    ap.add_argument("--kv-heads", type=int)
    ap.add_argument("--seq", type=int, default=8)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--causal", action="store_true")
    ap.add_argument("--variant", default="naive")
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args()
    g = a.kv_heads or a.heads
    shape = ["--heads", str(a.heads), "--kv-heads", str(g)]
    run = lambda *args: subprocess.run([a.attnbench, *args], check=True, stdout=subprocess.DEVNULL)
    run("init", "--d-model", str(a.d_model), "--seq", str(a.seq), "--batch", str(a.batch), "--bias", *shape,
        "--out", a.work)

    # the inputs as files of the chosen dtype
    files = os.path.join(a.work, a.file_dtype)
    os.makedirs(files, exist_ok=True)
    src = os.path.join(a.work, "weights")
    for name in os.listdir(src):
        np.save(os.path.join(files, name), np.load(os.path.join(src, name)).astype(a.file_dtype))
    x_file = os.path.join(a.work, f"x_{a.file_dtype}.npy")
    np.save(x_file, np.load(os.path.join(a.work, "x.npy")).astype(a.file_dtype))

    outs = {}
    for prec in (a.precision, "f32"):
        outs[prec] = os.path.join(a.work, f"y_{prec}.npy")
        extra = ["--causal"] if a.causal else []
        run("run", "--variant", a.variant, "--threads", str(a.threads), "--weights", files, "--input", x_file,
            "--precision", prec, "--out", outs[prec], *shape, *extra)
    y = np.load(outs[a.precision])
    y32 = np.load(outs["f32"]).astype(np.float64)
    assert y.dtype == np.float32, f"output dtype {y.dtype}, expected float32"
    y = y.astype(np.float64)

    # 1. the output's values are numbers of the format
    representable = np.array_equal(round_to(y, a.precision), y)
    # 2. against the float64 layer on the rounded inputs, within the derived bound
    x = round_to(np.load(x_file), a.precision)
    w = [round_to(t, a.precision) for t in load_weights(files, a.heads, g, a.d_model)]
    ref, bound = bounded_layer(x, w, a.heads, g, a.causal, U[a.precision])
    ratio = float(np.max(np.abs(y - ref) / bound))
    # 3. the f32 run of the same files is a different answer: its own error against the float64
    # layer on the unrounded inputs is fp32-sized, and the two runs differ by far more than that
    x64 = np.load(x_file).astype(np.float64)
    w64 = load_weights(files, a.heads, g, a.d_model)
    ref64, _ = bounded_layer(x64, w64, a.heads, g, a.causal, U32)
    f32_err = float(np.max(np.abs(y32 - ref64)))
    diff = float(np.max(np.abs(y - y32)))
    exact = identity_layer(a, run)
    print(f"{a.precision} from {a.file_dtype} files, {a.variant}: output in {a.precision}: {representable}; "
          f"max |y - ref| / bound = {ratio:.3f}; max |y - y_f32| = {diff:.3e}, "
          f"f32 run's own max error = {f32_err:.3e}; identity layer y == rounded x exactly: {exact}")
    ok = representable and ratio <= 1.0 and diff > 100 * f32_err and exact
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
