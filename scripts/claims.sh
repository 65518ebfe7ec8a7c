#!/usr/bin/env bash
# The parameter and FLOP argument and the claims ledger: runs params, flops, toy, hull and claims
# with --out, then draws the plots and writes claims.md with the project's Python (.venv, made by setup.sh).
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

"$root/.venv/bin/python" "$root/experiments/plots/claims.py" "$out"
