"""Validates an attnbench-bench JSON file: every expected case ran (no error), the counters
are present and positive, and the context carries the metadata.

usage: check_bench.py FILE.json EXPECTED_CASES
"""
import json
import sys

from bench_json import load_runs

path, expected = sys.argv[1], int(sys.argv[2])
d, runs = load_runs(path)
assert len(runs) == expected, f"{len(runs)} cases ran, expected {expected}"
for b in runs:
    for c in ("gflops_matmul", "gflops_full", "pct_peak", "peak_gflops", "intensity", "bytes", "scratch_mib", "extra_mib"):
        assert c in b, f"{b['name']}: counter {c} missing"
    for c in ("gflops_matmul", "gflops_full", "pct_peak", "peak_gflops"):
        assert b[c] > 0, f"{b['name']}: {c} = {b[c]}"
    case = json.loads(b["label"])  # the harness labels each benchmark with its case, as JSON
    assert case["variant"] and case["threads"] >= 1 and b["name"].startswith(case["mode"] + "-"), b["label"]
ctx = d["context"]
for k in ("attnbench_commit", "attnbench_compiler", "attnbench_flags", "attnbench_seed", "attnbench_threads",
          "attnbench_cpu_model", "attnbench_blas", "attnbench_peak_fma_gflops_1_thread"):
    assert ctx.get(k), f"context lacks {k}"
print(f"{len(runs)} cases, all checked against the reference and timed; counters and metadata present")
