#!/usr/bin/env bash
# Kill a run midway, resume it, and compare with an uninterrupted run: the same files, the
# same stages and cases with the same results (the fake harness's "times" are deterministic;
# only wall-clock fields, dates and paths may differ).
# usage: resume.sh ATTNBENCH PYTHON WORKDIR
set -uo pipefail
ab=$1 py=$2 work=$3
here=$(cd "$(dirname "$0")" && pwd)
rm -rf "$work" && mkdir -p "$work"
sweep=$here/tiny.toml bench=$here/fake_bench.py

# 1. interrupted: the run dies (SIGKILL, no clean-up) after 5 performance cases
"$ab" report --sweep "$sweep" --bench "$bench" --out "$work/resumed" --stop-after 5 2>"$work/first.err"
rc=$?
[ $rc -eq 137 ] || { cat "$work/first.err"; echo "FAIL: expected death by SIGKILL (137), got $rc"; exit 1; }
n=$(ls "$work/resumed/cases" | grep -c '^[a-z].*\.json$')
[ "$n" -eq 5 ] || { echo "FAIL: $n cases stored after the kill, expected 5"; exit 1; }
[ ! -e "$work/resumed/report.md" ] || { echo "FAIL: report.md after the kill"; exit 1; }
[ ! -e "$work/resumed/stages/perf.json" ] || { echo "FAIL: perf marked done after the kill"; exit 1; }

# starting again without --resume is refused; resuming with another sweep is refused
"$ab" report --sweep "$sweep" --bench "$bench" --out "$work/resumed" 2>"$work/again.err"
[ $? -eq 2 ] && grep -q "pass --resume" "$work/again.err" || { cat "$work/again.err"; echo "FAIL: rerun not refused"; exit 1; }
"$ab" report --preset quick --resume --out "$work/resumed" 2>"$work/other.err"
[ $? -eq 2 ] && grep -q "differs from" "$work/other.err" || { cat "$work/other.err"; echo "FAIL: other sweep not refused"; exit 1; }

# 2. resumed: the stages and the 5 cases done are skipped
"$ab" report --resume --bench "$bench" --out "$work/resumed" 2>"$work/resume.err" >/dev/null ||
    { cat "$work/resume.err"; echo "FAIL: resume failed"; exit 1; }
grep -q "5 of 19 cases already done" "$work/resume.err" || { cat "$work/resume.err"; echo "FAIL: resume re-ran cases"; exit 1; }
for s in peak check params flops claims; do
    grep -q "^$s *done already" "$work/resume.err" || { echo "FAIL: stage $s re-ran"; exit 1; }
done

# 3. uninterrupted
"$ab" report --sweep "$sweep" --bench "$bench" --out "$work/straight" 2>"$work/straight.err" >/dev/null ||
    { cat "$work/straight.err"; echo "FAIL: uninterrupted run failed"; exit 1; }

"$py" - "$work/resumed" "$work/straight" <<'PY'
import csv, json, os, sys
a, b = sys.argv[1], sys.argv[2]
def files(d):
    out = set()
    for root, _, names in os.walk(d):
        for n in names:
            rel = os.path.relpath(os.path.join(root, n), d)
            if not rel.startswith("logs"):
                out.add(rel)
    return out
fa, fb = files(a), files(b)
assert fa == fb, ("different files", sorted(fa ^ fb))
assert not any(os.path.basename(f).startswith(".") for f in fa), "temporary files left behind"
# every case: same status, error and medians
for f in sorted(x for x in fa if x.startswith("cases/")):
    ca, cb = json.load(open(os.path.join(a, f))), json.load(open(os.path.join(b, f)))
    for k in ("id", "case", "status", "error", "summary", "label"):
        assert ca.get(k) == cb.get(k), (f, k, ca.get(k), cb.get(k))
# the aggregate table: identical (the fake's times are a deterministic model)
ra = list(csv.reader(open(os.path.join(a, "perf.csv"))))
rb = list(csv.reader(open(os.path.join(b, "perf.csv"))))
assert ra == rb, "perf.csv differs"
# stage outputs that hold no timing: identical
for f in ("params.csv", "flops_vs_n.csv", "flops_stages.csv", "check.csv", "claims.csv", "sweep.toml"):
    assert open(os.path.join(a, f)).read() == open(os.path.join(b, f)).read(), f
# report.md: the same lines once run names and dates are taken out
def norm(d):
    text = open(os.path.join(d, "report.md")).read().replace(d, "RUN").replace(os.path.basename(d), "RUN")
    return [l for l in text.splitlines() if l.strip() and not l.startswith(("Sweep **", "| date_utc", "| load_average", "| bf16_dot_over_fma", "| run_id",
                                                              "| peak |", "| check |", "| params |", "| flops |",
                                                              "| claims |", "| perf |", "Measured ceilings", "**Note:**",
                                                              "This CPU has"))]  # the measured bf16 products
assert norm(a) == norm(b), [x for x in zip(norm(a), norm(b)) if x[0] != x[1]][:3]
print(f"resumed == uninterrupted: {len(fa)} files, {len(ra) - 1} cases")
PY
