#!/usr/bin/env bash
# A CLI round trip checked by an independent implementation:
#   run_cli.sh ATTNBENCH PYTHON WORKDIR INIT_ARGS -- RUN_ARGS -- CHECK_ARGS
set -euo pipefail
bin=$1 py=$2 work=$3
shift 3
init=() run=() check=()
while [ $# -gt 0 ] && [ "$1" != -- ]; do init+=("$1"); shift; done; shift
while [ $# -gt 0 ] && [ "$1" != -- ]; do run+=("$1"); shift; done; shift
check=("$@")
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
rm -rf "$work"
"$bin" init "${init[@]}" --out "$work"
"$bin" run --weights "$work/weights" --input "$work/x.npy" "${run[@]}" --out "$work/y.npy"
"$py" "$here/numpy_layer.py" "$work/weights" "$work/x.npy" "$work/y.npy" "${check[@]}"
