#!/usr/bin/env bash
# attnbench report on a tiny local-attention sweep (tests/report/local.toml) through the real
# harness: the "Local attention" section once, with both figures; the window in perf.csv; the
# FLOP ratio and the cache a step reads worked by hand (d_model 64, H 4, d_head 16).
# usage: local_report.sh ATTNBENCH PYTHON WORKDIR
set -euo pipefail
ab=$1 py=$2 work=$3
here=$(cd "$(dirname "$0")" && pwd)
rm -rf "$work" && mkdir -p "$work"
"$ab" report --sweep "$here/local.toml" --out "$work/run" 2>"$work/stderr" || {
    cat "$work/stderr"; echo "FAIL: report exited $?"; exit 1; }
"$py" - "$work/run" <<'PY'
import csv, os, sys
run = sys.argv[1]
rows = list(csv.DictReader(open(os.path.join(run, "perf.csv"))))
assert len(rows) == 8 and all(r["status"] == "ok" for r in rows), [(r["id"], r["status"]) for r in rows]
core = {(int(r["n_q"]), int(r["window"])): r for r in rows if r["mode"] == "core"}
# scored pairs per head: N 128 causal 128 x 129 / 2 = 8,256; W 16: 16 x 17 / 2 + 112 x 16 = 1,928
# matmul FLOPs 2 x H x pairs x (16 + 16): 2,113,536 and 493,568
assert int(float(core[(128, 0)]["flop_matmul"])) == 2113536, core[(128, 0)]["flop_matmul"]
assert int(float(core[(128, 16)]["flop_matmul"])) == 493568, core[(128, 16)]["flop_matmul"]
dec = {(int(r["context"]), int(r["window"])): r for r in rows if r["mode"] == "decode"}
# cache a step reads: tokens x 4 heads x (16 + 16) x 4 B; 101 tokens without a window, 17 and 32 with W 32
assert int(float(dec[(100, 0)]["kv_read_bytes"])) == 101 * 512, dec[(100, 0)]["kv_read_bytes"]
assert int(float(dec[(16, 32)]["kv_read_bytes"])) == 17 * 512 and int(float(dec[(100, 32)]["kv_read_bytes"])) == 32 * 512
md = open(os.path.join(run, "report.md")).read()
assert md.count("## Local attention") == 1
assert "| parallel | 2 | 128 | W = 16 |" in md or "| parallel | 1 | 128 | W = 16 |" in md, md[md.find("## Local"):][:2000]
for png in ("local_core.png", "local_decode.png"):
    assert f"figures/{png}" in md and os.path.getsize(os.path.join(run, "figures", png)) > 0, png
assert "| W = 4096 |" in md  # the flops stage's table: pairs, FLOP ratio and crossover per W
print("local report ok:", len(rows), "cases")
PY
echo ok
