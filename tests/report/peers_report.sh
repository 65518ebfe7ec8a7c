#!/usr/bin/env bash
# attnbench report with [peers] on a tiny sweep: each installed provider's cases stored like a
# variant's (variant = the provider, its library and kernel in the record), perf.csv one row per
# peer case, report.md's "Versus peers" table and the threads figure; a provider made to look
# uninstalled (HIDE: a Python package of that name that raises ImportError) is one line of the
# report saying how to install it, not an error. Skipped when no peer is installed.
# usage: peers_report.sh ATTNBENCH PYTHON WORKDIR
set -euo pipefail
ab=$1 py=$2 work=$3
here=$(cd "$(dirname "$0")" && pwd)
harness=$here/../../experiments/peers/harness.py
rm -rf "$work" && mkdir -p "$work/hide/onnxruntime"
echo 'raise ImportError("hidden by the test", name="onnxruntime")' >"$work/hide/onnxruntime/__init__.py"
if ! "$py" "$harness" --available torch-sdpa >/dev/null; then
    echo "skipped: torch is not installed (bash scripts/peers.sh); the hidden-provider check needs another peer"
    exit 77
fi
PYTHONPATH="$work/hide" "$ab" report --sweep "$here/peers.toml" --out "$work/run" 2>"$work/stderr" || {
    cat "$work/stderr"; echo "FAIL: report exited $?"; exit 1; }
"$py" - "$work/run" <<'PY'
import csv, json, os, sys
run = sys.argv[1]
rows = list(csv.DictReader(open(os.path.join(run, "perf.csv"))))
peers = [r for r in rows if r["variant"] in ("torch-sdpa", "torch-mha", "ort-attention")]
assert all(r["status"] == "ok" for r in rows), [(r["id"], r["error"]) for r in rows if r["status"] != "ok"]
# torch-sdpa: core 2 G x 2 N x 2 threads + decode 2 G x 2 threads; torch-mha: layer G = H only, 2 N x 2 threads
assert sorted({r["variant"] for r in peers}) == ["torch-mha", "torch-sdpa"], {r["variant"] for r in peers}
assert sum(r["variant"] == "torch-sdpa" for r in peers) == 12 and sum(r["variant"] == "torch-mha" for r in peers) == 4
for r in peers:
    rec = json.load(open(os.path.join(run, "cases", r["id"] + ".json")))
    assert rec["case"]["peer"]["library"] == "torch" and rec["case"]["peer"]["kernel"], rec["case"]
    t = r["core_time_ms"] if r["mode"] == "decode" else r["time_ms"]
    assert float(t) > 0 and float(r["bytes"]) > 0, r
info = json.load(open(os.path.join(run, "peers.json")))
assert [m["provider"] for m in info["missing"]] == ["ort-attention"], info
md = open(os.path.join(run, "report.md")).read()
assert "## Versus peers" in md and "ort-attention: not installed" in md and "bash scripts/peers.sh --ort" in md
assert md.count("| core |") + md.count("| layer |") + md.count("| decode |") >= 16, "one versus row per peer case"
assert "threads_efficiency.png" in md and os.path.exists(os.path.join(run, "figures", "threads_efficiency.png"))
print(len(peers), "peer cases ok; versus-peers table, threads figure, one install line for the hidden provider")
PY
