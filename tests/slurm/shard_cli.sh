#!/usr/bin/env bash
# report --shard, merge and slurm on bad input (one line naming the problem, exit 2), merge naming
# what is missing, and slurm --dry-run's scripts; under the fake harness, in seconds.
# usage: shard_cli.sh ATTNBENCH WORKDIR
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh" # fail
ab=$(readlink -f "$1") work=$2
here=$(cd "$(dirname "$0")" && pwd)
sweep=$here/perf_only.toml other=$here/threads4.toml bench=$here/../report/fake_bench.py
rm -rf "$work" && mkdir -p "$work"
# expect STATUS REGEX CMD...: CMD exits STATUS and its stderr matches REGEX in one line
expect() {
    local status=$1 regex=$2
    shift 2
    "$@" >"$work/out" 2>"$work/err"
    local rc=$?
    [ $rc -eq "$status" ] || { cat "$work/err"; fail "$* exited $rc, expected $status"; }
    grep -Eq -- "$regex" "$work/err" || { cat "$work/err"; fail "$*: no line matching '$regex'"; }
    echo "ok: exit $status, $(grep -E -- "$regex" "$work/err" | head -1)"
}

expect 2 "--shard '3/3': the index I must be below N = 3" "$ab" report --sweep "$sweep" --shard 3/3 --out "$work/x"
expect 2 "--shard '0/0': the count N must be at least 1" "$ab" report --sweep "$sweep" --shard 0/0 --out "$work/x"
expect 2 "--shard '1-3' is not of the form I/N" "$ab" report --sweep "$sweep" --shard 1-3 --out "$work/x"
expect 2 "--shard 'a/3': the index 'a' is not a whole number" "$ab" report --sweep "$sweep" --shard a/3 --out "$work/x"
[ ! -e "$work/x" ] || fail "a refused --shard left $work/x behind"

for i in 0 1 2; do
    "$ab" report --sweep "$sweep" --bench "$bench" --shard $i/3 --out "$work/s$i" >/dev/null 2>&1 || fail "shard $i failed"
done
bash -c '"$0" "$@"; true' "$ab" report --sweep "$other" --bench "$bench" --shard 0/3 --out "$work/other0" --stop-after 1 >/dev/null 2>&1
# a shard folder of another sweep: resumed with this sweep, or merged with this sweep's shards
expect 2 "the sweep given differs from .*other0/sweep.toml" "$ab" report --sweep "$sweep" --resume --shard 0/3 --out "$work/other0"
expect 2 "--shard 1/3 differs from .*shard 0/3" "$ab" report --resume --shard 1/3 --out "$work/other0"
expect 2 "come from different sweeps \(sweep_fnv1a64" "$ab" merge "$work/m" "$work/s0" "$work/s1" "$work/other0"
expect 2 "s1: not a shard folder|shard 1 given twice" "$ab" merge "$work/m" "$work/s1" "$work/s1"
expect 2 "not a shard folder \(no shard.json" "$ab" merge "$work/m" "$work/s0" "$here"
# missing: a shard not given, a case deleted; named, refused without --partial
victim=$(ls "$work/s1/cases" | head -1)
mv "$work/s1/cases/$victim" "$work/victim.json"
expect 1 "shards not given: \[2\]; 1 cases not run: ${victim%.json} \(shard 1\)" "$ab" merge "$work/m" "$work/s0" "$work/s1"
[ ! -e "$work/m/run.json" ] || fail "an incomplete merge was written"
expect 0 "--partial: merging what there is" "$ab" merge --partial "$work/mp" "$work/s0" "$work/s1"
mv "$work/victim.json" "$work/s1/cases/$victim"
expect 0 "merged 3 of 3 shards from 1 machine" "$ab" merge "$work/m" "$work/s0" "$work/s1" "$work/s2"
n=$(ls "$work/m/cases" | grep -c '\.json$')
[ "$n" -eq 9 ] || fail "merged $n cases, expected the sweep's 9"
expect 2 "holds a run already" "$ab" merge "$work/m" "$work/s0" "$work/s1" "$work/s2"

# shards from two machines (shard 2's record says another CPU and host): one folder each, never
# mixed, and one report.md with a section per machine
cp -r "$work/s2" "$work/s2x"
sed -i 's/"cpu_model": "[^"]*"/"cpu_model": "Other CPU"/; s/"hostname": "[^"]*"/"hostname": "node7"/' "$work/s2x/shard.json"
expect 0 "merged 3 of 3 shards from 2 machines" "$ab" merge "$work/mm" "$work/s0" "$work/s1" "$work/s2x"
[ "$(ls "$work/mm/machine-1/cases" | wc -l)" -eq $(($(ls "$work/s0/cases" | wc -l) + $(ls "$work/s1/cases" | wc -l))) ] &&
    [ "$(ls "$work/mm/machine-2/cases" | wc -l)" -eq "$(ls "$work/s2/cases" | wc -l)" ] || fail "cases not split by machine"
"$ab" plot "$work/mm" >/dev/null 2>"$work/plot.err" || { cat "$work/plot.err"; fail "plot of a two-machine merge failed"; }
grep -q "^## machine-1: .*host vm\|^## machine-1: " "$work/mm/report.md" && grep -q "^## machine-2: Other CPU" "$work/mm/report.md" &&
    grep -q "](machine-2/figures/perf_time_vs_n.png)" "$work/mm/report.md" || fail "report.md has no section per machine"
echo "ok: two machines merged into machine-1/ and machine-2/, one report.md with a section each"

# slurm: bad input, no sbatch, and the dry run's scripts
expect 2 "--array 0: the number of shards must be at least 1" "$ab" slurm --sweep "$sweep" --array 0 --dry-run
expect 2 "--cpus-per-task 1 is below the sweep's largest thread count 4" "$ab" slurm --sweep "$here/threads4.toml" --array 2 --cpus-per-task 1 --dry-run
expect 2 "sbatch is not on PATH" env PATH=/nonexistent "$ab" slurm --sweep "$sweep" --array 3 --out "$work/sl"
"$ab" slurm --sweep "$here/threads4.toml" --array 4 --partition batch --time 1:00:00 --dry-run --out "$work/sl" >"$work/dry" ||
    fail "--dry-run failed"
for line in "#SBATCH --array=0-3" "#SBATCH --cpus-per-task=4" "#SBATCH --partition=batch" "#SBATCH --time=1:00:00" \
    "--shard \"\$i/4\"" "sbatch --parsable --dependency=afterok:ARRAY_JOB $work/sl/merge.sbatch" "merge '$work/sl/merged' '$work/sl/shard-0' '$work/sl/shard-1' '$work/sl/shard-2' '$work/sl/shard-3'"; do
    grep -qF -- "$line" "$work/dry" || { cat "$work/dry"; fail "the dry run lacks: $line"; }
done
[ ! -e "$work/sl" ] || fail "--dry-run wrote $work/sl"
echo "shard, merge and slurm: all checks passed"
