"""PyTorch's attention on CUDA as attnbench peers (run by harness.py; cases on device cuda only):

  torch-sdpa-flash, torch-sdpa-efficient, torch-sdpa-cudnn, torch-sdpa-math
      torch.nn.functional.scaled_dot_product_attention with exactly one backend enabled
      (torch.nn.attention.sdpa_kernel given that backend alone), so each result is the backend its
      provider names: with several enabled, torch falls back silently to whichever can run. A
      backend that cannot run a case raises, and the case fails with torch's own reasons for that
      backend in one line. As the CPU's torch-sdpa: core and decode (one query row over the cache),
      G < H through enable_gqa, causal through is_causal (the fused kernels skip the tiles above the
      diagonal), a sliding window as window.py gives it: a boolean attn_mask on the core, which
      every backend scores in full (FlashAttention-2 takes no mask: no window on the core), and
      the cache's last W rows in decode. The math backend holds the B H N_q N_kv scores in
      memory: a case whose scores would not fit is refused in one line (math_fits).
  torch-flex
      FlexAttention (torch.nn.attention.flex_attention under torch.compile) with the causal mask or
      the sliding window as a block mask (create_block_mask): the 128 x 128 tiles the mask leaves
      empty are never visited, so a window costs it the window's work. Core only.

Inputs arrive as the CPU runners' (attnbench peer-io's .npy, float32 holding the case's
precision's values exactly) and go to the device once per case, in the case's storage type; the
output comes back to the host as float32 for the judgement. Each first call runs here, untimed (the
cuDNN backend builds a graph per shape on it, FlexAttention compiles), and the harness's timer
warms up again before it times on CUDA events with the L2 flushed (harness.peer_timer). Each peer's
info names the device, torch's version, the backend forced, the ATen operator and GPU kernels the
profiler saw on one call, and whether the masked tiles are skipped."""
import functools
import math
import warnings

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch_peers import DTYPES, Peer, cuda_missing, device_of, kernel_of  # noqa: F401 (cuda_missing: harness)
from window import kv_rows, mask as window_of

# backend -> (torch's enum member, the ATen operator it runs, the heading torch warns before its
# reasons when it cannot run a case: sdp_utils.cpp's select_sdp_backend)
BACKENDS = {
    "flash": ("FLASH_ATTENTION", "flash_attention", "Flash attention kernel not used because"),
    "efficient": ("EFFICIENT_ATTENTION", "efficient_attention", "Memory efficient kernel not used because"),
    "cudnn": ("CUDNN_ATTENTION", "cudnn_attention", "cuDNN attention kernel not used because"),
    "math": ("MATH", "attention_math", None),
}
ATEN = ("aten::_scaled_dot_product", "aten::_flash_attention", "aten::_efficient_attention", "aten::_cudnn_attention",
        "aten::bmm", "aten::matmul", "aten::_safe_softmax", "aten::_softmax")
# the math backend keeps the scores, their softmax and a masked or converted copy at once: about
# three fp32 [B, H, N_q, N_kv] tensors (it computes bf16 and f16 in fp32), within half the memory
MATH_COPIES, MATH_SHARE = 3, 0.5


def one_line(text):
    """torch's message as one line, without its "(Triggered internally at ...)" tail."""
    return " ".join(text.split("(Triggered internally at")[0].split())


def backend_reasons(messages, backend):
    """Torch's reasons for `backend` out of the warnings a refused call raised (in order): the
    messages after its heading, up to the next backend's heading, joined in one line."""
    headings = {b: h for b, (_, _, h) in BACKENDS.items() if h}
    mine, out = False, []
    for m in map(one_line, messages):
        heading = next((b for b, h in headings.items() if m.startswith(h)), None)
        if heading:
            mine = heading == backend
        elif mine and m:
            out.append(m.rstrip("."))
    return "; ".join(out)


def math_fits(batch, heads, n_q, n_kv, total_bytes):
    """Whether the math backend's scores fit (MATH_COPIES fp32 score tensors within MATH_SHARE of
    the device's memory), and the line that refuses a case whose scores do not."""
    scores = batch * heads * n_q * n_kv * 4
    need, room = MATH_COPIES * scores, MATH_SHARE * total_bytes
    return need <= room, (f"torch-sdpa-math materialises the B*H*N_q*N_kv = {scores // 4} fp32 scores "
                          f"({scores / 2**30:.1f} GiB, {MATH_COPIES} copies at once: {need / 2**30:.1f} GiB), over "
                          f"{MATH_SHARE:g} of the device's {total_bytes / 2**30:.1f} GiB; refused")


def first_call(provider, backend, call):
    """The peer's first call, untimed: where cuDNN builds its graph and torch.compile compiles,
    and where a backend that cannot run the case says so, one line with torch's reasons."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            call()
            torch.cuda.synchronize()
        except Exception as e:  # RuntimeError ("No available kernel"), OutOfMemoryError, a compile's error
            why = backend_reasons([str(w.message) for w in caught], backend) or f"{type(e).__name__}: {one_line(str(e))}"
            raise RuntimeError(f"{provider}: torch {torch.__version__} cannot run this case: {why}") from None


def ran(provider, backend, kernel):
    """The forced backend's ATen operator in the profiled names, or the case fails naming what ran
    (one backend enabled cannot fall back, but a result must be the backend it is filed under)."""
    ops = kernel.split(";")[0]
    if BACKENDS[backend][1] not in ops and any(op in ops for _, op, _ in BACKENDS.values()):
        raise RuntimeError(f"{provider}: another backend ran ({ops}), not {backend}")


def inputs_on(case, inputs, dev, dtype):
    """q [B, H, N_q, d], k and v [B, G, rows, d] (decode under a window: the cache's last W rows)
    on `dev` in `dtype`, contiguous, once per case."""
    rows = {"q": case["n_q"], "k": kv_rows(case), "v": kv_rows(case)}
    return [torch.from_numpy(inputs[n][:, -rows[n]:]).transpose(1, 2).to(dtype).contiguous().to(dev)
            for n in ("q", "k", "v")]


def sdpa_runner(backend):
    """The factory of torch-sdpa-<backend>: SDPA on CUDA with that backend alone."""
    provider = f"torch-sdpa-{backend}"
    forced = getattr(SDPBackend, BACKENDS[backend][0])

    def make(case, inputs, threads):
        dev = device_of(dict(case, device="cuda"), provider)
        torch.set_num_threads(threads)
        H, G, B = case["heads"], case["kv_heads"], case["batch"]
        n_q, n_kv = case["n_q"], case["n_kv"]
        window_mask = window_of(case)  # the core's window as a boolean [n_q, n_kv]; decode: None
        if window_mask is not None and backend == "flash":
            raise RuntimeError(f"{provider}: FlashAttention-2 takes no attn_mask, so no window on the core")
        causal = bool(case["causal"]) and case["mode"] != "decode" and window_mask is None
        if causal and n_q != n_kv:
            raise RuntimeError(f"{provider}: SDPA's is_causal is top-left aligned; attnbench's causal is "
                               "bottom-right (n_q != n_kv)")
        if backend == "math":
            fits, line = math_fits(B, H, n_q, kv_rows(case), torch.cuda.get_device_properties(dev).total_memory)
            if not fits:
                raise RuntimeError(line)
        dtype = DTYPES[case.get("precision", "f32")]
        q, k, v = inputs_on(case, inputs, dev, dtype)
        mask = None if window_mask is None else torch.from_numpy(window_mask).to(dev)
        gqa = G != H
        state = {}

        def call():
            with torch.inference_mode(), sdpa_kernel(forced):
                state["y"] = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal, enable_gqa=gqa)

        def output():
            return state["y"].transpose(1, 2).float().contiguous().cpu().numpy()

        first_call(provider, backend, call)
        kernel = kernel_of(call, ATEN, dev)
        ran(provider, backend, kernel)
        if mask is not None:
            masking = f"the window as a boolean attn_mask [{n_q}, {n_kv}] (every pair scored)"
        elif causal:
            masking = "is_causal" + (" (every pair scored, then masked)" if backend == "math" else
                                     " (the kernel skips the tiles above the diagonal)")
        else:
            masking = "none"
        info = {"library": "torch", "version": torch.__version__, "threads": torch.get_num_threads(),
                "device": torch.cuda.get_device_name(dev),
                "backend": f"{backend} (torch.nn.attention.sdpa_kernel(SDPBackend.{BACKENDS[backend][0]}), alone)",
                "op": "torch.nn.functional.scaled_dot_product_attention" + (" (enable_gqa)" if gqa else "") +
                      f" on {str(dtype).split('.')[-1]} tensors" +
                      (f" over the cache's last {kv_rows(case)} rows" if kv_rows(case) < n_kv else ""),
                "masking": masking, "skips_masked_tiles": causal and backend != "math",
                "kernel": kernel}
        return Peer(call, output, info)
    make.__name__ = f"make_sdpa_{backend}"
    return make


make_sdpa_flash, make_sdpa_efficient, make_sdpa_cudnn, make_sdpa_math = (sdpa_runner(b) for b in BACKENDS)


def flex_mask(case):
    """The case's mask as FlexAttention's mask_mod(b, h, q_idx, kv_idx) -> bool, or None when
    every pair takes part. Bottom-right aligned as attnbench's (window.py): query i's last key is
    e = i + n_kv - n_q; a window of W keeps e - W < j <= e, causal j <= e."""
    off, w = case["n_kv"] - case["n_q"], case.get("window", 0)
    if not w and not case["causal"]:
        return None
    return mask_mod(off, w)


@functools.lru_cache(maxsize=None)
def mask_mod(off, w):
    """One function per (offset, window; 0: causal): the compiled FlexAttention guards on the
    mask_mod it is given, so a second peer of a shape (the judgement's larger draw, another
    thread count) reuses its compile rather than compiling again."""
    if w:
        def window(b, h, q_idx, kv_idx):
            e = q_idx + off
            return (kv_idx <= e) & (kv_idx > e - w)
        return window

    def causal(b, h, q_idx, kv_idx):
        return kv_idx <= q_idx + off
    return causal


def block_mask(case, device, block=128):
    """The case's BlockMask (flex_mask over every batch and head, block x block tiles) and the tiles
    it visits of all: (mask or None, visited, total). Visited counts the partly and the fully kept
    tiles; the rest are never loaded."""
    from torch.nn.attention.flex_attention import create_block_mask

    n_q, n_kv = case["n_q"], case["n_kv"]
    total = math.ceil(n_q / block) * math.ceil(n_kv / block)
    mod = flex_mask(case)
    if mod is None:
        return None, total, total
    bm = create_block_mask(mod, None, None, n_q, n_kv, device=device, BLOCK_SIZE=block)
    visited = int(bm.kv_num_blocks.sum())
    if bm.full_kv_num_blocks is not None:
        visited += int(bm.full_kv_num_blocks.sum())
    return bm, visited, total


_FLEX = []


def compiled_flex():
    """flex_attention under torch.compile, once a process. Each shape compiles anew (dynamic=False):
    the recompile limits are raised so a sweep's shapes all compile, and hitting one fails rather
    than running FlexAttention unfused (a silent fallback that materialises the scores)."""
    if not _FLEX:
        from torch.nn.attention.flex_attention import flex_attention

        cfg = torch._dynamo.config
        for name in ("recompile_limit", "cache_size_limit", "accumulated_recompile_limit",
                     "accumulated_cache_size_limit"):
            if hasattr(cfg, name):
                setattr(cfg, name, max(int(getattr(cfg, name)), 4096))
        if hasattr(cfg, "fail_on_recompile_limit_hit"):
            cfg.fail_on_recompile_limit_hit = True
        _FLEX.append(torch.compile(flex_attention, dynamic=False))
    return _FLEX[0]


def make_flex(case, inputs, threads):
    provider = "torch-flex"
    dev = device_of(dict(case, device="cuda"), provider)
    if case["mode"] != "core":
        raise RuntimeError(f"{provider} runs the core, not {case['mode']}")
    torch.set_num_threads(threads)
    dtype = DTYPES[case.get("precision", "f32")]
    q, k, v = inputs_on(case, inputs, dev, dtype)
    bm, visited, total = block_mask(case, dev)
    gqa = case["kv_heads"] != case["heads"]
    flex = compiled_flex()
    state = {}

    def call():
        with torch.inference_mode():
            state["y"] = flex(q, k, v, block_mask=bm, enable_gqa=gqa)

    def output():
        return state["y"].transpose(1, 2).float().contiguous().cpu().numpy()

    first_call(provider, "flex", call)  # the compile
    kernel = kernel_of(call, ("Torch-Compiled Region", "flex_attention", "triton"), dev)
    gpu = kernel.split("GPU kernels: ")[-1]
    if "none named" not in gpu and "triton" not in gpu:
        raise RuntimeError(f"{provider}: FlexAttention ran unfused (no Triton kernel in the profile: {gpu})")
    w = case.get("window", 0)
    what = f"sliding window of {w}" if w else "causal mask" if case["causal"] else None
    info = {"library": "torch", "version": torch.__version__, "threads": torch.get_num_threads(),
            "device": torch.cuda.get_device_name(dev),
            "backend": "FlexAttention (Triton, torch.compile(dynamic=False))",
            "op": "torch.nn.attention.flex_attention.flex_attention" + (" (enable_gqa)" if gqa else "") +
                  f" on {str(dtype).split('.')[-1]} tensors",
            "masking": (f"the {what} as a block mask: {visited} of {total} 128x128 tiles visited, the rest skipped" if what
                        else f"none: all {total} 128x128 tiles"),
            "skips_masked_tiles": bm is not None, "tiles": {"visited": visited, "total": total},
            "kernel": kernel}
    return Peer(call, output, info)
