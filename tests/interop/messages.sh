#!/usr/bin/env bash
# Messages that tell what happened: a sweep path that is a directory or an empty file, a
# built-in default's error (no line 0), compare's type errors (the file and entry named),
# params' GQA groups that form no row, an allocation that fails (one line naming what, exit 3,
# in both binaries), and exit statuses told apart (README, "Exit statuses").
# usage: messages.sh ATTNBENCH ATTNBENCH_BENCH WORKDIR
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh" # fail, refused
ab=$1 bench=$2 work=$3
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 1
mkdir sweepdir && : >empty.toml
refused 2 "sweepdir: not a sweep file \(a directory\)" "$ab" report --sweep sweepdir --out r1
refused 2 "empty.toml: the sweep file is empty" "$ab" report --sweep empty.toml --out r1
[ ! -e r1 ] || fail "a refused sweep left its run folder"
printf '[perf]\nd_model = 100\n' >default.toml
refused 2 "default.toml: key 'heads' \(not in the file: its built-in default\) value 8 does not divide d_model 100" \
    "$ab" report --sweep default.toml --out r1
printf '[perf]\nseq = [64, 128, 64]\n' >twice.toml
refused 2 "twice.toml:2: key 'seq' holds 64 twice" "$ab" report --sweep twice.toml --out r1

printf '{"benchmarks": [{"name": "a", "real_time": "fast", "cpu_time": 1, "time_unit": "ms"}]}' >typed.json
refused 2 "typed.json: benchmarks\[0\]: field 'real_time' is missing or not a number" "$ab" compare typed.json typed.json
printf '{"benchmarks": [7]}' >entry.json
refused 2 "entry.json: benchmarks\[0\] is number, not an object" "$ab" compare entry.json entry.json
refused 2 "--gqa-groups 3 forms no GQA row" "$ab" params --gqa-groups 3 --heads 4
"$ab" params --heads 1 >/dev/null || fail "params --heads 1 (default G = 2 fits no H) was refused"

# out of memory: an address-space limit makes the allocation fail (no machine is filled). Not under
# ASan (its test preset sets ASAN_OPTIONS): its shadow memory cannot be reserved under ulimit -v.
if [ -n "${ASAN_OPTIONS:-}" ]; then echo "messages ok (out-of-memory checks skipped under ASan)"; exit 0; fi
refused 3 "attnbench: out of memory: cannot allocate [0-9.e+]+ GB for the weights of MHA" \
    bash -c 'ulimit -v 2000000; exec "$0" init --d-model 40000 --heads 2 --seq 2 --out big' "$ab"
refused 3 "out of memory: cannot allocate [0-9.e+]+ GB for the inputs and fp64 reference of check case" \
    bash -c 'ulimit -v 2000000; exec "$0" check --variant naive --d-model 40000 --heads 2 --seq 2' "$ab"
bash -c 'ulimit -v 3000000; exec "$0" --variant naive --mode core --d-model 64 --heads 2 --seq 200000 --max-memory 1e9 --benchmark_min_time=0.001 --benchmark_out=oom.json' \
    "$bench" >/dev/null 2>err.txt
grep -q '"error_message": "out of memory: ' oom.json || fail "the harness's case did not record out of memory: $(tail -n 3 err.txt)"
echo "messages ok"
