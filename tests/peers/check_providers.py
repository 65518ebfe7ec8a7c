"""Tests of the peers' tables and CUDA helpers (experiments/peers): usage
  check_providers.py table               attn::peer_providers (experiments/modules/peers.cppm, read as text)
                                         against the harness's PROVIDERS and check_peers.py's tables:
                                         the same providers, modes, devices, precisions and windows,
                                         and every runner's factory defined in its module (no torch)
  check_providers.py masks               window.py's mask and kv_rows against the convention,
                                         brute force (NumPy only)
  check_providers.py cuda-helpers        on the CPU, with torch: the harness's L2 flush (its buffer,
                                         written then read), torch_cuda's FlexAttention mask_mod and
                                         block mask (tiles visited) against brute force, the kernel
                                         names, torch's refusal reasons, the math backend's limit;
                                         exit 77 without torch
  check_providers.py no-gpu ATTNBENCH WORKDIR
                                         the CUDA peers where there is no CUDA device: every case an
                                         error of one line ("no CUDA device ..." with torch, "not
                                         installed" without), none timed; a case on a device its
                                         provider does not run on refused in one line; exit 77 where
                                         a CUDA device is there
Expected values come from the convention written out here (loops over every pair), never from the
code under test."""
import json
import math
import os
import re
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
PEERS = os.path.join(ROOT, "experiments", "peers")
HARNESS = os.path.join(PEERS, "harness.py")
sys.path.insert(0, PEERS)
sys.path.insert(0, HERE)


def cpp_providers():
    """attn::peer_providers' rows as experiments/modules/peers.cppm writes them (designated initializers):
    name -> {modes, devices, precisions, windows, skips_tiles}."""
    with open(os.path.join(ROOT, "experiments", "modules", "peers.cppm")) as f:
        text = f.read()
    body = text[text.index("peer_providers() {"):text.index("return p;")]
    rows = {}
    for chunk in body.split('{.name = "')[1:]:
        name = chunk[:chunk.index('"')]

        def items(field, kind, chunk=chunk):
            m = re.search(r"\." + field + r" = \{([^}]*)\}", chunk)
            return tuple(re.findall(kind + r"::(\w+)", m.group(1))) if m else None

        def flag(field, chunk=chunk):
            m = re.search(r"\." + field + r" = (true|false)", chunk)
            return bool(m) and m.group(1) == "true"
        rows[name] = {"modes": items("modes", "mode"), "devices": items("devices", "device") or ("cpu",),
                      "precisions": items("precisions", "dtype") or ("f32",), "windows": flag("windows"),
                      "skips_tiles": flag("skips_tiles")}
    return rows


def test_table():
    import check_peers
    import harness

    cpp = cpp_providers()
    assert len(cpp) >= 9, f"read {len(cpp)} providers from experiments/modules/peers.cppm: {sorted(cpp)}"
    assert set(cpp) == set(harness.PROVIDERS), (sorted(cpp), sorted(harness.PROVIDERS))
    for name, row in cpp.items():
        p = harness.PROVIDERS[name]
        assert row["modes"] == tuple(p.modes), (name, row["modes"], p.modes)
        assert row["devices"] == tuple(p.devices), (name, row["devices"], p.devices)
        assert row["modes"] == check_peers.MODES[name], (name, "check_peers.MODES")
        assert row["devices"] == check_peers.DEVICES[name], (name, "check_peers.DEVICES")
        assert row["precisions"] == check_peers.PRECISIONS[name], (name, row["precisions"], "check_peers.PRECISIONS")
        assert row["windows"] == (name in check_peers.WINDOWS), (name, "windows")
        # the runner: its factory is defined in its module (read as text: no torch needed)
        with open(os.path.join(PEERS, p.module + ".py")) as f:
            src = f.read()
        assert re.search(r"^(def " + p.factory + r"\(|[\w, ]*\b" + p.factory + r"\b[\w, ]* = )", src, re.M), \
            f"{name}: {p.module}.py defines no {p.factory}"
        if "cpu" not in p.devices:  # a CUDA-only peer's module says why it cannot run, for --available
            assert re.search(r"\bcuda_missing\b", src), f"{name}: {p.module}.py has no cuda_missing"
    only = sorted(n for n, r in cpp.items() if r["skips_tiles"])
    assert only == ["torch-flex"], f"providers that skip tiles: {only}"
    cuda = sorted(n for n, r in cpp.items() if "cuda" in r["devices"])
    print(f"{len(cpp)} providers agree (modes, devices, precisions, windows, factories); on CUDA: {', '.join(cuda)}")
    return 0


def visible(n_q, n_kv, w, causal):
    """The convention, pair by pair: query i's last key is e = i + n_kv - n_q (bottom-right); a
    window W keeps e - W < j <= e; causal j <= e; neither every pair."""
    out = np.zeros((n_q, n_kv), dtype=bool)
    for i in range(n_q):
        e = i + n_kv - n_q
        for j in range(n_kv):
            out[i, j] = (e - w < j <= e) if w else (j <= e) if causal else True
    return out


def test_masks():
    import window

    checked = 0
    for n_q, n_kv, w in ((37, 37, 1), (37, 37, 5), (37, 37, 37), (37, 37, 50), (9, 20, 7), (20, 9, 4), (1, 33, 16)):
        case = dict(mode="core", n_q=n_q, n_kv=n_kv, window=w, causal=True)
        m = window.mask(case)
        assert m.shape == (n_q, n_kv) and m.dtype == bool, m.shape
        assert (m == visible(n_q, n_kv, w, True)).all(), (n_q, n_kv, w)
        assert window.kv_rows(case) == n_kv
        checked += 1
    assert window.mask(dict(mode="core", n_q=8, n_kv=8, window=0, causal=True)) is None
    # decode: no mask (the trimmed rows are the window), the cache's last W rows, or all of a short one
    assert window.mask(dict(mode="decode", n_q=1, n_kv=33, window=16)) is None
    assert window.kv_rows(dict(mode="decode", n_q=1, n_kv=33, window=16)) == 16
    assert window.kv_rows(dict(mode="decode", n_q=1, n_kv=10, window=16)) == 10
    assert window.kv_rows(dict(mode="decode", n_q=1, n_kv=33, window=0)) == 33
    print(f"window.mask: {checked} shapes match the convention pair by pair; kv_rows: 5 cases")
    return 0


def tiles_visited(n_q, n_kv, w, causal, block):
    """Brute force: the block x block tiles holding at least one visible pair, and all tiles."""
    v = visible(n_q, n_kv, w, causal)
    nq, nk = math.ceil(n_q / block), math.ceil(n_kv / block)
    hit = sum(bool(v[a * block:(a + 1) * block, b * block:(b + 1) * block].any()) for a in range(nq) for b in range(nk))
    return hit, nq * nk


def test_cuda_helpers():
    try:
        import torch
    except ImportError:
        print("skipped: torch is not installed (bash scripts/peers.sh)")
        return 77
    import harness
    import torch_cuda
    from torch_peers import short_kernel

    # the L2 flush: a float32 buffer of twice the L2, every element written, then all read back
    l2 = 3 << 20  # 3 MiB
    flush = harness.l2_flush("cpu", l2)
    buf = flush.buffer
    assert buf.dtype == torch.float32 and buf.numel() * 4 == 2 * l2, (buf.dtype, buf.numel())
    values = []
    for _ in range(3):
        total = flush()
        v = float(buf[0])
        assert bool((buf == v).all()), "the flush left elements unwritten"
        assert float(total) == v * (2 * l2 // 4), (float(total), v)
        values.append(v)
    assert values[0] != values[1] and values[0] == values[2], values  # alternates between calls

    # FlexAttention's mask_mod over every pair, and the tiles its block mask visits
    shapes = ((37, 37, 5, True), (37, 37, 0, True), (9, 20, 7, True), (20, 9, 0, True), (300, 300, 40, True),
              (200, 333, 64, True), (64, 64, 0, False))
    for n_q, n_kv, w, causal in shapes:
        case = dict(mode="core", n_q=n_q, n_kv=n_kv, window=w, causal=causal)
        mod = torch_cuda.flex_mask(case)
        if not w and not causal:
            assert mod is None
            continue
        got = mod(0, 0, torch.arange(n_q)[:, None], torch.arange(n_kv)[None, :])
        assert (got.numpy() == visible(n_q, n_kv, w, causal)).all(), case
    blocks = []
    for n_q, n_kv, w, causal in shapes:
        case = dict(mode="core", n_q=n_q, n_kv=n_kv, window=w, causal=causal)
        for block in (16, 128):
            bm, visited, total = torch_cuda.block_mask(case, "cpu", block)
            assert (visited, total) == tiles_visited(n_q, n_kv, w, causal, block), (case, block, visited, total)
            assert (bm is None) == (not w and not causal)
            blocks.append(f"{n_q}x{n_kv} W {w} {'causal' if causal else 'full'} /{block}: {visited} of {total}")

    # kernel names as the info records them
    for name, short in (
            ("void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4, false, false, "
             "cutlass::bfloat16_t>, false, true>(pytorch_flash::Flash_fwd_params)", "pytorch_flash::flash_fwd_kernel<>"),
            ("fmha_cutlassF_bf16_aligned_64x64_rf_sm80(PyTorchMemEffAttention::AttentionKernel<>::Params)",
             "fmha_cutlassF_bf16_aligned_64x64_rf_sm80"),
            ("void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float>(float*, float const*, int)",
             "at::native::(anonymous namespace)::cunn_SoftMaxForward<>"),
            ("triton_tem_fused_0", "triton_tem_fused_0")):
        assert short_kernel(name) == short, (name, short_kernel(name))

    # torch's reasons for the forced backend alone, one line, out of what select_sdp_backend warns
    tail = " (Triggered internally at /pytorch/aten/src/ATen/native/transformers/cuda/sdp_utils.cpp:900.)"
    warned = ["Memory efficient kernel not used because:" + tail, "Memory Efficient attention has been runtime "
              "disabled." + tail, "Flash attention kernel not used because:" + tail,
              "Flash attention requires q,k,v to have the same last dimension and to be less than or equal to 256.\n"
              " Got Query.size(-1): 512, Key.size(-1): 512, Value.size(-1): 512 instead." + tail,
              "Flash attention has been runtime disabled." + tail, "cuDNN attention kernel not used because:" + tail,
              "cuDNN attention has been runtime disabled." + tail]
    want = ("Flash attention requires q,k,v to have the same last dimension and to be less than or equal to 256. "
            "Got Query.size(-1): 512, Key.size(-1): 512, Value.size(-1): 512 instead; Flash attention has been "
            "runtime disabled")
    assert torch_cuda.backend_reasons(warned, "flash") == want, torch_cuda.backend_reasons(warned, "flash")
    assert torch_cuda.backend_reasons(warned, "cudnn") == "cuDNN attention has been runtime disabled"
    assert torch_cuda.backend_reasons([], "efficient") == ""

    # the math backend: three fp32 score tensors within half the memory (sizes worked by hand)
    gib = 1 << 30
    assert torch_cuda.math_fits(8, 16, 4096, 4096, 80 * gib)[0]          # 8 GiB of scores, 24 within 40
    fits, line = torch_cuda.math_fits(8, 16, 8192, 8192, 80 * gib)       # 32 GiB, 96 over 40
    assert not fits and "32.0 GiB" in line and "96.0 GiB" in line and "\n" not in line, line
    assert torch_cuda.math_fits(1, 1, 1, 1 << 20, 1 * gib)[0]
    print(f"l2_flush: {2 * l2} bytes written then read, values {values}; flex_mask: {len(shapes) - 1} shapes pair by "
          f"pair; block masks: {len(blocks)} tile counts ({'; '.join(blocks[:4])}; ...); short_kernel: 4 names; "
          f"backend_reasons: 3; math_fits: 3")
    return 0


def gpu_present():
    try:
        import torch
    except ImportError:
        return None, False
    return torch, torch.cuda.is_available()


def test_no_gpu(ab, work):
    import check_peers
    import harness

    torch, gpu = gpu_present()
    if gpu:
        print("skipped: a CUDA device is here (the peer.torch-sdpa-* and peer.torch-flex tests run the CUDA peers)")
        return 77
    os.makedirs(work, exist_ok=True)
    core = dict(mode="core", d_model=64, heads=4, kv_heads=2, batch=2, threads=1, n_q=20, causal=True)
    cuda_only = [n for n, p in harness.PROVIDERS.items() if "cpu" not in p.devices]
    cs = [dict(core, variant=n, device="cuda", precision=check_peers.PRECISIONS[n][0]) for n in cuda_only]
    cs.append(dict(check_peers.cases("torch-mla")[0], device="cuda"))
    wrong = [dict(core, variant="torch-sdpa-cudnn", device="cpu", precision="bf16"),
             dict(core, variant="torch-sdpa", device="cuda"), dict(core, variant="ort-attention", device="cuda")]
    path = os.path.join(work, "cases.json")
    with open(path, "w") as f:
        json.dump(cs + wrong, f)
    out = os.path.join(work, "out.json")
    r = subprocess.run([sys.executable, HARNESS, "--cases", path, "--attnbench", ab, "--benchmark_repetitions=1",
                        "--benchmark_min_time=0.001", "--benchmark_out=" + out], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-3000:]
    with open(out) as f:
        bs = json.load(f)["benchmarks"]
    by_variant = {}
    for b in bs:
        assert b.get("error_occurred") and not b.get("real_time"), f"{b['name']} ran without a CUDA device"
        msg = b["error_message"]
        assert msg and "\n" not in msg, msg
        by_variant.setdefault((json.loads(b["label"])["variant"], json.loads(b["label"]).get("device")), msg)
    for c in cs:
        msg = by_variant[(c["variant"], "cuda")]
        if torch is None:
            assert "torch" in msg and ("not installed" in msg or "No module named" in msg), msg
        else:
            assert "no CUDA device" in msg, msg
    assert by_variant[("torch-sdpa-cudnn", "cpu")] == "torch-sdpa-cudnn runs on cuda, not cpu"
    assert by_variant[("torch-sdpa", "cuda")] == "torch-sdpa runs on cpu, not cuda"
    assert by_variant[("ort-attention", "cuda")] == "ort-attention runs on cpu, not cuda"
    for n in cuda_only:  # --available: 77 with the one line a report puts in peers.json
        r = subprocess.run([sys.executable, HARNESS, "--available", n], capture_output=True, text=True)
        line = r.stdout.strip()
        assert r.returncode == 77 and "\n" not in line and line.startswith(n + ":"), (n, r.returncode, line)
        assert ("no CUDA device" in line) if torch is not None else ("not installed" in line), line
    print(f"{len(cs)} CUDA cases each refused in one line ({'torch ' + torch.__version__ if torch else 'no torch'}), "
          f"e.g. {by_variant[(cs[0]['variant'], 'cuda')]!r}; 3 cases on the wrong device refused; "
          f"--available: 77 for {len(cuda_only)} CUDA peers")
    return 0


if __name__ == "__main__":
    what = sys.argv[1]
    if what == "table":
        sys.exit(test_table())
    if what == "masks":
        sys.exit(test_masks())
    if what == "cuda-helpers":
        sys.exit(test_cuda_helpers())
    if what == "no-gpu":
        sys.exit(test_no_gpu(sys.argv[2], sys.argv[3]))
    sys.exit(f"check_providers.py: unknown test '{what}' (table, masks, cuda-helpers, no-gpu)")
