#!/usr/bin/env bash
# A new variant must reach the report with no edit besides its file and registration.
# ATTNBENCH_THROWAWAY is the attnbench tool linked with tests/report/throwaway_variant.cpp; a
# report over a sweep that selects variants by tag ("fast") must check it, time it (under the
# fake harness), list it in perf.json and the report's tables, and draw it in the figures.
# usage: new_variant.sh ATTNBENCH_THROWAWAY WORKDIR
set -euo pipefail
ab=$1 work=$2
here=$(cd "$(dirname "$0")" && pwd)
rm -rf "$work" && mkdir -p "$work"
cat >"$work/sweep.toml" <<'TOML'
name = "new_variant"
stages = ["check", "perf"]
[check]
d_model = [16]
heads = [2]
seq = [8]
mode = "core"
[perf]
repetitions = 1
min_time = 0.01
d_model = [64]
threads = [1]
[[perf.grid]]
name = "scaling"
variants = ["fast"]
heads = [4]
seq = [16, 32]
TOML
"$ab" report --sweep "$work/sweep.toml" --bench "$here/fake_bench.py" --out "$work/run" 2>"$work/stderr" || {
    cat "$work/stderr"; echo "FAIL: report exited $?"; exit 1; }
run=$work/run
grep -q '"variant": "throwaway"' "$run/check.json" || { echo "FAIL: check.json has no throwaway case"; exit 1; }
n=$(grep -c '"variant": "throwaway"' "$run/perf.json") || true
[ "$n" -ge 2 ] || { echo "FAIL: perf.json has $n throwaway cases, expected 2"; exit 1; }
grep -q "throwaway" "$run/report.md" || { echo "FAIL: report.md does not name throwaway"; exit 1; }
grep -q "throwaway" "$run/figures/perf_time_vs_n.svg" || { echo "FAIL: the time figure's legend lacks throwaway"; exit 1; }
echo "new variant ok: checked, $n perf cases, in report.md and the figure legend"
