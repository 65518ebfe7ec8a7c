#!/usr/bin/env bash
# One run per folder, children stopped with their parent, a killed harness is a failed case:
#  1. while a report runs in a folder, a second report there (new or --resume) is refused with
#     one line and exit 2 (the lock DIR/run.lock dies with its holder);
#  2. SIGTERM to the report stops its harness (no orphan) and it exits 130, keeping finished cases;
#  3. a harness killed by SIGKILL (as by the OOM killer) is recorded as a failed case with that
#     reason, the report goes on, and --resume does not run it again;
#  4. a report killed by SIGKILL (no handler can pass that on) takes its real harness with it;
#  5. so does a Python peer harness (experiments/peers/harness.py) whose parent dies by SIGKILL
#     (run when PYTHON is given and ONNX Runtime is installed: CI installs it).
# usage: signals.sh ATTNBENCH WORKDIR [PYTHON]
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh" # fail
ab=$1 work=$2 py=${3:-}
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
# 4: the real harness (next to attnbench) on a case timed for 30 s; kill -9 the report mid-case
printf 'stages = ["perf"]\n[perf]\nrepetitions = 1\nmin_time = 30\nvariants = "naive"\nmodes = "core"\nd_model = [64]\nheads = [2]\nseq = [64]\n' >long.toml
"$ab" report --sweep long.toml --out run4 2>e.err &
parent=$!
child=
for _ in $(seq 100); do child=$(pgrep -P $parent | head -1) && [ -n "$child" ] && break; sleep 0.1; done
[ -n "$child" ] || fail "the harness never started: $(cat e.err)"
sleep 0.5
kill -9 $parent
wait $parent 2>/dev/null
for _ in $(seq 50); do kill -0 "$child" 2>/dev/null || break; sleep 0.1; done
if kill -0 "$child" 2>/dev/null; then
    kill -9 "$child"
    fail "the harness $child outlived its parent, killed by SIGKILL"
fi
# 5: the peer harness, child of a shell that exports its own pid as the report does, on a case
# timed for 30 s; a process that is gone or a zombie (its parent, init, has not reaped it) is dead
gone() { local st; st=$(ps -o stat= -p "$1" 2>/dev/null) || return 0; [[ $st == Z* ]]; }
peers=$here/../../experiments/peers/harness.py
if [ -n "$py" ] && "$py" "$peers" --available ort-attention >/dev/null 2>&1; then
    kcase='{"variant":"ort-attention","mode":"core","precision":"f32","d_model":64,"heads":2,"kv_heads":2,"n_q":64,"n_kv":64,"batch":1,"threads":1,"causal":false}'
    bash -c 'export ATTNBENCH_PARENT_PID=$$; "$0" "$1" --attnbench "$2" --case "$3" --benchmark_min_time=30 \
        >peer.out 2>peer.err & wait' "$py" "$peers" "$ab" "$kcase" &
    parent=$!
    child=
    for _ in $(seq 100); do child=$(pgrep -P $parent | head -1) && [ -n "$child" ] && break; sleep 0.1; done
    [ -n "$child" ] || fail "the peer harness never started"
    for _ in $(seq 300); do grep -q "matches the fp64 reference" peer.err 2>/dev/null && break; sleep 0.1; done
    grep -q "matches the fp64 reference" peer.err || fail "the peer harness did not reach its timing: $(head -c 300 peer.err)"
    kill -9 $parent
    wait $parent 2>/dev/null
    for _ in $(seq 50); do gone "$child" && break; sleep 0.1; done
    if ! gone "$child"; then
        kill -9 "$child"
        fail "the peer harness $child outlived its parent, killed by SIGKILL"
    fi
else
    echo "step 5 not run: no PYTHON given or onnxruntime not installed (scripts/peers.sh --ort)"
fi
echo "signals ok"
