#!/usr/bin/env bash
# Sets up, builds (release), and runs every test through ctest (from the project's venv).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=$(bash "$root/scripts/build.sh" release)
cd "$build"
"$root/.venv/bin/ctest" --output-on-failure -j2 "$@"
