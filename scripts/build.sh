#!/usr/bin/env bash
# Configures and builds one preset (default: release) after setup.sh; prints the build dir.
# CMake comes from the project's venv (.venv, made by setup.sh); builds are serialised with a
# lock: these machines have two cores, one build at a time.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
preset=${1:-release}
bash "$root/scripts/setup.sh" >&2
cd "$root"
flock /tmp/attnbench-build.lock .venv/bin/cmake --preset "$preset" >/dev/null
flock /tmp/attnbench-build.lock .venv/bin/cmake --build --preset "$preset" >&2
echo "$root/build/$preset"
