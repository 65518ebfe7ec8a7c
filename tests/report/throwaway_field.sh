#!/usr/bin/env bash
# A new case field must reach everything a case is written to with no edit besides its one
# registration (tests/report/throwaway_field.cpp): the case's JSON, its id, a sweep's grid keys,
# the harness's flags, perf.csv and the report's medians table.
# usage: throwaway_field.sh ATTNBENCH_WITH_FIELD BENCH_WITH_FIELD PYTHON WORKDIR
set -euo pipefail
ab=$1 bench=$2 py=$3 work=$4
here=$(cd "$(dirname "$0")" && pwd)
rm -rf "$work" && mkdir -p "$work"
fail() { echo "FAIL: $*"; exit 1; }

# the harness's flags and its JSON cases: the id carries the field away from its default
ids=$("$bench" --variant naive --mode core --d-model 16 --heads 2 --seq 8 --tile-rows 0,64 --benchmark_list_tests=true)
echo "$ids" | grep -qx "core-naive-d16-h2-g2-n8-b1-t1/real_time" || fail "no default case in: $ids"
echo "$ids" | grep -qx "core-naive-d16-h2-g2-n8-b1-t1-tr64/real_time" || fail "no -tr64 case in: $ids"
"$bench" --tile-rows 08 --benchmark_list_tests=true 2>"$work/err" && fail "--tile-rows 08 accepted"
grep -q "'08' is not a whole number" "$work/err" || fail "--tile-rows 08: $(cat "$work/err")"
one=$("$bench" --case '{"mode": "core", "variant": "naive", "d_model": 16, "heads": 2, "n_q": 8, "tile_rows": 32}' \
    --benchmark_list_tests=true | grep -v '^fma-t')
[ "$one" = "core-naive-d16-h2-g2-n8-b1-t1-tr32/real_time" ] || fail "--case with tile_rows 32 gave '$one'"

# a sweep's grid key, the store, perf.csv and the medians table (the fake harness echoes the cases)
cat >"$work/sweep.toml" <<'TOML'
name = "throwaway_field"
stages = ["perf"]
[perf]
repetitions = 1
min_time = 0.01
[[perf.grid]]
name = "tiles"
variants = ["naive"]
d_model = [16]
heads = [2]
seq = [8]
threads = [1]
tile_rows = [0, 64]
TOML
"$ab" report --sweep "$work/sweep.toml" --bench "$here/fake_bench.py" --out "$work/run" 2>"$work/stderr" ||
    { cat "$work/stderr"; fail "report exited $?"; }
run=$work/run
"$py" - "$run" <<'PY'
import csv, json, os, sys
run = sys.argv[1]
perf = json.load(open(os.path.join(run, "perf.json")))
rows = perf["cases"]
assert sorted(r["tile_rows"] for r in rows) == [0, 64], [r.get("tile_rows") for r in rows]
assert sorted(r["id"] for r in rows) == ["core-naive-d16-h2-g2-n8-b1-t1", "core-naive-d16-h2-g2-n8-b1-t1-tr64"], rows
assert all(r["status"] == "ok" for r in rows), rows
assert {"name": "tile_rows", "label": "tile rows", "default": 0} in perf["schema"]["fields"], perf["schema"]["fields"]
with open(os.path.join(run, "perf.csv")) as f:
    table = list(csv.DictReader(f))
assert sorted(r["tile_rows"] for r in table) == ["0", "64"], table
md = open(os.path.join(run, "report.md")).read()
medians = md[md.index("### Medians, every case"):]
header = next(line for line in medians.splitlines() if line.startswith("| variant"))
assert "tile rows" in header, header
print("throwaway field ok: JSON, id, sweep key, flags, perf.csv and the medians table")
PY
