#!/usr/bin/env bash
# Sets up, builds (release), and runs the main job: attnbench report --preset quick, which
# writes results/quick-<UTC date>/report.md with every plot (under 5 minutes on 2 cores).
# Extra arguments go to attnbench report (e.g. --preset full, --sweep FILE, --resume --out DIR).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=$(bash "$root/scripts/build.sh" release)
cd "$root"
if [ $# -eq 0 ]; then set -- --preset quick; fi
"$build/attnbench" report "$@"
