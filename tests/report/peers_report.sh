#!/usr/bin/env bash
# attnbench report with [peers] on a tiny sweep: each installed provider's cases stored like a
# variant's (variant = the provider, its library and kernel in the record), perf.csv one row per
# peer case, report.md's "Versus peers" table and the threads figure; a library made to look
# uninstalled (a package of that name on PYTHONPATH that raises ImportError) is one line per
# provider in the report saying how to install it, not an error. Skipped when no peer is installed.
# usage: peers_report.sh ATTNBENCH PYTHON WORKDIR
set -euo pipefail
ab=$1 py=$2 work=$3
here=$(cd "$(dirname "$0")" && pwd)
harness=$here/../../experiments/peers/harness.py
# torch installed: onnxruntime is hidden; onnxruntime alone (as in CI): torch is hidden;
# PEERS_TEST_HIDE=torch|onnxruntime chooses
if [ -n "${PEERS_TEST_HIDE:-}" ]; then
    hide=$PEERS_TEST_HIDE
elif "$py" "$harness" --available torch-sdpa >/dev/null; then
    hide=onnxruntime
elif "$py" "$harness" --available ort-attention >/dev/null; then
    hide=torch
else
    echo "skipped: no peer is installed (bash scripts/peers.sh --ort)"
    exit 77
fi
rm -rf "$work" && mkdir -p "$work/hide/$hide"
echo "raise ImportError('hidden by the test', name='$hide')" >"$work/hide/$hide/__init__.py"
PYTHONPATH="$work/hide" "$ab" report --sweep "$here/peers.toml" --out "$work/run" 2>"$work/stderr" || {
    cat "$work/stderr"; echo "FAIL: report exited $?"; exit 1; }
"$py" - "$work/run" "$hide" "$here/../../experiments/plots" <<'PY'
import csv, json, os, sys
run, hidden = sys.argv[1], sys.argv[2]
rows = list(csv.DictReader(open(os.path.join(run, "perf.csv"))))
peers = [r for r in rows if r["variant"] in ("torch-sdpa", "torch-mha", "ort-attention")]
assert all(r["status"] == "ok" for r in rows), [(r["id"], r["error"]) for r in rows if r["status"] != "ok"]
# core and decode peers: core 2 G x 2 N x 2 threads + decode 2 G x 2 threads; torch-mha: layer, G = H only
expect = {"ort-attention": 12} if hidden == "torch" else {"torch-sdpa": 12, "torch-mha": 4}
got = {v: sum(r["variant"] == v for r in peers) for v in {r["variant"] for r in peers}}
assert got == expect, got
library = "onnxruntime" if hidden == "torch" else "torch"
for r in peers:
    rec = json.load(open(os.path.join(run, "cases", r["id"] + ".json")))
    assert rec["case"]["peer"]["library"] == library and rec["case"]["peer"]["kernel"], rec["case"]
    t = r["core_time_ms"] if r["mode"] == "decode" else r["time_ms"]
    assert float(t) > 0 and float(r["bytes"]) > 0, r
info = json.load(open(os.path.join(run, "peers.json")))
missing = ["torch-sdpa", "torch-mha"] if hidden == "torch" else ["ort-attention"]
assert [m["provider"] for m in info["missing"]] == missing, info
md = open(os.path.join(run, "report.md")).read()
assert "## Versus peers" in md and all(f"- {m}: not installed ({hidden}); install with `bash scripts/peers.sh" in md
                                      for m in missing), "one install line per hidden provider"
assert md.count("| core |") + md.count("| layer |") + md.count("| decode |") >= len(peers), "a versus row per peer case"
assert "threads_efficiency.png" in md and os.path.exists(os.path.join(run, "figures", "threads_efficiency.png"))
# the figures against N: simd ran on 1 thread only, parallel on 1 and 2, each core peer on 1 and 2;
# every core panel draws simd at 1, parallel at 2 and again at 1, and each peer at 2 and again at 1
sys.path.insert(0, sys.argv[3])
import perf as perf_plots  # noqa: E402
pj = json.load(open(os.path.join(run, "perf.json")))
core = [r for r in pj["cases"] if r["status"] == "ok" and r["mode"] == "core"]
core_peers = sorted({r["variant"] for r in core if r.get("peer")})
assert core_peers, "a core peer"
want = sorted([("simd", [1]), ("parallel", [2]), ("parallel@1", [1])] + [(p, [2]) for p in core_peers] + [(p + "@1", [1]) for p in core_peers])
series = perf_plots.series_over(core, "n_q", perf_plots.config_keys(pj, "n_q"))
assert series, "a core panel against N"
for cfg, by in series.items():
    got = sorted((k, sorted({r["threads"] for _, r in pts})) for k, pts in by.items())
    assert got == want, (cfg, got)
# the FMA probe ran beside our core and layer cases, and a peer's rounds carry our run's probes of
# the same round: every such row has its share of the peak measured alongside, by the same rule
for r in rows:
    if r["mode"] == "decode":
        continue
    drift, pct, along = float(r["fma_drift"]), float(r["pct_peak"]), float(r["pct_peak_alongside"])
    assert 0.2 < drift < 5, (r["id"], drift)
    assert abs(along - pct / drift) <= 1e-6 * along, (r["id"], pct, drift, along)
    rec = json.load(open(os.path.join(run, "cases", r["id"] + ".json")))
    fma = [b for b in rec["benchmarks"] if b["run_name"].split("/")[0] == "fma-t" + r["threads"]]
    assert fma and all(b["fma_gflops"] > 0 for b in fma), r["id"]
    assert (r["variant"] in ("simd", "parallel")) == all("from" not in b for b in fma), (r["id"], fma[0])
print(len(peers), "peer cases ok; versus-peers table, threads figure, peaks alongside; hidden", hidden,
      "-> install lines for", missing)
PY
