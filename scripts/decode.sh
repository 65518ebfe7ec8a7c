#!/usr/bin/env bash
# Incremental decoding with a key/value cache, MHA vs GQA vs MQA: the decode preset
# (experiments/sweeps/decode.toml; about 10 minutes on 2 cores) through attnbench report --
# the machine's ceilings, the decode check, every case timed by attnbench-bench, the figures and
# the section in results/decode-<UTC date>/report.md. Extra arguments go to attnbench report
# (e.g. --out DIR; --resume --out DIR finishes an interrupted run).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=$(bash "$root/scripts/build.sh" release)
cd "$root"
exec "$build/attnbench" report --preset decode "$@"
