"""Validates attnbench-bench's decode mode on a grid: every case ran its whole step (ID) and its
attention core (ID/core), checked and timed; a triad and a read probe ran beside them and every
core was paired with them; the counters are present, positive and consistent with the case (cache
bytes 2 B G d_head (L+1) 4, the byte ratio H/G, the shares of the probes alongside, the roofline
under the read ceiling).

usage: check_decode_bench.py FILE.json EXPECTED_CASES
"""
import json
import math
import sys

from bench_json import load_runs

path, expected = sys.argv[1], int(sys.argv[2])
d, runs = load_runs(path)
triads = [b for b in runs if json.loads(b["label"]).get("probe") == "triad"]
assert triads and all(b["triad_gbs"] > 0 for b in triads), "no triad ran beside the decode cases"
reads = [b for b in runs if json.loads(b["label"]).get("probe") == "read"]
assert reads and all(b["read_gbs"] > 0 for b in reads), "no read probe ran beside the decode cases"
steps, cores = {}, {}
for b in runs:
    label = json.loads(b["label"])
    if "probe" in label:
        continue
    assert label["mode"] == "decode", b["name"]
    (cores if "/core" in b["run_name"] else steps).setdefault(b["run_name"].split("/")[0], []).append((label, b))
assert len(steps) == expected and set(cores) == set(steps), (len(steps), sorted(steps), sorted(cores))
for name, reps in steps.items():
    for case, b in reps:
        cache = 2 * case["batch"] * case["kv_heads"] * case["d_head"] * (case["context"] + 1) * 4
        assert math.isclose(b["cache_mib"], cache / 2**20, rel_tol=1e-9), (name, b["cache_mib"])
        assert math.isclose(b["cache_ratio_to_mha"], case["heads"] / case["kv_heads"]), name
        assert math.isclose(b["intensity"], case["heads"] / (2 * case["kv_heads"])), name
        for c in ("us_per_token", "tokens_per_s", "gflops_matmul", "step_gbs", "weight_mib", "peak_gflops"):
            assert b[c] > 0, f"{name}: {c} = {b[c]}"
        assert math.isclose(b["us_per_token"] * case["batch"], b["real_time"] * 1e3, rel_tol=1e-6), name  # ms -> us
for name, reps in cores.items():
    for case, b in reps:
        for c in ("core_us", "kv_gbs", "pct_triad", "pct_read", "roof_gbs", "pct_roof", "triad_alongside_gbs",
                  "pct_triad_alongside", "read_alongside_gbs", "pct_read_alongside", "pct_roof_alongside"):
            assert b[c] > 0, f"{name}/core: {c} = {b[c]}"
        assert math.isclose(b["pct_triad_alongside"], 100 * b["kv_gbs"] / b["triad_alongside_gbs"], rel_tol=1e-9)
        assert math.isclose(b["pct_read_alongside"], 100 * b["kv_gbs"] / b["read_alongside_gbs"], rel_tol=1e-9)
        assert b["roof_gbs"] <= b["read_ceiling_gbs"] * (1 + 1e-12) and b["arith_roof_gbs"] > 0, name
        # the roofline of the same run: the read probe's and the FMA peak times the FMA probe's drift
        assert 0.2 < b["fma_drift"] < 5, (name, b["fma_drift"])
        roof = min(b["read_alongside_gbs"], b["peak_gflops"] * b["fma_drift"] / b["intensity"])
        assert math.isclose(b["roof_alongside_gbs"], roof, rel_tol=1e-9), (name, b["roof_alongside_gbs"], roof)
        # roof_arith names the side of that roofline: the FMAs' side lies below the read probe's
        if b["roof_arith"] == 1:
            assert b["roof_alongside_gbs"] < b["read_alongside_gbs"], (name, b["roof_alongside_gbs"])
        else:
            assert b["roof_arith"] == 0 and b["roof_alongside_gbs"] == b["read_alongside_gbs"], (name, b["roof_arith"])
print(f"{len(steps)} decode cases: step and core checked and timed, counters consistent, probes paired")
