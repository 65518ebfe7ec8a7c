"""Tests of the peers (experiments/peers): usage
  check_peers.py run PROVIDER[@DEVICE] ATTNBENCH WORKDIR
                                                   a tiny grid through the peer harness on the
                                                   provider's device (or DEVICE: torch-mla@cuda);
                                                   every case judged and timed, the schema the
                                                   report reads (on CUDA: the backend, the kernels,
                                                   the masking, the timer's L2 flush)
  check_peers.py fault FAULT ATTNBENCH WORKDIR [PRECISION [PROVIDER]]
                                                   the first installed provider serving PRECISION
                                                   (f32 unless given; PROVIDER if given)
                                                   misconfigured (scale 1% off, key/value heads
                                                   mixed up, a window one key longer on windowed
                                                   cases): every judged case must fail, loudly,
                                                   and not be timed
  check_peers.py judge ATTNBENCH WORKDIR           `attnbench peer-io --judge` on NumPy outputs:
                                                   right ones pass, a 1%-off scale and a GQA
                                                   mix-up fail (needs only NumPy)
Exit 77 (skipped, with the reason) when a provider's library is not installed, or it runs on CUDA
alone and there is no CUDA device. The tables below are attn::peer_providers' (experiments/modules/peers.cppm);
tests/peers/check_providers.py holds them to it."""
import json
import os
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
HARNESS = os.path.join(HERE, "..", "..", "experiments", "peers", "harness.py")
SDPA_CUDA = ("torch-sdpa-flash", "torch-sdpa-efficient", "torch-sdpa-cudnn", "torch-sdpa-math")
MODES = {"torch-sdpa": ("core", "decode"), "torch-mha": ("layer",), "torch-mla": ("layer",),
         "ort-attention": ("core", "decode"), "torch-flex": ("core",), **{p: ("core", "decode") for p in SDPA_CUDA}}
# the precisions each provider serves (attn::peer_providers) and one it refuses, if any
PRECISIONS = {"torch-sdpa": ("f32", "bf16", "f16"), "torch-mha": ("f32",), "torch-mla": ("f32",),
              "ort-attention": ("f32",), "torch-sdpa-flash": ("bf16", "f16"),
              "torch-sdpa-efficient": ("f32", "bf16", "f16"), "torch-sdpa-cudnn": ("bf16", "f16"),
              "torch-sdpa-math": ("f32", "bf16", "f16"), "torch-flex": ("bf16", "f16")}
REFUSED = {"ort-attention": "bf16"}
# the providers that take a sliding window (attn::peer_provider::windows)
WINDOWS = ("torch-sdpa", "ort-attention", "torch-sdpa-efficient", "torch-sdpa-cudnn", "torch-sdpa-math", "torch-flex")
# the devices each runs on (attn::peer_provider::devices); the run test gives a provider its cases
# on its first device (torch-mla: the CPU's; its CUDA cases are run by `run torch-mla@cuda`)
DEVICES = {**{p: ("cpu",) for p in ("torch-sdpa", "torch-mha", "ort-attention")}, "torch-mla": ("cpu", "cuda"),
           **{p: ("cuda",) for p in SDPA_CUDA + ("torch-flex",)}}
# cases a provider may refuse in one line (its backend's own reasons) rather than run: the
# efficient backend refused G < H on torch 2.11 on an H100 (shared/notes/h100-measured.md)
MAY_REFUSE = {"torch-sdpa-efficient": lambda c: c.get("kv_heads", c["heads"]) != c["heads"]}


def windowed(provider):
    """A window on the core (N_q = N_kv and N_q < N_kv) and over a decode cache, G 4 and 2 (the
    modes the provider runs, on its device, in its first precision)."""
    out = []
    for g in (4, 2):
        out.append(dict(variant=provider, mode="core", d_model=64, heads=4, kv_heads=g, batch=2, threads=1,
                        causal=True, window=7, n_q=20))
        out.append(dict(variant=provider, mode="core", d_model=64, heads=4, kv_heads=g, batch=2, threads=1,
                        causal=True, window=7, n_q=9, n_kv=20))
        out.append(dict(variant=provider, mode="decode", d_model=64, heads=4, kv_heads=g, batch=2, threads=1,
                        window=16, context=33))
    return [dict(c, device=DEVICES[provider][0], precision=PRECISIONS[provider][0]) for c in out
            if c["mode"] in MODES[provider]]


def cases(provider, precisions=None, fault=None, device=None):
    device = device or DEVICES[provider][0]
    if fault == "window":
        return windowed(provider)
    out = []
    if provider == "torch-mla":  # MLA's layer: both forms, with and without a query latent, causal or not
        for form in ("naive", "absorb"):
            for q_rank in (0, 8):
                for causal in (False, True):
                    out.append(dict(variant=provider, mode="layer", family="mla", form=form, d_model=64, heads=4,
                                    d_head=12, d_v=8, kv_lora_rank=16, q_lora_rank=q_rank, qk_rope_head_dim=4,
                                    batch=2, n_q=20, threads=1, causal=causal, device=device))
        out.append(dict(out[0], threads=2))
        return out
    # FlexAttention compiles each shape and type (seconds each): its second precision on one shape
    flex = provider == "torch-flex"
    for i, prec in enumerate(precisions or PRECISIONS[provider]):
        for mode in MODES[provider]:
            for g in ((4,) if provider == "torch-mha" else (2,) if flex and i else (4, 2) if flex else (4, 2, 1)):
                for causal in ((False,) if mode == "decode" else (True,) if flex and i else (False, True)):
                    c = dict(variant=provider, mode=mode, precision=prec, d_model=64, heads=4, kv_heads=g, batch=2,
                             threads=1, causal=causal, device=device)
                    c["context" if mode == "decode" else "n_q"] = 33 if mode == "decode" else 20
                    out.append(c)
    out.append(dict(out[0], threads=2))  # a second thread count of the first shape: judged once
    if provider in WINDOWS and precisions is None:
        out += windowed(provider)
    return out


def base_name(b):
    """A benchmark's name without Google Benchmark's time-type suffix (/real_time, /manual_time)."""
    name = b.get("run_name", b["name"])
    for suffix in ("/real_time", "/manual_time"):
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name


def available(provider):
    r = subprocess.run([sys.executable, HARNESS, "--available", provider], capture_output=True, text=True)
    return r.returncode == 0, r.stdout.strip()


def skips_tiles(provider, c):
    """Whether a CUDA peer's run of case c skips masked tiles: FlexAttention's block mask under
    causal or a window; the fused SDPA backends under is_causal (the core without a window: a window
    is a boolean mask, every pair scored); the math backend never."""
    masked, window = bool(c.get("causal")) and c["mode"] == "core", bool(c.get("window"))
    if provider == "torch-flex":
        return masked or window
    return provider in ("torch-sdpa-flash", "torch-sdpa-efficient", "torch-sdpa-cudnn") and masked and not window


def cuda_missing():
    """Why no CUDA device can run a peer here (one line), or None when there is one."""
    try:
        import torch
    except ImportError:
        return "torch is not installed (bash scripts/peers.sh)"
    return None if torch.cuda.is_available() else f"no CUDA device (torch {torch.__version__})"


def run(provider, ab, work, fault=None, precisions=None, device=None):
    os.makedirs(work, exist_ok=True)
    cs = cases(provider, precisions, fault, device)
    with open(os.path.join(work, "cases.json"), "w") as f:
        json.dump(cs, f)
    out = os.path.join(work, f"{provider}.json")
    cmd = [sys.executable, HARNESS, "--cases", os.path.join(work, "cases.json"), "--attnbench", ab,
           "--benchmark_repetitions=2", "--benchmark_min_time=0.001", "--benchmark_out=" + out]
    if fault:
        cmd += ["--fault", fault]
    r = subprocess.run(cmd, capture_output=True, text=True)
    sys.stderr.write(r.stderr[-4000:])
    assert r.returncode == 0, f"harness exit {r.returncode}"
    with open(out) as f:
        return cs, json.load(f)["benchmarks"]


def test_run(provider, ab, work):
    """PROVIDER, or PROVIDER@DEVICE for a provider of several devices (torch-mla@cuda)."""
    provider, _, device = provider.partition("@")
    device = device or DEVICES[provider][0]
    ok, why = available(provider)
    if ok and device == "cuda" and cuda_missing():
        ok, why = False, f"{provider}: {cuda_missing()}"
    if not ok:
        print("skipped:", why)
        return 77
    cs, bs = run(provider, ab, work, device=device)
    ids = [json.loads(subprocess.check_output([ab, "peer-io", "--case", json.dumps(c), "--id-only"]))["id"]
           for c in cs]
    refused = []
    for c, cid in zip(cs, ids):
        name = cid + ("/core" if c["mode"] == "decode" else "")
        errors = [b for b in bs if base_name(b) == name and b.get("error_occurred")]
        if errors and MAY_REFUSE.get(provider, lambda c: False)(c):
            # a backend that cannot run a case fails it in one line that says why, never timed
            msg = errors[0]["error_message"]
            assert msg.startswith(provider + ":") and "\n" not in msg and not errors[0].get("real_time"), msg
            refused.append(f"{name}: {msg}")
            continue
        mine = [b for b in bs if base_name(b) == name and b["run_type"] == "iteration"]
        assert len(mine) == 2, f"{name}: {len(mine)} repetitions, expected 2"
        median = [b for b in bs if base_name(b) == name and b.get("aggregate_name") == "median"]
        assert len(median) == 1, f"{name}: no median aggregate (Google Benchmark writes one)"
        for b in mine:
            assert not b.get("error_occurred"), f"{name}: {b.get('error_message')}"
            label = json.loads(b["label"])
            assert label["variant"] == provider and label["threads"] == c["threads"], label
            peer = label["peer"]
            assert peer["version"] and peer["kernel"] and peer["threads"] == c["threads"], peer
            assert label.get("device", "cpu") == device, label
            if device == "cuda":  # the record a CUDA result carries: the card, the backend, the masking
                assert peer["device"] and peer["backend"] and "GPU kernels: " in peer["kernel"], peer
                assert "2 x L2" in peer["timer"] and b["name"].endswith("/manual_time"), (peer, b["name"])
                if provider != "torch-mla":
                    assert isinstance(peer["skips_masked_tiles"], bool) and peer["masking"], peer
                    assert peer["skips_masked_tiles"] == skips_tiles(provider, c), (c, peer)
            assert b["real_time"] > 0 and b["iterations"] >= 1
            # peers produce times: every figure is the report's C++ (attn.figures)
            assert not any(k in b for k in ("gflops_matmul", "bytes", "intensity", "kv_gbs", "pct_peak")), b
    print(f"{provider} on {device}: {len(cs) - len(refused)} of {len(cs)} cases ({', '.join(PRECISIONS[provider])}) "
          f"judged and timed, {len(bs)} benchmarks; kernel: "
          f"{sorted({json.loads(b['label'])['peer']['kernel'] for b in bs if 'peer' in json.loads(b['label'])})}")
    for line in refused:
        print("refused, as the backend may:", line)
    if provider in REFUSED:  # a precision it does not serve: every case an error saying so, none timed
        _, bs = run(provider, ab, work, precisions=(REFUSED[provider],))
        assert bs and all(b.get("error_occurred") and f"does not serve {REFUSED[provider]}" in b["error_message"]
                          and not b.get("real_time") for b in bs), bs
        print(f"{provider} in {REFUSED[provider]}: {len(bs)} cases refused: {bs[0]['error_message']}")
    return 0


def test_fault(fault, ab, work, precision="f32", provider=None):
    if provider:  # a given provider (a CUDA one: torch-flex, torch-sdpa-cudnn, ...)
        ok, why = available(provider)
        if not ok:
            print("skipped:", why)
            return 77
    provider = provider or next((p for p in ("ort-attention", "torch-sdpa")
                                 if precision in PRECISIONS[p] and (fault != "window" or p in WINDOWS)
                                 and available(p)[0]), None)
    if not provider:
        print(f"skipped: no installed peer serves {precision} (bash scripts/peers.sh)")
        return 77
    cs, bs = run(provider, ab, work, fault, precisions=(precision,))
    mixed = [c for c in cs if fault == "scale" or c["kv_heads"] > 1]  # G = 1 has nothing to mix up
    failed = [b for b in bs if b.get("error_occurred")]
    assert all("differs from the fp64 reference" in b["error_message"] for b in failed), failed
    assert len(failed) >= len({json.dumps({k: v for k, v in c.items() if k != "threads"}) for c in mixed}), \
        f"{len(failed)} cases failed, expected every misconfigured shape to"
    assert not any(b.get("real_time") for b in failed), "a failed peer was timed"
    print(f"{provider} in {precision} with fault '{fault}': {len({base_name(b) for b in failed})} of {len(cs)} cases "
          f"refused: "
          f"{failed[0]['error_message']}")
    return 0


def attention(q, k, v, scale, mapping):
    B, N, H, d = q.shape
    G = k.shape[2]
    out = np.zeros((B, N, H, d))
    for h in range(H):
        g = mapping(h, H, G)
        s = np.einsum("bid,bjd->bij", q[:, :, h].astype(np.float64), k[:, :, g].astype(np.float64)) * scale
        p = np.exp(s - s.max(-1, keepdims=True))
        out[:, :, h] = np.einsum("bij,bjd->bid", p / p.sum(-1, keepdims=True), v[:, :, g])
    return out.astype(np.float32)


def test_judge(ab, work):
    os.makedirs(work, exist_ok=True)
    case = dict(variant="numpy", mode="core", d_model=64, heads=4, kv_heads=2, n_q=24, batch=2, threads=1)
    subprocess.check_call([ab, "peer-io", "--case", json.dumps(case), "--dir", work])
    q, k, v = (np.load(os.path.join(work, n + ".npy")) for n in "qkv")
    d = q.shape[-1]
    right = lambda h, H, G: h * G // H  # noqa: E731
    tiled = lambda h, H, G: h % G  # noqa: E731  (the other mapping a GQA kernel could use)
    verdicts = {}
    for name, out in (("right", attention(q, k, v, d ** -0.5, right)),
                      ("scale 1% off", attention(q, k, v, 1.01 * d ** -0.5, right)),
                      ("heads mixed up", attention(q, k, v, d ** -0.5, tiled))):
        path = os.path.join(work, "out.npy")
        np.save(path, out)
        r = subprocess.run([ab, "peer-io", "--case", json.dumps(case), "--dir", work, "--judge", path],
                           capture_output=True, text=True)
        print(name, "->", r.returncode, r.stdout.strip())
        verdicts[name] = r.returncode
    assert verdicts == {"right": 0, "scale 1% off": 1, "heads mixed up": 1}, verdicts
    return 0


if __name__ == "__main__":
    what = sys.argv[1]
    if what == "run":
        sys.exit(test_run(sys.argv[2], sys.argv[3], sys.argv[4]))
    if what == "fault":
        sys.exit(test_fault(*sys.argv[2:7]))
    sys.exit(test_judge(sys.argv[2], sys.argv[3]))
