#!/usr/bin/env bash
# Reproduces issue 5's results: runs params, flops, toy, hull and claims with --out, then draws
# the plots with the Python CMake found (ATTNBENCH_PYTHON, one that has matplotlib).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=$(bash "$root/scripts/build.sh" release)
out=${1:-$root/results/claims}
bin=$build/attnbench
"$bin" params --out "$out" >/dev/null
"$bin" flops --out "$out" >/dev/null
"$bin" toy --out "$out" >/dev/null
"$bin" hull --out "$out" >/dev/null
"$bin" claims --out "$out" >/dev/null
python=$(sed -n 's/^ATTNBENCH_PYTHON:FILEPATH=//p' "$build/CMakeCache.txt")
"${python:-/usr/bin/python3}" "$root/experiments/plots/claims.py" "$out"
