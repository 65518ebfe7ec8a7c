#!/usr/bin/env bash
# One run per folder, children stopped with their parent, a killed harness is a failed case:
#  1. while a report runs in a folder, a second report there (new or --resume) is refused with
#     one line and exit 2 (the lock DIR/run.lock dies with its holder);
#  2. SIGTERM to the report stops its harness (no orphan) and it exits 130, keeping finished cases;
#  3. a harness killed by SIGKILL (as by the OOM killer) is recorded as a failed case with that
#     reason, the report goes on, and --resume does not run it again.
# usage: signals.sh ATTNBENCH WORKDIR
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh" # fail
ab=$1 work=$2
here=$(cd "$(dirname "$0")" && pwd)
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 1
cat >sweep.toml <<'TOML'
name = "signals"
stages = ["perf"]
[perf]
repetitions = 1
min_time = 0.01
d_model = [64]
threads = [1]
[[perf.grid]]
variants = ["simd"]
heads = [4]
seq = [16, 32, 48]
TOML
# a harness that records its pid, then waits (slow), dies by SIGKILL (N = 32) or runs the fake one
cat >bench.sh <<BENCH
#!/usr/bin/env bash
case "\$*" in
  *'"n_q":32'*) kill -9 \$\$ ;;
esac
echo \$\$ >>"$work/pids"
if [ -e "$work/slow" ]; then exec sleep 60; fi
exec "$here/fake_bench.py" "\$@"
BENCH
chmod +x bench.sh
# 1 + 2: a slow run, a second report refused, then SIGTERM
touch slow
"$ab" report --sweep sweep.toml --bench ./bench.sh --out run 2>a.err &
parent=$!
for _ in $(seq 100); do [ -s pids ] && break; sleep 0.1; done
[ -s pids ] || fail "the harness never started: $(cat a.err)"
"$ab" report --resume --out run 2>b.err
rc=$?
[ $rc -eq 2 ] && grep -q "another attnbench report is running in this folder" b.err ||
    fail "second report: exit $rc: $(cat b.err)"
"$ab" report --sweep sweep.toml --out run 2>b.err
rc=$?
[ $rc -eq 2 ] && grep -q "another attnbench report is running" b.err || fail "second new report: exit $rc: $(cat b.err)"
child=$(head -1 pids)
kill -TERM $parent
wait $parent
rc=$?
[ $rc -eq 130 ] || fail "the report exited $rc after SIGTERM, expected 130: $(cat a.err)"
sleep 0.2
if kill -0 "$child" 2>/dev/null; then
    kill -9 "$child"
    fail "the harness $child outlived its parent"
fi
# 3: resume (not slow): the SIGKILLed case is recorded failed, the others run, the report goes on
rm -f slow pids
"$ab" report --resume --bench ./bench.sh --out run 2>c.err || fail "resume exited $?: $(cat c.err)"
killed=run/cases/core-simd-d64-h4-g4-n32-b1-t1.json
grep -q '"status": "failed"' $killed || fail "the killed case is not failed"
grep -q "killed by SIGKILL" $killed || fail "the killed case has no reason"
[ "$(ls run/cases/*.json | wc -l)" -eq 3 ] || fail "not every case was stored: $(ls run/cases)"
rm -f pids run/stages/perf.json # run the stage again: every case is stored, none runs
"$ab" report --resume --bench ./bench.sh --out run 2>d.err || fail "second resume exited $?: $(cat d.err)"
[ ! -e pids ] || fail "a stored case ran again on --resume: $(cat pids)"
echo "signals ok"
