#!/usr/bin/env bash
# A sweep sharded over a real Slurm job array and merged, on a single-node Slurm started here
# (Debian's slurmctld, slurmd and munge; a generated slurm.conf with this machine's CPUs; all
# state in WORKDIR; every daemon stopped at the end, also on failure):
#  1. the tiny sweep as a 3-task array plus the merge job: the merged results hold exactly the
#     cases of an unsharded run of the same sweep, with the same check verdicts;
#  2. one array task cancelled mid-run (scancel), that shard submitted again: only its missing
#     cases run, the ones it had stored are left untouched, and the merge is complete.
# Exit 77 (ctest: skipped), with the reason, where the daemons cannot run.
# usage: slurm_test.sh ATTNBENCH PYTHON WORKDIR
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh" # fail
ab=$(readlink -f "$1") py=$2 work=$3
here=$(cd "$(dirname "$0")" && pwd)
skip() { echo "SKIP: $*"; exit 77; }

for t in munged slurmctld slurmd sbatch squeue scontrol scancel; do
    command -v "$t" >/dev/null || skip "$t is not installed (apt-get install slurm-wlm slurmctld slurmd munge)"
done
[ "$(id -u)" -eq 0 ] || skip "needs root: munged and slurmd run as root here, and jobs run as their submitter"
[ -r /etc/munge/munge.key ] || skip "no readable /etc/munge/munge.key (the munge package creates it)"

rm -rf "$work" && mkdir -p "$work"/{state,spool,log,munge}
work=$(readlink -f "$work")
host=$(hostname -s)
ports=$("$py" -c 'import socket
s=[socket.socket() for _ in range(2)]
[x.bind(("127.0.0.1", 0)) for x in s]
print(*[x.getsockname()[1] for x in s])')
read -r ctld_port slurmd_port <<<"$ports"
export SLURM_CONF=$work/slurm.conf
cat >"$SLURM_CONF" <<EOF
ClusterName=attnbench-test
SlurmctldHost=$host
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$work/munge/munge.socket
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$work/state
SlurmdSpoolDir=$work/spool
SlurmctldPidFile=$work/slurmctld.pid
SlurmdPidFile=$work/slurmd.pid
SlurmctldLogFile=$work/log/slurmctld.log
SlurmdLogFile=$work/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
MpiDefault=none
MinJobAge=600
NodeName=$host CPUs=$(nproc) State=UNKNOWN
PartitionName=test Nodes=$host Default=YES MaxTime=INFINITE State=UP
EOF

jobs_submitted=()
stop() {
    [ ${#jobs_submitted[@]} -gt 0 ] && scancel "${jobs_submitted[@]}" 2>/dev/null
    for f in slurmd slurmctld munge/munged; do
        [ -s "$work/$f.pid" ] && kill "$(cat "$work/$f.pid")" 2>/dev/null
    done
    sleep 1
    for f in slurmd slurmctld munge/munged; do
        [ -s "$work/$f.pid" ] && kill -9 "$(cat "$work/$f.pid")" 2>/dev/null
    done
}
trap stop EXIT

# the daemons: munged on a private socket, then the controller and the node
munged --force --socket="$work/munge/munge.socket" --pid-file="$work/munge/munged.pid" \
    --log-file="$work/log/munged.log" --seed-file="$work/munge/seed" >"$work/log/munged.out" 2>&1 ||
    skip "munged does not start: $(tail -1 "$work/log/munged.out")"
munge --socket="$work/munge/munge.socket" -n | unmunge --socket="$work/munge/munge.socket" >/dev/null 2>&1 ||
    skip "munge credentials do not round-trip through $work/munge/munge.socket"
slurmctld -f "$SLURM_CONF" >"$work/log/slurmctld.out" 2>&1 || skip "slurmctld does not start: $(tail -1 "$work/log/slurmctld.log")"
slurmd -f "$SLURM_CONF" >"$work/log/slurmd.out" 2>&1 || skip "slurmd does not start: $(tail -1 "$work/log/slurmd.log")"
for _ in $(seq 100); do
    sinfo -h -o %T 2>/dev/null | grep -q idle && break
    sleep 0.2
done
sinfo -h -o %T | grep -q idle || skip "the node never became idle: $(sinfo -h 2>&1 | head -1); $(tail -2 "$work/log/slurmd.log")"
echo "single-node Slurm up: $host, $(nproc) CPUs, controller port $ctld_port"

# Waits until job $1 (and its array tasks) left the queue, at most $2 seconds.
wait_job() {
    for _ in $(seq $(($2 * 5))); do
        [ -z "$(squeue -h -j "$1" 2>/dev/null)" ] && return 0
        sleep 0.2
    done
    fail "job $1 still queued after $2 s: $(squeue -j "$1")"
}
# The states of job $1's tasks (scontrol keeps finished jobs for MinJobAge), one per line.
states() { scontrol -o show job "$1" | grep -o 'JobState=[A-Z_]*' | cut -d= -f2; }
cases_of() { "$py" -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["cases"]))' "$1/shard.json"; }
stored() { ls "$1/cases" 2>/dev/null | grep -c '^[a-z].*\.json$'; }

# --- 1. unsharded, then as a 3-task array plus the merge ---------------------------------------
sweep=$here/tiny.toml
t0=$(date +%s.%N)
OMP_NUM_THREADS=1 "$ab" report --sweep "$sweep" --out "$work/straight" >/dev/null 2>"$work/straight.err" ||
    { tail "$work/straight.err"; fail "the unsharded run failed"; }
t1=$(date +%s.%N)
"$ab" slurm --sweep "$sweep" --array 3 --out "$work/run1" >"$work/submit1.out" 2>"$work/submit1.err" ||
    { cat "$work/submit1.err"; fail "attnbench slurm did not submit"; }
array=$(awk '$1=="array_job"{print $2}' "$work/submit1.out") merge=$(awk '$1=="merge_job"{print $2}' "$work/submit1.out")
jobs_submitted+=("$array" "$merge")
wait_job "$array" 240
wait_job "$merge" 120
t2=$(date +%s.%N)
[ "$(states "$array" | sort -u)" = COMPLETED ] || { tail -3 "$work"/run1/slurm/*.out; fail "array tasks: $(states "$array" | tr '\n' ' ')"; }
[ "$(states "$merge")" = COMPLETED ] || { cat "$work"/run1/slurm/merge-*.out; fail "merge job: $(states "$merge")"; }
[ -s "$work/run1/merged/report.md" ] || fail "no merged report.md"
"$py" - "$work/straight" "$work/run1/merged" <<'PY' || fail "merged run differs from the unsharded one"
import json, os, sys
a, b = sys.argv[1], sys.argv[2]
ca = sorted(f for f in os.listdir(os.path.join(a, "cases")) if not f.startswith("."))
cb = sorted(f for f in os.listdir(os.path.join(b, "cases")) if not f.startswith("."))
assert ca == cb, ("case sets differ", sorted(set(ca) ^ set(cb)))
status = lambda d, f: json.load(open(os.path.join(d, "cases", f)))["status"]
assert all(status(a, f) == status(b, f) for f in ca), "case statuses differ"
verdicts = lambda d: [(c["variant"], c.get("case"), c["pass"]) for c in json.load(open(os.path.join(d, "check.json")))["cases"]]
assert verdicts(a) == verdicts(b), "check verdicts differ"
m = json.load(open(os.path.join(b, "merge.json")))
assert m["shards_given"] == 3 and not m["missing_cases"] and len(m["machines"]) == 1, m
print(f"merged == unsharded: {len(ca)} cases, {len(verdicts(a))} check verdicts")
PY
printf 'wall time, tiny sweep: unsharded %.1f s; 3-task array + merge (submit to merged report) %.1f s\n' \
    "$(awk "BEGIN{print $t1 - $t0}")" "$(awk "BEGIN{print $t2 - $t1}")"

# --- 2. one task cancelled mid-run, its shard submitted again -------------------------------------
"$ab" slurm --sweep "$here/slow.toml" --array 3 --out "$work/run2" >"$work/submit2.out" 2>"$work/submit2.err" ||
    { cat "$work/submit2.err"; fail "attnbench slurm did not submit"; }
array=$(awk '$1=="array_job"{print $2}' "$work/submit2.out") merge=$(awk '$1=="merge_job"{print $2}' "$work/submit2.out")
jobs_submitted+=("$array" "$merge")
shard=$work/run2/shard-1
for _ in $(seq 600); do # until shard 1 has stored its first case
    [ "$(stored "$shard")" -ge 1 ] && break
    sleep 0.1
done
scancel "${array}_1"
total=$(cases_of "$shard")
wait_job "${array}_1" 60
done_before=$(stored "$shard")
[ "$done_before" -ge 1 ] && [ "$done_before" -lt "$total" ] || fail "shard 1 not cancelled mid-run: $done_before of $total cases stored"
[ "$(scontrol -o show job "${array}_1" | grep -o 'JobState=[A-Z]*')" = JobState=CANCELLED ] || fail "task 1 not CANCELLED"
scancel "$merge" # its dependency (every task ok) can no longer be met
wait_job "$array" 240
(cd "$shard/cases" && sha1sum ./*.json) >"$work/before.sha1"
again=$(sbatch --parsable --array=1 "$work/run2/shards.sbatch") || fail "resubmission refused"
jobs_submitted+=("$again")
wait_job "$again" 120
[ "$(states "$again")" = COMPLETED ] || fail "resubmitted task: $(states "$again")"
log=$(ls "$work"/run2/slurm/shard-1-"$again".out)
grep -q "perf: $done_before of $total cases already done (resumed)" "$log" || { cat "$log"; fail "the resumed task did not skip the $done_before stored cases"; }
ran=$(grep -c '^\[[0-9]*/[0-9]*\]' "$log")
[ "$ran" -eq $((total - done_before)) ] || fail "the resumed task ran $ran cases, expected $((total - done_before))"
(cd "$shard/cases" && sha1sum -c --quiet "$work/before.sha1") || fail "a case stored before the cancel was rewritten"
[ "$(stored "$shard")" -eq "$total" ] || fail "shard 1 has $(stored "$shard") of $total cases after the resubmission"
merge2=$(sbatch --parsable --dependency=afterok:"$again" "$work/run2/merge.sbatch") || fail "merge resubmission refused"
jobs_submitted+=("$merge2")
wait_job "$merge2" 120
[ "$(states "$merge2")" = COMPLETED ] || fail "merge after the resubmission: $(states "$merge2")"
"$py" -c 'import json,sys; m=json.load(open(sys.argv[1])); assert m["shards_given"]==3 and not m["missing_cases"], m' \
    "$work/run2/merged/merge.json" || fail "merge after the resubmission incomplete"
echo "cancelled shard 1 with $done_before of $total cases stored; resubmitted: $ran cases ran, $done_before untouched; merge complete"
