#!/usr/bin/env bash
# Resources a run may ask for: thread counts outside [1, max(1024, 4 x CPUs)] (flags, OMP_NUM_THREADS,
# sweep files, case JSON), --max-memory that is not a positive finite size, sweeps with more cases
# than the confirmation threshold or the hard cap, and allocations that fail: each refused with
# one line naming the value, never an OpenMP abort, a silent default or a bare std::bad_alloc.
# usage: resources.sh ATTNBENCH ATTNBENCH_BENCH WORKDIR
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh" # fail, refused
ab=$1 bench=$2 work=$3
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 1
"$ab" init --d-model 8 --heads 2 --seq 3 --out data >/dev/null || fail "init"
run=("$ab" run --variant parallel --weights data/weights --input data/x.npy --heads 2 --out y.npy)

# threads: 100,000 made libomp abort the process (SIGABRT, "OMP: System error #11")
refused 2 "--threads: value 100000 is out of range: threads must be in \[1, [0-9]+\]" "${run[@]}" --threads 100000
refused 2 "--threads: value 0 is out of range" "${run[@]}" --threads 0
refused 2 "--threads: '-3' is not a whole number" "$ab" check --threads -3
refused 2 "--threads: value 99999 is out of range" "$ab" env --threads 99999
refused 2 "--threads: value 99999 is out of range: threads must be in \[0," "$ab" peak --threads 99999
refused 2 "OMP_NUM_THREADS '100000' is not a list of thread counts" env OMP_NUM_THREADS=100000 "$ab" peak --threads 0
# OMP_NUM_THREADS that is not a count in range: both mains refuse it before their first OpenMP call
# (libomp reads it lazily and asserted, aborted or hung on these, before or instead of our line)
omp_refused() { # omp_refused NAME CMD...: under OMP_NUM_THREADS=$v, exactly our one line and exit 2
    refused 2 "^$1: error: OMP_NUM_THREADS '$v' is not a list of thread counts in \[1, [0-9]+\]$" \
        timeout 20 env OMP_NUM_THREADS="$v" "${@:2}"
    [ "$(grep -c . err.txt)" -eq 1 ] || fail "OMP_NUM_THREADS '$v' ${*:2}: not one line: $(head -c 300 err.txt)"
}
for v in "" abc 1.5 -1 nan inf 1e20 0 99999999 "2," "1,,2" " 2"; do
    omp_refused attnbench "$ab" env --threads 1
    omp_refused attnbench "$ab" list
    omp_refused attnbench "${run[@]}" --threads 1
    omp_refused attnbench-bench "$bench" --benchmark_list_tests=true
done
# a worker's stack: OMP_STACKSIZE=100G made libomp abort (Error #34) once it started a team, "abc"
# was replaced by its default with a warning; both spellings libomp also reads are held to it
for v in 100G 99999999999 1025M abc "" 0 -4K 1.5M 4X; do
    refused 2 "^attnbench: error: OMP_STACKSIZE '$v' is not a stack size in \[1B, 1G\]" \
        env OMP_STACKSIZE="$v" "${run[@]}" --threads 2
done
refused 2 "^attnbench-bench: error: KMP_STACKSIZE '2G' is not a stack size" env KMP_STACKSIZE=2G "$bench" --benchmark_list_tests=true
for v in 4M " 512 k" 1G 65536; do
    OMP_STACKSIZE="$v" "${run[@]}" --threads 2 >/dev/null 2>err.txt || fail "OMP_STACKSIZE='$v': $(head -c 300 err.txt)"
done
# values in range run: a plain count and a nested list
OMP_NUM_THREADS=2 "$ab" env --threads 1 >/dev/null 2>err.txt || fail "OMP_NUM_THREADS=2: $(head -c 300 err.txt)"
OMP_NUM_THREADS=2,1 "${run[@]}" --threads 2 >/dev/null 2>err.txt || fail "OMP_NUM_THREADS=2,1: $(head -c 300 err.txt)"
OMP_NUM_THREADS=3 "$ab" env --json >env.json || fail "env --json under OMP_NUM_THREADS=3"
grep -Eq '"openmp_max_threads": "3"' env.json && grep -Eq '"threads": "3"' env.json ||
    fail "env --json does not record OMP_NUM_THREADS=3 as the thread count: $(grep threads env.json)"
refused 2 "--threads 100000 is out of range" "$bench" --threads 1,100000 --benchmark_list_tests=true
refused 2 "--case: the case's threads 0 is out of range" "$bench" --benchmark_list_tests=true \
    --case '{"variant":"parallel","mode":"core","d_model":64,"heads":4,"n_q":8,"threads":0}'
printf '[perf]\nvariants = "parallel"\nthreads = [1, 5000]\n' >threads.toml
refused 2 "threads.toml:3: key 'threads' must be <= [0-9]+ \(got 5000" "$ab" report --sweep threads.toml --out r1
"${run[@]}" --threads 1024 >/dev/null 2>&1 || fail "1024 threads, the cap, did not run"

# --max-memory: 0, NaN, Inf and negatives were silently the default (half the RAM)
for m in 0 -5 1e300; do
    refused 2 "--max-memory $m is not a size" "$bench" --max-memory "$m" --benchmark_list_tests=true
done
for m in nan inf; do # a float flag's value is finite first (strict_values)
    refused 2 "--max-memory: '$m' is not a finite number" "$bench" --max-memory "$m" --benchmark_list_tests=true
done
# sweep size: counted from the grids' list lengths before anything is built; 10^9 cases ran out of
# memory building the list, 12,000 started without a word
printf 'stages = ["perf"]\n[perf]\nrepetitions = 1\nmin_time = 0.01\nvariants = "naive"\nmodes = "core"\nd_model = [64, 128]\nheads = [2]\nseq = [%s]\n' \
    "$(seq -s, 1 6000)" >big.toml
refused 2 "big.toml: 12,000 performance cases, at least 0:02:00 .* pass --yes to start it" \
    "$ab" report --sweep big.toml --out r2
[ ! -e r2 ] || fail "a refused sweep left its run folder"
# with --yes the same sweep starts: all 12,000 cases planned and the first one timed (--stop-after 1
# then kills the report with SIGKILL, as an interrupted run would, so the test times one case)
"$ab" report --sweep big.toml --out r2 --yes --stop-after 1 >out.txt 2>err.txt </dev/null
rc=$?
[ $rc -eq 137 ] || fail "report --yes --stop-after 1 exited $rc, expected 137 (SIGKILL after one case): $(tail -c 600 err.txt)"
grep -q "12000 performance cases -> r2" err.txt || fail "report --yes did not start the 12,000 cases: $(head -c 600 err.txt)"
grep -Eq '"cases": 12000' r2/run.json || fail "r2/run.json does not plan 12,000 cases: $(cat r2/run.json)"
[ "$(ls r2/cases/*.json | wc -l)" -eq 1 ] || fail "report --yes: $(ls r2/cases | wc -l) case files, expected the 1 timed"
grep -Eq '"status": "ok"' r2/cases/*.json && grep -Eq '"time_ms": [0-9.e-]+' r2/cases/*.json ||
    fail "report --yes: the first case was not timed: $(head -c 600 r2/cases/*.json)"
printf '[perf]\nseq = [%s]\nbatch = [%s]\nd_model = [%s]\n' "$(seq -s, 1 1000)" "$(seq -s, 1 1000)" \
    "$(seq -s, 8 8 8000)" >huge.toml
refused 2 "huge.toml: grid 'perf' asks for 5000000000 cases .* more than the 100000" \
    "$ab" report --sweep huge.toml --out r3 --yes
refused 2 "the grids ask for 2000000 cases" "$bench" --seq "$(seq -s, 1 500)" --batch "$(seq -s, 1 100)" \
    --d-model 64,128,256,512 --benchmark_list_tests=true
# negative sizes wrapped to 2^64 - 1 (a tile of 2^64 - 1 aborted the harness)
refused 2 "--tile-q: Value -1 not in range" "$bench" --tile-q -1 --benchmark_list_tests=true
refused 2 "--seq: Value -1 must be greater than or equal to 0|--seq: .*-1" "$bench" --seq 8,-1 --benchmark_list_tests=true
echo "resources ok"
