"""PyTorch's attention as attnbench peers (run by harness.py): torch-sdpa, the fused
scaled_dot_product_attention on [B, H, N, d] tensors (core; causal; G < H through enable_gqa;
decode: one query row over the cache; fp32, bf16 or f16 tensors as the case's precision says),
and torch-mha, nn.MultiheadAttention in eval mode under inference_mode with need_weights=False (the layer; its fast path needs self-attention, which is
what the harness's layer inputs are). Each records torch's version, its intra-op thread count
and the ATen kernel that actually ran, read from the profiler on one call."""
import os
import warnings

import numpy as np

os.environ.setdefault("KINETO_LOG_LEVEL", "5")  # the profiler's GPU probe is noise on a CPU run
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402


def kernel_of(call, prefixes):
    """The ATen operators matching `prefixes` that one call ran (the profiler's names)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
            call()
    names = sorted({e.key for e in prof.key_averages() if any(e.key.startswith(p) for p in prefixes)})
    return ", ".join(names) or "unknown"


# the case's precision -> torch's dtype: bf16 and f16 inputs arrive rounded to the format (held as
# float32, exactly), so the cast is exact and the peer sees the numbers it is judged on
DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16}


class Peer:
    def __init__(self, call, output, info):
        self.call, self.output, self.info = call, output, info


def make_sdpa(case, inputs, threads):
    torch.set_num_threads(threads)
    H, G = case["heads"], case["kv_heads"]
    n_q, n_kv = case["n_q"], case["n_kv"]
    causal = bool(case["causal"]) and case["mode"] != "decode"  # decode: the new token sees every key
    if causal and n_q != n_kv:
        raise RuntimeError("torch-sdpa's is_causal is top-left aligned; attnbench's causal is bottom-right (n_q != n_kv)")
    dtype = DTYPES[case.get("precision", "f32")]
    # [B, N, H, d] -> [B, H, N, d], contiguous, in the case's precision, outside the timed call
    q, k, v = (torch.from_numpy(inputs[n]).transpose(1, 2).to(dtype).contiguous() for n in ("q", "k", "v"))
    gqa = G != H
    state = {}

    def call():
        with torch.inference_mode():
            state["y"] = F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=gqa)

    def output():
        return state["y"].transpose(1, 2).float().contiguous().numpy()

    info = {"library": "torch", "version": torch.__version__, "threads": torch.get_num_threads(),
            "op": "torch.nn.functional.scaled_dot_product_attention" + (" (enable_gqa)" if gqa else "") +
            ("" if dtype == torch.float32 else f" on {str(dtype).split('.')[-1]} tensors"),
            "kernel": kernel_of(call, ("aten::_scaled_dot_product", "aten::_flash_attention", "aten::bmm",
                                       "aten::matmul"))}
    return Peer(call, output, info)


def make_mha(case, inputs, threads):
    torch.set_num_threads(threads)
    H, G, dm = case["heads"], case["kv_heads"], case["d_model"]
    if G != H:
        raise RuntimeError(f"torch-mha is multi-head attention only (G = H); this case has G = {G}, H = {H}")
    wdir = inputs["weights"]
    w = {n: np.load(f"{wdir}/{n}.npy") for n in ("q_proj_weight", "k_proj_weight", "v_proj_weight", "out_proj.weight")}
    mha = torch.nn.MultiheadAttention(dm, H, bias=False, batch_first=True).eval()
    with torch.no_grad():
        mha.in_proj_weight.copy_(torch.from_numpy(np.concatenate([w["q_proj_weight"], w["k_proj_weight"],
                                                                  w["v_proj_weight"]]).astype(np.float32)))
        mha.out_proj.weight.copy_(torch.from_numpy(w["out_proj.weight"].astype(np.float32)))
    x = torch.from_numpy(inputs["x"])
    n = x.shape[1]
    mask = torch.nn.Transformer.generate_square_subsequent_mask(n) if case["causal"] else None
    state = {}

    def call():
        with torch.inference_mode():
            state["y"] = mha(x, x, x, need_weights=False, attn_mask=mask, is_causal=bool(case["causal"]))[0]

    def output():
        return state["y"].numpy().astype(np.float32)

    info = {"library": "torch", "version": torch.__version__, "threads": torch.get_num_threads(),
            "op": "torch.nn.MultiheadAttention (eval, need_weights=False)",
            "kernel": kernel_of(call, ("aten::_native_multi_head_attention", "aten::_scaled_dot_product",
                                       "aten::_flash_attention", "aten::bmm", "aten::baddbmm"))}
    return Peer(call, output, info)
