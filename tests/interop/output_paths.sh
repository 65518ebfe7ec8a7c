#!/usr/bin/env bash
# The output-path rule (modules/results/files.cppm, experiments/plots/plotting.py): --out naming a
# FIFO, a symbolic link or "" is refused with one line and exit 2, and the FIFO and the link's
# target are left as they were; a run folder's writability is checked before the work; a write
# to a closed stdout fails; init without --bias into an old folder leaves no bias behind.
# Everything happens in a temporary folder: never a real device.
# usage: output_paths.sh ATTNBENCH PYTHON WORKDIR
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh" # fail, refused
ab=$1 py=$2 work=$3
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
echo "output paths ok"
