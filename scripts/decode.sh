#!/usr/bin/env bash
# Reproduces issue 7's results: the machine's ceilings, the decode experiment (full grid by
# default, about 10 minutes on 2 cores; pass --quick for seconds) and its plots, under results/decode.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=$(bash "$root/scripts/build.sh" release)
out=$root/results/decode
mkdir -p "$out"
"$build/attnbench" peak --out "$out" >/dev/null
"$build/attnbench" decode --peak "$out/peak.json" --out "$out" "$@"

"$root/.venv/bin/python" "$root/experiments/plots/decode.py" "$out"
