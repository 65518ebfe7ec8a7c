#!/usr/bin/env bash
# Sets up, builds (release), and runs the main job.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=$(bash "$root/scripts/build.sh" release)
cd "$root"
"$build/attnbench" list
run="$root/results/roundtrip"
"$build/attnbench" init --d-model 64 --heads 8 --kv-heads 2 --seq 16 --bias --out "$run"
"$build/attnbench" run --weights "$run/weights" --input "$run/x.npy" --heads 8 --kv-heads 2 --causal --out "$run/y.npy"
