"""Validates an attnbench-bench JSON file: every expected case ran (no error), the counters
are present and positive, the FMA probe ran at each of the cases' thread counts and every case
was paired with its median (pct_peak_alongside = pct_peak / fma_drift), and the context carries
the metadata.

usage: check_bench.py FILE.json EXPECTED_CASES
"""
import json
import statistics
import sys

from bench_json import load_runs

path, expected = sys.argv[1], int(sys.argv[2])
d, all_runs = load_runs(path)
probes = [b for b in all_runs if json.loads(b["label"]).get("probe") == "fma"]
runs = [b for b in all_runs if b not in probes]
assert len(runs) == expected, f"{len(runs)} cases ran, expected {expected}"
for b in runs:
    for c in ("gflops_matmul", "gflops_full", "pct_peak", "peak_gflops", "intensity", "bytes", "scratch_mib", "extra_mib"):
        assert c in b, f"{b['name']}: counter {c} missing"
    for c in ("gflops_matmul", "gflops_full", "pct_peak", "peak_gflops"):
        assert b[c] > 0, f"{b['name']}: {c} = {b[c]}"
    case = json.loads(b["label"])  # the harness labels each benchmark with its case, as JSON
    assert case["variant"] and case["threads"] >= 1 and b["name"].startswith(case["mode"] + "-"), b["label"]
    # the probe's median ratio at the case's threads, and the share it gives
    ratios = [p["fma_ratio"] for p in probes if json.loads(p["label"])["threads"] == case["threads"]]
    assert ratios and all(p["fma_gflops"] > 0 for p in probes), f"{b['name']}: no FMA probe at its threads"
    assert abs(b["fma_drift"] - statistics.median(ratios)) <= 1e-9 * b["fma_drift"], (b["name"], b["fma_drift"])
    assert abs(b["pct_peak_alongside"] * b["fma_drift"] - b["pct_peak"]) <= 1e-6 * b["pct_peak"], b["name"]
ctx = d["context"]
for k in ("attnbench_commit", "attnbench_compiler", "attnbench_flags", "attnbench_seed", "attnbench_threads",
          "attnbench_cpu_model", "attnbench_blas", "attnbench_peak_fma_gflops_1_thread"):
    assert ctx.get(k), f"context lacks {k}"
print(f"{len(runs)} cases, all checked against the reference and timed; counters and metadata present")
