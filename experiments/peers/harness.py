"""attnbench's peer harness: other libraries' attention on attnbench's cases, timed by Google
Benchmark's own Python bindings (google_benchmark, pinned in scripts/requirements.txt) and written
in attnbench-bench's JSON schema (one benchmark per case, named by the case's id and labelled with
the case as JSON plus a "peer" object), so `attnbench report`, its plots and `attnbench compare`
read a peer like a variant.

Peers produce times, the C++ produces figures: this harness records each repetition's time and
which kernel ran, nothing else. GFLOP/s, bytes, % of peak and the roofline of a peer's case are
computed by the report with the same C++ that computes ours (attn::quantities, attn::derive).

A case's provider (its "variant" field) names the peer, which runs on the devices PROVIDERS
gives it (attn::peer_provider::devices; a case on another device fails in one line):
  torch-sdpa       torch.nn.functional.scaled_dot_product_attention on [B, H, N, d] (core, decode; CPU)
  torch-mha        torch.nn.MultiheadAttention, eval, need_weights=False (layer; CPU)
  torch-mla        MLA's layer as DeepSeek-V3's reference code writes it (layer; CPU and CUDA)
  ort-attention    ONNX Runtime CPU, the ONNX Attention operator (opset 23) (core, decode; CPU)
  torch-sdpa-flash, -efficient, -cudnn, -math
                   torch's SDPA on CUDA with that one backend forced (core, decode)
  torch-flex       FlexAttention under torch.compile, block masks that skip tiles (core; CUDA)
A decode case is the attention core of one step (one query row over the L+1 cached keys); its
benchmark is named ID/core, as the harness names our own decode core.

Per case: `attnbench peer-io` writes the inputs attnbench-bench would draw; the provider is built
at the case's thread count; on the first case of every shape its output is judged by
`attnbench peer-io --judge` against the fp64 reference, on the timed inputs and on a draw with
4x larger queries and keys (a wrong peer is reported as the case's error, never timed;
--no-judge skips it in a report's later rounds of a shape judged in its first); then Google
Benchmark warms it up, calibrates the calls per repetition to --benchmark_min_time and times
--benchmark_repetitions repetitions (its median, mean, stddev and cv beside them). The timer takes
the case's device: the host's wall clock on the CPU; on a GPU, CUDA events around each call, after
warm-up calls (cuDNN's graph per shape, FlexAttention's compile) and with the L2 flushed before
each call outside the events, as attnbench-bench flushes it for our kernels. `--available P`
exits 0 when provider P can run (its library imports and, for a CUDA-only peer, a CUDA device is
there) and 77 otherwise, printing the install command or the missing device in one line.

usage: harness.py (--case JSON ... | --cases FILE) [--attnbench PATH] [--no-judge]
                  [--benchmark_out=F] [--benchmark_repetitions=N] [--benchmark_min_time=S]
       harness.py --available PROVIDER
"""
import argparse
import ctypes
import importlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections import namedtuple

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)

# provider -> its runner (module and factory), the modes and devices it runs (attn::peer_providers
# says the same: tests/peers/check_providers.py holds the two tables to each other), how to install it
Provider = namedtuple("Provider", "module factory modes devices install")
TORCH, CORE_DECODE = "bash scripts/peers.sh", ("core", "decode")
PROVIDERS = {
    "torch-sdpa": Provider("torch_peers", "make_sdpa", CORE_DECODE, ("cpu",), TORCH),
    "torch-mha": Provider("torch_peers", "make_mha", ("layer",), ("cpu",), TORCH),
    "torch-mla": Provider("torch_peers", "make_mla", ("layer",), ("cpu", "cuda"), TORCH),
    "ort-attention": Provider("ort_peer", "make_attention", CORE_DECODE, ("cpu",), "bash scripts/peers.sh --ort"),
    "torch-sdpa-flash": Provider("torch_cuda", "make_sdpa_flash", CORE_DECODE, ("cuda",), TORCH),
    "torch-sdpa-efficient": Provider("torch_cuda", "make_sdpa_efficient", CORE_DECODE, ("cuda",), TORCH),
    "torch-sdpa-cudnn": Provider("torch_cuda", "make_sdpa_cudnn", CORE_DECODE, ("cuda",), TORCH),
    "torch-sdpa-math": Provider("torch_cuda", "make_sdpa_math", CORE_DECODE, ("cuda",), TORCH),
    "torch-flex": Provider("torch_cuda", "make_flex", ("core",), ("cuda",), TORCH),
}
# Faults a test injects to prove the judgement catches a misconfigured peer: "scale" hands the
# peer queries 1% too large (a softmax scale 1% off); "kv-heads" reverses the key/value heads
# (a head-mapping mix-up; visible when G > 1); "window" builds the peer with a window one key
# longer than the case's (FlexAttention's p - j <= W read as ours; visible on a windowed case).
FAULTS = ("scale", "kv-heads", "window")
# A shape is judged on the timed inputs (queries and keys in [-1, 1]: scores of order 0.1 at
# d_head 64, where a softmax nearly averages) and on a draw 4 times larger (scores 16 times
# larger, of order 1-10), where a wrong scale moves the output by more than bf16's rounding does.
JUDGED_MAGNITUDES = (1.0, 4.0)


def factory(provider):
    if provider not in PROVIDERS:
        raise SystemExit(f"harness.py: error: unknown provider '{provider}' (known: {', '.join(PROVIDERS)})")
    p = PROVIDERS[provider]
    return getattr(importlib.import_module(p.module), p.factory)


def available(provider):
    """Whether `provider` can run here, and why not in one line: its library imports and, when it
    runs on CUDA only, its module finds a CUDA device (cuda_missing())."""
    p = PROVIDERS.get(provider)
    try:
        factory(provider)
    except ImportError as e:
        return False, f"{provider}: not installed ({e.name or e}); install with `{p.install}`"
    if "cpu" not in p.devices:
        why = importlib.import_module(p.module).cuda_missing()
        if why:
            return False, f"{provider}: {why}"
    return True, ""


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


def load_cases(args):
    cases = [json.loads(c) for c in args.case]
    if args.cases:
        with open(args.cases) as f:
            j = json.load(f)
        cases += j if isinstance(j, list) else [j]
    if not cases:
        raise SystemExit("harness.py: error: no case (give --case JSON or --cases FILE)")
    return cases


def peer_io(attnbench, case, d, judge=None, magnitude=1.0):
    cmd = [attnbench, "peer-io", "--case", json.dumps(case), "--dir", d, "--magnitude", repr(magnitude)]
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


def peer_case(case, fault):
    """The case the peer is built for: the case itself, or under the "window" fault its window
    one key longer (the inputs and the reference stay the case's)."""
    if fault == "window" and case.get("window", 0):
        return dict(case, window=case["window"] + 1)
    return case


def l2_flush(device="cuda", l2_bytes=None):
    """What runs before each timed call on a GPU, outside its events: a float32 buffer of twice the
    L2 (the device's L2_cache_size unless given) written, then read, so the call finds no input in
    L2 and no dirty line of the flush is written back inside it (attnbench-bench's flush for our
    kernels does the same). The value alternates between calls; the buffer is flush.buffer."""
    import torch

    if l2_bytes is None:
        l2_bytes = torch.cuda.get_device_properties(torch.device(device)).L2_cache_size
    buf = torch.empty(2 * int(l2_bytes) // 4, dtype=torch.float32, device=device)
    turn = [0]

    def flush():
        turn[0] += 1
        buf.fill_(float(turn[0] % 2 + 1))
        return buf.sum()
    flush.buffer = buf
    return flush


# GPU warm-up calls before a case is timed: cuDNN builds its graph for a shape on the first call,
# FlexAttention compiles on its first (its runner warms up once more itself), the clocks ramp
GPU_WARMUPS = 3
# cycles the GPU sleeps between the flush and the start event (~50 us at 2 GHz): the host queues
# the peer's launch (tens of microseconds of Python for SDPA, more for a compiled call) while the
# GPU waits, so the events time the kernels rather than the host's launch
LAUNCH_SLACK_CYCLES = 100_000
FLUSHES = {}


def peer_timer(call, device):
    """The function Google Benchmark times for a peer's call, and whether it reports the time
    itself: on the CPU, GB's wall clock around the loop; on a GPU, CUDA events around each call
    (the launch is asynchronous: the host clock would time the queueing), as manual time, the L2
    flushed before each call outside the events (l2_flush), after GPU_WARMUPS untimed calls."""
    if device == "cpu":
        def timed(state):
            while state:
                call()
        return timed, False
    import torch

    if device not in FLUSHES:  # one buffer a process: every case's timer shares it
        FLUSHES[device] = l2_flush(device)
    flush = FLUSHES[device]
    for _ in range(GPU_WARMUPS):
        flush()
        call()
    torch.cuda.synchronize()
    sleep = getattr(torch.cuda, "_sleep", lambda cycles: None)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)

    def timed_gpu(state):
        while state:
            flush()
            sleep(LAUNCH_SLACK_CYCLES)
            start.record()
            call()
            end.record()
            end.synchronize()
            state.set_iteration_time(start.elapsed_time(end) * 1e-3)
    return timed_gpu, True


def judge(args, case, peer, make, d, magnitude):
    """One judgement of the peer's output at inputs of `magnitude` (the timed peer at 1, a peer
    built on a second draw otherwise); raises when it differs from the fp64 reference."""
    import numpy as np

    if peer is None:
        d = tempfile.mkdtemp(prefix="attnbench-peer-judge-", dir=d)
        peer_io(args.attnbench, case, d, magnitude=magnitude)
        peer = make(peer_case(case, args.fault), load_inputs(case, d, args.fault), int(case.get("threads", 1)))
    peer.call()
    out = os.path.join(d, "out.npy")
    np.save(out, peer.output())
    ok, line = peer_io(args.attnbench, case, d, judge=out, magnitude=magnitude)
    print(f"{line} (inputs of magnitude {magnitude:g})", file=sys.stderr)
    if not ok:
        raise RuntimeError("output differs from the fp64 reference: " + line.split("reference: ")[-1] +
                           f" (inputs of magnitude {magnitude:g})")


def register_case(bench, cid, case, args, checked):
    """Prepares one case's peer (inputs, judgement) and registers its benchmark with Google
    Benchmark; a case that cannot run registers a benchmark that skips with the reason (as
    attnbench-bench's SkipWithError), so the run goes on."""
    name = cid + ("/core" if case["mode"] == "decode" else "")
    label = dict(case, part="core" if case["mode"] == "decode" else "run")  # what it times, as attnbench-bench says
    try:
        provider = case["variant"]
        p = PROVIDERS.get(provider)
        if p and case["mode"] not in p.modes:
            raise RuntimeError(f"{provider} runs {', '.join(p.modes)}, not {case['mode']}")
        if p and case.get("device", "cpu") not in p.devices:
            raise RuntimeError(f"{provider} runs on {', '.join(p.devices)}, not {case.get('device', 'cpu')}")
        ok, why = available(provider) if p else (True, "")
        if not ok:  # not installed, or a CUDA-only peer with no CUDA device: its one line
            raise RuntimeError(why)
        make = factory(provider)
        d = tempfile.mkdtemp(prefix="attnbench-peer-", dir=args.workdir)
        peer_io(args.attnbench, case, d)
        peer = make(peer_case(case, args.fault), load_inputs(case, d, args.fault), int(case.get("threads", 1)))
        label["peer"] = peer.info
        shape = json.dumps({k: v for k, v in case.items() if k not in ("threads", "grids")}, sort_keys=True)
        if shape not in checked and not args.no_judge:
            for m in JUDGED_MAGNITUDES:
                judge(args, case, peer if m == 1 else None, make, d, m)
        checked.add(shape)
        fn, manual = peer_timer(peer.call, case.get("device", "cpu"))
        if manual:  # how a GPU time was taken, beside it (the report's "same L2 handling as ours")
            flushed = FLUSHES[case["device"]].buffer.numel() * 4
            label["peer"]["timer"] = (f"CUDA events around each call after {GPU_WARMUPS} warm-ups; before each, outside "
                                      f"the events, {flushed} bytes (2 x L2) written then read")
    except Exception as e:  # the case fails, the run goes on (as attnbench-bench's SkipWithError)
        msg = " ".join((f"{type(e).__name__}: {e}" if not isinstance(e, RuntimeError) else str(e)).split())  # one line
        print(f"{name}: error: {msg}", file=sys.stderr)

        def skipped(state, msg=msg):
            state.skip_with_error(msg)
            while state:
                pass
        fn, manual, peer = skipped, False, None
    text = json.dumps(label)

    def timed(state, fn=fn, text=text):
        fn(state)
        state.set_label(text)
    b = bench.RegisterBenchmark(name, timed).unit(gbench().kMillisecond)
    b = b.use_manual_time() if manual else b.use_real_time()
    return peer  # kept alive until the run ends


def gbench():
    import google_benchmark
    return google_benchmark


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
    ap.add_argument("--peak", help="ignored: the report derives a peer's figures from its times")
    ap.add_argument("--attnbench", default=os.environ.get("ATTNBENCH", os.path.join(ROOT, "build/release/attnbench")))
    ap.add_argument("--available", metavar="PROVIDER")
    ap.add_argument("--no-judge", action="store_true",
                    help="time without judging (a report's later rounds of shapes judged in its first)")
    ap.add_argument("--fault", choices=FAULTS, help="testing only: misconfigure the peer's inputs")
    args = ap.parse_args(rest)
    if args.available:
        ok, why = available(args.available)
        print(f"{args.available}: available" if ok else why)
        return 0 if ok else 77
    if not shutil.which(args.attnbench) and not os.path.exists(args.attnbench):
        raise SystemExit(f"harness.py: error: attnbench not found at {args.attnbench} (build it, or pass --attnbench)")
    try:
        bench = gbench()._benchmark
    except ImportError as e:
        raise SystemExit(f"harness.py: error: google_benchmark is not installed ({e}); run bash scripts/setup.sh")
    cases = with_ids(load_cases(args), args.attnbench)
    out = gb.pop("benchmark_out", None)
    with tempfile.TemporaryDirectory(prefix="attnbench-peers-") as work:
        args.workdir = work
        checked = set()
        peers = [register_case(bench, cid, case, args, checked) for cid, case in cases]
        tmp = out + ".tmp" if out else None
        # Google Benchmark 1.9 (the bindings') wants a unit on min_time, 1.7 (Debian's C++ library,
        # attnbench-bench's) reads plain seconds: the report passes seconds
        if "benchmark_min_time" in gb and gb["benchmark_min_time"][-1:].isdigit():
            gb["benchmark_min_time"] += "s"
        flags = [f"--{k}={v}" for k, v in gb.items()]
        if tmp:
            flags += [f"--benchmark_out={tmp}", "--benchmark_out_format=json"]
        bench.AddCustomContext("attnbench_peer_harness", "experiments/peers/harness.py")
        bench.AddCustomContext("attnbench_python", sys.version.split()[0])
        bench.Initialize([sys.argv[0]] + flags)
        bench.RunSpecifiedBenchmarks()
        del peers
    if tmp:
        os.replace(tmp, out)  # atomic, as attnbench-bench writes its JSON
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
