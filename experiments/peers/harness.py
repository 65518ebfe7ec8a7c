"""attnbench's peer harness: other libraries' attention, timed on attnbench's cases and written
in attnbench-bench's schema (Google Benchmark JSON: one benchmark per repetition, named by the
case's id and labelled with the case as JSON plus a "peer" object), so `attnbench report`, its
plots and `attnbench compare` treat a peer like a variant.

A case's provider (its "variant" field) names the peer:
  torch-sdpa     torch.nn.functional.scaled_dot_product_attention on [B, H, N, d] (core, decode)
  torch-mha      torch.nn.MultiheadAttention, eval, need_weights=False (layer)
  ort-attention  ONNX Runtime CPU, the ONNX Attention operator (opset 23) (core, decode)
A decode case is the attention core of one step (one query row over the L+1 cached keys); its
benchmark is named ID/core, as the harness names our own decode core.

Per case: `attnbench peer-io` writes the inputs attnbench-bench would draw and the case's costs
from attn.count (counts.json: Python computes no cost formula); the provider is built at the
case's thread count; on the first case of every shape its output is judged by
`attnbench peer-io --judge` against the fp64 reference, on the timed inputs and on a draw with
4x larger queries and keys (a wrong peer is reported as the case's
error, never timed); then warm-up, calibration to --benchmark_min_time, and
--benchmark_repetitions timed repetitions. `--available P` exits 0 when provider P can run
(its library imports) and 77 otherwise, printing the install command.

usage: harness.py (--case JSON ... | --cases FILE) [--peak peak.json] [--attnbench PATH]
                  [--benchmark_out=F] [--benchmark_repetitions=N] [--benchmark_min_time=S]
       harness.py --available PROVIDER
"""
import argparse
import ctypes
import importlib
import json
import math
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)

# provider -> (module, factory, modes, how to install)
PROVIDERS = {
    "torch-sdpa": ("torch_peers", "make_sdpa", ("core", "decode"), "bash scripts/peers.sh"),
    "torch-mha": ("torch_peers", "make_mha", ("layer",), "bash scripts/peers.sh"),
    "ort-attention": ("ort_peer", "make_attention", ("core", "decode"), "bash scripts/peers.sh --ort"),
}
# Faults a test injects to prove the judgement catches a misconfigured peer: "scale" hands the
# peer queries 1% too large (a softmax scale 1% off); "kv-heads" reverses the key/value heads
# (a head-mapping mix-up; visible when G > 1).
FAULTS = ("scale", "kv-heads")
# A shape is judged on the timed inputs (queries and keys in [-1, 1]: scores of order 0.1 at
# d_head 64, where a softmax nearly averages) and on a draw 4 times larger (scores 16 times
# larger, of order 1-10), where a wrong scale moves the output by more than bf16's rounding does.
JUDGED_MAGNITUDES = (1.0, 4.0)


def factory(provider):
    if provider not in PROVIDERS:
        raise SystemExit(f"harness.py: error: unknown provider '{provider}' (known: {', '.join(PROVIDERS)})")
    mod, fn, _, _ = PROVIDERS[provider]
    return getattr(importlib.import_module(mod), fn)


def available(provider):
    try:
        factory(provider)
        return True, ""
    except ImportError as e:
        return False, f"{provider}: not installed ({e.name or e}); install with `{PROVIDERS[provider][3]}`"


def benchmark_args(argv):
    """Google Benchmark's flags (--benchmark_x=v) out of argv, the rest for argparse."""
    gb, rest = {}, []
    for a in argv:
        if a.startswith("--benchmark_") and "=" in a:
            k, v = a[2:].split("=", 1)
            gb[k] = v
        else:
            rest.append(a)
    return gb, rest


def seconds(text):
    return float(text[:-1]) if text.endswith("s") else float(text)


def load_cases(args):
    cases = [json.loads(c) for c in args.case]
    if args.cases:
        with open(args.cases) as f:
            j = json.load(f)
        cases += j if isinstance(j, list) else [j]
    if not cases:
        raise SystemExit("harness.py: error: no case (give --case JSON or --cases FILE)")
    return cases


def peer_io(attnbench, case, d, peak=None, judge=None, magnitude=1.0):
    cmd = [attnbench, "peer-io", "--case", json.dumps(case), "--dir", d, "--magnitude", repr(magnitude)]
    if peak:
        cmd += ["--peak", peak]
    if judge:
        cmd += ["--judge", judge]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode not in (0, 1) or (r.returncode == 1 and not judge):
        raise RuntimeError((r.stderr or r.stdout).strip() or f"attnbench peer-io exit status {r.returncode}")
    return r.returncode == 0, (r.stdout + r.stderr).strip()


def load_inputs(case, d, fault):
    import numpy as np

    if case["mode"] == "layer":
        return {"x": np.load(os.path.join(d, "x.npy")), "weights": os.path.join(d, "weights")}
    q, k, v = (np.load(os.path.join(d, n + ".npy")) for n in ("q", "k", "v"))
    if fault == "scale":
        q = (q * np.float32(1.01)).astype(np.float32)
    if fault == "kv-heads":
        k, v = np.ascontiguousarray(k[:, :, ::-1]), np.ascontiguousarray(v[:, :, ::-1])
    return {"q": q, "k": k, "v": v}


def time_calls(call, repetitions, min_time):
    """Warm-up (at least 2 calls and 0.1 s or min_time), then calibrates the calls per
    repetition to min_time, as Google Benchmark does; returns (calls, [(wall s, cpu s)])."""
    start, times = time.perf_counter(), []
    while len(times) < 2 or time.perf_counter() - start < min(0.1, min_time):
        t0 = time.perf_counter()
        call()
        times.append(time.perf_counter() - t0)
    one = sorted(times)[len(times) // 2]
    n = max(1, math.ceil(min_time / max(one, 1e-9)))
    reps = []
    for _ in range(repetitions):
        w0, c0 = time.perf_counter(), time.process_time()
        for _ in range(n):
            call()
        reps.append((time.perf_counter() - w0, time.process_time() - c0))
    return n, reps


def counters(case, counts, t):
    """attnbench-bench's counters from attn.count's costs (counts.json) and a time t in s."""
    c = {"bytes": counts["bytes"], "intensity": counts["intensity"]}
    g = counts["matmul_flops"] * 1e-9 / t
    if "peak_gflops" in counts:
        c["peak_gflops"] = counts["peak_gflops"]
        c["pct_peak"] = 100.0 * g / counts["peak_gflops"]
        c["peak_load_cpus"] = counts.get("peak_load_cpus", -1)
    if case["mode"] == "decode":
        c.update(core_us=t * 1e6, kv_gbs=counts["kv_read_bytes"] * 1e-9 / t, gflops_core=g)
    else:
        c.update(gflops_matmul=g, gflops_full=counts["full_flops"] * 1e-9 / t)
    return c


def judge(args, case, peer, make, d, magnitude):
    """One judgement of the peer's output at inputs of `magnitude` (the timed peer at 1, a peer
    built on a second draw otherwise); raises when it differs from the fp64 reference."""
    import numpy as np

    if peer is None:
        d = tempfile.mkdtemp(prefix="attnbench-peer-judge-", dir=d)
        peer_io(args.attnbench, case, d, magnitude=magnitude)
        peer = make(case, load_inputs(case, d, args.fault), int(case.get("threads", 1)))
    peer.call()
    out = os.path.join(d, "out.npy")
    np.save(out, peer.output())
    ok, line = peer_io(args.attnbench, case, d, judge=out, magnitude=magnitude)
    print(f"{line} (inputs of magnitude {magnitude:g})", file=sys.stderr)
    if not ok:
        raise RuntimeError("output differs from the fp64 reference: " + line.split("reference: ")[-1] +
                           f" (inputs of magnitude {magnitude:g})")


def run_case(cid, case, args, gb, index, checked):
    """The benchmarks of one case (its repetitions, or one error entry)."""
    name = cid + ("/core" if case["mode"] == "decode" else "")
    reps = int(gb.get("benchmark_repetitions", "1"))
    base = {"name": name, "family_index": index, "per_family_instance_index": 0, "run_name": name,
            "run_type": "iteration", "repetitions": reps, "threads": 1, "time_unit": "ms"}
    label = dict(case)
    try:
        provider = case["variant"]
        make = factory(provider)
        if case["mode"] not in PROVIDERS[provider][2]:
            raise RuntimeError(f"{provider} runs {', '.join(PROVIDERS[provider][2])}, not {case['mode']}")
        with tempfile.TemporaryDirectory(prefix="attnbench-peer-") as d:
            peer_io(args.attnbench, case, d, peak=args.peak)
            with open(os.path.join(d, "counts.json")) as f:
                counts = json.load(f)
            peer = make(case, load_inputs(case, d, args.fault), int(case.get("threads", 1)))
            label["peer"] = peer.info
            shape = json.dumps({k: v for k, v in case.items() if k not in ("threads", "grids")}, sort_keys=True)
            if shape not in checked:
                for m in JUDGED_MAGNITUDES:
                    judge(args, case, peer if m == 1 else None, make, d, m)
                checked.add(shape)
            n, times = time_calls(peer.call, reps, seconds(gb.get("benchmark_min_time", "0.5")))
    except Exception as e:  # the case fails, the run goes on (as attnbench-bench's SkipWithError)
        msg = f"{type(e).__name__}: {e}" if not isinstance(e, RuntimeError) else str(e)
        print(f"{name}: error: {msg}", file=sys.stderr)
        return [dict(base, error_occurred=True, error_message=msg, iterations=0, real_time=0, cpu_time=0,
                     label=json.dumps(label))]
    out = []
    for r, (wall, cpu) in enumerate(times):
        t = wall / n
        b = dict(base, repetition_index=r, iterations=n, real_time=t * 1e3, cpu_time=cpu / n * 1e3,
                 label=json.dumps(label))
        b.update(counters(case, counts, t))
        out.append(b)
        print(f"{name:<60} {t * 1e3:10.3f} ms  x{n}", file=sys.stderr)
    return out


def with_ids(cases, attnbench):
    """Each case normalised (defaults filled) and named by the C++ (`attnbench peer-io
    --id-only`), so the ids are the ones attn::sweep_case::id() gives and the report files."""
    out = []
    for c in cases:
        r = subprocess.run([attnbench, "peer-io", "--case", json.dumps(c), "--id-only"], capture_output=True, text=True)
        if r.returncode != 0:
            raise SystemExit(f"harness.py: error: {(r.stderr or r.stdout).strip()}")
        j = json.loads(r.stdout)
        out.append((j.pop("id"), j))
    return out


def die_with_parent():
    """As attnbench-bench does (experiments/cli/process.hpp, die_with_parent): a report's child
    asks the kernel for SIGTERM when the report dies, even by SIGKILL, so no peer outlives it."""
    parent = os.environ.get("ATTNBENCH_PARENT_PID")
    if not parent or str(os.getppid()) != parent:
        return  # not a report's child
    pr_set_pdeathsig = 1  # <sys/prctl.h>
    ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, int(signal.SIGTERM), 0, 0, 0)
    if str(os.getppid()) != parent:  # the report died before prctl
        os._exit(130)


def main(argv):
    die_with_parent()
    gb, rest = benchmark_args(argv)
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--case", action="append", default=[])
    ap.add_argument("--cases")
    ap.add_argument("--peak")
    ap.add_argument("--attnbench", default=os.environ.get("ATTNBENCH", os.path.join(ROOT, "build/release/attnbench")))
    ap.add_argument("--available", metavar="PROVIDER")
    ap.add_argument("--fault", choices=FAULTS, help="testing only: misconfigure the peer's inputs")
    args = ap.parse_args(rest)
    if args.available:
        ok, why = available(args.available)
        print(f"{args.available}: available" if ok else why)
        return 0 if ok else 77
    if not shutil.which(args.attnbench) and not os.path.exists(args.attnbench):
        raise SystemExit(f"harness.py: error: attnbench not found at {args.attnbench} (build it, or pass --attnbench)")
    cases = with_ids(load_cases(args), args.attnbench)
    checked, benchmarks = set(), []
    for i, (cid, case) in enumerate(cases):
        benchmarks += run_case(cid, case, args, gb, i, checked)
    doc = {"context": {"date": datetime.now(timezone.utc).isoformat(), "host_name": platform.node(),
                       "executable": os.path.abspath(__file__), "num_cpus": os.cpu_count(),
                       "library_build_type": "release", "attnbench_peer_harness": "experiments/peers/harness.py",
                       "attnbench_python": sys.version.split()[0]},
           "benchmarks": benchmarks}
    out = gb.get("benchmark_out")
    text = json.dumps(doc, indent=2) + "\n"
    if out:
        tmp = out + ".tmp"
        with open(tmp, "w") as f:
            f.write(text)
        os.replace(tmp, out)  # atomic, as attnbench-bench writes its JSON
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
