#!/usr/bin/env bash
# Non-finite and out-of-domain values: a weight file holding NaN or Inf is refused like an input
# (one line naming the file, exit 2), and number flags refuse NaN, Inf and values outside their
# domain (CLI::Range alone lets NaN through).
# usage: non_finite.sh ATTNBENCH PYTHON WORKDIR
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh" # fail, refused
ab=$1 py=$2 work=$3
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 1
"$ab" init --d-model 8 --heads 2 --seq 3 --bias --out data >/dev/null || fail "init"
for f in q_proj_weight out_proj.bias; do
    cp -r data bad && "$py" - "bad/weights/$f.npy" <<'PY'
import sys, numpy as np
a = np.load(sys.argv[1]); a.flat[1] = np.nan; np.save(sys.argv[1], a)
PY
    refused 2 "$f.npy holds a non-finite value \(nan\) at flat index 1" \
        "$ab" run --weights bad/weights --input data/x.npy --heads 2 --out y.npy
    [ ! -e y.npy ] || fail "an output was written from NaN weights"
    rm -rf bad
done
refused 2 "--r-max: 'inf' must be a finite number" "$ab" hull --r-max inf
refused 2 "--eps: 'nan' must be a finite number" "$ab" hull --eps nan
refused 2 "--r-min: '-1' must be a finite number in \[1e-09, 1e\+06\]" "$ab" hull --r-min -1
refused 2 "--alpha: 'nan' must be a finite number in \[0, 1\]" "$ab" compare --alpha nan a.json b.json
refused 2 "--fma-seconds: 'nan' must be a finite number" "$ab" peak --fma-seconds nan
refused 2 "--triad-mib: 'inf' must be a finite number" "$ab" peak --triad-mib inf
echo "non-finite ok"
