"""The peer users would pick instead: PyTorch, timed on the same grid as attnbench-bench and
written in the same schema (Google Benchmark JSON: benchmarks[] with run_name, real_time,
cpu_time, time_unit, iterations, label, and the counters gflops_matmul, pct_peak, ...), so
`attnbench compare`, the report and the plots put it beside our variants.

Two providers: torch-mha, nn.MultiheadAttention (the full layer, batch_first, eval mode under
no_grad with need_weights=False: its fast path), and torch-bmm, the core as a user writes it
(bmm, softmax, bmm, on [B*H, N, d] tensors). Optional: needs torch in the project venv; exits 77
(skipped) without it.

usage: torch_peer.py --out FILE [--mode core,layer] [--d-model 512] [--heads 8] [--seq 1024,2048]
                     [--batch 1] [--threads 2] [--causal 0] [--repetitions 5] [--min-time 0.3]
                     [--peak peak.json]
"""
import argparse
import json
import os
import statistics
import sys
import time


def ints(s):
    return [int(x) for x in s.split(",") if x]


def matmul_flops(mode, B, N, dm, H, d, causal):
    pairs = N * (N + 1) // 2 if causal else N * N
    attn = 4 * B * H * pairs * d  # QK^T and PV, 2 FLOP per multiply-add
    if mode == "core":
        return attn
    return attn + 2 * B * N * dm * (4 * H * d)  # Q, K, V and output projections (G = H)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--mode", default="core,layer")
    ap.add_argument("--d-model", default="512")
    ap.add_argument("--heads", default="8")
    ap.add_argument("--seq", default="1024,2048")
    ap.add_argument("--batch", default="1")
    ap.add_argument("--threads", default=str(os.cpu_count()))
    ap.add_argument("--causal", default="0")
    ap.add_argument("--repetitions", type=int, default=5)
    ap.add_argument("--min-time", type=float, default=0.3)
    ap.add_argument("--peak", help="peak.json from `attnbench peak --out`, for pct_peak")
    a = ap.parse_args()
    try:
        import torch
    except ImportError:
        print("torch is not installed: the PyTorch peer is skipped")
        return 77

    peak = {}
    if a.peak:
        p = json.load(open(a.peak))
        p = p.get("peak", p)
        peak = {"1": p["fma_f32_gflops_1_thread"]["median"], "all": p["fma_f32_gflops_all_threads"]["median"],
                "threads": p.get("threads", os.cpu_count())}
    benchmarks = []
    for threads in ints(a.threads):
        torch.set_num_threads(threads)
        for mode in a.mode.split(","):
            for dm in ints(a.d_model):
                for H in ints(a.heads):
                    for N in ints(a.seq):
                        for B in ints(a.batch):
                            for causal in ints(a.causal):
                                d = dm // H
                                torch.manual_seed(1)
                                mask = torch.triu(torch.ones(N, N, dtype=torch.bool), 1) if causal else None
                                if mode == "layer":
                                    provider = "torch-mha"
                                    mha = torch.nn.MultiheadAttention(dm, H, batch_first=True).eval()
                                    x = torch.rand(B, N, dm) * 2 - 1

                                    def run():
                                        mha(x, x, x, need_weights=False, attn_mask=mask)
                                else:
                                    provider = "torch-bmm"
                                    q, k, v = (torch.rand(B * H, N, d) * 2 - 1 for _ in range(3))
                                    neg = torch.zeros(N, N).masked_fill(mask, float("-inf")) if causal else None

                                    def run():
                                        s = torch.bmm(q, k.transpose(1, 2)) * (d ** -0.5)
                                        if neg is not None:
                                            s = s + neg
                                        torch.bmm(torch.softmax(s, dim=-1), v)
                                with torch.no_grad():
                                    run()  # warm-up
                                    flops = matmul_flops(mode, B, N, dm, H, d, causal)
                                    name = f"{provider}/{mode}/d{dm}/H{H}/G{H}/N{N}/B{B}/T{threads}" + ("/causal" if causal else "")
                                    for rep in range(a.repetitions):
                                        iters, t0, c0 = 0, time.perf_counter(), time.process_time()
                                        while True:
                                            run()
                                            iters += 1
                                            elapsed = time.perf_counter() - t0
                                            if elapsed >= a.min_time:
                                                break
                                        cpu = time.process_time() - c0
                                        per = elapsed / iters
                                        pk = peak.get("1") if threads == 1 else peak.get("all", 0) * threads / peak.get("threads", threads) if peak else 0
                                        entry = {
                                            "name": name, "run_name": name, "run_type": "iteration",
                                            "repetitions": a.repetitions, "repetition_index": rep, "threads": 1,
                                            "iterations": iters, "real_time": per * 1e3, "cpu_time": cpu / iters * 1e3,
                                            "time_unit": "ms",
                                            "gflops_matmul": flops / per * 1e-9,
                                            "label": f"variant={provider} mode={mode} d_model={dm} heads={H} kv_heads={H} "
                                                     f"d_head={d} n_q={N} n_kv={N} batch={B} threads={threads} causal={causal} family=MHA",
                                        }
                                        if pk:
                                            entry["peak_gflops"] = pk
                                            entry["pct_peak"] = 100 * entry["gflops_matmul"] / pk
                                        benchmarks.append(entry)
                                    med = statistics.median(b["real_time"] for b in benchmarks if b["run_name"] == name)
                                    print(f"{name:44s} median {med:9.3f} ms  {flops / med * 1e-6:7.1f} GFLOP/s (matmul)", flush=True)
    out = {"context": {"attnbench_peer": f"PyTorch {torch.__version__}", "attnbench_threads": a.threads,
                       "executable": sys.executable, "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())},
           "benchmarks": benchmarks}
    tmp = a.out + ".tmp"
    with open(tmp, "w") as f:
        json.dump(out, f, indent=1)
    os.replace(tmp, a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
