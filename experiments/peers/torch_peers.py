"""PyTorch's attention as attnbench peers (run by harness.py): torch-sdpa, the fused
scaled_dot_product_attention on [B, H, N, d] tensors (core; causal; G < H through enable_gqa;
decode: one query row over the cache; fp32, bf16 or f16 tensors as the case's precision says; a
sliding window as window.py gives it: a boolean attn_mask on the core, the last W rows in decode),
torch-mha, nn.MultiheadAttention in eval mode under inference_mode with need_weights=False (the
layer; its fast path needs self-attention, which is what the harness's layer inputs are), and
torch-mla, Multi-head Latent Attention's layer in the case's form, written with torch ops the way
DeepSeek-V3's reference inference code writes it, on the CPU or on CUDA as the case's device says.
Each records torch's version, its intra-op thread count and the ATen kernel that actually ran
(on CUDA also the GPU kernels), read from the profiler on one call. The CUDA-only peers are
torch_cuda.py's; device_of and cuda_missing, shared with them, say in one line why a CUDA case
cannot run here."""
import os
import warnings

import numpy as np

os.environ.setdefault("KINETO_LOG_LEVEL", "5")  # the profiler's GPU probe is noise on a CPU run
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from window import kv_rows, mask as window_of  # noqa: E402


def cuda_missing():
    """Why a CUDA case cannot run here, in one line, or None when a CUDA device is there."""
    if torch.version.cuda is None:
        return f"no CUDA device: torch {torch.__version__} is a CPU-only build"
    with warnings.catch_warnings():  # a CUDA build without a driver warns as it answers
        warnings.simplefilter("ignore")
        if not torch.cuda.is_available():
            return (f"no CUDA device: torch {torch.__version__} (CUDA {torch.version.cuda}) finds none "
                    "(torch.cuda.is_available() is False)")
    return None


def device_of(case, provider):
    """The torch device a case runs on; a CUDA case where there is none fails in cuda_missing's line."""
    if case.get("device", "cpu") != "cuda":
        return torch.device("cpu")
    why = cuda_missing()
    if why:
        raise RuntimeError(f"{provider}: {why}")
    return torch.device("cuda")


def short_kernel(name):
    """A GPU kernel's name without its return type, template arguments and parameters
    ("void pytorch_flash::flash_fwd_kernel<Traits<128, ...>, false>(Params)" ->
    "pytorch_flash::flash_fwd_kernel<>")."""
    anon = "(anonymous namespace)"
    out, depth, i = [], 0, 0
    while i < len(name):
        if name.startswith(anon, i):
            out.append(anon if depth == 0 else "")
            i += len(anon)
            continue
        ch = name[i]
        if ch == "(" and depth == 0:
            break
        if ch == "<":
            out.append("<>" if depth == 0 else "")
            depth += 1
        elif ch == ">":
            depth = max(depth - 1, 0)
        elif depth == 0:
            out.append(ch)
        i += 1
    s = "".join(out).strip()
    return s[5:] if s.startswith("void ") else s


def kernel_of(call, prefixes, device=torch.device("cpu")):
    """The ATen operators matching `prefixes` that one call ran (the profiler's names); on CUDA
    also the GPU kernels it launched (short_kernel's names, memory copies and sets left out)."""
    acts = [torch.profiler.ProfilerActivity.CPU]
    if device.type == "cuda":
        acts.append(torch.profiler.ProfilerActivity.CUDA)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with torch.profiler.profile(activities=acts) as prof:
            call()
            if device.type == "cuda":
                torch.cuda.synchronize()
    names = sorted({e.key for e in prof.key_averages() if any(e.key.startswith(p) for p in prefixes)})
    text = ", ".join(names) or "unknown"
    if device.type == "cuda":
        gpu = [short_kernel(e.name) for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA
               and not e.name.startswith(("Memcpy", "Memset"))]
        text += "; GPU kernels: " + (", ".join(dict.fromkeys(gpu)) or "none named by the profiler")
    return text


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
    # a window (window.py): the core's as a boolean attn_mask, which replaces is_causal; decode's as
    # the cache's last W rows
    window_mask = window_of(case)
    causal = bool(case["causal"]) and case["mode"] != "decode" and window_mask is None  # decode: every key
    if causal and n_q != n_kv:
        raise RuntimeError("torch-sdpa's is_causal is top-left aligned; attnbench's causal is bottom-right (n_q != n_kv)")
    dtype = DTYPES[case.get("precision", "f32")]
    rows = {"q": n_q, "k": kv_rows(case), "v": kv_rows(case)}
    # [B, N, H, d] -> [B, H, N, d], contiguous, in the case's precision, outside the timed call
    q, k, v = (torch.from_numpy(inputs[n][:, -rows[n]:]).transpose(1, 2).to(dtype).contiguous() for n in ("q", "k", "v"))
    mask = None if window_mask is None else torch.from_numpy(window_mask)
    gqa = G != H
    state = {}

    def call():
        with torch.inference_mode():
            state["y"] = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal, enable_gqa=gqa)

    def output():
        return state["y"].transpose(1, 2).float().contiguous().numpy()

    info = {"library": "torch", "version": torch.__version__, "threads": torch.get_num_threads(),
            "op": "torch.nn.functional.scaled_dot_product_attention" + (" (enable_gqa)" if gqa else "") +
            ("" if dtype == torch.float32 else f" on {str(dtype).split('.')[-1]} tensors") +
            ("" if mask is None else f" with the window as a boolean attn_mask [{n_q}, {n_kv}] (every pair scored)") +
            (f" over the cache's last {rows['k']} rows" if rows["k"] < n_kv else ""),
            "kernel": kernel_of(call, ("aten::_scaled_dot_product", "aten::_flash_attention", "aten::bmm",
                                       "aten::matmul"))}
    return Peer(call, output, info)


def make_mha(case, inputs, threads):
    torch.set_num_threads(threads)
    H, G, dm = case["heads"], case["kv_heads"], case["d_model"]
    if case.get("family") == "mla":
        raise RuntimeError("torch-mha is multi-head attention's layer; MLA's is torch-mla")
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


def make_mla(case, inputs, threads):
    """MLA's layer (DeepSeek-V3's inference/model.py, class MLA, without YaRN) in the case's form:
    naive decompresses K and V per head through wkv_b; absorb folds wkv_b's key half into the
    query and its value half after the attention, attending over [kv_norm(c) | k_pe]. Weights are
    the .npy files attnbench peer-io writes under DeepSeek's state-dict names."""
    if case.get("family") != "mla":
        raise RuntimeError(f"torch-mla runs MLA's layer (family mla); this case's family is {case.get('family')}")
    dev = device_of(case, "torch-mla")
    torch.set_num_threads(threads)
    H, C, Cq, Dr = case["heads"], case["kv_lora_rank"], case["q_lora_rank"], case["qk_rope_head_dim"]
    Dqk = case["d_head"]
    Dn, Dv = Dqk - Dr, case["d_v"] or Dqk
    form = case.get("form")
    if form not in ("naive", "absorb"):
        raise RuntimeError(f"torch-mla needs a form, naive or absorb (got {form})")
    dtype = DTYPES[case.get("precision", "f32")]
    wdir = inputs["weights"]
    names = ["wkv_a", "kv_norm", "wkv_b", "wo"] + (["wq_a", "q_norm", "wq_b"] if Cq else ["wq"])
    # weights and input in the case's precision on its device, once, outside the timed call
    w = {n: torch.from_numpy(np.load(f"{wdir}/{n}.weight.npy").astype(np.float32)).to(dtype).to(dev) for n in names}
    x = torch.from_numpy(inputs["x"].astype(np.float32)).to(dtype).to(dev)
    B, N, _ = x.shape
    # RoPE on consecutive pairs: pair i of position p turns by p * 10000^(-2i/Dr)
    inv = 1.0 / (10000.0 ** (torch.arange(0, Dr, 2, dtype=torch.float32) / Dr))
    cis = torch.polar(torch.ones(N, Dr // 2), torch.outer(torch.arange(N, dtype=torch.float32), inv)).to(dev)
    mask = torch.full((N, N), float("-inf")).triu_(1).to(dev) if case["causal"] else None
    scale = Dqk ** -0.5
    wkv_b = w["wkv_b"].view(H, Dn + Dv, C)

    def rope(t):  # [B, N, heads, Dr]
        z = torch.view_as_complex(t.float().reshape(*t.shape[:-1], -1, 2))
        return torch.view_as_real(z * cis.view(1, N, 1, Dr // 2)).flatten(3).to(t.dtype)

    def rms(t, g):
        return F.rms_norm(t, (t.shape[-1],), g, 1e-6)

    def forward():
        q = x @ w["wq"].T if not Cq else rms(x @ w["wq_a"].T, w["q_norm"]) @ w["wq_b"].T
        q = q.view(B, N, H, Dqk)
        q_nope, q_pe = torch.split(q, [Dn, Dr], dim=-1)
        q_pe = rope(q_pe)
        kv = x @ w["wkv_a"].T
        c, k_pe = torch.split(kv, [C, Dr], dim=-1)
        k_pe = rope(k_pe.unsqueeze(2))
        if form == "naive":
            kv = (rms(c, w["kv_norm"]) @ w["wkv_b"].T).view(B, N, H, Dn + Dv)
            k_nope, v = torch.split(kv, [Dn, Dv], dim=-1)
            k = torch.cat([k_nope, k_pe.expand(-1, -1, H, -1)], dim=-1)
            scores = torch.einsum("bshd,bthd->bsht", torch.cat([q_nope, q_pe], dim=-1), k) * scale
        else:
            q_nope = torch.einsum("bshd,hdc->bshc", q_nope, wkv_b[:, :Dn])
            c = rms(c, w["kv_norm"])
            scores = (torch.einsum("bshc,btc->bsht", q_nope, c) +
                      torch.einsum("bshr,btr->bsht", q_pe, k_pe.squeeze(2))) * scale
        if mask is not None:
            scores = scores + mask.view(1, N, 1, N)
        scores = scores.softmax(dim=-1, dtype=torch.float32).to(dtype)
        if form == "naive":
            o = torch.einsum("bsht,bthd->bshd", scores, v)
        else:
            o = torch.einsum("bshc,hdc->bshd", torch.einsum("bsht,btc->bshc", scores, c), wkv_b[:, -Dv:])
        return o.flatten(2) @ w["wo"].T

    state = {}

    def call():
        with torch.inference_mode():
            state["y"] = forward()

    def output():
        return state["y"].float().cpu().numpy()

    info = {"library": "torch", "version": torch.__version__, "threads": torch.get_num_threads(),
            "op": f"MLA's layer, {form} form, as DeepSeek-V3's inference/model.py writes it (torch.einsum, "
                  "F.rms_norm, complex RoPE; no YaRN)" + ("" if dtype == torch.float32 else
                                                           f" on {str(dtype).split('.')[-1]} tensors"),
            "kernel": kernel_of(call, ("aten::bmm", "aten::mm", "aten::matmul", "aten::einsum"), dev)}
    if dev.type == "cuda":  # fp32 matmuls as the backend settings leave them (TF32 off: full fp32)
        info.update(device=torch.cuda.get_device_name(dev), backend="eager ATen ops (cuBLAS matmuls)",
                    tf32=bool(torch.backends.cuda.matmul.allow_tf32))
    return Peer(call, output, info)
