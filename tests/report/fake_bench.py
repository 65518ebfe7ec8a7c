#!/usr/bin/env python3
"""A stand-in for attnbench-bench that writes the harness's JSON contract in milliseconds.

The report's tests run it (attnbench report --bench tests/report/fake_bench.py) so that they
test the report -- the store, resume, failures, plots -- in seconds and without timing anything.
It takes the cases as attnbench-bench does (--case JSON, repeatable) and labels each case's
benchmarks with it. Its
"times" are a deterministic model, not measurements: a rate derived from the variant's name
(any registered name works). It also fails on purpose:
  n_q 63  the case's output "fails the reference check" (error_occurred, as the harness does)
  n_q 65  the process crashes (exit 3, a message on stderr, no JSON)
and says that the peak of the n_q 32 cases was measured while other processes kept 0.8 CPUs busy.
With FAKE_FMA_RATIO set it also writes an FMA probe at each case's thread count that read that
fraction of peak.json's peak (the probe the harness runs beside the cases: fma_drift).
"""
import argparse
import json
import os
import sys
import time
import zlib

p = argparse.ArgumentParser()
p.add_argument("--case", action="append", required=True)
p.add_argument("--peak")
p.add_argument("--benchmark_out")
p.add_argument("--benchmark_out_format")
p.add_argument("--benchmark_repetitions", type=int, default=1)
p.add_argument("--benchmark_min_time")
p.add_argument("--benchmark_color")
p.add_argument("--benchmark_enable_random_interleaving")
a = p.parse_args()
benchmarks = []
for text in a.case:
    case = json.loads(text)
    d, h, n, b, t = case["d_model"], case["heads"], case["n_q"], case["batch"], case["threads"]
    if n == 65:
        print("fake_bench: simulated crash", file=sys.stderr)
        sys.exit(3)
    dh = d // h
    rate = (1 + zlib.crc32(case["variant"].encode()) % 60) * 1e9
    core = 4.0 * b * h * n * n * dh
    flops = core + (8.0 * b * n * d * d if case["mode"] == "layer" else 0)
    full = flops + 6.0 * b * h * n * n
    seconds = full / rate * (1 + 0.05 * (64 // dh))  # narrower heads run slower, as on real machines
    label = json.dumps(dict(case, part="run"), separators=(",", ":"))
    name = f"{case['mode']}-{case['variant']}-fake"
    for r in range(a.benchmark_repetitions):
        e = dict(name=name, run_name=name, run_type="iteration", repetitions=a.benchmark_repetitions,
                 repetition_index=r, threads=1, iterations=10, real_time=seconds * 1e9 * (1 + 0.01 * r),
                 cpu_time=seconds * 1e9 * t, time_unit="ns", label=label)
        if n == 63:
            e.update(error_occurred=True, error_message=f"{case['variant']}: output differs from the reference (fake)")
        else:  # what only a harness knows; the report derives the rest from the time
            e.update(scratch_mib=1.0, peak_gflops=100.0, peak_load_cpus=0.8 if n == 32 else 0.0)
        benchmarks.append(e)
if os.environ.get("FAKE_FMA_RATIO"):
    for t in sorted({json.loads(text)["threads"] for text in a.case}):
        label = json.dumps(dict(probe="fma", part="probe", threads=t, accumulators=10), separators=(",", ":"))
        benchmarks.append(dict(name=f"probe/fma-t{t}", run_name=f"probe/fma-t{t}", run_type="iteration",
                               repetitions=1, repetition_index=0, threads=1, iterations=1, real_time=1e7,
                               cpu_time=1e7, time_unit="ns", label=label,
                               fma_ratio=float(os.environ["FAKE_FMA_RATIO"])))
out = dict(context=dict(date="fake", host_name="fake", executable="fake_bench.py", num_cpus=2,
                        library_build_type="release", attnbench_commit="fake"),
           benchmarks=benchmarks)
time.sleep(0.02)
with open(a.benchmark_out, "w") as f:
    json.dump(out, f, indent=1)
print(f"{len(a.case)} fake cases")
