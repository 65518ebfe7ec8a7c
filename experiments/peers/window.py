"""A sliding window as the peers are given it (attnbench's convention: the query at position p sees
the W keys p-W+1 .. p, bottom-right aligned as its causal mask). Neither ONNX's Attention nor
torch's scaled_dot_product_attention has a window, so the core gets it as a constant boolean
mask -- the operator still scores every pair -- and a decode step gets the cache's last W rows, as
a rolling buffer holds them."""
import numpy as np


def kv_rows(case):
    """The key/value rows a peer is given: a decode step under a window reads its last W tokens;
    every other case every row."""
    if case["mode"] == "decode" and case.get("window", 0):
        return min(case["n_kv"], case["window"])
    return case["n_kv"]


def mask(case):
    """The core's window as a boolean [n_q, n_kv] (True: the pair takes part), or None without one
    (and in decode, whose rows kv_rows already trims). Row i's last key is e = i + n_kv - n_q."""
    w = case.get("window", 0)
    if not w or case["mode"] == "decode":
        return None
    n_q, n_kv = case["n_q"], case["n_kv"]
    e = np.arange(n_q)[:, None] + (n_kv - n_q)
    j = np.arange(n_kv)[None, :]
    return (j <= e) & (j > e - w)
