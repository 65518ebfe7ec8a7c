#!/usr/bin/env bash
# attnbench report on a tiny decode sweep (tests/report/decode.toml) through the real harness:
# one record per case, the G of one (batch, L) run together with the FMA, triad and read probes
# beside them, the decode counters in perf.csv (the roofline alongside recomputed from them), and
# report.md with one decoding section, its four figures and the cache's type table and figure.
# usage: decode_report.sh ATTNBENCH PYTHON WORKDIR
set -euo pipefail
ab=$1 py=$2 work=$3
here=$(cd "$(dirname "$0")" && pwd)
rm -rf "$work" && mkdir -p "$work"
"$ab" report --sweep "$here/decode.toml" --out "$work/run" 2>"$work/stderr" || {
    cat "$work/stderr"; echo "FAIL: report exited $?"; exit 1; }
"$py" - "$work/run" <<'PY'
import csv, json, os, sys
run = sys.argv[1]
rows = list(csv.DictReader(open(os.path.join(run, "perf.csv"))))
assert len(rows) == 14 and all(r["status"] == "ok" and r["mode"] == "decode" for r in rows), rows
for r in rows:
    for c in ("time_ms", "core_time_ms", "us_per_token", "kv_gbs", "pct_triad", "pct_roof", "cache_mib", "weight_mib",
              "gflops_matmul", "triad_alongside_gbs", "pct_triad_alongside", "cache_ratio_to_mha", "read_ceiling_gbs",
              "pct_read", "read_alongside_gbs", "pct_read_alongside", "roof_alongside_gbs", "pct_roof_alongside"):
        assert r[c] and float(r[c]) > 0, (r["id"], c, r[c])
    # the roofline of the same run: the read probe's, and the FMA peak times the FMA probe's drift
    f = {c: float(r[c]) for c in ("read_alongside_gbs", "peak_gflops", "fma_drift", "intensity", "roof_alongside_gbs")}
    roof = min(f["read_alongside_gbs"], f["peak_gflops"] * f["fma_drift"] / f["intensity"])
    assert abs(f["roof_alongside_gbs"] - roof) <= 1e-6 * roof, (r["id"], f, roof)
perf = json.load(open(os.path.join(run, "perf.json")))["cases"]
assert set(perf[0]) >= set(rows[0]), "perf.csv has columns perf.json lacks"
for r in perf:
    rec = json.load(open(os.path.join(run, "cases", r["id"] + ".json")))
    # the fp32 grid's G of one (batch, L) run together; each int8 case alone
    together = 3 if r["precision"] == "f32" else 1
    assert rec["case"]["kv_heads"] == r["kv_heads"] and len(rec.get("run_with", [r["id"]])) == together, rec.get("run_with")
    names = {b["run_name"].split("/")[0] for b in rec["benchmarks"]}
    assert names == {r["id"]} | {p + "-t" + str(r["threads"]) for p in ("triad", "read", "fma")}, names
md = open(os.path.join(run, "report.md")).read()
assert md.count("## Incremental decoding") == 1 and "## Decoding with" not in md, "one decoding section"
for stem in ("decode_time_vs_context", "decode_bandwidth_vs_context", "decode_time_vs_groups", "decode_cache_size"):
    assert f"figures/{stem}.png" in md and os.path.getsize(os.path.join(run, "figures", stem + ".svg")) > 0, stem
assert "| batch 1: L |" in md and "| batch 2: L |" in md and "byte ratio" in md, "speed-up tables and prose"
# the cache's type: each family that ran two types, at its own L (tests/report/decode.toml's int8 grids)
types = md[md.index("### The cache's type"):]
listed = [tuple(c.strip() for c in line.split("|")[1:5]) for line in types.splitlines()
          if line.startswith("| 1 |") or line.startswith("| 2 |")]
assert sorted(listed) == sorted([("1", "GQA G=4", "16", "f32"), ("1", "GQA G=4", "16", "int8"),
                                 ("1", "MQA G=1", "300", "f32"), ("1", "MQA G=1", "300", "int8")]), listed
assert os.path.getsize(os.path.join(run, "figures", "decode_cache_dtype.svg")) > 0, "the cache type figure"
print("decode report ok:", len(rows), "cases")
PY
echo ok
