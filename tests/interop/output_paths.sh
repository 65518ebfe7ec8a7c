#!/usr/bin/env bash
# The output-path rule (modules/results/files.cppm, experiments/plots/plotting.py): --out naming a
# FIFO, a symbolic link or "" is refused with one line and exit 2, and the FIFO and the link's
# target are left as they were; a run folder's writability is checked before the work; a write
# to a closed stdout fails; init without --bias into an old folder leaves no bias behind.
# Everything happens in a temporary folder: never a real device.
# usage: output_paths.sh ATTNBENCH PYTHON WORKDIR ATTNBENCH_BENCH
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh" # fail, refused
ab=$1 py=$2 work=$3 bench=$4
plots=$(cd "$(dirname "$0")/../../experiments/plots" && pwd)
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 1
mkfifo fifo
echo keep >target && ln -s target link && ln -s . dirlink
"$ab" init --d-model 8 --heads 2 --seq 3 --out data >/dev/null || fail "init"
refused 2 "refusing to write over a FIFO" "$ab" run --weights data/weights --input data/x.npy --heads 2 --out fifo
[ -p fifo ] || fail "the FIFO was replaced"
refused 2 "refusing to write over a symbolic link" "$ab" run --weights data/weights --input data/x.npy --heads 2 --out link
[ -L link ] && [ "$(cat target)" = keep ] || fail "the link or its target was changed"
refused 2 "must not be empty" "$ab" init --out ""
refused 2 "must not be empty" "$ab" params --out ""
refused 2 "is a FIFO, not a directory" "$ab" params --out fifo
refused 2 "is a symbolic link, not a directory" "$ab" claims --out dirlink
refused 2 "is a FIFO, not a directory" "$ab" report --preset quick --out fifo
mkdir ro && chmod 555 ro
if [ "$(id -u)" != 0 ]; then # root writes anywhere: the probe needs a non-root user
    refused 2 "cannot write into the output directory" "$ab" check --out ro
fi
refused 2 "cannot create the output directory" "$ab" check --out target/sub
# a failed write to stdout is a failure
"$ab" list >&- 2>err.txt && fail "list to a closed stdout exited 0"
grep -q "cannot write to standard output" err.txt || fail "closed stdout: $(cat err.txt)"
# init without --bias into a folder that had biases: no bias file is left for run to use
"$ab" init --d-model 8 --heads 2 --seq 3 --bias --out old >/dev/null || fail "init --bias"
[ -f old/weights/in_proj_bias.npy ] || fail "init --bias wrote no bias"
"$ab" init --d-model 8 --heads 2 --seq 3 --out old >/dev/null || fail "init again"
[ -e old/weights/in_proj_bias.npy ] || [ -e old/weights/out_proj.bias.npy ] && fail "a stale bias file stayed"
# the Python writer: a link or FIFO in place of report.md / a figure is refused, not replaced
cd "$plots" && "$py" -c "import plotting, sys; plotting.write_text(sys.argv[1], 'fifo', 'x')" "$work" 2>"$work/err.txt"
[ $? -ne 0 ] && grep -q "refusing to write over" "$work/err.txt" || fail "Python writer: $(cat "$work/err.txt")"
"$py" -c "import plotting, sys; plotting.write_text(sys.argv[1], 'link', 'x')" "$work" 2>"$work/err.txt"
[ $? -ne 0 ] && [ "$(cat "$work/target")" = keep ] || fail "Python writer replaced or followed the link"
# the harness's --benchmark_out follows the same rule, checked before any case runs (it renamed
# its temporary over a FIFO or a link, and aborted on a directory after all the work)
cd "$work" || exit 1
quick=(--variant naive --mode core --d-model 16 --heads 2 --seq 8 --benchmark_min_time=0.001 --peak nopeak.json)
refused 2 "attnbench-bench: error: fifo: refusing to write over a FIFO" "$bench" "${quick[@]}" --benchmark_out=fifo
[ -p fifo ] || fail "attnbench-bench replaced the FIFO"
refused 2 "attnbench-bench: error: link: refusing to write over a symbolic link" "$bench" "${quick[@]}" --benchmark_out=link
[ -L link ] && [ "$(cat target)" = keep ] || fail "attnbench-bench changed the link or its target"
mkdir -p outdir
refused 2 "attnbench-bench: error: outdir: refusing to write over a directory" "$bench" "${quick[@]}" --benchmark_out=outdir
refused 2 "attnbench-bench: error: an output path must not be empty" "$bench" "${quick[@]}" --benchmark_out=
refused 2 "attnbench-bench: error: target/b.json: cannot write the output" "$bench" "${quick[@]}" --benchmark_out=target/b.json
[ -z "$(ls -A | grep '\.tmp\.')" ] || fail "a refused harness run left a temporary: $(ls -A)"
"$bench" --variant naive --mode core --d-model 16 --heads 2 --seq 8 --benchmark_min_time=0.001 \
    --benchmark_out=sub/b.json >/dev/null 2>err.txt || fail "attnbench-bench --benchmark_out=sub/b.json: $(cat err.txt)"
grep -q '"benchmarks"' sub/b.json || fail "attnbench-bench wrote no JSON to sub/b.json"
[ -z "$(ls -A sub | grep -v '^b.json$')" ] || fail "attnbench-bench left files beside its output: $(ls -A sub)"
echo "output paths ok"
