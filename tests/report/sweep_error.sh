#!/usr/bin/env bash
# A malformed sweep file: attnbench report must exit 2 with exactly one line on stderr that
# matches REGEX (file:line: key '...' ...), and must not create the run directory.
# usage: sweep_error.sh ATTNBENCH WORKDIR SWEEP.toml REGEX
set -uo pipefail
ab=$1 work=$2 sweep=$3 regex=$4
rm -rf "$work" && mkdir -p "$work"
"$ab" report --sweep "$sweep" --out "$work/run" 2>"$work/stderr" >/dev/null
rc=$?
cat "$work/stderr"
[ $rc -eq 2 ] || { echo "FAIL: exit status $rc, expected 2"; exit 1; }
[ "$(wc -l <"$work/stderr")" -eq 1 ] || { echo "FAIL: expected one line on stderr"; exit 1; }
grep -Eq -- "$regex" "$work/stderr" || { echo "FAIL: stderr does not match: $regex"; exit 1; }
[ ! -e "$work/run" ] || { echo "FAIL: the run directory was created"; exit 1; }
echo "ok"
