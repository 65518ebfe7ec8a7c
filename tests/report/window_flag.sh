#!/usr/bin/env bash
# attnbench report --window: the windows reach every grid whose cases are all causal (a causal
# core, decode) and no other (a non-causal core keeps none); run.json keeps them, so --resume
# applies them again and refuses others; a sweep without a causal-only grid, and a bad window, are
# refused in one line with exit 2.
# usage: window_flag.sh ATTNBENCH PYTHON WORKDIR
set -euo pipefail
ab=$1 py=$2 work=$3
here=$(cd "$(dirname "$0")" && pwd)
rm -rf "$work" && mkdir -p "$work"
"$ab" report --sweep "$here/window.toml" --window 0,8 --out "$work/run" >/dev/null 2>"$work/stderr" || {
    cat "$work/stderr"; echo "FAIL: report exited $?"; exit 1; }
grep -q -- "--window 0,8: grids causal_core, steps; not full_core (non-causal cases)" "$work/stderr" || {
    cat "$work/stderr"; echo "FAIL: no line naming the grids the windows reached"; exit 1; }
"$py" - "$work/run" <<'PY'
import csv, json, os, sys
run = sys.argv[1]
rows = list(csv.DictReader(open(os.path.join(run, "perf.csv"))))
got = sorted((r["mode"], r["causal"], int(r["window"])) for r in rows if r["status"] == "ok")
# the causal core and the decode step at W 0 and 8; the non-causal core at none only: 5 cases
# (perf.csv writes a decode step's causal as false: its one query row sees every cached key)
want = sorted([("core", "true", 0), ("core", "true", 8), ("core", "false", 0), ("decode", "false", 0),
               ("decode", "false", 8)])
assert len(rows) == 5 and got == want, got
r = json.load(open(os.path.join(run, "run.json")))
assert r["window"] == [0, 8] and r["command"][-2:] == ["--window", "0,8"], r
print("report --window ok:", len(rows), "cases")
PY
expect_refusal() { # expect_refusal WORDS ARGS...: exit 2, the first line holding WORDS (CLI11 may add its --help hint)
    local words=$1; shift
    set +e; "$ab" report "$@" >/dev/null 2>"$work/err"; local rc=$?; set -e
    if [ "$rc" -ne 2 ] || ! head -1 "$work/err" | grep -q -- "$words"; then
        echo "FAIL: report $* exited $rc:"; cat "$work/err"; exit 1
    fi
}
expect_refusal "differs from the run's (0,8, run.json)" --resume --out "$work/run" --window 16
cat >"$work/noncausal.toml" <<'TOML'
name = "no-causal"
stages = ["perf"]
[[perf.grid]]
name = "full"
variants = ["simd"]
seq = [16]
TOML
expect_refusal "--window 4: no grid of $work/noncausal.toml has only causal cases" \
    --sweep "$work/noncausal.toml" --window 4 --out "$work/refused"
expect_refusal "window '-3' is not a whole number of keys" --sweep "$here/window.toml" --window -3 --out "$work/bad"
echo ok
