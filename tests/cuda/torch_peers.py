"""PyTorch's CUDA attention on the shapes attn_cuda_bench times, for scripts/gpu.sh's table.

    python3 tests/cuda/torch_peers.py prefill|window|decode [repetitions]

Each backend is forced alone (torch.nn.attention.sdpa_kernel with one backend raises rather than
falling back); timing as attn_cuda_bench: CUDA events around one call, an L2-sized buffer zeroed
before each call, 3 warm-ups, the median of the repetitions. CSV on stdout, the columns of
attn_cuda_bench's rows (kernel first); a shape a backend refuses prints one '#' line. n_q = n_kv,
so torch's top-left causal mask is the suite's bottom-right one. Not a test: it asserts nothing.
  prefill  sdpa flash (FlashAttention-2) and cuDNN: bf16, hidden 2048, B x H >= 132, N 1k-16k
  window   FlexAttention (torch.compile) at B 8, H 16, d 128, N 16384: causal, then sliding
           windows of 1024 and 4096 keys (the suite's convention: key j seen by row i when
           i - W < j <= i)
  decode   sdpa flash and cuDNN on issue 45's rows: one query token, bf16 cache, d 128, H 32
"""
import statistics
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

dev = torch.device("cuda")
flush = torch.empty(2 * torch.cuda.get_device_properties(0).L2_cache_size, dtype=torch.uint8, device=dev)


def median_ms(run, reps):
    for _ in range(3):
        run()
    times = []
    for _ in range(reps):
        flush.zero_()
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        run()
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e))
    return statistics.median(times)


def pairs(n, causal, window=0):
    """(query, key) pairs one head scores: every key, the causal triangle, or the window's band."""
    if not causal:
        return n * n
    if window <= 0 or window >= n:
        return n * (n + 1) / 2
    return window * (window + 1) / 2 + (n - window) * window


def prefill(reps):
    backends = [("sdpa-flash", SDPBackend.FLASH_ATTENTION), ("sdpa-cudnn", SDPBackend.CUDNN_ATTENTION)]
    print("kernel,tile,storage,batch,heads,kv_heads,n,d,causal,window,ms,tflops")
    for d in (64, 128):
        for n in (1024, 2048, 4096, 8192, 16384):
            for causal in (0, 1):
                h = 2048 // d
                b = max(16384 // n, -(-132 // h))
                q, k, v = (torch.rand(b, h, n, d, device=dev, dtype=torch.bfloat16) * 2 - 1 for _ in range(3))
                for name, backend in backends:
                    try:
                        with sdpa_kernel(backend):
                            ms = median_ms(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=bool(causal)), reps)
                        flop = 4 * b * h * d * pairs(n, causal)
                        print(f"{name},-,bf16,{b},{h},{h},{n},{d},{causal},0,{ms:.4f},{flop / ms * 1e-9:.1f}", flush=True)
                    except Exception as ex:  # a backend that cannot run this shape
                        print(f"# {name} d {d} n {n} causal {causal}: {str(ex).splitlines()[0]}", flush=True)
                del q, k, v
                torch.cuda.empty_cache()


def window(reps):
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    flex = torch.compile(flex_attention)
    b, h, n, d = 8, 16, 16384, 128
    q, k, v = (torch.rand(b, h, n, d, device=dev, dtype=torch.bfloat16) * 2 - 1 for _ in range(3))
    print("kernel,tile,storage,batch,heads,kv_heads,n,d,causal,window,ms,tflops")
    for w in (0, 1024, 4096):
        def mask(bi, hi, i, j, w=w):
            return (j <= i) & (i - j < w) if w else j <= i

        try:
            bm = create_block_mask(mask, None, None, n, n, device=dev)
            ms = median_ms(lambda: flex(q, k, v, block_mask=bm), reps)
            print(f"torch-flex,-,bf16,{b},{h},{h},{n},{d},1,{w},{ms:.4f},{4 * b * h * d * pairs(n, 1, w) / ms * 1e-9:.1f}",
                  flush=True)
        except Exception as ex:
            print(f"# torch-flex window {w}: {str(ex).splitlines()[0]}", flush=True)


def decode(reps):
    backends = [("sdpa-flash", SDPBackend.FLASH_ATTENTION), ("sdpa-cudnn", SDPBackend.CUDNN_ATTENTION)]
    print("kernel,storage,batch,heads,kv_heads,n_q,L,d,ms,gbs")
    h, d = 32, 128
    for b, g, length in ((1, 8, 131072), (8, 8, 32768), (32, 8, 8192), (8, 1, 131072), (64, 32, 4096)):
        q = torch.rand(b, h, 1, d, device=dev, dtype=torch.bfloat16) * 2 - 1
        k, v = (torch.rand(b, g, length, d, device=dev, dtype=torch.bfloat16) * 2 - 1 for _ in range(2))
        moved = 2 * b * g * length * d * 2 + 2 * b * h * d * 2  # the cache, q and the output, bytes
        for name, backend in backends:
            try:
                with sdpa_kernel(backend):
                    ms = median_ms(lambda: F.scaled_dot_product_attention(q, k, v, enable_gqa=g != h), reps)
                print(f"{name},bf16,{b},{h},{g},1,{length},{d},{ms:.4f},{moved / ms * 1e-6:.1f}", flush=True)
            except Exception as ex:
                print(f"# {name} B {b} G {g} L {length}: {str(ex).splitlines()[0]}", flush=True)
        del q, k, v
        torch.cuda.empty_cache()


if __name__ == "__main__":
    modes = {"prefill": prefill, "window": window, "decode": decode}
    if len(sys.argv) < 2 or sys.argv[1] not in modes:
        sys.exit("usage: torch_peers.py prefill|window|decode [repetitions]")
    modes[sys.argv[1]](int(sys.argv[2]) if len(sys.argv) > 2 else 10)
